/* cpu_ops.h — the CPU backend's operations for the llama-family forward pass (reference path).
 *
 * Matmuls quantise activations to the weight type's vec_dot_type and call the type's dot
 * product (ggml's scheme), so results track llama.cpp's; they split output rows over the pool. */
#ifndef SI_BACKEND_CPU_OPS_H
#define SI_BACKEND_CPU_OPS_H

#include <stdint.h>

#include "backend/cpu/cpu_kernels.h"
#include "core/thread_pool.h"
#include "model/batch.h"
#include "model/kv_cache.h"
#include "model/model.h"

/* out[i] = x[i] / rms(x) * w[i] for each of n_rows rows of n elements. */
void cpu_rmsnorm(float *out, const float *x, const float *w, int n, int n_rows, float eps);

/* Bytes of scratch cpu_matmul needs for n_rows activation rows of n_cols elements of W. */
size_t cpu_matmul_scratch(const si_tensor *W, int n_rows);

/* out[r][j] = sum_k W[j][k] * x[r][k] for r < n_rows, j < W->n_rows. x: [n_rows][W->n_cols].
 * scratch: cpu_matmul_scratch(W, n_rows) bytes. Multi-threaded and tiled (matmul.c). */
void cpu_matmul(thread_pool *pool, float *out, const si_tensor *W, const float *x, int n_rows,
                void *scratch);

/* cpu_matmul for up to CPU_MATMUL_MAX_MATS matrices of one type and one column count against
 * the same x (a layer's Q/K/V, its gate/up): x is quantised once and the threads share one job,
 * so they meet once instead of once per matrix. outs[i]: [n_rows][Ws[i]->n_rows]. Each output is
 * exactly cpu_matmul's. scratch: cpu_matmul_scratch(Ws[0], n_rows) bytes. */
#define CPU_MATMUL_MAX_MATS 3
void cpu_matmul_multi(thread_pool *pool, int n_mats, float *const *outs, const si_tensor *const *Ws,
                      const float *x, int n_rows, void *scratch);

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

/* RoPE cos/sin by position, for rotating keys as they are read: cos/sin [n_pos][rope_dim / 2],
 * computed with cpu_rope's arithmetic so that a rotation from the table equals cpu_rope's. */
void cpu_rope_table(float *cos_out, float *sin_out, int32_t n_pos, const rope_params *p);

/* Paged causal attention over a ragged batch (attention.c). */
typedef struct attn_params {
    int n_head, n_head_kv, head_dim, kv_stride; /* kv_stride = n_head_kv * head_dim */
    int32_t max_kv; /* no query reads more than max_kv slots (pos < max_kv); sizes the scratch */
    /* for sequences with rope_on_read: the RoPE shape and cpu_rope_table(max_kv) */
    const rope_params *rope;
    const float *rope_cos, *rope_sin; /* [max_kv][rope_dim / 2] */
} attn_params;

/* Bytes of scratch cpu_attention_paged needs for n_threads threads. */
size_t cpu_attention_paged_scratch(int n_threads, int32_t max_kv, int head_dim);

/* For each token t of batch b and each query head: attends q[t] to slots 0..b->pos[t] of
 * sequence b->seq[t] in layer `layer` of kv, found through the sequence's block table (keys of
 * rope_on_read sequences are rotated by their slot position as they are read), and writes the
 * weighted sum of values to out[t]. q, out: [n_tokens][n_head * head_dim]. The K/V of the
 * batch's own tokens must already be in the cache. q and the softmax weights are rounded to f16
 * as ggml's f16 products do. scratch: cpu_attention_paged_scratch(pool_size(pool), ...) bytes. */
void cpu_attention_paged(thread_pool *pool, float *out, const float *q, const kv_cache *kv,
                         int32_t layer, const si_batch *b, const attn_params *p, float *scratch);

/* cpu_attention_paged with the kernel of level isa, ignoring SWIFTINFER_ISA (tests, benchmarks):
 * CPU_ISA_SCALAR is the reference; a SIMD level falls back to a lower one when head_dim is not a
 * multiple of its vector width. isa must be <= cpu_isa_detected(). */
void cpu_attention_paged_isa(thread_pool *pool, float *out, const float *q, const kv_cache *kv,
                             int32_t layer, const si_batch *b, const attn_params *p,
                             float *scratch, cpu_isa isa);

/* gate[i] = silu(gate[i]) * up[i] */
void cpu_swiglu(float *gate, const float *up, int64_t n);
/* cpu_swiglu shared by pool's threads when n is large (a batch of rows): element-wise, so the
 * same results however it is split. */
void cpu_swiglu_pool(thread_pool *pool, float *gate, const float *up, int64_t n);

/* x[i] += y[i] */
void cpu_add(float *x, const float *y, int64_t n);

#endif
