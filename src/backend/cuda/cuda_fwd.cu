/* cuda_fwd.cu — small kernels of the CUDA forward pass (see cuda_fwd.h). All are memory-bound
 * copies; a grid-stride loop over the flattened output, 256 threads a block. */
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_fwd.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8x_row.cuh"

static int fwd_grid(long long n) {
    const long long g = (n + 255) / 256;
    return (int)(g < 1 ? 1 : g > 65535 ? 65535 : g);
}

__global__ void add_bias_kernel(float *x, const float *bias, int n, long long total) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x)
        x[i] += bias[i % n];
}

__global__ void gather_rows_kernel(float *dst, const float *src, const int32_t *rows, int n_cols,
                                   long long total) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long r = i / n_cols, c = i % n_cols;
        dst[i] = src[(long long)rows[r] * n_cols + c];
    }
}

/* between the gate/up and down matmuls of a decode step: launched with PDL (pdl.cuh). Four
 * consecutive elements a thread (n_ff % 4 == 0). Q8: the output also quantised for the down GEMV
 * (CUDA_Q8X_ROW_BYTES layout; n_ff % 128 == 0, so 8 consecutive lanes hold one block of one row,
 * and every warp's lanes are all in or all out), quantised as q8x_quantize_x would. H 1 / 2: the
 * output also as f16 / bf16 into out_h, for cuda_gemm_pre. */
template <bool Q8, int H>
__global__ void swiglu_rows_kernel(float *out, uint8_t *out_q8, void *out_h, const float *gu,
                                   int n_ff, long long total4) {
    si_pdl_trigger();
    si_pdl_wait();
    const int n4 = n_ff / 4;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total4;
         i += (long long)gridDim.x * blockDim.x) {
        const long long r = i / n4, j = i % n4;
        const float4 g = ((const float4 *)(gu + r * 2 * n_ff))[j];
        const float4 u = ((const float4 *)(gu + r * 2 * n_ff + n_ff))[j];
        float4 v; /* as cuda_swiglu */
        v.x = si_silu_mul(g.x, u.x);
        v.y = si_silu_mul(g.y, u.y);
        v.z = si_silu_mul(g.z, u.z);
        v.w = si_silu_mul(g.w, u.w);
        if (out) ((float4 *)out)[i] = v;
        if (Q8) q8x_row_store4(out_q8 + r * CUDA_Q8X_ROW_BYTES(n_ff), n_ff, (int)(4 * j), v);
        if (H == 1) {
            __half2 *h = (__half2 *)out_h + 2 * i;
            h[0] = __floats2half2_rn(v.x, v.y);
            h[1] = __floats2half2_rn(v.z, v.w);
        }
        if (H == 2) {
            __nv_bfloat162 *h = (__nv_bfloat162 *)out_h + 2 * i;
            h[0] = __floats2bfloat162_rn(v.x, v.y);
            h[1] = __floats2bfloat162_rn(v.z, v.w);
        }
    }
}

extern "C" void cuda_fwd_add_bias(float *x, const float *bias, int n, int n_rows,
                                  cudaStream_t stream) {
    const long long total = (long long)n * n_rows;
    if (total <= 0) return;
    add_bias_kernel<<<fwd_grid(total), 256, 0, stream>>>(x, bias, n, total);
    CUDA_CHECK_LAUNCH();
}

extern "C" void cuda_fwd_gather_rows(float *dst, const float *src, const int32_t *rows,
                                     int n_rows, int n_cols, cudaStream_t stream) {
    const long long total = (long long)n_rows * n_cols;
    if (total <= 0) return;
    gather_rows_kernel<<<fwd_grid(total), 256, 0, stream>>>(dst, src, rows, n_cols, total);
    CUDA_CHECK_LAUNCH();
}

extern "C" void cuda_fwd_swiglu_rows(float *out, void *out_q8, const float *gu, int n_ff,
                                     int n_rows, cudaStream_t stream) {
    const long long total4 = (long long)n_ff / 4 * n_rows;
    if (total4 <= 0) return;
    if (!out && !(out_q8 && n_ff % 128 == 0)) { /* an internal invariant: something to write */
        fprintf(stderr, "%s:%d: cuda_fwd_swiglu_rows: no output\n", __FILE__, __LINE__);
        abort();
    }
    if (out_q8 && n_ff % 128 == 0)
        si_launch_pdl(swiglu_rows_kernel<true, 0>, fwd_grid(total4), 256, 0, stream, out,
                      (uint8_t *)out_q8, (void *)NULL, gu, n_ff, total4);
    else
        si_launch_pdl(swiglu_rows_kernel<false, 0>, fwd_grid(total4), 256, 0, stream, out,
                      (uint8_t *)NULL, (void *)NULL, gu, n_ff, total4);
}

extern "C" int cuda_fwd_swiglu_rows_half(void *out_h, si_type out_h_type, const float *gu,
                                         int n_ff, int n_rows, cudaStream_t stream) {
    const long long total4 = (long long)n_ff / 4 * n_rows;
    if (total4 <= 0 || n_ff % 4 || !out_h) return -1;
    if (out_h_type == SI_TYPE_F16)
        si_launch_pdl(swiglu_rows_kernel<false, 1>, fwd_grid(total4), 256, 0, stream,
                      (float *)NULL, (uint8_t *)NULL, out_h, gu, n_ff, total4);
    else if (out_h_type == SI_TYPE_BF16)
        si_launch_pdl(swiglu_rows_kernel<false, 2>, fwd_grid(total4), 256, 0, stream,
                      (float *)NULL, (uint8_t *)NULL, out_h, gu, n_ff, total4);
    else
        return -1;
    return 0;
}
