/* metrics.h — the server's Prometheus metrics (text exposition format 0.0.4).
 *
 * Counters and histograms are updated by the HTTP threads under one mutex; gauges (running and
 * waiting requests, KV-cache usage, prefix-cache hit rate) are read from si_engine_get_stats
 * when /metrics is scraped. Names follow Prometheus conventions (base units: seconds, _total
 * for counters) with the prefix swiftinfer_. */
#ifndef SI_SERVER_METRICS_H
#define SI_SERVER_METRICS_H

#include <stdint.h>

#include "swiftinfer.h"

typedef struct metrics metrics;

metrics *metrics_create(void);
void metrics_free(metrics *m);

/* One finished HTTP request on a generation endpoint (any status) and its token counts. */
void metrics_request(metrics *m, int http_status, int64_t prompt_tokens, int64_t gen_tokens);
/* Latencies in seconds: time to first token, between tokens, whole request. */
void metrics_ttft(metrics *m, double s);
void metrics_itl(metrics *m, double s);
void metrics_e2e(metrics *m, double s);

/* The exposition text (malloc'd). e may be NULL while the model loads; in_flight: HTTP
 * requests being served. */
char *metrics_render(metrics *m, si_engine *e, int64_t in_flight);

#endif
