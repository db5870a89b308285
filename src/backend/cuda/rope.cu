/* rope.cu — RoPE on q and k, fused with writing k and v into the paged KV cache as f16 or FP8
 * E4M3 (kv_elem.cuh) (vLLM's reshape_and_cache, with the rotation folded in so k makes one
 * trip).
 * theta_i = pos * freq_scale * base^(-2i/rope_dim) / factor_i (rope_theta, rope.cuh).
 * gridDim.y CTAs per token, each with the token's angles in shared memory. Tokens of streaming
 * sequences (k_unrotated) keep k as given: attention rotates those keys on read, by slot, from
 * the table rope_cos_sin_table builds. */
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/kv_elem.cuh"

extern "C" {
#include "model/kv_cache.h"
}
static_assert(ROPE_KV_BLOCK == KV_BLOCK_SIZE, "paged block size");

template <class KV>
__global__ void __launch_bounds__(ROPE_THREADS)
    rope_kv_kernel(float *q, int q_stride, float *k, int k_stride, const float *v, int v_stride,
                   const int32_t *pos, const int32_t *slot, const uint8_t *k_unrotated,
                   typename KV::T *k_cache, typename KV::T *v_cache, rope_args a) {
    using T = typename KV::T;
    __shared__ float2 rot[ROPE_MAX_HALF]; /* (cos, sin) of pair i at this token's position */
    si_pdl_trigger(); /* launched with PDL, after the QKV matmul (pdl.cuh) */
    const int t = blockIdx.x;
    const int half = a.rope_dim / 2, hd = a.head_dim, kv_dim = a.n_head_kv * hd;
    /* the angles first (pos is the host's, written before the step): each pair's rotation once
     * per CTA, not once per head, while the matmul before may still run */
    const float p = (float)pos[t];
    const int s = slot[t]; /* the host's too */
    const bool rotate_k = !(k_unrotated && k_unrotated[t]);
    rope_fill_angles(rot, p, a);
    __syncthreads();
    si_pdl_wait();
    float *qt = q + (size_t)t * q_stride;
    float *kt = k + (size_t)t * k_stride;
    const float *vt = v + (size_t)t * v_stride;
    T *kc = s >= 0 ? k_cache + (size_t)s * kv_dim : NULL;
    T *vc = s >= 0 ? v_cache + (size_t)s * kv_dim : NULL;
    const int n_pairs = (rotate_k ? a.n_head + a.n_head_kv : a.n_head) * half;
    /* the token's work is spread over gridDim.y CTAs: a decode step's one token would otherwise
     * be one CTA walking 4096 pairs with a round trip each */
    const int i0 = blockIdx.y * ROPE_THREADS + threadIdx.x, step = gridDim.y * ROPE_THREADS;
    /* this thread's first element of v, loaded beside the pairs' elements: after the rotation's
     * stores it would be a second round trip (the compiler must assume v aliases q and k) */
    const float v_first = kc && i0 < kv_dim ? vt[i0] : 0.0f;
    for (int idx = i0; idx < n_pairs; idx += step) {
        const int h = idx / half, i = idx % half;
        const float cs = rot[i].x, sn = rot[i].y;
        int e0, e1;
        rope_pair(i, half, a.neox, &e0, &e1);
        if (h < a.n_head) {
            float *x = qt + (size_t)h * hd;
            rope_rotate(x[e0], x[e1], cs, sn, &x[e0], &x[e1]);
        } else {
            const int hk = h - a.n_head;
            float *x = kt + (size_t)hk * hd;
            float y0, y1;
            rope_rotate(x[e0], x[e1], cs, sn, &y0, &y1);
            x[e0] = y0;
            x[e1] = y1;
            if (kc) {
                kc[hk * hd + e0] = KV::from_float(y0);
                kc[hk * hd + e1] = KV::from_float(y1);
            }
        }
    }
    if (!kc) return;
    /* dims past rope_dim are not rotated (none of k's when it stays un-rotated): copy them; v is
     * copied whole */
    const int d0 = rotate_k ? a.rope_dim : 0, tail = hd - d0;
    for (int idx = i0; idx < a.n_head_kv * tail; idx += step) {
        const int hk = idx / tail, d = d0 + idx % tail;
        kc[hk * hd + d] = KV::from_float(kt[hk * hd + d]);
    }
    for (int idx = i0; idx < kv_dim; idx += step)
        vc[idx] = KV::from_float(idx == i0 ? v_first : vt[idx]);
}

rope_args rope_args_of(const cuda_rope_params *p) {
    rope_args a;
    a.n_head = p->n_head;
    a.n_head_kv = p->n_head_kv;
    a.head_dim = p->head_dim;
    a.rope_dim = p->rope_dim;
    a.neox = p->neox;
    a.freq_scale = p->freq_scale;
    a.theta_scale = powf(p->freq_base, -2.0f / (float)p->rope_dim); /* host powf, as the CPU */
    a.freq_factors = p->freq_factors;
    return a;
}

extern "C" void cuda_rope_kv_write(float *q, int q_stride, float *k, int k_stride, const float *v,
                                   int v_stride, const int32_t *pos, const int32_t *slot,
                                   const uint8_t *k_unrotated, int n_tokens, void *k_cache,
                                   void *v_cache, const cuda_rope_params *p,
                                   cudaStream_t stream) {
    if (n_tokens <= 0) return;
    const int rc = kv_dispatch(p->kv_dtype, [&](auto kv) {
        using KV = decltype(kv);
        using T = typename KV::T;
        /* CTAs per token: about one pair per thread (measured on the H200: one CTA per token
         * cost 24 us a decode step's layer, bench/gpu-2026-11-30-s4/profile-f16.txt) */
        const int pairs = (p->n_head + p->n_head_kv) * (p->rope_dim / 2);
        const int split = si_div_up(pairs, ROPE_THREADS);
        const dim3 grid(n_tokens, split < ROPE_MAX_SPLIT ? split : ROPE_MAX_SPLIT);
        si_launch_pdl(rope_kv_kernel<KV>, grid, ROPE_THREADS, 0, stream, q, q_stride, k,
                      k_stride, v, v_stride, pos, slot, k_unrotated, (T *)k_cache, (T *)v_cache,
                      rope_args_of(p));
        return 0;
    });
    if (rc) { /* an internal invariant: the backend checked kv_dtype at create */
        fprintf(stderr, "%s:%d: cuda_rope_kv_write: kv_dtype %d\n", __FILE__, __LINE__, p->kv_dtype);
        abort();
    }
}

__global__ void rope_table_kernel(float2 *table, int n_pos, rope_args a) {
    const int half = a.rope_dim / 2;
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)n_pos * half) return;
    const int j = (int)(idx / half), i = (int)(idx % half);
    float sn, cs;
    sincosf(rope_theta((float)j, i, a.theta_scale, a.freq_scale, a.freq_factors), &sn, &cs);
    table[idx] = make_float2(cs, sn);
}

size_t rope_cos_sin_table_bytes(int n_pos, int head_dim) {
    return (size_t)(n_pos > 0 ? n_pos : 1) * (size_t)(head_dim / 2) * sizeof(float2);
}

void rope_cos_sin_table(float2 *table, int n_pos, const cuda_rope_params *p, cudaStream_t stream) {
    const int64_t n = (int64_t)n_pos * (p->rope_dim / 2);
    if (n <= 0) return;
    rope_table_kernel<<<si_div_up(n, 256), 256, 0, stream>>>(table, n_pos, rope_args_of(p));
    CUDA_CHECK_LAUNCH();
}
