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

/* The rotation of one pair by (cos, sin) = (cs, sn): each product and sum rounded on its own
 * (no fused multiply-add), as the CPU reference computes it. Spelled with the _rn intrinsics so
 * that no compiler pass contracts it differently in different kernels: decode attention rotates
 * q and the new key itself (attention.cu) and must give the RoPE kernel's bits (with the plain
 * expression, NEOX rotations there differed in the last bit: test_cuda_attention). */
__device__ __forceinline__ void rope_rotate(float x0, float x1, float cs, float sn, float *y0,
                                            float *y1) {
    *y0 = __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn));
    *y1 = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs));
}

/* What the angles need, from cuda_rope_params (rope_args_of, on the host). */
struct rope_args {
    int n_head, n_head_kv, head_dim, rope_dim, neox;
    float freq_scale, theta_scale;
    const float *freq_factors;
};
rope_args rope_args_of(const cuda_rope_params *p);

/* rot[i] = (cos, sin) of pair i at position pos, for i < rope_dim / 2, filled by the CTA's
 * threads (the caller adds the barrier). */
__device__ __forceinline__ void rope_fill_angles(float2 *rot, float pos, const rope_args &a) {
    for (int i = threadIdx.x; i < a.rope_dim / 2; i += blockDim.x) {
        float sn, cs;
        sincosf(rope_theta(pos, i, a.theta_scale, a.freq_scale, a.freq_factors), &sn, &cs);
        rot[i] = make_float2(cs, sn);
    }
}

/* Rotates the 8 elements d0..d0+7 of a head (x, read from it; d0 a multiple of 8) by the angles
 * rot[i] of its pairs. NORM pairs lie inside the 8; a NEOX pair's partner is half away, and
 * partner8(d, p) loads the 8 elements from d into p. Needs half % 8 == 0 for NEOX; elements past
 * rope_dim stay. */
template <class P>
__device__ __forceinline__ void rope_rotate8(float x[8], int d0, const float2 *rot, int half,
                                             int neox, P partner8) {
    if (d0 >= 2 * half) return;
    float y0, y1;
    if (!neox) {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 c = rot[d0 / 2 + k];
            rope_rotate(x[2 * k], x[2 * k + 1], c.x, c.y, &y0, &y1);
            x[2 * k] = y0;
            x[2 * k + 1] = y1;
        }
        return;
    }
    const bool first = d0 < half; /* e0 of its pairs, else e1 */
    const int i0 = first ? d0 : d0 - half;
    float p[8];
    partner8(first ? d0 + half : d0 - half, p);
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const float2 c = rot[i0 + k];
        if (first) rope_rotate(x[k], p[k], c.x, c.y, &y0, &y1);
        else rope_rotate(p[k], x[k], c.x, c.y, &y0, &y1);
        x[k] = first ? y0 : y1;
    }
}

/* table[j * (rope_dim / 2) + i] = (cos, sin) of rope_theta(j, i) for j < n_pos: the rotations of
 * cache slots 0..n_pos-1, for keys rotated on read. */
void rope_cos_sin_table(float2 *table, int n_pos, const cuda_rope_params *p, cudaStream_t stream);
size_t rope_cos_sin_table_bytes(int n_pos, int head_dim); /* an upper bound for any rope_dim */
#endif
