/* norm.cu — RMSNorm, one CTA per row; optionally also writes the row as f16/bf16 so that the
 * next tensor-core matmul needs no separate conversion pass (fused norm + convert), or first adds
 * the residual (fused add + norm: one kernel, not two, between a layer's matmuls). Launched
 * with PDL (pdl.cuh): it lets the matmul after it launch at once, so that its weight reads start
 * while the norm runs. */
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mmq_half.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8x_row.cuh"

/* ADD: x[r] += y[r] first (the residual add of the matmul before), written back to x; the sum of
 * squares is of the sum. A thread's elements are the same in both passes, so out may alias y.
 * Q8: out's row also quantised to out_q8 (CUDA_Q8X_ROW_BYTES layout; n % 128 == 0, so every warp
 * has all its lanes or none in each step) exactly as q8x_quantize_x (gemv_q8x.cuh) would.
 * OUTH 3: out's rows also as f16 into out_h in the batched quantised matmul's layout
 * (mmq_half.cuh) for gridDim.x = npad rows: rows n_real.. are written as zeros, nothing else.
 *
 * Each thread holds its (up to NORM_VEC) float4 of the row in registers: all its loads are
 * issued before any use, so a row costs about one memory round trip, which is what a decode step
 * pays per norm (one CTA per row). The norm weight, which no kernel writes, is loaded before the
 * PDL wait, while the matmul before still runs: one round trip fewer after it (on the H200,
 * 7B tg128 F16 +2 %, Q8_0 +4 %, Q4_0 +6.5 %; bench/RESULTS.md 2026-11-30 s6). A scalar loop
 * serves rows with n % 4 != 0 or n > the registers' reach (no Q8 there). */
