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

#define KX86_MAX_ROWS 8 /* AVX-512VL: 32 ymm / zmm registers */
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

/* ---- q4_0 / q4_1: two 32-element blocks per zmm ----
 * 128-bit lanes: [block i low nibbles, block i high, block i+1 low, block i+1 high], matching
 * two consecutive q8 blocks loaded side by side. Nibbles go into vpdpbusd unsigned; for q4_0
 * the -8 offset is a second vpdpbusd of 8 against the activations (AVX-512 has no vpsignb). */

static inline __m512i q4_pair_nibbles(const uint8_t *qa, const uint8_t *qb) {
    const __m256i t = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)qb), _mm_loadu_si128((const __m128i *)qa));
    const __m512i t2 = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(t));
    const __m512i v = _mm512_mask_blend_epi64(0xCC, t2, _mm512_srli_epi16(t2, 4));
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}

static inline __m512i load_pair(const int8_t *a, const int8_t *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load256(a)), load256(b), 1);
}

/* even lanes of p (block scales d_w * d_x) spread to [p0 x 8, p2 x 8] and [p4 x 8, p6 x 8] */
static inline void spread_scales4(__m256 p, __m512 *d01, __m512 *d23) {
    const __m512 z = _mm512_castps256_ps512(p);
    *d01 = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2), z);
    *d23 = _mm512_permutexvar_ps(_mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6), z);
}

/* integer sums of blocks a and a + 1 (int32 lanes 0-7 and 8-15) for the q5 pairs below */

/* q5_0 / q5_1: as q4 pairs; the 64 high bits of two blocks are exactly a byte mask in the same
 * lane order (qh bit j <-> element j), so one masked move adds the 0x10s. */
static inline __m512i q5_pair_bytes(const uint8_t *qsa, const uint8_t *qha, const uint8_t *qsb, const uint8_t *qhb) {
    const __mmask64 hm = (__mmask64)load_u32(qha) | (__mmask64)load_u32(qhb) << 32;
    return _mm512_or_si512(q4_pair_nibbles(qsa, qsb), _mm512_maskz_mov_epi8(hm, _mm512_set1_epi8(0x10)));
}

static inline __m512i q5_0_pair_isum(const block_q5_0 *w, const block_q8_0 *x) {
    const __m512i y = load_pair(x[0].qs, x[1].qs);
    const __m512i q = q5_pair_bytes(w[0].qs, w[0].qh, w[1].qs, w[1].qh);
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, y),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(16), y));
}

static inline __m512i q5_1_pair_isum(const block_q5_1 *w, const block_q8_1 *x) {
    const __m512i y = load_pair(x[0].qs, x[1].qs);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q5_pair_bytes(w[0].qs, w[0].qh, w[1].qs, w[1].qh), y);
}

static float vec_dot_q5_0_avx512(const void *vw, const void *vx, int64_t n) {
    const block_q5_0 *w = vw;
    const block_q8_0 *x = vx;
    const int64_t nb = n / QK5_0;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const __m256 p = _mm256_mul_ps(head_halves4(&w[i], sizeof(*w)), head_halves4(&x[i], sizeof(*x)));
        __m512 d01, d23;
        spread_scales4(p, &d01, &d23);
        acc0 = _mm512_fmadd_ps(d01, _mm512_cvtepi32_ps(q5_0_pair_isum(&w[i], &x[i])), acc0);
        acc1 = _mm512_fmadd_ps(d23, _mm512_cvtepi32_ps(q5_0_pair_isum(&w[i + 2], &x[i + 2])), acc1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    if (i < nb) sum += vec_dot_q5_0_x86(&w[i], &x[i], (nb - i) * QK5_0);
    return sum;
}

static float vec_dot_q5_1_avx512(const void *vw, const void *vx, int64_t n) {
    const block_q5_1 *w = vw;
    const block_q8_1 *x = vx;
    const int64_t nb = n / QK5_1;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const __m256 p = _mm256_mul_ps(head_halves4(&w[i], sizeof(*w)), head_halves4(&x[i], sizeof(*x)));
        accm = _mm256_add_ps(accm, p);
        __m512 d01, d23;
        spread_scales4(p, &d01, &d23);
        acc0 = _mm512_fmadd_ps(d01, _mm512_cvtepi32_ps(q5_1_pair_isum(&w[i], &x[i])), acc0);
        acc1 = _mm512_fmadd_ps(d23, _mm512_cvtepi32_ps(q5_1_pair_isum(&w[i + 2], &x[i + 2])), acc1);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + sum_odd(accm);
    if (i < nb) sum += vec_dot_q5_1_x86(&w[i], &x[i], (nb - i) * QK5_1);
    return sum;
}


/* ---- multi-row dots (see kernels_x86.h): two blocks per zmm, as above ----
 * Per pair of weight blocks the nibbles / |w| and sign mask and the fp16 heads are decoded once;
 * per activation row what remains is its own head conversion, one or two vpdpbusd and one FMA.
 * Pairs (not groups of four) keep 576-column rows (18 blocks) free of a single-row tail. */

/* the leading fp16 pairs of two blocks -> [d0, m0, d1, m1] (m: whatever follows d) */
static inline __m128 head_halves2(const void *base, size_t stride) {
    const uint8_t *p = base;
    return _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)load_u32(p)), (int)load_u32(p + stride), 1));
}

