/* engine.c — the engine thread and the public engine API (include/swiftinfer.h, "Engine").
 *
 * One thread per engine owns the scheduler, the KV pool, the KV cache and the forward scratch
 * and loops: take new requests and cancellations from the lock-protected submission queue ->
 * sched_step -> forward_batch -> sched_update -> sample one token for every sequence whose
 * logits came out -> emit events. Other threads only touch the submission queue, the id table
 * and each request's event ring, all under one mutex (DESIGN.md, "Threads and ownership").
 *
 * Output: every sampled token gives one TOKEN event whose text is the detokeniser's delta
 * (whole UTF-8 characters only, src/tokenizer/detok.h) minus any tail that may still grow into
 * a stop string; that tail is released by a later event or dropped when the stop string
 * completes. The last event is FINISH (or ERROR) with the usage. */
#include "engine/engine.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/kv_pool.h"
#include "engine/sampler_pick.h"
#include "engine/scheduler.h"
#include "model/forward.h"
#include "model/model.h"
#include "tokenizer/detok.h"

typedef struct ereq {
    sched_seq sq; /* engine thread only */
    si_request_id id;
    struct ereq *hnext; /* id table chain (under mu) */
    struct ereq *qnext; /* submission queue (under mu) */
    /* the request, copied */
    int32_t max_tokens; /* 0: unlimited (streaming) */
    char **stop;
    int32_t n_stop;
    int32_t *stop_ids;
    int32_t n_stop_ids;
    bool ignore_eos, logprobs;
    int32_t top_logprobs;
    si_event_fn on_event;
    void *user;
    /* engine thread only */
    si_sampler *smp;
    detok dt;
    char *pending; /* generated text not yet released (may start a stop string) */
    size_t n_pending;
    int32_t n_gen;
    /* under mu */
    si_event *ring;
    int32_t r_head, r_n, r_cap;
    bool done;            /* its last event is queued or delivered */
    bool cancel_asked;    /* si_engine_cancel was called */
    bool cancel_taken;    /* the engine has seen it (written by the engine thread) */
    struct ereq *clink;   /* the engine's list of cancellations being handled */
} ereq;

#define N_BUCKETS 1024

struct si_engine {
    si_model *m;
    si_engine_params p;
    int32_t n_vocab, max_blocks;
    const si_backend *be; /* the model's device: KV storage, scratch and the forward pass */
    void *bs;             /* be's state */
    float *logits;     /* [max_num_seqs][n_vocab]: the backend's logits_buffer where it has one */
    bool logits_owned; /* the engine allocated logits */
    int32_t *host_toks; /* [max_num_seqs] the tokens sampled on the host in a step */
    /* penalties on the device (backend_penalties_on_device; else NULL): a step's rows' windows
     * as pairs, BACKEND_PEN_MAX a row, and each row's number of them */
    int32_t *pen_tok, *pen_count, *n_pen;
    kv_pool *pool;
    sched *s;
    si_event ev; /* the event being built (engine thread) */
    int64_t steps, idle_since_ms;
    int64_t host_steps; /* steps sampled on the host (si_engine_stats.host_sampled_steps) */

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;   /* the engine: new work or stop */
    pthread_cond_t events; /* consumers: a new event */
    bool stop;
    ereq *q_head, *q_tail;     /* submitted, not yet seen by the engine */
    ereq *buckets[N_BUCKETS];  /* live requests by id */
    si_request_id next_id;
    int32_t n_cancels;         /* requests with cancel_asked not yet handled */
    si_engine_stats stats;
};

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- stop strings ---------------------------------------------------------------------------- */

int64_t engine_stop_scan(const char *text, size_t len, const char *const *stop, int32_t n_stop,
                         size_t *safe) {
    int64_t first = -1;
    size_t hold = 0;
    for (int32_t i = 0; i < n_stop; i++) {
        const size_t sl = strlen(stop[i]);
        const char *hit = sl ? memmem(text, len, stop[i], sl) : NULL;
        if (hit && (first < 0 || hit - text < first)) first = hit - text;
        for (size_t k = sl - 1 < len ? sl - 1 : len; k > hold; k--)
            if (!memcmp(text + len - k, stop[i], k)) {
                hold = k;
                break;
            }
    }
    *safe = len - hold;
    return first;
}

/* ---- requests -------------------------------------------------------------------------------- */

static void ereq_free(ereq *r) {
    if (!r) return;
    for (int32_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->stop_ids);
    free(r->pending);
    free(r->ring);
    si_sampler_free(r->smp);
    sched_seq_release(&r->sq);
    free(r);
}

static ereq *table_find(si_engine *e, si_request_id id) {
    ereq *r = e->buckets[id % N_BUCKETS];
    while (r && r->id != id) r = r->hnext;
    return r;
}

