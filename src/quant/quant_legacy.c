/* quant_legacy.c — the 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
 *
 * Layouts are GGUF's (quant_blocks.h). Every kernel follows ggml's scalar reference exactly:
 * dequantize_row_*, quantize_row_*_ref and the generic ggml_vec_dot_*_q8_* (integer sum per
 * block, then one float multiply by the scales), so results match ggml bit for bit. */
#include <math.h>
#include <string.h>

#include "core/fp16.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* qh is a little-endian uint32 in the file; assemble it byte by byte to stay endian-neutral */
static uint32_t load_qh(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static void store_qh(uint8_t qh[4], uint32_t v) {
    for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(v >> (8 * i));
}

/* The element of largest magnitude, sign kept (the first one on ties, as ggml). */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* ---- Q4_0 ---- */

static void q4_0_to_float(const void *src, float *y, int64_t n) {
    const block_q4_0 *x = src;
    for (int64_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int x0 = (x[i].qs[j] & 0x0F) - 8;
            const int x1 = (x[i].qs[j] >> 4) - 8;
            y[j] = x0 * d;
            y[j + QK4_0 / 2] = x1 * d;
        }
    }
}

static void q4_0_from_float(const float *x, void *dst, int64_t n) {
    block_q4_0 *y = dst;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        const float d = signed_absmax(x, QK4_0) / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            /* NOTE: truncation after +8.5 (not roundf) is what ggml does */
            const uint8_t xi0 = (uint8_t)MIN(15, (int8_t)(x[j] * id + 8.5f));
            const uint8_t xi1 = (uint8_t)MIN(15, (int8_t)(x[j + QK4_0 / 2] * id + 8.5f));
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

static float q4_0_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q4_0 *x = w;
    const block_q8_0 *y = xq;
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / QK4_0; ib++) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int v0 = (x[ib].qs[j] & 0x0F) - 8;
            const int v1 = (x[ib].qs[j] >> 4) - 8;
            sumi0 += v0 * y[ib].qs[j];
            sumi1 += v1 * y[ib].qs[j + QK4_0 / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += sumi * (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d));
    }
    return sumf;
}

/* ---- Q4_1 ---- */

static void q4_1_to_float(const void *src, float *y, int64_t n) {
    const block_q4_1 *x = src;
    for (int64_t i = 0; i < n / QK4_1; i++, y += QK4_1) {
        const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const int x0 = x[i].qs[j] & 0x0F;
            const int x1 = x[i].qs[j] >> 4;
            y[j] = x0 * d + m;
            y[j + QK4_1 / 2] = x1 * d + m;
        }
    }
}

static void q4_1_from_float(const float *x, void *dst, int64_t n) {
    block_q4_1 *y = dst;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float mn, mx;
        min_max(x, QK4_1, &mn, &mx);
        const float d = (mx - mn) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(mn);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const uint8_t xi0 = (uint8_t)MIN(15, (int8_t)((x[j] - mn) * id + 0.5f));
            const uint8_t xi1 = (uint8_t)MIN(15, (int8_t)((x[j + QK4_1 / 2] - mn) * id + 0.5f));
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

static float q4_1_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q4_1 *x = w;
    const block_q8_1 *y = xq;
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / QK4_1; ib++) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            const int v0 = x[ib].qs[j] & 0x0F;
            const int v1 = x[ib].qs[j] >> 4;
            sumi0 += v0 * y[ib].qs[j];
            sumi1 += v1 * y[ib].qs[j + QK4_1 / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * sumi +
                fp16_to_fp32(x[ib].m) * fp16_to_fp32(y[ib].s);
    }
    return sumf;
}

/* ---- Q5_0 ---- */

static void q5_0_to_float(const void *src, float *y, int64_t n) {
    const block_q5_0 *x = src;
    for (int64_t i = 0; i < n / QK5_0; i++, y += QK5_0) {
        const float d = fp16_to_fp32(x[i].d);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int xh0 = ((qh >> j) << 4) & 0x10;
            const int xh1 = (qh >> (j + 12)) & 0x10;
            const int x0 = ((x[i].qs[j] & 0x0F) | xh0) - 16;
            const int x1 = ((x[i].qs[j] >> 4) | xh1) - 16;
            y[j] = x0 * d;
            y[j + QK5_0 / 2] = x1 * d;
        }
    }
}

static void q5_0_from_float(const float *x, void *dst, int64_t n) {
    block_q5_0 *y = dst;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        const float d = signed_absmax(x, QK5_0) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const uint8_t xi0 = (uint8_t)MIN(31, (int8_t)(x[j] * id + 16.5f));
            const uint8_t xi1 = (uint8_t)MIN(31, (int8_t)(x[j + QK5_0 / 2] * id + 16.5f));
            y[i].qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((uint32_t)(xi0 & 0x10) >> 4) << j;
            qh |= ((uint32_t)(xi1 & 0x10) >> 4) << (j + QK5_0 / 2);
        }
        store_qh(y[i].qh, qh);
    }
}

static float q5_0_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q5_0 *x = w;
    const block_q8_0 *y = xq;
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / QK5_0; ib++) {
        const uint32_t qh = load_qh(x[ib].qh);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const int xh0 = (int)(((qh >> j) & 1u) << 4);
            const int xh1 = (int)(((qh >> (j + 16)) & 1u) << 4);
            const int x0 = ((x[ib].qs[j] & 0x0F) | xh0) - 16;
            const int x1 = ((x[ib].qs[j] >> 4) | xh1) - 16;
            sumi0 += x0 * y[ib].qs[j];
            sumi1 += x1 * y[ib].qs[j + QK5_0 / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * sumi;
    }
    return sumf;
}

