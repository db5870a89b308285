/* rope.cu — RoPE on q and k, fused with writing k and v as f16 into the paged KV cache
 * (vLLM's reshape_and_cache, with the rotation folded in so k makes one trip).
 * theta_i = pos * freq_scale * base^(-2i/rope_dim) / factor_i is built by the same chain of
 * float multiplications as the CPU reference (ggml's incremental theta), so the two round alike.
 * One CTA per token. */
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/rope.cuh"

extern "C" {
#include "model/kv_cache.h"
}
static_assert(ROPE_KV_BLOCK == KV_BLOCK_SIZE, "paged block size");

struct rope_args {
    int n_head, n_head_kv, head_dim, rope_dim, neox;
    float freq_scale, theta_scale;
    const float *freq_factors;
};

__global__ void __launch_bounds__(ROPE_THREADS)
    rope_kv_kernel(float *q, int q_stride, float *k, int k_stride, const float *v, int v_stride,
                   const int32_t *pos, const int32_t *slot, __half *k_cache, __half *v_cache,
                   rope_args a) {
    const int t = blockIdx.x;
    const int half = a.rope_dim / 2, hd = a.head_dim, kv_dim = a.n_head_kv * hd;
    const float p = (float)pos[t];
    const int s = slot[t];
    float *qt = q + (size_t)t * q_stride;
    float *kt = k + (size_t)t * k_stride;
    const float *vt = v + (size_t)t * v_stride;
    __half *kc = s >= 0 ? k_cache + (size_t)s * kv_dim : NULL;
    __half *vc = s >= 0 ? v_cache + (size_t)s * kv_dim : NULL;
    const int n_pairs = (a.n_head + a.n_head_kv) * half;
    for (int idx = threadIdx.x; idx < n_pairs; idx += ROPE_THREADS) {
        const int h = idx / half, i = idx % half;
        float tb = p;
        for (int j = 0; j < i; j++) tb *= a.theta_scale;
        const float ff = a.freq_factors ? a.freq_factors[i] : 1.0f;
        const float theta = a.freq_scale * (tb / ff);
        float sn, cs;
        sincosf(theta, &sn, &cs);
        const int e0 = a.neox ? i : 2 * i, e1 = a.neox ? i + half : 2 * i + 1;
        if (h < a.n_head) {
            float *x = qt + (size_t)h * hd;
            const float x0 = x[e0], x1 = x[e1];
            x[e0] = x0 * cs - x1 * sn;
            x[e1] = x0 * sn + x1 * cs;
        } else {
            const int hk = h - a.n_head;
            float *x = kt + (size_t)hk * hd;
            const float x0 = x[e0], x1 = x[e1];
            const float y0 = x0 * cs - x1 * sn, y1 = x0 * sn + x1 * cs;
            x[e0] = y0;
            x[e1] = y1;
            if (kc) {
                kc[hk * hd + e0] = __float2half_rn(y0);
                kc[hk * hd + e1] = __float2half_rn(y1);
            }
        }
    }
    if (!kc) return;
    /* dims past rope_dim are not rotated: copy them; v is copied whole */
    const int tail = hd - a.rope_dim;
    for (int idx = threadIdx.x; idx < a.n_head_kv * tail; idx += ROPE_THREADS) {
        const int hk = idx / tail, d = a.rope_dim + idx % tail;
        kc[hk * hd + d] = __float2half_rn(kt[hk * hd + d]);
    }
    for (int idx = threadIdx.x; idx < kv_dim; idx += ROPE_THREADS) vc[idx] = __float2half_rn(vt[idx]);
}

extern "C" void cuda_rope_kv_write(float *q, int q_stride, float *k, int k_stride, const float *v,
                                   int v_stride, const int32_t *pos, const int32_t *slot,
                                   int n_tokens, uint16_t *k_cache, uint16_t *v_cache,
                                   const cuda_rope_params *p, cudaStream_t stream) {
    if (n_tokens <= 0) return;
    rope_args a;
    a.n_head = p->n_head;
    a.n_head_kv = p->n_head_kv;
    a.head_dim = p->head_dim;
    a.rope_dim = p->rope_dim;
    a.neox = p->neox;
    a.freq_scale = p->freq_scale;
    a.theta_scale = powf(p->freq_base, -2.0f / (float)p->rope_dim); /* host powf, as the CPU */
    a.freq_factors = p->freq_factors;
    rope_kv_kernel<<<n_tokens, ROPE_THREADS, 0, stream>>>(q, q_stride, k, k_stride, v, v_stride,
                                                         pos, slot, (__half *)k_cache,
                                                         (__half *)v_cache, a);
    CUDA_CHECK_LAUNCH();
}