static void table_remove(si_engine *e, ereq *r) {
    ereq **pp = &e->buckets[r->id % N_BUCKETS];
    while (*pp != r) pp = &(*pp)->hnext;
    *pp = r->hnext;
}

/* Queues or delivers e->ev for r. A terminal event (FINISH, ERROR) hands r over: the engine
 * never touches it again. Called on the engine thread without the lock. */
static void deliver(si_engine *e, ereq *r) {
    si_event *ev = &e->ev;
    ev->id = r->id;
    const bool last = ev->type == SI_EVENT_FINISH || ev->type == SI_EVENT_ERROR;
    if (r->on_event) {
        r->on_event(ev, r->user);
        if (last) {
            pthread_mutex_lock(&e->mu);
            table_remove(e, r);
            pthread_mutex_unlock(&e->mu);
            ereq_free(r);
        }
        return;
    }
    pthread_mutex_lock(&e->mu);
    if (r->r_n == r->r_cap) {
        int32_t cap = r->r_cap ? 2 * r->r_cap : 8;
        si_event *ring = malloc((size_t)cap * sizeof *ring);
        if (!ring) abort(); /* NOTE: no way to report this event's loss to its reader */
        for (int32_t i = 0; i < r->r_n; i++) ring[i] = r->ring[(r->r_head + i) % r->r_cap];
        free(r->ring);
        r->ring = ring;
        r->r_head = 0;
        r->r_cap = cap;
    }
    r->ring[(r->r_head + r->r_n++) % r->r_cap] = *ev;
    if (last) r->done = true;
    pthread_cond_broadcast(&e->events);
    pthread_mutex_unlock(&e->mu);
}

static void ev_reset(si_engine *e, si_event_type t) {
    si_event *ev = &e->ev;
    ev->type = t;
    ev->token = -1;
    ev->text_len = 0;
    ev->text[0] = '\0';
    ev->logprob = 0.0f;
    ev->n_top = 0;
    ev->finish_reason = SI_FINISH_NONE;
    ev->status = SI_OK;
    ev->error[0] = '\0';
}

static void ev_text(si_engine *e, const char *s, size_t n) {
    si_event *ev = &e->ev;
    SI_ASSERT(ev->text_len + n < SI_EVENT_TEXT_CAP);
    memcpy(ev->text + ev->text_len, s, n);
    ev->text_len += n;
    ev->text[ev->text_len] = '\0';
}

/* Releases the first n pending bytes into the event being built. */
static void release_pending(si_engine *e, ereq *r, size_t n) {
    ev_text(e, r->pending, n);
    memmove(r->pending, r->pending + n, r->n_pending - n);
    r->n_pending -= n;
}

/* Ends r: out of the scheduler (its blocks freed), then its last event carrying the pending
 * text (unless a stop string ended it) and the usage. */
static void finish(si_engine *e, ereq *r, si_finish_reason why, si_status st, const char *msg) {
    if (r->sq.state != SEQ_NEW) sched_remove(e->s, &r->sq);
    ev_reset(e, st ? SI_EVENT_ERROR : SI_EVENT_FINISH);
    si_event *ev = &e->ev;
    char tail[4];
    size_t k = detok_flush(&r->dt, tail); /* after a stop string both are empty */
    release_pending(e, r, r->n_pending);
    ev_text(e, tail, k);
    ev->finish_reason = why;
    ev->status = st;
    if (msg) snprintf(ev->error, sizeof ev->error, "%s", msg);
    ev->usage.prompt_tokens = r->sq.n_prompt;
    ev->usage.completion_tokens = r->n_gen;
    ev->usage.cached_tokens = r->sq.n_cached_prompt;
    deliver(e, r);
}

/* The event's logprobs for tok: the device's (dlp) when it computed them, else from logits */
static void fill_logprobs(si_engine *e, ereq *r, const float *logits, const backend_logprobs *dlp,
                          int32_t tok) {
    si_event *ev = &e->ev;
    if (!dlp) {
        ev->n_top =
            sampler_logprobs(logits, e->n_vocab, tok, r->top_logprobs, &ev->logprob, ev->top);
        return;
    }
    ev->logprob = dlp->logprob;
    ev->n_top = dlp->n_top;
    memcpy(ev->top, dlp->top, (size_t)dlp->n_top * sizeof *ev->top);
}

/* Emits tok, r's next token (sampled on the device, with its logprobs dlp when r wants them,
 * or on the host from logits); finishes r when it is done. */
