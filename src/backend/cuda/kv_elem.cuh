/* kv_elem.cuh — the element types of the paged KV cache (cuda_ops.h: cuda_rope_params.kv_dtype,
 * cuda_attn_params.kv_dtype), as traits that the cache's writer (rope.cu) and readers
 * (attention.cu, attention_prefill.cu) take as a template parameter, dispatched once per launch:
 *   kv_f16: f16 (SI_KV_F16, the default);
 *   kv_fp8: OCP FP8 E4M3 (SI_KV_FP8_E4M3), scale 1 (vLLM's fp8 cache without scales): written
 *           with round-to-nearest-even and saturation to +-448 (__NV_SATFINITE), read back
 *           exactly (every E4M3 value is an f16 value), 8 elements at a time through cvt.f16x2.
 * Kernels read 8 consecutive elements as 8 halves (load_h8: 16 bytes of f16, 8 of fp8), so the
 * arithmetic after a load is the same for both. */
#ifndef SI_BACKEND_CUDA_KV_ELEM_CUH
#define SI_BACKEND_CUDA_KV_ELEM_CUH
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

struct kv_f16 {
    using T = __half;
    static constexpr int BYTES = 2;
    static __device__ __forceinline__ T from_float(float x) { return __float2half_rn(x); }
    static __device__ __forceinline__ float to_float(T x) { return __half2float(x); }
    /* elements p[0..7] (16-byte aligned) as 8 halves */
    static __device__ __forceinline__ uint4 load_h8(const T *p) { return *(const uint4 *)p; }
};

struct kv_fp8 {
    using T = __nv_fp8_storage_t; /* one byte, E4M3 bits */
    static constexpr int BYTES = 1;
    static __device__ __forceinline__ T from_float(float x) {
        return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    }
    static __device__ __forceinline__ float to_float(T x) {
        return __half2float(__half(__nv_cvt_fp8_to_halfraw(x, __NV_E4M3)));
    }
    /* elements p[0..7] (8-byte aligned) as 8 halves: four cvt.rn.f16x2.e4m3x2 */
    static __device__ __forceinline__ uint4 load_h8(const T *p) {
        const uint2 u = *(const uint2 *)p;
        uint4 h;
        uint32_t *o = (uint32_t *)&h;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t w = j < 2 ? u.x : u.y;
            const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(
                (__nv_fp8x2_storage_t)((w >> (16 * (j % 2))) & 0xFFFFu), __NV_E4M3);
            o[j] = (uint32_t)r.x | ((uint32_t)r.y << 16);
        }
        return h;
    }
};
static_assert(sizeof(kv_fp8::T) == 1 && sizeof(kv_f16::T) == 2, "element sizes");

/* Calls f(kv_f16()) or f(kv_fp8()) for a kv_dtype (SI_KV_F16 / SI_KV_FP8_E4M3); -1 for others.
 * f returns int. */
template <class F> static int kv_dispatch(int kv_dtype, F f) {
    switch (kv_dtype) {
    case SI_KV_F16: return f(kv_f16());
    case SI_KV_FP8_E4M3: return f(kv_fp8());
    default: return -1;
    }
}
#endif
