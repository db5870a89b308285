/* bench_concurrency.h — `swiftinfer bench --concurrency`: aggregate and per-request token
 * generation through the engine with c requests in flight at once. */
#ifndef SI_CLI_BENCH_CONCURRENCY_H
#define SI_CLI_BENCH_CONCURRENCY_H

#include <stdbool.h>

#include "swiftinfer.h"

typedef struct bench_conc_result {
    int concurrency;
    int n_prompt, n_gen;
    double wall_s;         /* first submit to last finish */
    double aggregate_tps;  /* generated tokens of all requests / wall_s */
    double per_request_tps; /* mean over requests of (n_gen - 1) / (finish - first token) */
    double ttft_mean_s;    /* mean time from submit to first token */
    double all_decoding_tps; /* tokens/s while every request was decoding (llama-batched-bench's
                              * S_TG); 0 when no such window */
} bench_conc_result;

/* Runs c = levels[i] requests at once (random prompts of n_prompt tokens, n_gen greedy tokens
 * each, end-of-generation ignored) on m, after a warm-up, with a KV cache of kv_dtype
 * (si_kv_cache_dtype); fills out[i]. */
si_status bench_concurrency(si_model *m, const long *levels, int n_levels, int n_prompt,
                            int n_gen, int32_t kv_dtype, bench_conc_result *out);

#endif
