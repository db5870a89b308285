/* metrics.c — counters, histograms and engine gauges in Prometheus text format (metrics.h). */
#include "server/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_BUCKETS 16

typedef struct histogram {
    const double *le; /* N_BUCKETS upper bounds, ascending; +Inf is implicit */
    uint64_t count[N_BUCKETS + 1];
    double sum;
} histogram;

/* status codes counted individually; anything else lands in "other" */
static const int STATUSES[] = {200, 400, 401, 404, 405, 413, 429, 500, 503};
#define N_STATUSES (int)(sizeof STATUSES / sizeof STATUSES[0])

/* NOTE: bucket bounds as vLLM's: TTFT and end-to-end spread over orders of magnitude, the
 * inter-token latency sits between a millisecond (GPU) and a second (a busy CPU). */
static const double TTFT_LE[N_BUCKETS] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                          0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0};
static const double ITL_LE[N_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03,
                                         0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.5, 1.0};
static const double E2E_LE[N_BUCKETS] = {0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                                         10.0, 15.0, 20.0, 30.0, 40.0, 60.0, 120.0, 300.0};

struct metrics {
    pthread_mutex_t mu;
    uint64_t requests[N_STATUSES + 1];
    uint64_t prompt_tokens, gen_tokens;
    histogram ttft, itl, e2e;
};

metrics *metrics_create(void) {
    metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->mu, NULL);
    m->ttft.le = TTFT_LE;
    m->itl.le = ITL_LE;
    m->e2e.le = E2E_LE;
    return m;
}

void metrics_free(metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void metrics_request(metrics *m, int http_status, int64_t prompt_tokens, int64_t gen_tokens) {
    int k = N_STATUSES;
    for (int i = 0; i < N_STATUSES; i++)
        if (STATUSES[i] == http_status) k = i;
    pthread_mutex_lock(&m->mu);
    m->requests[k]++;
    if (prompt_tokens > 0) m->prompt_tokens += (uint64_t)prompt_tokens;
    if (gen_tokens > 0) m->gen_tokens += (uint64_t)gen_tokens;
    pthread_mutex_unlock(&m->mu);
}

static void observe(metrics *m, histogram *h, double s) {
    int b = 0;
    while (b < N_BUCKETS && s > h->le[b]) b++;
    pthread_mutex_lock(&m->mu);
    h->count[b]++;
    h->sum += s;
    pthread_mutex_unlock(&m->mu);
}

void metrics_ttft(metrics *m, double s) { observe(m, &m->ttft, s); }
void metrics_itl(metrics *m, double s) { observe(m, &m->itl, s); }
void metrics_e2e(metrics *m, double s) { observe(m, &m->e2e, s); }

/* A growing string. */
typedef struct sbuf {
    char *s;
    size_t n, cap;
    int failed;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)k + 1;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

static void put_histogram(sbuf *b, const char *name, const char *help, const histogram *h) {
    put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < N_BUCKETS; i++) {
        cum += h->count[i];
        put(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i], (unsigned long long)cum);
    }
    cum += h->count[N_BUCKETS];
    put(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
        (unsigned long long)cum, name, h->sum, name, (unsigned long long)cum);
}

