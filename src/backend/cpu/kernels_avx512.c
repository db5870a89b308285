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


/* ---- single-row dots of q4_0 / q4_1 / q8_0: two blocks per zmm ----
 * Per pair of blocks: the integer sums of the 8 groups of four products of each block (int32
 * lanes 0-7 and 8-15), converted to float and multiplied-added with the block scales d_w * d_x
 * into one accumulator; one reduction at the end; an odd last block through the 256-bit kernel.
 * The multi-row kernels below (gemm) do exactly this arithmetic for every (weight row,
 * activation row), so their results are bit-identical to these. Pairs (not groups of four) keep
 * 576-column rows (18 blocks) free of a single-block tail. */

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

static float vec_dot_q4_0_avx512(const void *vw, const void *vx, int64_t n) {
    const block_q4_0 *w = vw;
    const block_q8_0 *y = vx;
    const int64_t nb = n / QK4_0;
    const __m512i eight = _mm512_set1_epi8(8);
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i q = q4_pair_nibbles(w[i].qs, w[i + 1].qs);
        const __m128 p = _mm_mul_ps(head_halves2(&w[i], sizeof(*w)), head_halves2(&y[i], sizeof(*y)));
        const __m512i yv = load_pair(y[i].qs, y[i + 1].qs);
        const __m512i isum = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, yv),
                                              _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, yv));
        acc = _mm512_fmadd_ps(spread_pair(p), _mm512_cvtepi32_ps(isum), acc);
    }
    float s = _mm512_reduce_add_ps(acc);
    if (i < nb) s += vec_dot_q4_0_x86(&w[i], &y[i], (nb - i) * QK4_0);
    return s;
}

static float vec_dot_q8_0_avx512(const void *vw, const void *vx, int64_t n) {
    const block_q8_0 *w = vw;
    const block_q8_0 *y = vx;
    const int64_t nb = n / QK8_0;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i a = load_pair(w[i].qs, w[i + 1].qs);
        const __mmask64 neg = _mm512_movepi8_mask(a);
        const __m128 p = _mm_mul_ps(head_halves2(&w[i], sizeof(*w)), head_halves2(&y[i], sizeof(*y)));
        const __m512i yv = load_pair(y[i].qs, y[i + 1].qs);
        const __m512i sy = _mm512_mask_sub_epi8(yv, neg, _mm512_setzero_si512(), yv);
        const __m512i isum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(a), sy);
        acc = _mm512_fmadd_ps(spread_pair(p), _mm512_cvtepi32_ps(isum), acc);
    }
    float s = _mm512_reduce_add_ps(acc);
    if (i < nb) s += vec_dot_q8_0_x86(&w[i], &y[i], (nb - i) * QK8_0);
    return s;
}

/* q4_1 keeps its multi-row form (one weight row x up to 8 activation rows of q8_1): the m * s
 * terms accumulate per row in their own 4-lane register. */
