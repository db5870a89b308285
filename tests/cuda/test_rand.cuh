/* test_rand.cuh — the CUDA kernel tests' deterministic random inputs (xorshift64, fixed seed:
 * every run draws the same numbers) and device allocation. Included by one test file each
 * (static definitions), as timing.cuh. */
#ifndef SI_TESTS_CUDA_TEST_RAND_CUH
#define SI_TESTS_CUDA_TEST_RAND_CUH
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32() {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float rnd_f() { return (float)((rnd_u32() & 0xFFFFFF) / 8388608.0 - 1.0); } /* [-1, 1) */
static int rnd_int(int n) { return (int)(rnd_u32() % (uint32_t)n); }

/* n elements of T on the device (at least one byte), not initialised */
template <class T> static T *dmalloc(size_t n) {
    T *p;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(T) > 0 ? n * sizeof(T) : 1));
    return p;
}
#endif
