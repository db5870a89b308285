/* cuda_common.cuh — helpers every CUDA kernel file shares: CUDA_CHECK, half/bfloat16 bits to
 * float, warp reductions, 2-byte-aligned 32-bit loads for GGUF blocks (whose fields sit at even,
 * not 4-aligned, offsets) and the cp.async 16-byte global->shared copy of sm_80+. */
#ifndef SI_BACKEND_CUDA_COMMON_CUH
#define SI_BACKEND_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_check.h"

/* The launch itself (bad configuration) is reported at once; faults inside a kernel surface at
 * the next synchronising call, also through CUDA_CHECK. */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

/* SI_HD: device code that the host runs too. The weight decoders (dequant.cuh,
 * gemv_q8x_units.cuh) are SI_HD so that test_cuda_decoders checks them against the CPU's
 * reference on a machine without a GPU (CTest, CI). The integer intrinsics they use have a host
 * twin below; on the device each is the intrinsic itself (the same machine code as calling it). */
#define SI_HD __host__ __device__ __forceinline__
/* #pragma unroll inside SI_HD code: the host compiler knows no such pragma (-Wunknown-pragmas) */
#ifdef __CUDA_ARCH__
#define SI_UNROLL _Pragma("unroll")
#else
#define SI_UNROLL
#endif

SI_HD float si_u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* the low 32 bits of (hi:lo) >> (sh & 31) */
SI_HD uint32_t si_funnel_r(uint32_t lo, uint32_t hi, uint32_t sh) {
#ifdef __CUDA_ARCH__
    return __funnelshift_r(lo, hi, sh);
#else
    return (uint32_t)((((uint64_t)hi << 32) | lo) >> (sh & 31));
#endif
}

/* Byte k of the result: byte n = (s >> 4k) & 7 of the 8 bytes (y:x), x's first, or with bit 3
 * of that selector nibble set, byte n's top bit spread over the byte (0xFF or 0): PTX prmt's
 * default mode. Not __byte_perm, which clears bit 3 of every nibble first (no sign mode; and
 * where the selector is computed, one more instruction to clear it). */
SI_HD uint32_t si_prmt(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s));
    return r;
#else
    const uint64_t v = ((uint64_t)y << 32) | x;
    uint32_t r = 0;
    for (int k = 0; k < 4; k++) {
        const uint32_t n = (s >> (4 * k)) & 15, b = (uint32_t)(v >> (8 * (n & 7))) & 0xFF;
        r |= (n & 8 ? (b & 0x80 ? 0xFFu : 0u) : b) << (8 * k);
    }
    return r;
#endif
}

/* Any bitwise function of a, b and c in one LOP3: bit i of LUT is the result for a = bit 2 of i, b
 * = bit 1, c = bit 0 (so LUT = F(0xF0, 0xCC, 0xAA)). ptxas fuses plain C into LOP3s, but not
 * every function (it kept (a & c) | (~b & ~c) with c constant as two). */
template <uint32_t LUT> SI_HD uint32_t si_lop3(uint32_t a, uint32_t b, uint32_t c) {
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, %4;" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(LUT));
    return d;
#else
    uint32_t d = 0;
    for (int i = 0; i < 8; i++)
        if (LUT >> i & 1) d |= (i & 4 ? a : ~a) & (i & 2 ? b : ~b) & (i & 1 ? c : ~c);
    return d;
#endif
}

/* byte k (0..3) of w, zero-extended: one PRMT */
SI_HD int si_byte(uint32_t w, int k) { return (int)si_prmt(w, 0, 0x4440u | (uint32_t)k); }

/* c + the dot product of the 4 signed bytes of a and of b */
SI_HD int si_dp4a(int a, int b, int c) {
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int i = 0; i < 4; i++)
        c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
#endif
}

/* c + the dot product of the 4 unsigned bytes of a and the 4 signed bytes of b */
SI_HD int si_dp4a_us(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#else
    for (int i = 0; i < 4; i++)
        c += (int)(uint8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
#endif
}

SI_HD float si_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
SI_HD float si_bf2f(uint16_t h) { return si_u2f((uint32_t)h << 16); }

/* the two fp16 halves of w (low, high) as floats */
SI_HD float2 si_h2x2f(uint32_t w) {
#ifdef __CUDA_ARCH__
    return __half22float2(*(const __half2 *)&w);
#else
    return make_float2(si_h2f((uint16_t)w), si_h2f((uint16_t)(w >> 16)));
#endif
}

SI_HD uint16_t si_ld16(const uint8_t *p) { return *(const uint16_t *)p; }
/* 4 bytes from a 2-aligned address (GGUF blocks are 2-aligned: fp16 fields first). */
SI_HD uint32_t si_ld32(const uint8_t *p) {
    return (uint32_t)si_ld16(p) | ((uint32_t)si_ld16(p + 2) << 16);
}

/* 16 bytes (16-aligned) of data read once, such as a weight in a decode GEMV: through the
 * read-only path, not kept in L1 */
__device__ __forceinline__ uint4 si_ldg_stream16(const void *p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

__device__ __forceinline__ float si_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float si_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* SwiGLU's product silu(g) * u: the one formula both SwiGLU kernels use, so they give the same
 * bits */
__device__ __forceinline__ float si_silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

__device__ __forceinline__ void si_cp_async16(void *smem, const void *gmem) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
/* a barrier for the CTA's first n threads (n a multiple of 32) on hardware barrier id (1-15: 0 is
 * __syncthreads's), ordering their shared-memory accesses as __syncthreads does */
__device__ __forceinline__ void si_bar_sync_n(int id, int n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void si_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n"); }
template <int N> __device__ __forceinline__ void si_cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

static inline int si_div_up(long long a, long long b) { return (int)((a + b - 1) / b); }

/* *a as the launch attribute of clusters of x CTAs along x (cudaLaunchKernelEx) */
static inline void si_cluster_attr(cudaLaunchAttribute *a, int x) {
    a->id = cudaLaunchAttributeClusterDimension;
    a->val.clusterDim.x = x;
    a->val.clusterDim.y = 1;
    a->val.clusterDim.z = 1;
}

/* A timing knob "A,B" (single digits) from the environment as 10 A + B; 0 when unset or
 * malformed. */
static inline int si_env_digit_pair(const char *name) {
    const char *e = getenv(name);
    int a = 0, b = 0;
    return e && sscanf(e, "%d,%d", &a, &b) == 2 ? 10 * a + b : 0;
}

/* Whether the environment turns off a timing knob that is on by default (name=0) */
static inline bool si_env_off(const char *name) {
    const char *e = getenv(name);
    return e && !strcmp(e, "0");
}

#endif
