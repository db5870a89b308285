/* cpu_ops.h — the CPU backend's operations for the llama-family forward pass (reference path).
 *
 * Matmuls quantise activations to the weight type's vec_dot_type and call the type's dot
 * product (ggml's scheme), so results track llama.cpp's; they split output rows over the pool. */
#ifndef SI_BACKEND_CPU_OPS_H
#define SI_BACKEND_CPU_OPS_H

#include <stdint.h>

#include "core/thread_pool.h"
#include "model/model.h"

/* out[i] = x[i] / rms(x) * w[i] for each of n_rows rows of n elements. */
void cpu_rmsnorm(float *out, const float *x, const float *w, int n, int n_rows, float eps);

/* Bytes of scratch cpu_matmul needs for n_rows activation rows of n_cols elements of W. */
size_t cpu_matmul_scratch(const si_tensor *W, int n_rows);

/* out[r][j] = sum_k W[j][k] * x[r][k] for r < n_rows, j < W->n_rows. x: [n_rows][W->n_cols].
 * scratch: cpu_matmul_scratch(W, n_rows) bytes. Multi-threaded and tiled (matmul.c). */
void cpu_matmul(thread_pool *pool, float *out, const si_tensor *W, const float *x, int n_rows,
                void *scratch);

/* The reference for cpu_matmul (tests): the same product on the calling thread, a plain loop over
 * quant/'s scalar kernels. scratch: cpu_matmul_scratch(W, n_rows) bytes. */
void cpu_matmul_ref(float *out, const si_tensor *W, const float *x, int n_rows, void *scratch);

/* x[r][i] += b[i]. */
void cpu_add_bias(float *x, const float *b, int n, int n_rows);

/* Dequantises row `row` of an embedding matrix into out[n_cols]. */
void cpu_get_row(float *out, const si_tensor *E, int64_t row);

/* Rotates n_heads heads of head_dim at position pos (RoPE, Su et al. 2021) in place. */
typedef struct rope_params {
    int head_dim, rope_dim;
    float freq_base, freq_scale;
    const float *freq_factors; /* [rope_dim/2] or NULL */
    rope_style style;
} rope_params;
void cpu_rope(float *x, int n_heads, int32_t pos, const rope_params *p);

/* Causal attention for n_tokens queries against one sequence's KV cache.
 * q: [n_tokens][n_head*head_dim]; out: same shape; k_cache/v_cache: f16 [n_ctx][n_kv*head_dim];
 * query t attends to cache positions 0..pos[t]. scores: [threads][n_ctx + head_dim] floats. */
typedef struct attn_params {
    int n_head, n_head_kv, head_dim, kv_stride; /* kv_stride = n_head_kv * head_dim */
} attn_params;
void cpu_attention(thread_pool *pool, float *out, const float *q, const uint16_t *k_cache,
                   const uint16_t *v_cache, const int32_t *pos, int n_tokens,
                   const attn_params *p, float *scores);

/* gate[i] = silu(gate[i]) * up[i] */
void cpu_swiglu(float *gate, const float *up, int64_t n);

/* x[i] += y[i] */
void cpu_add(float *x, const float *y, int64_t n);

#endif
