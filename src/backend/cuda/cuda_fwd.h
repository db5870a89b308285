/* cuda_fwd.h — the few small kernels the CUDA forward pass (cuda_backend.c) needs beside the
 * kernel layer of cuda_ops.h: bias rows, row gathers, and the fused gate/up SwiGLU. C-callable;
 * each enqueues on `stream` and returns at once. */
#ifndef SI_BACKEND_CUDA_FWD_H
#define SI_BACKEND_CUDA_FWD_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "swiftinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x[r][i] += bias[i] for r < n_rows, i < n (qwen2's Q/K/V biases). */
void cuda_fwd_add_bias(float *x, const float *bias, int n, int n_rows, cudaStream_t stream);

/* dst[i][:] = src[rows[i]][:] for i < n_rows, rows of n_cols floats; rows: device [n_rows]. */
void cuda_fwd_gather_rows(float *dst, const float *src, const int32_t *rows, int n_rows,
                          int n_cols, cudaStream_t stream);

/* out[r][i] = silu(gu[r][i]) * gu[r][n_ff + i] for r < n_rows, i < n_ff: SwiGLU over the rows
 * of the fused gate/up matmul ([gate | up], 2 n_ff floats each, n_ff % 4 == 0; all buffers
 * 16-byte aligned); out: [n_rows][n_ff]. out_q8
 * (may be NULL; needs n_ff % 128 == 0) receives out quantised for cuda_gemv_pre (cuda_ops.h).
 * out may be NULL when out_q8 is not (only the quantised rows are wanted). */
void cuda_fwd_swiglu_rows(float *out, void *out_q8, const float *gu, int n_ff, int n_rows,
                          cudaStream_t stream);
/* The same SwiGLU, its rows written only as out_h_type (F16 or BF16; [n_rows][n_ff], rounded to
 * nearest) into out_h, for cuda_gemm_pre (cuda_ops.h). 0, or -1 for another type. */
int cuda_fwd_swiglu_rows_half(void *out_h, si_type out_h_type, const float *gu, int n_ff,
                              int n_rows, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
