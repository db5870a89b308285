/* mma.cuh — the warp-level tensor-core instructions the kernels use (PTX ISA: mma.sync,
 * ldmatrix), one wrapper a shape, and the f16x2 / bf16x2 packing of their operands.
 *
 * Fragments (m16n8k16 16-bit and m16n8k32 8-bit alike, k counted in elements of the type): lane
 * 4 g + c holds A rows g and g + 8 and B column g at k slots {2c, 2c + 1, 2c + 8, 2c + 9}
 * (16-bit) or {4c..4c+3, 16+4c..16+4c+3} (8-bit); C/D rows g, g + 8 x columns 2c, 2c + 1. A
 * registers: a0 = (row g, low k), a1 = (g + 8, low k), a2 = (g, high k), a3 = (g + 8, high k).
 *
 * The mma wrappers are plain asm (registers in, registers out: the compiler may schedule them);
 * ldmatrix reads shared memory, so it stays volatile (not moved across the barriers that order
 * the writes it reads). */
#ifndef SI_BACKEND_CUDA_MMA_CUH
#define SI_BACKEND_CUDA_MMA_CUH

#include "backend/cuda/cuda_common.cuh"

/* d = A B + c (c in every element): A 16 x 32 bytes, row-major, unsigned when AU8 else signed;
 * B 32 x 8 signed bytes, column-major; s32 */
template <bool AU8 = false>
__device__ __forceinline__ void si_mma_i8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                          uint32_t a3, uint32_t b0, uint32_t b1, int c = 0) {
    if constexpr (AU8)
        asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%10, %10, %10, %10};"
            : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(c));
    else
        asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%10, %10, %10, %10};"
            : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(c));
}

/* d += A B: A 16 x 16 row-major, B 16 x 8 column-major, f16 (BF: bf16), f32 accumulation */
template <bool BF = false>
__device__ __forceinline__ void si_mma_h16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                           uint32_t a3, uint32_t b0, uint32_t b1) {
    if constexpr (BF)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* four 8 x 8 matrices of 16-bit elements from shared memory (lanes 8i..8i+7 give matrix i's row
 * addresses); TRANS: each transposed */
template <bool TRANS = false>
__device__ __forceinline__ void si_ldsm_x4(uint32_t (&r)[4], const void *p) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
}

/* lo, hi rounded to f16 (BF: bf16), as the bits of one 16-bit pair (lo in the low half) */
template <bool BF = false> __device__ __forceinline__ uint32_t si_pack_h2(float lo, float hi) {
    if constexpr (BF) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        return *(const uint32_t *)&h;
    } else {
        const __half2 h = __floats2half2_rn(lo, hi);
        return *(const uint32_t *)&h;
    }
}

#endif