/* ---- Q5_1 ---- */

static void q5_1_to_float(const void *src, float *y, int64_t n) {
    const block_q5_1 *x = src;
    for (int64_t i = 0; i < n / QK5_1; i++, y += QK5_1) {
        const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int xh0 = ((qh >> j) << 4) & 0x10;
            const int xh1 = (qh >> (j + 12)) & 0x10;
            const int x0 = (x[i].qs[j] & 0x0F) | xh0;
            const int x1 = (x[i].qs[j] >> 4) | xh1;
            y[j] = x0 * d + m;
            y[j + QK5_1 / 2] = x1 * d + m;
        }
    }
}

static void q5_1_from_float(const float *x, void *dst, int64_t n) {
    block_q5_1 *y = dst;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float mn, mx;
        min_max(x, QK5_1, &mn, &mx);
        const float d = (mx - mn) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            /* NOTE: ggml has no clamp to 31 here; (x - min) * id + 0.5 stays below 32 */
            const uint8_t xi0 = (uint8_t)((x[j] - mn) * id + 0.5f);
            const uint8_t xi1 = (uint8_t)((x[j + QK5_1 / 2] - mn) * id + 0.5f);
            y[i].qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((uint32_t)(xi0 & 0x10) >> 4) << j;
            qh |= ((uint32_t)(xi1 & 0x10) >> 4) << (j + QK5_1 / 2);
        }
        store_qh(y[i].qh, qh);
    }
}

static float q5_1_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q5_1 *x = w;
    const block_q8_1 *y = xq;
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / QK5_1; ib++) {
        const uint32_t qh = load_qh(x[ib].qh);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int xh0 = (int)(((qh >> j) & 1u) << 4);
            const int xh1 = (int)(((qh >> (j + 16)) & 1u) << 4);
            const int x0 = (x[ib].qs[j] & 0x0F) | xh0;
            const int x1 = (x[ib].qs[j] >> 4) | xh1;
            sumi0 += x0 * y[ib].qs[j];
            sumi1 += x1 * y[ib].qs[j + QK5_1 / 2];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d)) * sumi +
                fp16_to_fp32(x[ib].m) * fp16_to_fp32(y[ib].s);
    }
    return sumf;
}

/* ---- Q8_0 ---- */

static void q8_0_to_float(const void *src, float *y, int64_t n) {
    const block_q8_0 *x = src;
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_0; j++) y[j] = x[i].qs[j] * d;
    }
}

/* ggml's quantize_row_q8_0_ref: d = amax / 127 (before fp16 rounding), q = roundf(x / d) */
static void q8_0_from_float(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

static float q8_0_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q8_0 *x = w, *y = xq;
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / QK8_0; ib++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++) sumi += x[ib].qs[j] * y[ib].qs[j];
        sumf += sumi * (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d));
    }
    return sumf;
}

/* ---- Q8_1 (activations for Q4_1 / Q5_1) ---- */

/* NOTE: ggml has no to_float for q8_1; this is the obvious d * q, handy for tests */
static void q8_1_to_float(const void *src, float *y, int64_t n) {
    const block_q8_1 *x = src;
    for (int64_t i = 0; i < n / QK8_1; i++, y += QK8_1) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_1; j++) y[j] = x[i].qs[j] * d;
    }
}

/* ggml's quantize_row_q8_1_ref: as q8_0, plus s = fp16(d * sum(q)) with d before fp16 rounding */
static void q8_1_from_float(const float *x, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < QK8_1 / 2; j++) {
            y[i].qs[j] = (int8_t)roundf(x[j] * id);
            y[i].qs[j + QK8_1 / 2] = (int8_t)roundf(x[j + QK8_1 / 2] * id);
            sum += y[i].qs[j] + y[i].qs[j + QK8_1 / 2];
        }
        y[i].s = fp32_to_fp16(sum * d);
    }
}

/* NOTE: ggml has no q8_1 x q8_1 dot; this one ignores s and mirrors q8_0's */
static float q8_1_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_q8_1 *x = w, *y = xq;
    float sumf = 0.0f;
    for (int64_t ib = 0; ib < n / QK8_1; ib++) {
        int sumi = 0;
        for (int j = 0; j < QK8_1; j++) sumi += x[ib].qs[j] * y[ib].qs[j];
        sumf += sumi * (fp16_to_fp32(x[ib].d) * fp16_to_fp32(y[ib].d));
    }
    return sumf;
}

#define LEGACY_TRAITS(tname, str, T, qk, vdt)                                                    \
    const quant_traits quant_traits_##tname = {                                                  \
        .name = str, .block_size = qk, .type_size = (int32_t)sizeof(T), .vec_dot_type = vdt,     \
        .to_float = tname##_to_float, .from_float = tname##_from_float,                          \
        .vec_dot = tname##_vec_dot,                                                              \
    }

LEGACY_TRAITS(q4_0, "q4_0", block_q4_0, QK4_0, SI_TYPE_Q8_0);
LEGACY_TRAITS(q4_1, "q4_1", block_q4_1, QK4_1, SI_TYPE_Q8_1);
LEGACY_TRAITS(q5_0, "q5_0", block_q5_0, QK5_0, SI_TYPE_Q8_0);
LEGACY_TRAITS(q5_1, "q5_1", block_q5_1, QK5_1, SI_TYPE_Q8_1);
LEGACY_TRAITS(q8_0, "q8_0", block_q8_0, QK8_0, SI_TYPE_Q8_0);
LEGACY_TRAITS(q8_1, "q8_1", block_q8_1, QK8_1, SI_TYPE_Q8_1);
