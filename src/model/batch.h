/* batch.h — the ragged batch: the one structure the scheduler, the model's forward pass and
 * every backend agree on (DESIGN.md, "The batch").
 *
 * A prefill chunk, a decode of one token and any mix of both over many sequences are all one
 * batch. Attention reads K/V through each sequence's block table, so no sequence needs
 * contiguous memory. */
#ifndef SI_MODEL_BATCH_H
#define SI_MODEL_BATCH_H

#include <stdint.h>

typedef struct si_batch {
    int32_t n_tokens;
    const int32_t *token; /* [n_tokens] */
    /* [n_tokens] position of each token inside its sequence's cache: the RoPE position and the
     * KV slot it writes (block_table[seq][pos / block_size], offset pos % block_size). For a
     * streaming (attention-sink) sequence this is the position inside the cache, not the
     * token's index in the whole generation (StreamingLLM, Xiao et al. 2023). */
    const int32_t *pos;
    const int32_t *seq;   /* [n_tokens] index into the per-sequence arrays below */
    int32_t n_seqs;
    const int32_t *seq_len;     /* [n_seqs] valid KV slots after this step */
    int32_t max_blocks;         /* row stride of block_table */
    const int32_t *block_table; /* [n_seqs][max_blocks] physical KV block ids, row-major */
    /* [n_seqs] 0: keys are stored rotated at their position (the usual case); 1: keys are
     * stored un-rotated and rotated by their slot position when read, so that dropping a block
     * from a streaming sequence re-positions the keys after it exactly. */
    const uint8_t *rope_on_read;
    const int32_t *logits_row; /* [n_seqs] which token (index into the batch) gives the
                                * sequence's logits, or -1 for none */
} si_batch;

#endif
