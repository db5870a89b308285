/* kernels_avx512.c — the AVX-512 (F/BW/VL/DQ + VNNI, optional BF16) kernel table.
 *
 * The block kernels are kernels_x86.h's 256-bit ones (a 32-element block is exactly one ymm),
 * with the u8 x s8 multiply-add done by one VNNI vpdpbusd instead of vpmaddubsw + vpmaddwd: no
 * int16 intermediate, one instruction less per block. The float types use 512-bit registers:
 * F16 converts in registers with vcvtph2ps, BF16 uses vdpbf16ps (AVX512_BF16: a pair of bf16
 * products per lane, accumulated in f32; it treats denormal inputs as zero — bf16 activations and
 * weights of real models are far from that range) when the CPU has it.
 *
 * Matrix kernels (cpu_kernels.h's gemm) for q4_0, q8_0, iq4_nl, q4_1, q4_K, q5_K, q6_K, iq4_xs,
 * f16: each decodes a weight block once for many activation rows and gives, element by element,
 * exactly vec_dot's result (the same integer sums and the same float operations in the same order).
 * q4_0 and q8_0 use one float lane per block (below) in vec_dot as well, so that gemm can keep 16
 * activation rows in registers with one accumulator each. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <stdalign.h>

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

/* the integer sums of blocks a, a + 1 of x against their decoded quants q (q5_pair_bytes) */
static inline __m512i q5_0_pair_isum(__m512i q, const block_q8_0 *x) {
    const __m512i y = load_pair(x[0].qs, x[1].qs);
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, y),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(16), y));
}

static inline __m512i q5_1_pair_isum(__m512i q, const block_q8_1 *x) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, load_pair(x[0].qs, x[1].qs));
}

/* q5_0 / q5_1 against R activation rows (xs bytes apart; R = 1: the single-row kernel): groups
 * of 4 blocks, their quants and scales decoded once for all rows; per row the products go into
 * two accumulators of 16 lanes (blocks 0-1, 2-3 of each group; q5_1's min products into a third),
 * the last nb % 4 blocks through the 256-bit single-row kernel. */
KX86_ALWAYS_INLINE void q5_rows(const uint8_t *w, const int one, const uint8_t *x, size_t xs,
                                int64_t nb, float *out, size_t os, const int R) {
    const size_t wb = one ? sizeof(block_q5_1) : sizeof(block_q5_0);
    const size_t yb = one ? sizeof(block_q8_1) : sizeof(block_q8_0);
    __m512 acc0[8], acc1[8];
    __m256 accm[8];
    for (int r = 0; r < R; r++) {
        acc0[r] = acc1[r] = _mm512_setzero_ps();
        accm[r] = _mm256_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        const uint8_t *b = w + (size_t)i * wb;
        prefetch_ahead(b, 4 * wb);
        const __m256 wh = head_halves4(b, wb);
        __m512i q[2];
        for (int k = 0; k < 2; k++) {
            if (one) {
                const block_q5_1 *v = (const block_q5_1 *)b + 2 * k;
                q[k] = q5_pair_bytes(v[0].qs, v[0].qh, v[1].qs, v[1].qh);
            } else {
                const block_q5_0 *v = (const block_q5_0 *)b + 2 * k;
                q[k] = q5_pair_bytes(v[0].qs, v[0].qh, v[1].qs, v[1].qh);
            }
        }
        for (int r = 0; r < R; r++) {
            const uint8_t *y = x + (size_t)r * xs + (size_t)i * yb;
            const __m256 p = _mm256_mul_ps(wh, head_halves4(y, yb));
            if (one) accm[r] = _mm256_add_ps(accm[r], p);
            __m512 d01, d23;
            spread_scales4(p, &d01, &d23);
            const __m512i s01 = one ? q5_1_pair_isum(q[0], (const block_q8_1 *)y)
                                    : q5_0_pair_isum(q[0], (const block_q8_0 *)y);
            const __m512i s23 = one ? q5_1_pair_isum(q[1], (const block_q8_1 *)y + 2)
                                    : q5_0_pair_isum(q[1], (const block_q8_0 *)y + 2);
            acc0[r] = _mm512_fmadd_ps(d01, _mm512_cvtepi32_ps(s01), acc0[r]);
            acc1[r] = _mm512_fmadd_ps(d23, _mm512_cvtepi32_ps(s23), acc1[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        const uint8_t *y = x + (size_t)r * xs + (size_t)i * yb;
        float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
        if (one) sum += sum_odd(accm[r]);
        if (i < nb)
            sum += one ? vec_dot_q5_1_x86(w + (size_t)i * wb, y, (nb - i) * QK5_1)
                       : vec_dot_q5_0_x86(w + (size_t)i * wb, y, (nb - i) * QK5_0);
        out[(size_t)r * os] = sum;
    }
}

static float vec_dot_q5_0_avx512(const void *vw, const void *vx, int64_t n) {
    float out;
    q5_rows(vw, 0, vx, 0, n / QK5_0, &out, 0, 1);
    return out;
}

static float vec_dot_q5_1_avx512(const void *vw, const void *vx, int64_t n) {
    float out;
    q5_rows(vw, 1, vx, 0, n / QK5_1, &out, 0, 1);
    return out;
}

KX86_GEMM_BY_ROWS(gemm_q5_0_avx512, QK5_0, q5_rows, wo, 0)
KX86_GEMM_BY_ROWS(gemm_q5_1_avx512, QK5_1, q5_rows, wo, 1)

/* ---- q4_0 / q8_0: one float lane per block ----
 * The arithmetic, for a weight row w and an activation row x (q8_0) alike in vec_dot and gemm:
 *     isum_b = sum over the block's 32 elements of w_e * x_e           (exact int32)
 *     acc[b % 8] = fma(d_w[b] * d_x[b], (float)isum_b, acc[b % 8])      (blocks in order)
 *     result = hsum_ps(acc)
 * Blocks go in groups of 8, one ymm lane each: the group's quants are transposed in registers
 * so that dword j of lane l holds elements 4j..4j+3 of block l, and 8 vpdpbusd then leave each
 * block's whole sum in its own lane — no horizontal reduction per block, and one conversion,
 * one multiply and one FMA per 8 blocks. The last group of a row whose block count is not a
 * multiple of 8 is padded with zero blocks (their lanes add fma(0, 0, acc)), the same way on
 * every path (masked loads: nothing past the row is read). NOTE: q8_0 weights past the row
 * become 0x80 after the xor; against zero activations and a zero scale they still add 0. vpdpbusd multiplies unsigned by signed bytes: q4_0's nibbles go in as they are and
 * q8_0's weights as w + 128 (w ^ 0x80), the offsets' products (8 or 128 times the block's
 * activation sum) being subtracted through the accumulator's start value c.
 *
 * Activation rows are rearranged once per row (prep_row) into q8_group records: gemm then
 * decodes a weight group once for up to Q8G_R activation rows, and decode (one row) pays the
 * rearrangement once per matmul, not once per weight row. vec_dot (a q8_0 row as it is)
 * rearranges each group on the fly into the same record: same values, same operations. */

#define Q8G 8 /* blocks per group */

typedef struct {
    int8_t y[8][32]; /* y[j], lane l: quants 4j..4j+3 of block l of the group (0 past the row) */
    int32_t c[8];    /* lane l: -offset x the sum of block l's quants (offset 8 q4_0, 128 q8_0) */
    float d[8];      /* lane l: block l's scale (0 past the row) */
} q8_group;
_Static_assert(sizeof(q8_group) == 320, "q8_group is ten ymm");

/* z[k] = [dwords 0-3 of block k | dwords 0-3 of block k + 4] -> t[j] lane l = dword j of block l */
static inline void transpose_4x8(const __m256i z[4], __m256i t[4]) {
    const __m256i a = _mm256_unpacklo_epi32(z[0], z[1]), b = _mm256_unpackhi_epi32(z[0], z[1]);
    const __m256i c = _mm256_unpacklo_epi32(z[2], z[3]), d = _mm256_unpackhi_epi32(z[2], z[3]);
    t[0] = _mm256_unpacklo_epi64(a, c);
    t[1] = _mm256_unpackhi_epi64(a, c);
    t[2] = _mm256_unpacklo_epi64(b, d);
    t[3] = _mm256_unpackhi_epi64(b, d);
}

/* 16 bytes at offset off of each of the first n (1..8) of 8 blocks (stride bytes apart), the
 * others as zeros -> t[j] lane l = dword j. Masked loads never touch the missing blocks. */
static inline void load_transposed(const uint8_t *base, size_t stride, size_t off, int n, __m256i t[4]) {
    __m256i z[4];
    if (n == Q8G) {
        for (int k = 0; k < 4; k++)
            z[k] = _mm256_loadu2_m128i((const __m128i *)(base + (k + 4) * stride + off), (const __m128i *)(base + k * stride + off));
    } else {
        for (int k = 0; k < 4; k++) {
            const __m128i lo = _mm_maskz_loadu_epi32(k < n ? 0xF : 0, base + k * stride + off);
            const __m128i hi = _mm_maskz_loadu_epi32(k + 4 < n ? 0xF : 0, base + (k + 4) * stride + off);
            z[k] = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
        }
    }
    transpose_4x8(z, t);
}

/* the fp16 scales at the start of the first n (1..8) of 8 blocks (stride bytes apart) as
 * floats, 0 for the others */
static inline __m256 group_scales(const uint8_t *base, int stride, int n) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
    /* each lane reads d and the 2 bytes after it */
    const __m256i v = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), (__mmask8)((1u << n) - 1), idx, base, 1);
    return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(v));
}

