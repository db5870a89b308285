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

/* v's squares summed, ((x^2 + y^2) + z^2) + w^2, written out as the fused multiply-adds a
 * compiler makes of it: every kernel that sums a row's squares sums them with these bits,
 * whatever each call site's contraction would have been (the GEMV with the norm inside continues
 * one thread's sum in another, gemv_q8x.cuh). */
__device__ __forceinline__ float norm_sq4(float4 v) {
    return __fmaf_rn(v.w, v.w, __fmaf_rn(v.z, v.z, __fmaf_rn(v.y, v.y, __fmul_rn(v.x, v.x))));
}

/* Thread t's slots i < kn (at most NV) of a row of n4 float4: slot i is float4
 * j = t + (k0 + i) NORM_THREADS of x (where j < n4), plus y's where y is not NULL, into v.
 * Every load is issued before any use, and issued() runs between the two (the caller's own
 * loads, which should queue behind these). */
template <int NV, class F>
__device__ __forceinline__ void norm_row_load_slots(float4 (&v)[NV], const float4 *x4,
                                                    const float4 *y4, int n4, int t, int k0, int kn,
                                                    F issued) {
    float4 a[NV];
#pragma unroll
    for (int i = 0; i < NV; i++)
        if (i < kn && t + (k0 + i) * NORM_THREADS < n4) v[i] = x4[t + (k0 + i) * NORM_THREADS];
    if (y4) {
#pragma unroll
        for (int i = 0; i < NV; i++)
            if (i < kn && t + (k0 + i) * NORM_THREADS < n4) a[i] = y4[t + (k0 + i) * NORM_THREADS];
    }
    issued();
    if (y4) {
#pragma unroll
        for (int i = 0; i < NV; i++)
            if (i < kn && t + (k0 + i) * NORM_THREADS < n4) {
                v[i].x += a[i].x;
                v[i].y += a[i].y;
                v[i].z += a[i].z;
                v[i].w += a[i].w;
            }
    }
}

/* ss plus the sums of the squares of the slots norm_row_load_slots loaded, in slot order: the
 * sum of all NORM_VEC slots from 0.0f is a thread's part of the row's sum of squares, and a sum
 * over slots 0..s-1 continued over slots s.. gives the same bits. */
template <int NV>
__device__ __forceinline__ float norm_row_sq(float ss, const float4 (&v)[NV], int n4, int t, int k0,
                                             int kn) {
#pragma unroll
    for (int i = 0; i < NV; i++)
        if (i < kn && t + (k0 + i) * NORM_THREADS < n4) ss += norm_sq4(v[i]);
    return ss;
}

/* Thread t's float4 j = t + k NORM_THREADS (k < NORM_VEC, j < n4) of x (plus y's) into v, as
 * norm_row_load_slots; returns the sum of the squares of its values. */
template <class F>
__device__ __forceinline__ float norm_row_load(float4 (&v)[NORM_VEC], const float4 *x4,
                                               const float4 *y4, int n4, int t, F issued) {
    norm_row_load_slots(v, x4, y4, n4, t, 0, NORM_VEC, issued);
    return norm_row_sq(0.0f, v, n4, t, 0, NORM_VEC);
}

__device__ __forceinline__ float norm_row_load(float4 (&v)[NORM_VEC], const float4 *x4,
                                               const float4 *y4, int n4, int t) {
    return norm_row_load(v, x4, y4, n4, t, [] {});
}

/* The row's 1 / rms from the sums of squares ss of the threads t = threadIdx.x % NORM_THREADS
 * of the CTA (every thread of the CTA calls it; only those with owner true hold a t's sum;
 * red: NORM_THREADS / 32 floats of shared memory; one barrier). */
__device__ __forceinline__ float norm_row_scale(float ss, float *red, int n, float eps,
                                                bool owner = true) {
    if (owner) {
        ss = si_warp_sum(ss);
        if (threadIdx.x % 32 == 0) red[threadIdx.x % NORM_THREADS / 32] = ss;
    }
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
