/* test_engine.c — the engine end to end on a tiny synthetic model (model/synth.h), plus the
 * default model when it is present:
 *
 * - exactness: greedy outputs are identical whether each request runs alone on a fresh engine,
 *   batched with many others of mixed lengths (chunked prefill), with prefix-cache hits, or
 *   under a tiny KV pool that forces preemption;
 * - a repeated long prompt's second run computes only its unshared tokens (counters);
 * - streaming (sink 4, window 64): 2000 tokens with a constant KV block count;
 * - cancellation returns everything produced so far; stop strings and stop ids; logprobs;
 *   rejections at submit; random submit/cancel traffic on a tiny pool leaks no block;
 * - the stop-string scanner on its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "model/synth.h"
#include "swiftinfer.h"
#define TEST_TMPDIR_NAME "si_test_engine"
#include "test_tmpdir.h"

static char g_path[300];
static si_model *g_m;

static int setup(void **state) {
    (void)state;
    if (tmpdir_make()) return -1;
    synth_params p;
    if (synth_params_init(&p, "tiny")) return -1;
    p.seed = 7;
    snprintf(g_path, sizeof g_path, "%s/tiny.gguf", g_dir);
    if (synth_write(&p, g_path)) return -1;
    si_model_params mp = si_model_default_params();
    mp.n_ctx = 256;
    mp.n_threads = 2;
    return si_model_load(g_path, &mp, &g_m) ? -1 : 0;
}

static int teardown(void **state) {
    (void)state;
    si_model_free(g_m);
    return tmpdir_remove();
}

static si_engine *engine(si_model *m, int32_t n_blocks, int32_t max_seqs, int32_t max_tokens) {
    si_engine_params p = si_engine_default_params();
    p.n_blocks = n_blocks;
    p.max_num_seqs = max_seqs;
    p.max_batched_tokens = max_tokens;
    si_engine *e = NULL;
    si_status st = si_engine_create(m, &p, &e);
    if (st) fail_msg("si_engine_create: %s", si_last_error());
    return e;
}

/* Stats are published after each step: waits until a snapshot shows nothing running. */
static si_engine_stats settle(si_engine *e) {
    si_engine_stats st;
    for (int i = 0; i < 2000; i++) {
        si_engine_get_stats(e, &st);
        if (st.running + st.waiting == 0) break;
        usleep(1000);
    }
    return st;
}

/* ---- stop-string scan ------------------------------------------------------------------------ */

static void test_stop_scan(void **state) {
    (void)state;
    const char *stops[] = {"STOP", "\n\n"};
    size_t safe;
    assert_int_equal(engine_stop_scan("hello", 5, stops, 2, &safe), -1);
    assert_int_equal(safe, 5);
    assert_int_equal(engine_stop_scan("hello ST", 8, stops, 2, &safe), -1);
    assert_int_equal(safe, 6); /* "ST" may become STOP */
    assert_int_equal(engine_stop_scan("a\n", 2, stops, 2, &safe), -1);
    assert_int_equal(safe, 1);
    assert_int_equal(engine_stop_scan("xSTOPy\n\n", 8, stops, 2, &safe), 1);
    assert_int_equal(engine_stop_scan("x\n\nSTOP", 7, stops, 2, &safe), 1);
    assert_int_equal(engine_stop_scan("STO", 3, stops, 2, &safe), -1);
    assert_int_equal(safe, 0);
    assert_int_equal(engine_stop_scan("abc", 3, stops, 0, &safe), -1);
    assert_int_equal(safe, 3);
}

/* ---- exactness ------------------------------------------------------------------------------- */

enum { N_REQ = 14, GEN = 24 };

static void make_prompt(int32_t *t, int32_t n, uint32_t seed, int32_t n_vocab) {
    for (int32_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)((seed >> 8) % (uint32_t)n_vocab);
    }
}

typedef struct req_set {
    int32_t prompt[N_REQ][120];
    int32_t len[N_REQ];
} req_set;

/* Mixed lengths 3..115; every third shares a 50-token prefix with request 0. */
static void make_set(req_set *s, int32_t n_vocab) {
    for (int i = 0; i < N_REQ; i++) {
        s->len[i] = 3 + (i * 53) % 113;
        make_prompt(s->prompt[i], s->len[i], 1000u + (uint32_t)i, n_vocab);
        if (i % 3 == 0 && s->len[i] > 60) make_prompt(s->prompt[i], 50, 999u, n_vocab);
    }
}