static void emit_token(si_engine *e, ereq *r, const float *logits, int32_t tok,
                       const backend_logprobs *dlp) {
    ev_reset(e, SI_EVENT_TOKEN);
    e->ev.token = tok;
    if (r->logprobs) fill_logprobs(e, r, logits, dlp, tok);
    if (sched_seq_append(&r->sq, tok)) {
        deliver(e, r);
        finish(e, r, SI_FINISH_ERROR, SI_ERR_NOMEM, si_last_error());
        return;
    }
    r->n_gen++;
    si_finish_reason why = SI_FINISH_NONE;
    if (!r->ignore_eos && si_token_is_eog(e->m, tok)) why = SI_FINISH_STOP;
    for (int32_t i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] == tok) why = SI_FINISH_STOP;
    if (why == SI_FINISH_NONE) {
        char piece[DETOK_MAX_OUT(256)];
        int32_t n = detok_push_token(&r->dt, e->m->tok, tok, false, piece);
        if (n > 0) {
            memcpy(r->pending + r->n_pending, piece, (size_t)n);
            r->n_pending += (size_t)n;
        }
        size_t safe = r->n_pending;
        int64_t at = r->n_stop ? engine_stop_scan(r->pending, r->n_pending,
                                                  (const char *const *)r->stop, r->n_stop, &safe)
                               : -1;
        if (at >= 0) { /* the stop string and whatever follows it are dropped */
            release_pending(e, r, (size_t)at);
            r->n_pending = 0;
            detok_init(&r->dt);
            why = SI_FINISH_STOP;
        } else {
            release_pending(e, r, safe);
        }
    }
    if (why == SI_FINISH_NONE && r->max_tokens > 0 && r->n_gen >= r->max_tokens)
        why = SI_FINISH_LENGTH;
    deliver(e, r);
    if (why != SI_FINISH_NONE) finish(e, r, why, SI_OK, NULL);
}

/* ---- the engine thread ----------------------------------------------------------------------- */

static void publish_stats(si_engine *e) {
    kv_pool_stats ps = kv_pool_get_stats(e->pool);
    si_engine_stats st = {
        .running = sched_n_running(e->s),
        .waiting = sched_n_waiting(e->s),
        .kv_blocks_total = ps.n_blocks,
        .kv_blocks_used = ps.n_used,
        .kv_blocks_free = ps.n_free,
        .kv_blocks_cached = ps.n_cached,
        .prefix_hits = ps.hits,
        .prefix_misses = ps.misses,
        .tokens_computed = sched_tokens_computed(e->s),
        .preemptions = sched_n_preemptions(e->s),
        .steps = e->steps,
        .host_sampled_steps = e->host_steps,
    };
    pthread_mutex_lock(&e->mu);
    e->stats = st;
    pthread_mutex_unlock(&e->mu);
}

/* Takes new requests into the scheduler and finishes cancelled ones. Returns false on stop. */
static bool intake(si_engine *e) {
    pthread_mutex_lock(&e->mu);
    for (;;) {
        if (e->stop) {
            pthread_mutex_unlock(&e->mu);
            return false;
        }
        const bool idle = sched_n_running(e->s) + sched_n_waiting(e->s) == 0;
        if (e->q_head || e->n_cancels > 0 || !idle) break;
        pthread_cond_wait(&e->wake, &e->mu);
    }
    ereq *fresh = e->q_head;
    e->q_head = e->q_tail = NULL;
    /* cancelled requests: not done, so no reader frees them until the engine finishes them */
    ereq *cancelled = NULL;
    for (int b = 0; e->n_cancels > 0 && b < N_BUCKETS; b++)
        for (ereq *r = e->buckets[b]; r; r = r->hnext)
            if (r->cancel_asked && !r->cancel_taken) {
                r->cancel_taken = true;
                e->n_cancels--;
                if (!r->done) {
                    r->clink = cancelled;
                    cancelled = r;
                }
            }
    pthread_mutex_unlock(&e->mu);

    /* new ones first, so that a request cancelled right after submission is found queued; one
     * that cannot be queued keeps state SEQ_NEW and fails after the cancellations */
    ereq *failed = NULL;
    for (ereq *r = fresh, *next; r; r = next) {
        next = r->qnext;
        r->qnext = NULL;
        if (sched_add(e->s, &r->sq)) {
            r->qnext = failed;
            failed = r;
        }
    }
    for (ereq *r = cancelled, *next; r; r = next) {
        next = r->clink;
        if (r->sq.state != SEQ_NEW) finish(e, r, SI_FINISH_CANCELLED, SI_OK, NULL);
    }
    for (ereq *r = failed, *next; r; r = next) {
        next = r->qnext;
        finish(e, r, SI_FINISH_ERROR, SI_ERR_NOMEM, "engine: cannot queue the request");
    }
    return true;
}

/* Dynamic batching: when nothing runs and fewer than min_batch requests wait, wait until
 * max_wait_ms after the first of them arrived. Returns true when the step should wait. */
