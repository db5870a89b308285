/* cuda_fwd.h — the few small kernels the CUDA forward pass (cuda_backend.c) needs beside the
 * kernel layer of cuda_ops.h: bias rows, row gathers and per-token block tables. C-callable;
 * each enqueues on `stream` and returns at once. */
#ifndef SI_BACKEND_CUDA_FWD_H
#define SI_BACKEND_CUDA_FWD_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x[r][i] += bias[i] for r < n_rows, i < n (qwen2's Q/K/V biases). */
void cuda_fwd_add_bias(float *x, const float *bias, int n, int n_rows, cudaStream_t stream);

/* dst[i][:] = src[rows[i]][:] for i < n_rows, rows of n_cols floats; rows: device [n_rows]. */
void cuda_fwd_gather_rows(float *dst, const float *src, const int32_t *rows, int n_rows,
                          int n_cols, cudaStream_t stream);

/* dst[t][:] = bt[tok_seq[t]][:] for t < n_tokens, rows of max_blocks ids: one block-table row
 * per query token, so that prefill can run the decode attention kernel with one "sequence"
 * per token. */
void cuda_fwd_token_block_tables(int32_t *dst, const int32_t *bt, const int32_t *tok_seq,
                                 int n_tokens, int max_blocks, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
