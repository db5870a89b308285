/* norm.cuh — RMSNorm (Zhang & Sennrich 2019), launcher cuda_rmsnorm in cuda_ops.h; the row
 * arithmetic is here so that every kernel that normalises a row (norm.cu, and the batch-1 GEMV
 * that runs the norm in its own CTAs, gemv_q8x.cuh) gets the same bits. */
#ifndef SI_BACKEND_CUDA_NORM_CUH
#define SI_BACKEND_CUDA_NORM_CUH
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#define NORM_THREADS 256
#define NORM_VEC 8                                /* float4 of a row per thread, in registers */
#define NORM_VEC_MAX (NORM_THREADS * 4 * NORM_VEC) /* longest row so held: 8192 */
static_assert(NORM_VEC_MAX == CUDA_NORM_Q8_MAX, "cuda_ops.h's promise");

/* Thread t's float4 of a row of n4 float4 (j = t + k NORM_THREADS, k < NORM_VEC, j < n4) of x,
 * plus y's where y is not NULL, into v; every load is issued before any use, and issued() runs
 * between the two (the caller's own loads, which should queue behind these). Returns the sum of
 * the squares of its values. */
template <class F>
__device__ __forceinline__ float norm_row_load(float4 (&v)[NORM_VEC], const float4 *x4,
                                               const float4 *y4, int n4, int t, F issued) {
    float4 a[NORM_VEC];
#pragma unroll
    for (int k = 0; k < NORM_VEC; k++)
        if (t + k * NORM_THREADS < n4) v[k] = x4[t + k * NORM_THREADS];
    if (y4) {
#pragma unroll
        for (int k = 0; k < NORM_VEC; k++)
            if (t + k * NORM_THREADS < n4) a[k] = y4[t + k * NORM_THREADS];
    }
    issued();
    if (y4) {
#pragma unroll
        for (int k = 0; k < NORM_VEC; k++)
            if (t + k * NORM_THREADS < n4) {
                v[k].x += a[k].x; v[k].y += a[k].y; v[k].z += a[k].z; v[k].w += a[k].w;
            }
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NORM_VEC; k++)
        if (t + k * NORM_THREADS < n4)
            ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    return ss;
}

__device__ __forceinline__ float norm_row_load(float4 (&v)[NORM_VEC], const float4 *x4,
                                               const float4 *y4, int n4, int t) {
    return norm_row_load(v, x4, y4, n4, t, [] {});
}

/* The row's 1 / rms from each thread's sum of squares ss (all NORM_THREADS threads of the CTA
 * call it; red: NORM_THREADS / 32 floats of shared memory; one barrier). */
__device__ __forceinline__ float norm_row_scale(float ss, float *red, int n, float eps) {
    ss = si_warp_sum(ss);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
    __syncthreads();
    float tot = 0.0f;
#pragma unroll
    for (int i = 0; i < NORM_THREADS / 32; i++) tot += red[i];
    return 1.0f / sqrtf(tot / (float)n + eps);
}

/* a normalised float4: v / rms * w */
__device__ __forceinline__ float4 norm_out4(float4 v, float scale, float4 g) {
    return make_float4(v.x * scale * g.x, v.y * scale * g.y, v.z * scale * g.z, v.w * scale * g.w);
}
#endif
