/* cpu_ops.c — scalar reference implementations of the CPU backend's operations.
 *
 * These are the readable reference; SIMD versions (a later issue) are tested against them. */
#include "backend/cpu/cpu_ops.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/quant.h"

void cpu_rmsnorm(float *out, const float *x, const float *w, int n, int n_rows, float eps) {
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * n;
        float *o = out + (size_t)r * n;
        double ss = 0.0; /* ggml accumulates the sum of squares in double (ggml_float) */
        for (int i = 0; i < n; i++) ss += (double)xr[i] * xr[i];
        const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
        for (int i = 0; i < n; i++) o[i] = xr[i] * scale * w[i];
    }
}

void cpu_add_bias(float *x, const float *b, int n, int n_rows) {
    for (int r = 0; r < n_rows; r++)
        for (int i = 0; i < n; i++) x[(size_t)r * n + i] += b[i];
}

void cpu_get_row(float *out, const si_tensor *E, int64_t row) {
    const quant_traits *qt = quant_get(E->type);
    const uint8_t *src = (const uint8_t *)E->data + (size_t)row * quant_row_size(E->type, E->n_cols);
    qt->to_float(src, out, E->n_cols);
}

void cpu_rope(float *x, int n_heads, int32_t pos, const rope_params *p) {
    /* theta_i = pos * scale * base^(-2i/rope_dim) / factor_i, computed incrementally as ggml
     * does so that our rotations round the same way. */
    const float theta_scale = powf(p->freq_base, -2.0f / (float)p->rope_dim);
    const int half = p->rope_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * p->head_dim;
        float theta_base = (float)pos;
        for (int i = 0; i < half; i++) {
            const float ff = p->freq_factors ? p->freq_factors[i] : 1.0f;
            const float theta = p->freq_scale * (theta_base / ff);
            const float c = cosf(theta), s = sinf(theta);
            const int a = p->style == ROPE_NORM ? 2 * i : i;
            const int b = p->style == ROPE_NORM ? 2 * i + 1 : i + half;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
            theta_base *= theta_scale;
        }
    }
}

typedef struct {
    float *out;
    const float *q;
    const uint16_t *k, *v;
    const int32_t *pos;
    int n_tokens;
    const attn_params *p;
    float *scores;
    int n_ctx_scores; /* floats of scratch per thread: scores, then the rounded query */
} attn_job;

static void attention_worker(void *ctx, int ith, int nth) {
    const attn_job *j = ctx;
    const attn_params *p = j->p;
    const int group = p->n_head / p->n_head_kv;
    const float scale = 1.0f / sqrtf((float)p->head_dim);
    float *sc = j->scores + (size_t)ith * j->n_ctx_scores;
    int64_t begin, end;
    pool_split((int64_t)j->n_tokens * p->n_head, ith, nth, &begin, &end);
    for (int64_t task = begin; task < end; task++) {
        const int t = (int)(task / p->n_head), h = (int)(task % p->n_head);
        const int kvh = h / group;
        const float *qh = j->q + ((size_t)t * p->n_head + h) * p->head_dim;
        float *oh = j->out + ((size_t)t * p->n_head + h) * p->head_dim;
        const int n_kv = j->pos[t] + 1;
        /* NOTE: the cache is f16, and the products with it take f16 inputs: the query is
         * rounded to f16 here and the attention weights below, as ggml's f16 matmuls do. This
         * keeps our logits within rounding noise of llama.cpp's rather than a little apart. */
        float *qr = sc + j->n_ctx_scores - p->head_dim; /* q rounded, after the scores */
        for (int d = 0; d < p->head_dim; d++) qr[d] = fp16_to_fp32(fp32_to_fp16(qh[d]));
        float max = -INFINITY;
        for (int s = 0; s < n_kv; s++) {
            const uint16_t *kr = j->k + (size_t)s * p->kv_stride + (size_t)kvh * p->head_dim;
            float dot = 0.0f;
            for (int d = 0; d < p->head_dim; d++) dot += qr[d] * fp16_to_fp32(kr[d]);
            sc[s] = dot * scale;
            if (sc[s] > max) max = sc[s];
        }
        float sum = 0.0f;
        for (int s = 0; s < n_kv; s++) {
            sc[s] = expf(sc[s] - max);
            sum += sc[s];
        }
        const float inv = 1.0f / sum;
        memset(oh, 0, sizeof(float) * (size_t)p->head_dim);
        for (int s = 0; s < n_kv; s++) {
            const uint16_t *vr = j->v + (size_t)s * p->kv_stride + (size_t)kvh * p->head_dim;
            const float w = fp16_to_fp32(fp32_to_fp16(sc[s] * inv));
            for (int d = 0; d < p->head_dim; d++) oh[d] += w * fp16_to_fp32(vr[d]);
        }
    }
}

void cpu_attention(thread_pool *pool, float *out, const float *q, const uint16_t *k_cache,
                   const uint16_t *v_cache, const int32_t *pos, int n_tokens,
                   const attn_params *p, float *scores) {
    int max_pos = 0;
    for (int t = 0; t < n_tokens; t++)
        if (pos[t] > max_pos) max_pos = pos[t];
    /* per thread: scores for every visible position, then the rounded query */
    attn_job job = {out, q, k_cache, v_cache, pos, n_tokens, p, scores, max_pos + 1 + p->head_dim};
    pool_run(pool, attention_worker, &job);
}

void cpu_swiglu(float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void cpu_add(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}