static si_request greedy(const int32_t *prompt, int32_t n) {
    si_request r = si_request_default();
    r.prompt_tokens = prompt;
    r.n_prompt_tokens = n;
    r.max_tokens = GEN;
    r.ignore_eos = true;
    return r;
}

/* Submits every request at once and collects their tokens. */
static void run_batched(si_engine *e, const req_set *s, int32_t out[N_REQ][GEN]) {
    si_request_id id[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        si_request r = greedy(s->prompt[i], s->len[i]);
        assert_int_equal(si_engine_submit(e, &r, &id[i]), SI_OK);
    }
    si_event *ev = malloc(sizeof *ev);
    for (int i = 0; i < N_REQ; i++) {
        int n = 0;
        for (;;) {
            assert_int_equal(si_engine_next_event(e, id[i], ev, -1), SI_OK);
            if (ev->type == SI_EVENT_TOKEN) {
                assert_true(n < GEN);
                out[i][n++] = ev->token;
            } else {
                assert_int_equal(ev->type, SI_EVENT_FINISH);
                assert_int_equal(ev->finish_reason, SI_FINISH_LENGTH);
                assert_int_equal(ev->usage.completion_tokens, GEN);
                assert_int_equal(ev->usage.prompt_tokens, s->len[i]);
                break;
            }
        }
        assert_int_equal(n, GEN);
    }
    free(ev);
}

static void check_exact(si_model *m, int32_t n_vocab) {
    req_set *s = malloc(sizeof *s);
    make_set(s, n_vocab);
    static int32_t alone[N_REQ][GEN], batched[N_REQ][GEN], cached[N_REQ][GEN], tight[N_REQ][GEN];
    for (int i = 0; i < N_REQ; i++) { /* alone: a fresh engine each, no prefix cache to hit */
        si_engine *e = engine(m, 64, 4, 512);
        si_request r = greedy(s->prompt[i], s->len[i]);
        si_result res;
        assert_int_equal(si_generate(e, &r, &res), SI_OK);
        assert_int_equal(res.n_tokens, GEN);
        memcpy(alone[i], res.tokens, sizeof alone[i]);
        assert_int_equal(res.usage.cached_tokens, 0);
        si_result_free(&res);
        si_engine_free(e);
    }
    si_engine *e = engine(m, 256, 16, 40); /* chunked prefill: 40 tokens a step */
    run_batched(e, s, batched);
    run_batched(e, s, cached); /* the same again: the prefix cache now holds every prompt */
    si_engine_stats st;
    si_engine_get_stats(e, &st);
    assert_true(st.prefix_hits > 0);
    assert_int_equal(st.preemptions, 0);
    /* on the CPU every step that gives logits is sampled on the host */
    assert_true(st.host_sampled_steps > 0 && st.host_sampled_steps <= st.steps);
    si_engine_free(e);
    e = engine(m, 10, 8, 64); /* 10 blocks: about one and a half sequences */
    run_batched(e, s, tight);
    st = settle(e);
    assert_true(st.preemptions > 0);
    assert_int_equal(st.kv_blocks_used, 0);
    si_engine_free(e);
    for (int i = 0; i < N_REQ; i++) {
        assert_memory_equal(alone[i], batched[i], sizeof alone[i]);
        assert_memory_equal(alone[i], cached[i], sizeof alone[i]);
        assert_memory_equal(alone[i], tight[i], sizeof alone[i]);
    }
    free(s);
}

static void test_exact_tiny(void **state) {
    (void)state;
    check_exact(g_m, si_model_n_vocab(g_m));
}

static void test_exact_default_model(void **state) {
    (void)state;
    const char *src = getenv("SI_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", src ? src : ".");
    if (access(path, R_OK) != 0) skip();
    si_model_params mp = si_model_default_params();
    mp.n_ctx = 512;
    si_model *m = NULL;
    assert_int_equal(si_model_load(path, &mp, &m), SI_OK);
    check_exact(m, 1000); /* token ids below 1000: ordinary text pieces */
    si_model_free(m);
}

/* ---- prefix cache ---------------------------------------------------------------------------- */

