/* http.c — the HTTP side of `swiftinfer serve` (server.h): routes, authentication, body limits,
 * the engine hand-off, server-sent events, client disconnects and graceful shutdown.
 *
 * libmicrohttpd runs one thread per connection. A generation request's thread submits one
 * engine request per choice with an on_event callback that copies each event into the
 * request's queue (engine thread) and wakes the connection thread, which turns events into
 * JSON (openai.c). While it waits it peeks at its socket every 100 ms: a peer that has closed
 * gets its engine requests cancelled, so the engine frees their KV blocks at its next step.
 * Whatever ends a request, its gen is freed only after every engine request has delivered its
 * FINISH or ERROR event, so no callback can reach freed memory. */
#include <signal.h>
#undef si_status /* <signal.h>'s siginfo_t field macro would rename the si_status type */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "model/model.h"
#include "server/metrics.h"
#include "server/openai.h"
#include "server/server.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

#define INVALID_REQUEST "invalid_request_error"

void server_config_init(server_config *c) {
    memset(c, 0, sizeof *c);
    c->mp = si_model_default_params();
    c->ep = si_engine_default_params();
    c->host = "127.0.0.1";
    c->port = 8000;
    c->max_queue = 1024;
    c->max_body = 4u << 20;
    c->shutdown_timeout_s = 10;
}

/* ---- the server (one per process: the signal handler reaches it) -------------------------- */

static struct {
    const server_config *cfg;
    char *name; /* served model name */
    struct MHD_Daemon *d;
    si_model *m;
    si_engine *e;
    chat_template *tmpl;
    char *bos_text, *eos_text;
    metrics *mx;
    atomic_bool ready, stopping, force_cancel;
    atomic_llong in_flight; /* gens alive */
    atomic_llong pending;   /* engine requests submitted that have not produced an event yet */
    atomic_ullong next_id;
    int wake[2];            /* self-pipe: the signal handler wakes server_run */
} S;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- a generation: the engine requests of one HTTP request -------------------------------- */

typedef struct gen gen;

typedef struct gen_choice {
    gen *g;
    int index;      /* choice index: prompt * n + j */
    si_request_id id;
    bool live;      /* submitted and its FINISH/ERROR not yet delivered by the engine */
    bool first;     /* an event has arrived (no longer pending) */
    bool done;      /* its FINISH/ERROR has been consumed by the connection thread */
    double t_last;  /* time of its last token (inter-token latency) */
} gen_choice;

typedef struct queued {
    si_event ev;
    double t;
    int choice;
} queued;

struct gen {
    oai_request req;
    int32_t **ids;
    int32_t *n_ids;
    int n_prompts;
    int n_choices;
    gen_choice *gc;
    oai_choice *oc;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    queued *q; /* ring */
    size_t q_head, q_count, q_cap;
    int n_live;   /* engine requests still to deliver FINISH/ERROR (under mu) */
    int n_done;   /* choices consumed to the end */
    bool cancelled;
    char id[48];
    int64_t created;
    double t_start, t_first;
    double t_peek; /* last look at the socket */
    bool failed;  /* an ERROR event: non-streaming answers 500 */
    oai_error err;
    /* streaming */
    char *out;
    size_t out_len, out_off, out_cap;
    bool ended;   /* [DONE] queued */
    struct MHD_Connection *conn;
};

