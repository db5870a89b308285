/* gemm_rows64.h — y = x W^T for up to 64 activation rows and F16/BF16 weights on Hopper's own
 * instructions (sm90a/gemm_rows64.cu): the batched-decode shape, where cuBLASLt reads the
 * weights at 60-82 % of the memory bandwidth for the Llama-2-7B matmuls other than gate/up
 * (bench/RESULTS.md, 2026-12-01 01:05). Not faster than cuBLASLt yet (gemm_rows64.cu says why):
 * cuda_gemm takes it only when SI_CUDA_ROWS64=1 (cuda_gemm_use_rows64).
 *
 * x [n_rows][K] is already in the weight's type (as cuda_gemm_pre takes it), y [n_rows][M] f32.
 * Each output element is summed in an order fixed by (M, K) and the GPU's multiprocessor count
 * alone: a row's result does not depend on n_rows or on the other rows, nor on timing (the
 * split-K partial sums are added in a fixed order, not with atomics). gemm.cu calls it; one
 * matmul at a time per handle (its partial sums and flags are the handle's). */
#ifndef SI_BACKEND_CUDA_GEMM_ROWS64_H
#define SI_BACKEND_CUDA_GEMM_ROWS64_H

#include <cuda_runtime_api.h>

#include "swiftinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_rows64 cuda_rows64;

/* NULL where the GPU is not compute capability 9.0 (the kernel is sm_90a machine code only).
 * Allocates the partial sums (32 KB a multiprocessor). */
cuda_rows64 *cuda_rows64_create(void);
void cuda_rows64_free(cuda_rows64 *r);

/* Whether cuda_rows64_matmul takes this matmul: r not NULL, t F16 or BF16, 1..64 rows,
 * M % 128 == 0, K % 64 == 0. */
int cuda_rows64_ok(const cuda_rows64 *r, si_type t, int M, int K, int n_rows);

/* y = x W^T; W and x 16-byte aligned. Returns 0, or -1 (nothing launched) where cuda_rows64_ok
 * says no. Launched with programmatic dependent launch (pdl.cuh): the first weight tiles are
 * read before the kernel before it has finished. */
int cuda_rows64_matmul(cuda_rows64 *r, si_type t, const void *W, int M, int K, const void *x,
                       int n_rows, float *y, cudaStream_t stream);

/* Diagnostics (test_cuda_gemm's timings): while dev is not NULL, each launch's CTA p writes
 * %globaltimer into dev[3p] at its start, dev[3p + 1] once a tile it finishes for others is
 * complete, dev[3p + 2] at its end. */
void cuda_rows64_set_trace(unsigned long long *dev);

#ifdef __cplusplus
}
#endif
#endif