static void test_prefix_skips_work(void **state) {
    (void)state;
    int32_t p[200];
    make_prompt(p, 200, 5, si_model_n_vocab(g_m));
    si_engine *e = engine(g_m, 64, 4, 512);
    si_request r = greedy(p, 200);
    r.max_tokens = 4;
    si_result a, b;
    si_engine_stats s0, s1, s2;
    si_engine_get_stats(e, &s0);
    assert_int_equal(si_generate(e, &r, &a), SI_OK);
    s1 = settle(e);
    assert_int_equal(si_generate(e, &r, &b), SI_OK);
    s2 = settle(e);
    assert_int_equal(a.usage.cached_tokens, 0);
    assert_int_equal(b.usage.cached_tokens, 192); /* 12 full blocks; the last 8 recomputed */
    assert_int_equal(s1.tokens_computed - s0.tokens_computed, 200 + 3);
    assert_int_equal(s2.tokens_computed - s1.tokens_computed, 8 + 3);
    assert_int_equal(s2.prefix_hits - s1.prefix_hits, 12);
    assert_int_equal(a.n_tokens, b.n_tokens);
    assert_memory_equal(a.tokens, b.tokens, (size_t)a.n_tokens * sizeof(int32_t));
    si_result_free(&a);
    si_result_free(&b);
    si_engine_free(e);
}

/* ---- streaming ------------------------------------------------------------------------------- */

static void test_streaming_constant_memory(void **state) {
    (void)state;
    int32_t p[30];
    make_prompt(p, 30, 11, si_model_n_vocab(g_m));
    si_engine *e = engine(g_m, 32, 4, 128);
    si_request r = greedy(p, 30);
    r.max_tokens = 2000;
    r.stream_sink = 4;
    r.stream_window = 64;
    si_request_id id;
    assert_int_equal(si_engine_submit(e, &r, &id), SI_OK);
    si_event *ev = malloc(sizeof *ev);
    int n = 0, max_used = 0, used_at_500 = -1;
    for (;;) {
        assert_int_equal(si_engine_next_event(e, id, ev, -1), SI_OK);
        if (ev->type != SI_EVENT_TOKEN) break;
        n++;
        si_engine_stats st;
        si_engine_get_stats(e, &st);
        if (st.kv_blocks_used > max_used) max_used = st.kv_blocks_used;
        if (n == 500) used_at_500 = st.kv_blocks_used;
    }
    assert_int_equal(ev->type, SI_EVENT_FINISH);
    assert_int_equal(ev->finish_reason, SI_FINISH_LENGTH);
    assert_int_equal(n, 2000);
    assert_true(max_used <= 6); /* 1 sink block + 4 window blocks + 1 being filled */
    assert_true(used_at_500 >= 5);
    free(ev);
    si_engine_free(e);
}

/* ---- cancellation, stops, logprobs, rejections ----------------------------------------------- */

static void test_cancel_returns_output(void **state) {
    (void)state;
    int32_t p[20];
    make_prompt(p, 20, 3, si_model_n_vocab(g_m));
    si_engine *e = engine(g_m, 64, 4, 64);
    si_request r = greedy(p, 20);
    r.max_tokens = 200;
    si_request_id id, id2;
    assert_int_equal(si_engine_submit(e, &r, &id), SI_OK);
    si_event *ev = malloc(sizeof *ev);
    int n = 0;
    while (n < 10) {
        assert_int_equal(si_engine_next_event(e, id, ev, -1), SI_OK);
        assert_int_equal(ev->type, SI_EVENT_TOKEN);
        n++;
    }
    assert_int_equal(si_engine_cancel(e, id), SI_OK);
    for (;;) {
        assert_int_equal(si_engine_next_event(e, id, ev, -1), SI_OK);
        if (ev->type != SI_EVENT_TOKEN) break;
        n++;
    }
    assert_int_equal(ev->type, SI_EVENT_FINISH);
    assert_int_equal(ev->finish_reason, SI_FINISH_CANCELLED);
    assert_int_equal(ev->usage.completion_tokens, n);
    assert_true(n < 200);
    assert_int_equal(si_engine_next_event(e, id, ev, 0), SI_ERR_NOT_FOUND);
    assert_int_equal(si_engine_cancel(e, id), SI_ERR_NOT_FOUND);
    /* cancelled straight after submission: finishes with nothing */
    assert_int_equal(si_engine_submit(e, &r, &id2), SI_OK);
    assert_int_equal(si_engine_cancel(e, id2), SI_OK);
    do assert_int_equal(si_engine_next_event(e, id2, ev, -1), SI_OK);
    while (ev->type == SI_EVENT_TOKEN);
    assert_int_equal(ev->finish_reason, SI_FINISH_CANCELLED);
    free(ev);
    assert_int_equal(settle(e).kv_blocks_used, 0);
    si_engine_free(e);
}