/* lanes 0 and 2 of p -> [p0 x 8, p2 x 8] */
static inline __m512 spread_pair(__m128 p) {
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2), _mm512_castps128_ps512(p));
}

/* lane 1 + lane 3 */
static inline float sum_odd128(__m128 v) {
    const __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_movehdup_ps(s));
}

KX86_ALWAYS_INLINE void q4_1_rows_avx512(const void *vw, const uint8_t *x, size_t xs, const int R, int64_t n,
                                         float *out, size_t os) {
    const block_q4_1 *w = vw;
    const int64_t nb = n / QK4_1;
    __m512 acc[8];
    __m128 accm[8];
    for (int r = 0; r < R; r++) {
        acc[r] = _mm512_setzero_ps();
        accm[r] = _mm_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i q = q4_pair_nibbles(w[i].qs, w[i + 1].qs);
        const __m128 hw = head_halves2(&w[i], sizeof(*w));
        for (int r = 0; r < R; r++) {
            const block_q8_1 *y = (const block_q8_1 *)(x + (size_t)r * xs) + i;
            const __m128 p = _mm_mul_ps(hw, head_halves2(y, sizeof(*y)));
            accm[r] = _mm_add_ps(accm[r], p);
            const __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, load_pair(y[0].qs, y[1].qs));
            acc[r] = _mm512_fmadd_ps(spread_pair(p), _mm512_cvtepi32_ps(isum), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        const block_q8_1 *y = (const block_q8_1 *)(x + (size_t)r * xs);
        float s = _mm512_reduce_add_ps(acc[r]) + sum_odd128(accm[r]);
        if (i < nb) s += vec_dot_q4_1_x86(&w[i], &y[i], (nb - i) * QK4_1);
        out[(size_t)r * os] = s;
    }
}

KX86_ALWAYS_INLINE void q4_0_rows_avx512(const void *vw, const uint8_t *x, size_t xs, const int R, int64_t n,
                                         float *out, size_t os) {
    const block_q4_0 *w = vw;
    const int64_t nb = n / QK4_0;
    const __m512i eight = _mm512_set1_epi8(8);
    __m512 acc[8];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i q = q4_pair_nibbles(w[i].qs, w[i + 1].qs);
        const __m128 hw = head_halves2(&w[i], sizeof(*w));
        for (int r = 0; r < R; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(x + (size_t)r * xs) + i;
            const __m128 p = _mm_mul_ps(hw, head_halves2(y, sizeof(*y)));
            const __m512i yv = load_pair(y[0].qs, y[1].qs);
            const __m512i isum = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, yv),
                                                  _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, yv));
            acc[r] = _mm512_fmadd_ps(spread_pair(p), _mm512_cvtepi32_ps(isum), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        const block_q8_0 *y = (const block_q8_0 *)(x + (size_t)r * xs);
        float s = _mm512_reduce_add_ps(acc[r]);
        if (i < nb) s += vec_dot_q4_0_x86(&w[i], &y[i], (nb - i) * QK4_0);
        out[(size_t)r * os] = s;
    }
}

KX86_ALWAYS_INLINE void q8_0_rows_avx512(const void *vw, const uint8_t *x, size_t xs, const int R, int64_t n,
                                         float *out, size_t os) {
    const block_q8_0 *w = vw;
    const int64_t nb = n / QK8_0;
    __m512 acc[8];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i a = load_pair(w[i].qs, w[i + 1].qs);
        const __m512i aa = _mm512_abs_epi8(a);
        const __mmask64 neg = _mm512_movepi8_mask(a);
        const __m128 hw = head_halves2(&w[i], sizeof(*w));
        for (int r = 0; r < R; r++) {
            const block_q8_0 *y = (const block_q8_0 *)(x + (size_t)r * xs) + i;
            const __m128 p = _mm_mul_ps(hw, head_halves2(y, sizeof(*y)));
            const __m512i yv = load_pair(y[0].qs, y[1].qs);
            const __m512i sy = _mm512_mask_sub_epi8(yv, neg, _mm512_setzero_si512(), yv);
            acc[r] = _mm512_fmadd_ps(spread_pair(p), _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), aa, sy)), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        const block_q8_0 *y = (const block_q8_0 *)(x + (size_t)r * xs);
        float s = _mm512_reduce_add_ps(acc[r]);
        if (i < nb) s += vec_dot_q8_0_x86(&w[i], &y[i], (nb - i) * QK8_0);
        out[(size_t)r * os] = s;
    }
}