static bool hold_for_batch(si_engine *e) {
    const int32_t n_wait = sched_n_waiting(e->s);
    if (sched_n_running(e->s) > 0 || n_wait == 0 || n_wait >= e->p.min_batch ||
        e->p.max_wait_ms <= 0) {
        e->idle_since_ms = 0;
        return false;
    }
    const int64_t now = now_ms();
    if (!e->idle_since_ms) e->idle_since_ms = now;
    const int64_t deadline = e->idle_since_ms + e->p.max_wait_ms;
    if (now >= deadline) {
        e->idle_since_ms = 0;
        return false;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (deadline - now) * 1000000;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&e->mu);
    if (!e->q_head && !e->stop && e->n_cancels == 0) pthread_cond_timedwait(&e->wake, &e->mu, &ts);
    pthread_mutex_unlock(&e->mu);
    return true;
}

/* When the backend can sample (forward_sample) and every sequence of the step that samples can
 * be sampled there (penalties that read its history only where the device takes them, with at
 * most BACKEND_PEN_MAX pairs), fills smp[i] for each of them (its window's penalty pairs; u
 * drawn from the request's own RNG, as si_sampler_sample would; logprobs asked for by those
 * that want them) and returns true: the step then brings back ids (and logprobs) instead of
 * logits. Otherwise draws nothing and returns false.
 * NOTE: no logits come to the host then, so e->logits' buffer holds smp, ids and lp. */
static bool device_samples(si_engine *e, const si_batch *b, int32_t n, backend_sample **smp,
                           int32_t **ids, backend_logprobs **lp) {
    if (!e->be->forward_sample) return false;
    bool any_logprobs = false;
    for (int32_t i = 0; i < n; i++) {
        ereq *r = (ereq *)sched_scheduled(e->s, i);
        if (b->logits_row[i] < 0) continue;
        e->n_pen[i] = 0;
        if (!sampler_history_free(r->smp, r->sq.n_tokens)) {
            if (!e->pen_tok) return false;
            const size_t at = (size_t)i * BACKEND_PEN_MAX;
            e->n_pen[i] =
                sampler_penalty_pairs(r->smp, r->sq.tokens, r->sq.n_tokens, BACKEND_PEN_MAX,
                                      e->pen_tok + at, e->pen_count + at);
            if (e->n_pen[i] < 0) return false;
        }
        any_logprobs |= r->logprobs;
    }
    SI_ASSERT((size_t)e->n_vocab * sizeof(float) >=
              sizeof(backend_sample) + sizeof(int32_t) + sizeof(backend_logprobs));
    *smp = (backend_sample *)e->logits;
    *ids = (int32_t *)(*smp + n);
    *lp = any_logprobs ? (backend_logprobs *)(*ids + n) : NULL;
    for (int32_t i = 0; i < n; i++) {
        backend_sample *q = &(*smp)[i];
        *q = (backend_sample){.logprobs = -1};
        if (b->logits_row[i] < 0) continue;
        ereq *r = (ereq *)sched_scheduled(e->s, i);
        sampler_draw_sample(r->smp, q);
        if (r->logprobs) q->logprobs = r->top_logprobs;
        q->n_pen = e->n_pen[i];
        q->pen_tok = e->pen_tok ? e->pen_tok + (size_t)i * BACKEND_PEN_MAX : NULL;
        q->pen_count = e->pen_count ? e->pen_count + (size_t)i * BACKEND_PEN_MAX : NULL;
    }
    return true;
}

/* The host's picks for a step whose logits came back (penalties read the history): each row
 * with logits sampled by its own sampler, the rows split over the model's thread pool (every
 * request has its own sampler, RNG and scratch, so the rows are independent and the picks the
 * same on any number of threads). */
typedef struct host_pick_job {
    si_engine *e;
    const si_batch *b;
    int32_t n;
} host_pick_job;

static void host_pick_rows(void *ctx, int ith, int nth) {
    const host_pick_job *j = ctx;
    si_engine *e = j->e;
    int64_t begin, end;
    pool_split(j->n, ith, nth, &begin, &end);
    for (int64_t i = begin; i < end; i++) {
        if (j->b->logits_row[i] < 0) continue;
        ereq *r = (ereq *)sched_scheduled(e->s, (int32_t)i);
        e->host_toks[i] = si_sampler_sample(r->smp, e->logits + (size_t)i * e->n_vocab,
                                            r->sq.tokens, r->sq.n_tokens);
    }
}

/* Returns the number of rows picked. */
static int32_t host_pick(si_engine *e, const si_batch *b, int32_t n) {
    host_pick_job j = {e, b, n};
    int32_t rows = 0;
    for (int32_t i = 0; i < n; i++)
        rows += b->logits_row[i] >= 0;
    if (rows > 1 && e->m->pool)
        pool_run(e->m->pool, host_pick_rows, &j);
    else
        host_pick_rows(&j, 0, 1);
    return rows;
}