/* block b0's group of a q8_0 row with nb blocks (the part past the row as zero blocks) */
static inline void prep_q8_group(const block_q8_0 *x, int64_t b0, int64_t nb, int offset, q8_group *g) {
    const block_q8_0 *p = x + b0;
    const int n = nb - b0 < Q8G ? (int)(nb - b0) : Q8G;
    __m256i y[8];
    load_transposed((const uint8_t *)p->qs, sizeof(*p), 0, n, y);
    load_transposed((const uint8_t *)p->qs, sizeof(*p), 16, n, y + 4);
    __m256i s = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        s = _mm256_dpbusd_epi32(s, _mm256_set1_epi8((char)offset), y[j]);
        _mm256_storeu_si256((__m256i *)g->y[j], y[j]);
    }
    _mm256_storeu_si256((__m256i *)g->c, _mm256_sub_epi32(_mm256_setzero_si256(), s));
    _mm256_storeu_ps(g->d, group_scales((const uint8_t *)p, sizeof(*p), n));
}

static size_t prep_size_q8_groups(int64_t n) { return (size_t)((n / QK8_0 + Q8G - 1) / Q8G) * sizeof(q8_group); }

static inline void prep_q8_groups(const void *x, void *xp, int64_t n, int offset) {
    const int64_t nb = n / QK8_0;
    q8_group *g = xp;
    for (int64_t b = 0; b < nb; b += Q8G) prep_q8_group(x, b, nb, offset, g++);
}

static void prep_row_q4_0(const void *x, void *xp, int64_t n) { prep_q8_groups(x, xp, n, 8); }
static void prep_row_q8_0(const void *x, void *xp, int64_t n) { prep_q8_groups(x, xp, n, 128); }

/* the 16 nibble bytes at qs of the first n (1..8) of 8 4-bit blocks (stride bytes apart) ->
 * q[j] laid out as q8_group's y[j] (low nibbles: elements 0-15, high: 16-31; zero past n) */
static inline void group_nibbles(const uint8_t *qs, size_t stride, int n, __m256i q[8]) {
    __m256i t[4];
    load_transposed(qs, stride, 0, n, t);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int j = 0; j < 4; j++) {
        q[j] = _mm256_and_si256(t[j], m4);
        q[j + 4] = _mm256_and_si256(_mm256_srli_epi16(t[j], 4), m4);
    }
}

/* The weight kinds of the q8_0-activation group kernels: Q4_0 (its nibbles, the activation
 * offset 8), Q8_0 (w + 128, offset 128) and IQ4_NL (Q4_0's layout; a nibble's table value + 128,
 * offset 128). */
enum { Q8G_Q4_0, Q8G_Q8_0, Q8G_IQ4_NL };

/* the activation offset of a kind (prep_q8_group, q8_group.c) and its weight block's bytes */
static inline int q8g_offset(int kind) { return kind == Q8G_Q4_0 ? 8 : 128; }
static inline size_t q8g_block_bytes(int kind) {
    return kind == Q8G_Q8_0 ? sizeof(block_q8_0) : sizeof(block_q4_0);
}

/* block b0's group of a weight row of kind with nb blocks -> q[j] (unsigned bytes, as y[j] of
 * q8_group; past the row: anything, against zero activations) and the scales dw (0 past it) */
KX86_ALWAYS_INLINE void weight_group(const int kind, const void *row, int64_t b0, int64_t nb, __m256i q[8], __m256 *dw) {
    _Static_assert(sizeof(block_iq4_nl) == sizeof(block_q4_0), "IQ4_NL has Q4_0's layout");
    const int n = nb - b0 < Q8G ? (int)(nb - b0) : Q8G;
    if (kind == Q8G_Q8_0) {
        const block_q8_0 *p = (const block_q8_0 *)row + b0;
        load_transposed((const uint8_t *)p->qs, sizeof(*p), 0, n, q);
        load_transposed((const uint8_t *)p->qs, sizeof(*p), 16, n, q + 4);
        for (int j = 0; j < 8; j++) q[j] = _mm256_xor_si256(q[j], _mm256_set1_epi8((char)0x80));
        *dw = group_scales((const uint8_t *)p, sizeof(*p), n);
    } else {
        const block_q4_0 *p = (const block_q4_0 *)row + b0;
        group_nibbles((const uint8_t *)p->qs, sizeof(*p), n, q);
        if (kind == Q8G_IQ4_NL) {
            const __m256i t = _mm256_xor_si256(
                _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)),
                _mm256_set1_epi8((char)0x80));
            for (int j = 0; j < 8; j++) q[j] = _mm256_shuffle_epi8(t, q[j]);
        }
        *dw = group_scales((const uint8_t *)p, sizeof(*p), n);
    }
}

/* one group of one (weight row, activation row). The integer sums run as two chains of four
 * vpdpbusd (half the latency of one chain of eight, which bounds decode's few activation rows);
 * integer addition is exact, so any split gives the same isum. */
KX86_ALWAYS_INLINE __m256 group_step_c(__m256 acc, const __m256i q[8], __m256 dw, const q8_group *g, const int has_c) {
    __m256i even = has_c ? _mm256_loadu_si256((const __m256i *)g->c) : _mm256_setzero_si256();
    __m256i odd = _mm256_setzero_si256();
    for (int j = 0; j < 8; j += 2) {
        even = _mm256_dpbusd_epi32(even, q[j], _mm256_loadu_si256((const __m256i *)g->y[j]));
        odd = _mm256_dpbusd_epi32(odd, q[j + 1], _mm256_loadu_si256((const __m256i *)g->y[j + 1]));
    }
    const __m256i isum = _mm256_add_epi32(even, odd);
    return _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_loadu_ps(g->d)), _mm256_cvtepi32_ps(isum), acc);
}

KX86_ALWAYS_INLINE __m256 group_step(__m256 acc, const __m256i q[8], __m256 dw, const q8_group *g) {
    return group_step_c(acc, q, dw, g, 1);
}

KX86_ALWAYS_INLINE float q8g_dot(const int kind, const void *w, const void *vx, int64_t n) {
    const int64_t nb = n / QK8_0;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b += Q8G) {
        __m256i q[8];
        __m256 dw;
        q8_group g;
        weight_group(kind, w, b, nb, q, &dw);
        prep_q8_group(vx, b, nb, q8g_offset(kind), &g);
        acc = group_step(acc, q, dw, &g);
    }
    return hsum_ps(acc);
}

static float vec_dot_q4_0_avx512(const void *w, const void *x, int64_t n) { return q8g_dot(Q8G_Q4_0, w, x, n); }
static float vec_dot_q8_0_avx512(const void *w, const void *x, int64_t n) { return q8g_dot(Q8G_Q8_0, w, x, n); }
static float vec_dot_iq4_nl_avx512(const void *w, const void *x, int64_t n) { return q8g_dot(Q8G_IQ4_NL, w, x, n); }

#define Q8G_R 16 /* activation rows per weight-group decode: 16 accumulators + 9 weight registers */

KX86_ALWAYS_INLINE void q8g_rows(const int kind, const void *w, const uint8_t *xp, size_t xs, int64_t nb, float *out,
                                 size_t os, const int R) {
    __m256 acc[16]; /* KX86_SWITCH_R16 instantiates R up to 16 */
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b += Q8G) {
        __m256i q[8];
        __m256 dw;
        prefetch_ahead((const uint8_t *)w + (size_t)b * q8g_block_bytes(kind), Q8G * q8g_block_bytes(kind));
        weight_group(kind, w, b, nb, q, &dw);
        for (int r = 0; r < R; r++) acc[r] = group_step(acc[r], q, dw, (const q8_group *)(xp + (size_t)r * xs) + b / Q8G);
    }
    for (int r = 0; r < R; r++) out[(size_t)r * os] = hsum_ps(acc[r]);
}