KX86_ALWAYS_INLINE void q4_1_rows_avx512(const void *vw, const uint8_t *x, size_t xs, int64_t n, float *out,
                                         size_t os, const int R) {
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

static float vec_dot_q4_1_avx512(const void *w, const void *x, int64_t n) {
    float out;
    q4_1_rows_avx512(w, x, 0, n, &out, 1, 1);
    return out;
}

static void gemm_q4_1_avx512(const void *w, size_t ws, int n_w, const void *x, size_t xs, int n_x, int64_t n,
                             float *out, size_t os) {
    for (int r0 = 0; r0 < n_x; r0 += 8) {
        const uint8_t *xr = (const uint8_t *)x + (size_t)r0 * xs;
        for (int o = 0; o < n_w; o++)
            KX86_SWITCH_R(n_x - r0, q4_1_rows_avx512, (const uint8_t *)w + (size_t)o * ws, xr, xs, n,
                          out + (size_t)r0 * os + o, os);
    }
}

/* ---- q4_0 / q8_0 matrix products ----
 * The activation side of the single-row kernels' pair step (the pair of q8_0 blocks side by
 * side, their scales spread over the lanes, the q4_0 offset's products) depends on the
 * activation row only, so prep_row does it once per row into q8_pair records; the weight side
 * (nibbles or bytes, scales) is decoded once per pair for GEMM_R activation rows. What remains
 * per (weight row, activation row, pair) is one vpdpbusd, one conversion, one multiply of the
 * two spread scales and one FMA — the single-row kernels' operations on the same values:
 *  - q4_0: dpbusd(c, q, y) with c = -dpbusd(0, 8, y) is the same exact int32 per lane as
 *    dpbusd(0, q, y) - dpbusd(0, 8, y);
 *  - q8_0: weights as unsigned w + 128 (w ^ 0x80) and c = -dpbusd(0, 128, y): the same exact
 *    int32 per lane as the sign trick's dpbusd(0, |w|, y * sign(w));
 *  - spread(d_w) * spread(d_x) is spread(d_w * d_x) lane by lane.
 * An odd last block goes through the same 256-bit kernel as the single-row path, from a
 * block_q8_0 rebuilt from its record (the fp16 scale round-trips exactly through float). */

typedef struct {
    int8_t y[64];   /* quants of blocks 2i and 2i + 1 (zero when 2i + 1 is past the row) */
    float d[16];    /* their scales, [d0 x 8, d1 x 8] */
    int32_t c[16];  /* -offset x each group of four y (offset 8 for q4_0, 128 for q8_0) */
} q8_pair;
_Static_assert(sizeof(q8_pair) == 192, "q8_pair is three zmm");

static size_t prep_size_q8_pairs(int64_t n) { return (size_t)((n / QK8_0 + 1) / 2) * sizeof(q8_pair); }

static inline void prep_q8_pairs(const void *vx, void *vxp, int64_t n, int offset) {
    const block_q8_0 *x = vx;
    q8_pair *p = vxp;
    const int64_t nb = n / QK8_0;
    const __m512i off = _mm512_set1_epi8((char)offset);
    for (int64_t b = 0; b < nb; b += 2, p++) {
        const int two = b + 1 < nb;
        const __m512i y = two ? load_pair(x[b].qs, x[b + 1].qs) : _mm512_zextsi256_si512(load256(x[b].qs));
        const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(h2f(x[b].d)), _mm256_set1_ps(two ? h2f(x[b + 1].d) : 0.0f), 1);
        _mm512_storeu_si512(p->y, y);
        _mm512_storeu_ps(p->d, d);
        _mm512_storeu_si512(p->c, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, y)));
    }
}

static void prep_row_q4_0(const void *x, void *xp, int64_t n) { prep_q8_pairs(x, xp, n, 8); }
static void prep_row_q8_0(const void *x, void *xp, int64_t n) { prep_q8_pairs(x, xp, n, 128); }

/* the pair starting at block b of one weight row: unsigned bytes and spread scales */
KX86_ALWAYS_INLINE void weight_pair(const int is_q8, const uint8_t *row, int64_t b, __m512i *q, __m512 *d) {
    if (is_q8) {
        const block_q8_0 *w = (const block_q8_0 *)row + b;
        *q = _mm512_xor_si512(load_pair(w[0].qs, w[1].qs), _mm512_set1_epi8((char)0x80));
        *d = spread_pair(head_halves2(w, sizeof(*w)));
    } else {
        const block_q4_0 *w = (const block_q4_0 *)row + b;
        *q = q4_pair_nibbles(w[0].qs, w[1].qs);
        *d = spread_pair(head_halves2(w, sizeof(*w)));
    }
}

/* the odd last block (index b) of one weight row against its record */
KX86_ALWAYS_INLINE float weight_tail(const int is_q8, const uint8_t *row, int64_t b, const q8_pair *p) {
    block_q8_0 y;
    y.d = (uint16_t)_cvtss_sh(p->d[0], _MM_FROUND_TO_NEAREST_INT);
    memcpy(y.qs, p->y, QK8_0);
    return is_q8 ? vec_dot_q8_0_x86((const block_q8_0 *)row + b, &y, QK8_0)
                 : vec_dot_q4_0_x86((const block_q4_0 *)row + b, &y, QK4_0);
}

#define GEMM_W 2 /* weight rows per tile */
#define GEMM_R 8 /* activation rows per tile: GEMM_W x GEMM_R accumulators + the pair's operands */

