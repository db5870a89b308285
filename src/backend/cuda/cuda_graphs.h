/* cuda_graphs.h — CUDA graphs for decode steps (cuda_graphs.c): one captured graph per
 * (batch bucket, KV-length bucket, variant), replayed with one cudaGraphLaunch, so that a decode
 * step costs one launch instead of hundreds (decode of small models is launch-bound).
 *
 * The caller keeps everything a step changes in device buffers at fixed addresses and makes
 * every kernel's grid depend on the bucket only; the body it passes enqueues the whole step on
 * the given stream. Plain C. */
#ifndef SI_BACKEND_CUDA_GRAPHS_H
#define SI_BACKEND_CUDA_GRAPHS_H

#include <stdbool.h>

#include <cuda_runtime_api.h>

typedef struct cuda_graphs cuda_graphs;

/* Enqueues one step for the bucket on the stream it was given (ctx: the caller's). */
typedef void (*cuda_graph_body)(void *ctx, cudaStream_t stream);

/* A cache for steps of at most max_rows rows and KV lengths of at most max_kv, or NULL when the
 * environment says SI_CUDA_GRAPHS=0 (every step then runs eagerly: A/B runs, debugging). */
cuda_graphs *cuda_graphs_create(int max_rows, int max_kv);

/* The bucket of a step of n_rows rows (1..max_rows) whose KV lengths are at most kv_len: rows
 * 1, 2, 3, ..., 16, then 32, 64, ... up to max_rows; KV 256, 512, ... up to max_kv (both rounded
 * up, both capped at the maximum). */
void cuda_graphs_bucket(const cuda_graphs *g, int n_rows, int kv_len, int *rows, int *kv_cap);

/* The rows bucket after rows (a bucket), or 0 after the last; g NULL (no graphs): the power of
 * two after rows, unbounded. */
int cuda_graphs_next_rows(const cuda_graphs *g, int rows);

/* Runs body for bucket (rows, kv_cap, variant) on stream: the first time the bucket is seen it
 * runs eagerly (so that one-time lazy set-up inside the launchers, such as kernel attributes,
 * happens outside a capture), the second time it is captured into a graph, and from then on that
 * graph is replayed. */
void cuda_graphs_run(cuda_graphs *g, int rows, int kv_cap, int variant, cudaStream_t stream,
                     cuda_graph_body body, void *ctx);

/* Captures bucket (rows, kv_cap, variant) into its graph now, without running it, unless it is
 * captured already; its next cuda_graphs_run replays it. body as for cuda_graphs_run, whose
 * one-time set-up must have happened (a step of the same rows run before). 0, or -1 when there is
 * no room to remember it. */
int cuda_graphs_capture(cuda_graphs *g, int rows, int kv_cap, int variant, cudaStream_t stream,
                        cuda_graph_body body, void *ctx);

/* The KV bucket after kv_cap (cuda_graphs_bucket's values, in order), 0 after the last. */
int cuda_graphs_next_kv(const cuda_graphs *g, int kv_cap);

/* Frees every graph; prints once how many were captured and replayed. g may be NULL. */
void cuda_graphs_free(cuda_graphs *g);

#endif
