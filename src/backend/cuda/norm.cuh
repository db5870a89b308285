/* norm.cuh — RMSNorm (Zhang & Sennrich 2019), launcher cuda_rmsnorm in cuda_ops.h. */
#ifndef SI_BACKEND_CUDA_NORM_CUH
#define SI_BACKEND_CUDA_NORM_CUH
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#define NORM_THREADS 256
#define NORM_VEC 8                                /* float4 of a row per thread, in registers */
#define NORM_VEC_MAX (NORM_THREADS * 4 * NORM_VEC) /* longest row so held: 8192 */
static_assert(NORM_VEC_MAX == CUDA_NORM_Q8_MAX, "cuda_ops.h's promise");
#endif
