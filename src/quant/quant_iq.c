/* quant_iq.c — the non-linear 4-bit types IQ4_NL (blocks of 32) and IQ4_XS (super-blocks of 256
 * with 6-bit sub-block scales), whose nibbles index a 16-entry table of int8 values instead of
 * standing for themselves (ggml-quants.c). Layouts: quant_blocks.h.
 *
 * Dequantisation and dot products follow ggml's scalar reference (dequantize_row_iq4_nl/xs,
 * ggml_vec_dot_iq4_nl_q8_0 and _iq4_xs_q8_K): the same float expressions in the same order, so the
 * gguf package's dequantisers give the same bits (tests/python/test_quant_vs_gguf.py). The
 * quantiser is ggml's quantize_row_iq4_nl_impl without an importance matrix (weights x^2, 7 tries
 * of the scale each side), as llama-quantize runs it for these types. */
#include <math.h>
#include <string.h>

#include "core/fp16.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "quant/quant_round.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                  1,    13,   25,  38,  53,  69,  89,  113};

#define IQ4_NTRY 7

/* The index of the table value nearest x (ggml's best_index_int8; NaN maps to the last). ggml
 * bisects for the neighbours k[mu - 1] <= x < k[mu]; here mu is counted (how many values are
 * <= x), which has no branch to mispredict. The tie rule is ggml's expression, unchanged. */
static int best_index(float x) {
    if (x <= kvalues_iq4nl[0]) return 0;
    if (!(x < kvalues_iq4nl[15])) return 15;
    int mu = 1; /* k[0] < x */
    for (int i = 1; i < 15; i++)
        mu += kvalues_iq4nl[i] <= x;
    return x - kvalues_iq4nl[mu - 1] < kvalues_iq4nl[mu] - x ? mu - 1 : mu;
}

/* The scale of a block of 32 (its indices in L): the weighted least-squares scale of the table
 * values for the start max / kvalues[0], then for the 2 IQ4_NTRY + 1 starts around it, the best
 * kept (weights x^2); 0 for a block below GROUP_MAX_EPS. */
static float block_scale(const float *x, uint8_t *L) {
    float amax = 0, max = 0, w[32];
    for (int j = 0; j < 32; j++) {
        w[j] = x[j] * x[j];
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, 32);
        return 0;
    }
    float d = -max / kvalues_iq4nl[0], id = 1 / d, sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        L[j] = (uint8_t)best_index(id * x[j]);
        const float q = kvalues_iq4nl[L[j]];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int itry = -IQ4_NTRY; itry <= IQ4_NTRY; itry++) {
        id = (itry + kvalues_iq4nl[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            const float q = kvalues_iq4nl[best_index(id * x[j])];
            sumqx += w[j] * q * x[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* nibbles of a block of 32: element j low, j + 16 high */
static void pack_nibbles(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
}

/* the indices of x / d (for d == 0 those of 0: value 1, which d turns into 0) */
static void indices(const float *x, float d, uint8_t *L) {
    const float id = d ? 1 / d : 0.0f;
    for (int j = 0; j < 32; j++)
        L[j] = (uint8_t)best_index(id * x[j]);
}

/* ---- IQ4_NL ---- */

static void iq4_nl_to_float(const void *src, float *y, int64_t n) {
    const block_iq4_nl *x = src;
    for (int64_t i = 0; i < n / QK4_NL; i++, y += QK4_NL) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * kvalues_iq4nl[x[i].qs[j] & 0xF];
            y[j + 16] = d * kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}

static void iq4_nl_from_float(const float *x, void *dst, int64_t n) {
    block_iq4_nl *y = dst;
    for (int64_t i = 0; i < n / QK4_NL; i++, x += QK4_NL) {
        uint8_t L[32];
        const float d = block_scale(x, L);
        y[i].d = fp32_to_fp16(d);
        indices(x, d, L); /* against the scale as found (ggml: ntry > 0 requantises) */
        pack_nibbles(L, y[i].qs);
    }
}

static float iq4_nl_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_iq4_nl *x = w;
    const block_q8_0 *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK4_NL; i++) {
        int sumi1 = 0, sumi2 = 0;
        for (int j = 0; j < 16; j++) {
            sumi1 += y[i].qs[j] * kvalues_iq4nl[x[i].qs[j] & 0xF];
            sumi2 += y[i].qs[j + 16] * kvalues_iq4nl[x[i].qs[j] >> 4];
        }
        sumf += fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d) * (sumi1 + sumi2);
    }
    return sumf;
}

/* ---- IQ4_XS ---- */

/* the 6-bit scale of sub-block ib, as stored (the weight's is this minus 32) */
static int xs_scale(const block_iq4_xs *b, int ib) {
    return ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((b->scales_h >> 2 * ib) & 3) << 4);
}

static void iq4_xs_to_float(const void *src, float *y, int64_t n) {
    const block_iq4_xs *x = src;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
            const float dl = d * (xs_scale(&x[i], ib) - 32);
            const uint8_t *qs = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * kvalues_iq4nl[qs[j] & 0xF];
                y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

static void iq4_xs_from_float(const float *x, void *dst, int64_t n) {
    block_iq4_xs *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[32];
        float scales[QK_K / 32], max_scale = 0, amax_scale = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            scales[ib] = block_scale(x + 32 * ib, L);
            if (fabsf(scales[ib]) > amax_scale) {
                amax_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        const float d = -max_scale / 32, id = d ? 1 / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].scales_h = 0;
        memset(y[i].scales_l, 0, sizeof y[i].scales_l);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            int l = nearest_int(id * scales[ib]);
            l = MAX(-32, MIN(31, l));
            indices(x + 32 * ib, d * l, L);
            pack_nibbles(L, y[i].qs + 16 * ib);
            l += 32;
            y[i].scales_l[ib / 2] |= (uint8_t)((l & 0xF) << 4 * (ib % 2));
            y[i].scales_h |= (uint16_t)((l >> 4) << 2 * ib);
        }
    }
}

static float iq4_xs_vec_dot(const void *w, const void *xq, int64_t n) {
    const block_iq4_xs *x = w;
    const block_q8_K *y = xq;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int sumi = 0;
        for (int ib = 0; ib < QK_K / 32; ib++, q8 += 32) {
            const uint8_t *qs = x[i].qs + 16 * ib;
            int sumi1 = 0, sumi2 = 0;
            for (int j = 0; j < 16; j++) {
                sumi1 += q8[j] * kvalues_iq4nl[qs[j] & 0xF];
                sumi2 += q8[j + 16] * kvalues_iq4nl[qs[j] >> 4];
            }
            sumi += (xs_scale(&x[i], ib) - 32) * (sumi1 + sumi2);
        }
        sumf += fp16_to_fp32(x[i].d) * y[i].d * sumi;
    }
    return sumf;
}

const quant_traits quant_traits_iq4_nl = {
    .name = "iq4_nl",
    .block_size = QK4_NL,
    .type_size = (int32_t)sizeof(block_iq4_nl),
    .vec_dot_type = SI_TYPE_Q8_0,
    .to_float = iq4_nl_to_float,
    .from_float = iq4_nl_from_float,
    .vec_dot = iq4_nl_vec_dot,
};

const quant_traits quant_traits_iq4_xs = {
    .name = "iq4_xs",
    .block_size = QK_K,
    .type_size = (int32_t)sizeof(block_iq4_xs),
    .vec_dot_type = SI_TYPE_Q8_K,
    .to_float = iq4_xs_to_float,
    .from_float = iq4_xs_from_float,
    .vec_dot = iq4_xs_vec_dot,
};
