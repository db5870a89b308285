/* run_engine.c — `swiftinfer run --parallel N` and `swiftinfer run --prompts FILE`: many
 * requests at once through one engine (continuous batching, shared prefix cache).
 *
 * --parallel N submits N copies of the prompt with seeds seed, seed+1, ... and prints each
 * result under a label once all are done. --prompts FILE submits one request per non-empty line
 * and prints one JSON object per prompt, in file order, to standard output:
 * {"index", "prompt", "text", "tokens", "finish_reason", "prompt_tokens", "completion_tokens",
 * "cached_tokens"}. Statistics go to standard error.
 *
 * With --stream-window (StreamingLLM attention sinks) a generation may be unbounded, so nothing
 * is kept: request 0's text goes to standard output as it comes, and a periodic line on
 * standard error reports tokens generated, KV blocks in use and the process's RSS (the
 * constant-memory proof in bench/streaming_memory.sh reads it). */
#include "cli/run_engine.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Splits the file into non-empty lines (a trailing '\r' removed). Returns the count or -1. */
static int read_lines(const char *path, char ***out) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char **lines = NULL, *line = NULL;
    size_t cap_line = 0;
    int n = 0, cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap_line, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (len == 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **l = realloc(lines, (size_t)cap * sizeof *l);
            if (!l) break;
            lines = l;
        }
        if (!(lines[n] = strdup(line))) break;
        n++;
    }
    free(line);
    fclose(f);
    *out = lines;
    return n;
}

/* Tokenises text for a request; returns the count (> 0) or prints an error and returns -1. */
static int32_t tokenize(si_model *m, const char *text, bool special, int32_t **out) {
    size_t len = strlen(text);
    int32_t n = si_tokenize(m, text, len, true, special, NULL, 0);
    if (n <= 0) {
        if (n == 0) cli_fail("run: a prompt is empty after tokenisation");
        else cli_fail_status(SI_ERR_INVALID_ARG);
        return -1;
    }
    *out = malloc((size_t)n * sizeof **out);
    if (!*out || si_tokenize(m, text, len, true, special, *out, n) != n) {
        free(*out);
        cli_fail("run: out of memory");
        return -1;
    }
    return n;
}

static json_t *result_json(int index, const char *prompt, const si_result *res) {
    json_t *toks = json_array();
    for (int32_t i = 0; toks && i < res->n_tokens; i++)
        json_array_append_new(toks, json_integer(res->tokens[i]));
    json_t *p = json_string(prompt); /* NULL for a prompt that is not UTF-8 */
    return json_pack("{s:i, s:o, s:s%, s:o, s:s, s:i, s:i, s:i}", "index", index, "prompt",
                     p ? p : json_null(), "text", res->text, res->text_len, "tokens", toks,
                     "finish_reason", si_finish_reason_name(res->finish_reason), "prompt_tokens",
                     res->usage.prompt_tokens, "completion_tokens",
                     res->usage.completion_tokens, "cached_tokens", res->usage.cached_tokens);
}

/* Collects request id's output like si_generate does, from an already submitted request. */
static si_status collect(si_engine *e, si_request_id id, si_result *out) {
    memset(out, 0, sizeof *out);
    si_event *ev = malloc(sizeof *ev);
    size_t cap = 256;
    int32_t cap_tok = 64;
    out->text = malloc(cap);
    out->tokens = malloc((size_t)cap_tok * sizeof *out->tokens);
    si_status st = SI_OK;
    while (ev && out->text && out->tokens && !(st = si_engine_next_event(e, id, ev, -1))) {
        if (out->text_len + ev->text_len + 1 > cap) {
            while (out->text_len + ev->text_len + 1 > cap) cap *= 2;
            char *t = realloc(out->text, cap);
            if (!t) break;
            out->text = t;
        }
        memcpy(out->text + out->text_len, ev->text, ev->text_len);
        out->text_len += ev->text_len;
        if (ev->type == SI_EVENT_TOKEN) {
            if (out->n_tokens == cap_tok) {
                int32_t *t = realloc(out->tokens, (size_t)(cap_tok *= 2) * sizeof *t);
                if (!t) break;
                out->tokens = t;
            }
            out->tokens[out->n_tokens++] = ev->token;
        } else {
            out->finish_reason = ev->finish_reason;
            out->usage = ev->usage;
            if (ev->type == SI_EVENT_ERROR) st = ev->status;
            free(ev);
            out->text[out->text_len] = '\0';
            return st;
        }
    }
    free(ev);
    if (!st) si_engine_cancel(e, id);
    return st ? st : SI_ERR_NOMEM;
}

/* The process's resident set in KiB from /proc/self/status, or -1. */
static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

static void stream_stats_line(si_engine *e, int64_t n_gen, double dt) {
    si_engine_stats es;
    si_engine_get_stats(e, &es);
    fprintf(stderr, "stream: tokens %lld, kv blocks used %d/%d, rss %ld KiB, %.1f s\n",
            (long long)n_gen, es.kv_blocks_used, es.kv_blocks_total, rss_kib(), dt);
}

/* Streaming mode: reads every request's events as they come without keeping them. Returns the
 * exit status; *n_gen counts generated tokens. */