/* a weight group decoded by weight_group, kept for several tiles of activation rows */
typedef struct {
    __m256i q[8];
    __m256 dw;
} q8g_decoded;

#define Q8G_DECODED_MAX (32 * 1024 / (int)sizeof(q8g_decoded)) /* 32 KiB of stack: stays in L1 */

/* R activation rows against one weight row whose groups are already decoded */
KX86_ALWAYS_INLINE void q8g_rows_decoded(const q8g_decoded *wg, const uint8_t *xp, size_t xs, int64_t ng, float *out,
                                         size_t os, const int R) {
    __m256 acc[16]; /* KX86_SWITCH_R16 instantiates R up to 16 */
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m256i q[8];
        for (int j = 0; j < 8; j++) q[j] = _mm256_load_si256(&wg[g].q[j]);
        const __m256 dw = _mm256_load_ps((const float *)&wg[g].dw);
        for (int r = 0; r < R; r++) acc[r] = group_step(acc[r], q, dw, (const q8_group *)(xp + (size_t)r * xs) + g);
    }
    for (int r = 0; r < R; r++) out[(size_t)r * os] = hsum_ps(acc[r]);
}

/* NOTE: with more activation rows than one tile, a block of weight rows is decoded once into
 * q8g_decoded groups on the stack and reused by every tile, instead of once per tile (the same
 * values in the same registers, so the same results). */
KX86_ALWAYS_INLINE void q8g_gemm(const int kind, const void *w, size_t ws, int n_w, const void *xp, size_t xs, int n_x,
                                 int64_t n, float *out, size_t os) {
    const int64_t nb = n / QK8_0, ng = (nb + Q8G - 1) / Q8G;
    if (n_x <= Q8G_R || ng > Q8G_DECODED_MAX) {
        for (int r0 = 0; r0 < n_x; r0 += Q8G_R) {
            const uint8_t *x = (const uint8_t *)xp + (size_t)r0 * xs;
            float *o0 = out + (size_t)r0 * os;
            for (int o = 0; o < n_w; o++)
                KX86_SWITCH_R16(n_x - r0, q8g_rows, kind, (const uint8_t *)w + (size_t)o * ws, x, xs, nb, o0 + o, os);
        }
        return;
    }
    q8g_decoded dec[Q8G_DECODED_MAX];
    const int block = (int)(Q8G_DECODED_MAX / ng);
    for (int o0 = 0; o0 < n_w; o0 += block) {
        const int nw = n_w - o0 < block ? n_w - o0 : block;
        for (int o = 0; o < nw; o++)
            for (int64_t g = 0; g < ng; g++)
                weight_group(kind, (const uint8_t *)w + (size_t)(o0 + o) * ws, g * Q8G, nb, dec[o * ng + g].q,
                             &dec[o * ng + g].dw);
        for (int r0 = 0; r0 < n_x; r0 += Q8G_R) {
            const uint8_t *x = (const uint8_t *)xp + (size_t)r0 * xs;
            for (int o = 0; o < nw; o++)
                KX86_SWITCH_R16(n_x - r0, q8g_rows_decoded, dec + (size_t)o * ng, x, xs, ng,
                                out + (size_t)r0 * os + o0 + o, os);
        }
    }
}

static void gemm_q4_0_avx512(const void *w, size_t ws, int n_w, const void *xp, size_t xs, int n_x, int64_t n,
                             float *out, size_t os) {
    q8g_gemm(Q8G_Q4_0, w, ws, n_w, xp, xs, n_x, n, out, os);
}

static void gemm_q8_0_avx512(const void *w, size_t ws, int n_w, const void *xp, size_t xs, int n_x, int64_t n,
                             float *out, size_t os) {
    q8g_gemm(Q8G_Q8_0, w, ws, n_w, xp, xs, n_x, n, out, os);
}

static void gemm_iq4_nl_avx512(const void *w, size_t ws, int n_w, const void *xp, size_t xs, int n_x, int64_t n,
                               float *out, size_t os) {
    q8g_gemm(Q8G_IQ4_NL, w, ws, n_w, xp, xs, n_x, n, out, os);
}

/* ---- q4_1: the same groups plus the min term ----
 * For a weight row w and an activation row x (q8_1), in vec_dot and gemm alike:
 *     isum_b = sum over the block's 32 elements of q_e * x_e      (nibbles 0..15, exact int32)
 *     acc[b % 8] = fma(m_w[b], s_x[b], fma(d_w[b] * d_x[b], (float)isum_b, acc[b % 8]))
 *     result = hsum_ps(acc)                                         (s_x: q8_1's d * sum(x))
 * The activation row is prepared once per matmul into q8s_group records (q8_group with no
 * offset, plus the s lanes); vec_dot prepares each group on the fly into the same record, so a
 * row's result is the same alone or in a batch. Up to 16 activation rows per weight decode (one
 * accumulator each, as q4_0). */

typedef struct {
    q8_group g; /* c all zero: q4_1's nibbles need no offset */
    float s[8]; /* lane l: block l's s (0 past the row) */
} q8s_group;

static void prep_q8s_group(const block_q8_1 *x, int64_t b0, int64_t nb, q8s_group *gs) {
    const block_q8_1 *p = x + b0;
    const int n = nb - b0 < Q8G ? (int)(nb - b0) : Q8G;
    __m256i y[8];
    load_transposed((const uint8_t *)p->qs, sizeof(*p), 0, n, y);
    load_transposed((const uint8_t *)p->qs, sizeof(*p), 16, n, y + 4);
    for (int j = 0; j < 8; j++) _mm256_storeu_si256((__m256i *)gs->g.y[j], y[j]);
    _mm256_storeu_si256((__m256i *)gs->g.c, _mm256_setzero_si256());
    _mm256_storeu_ps(gs->g.d, group_scales((const uint8_t *)p, sizeof(*p), n));
    _mm256_storeu_ps(gs->s, group_scales((const uint8_t *)&p->s, sizeof(*p), n));
}

static size_t prep_size_q8s_groups(int64_t n) { /* rows of whole 64-byte lines, as cpu_kernels.h asks */
    return ((size_t)((n / QK8_1 + Q8G - 1) / Q8G) * sizeof(q8s_group) + 63) / 64 * 64;
}

static void prep_row_q4_1(const void *x, void *xp, int64_t n) {
    const int64_t nb = n / QK8_1;
    q8s_group *g = xp;
    for (int64_t b = 0; b < nb; b += Q8G) prep_q8s_group(x, b, nb, g++);
}

/* block b0's group of a q4_1 row with nb blocks -> nibbles q, scales dw and mins mw */
static inline void weight_group_q4_1(const void *row, int64_t b0, int64_t nb, __m256i q[8], __m256 *dw,
                                     __m256 *mw) {
    const int n = nb - b0 < Q8G ? (int)(nb - b0) : Q8G;
    const block_q4_1 *p = (const block_q4_1 *)row + b0;
    group_nibbles((const uint8_t *)p->qs, sizeof(*p), n, q);
    /* d and m are adjacent: one gather brings both (d the low half of each lane, m the high) */
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(sizeof(*p)));
    const __m256i dm = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), (__mmask8)((1u << n) - 1), idx, p, 1);
    *dw = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm));
    *mw = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16)));
}

KX86_ALWAYS_INLINE __m256 q4_1_group_step(__m256 acc, const __m256i q[8], __m256 dw, __m256 mw, const q8s_group *gs) {
    /* c is all zero for q4_1 (q8s_group): the sum starts from zero instead of loading it */
    return _mm256_fmadd_ps(mw, _mm256_loadu_ps(gs->s), group_step_c(acc, q, dw, &gs->g, 0));
}

static float vec_dot_q4_1_avx512(const void *w, const void *x, int64_t n) {
    const int64_t nb = n / QK4_1;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b += Q8G) {
        __m256i q[8];
        __m256 dw, mw;
        q8s_group gs;
        weight_group_q4_1(w, b, nb, q, &dw, &mw);
        prep_q8s_group(x, b, nb, &gs);
        acc = q4_1_group_step(acc, q, dw, mw, &gs);
    }
    return hsum_ps(acc);
}

