/* q4_0_g8.cuh — how Q4_0 weights lie on the GPU: GGUF's bytes, each group of 8 blocks regrouped.
 *
 * A GGUF Q4_0 block is 18 bytes: an fp16 scale d, then 16 bytes of nibbles (byte j packs element
 * j in its low and j + 16 in its high nibble; x = d * (q - 8)). So most blocks start at an offset
 * that is not 16-byte aligned, and a kernel must stage a row through shared memory before a lane
 * can read its block (gemv_q8x.cuh does, with cp.async).
 *
 * "G8": every Q4_0 matrix whose rows have a multiple of 256 elements (every Llama shape) is kept
 * on the GPU with each group of 8 consecutive blocks of a row (256 elements, 144 bytes) regrouped
 * as the group's 8 scales (16 bytes), then its 8 nibble blocks (8 x 16). A row keeps its bytes
 * and its size, the rows stay 16-byte aligned (144 = 9 x 16), and now so does every block's
 * nibbles: a lane loads them with one 16-byte load, as the F16 GEMV loads its pieces, and a warp's
 * 32 consecutive blocks are four 128-byte runs. Block i of a row (or of the whole matrix: a group
 * never spans two rows) has its scale at 144 (i / 8) + 2 (i % 8) and its nibbles at
 * 144 (i / 8) + 16 + 16 (i % 8). A staged 256-element segment (the batched kernels' unit) is one
 * group, so those kernels read G8 by changing only where a block's fields are.
 *
 * cuda_weight_prepare (gemv.cu) regroups a matrix in place after its upload (cuda_weights.c; the
 * tests after theirs). Every kernel that reads a Q4_0 matrix with such rows reads G8:
 * gemv_q4g.cuh (the decode GEMV of 1-8 rows), tmma_q4_0 (gemv_mma.cuh: the batched matmul and the
 * tensor-core GEMV), tq_q4_0g (dequant.cuh: embeddings, the GEMM's dequantiser). Rows of other
 * lengths keep GGUF order and the kernels that read it (tq_q4_0, tqx_q4_0).
 *
 * Why (bench/RESULTS.md 2026-12-01 s17, bench/kernels/q4_split_gemv.cu at e3a315c): a Llama-2-7B
 * token's 129 Q4_0 GEMVs in a CUDA graph took 1,193 us with the staged GGUF kernel and 1,051 us
 * with direct loads of G8 rows (74 -> 84 % of 4.21 TB/s), 1,690 -> 1,224 us at 2 batch rows. */
#ifndef SI_BACKEND_CUDA_Q4_0_G8_CUH
#define SI_BACKEND_CUDA_Q4_0_G8_CUH
#include <stddef.h>
#include <stdint.h>

/* Whether a Q4_0 matrix with rows of K elements is kept in G8 order on the GPU. */
static inline bool si_q4_0_g8(long long K) { return K % 256 == 0; }

#define Q4G_GROUP_BYTES 144 /* 8 blocks: 8 fp16 scales, 8 x 16 bytes of nibbles */

/* byte offsets of block i's scale and nibbles from its row's (or matrix's) start */
__host__ __device__ __forceinline__ size_t q4g_scale_at(long long i) {
    return Q4G_GROUP_BYTES * (size_t)(i >> 3) + 2 * (size_t)(i & 7);
}
__host__ __device__ __forceinline__ size_t q4g_nibbles_at(long long i) {
    return Q4G_GROUP_BYTES * (size_t)(i >> 3) + 16 + 16 * (size_t)(i & 7);
}

/* The 8 weights of 32-bit word w of a block's nibbles (bytes 4 w .. 4 w + 3): elements 4 w ..
 * 4 w + 3 from the low nibbles into v[0..3], 16 + 4 w .. from the high ones into v[4..7]. */
__device__ __forceinline__ void q4_0_word_to_float(float d, uint32_t q, float *v) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
        v[j] = d * (float)((int)((q >> (8 * j)) & 15) - 8);
        v[4 + j] = d * (float)((int)((q >> (8 * j + 4)) & 15) - 8);
    }
}
#endif
