/* bench_concurrency.c — throughput under concurrency through the engine (continuous batching):
 * all c requests are submitted at once; the engine batches their decodes, so the aggregate rate
 * shows what batching buys over one request at a time. Times come from event callbacks. */
#include "cli/bench_concurrency.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"

typedef struct {
    double submit, first, finish; /* seconds */
    int n_tokens, cap;
    double *tok; /* [cap] the time of each token */
    atomic_int *done;
} req_times;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs on the engine thread. */
static void on_event(const si_event *ev, void *user) {
    req_times *t = user;
    if (ev->type == SI_EVENT_TOKEN) {
        const double now = now_s();
        if (t->n_tokens < t->cap) t->tok[t->n_tokens] = now;
        if (t->n_tokens++ == 0) t->first = now;
    } else if (ev->type == SI_EVENT_FINISH || ev->type == SI_EVENT_ERROR) {
        t->finish = now_s();
        atomic_fetch_add(t->done, 1);
    }
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static int32_t random_token(int32_t n_vocab) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((rng_state >> 33) % (uint64_t)n_vocab);
}

/* Tokens per second while all c requests were decoding: from the last first token (every
 * prefill done) to the first finish (none done yet), the tokens all of them produced in between
 * over that time — what llama-batched-bench reports as S_TG (its prompts are all processed
 * before generation starts). 0 when the window is empty. */
static double all_decoding_tps(const req_times *times, int c) {
    double t0 = 0, t1 = 1e300;
    for (int i = 0; i < c; i++) {
        if (times[i].first > t0) t0 = times[i].first;
        if (times[i].finish < t1) t1 = times[i].finish;
    }
    if (t1 <= t0) return 0;
    long n = 0;
    for (int i = 0; i < c; i++) {
        const int k = times[i].n_tokens < times[i].cap ? times[i].n_tokens : times[i].cap;
        for (int j = 0; j < k; j++) n += times[i].tok[j] > t0 && times[i].tok[j] <= t1;
    }
    return (double)n / (t1 - t0);
}

static si_status run_level(si_engine *e, int n_vocab, int c, int n_prompt, int n_gen,
                           int32_t *prompts, req_times *times, double *tok,
                           bench_conc_result *r) {
    atomic_int done = 0;
    si_request req = si_request_default();
    req.max_tokens = n_gen;
    req.ignore_eos = true;
    req.on_event = on_event;
    req.n_prompt_tokens = n_prompt;
    /* fresh random prompts, so the prefix cache cannot skip work */
    for (int i = 0; i < c * n_prompt; i++) prompts[i] = random_token(n_vocab);
    const double t0 = now_s();
    for (int i = 0; i < c; i++) {
        times[i] = (req_times){.submit = now_s(), .cap = n_gen, .tok = tok + (size_t)i * n_gen,
                               .done = &done};
        req.prompt_tokens = prompts + (size_t)i * n_prompt;
        req.user = &times[i];
        si_request_id id;
        si_status st = si_engine_submit(e, &req, &id);
        if (st) return st;
    }
    while (atomic_load(&done) < c) usleep(200);
    double last = 0, per_req = 0, ttft = 0;
    int total = 0;
    for (int i = 0; i < c; i++) {
        if (times[i].finish > last) last = times[i].finish;
        total += times[i].n_tokens;
        ttft += times[i].first - times[i].submit;
        const double dec = times[i].finish - times[i].first;
        per_req += dec > 0 ? (times[i].n_tokens - 1) / dec : 0;
    }
    *r = (bench_conc_result){.concurrency = c, .n_prompt = n_prompt, .n_gen = n_gen,
                             .wall_s = last - t0, .aggregate_tps = total / (last - t0),
                             .per_request_tps = per_req / c, .ttft_mean_s = ttft / c,
                             .all_decoding_tps = all_decoding_tps(times, c)};
    return SI_OK;
}

si_status bench_concurrency(si_model *m, const long *levels, int n_levels, int n_prompt,
                            int n_gen, int32_t kv_dtype, bench_conc_result *out) {
    int max_c = 1;
    for (int i = 0; i < n_levels; i++) max_c = levels[i] > max_c ? (int)levels[i] : max_c;
    si_engine_params p = si_engine_default_params();
    p.max_num_seqs = max_c;
    p.kv_cache_dtype = kv_dtype;
    p.n_blocks = max_c * ((n_prompt + n_gen + 15) / 16 + 1) + 1;
    si_engine *e = NULL;
    si_status st = si_engine_create(m, &p, &e);
    if (st) return st;
    int32_t *prompts = malloc(sizeof(int32_t) * (size_t)max_c * (size_t)(n_prompt > 0 ? n_prompt : 1));
    req_times *times = calloc((size_t)max_c, sizeof *times);
    double *tok = malloc(sizeof(double) * (size_t)max_c * (size_t)(n_gen > 0 ? n_gen : 1));
    if (!prompts || !times || !tok) {
        st = si_error(SI_ERR_NOMEM, "bench: out of memory");
        goto done;
    }
    const int n_vocab = si_model_n_vocab(m);
    bench_conc_result warm;
    if ((st = run_level(e, n_vocab, 1, n_prompt, n_gen < 8 ? n_gen : 8, prompts, times, tok,
                        &warm)))
        goto done;
    for (int i = 0; i < n_levels; i++) {
        fprintf(stderr, "bench: concurrency %ld\n", levels[i]);
        if ((st = run_level(e, n_vocab, (int)levels[i], n_prompt, n_gen, prompts, times, tok,
                            &out[i])))
            goto done;
    }
done:
    free(prompts);
    free(times);
    free(tok);
    si_engine_free(e);
    return st;
}