KX86_ALWAYS_INLINE void q4_1_rows(const void *w, const uint8_t *xp, size_t xs, int64_t nb, float *out, size_t os,
                                  const int R) {
    __m256 acc[16]; /* KX86_SWITCH_R16 instantiates R up to 16 */
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b += Q8G) {
        __m256i q[8];
        __m256 dw, mw;
        prefetch_ahead((const block_q4_1 *)w + b, Q8G * sizeof(block_q4_1));
        weight_group_q4_1(w, b, nb, q, &dw, &mw);
        for (int r = 0; r < R; r++)
            acc[r] = q4_1_group_step(acc[r], q, dw, mw, (const q8s_group *)(xp + (size_t)r * xs) + b / Q8G);
    }
    for (int r = 0; r < R; r++) out[(size_t)r * os] = hsum_ps(acc[r]);
}

/* a q4_1 weight group decoded by weight_group_q4_1, kept for several tiles of activation rows */
typedef struct {
    __m256i q[8];
    __m256 dw, mw;
} q4_1_decoded;

#define Q4_1_DECODED_MAX (32 * 1024 / (int)sizeof(q4_1_decoded)) /* 32 KiB of stack: stays in L1 */

/* R activation rows against one q4_1 weight row whose groups are already decoded */
KX86_ALWAYS_INLINE void q4_1_rows_decoded(const q4_1_decoded *wg, const uint8_t *xp, size_t xs, int64_t ng,
                                          float *out, size_t os, const int R) {
    __m256 acc[16]; /* KX86_SWITCH_R16 instantiates R up to 16 */
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m256i q[8];
        for (int j = 0; j < 8; j++) q[j] = _mm256_load_si256(&wg[g].q[j]);
        const __m256 dw = _mm256_load_ps((const float *)&wg[g].dw), mw = _mm256_load_ps((const float *)&wg[g].mw);
        for (int r = 0; r < R; r++)
            acc[r] = q4_1_group_step(acc[r], q, dw, mw, (const q8s_group *)(xp + (size_t)r * xs) + g);
    }
    for (int r = 0; r < R; r++) out[(size_t)r * os] = hsum_ps(acc[r]);
}

/* ---- q4_1 with two activation rows per zmm ----
 * A q8s_pair holds one group of two activation rows side by side (row a in the low 256 bits of
 * every vector, row b in the high), so that one 512-bit vpdpbusd, cvt, mul and the two FMAs do
 * q4_1_group_step for both rows with the weight group broadcast to both halves: each half gets
 * exactly the single-row step's operations (c is zero for q8_1 rows, so the sums start from
 * zero as the single-row step's do from c), and each half is reduced by hsum_ps, so results stay
 * bit-identical to vec_dot. Per row this halves the vector instructions and the loads of the
 * step, which bound batched decode and prefill once the weight decode is shared by 4+ rows. */
typedef struct {
    int8_t y[8][64];
    float d[16], s[16];
} q8s_pair;
_Static_assert(sizeof(q8s_pair) == 640, "q8s_pair is ten zmm");

#define Q8S_PAIRS_BYTES (48 * 1024) /* stack for the interleaved rows; larger shapes take the ymm path */
/* NOTE: the pairs pay for broadcasting each decoded weight group to zmm, and 512-bit code runs
 * vector work on two ports instead of three: bench_vec_dot --gemm 1536 576 N, one thread,
 * GFLOP/s ymm -> pairs: N=4 104 -> 94, 6 123 -> 116, 8 132 -> 129, 12 127 -> 153, 16 128 -> 168,
 * 32 (weights decoded once per block, below) 132 -> 170. So a gemm with the weights decoded on
 * the fly takes pairs from 12 rows of a tile; with pre-decoded weights (the loads broadcast for
 * free) always. */
#define Q4_1_PAIRS_MIN_ROWS 12

/* rows a and b (q8s_group rows of ng groups) -> ng q8s_pairs */
static void q8s_pair_rows(const q8s_group *a, const q8s_group *b, int64_t ng, q8s_pair *p) {
    for (int64_t g = 0; g < ng; g++) {
        for (int j = 0; j < 8; j++)
            _mm512_store_si512(p[g].y[j], _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a[g].g.y[j])),
                                                               _mm256_loadu_si256((const __m256i *)b[g].g.y[j]), 1));
        _mm512_store_ps(p[g].d, _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a[g].g.d)), _mm256_loadu_ps(b[g].g.d), 1));
        _mm512_store_ps(p[g].s, _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a[g].s)), _mm256_loadu_ps(b[g].s), 1));
    }
}

KX86_ALWAYS_INLINE __m512 q4_1_pair_step(__m512 acc, const __m512i q[8], __m512 dw, __m512 mw, const q8s_pair *p) {
    __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
    for (int j = 0; j < 8; j += 2) {
        even = _mm512_dpbusd_epi32(even, q[j], _mm512_load_si512(p->y[j]));
        odd = _mm512_dpbusd_epi32(odd, q[j + 1], _mm512_load_si512(p->y[j + 1]));
    }
    const __m512i isum = _mm512_add_epi32(even, odd);
    const __m512 t = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_load_ps(p->d)), _mm512_cvtepi32_ps(isum), acc);
    return _mm512_fmadd_ps(mw, _mm512_load_ps(p->s), t);
}

static inline void store_pair_sums(__m512 acc, float *out, size_t os) {
    out[0] = hsum_ps(_mm512_castps512_ps256(acc));
    out[os] = hsum_ps(_mm512_extractf32x8_ps(acc, 1));
}

/* P pairs of activation rows (pairs: [P][ng]) against one q4_1 weight row decoded from memory */
KX86_ALWAYS_INLINE void q4_1_rows_pairs(const void *w, const q8s_pair *pairs, int64_t nb, int64_t ng, float *out,
                                        size_t os, const int P) {
    __m512 acc[8]; /* KX86_SWITCH_R instantiates P up to 8 */
    for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += Q8G) {
        __m256i q[8];
        __m256 dw, mw;
        prefetch_ahead((const block_q4_1 *)w + b, Q8G * sizeof(block_q4_1));
        weight_group_q4_1(w, b, nb, q, &dw, &mw);
        __m512i qz[8];
        for (int j = 0; j < 8; j++) qz[j] = _mm512_broadcast_i64x4(q[j]);
        const __m512 dwz = _mm512_broadcast_f32x8(dw), mwz = _mm512_broadcast_f32x8(mw);
        for (int p = 0; p < P; p++) acc[p] = q4_1_pair_step(acc[p], qz, dwz, mwz, pairs + (size_t)p * ng + b / Q8G);
    }
    for (int p = 0; p < P; p++) store_pair_sums(acc[p], out + (size_t)(2 * p) * os, os);
}

/* P pairs against one weight row whose groups are already decoded (q4_1_decoded) */
KX86_ALWAYS_INLINE void q4_1_pairs_decoded(const q4_1_decoded *wg, const q8s_pair *pairs, int64_t ng, float *out,
                                           size_t os, const int P) {
    __m512 acc[8];
    for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m512i qz[8];
        for (int j = 0; j < 8; j++) qz[j] = _mm512_broadcast_i64x4(_mm256_load_si256(&wg[g].q[j]));
        const __m512 dwz = _mm512_broadcast_f32x8(_mm256_load_ps((const float *)&wg[g].dw));
        const __m512 mwz = _mm512_broadcast_f32x8(_mm256_load_ps((const float *)&wg[g].mw));
        for (int p = 0; p < P; p++) acc[p] = q4_1_pair_step(acc[p], qz, dwz, mwz, pairs + (size_t)p * ng + g);
    }
    for (int p = 0; p < P; p++) store_pair_sums(acc[p], out + (size_t)(2 * p) * os, os);
}

/* interleaves rows r0 .. r0 + 2 * n_pairs - 1 of xp into pairs */
static void q8s_make_pairs(const uint8_t *xp, size_t xs, int r0, int n_pairs, int64_t ng, q8s_pair *pairs) {
    for (int p = 0; p < n_pairs; p++)
        q8s_pair_rows((const q8s_group *)(xp + (size_t)(r0 + 2 * p) * xs),
                      (const q8s_group *)(xp + (size_t)(r0 + 2 * p + 1) * xs), ng, pairs + (size_t)p * ng);
}

/* NOTE: as q8g_gemm: with more activation rows than one tile, a block of weight rows is decoded
 * once on the stack and reused by every tile (same values, same operations, same results). */