static void test_stops_and_logprobs(void **state) {
    (void)state;
    si_engine *e = engine(g_m, 64, 4, 64);
    int32_t p[12];
    make_prompt(p, 12, 21, si_model_n_vocab(g_m));
    si_request r = greedy(p, 12);
    r.max_tokens = 40;
    si_result full;
    assert_int_equal(si_generate(e, &r, &full), SI_OK);
    assert_int_equal(full.finish_reason, SI_FINISH_LENGTH);

    /* stop token id: the 6th generated token; output ends at its first occurrence */
    int32_t stop_id = full.tokens[5];
    int first = 0;
    while (full.tokens[first] != stop_id) first++;
    r.stop_token_ids = &stop_id;
    r.n_stop_token_ids = 1;
    si_result a;
    assert_int_equal(si_generate(e, &r, &a), SI_OK);
    assert_int_equal(a.finish_reason, SI_FINISH_STOP);
    assert_int_equal(a.n_tokens, first + 1);
    r.n_stop_token_ids = 0;

    /* stop string: a piece from the middle of the text; output is the text before it */
    if (full.text_len > 20) {
        char stop[8];
        memcpy(stop, full.text + full.text_len / 2, 4);
        stop[4] = '\0';
        const char *cut = strstr(full.text, stop);
        const char *stops[] = {stop};
        r.stop = stops;
        r.n_stop = 1;
        si_result b;
        assert_int_equal(si_generate(e, &r, &b), SI_OK);
        assert_int_equal(b.finish_reason, SI_FINISH_STOP);
        assert_int_equal(b.text_len, (size_t)(cut - full.text));
        assert_memory_equal(b.text, full.text, b.text_len);
        si_result_free(&b);
        r.n_stop = 0;
    }

    /* logprobs: the greedy token is the top alternative, and probabilities are <= 1 */
    r.top_logprobs = 5;
    r.max_tokens = 3;
    si_request_id id;
    assert_int_equal(si_engine_submit(e, &r, &id), SI_OK);
    si_event *ev = malloc(sizeof *ev);
    for (;;) {
        assert_int_equal(si_engine_next_event(e, id, ev, -1), SI_OK);
        if (ev->type != SI_EVENT_TOKEN) break;
        assert_int_equal(ev->n_top, 5);
        assert_int_equal(ev->top[0].token, ev->token);
        assert_true(ev->logprob <= 0.0f && ev->logprob == ev->top[0].logprob);
        for (int i = 1; i < 5; i++) assert_true(ev->top[i].logprob <= ev->top[i - 1].logprob);
    }
    free(ev);
    si_result_free(&a);
    si_result_free(&full);
    si_engine_free(e);
}

static void test_rejections(void **state) {
    (void)state;
    si_engine *e = engine(g_m, 8, 4, 64); /* 8 blocks = 128 tokens */
    int32_t p[200] = {0};
    si_request r = greedy(p, 100);
    si_request_id id;
    r.max_tokens = 100; /* 200 tokens > 128 in the pool */
    assert_int_equal(si_engine_submit(e, &r, &id), SI_ERR_CONTEXT_FULL);
    assert_non_null(strstr(si_last_error(), "8"));
    r.n_prompt_tokens = 200;
    r.max_tokens = 100; /* context is 256 */
    assert_int_equal(si_engine_submit(e, &r, &id), SI_ERR_CONTEXT_FULL);
    r.n_prompt_tokens = 0;
    assert_int_equal(si_engine_submit(e, &r, &id), SI_ERR_INVALID_ARG);
    r.n_prompt_tokens = 10;
    r.top_logprobs = 21;
    assert_int_equal(si_engine_submit(e, &r, &id), SI_ERR_INVALID_ARG);
    r.top_logprobs = 0;
    p[3] = 1 << 30;
    assert_int_equal(si_engine_submit(e, &r, &id), SI_ERR_INVALID_ARG);
    p[3] = 0;
    r.max_tokens = 1000; /* streaming: no pool limit on length, only on sink + window */
    r.stream_sink = 4;
    r.stream_window = 64;
    assert_int_equal(si_engine_submit(e, &r, &id), SI_OK);
    assert_int_equal(si_engine_cancel(e, id), SI_OK);
    r.stream_window = 200;
    si_request_id id2;
    assert_int_equal(si_engine_submit(e, &r, &id2), SI_ERR_CONTEXT_FULL);
    si_engine_free(e); /* frees the unread request too */
}

