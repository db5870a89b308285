/* norm.cu — RMSNorm, one CTA per row; optionally also writes the row as f16/bf16 so that the
 * next tensor-core matmul needs no separate conversion pass (fused norm + convert), or first adds
 * the residual (fused add + norm: one kernel, not two, between a layer's matmuls). Launched
 * with PDL (pdl.cuh): it lets the matmul after it launch at once, so that its weight reads start
 * while the norm runs. */
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8x_row.cuh"

/* ADD: x[r] += y[r] first (the residual add of the matmul before), written back to x; the sum of
 * squares is of the sum. One thread's elements are the same in both passes, so out may alias y.
 * Q8: out's row also quantised to out_q8 (CUDA_Q8X_ROW_BYTES layout), one warp per block of 32
 * (n % 32 == 0: every warp has all its lanes or none in each pass), exactly as
 * q8x_quantize_x (gemv_q8x.cuh) would quantise out. */
template <int OUTH, bool ADD, bool Q8> /* OUTH 0: none, 1: f16, 2: bf16 */
__global__ void __launch_bounds__(NORM_THREADS)
    rmsnorm_kernel(float *out, void *out_h, uint8_t *out_q8, float *x, const float *y,
                   const float *__restrict__ w, int n, float eps) {
    __shared__ float red[NORM_THREADS / 32];
    si_pdl_trigger();
    si_pdl_wait();
    const size_t r = blockIdx.x;
    float *xr = x + r * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) {
        float v = xr[i];
        if (ADD) {
            v += y[r * n + i];
            xr[i] = v;
        }
        ss += v * v;
    }
    ss = si_warp_sum(ss);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
    __syncthreads();
    float tot = 0.0f;
#pragma unroll
    for (int i = 0; i < NORM_THREADS / 32; i++) tot += red[i];
    const float scale = 1.0f / sqrtf(tot / (float)n + eps);
    uint8_t *q8 = Q8 ? out_q8 + r * CUDA_Q8X_ROW_BYTES(n) : NULL;
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) {
        const float v = xr[i] * scale * w[i];
        if (out) out[r * n + i] = v;
        if (OUTH == 1) ((__half *)out_h)[r * n + i] = __float2half_rn(v);
        if (OUTH == 2) ((__nv_bfloat16 *)out_h)[r * n + i] = __float2bfloat16_rn(v);
        if (Q8) q8x_row_store(q8, n, i, v);
    }
}

extern "C" int cuda_rmsnorm(float *out, void *out_h, si_type out_h_type, const float *x,
                            const float *w, int n, int n_rows, float eps, cudaStream_t stream) {
    if (n < 1 || n_rows < 1) return -1;
    void (*k)(float *, void *, uint8_t *, float *, const float *, const float *, int, float);
    if (!out_h) k = rmsnorm_kernel<0, false, false>;
    else if (out_h_type == SI_TYPE_F16) k = rmsnorm_kernel<1, false, false>;
    else if (out_h_type == SI_TYPE_BF16) k = rmsnorm_kernel<2, false, false>;
    else return -1;
    /* x is only read when nothing is added */
    si_launch_pdl(k, n_rows, NORM_THREADS, 0, stream, out, out_h, (uint8_t *)NULL, (float *)x,
                  (const float *)NULL, w, n, eps);
    return 0;
}

extern "C" int cuda_add_rmsnorm(float *out, void *out_q8, float *x, const float *y,
                                const float *w, int n, int n_rows, float eps,
                                cudaStream_t stream) {
    if (n < 1 || n_rows < 1 || !out || (out_q8 && n % 128)) return -1;
    void (*k)(float *, void *, uint8_t *, float *, const float *, const float *, int, float);
    if (y) k = out_q8 ? rmsnorm_kernel<0, true, true> : rmsnorm_kernel<0, true, false>;
    else k = out_q8 ? rmsnorm_kernel<0, false, true> : rmsnorm_kernel<0, false, false>;
    si_launch_pdl(k, n_rows, NORM_THREADS, 0, stream, out, (void *)NULL, (uint8_t *)out_q8, x, y,
                  w, n, eps);
    return 0;
}
