/* kernels_x86.h — 256-bit kernels shared by kernels_avx2.c and kernels_avx512.c.
 *
 * Included (never compiled on its own) by both ISA files, which build it with their own target
 * flags; every function is static, so each file gets its own copy. The includer defines
 *     static inline __m256i mul_sum_us8(__m256i acc, __m256i u, __m256i s);
 * = acc + per-int32-lane sums of four u8 x s8 products (AVX2: maddubs + madd; AVX-512 VNNI:
 * vpdpbusd). The values here never reach the int16 saturation of maddubs, so both give equal sums.
 *
 * Technique (llama.cpp's): activations are 8-bit blocks (quantize_row_*), weights are unpacked to
 * bytes in registers, and the integer dot of each block is exact; only the float accumulation
 * (d_w * d_x * isum, lane-wise with FMA) differs in order from the scalar reference.
 * Signed x signed products use the sign trick: |a| (unsigned) times b * sign(a), which needs
 * b != -128 — true for every activation our quantisers produce (|q| <= 127).
 * Weights stored unsigned (q4_1, q5_1, k-quants) go straight into maddubs as the unsigned side.
 *
 * The quantisers are bit-identical to quant/'s from_float: the same float operations in the same
 * order (x * id, one multiply), roundf's half-away-from-zero done exactly as trunc(v) plus
 * +-1 when |v - trunc(v)| >= 0.5 (NOTE: adding +-0.5 then truncating is wrong for
 * 0.49999997f, whose sum rounds up to 1), and ggml's nearest_int (ties to even) for q8_K.
 * NaN inputs are outside that promise. */
#ifndef SI_KERNELS_X86_H
#define SI_KERNELS_X86_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "core/fp16.h"
#include "quant/quant_blocks.h"

/* ---- helpers ---- */

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

static inline float hmax_ps(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* sum of a[i] * b[i] per int32 lane, a and b signed, b != -128 */
static inline __m256i dot_s8(__m256i acc, __m256i a, __m256i b) {
    return mul_sum_us8(acc, _mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles (elements 0-15), then high (16-31) */
static inline __m256i unpack_nibbles(const uint8_t *qs) {
    const __m128i t = _mm_loadu_si128((const __m128i *)qs);
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

/* byte j = 0xFF where bit j of bits is set */
static inline __m256i bits_to_bytes(uint32_t bits) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

static inline uint32_t load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4); /* x86 is little-endian, as the file */
    return v;
}

/* roundf (half away from zero) of each lane, exactly */
static inline __m256 round_away(__m256 v) {
    const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
    const __m256 ge = _mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    return _mm256_add_ps(t, _mm256_and_ps(ge, _mm256_or_ps(sign, _mm256_set1_ps(1.0f))));
}

/* four vectors of 8 int32 in [-128, 127] -> 32 int8 in order */
static inline __m256i pack_i32x32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i v = _mm256_packs_epi16(ab, cd); /* dwords: a0 b0 c0 d0 a1 b1 c1 d1 */
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* ---- activation quantisers (bit-identical to quant/'s from_float) ---- */

/* 32 floats -> 32 roundf(x * id) in int8; returns their sum; *d_out = amax / 127 */
static inline int quantize_block32(const float *x, int8_t *q, float *d_out) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v[4];
    for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
    __m256 m = _mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask));
    m = _mm256_max_ps(m, _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    const float amax = hmax_ps(m);
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i qi[4];
    for (int k = 0; k < 4; k++) qi[k] = _mm256_cvttps_epi32(round_away(_mm256_mul_ps(v[k], vid)));
    _mm256_storeu_si256((__m256i *)q, pack_i32x32(qi[0], qi[1], qi[2], qi[3]));
    *d_out = d;
    return hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
}

static void quantize_row_q8_0_x86(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float d;
        (void)quantize_block32(x, y[i].qs, &d);
        y[i].d = fp32_to_fp16(d);
    }
}

static void quantize_row_q8_1_x86(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float d;
        const int sum = quantize_block32(x, y[i].qs, &d);
        y[i].d = fp32_to_fp16(d);
        y[i].s = fp32_to_fp16(sum * d);
    }
}

static void quantize_row_q8_k_x86(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < QK_K; k += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + k), abs_mask));
        const float amax = hmax_ps(m);
        if (!amax) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        /* the reference keeps the sign of the first element of largest magnitude */
        const __m256 vam = _mm256_set1_ps(amax);
        float max = 0;
        for (int k = 0; k < QK_K; k += 8) {
            const int mask = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + k), abs_mask), vam, _CMP_EQ_OQ));
            if (mask) {
                max = x[k + __builtin_ctz((unsigned)mask)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 vis = _mm256_set1_ps(iscale);
        const __m256i hi = _mm256_set1_epi32(127);
        for (int g = 0; g < QK_K; g += 32) {
            __m256i qi[4];
            for (int k = 0; k < 4; k++) {
                const __m256 v = _mm256_mul_ps(vis, _mm256_loadu_ps(x + g + 8 * k));
                qi[k] = _mm256_min_epi32(_mm256_cvtps_epi32(
                    _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), hi);
            }
            _mm256_storeu_si256((__m256i *)(y[i].qs + g), pack_i32x32(qi[0], qi[1], qi[2], qi[3]));
            y[i].bsums[g / 16] = (int16_t)hsum_epi32(_mm256_add_epi32(qi[0], qi[1]));
            y[i].bsums[g / 16 + 1] = (int16_t)hsum_epi32(_mm256_add_epi32(qi[2], qi[3]));
        }
        y[i].d = 1 / iscale;
    }
}

static void quantize_row_f16_x86(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(y + i), h);
    }
    for (; i < n; i++) y[i] = fp32_to_fp16(x[i]);
}

