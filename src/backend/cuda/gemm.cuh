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
/* A table entry's configuration as a cuBLASLt algorithm; -1 where this cuBLASLt lacks it. */
extern "C" int cuda_gemm_table_algo(cublasLtHandle_t lt, const gemm_table_entry *e,
                                    cublasLtMatmulAlgo_t *a);
#endif