static void gemm_q4_1_avx512(const void *w, size_t ws, int n_w, const void *xp, size_t xs, int n_x, int64_t n,
                             float *out, size_t os) {
    const int64_t nb = n / QK4_1, ng = (nb + Q8G - 1) / Q8G;
    /* row pairs in zmm (q8s_pair) where a tile's pairs fit the stack buffer */
    alignas(64) q8s_pair pairs[Q8S_PAIRS_BYTES / sizeof(q8s_pair)];
    const int use_pairs = n_x >= 2 && (int64_t)(Q8G_R / 2) * ng * (int64_t)sizeof(q8s_pair) <= Q8S_PAIRS_BYTES;
    if (n_x <= Q8G_R || ng > Q4_1_DECODED_MAX) {
        for (int r0 = 0; r0 < n_x; r0 += Q8G_R) {
            const int nr = n_x - r0 < Q8G_R ? n_x - r0 : Q8G_R;
            const uint8_t *x = (const uint8_t *)xp + (size_t)r0 * xs;
            if (use_pairs && nr >= Q4_1_PAIRS_MIN_ROWS) {
                const int np = nr / 2;
                q8s_make_pairs(xp, xs, r0, np, ng, pairs);
                for (int o = 0; o < n_w; o++)
                    KX86_SWITCH_R(np, q4_1_rows_pairs, (const uint8_t *)w + (size_t)o * ws, pairs, nb, ng,
                                  out + (size_t)r0 * os + o, os);
                if (nr % 2)
                    for (int o = 0; o < n_w; o++)
                        q4_1_rows((const uint8_t *)w + (size_t)o * ws, x + (size_t)(nr - 1) * xs, xs, nb,
                                  out + (size_t)(r0 + nr - 1) * os + o, os, 1);
                continue;
            }
            for (int o = 0; o < n_w; o++)
                KX86_SWITCH_R16(nr, q4_1_rows, (const uint8_t *)w + (size_t)o * ws, x, xs, nb,
                                out + (size_t)r0 * os + o, os);
        }
        return;
    }
    q4_1_decoded dec[Q4_1_DECODED_MAX];
    const int block = (int)(Q4_1_DECODED_MAX / ng);
    for (int o0 = 0; o0 < n_w; o0 += block) {
        const int nw = n_w - o0 < block ? n_w - o0 : block;
        for (int o = 0; o < nw; o++)
            for (int64_t g = 0; g < ng; g++) {
                q4_1_decoded *d = &dec[o * ng + g];
                weight_group_q4_1((const uint8_t *)w + (size_t)(o0 + o) * ws, g * Q8G, nb, d->q, &d->dw, &d->mw);
            }
        for (int r0 = 0; r0 < n_x; r0 += Q8G_R) {
            const int nr = n_x - r0 < Q8G_R ? n_x - r0 : Q8G_R;
            const uint8_t *x = (const uint8_t *)xp + (size_t)r0 * xs;
            int done = 0;
            if (use_pairs && nr >= 2) {
                const int np = nr / 2;
                q8s_make_pairs(xp, xs, r0, np, ng, pairs);
                for (int o = 0; o < nw; o++)
                    KX86_SWITCH_R(np, q4_1_pairs_decoded, dec + (size_t)o * ng, pairs, ng,
                                  out + (size_t)r0 * os + o0 + o, os);
                done = 2 * np;
            }
            if (done < nr)
                for (int o = 0; o < nw; o++)
                    KX86_SWITCH_R16(nr - done, q4_1_rows_decoded, dec + (size_t)o * ng, x + (size_t)done * xs, xs, ng,
                                    out + (size_t)(r0 + done) * os + o0 + o, os);
        }
    }
}

/* ---- f16 matrix product ----
 * The activation rows are converted to f32 once (prep_row); each 16-element weight vector is
 * converted once for the tile's 6 or 3 activation rows. Per (weight row, activation row) the four accumulators
 * receive exactly vec_dot_f16_avx512's FMAs in its order (64-element steps, 16-element steps
 * into acc[0], the masked tail into acc[1]) and are reduced as it reduces them.
 * NOTE: TinyLlama f16 prefill (pp128 ~66 t/s at 2 threads = ~128 GFLOP/s) already runs at
 * about 90% of this machine's f32 FMA peak (a 24-chain vfmadd231ps zmm loop: ~70 GFLOP/s per
 * core). A variant that converted 4 weight rows to f32 once and ran 4 x 6 tiles (24
 * accumulators, k-major order, still bit-identical) was 40% faster on bench_vec_dot --gemm
 * but gave the same pp128, so it was not kept; more speed needs fewer f32 FMAs per product
 * (AVX512-FP16 or BF16 dot products), which would change the results. */

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

/* a tile's results: each (weight row o, activation row r)'s four accumulators reduced as the
 * single-row f16 / bf16 kernels reduce theirs */
static inline void tile_store(__m512 acc[2][8][4], const int W, const int R, float *out,
                              size_t os) {
    for (int o = 0; o < W; o++)
        for (int r = 0; r < R; r++)
            out[(size_t)r * os + (size_t)o] =
                _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[o][r][0], acc[o][r][1]),
                                                   _mm512_add_ps(acc[o][r][2], acc[o][r][3])));
}

/* W weight rows x R activation rows, 4 accumulators each (W * R <= 6) */
KX86_ALWAYS_INLINE void f16_tile(const uint8_t *w, size_t ws, const int W, const uint8_t *xp, size_t xs, int64_t n,
                                 float *out, size_t os, const int R) {
    __m512 acc[2][8][4]; /* KX86_SWITCH_R instantiates R up to 8; only W * R <= 6 is called */
    for (int o = 0; o < W; o++)
        for (int r = 0; r < R; r++)
            for (int k = 0; k < 4; k++) acc[o][r][k] = _mm512_setzero_ps();
#define F16_W(o, i) ((const uint16_t *)(w + (size_t)(o) * ws) + (i))
#define F16_X(r, i) ((const float *)(xp + (size_t)(r) * xs) + (i))
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; k++) {
            __m512 wv[2];
            for (int o = 0; o < W; o++) wv[o] = load_f16_512(F16_W(o, i + 16 * k));
            for (int r = 0; r < R; r++) {
                const __m512 xv = _mm512_loadu_ps(F16_X(r, i + 16 * k));
                for (int o = 0; o < W; o++) acc[o][r][k] = _mm512_fmadd_ps(wv[o], xv, acc[o][r][k]);
            }
        }
    for (; i + 16 <= n; i += 16)
        for (int o = 0; o < W; o++) {
            const __m512 wv = load_f16_512(F16_W(o, i));
            for (int r = 0; r < R; r++) acc[o][r][0] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(F16_X(r, i)), acc[o][r][0]);
        }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        for (int o = 0; o < W; o++) {
            const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, F16_W(o, i)));
            for (int r = 0; r < R; r++)
                acc[o][r][1] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, F16_X(r, i)), acc[o][r][1]);
        }
    }
#undef F16_W
#undef F16_X
    tile_store(acc, W, R, out, os);
}

/* NOTE: up to 1365 columns six activation rows of f32 (32 KiB) stay in L1 while a weight row
 * passes: one weight row x 6 activation rows. Wider rows would stream the activations from L2
 * for every weight row, so there two weight rows share each activation load (x 3 rows). */
#define F16_L1_COLS 1365

/* ---- bf16 matrix product ----
 * Per (weight row, activation row) the four accumulators receive exactly vec_dot_bf16_avx512's
 * vdpbf16ps in its order (128-element steps, the rest in masked 32-element steps into acc[0]) and
 * are reduced as it reduces them; a tile of W weight rows x R activation rows shares each load:
 * W + R loads for W * R products where vec_dot has two loads a product. Activations are bf16 as
 * they come (no prep_row). */
KX86_ALWAYS_INLINE void bf16_tile(const uint8_t *w, size_t ws, const int W, const uint8_t *x,
                                  size_t xs, int64_t n, float *out, size_t os, const int R) {
    __m512 acc[2][8][4]; /* KX86_SWITCH_R instantiates R up to 8; only W * R <= 6 is called */
    for (int o = 0; o < W; o++)
        for (int r = 0; r < R; r++)
            for (int k = 0; k < 4; k++)
                acc[o][r][k] = _mm512_setzero_ps();
#define BF16_W(o, i) ((const uint16_t *)(w + (size_t)(o)*ws) + (i))
#define BF16_X(r, i) ((const uint16_t *)(x + (size_t)(r)*xs) + (i))
    int64_t i = 0;
    for (; i + 128 <= n; i += 128)
        for (int k = 0; k < 4; k++) {
            __m512i wv[2];
            for (int o = 0; o < W; o++)
                wv[o] = _mm512_loadu_si512(BF16_W(o, i + 32 * k));
            for (int r = 0; r < R; r++) {
                const __m512i xv = _mm512_loadu_si512(BF16_X(r, i + 32 * k));
                for (int o = 0; o < W; o++)
                    acc[o][r][k] = _mm512_dpbf16_ps(acc[o][r][k], (__m512bh)wv[o], (__m512bh)xv);
            }
        }
    for (; i < n; i += 32) {
        const __mmask32 m = n - i >= 32 ? 0xffffffffu : (__mmask32)((1u << (n - i)) - 1);
        for (int o = 0; o < W; o++) {
            const __m512i wv = _mm512_maskz_loadu_epi16(m, BF16_W(o, i));
            for (int r = 0; r < R; r++)
                acc[o][r][0] =
                    _mm512_dpbf16_ps(acc[o][r][0], (__m512bh)wv,
                                     (__m512bh)_mm512_maskz_loadu_epi16(m, BF16_X(r, i)));
        }
    }
#undef BF16_W
#undef BF16_X
    tile_store(acc, W, R, out, os);
}