/* bf16 round to nearest even, NaN -> quiet NaN, as fp32_to_bf16 */
static void quantize_row_bf16_x86(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i r[2];
        for (int k = 0; k < 2; k++) {
            const __m256i b = _mm256_castps_si256(_mm256_loadu_ps(x + i + 8 * k));
            const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
            const __m256i rne = _mm256_srli_epi32(
                _mm256_add_epi32(b, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
            const __m256i nanv = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(64));
            const __m256i isnan = _mm256_cmpgt_epi32(
                _mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
            r[k] = _mm256_and_si256(_mm256_blendv_epi8(rne, nanv, isnan), _mm256_set1_epi32(0xffff));
        }
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i *)(y + i), p);
    }
    for (; i < n; i++) y[i] = fp32_to_bf16(x[i]);
}

static void quantize_row_f32_x86(const float *x, void *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

/* ---- legacy block dots ----
 * Four blocks per step: their leading fp16 pairs (d and m of the weights, d and s of q8_1) are
 * converted by one vcvtph2ps and multiplied at once; the even lanes are the block scales
 * d_w * d_x, the odd lanes of q4_1 / q5_1 the m * s terms. */

/* Four blocks' leading fp16 pairs (d and m, or d and s; for types with only d the second half is
 * the first quants, converted and ignored) -> 8 floats [d0, m0, d1, m1, d2, m2, d3, m3]. */
static inline __m256 head_halves4(const void *base, size_t stride) {
    const uint8_t *p = base;
    __m128i v = _mm_cvtsi32_si128((int)load_u32(p));
    v = _mm_insert_epi32(v, (int)load_u32(p + stride), 1);
    v = _mm_insert_epi32(v, (int)load_u32(p + 2 * stride), 2);
    v = _mm_insert_epi32(v, (int)load_u32(p + 3 * stride), 3);
    return _mm256_cvtph_ps(v);
}

/* lane 2k of p (block k's scale) broadcast to all 8 lanes */
static inline __m256 spread_scale(__m256 p, int k) { return _mm256_permutevar8x32_ps(p, _mm256_set1_epi32(2 * k)); }

/* NOTE: decode streams every weight byte from DRAM once, and at two threads the hardware
 * prefetchers alone leave the cores waiting (TinyLlama q4_0: 20 t/s, 56% of the DRAM roofline).
 * The kernels that decode loops over weight rows (kernels_avx512.c's multi-row ones, and the
 * single-row ones here, which the types without those run) ask for the weight bytes
 * PREFETCH_DIST ahead of the block or group they are decoding (a few rows of a 2048-wide matrix:
 * far enough to cover DRAM latency, near enough to stay in L1/L2 until used): 4096 measured best
 * of 1-16 KiB for q4_0. */
#ifndef PREFETCH_DIST
#define PREFETCH_DIST 4096
#endif

/* prefetch the lines of [p, p + bytes) shifted PREFETCH_DIST bytes ahead (a prefetch never
 * faults, so running past the end of the weights is harmless). NOTE: __builtin_prefetch, not
 * _mm_prefetch: GCC 12 at -O1 and above emitted no instruction for _mm_prefetch here. */
static inline void prefetch_ahead(const void *p, size_t bytes) {
    const uintptr_t a = (uintptr_t)p + PREFETCH_DIST; /* an address, not a pointer past the object */
    for (size_t k = 0; k < bytes; k += 64) __builtin_prefetch((const void *)(a + k), 0, 3);
}

/* sum of the odd lanes (the m * s terms of q4_1 / q5_1) */
static inline float sum_odd(__m256 v) { return hsum_ps(_mm256_blend_ps(_mm256_setzero_ps(), v, 0xAA)); }

static inline __m256i q4_0_bytes(const block_q4_0 *b) {
    return _mm256_sub_epi8(unpack_nibbles(b->qs), _mm256_set1_epi8(8));
}

/* 5-bit quants: nibble | bit 4 from qh */
static inline __m256i q5_bytes(const uint8_t *qs, const uint8_t *qh) {
    const __m256i hb = _mm256_and_si256(bits_to_bytes(load_u32(qh)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(unpack_nibbles(qs), hb);
}

/* IQ4_NL / IQ4_XS: 16 bytes of nibbles as their table values, in unpack_nibbles' order */
static inline __m256i iq4nl_bytes(const uint8_t *qs) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl));
    return _mm256_shuffle_epi8(table, unpack_nibbles(qs));
}

/* ---- k-quant dots: per super-block an exact int32 sum, then one float multiply ---- */

/* sum over 32 elements of u[l] * y[l] * scale, u unsigned (<= 63), y activations; sc holds the
 * scale of elements 0-15 in int16 lanes 0-7 and that of elements 16-31 in lanes 8-15 */
static inline __m256i kq_dot32v(__m256i u, const int8_t *y, __m256i sc) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, load256(y)), sc);
}

/* s8: both 128-bit lanes hold 8 int16 scales s[0..7]; returns [s[2k] x 8 | s[2k+1] x 8] */
static inline __m256i scale_pair(__m256i s8, int k) {
    static const uint8_t ctrl[4][32] = {
        {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
        {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
        {8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
        {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15},
    };
    return _mm256_shuffle_epi8(s8, load256(ctrl[k]));
}

/* 8 int16 scales from memory into both 128-bit lanes */
static inline __m256i scales8(const int16_t *s) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)s));
}

/* s8: both 128-bit lanes hold 8 int16 scales; returns s[j] in every int16 lane */
static inline __m256i scale_bcast(__m256i s8, int j) {
    const __m256i ctrl = _mm256_set1_epi16((short)(0x0100 * (2 * j + 1) + 2 * j));
    return _mm256_shuffle_epi8(s8, ctrl);
}

/* q4_K / q5_K: the 8 six-bit scales (as int16, in both 128-bit lanes) and, in *mdup, the 8 mins
 * each twice (16 int16: madd against a row's bsums gives sum_j min[j] * (bsums[2j] +
 * bsums[2j + 1])). The 12 packed bytes (quant_k.c's get_scale_min_k4) as three words a, b, c:
 * scales / mins 0-3 are the low 6 bits of a / b, scales / mins 4-7 take their low nibble from c
 * (low / high half of each byte) and bits 4-5 from the top bits of a / b. */
