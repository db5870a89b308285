/* kernels_avx2.c — the AVX2 + FMA + F16C kernel table (compiled with those target flags only,
 * reached only after cpu_kernels.c has seen them in CPUID).
 *
 * The kernels themselves are the 256-bit ones of kernels_x86.h; this file supplies their u8 x s8
 * multiply-add: vpmaddubsw (pairs of products into int16) then vpmaddwd against ones (pairs of
 * int16 into int32). The int16 step saturates only beyond 2 * 255 * 127, which no caller reaches
 * (the sign trick keeps activations within +-127 and weights within 0..128). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

static inline __m256i mul_sum_us8(__m256i acc, __m256i u, __m256i s) {
    const __m256i p16 = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

#include "backend/cpu/kernels_x86.h"

const cpu_kernels *cpu_kernels_avx2_entry(si_type t);

const cpu_kernels *cpu_kernels_avx2_entry(si_type t) { return kernels_x86_entry(t); }
#else
/* ISO C forbids an empty translation unit */
typedef int kernels_avx2_unused;
#endif
