/* forward.c — the llama-family forward pass (llama, qwen2) over a ragged batch, read top to
 * bottom: embed → for each layer: RMSNorm, Q/K/V (+bias), RoPE, K/V written into their paged
 * slots, causal attention through the block tables, output projection, residual, RMSNorm,
 * SwiGLU feed-forward, residual → final norm → logits for the rows that want them.
 * As in Llama 2 (Touvron et al. 2023) and llama.cpp's llm_build_llama; the batch is vLLM's
 * flattened ragged batch (DESIGN.md, "The batch").
 *
 * Every operation but attention works row by row, so a token's result does not depend on
 * which other tokens share its batch: batched and one-at-a-time runs give identical logits. */
#include "model/forward.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/fp16.h"

struct forward_scratch {
    int32_t max_tokens, max_seqs, max_kv;
    rope_params rope;
    float *x;        /* [max_tokens][n_embd] residual stream */
    float *xb;       /* [max_tokens][n_embd] normed input / projection output */
    float *q;        /* [max_tokens][n_head * head_dim] queries */
    float *k, *v;    /* [max_tokens][n_head_kv * head_dim] new keys / values */
    float *att;      /* [max_tokens][n_head * head_dim] attention output */
    float *hb, *hb2; /* [max_tokens][n_ff] feed-forward gate / up */
    float *rope_cos, *rope_sin; /* [max_kv][rope_dim / 2] for rope_on_read keys */
    float *att_scratch;         /* cpu_attention_paged_scratch(threads, max_kv, head_dim) */
    void *qscratch;             /* activations quantised for the largest matmul */
};

static rope_params model_rope(const si_model *m) {
    const model_hparams *hp = &m->hp;
    return (rope_params){hp->head_dim, hp->rope_dim, hp->rope_freq_base, hp->rope_freq_scale,
                         m->rope_freqs, hp->rope};
}

/* The largest cpu_matmul scratch any weight of the model needs for n_rows rows: layers may
 * mix types (e.g. Q4_K_M's Q6_K down projections), whose activation types differ in size. */
static size_t matmul_scratch_bytes(const si_model *m, int n_rows) {
    size_t need = cpu_matmul_scratch(&m->output, n_rows);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const model_layer *L = &m->layers[il];
        const si_tensor *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up,
                                   &L->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
            size_t n = cpu_matmul_scratch(mats[i], n_rows);
            if (n > need) need = n;
        }
    }
    return need;
}

si_status forward_scratch_create(const si_model *m, int32_t max_tokens, int32_t max_seqs,
                                 int32_t max_kv, forward_scratch **out) {
    *out = NULL;
    if (max_tokens <= 0 || max_seqs <= 0 || max_kv <= 0)
        return si_error(SI_ERR_INVALID_ARG, "forward scratch: bad limits (%d tokens, %d "
                        "sequences, %d KV slots)", max_tokens, max_seqs, max_kv);
    const model_hparams *hp = &m->hp;
    const size_t T = (size_t)max_tokens, q_dim = (size_t)hp->n_head * hp->head_dim;
    const size_t kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t half = (size_t)hp->rope_dim / 2;
    forward_scratch *ws = calloc(1, sizeof *ws);
    if (!ws) return si_error(SI_ERR_NOMEM, "forward scratch: out of memory");
    ws->max_tokens = max_tokens;
    ws->max_seqs = max_seqs;
    ws->max_kv = max_kv;
    ws->rope = model_rope(m);
    ws->x = malloc(T * hp->n_embd * sizeof(float));
    ws->xb = malloc(T * hp->n_embd * sizeof(float));
    ws->q = malloc(T * q_dim * sizeof(float));
    ws->k = malloc(T * kv_dim * sizeof(float));
    ws->v = malloc(T * kv_dim * sizeof(float));
    ws->att = malloc(T * q_dim * sizeof(float));
    ws->hb = malloc(T * hp->n_ff * sizeof(float));
    ws->hb2 = malloc(T * hp->n_ff * sizeof(float));
    ws->rope_cos = malloc(((size_t)max_kv * half + 1) * sizeof(float));
    ws->rope_sin = malloc(((size_t)max_kv * half + 1) * sizeof(float));
    ws->att_scratch = malloc(cpu_attention_paged_scratch(pool_size(m->pool), max_kv, hp->head_dim));
    ws->qscratch = malloc(matmul_scratch_bytes(m, max_tokens));
    if (!ws->x || !ws->xb || !ws->q || !ws->k || !ws->v || !ws->att || !ws->hb || !ws->hb2 ||
        !ws->rope_cos || !ws->rope_sin || !ws->att_scratch || !ws->qscratch) {
        forward_scratch_free(ws);
        return si_error(SI_ERR_NOMEM, "forward scratch: out of memory for %d tokens, %d KV slots",
                        max_tokens, max_kv);
    }
    cpu_rope_table(ws->rope_cos, ws->rope_sin, max_kv, &ws->rope);
    *out = ws;
    return SI_OK;
}

