/* kernels_avx512.c — the AVX-512 (F/BW/VL/DQ + VNNI, optional BF16) kernel table.
 *
 * The block kernels are kernels_x86.h's 256-bit ones (a 32-element block is exactly one ymm),
 * with the u8 x s8 multiply-add done by one VNNI vpdpbusd instead of vpmaddubsw + vpmaddwd: no
 * int16 intermediate, one instruction less per block. The float types use 512-bit registers:
 * F16 converts in registers with vcvtph2ps, BF16 uses vdpbf16ps (AVX512_BF16: a pair of bf16
 * products per lane, accumulated in f32; it treats denormal inputs as zero — bf16 activations and
 * weights of real models are far from that range) when the CPU has it. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

static inline __m256i mul_sum_us8(__m256i acc, __m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(acc, u, s);
}

#include "backend/cpu/kernels_x86.h"

static float vec_dot_f32_avx512(const void *vw, const void *vx, int64_t n) {
    const float *a = vw, *b = vx;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16 * k), _mm512_loadu_ps(b + i + 16 * k), acc[k]);
    for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc[0]);
    if (i < n) { /* masked tail */
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        acc[1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc[1]);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

static inline __m512 load_f16_512(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static float vec_dot_f16_avx512(const void *vw, const void *vx, int64_t n) {
    const uint16_t *a = vw, *b = vx;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm512_fmadd_ps(load_f16_512(a + i + 16 * k), load_f16_512(b + i + 16 * k), acc[k]);
    for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(load_f16_512(a + i), load_f16_512(b + i), acc[0]);
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 va = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i));
        const __m512 vb = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, b + i));
        acc[1] = _mm512_fmadd_ps(va, vb, acc[1]);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

static float vec_dot_bf16_avx512(const void *vw, const void *vx, int64_t n) {
    const uint16_t *a = vw, *b = vx;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 128 <= n; i += 128)
        for (int k = 0; k < 4; k++) {
            const __m512i va = _mm512_loadu_si512(a + i + 32 * k), vb = _mm512_loadu_si512(b + i + 32 * k);
            acc[k] = _mm512_dpbf16_ps(acc[k], (__m512bh)va, (__m512bh)vb);
        }
    for (; i < n; i += 32) { /* masked: zero lanes add nothing */
        const __mmask32 m = n - i >= 32 ? 0xffffffffu : (__mmask32)((1u << (n - i)) - 1);
        const __m512i va = _mm512_maskz_loadu_epi16(m, a + i), vb = _mm512_maskz_loadu_epi16(m, b + i);
        acc[0] = _mm512_dpbf16_ps(acc[0], (__m512bh)va, (__m512bh)vb);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

const cpu_kernels *cpu_kernels_avx512_entry(si_type t, int has_bf16);

const cpu_kernels *cpu_kernels_avx512_entry(si_type t, int has_bf16) {
    static const cpu_kernels k_f32 = {SI_TYPE_F32, quantize_row_f32_x86, vec_dot_f32_avx512};
    static const cpu_kernels k_f16 = {SI_TYPE_F16, quantize_row_f16_x86, vec_dot_f16_avx512};
    static const cpu_kernels k_bf16 = {SI_TYPE_BF16, quantize_row_bf16_x86, vec_dot_bf16_avx512};
    switch (t) {
    case SI_TYPE_F32: return &k_f32;
    case SI_TYPE_F16: return &k_f16;
    case SI_TYPE_BF16: return has_bf16 ? &k_bf16 : NULL;
    default: return kernels_x86_entry(t);
    }
}
#else
typedef int kernels_avx512_unused;
#endif