static int stream_all(si_engine *e, const si_request_id *ids, int n, int stats_every,
                      double t0, int64_t *n_gen) {
    bool *done = calloc((size_t)n, sizeof *done);
    si_event *ev = malloc(sizeof *ev);
    int rc = done && ev ? 0 : cli_fail("run: out of memory"), n_done = 0;
    int64_t next_stats = stats_every;
    while (!rc && n_done < n) {
        for (int i = 0; i < n && !rc; i++) {
            if (done[i]) continue;
            /* one request waits; with several, poll each briefly so none stalls the others */
            si_status st = si_engine_next_event(e, ids[i], ev, n == 1 ? -1 : 1);
            if (st) {
                rc = cli_fail("run: request %d failed: %s", i, si_last_error());
                break;
            }
            if (ev->type == SI_EVENT_NONE) continue;
            if (i == 0 && ev->text_len) fwrite(ev->text, 1, ev->text_len, stdout);
            if (ev->type == SI_EVENT_TOKEN) {
                ++*n_gen;
                if (stats_every > 0 && *n_gen >= next_stats) {
                    fflush(stdout);
                    stream_stats_line(e, *n_gen, now_s() - t0);
                    next_stats += stats_every;
                }
            } else {
                done[i] = true;
                n_done++;
                if (ev->type == SI_EVENT_ERROR)
                    rc = cli_fail("run: request %d failed: %s", i, ev->error);
                else if (n > 1)
                    fprintf(stderr, "run: request %d finished (%s), %d tokens\n", i,
                            si_finish_reason_name(ev->finish_reason), ev->usage.completion_tokens);
            }
        }
    }
    for (int i = 0; rc && done && i < n; i++)
        if (!done[i]) si_engine_cancel(e, ids[i]);
    printf("\n");
    fflush(stdout);
    free(ev);
    free(done);
    return rc;
}

int run_engine(const cli_gen_opts *o, const run_engine_opts *r) {
    si_model *m = NULL;
    si_engine *e = NULL;
    si_status st = si_model_load(o->model, &o->mp, &m);
    if (!st) st = si_engine_create(m, &r->ep, &e);
    if (st) {
        int rc = cli_fail_status(st);
        si_model_free(m);
        return rc;
    }
    char **lines = NULL;
    int n = r->parallel;
    if (r->prompts_file && (n = read_lines(r->prompts_file, &lines)) < 0) {
        si_engine_free(e);
        si_model_free(m);
        return cli_fail("run: cannot read prompts file '%s'", r->prompts_file);
    }
    si_request_id *ids = calloc((size_t)(n > 0 ? n : 1), sizeof *ids);
    int rc = ids ? 0 : cli_fail("run: out of memory");
    int n_sub = 0;
    const double t0 = now_s();
    for (; !rc && n_sub < n; n_sub++) { /* submit everything first: the engine batches them */
        const char *text = lines ? lines[n_sub] : r->prompt;
        int32_t *toks = NULL, nt = tokenize(m, text, r->parse_special, &toks);
        if (nt < 0) {
            rc = 1;
            break;
        }
        si_request q = si_request_default();
        q.prompt_tokens = toks;
        q.n_prompt_tokens = nt;
        q.sampling = o->sp;
        q.sampling.seed = o->sp.seed + (uint64_t)(lines ? 0 : n_sub);
        q.max_tokens = o->n_predict < 0 ? 0 : o->n_predict;
        q.ignore_eos = o->ignore_eos;
        q.stream_sink = r->stream_sink;
        q.stream_window = r->stream_window;
        st = si_engine_submit(e, &q, &ids[n_sub]);
        free(toks);
        if (st) rc = lines ? cli_fail("run: prompt %d: %s", n_sub, si_last_error())
                           : cli_fail_status(st);
        if (rc) break;
    }
    int64_t n_gen = 0;
    int n_collect = n_sub;
    if (!rc && r->stream_window > 0) {
        rc = stream_all(e, ids, n_sub, r->stats_every, t0, &n_gen);
        n_collect = 0; /* streamed, nothing kept */
    }
    for (int i = 0; i < n_collect; i++) {
        si_result res;
        if (rc) { /* drain what was submitted */
            si_engine_cancel(e, ids[i]);
            if (!collect(e, ids[i], &res)) si_result_free(&res);
            continue;
        }
        if ((st = collect(e, ids[i], &res))) {
            rc = cli_fail("run: request %d failed: %s", i, si_last_error());
            continue;
        }
        n_gen += res.n_tokens;
        if (lines) {
            json_t *j = result_json(i, lines[i], &res);
            char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
            if (s) printf("%s\n", s);
            else rc = cli_fail("run: cannot encode result %d as JSON", i);
            free(s);
            json_decref(j);
        } else {
            printf("--- [%d] seed %llu, %s, %d tokens ---\n%s\n", i,
                   (unsigned long long)(o->sp.seed + (uint64_t)i),
                   si_finish_reason_name(res.finish_reason), res.n_tokens, res.text);
        }
        fflush(stdout);
        si_result_free(&res);
    }
    const double dt = now_s() - t0;
    if (!rc && o->show_stats) {
        si_engine_stats es;
        si_engine_get_stats(e, &es);
        fprintf(stderr, "\n%d requests: %lld tokens generated in %.2f s = %.1f tokens/s; "
                "%lld tokens computed in %lld steps, prefix hits %lld blocks, %lld preemptions\n",
                n_sub, (long long)n_gen, dt, dt > 0 ? n_gen / dt : 0.0,
                (long long)es.tokens_computed, (long long)es.steps, (long long)es.prefix_hits,
                (long long)es.preemptions);
    }
    for (int i = 0; lines && i < n; i++) free(lines[i]);
    free(lines);
    free(ids);
    si_engine_free(e);
    si_model_free(m);
    return rc;
}
