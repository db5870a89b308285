/* session.c — si_session: the single-sequence reference generation path. All memory is
 * allocated at creation (KV cache for n_ctx tokens, scratch for SESSION_MAX_CHUNK tokens). */
#include "model/session.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

si_status si_session_create(si_model *m, si_session **out) {
    const model_hparams *hp = &m->hp;
    const size_t C = SESSION_MAX_CHUNK, q_dim = (size_t)hp->n_head * hp->head_dim;
    const size_t kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    si_session *s = calloc(1, sizeof *s);
    if (!s) return si_error(SI_ERR_NOMEM, "session: out of memory");
    s->m = m;
    /* the largest activation row any matmul quantises: max(n_embd, q_dim, n_ff) columns */
    size_t qs = 0;
    const si_tensor *mats[] = {&m->layers[0].wq, &m->layers[0].wo, &m->layers[0].w_down,
                               &m->output};
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        size_t need = cpu_matmul_scratch(mats[i], (int)C);
        if (need > qs) qs = need;
    }
    const size_t kv_bytes = (size_t)hp->n_layer * m->n_ctx * kv_dim * sizeof(uint16_t);
    s->k_cache = malloc(kv_bytes);
    s->v_cache = malloc(kv_bytes);
    s->x = malloc(C * hp->n_embd * sizeof(float));
    s->xb = malloc(C * (q_dim > (size_t)hp->n_embd ? q_dim : (size_t)hp->n_embd) * sizeof(float));
    s->q = malloc(C * q_dim * sizeof(float));
    s->att = malloc(C * q_dim * sizeof(float));
    s->k = malloc(C * kv_dim * sizeof(float));
    s->v = malloc(C * kv_dim * sizeof(float));
    s->hb = malloc(C * hp->n_ff * sizeof(float));
    s->hb2 = malloc(C * hp->n_ff * sizeof(float));
    s->scores = malloc((size_t)pool_size(m->pool) * ((size_t)m->n_ctx + hp->head_dim) * sizeof(float));
    s->qscratch = malloc(qs);
    s->pos = malloc(C * sizeof(int32_t));
    s->logits = calloc((size_t)hp->n_vocab, sizeof(float));
    if (!s->k_cache || !s->v_cache || !s->x || !s->xb || !s->q || !s->att || !s->k || !s->v ||
        !s->hb || !s->hb2 || !s->scores || !s->qscratch || !s->pos || !s->logits) {
        si_session_free(s);
        return si_error(SI_ERR_NOMEM, "session: out of memory for a %d-token context (%zu MiB "
                        "of KV cache)", m->n_ctx, 2 * kv_bytes >> 20);
    }
    *out = s;
    return SI_OK;
}

void si_session_free(si_session *s) {
    if (!s) return;
    free(s->k_cache);
    free(s->v_cache);
    free(s->x);
    free(s->xb);
    free(s->q);
    free(s->att);
    free(s->k);
    free(s->v);
    free(s->hb);
    free(s->hb2);
    free(s->scores);
    free(s->qscratch);
    free(s->pos);
    free(s->logits);
    free(s);
}

si_status si_session_eval(si_session *s, const int32_t *tokens, int32_t n) {
    const si_model *m = s->m;
    if (n <= 0) return si_error(SI_ERR_INVALID_ARG, "eval: no tokens");
    if (n > m->n_ctx - s->n_past)
        return si_error(SI_ERR_CONTEXT_FULL, "%d tokens do not fit the context: %d already used "
                        "of %d", n, s->n_past, m->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->hp.n_vocab)
            return si_error(SI_ERR_INVALID_ARG, "token id %d at index %d is outside the "
                            "vocabulary [0, %d)", tokens[i], i, m->hp.n_vocab);
    for (int32_t done = 0; done < n;) {
        int chunk = n - done < SESSION_MAX_CHUNK ? n - done : SESSION_MAX_CHUNK;
        forward_chunk(s, tokens + done, chunk, done + chunk == n);
        done += chunk;
    }
    return SI_OK;
}

const float *si_session_logits(const si_session *s) { return s->logits; }
int32_t si_session_n_past(const si_session *s) { return s->n_past; }

void si_session_truncate(si_session *s, int32_t n) {
    if (n >= 0 && n < s->n_past) s->n_past = n;
}