static inline __m256i k4_scales(const uint8_t *q, __m256i *mdup) {
    const uint32_t a = load_u32(q), b = load_u32(q + 4), c = load_u32(q + 8);
    const uint32_t sc_lo = a & 0x3f3f3f3fu, mn_lo = b & 0x3f3f3f3fu;
    const uint32_t sc_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
    const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
    const __m256i v = _mm256_cvtepu8_epi16(_mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)mn_lo, (int)mn_hi));
    const __m128i mins = _mm256_extracti128_si256(v, 1);
    *mdup = _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins));
    return _mm256_broadcastsi128_si256(_mm256_castsi256_si128(v));
}

/* q3_K's 16 sub-block scales minus 32, int8, in sub-block order, from the 12 packed bytes as
 * words a, b, c: low nibbles in a / b (low then high half of each byte), bit pairs 4-5 from c at
 * shifts 0, 2, 4, 6 (quant_k.c's q3_k_scale) */
static inline __m128i q3_k_scales(const uint8_t *scales) {
    const uint32_t a = load_u32(scales), b = load_u32(scales + 4), c = load_u32(scales + 8);
    return _mm_sub_epi8(_mm_setr_epi32((int)((a & 0x0f0f0f0fu) | ((c << 4) & 0x30303030u)),
                                       (int)((b & 0x0f0f0f0fu) | ((c << 2) & 0x30303030u)),
                                       (int)(((a >> 4) & 0x0f0f0f0fu) | (c & 0x30303030u)),
                                       (int)(((b >> 4) & 0x0f0f0f0fu) | ((c >> 2) & 0x30303030u))),
                        _mm_set1_epi8(32));
}

/* ---- float dots (256-bit; kernels_avx512.c has wider ones) ---- */

static float vec_dot_f32_x86(const void *vw, const void *vx, int64_t n) {
    const float *a = vw, *b = vx;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += a[i] * b[i];
    return sum;
}

static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