/* An FP8 KV cache is the CUDA backend's: on the CPU backend si_engine_create and
 * si_session_create_params refuse it with a message naming the flag and the device that has
 * it; an unknown dtype is a bad argument; SI_KV_F16 spelled out is the default. */
static void test_kv_cache_dtype(void **state) {
    (void)state;
    si_model_params mp = si_model_default_params();
    mp.n_ctx = 256;
    mp.n_threads = 1;
    mp.device = SI_DEVICE_CPU;
    si_model *m = NULL;
    assert_int_equal(si_model_load(g_path, &mp, &m), SI_OK);
    si_engine_params p = si_engine_default_params();
    si_session_params sp = si_session_default_params();
    assert_int_equal(p.kv_cache_dtype, SI_KV_F16);
    assert_int_equal(sp.kv_cache_dtype, SI_KV_F16);
    assert_int_equal(sp.n_batch, SI_SESSION_DEFAULT_BATCH);
    p.n_blocks = 8;
    si_engine *e = NULL;
    si_session *s = NULL;
    for (int32_t dtype = SI_KV_FP8_E4M3; dtype <= 7; dtype += 6) { /* FP8, then unknown 7 */
        p.kv_cache_dtype = sp.kv_cache_dtype = dtype;
        const si_status want = dtype == 7 ? SI_ERR_INVALID_ARG : SI_ERR_UNSUPPORTED;
        const char *names = dtype == 7 ? "kv_cache_dtype 7" : "--device cuda";
        const char *what = dtype == 7 ? "kv_cache_dtype" : "--kv-cache-dtype fp8";
        char who[64];
        assert_int_equal(si_engine_create(m, &p, &e), want);
        assert_null(e);
        snprintf(who, sizeof who, "engine: %s", what);
        assert_non_null(strstr(si_last_error(), who));
        assert_non_null(strstr(si_last_error(), names));
        assert_int_equal(si_session_create_params(m, &sp, &s), want);
        assert_null(s);
        snprintf(who, sizeof who, "session: %s", what);
        assert_non_null(strstr(si_last_error(), who));
        assert_non_null(strstr(si_last_error(), names));
    }
    p.kv_cache_dtype = sp.kv_cache_dtype = SI_KV_F16;
    assert_int_equal(si_engine_create(m, &p, &e), SI_OK);
    si_engine_free(e);
    sp.n_batch = 0;
    assert_int_equal(si_session_create_params(m, &sp, &s), SI_ERR_INVALID_ARG);
    sp.n_batch = 32;
    assert_int_equal(si_session_create_params(m, &sp, &s), SI_OK);
    si_session_free(s);
    assert_int_equal(si_session_create_params(m, NULL, &s), SI_OK);
    si_session_free(s);
    si_model_free(m);
}

/* Requests whose penalties read their history are sampled on the host, the rows of a step
 * spread over the model's thread pool (engine.c, host_pick): 8 seeded requests at t 0.8 with a
 * repetition penalty, all in the same steps, pick the same tokens on a pool of 1 thread and of
 * 4 (each request has its own sampler; the forward pass splits its work, not its sums). */
