/* session.h — one sequence's state for the single-sequence API (si_session): a paged KV cache of
 * its own with ceil(n_ctx / KV_BLOCK_SIZE) blocks in order (an identity block table), and
 * forward_batch scratch for chunks of n_batch tokens. The model runs through the same
 * forward_batch as the engine, as a one-sequence batch. */
#ifndef SI_MODEL_SESSION_H
#define SI_MODEL_SESSION_H

#include <stdbool.h>

#include "backend/backend.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"

struct si_session {
    si_model *m;
    int32_t n_past;
    const si_backend *be;  /* the model's device (backend_for_model) */
    void *bs;              /* its state: KV for n_blocks blocks, scratch for n_batch tokens,
                            * 1 sequence, n_ctx KV slots */
    int32_t n_batch;       /* tokens per forward pass during prefill */
    int32_t n_blocks;      /* ceil(n_ctx / KV_BLOCK_SIZE) */
    int32_t *block_table;  /* [n_blocks]: block i holds positions 16i..16i+15 */
    int32_t *pos;          /* [n_batch] positions of the chunk being evaluated */
    int32_t *seq;          /* [n_batch] all 0 */
    float *logits;         /* [n_vocab] of the last evaluated token: the backend's
                            * logits_buffer where it offers one, else the session's */
    bool logits_owned;     /* the session allocated logits */
    bool logits_on_device; /* the last eval picked its token on the device (forward_sample):
                            * logits holds an older step's, si_session_logits says NULL */
    /* The step run ahead (session.c): after si_session_eval_sample picked `token` on a device
     * with sample_begin, the step that feeds it back at position n_past, sampled with `q`, is
     * already running; the next call uses it when it evaluates that token with the same draw. */
    bool ahead_enabled; /* the backend offers sample_begin and SI_SESSION_AHEAD is not 0 */
    bool ahead_on;
    int32_t ahead_token;
    int64_t ahead_used; /* steps a call found already run (for the tests) */
    backend_sample ahead_q;
    /* penalties on the device (backend_penalties_on_device): a step's window as pairs */
    bool pen_on_device;
    int32_t pen_tok[BACKEND_PEN_MAX], pen_count[BACKEND_PEN_MAX];
};

#endif