static inline __m256 load_bf16(const uint16_t *p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* ---- helpers for multi-row kernels (cpu_kernels.h's gemm) ----
 * A multi-row kernel keeps one accumulator set per (weight row, activation row) in registers;
 * the row counts are compile-time constants in every instantiation (KX86_SWITCH_R below) so the
 * accumulator arrays are registers, not memory. */

#define KX86_ALWAYS_INLINE static inline __attribute__((always_inline))

/* kern(args..., R) with R = r (1 <= r <= 8) as a compile-time constant */
#define KX86_SWITCH_R(r, kern, ...)                                                                \
    do {                                                                                          \
        switch (r) {                                                                              \
        case 1: kern(__VA_ARGS__, 1); break;                                                      \
        case 2: kern(__VA_ARGS__, 2); break;                                                      \
        case 3: kern(__VA_ARGS__, 3); break;                                                      \
        case 4: kern(__VA_ARGS__, 4); break;                                                      \
        case 5: kern(__VA_ARGS__, 5); break;                                                      \
        case 6: kern(__VA_ARGS__, 6); break;                                                      \
        case 7: kern(__VA_ARGS__, 7); break;                                                      \
        default: kern(__VA_ARGS__, 8); break;                                                     \
        }                                                                                         \
    } while (0)

/* the same for 1 <= r <= 16 */
#define KX86_SWITCH_R16(r, kern, ...)                                                              \
    do {                                                                                          \
        switch (r) {                                                                              \
        case 1: kern(__VA_ARGS__, 1); break;                                                      \
        case 2: kern(__VA_ARGS__, 2); break;                                                      \
        case 3: kern(__VA_ARGS__, 3); break;                                                      \
        case 4: kern(__VA_ARGS__, 4); break;                                                      \
        case 5: kern(__VA_ARGS__, 5); break;                                                      \
        case 6: kern(__VA_ARGS__, 6); break;                                                      \
        case 7: kern(__VA_ARGS__, 7); break;                                                      \
        case 8: kern(__VA_ARGS__, 8); break;                                                      \
        case 9: kern(__VA_ARGS__, 9); break;                                                      \
        case 10: kern(__VA_ARGS__, 10); break;                                                    \
        case 11: kern(__VA_ARGS__, 11); break;                                                    \
        case 12: kern(__VA_ARGS__, 12); break;                                                    \
        case 13: kern(__VA_ARGS__, 13); break;                                                    \
        case 14: kern(__VA_ARGS__, 14); break;                                                    \
        case 15: kern(__VA_ARGS__, 15); break;                                                    \
        default: kern(__VA_ARGS__, 16); break;                                                    \
        }                                                                                         \
    } while (0)

/* gemm (cpu_kernels.h) through a multi-row kernel: up to RT (<= 8) activation rows a call, for
 * every weight row wo; the kernel's arguments before the activation rows are __VA_ARGS__ (wo
 * first), after them the count n / QK (blocks, or elements for QK = 1) */
#define KX86_GEMM_BY_ROW_TILES(name, QK, RT, rows, ...)                                            \
    static void name(const void *w, size_t ws, int n_w, const void *x, size_t xs, int n_x,         \
                     int64_t n, float *out, size_t os) {                                           \
        for (int r0 = 0; r0 < n_x; r0 += (RT)) {                                                   \
            const uint8_t *xr = (const uint8_t *)x + (size_t)r0 * xs;                              \
            const int left = n_x - r0 < (RT) ? n_x - r0 : (RT);                                    \
            for (int o = 0; o < n_w; o++) {                                                        \
                const void *wo = (const uint8_t *)w + (size_t)o * ws;                              \
                KX86_SWITCH_R(left, rows, __VA_ARGS__, xr, xs, n / (QK),                           \
                              out + (size_t)r0 * os + o, os);                                      \
            }                                                                                      \
        }                                                                                          \
    }
#define KX86_GEMM_BY_ROWS(name, QK, rows, ...)                                                     \
    KX86_GEMM_BY_ROW_TILES(name, QK, 8, rows, __VA_ARGS__)

/* vec_dot (cpu_kernels.h) as a multi-row kernel's one-row case, so that a row's result is the
 * same alone or in a batch; __VA_ARGS__ as KX86_GEMM_BY_ROWS's, the weight row w first */
#define KX86_VEC_DOT_BY_ROWS(name, QK, rows, ...)                                                  \
    static float name(const void *w, const void *x, int64_t n) {                                   \
        float r;                                                                                   \
        rows(__VA_ARGS__, (const uint8_t *)x, 0, n / (QK), &r, 0, 1);                              \
        return r;                                                                                  \
    }

/* ---- the 32-element block types: one kernel for 1-8 activation rows ----
 * Q4_0, IQ4_NL, Q8_0 and Q5_0 have signed weight bytes (Q4_0's nibble - 8, IQ4_NL's table value,
 * Q8_0's quants, Q5_0's 5-bit value - 16) against q8_0 activations; Q4_1 and Q5_1 have unsigned
 * ones and a min m_w a block, against q8_1 (whose s_x = d_x * sum of the block's q). Four blocks
 * per step; per activation row, two accumulators take the blocks alternately:
 *     p = head_halves4(w) * head_halves4(x): lane 2k = d_w d_x of block i+k, lane 2k+1 = m_w s_x
 *     acc0 = fma(p_0, (float)isum_i, acc0); acc1 = fma(p_1, (float)isum_i+1, acc1); ... i+2, i+3
 *     with a min: accm += p (its odd lanes)
 *     a tail of 1-3 blocks: acc0 = fma(d_w d_x, (float)isum, acc0) each, summ += m_w s_x
 *     result hsum(acc0 + acc1), with a min + sum_odd(accm) + summ
 * The weight blocks' bytes are made once a step for every activation row. vec_dot is the one-row
 * case, so a row's result is the same alone or in a batch (cpu_kernels.h's gemm). */
enum { B32_Q4_0, B32_IQ4_NL, B32_Q8_0, B32_Q5_0, B32_Q4_1, B32_Q5_1 };

static inline int b32_has_min(int kind) { return kind == B32_Q4_1 || kind == B32_Q5_1; }

static inline size_t b32_block_bytes(int kind) {
    _Static_assert(sizeof(block_iq4_nl) == sizeof(block_q4_0), "IQ4_NL has Q4_0's layout");
    switch (kind) {
    case B32_Q8_0: return sizeof(block_q8_0);
    case B32_Q5_0: return sizeof(block_q5_0);
    case B32_Q4_1: return sizeof(block_q4_1);
    case B32_Q5_1: return sizeof(block_q5_1);
    default: return sizeof(block_q4_0);
    }
}

/* the 32 weight bytes of the block at blk */
static inline __m256i b32_bytes(const uint8_t *blk, int kind) {
    switch (kind) {
    case B32_Q8_0: return load256(((const block_q8_0 *)blk)->qs);
    case B32_IQ4_NL: return iq4nl_bytes(((const block_iq4_nl *)blk)->qs);
    case B32_Q5_0: {
        const block_q5_0 *b = (const block_q5_0 *)blk;
        return _mm256_sub_epi8(q5_bytes(b->qs, b->qh), _mm256_set1_epi8(16));
    }
    case B32_Q4_1: return unpack_nibbles(((const block_q4_1 *)blk)->qs);
    case B32_Q5_1: {
        const block_q5_1 *b = (const block_q5_1 *)blk;
        return q5_bytes(b->qs, b->qh);
    }
    default: return q4_0_bytes((const block_q4_0 *)blk);
    }
}

/* isum of one block: weight bytes q against the activation block at x (q8_0 or q8_1) */
static inline __m256i b32_isum(__m256i q, const uint8_t *x, int kind) {
    const __m256i z = _mm256_setzero_si256();
    if (b32_has_min(kind)) return mul_sum_us8(z, q, load256(((const block_q8_1 *)x)->qs));
    return dot_s8(z, q, load256(((const block_q8_0 *)x)->qs));
}

KX86_ALWAYS_INLINE void b32_rows(const void *vw, const int kind, const uint8_t *xr, size_t xs,
                                 int64_t nb, float *out, size_t os, const int R) {
    const uint8_t *w = vw;
    const size_t wb = b32_block_bytes(kind);
    const int min = b32_has_min(kind);
    const size_t xb = min ? sizeof(block_q8_1) : sizeof(block_q8_0);
    __m256 acc0[8], acc1[8], accm[8]; /* KX86_SWITCH_R instantiates R up to 8 */
    float summ[8];
    for (int r = 0; r < R; r++) {
        acc0[r] = acc1[r] = accm[r] = _mm256_setzero_ps();
        summ[r] = 0;
    }
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        prefetch_ahead(w + i * wb, 4 * wb);
        const __m256 hw = head_halves4(w + i * wb, wb);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = b32_bytes(w + (i + k) * wb, kind);
        for (int r = 0; r < R; r++) {
            const uint8_t *x = xr + (size_t)r * xs + i * xb;
            const __m256 p = _mm256_mul_ps(hw, head_halves4(x, xb));
            if (min) accm[r] = _mm256_add_ps(accm[r], p);
            acc0[r] = _mm256_fmadd_ps(spread_scale(p, 0),
                                      _mm256_cvtepi32_ps(b32_isum(q[0], x, kind)), acc0[r]);
            acc1[r] = _mm256_fmadd_ps(spread_scale(p, 1),
                                      _mm256_cvtepi32_ps(b32_isum(q[1], x + xb, kind)), acc1[r]);
            acc0[r] = _mm256_fmadd_ps(
                spread_scale(p, 2), _mm256_cvtepi32_ps(b32_isum(q[2], x + 2 * xb, kind)), acc0[r]);
            acc1[r] = _mm256_fmadd_ps(
                spread_scale(p, 3), _mm256_cvtepi32_ps(b32_isum(q[3], x + 3 * xb, kind)), acc1[r]);
        }
    }
    for (; i < nb; i++) {
        const uint8_t *blk = w + i * wb;
        const __m256i q = b32_bytes(blk, kind);
        uint16_t h[2]; /* every block leads with d, then (with a min) m; q8_1 with d and s */
        memcpy(h, blk, sizeof(h));
        for (int r = 0; r < R; r++) {
            const uint8_t *x = xr + (size_t)r * xs + i * xb;
            uint16_t hx[2];
            memcpy(hx, x, sizeof(hx));
            acc0[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(h[0]) * h2f(hx[0])),
                                      _mm256_cvtepi32_ps(b32_isum(q, x, kind)), acc0[r]);
            if (min) summ[r] += h2f(h[1]) * h2f(hx[1]);
        }
    }
    for (int r = 0; r < R; r++) {
        const float s = hsum_ps(_mm256_add_ps(acc0[r], acc1[r]));
        out[(size_t)r * os] = min ? s + sum_odd(accm[r]) + summ[r] : s;
    }
}

