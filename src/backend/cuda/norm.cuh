/* norm.cuh — RMSNorm (Zhang & Sennrich 2019): the row function that the norm kernels
 * (norm.cu; launchers cuda_rmsnorm and cuda_add_rmsnorm in cuda_ops.h) and the decode GEMVs'
 * last CTA (norm_tail) share, so both give the same bits. */
#ifndef SI_BACKEND_CUDA_NORM_CUH
#define SI_BACKEND_CUDA_NORM_CUH
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/q8x_row.cuh"
#define NORM_THREADS 256
#define NORM_VEC 8                                /* float4 of a row per thread, in registers */
#define NORM_VEC_MAX (NORM_THREADS * 4 * NORM_VEC) /* longest row so held: 8192 */
static_assert(NORM_VEC_MAX == CUDA_NORM_Q8_MAX, "cuda_ops.h's promise");

/* RMSNorm of row r by the NORM_THREADS threads of a CTA (every thread calls it; red: shared
 * memory for NORM_THREADS / 32 floats, free again when it returns).
 * ADD: x[r] += y[r] first (the residual add of the matmul before), written back to x; the sum of
 * squares is of the sum. A thread's elements are the same in both passes, so out may alias y.
 * Q8: out's row also quantised to out_q8 (CUDA_Q8X_ROW_BYTES layout; n % 128 == 0, so every warp
 * has all its lanes or none in each step) exactly as q8x_quantize_x (gemv_q8x.cuh) would.
 *
 * Each thread holds its (up to NORM_VEC) float4 of the row in registers: all its loads are
 * issued before any use, so a row costs about one memory round trip, which is what a decode step
 * pays per norm (one CTA per row). A scalar loop serves rows with n % 4 != 0 or n > the
 * registers' reach (no Q8 there). y is read from L2 (__ldcg): norm_tail_run reads what other
 * CTAs of its kernel wrote. */
template <int OUTH, bool ADD, bool Q8> /* OUTH 0: none, 1: f16, 2: bf16 */
__device__ __forceinline__ void rmsnorm_row(float *out, void *out_h, uint8_t *out_q8, float *x,
                                            const float *y, const float *__restrict__ w, int n,
                                            float eps, size_t r, float *red) {
    const int t = threadIdx.x;
    float *xr = x + r * n;
    const bool vec = n % 4 == 0 && n <= NORM_VEC_MAX;
    float4 v[NORM_VEC];
    float ss = 0.0f;
    if (vec) {
        const int n4 = n / 4;
        float4 *x4 = (float4 *)xr;
        const float4 *y4 = ADD ? (const float4 *)(y + r * n) : NULL;
#pragma unroll
        for (int k = 0; k < NORM_VEC; k++)
            if (t + k * NORM_THREADS < n4) v[k] = x4[t + k * NORM_THREADS];
        if (ADD) {
            float4 a[NORM_VEC];
#pragma unroll
            for (int k = 0; k < NORM_VEC; k++)
                if (t + k * NORM_THREADS < n4) a[k] = __ldcg(y4 + t + k * NORM_THREADS);
#pragma unroll
            for (int k = 0; k < NORM_VEC; k++)
                if (t + k * NORM_THREADS < n4) {
                    v[k].x += a[k].x; v[k].y += a[k].y; v[k].z += a[k].z; v[k].w += a[k].w;
                    x4[t + k * NORM_THREADS] = v[k];
                }
        }
#pragma unroll
        for (int k = 0; k < NORM_VEC; k++)
            if (t + k * NORM_THREADS < n4)
                ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    } else {
        for (int i = t; i < n; i += NORM_THREADS) {
            float e = xr[i];
            if (ADD) {
                e += __ldcg(y + r * n + i);
                xr[i] = e;
            }
            ss += e * e;
        }
    }
    ss = si_warp_sum(ss);
    if (t % 32 == 0) red[t / 32] = ss;
    __syncthreads();
    float tot = 0.0f;
#pragma unroll
    for (int i = 0; i < NORM_THREADS / 32; i++) tot += red[i];
    const float scale = 1.0f / sqrtf(tot / (float)n + eps);
    if (vec) {
        const int n4 = n / 4;
        const float4 *w4 = (const float4 *)w;
#pragma unroll
        for (int k = 0; k < NORM_VEC; k++) {
            const int j = t + k * NORM_THREADS;
            if (j >= n4) break;
            const float4 g = w4[j];
            const float4 o = make_float4(v[k].x * scale * g.x, v[k].y * scale * g.y,
                                         v[k].z * scale * g.z, v[k].w * scale * g.w);
            if (out) ((float4 *)(out + r * n))[j] = o;
            if (OUTH == 1) {
                __half2 *h = (__half2 *)out_h + (r * n) / 2 + 2 * j;
                h[0] = __floats2half2_rn(o.x, o.y);
                h[1] = __floats2half2_rn(o.z, o.w);
            }
            if (OUTH == 2) {
                __nv_bfloat162 *h = (__nv_bfloat162 *)out_h + (r * n) / 2 + 2 * j;
                h[0] = __floats2bfloat162_rn(o.x, o.y);
                h[1] = __floats2bfloat162_rn(o.z, o.w);
            }
            if (Q8) q8x_row_store4(out_q8 + r * CUDA_Q8X_ROW_BYTES(n), n, 4 * j, o);
        }
    } else {
        for (int i = t; i < n; i += NORM_THREADS) {
            const float o = xr[i] * scale * w[i];
            if (out) out[r * n + i] = o;
            if (OUTH == 1) ((__half *)out_h)[r * n + i] = __float2half_rn(o);
            if (OUTH == 2) ((__nv_bfloat16 *)out_h)[r * n + i] = __float2bfloat16_rn(o);
        }
    }
}

/* The add + RMSNorm a decode GEMV runs after its rows (cuda_gemv_add_rmsnorm): its output y
 * ([nb][n]) added into x, then out = rmsnorm(x) * w, and out_q8 (may be NULL) as
 * cuda_add_rmsnorm's. counter: a device word, 0 between uses. */
struct norm_tail {
    float *x, *out;
    const float *y, *w;
    uint8_t *out_q8;
    unsigned *counter;
    int n, nb;
    float eps;
};

/* Called by every thread of a CTA of NORM_THREADS threads after its writes of y: the CTA that
 * finishes last (the counter reaches gridDim.x) runs the norm of all nb rows, in place of the
 * norm kernel that would follow (threadfence reduction, as CUDA's sample); it resets the
 * counter for the next use. red: shared memory for NORM_THREADS / 32 floats. */
template <bool Q8> __device__ __forceinline__ void norm_tail_run(const norm_tail &t, float *red) {
    __threadfence(); /* this thread's writes of y, before the count says they are done */
    __syncthreads();
    const bool last = __syncthreads_or(threadIdx.x == 0 && atomicAdd(t.counter, 1u) == gridDim.x - 1);
    if (!last) return;
    __threadfence();
    for (int r = 0; r < t.nb; r++) {
        rmsnorm_row<0, true, Q8>(t.out, NULL, t.out_q8, t.x, t.y, t.w, t.n, t.eps, r, red);
        __syncthreads(); /* red is reused by the next row */
    }
    if (threadIdx.x == 0) *t.counter = 0;
}
#endif
