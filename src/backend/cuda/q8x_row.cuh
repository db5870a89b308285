/* q8x_row.cuh — x quantised for the GEMVs of the quantised types by the kernel that writes x
 * (fused norm + quantise, SwiGLU + quantise), in the CUDA_Q8X_ROW_BYTES layout (cuda_ops.h)
 * that cuda_gemv_pre reads. */
#ifndef SI_BACKEND_CUDA_Q8X_ROW_CUH
#define SI_BACKEND_CUDA_Q8X_ROW_CUH
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

/* Called by all 32 lanes of a warp, lane l holding elements i..i+3 (v; i = 4 (32 w + l) for
 * some w, so 8 consecutive lanes hold one Q8_0 block of 32) of a row of n elements: stores the
 * block's quantisation into row (q at i; d, fp16-rounded, and the sum of q at block i / 32) with
 * exactly q8x_quantize_x's arithmetic (gemv_q8x.cuh), so cuda_gemv_pre gives cuda_gemv's
 * results on the f32 x. */
__device__ __forceinline__ void q8x_row_store4(uint8_t *row, int n, int i, float4 v) {
    float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const int q0 = (int)roundf(v.x * id), q1 = (int)roundf(v.y * id);
    const int q2 = (int)roundf(v.z * id), q3 = (int)roundf(v.w * id);
    int sum = q0 + q1 + q2 + q3;
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    *(uint32_t *)(row + i) = (uint32_t)(q0 & 0xFF) | ((uint32_t)(q1 & 0xFF) << 8) |
                             ((uint32_t)(q2 & 0xFF) << 16) | ((uint32_t)(q3 & 0xFF) << 24);
    if (i % 32 == 0) {
        float *qd = (float *)(row + n);
        qd[i / 32] = __half2float(__float2half_rn(d));
        ((int *)(qd + n / 32))[i / 32] = sum;
    }
}
#endif
