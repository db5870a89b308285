/* gemv_epilogue.cuh — what a decode GEMV (gemv_fast.cuh, gemv_q8x.cuh) does with a finished
 * output element besides storing it (cuda_ops.h: cuda_gemv_fused):
 *   - residual: add it to y, the residual stream (the output projection and the FFN's down
 *     projection), so that no add kernel runs after the matmul;
 *   - rope: y is one token's [q | k | v] of a fused QKV weight; the pair (2i, 2i + 1) of q and k
 *     is rotated and k and v are written into the paged KV cache, exactly as rope_kv_kernel
 *     (rope.cu) does, so that no kernel runs between the QKV matmul and attention. The
 *     rotations come from a table made once per step (cuda_rope_angles): computing an angle
 *     here (a 64-step multiplication chain and sincosf) cost the 7B Q4_0 decode 2%.
 * At batch 1 each kernel between two matmuls costs a few us of idle HBM (bench/RESULTS.md). */
#ifndef SI_BACKEND_CUDA_GEMV_EPILOGUE_CUH
#define SI_BACKEND_CUDA_GEMV_EPILOGUE_CUH
#include "backend/cuda/kv_elem.cuh"
#include "backend/cuda/rope.cuh"

struct gemv_epi {
    int residual;
    int rope;
    int q_dim, kv_dim, head_dim, rope_dim, kv_fp8;
    const float2 *rot;   /* [batch row][rope_dim / 2]: (cos, sin) (cuda_rope_angles) */
    const int32_t *slot; /* per batch row: its cache slot (< 0: none) */
    void *k_cache, *v_cache;
};

/* y[i] = v, or y[i] += v */
__device__ __forceinline__ void gemv_store(const gemv_epi &e, float *y, size_t i, float v) {
    y[i] = e.residual ? y[i] + v : v;
}

template <class KV>
__device__ __forceinline__ void gemv_cache_pair(void *cache, size_t at, float v0, float v1) {
    typename KV::T *c = (typename KV::T *)cache + at;
    c[0] = KV::from_float(v0);
    c[1] = KV::from_float(v1);
}

/* Output elements m and m + 1 (m even) of batch row b of a fused QKV (e.rope): rotated when
 * they are a pair of q or k below rope_dim, stored to y, and k's and v's also to the cache. */
__device__ __forceinline__ void gemv_store_qkv_pair(const gemv_epi &e, float *y, int M, int b,
                                                    int m, float v0, float v1) {
    const int k_end = e.q_dim + e.kv_dim;
    if (m < k_end && m % e.head_dim < e.rope_dim) {
        const float2 r = e.rot[b * (e.rope_dim / 2) + (m % e.head_dim) / 2];
        rope_rotate(v0, v1, r.x, r.y, &v0, &v1);
    }
    float *yb = y + (size_t)b * M;
    yb[m] = v0;
    yb[m + 1] = v1;
    const int s = e.slot[b];
    if (m < e.q_dim || s < 0) return;
    const bool is_k = m < k_end;
    const size_t at = (size_t)s * e.kv_dim + (size_t)(m - (is_k ? e.q_dim : k_end));
    void *cache = is_k ? e.k_cache : e.v_cache;
    if (e.kv_fp8) gemv_cache_pair<kv_fp8>(cache, at, v0, v1);
    else gemv_cache_pair<kv_f16>(cache, at, v0, v1);
}
#endif