static void *engine_main(void *arg) {
    si_engine *e = arg;
    while (intake(e)) {
        if (hold_for_batch(e)) continue;
        const si_batch *b = sched_step(e->s);
        if (b->n_tokens > 0) {
            const int32_t n = sched_n_scheduled(e->s);
            backend_sample *smp = NULL;
            int32_t *ids = NULL;
            backend_logprobs *lp = NULL;
            const bool on_device = device_samples(e, b, n, &smp, &ids, &lp);
            if (on_device) {
                e->be->forward_sample(e->bs, b, smp, ids, lp);
            } else {
                e->be->forward(e->bs, b, e->logits);
                e->host_steps += host_pick(e, b, n) > 0;
            }
            sched_update(e->s);
            e->steps++;
            for (int32_t i = 0; i < n; i++) {
                if (b->logits_row[i] < 0) continue;
                ereq *r = (ereq *)sched_scheduled(e->s, i); /* sq is ereq's first member */
                if (on_device)
                    emit_token(e, r, NULL, ids[i], r->logprobs ? &lp[i] : NULL);
                else
                    emit_token(e, r, e->logits + (size_t)i * e->n_vocab, e->host_toks[i], NULL);
            }
        }
#ifndef NDEBUG
        sched_check(e->s);
#endif
        publish_stats(e);
    }
    return NULL;
}

/* ---- public API ------------------------------------------------------------------------------ */

si_engine_params si_engine_default_params(void) {
    si_engine_params p = {.max_num_seqs = 64, .max_batched_tokens = 512, .max_wait_ms = 0,
                          .min_batch = 1, .kv_memory = 0, .n_blocks = 0};
    return p;
}

si_request si_request_default(void) {
    si_request r;
    memset(&r, 0, sizeof r);
    r.sampling = si_sampling_default_params();
    r.sampling.temperature = 0.0f;
    return r;
}

const char *si_finish_reason_name(si_finish_reason r) {
    switch (r) {
    case SI_FINISH_STOP: return "stop";
    case SI_FINISH_LENGTH: return "length";
    case SI_FINISH_CANCELLED: return "cancelled";
    case SI_FINISH_ERROR: return "error";
    default: return "none";
    }
}

/* What si_engine_create made, in reverse (any of it may be missing when creation failed) */
static void free_parts(si_engine *e) {
    sched_free(e->s);
    kv_pool_free(e->pool);
    if (e->bs) e->be->free(e->bs);
    if (e->logits_owned) free(e->logits);
    free(e->host_toks);
    free(e->n_pen);
    free(e->pen_tok);
    free(e->pen_count);
}

