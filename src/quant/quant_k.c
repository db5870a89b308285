/* quant_k.c — the k-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and their activation type Q8_K.
 *
 * Layouts are GGUF's 256-element super-blocks (quant_blocks.h). The kernels follow ggml's scalar
 * reference (ggml-quants.c: dequantize_row_*_K, quantize_row_*_K_ref with make_qx_quants /
 * make_q3_quants / make_qkx2_quants, and the generic ggml_vec_dot_*_K_q8_K): same rounding
 * (nearest_int, ties to even), same search grids, and the dot products sum integers per
 * sub-block and accumulate scaled partial sums in eight float lanes across blocks, as ggml does.
 * Unpacking of the 6-bit scales is written bytewise, not through uint32 masks, so it does not
 * depend on endianness. */
#include <math.h>
#include <string.h>

#include "core/fp16.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "quant/quant_round.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* The element of x[0..n) with the largest magnitude (the first such; 0 for an all-zero x): the
 * symmetric quantisers map it to -nmax. */
static float signed_absmax(int n, const float *x) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    return max;
}

/* make_qx_quants' weight of element i: the caller's qw, else by rmse_type x^2, 1, |x|, sqrt|x| */
static float qx_weight(const float *qw, const float *x, int i, int rmse_type) {
    return qw                ? qw[i]
           : rmse_type == 1 ? x[i] * x[i]
           : rmse_type == 2 ? 1
           : rmse_type == 3 ? fabsf(x[i])
                            : sqrtf(fabsf(x[i]));
}

/* Symmetric quantiser for one group: L[i] in [0, 2*nmax), x ~ scale * (L - nmax). rmse_type 1
 * weights the error by x^2 and refines the scale over 18 nearby grids (ggml's make_qx_quants). */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type,
                            const float *qw) {
    const float max = signed_absmax(n, x);
    if (fabsf(max) < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * x[i]);
            L[i] = (int8_t)(nmax + MAX(-nmax, MIN(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    int return_early = 0;
    if (rmse_type < 0) {
        rmse_type = -rmse_type;
        return_early = 1;
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = MAX(-nmax, MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = qx_weight(qw, x, i, rmse_type);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * x[i]);
            l = MAX(-nmax, MIN(nmax - 1, l));
            float w = qx_weight(qw, x, i, rmse_type);
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + MAX(-nmax, MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric 3-bit group quantiser with coordinate-descent refinement (ggml's make_q3_quants). */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L, int do_rmse) {
    const float max = signed_absmax(n, x);
    if (fabsf(max) < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    if (do_rmse) {
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * x[i]);
            l = MAX(-nmax, MIN(nmax - 1, l));
            L[i] = (int8_t)l;
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        for (int itry = 0; itry < 5; ++itry) {
            int n_changed = 0;
            for (int i = 0; i < n; i++) {
                float w = x[i] * x[i];
                float slx = sumlx - w * x[i] * L[i];
                if (slx > 0) {
                    float sl2 = suml2 - w * L[i] * L[i];
                    int new_l = nearest_int(x[i] * sl2 / slx);
                    new_l = MAX(-nmax, MIN(nmax - 1, new_l));
                    if (new_l != L[i]) {
                        slx += w * x[i] * new_l;
                        sl2 += w * new_l * new_l;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i] = (int8_t)new_l;
                            sumlx = slx;
                            suml2 = sl2;
                            ++n_changed;
                        }
                    }
                }
            }
            if (!n_changed) break;
        }
        for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
        return sumlx / suml2;
    }
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = MAX(-nmax, MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
    }
    return 1 / iscale;
}

/* Asymmetric group quantiser: L in [0, nmax], x ~ scale * L - *the_min. Starts from the min/max
 * grid, then tries nstep+1 scales (rmin + rdelta * is + nmax) / (max - min), each followed by a
 * weighted least-squares fit of scale and min; keeps the lowest weighted error, absolute when
 * use_mad (ggml's make_qkx2_quants). */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              int use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_mad = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)MAX(0, MIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_mad += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * (x[i] - min));
            l = MAX(0, MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float mad = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                mad += weights[i] * diff;
            }
            if (mad < best_mad) {
                for (int i = 0; i < n; i++) L[i] = Laux[i];
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* q4_K / q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. Bytes 0-3 hold
 * scales 0-3 (low 6 bits) plus bits 4-5 of scales 4-7; bytes 4-7 likewise for the mins; bytes
 * 8-11 hold the low nibbles of scale (low) and min (high) for sub-blocks 4-7. */
static void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* q3_K: 6-bit scale j (0..15), still biased by 32. Low nibbles: bytes 0-7 (j < 8 low, j >= 8
 * high nibble of byte j-8); high 2 bits: byte 8 + j%4, bit pair j/4. */
static int q3_k_scale(const uint8_t *s, int j) {
    int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return lo | (hi << 4);
}

/* ---- Q2_K ---- */

static void q2_k_to_float(const void *src, float *y, int64_t n) {
    const block_q2_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d), min = fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int k = 0; k < QK_K; k += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    uint8_t sc = x[i].scales[is++];
                    float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
                }
            }
            q += 32;
        }
    }
}

