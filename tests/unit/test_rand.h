/* test_rand.h — the unit tests' random inputs: xorshift64*, and roughly normal values with
 * occasional outliers. A test file defines TEST_RAND_SEED before including it, so that its
 * inputs are the same in every run. */
#ifndef SI_TESTS_UNIT_TEST_RAND_H
#define SI_TESTS_UNIT_TEST_RAND_H

#include <stdint.h>

#ifndef TEST_RAND_SEED
#error "define TEST_RAND_SEED before including test_rand.h"
#endif

static uint64_t rng_state = TEST_RAND_SEED;

static inline uint32_t rng_u32(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

/* uniform in [0, 1) */
static inline float rng_uniform(void) { return (float)(rng_u32() >> 8) * (1.0f / 16777216.0f); }

/* uniform in [-1, 1) */
static inline float rng_sym(void) { return (float)(rng_u32() >> 8) * (2.0f / 16777216.0f) - 1.0f; }

/* Roughly normal values (the sum of four uniforms) with occasional outliers (one in 64 six
 * times larger), as real weights and activations have; times scale. */
static inline void fill_random(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) {
        float v = rng_uniform() + rng_uniform() + rng_uniform() + rng_uniform() - 2.0f;
        if (rng_u32() % 64 == 0) v *= 6.0f;
        x[i] = v * scale;
    }
}

#endif
