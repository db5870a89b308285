/* norm.cuh — RMSNorm (Zhang & Sennrich 2019), launcher cuda_rmsnorm in cuda_ops.h. */
#ifndef SI_BACKEND_CUDA_NORM_CUH
#define SI_BACKEND_CUDA_NORM_CUH
#include "backend/cuda/cuda_common.cuh"
#define NORM_THREADS 256
#endif