static void vec_dot_rows_q4_1_avx512(const void *w, const void *x, size_t xs, int n_rows, int64_t n, float *out, size_t os) {
    KX86_ROWS(q4_1_rows_avx512, w, x, xs, n_rows, n, out, os);
}

static void vec_dot_rows_q4_0_avx512(const void *w, const void *x, size_t xs, int n_rows, int64_t n, float *out, size_t os) {
    KX86_ROWS(q4_0_rows_avx512, w, x, xs, n_rows, n, out, os);
}

static void vec_dot_rows_q8_0_avx512(const void *w, const void *x, size_t xs, int n_rows, int64_t n, float *out, size_t os) {
    KX86_ROWS(q8_0_rows_avx512, w, x, xs, n_rows, n, out, os);
}

/* NOTE: the single-row dots of the types with a multi-row kernel are that kernel with one row,
 * so a row's result is bit-identical whether it is computed alone or with up to 7 others: a
 * sequence's logits never depend on what else is in the batch (batch invariance, which the
 * engine's "alone = batched" exactness rests on). */
#define KX86_SINGLE_VIA_ROWS(t)                                                                   \
    static float vec_dot_##t##_rows1_avx512(const void *w, const void *x, int64_t n) {            \
        float out;                                                                                \
        vec_dot_rows_##t##_avx512(w, x, 0, 1, n, &out, 1);                                        \
        return out;                                                                               \
    }
KX86_SINGLE_VIA_ROWS(q4_0)
KX86_SINGLE_VIA_ROWS(q4_1)
KX86_SINGLE_VIA_ROWS(q8_0)

const cpu_kernels *cpu_kernels_avx512_entry(si_type t, int has_bf16);

const cpu_kernels *cpu_kernels_avx512_entry(si_type t, int has_bf16) {
    static const cpu_kernels k_f32 = {SI_TYPE_F32, quantize_row_f32_x86, vec_dot_f32_avx512, NULL};
    static const cpu_kernels k_f16 = {SI_TYPE_F16, quantize_row_f16_x86, vec_dot_f16_avx512, NULL};
    static const cpu_kernels k_bf16 = {SI_TYPE_BF16, quantize_row_bf16_x86, vec_dot_bf16_avx512, NULL};
    static const cpu_kernels k_q4_0 = {SI_TYPE_Q8_0, quantize_row_q8_0_x86, vec_dot_q4_0_rows1_avx512, vec_dot_rows_q4_0_avx512};
    static const cpu_kernels k_q4_1 = {SI_TYPE_Q8_1, quantize_row_q8_1_x86, vec_dot_q4_1_rows1_avx512, vec_dot_rows_q4_1_avx512};
    static const cpu_kernels k_q5_0 = {SI_TYPE_Q8_0, quantize_row_q8_0_x86, vec_dot_q5_0_avx512, NULL};
    static const cpu_kernels k_q5_1 = {SI_TYPE_Q8_1, quantize_row_q8_1_x86, vec_dot_q5_1_avx512, NULL};
    static const cpu_kernels k_q8_0 = {SI_TYPE_Q8_0, quantize_row_q8_0_x86, vec_dot_q8_0_rows1_avx512, vec_dot_rows_q8_0_avx512};
    switch (t) {
    case SI_TYPE_Q4_0: return &k_q4_0;
    case SI_TYPE_Q5_0: return &k_q5_0;
    case SI_TYPE_Q5_1: return &k_q5_1;
    case SI_TYPE_Q8_0: return &k_q8_0;
    case SI_TYPE_Q4_1: return &k_q4_1;
    case SI_TYPE_F32: return &k_f32;
    case SI_TYPE_F16: return &k_f16;
    case SI_TYPE_BF16: return has_bf16 ? &k_bf16 : NULL;
    default: return kernels_x86_entry(t);
    }
}
#else
typedef int kernels_avx512_unused;
#endif