static void run_penalised(si_model *m, int32_t out[8][GEN]) {
    si_engine *e = engine(m, 64, 8, 256);
    si_request_id id[8];
    int32_t prompt[8][16];
    for (int i = 0; i < 8; i++) {
        make_prompt(prompt[i], 16, 500u + (uint32_t)i, si_model_n_vocab(m));
        si_request r = greedy(prompt[i], 16);
        r.sampling.temperature = 0.8f;
        r.sampling.repetition_penalty = 1.3f;
        r.sampling.seed = 40u + (uint64_t)i;
        assert_int_equal(si_engine_submit(e, &r, &id[i]), SI_OK);
    }
    si_event *ev = malloc(sizeof *ev);
    for (int i = 0; i < 8; i++)
        for (int n = 0;;) {
            assert_int_equal(si_engine_next_event(e, id[i], ev, -1), SI_OK);
            if (ev->type != SI_EVENT_TOKEN) break;
            assert_true(n < GEN);
            out[i][n++] = ev->token;
        }
    free(ev);
    si_engine_free(e);
}

static void test_host_picks_threads(void **state) {
    (void)state;
    static int32_t one[8][GEN], four[8][GEN];
    for (int threads = 1; threads <= 4; threads += 3) {
        si_model_params mp = si_model_default_params();
        mp.n_ctx = 256;
        mp.n_threads = threads;
        mp.device = SI_DEVICE_CPU;
        si_model *m = NULL;
        assert_int_equal(si_model_load(g_path, &mp, &m), SI_OK);
        run_penalised(m, threads == 1 ? one : four);
        si_model_free(m);
    }
    assert_memory_equal(one, four, sizeof one);
}

/* Random submits (some streaming), cancels and reads with a tiny pool: every request ends, and
 * no block stays used. (Debug builds also run sched_check after every step.) */
static void test_stress_engine(void **state) {
    (void)state;
    si_engine *e = engine(g_m, 12, 6, 48);
    enum { SLOTS = 16, OPS = 600 };
    si_request_id id[SLOTS];
    bool live[SLOTS] = {0};
    int32_t p[100];
    uint32_t rnd = 5;
    si_event *ev = malloc(sizeof *ev);
    int finished = 0;
    for (int op = 0; op < OPS; op++) {
        rnd = rnd * 1103515245u + 12345u;
        int i = (int)((rnd >> 8) % SLOTS);
        if (!live[i]) {
            int32_t len = 1 + (int32_t)((rnd >> 4) % 90);
            make_prompt(p, len, (rnd >> 12) % 3, si_model_n_vocab(g_m));
            si_request r = greedy(p, len);
            r.max_tokens = 1 + (int32_t)((rnd >> 16) % 60);
            if ((rnd >> 20) % 4 == 0) {
                r.stream_sink = 4;
                r.stream_window = 32;
            }
            assert_int_equal(si_engine_submit(e, &r, &id[i]), SI_OK);
            live[i] = true;
        } else if ((rnd >> 16) % 5 == 0) {
            si_engine_cancel(e, id[i]); /* may have finished already: fine either way */
        } else {
            for (int k = 0; k < 8; k++) {
                assert_int_equal(si_engine_next_event(e, id[i], ev, 1), SI_OK);
                if (ev->type == SI_EVENT_FINISH) {
                    live[i] = false;
                    finished++;
                    break;
                }
                assert_int_not_equal(ev->type, SI_EVENT_ERROR);
            }
        }
    }
    for (int i = 0; i < SLOTS; i++)
        while (live[i]) {
            assert_int_equal(si_engine_next_event(e, id[i], ev, -1), SI_OK);
            live[i] = ev->type == SI_EVENT_TOKEN;
        }
    free(ev);
    si_engine_stats st = settle(e);
    assert_int_equal(st.running + st.waiting, 0);
    assert_int_equal(st.kv_blocks_used, 0);
    assert_true(finished > 10);
    si_engine_free(e);
}

/* ---- callbacks and dynamic batching ---------------------------------------------------------- */

typedef struct cb_state {
    int32_t tokens[64];
    atomic_int n;
    atomic_int finished;
    si_finish_reason why;
} cb_state;

