/* q8x_row.cuh — x quantised for the GEMVs of the quantised types by the kernel that writes x
 * (fused norm + quantise, SwiGLU + quantise), in the CUDA_Q8X_ROW_BYTES layout (cuda_ops.h)
 * that cuda_gemv_pre reads. */
#ifndef SI_BACKEND_CUDA_Q8X_ROW_CUH
#define SI_BACKEND_CUDA_Q8X_ROW_CUH
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

/* Called by all 32 lanes of a warp, lane l holding element i = 32 b + l of a row of n elements
 * (block b): stores the block's Q8_0 quantisation into row (q at i; d, fp16-rounded, and the sum
 * of q at b) with exactly q8x_quantize_x's arithmetic (gemv_q8x.cuh), so cuda_gemv_pre gives
 * cuda_gemv's results on the f32 x. */
__device__ __forceinline__ void q8x_row_store(uint8_t *row, int n, int i, float v) {
    const float amax = si_warp_max(fabsf(v));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const int q = (int)roundf(v * id);
    int sum = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    row[i] = (uint8_t)(q & 0xFF);
    if (i % 32 == 0) {
        float *qd = (float *)(row + n);
        qd[i / 32] = __half2float(__float2half_rn(d));
        ((int *)(qd + n / 32))[i / 32] = sum;
    }
}
#endif