void forward_scratch_free(forward_scratch *ws) {
    if (!ws) return;
    free(ws->x);
    free(ws->xb);
    free(ws->q);
    free(ws->k);
    free(ws->v);
    free(ws->att);
    free(ws->hb);
    free(ws->hb2);
    free(ws->rope_cos);
    free(ws->rope_sin);
    free(ws->att_scratch);
    free(ws->qscratch);
    free(ws);
}

/* Several weights against the same input (Q/K/V, gate/up): one pool job when they share a type
 * (the usual case), else one each (e.g. Q4_K_M's Q6_K value projections). Same results either
 * way. */
static void matmul_same_input(thread_pool *pool, int n, float *const *outs, const si_tensor *const *Ws,
                              const float *x, int n_rows, void *scratch) {
    bool same = true;
    for (int i = 1; i < n; i++) same &= Ws[i]->type == Ws[0]->type;
    if (same) {
        cpu_matmul_multi(pool, n, outs, Ws, x, n_rows, scratch);
        return;
    }
    for (int i = 0; i < n; i++) cpu_matmul(pool, outs[i], Ws[i], x, n_rows, scratch);
}

/* Broken batches are caller bugs (the scheduler builds them), so they abort. */
static void check_batch(const si_model *m, const kv_cache *kv, const si_batch *b,
                        const forward_scratch *ws) {
    SI_ASSERT(b->n_tokens > 0 && b->n_tokens <= ws->max_tokens);
    SI_ASSERT(b->n_seqs > 0 && b->n_seqs <= ws->max_seqs);
    SI_ASSERT(kv->n_layer == m->hp.n_layer && kv->kv_dim == m->hp.n_head_kv * m->hp.head_dim);
    for (int32_t t = 0; t < b->n_tokens; t++) {
        SI_ASSERT(b->token[t] >= 0 && b->token[t] < m->hp.n_vocab);
        SI_ASSERT(b->seq[t] >= 0 && b->seq[t] < b->n_seqs);
        SI_ASSERT(b->pos[t] >= 0 && b->pos[t] < ws->max_kv);
        SI_ASSERT(b->pos[t] < b->seq_len[b->seq[t]]);
        SI_ASSERT(b->pos[t] / kv->block_size < b->max_blocks);
    }
    for (int32_t s = 0; s < b->n_seqs; s++) {
        SI_ASSERT(b->seq_len[s] <= ws->max_kv);
        const int32_t used = (b->seq_len[s] + kv->block_size - 1) / kv->block_size;
        SI_ASSERT(used <= b->max_blocks);
        for (int32_t i = 0; i < used; i++) {
            const int32_t blk = b->block_table[(size_t)s * b->max_blocks + i];
            SI_ASSERT(blk >= 0 && blk < kv->n_blocks);
        }
        const int32_t r = b->logits_row[s];
        SI_ASSERT(r == -1 || (r >= 0 && r < b->n_tokens && b->seq[r] == s));
    }
}