/* as F16_L1_COLS: six bf16 activation rows of up to 2730 columns (32 KiB) stay in L1 */
#define BF16_L1_COLS 2730

/* the f16 or bf16 tile (bf a constant once inlined) */
KX86_ALWAYS_INLINE void float_tile(const bool bf, const uint8_t *w, size_t ws, const int W,
                                   const uint8_t *x, size_t xs, int64_t n, float *out, size_t os,
                                   const int R) {
    if (bf)
        bf16_tile(w, ws, W, x, xs, n, out, os, R);
    else
        f16_tile(w, ws, W, x, xs, n, out, os, R);
}

/* tiles of 1 weight row x 6 activation rows, or 2 x 3 for rows over l1_cols (the NOTE above) */
KX86_ALWAYS_INLINE void gemm_float_tiles(const void *w, size_t ws, int n_w, const void *x,
                                         size_t xs, int n_x, int64_t n, float *out, size_t os,
                                         const bool bf) {
    const int W = n > (bf ? BF16_L1_COLS : F16_L1_COLS) ? 2 : 1, RT = 6 / W;
    for (int r0 = 0; r0 < n_x; r0 += RT) {
        const uint8_t *xr = (const uint8_t *)x + (size_t)r0 * xs;
        float *o0 = out + (size_t)r0 * os;
        const int left = n_x - r0 < RT ? n_x - r0 : RT;
        int o = 0;
        if (W == 2)
            for (; o + 2 <= n_w; o += 2)
                KX86_SWITCH_R(left, float_tile, bf, (const uint8_t *)w + (size_t)o * ws, ws, 2, xr,
                              xs, n, o0 + o, os);
        for (; o < n_w; o++)
            KX86_SWITCH_R(left, float_tile, bf, (const uint8_t *)w + (size_t)o * ws, ws, 1, xr, xs,
                          n, o0 + o, os);
    }
}

static void gemm_f16_avx512(const void *w, size_t ws, int n_w, const void *xp, size_t xs, int n_x,
                            int64_t n, float *out, size_t os) {
    gemm_float_tiles(w, ws, n_w, xp, xs, n_x, n, out, os, false);
}

static void gemm_bf16_avx512(const void *w, size_t ws, int n_w, const void *x, size_t xs, int n_x,
                             int64_t n, float *out, size_t os) {
    gemm_float_tiles(w, ws, n_w, x, xs, n_x, n, out, os, true);
}

/* ---- q4_K matrix product ----
 * Per super-block the single-row kernel (kernels_x86.h's vec_dot_q4_k_x86) forms two exact
 * integers — isum = sum_j scale_j x (the 32-element dot of sub-block j) and summ = sum_j min_j x
 * (bsums[2j] + bsums[2j + 1]) — and then `sumf += d * (float)isum - dmin * (float)summ`. Here
 * the weight side (nibbles, scales, mins) is decoded once per super-block for up to 8 activation
 * rows, the integers are formed 64 elements per zmm (vpmaddubsw pairs, then vpdpwssd with the
 * sub-block scales: the same exact sums), and the float step is that same C expression. */

/* scale j in 16-bit lanes 0-15 (elements 0-31 of a 64-element step), scale j + 1 in 16-31 */
static inline __m512i k4_scale_pair(__m512i sm, int j) {
    const __m512i lo = _mm512_set1_epi16((short)j), hi = _mm512_set1_epi16((short)(j + 1));
    return _mm512_permutexvar_epi16(_mm512_mask_blend_epi16(0xFFFF0000u, lo, hi), sm);
}

/* q4_K and q5_K (five: its qh adds bit 4 to every quant) share d, dmin and the packed 6-bit
 * scales and mins, so one kernel decodes both; `five` is a constant in each instantiation. */
KX86_ALWAYS_INLINE void k45_rows(const void *w, const bool five, const uint8_t *x, size_t xs,
                                 int64_t nsb, float *out, size_t os, const int R) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    float sumf[8];
    for (int r = 0; r < R; r++) sumf[r] = 0;
    for (int64_t i = 0; i < nsb; i++) {
        const block_q4_K *w4 = five ? NULL : (const block_q4_K *)w + i;
        const block_q5_K *w5 = five ? (const block_q5_K *)w + i : NULL;
        const uint8_t *scales = five ? w5->scales : w4->scales, *qs = five ? w5->qs : w4->qs;
        prefetch_ahead(five ? (const void *)w5 : (const void *)w4,
                       five ? sizeof(*w5) : sizeof(*w4));
        /* scales 0-7 and mins 0-7 as int16 (quant_k.c's get_scale_min_k4), see k4_scales */
        const uint32_t a = load_u32(scales), b = load_u32(scales + 4), c = load_u32(scales + 8);
        const uint32_t sc_lo = a & 0x3f3f3f3fu, mn_lo = b & 0x3f3f3f3fu;
        const uint32_t sc_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
        const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
        const __m256i sm = _mm256_cvtepu8_epi16(_mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)mn_lo, (int)mn_hi));
        const __m128i mins = _mm256_extracti128_si256(sm, 1);
        const __m256i mdup = _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins));
        __m512i u[4], sc[4];
        for (int j = 0; j < 4; j++) { /* elements 64j..64j+31: low nibbles, 64j+32..64j+63: high */
            const __m512i t = _mm512_broadcast_i64x4(load256(qs + 32 * j));
            u[j] = _mm512_and_si512(_mm512_mask_srli_epi16(t, 0xFFFF0000u, t, 4), m4);
            /* q5_K: qh bit 2j of byte l is bit 4 of element 64j + l, bit 2j + 1 of 64j + 32 + l */
            if (five) {
                const __m512i h = _mm512_broadcast_i64x4(load256(w5->qh));
                const __m512i bit = _mm512_mask_blend_epi8(
                    0xFFFFFFFF00000000ull, _mm512_set1_epi8((char)(1 << (2 * j))),
                    _mm512_set1_epi8((char)(1 << (2 * j + 1))));
                u[j] = _mm512_mask_add_epi8(u[j], _mm512_test_epi8_mask(h, bit), u[j], b4);
            }
            sc[j] = k4_scale_pair(_mm512_castsi256_si512(sm), 2 * j);
        }
        const float dw = h2f(five ? w5->d : w4->d), mw = h2f(five ? w5->dmin : w4->dmin);
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)(x + (size_t)r * xs) + i;
            __m512i acc = _mm512_setzero_si512();
            for (int j = 0; j < 4; j++)
                acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u[j], _mm512_loadu_si512(y->qs + 64 * j)), sc[j]);
            const int isum = _mm512_reduce_add_epi32(acc);
            const int summ = hsum_epi32(_mm256_madd_epi16(load256(y->bsums), mdup));
            const float d = dw * y->d, dmin = mw * y->d;
            sumf[r] += d * (float)isum - dmin * (float)summ;
        }
    }
    for (int r = 0; r < R; r++) out[(size_t)r * os] = sumf[r];
}

KX86_GEMM_BY_ROWS(gemm_q4_k_avx512, QK_K, k45_rows, wo, false)
KX86_GEMM_BY_ROWS(gemm_q5_k_avx512, QK_K, k45_rows, wo, true)

/* ---- iq4_xs matrix product ----
 * The single-row kernel (kernels_x86.h's vec_dot_iq4_xs_x86) sums, per super-block, the 8
 * sub-blocks' integer dots times their scales - 32 (exact), then `sumf += d * d_x * isum`. Here
 * the weight side (table values, signs, scales) is decoded once per super-block for up to 8
 * activation rows, 64 elements per zmm as in q4_k_rows: |v| x (y with v's sign) pairwise into
 * int16 (at most 2 * 127 * 127: q8_K is within +-127), then vpdpwssd with the sub-block scales:
 * the same exact sums, then the same float expression. */
