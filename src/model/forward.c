/* forward.c — the llama-family forward pass (llama, qwen2), read top to bottom:
 * embed → for each layer: RMSNorm, Q/K/V (+bias), RoPE, KV-cache write, causal attention,
 * output projection, residual, RMSNorm, SwiGLU feed-forward, residual → final norm → logits.
 * As in Llama 2 (Touvron et al. 2023) and llama.cpp's llm_build_llama. */
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/fp16.h"
#include "model/session.h"

void forward_chunk(si_session *s, const int32_t *tokens, int n, bool want_logits) {
    si_model *m = s->m;
    const model_hparams *hp = &m->hp;
    thread_pool *pool = m->pool;
    const int dim = hp->n_embd, q_dim = hp->n_head * hp->head_dim;
    const int kv_dim = hp->n_head_kv * hp->head_dim, ff = hp->n_ff;
    const rope_params rp = {hp->head_dim, hp->rope_dim, hp->rope_freq_base, hp->rope_freq_scale,
                            m->rope_freqs, hp->rope};
    const attn_params ap = {hp->n_head, hp->n_head_kv, hp->head_dim, kv_dim};

    for (int t = 0; t < n; t++) {
        s->pos[t] = s->n_past + t;
        cpu_get_row(s->x + (size_t)t * dim, &m->tok_embd, tokens[t]);
    }

    for (int il = 0; il < hp->n_layer; il++) {
        const model_layer *L = &m->layers[il];
        uint16_t *kc = s->k_cache + (size_t)il * m->n_ctx * kv_dim;
        uint16_t *vc = s->v_cache + (size_t)il * m->n_ctx * kv_dim;

        /* attention block */
        cpu_rmsnorm(s->xb, s->x, L->attn_norm.data, dim, n, hp->rms_eps);
        cpu_matmul(pool, s->q, &L->wq, s->xb, n, s->qscratch);
        cpu_matmul(pool, s->k, &L->wk, s->xb, n, s->qscratch);
        cpu_matmul(pool, s->v, &L->wv, s->xb, n, s->qscratch);
        if (L->bq.data) cpu_add_bias(s->q, L->bq.data, q_dim, n);
        if (L->bk.data) cpu_add_bias(s->k, L->bk.data, kv_dim, n);
        if (L->bv.data) cpu_add_bias(s->v, L->bv.data, kv_dim, n);
        for (int t = 0; t < n; t++) {
            cpu_rope(s->q + (size_t)t * q_dim, hp->n_head, s->pos[t], &rp);
            cpu_rope(s->k + (size_t)t * kv_dim, hp->n_head_kv, s->pos[t], &rp);
            for (int i = 0; i < kv_dim; i++) {
                kc[(size_t)s->pos[t] * kv_dim + i] = fp32_to_fp16(s->k[(size_t)t * kv_dim + i]);
                vc[(size_t)s->pos[t] * kv_dim + i] = fp32_to_fp16(s->v[(size_t)t * kv_dim + i]);
            }
        }
        cpu_attention(pool, s->att, s->q, kc, vc, s->pos, n, &ap, s->scores);
        cpu_matmul(pool, s->xb, &L->wo, s->att, n, s->qscratch);
        cpu_add(s->x, s->xb, (int64_t)n * dim);

        /* feed-forward block: down(silu(gate(x)) * up(x)) */
        cpu_rmsnorm(s->xb, s->x, L->ffn_norm.data, dim, n, hp->rms_eps);
        cpu_matmul(pool, s->hb, &L->w_gate, s->xb, n, s->qscratch);
        cpu_matmul(pool, s->hb2, &L->w_up, s->xb, n, s->qscratch);
        cpu_swiglu(s->hb, s->hb2, (int64_t)n * ff);
        cpu_matmul(pool, s->xb, &L->w_down, s->hb, n, s->qscratch);
        cpu_add(s->x, s->xb, (int64_t)n * dim);
    }

    s->n_past += n;
    if (!want_logits) return;
    /* only the last token's logits are needed */
    const float *last = s->x + (size_t)(n - 1) * dim;
    cpu_rmsnorm(s->xb, last, m->output_norm.data, dim, 1, hp->rms_eps);
    cpu_matmul(pool, s->logits, &m->output, s->xb, 1, s->qscratch);
}
