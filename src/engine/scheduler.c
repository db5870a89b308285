/* scheduler.c — continuous batching with chunked prefill, prefix-cache admission, preemption by
 * recomputation and StreamingLLM block dropping (see scheduler.h). */
#include "engine/scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

struct sched {
    sched_params p;
    kv_pool *pool;
    sched_seq **running;   /* [max_num_seqs], oldest first */
    int32_t n_running;
    sched_seq **waiting;   /* ring buffer of cap_waiting */
    int32_t w_head, n_waiting, cap_waiting;
    sched_seq **scheduled; /* [max_num_seqs] this step's sequences, in batch row order */
    int32_t n_scheduled;
    /* batch buffers, sized once */
    int32_t *token, *pos, *seq;                      /* [max_batched_tokens] */
    int32_t *seq_len, *logits_row, *block_table;    /* [max_num_seqs] (x max_blocks) */
    uint8_t *rope_on_read;                           /* [max_num_seqs] */
    si_batch batch;
    int64_t tokens_computed, n_preemptions;
};

/* ---- sequences ------------------------------------------------------------------------------- */

si_status sched_seq_init(sched_seq *seq, const int32_t *prompt, int32_t n_prompt, int32_t sink,
                         int32_t window_tokens, int32_t max_blocks) {
    memset(seq, 0, sizeof *seq);
    SI_ASSERT(n_prompt >= 1 && max_blocks >= 1);
    seq->cap_tokens = n_prompt + 16;
    seq->tokens = malloc((size_t)seq->cap_tokens * sizeof *seq->tokens);
    seq->blocks = malloc((size_t)max_blocks * sizeof *seq->blocks);
    seq->hashes = malloc((size_t)max_blocks * sizeof *seq->hashes);
    if (!seq->tokens || !seq->blocks || !seq->hashes) {
        sched_seq_release(seq);
        return si_error(SI_ERR_NOMEM, "scheduler: cannot allocate a sequence of %d tokens",
                        n_prompt);
    }
    memcpy(seq->tokens, prompt, (size_t)n_prompt * sizeof *prompt);
    seq->n_tokens = seq->n_prompt = n_prompt;
    seq->max_blocks = max_blocks;
    if (window_tokens > 0) {
        seq->streaming = true;
        seq->sink_blocks = (sink + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE;
        seq->window_blocks = (window_tokens + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE;
        SI_ASSERT(seq->sink_blocks + seq->window_blocks + 1 <= max_blocks);
    }
    return SI_OK;
}

void sched_seq_release(sched_seq *seq) {
    free(seq->tokens);
    free(seq->blocks);
    free(seq->hashes);
    seq->tokens = NULL;
    seq->blocks = NULL;
    seq->hashes = NULL;
}

si_status sched_seq_append(sched_seq *seq, int32_t token) {
    if (seq->n_tokens == seq->cap_tokens) {
        int32_t cap = seq->cap_tokens * 2;
        int32_t *t = realloc(seq->tokens, (size_t)cap * sizeof *t);
        if (!t) return si_error(SI_ERR_NOMEM, "scheduler: cannot grow a sequence to %d tokens",
                                cap);
        seq->tokens = t;
        seq->cap_tokens = cap;
    }
    seq->tokens[seq->n_tokens++] = token;
    return SI_OK;
}

/* Releases every block (last first, so that a sequence's tail is evicted before its head). */
static void release_blocks(sched *s, sched_seq *seq) {
    for (int32_t i = seq->n_blocks - 1; i >= 0; i--) kv_pool_unref(s->pool, seq->blocks[i]);
    seq->n_blocks = 0;
    seq->n_hashed = 0;
    seq->n_computed = 0;
}

/* ---- scheduler ------------------------------------------------------------------------------- */

si_status sched_create(const sched_params *p, kv_pool *pool, sched **out) {
    *out = NULL;
    if (p->max_num_seqs < 1 || p->max_batched_tokens < 1 || p->max_blocks < 1)
        return si_error(SI_ERR_INVALID_ARG, "scheduler: max_num_seqs %d, max_batched_tokens %d "
                        "and max_blocks %d must be at least 1", p->max_num_seqs,
                        p->max_batched_tokens, p->max_blocks);
    sched *s = calloc(1, sizeof *s);
    const size_t ns = (size_t)p->max_num_seqs, nt = (size_t)p->max_batched_tokens;
    if (s) {
        s->p = *p;
        s->pool = pool;
        s->cap_waiting = 64;
        s->running = malloc(ns * sizeof *s->running);
        s->scheduled = malloc(ns * sizeof *s->scheduled);
        s->waiting = malloc((size_t)s->cap_waiting * sizeof *s->waiting);
        s->token = malloc(nt * sizeof(int32_t));
        s->pos = malloc(nt * sizeof(int32_t));
        s->seq = malloc(nt * sizeof(int32_t));
        s->seq_len = malloc(ns * sizeof(int32_t));
        s->logits_row = malloc(ns * sizeof(int32_t));
        s->block_table = malloc(ns * (size_t)p->max_blocks * sizeof(int32_t));
        s->rope_on_read = malloc(ns);
    }
    if (!s || !s->running || !s->scheduled || !s->waiting || !s->token || !s->pos || !s->seq ||
        !s->seq_len || !s->logits_row || !s->block_table || !s->rope_on_read) {
        sched_free(s);
        return si_error(SI_ERR_NOMEM, "scheduler: cannot allocate batch buffers");
    }
    si_batch *b = &s->batch;
    b->token = s->token;
    b->pos = s->pos;
    b->seq = s->seq;
    b->seq_len = s->seq_len;
    b->max_blocks = p->max_blocks;
    b->block_table = s->block_table;
    b->rope_on_read = s->rope_on_read;
    b->logits_row = s->logits_row;
    *out = s;
    return SI_OK;
}

void sched_free(sched *s) {
    if (!s) return;
    free(s->running);
    free(s->scheduled);
    free(s->waiting);
    free(s->token);
    free(s->pos);
    free(s->seq);
    free(s->seq_len);
    free(s->logits_row);
    free(s->block_table);
    free(s->rope_on_read);
    free(s);
}

static sched_seq *waiting_at(const sched *s, int32_t i) {
    return s->waiting[(s->w_head + i) % s->cap_waiting];
}

static si_status waiting_grow(sched *s) {
    if (s->n_waiting < s->cap_waiting) return SI_OK;
    int32_t cap = s->cap_waiting * 2;
    sched_seq **w = malloc((size_t)cap * sizeof *w);
    if (!w) return si_error(SI_ERR_NOMEM, "scheduler: cannot grow the waiting queue");
    for (int32_t i = 0; i < s->n_waiting; i++) w[i] = waiting_at(s, i);
    free(s->waiting);
    s->waiting = w;
    s->w_head = 0;
    s->cap_waiting = cap;
    return SI_OK;
}

si_status sched_add(sched *s, sched_seq *seq) {
    si_status st = waiting_grow(s);
    if (st) return st;
    s->waiting[(s->w_head + s->n_waiting++) % s->cap_waiting] = seq;
    seq->state = SEQ_WAITING;
    return SI_OK;
}

/* Preempted sequences go to the front. Returns false only when growing the ring fails. */
static bool waiting_push_front(sched *s, sched_seq *seq) {
    if (waiting_grow(s)) return false;
    s->w_head = (s->w_head + s->cap_waiting - 1) % s->cap_waiting;
    s->waiting[s->w_head] = seq;
    s->n_waiting++;
    seq->state = SEQ_WAITING;
    return true;
}

void sched_remove(sched *s, sched_seq *seq) {
    if (seq->state == SEQ_RUNNING) {
        int32_t i = 0;
        while (i < s->n_running && s->running[i] != seq) i++;
        SI_ASSERT(i < s->n_running);
        memmove(s->running + i, s->running + i + 1,
                (size_t)(s->n_running - i - 1) * sizeof *s->running);
        s->n_running--;
    } else if (seq->state == SEQ_WAITING) {
        int32_t i = 0;
        while (i < s->n_waiting && waiting_at(s, i) != seq) i++;
        SI_ASSERT(i < s->n_waiting);
        for (; i + 1 < s->n_waiting; i++)
            s->waiting[(s->w_head + i) % s->cap_waiting] = waiting_at(s, i + 1);
        s->n_waiting--;
    }
    release_blocks(s, seq);
    seq->state = SEQ_FINISHED;
}

/* ---- one step -------------------------------------------------------------------------------- */

/* Tokens seq would compute now under the remaining budget. */
static int32_t tokens_wanted(const sched_seq *seq, int32_t budget) {
    int32_t n = seq->n_tokens - seq->n_computed;
    if (n > budget) n = budget;
    /* a streaming chunk must fit the window so that drops only ever remove full blocks */
    if (seq->streaming && n > seq->window_blocks * KV_BLOCK_SIZE)
        n = seq->window_blocks * KV_BLOCK_SIZE;
    return n;
}

/* Makes room for n_new more tokens: drops streaming blocks, then allocates. False (nothing
 * allocated) when the pool has too few free blocks. */
static bool reserve(sched *s, sched_seq *seq, int32_t n_new) {
    if (seq->streaming) {
        const int32_t cap = (seq->sink_blocks + seq->window_blocks + 1) * KV_BLOCK_SIZE;
        while (sched_seq_kv_len(seq) + n_new > cap) {
            /* the oldest non-sink block is full here: kv_len > (sink_blocks + 1) * 16 */
            int32_t victim = seq->sink_blocks;
            kv_pool_unref(s->pool, seq->blocks[victim]);
            memmove(seq->blocks + victim, seq->blocks + victim + 1,
                    (size_t)(seq->n_blocks - victim - 1) * sizeof *seq->blocks);
            seq->n_blocks--;
            /* its tokens go too, so a token's index in `tokens` stays its cache slot and the
             * sequence's memory stays bounded however long it runs */
            const int32_t first = victim * KV_BLOCK_SIZE;
            memmove(seq->tokens + first, seq->tokens + first + KV_BLOCK_SIZE,
                    (size_t)(seq->n_tokens - first - KV_BLOCK_SIZE) * sizeof *seq->tokens);
            seq->n_tokens -= KV_BLOCK_SIZE;
            seq->n_computed -= KV_BLOCK_SIZE;
            seq->n_dropped += KV_BLOCK_SIZE;
        }
    }
    int32_t need = (sched_seq_kv_len(seq) + n_new + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE;
    SI_ASSERT(need <= seq->max_blocks);
    if (need - seq->n_blocks > kv_pool_n_free(s->pool)) return false;
    while (seq->n_blocks < need) seq->blocks[seq->n_blocks++] = kv_pool_alloc(s->pool);
    return true;
}

/* Takes the leading full blocks of a fresh sequence's tokens from the prefix cache. Returns the
 * number of blocks hit (already referenced and in the table), or -1 when seq is not fresh or is
 * streaming and so does not use the cache. */
static int32_t prefix_lookup(sched *s, sched_seq *seq) {
    if (seq->streaming || seq->n_computed > 0 || seq->n_blocks > 0) return -1;
    const int32_t n_full = (seq->n_tokens - 1) / KV_BLOCK_SIZE; /* keep >= 1 token to compute */
    uint64_t parent = KV_HASH_ROOT;
    int32_t hits = 0;
    for (; hits < n_full; hits++) {
        const int32_t *t = seq->tokens + (size_t)hits * KV_BLOCK_SIZE;
        uint64_t h = kv_pool_block_hash(parent, t);
        int32_t b = kv_pool_lookup(s->pool, h, parent, t);
        if (b < 0) break;
        kv_pool_ref(s->pool, b);
        seq->blocks[seq->n_blocks++] = b;
        seq->hashes[seq->n_hashed++] = h;
        parent = h;
    }
    seq->n_computed = hits * KV_BLOCK_SIZE;
    return hits;
}

static void preempt(sched *s, sched_seq *seq) {
    SI_ASSERT(s->running[s->n_running - 1] == seq);
    s->n_running--;
    release_blocks(s, seq);
    seq->n_preempted++;
    s->n_preemptions++;
    if (!waiting_push_front(s, seq)) abort(); /* out of memory for one pointer */
}

/* Appends seq's n_new tokens to the batch as row s->n_scheduled. */
static void emit(sched *s, sched_seq *seq, int32_t n_new) {
    si_batch *b = &s->batch;
    const int32_t row = s->n_scheduled++;
    s->scheduled[row] = seq;
    seq->n_new = n_new;
    for (int32_t t = 0; t < n_new; t++) {
        int32_t i = b->n_tokens++;
        s->token[i] = seq->tokens[seq->n_computed + t];
        s->pos[i] = seq->n_computed + t;
        s->seq[i] = row;
    }
    s->seq_len[row] = sched_seq_kv_len(seq) + n_new;
    memcpy(s->block_table + (size_t)row * s->p.max_blocks, seq->blocks,
           (size_t)seq->n_blocks * sizeof *seq->blocks);
    s->rope_on_read[row] = seq->streaming;
    s->logits_row[row] = seq->n_computed + n_new == seq->n_tokens ? b->n_tokens - 1 : -1;
}

const si_batch *sched_step(sched *s) {
    si_batch *b = &s->batch;
    b->n_tokens = 0;
    s->n_scheduled = 0;
    int32_t budget = s->p.max_batched_tokens;
    bool preempted = false;

    for (int32_t i = 0; i < s->n_running && budget > 0; i++) {
        sched_seq *seq = s->running[i];
        int32_t n_new = tokens_wanted(seq, budget);
        if (n_new <= 0) continue;
        bool ok;
        while (!(ok = reserve(s, seq, n_new))) {
            sched_seq *victim = s->running[s->n_running - 1];
            preempt(s, victim);
            preempted = true;
            if (victim == seq) break;
        }
        if (!ok) break;
        emit(s, seq, n_new);
        budget -= n_new;
    }

    /* NOTE: as vLLM, admit nothing in a step that had to preempt: the pool is under pressure */
    while (!preempted && s->n_waiting > 0 && s->n_running < s->p.max_num_seqs && budget > 0) {
        sched_seq *seq = waiting_at(s, 0);
        const int32_t hits = prefix_lookup(s, seq);
        const int32_t n_new = tokens_wanted(seq, budget);
        if (!reserve(s, seq, n_new)) {
            release_blocks(s, seq); /* gives back the hits: this admission did not happen */
            break;
        }
        if (hits >= 0) kv_pool_count(s->pool, hits, (seq->n_tokens - 1) / KV_BLOCK_SIZE - hits);
        if (!seq->admitted_once) {
            seq->admitted_once = true;
            seq->n_cached_prompt = seq->n_computed < seq->n_prompt ? seq->n_computed
                                                                   : seq->n_prompt;
        }
        s->w_head = (s->w_head + 1) % s->cap_waiting;
        s->n_waiting--;
        s->running[s->n_running++] = seq;
        seq->state = SEQ_RUNNING;
        emit(s, seq, n_new);
        budget -= n_new;
    }
    b->n_seqs = s->n_scheduled;
    return b;
}

int32_t sched_n_scheduled(const sched *s) { return s->n_scheduled; }
sched_seq *sched_scheduled(const sched *s, int32_t i) { return s->scheduled[i]; }

void sched_update(sched *s) {
    for (int32_t r = 0; r < s->n_scheduled; r++) {
        sched_seq *seq = s->scheduled[r];
        seq->n_computed += seq->n_new;
        s->tokens_computed += seq->n_new;
        seq->n_new = 0;
        if (seq->streaming) continue;
        while ((seq->n_hashed + 1) * KV_BLOCK_SIZE <= seq->n_computed) {
            const int32_t k = seq->n_hashed;
            const uint64_t parent = k ? seq->hashes[k - 1] : KV_HASH_ROOT;
            const int32_t *t = seq->tokens + (size_t)k * KV_BLOCK_SIZE;
            const uint64_t h = kv_pool_block_hash(parent, t);
            kv_pool_publish(s->pool, seq->blocks[k], h, parent, t);
            seq->hashes[seq->n_hashed++] = h;
        }
    }
    s->n_scheduled = 0;
}

int32_t sched_n_running(const sched *s) { return s->n_running; }
int32_t sched_n_waiting(const sched *s) { return s->n_waiting; }
int64_t sched_tokens_computed(const sched *s) { return s->tokens_computed; }
int64_t sched_n_preemptions(const sched *s) { return s->n_preemptions; }

void sched_check(const sched *s) {
    kv_pool_check(s->pool);
    const int32_t nb = kv_pool_get_stats(s->pool).n_blocks;
    int32_t *refs = calloc((size_t)nb, sizeof *refs);
    SI_ASSERT(refs);
    for (int32_t i = 0; i < s->n_running; i++) {
        const sched_seq *seq = s->running[i];
        SI_ASSERT(seq->state == SEQ_RUNNING);
        SI_ASSERT(seq->n_blocks <= seq->max_blocks);
        SI_ASSERT(seq->n_blocks * KV_BLOCK_SIZE >= sched_seq_kv_len(seq));
        SI_ASSERT(seq->n_computed <= seq->n_tokens);
        if (seq->streaming) SI_ASSERT(seq->n_blocks <= seq->sink_blocks + seq->window_blocks + 1);
        for (int32_t k = 0; k < seq->n_blocks; k++) refs[seq->blocks[k]]++;
    }
    for (int32_t i = 0; i < s->n_waiting; i++) {
        const sched_seq *seq = waiting_at(s, i);
        SI_ASSERT(seq->state == SEQ_WAITING && seq->n_blocks == 0 && seq->n_computed == 0);
    }
    for (int32_t b = 0; b < nb; b++)
        if (refs[b] != kv_pool_refcount(s->pool, b)) {
            fprintf(stderr, "sched_check: block %d held by %d sequences, count %d\n", b, refs[b],
                    kv_pool_refcount(s->pool, b));
            si_assert_fail("refs[b] == kv_pool_refcount(pool, b)", __FILE__, __LINE__);
        }
    free(refs);
}
