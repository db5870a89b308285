/* bench_memory.c — multi-threaded DRAM read bandwidth (see bench_memory.h).
 *
 * Each thread sums its slice as 64-bit words into eight independent accumulators: the compiler
 * vectorises the loop, the adds never limit the loads, and the sum is kept (written to a per-
 * thread slot) so the reads cannot be optimised away. Pages are first touched by the thread that
 * later reads them. The best of several runs is reported, as STREAM does. */
#include "cli/bench_memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/thread_pool.h"

typedef struct {
    uint64_t *buf;
    int64_t n_words;
    uint64_t sink[64 * 8]; /* per-thread results, a cache line apart (threads < 64) */
} mem_job;

static void mem_touch(void *ctx, int ith, int nth) {
    mem_job *j = ctx;
    int64_t b, e;
    pool_split(j->n_words, ith, nth, &b, &e);
    for (int64_t i = b; i < e; i++) j->buf[i] = (uint64_t)i * 0x9E3779B97F4A7C15ull;
}

static void mem_read(void *ctx, int ith, int nth) {
    mem_job *j = ctx;
    int64_t b, e;
    pool_split(j->n_words, ith, nth, &b, &e);
    b &= ~(int64_t)7; /* slices start on a cache line; the tail below covers the rest */
    uint64_t acc[8] = {0};
    const uint64_t *p = j->buf;
    int64_t i = b;
    for (; i + 8 <= e; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += p[i + k];
    for (; i < e; i++) acc[0] += p[i];
    uint64_t s = 0;
    for (int k = 0; k < 8; k++) s += acc[k];
    if (ith < 64) j->sink[ith * 8] = s;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

si_status bench_memory(size_t bytes, int n_threads, int runs, bench_memory_result *out) {
    thread_pool *pool = NULL;
    si_status st = pool_create(n_threads, &pool);
    if (st) return st;
    mem_job *j = calloc(1, sizeof *j);
    bytes &= ~(size_t)63;
    if (j) j->buf = aligned_alloc(64, bytes);
    if (!j || !j->buf) {
        if (j) free(j);
        pool_free(pool);
        return si_error(SI_ERR_NOMEM, "bench --memory: cannot allocate %zu MiB", bytes >> 20);
    }
    j->n_words = (int64_t)(bytes / sizeof(uint64_t));
    pool_run(pool, mem_touch, j);
    pool_run(pool, mem_read, j); /* untimed: TLB and page-table warm-up */
    double best = 0.0, sum = 0.0;
    for (int r = 0; r < runs; r++) {
        const double t0 = now_s();
        pool_run(pool, mem_read, j);
        const double gbps = (double)bytes / (now_s() - t0) / 1e9;
        sum += gbps;
        if (gbps > best) best = gbps;
    }
    *out =
        (bench_memory_result){best, runs ? sum / runs : 0.0, bytes, pool_size(pool), runs, false};
    free(j->buf);
    free(j);
    pool_free(pool);
    return SI_OK;
}
