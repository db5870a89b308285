/* attention_simd.c — the per-(token, head) attention kernel of attention.c in AVX-512 (F/BW +
 * F16C) and AVX2 (+ FMA + F16C), chosen at run time by attention.c from cpu_isa_active().
 *
 * Same two-pass algorithm and the same roundings as the scalar reference in attention.c: the
 * query and the normalised softmax weights are rounded to f16 (vcvtps2ph, round to nearest
 * even: bit-identical to fp32_to_fp16), keys of rope_on_read sequences are rotated with the
 * reference's arithmetic and rounded back to f16, exp is libm's expf. The results differ from
 * the reference only by the order of the float sums in q.k, softmax denominator aside, and by
 * FMA in the dot products and the weighted sum of values (tests/unit/test_attention.c).
 *
 * NOTE: target attributes rather than per-file flags, so that the AVX2 kernel cannot pick up
 * AVX-512 instructions from the compiler; attention.c calls a kernel only when the CPU has it
 * and head_dim is a multiple of its vector width. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define SI_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define SI_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

/* Rotates v[head_dim] by the table row (cs, sn) of its position: the reference's loop, so the
 * rotated key is the same float (no FMA contraction under -std=c11). */
static inline void rope_row(float *v, const float *cs, const float *sn, const rope_params *p) {
    const int half = p->rope_dim / 2;
    for (int i = 0; i < half; i++) {
        const int a = p->style == ROPE_NORM ? 2 * i : i;
        const int b = p->style == ROPE_NORM ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs[i] - x1 * sn[i];
        v[b] = x0 * sn[i] + x1 * cs[i];
    }
}

/* ---- AVX-512 ---------------------------------------------------------------------------- */

#define F16_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

SI_TARGET_AVX512 static inline __m512 round16_512(__m512 x) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(x, F16_RNE));
}

SI_TARGET_AVX512 static inline __m512 load16_512(const uint16_t *h) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
}

void attention_head_avx512(float *oh, const float *qh, const kv_cache *kv, int32_t layer,
                           const int32_t *table, int kvh, int n_kv, int rotate,
                           const attn_params *p, float *scratch);

SI_TARGET_AVX512
void attention_head_avx512(float *oh, const float *qh, const kv_cache *kv, int32_t layer,
                           const int32_t *table, int kvh, int n_kv, int rotate,
                           const attn_params *p, float *scratch) {
    const int hd = p->head_dim, bs = kv->block_size;
    const float scale = 1.0f / sqrtf((float)hd);
    const int rope_half = p->rope ? p->rope->rope_dim / 2 : 0;
    float *sc = scratch;          /* [max_kv] */
    float *qr = sc + p->max_kv;   /* [head_dim] */
    float *kr = qr + hd;          /* [head_dim] */
    for (int d = 0; d < hd; d += 16) _mm512_storeu_ps(qr + d, round16_512(_mm512_loadu_ps(qh + d)));

    float max = -INFINITY;
    /* slot i = block table[blk], offset off: stepped, not divided (a division per key costs
     * more than a 64-wide dot product) */
    for (int i = 0, blk = 0, off = 0; i < n_kv; i++, off = off + 1 == bs ? (blk++, 0) : off + 1) {
        const uint16_t *kh = kv_cache_k(kv, layer, table[blk], off) + (size_t)kvh * hd;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        if (rotate) {
            for (int d = 0; d < hd; d += 16) _mm512_storeu_ps(kr + d, load16_512(kh + d));
            rope_row(kr, p->rope_cos + (size_t)i * rope_half, p->rope_sin + (size_t)i * rope_half,
                     p->rope);
            for (int d = 0; d < hd; d += 16)
                acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d), round16_512(_mm512_loadu_ps(kr + d)),
                                       acc0);
        } else {
            int d = 0;
            for (; d + 32 <= hd; d += 32) {
                acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d), load16_512(kh + d), acc0);
                acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d + 16), load16_512(kh + d + 16), acc1);
            }
            if (d < hd) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d), load16_512(kh + d), acc0);
        }
        sc[i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) * scale;
        if (sc[i] > max) max = sc[i];
    }
    float sum = 0.0f;
    for (int i = 0; i < n_kv; i++) {
        sc[i] = expf(sc[i] - max);
        sum += sc[i];
    }
    /* the weights, normalised and rounded to f16 as the reference does */
    const __m512 inv = _mm512_set1_ps(1.0f / sum);
    int i = 0;
    for (; i + 16 <= n_kv; i += 16)
        _mm512_storeu_ps(sc + i, round16_512(_mm512_mul_ps(_mm512_loadu_ps(sc + i), inv)));
    if (i < n_kv) {
        const __mmask16 m = (__mmask16)((1u << (n_kv - i)) - 1u);
        _mm512_mask_storeu_ps(sc + i, m, round16_512(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, sc + i), inv)));
    }

    /* out = sum_i w_i v_i, 8 output vectors (128 floats) at a time held in registers */
    for (int d0 = 0; d0 < hd; d0 += 128) {
        const int nv = (hd - d0) / 16 < 8 ? (hd - d0) / 16 : 8;
        __m512 acc[8];
        for (int c = 0; c < 8; c++) acc[c] = _mm512_setzero_ps();
        for (int k = 0, blk = 0, off = 0; k < n_kv; k++, off = off + 1 == bs ? (blk++, 0) : off + 1) {
            const uint16_t *vh = kv_cache_v(kv, layer, table[blk], off) + (size_t)kvh * hd + d0;
            const __m512 w = _mm512_set1_ps(sc[k]);
            if (nv == 8) {
                for (int c = 0; c < 8; c++) acc[c] = _mm512_fmadd_ps(w, load16_512(vh + 16 * c), acc[c]);
            } else if (nv == 4) {
                for (int c = 0; c < 4; c++) acc[c] = _mm512_fmadd_ps(w, load16_512(vh + 16 * c), acc[c]);
            } else {
                for (int c = 0; c < nv; c++) acc[c] = _mm512_fmadd_ps(w, load16_512(vh + 16 * c), acc[c]);
            }
        }
        for (int c = 0; c < nv; c++) _mm512_storeu_ps(oh + d0 + 16 * c, acc[c]);
    }
}