/* W weight rows (ws bytes apart) x R prepared activation rows (xs bytes apart) */
KX86_ALWAYS_INLINE void q8act_tile(const int is_q8, const uint8_t *w, size_t ws, const int W, const uint8_t *xp,
                                   size_t xs, int64_t nb, float *out, size_t os, const int R) {
    __m512 acc[GEMM_W][GEMM_R];
    for (int o = 0; o < W; o++)
        for (int r = 0; r < R; r++) acc[o][r] = _mm512_setzero_ps();
    const int64_t np = nb / 2;
    for (int64_t i = 0; i < np; i++) {
        __m512i q[GEMM_W];
        __m512 dw[GEMM_W];
        for (int o = 0; o < W; o++) weight_pair(is_q8, w + (size_t)o * ws, 2 * i, &q[o], &dw[o]);
        for (int r = 0; r < R; r++) {
            const q8_pair *p = (const q8_pair *)(xp + (size_t)r * xs) + i;
            const __m512i y = _mm512_loadu_si512(p->y), c = _mm512_loadu_si512(p->c);
            const __m512 dx = _mm512_loadu_ps(p->d);
            for (int o = 0; o < W; o++)
                acc[o][r] = _mm512_fmadd_ps(_mm512_mul_ps(dw[o], dx), _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(c, q[o], y)),
                                            acc[o][r]);
        }
    }
    for (int o = 0; o < W; o++)
        for (int r = 0; r < R; r++) {
            float s = _mm512_reduce_add_ps(acc[o][r]);
            if (nb & 1) s += weight_tail(is_q8, w + (size_t)o * ws, nb - 1, (const q8_pair *)(xp + (size_t)r * xs) + np);
            out[(size_t)r * os + (size_t)o] = s;
        }
}

KX86_ALWAYS_INLINE void q8act_gemm(const int is_q8, const void *w, size_t ws, int n_w, const void *xp, size_t xs,
                                   int n_x, int64_t n, float *out, size_t os) {
    const int64_t nb = n / QK8_0;
    for (int r0 = 0; r0 < n_x; r0 += GEMM_R) {
        const uint8_t *x = (const uint8_t *)xp + (size_t)r0 * xs;
        float *o0 = out + (size_t)r0 * os;
        int o = 0;
        for (; o + GEMM_W <= n_w; o += GEMM_W)
            KX86_SWITCH_R(n_x - r0, q8act_tile, is_q8, (const uint8_t *)w + (size_t)o * ws, ws, GEMM_W, x, xs, nb,
                          o0 + o, os);
        for (; o < n_w; o++)
            KX86_SWITCH_R(n_x - r0, q8act_tile, is_q8, (const uint8_t *)w + (size_t)o * ws, ws, 1, x, xs, nb, o0 + o,
                          os);
    }
}

static void gemm_q4_0_avx512(const void *w, size_t ws, int n_w, const void *xp, size_t xs, int n_x, int64_t n,
                             float *out, size_t os) {
    q8act_gemm(0, w, ws, n_w, xp, xs, n_x, n, out, os);
}

static void gemm_q8_0_avx512(const void *w, size_t ws, int n_w, const void *xp, size_t xs, int n_x, int64_t n,
                             float *out, size_t os) {
    q8act_gemm(1, w, ws, n_w, xp, xs, n_x, n, out, os);
}

/* ---- f16 matrix product ----
 * The activation rows are converted to f32 once (prep_row); each 16-element weight vector is
 * converted once for F16_GEMM_R rows. Per (weight row, activation row) the four accumulators
 * receive exactly vec_dot_f16_avx512's FMAs in its order (64-element steps, 16-element steps
 * into acc[0], the masked tail into acc[1]) and are reduced as it reduces them. */

#define F16_GEMM_R 6 /* 4 x 6 accumulators; f16_rows is only called with R <= 6 */

static size_t prep_size_f16(int64_t n) { return ((size_t)n * sizeof(float) + 63) / 64 * 64; }

static void prep_row_f16(const void *vx, void *vxp, int64_t n) {
    const uint16_t *x = vx;
    float *y = vxp;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, load_f16_512(x + i));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
    }
}

