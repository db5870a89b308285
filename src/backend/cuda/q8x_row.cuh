/* q8x_row.cuh — x quantised for the GEMVs of the quantised types by the kernel that writes x
 * (fused norm + quantise, SwiGLU + quantise), in the CUDA_Q8X_ROW_BYTES layout (cuda_ops.h)
 * that cuda_gemv_pre reads. */
#ifndef SI_BACKEND_CUDA_Q8X_ROW_CUH
#define SI_BACKEND_CUDA_Q8X_ROW_CUH
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

/* The Q8_0 quantisation of a block of 32 that 32 / N consecutive lanes hold, N each (v), called
 * by all 32 lanes: this lane's N q (d = amax / 127, q = round(x / d)), and the block's d rounded
 * to fp16 and the sum of its q. The one place this arithmetic lives: the GEMVs' own quantiser
 * (q8x_quantize_x, gemv_q8x.cuh) and the fused producers below (norm, SwiGLU, decode attention)
 * all call it, so x quantised ahead gives the GEMVs bit-identical results. */
template <int N>
__device__ __forceinline__ void q8x_block(const float (&v)[N], int (&q)[N], float *d_rounded,
                                          int *sum_q) {
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < N; j++) amax = fmaxf(amax, fabsf(v[j]));
#pragma unroll
    for (int o = 1; o < 32 / N; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
#pragma unroll
    for (int j = 0; j < N; j++) {
        q[j] = (int)roundf(v[j] * id);
        sum += q[j];
    }
#pragma unroll
    for (int o = 1; o < 32 / N; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    *d_rounded = __half2float(__float2half_rn(d));
    *sum_q = sum;
}

/* q8x_block of 8 lanes holding 4 each (v): the lane's four q packed as int8. */
__device__ __forceinline__ uint32_t q8x_block4(float4 v, float *d_rounded, int *sum_q) {
    const float a[4] = {v.x, v.y, v.z, v.w};
    int q[4];
    q8x_block<4>(a, q, d_rounded, sum_q);
    return (uint32_t)(q[0] & 0xFF) | ((uint32_t)(q[1] & 0xFF) << 8) |
           ((uint32_t)(q[2] & 0xFF) << 16) | ((uint32_t)(q[3] & 0xFF) << 24);
}

/* Stores a block's d and sum of q into row (n elements) for the block holding element i. */
__device__ __forceinline__ void q8x_row_store_scale(uint8_t *row, int n, int i, float d, int sum) {
    float *qd = (float *)(row + n);
    qd[i / 32] = d;
    ((int *)(qd + n / 32))[i / 32] = sum;
}

/* Called by all 32 lanes of a warp, lane l holding element i = 32 w + l (v) of a row of n
 * elements: stores its block's quantisation into row. */
__device__ __forceinline__ void q8x_row_store1(uint8_t *row, int n, int i, float v) {
    const float a[1] = {v};
    int q[1];
    float d;
    int sum;
    q8x_block<1>(a, q, &d, &sum);
    row[i] = (uint8_t)(q[0] & 0xFF);
    if (i % 32 == 0) q8x_row_store_scale(row, n, i, d, sum);
}

/* Called by all 32 lanes of a warp, lane l holding elements i..i+3 (v; i = 4 (32 w + l) for
 * some w, so 8 consecutive lanes hold one block) of a row of n elements: stores the block's
 * quantisation (q8x_block4) into row: q at i; d and the sum of q at block i / 32. */
__device__ __forceinline__ void q8x_row_store4(uint8_t *row, int n, int i, float4 v) {
    float d;
    int sum;
    *(uint32_t *)(row + i) = q8x_block4(v, &d, &sum);
    if (i % 32 == 0) q8x_row_store_scale(row, n, i, d, sum);
}
#endif