si_status si_engine_create(si_model *m, const si_engine_params *params, si_engine **out) {
    *out = NULL;
    si_engine_params p = params ? *params : si_engine_default_params();
    if (p.max_num_seqs < 1 || p.max_batched_tokens < 1 || p.min_batch < 1 || p.max_wait_ms < 0 ||
        p.n_blocks < 0)
        return si_error(SI_ERR_INVALID_ARG, "engine: max_num_seqs %d, max_batched_tokens %d and "
                        "min_batch %d must be >= 1, max_wait_ms %d and n_blocks %d >= 0",
                        p.max_num_seqs, p.max_batched_tokens, p.min_batch, p.max_wait_ms,
                        p.n_blocks);
    const si_backend *be = backend_for_model(m);
    si_status kst = backend_check_kv_dtype(be, p.kv_cache_dtype, "engine");
    if (kst) return kst;
    const bool fp8 = p.kv_cache_dtype == SI_KV_FP8_E4M3;
    const model_hparams *hp = &m->hp;
    const int32_t kv_dim = hp->n_head_kv * hp->head_dim;
    const size_t block_bytes = kv_cache_block_bytes(hp->n_layer, kv_dim, KV_BLOCK_SIZE, fp8 ? 1 : 2);
    const int32_t max_blocks = (si_model_n_ctx(m) + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE;
    int64_t n_blocks = p.n_blocks;
    if (p.kv_memory > 0) {
        n_blocks = (int64_t)(p.kv_memory / block_bytes);
        if (n_blocks < 1)
            return si_error(SI_ERR_INVALID_ARG, "engine: kv_memory %zu bytes is less than one KV "
                            "block (%zu bytes: %d layers x %d tokens x K and V of %d %s)",
                            p.kv_memory, block_bytes, hp->n_layer, KV_BLOCK_SIZE, kv_dim,
                            fp8 ? "fp8" : "f16");
    } else if (n_blocks == 0) {
        n_blocks = (int64_t)p.max_num_seqs * max_blocks;
        const int64_t cap = (int64_t)((1ull << 30) / block_bytes);
        if (n_blocks > cap) n_blocks = cap > max_blocks ? cap : max_blocks;
    }
    backend_params bp = {0, p.max_batched_tokens, p.max_num_seqs, max_blocks * KV_BLOCK_SIZE,
                         p.kv_cache_dtype};
    if (p.gpu_memory_fraction > 0 && be->kv_blocks_for_fraction) {
        if (p.gpu_memory_fraction > 1)
            return si_error(SI_ERR_INVALID_ARG, "engine: gpu_memory_fraction %g must be in (0, 1]",
                            (double)p.gpu_memory_fraction);
        si_status fst = be->kv_blocks_for_fraction(m, &bp, p.gpu_memory_fraction, block_bytes,
                                                   &n_blocks);
        if (fst) return fst;
    }
    if (n_blocks > INT32_MAX / KV_BLOCK_SIZE) n_blocks = INT32_MAX / KV_BLOCK_SIZE;
    p.n_blocks = (int32_t)n_blocks;
    bp.n_blocks = p.n_blocks;

    si_engine *e = calloc(1, sizeof *e);
    if (!e) return si_error(SI_ERR_NOMEM, "engine: out of memory");
    e->m = m;
    e->p = p;
    e->be = be;
    e->n_vocab = si_model_n_vocab(m);
    e->max_blocks = max_blocks;
    e->next_id = 1;
    sched_params sp = {p.max_num_seqs, p.max_batched_tokens, max_blocks};
    si_status st;
    if ((st = be->create(m, &bp, &e->bs)) || (st = kv_pool_create(p.n_blocks, &e->pool)) ||
        (st = sched_create(&sp, e->pool, &e->s)))
        goto fail;
    e->logits_owned = !be->logits_buffer; /* the device's pinned rows where it has them */
    e->logits = e->logits_owned ? malloc((size_t)p.max_num_seqs * e->n_vocab * sizeof *e->logits)
                                : be->logits_buffer(e->bs);
    e->host_toks = malloc((size_t)p.max_num_seqs * sizeof *e->host_toks);
    e->n_pen = malloc((size_t)p.max_num_seqs * sizeof *e->n_pen);
    bool pen_ok = true;
    if (backend_penalties_on_device(be)) {
        const size_t pairs = (size_t)p.max_num_seqs * BACKEND_PEN_MAX;
        e->pen_tok = malloc(pairs * sizeof *e->pen_tok);
        e->pen_count = malloc(pairs * sizeof *e->pen_count);
        pen_ok = e->pen_tok && e->pen_count;
    }
    if (!e->logits || !e->host_toks || !e->n_pen || !pen_ok) {
        st = si_error(SI_ERR_NOMEM, "engine: cannot allocate logits for %d sequences",
                      p.max_num_seqs);
        goto fail;
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->wake, NULL);
    pthread_cond_init(&e->events, NULL);
    publish_stats(e);
    if (pthread_create(&e->thread, NULL, engine_main, e)) {
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->wake);
        pthread_cond_destroy(&e->events);
        st = si_error(SI_ERR_INTERNAL, "engine: cannot start the engine thread");
        goto fail;
    }
    *out = e;
    return SI_OK;
fail:
    free_parts(e);
    free(e);
    return st;
}

void si_engine_free(si_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    for (int b = 0; b < N_BUCKETS; b++)
        for (ereq *r = e->buckets[b], *next; r; r = next) {
            next = r->hnext;
            if (r->sq.state == SEQ_WAITING || r->sq.state == SEQ_RUNNING)
                sched_remove(e->s, &r->sq);
            ereq_free(r);
        }
    free_parts(e);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->wake);
    pthread_cond_destroy(&e->events);
    free(e);
}

