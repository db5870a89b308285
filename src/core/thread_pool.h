/* thread_pool.h — a fixed pool of worker threads that run one parallel job at a time.
 *
 * pool_run(p, fn, ctx) calls fn(ctx, ith, nth) for ith = 0..nth-1, the caller being thread 0,
 * and returns when all have finished. Workers are created once; nothing is allocated per job.
 * Between jobs workers spin for a bounded time before sleeping, so the many small jobs of one
 * token start without a futex wake-up each. */
#ifndef SI_CORE_THREAD_POOL_H
#define SI_CORE_THREAD_POOL_H

#include "swiftinfer.h"

typedef struct thread_pool thread_pool;
typedef void (*pool_fn)(void *ctx, int ith, int nth);

/* n_threads <= 0: the number of online cores. */
si_status pool_create(int n_threads, thread_pool **out);
void pool_free(thread_pool *p);
int pool_size(const thread_pool *p);
/* Runs fn on every thread of the pool; returns when all calls have returned. Callers on
 * different threads take turns (two engines on one model share its pool); never call it from
 * inside a job. */
void pool_run(thread_pool *p, pool_fn fn, void *ctx);

/* Inside a job: waits until all nth threads of the pool have reached the barrier (a spin
 * barrier; all threads of the job must call it the same number of times). */
void pool_barrier(thread_pool *p);

/* The [begin, end) slice of n items that thread ith of nth takes. */
static inline void pool_split(int64_t n, int ith, int nth, int64_t *begin, int64_t *end) {
    int64_t per = (n + nth - 1) / nth;
    *begin = per * ith < n ? per * ith : n;
    *end = *begin + per < n ? *begin + per : n;
}

#endif
