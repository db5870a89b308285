/* rope.cuh — RoPE (Su et al. 2021) fused with the paged KV-cache write (rope.cu), and the
 * rotation pieces attention.cu shares for keys rotated on read (StreamingLLM sequences). */
#ifndef SI_BACKEND_CUDA_ROPE_CUH
#define SI_BACKEND_CUDA_ROPE_CUH
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#define ROPE_THREADS 256
#define ROPE_MAX_HALF 128 /* rope_dim / 2 for head_dim <= 256 */
#define ROPE_MAX_SPLIT 16 /* CTAs per token at most */
#define ROPE_KV_BLOCK 16 /* KV_BLOCK_SIZE of model/kv_cache.h */

/* The angle of pair i at position pos: pos * freq_scale * theta_scale^i / factor_i, built by the
 * same chain of float multiplications as the CPU reference (ggml's incremental theta), so the
 * two round alike. theta_scale = powf(freq_base, -2 / rope_dim), computed on the host as the CPU
 * does. */
__device__ __forceinline__ float rope_theta(float pos, int i, float theta_scale, float freq_scale,
                                            const float *freq_factors) {
    float tb = pos;
    for (int j = 0; j < i; j++) tb *= theta_scale;
    const float ff = freq_factors ? freq_factors[i] : 1.0f;
    return freq_scale * (tb / ff);
}

/* The two elements of a head that pair i rotates: (2i, 2i+1) for ROPE_NORM, (i, i + half) for
 * NEOX. */
__device__ __forceinline__ void rope_pair(int i, int half, int neox, int *e0, int *e1) {
    *e0 = neox ? i : 2 * i;
    *e1 = neox ? i + half : 2 * i + 1;
}

/* The rotation of one pair by (cos, sin) = (cs, sn). */
__device__ __forceinline__ void rope_rotate(float x0, float x1, float cs, float sn, float *y0,
                                            float *y1) {
    *y0 = x0 * cs - x1 * sn;
    *y1 = x0 * sn + x1 * cs;
}

/* table[j * (rope_dim / 2) + i] = (cos, sin) of rope_theta(j, i) for j < n_pos: the rotations of
 * cache slots 0..n_pos-1, for keys rotated on read. */
void rope_cos_sin_table(float2 *table, int n_pos, const cuda_rope_params *p, cudaStream_t stream);
size_t rope_cos_sin_table_bytes(int n_pos, int head_dim); /* an upper bound for any rope_dim */
#endif
