/* q8x_row.cuh — x quantised for the GEMVs of the quantised types by the kernel that writes x
 * (fused norm + quantise, SwiGLU + quantise), in the CUDA_Q8X_ROW_BYTES layout (cuda_ops.h)
 * that cuda_gemv_pre reads. */
#ifndef SI_BACKEND_CUDA_Q8X_ROW_CUH
#define SI_BACKEND_CUDA_Q8X_ROW_CUH
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

/* The Q8_0 quantisation of a block of 32 that 8 consecutive lanes hold, four each (v), called by
 * all 32 lanes: returns this lane's four q packed as int8 (d = amax / 127, q = round(x / d)),
 * and the block's d rounded to fp16 and the sum of its q. The one place this arithmetic lives:
 * the GEMVs' own quantiser (q8x_quantize_x, gemv_q8x.cuh) and the fused producers below both
 * call it, so x quantised ahead gives the GEMVs bit-identical results. */
__device__ __forceinline__ uint32_t q8x_block4(float4 v, float *d_rounded, int *sum_q) {
    float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const int q0 = (int)roundf(v.x * id), q1 = (int)roundf(v.y * id);
    const int q2 = (int)roundf(v.z * id), q3 = (int)roundf(v.w * id);
    int sum = q0 + q1 + q2 + q3;
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    *d_rounded = __half2float(__float2half_rn(d));
    *sum_q = sum;
    return (uint32_t)(q0 & 0xFF) | ((uint32_t)(q1 & 0xFF) << 8) | ((uint32_t)(q2 & 0xFF) << 16) |
           ((uint32_t)(q3 & 0xFF) << 24);
}

/* Called by all 32 lanes of a warp, lane l holding elements i..i+3 (v; i = 4 (32 w + l) for
 * some w, so 8 consecutive lanes hold one block) of a row of n elements: stores the block's
 * quantisation (q8x_block4) into row: q at i; d and the sum of q at block i / 32. */
__device__ __forceinline__ void q8x_row_store4(uint8_t *row, int n, int i, float4 v) {
    float d;
    int sum;
    *(uint32_t *)(row + i) = q8x_block4(v, &d, &sum);
    if (i % 32 == 0) {
        float *qd = (float *)(row + n);
        qd[i / 32] = d;
        ((int *)(qd + n / 32))[i / 32] = sum;
    }
}
#endif