KX86_VEC_DOT_BY_ROWS(vec_dot_q4_0_x86, QK4_0, b32_rows, w, B32_Q4_0)
KX86_VEC_DOT_BY_ROWS(vec_dot_iq4_nl_x86, QK4_NL, b32_rows, w, B32_IQ4_NL)
KX86_VEC_DOT_BY_ROWS(vec_dot_q8_0_x86, QK8_0, b32_rows, w, B32_Q8_0)
KX86_VEC_DOT_BY_ROWS(vec_dot_q5_0_x86, QK5_0, b32_rows, w, B32_Q5_0)
KX86_VEC_DOT_BY_ROWS(vec_dot_q4_1_x86, QK4_1, b32_rows, w, B32_Q4_1)
KX86_VEC_DOT_BY_ROWS(vec_dot_q5_1_x86, QK5_1, b32_rows, w, B32_Q5_1)
KX86_GEMM_BY_ROWS(gemm_q4_0_x86, QK4_0, b32_rows, wo, B32_Q4_0)
KX86_GEMM_BY_ROWS(gemm_iq4_nl_x86, QK4_NL, b32_rows, wo, B32_IQ4_NL)
KX86_GEMM_BY_ROWS(gemm_q8_0_x86, QK8_0, b32_rows, wo, B32_Q8_0)
KX86_GEMM_BY_ROWS(gemm_q5_0_x86, QK5_0, b32_rows, wo, B32_Q5_0)
KX86_GEMM_BY_ROWS(gemm_q4_1_x86, QK4_1, b32_rows, wo, B32_Q4_1)
KX86_GEMM_BY_ROWS(gemm_q5_1_x86, QK5_1, b32_rows, wo, B32_Q5_1)

/* ---- the k-quants and IQ4_XS against q8_K: one kernel for 1-8 activation rows ----
 * A super-block of 256 is 8 steps of 32 elements; step t's unsigned weight bytes u (IQ4_XS:
 * signed table values v) and int16 sub-block scales are made once for every activation row, and
 * each row adds them into an exact int32 sum:
 *     isum += madd(maddubs(u, y_t), scales_t)
 *     IQ4_XS: isum += madd(maddubs(|v|, y_t sign(v)), ls_t - 32)
 * (maddubs' int16 pairs stay below its saturation: u <= 63 or |v| <= 127 against |y| <= 127).
 * Then one float update of the row's sum a super-block, each type's expression (the AVX-512
 * matrix kernels, which the AVX-512 table pairs with these as vec_dot, end with the same ones):
 *     Q4_K / Q5_K  d_w d_x isum - dmin_w d_x sum_j min_j (bsums_2j + bsums_2j+1)
 *     Q6_K / Q3_K  d_w d_x (isum - c sum_j sc_j bsums_j), c = 32 / 4 (their quants' offset)
 *     Q2_K         d_x d_w isum - d_x dmin_w sum_j min_j bsums_j
 *     IQ4_XS       d_w d_x isum (the scales' offset is inside isum)
 * vec_dot is the one-row case, so a row's result is the same alone or in a batch. */
enum { KQ_Q2_K, KQ_Q3_K, KQ_Q4_K, KQ_Q5_K, KQ_Q6_K, KQ_IQ4_XS };

static inline size_t kq_block_bytes(int kind) {
    switch (kind) {
    case KQ_Q2_K: return sizeof(block_q2_K);
    case KQ_Q3_K: return sizeof(block_q3_K);
    case KQ_Q4_K: return sizeof(block_q4_K);
    case KQ_Q5_K: return sizeof(block_q5_K);
    case KQ_Q6_K: return sizeof(block_q6_K);
    default: return sizeof(block_iq4_xs);
    }
}

/* what a super-block's steps and row updates share (by kind):
 *   Q4_K / Q5_K  a: the 8 scales in both lanes, b: the mins each twice, c: Q5_K's qh
 *   Q6_K         a: the 16 scales as int16
 *   Q3_K         a: the 16 scales - 32 as int16, c: hmask
 *   Q2_K         a: the 16 scales as int16, b: the 16 mins */
typedef struct {
    __m256i a, b, c;
} kq_head;

static inline kq_head kq_head_make(const uint8_t *blk, int kind) {
    kq_head h = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    switch (kind) {
    case KQ_Q4_K: h.a = k4_scales(((const block_q4_K *)blk)->scales, &h.b); break;
    case KQ_Q5_K:
        h.a = k4_scales(((const block_q5_K *)blk)->scales, &h.b);
        h.c = load256(((const block_q5_K *)blk)->qh);
        break;
    case KQ_Q6_K:
        h.a = _mm256_cvtepi8_epi16(
            _mm_loadu_si128((const __m128i *)((const block_q6_K *)blk)->scales));
        break;
    case KQ_Q3_K:
        h.a = _mm256_cvtepi8_epi16(q3_k_scales(((const block_q3_K *)blk)->scales));
        h.c = load256(((const block_q3_K *)blk)->hmask);
        break;
    case KQ_Q2_K: {
        const __m256i sm = _mm256_cvtepu8_epi16(
            _mm_loadu_si128((const __m128i *)((const block_q2_K *)blk)->scales));
        h.a = _mm256_and_si256(sm, _mm256_set1_epi16(0xF));
        h.b = _mm256_srli_epi16(sm, 4);
        break;
    }
    default: break;
    }
    return h;
}

