/* session.h — one sequence's state for the single-sequence API (si_session): a paged KV cache of
 * its own with ceil(n_ctx / KV_BLOCK_SIZE) blocks in order (an identity block table), and
 * forward_batch scratch for chunks of SESSION_MAX_CHUNK tokens. The model runs through the same
 * forward_batch as the engine, as a one-sequence batch. */
#ifndef SI_MODEL_SESSION_H
#define SI_MODEL_SESSION_H

#include "backend/backend.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"

#define SESSION_MAX_CHUNK 64 /* tokens per forward pass during prefill */

struct si_session {
    si_model *m;
    int32_t n_past;
    const si_backend *be;  /* the model's device (backend_for_model) */
    void *bs;              /* its state: KV for n_blocks blocks, scratch for SESSION_MAX_CHUNK
                            * tokens, 1 sequence, n_ctx KV slots */
    int32_t n_blocks;      /* ceil(n_ctx / KV_BLOCK_SIZE) */
    int32_t *block_table;  /* [n_blocks]: block i holds positions 16i..16i+15 */
    int32_t *pos;          /* [SESSION_MAX_CHUNK] positions of the chunk being evaluated */
    int32_t *seq;          /* [SESSION_MAX_CHUNK] all 0 */
    float *logits;         /* [n_vocab] of the last evaluated token */
};

#endif