static void q2_k_from_float(const float *x, void *dst, int64_t n) {
    block_q2_K *y = dst;
    const float q4scale = 15.f;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K], Laux[16];
        float weights[16], mins[QK_K / 16], scales[QK_K / 16];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
            y[i].d = fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] = 0;
            y[i].d = fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] |= (uint8_t)(nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = fp32_to_fp16(0.f);
        }
        /* requantise against the rounded scales */
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d) continue;
            const float dm = fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = (uint8_t)MAX(0, MIN(3, l));
            }
        }
        for (int j = 0; j < QK_K; j += 128)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
                                               (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

static float q2_k_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q2_K *x = w;
    const block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *q2 = x[i].qs;
        const int8_t *q8 = y[i].qs;
        const uint8_t *sc = x[i].scales;
        int summs = 0;
        for (int j = 0; j < 16; j++) summs += y[i].bsums[j] * (sc[j] >> 4);
        const float dall = y[i].d * fp16_to_fp32(x[i].d);
        const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
        int isum = 0, is = 0;
        for (int k = 0; k < QK_K / 128; k++) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    int d = sc[is++] & 0xF, isuml = 0;
                    for (int l = 16 * half; l < 16 * half + 16; l++) isuml += q8[l] * ((q2[l] >> shift) & 3);
                    isum += d * isuml;
                }
                q8 += 32;
            }
            q2 += 32;
        }
        sumf += dall * isum - dmin * summs;
    }
    return sumf;
}

/* ---- Q3_K ---- */

static void q3_k_to_float(const void *src, float *y, int64_t n) {
    const block_q3_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d_all = fp16_to_fp32(x[i].d);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int k = 0; k < QK_K; k += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    float dl = d_all * (q3_k_scale(x[i].scales, is++) - 32);
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
                m <<= 1;
            }
            q += 32;
        }
    }
}

