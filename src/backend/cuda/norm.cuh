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
#define NORM_RED (2 * NORM_THREADS / 32)           /* norm_row_scale's shared floats */
static_assert(NORM_VEC_MAX == CUDA_NORM_Q8_MAX, "cuda_ops.h's promise");

/* v's squares summed, ((x^2 + y^2) + z^2) + w^2, written out as the fused multiply-adds a
 * compiler makes of it, so that no call site's contraction can differ from another's. */
__device__ __forceinline__ float norm_sq4(float4 v) {
    return __fmaf_rn(v.w, v.w, __fmaf_rn(v.z, v.z, __fmaf_rn(v.y, v.y, __fmul_rn(v.x, v.x))));
}

/* The order of a row's sum of squares, the same in every kernel that normalises a row (so they
 * give the same bits): thread t of NORM_THREADS holds float4 j = t + k NORM_THREADS, k < nk =
 * ceil(n4 / NORM_THREADS); its float4 fall in two halves, k < norm_half(n4) and the rest, each
 * summed from 0 in k order; each half's sums are summed over the warp (si_warp_sum), and the 16
 * warp sums in the order half 0's warps 0..7, half 1's 0..7 (norm_row_scale). A CTA of
 * 2 NORM_THREADS threads gives each half of a t to its own thread (gemv_q8x.cuh): no thread
 * needs another's sum, so one barrier serves it as it serves a CTA of NORM_THREADS. */
__device__ __forceinline__ int norm_half(int n4) {
    return ((n4 + NORM_THREADS - 1) / NORM_THREADS + 1) / 2;
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

/* The sum of the squares of slots i0 <= i < i1 of those norm_row_load_slots loaded (slot i:
 * float4 t + (k0 + i) NORM_THREADS, where below n4), from 0 in slot order. */
template <int NV>
__device__ __forceinline__ float norm_row_sq(const float4 (&v)[NV], int n4, int t, int k0, int i0,
                                             int i1) {
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++)
        if (i >= i0 && i < i1 && t + (k0 + i) * NORM_THREADS < n4) ss += norm_sq4(v[i]);
    return ss;
}

/* The row's 1 / rms (every thread of the CTA calls it; red: NORM_RED floats of shared memory;
 * one barrier). A CTA of NORM_THREADS: each thread's two halves' sums s0, s1 (both);
 * of 2 NORM_THREADS: thread threadIdx.x holds half threadIdx.x / NORM_THREADS's sum s0 of
 * t = threadIdx.x % NORM_THREADS. */
__device__ __forceinline__ float norm_row_scale(float s0, float s1, bool both, float *red, int n,
                                                float eps) {
    constexpr int W = NORM_THREADS / 32;
    const int w = threadIdx.x % NORM_THREADS / 32, h = threadIdx.x / NORM_THREADS;
    s0 = si_warp_sum(s0);
    if (both) s1 = si_warp_sum(s1);
    if (threadIdx.x % 32 == 0) {
        if (both) {
            red[w] = s0;
            red[W + w] = s1;
        } else {
            red[h * W + w] = s0;
        }
    }
    __syncthreads();
    float tot = 0.0f;
#pragma unroll
    for (int i = 0; i < NORM_RED; i++)
        tot += red[i];
    return 1.0f / sqrtf(tot / (float)n + eps);
}

/* a normalised float4: v / rms * w */
__device__ __forceinline__ float4 norm_out4(float4 v, float scale, float4 g) {
    return make_float4(v.x * scale * g.x, v.y * scale * g.y, v.z * scale * g.z, v.w * scale * g.w);
}
#endif