/* Checks r and builds the engine's copy (everything but the id). */
static si_status make_request(si_engine *e, const si_request *q, ereq **out) {
    *out = NULL;
    const si_model *m = e->m;
    const int32_t n_ctx = si_model_n_ctx(m);
    int32_t n = q->n_prompt_tokens, *toks = NULL;
    if (q->prompt) {
        size_t len = strlen(q->prompt);
        n = si_tokenize(m, q->prompt, len, true, true, NULL, 0);
        if (n < 0) return SI_ERR_INVALID_ARG;
        if (n > 0 && !(toks = malloc((size_t)n * sizeof *toks)))
            return si_error(SI_ERR_NOMEM, "engine: out of memory");
        if (n > 0 && si_tokenize(m, q->prompt, len, true, true, toks, n) != n) {
            free(toks);
            return si_error(SI_ERR_INTERNAL, "engine: tokeniser count changed");
        }
    } else {
        for (int32_t i = 0; q->prompt_tokens && i < n; i++)
            if (q->prompt_tokens[i] < 0 || q->prompt_tokens[i] >= e->n_vocab)
                return si_error(SI_ERR_INVALID_ARG, "request: prompt token %d at index %d is "
                                "outside the vocabulary (0..%d)", q->prompt_tokens[i], i,
                                e->n_vocab - 1);
    }
    const int32_t *prompt = q->prompt ? toks : q->prompt_tokens;
    const bool streaming = q->stream_window > 0;
    const int32_t n_blocks = e->p.n_blocks;
    int32_t max_tokens = q->max_tokens;
    si_status st = SI_OK;
    if (n <= 0 || !prompt)
        st = si_error(SI_ERR_INVALID_ARG, "request: the prompt is empty");
    else if (q->max_tokens < 0 || q->n_stop < 0 || q->n_stop_token_ids < 0 ||
             q->stream_sink < 0 || q->stream_window < 0)
        st = si_error(SI_ERR_INVALID_ARG, "request: max_tokens %d, n_stop %d, n_stop_token_ids "
                      "%d, stream_sink %d and stream_window %d must be >= 0", q->max_tokens,
                      q->n_stop, q->n_stop_token_ids, q->stream_sink, q->stream_window);
    else if (q->top_logprobs < 0 || q->top_logprobs > SI_MAX_TOP_LOGPROBS)
        st = si_error(SI_ERR_INVALID_ARG, "request: top_logprobs %d is outside 0..%d",
                      q->top_logprobs, SI_MAX_TOP_LOGPROBS);
    else if (streaming && !e->be->rope_on_read)
        st = si_error(SI_ERR_UNSUPPORTED, "request: streaming generation (stream_window) is not "
                      "supported on the %s backend yet (its attention cannot rotate keys on "
                      "read); use --device cpu", e->be->name);
    for (int32_t i = 0; !st && i < q->n_stop; i++) {
        size_t l = q->stop[i] ? strlen(q->stop[i]) : 0;
        if (l == 0 || l > SI_MAX_STOP_LEN)
            st = si_error(SI_ERR_INVALID_ARG, "request: stop string %d has %zu bytes (1..%d)", i,
                          l, SI_MAX_STOP_LEN);
    }
    if (!st && streaming) {
        int32_t need = (q->stream_sink + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE +
                       (q->stream_window + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE + 1;
        if (need > e->max_blocks || need > n_blocks)
            st = si_error(SI_ERR_CONTEXT_FULL, "request: streaming sink %d + window %d need %d "
                          "KV blocks of %d tokens, but the context holds %d and the pool %d",
                          q->stream_sink, q->stream_window, need, KV_BLOCK_SIZE, e->max_blocks,
                          n_blocks);
    } else if (!st) {
        if (max_tokens == 0) max_tokens = n_ctx - n;
        const int64_t total = (int64_t)n + max_tokens;
        const int64_t need = (total + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE;
        if (n >= n_ctx || total > n_ctx)
            st = si_error(SI_ERR_CONTEXT_FULL, "request: %d prompt tokens + %d max_tokens exceed "
                          "the context of %d tokens", n, q->max_tokens, n_ctx);
        else if (need > n_blocks)
            st = si_error(SI_ERR_CONTEXT_FULL, "request: %d prompt tokens + %d max_tokens need %"
                          PRId64 " KV blocks of %d tokens but the whole pool has %d", n,
                          max_tokens, need, KV_BLOCK_SIZE, n_blocks);
    }
    ereq *r = st ? NULL : calloc(1, sizeof *r);
    if (!st && !r) st = si_error(SI_ERR_NOMEM, "engine: out of memory");
    if (!st) {
        r->max_tokens = max_tokens;
        r->ignore_eos = q->ignore_eos;
        r->logprobs = q->logprobs || q->top_logprobs > 0;
        r->top_logprobs = q->top_logprobs;
        r->on_event = q->on_event;
        r->user = q->user;
        detok_init(&r->dt);
        r->pending = malloc(SI_MAX_STOP_LEN + DETOK_MAX_OUT(256));
        r->stop = q->n_stop ? calloc((size_t)q->n_stop, sizeof *r->stop) : NULL;
        r->stop_ids = q->n_stop_token_ids ? malloc((size_t)q->n_stop_token_ids * sizeof(int32_t))
                                          : NULL;
        if (!r->pending || (q->n_stop && !r->stop) || (q->n_stop_token_ids && !r->stop_ids))
            st = si_error(SI_ERR_NOMEM, "engine: out of memory");
        for (int32_t i = 0; !st && i < q->n_stop; i++, r->n_stop++)
            if (!(r->stop[i] = strdup(q->stop[i])))
                st = si_error(SI_ERR_NOMEM, "engine: out of memory");
        if (!st && q->n_stop_token_ids) {
            memcpy(r->stop_ids, q->stop_token_ids, (size_t)q->n_stop_token_ids * sizeof(int32_t));
            r->n_stop_ids = q->n_stop_token_ids;
        }
        if (!st) st = si_sampler_create(&q->sampling, e->n_vocab, &r->smp);
        if (!st)
            st = sched_seq_init(&r->sq, prompt, n, q->stream_sink, streaming ? q->stream_window : 0,
                                e->max_blocks);
    }
    free(toks);
    if (st) {
        ereq_free(r);
        return st;
    }
    *out = r;
    return SI_OK;
}

si_status si_engine_submit(si_engine *e, const si_request *q, si_request_id *id) {
    ereq *r;
    si_status st = make_request(e, q, &r);
    if (st) return st;
    pthread_mutex_lock(&e->mu);
    r->id = e->next_id++;
    r->hnext = e->buckets[r->id % N_BUCKETS];
    e->buckets[r->id % N_BUCKETS] = r;
    if (e->q_tail) e->q_tail->qnext = r;
    else e->q_head = r;
    e->q_tail = r;
    *id = r->id;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    return SI_OK;
}

si_status si_engine_next_event(si_engine *e, si_request_id id, si_event *ev, int timeout_ms) {
    struct timespec until;
    if (timeout_ms > 0) {
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = until.tv_nsec + (int64_t)timeout_ms * 1000000;
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
    }
    pthread_mutex_lock(&e->mu);
    ereq *r = table_find(e, id);
    si_status st = SI_OK;
    if (!r) st = si_error(SI_ERR_NOT_FOUND, "engine: no request %" PRIu64 " (unknown or "
                          "already finished)", id);
    else if (r->on_event)
        st = si_error(SI_ERR_INVALID_ARG, "engine: request %" PRIu64 " delivers its events "
                      "through its callback", id);
    while (!st && r->r_n == 0) {
        if (timeout_ms == 0 ||
            (timeout_ms > 0 && pthread_cond_timedwait(&e->events, &e->mu, &until) != 0 &&
             r->r_n == 0)) {
            ev->type = SI_EVENT_NONE;
            ev->id = id;
            pthread_mutex_unlock(&e->mu);
            return SI_OK;
        }
        if (timeout_ms < 0) pthread_cond_wait(&e->events, &e->mu);
    }
    if (!st) {
        *ev = r->ring[r->r_head];
        r->r_head = (r->r_head + 1) % r->r_cap;
        r->r_n--;
        if (ev->type == SI_EVENT_FINISH || ev->type == SI_EVENT_ERROR) {
            table_remove(e, r);
            ereq_free(r); /* done: the engine no longer references it */
        }
    }
    pthread_mutex_unlock(&e->mu);
    return st;
}

si_status si_engine_cancel(si_engine *e, si_request_id id) {
    pthread_mutex_lock(&e->mu);
    ereq *r = table_find(e, id);
    si_status st = SI_OK;
    if (!r || r->done)
        st = si_error(SI_ERR_NOT_FOUND, "engine: no running request %" PRIu64, id);
    else if (!r->cancel_asked) {
        r->cancel_asked = true;
        e->n_cancels++;
        pthread_cond_signal(&e->wake);
    }
    pthread_mutex_unlock(&e->mu);
    return st;
}

si_status si_generate(si_engine *e, const si_request *q, si_result *out) {
    memset(out, 0, sizeof *out);
    si_request rq = *q;
    rq.on_event = NULL;
    si_request_id id;
    si_status st = si_engine_submit(e, &rq, &id);
    if (st) return st;
    si_event *ev = malloc(sizeof *ev);
    size_t cap_text = 256;
    int32_t cap_tok = 64;
    out->text = malloc(cap_text);
    out->tokens = malloc((size_t)cap_tok * sizeof *out->tokens);
    bool oom = !ev || !out->text || !out->tokens;
    for (;;) {
        if (oom) { /* still drain the request so that the engine forgets it */
            si_engine_cancel(e, id);
            if (!ev) break;
        }
        if ((st = si_engine_next_event(e, id, ev, -1))) break;
        if (!oom && out->text_len + ev->text_len + 1 > cap_text) {
            while (out->text_len + ev->text_len + 1 > cap_text) cap_text *= 2;
            char *t = realloc(out->text, cap_text);
            if (t) out->text = t;
            oom = !t;
        }
        if (!oom) {
            memcpy(out->text + out->text_len, ev->text, ev->text_len);
            out->text_len += ev->text_len;
        }
        if (!oom && ev->type == SI_EVENT_TOKEN) {
            if (out->n_tokens == cap_tok) {
                int32_t *t = realloc(out->tokens, (size_t)(cap_tok *= 2) * sizeof *t);
                if (t) out->tokens = t;
                oom = !t;
            }
            if (!oom) out->tokens[out->n_tokens++] = ev->token;
        }
        if (ev->type == SI_EVENT_FINISH || ev->type == SI_EVENT_ERROR) {
            out->finish_reason = ev->finish_reason;
            out->usage = ev->usage;
            if (ev->type == SI_EVENT_ERROR) st = si_error(ev->status, "%s", ev->error);
            break;
        }
    }
    free(ev);
    if (!st && oom) st = si_error(SI_ERR_NOMEM, "si_generate: out of memory");
    if (st) {
        si_result_free(out);
        return st;
    }
    out->text[out->text_len] = '\0';
    return SI_OK;
}

void si_result_free(si_result *r) {
    if (!r) return;
    free(r->text);
    free(r->tokens);
    memset(r, 0, sizeof *r);
}

void si_engine_get_stats(si_engine *e, si_engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->mu);
}