static void q3_k_from_float(const float *x, void *dst, int64_t n) {
    block_q3_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        int8_t L[QK_K];
        float scales[QK_K / 16];
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, 1);
            float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        memset(y[i].scales, 0, K_SCALE_SIZE);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) {
                int l = nearest_int(iscale * scales[j]);
                l = MAX(-32, MIN(31, l)) + 32;
                if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
                else y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                l >>= 4;
                y[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[i].d = fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = fp32_to_fp16(0.f);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = fp16_to_fp32(y[i].d) * (q3_k_scale(y[i].scales, j) - 32);
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(MAX(-4, MIN(3, l)) + 4);
            }
        }
        /* high bit: element j goes to hmask[j % 32], bit j / 32 */
        memset(y[i].hmask, 0, sizeof(y[i].hmask));
        for (int j = 0; j < QK_K; j++) {
            if (L[j] > 3) {
                y[i].hmask[j % (QK_K / 8)] |= (uint8_t)(1u << (j / (QK_K / 8)));
                L[j] -= 4;
            }
        }
        for (int j = 0; j < QK_K; j += 128)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
                                               (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

/* The generic k-quant dot: a[] holds the 256 signed quants, scale[] the 16 sub-block scales of
 * 16. Products are summed per 8 lanes in int32, then lane sums are scaled by d into sums[]. */
static void kq_accumulate16(const int8_t *a, const int8_t *q8, const int *scale, float d,
                            float sums[8]) {
    int32_t aux32[8] = {0};
    for (int j = 0; j < QK_K / 16; j++) {
        for (int half = 0; half < 2; half++) {
            int16_t aux16[8];
            for (int l = 0; l < 8; l++) aux16[l] = (int16_t)(q8[l] * a[l]);
            for (int l = 0; l < 8; l++) aux32[l] += scale[j] * aux16[l];
            q8 += 8;
            a += 8;
        }
    }
    for (int l = 0; l < 8; l++) sums[l] += d * aux32[l];
}

static float q3_k_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q3_K *x = w;
    const block_q8_K *y = xq;
    float sums[8] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t aux8[QK_K];
        int scale[QK_K / 16];
        const uint8_t *q3 = x[i].qs, *hm = x[i].hmask;
        int8_t *a = aux8;
        uint8_t m = 1;
        for (int j = 0; j < QK_K; j += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int l = 0; l < 32; l++) a[l] = (int8_t)(((q3[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                a += 32;
                m <<= 1;
            }
            q3 += 32;
        }
        for (int j = 0; j < QK_K / 16; j++) scale[j] = q3_k_scale(x[i].scales, j) - 32;
        kq_accumulate16(aux8, y[i].qs, scale, fp16_to_fp32(x[i].d) * y[i].d, sums);
    }
    float sumf = 0;
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}

/* ---- Q4_K and Q5_K (shared quantiser: nmax 15 or 31) ---- */

static void q4_k_to_float(const void *src, float *y, int64_t n) {
    const block_q4_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d), min = fp16_to_fp32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, q += 32) {
            uint8_t sc, m;
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

static void q5_k_to_float(const void *src, float *y, int64_t n) {
    const block_q5_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d), min = fp16_to_fp32(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, ql += 32) {
            uint8_t sc, m;
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

/* Sub-blocks of 32 through make_qkx2_quants, 6-bit scales/mins, requantised quants L in
 * [0, nmax] (quantize_row_q4_K_ref / quantize_row_q5_K_ref share everything but nmax and rmin). */
static void k_quantise_scales_mins(const float *x, int nmax, float rmin, int nstep,
                                   uint8_t scales6[K_SCALE_SIZE], uint16_t *dd, uint16_t *dmin,
                                   uint8_t L[QK_K]) {
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t ls = (uint8_t)MIN(63, nearest_int(inv_scale * scales[j]));
        uint8_t lm = (uint8_t)MIN(63, nearest_int(inv_min * mins[j]));
        if (j < 4) {
            scales6[j] = ls;
            scales6[j + 4] = lm;
        } else {
            scales6[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales6[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales6[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *dd = fp32_to_fp16(max_scale / 63.f);
    *dmin = fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, scales6, &sc, &m);
        const float d = fp16_to_fp32(*dd) * sc;
        if (!d) continue;
        const float dm = fp16_to_fp32(*dmin) * m;
        for (int ii = 0; ii < 32; ii++) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)MAX(0, MIN(nmax, l));
        }
    }
}

static void q4_k_from_float(const float *x, void *dst, int64_t n) {
    block_q4_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        k_quantise_scales_mins(x, 15, -1.f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

static void q5_k_from_float(const float *x, void *dst, int64_t n) {
    block_q5_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        k_quantise_scales_mins(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        uint8_t *ql = y[i].qs, *qh = y[i].qh;
        memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int j = 0; j < QK_K; j += 64, ql += 32) {
            for (int l = 0; l < 32; l++) {
                int l1 = L[j + l], l2 = L[j + l + 32];
                if (l1 > 15) { l1 -= 16; qh[l] |= m1; }
                if (l2 > 15) { l2 -= 16; qh[l] |= m2; }
                ql[l] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
    }
}

/* Shared tail of the q4_K / q5_K dots: a[] quants in [0, 31], 6-bit scales per 32, mins term
 * through bsums. Mirrors ggml_vec_dot_q4_K_q8_K_generic's accumulation order. */
static void kq_accumulate32(const int8_t *a, const block_q8_K *y, const uint8_t *scales6,
                            float d, float dmin, float sums[8], float *sumf) {
    int scale[QK_K / 16];
    int sumi = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        get_scale_min_k4(j, scales6, &sc, &m);
        scale[2 * j] = scale[2 * j + 1] = sc;
        sumi += (y->bsums[2 * j] + y->bsums[2 * j + 1]) * m;
    }
    /* per 16 elements the same scale twice == ggml's 4 x 8 lanes per 32 */
    kq_accumulate16(a, y->qs, scale, d * y->d, sums);
    *sumf -= dmin * y->d * sumi;
}

static float q4_k_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q4_K *x = w;
    const block_q8_K *y = xq;
    float sums[8] = {0}, sumf = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t aux8[QK_K], *a = aux8;
        const uint8_t *q4 = x[i].qs;
        for (int j = 0; j < QK_K / 64; j++, q4 += 32) {
            for (int l = 0; l < 32; l++) a[l] = (int8_t)(q4[l] & 0xF);
            a += 32;
            for (int l = 0; l < 32; l++) a[l] = (int8_t)(q4[l] >> 4);
            a += 32;
        }
        kq_accumulate32(aux8, &y[i], x[i].scales, fp16_to_fp32(x[i].d), fp16_to_fp32(x[i].dmin),
                        sums, &sumf);
    }
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}

static float q5_k_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q5_K *x = w;
    const block_q8_K *y = xq;
    float sums[8] = {0}, sumf = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t aux8[QK_K], *a = aux8;
        const uint8_t *q4 = x[i].qs, *hm = x[i].qh;
        uint8_t m = 1;
        for (int j = 0; j < QK_K / 64; j++, q4 += 32) {
            for (int l = 0; l < 32; l++) a[l] = (int8_t)((q4[l] & 0xF) + (hm[l] & m ? 16 : 0));
            a += 32;
            m = (uint8_t)(m << 1);
            for (int l = 0; l < 32; l++) a[l] = (int8_t)((q4[l] >> 4) + (hm[l] & m ? 16 : 0));
            a += 32;
            m = (uint8_t)(m << 1);
        }
        kq_accumulate32(aux8, &y[i], x[i].scales, fp16_to_fp32(x[i].d), fp16_to_fp32(x[i].dmin),
                        sums, &sumf);
    }
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}