KX86_ALWAYS_INLINE void iq4_xs_rows(const block_iq4_xs *w, const uint8_t *x, size_t xs, int64_t nsb,
                                    float *out, size_t os, const int R) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), zero = _mm512_setzero_si512();
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kvalues_iq4nl));
    float sumf[8];
    for (int r = 0; r < R; r++)
        sumf[r] = 0;
    for (int64_t i = 0; i < nsb; i++) {
        prefetch_ahead(&w[i], sizeof(w[i]));
        alignas(16) int16_t ls[8];
        for (int ib = 0; ib < 8; ib++)
            ls[ib] = (int16_t)((((w[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) |
                                (((w[i].scales_h >> 2 * ib) & 3) << 4)) -
                               32);
        const __m512i sm = _mm512_castsi128_si512(_mm_load_si128((const __m128i *)ls));
        __m512i av[4], sc[4];
        __mmask64 neg[4];
        for (int j = 0; j < 4;
             j++) { /* sub-blocks 2j, 2j + 1: bytes [A A B B], high nibbles in A, B's second copy */
            const __m512i t0 = _mm512_castsi256_si512(load256(w[i].qs + 32 * j));
            const __m512i t = _mm512_shuffle_i64x2(t0, t0, 0x50);
            const __m512i v = _mm512_shuffle_epi8(
                table, _mm512_and_si512(_mm512_mask_srli_epi16(t, 0xFF00FF00u, t, 4), m4));
            av[j] = _mm512_abs_epi8(v);
            neg[j] = _mm512_movepi8_mask(v);
            sc[j] = k4_scale_pair(sm, 2 * j);
        }
        const float dw = h2f(w[i].d);
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)(x + (size_t)r * xs) + i;
            __m512i acc = _mm512_setzero_si512();
            for (int j = 0; j < 4; j++) {
                const __m512i yq = _mm512_loadu_si512(y->qs + 64 * j);
                const __m512i ys = _mm512_mask_sub_epi8(yq, neg[j], zero, yq);
                acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(av[j], ys), sc[j]);
            }
            sumf[r] += dw * y->d * (float)_mm512_reduce_add_epi32(acc);
        }
    }
    for (int r = 0; r < R; r++)
        out[(size_t)r * os] = sumf[r];
}

static void gemm_iq4_xs_avx512(const void *w, size_t ws, int n_w, const void *x, size_t xs, int n_x,
                               int64_t n, float *out, size_t os) {
    if (n_x ==
        1) { /* decode: the single-row kernel streams faster (TinyLlama tg64 33.0 vs 30.5 t/s) */
        for (int o = 0; o < n_w; o++)
            out[o] = vec_dot_iq4_xs_x86((const uint8_t *)w + (size_t)o * ws, x, n);
        return;
    }
    for (int r0 = 0; r0 < n_x; r0 += 8) {
        const uint8_t *xr = (const uint8_t *)x + (size_t)r0 * xs;
        for (int o = 0; o < n_w; o++)
            KX86_SWITCH_R(n_x - r0, iq4_xs_rows,
                          (const block_iq4_xs *)((const uint8_t *)w + (size_t)o * ws), xr, xs,
                          n / QK_K, out + (size_t)r0 * os + o, os);
    }
}

/* scales j..j+3 (16-bit) in 16-bit lanes 0-7, 8-15, 16-23, 24-31: a 64-element step of
 * 16-element sub-blocks */
static inline __m512i k6_scale_quad(__m512i sm, int j) {
    static const int16_t quarter[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    const __m512i idx = _mm512_add_epi16(_mm512_loadu_si512(quarter), _mm512_set1_epi16((short)j));
    return _mm512_permutexvar_epi16(idx, sm);
}

/* sc[j]: the scales of 64-element step j's four 16-element sub-blocks (16-bit in sc16) */
static inline void k16_scale_quads(__m256i sc16, __m512i sc[4]) {
    for (int j = 0; j < 4; j++)
        sc[j] = k6_scale_quad(_mm512_castsi256_si512(sc16), 4 * j);
}

/* the exact integer dot of a super-block's quants u (unsigned bytes, 64 elements a zmm) with
 * activation row y, each 16 elements times their sub-block's scale (vpmaddubsw pairs into int16,
 * then vpdpwssd) */
static inline int k16_isum(const __m512i u[4], const __m512i sc[4], const block_q8_K *y) {
    __m512i acc = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++)
        acc = _mm512_dpwssd_epi32(
            acc, _mm512_maddubs_epi16(u[j], _mm512_loadu_si512(y->qs + 64 * j)), sc[j]);
    return _mm512_reduce_add_epi32(acc);
}

/* ---- q6_K matrix product ----
 * The single-row kernel (kernels_x86.h's vec_dot_q6_k_x86) sums, per super-block, the unsigned
 * 6-bit quants (0..63) times y by 16-element sub-block scale, less 32 x the scales against y's
 * 16-element sums (exact integers), then `sumf += d * d_x * (isum - 32 * bias)`. Here the quants
 * and the scales are decoded once per super-block for up to 8 activation rows, 64 elements per
 * zmm: of each 128-element half h, elements 0-63 are ql[64h..] low nibbles with qh's bits 0-1
 * (first 32) and 2-3 (next 32), elements 64-127 the high nibbles with qh's bits 4-5 and 6-7. */
KX86_ALWAYS_INLINE void q6_k_rows(const block_q6_K *w, const uint8_t *x, size_t xs, int64_t nsb,
                                  float *out, size_t os, const int R) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    /* qh's shift for each 32-element quarter of a zmm: left 4 / 2 (low nibbles), right 0 / 2 */
    const __m512i shl =
        _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(4), _mm512_set1_epi16(2));
    const __m512i shr =
        _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_setzero_si512(), _mm512_set1_epi16(2));
    float sumf[8];
    for (int r = 0; r < R; r++)
        sumf[r] = 0;
    for (int64_t i = 0; i < nsb; i++) {
        prefetch_ahead(&w[i], sizeof(w[i]));
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        __m512i q[4], sc[4];
        for (int h = 0; h < 2; h++) {
            const __m512i ql = _mm512_loadu_si512(w[i].ql + 64 * h);
            const __m512i hb = _mm512_broadcast_i64x4(load256(w[i].qh + 32 * h));
            q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                       _mm512_and_si512(_mm512_sllv_epi16(hb, shl), m30));
            q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                           _mm512_and_si512(_mm512_srlv_epi16(hb, shr), m30));
        }
        k16_scale_quads(sc16, sc);
        const float dw = h2f(w[i].d);
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)(x + (size_t)r * xs) + i;
            const int bias = hsum_epi32(_mm256_madd_epi16(load256(y->bsums), sc16));
            sumf[r] += dw * y->d * (float)(k16_isum(q, sc, y) - 32 * bias);
        }
    }
    for (int r = 0; r < R; r++)
        out[(size_t)r * os] = sumf[r];
}

KX86_GEMM_BY_ROWS(gemm_q6_k_avx512, QK_K, q6_k_rows, wo)

/* ---- q2_K and q3_K matrix products ----
 * Both store 2-bit quants in one order: element 128k + 32t + l (k < 2, t < 4, l < 32) is bits
 * 2t..2t+1 of qs[32k + l], in 16-element sub-block 8k + 2t + l / 16 (q3_K puts bit 4k + t of
 * hmask[l] on top as bit 2). The single-row kernels (kernels_x86.h) form exact integers per
 * super-block — the unsigned quants times y by sub-block scale, and the offset (q3_K: 4 x its
 * scales, q2_K: its mins) against y's 16-element sums — then one float step. Here the weight side
 * is decoded once per super-block for up to 8 activation rows, 64 elements per zmm (vpmaddubsw
 * pairs, vpdpwssd with the sub-block scales: the same exact sums), and the float step is the
 * single-row kernel's C expression, so every result has its bits. */

/* the 2-bit quants of 64-element step j (= 2k + t / 2): t = 2 (j % 2) in the low 256 bits, t + 1
 * in the high 256 (a 64-bit lane's shift moves each byte's bits 2t.. down to bits 0..1) */
static inline __m512i k23_quants(const uint8_t *qs, int j) {
    const __m512i q = _mm512_broadcast_i64x4(load256(qs + 32 * (j / 2)));
    const int t = 2 * (j % 2);
    const __m512i sh =
        _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi64(2 * t), _mm512_set1_epi64(2 * t + 2));
    return _mm512_and_si512(_mm512_srlv_epi64(q, sh), _mm512_set1_epi8(3));
}