/* ---- AVX2 ------------------------------------------------------------------------------- */

SI_TARGET_AVX2 static inline __m256 round16_256(__m256 x) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, F16_RNE));
}

SI_TARGET_AVX2 static inline __m256 load16_256(const uint16_t *h) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

SI_TARGET_AVX2 static inline float hsum_256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void attention_head_avx2(float *oh, const float *qh, const kv_cache *kv, int32_t layer,
                         const int32_t *table, int kvh, int n_kv, int rotate,
                         const attn_params *p, float *scratch);

SI_TARGET_AVX2
void attention_head_avx2(float *oh, const float *qh, const kv_cache *kv, int32_t layer,
                         const int32_t *table, int kvh, int n_kv, int rotate,
                         const attn_params *p, float *scratch) {
    const int hd = p->head_dim, bs = kv->block_size;
    const float scale = 1.0f / sqrtf((float)hd);
    const int rope_half = p->rope ? p->rope->rope_dim / 2 : 0;
    float *sc = scratch;          /* [max_kv] */
    float *qr = sc + p->max_kv;   /* [head_dim] */
    float *kr = qr + hd;          /* [head_dim] */
    for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(qr + d, round16_256(_mm256_loadu_ps(qh + d)));

    float max = -INFINITY;
    /* slot i = block table[blk], offset off: stepped, not divided (a division per key costs
     * more than a 64-wide dot product) */
    for (int i = 0, blk = 0, off = 0; i < n_kv; i++, off = off + 1 == bs ? (blk++, 0) : off + 1) {
        const uint16_t *kh = kv_cache_k(kv, layer, table[blk], off) + (size_t)kvh * hd;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        if (rotate) {
            for (int d = 0; d < hd; d += 8) _mm256_storeu_ps(kr + d, load16_256(kh + d));
            rope_row(kr, p->rope_cos + (size_t)i * rope_half, p->rope_sin + (size_t)i * rope_half,
                     p->rope);
            for (int d = 0; d < hd; d += 8)
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + d), round16_256(_mm256_loadu_ps(kr + d)),
                                       acc0);
        } else {
            int d = 0;
            for (; d + 16 <= hd; d += 16) {
                acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + d), load16_256(kh + d), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + d + 8), load16_256(kh + d + 8), acc1);
            }
            if (d < hd) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(qr + d), load16_256(kh + d), acc0);
        }
        sc[i] = hsum_256(_mm256_add_ps(acc0, acc1)) * scale;
        if (sc[i] > max) max = sc[i];
    }
    float sum = 0.0f;
    for (int i = 0; i < n_kv; i++) {
        sc[i] = expf(sc[i] - max);
        sum += sc[i];
    }
    const float inv_s = 1.0f / sum;
    const __m256 inv = _mm256_set1_ps(inv_s);
    int i = 0;
    for (; i + 8 <= n_kv; i += 8)
        _mm256_storeu_ps(sc + i, round16_256(_mm256_mul_ps(_mm256_loadu_ps(sc + i), inv)));
    for (; i < n_kv; i++) {
        const __m128 w = _mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(sc[i] * inv_s), F16_RNE));
        sc[i] = _mm_cvtss_f32(w);
    }

    /* out = sum_i w_i v_i, 8 output vectors (64 floats) at a time held in registers */
    for (int d0 = 0; d0 < hd; d0 += 64) {
        const int nv = (hd - d0) / 8 < 8 ? (hd - d0) / 8 : 8;
        __m256 acc[8];
        for (int c = 0; c < 8; c++) acc[c] = _mm256_setzero_ps();
        for (int k = 0, blk = 0, off = 0; k < n_kv; k++, off = off + 1 == bs ? (blk++, 0) : off + 1) {
            const uint16_t *vh = kv_cache_v(kv, layer, table[blk], off) + (size_t)kvh * hd + d0;
            const __m256 w = _mm256_set1_ps(sc[k]);
            if (nv == 8) {
                for (int c = 0; c < 8; c++) acc[c] = _mm256_fmadd_ps(w, load16_256(vh + 8 * c), acc[c]);
            } else {
                for (int c = 0; c < nv; c++) acc[c] = _mm256_fmadd_ps(w, load16_256(vh + 8 * c), acc[c]);
            }
        }
        for (int c = 0; c < nv; c++) _mm256_storeu_ps(oh + d0 + 8 * c, acc[c]);
    }
}

#endif
