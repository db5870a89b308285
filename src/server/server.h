/* server.h — `swiftinfer serve`: the OpenAI-compatible HTTP server (libmicrohttpd).
 *
 * One thread per connection (MHD_USE_THREAD_PER_CONNECTION): a connection thread parses and
 * validates its request, submits it to the engine and writes the engine's events to its socket
 * as JSON or server-sent events; the engine thread hands events over through a per-request
 * queue (si_request.on_event). The server listens before the model loads, so /health can
 * answer 503 while loading and 200 when ready (DESIGN.md, "Threads and ownership"). */
#ifndef SI_SERVER_SERVER_H
#define SI_SERVER_SERVER_H

#include <stddef.h>

#include "swiftinfer.h"

typedef struct server_config {
    const char *model_path;
    si_model_params mp;
    si_engine_params ep;
    const char *host;        /* default "127.0.0.1" */
    int port;                /* default 8000; 0: any free port (printed) */
    const char *api_key;     /* NULL: no authentication */
    const char *served_name; /* NULL: the model file's name without .gguf */
    int max_queue;           /* requests waiting for the engine before 429; 0: unbounded */
    size_t max_body;         /* request body limit in bytes (413 above) */
    int shutdown_timeout_s;  /* SIGINT/SIGTERM: how long in-flight requests may finish */
} server_config;

void server_config_init(server_config *c);

/* Starts listening, loads the model, creates the engine and serves until SIGINT or SIGTERM,
 * then shuts down gracefully. Returns the process exit status (0 after a signal). */
int server_run(const server_config *c);

/* The page served at "/" (src/server/static/index.html, embedded at build time). */
extern const unsigned char si_index_html[];
extern const size_t si_index_html_len;

#endif