template <int OUTH, bool ADD, bool Q8> /* OUTH 0: none, 1: f16, 2: bf16, 3: f16 for mmq */
__global__ void __launch_bounds__(NORM_THREADS)
    rmsnorm_kernel(float *out, void *out_h, uint8_t *out_q8, float *x, const float *y,
                   const float *__restrict__ w, int n, float eps, int n_real) {
    __shared__ float red[NORM_RED];
    si_pdl_trigger();
    const size_t r = blockIdx.x;
    const int t = threadIdx.x;
    float *xr = x + r * n;
    const bool vec = n % 4 == 0 && n <= NORM_VEC_MAX;
    float4 g[NORM_VEC]; /* the weight's float4 at the same places as v's */
    if (vec) {
        const float4 *w4 = (const float4 *)w;
#pragma unroll
        for (int k = 0; k < NORM_VEC; k++)
            if (t + k * NORM_THREADS < n / 4) g[k] = __ldg(w4 + t + k * NORM_THREADS);
    }
    si_pdl_wait();
    if (OUTH == 3 && (int)r >= n_real) { /* a padding row of the matmul's layout */
        for (int j = t; j < n / 4; j += NORM_THREADS)
            *(uint2 *)((uint8_t *)out_h + mmq_half_offset((int)r, 4 * j, gridDim.x)) =
                make_uint2(0u, 0u);
        return;
    }
    float4 v[NORM_VEC];
    float ss = 0.0f, ss1 = 0.0f; /* vec: the two halves' sums (norm.cuh's order) */
    if (vec) {
        const int n4 = n / 4, kh = norm_half(n4);
        float4 *x4 = (float4 *)xr;
        norm_row_load_slots(v, x4, ADD ? (const float4 *)(y + r * n) : NULL, n4, t, 0, NORM_VEC,
                            [] {});
        ss = norm_row_sq(v, n4, t, 0, 0, kh);
        ss1 = norm_row_sq(v, n4, t, 0, kh, NORM_VEC);
        if (ADD) {
#pragma unroll
            for (int k = 0; k < NORM_VEC; k++)
                if (t + k * NORM_THREADS < n4) x4[t + k * NORM_THREADS] = v[k];
        }
    } else {
        for (int i = t; i < n; i += NORM_THREADS) {
            float e = xr[i];
            if (ADD) {
                e += y[r * n + i];
                xr[i] = e;
            }
            ss += e * e;
        }
    }
    const float scale = norm_row_scale(ss, ss1, true, red, n, eps);
    if (vec) {
        const int n4 = n / 4;
#pragma unroll
        for (int k = 0; k < NORM_VEC; k++) {
            const int j = t + k * NORM_THREADS;
            if (j >= n4) break;
            const float4 o = norm_out4(v[k], scale, g[k]);
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
            if (OUTH == 3) {
                const __half2 a = __floats2half2_rn(o.x, o.y), b = __floats2half2_rn(o.z, o.w);
                *(uint2 *)((uint8_t *)out_h + mmq_half_offset((int)r, 4 * j, gridDim.x)) =
                    make_uint2(*(const uint32_t *)&a, *(const uint32_t *)&b);
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

/* any instance of rmsnorm_kernel */
typedef void (*rmsnorm_fn)(float *, void *, uint8_t *, float *, const float *, const float *, int,
                           float, int);

extern "C" int cuda_rmsnorm(float *out, void *out_h, si_type out_h_type, const float *x,
                            const float *w, int n, int n_rows, float eps, cudaStream_t stream) {
    if (n < 1 || n_rows < 1) return -1;
    /* x is only read when nothing is added */
    if (out_h)
        return cuda_add_rmsnorm_half(out, out_h, out_h_type, (float *)x, NULL, w, n, n_rows, eps,
                                     stream);
    si_launch_pdl(rmsnorm_kernel<0, false, false>, n_rows, NORM_THREADS, 0, stream, out,
                  (void *)NULL, (uint8_t *)NULL, (float *)x, (const float *)NULL, w, n, eps, n_rows);
    return 0;
}

extern "C" int cuda_add_rmsnorm(float *out, void *out_q8, float *x, const float *y,
                                const float *w, int n, int n_rows, float eps,
                                cudaStream_t stream) {
    if (n < 1 || n_rows < 1 || (!out && !out_q8) || (out_q8 && (n % 128 || n > NORM_VEC_MAX)))
        return -1;
    rmsnorm_fn k;
    if (y) k = out_q8 ? rmsnorm_kernel<0, true, true> : rmsnorm_kernel<0, true, false>;
    else k = out_q8 ? rmsnorm_kernel<0, false, true> : rmsnorm_kernel<0, false, false>;
    si_launch_pdl(k, n_rows, NORM_THREADS, 0, stream, out, (void *)NULL, (uint8_t *)out_q8, x, y,
                  w, n, eps, n_rows);
    return 0;
}

extern "C" int cuda_add_rmsnorm_mmq(float *out, void *out_mmq, float *x, const float *y,
                                    const float *w, int n, int n_rows, float eps,
                                    cudaStream_t stream) {
    if (!out || !out_mmq || n % 256 || n > NORM_VEC_MAX || n_rows < 9 || n_rows > 128) return -1;
    const rmsnorm_fn k = y ? rmsnorm_kernel<3, true, false> : rmsnorm_kernel<3, false, false>;
    si_launch_pdl(k, mmq_npad(n_rows), NORM_THREADS, 0, stream, out, out_mmq, (uint8_t *)NULL, x,
                  y, w, n, eps, n_rows);
    return 0;
}

extern "C" int cuda_add_rmsnorm_half(float *out, void *out_h, si_type out_h_type, float *x,
                                     const float *y, const float *w, int n, int n_rows, float eps,
                                     cudaStream_t stream) {
    if (n < 1 || n_rows < 1 || !out_h) return -1;
    rmsnorm_fn k;
    if (out_h_type == SI_TYPE_F16)
        k = y ? rmsnorm_kernel<1, true, false> : rmsnorm_kernel<1, false, false>;
    else if (out_h_type == SI_TYPE_BF16)
        k = y ? rmsnorm_kernel<2, true, false> : rmsnorm_kernel<2, false, false>;
    else
        return -1;
    si_launch_pdl(k, n_rows, NORM_THREADS, 0, stream, out, out_h, (uint8_t *)NULL, x, y, w, n, eps,
                  n_rows);
    return 0;
}