static void gen_on_event(const si_event *ev, void *user) {
    gen_choice *c = user;
    gen *g = c->g;
    double t = now_s();
    pthread_mutex_lock(&g->mu);
    if (!c->first) {
        c->first = true;
        atomic_fetch_sub(&S.pending, 1);
    }
    if (g->q_count == g->q_cap) {
        size_t cap = g->q_cap ? g->q_cap * 2 : 16;
        queued *q = malloc(cap * sizeof *q);
        if (!q) { /* drop a token event rather than block the engine; never a final one */
            if (ev->type == SI_EVENT_TOKEN) goto out;
            abort();
        }
        for (size_t i = 0; i < g->q_count; i++) q[i] = g->q[(g->q_head + i) % g->q_cap];
        free(g->q);
        g->q = q;
        g->q_head = 0;
        g->q_cap = cap;
    }
    queued *slot = &g->q[(g->q_head + g->q_count) % g->q_cap];
    slot->ev = *ev;
    slot->t = t;
    slot->choice = (int)(c - g->gc);
    g->q_count++;
    if (ev->type == SI_EVENT_FINISH || ev->type == SI_EVENT_ERROR) {
        c->live = false;
        g->n_live--;
    }
out:
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Cancels every live engine request of g (idempotent). */
static void gen_cancel(gen *g) {
    /* NOTE: ids are collected under g->mu but cancelled outside it: the engine may hold its own
     * lock while it calls gen_on_event, which takes g->mu. A request that finishes meanwhile
     * answers SI_ERR_NOT_FOUND, which is fine. */
    pthread_mutex_lock(&g->mu);
    g->cancelled = true;
    int n = 0;
    si_request_id ids[OAI_MAX_CHOICES];
    for (int i = 0; i < g->n_choices && n < OAI_MAX_CHOICES; i++)
        if (g->gc[i].live) ids[n++] = g->gc[i].id;
    pthread_mutex_unlock(&g->mu);
    for (int i = 0; i < n; i++) si_engine_cancel(S.e, ids[i]);
}

/* True when the client has closed its side of the connection. */
static bool peer_closed(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    char b;
    ssize_t k = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Takes g's next event, waiting; returns false when every choice is done. On a disconnect or
 * a forced shutdown the requests are cancelled and their final events still come. */
static bool gen_next(gen *g, queued *out) {
    pthread_mutex_lock(&g->mu);
    for (;;) {
        /* NOTE: checked on every pass, not only on time-outs: a busy stream never times out */
        double t = now_s();
        if (!g->cancelled && (atomic_load(&S.force_cancel) ||
                              (t - g->t_peek > 0.1 && g->conn && (g->t_peek = t, peer_closed(g->conn))))) {
            pthread_mutex_unlock(&g->mu);
            gen_cancel(g);
            pthread_mutex_lock(&g->mu);
        }
        if (g->q_count > 0) {
            *out = g->q[g->q_head];
            g->q_head = (g->q_head + 1) % g->q_cap;
            g->q_count--;
            pthread_mutex_unlock(&g->mu);
            return true;
        }
        if (g->n_live == 0) {
            pthread_mutex_unlock(&g->mu);
            return false;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
}

static void gen_free(gen *g) {
    if (!g) return;
    if (g->gc) {
        gen_cancel(g);
        queued ev;
        while (gen_next(g, &ev)) {} /* the engine's last callbacks */
    }
    for (int i = 0; g->oc && i < g->n_choices; i++) oai_choice_free(&g->oc[i]);
    free(g->oc);
    free(g->gc);
    free(g->q);
    free(g->out);
    oai_prompts_free(g->ids, g->n_ids, g->n_prompts);
    oai_request_free(&g->req);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
    atomic_fetch_sub(&S.in_flight, 1);
}

/* Accounts one consumed event into the choice's output and the latency metrics. */
static void gen_account(gen *g, const queued *q) {
    gen_choice *c = &g->gc[q->choice];
    const si_event *ev = &q->ev;
    if (ev->type == SI_EVENT_TOKEN) {
        if (g->t_first == 0) {
            g->t_first = q->t;
            metrics_ttft(S.mx, q->t - g->t_start);
        }
        if (c->t_last > 0) metrics_itl(S.mx, q->t - c->t_last);
        c->t_last = q->t;
    } else {
        c->done = true;
        g->n_done++;
        if (ev->type == SI_EVENT_ERROR && !g->failed) {
            g->failed = true;
            oai_fail(&g->err, ev->status == SI_ERR_CONTEXT_FULL ? 400 : 500,
                     ev->status == SI_ERR_CONTEXT_FULL ? NULL : "server_error",
                     ev->status == SI_ERR_CONTEXT_FULL ? "context_length_exceeded" : NULL, NULL,
                     "generation failed: %s", ev->error);
        }
    }
}

/* ---- per-HTTP-request context ------------------------------------------------------------- */

typedef enum {
    ROUTE_NONE, ROUTE_INDEX, ROUTE_HEALTH, ROUTE_METRICS, ROUTE_MODELS, ROUTE_MODEL,
    ROUTE_CHAT, ROUTE_COMPLETIONS, ROUTE_OPTIONS,
} route;

typedef struct conn_ctx {
    route r;
    unsigned long long num;
    char method[8];
    char path[96];
    double t_start;
    char *body;
    size_t len, cap;
    bool too_big, responded;
    int status;
    gen *g;
} conn_ctx;

static void add_common_headers(struct MHD_Response *resp, const char *type) {
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    if (atomic_load(&S.stopping)) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
}

/* Queues body (malloc'd, taken) as the response. */
static enum MHD_Result respond(struct MHD_Connection *c, conn_ctx *x, int status, char *body,
                               const char *type) {
    if (!body) {
        status = 500;
        body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                      "\"param\":null,\"code\":null}}");
        type = "application/json";
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    add_common_headers(resp, type);
    if (status == 405)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
                                x->r == ROUTE_CHAT || x->r == ROUTE_COMPLETIONS ? "POST, OPTIONS"
                                                                                : "GET, OPTIONS");
    if (status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    x->status = status;
    x->responded = true;
    enum MHD_Result r = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result respond_error(struct MHD_Connection *c, conn_ctx *x, const oai_error *e) {
    return respond(c, x, e->http_status, oai_error_json(e), "application/json");
}

static enum MHD_Result fail(struct MHD_Connection *c, conn_ctx *x, int status, const char *type,
                            const char *code, const char *param, const char *msg) {
    oai_error e;
    oai_fail(&e, status, type, code, param, "%s", msg);
    return respond_error(c, x, &e);
}

static route route_of(const char *url) {
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) return ROUTE_INDEX;
    if (!strcmp(url, "/health")) return ROUTE_HEALTH;
    if (!strcmp(url, "/metrics")) return ROUTE_METRICS;
    if (!strcmp(url, "/v1/models")) return ROUTE_MODELS;
    if (!strncmp(url, "/v1/models/", 11)) return ROUTE_MODEL;
    if (!strcmp(url, "/v1/chat/completions")) return ROUTE_CHAT;
    if (!strcmp(url, "/v1/completions")) return ROUTE_COMPLETIONS;
    return ROUTE_NONE;
}

static bool authorized(struct MHD_Connection *c) {
    const char *key = S.cfg->api_key;
    if (!key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
    h += 7;
    while (*h == ' ') h++;
    /* constant time in the key's length */
    size_t n = strlen(key), m = strlen(h);
    unsigned diff = (unsigned)(n != m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)key[i] ^ (unsigned char)(i < m ? h[i] : 0);
    return diff == 0;
}

static char *models_json(const char *only) {
    json_t *card = json_pack("{s:s, s:s, s:I, s:s, s:i}", "id", S.name, "object", "model", "created",
                             (json_int_t)time(NULL), "owned_by", "swiftinfer", "max_model_len",
                             S.m ? si_model_n_ctx(S.m) : 0);
    json_t *root = only ? card : json_pack("{s:s, s:[o]}", "object", "list", "data", card);
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

/* ---- generation endpoints ----------------------------------------------------------------- */

static bool model_matches(const char *want) {
    return !want || !strcmp(want, S.name) || !strcmp(want, S.cfg->model_path);
}

static uint64_t random_seed(void) {
    uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)now_s() * 1000003u) ^
                 (atomic_fetch_add(&S.next_id, 0) << 32);
    x += 0x9E3779B97F4A7C15ull; /* splitmix64 */
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Submits one engine request per choice. On failure fills err; already submitted ones stay
 * live and are cancelled and drained by gen_free. */
static bool gen_submit(gen *g, oai_error *err) {
    const oai_request *r = &g->req;
    uint64_t seed0 = r->seeded ? r->sampling.seed : random_seed();
    if (S.cfg->max_queue > 0 &&
        atomic_load(&S.pending) + g->n_choices > (long long)S.cfg->max_queue)
        return oai_fail(err, 429, "server_overloaded", "queue_full", NULL,
                        "the server's waiting queue is full (%lld requests waiting, --max-queue "
                        "%d); retry later", (long long)atomic_load(&S.pending), S.cfg->max_queue);
    for (int i = 0; i < g->n_choices; i++) {
        int p = i / r->n, j = i % r->n;
        si_request rq = si_request_default();
        rq.prompt_tokens = g->ids[p];
        rq.n_prompt_tokens = g->n_ids[p];
        rq.sampling = r->sampling;
        rq.sampling.seed = seed0 + (uint64_t)j;
        rq.max_tokens = r->max_tokens;
        rq.stop = (const char *const *)r->stop;
        rq.n_stop = r->n_stop;
        rq.stop_token_ids = r->stop_token_ids;
        rq.n_stop_token_ids = r->n_stop_token_ids;
        rq.ignore_eos = r->ignore_eos;
        rq.logprobs = r->logprobs;
        rq.top_logprobs = r->top_logprobs;
        rq.stream_sink = r->stream_sink;
        rq.stream_window = r->stream_window;
        rq.on_event = gen_on_event;
        rq.user = &g->gc[i];
        g->gc[i].g = g;
        g->gc[i].index = i;
        /* live before submit: the first callback may come before si_engine_submit returns */
        pthread_mutex_lock(&g->mu);
        g->gc[i].live = true;
        g->n_live++;
        pthread_mutex_unlock(&g->mu);
        atomic_fetch_add(&S.pending, 1);
        /* not under g->mu: the engine may call gen_on_event (which takes it) during submit */
        si_request_id id = 0;
        si_status st = si_engine_submit(S.e, &rq, &id);
        pthread_mutex_lock(&g->mu);
        g->gc[i].id = id;
        if (st != SI_OK) {
            g->gc[i].live = false;
            g->n_live--;
            atomic_fetch_sub(&S.pending, 1);
            pthread_mutex_unlock(&g->mu);
            if (st == SI_ERR_CONTEXT_FULL)
                return oai_fail(err, 400, NULL, "context_length_exceeded",
                                r->kind == OAI_CHAT ? "messages" : "prompt", "%s", si_last_error());
            if (st == SI_ERR_INVALID_ARG)
                return oai_fail(err, 400, NULL, NULL, NULL, "%s", si_last_error());
            return oai_fail(err, 500, "server_error", NULL, NULL, "%s", si_last_error());
        }
        pthread_mutex_unlock(&g->mu);
    }
    return true;
}

/* Appends s (taken) to the stream's output buffer. */
static void out_append(gen *g, char *s) {
    if (!s) return;
    size_t n = strlen(s);
    if (g->out_len + n > g->out_cap) {
        size_t cap = (g->out_cap ? g->out_cap * 2 : 4096) + n;
        char *o = realloc(g->out, cap);
        if (!o) {
            free(s);
            return;
        }
        g->out = o;
        g->out_cap = cap;
    }
    memcpy(g->out + g->out_len, s, n);
    g->out_len += n;
    free(s);
}

/* Turns one event into SSE chunks. */
static void stream_event(gen *g, const queued *q) {
    const oai_request *r = &g->req;
    const si_event *ev = &q->ev;
    oai_choice *oc = &g->oc[q->choice];
    const bool chat = r->kind == OAI_CHAT;
    gen_account(g, q);
    if (ev->type == SI_EVENT_ERROR) {
        oai_error e;
        oai_fail(&e, 500, "server_error", NULL, NULL, "generation failed: %s", ev->error);
        char *j = oai_error_json(&e);
        if (j) {
            size_t n = strlen(j);
            char *s = malloc(n + 9);
            if (s) snprintf(s, n + 9, "data: %s\n\n", j);
            out_append(g, s);
            free(j);
        }
        oc->usage = ev->usage;
        oc->finish = SI_FINISH_ERROR;
        return;
    }
    if (chat && !oc->started) {
        oc->started = true;
        out_append(g, oai_chunk(r, g->id, g->created, S.name, oc->index, "", 0, true,
                                SI_FINISH_NONE, NULL));
    }
    json_t *lp = NULL;
    if (ev->type == SI_EVENT_TOKEN && r->logprobs)
        oai_logprobs_add(&lp, r, S.m, ev, &oc->text_offset);
    if (ev->type == SI_EVENT_FINISH) {
        oc->usage = ev->usage;
        oc->finish = ev->finish_reason;
    }
    if (ev->text_len > 0 || lp || ev->type == SI_EVENT_FINISH)
        out_append(g, oai_chunk(r, g->id, g->created, S.name, oc->index, ev->text, ev->text_len,
                                false, ev->type == SI_EVENT_FINISH ? ev->finish_reason
                                                                   : SI_FINISH_NONE,
                                lp));
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    gen *g = cls;
    (void)pos;
    while (g->out_off == g->out_len) {
        g->out_off = g->out_len = 0;
        if (g->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        queued q;
        if (gen_next(g, &q)) {
            stream_event(g, &q);
            if (g->cancelled && g->conn && peer_closed(g->conn))
                return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        if (g->cancelled && g->conn && peer_closed(g->conn)) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (g->req.include_usage)
            out_append(g, oai_usage_chunk(&g->req, g->id, g->created, S.name, g->oc, g->n_choices));
        out_append(g, strdup("data: [DONE]\n\n"));
        g->ended = true;
        if (g->out_len == 0) return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = g->out_len - g->out_off;
    if (n > max) n = max;
    memcpy(buf, g->out + g->out_off, n);
    g->out_off += n;
    return (ssize_t)n;
}

static enum MHD_Result handle_generation(struct MHD_Connection *c, conn_ctx *x) {
    oai_kind kind = x->r == ROUTE_CHAT ? OAI_CHAT : OAI_COMPLETION;
    oai_error err;
    gen *g = calloc(1, sizeof *g);
    if (!g) return fail(c, x, 500, "server_error", NULL, NULL, "out of memory");
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    atomic_fetch_add(&S.in_flight, 1);
    x->g = g;
    g->conn = c;
    g->t_start = x->t_start;
    g->created = (int64_t)time(NULL);
    snprintf(g->id, sizeof g->id, "%s-%llx%08llx", kind == OAI_CHAT ? "chatcmpl" : "cmpl",
             x->num, (unsigned long long)(random_seed() & 0xffffffffu));
    if (!oai_parse_request(x->body, x->len, kind, &g->req, &err)) return respond_error(c, x, &err);
    if (!model_matches(g->req.model)) {
        oai_fail(&err, 404, INVALID_REQUEST, "model_not_found", "model",
                 "The model '%s' does not exist (this server serves '%s')", g->req.model, S.name);
        return respond_error(c, x, &err);
    }
    if (!oai_prepare_prompts(&g->req, S.m, S.tmpl, S.m->chat_template, S.bos_text, S.eos_text,
                             &g->ids, &g->n_ids, &g->n_prompts, &err))
        return respond_error(c, x, &err);
    g->n_choices = g->n_prompts * g->req.n;
    g->gc = calloc((size_t)g->n_choices, sizeof *g->gc);
    g->oc = calloc((size_t)g->n_choices, sizeof *g->oc);
    if (!g->gc || !g->oc) return fail(c, x, 500, "server_error", NULL, NULL, "out of memory");
    for (int i = 0; i < g->n_choices; i++) g->oc[i].index = i;
    if (!gen_submit(g, &err)) return respond_error(c, x, &err);

    if (g->req.stream) {
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, g, NULL);
        if (!resp) return MHD_NO;
        add_common_headers(resp, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        x->status = 200;
        x->responded = true;
        enum MHD_Result r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return r;
    }
    queued q;
    while (gen_next(g, &q)) {
        gen_account(g, &q);
        oai_choice_add_event(&g->oc[q.choice], &g->req, S.m, &q.ev);
    }
    if (g->failed) return respond_error(c, x, &g->err);
    if (g->cancelled && (atomic_load(&S.force_cancel) || peer_closed(c)))
        return fail(c, x, 503, "server_error", NULL, NULL, "the request was cancelled");
    return respond(c, x, 200,
                   oai_response_json(&g->req, g->id, g->created, S.name, g->oc, g->n_choices),
                   "application/json");
}

/* ---- libmicrohttpd callbacks -------------------------------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)cls;
    (void)version;
    conn_ctx *x = *con_cls;
    if (!x) {
        x = calloc(1, sizeof *x);
        if (!x) return MHD_NO;
        *con_cls = x;
        x->t_start = now_s();
        x->num = atomic_fetch_add(&S.next_id, 1) + 1;
        snprintf(x->method, sizeof x->method, "%s", method);
        snprintf(x->path, sizeof x->path, "%s", url);
        x->r = route_of(url);
        bool post = !strcmp(method, "POST"), get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
        bool gen_route = x->r == ROUTE_CHAT || x->r == ROUTE_COMPLETIONS;
        if (!strcmp(method, "OPTIONS")) { /* CORS preflight */
            struct MHD_Response *resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
            if (!resp) return MHD_NO;
            MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
            MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
            MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
            x->status = 204;
            x->responded = true;
            enum MHD_Result r = MHD_queue_response(c, 204, resp);
            MHD_destroy_response(resp);
            return r;
        }
        if (x->r == ROUTE_NONE)
            return fail(c, x, 404, INVALID_REQUEST, "not_found", NULL, "no such endpoint");
        if (gen_route ? !post : !get)
            return fail(c, x, 405, INVALID_REQUEST, "method_not_allowed", NULL,
                        "method not allowed on this endpoint");
        if ((x->r == ROUTE_MODELS || x->r == ROUTE_MODEL || gen_route) && !authorized(c))
            return fail(c, x, 401, INVALID_REQUEST, "invalid_api_key", NULL,
                        "missing or incorrect API key: send 'Authorization: Bearer KEY'");
        if (atomic_load(&S.stopping) && gen_route)
            return fail(c, x, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
        switch (x->r) {
        case ROUTE_INDEX: {
            char *page = malloc(si_index_html_len + 1);
            if (page) {
                memcpy(page, si_index_html, si_index_html_len);
                page[si_index_html_len] = 0;
            }
            return respond(c, x, 200, page, "text/html; charset=utf-8");
        }
        case ROUTE_HEALTH:
            return atomic_load(&S.ready) ? respond(c, x, 200, strdup("{\"status\":\"ok\"}"), "application/json")
                                         : respond(c, x, 503, strdup("{\"status\":\"loading\"}"), "application/json");
        case ROUTE_METRICS:
            return respond(c, x, 200,
                           metrics_render(S.mx, atomic_load(&S.ready) ? S.e : NULL,
                                          atomic_load(&S.in_flight)),
                           "text/plain; version=0.0.4; charset=utf-8");
        case ROUTE_MODELS:
        case ROUTE_MODEL:
            if (!atomic_load(&S.ready))
                return fail(c, x, 503, "server_error", "model_loading", NULL, "the model is loading");
            if (x->r == ROUTE_MODEL && !model_matches(url + 11))
                return fail(c, x, 404, INVALID_REQUEST, "model_not_found", "model", "no such model");
            return respond(c, x, 200, models_json(x->r == ROUTE_MODEL ? S.name : NULL), "application/json");
        default:
            break;
        }
        if (!atomic_load(&S.ready))
            return fail(c, x, 503, "server_error", "model_loading", NULL, "the model is loading");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > S.cfg->max_body) {
            char msg[128];
            snprintf(msg, sizeof msg, "the request body (%s bytes) exceeds the limit of %zu bytes", cl,
                     S.cfg->max_body);
            return fail(c, x, 413, INVALID_REQUEST, "request_too_large", NULL, msg);
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (x->responded || x->too_big) return MHD_YES;
        if (x->len + n > S.cfg->max_body) {
            x->too_big = true;
            return MHD_YES;
        }
        if (x->len + n + 1 > x->cap) {
            size_t cap = x->cap ? x->cap : 4096;
            while (cap < x->len + n + 1) cap *= 2;
            char *b = realloc(x->body, cap);
            if (!b) {
                x->too_big = true;
                return MHD_YES;
            }
            x->body = b;
            x->cap = cap;
        }
        memcpy(x->body + x->len, upload_data, n);
        x->len += n;
        x->body[x->len] = 0;
        return MHD_YES;
    }
    if (x->responded) return MHD_YES;
    if (x->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body exceeds the limit of %zu bytes", S.cfg->max_body);
        return fail(c, x, 413, INVALID_REQUEST, "request_too_large", NULL, msg);
    }
    return handle_generation(c, x);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    conn_ctx *x = *con_cls;
    if (!x) return;
    *con_cls = NULL;
    int64_t in = 0, out = 0;
    double ttft = -1;
    gen *g = x->g;
    if (g) {
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) gen_cancel(g);
        queued q;
        while (g->gc && gen_next(g, &q)) { /* a stream cut short: consume the rest */
            gen_account(g, &q);
            if (q.ev.type != SI_EVENT_TOKEN) g->oc[q.choice].usage = q.ev.usage;
        }
        for (int i = 0; g->oc && i < g->n_choices; i++) {
            if (i % g->req.n == 0) in += g->oc[i].usage.prompt_tokens;
            out += g->oc[i].usage.completion_tokens;
        }
        if (g->t_first > 0) ttft = g->t_first - x->t_start;
    }
    double total = now_s() - x->t_start;
    const char *how = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? ""
                      : toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT ? " (client disconnected)"
                                                                   : " (connection ended early)";
    if (x->r != ROUTE_HEALTH && x->r != ROUTE_METRICS && x->r != ROUTE_INDEX) {
        metrics_request(S.mx, x->status, in, out);
        if (g && g->gc) metrics_e2e(S.mx, total);
    }
    char ttft_s[32] = "-";
    if (ttft >= 0) snprintf(ttft_s, sizeof ttft_s, "%.1fms", ttft * 1e3);
    if (x->r != ROUTE_HEALTH)
        fprintf(stderr, "serve: req %llu %s %s %d in=%lld out=%lld ttft=%s total=%.1fms%s\n",
                x->num, x->method, x->path, x->status, (long long)in, (long long)out, ttft_s,
                total * 1e3, how);
    gen_free(g);
    free(x->body);
    free(x);
}

/* ---- start, serve, stop ------------------------------------------------------------------- */

static void on_signal(int sig) {
    (void)sig;
    atomic_store(&S.stopping, true);
    char b = 1;
    ssize_t k = write(S.wake[1], &b, 1);
    (void)k;
}

static char *default_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".gguf")) n -= 5;
    return strndup(base, n);
}

static struct MHD_Daemon *start_daemon(const server_config *c) {
    char port[16];
    snprintf(port, sizeof port, "%d", c->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(c->host, port, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "swiftinfer: serve: cannot resolve --host '%s': %s\n", c->host, gai_strerror(rc));
        return NULL;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)c->port, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)600, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
    if (!d)
        fprintf(stderr, "swiftinfer: serve: cannot listen on %s:%d (%s)\n", c->host, c->port,
                strerror(errno));
    freeaddrinfo(ai);
    return d;
}

/* The KV pool's share of a GPU when the command line sizes none (--kv-memory,
 * --gpu-memory-fraction): vLLM's way, most of the memory, since a server's concurrency and its
 * prefix cache are its KV blocks. The engine's own default (max-num-seqs contexts, at most
 * 1 GiB) would hold 4,096 tokens of a 7B model's cache on a 141 GB H200. */
#define SERVE_GPU_MEMORY_FRACTION 0.9f

/* c's engine parameters for m, with the GPU default above where it applies */
static si_engine_params serve_engine_params(const server_config *c, const si_model *m) {
    si_engine_params ep = c->ep;
    if (m->device == SI_DEVICE_CUDA && ep.kv_memory == 0 && ep.n_blocks == 0 &&
        ep.gpu_memory_fraction <= 0)
        ep.gpu_memory_fraction = SERVE_GPU_MEMORY_FRACTION;
    return ep;
}

int server_run(const server_config *c) {
    memset(&S, 0, sizeof S);
    S.cfg = c;
    S.name = c->served_name ? strdup(c->served_name) : default_name(c->model_path);
    S.mx = metrics_create();
    if (!S.name || !S.mx || pipe(S.wake) != 0) {
        fprintf(stderr, "swiftinfer: serve: out of memory\n");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    S.d = start_daemon(c);
    if (!S.d) return 1;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(S.d, MHD_DAEMON_INFO_BIND_PORT);
    int port = di ? di->port : c->port;
    fprintf(stderr, "serve: listening on http://%s:%d (loading %s)\n", c->host, port, c->model_path);

    int rc = 0;
    si_status st = si_model_load(c->model_path, &c->mp, &S.m);
    if (st == SI_OK) {
        const si_engine_params ep = serve_engine_params(c, S.m);
        st = si_engine_create(S.m, &ep, &S.e);
    }
    if (st != SI_OK) {
        fprintf(stderr, "swiftinfer: serve: %s\n", si_last_error());
        rc = 1;
        goto stop;
    }
    if (S.m->chat_template && chat_template_parse(S.m->chat_template, &S.tmpl) != SI_OK) {
        fprintf(stderr, "serve: the model's chat template does not parse (%s); using the built-in "
                        "formats\n", si_last_error());
        S.tmpl = NULL;
    }
    /* the templates' bos_token / eos_token */
    S.bos_text = tokenizer_token_text(S.m->tok, si_token_bos(S.m));
    S.eos_text = tokenizer_token_text(S.m->tok, tokenizer_eos(S.m->tok));
    atomic_store(&S.ready, true);
    fprintf(stderr, "serve: ready: model '%s', context %d, on http://%s:%d\n", S.name,
            si_model_n_ctx(S.m), c->host, port);

    while (!atomic_load(&S.stopping)) {
        char b;
        ssize_t k = read(S.wake[0], &b, 1);
        if (k < 0 && errno != EINTR) break;
    }
stop:
    fprintf(stderr, "serve: shutting down (%lld requests in flight)\n",
            (long long)atomic_load(&S.in_flight));
    atomic_store(&S.stopping, true);
    MHD_socket ls = MHD_quiesce_daemon(S.d);
    if (ls != MHD_INVALID_SOCKET) close(ls);
    double deadline = now_s() + c->shutdown_timeout_s;
    while (atomic_load(&S.in_flight) > 0 && now_s() < deadline) usleep(20 * 1000);
    if (atomic_load(&S.in_flight) > 0) {
        fprintf(stderr, "serve: cancelling %lld requests after %d s\n",
                (long long)atomic_load(&S.in_flight), c->shutdown_timeout_s);
        atomic_store(&S.force_cancel, true);
        deadline = now_s() + 5;
        while (atomic_load(&S.in_flight) > 0 && now_s() < deadline) usleep(20 * 1000);
    }
    MHD_stop_daemon(S.d);
    chat_template_free(S.tmpl);
    if (S.e) si_engine_free(S.e);
    if (S.m) si_model_free(S.m);
    metrics_free(S.mx);
    free(S.bos_text);
    free(S.eos_text);
    free(S.name);
    close(S.wake[0]);
    close(S.wake[1]);
    fprintf(stderr, "serve: stopped\n");
    return rc;
}