KX86_ALWAYS_INLINE void q2_k_rows(const block_q2_K *w, const uint8_t *x, size_t xs, int64_t nsb,
                                  float *out, size_t os, const int R) {
    float sumf[8];
    for (int r = 0; r < R; r++)
        sumf[r] = 0;
    for (int64_t i = 0; i < nsb; i++) {
        prefetch_ahead(&w[i], sizeof(w[i]));
        const __m128i s = _mm_loadu_si128((const __m128i *)w[i].scales);
        const __m128i m4 = _mm_set1_epi8(0x0F);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(s, m4));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), m4));
        __m512i u[4], sc[4];
        for (int j = 0; j < 4; j++)
            u[j] = k23_quants(w[i].qs, j);
        k16_scale_quads(sc16, sc);
        const float dw = h2f(w[i].d), mw = h2f(w[i].dmin);
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)(x + (size_t)r * xs) + i;
            const int summ = hsum_epi32(_mm256_madd_epi16(load256(y->bsums), mn16));
            const float dall = y->d * dw, dmin = y->d * mw;
            sumf[r] += dall * (float)k16_isum(u, sc, y) - dmin * (float)summ;
        }
    }
    for (int r = 0; r < R; r++)
        out[(size_t)r * os] = sumf[r];
}

KX86_ALWAYS_INLINE void q3_k_rows(const block_q3_K *w, const uint8_t *x, size_t xs, int64_t nsb,
                                  float *out, size_t os, const int R) {
    float sumf[8];
    for (int r = 0; r < R; r++)
        sumf[r] = 0;
    for (int64_t i = 0; i < nsb; i++) {
        prefetch_ahead(&w[i], sizeof(w[i]));
        const __m256i sc16 = _mm256_cvtepi8_epi16(q3_k_scales(w[i].scales));
        const __m512i hm = _mm512_broadcast_i64x4(load256(w[i].hmask)), four = _mm512_set1_epi8(4);
        __m512i u[4];
        for (int j = 0; j < 4; j++) { /* high bits 4k + t (low 256 bits) and 4k + t + 1 (high) */
            const int b = 4 * (j / 2) + 2 * (j % 2);
            const __m512i bit = _mm512_mask_blend_epi64(0xF0, _mm512_set1_epi8((char)(1 << b)),
                                                        _mm512_set1_epi8((char)(1 << (b + 1))));
            const __m512i q = k23_quants(w[i].qs, j);
            u[j] = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hm, bit), q, four);
        }
        __m512i sc[4];
        k16_scale_quads(sc16, sc);
        const float dw = h2f(w[i].d);
        for (int r = 0; r < R; r++) {
            const block_q8_K *y = (const block_q8_K *)(x + (size_t)r * xs) + i;
            const int bias = hsum_epi32(_mm256_madd_epi16(sc16, load256(y->bsums)));
            sumf[r] += dw * y->d * (float)(k16_isum(u, sc, y) - 4 * bias);
        }
    }
    for (int r = 0; r < R; r++)
        out[(size_t)r * os] = sumf[r];
}

KX86_GEMM_BY_ROWS(gemm_q2_k_avx512, QK_K, q2_k_rows, wo)

KX86_GEMM_BY_ROWS(gemm_q3_k_avx512, QK_K, q3_k_rows, wo)

const cpu_kernels *cpu_kernels_avx512_entry(si_type t, int has_bf16);

const cpu_kernels *cpu_kernels_avx512_entry(si_type t, int has_bf16) {
    static const cpu_kernels k_f32 = {.vec_dot_type = SI_TYPE_F32, .quantize_row = quantize_row_f32_x86, .vec_dot = vec_dot_f32_avx512};
    static const cpu_kernels k_f16 = {.vec_dot_type = SI_TYPE_F16, .quantize_row = quantize_row_f16_x86, .vec_dot = vec_dot_f16_avx512,
                                      .gemm = gemm_f16_avx512, .prep_row = prep_row_f16, .prep_size = prep_size_f16};
    static const cpu_kernels k_bf16 = {.vec_dot_type = SI_TYPE_BF16,
                                       .quantize_row = quantize_row_bf16_x86,
                                       .vec_dot = vec_dot_bf16_avx512,
                                       .gemm = gemm_bf16_avx512};
    static const cpu_kernels k_q4_0 = {.vec_dot_type = SI_TYPE_Q8_0, .quantize_row = quantize_row_q8_0_x86, .vec_dot = vec_dot_q4_0_avx512,
                                       .gemm = gemm_q4_0_avx512, .prep_row = prep_row_q4_0, .prep_size = prep_size_q8_groups};
    static const cpu_kernels k_q4_1 = {.vec_dot_type = SI_TYPE_Q8_1, .quantize_row = quantize_row_q8_1_x86, .vec_dot = vec_dot_q4_1_avx512,
                                       .gemm = gemm_q4_1_avx512, .prep_row = prep_row_q4_1, .prep_size = prep_size_q8s_groups};
    static const cpu_kernels k_q5_0 = {.vec_dot_type = SI_TYPE_Q8_0,
                                       .quantize_row = quantize_row_q8_0_x86,
                                       .vec_dot = vec_dot_q5_0_avx512,
                                       .gemm = gemm_q5_0_avx512};
    static const cpu_kernels k_q5_1 = {.vec_dot_type = SI_TYPE_Q8_1,
                                       .quantize_row = quantize_row_q8_1_x86,
                                       .vec_dot = vec_dot_q5_1_avx512,
                                       .gemm = gemm_q5_1_avx512};
    static const cpu_kernels k_q8_0 = {.vec_dot_type = SI_TYPE_Q8_0, .quantize_row = quantize_row_q8_0_x86, .vec_dot = vec_dot_q8_0_avx512,
                                       .gemm = gemm_q8_0_avx512, .prep_row = prep_row_q8_0, .prep_size = prep_size_q8_groups};
    static const cpu_kernels k_iq4_nl = {.vec_dot_type = SI_TYPE_Q8_0, .quantize_row = quantize_row_q8_0_x86, .vec_dot = vec_dot_iq4_nl_avx512,
                                         .gemm = gemm_iq4_nl_avx512, .prep_row = prep_row_q8_0, .prep_size = prep_size_q8_groups};
    static const cpu_kernels k_q4_k = {.vec_dot_type = SI_TYPE_Q8_K, .quantize_row = quantize_row_q8_k_x86, .vec_dot = vec_dot_q4_k_x86,
                                       .gemm = gemm_q4_k_avx512};
    static const cpu_kernels k_iq4_xs = {.vec_dot_type = SI_TYPE_Q8_K,
                                         .quantize_row = quantize_row_q8_k_x86,
                                         .vec_dot = vec_dot_iq4_xs_x86,
                                         .gemm = gemm_iq4_xs_avx512};
    static const cpu_kernels k_q5_k = {.vec_dot_type = SI_TYPE_Q8_K,
                                       .quantize_row = quantize_row_q8_k_x86,
                                       .vec_dot = vec_dot_q5_k_x86,
                                       .gemm = gemm_q5_k_avx512};
    static const cpu_kernels k_q2_k = {.vec_dot_type = SI_TYPE_Q8_K,
                                       .quantize_row = quantize_row_q8_k_x86,
                                       .vec_dot = vec_dot_q2_k_x86,
                                       .gemm = gemm_q2_k_avx512};
    static const cpu_kernels k_q3_k = {.vec_dot_type = SI_TYPE_Q8_K,
                                       .quantize_row = quantize_row_q8_k_x86,
                                       .vec_dot = vec_dot_q3_k_x86,
                                       .gemm = gemm_q3_k_avx512};
    static const cpu_kernels k_q6_k = {.vec_dot_type = SI_TYPE_Q8_K,
                                       .quantize_row = quantize_row_q8_k_x86,
                                       .vec_dot = vec_dot_q6_k_x86,
                                       .gemm = gemm_q6_k_avx512};
    switch (t) {
    case SI_TYPE_Q4_0: return &k_q4_0;
    case SI_TYPE_Q4_K: return &k_q4_k;
    case SI_TYPE_Q5_K: return &k_q5_k;
    case SI_TYPE_Q2_K: return &k_q2_k;
    case SI_TYPE_Q3_K: return &k_q3_k;
    case SI_TYPE_Q6_K: return &k_q6_k;
    case SI_TYPE_IQ4_XS: return &k_iq4_xs;
    case SI_TYPE_Q5_0: return &k_q5_0;
    case SI_TYPE_Q5_1: return &k_q5_1;
    case SI_TYPE_Q8_0: return &k_q8_0;
    case SI_TYPE_Q4_1: return &k_q4_1;
    case SI_TYPE_IQ4_NL: return &k_iq4_nl;
    case SI_TYPE_F32: return &k_f32;
    case SI_TYPE_F16: return &k_f16;
    case SI_TYPE_BF16: return has_bf16 ? &k_bf16 : NULL;
    default: return kernels_x86_entry(t);
    }
}
#else
typedef int kernels_avx512_unused;
#endif