/* the 16 int16 lanes' scales of 8-lane half k (< 2) of a 16-scale vector, in both 128-bit lanes */
static inline __m256i kq_half(__m256i s16, int k) {
    return k ? _mm256_permute2x128_si256(s16, s16, 0x11)
             : _mm256_permute2x128_si256(s16, s16, 0x00);
}

/* byte l = v where bit t of byte l of bits is set, else 0 */
static inline __m256i kq_bit_bytes(__m256i bits, int t, char v) {
    const __m256i mb = _mm256_set1_epi8((char)(1 << t));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bits, mb), mb), _mm256_set1_epi8(v));
}

/* step t (elements 32t..32t+31) of the super-block at blk: its weight bytes and scales */
static inline __m256i kq_step(const uint8_t *blk, const kq_head *h, int kind, int t, __m256i *sc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    switch (kind) {
    case KQ_Q4_K:
    case KQ_Q5_K: { /* 64-element j = t / 2: low nibbles, then high */
        const uint8_t *qs =
            kind == KQ_Q5_K ? ((const block_q5_K *)blk)->qs : ((const block_q4_K *)blk)->qs;
        const __m256i q = load256(qs + 32 * (t / 2));
        __m256i u = _mm256_and_si256(t % 2 ? _mm256_srli_epi16(q, 4) : q, m4);
        if (kind == KQ_Q5_K) /* qh bit t of byte l: bit 4 of element 32t + l */
            u = _mm256_or_si256(u, kq_bit_bytes(h->c, t, 0x10));
        *sc = scale_bcast(h->a, t);
        return u;
    }
    case KQ_Q6_K: { /* half t / 4, quarter k: ql's low (k < 2) or high nibbles, qh bits 2k, 2k+1 */
        const block_q6_K *b = (const block_q6_K *)blk;
        const int k = t % 4;
        const __m256i q = load256(b->ql + 64 * (t / 4) + 32 * (k % 2));
        const __m256i hb = load256(b->qh + 32 * (t / 4));
        const __m256i hi = k == 0   ? _mm256_slli_epi16(hb, 4)
                           : k == 1 ? _mm256_slli_epi16(hb, 2)
                           : k == 2 ? hb
                                    : _mm256_srli_epi16(hb, 2);
        *sc = scale_pair(kq_half(h->a, t / 4), k);
        return _mm256_or_si256(_mm256_and_si256(k < 2 ? q : _mm256_srli_epi16(q, 4), m4),
                               _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
    }
    case KQ_Q2_K:
    case KQ_Q3_K: { /* bits 2 (t % 4) of qs[32 (t / 4) + l]; Q3_K: | hmask bit t as 4 */
        const uint8_t *qs =
            kind == KQ_Q3_K ? ((const block_q3_K *)blk)->qs : ((const block_q2_K *)blk)->qs;
        __m256i u =
            _mm256_and_si256(_mm256_srli_epi16(load256(qs + 32 * (t / 4)), 2 * (t % 4)), m3);
        if (kind == KQ_Q3_K) u = _mm256_or_si256(u, kq_bit_bytes(h->c, t, 4));
        *sc = scale_pair(kq_half(h->a, t / 4), t % 4);
        return u;
    }
    default: { /* IQ4_XS: signed table values; 6-bit scale ls - 32 */
        const block_iq4_xs *b = (const block_iq4_xs *)blk;
        const int ls =
            ((b->scales_l[t / 2] >> 4 * (t % 2)) & 0xF) | (((b->scales_h >> 2 * t) & 3) << 4);
        *sc = _mm256_set1_epi16((short)(ls - 32));
        return iq4nl_bytes(b->qs + 16 * t);
    }
    }
}

/* one row's step: the weight bytes u and scales sc against the row's 32 activations at y */
static inline __m256i kq_dot(__m256i isum, __m256i u, __m256i sc, const int8_t *y, int kind) {
    const __m256i v = load256(y);
    const __m256i p16 = kind == KQ_IQ4_XS
                            ? _mm256_maddubs_epi16(_mm256_sign_epi8(u, u), _mm256_sign_epi8(v, u))
                            : _mm256_maddubs_epi16(u, v);
    return _mm256_add_epi32(isum, _mm256_madd_epi16(p16, sc));
}

/* one row's float update of a super-block (the expressions above) */
static inline float kq_finish(const uint8_t *blk, const kq_head *h, int kind, const block_q8_K *x,
                              int isum) {
    const __m256i bsums = load256(x->bsums);
    switch (kind) {
    case KQ_Q4_K:
    case KQ_Q5_K: {
        const uint16_t *dd = (const uint16_t *)blk; /* d, dmin lead both */
        const int summ = hsum_epi32(_mm256_madd_epi16(bsums, h->b));
        const float d = h2f(dd[0]) * x->d, dmin = h2f(dd[1]) * x->d;
        return d * (float)isum - dmin * (float)summ;
    }
    case KQ_Q6_K:
        return h2f(((const block_q6_K *)blk)->d) * x->d *
               (float)(isum - 32 * hsum_epi32(_mm256_madd_epi16(bsums, h->a)));
    case KQ_Q3_K:
        return h2f(((const block_q3_K *)blk)->d) * x->d *
               (float)(isum - 4 * hsum_epi32(_mm256_madd_epi16(h->a, bsums)));
    case KQ_Q2_K: {
        const block_q2_K *b = (const block_q2_K *)blk;
        const int summ = hsum_epi32(_mm256_madd_epi16(bsums, h->b));
        const float dall = x->d * h2f(b->d), dmin = x->d * h2f(b->dmin);
        return dall * (float)isum - dmin * (float)summ;
    }
    default: return h2f(((const block_iq4_xs *)blk)->d) * x->d * (float)isum;
    }
}

KX86_ALWAYS_INLINE void kq_rows(const void *vw, const int kind, const uint8_t *xr, size_t xs,
                                int64_t nsb, float *out, size_t os, const int R) {
    const uint8_t *w = vw;
    const size_t wb = kq_block_bytes(kind);
    float sumf[8]; /* KX86_SWITCH_R instantiates R up to 8 */
    for (int r = 0; r < R; r++)
        sumf[r] = 0;
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *blk = w + i * wb;
        prefetch_ahead(blk, wb);
        const kq_head h = kq_head_make(blk, kind);
        __m256i isum[8];
        for (int r = 0; r < R; r++)
            isum[r] = _mm256_setzero_si256();
        for (int t = 0; t < 8; t++) {
            __m256i sc;
            const __m256i u = kq_step(blk, &h, kind, t, &sc);
            for (int r = 0; r < R; r++)
                isum[r] =
                    kq_dot(isum[r], u, sc,
                           ((const block_q8_K *)(xr + (size_t)r * xs) + i)->qs + 32 * t, kind);
        }
        for (int r = 0; r < R; r++)
            sumf[r] += kq_finish(blk, &h, kind, (const block_q8_K *)(xr + (size_t)r * xs) + i,
                                 hsum_epi32(isum[r]));
    }
    for (int r = 0; r < R; r++)
        out[(size_t)r * os] = sumf[r];
}

