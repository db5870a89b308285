/* mmq_half.cuh — where the f16 path of the batched quantised matmul (gemm_q8x_mma.cu) wants x:
 * f16 in mma fragment order, for npad rows (mmq_npad: 16, 32, 64 or 128; rows past the real ones
 * all zero). Per segment of 256 elements: [n8 tile][block j of 8][lane] 16 bytes, lane 4 g + c
 * holding row 8 tile + g, elements 32 j + 4c..+3 (bytes 0-7) and 32 j + 16 + 4c..+3 (bytes 8-15).
 * Written by mmq_x_half from f32 rows, or by the RMSNorm before the matmul (cuda_add_rmsnorm_mmq),
 * which saves that kernel. */
#ifndef SI_BACKEND_CUDA_MMQ_HALF_CUH
#define SI_BACKEND_CUDA_MMQ_HALF_CUH
#include <cstddef>

__host__ __device__ static inline int mmq_npad(int n) {
    return n <= 16 ? 16 : n <= 32 ? 32 : n <= 64 ? 64 : 128;
}

/* byte offset of the 4 f16 of row, elements k..k+3 (k % 4 == 0) */
__host__ __device__ static inline size_t mmq_half_offset(int row, int k, int npad) {
    const int seg = k >> 8, j = (k >> 5) & 7, kk = k & 31;
    const int lane = 4 * (row & 7) + ((kk & 15) >> 2);
    const size_t unit = (((size_t)seg * (npad / 8) + (row >> 3)) * 8 + j) * 32 + lane;
    return unit * 16 + (kk >> 4) * 8;
}

/* bytes of the layout for K elements a row */
__host__ __device__ static inline size_t mmq_half_bytes(int K, int npad) {
    return (size_t)K * npad * 2;
}
#endif
