/* session.h — one sequence's state for the reference generation path: a contiguous f16 KV
 * cache of n_ctx positions and scratch buffers sized once for the largest forward chunk. */
#ifndef SI_MODEL_SESSION_H
#define SI_MODEL_SESSION_H

#include "model/model.h"

#define SESSION_MAX_CHUNK 64 /* tokens per forward pass during prefill */

struct si_session {
    si_model *m;
    int32_t n_past;
    uint16_t *k_cache; /* [n_layer][n_ctx][n_head_kv * head_dim] f16 */
    uint16_t *v_cache; /* same */
    /* scratch, each [SESSION_MAX_CHUNK][width] */
    float *x;      /* residual stream (n_embd) */
    float *xb;     /* normed input (n_embd) */
    float *q;      /* queries (n_head * head_dim) */
    float *att;    /* attention output (n_head * head_dim) */
    float *k, *v;  /* new keys / values (n_head_kv * head_dim) */
    float *hb, *hb2; /* feed-forward gate / up (n_ff) */
    float *scores; /* [threads][n_ctx] attention scores */
    void *qscratch; /* quantised activations */
    int32_t *pos;  /* [SESSION_MAX_CHUNK] */
    float *logits; /* [n_vocab] */
};

/* Runs the model on n <= SESSION_MAX_CHUNK tokens at positions n_past.. and, when want_logits,
 * writes the last token's logits. The caller has checked the context has room. */
void forward_chunk(si_session *s, const int32_t *tokens, int n, bool want_logits);

#endif
