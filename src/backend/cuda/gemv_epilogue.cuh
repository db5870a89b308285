/* gemv_epilogue.cuh — RoPE + KV write as the epilogue of a decode GEMV of a fused QKV weight
 * (gemv_fast.cuh, gemv_q8x.cuh; cuda_ops.h: cuda_gemv_rope): y is one token's [q | k | v]; the
 * pair (2i, 2i + 1) of q and k is rotated and k and v are written into the paged KV cache, the
 * values rope_kv_kernel (rope.cu) gives, so that no kernel runs between the QKV matmul and
 * attention. The rotations come from a table made once per step (cuda_rope_angles); the thread
 * that will store a pair loads its rotation and slot while the row is still being summed
 * (qkv_pair_prepare), so the epilogue adds no memory round trip to the kernel's tail.
 * NOTE (H200, bench/RESULTS.md 2026-11-30 s5): computing the angle in the epilogue (a 64-step
 * multiplication chain and sincosf per pair) or loading the table there made the 7B decode
 * slower than the separate kernel; so did folding the RMSNorm into the F16 GEMV (its weight
 * loaded next to x: the QKV and gate/up GEMVs 53% slower). */
#ifndef SI_BACKEND_CUDA_GEMV_EPILOGUE_CUH
#define SI_BACKEND_CUDA_GEMV_EPILOGUE_CUH
#include "backend/cuda/kv_elem.cuh"
#include "backend/cuda/rope.cuh"

struct gemv_rope_epi {
    int on; /* 0: a plain GEMV */
    int q_dim, kv_dim, head_dim, rope_dim, kv_fp8;
    const float2 *rot;   /* [batch row][rope_dim / 2]: (cos, sin) (cuda_rope_angles) */
    const int32_t *slot; /* per batch row: its cache slot (< 0: none) */
    void *k_cache, *v_cache;
};

/* What the store of pair (m, m + 1) of batch row b needs, loaded ahead */
struct qkv_pair {
    float2 r; /* (1, 0) where the pair is not rotated (v, or past rope_dim) */
    int slot;
};

__device__ __forceinline__ qkv_pair qkv_pair_prepare(const gemv_rope_epi &e, int b, int m) {
    qkv_pair p = {make_float2(1.0f, 0.0f), -1};
    if (m < e.q_dim + e.kv_dim && m % e.head_dim < e.rope_dim)
        p.r = e.rot[b * (e.rope_dim / 2) + (m % e.head_dim) / 2];
    if (m >= e.q_dim) p.slot = e.slot[b];
    return p;
}

template <class KV>
__device__ __forceinline__ void qkv_cache_pair(void *cache, size_t at, float v0, float v1) {
    typename KV::T *c = (typename KV::T *)cache + at;
    c[0] = KV::from_float(v0);
    c[1] = KV::from_float(v1);
}

/* Output elements m and m + 1 (m even) of batch row b: rotated when they are a pair of q or k
 * below rope_dim, stored to y, and k's and v's also to the cache. */
__device__ __forceinline__ void qkv_pair_store(const gemv_rope_epi &e, const qkv_pair &p,
                                               float *y, int M, int b, int m, float v0, float v1) {
    const int k_end = e.q_dim + e.kv_dim;
    if (m < k_end && m % e.head_dim < e.rope_dim) rope_rotate(v0, v1, p.r.x, p.r.y, &v0, &v1);
    float *yb = y + (size_t)b * M;
    yb[m] = v0;
    yb[m + 1] = v1;
    if (m < e.q_dim || p.slot < 0) return;
    const bool is_k = m < k_end;
    const size_t at = (size_t)p.slot * e.kv_dim + (size_t)(m - (is_k ? e.q_dim : k_end));
    void *cache = is_k ? e.k_cache : e.v_cache;
    if (e.kv_fp8) qkv_cache_pair<kv_fp8>(cache, at, v0, v1);
    else qkv_cache_pair<kv_f16>(cache, at, v0, v1);
}
#endif
