/* thread_pool.c — pthreads pool driven by an atomic generation counter.
 *
 * pool_run publishes (fn, ctx), bumps `generation` and runs thread 0's share itself; workers
 * notice the new generation, run their share and count `remaining` down; the caller spins until
 * it reaches zero. A forward pass issues dozens of small jobs per token, so between jobs a worker
 * spins on the counter for up to SPIN_NS before it sleeps on a condition variable: a futex
 * wake-up costs tens of microseconds, a whole small matmul about as much.
 *
 * No lost wake-ups: a worker that gives up spinning registers in `n_sleeping` under the mutex and
 * re-reads the generation before waiting; pool_run bumps the generation and then reads
 * `n_sleeping` (both sequentially consistent), so at least one of the two sees the other, and a
 * caller that sees a sleeper broadcasts under the same mutex (Dekker's pattern). */
#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void cpu_relax(void) { _mm_pause(); }
#elif defined(__aarch64__)
static inline void cpu_relax(void) { __asm__ __volatile__("yield"); }
#else
static inline void cpu_relax(void) { sched_yield(); }
#endif

/* NOTE: 2 ms covers the serial work between two jobs of one token (norms, RoPE, sampling) with a
 * wide margin, yet an idle pool (a chat waiting for input) stops burning cores almost at once. */
#define SPIN_NS 2000000LL
/* Spinning loops yield the core this often, so that an over-subscribed pool (more threads than
 * cores) still makes progress. */
#define YIELD_EVERY 1024u

struct thread_pool {
    int n;
    pthread_t *threads;
    pool_fn fn; /* the current job; written before `generation` is bumped */
    void *ctx;
    /* each hot counter on its own cache line: workers poll them while others write */
    alignas(64) atomic_uint_fast64_t generation; /* bumped for every job (and at shutdown) */
    alignas(64) atomic_int remaining;            /* workers still running the current job */
    alignas(64) atomic_int bar_count;            /* threads arrived at the barrier */
    atomic_uint bar_phase;                       /* bumped when the barrier opens */
    alignas(64) atomic_int n_sleeping;           /* workers blocked (or about to) on cv */
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t run_mu; /* held through a pool_run: callers on other threads take turns */
};

typedef struct {
    thread_pool *p;
    int ith;
} worker_arg;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One iteration of a busy wait: pause, and now and then give the core away. */
static inline void spin_step(uint32_t i) {
    cpu_relax();
    if (i % YIELD_EVERY == YIELD_EVERY - 1) sched_yield();
}

/* Waits until the generation differs from seen and returns it: spins first, then sleeps. */
static uint64_t wait_for_job(thread_pool *p, uint64_t seen) {
    uint64_t g;
    int64_t t0 = now_ns();
    for (uint32_t i = 0;; i++) {
        g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen) return g;
        spin_step(i);
        if (i % 256 == 255 && now_ns() - t0 > SPIN_NS) break;
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->n_sleeping, 1);
    while ((g = atomic_load(&p->generation)) == seen) pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->n_sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    thread_pool *p = wa.p;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_job(p, seen);
        if (atomic_load(&p->stop)) break;
        p->fn(p->ctx, wa.ith, p->n);
        atomic_fetch_sub_explicit(&p->remaining, 1, memory_order_release);
    }
    return NULL;
}

/* Wakes workers that went to sleep; called after every generation bump. */
static void wake_sleepers(thread_pool *p) {
    if (atomic_load(&p->n_sleeping) == 0) return;
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

si_status pool_create(int n_threads, thread_pool **out) {
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    size_t size = (sizeof(thread_pool) + 63) / 64 * 64;
    thread_pool *p = aligned_alloc(64, size);
    if (!p) return si_error(SI_ERR_NOMEM, "thread pool: out of memory");
    memset(p, 0, size);
    p->n = n_threads;
    atomic_init(&p->generation, 0);
    atomic_init(&p->remaining, 0);
    atomic_init(&p->bar_count, 0);
    atomic_init(&p->bar_phase, 0);
    atomic_init(&p->n_sleeping, 0);
    atomic_init(&p->stop, false);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_mutex_init(&p->run_mu, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        pool_free(p);
        return si_error(SI_ERR_NOMEM, "thread pool: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa) *wa = (worker_arg){p, i};
        if (!wa || pthread_create(&p->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
            p->n = i; /* workers 1..i-1 exist; pool_free joins them */
            pool_free(p);
            return si_error(SI_ERR_INTERNAL, "thread pool: cannot start thread %d", i);
        }
    }
    *out = p;
    return SI_OK;
}

void pool_free(thread_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, true);
    atomic_fetch_add(&p->generation, 1);
    pthread_mutex_lock(&p->mu); /* unconditional: a worker may be between its check and wait */
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n && p->threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->run_mu);
    free(p->threads);
    free(p);
}

int pool_size(const thread_pool *p) { return p->n; }

void pool_run(thread_pool *p, pool_fn fn, void *ctx) {
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->run_mu);
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->remaining, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->generation, 1); /* seq_cst: publishes fn, ctx, remaining */
    wake_sleepers(p);
    fn(ctx, 0, p->n);
    for (uint32_t i = 0; atomic_load_explicit(&p->remaining, memory_order_acquire) != 0; i++)
        spin_step(i);
    pthread_mutex_unlock(&p->run_mu);
}

void pool_barrier(thread_pool *p) {
    if (p->n == 1) return;
    /* read the phase before arriving: it cannot move until every thread, this one included, has
     * arrived */
    unsigned phase = atomic_load_explicit(&p->bar_phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->n - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->bar_phase, 1, memory_order_release);
        return;
    }
    for (uint32_t i = 0; atomic_load_explicit(&p->bar_phase, memory_order_acquire) == phase; i++)
        spin_step(i);
}