KX86_VEC_DOT_BY_ROWS(vec_dot_q2_k_x86, QK_K, kq_rows, w, KQ_Q2_K)
KX86_VEC_DOT_BY_ROWS(vec_dot_q3_k_x86, QK_K, kq_rows, w, KQ_Q3_K)
KX86_VEC_DOT_BY_ROWS(vec_dot_q4_k_x86, QK_K, kq_rows, w, KQ_Q4_K)
KX86_VEC_DOT_BY_ROWS(vec_dot_q5_k_x86, QK_K, kq_rows, w, KQ_Q5_K)
KX86_VEC_DOT_BY_ROWS(vec_dot_q6_k_x86, QK_K, kq_rows, w, KQ_Q6_K)
KX86_VEC_DOT_BY_ROWS(vec_dot_iq4_xs_x86, QK_K, kq_rows, w, KQ_IQ4_XS)
KX86_GEMM_BY_ROWS(gemm_q2_k_x86, QK_K, kq_rows, wo, KQ_Q2_K)
KX86_GEMM_BY_ROWS(gemm_q3_k_x86, QK_K, kq_rows, wo, KQ_Q3_K)
KX86_GEMM_BY_ROWS(gemm_q4_k_x86, QK_K, kq_rows, wo, KQ_Q4_K)
KX86_GEMM_BY_ROWS(gemm_q5_k_x86, QK_K, kq_rows, wo, KQ_Q5_K)
KX86_GEMM_BY_ROWS(gemm_q6_k_x86, QK_K, kq_rows, wo, KQ_Q6_K)
KX86_GEMM_BY_ROWS(gemm_iq4_xs_x86, QK_K, kq_rows, wo, KQ_IQ4_XS)

/* ---- F16 and BF16: one kernel for 1-3 activation rows ----
 * Per (weight row, activation row) four accumulators of 8 lanes: 32-element steps (FMA k into
 * acc[k]), then 8-element steps into acc[0], reduced as hsum((acc0 + acc1) + (acc2 + acc3)), then
 * the last n % 8 products added one by one in float. Each weight vector is converted to f32 once
 * for the call's rows; x is converted at each load, as it comes. vec_dot is the one-row case.
 * Three rows: 12 accumulators of AVX2's 16 registers.
 * NOTE: x converted to f32 once a row ahead (a prep_row) measured slower for F16 (TinyLlama-1.1B
 * shape pp128 57-59 t/s against 68-70: twice the bytes of x to keep near for every weight row)
 * and faster for BF16's prefill (55-58 against 43-44: its conversion is two instructions a
 * vector), but BF16's decode then ran at 16-17 t/s against 22-23 (bench/RESULTS.md 2026-12-06
 * 01:05), so neither type has one. */
static inline __m256 h16_load(const uint16_t *p, int bf) { return bf ? load_bf16(p) : load_f16(p); }
static inline float h16_to_f32(uint16_t v, int bf) { return bf ? bf16_to_fp32(v) : h2f(v); }

KX86_ALWAYS_INLINE void h16_rows(const void *vw, const int bf, const uint8_t *xr, size_t xs,
                                 int64_t n, float *out, size_t os, const int R) {
    const uint16_t *a = vw;
#define H16_X(r) ((const uint16_t *)(xr + (size_t)(r)*xs))
    __m256 acc[8][4]; /* KX86_SWITCH_R instantiates R up to 8; only R <= 3 is called */
    for (int r = 0; r < R; r++)
        for (int k = 0; k < 4; k++)
            acc[r][k] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            const __m256 wv = h16_load(a + i + 8 * k, bf);
            for (int r = 0; r < R; r++)
                acc[r][k] = _mm256_fmadd_ps(wv, h16_load(H16_X(r) + i + 8 * k, bf), acc[r][k]);
        }
    for (; i + 8 <= n; i += 8) {
        const __m256 wv = h16_load(a + i, bf);
        for (int r = 0; r < R; r++)
            acc[r][0] = _mm256_fmadd_ps(wv, h16_load(H16_X(r) + i, bf), acc[r][0]);
    }
    for (int r = 0; r < R; r++) {
        float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]),
                                          _mm256_add_ps(acc[r][2], acc[r][3])));
        for (int64_t j = i; j < n; j++)
            sum += h16_to_f32(a[j], bf) * h16_to_f32(H16_X(r)[j], bf);
        out[(size_t)r * os] = sum;
    }
#undef H16_X
}

