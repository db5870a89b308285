/* scheduler.h — builds each engine step's ragged batch (vLLM v1's scheduler design).
 *
 * There are no prefill and decode phases: every sequence only knows how many of its tokens
 * have K/V in the cache (n_computed). A step gives tokens to running sequences first (a decode is
 * one token, an unfinished prompt gets its next chunk), then admits waiting sequences first come
 * first served as chunked prefills, all under a token budget (max_batched_tokens) and a sequence
 * limit (max_num_seqs). Blocks come from the kv_pool; when it says no, the newest running
 * sequence is preempted: its blocks are released and it goes back to the front of the waiting
 * queue to be recomputed later (its tokens, generated ones included, are kept).
 *
 * A sequence admitted with nothing computed first takes every leading full block of its tokens
 * that the prefix cache holds, and computes only the rest (always at least its last token, so
 * that it gets logits).
 *
 * Streaming sequences (StreamingLLM attention sinks): the first sink_blocks = ceil(sink / 16)
 * blocks are kept forever (NOTE: sinks are rounded up to whole blocks), followed by a window of
 * window_blocks = ceil(window / 16) blocks and one block being filled. When a token would need a
 * block beyond those, the oldest non-sink block is dropped, so the sequence's block count stays
 * at most sink_blocks + window_blocks + 1 and at least `window` recent tokens are always kept.
 * Positions are slots inside the cache and keys are rotated on read (rope_on_read = 1). A
 * dropped block's tokens leave `tokens` too, so a streaming sequence holds at most its sink,
 * its window and one block of token ids (plus a prompt not yet computed), however long it runs.
 * Preempted, it recomputes just those kept tokens (StreamingLLM's "sliding window with
 * re-computation" of the same cache: not bit-identical to the cache it lost, whose window keys
 * had seen the dropped tokens). Streaming sequences neither use nor fill the prefix cache: their
 * keys are stored un-rotated and their later blocks depend on what was dropped.
 *
 * Only the engine thread calls these functions. */
#ifndef SI_ENGINE_SCHEDULER_H
#define SI_ENGINE_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/kv_pool.h"
#include "model/batch.h"

typedef enum sched_state { SEQ_NEW, SEQ_WAITING, SEQ_RUNNING, SEQ_FINISHED } sched_state;

/* One sequence as the scheduler sees it. The engine embeds it in its request. */
typedef struct sched_seq {
    /* prompt then generated tokens; grows with sched_seq_append. Streaming: only the tokens
     * still in the cache or still to compute, so index == cache slot (dropped ones removed) */
    int32_t *tokens;
    int32_t n_tokens, cap_tokens;
    int32_t n_prompt;
    bool streaming;
    int32_t sink_blocks, window_blocks; /* streaming only */

    sched_state state;
    int32_t n_computed;  /* leading entries of `tokens` whose K/V are in the cache */
    int64_t n_dropped;   /* tokens dropped from the cache and from `tokens` (streaming) */
    int32_t *blocks;     /* [max_blocks] block table */
    int32_t n_blocks, max_blocks;
    uint64_t *hashes;    /* [max_blocks] hash chain of the leading full blocks */
    int32_t n_hashed;
    int32_t n_cached_prompt; /* prompt tokens found in the prefix cache at first admission */
    bool admitted_once;
    int32_t n_preempted;

    int32_t n_new;       /* tokens scheduled in the current step */
} sched_seq;

/* Prepares seq with a copy of the prompt (n_prompt >= 1). window_tokens > 0 selects streaming
 * with ceil(sink/16) sink blocks and ceil(window/16) window blocks; max_blocks bounds the block
 * table (for streaming it must be at least sink_blocks + window_blocks + 1). SI_ERR_NOMEM.
 * Release with sched_seq_release. */
si_status sched_seq_init(sched_seq *seq, const int32_t *prompt, int32_t n_prompt, int32_t sink,
                         int32_t window_tokens, int32_t max_blocks);
void sched_seq_release(sched_seq *seq);

/* Appends a generated token (it will be computed by a later step). SI_ERR_NOMEM. */
si_status sched_seq_append(sched_seq *seq, int32_t token);

/* Cache length in tokens after the last computed step. */
static inline int32_t sched_seq_kv_len(const sched_seq *seq) { return seq->n_computed; }

typedef struct sched_params {
    int32_t max_num_seqs;       /* sequences per step and running at once */
    int32_t max_batched_tokens; /* tokens per step */
    int32_t max_blocks;         /* block-table row length (ceil(context / KV_BLOCK_SIZE)) */
} sched_params;

typedef struct sched sched;

/* A scheduler drawing blocks from pool (not owned; must outlive it) with batch buffers sized
 * once from p. SI_ERR_INVALID_ARG, SI_ERR_NOMEM. */
si_status sched_create(const sched_params *p, kv_pool *pool, sched **out);
void sched_free(sched *s);

/* Queues seq (initialised, not queued) at the back of the waiting queue. SI_ERR_NOMEM. */
si_status sched_add(sched *s, sched_seq *seq);

/* Takes seq out of the scheduler wherever it is and releases its blocks; its state becomes
 * SEQ_FINISHED. Used for finished and cancelled sequences. */
void sched_remove(sched *s, sched_seq *seq);

/* Plans one step and returns its batch (buffers owned by s, valid until the next sched_step;
 * n_tokens == 0 when there is nothing to do). Sequence row i of the batch is sched_scheduled(s,
 * i), and its logits (when logits_row[i] >= 0) are row i of the forward pass's output. */
const si_batch *sched_step(sched *s);
int32_t sched_n_scheduled(const sched *s);
sched_seq *sched_scheduled(const sched *s, int32_t i);

/* After the forward pass of the last sched_step: advances every scheduled sequence's
 * n_computed and publishes its newly full blocks to the prefix cache. */
void sched_update(sched *s);

int32_t sched_n_running(const sched *s);
int32_t sched_n_waiting(const sched *s);
int64_t sched_tokens_computed(const sched *s);
int64_t sched_n_preemptions(const sched *s);

/* kv_pool_check plus: every block's reference count equals the number of running sequences
 * holding it, waiting sequences hold nothing, tables fit. Aborts on a violation. */
void sched_check(const sched *s);

#endif
