/* bench_memory.h — DRAM read bandwidth, the ceiling `swiftinfer bench` measures decode against.
 *
 * Token generation at batch 1 reads every weight once per token, so tokens/s × bytes per token
 * can be at most the bandwidth at which the cores can stream memory; this measures that. */
#ifndef SI_CLI_BENCH_MEMORY_H
#define SI_CLI_BENCH_MEMORY_H

#include <stdbool.h>
#include <stddef.h>

#include "swiftinfer.h"

typedef struct bench_memory_result {
    double best_gbps;  /* the fastest run, in 1e9 bytes per second */
    double mean_gbps;  /* over all runs */
    size_t bytes;      /* buffer size */
    int n_threads, runs;
    bool gpu; /* the GPU's copy bandwidth (si_backend.copy_bandwidth: bytes read + written), not
               * the host's read bandwidth (n_threads 0) */
} bench_memory_result;

/* Reads a buffer of `bytes` (choose it far larger than the last-level cache) with n_threads
 * threads (each its own contiguous slice, first touched by the thread that reads it), `runs`
 * times after one untimed pass. SI_ERR_NOMEM when the buffer cannot be allocated. */
si_status bench_memory(size_t bytes, int n_threads, int runs, bench_memory_result *out);

#endif