KX86_ALWAYS_INLINE void f16_rows(const uint16_t *a, const uint8_t *xp, size_t xs, int64_t n, float *out, size_t os,
                                 const int R) {
    __m512 acc[8][4]; /* KX86_SWITCH_R also instantiates R = 7 and 8 (never called) */
    for (int r = 0; r < R; r++)
        for (int k = 0; k < 4; k++) acc[r][k] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; k++) {
            const __m512 wv = load_f16_512(a + i + 16 * k);
            for (int r = 0; r < R; r++)
                acc[r][k] = _mm512_fmadd_ps(wv, _mm512_loadu_ps((const float *)(xp + (size_t)r * xs) + i + 16 * k), acc[r][k]);
        }
    for (; i + 16 <= n; i += 16) {
        const __m512 wv = load_f16_512(a + i);
        for (int r = 0; r < R; r++)
            acc[r][0] = _mm512_fmadd_ps(wv, _mm512_loadu_ps((const float *)(xp + (size_t)r * xs) + i), acc[r][0]);
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i));
        for (int r = 0; r < R; r++)
            acc[r][1] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, (const float *)(xp + (size_t)r * xs) + i), acc[r][1]);
    }
    for (int r = 0; r < R; r++)
        out[(size_t)r * os] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]),
                                                                 _mm512_add_ps(acc[r][2], acc[r][3])));
}

static void gemm_f16_avx512(const void *w, size_t ws, int n_w, const void *xp, size_t xs, int n_x, int64_t n,
                            float *out, size_t os) {
    for (int r0 = 0; r0 < n_x; r0 += F16_GEMM_R) {
        const uint8_t *x = (const uint8_t *)xp + (size_t)r0 * xs;
        const int left = n_x - r0 < F16_GEMM_R ? n_x - r0 : F16_GEMM_R;
        for (int o = 0; o < n_w; o++)
            KX86_SWITCH_R(left, f16_rows, (const uint16_t *)((const uint8_t *)w + (size_t)o * ws), x, xs, n,
                          out + (size_t)r0 * os + o, os);
    }
}

const cpu_kernels *cpu_kernels_avx512_entry(si_type t, int has_bf16);

const cpu_kernels *cpu_kernels_avx512_entry(si_type t, int has_bf16) {
    static const cpu_kernels k_f32 = {.vec_dot_type = SI_TYPE_F32, .quantize_row = quantize_row_f32_x86, .vec_dot = vec_dot_f32_avx512};
    static const cpu_kernels k_f16 = {.vec_dot_type = SI_TYPE_F16, .quantize_row = quantize_row_f16_x86, .vec_dot = vec_dot_f16_avx512,
                                      .gemm = gemm_f16_avx512, .prep_row = prep_row_f16, .prep_size = prep_size_f16};
    static const cpu_kernels k_bf16 = {.vec_dot_type = SI_TYPE_BF16, .quantize_row = quantize_row_bf16_x86, .vec_dot = vec_dot_bf16_avx512};
    static const cpu_kernels k_q4_0 = {.vec_dot_type = SI_TYPE_Q8_0, .quantize_row = quantize_row_q8_0_x86, .vec_dot = vec_dot_q4_0_avx512,
                                       .gemm = gemm_q4_0_avx512, .prep_row = prep_row_q4_0, .prep_size = prep_size_q8_pairs};
    static const cpu_kernels k_q4_1 = {.vec_dot_type = SI_TYPE_Q8_1, .quantize_row = quantize_row_q8_1_x86, .vec_dot = vec_dot_q4_1_avx512,
                                       .gemm = gemm_q4_1_avx512};
    static const cpu_kernels k_q5_0 = {.vec_dot_type = SI_TYPE_Q8_0, .quantize_row = quantize_row_q8_0_x86, .vec_dot = vec_dot_q5_0_avx512};
    static const cpu_kernels k_q5_1 = {.vec_dot_type = SI_TYPE_Q8_1, .quantize_row = quantize_row_q8_1_x86, .vec_dot = vec_dot_q5_1_avx512};
    static const cpu_kernels k_q8_0 = {.vec_dot_type = SI_TYPE_Q8_0, .quantize_row = quantize_row_q8_0_x86, .vec_dot = vec_dot_q8_0_avx512,
                                       .gemm = gemm_q8_0_avx512, .prep_row = prep_row_q8_0, .prep_size = prep_size_q8_pairs};
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
