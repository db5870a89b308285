/* norm.cu — RMSNorm, one CTA per row; optionally also writes the row as f16/bf16 so that the
 * next tensor-core matmul needs no separate conversion pass (fused norm + convert), or first adds
 * the residual (fused add + norm: one kernel, not two, between a layer's matmuls). Launched
 * with PDL (pdl.cuh): it lets the matmul after it launch at once, so that its weight reads start
 * while the norm runs. */
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/pdl.cuh"

template <int OUTH, bool ADD, bool Q8> /* rmsnorm_row's, one CTA a row */
__global__ void __launch_bounds__(NORM_THREADS)
    rmsnorm_kernel(float *out, void *out_h, uint8_t *out_q8, float *x, const float *y,
                   const float *__restrict__ w, int n, float eps) {
    __shared__ float red[NORM_THREADS / 32];
    si_pdl_trigger();
    si_pdl_wait();
    rmsnorm_row<OUTH, ADD, Q8>(out, out_h, out_q8, x, y, w, n, eps, blockIdx.x, red);
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
    if (n < 1 || n_rows < 1 || !out || (out_q8 && (n % 128 || n > NORM_VEC_MAX))) return -1;
    void (*k)(float *, void *, uint8_t *, float *, const float *, const float *, int, float);
    if (y) k = out_q8 ? rmsnorm_kernel<0, true, true> : rmsnorm_kernel<0, true, false>;
    else k = out_q8 ? rmsnorm_kernel<0, false, true> : rmsnorm_kernel<0, false, false>;
    si_launch_pdl(k, n_rows, NORM_THREADS, 0, stream, out, (void *)NULL, (uint8_t *)out_q8, x, y,
                  w, n, eps);
    return 0;
}