char *metrics_render(metrics *m, si_engine *e, int64_t in_flight) {
    sbuf b = {.s = malloc(4096), .cap = 4096};
    if (!b.s) return NULL;
    b.s[0] = 0;
    pthread_mutex_lock(&m->mu);
    metrics snap = *m; /* counters only; the mutex copy is never used */
    pthread_mutex_unlock(&m->mu);

    put(&b, "# HELP swiftinfer_requests_total Finished HTTP requests on the completion endpoints "
            "by status code.\n# TYPE swiftinfer_requests_total counter\n");
    for (int i = 0; i <= N_STATUSES; i++) {
        if (i < N_STATUSES)
            put(&b, "swiftinfer_requests_total{status=\"%d\"} %llu\n", STATUSES[i],
                (unsigned long long)snap.requests[i]);
        else
            put(&b, "swiftinfer_requests_total{status=\"other\"} %llu\n",
                (unsigned long long)snap.requests[i]);
    }
    put(&b, "# HELP swiftinfer_prompt_tokens_total Prompt tokens of finished requests.\n"
            "# TYPE swiftinfer_prompt_tokens_total counter\nswiftinfer_prompt_tokens_total %llu\n",
        (unsigned long long)snap.prompt_tokens);
    put(&b, "# HELP swiftinfer_generation_tokens_total Tokens generated for finished requests.\n"
            "# TYPE swiftinfer_generation_tokens_total counter\n"
            "swiftinfer_generation_tokens_total %llu\n",
        (unsigned long long)snap.gen_tokens);
    put_histogram(&b, "swiftinfer_time_to_first_token_seconds",
                  "Time from request arrival to its first generated token.", &snap.ttft);
    put_histogram(&b, "swiftinfer_inter_token_latency_seconds",
                  "Time between consecutive generated tokens of a request.", &snap.itl);
    put_histogram(&b, "swiftinfer_e2e_request_latency_seconds",
                  "Time from request arrival to its last token.", &snap.e2e);
    put(&b, "# HELP swiftinfer_http_requests_in_flight Generation requests being served.\n"
            "# TYPE swiftinfer_http_requests_in_flight gauge\nswiftinfer_http_requests_in_flight %lld\n",
        (long long)in_flight);
    if (e) {
        si_engine_stats st;
        si_engine_get_stats(e, &st);
        double usage = st.kv_blocks_total > 0 ? (double)st.kv_blocks_used / st.kv_blocks_total : 0;
        int64_t lookups = st.prefix_hits + st.prefix_misses;
        double hit = lookups > 0 ? (double)st.prefix_hits / (double)lookups : 0;
        put(&b, "# HELP swiftinfer_num_requests_running Sequences in the engine's running batch.\n"
                "# TYPE swiftinfer_num_requests_running gauge\nswiftinfer_num_requests_running %d\n",
            st.running);
        put(&b, "# HELP swiftinfer_num_requests_waiting Sequences queued in the engine.\n"
                "# TYPE swiftinfer_num_requests_waiting gauge\nswiftinfer_num_requests_waiting %d\n",
            st.waiting);
        put(&b, "# HELP swiftinfer_kv_cache_usage_ratio Fraction of KV blocks held by requests.\n"
                "# TYPE swiftinfer_kv_cache_usage_ratio gauge\nswiftinfer_kv_cache_usage_ratio %.6f\n",
            usage);
        put(&b, "# HELP swiftinfer_kv_blocks KV blocks by state.\n# TYPE swiftinfer_kv_blocks gauge\n"
                "swiftinfer_kv_blocks{state=\"total\"} %d\nswiftinfer_kv_blocks{state=\"used\"} %d\n"
                "swiftinfer_kv_blocks{state=\"free\"} %d\nswiftinfer_kv_blocks{state=\"cached\"} %d\n",
            st.kv_blocks_total, st.kv_blocks_used, st.kv_blocks_free, st.kv_blocks_cached);
        put(&b, "# HELP swiftinfer_prefix_cache_hit_rate Full prompt blocks found in the prefix "
                "cache / looked up.\n# TYPE swiftinfer_prefix_cache_hit_rate gauge\n"
                "swiftinfer_prefix_cache_hit_rate %.6f\n",
            hit);
        put(&b, "# HELP swiftinfer_prefix_cache_hits_total Full prompt blocks found.\n"
                "# TYPE swiftinfer_prefix_cache_hits_total counter\n"
                "swiftinfer_prefix_cache_hits_total %lld\n"
                "# HELP swiftinfer_prefix_cache_queries_total Full prompt blocks looked up.\n"
                "# TYPE swiftinfer_prefix_cache_queries_total counter\n"
                "swiftinfer_prefix_cache_queries_total %lld\n",
            (long long)st.prefix_hits, (long long)lookups);
        put(&b, "# HELP swiftinfer_num_preemptions_total Sequences preempted for KV blocks.\n"
                "# TYPE swiftinfer_num_preemptions_total counter\n"
                "swiftinfer_num_preemptions_total %lld\n",
            (long long)st.preemptions);
        put(&b, "# HELP swiftinfer_engine_steps_total Engine steps run.\n"
                "# TYPE swiftinfer_engine_steps_total counter\nswiftinfer_engine_steps_total %lld\n",
            (long long)st.steps);
        put(&b,
            "# HELP swiftinfer_engine_host_sampled_steps_total Engine steps whose logits came "
            "back to be sampled on the host.\n"
            "# TYPE swiftinfer_engine_host_sampled_steps_total counter\n"
            "swiftinfer_engine_host_sampled_steps_total %lld\n",
            (long long)st.host_sampled_steps);
    }
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