static void on_event(const si_event *ev, void *user) {
    cb_state *c = user;
    if (ev->type == SI_EVENT_TOKEN) c->tokens[atomic_fetch_add(&c->n, 1)] = ev->token;
    else {
        c->why = ev->finish_reason;
        atomic_store(&c->finished, 1);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_callback_and_min_batch(void **state) {
    (void)state;
    int32_t p[16];
    make_prompt(p, 16, 8, si_model_n_vocab(g_m));
    si_request r = greedy(p, 16);
    r.max_tokens = 10;
    si_result ref;
    si_engine *e = engine(g_m, 64, 4, 64);
    assert_int_equal(si_generate(e, &r, &ref), SI_OK);
    si_engine_free(e);

    /* min_batch 2, max_wait 300 ms: a lone request waits for a partner, then starts anyway */
    si_engine_params ep = si_engine_default_params();
    ep.n_blocks = 64;
    ep.min_batch = 2;
    ep.max_wait_ms = 300;
    assert_int_equal(si_engine_create(g_m, &ep, &e), SI_OK);
    cb_state *c = calloc(1, sizeof *c);
    r.on_event = on_event;
    r.user = c;
    si_request_id id;
    const double t0 = now_s();
    assert_int_equal(si_engine_submit(e, &r, &id), SI_OK);
    si_event ev;
    assert_int_equal(si_engine_next_event(e, id, &ev, 0), SI_ERR_INVALID_ARG);
    while (!atomic_load(&c->n)) usleep(1000);
    assert_true(now_s() - t0 >= 0.25);
    while (!atomic_load(&c->finished)) usleep(1000);
    assert_int_equal(c->why, SI_FINISH_LENGTH);
    assert_int_equal(atomic_load(&c->n), 10);
    assert_memory_equal(c->tokens, ref.tokens, 10 * sizeof(int32_t));
    /* two at once: both run to the end */
    r.on_event = NULL;
    si_request_id a, b;
    assert_int_equal(si_engine_submit(e, &r, &a), SI_OK);
    assert_int_equal(si_engine_submit(e, &r, &b), SI_OK);
    do assert_int_equal(si_engine_next_event(e, a, &ev, -1), SI_OK);
    while (ev.type == SI_EVENT_TOKEN);
    do assert_int_equal(si_engine_next_event(e, b, &ev, -1), SI_OK);
    while (ev.type == SI_EVENT_TOKEN);
    free(c);
    si_result_free(&ref);
    si_engine_free(e);
}

/* A callback may call the engine's API: one that cancels its own request at its third token
 * gets every token made and then the cancellation's FINISH counting them. */
typedef struct self_cancel {
    si_engine *e;
    atomic_int n, finished;
    si_finish_reason why;
    int32_t completion_tokens;
} self_cancel;

static void cancel_at_third(const si_event *ev, void *user) {
    self_cancel *c = user;
    if (ev->type == SI_EVENT_TOKEN) {
        if (atomic_fetch_add(&c->n, 1) + 1 == 3)
            assert_int_equal(si_engine_cancel(c->e, ev->id), SI_OK);
        return;
    }
    c->why = ev->finish_reason;
    c->completion_tokens = ev->usage.completion_tokens;
    atomic_store(&c->finished, 1);
}

static void test_callback_cancels_itself(void **state) {
    (void)state;
    int32_t p[16];
    make_prompt(p, 16, 9, si_model_n_vocab(g_m));
    si_request r = greedy(p, 16);
    r.max_tokens = 200;
    self_cancel *c = calloc(1, sizeof *c);
    c->e = engine(g_m, 64, 4, 64);
    r.on_event = cancel_at_third;
    r.user = c;
    si_request_id id;
    assert_int_equal(si_engine_submit(c->e, &r, &id), SI_OK);
    while (!atomic_load(&c->finished))
        usleep(1000);
    assert_int_equal(c->why, SI_FINISH_CANCELLED);
    assert_true(atomic_load(&c->n) >= 3 && atomic_load(&c->n) < 200);
    assert_int_equal(c->completion_tokens, atomic_load(&c->n));
    si_engine_free(c->e);
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_scan),
        cmocka_unit_test(test_exact_tiny),
        cmocka_unit_test(test_prefix_skips_work),
        cmocka_unit_test(test_streaming_constant_memory),
        cmocka_unit_test(test_cancel_returns_output),
        cmocka_unit_test(test_callback_cancels_itself),
        cmocka_unit_test(test_stops_and_logprobs),
        cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_kv_cache_dtype),
        cmocka_unit_test(test_host_picks_threads),
        cmocka_unit_test(test_stress_engine),
        cmocka_unit_test(test_callback_and_min_batch),
        cmocka_unit_test(test_exact_default_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