KX86_VEC_DOT_BY_ROWS(vec_dot_f16_x86, 1, h16_rows, w, 0)
KX86_VEC_DOT_BY_ROWS(vec_dot_bf16_x86, 1, h16_rows, w, 1)
KX86_GEMM_BY_ROW_TILES(gemm_f16_x86, 1, 3, h16_rows, wo, 0)
KX86_GEMM_BY_ROW_TILES(gemm_bf16_x86, 1, 3, h16_rows, wo, 1)

/* NOTE: the 256-bit table's F32 has no multi-row kernel (no model stores its matrices in F32),
 * so matmul loops vec_dot there. The first AVX2 multi-row kernels were dropped for not being
 * bit-identical to the single-row ones; b32_rows, kq_rows and h16_rows are written so that they
 * are (vec_dot is their one-row case). */
/* The 256-bit table: one entry per weight type that has a kernel here. */
static const cpu_kernels *kernels_x86_entry(si_type t) {
    static const cpu_kernels k_q4_0 = {.vec_dot_type = SI_TYPE_Q8_0,
                                       .quantize_row = quantize_row_q8_0_x86,
                                       .vec_dot = vec_dot_q4_0_x86,
                                       .gemm = gemm_q4_0_x86};
    static const cpu_kernels k_q8_0 = {.vec_dot_type = SI_TYPE_Q8_0,
                                       .quantize_row = quantize_row_q8_0_x86,
                                       .vec_dot = vec_dot_q8_0_x86,
                                       .gemm = gemm_q8_0_x86};
    static const cpu_kernels k_q4_1 = {.vec_dot_type = SI_TYPE_Q8_1,
                                       .quantize_row = quantize_row_q8_1_x86,
                                       .vec_dot = vec_dot_q4_1_x86,
                                       .gemm = gemm_q4_1_x86};
    static const cpu_kernels k_q5_0 = {.vec_dot_type = SI_TYPE_Q8_0,
                                       .quantize_row = quantize_row_q8_0_x86,
                                       .vec_dot = vec_dot_q5_0_x86,
                                       .gemm = gemm_q5_0_x86};
    static const cpu_kernels k_q5_1 = {.vec_dot_type = SI_TYPE_Q8_1,
                                       .quantize_row = quantize_row_q8_1_x86,
                                       .vec_dot = vec_dot_q5_1_x86,
                                       .gemm = gemm_q5_1_x86};
    static const cpu_kernels k_q2_k = {.vec_dot_type = SI_TYPE_Q8_K,
                                       .quantize_row = quantize_row_q8_k_x86,
                                       .vec_dot = vec_dot_q2_k_x86,
                                       .gemm = gemm_q2_k_x86};
    static const cpu_kernels k_q3_k = {.vec_dot_type = SI_TYPE_Q8_K,
                                       .quantize_row = quantize_row_q8_k_x86,
                                       .vec_dot = vec_dot_q3_k_x86,
                                       .gemm = gemm_q3_k_x86};
    static const cpu_kernels k_q4_k = {.vec_dot_type = SI_TYPE_Q8_K,
                                       .quantize_row = quantize_row_q8_k_x86,
                                       .vec_dot = vec_dot_q4_k_x86,
                                       .gemm = gemm_q4_k_x86};
    static const cpu_kernels k_q5_k = {.vec_dot_type = SI_TYPE_Q8_K,
                                       .quantize_row = quantize_row_q8_k_x86,
                                       .vec_dot = vec_dot_q5_k_x86,
                                       .gemm = gemm_q5_k_x86};
    static const cpu_kernels k_q6_k = {.vec_dot_type = SI_TYPE_Q8_K,
                                       .quantize_row = quantize_row_q8_k_x86,
                                       .vec_dot = vec_dot_q6_k_x86,
                                       .gemm = gemm_q6_k_x86};
    static const cpu_kernels k_iq4_nl = {.vec_dot_type = SI_TYPE_Q8_0,
                                         .quantize_row = quantize_row_q8_0_x86,
                                         .vec_dot = vec_dot_iq4_nl_x86,
                                         .gemm = gemm_iq4_nl_x86};
    static const cpu_kernels k_iq4_xs = {.vec_dot_type = SI_TYPE_Q8_K,
                                         .quantize_row = quantize_row_q8_k_x86,
                                         .vec_dot = vec_dot_iq4_xs_x86,
                                         .gemm = gemm_iq4_xs_x86};
    static const cpu_kernels k_f32 = {.vec_dot_type = SI_TYPE_F32, .quantize_row = quantize_row_f32_x86, .vec_dot = vec_dot_f32_x86};
    static const cpu_kernels k_f16 = {.vec_dot_type = SI_TYPE_F16,
                                      .quantize_row = quantize_row_f16_x86,
                                      .vec_dot = vec_dot_f16_x86,
                                      .gemm = gemm_f16_x86};
    static const cpu_kernels k_bf16 = {.vec_dot_type = SI_TYPE_BF16,
                                       .quantize_row = quantize_row_bf16_x86,
                                       .vec_dot = vec_dot_bf16_x86,
                                       .gemm = gemm_bf16_x86};
    switch (t) {
    case SI_TYPE_Q4_0: return &k_q4_0;
    case SI_TYPE_Q8_0: return &k_q8_0;
    case SI_TYPE_Q4_1: return &k_q4_1;
    case SI_TYPE_Q5_0: return &k_q5_0;
    case SI_TYPE_Q5_1: return &k_q5_1;
    case SI_TYPE_Q2_K: return &k_q2_k;
    case SI_TYPE_Q3_K: return &k_q3_k;
    case SI_TYPE_Q4_K: return &k_q4_k;
    case SI_TYPE_Q5_K: return &k_q5_k;
    case SI_TYPE_Q6_K: return &k_q6_k;
    case SI_TYPE_IQ4_NL: return &k_iq4_nl;
    case SI_TYPE_IQ4_XS: return &k_iq4_xs;
    case SI_TYPE_F32: return &k_f32;
    case SI_TYPE_F16: return &k_f16;
    case SI_TYPE_BF16: return &k_bf16;
    default: return NULL;
    }
}

#endif