/* ---- Q6_K ---- */

/* The 256 signed quants (-32..31) of a q6_K block, in element order. */
static void q6_k_unpack(const block_q6_K *x, int8_t *a) {
    const uint8_t *ql = x->ql, *qh = x->qh;
    for (int n = 0; n < QK_K; n += 128, a += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; l++) {
            a[l + 0] = (int8_t)(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            a[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            a[l + 64] = (int8_t)(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            a[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

static void q6_k_to_float(const void *src, float *y, int64_t n) {
    const block_q6_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = fp16_to_fp32(x[i].d);
        int8_t a[QK_K];
        q6_k_unpack(&x[i], a);
        for (int j = 0; j < QK_K; j++) y[j] = d * x[i].scales[j / 16] * a[j];
    }
}

static void q6_k_from_float(const float *x, void *dst, int64_t n) {
    block_q6_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        int8_t L[QK_K];
        float scales[QK_K / 16];
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ib++) {
            scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, NULL);
            float abs_scale = fabsf(scales[ib]);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof(y[i]));
            y[i].d = fp32_to_fp16(0.f);
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ib++) y[i].scales[ib] = (int8_t)MIN(127, nearest_int(iscale * scales[ib]));
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = fp16_to_fp32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(MAX(-32, MIN(31, l)) + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

static float q6_k_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q6_K *x = w;
    const block_q8_K *y = xq;
    float sums[8] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t aux8[QK_K];
        int scale[QK_K / 16];
        q6_k_unpack(&x[i], aux8);
        for (int j = 0; j < QK_K / 16; j++) scale[j] = x[i].scales[j];
        kq_accumulate16(aux8, y[i].qs, scale, fp16_to_fp32(x[i].d) * y[i].d, sums);
    }
    float sumf = 0;
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}

/* ---- Q8_K (activations) ---- */

static void q8_k_to_float(const void *src, float *y, int64_t n) {
    const block_q8_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K)
        for (int j = 0; j < QK_K; j++) y[j] = x[i].d * x[i].qs[j];
}

/* ggml's quantize_row_q8_K_ref: iscale = -127 / (signed absmax), so the extreme element maps to
 * -127 and the other sign may reach 127 (clamped); d = 1 / iscale is kept in float. */
static void q8_k_from_float(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float max = signed_absmax(QK_K, x);
        if (!max) {
            y[i].d = 0;
            memset(y[i].qs, 0, QK_K);
            memset(y[i].bsums, 0, sizeof(y[i].bsums));
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) y[i].qs[j] = (int8_t)MIN(127, nearest_int(iscale * x[j]));
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int ii = 0; ii < 16; ii++) sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

/* NOTE: ggml has no q8_K x q8_K dot; this is the plain per-block integer dot. */
static float q8_k_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q8_K *x = w, *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0;
        for (int j = 0; j < QK_K; j++) sumi += x[i].qs[j] * y[i].qs[j];
        sumf += (x[i].d * y[i].d) * sumi;
    }
    return sumf;
}

#define K_TRAITS(tname, str, T)                                                                   \
    const quant_traits quant_traits_##tname = {                                                  \
        .name = str, .block_size = QK_K, .type_size = (int32_t)sizeof(T),                        \
        .vec_dot_type = SI_TYPE_Q8_K, .to_float = tname##_to_float,                              \
        .from_float = tname##_from_float, .vec_dot = tname##_vec_dot,                            \
    }

K_TRAITS(q2_k, "q2_k", block_q2_K);
K_TRAITS(q3_k, "q3_k", block_q3_K);
K_TRAITS(q4_k, "q4_k", block_q4_K);
K_TRAITS(q5_k, "q5_k", block_q5_K);
K_TRAITS(q6_k, "q6_k", block_q6_K);
K_TRAITS(q8_k, "q8_k", block_q8_K);