void forward_batch(si_model *m, kv_cache *kv, const si_batch *b, forward_scratch *ws,
                   float *logits) {
    check_batch(m, kv, b, ws);
    const model_hparams *hp = &m->hp;
    thread_pool *pool = m->pool;
    const int n = b->n_tokens;
    const int dim = hp->n_embd, q_dim = hp->n_head * hp->head_dim;
    const int kv_dim = hp->n_head_kv * hp->head_dim, ff = hp->n_ff;
    const int bs = kv->block_size;
    const rope_params *rp = &ws->rope;
    const attn_params ap = {hp->n_head, hp->n_head_kv, hp->head_dim, kv_dim, ws->max_kv,
                            rp,         ws->rope_cos,  ws->rope_sin};

    for (int t = 0; t < n; t++) cpu_get_row(ws->x + (size_t)t * dim, &m->tok_embd, b->token[t]);

    for (int il = 0; il < hp->n_layer; il++) {
        const model_layer *L = &m->layers[il];

        /* attention block */
        cpu_rmsnorm(ws->xb, ws->x, L->attn_norm.data, dim, n, hp->rms_eps);
        float *qkv_out[] = {ws->q, ws->k, ws->v};
        const si_tensor *qkv[] = {&L->wq, &L->wk, &L->wv};
        matmul_same_input(pool, 3, qkv_out, qkv, ws->xb, n, ws->qscratch);
        if (L->bq.data) cpu_add_bias(ws->q, L->bq.data, q_dim, n);
        if (L->bk.data) cpu_add_bias(ws->k, L->bk.data, kv_dim, n);
        if (L->bv.data) cpu_add_bias(ws->v, L->bv.data, kv_dim, n);
        for (int t = 0; t < n; t++) {
            const int32_t s = b->seq[t], pos = b->pos[t];
            const bool rope_on_read = b->rope_on_read && b->rope_on_read[s];
            float *kt = ws->k + (size_t)t * kv_dim, *vt = ws->v + (size_t)t * kv_dim;
            cpu_rope(ws->q + (size_t)t * q_dim, hp->n_head, pos, rp);
            if (!rope_on_read) cpu_rope(kt, hp->n_head_kv, pos, rp);
            /* slot pos of the sequence: block block_table[s][pos / bs], offset pos % bs */
            const int32_t blk = b->block_table[(size_t)s * b->max_blocks + pos / bs];
            uint16_t *kc = kv_cache_k(kv, il, blk, pos % bs), *vc = kv_cache_v(kv, il, blk, pos % bs);
            for (int i = 0; i < kv_dim; i++) {
                kc[i] = fp32_to_fp16(kt[i]);
                vc[i] = fp32_to_fp16(vt[i]);
            }
        }
        cpu_attention_paged(pool, ws->att, ws->q, kv, il, b, &ap, ws->att_scratch);
        cpu_matmul(pool, ws->xb, &L->wo, ws->att, n, ws->qscratch);
        cpu_add(ws->x, ws->xb, (int64_t)n * dim);

        /* feed-forward block: down(silu(gate(x)) * up(x)) */
        cpu_rmsnorm(ws->xb, ws->x, L->ffn_norm.data, dim, n, hp->rms_eps);
        float *gate_up_out[] = {ws->hb, ws->hb2};
        const si_tensor *gate_up[] = {&L->w_gate, &L->w_up};
        matmul_same_input(pool, 2, gate_up_out, gate_up, ws->xb, n, ws->qscratch);
        cpu_swiglu_pool(pool, ws->hb, ws->hb2, (int64_t)n * ff);
        cpu_matmul(pool, ws->xb, &L->w_down, ws->hb, n, ws->qscratch);
        cpu_add(ws->x, ws->xb, (int64_t)n * dim);
    }

    /* logits only for the rows asked for: gather them (normed) into xb [n_out][n_embd], one
     * matmul into logits [n_out][n_vocab], then move row i to its sequence's row seq_of[i].
     * seq_of[i] >= i, so moving from the last row down never overwrites a row not yet moved.
     * NOTE: so the rows of sequences that want no logits may be overwritten (their contents are
     * unspecified); nothing is written past row n_seqs - 1, and nothing at all when no sequence
     * wants logits. A separate [max_seqs][n_vocab] buffer would avoid it at a large cost. */
    int n_out = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        const int32_t r = b->logits_row[s];
        if (r < 0) continue;
        cpu_rmsnorm(ws->xb + (size_t)n_out * dim, ws->x + (size_t)r * dim, m->output_norm.data,
                    dim, 1, hp->rms_eps);
        n_out++;
    }
    if (n_out == 0) return;
    cpu_matmul(pool, logits, &m->output, ws->xb, n_out, ws->qscratch);
    const size_t nv = (size_t)hp->n_vocab;
    int i = n_out - 1;
    for (int s = b->n_seqs - 1; s >= 0 && i >= 0; s--) {
        if (b->logits_row[s] < 0) continue;
        if (s != i) memmove(logits + (size_t)s * nv, logits + (size_t)i * nv, nv * sizeof(float));
        i--;
    }
}
