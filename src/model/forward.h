/* forward.h — the model's forward pass over a ragged batch (src/model/batch.h), reading and
 * writing K/V through block tables in a paged kv_cache. */
#ifndef SI_MODEL_FORWARD_H
#define SI_MODEL_FORWARD_H

#include "model/batch.h"
#include "model/kv_cache.h"
#include "model/model.h"

typedef struct forward_scratch forward_scratch;

/* Scratch for batches of up to max_tokens tokens over up to max_seqs sequences whose KV length
 * is at most max_kv. Allocated once; forward_batch never allocates. */
si_status forward_scratch_create(const si_model *m, int32_t max_tokens, int32_t max_seqs,
                                 int32_t max_kv, forward_scratch **out);
void forward_scratch_free(forward_scratch *ws);

/* Runs the model on batch b: writes each token's K/V into its slot, attends causally within its
 * sequence (slots 0..pos), and for each sequence s with b->logits_row[s] >= 0 writes n_vocab
 * logits to logits + s * n_vocab. The caller guarantees the batch fits ws and kv. */
void forward_batch(si_model *m, kv_cache *kv, const si_batch *b, forward_scratch *ws,
                   float *logits);

#endif
