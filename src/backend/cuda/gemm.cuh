/* gemm.cuh — prefill matmul through cuBLASLt (gemm.cu). */
#ifndef SI_BACKEND_CUDA_GEMM_CUH
#define SI_BACKEND_CUDA_GEMM_CUH
#include "backend/cuda/cuda_common.cuh"
#include <cublasLt.h>

#define CUBLAS_CHECK(call)                                                                     \
    do {                                                                                       \
        cublasStatus_t st_ = (call);                                                           \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                    \
            fprintf(stderr, "cuBLAS error %d at %s:%d\n", (int)st_, __FILE__, __LINE__);       \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

#define GEMM_WORKSPACE (32u << 20)

#include "backend/cuda/gemm_table.h"

/* The cuBLASLt operation and layouts of y[n][M] = x[n][K] W^T as cuda_gemm runs it: W K x M
 * column-major (leading dimension ld >= K) transposed, x K x n (ld), y M x n in f32, f32
 * compute; W and x bf16 (bf) or f16. */
typedef struct gemm_lt_descs {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
} gemm_lt_descs;
extern "C" void cuda_gemm_lt_descs(bool bf, int M, int K, int ld, int n, gemm_lt_descs *d);
extern "C" void cuda_gemm_lt_descs_free(gemm_lt_descs *d);
/* A table entry's configuration as a cuBLASLt algorithm; -1 where this cuBLASLt lacks it. */
extern "C" int cuda_gemm_table_algo(cublasLtHandle_t lt, const gemm_table_entry *e,
                                    cublasLtMatmulAlgo_t *a);
#endif
