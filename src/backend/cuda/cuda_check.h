/* cuda_check.h — CUDA_CHECK for the CUDA backend's C and CUDA files alike. Broken CUDA calls are
 * internal invariants here (bad input is rejected before any launch): print file:line and the
 * CUDA message, then abort. */
#ifndef SI_BACKEND_CUDA_CHECK_H
#define SI_BACKEND_CUDA_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#define CUDA_CHECK(call)                                                                    \
    do {                                                                                    \
        cudaError_t err_ = (call);                                                          \
        if (err_ != cudaSuccess) {                                                          \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_), __FILE__, \
                    __LINE__, cudaGetErrorString(err_));                                    \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

#endif
