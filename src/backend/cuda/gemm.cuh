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
#endif
