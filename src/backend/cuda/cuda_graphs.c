/* cuda_graphs.c — the decode-step graph cache (cuda_graphs.h).
 *
 * Buckets are few (rows: 1..16, then log2(max_rows / 16); KV: log2(max_kv / 256) + 1; two
 * variants), so the cache is a flat array searched linearly; it never evicts. A graph is captured
 * with cudaStreamCaptureModeThreadLocal: other threads (another session uploading weights) may keep
 * calling the runtime while this one captures. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_graphs.h"


#define CG_MIN_KV 256
/* Steps of up to CG_EXACT_ROWS rows are their own buckets: their matmuls are GEMVs, whose cost
 * grows with the rows (5 requests of a 7B model, on an H100, against steps padded to 8: +6 %
 * Q4_0, +5 % Q8_0, +21 % F16, +22 % Q2_K; bench/RESULTS.md s48), up to 16 rows, where the
 * quantised types' matmuls may be GEMVs (cuda_gemv_wide_ok; the batched matmul pads rows to 16
 * itself). Larger steps round up to a power of two. Knob SI_CUDA_GRAPH_POW2=1: every bucket a
 * power of two (as before s48; A/B). */
#define CG_EXACT_ROWS 16

typedef struct cg_entry {
    int rows, kv_cap, variant;
    int uses;             /* 1: ran eagerly once; 2+: exec holds its graph */
    cudaGraphExec_t exec; /* NULL until captured */
} cg_entry;

struct cuda_graphs {
    int max_rows, max_kv;
    int exact_rows; /* steps of up to this many rows are their own bucket */
    cg_entry *e;
    int n, cap;
    long long replays;
};

cuda_graphs *cuda_graphs_create(int max_rows, int max_kv) {
    const char *env = getenv("SI_CUDA_GRAPHS");
    if (env && !strcmp(env, "0")) {
        fprintf(stderr, "cuda: CUDA graphs off (SI_CUDA_GRAPHS=0): every step runs eagerly\n");
        return NULL;
    }
    if (max_rows < 1 || max_kv < 1) return NULL;
    cuda_graphs *g = calloc(1, sizeof *g);
    if (!g) return NULL; /* no cache: steps run eagerly, which is only slower */
    g->max_rows = max_rows;
    g->max_kv = max_kv;
    const char *pow2 = getenv("SI_CUDA_GRAPH_POW2");
    g->exact_rows = pow2 && !strcmp(pow2, "1") ? 1 : CG_EXACT_ROWS;
    return g;
}

static int round_up_pow2(int n, int lo, int hi) {
    int b = lo;
    while (b < n && b < hi) b *= 2;
    return b < hi ? b : hi;
}

void cuda_graphs_bucket(const cuda_graphs *g, int n_rows, int kv_len, int *rows, int *kv_cap) {
    *rows = n_rows <= g->exact_rows && n_rows <= g->max_rows
                ? n_rows
                : round_up_pow2(n_rows, g->exact_rows, g->max_rows);
    *kv_cap = round_up_pow2(kv_len, CG_MIN_KV, g->max_kv);
}

static cg_entry *find_or_add(cuda_graphs *g, int rows, int kv_cap, int variant) {
    for (int i = 0; i < g->n; i++)
        if (g->e[i].rows == rows && g->e[i].kv_cap == kv_cap && g->e[i].variant == variant)
            return &g->e[i];
    if (g->n == g->cap) {
        const int cap = g->cap ? 2 * g->cap : 32;
        cg_entry *e = realloc(g->e, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        g->e = e;
        g->cap = cap;
    }
    cg_entry *e = &g->e[g->n++];
    *e = (cg_entry){rows, kv_cap, variant, 0, NULL};
    return e;
}

static void capture(cg_entry *e, cudaStream_t stream, cuda_graph_body body, void *ctx) {
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    body(ctx, stream);
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&e->exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
}

void cuda_graphs_run(cuda_graphs *g, int rows, int kv_cap, int variant, cudaStream_t stream,
                     cuda_graph_body body, void *ctx) {
    cg_entry *e = find_or_add(g, rows, kv_cap, variant);
    if (!e || e->uses++ == 0) { /* first use (or no room to remember it): eagerly */
        body(ctx, stream);
        return;
    }
    if (!e->exec)
        capture(e, stream, body, ctx);
    else
        g->replays++;
    CUDA_CHECK(cudaGraphLaunch(e->exec, stream));
}

int cuda_graphs_capture(cuda_graphs *g, int rows, int kv_cap, int variant, cudaStream_t stream,
                        cuda_graph_body body, void *ctx) {
    cg_entry *e = find_or_add(g, rows, kv_cap, variant);
    if (!e) return -1;
    if (!e->exec) capture(e, stream, body, ctx);
    if (e->uses < 1) e->uses = 1; /* its next run replays it */
    return 0;
}

int cuda_graphs_next_rows(const cuda_graphs *g, int rows) {
    const int exact = g ? g->exact_rows : 1, max_rows = g ? g->max_rows : INT_MAX;
    if (rows >= max_rows) return 0;
    return rows < exact ? rows + 1 : round_up_pow2(rows + 1, exact, max_rows);
}

int cuda_graphs_next_kv(const cuda_graphs *g, int kv_cap) {
    if (kv_cap >= g->max_kv) return 0;
    return round_up_pow2(kv_cap + 1, CG_MIN_KV, g->max_kv);
}

void cuda_graphs_free(cuda_graphs *g) {
    if (!g) return;
    int captured = 0;
    for (int i = 0; i < g->n; i++)
        if (g->e[i].exec) {
            captured++;
            CUDA_CHECK(cudaGraphExecDestroy(g->e[i].exec));
        }
    if (g->n > 0)
        fprintf(stderr, "cuda: %d decode-step graphs captured, %lld steps replayed from them "
                "(SI_CUDA_GRAPHS=0 turns them off)\n", captured, g->replays);
    free(g->e);
    free(g);
}
