/* cuda_backend.c — the CUDA backend table (backend/backend.h): the whole llama-family forward
 * pass on one GPU.
 *
 * At create: every weight is uploaded once into one device allocation (shared by all states of
 * the same model: an engine and a session do not hold two copies), the paged f16 KV pool gets
 * one allocation, the per-step scratch one more (all sized for the largest batch). Per step:
 * the batch's index arrays go over in one packed cudaMemcpyAsync, then the forward pass runs as
 * a flat list of kernel launches mirroring src/model/forward.c, and only the logits rows come
 * back.
 *
 * NOTE: written in C, not CUDA C++: it includes the model's C11 headers; the kernels are
 * behind the C launchers of cuda_ops.h and cuda_fwd.h.
 *
 * Not done yet (issue 6): attention for prefill runs the decode (flash-decoding) kernel with
 * one query per token and KV length pos + 1 — correct, not fast; keys are always stored rotated,
 * so streaming (rope_on_read) sequences are rejected by the engine; sampling runs on the host;
 * no CUDA graphs. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_fwd.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"
#include "model/kv_cache.h"
#include "quant/quant.h"

#define CK(call)                                                                               \
    do {                                                                                       \
        cudaError_t err_ = (call);                                                             \
        if (err_ != cudaSuccess) {                                                             \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_), __FILE__,  \
                    __LINE__, cudaGetErrorString(err_));                                       \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

#define ALIGN_UP(n) (((n) + 255) & ~(size_t)255)
#define MiB(n) ((double)(n) / (1024.0 * 1024.0))

/* ---- weights on the device --------------------------------------------------------------- */

typedef struct dev_mat {
    const void *d; /* GGUF row-major blocks, as in the file */
    si_type type;
    int M, K; /* rows (outputs), columns (inputs) */
} dev_mat;

typedef struct dev_layer {
    const float *attn_norm, *ffn_norm; /* (n_embd) */
    const float *bq, *bk, *bv;         /* qwen2 biases or NULL */
    dev_mat wq, wk, wv, wo, w_gate, w_up, w_down;
} dev_layer;

typedef struct cuda_weights {
    const si_model *m;
    int refs;
    void *buf; /* the one allocation */
    size_t bytes;
    dev_mat tok_embd, output;
    const float *output_norm;
    const float *rope_freqs; /* (rope_dim / 2) or NULL */
    dev_layer *layers;       /* [n_layer] */
    struct cuda_weights *next;
} cuda_weights;

/* Two passes over the model's tensors: sizing (base NULL) then copying. */
typedef struct upload {
    uint8_t *base;
    size_t off, total, done, next_report;
    double t0;
} upload;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void progress(upload *u, bool force) {
    if (!u->base || (!force && u->done < u->next_report)) return;
    const int width = 30, fill = u->total ? (int)((double)u->done / u->total * width) : width;
    fprintf(stderr, "\rcuda: uploading weights [%.*s%*s] %3d%% %7.0f / %.0f MiB", fill,
            "##############################", width - fill, "",
            u->total ? (int)(100.0 * u->done / u->total) : 100, MiB(u->done), MiB(u->total));
    u->next_report = u->done + u->total / 50 + 1;
}

/* Copies bytes host -> device in 64 MiB pieces, reporting progress. */
static void upload_bytes(upload *u, void *dst, const void *src, size_t bytes) {
    const size_t piece = (size_t)64 << 20;
    for (size_t o = 0; o < bytes; o += piece) {
        const size_t n = bytes - o < piece ? bytes - o : piece;
        CK(cudaMemcpy((uint8_t *)dst + o, (const uint8_t *)src + o, n, cudaMemcpyHostToDevice));
        u->done += n;
        progress(u, false);
    }
}

static si_status place_mat(upload *u, const si_tensor *t, const char *name, int layer,
                           dev_mat *out) {
    const size_t bytes = cuda_weight_alloc_bytes(t->type, t->n_rows, t->n_cols);
    if (!bytes || !t->data)
        return si_error(SI_ERR_UNSUPPORTED, "cuda: tensor %s (layer %d) has type %s, which the "
                        "CUDA kernels do not support (F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K); "
                        "use --device cpu", name, layer,
                        si_type_name(t->type) ? si_type_name(t->type) : "?");
    *out = (dev_mat){NULL, t->type, (int)t->n_rows, (int)t->n_cols};
    if (u->base) {
        out->d = u->base + u->off;
        upload_bytes(u, u->base + u->off, t->data, quant_row_size(t->type, t->n_cols) * t->n_rows);
    }
    u->off += ALIGN_UP(bytes);
    return SI_OK;
}

/* A vector (norm weights, biases, RoPE factors) as f32, whatever its stored type. */
static si_status place_vec(upload *u, const void *data, si_type type, int64_t n, const char *name,
                           const float **out) {
    *out = NULL;
    if (!data) return SI_OK;
    if (u->base) {
        float *tmp = NULL;
        const float *src = data;
        if (type != SI_TYPE_F32) {
            const quant_traits *q = quant_get(type);
            if (!q || n % q->block_size)
                return si_error(SI_ERR_UNSUPPORTED, "cuda: vector %s has unsupported type %d",
                                name, (int)type);
            if (!(tmp = malloc((size_t)n * sizeof(float))))
                return si_error(SI_ERR_NOMEM, "cuda: out of memory converting %s", name);
            q->to_float(data, tmp, n);
            src = tmp;
        }
        *out = (const float *)(u->base + u->off);
        upload_bytes(u, u->base + u->off, src, (size_t)n * sizeof(float));
        free(tmp);
    }
    u->off += ALIGN_UP((size_t)n * sizeof(float));
    return SI_OK;
}

static si_status place_tvec(upload *u, const si_tensor *t, const char *name, const float **out) {
    return place_vec(u, t->data, t->type, t->n_cols * t->n_rows, name, out);
}

static si_status place_all(upload *u, const si_model *m, cuda_weights *w) {
    const model_hparams *hp = &m->hp;
    si_status st;
    if ((st = place_mat(u, &m->tok_embd, "token_embd", -1, &w->tok_embd))) return st;
    if (m->output.data == m->tok_embd.data) w->output = w->tok_embd; /* tied embeddings */
    else if ((st = place_mat(u, &m->output, "output", -1, &w->output))) return st;
    if ((st = place_tvec(u, &m->output_norm, "output_norm", &w->output_norm))) return st;
    if ((st = place_vec(u, m->rope_freqs, SI_TYPE_F32, hp->rope_dim / 2, "rope_freqs",
                        &w->rope_freqs)))
        return st;
    for (int il = 0; il < hp->n_layer; il++) {
        const model_layer *L = &m->layers[il];
        dev_layer *D = &w->layers[il];
        if ((st = place_tvec(u, &L->attn_norm, "attn_norm", &D->attn_norm)) ||
            (st = place_tvec(u, &L->ffn_norm, "ffn_norm", &D->ffn_norm)) ||
            (st = place_tvec(u, &L->bq, "attn_q.bias", &D->bq)) ||
            (st = place_tvec(u, &L->bk, "attn_k.bias", &D->bk)) ||
            (st = place_tvec(u, &L->bv, "attn_v.bias", &D->bv)) ||
            (st = place_mat(u, &L->wq, "attn_q", il, &D->wq)) ||
            (st = place_mat(u, &L->wk, "attn_k", il, &D->wk)) ||
            (st = place_mat(u, &L->wv, "attn_v", il, &D->wv)) ||
            (st = place_mat(u, &L->wo, "attn_output", il, &D->wo)) ||
            (st = place_mat(u, &L->w_gate, "ffn_gate", il, &D->w_gate)) ||
            (st = place_mat(u, &L->w_up, "ffn_up", il, &D->w_up)) ||
            (st = place_mat(u, &L->w_down, "ffn_down", il, &D->w_down)))
            return st;
    }
    return SI_OK;
}

/* Device bytes the weights of m take (the sizing pass). */
static si_status weights_bytes(const si_model *m, size_t *bytes) {
    cuda_weights w = {0};
    if (!(w.layers = calloc((size_t)m->hp.n_layer, sizeof *w.layers)))
        return si_error(SI_ERR_NOMEM, "cuda: out of memory");
    upload u = {0};
    const si_status st = place_all(&u, m, &w);
    free(w.layers);
    *bytes = u.off;
    return st;
}

/* When the program started (its static constructors ran), for the "start to ready" time. */
static double g_t_start;
__attribute__((constructor)) static void record_start(void) { g_t_start = now_s(); }

static pthread_mutex_t g_weights_mu = PTHREAD_MUTEX_INITIALIZER;
static cuda_weights *g_weights; /* uploaded models, by si_model pointer */

static void weights_put(cuda_weights *w) {
    pthread_mutex_lock(&g_weights_mu);
    if (--w->refs == 0) {
        for (cuda_weights **pp = &g_weights; *pp; pp = &(*pp)->next)
            if (*pp == w) {
                *pp = w->next;
                break;
            }
        if (w->buf) CK(cudaFree(w->buf));
        free(w->layers);
        free(w);
    }
    pthread_mutex_unlock(&g_weights_mu);
}

static si_status weights_get(const si_model *m, cuda_weights **out) {
    pthread_mutex_lock(&g_weights_mu);
    for (cuda_weights *w = g_weights; w; w = w->next)
        if (w->m == m) {
            w->refs++;
            *out = w;
            pthread_mutex_unlock(&g_weights_mu);
            return SI_OK;
        }
    si_status st = SI_OK;
    cuda_weights *w = calloc(1, sizeof *w);
    if (!w || !(w->layers = calloc((size_t)m->hp.n_layer, sizeof *w->layers))) {
        free(w);
        pthread_mutex_unlock(&g_weights_mu);
        return si_error(SI_ERR_NOMEM, "cuda: out of memory");
    }
    w->m = m;
    w->refs = 1;
    upload u = {0};
    if ((st = place_all(&u, m, w))) goto fail;
    w->bytes = u.off;
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    if (cudaMalloc(&w->buf, w->bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        w->buf = NULL;
        st = si_error(SI_ERR_NOMEM, "cuda: the model does not fit: its weights need %.0f MiB "
                      "but the GPU has %.0f MiB free (of %.0f MiB); use a smaller type or "
                      "--device cpu", MiB(w->bytes), MiB(free_b), MiB(total_b));
        goto fail;
    }
    u = (upload){.base = w->buf, .total = w->bytes, .t0 = now_s()};
    if ((st = place_all(&u, m, w))) goto fail;
    progress(&u, true);
    const double dt = now_s() - u.t0;
    fprintf(stderr, "\ncuda: %.0f MiB of weights uploaded in %.2f s (%.1f GB/s)\n", MiB(w->bytes),
            dt, dt > 0 ? w->bytes / dt / 1e9 : 0.0);
    w->next = g_weights;
    g_weights = w;
    *out = w;
    pthread_mutex_unlock(&g_weights_mu);
    return SI_OK;
fail:
    if (w->buf) CK(cudaFree(w->buf));
    free(w->layers);
    free(w);
    pthread_mutex_unlock(&g_weights_mu);
    return st;
}

/* ---- per-state memory -------------------------------------------------------------------- */

typedef struct cuda_state {
    si_model *m;
    cuda_weights *w;
    backend_params p;
    int32_t max_blocks; /* block-table columns: ceil(max_kv / KV_BLOCK_SIZE) */
    cudaStream_t st;
    cuda_gemm_ctx *gemm;
    cuda_rope_params rope;
    cuda_attn_params attn;
    char device[256];
    /* the KV pool: f16 [n_layer][n_blocks][KV_BLOCK_SIZE][kv_dim], K then V */
    void *kv_buf;
    size_t kv_bytes, layer_elems;
    uint16_t *kc, *vc;
    /* per-step scratch, one allocation */
    void *scr_buf;
    size_t scr_bytes;
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2; /* [max_tokens][...] as forward.c */
    float *xo;     /* [max_seqs][n_embd] the rows that give logits */
    float *logits; /* [max_seqs][n_vocab] */
    void *gemm_scr, *attn_scr;
    int32_t *d_in;      /* the packed batch (layout: batch_layout) */
    int32_t *d_tok_bt;  /* [max_tokens][max_blocks] each token's sequence's block table */
    /* pinned host copies */
    int32_t *h_in;
    float *h_logits;    /* [max_seqs][n_vocab] */
    size_t in_ints;
    int32_t *out_seq;   /* [max_seqs] host: the sequence of each logits row */
} cuda_state;

/* The packed batch, in int32 units: token, pos, slot, kv_len, seq [max_tokens] each, out_row
 * [max_seqs], block_table [max_seqs][max_blocks]. */
typedef struct batch_layout {
    size_t token, pos, slot, kv_len, seq, out_row, bt, total;
} batch_layout;

static batch_layout layout_of(const backend_params *p, int32_t max_blocks) {
    batch_layout l;
    const size_t T = (size_t)p->max_tokens;
    l.token = 0;
    l.pos = T;
    l.slot = 2 * T;
    l.kv_len = 3 * T;
    l.seq = 4 * T;
    l.out_row = 5 * T;
    l.bt = l.out_row + (size_t)p->max_seqs;
    l.total = l.bt + (size_t)p->max_seqs * max_blocks;
    return l;
}

/* Scratch layout; with base NULL only sizes it. */
static size_t scratch_layout(cuda_state *c, const si_model *m, const backend_params *p,
                             int32_t max_blocks, uint8_t *base) {
    const model_hparams *hp = &m->hp;
    const size_t T = (size_t)p->max_tokens, S = (size_t)p->max_seqs;
    const size_t q_dim = (size_t)hp->n_head * hp->head_dim, kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    size_t off = 0;
#define TAKE(field, bytes)                                                                     \
    do {                                                                                       \
        if (base) c->field = (void *)(base + off);                                             \
        off += ALIGN_UP(bytes);                                                                \
    } while (0)
    TAKE(x, T * hp->n_embd * 4);
    TAKE(xb, T * hp->n_embd * 4);
    TAKE(q, T * q_dim * 4);
    TAKE(k, T * kv_dim * 4);
    TAKE(v, T * kv_dim * 4);
    TAKE(att, T * q_dim * 4);
    TAKE(hb, T * hp->n_ff * 4);
    TAKE(hb2, T * hp->n_ff * 4);
    TAKE(xo, S * hp->n_embd * 4);
    TAKE(logits, S * hp->n_vocab * 4);
    /* the GEMM's f16 copies of x and of a dequantised weight: the largest any matmul needs */
    size_t g = cuda_gemm_scratch_bytes(m->output.type, (int)m->output.n_rows,
                                       (int)m->output.n_cols, (int)S);
    for (int il = 0; il < hp->n_layer; il++) {
        const model_layer *L = &m->layers[il];
        const si_tensor *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up,
                                   &L->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
            const size_t n = cuda_gemm_scratch_bytes(mats[i]->type, (int)mats[i]->n_rows,
                                                     (int)mats[i]->n_cols, (int)T);
            if (n > g) g = n;
        }
    }
    TAKE(gemm_scr, g);
    const cuda_attn_params ap = {hp->n_head, hp->n_head_kv, hp->head_dim, max_blocks, 1.0f};
    TAKE(attn_scr, cuda_attention_scratch_bytes(&ap, (int)T, p->max_kv));
    TAKE(d_in, layout_of(p, max_blocks).total * 4);
    TAKE(d_tok_bt, T * max_blocks * 4);
#undef TAKE
    return off;
}

#define CUDA_RESERVE ((size_t)512 << 20) /* cuBLASLt workspace, context, fragmentation */

static si_status cuda_kv_blocks_for_fraction(const si_model *m, const backend_params *p,
                                             double fraction, size_t block_bytes,
                                             int64_t *n_blocks) {
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    size_t wbytes = 0;
    pthread_mutex_lock(&g_weights_mu);
    bool uploaded = false;
    for (cuda_weights *w = g_weights; w; w = w->next) uploaded |= w->m == m;
    pthread_mutex_unlock(&g_weights_mu);
    si_status st;
    if (!uploaded && (st = weights_bytes(m, &wbytes))) return st;
    const int32_t max_blocks = (p->max_kv + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE;
    const size_t scratch = scratch_layout(NULL, m, p, max_blocks, NULL) + CUDA_RESERVE;
    const double budget = fraction * (double)free_b;
    const double left = budget - (double)wbytes - (double)scratch;
    if (left < (double)block_bytes)
        return si_error(SI_ERR_NOMEM, "cuda: the model does not fit in %g of the GPU's free "
                        "memory (%.0f MiB of %.0f MiB free): weights %.0f MiB + scratch %.0f "
                        "MiB leave no room for one KV block (%.2f MiB); raise "
                        "--gpu-memory-fraction, lower --max-batched-tokens, or use a smaller "
                        "type", fraction, MiB(free_b), MiB(total_b), MiB(wbytes), MiB(scratch),
                        MiB(block_bytes));
    *n_blocks = (int64_t)(left / (double)block_bytes);
    return SI_OK;
}

static void cuda_free_state(void *state) {
    cuda_state *c = state;
    if (!c) return;
    if (c->st) CK(cudaStreamSynchronize(c->st));
    if (c->kv_buf) CK(cudaFree(c->kv_buf));
    if (c->scr_buf) CK(cudaFree(c->scr_buf));
    if (c->h_in) CK(cudaFreeHost(c->h_in));
    if (c->h_logits) CK(cudaFreeHost(c->h_logits));
    free(c->out_seq);
    if (c->gemm) cuda_gemm_free(c->gemm);
    if (c->st) CK(cudaStreamDestroy(c->st));
    if (c->w) weights_put(c->w);
    free(c);
}

static si_status cuda_create(si_model *m, const backend_params *p, void **state) {
    *state = NULL;
    const model_hparams *hp = &m->hp;
    const double t0 = now_s();
    if (hp->head_dim != 64 && hp->head_dim != 128 && hp->head_dim != 256)
        return si_error(SI_ERR_UNSUPPORTED, "cuda: head_dim %d is not supported by the CUDA "
                        "attention kernel (64, 128, 256); use --device cpu", hp->head_dim);
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv || hp->n_head / hp->n_head_kv > 8)
        return si_error(SI_ERR_UNSUPPORTED, "cuda: %d query heads over %d KV heads: the CUDA "
                        "attention kernel takes GQA groups of at most 8; use --device cpu",
                        hp->n_head, hp->n_head_kv);
    cuda_state *c = calloc(1, sizeof *c);
    if (!c) return si_error(SI_ERR_NOMEM, "cuda: out of memory");
    c->m = m;
    c->p = *p;
    c->max_blocks = (p->max_kv + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE;
    struct cudaDeviceProp prop;
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    snprintf(c->device, sizeof c->device, "%s", prop.name);
    si_status st;
    if ((st = weights_get(m, &c->w))) {
        free(c);
        return st;
    }
    CK(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
    if (cuda_gemm_create(&c->gemm) != 0) {
        cuda_free_state(c);
        return si_error(SI_ERR_INTERNAL, "cuda: cuBLASLt could not be initialised");
    }
    const int32_t kv_dim = hp->n_head_kv * hp->head_dim;
    c->layer_elems = (size_t)p->n_blocks * KV_BLOCK_SIZE * kv_dim;
    c->kv_bytes = 2 * (size_t)hp->n_layer * c->layer_elems * sizeof(uint16_t);
    c->scr_bytes = scratch_layout(c, m, p, c->max_blocks, NULL);
    const size_t in_ints = layout_of(p, c->max_blocks).total;
    c->in_ints = in_ints;
    if (!(c->out_seq = malloc((size_t)p->max_seqs * sizeof(int32_t)))) {
        cuda_free_state(c);
        return si_error(SI_ERR_NOMEM, "cuda: out of memory");
    }
    if (cudaMalloc(&c->kv_buf, c->kv_bytes) != cudaSuccess ||
        cudaMalloc(&c->scr_buf, c->scr_bytes) != cudaSuccess ||
        cudaMallocHost((void **)&c->h_in, in_ints * 4) != cudaSuccess ||
        cudaMallocHost((void **)&c->h_logits, (size_t)p->max_seqs * hp->n_vocab * 4) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        CK(cudaMemGetInfo(&free_b, &total_b));
        const size_t kvb = c->kv_bytes, sb = c->scr_bytes;
        cuda_free_state(c);
        return si_error(SI_ERR_NOMEM, "cuda: the KV pool (%d blocks, %.0f MiB) and scratch "
                        "(%.0f MiB for %d tokens) do not fit beside the weights: %.0f MiB free "
                        "of %.0f MiB; use fewer blocks (--kv-memory, --gpu-memory-fraction) or "
                        "--device cpu", p->n_blocks, MiB(kvb), MiB(sb), p->max_tokens,
                        MiB(free_b), MiB(total_b));
    }
    c->kc = c->kv_buf;
    c->vc = c->kc + (size_t)hp->n_layer * c->layer_elems;
    scratch_layout(c, m, p, c->max_blocks, c->scr_buf);
    c->rope = (cuda_rope_params){hp->n_head,     hp->n_head_kv,         hp->head_dim,
                                 hp->rope_dim,   hp->rope_freq_base,    hp->rope_freq_scale,
                                 c->w->rope_freqs, hp->rope == ROPE_NEOX};
    c->attn = (cuda_attn_params){hp->n_head, hp->n_head_kv, hp->head_dim, c->max_blocks,
                                 1.0f / sqrtf((float)hp->head_dim)};
    const double t1 = now_s();
    fprintf(stderr, "cuda: %s: KV pool %d blocks (%.0f MiB), scratch %.0f MiB for %d tokens; "
            "ready in %.2f s (%.2f s after program start)\n", c->device, p->n_blocks,
            MiB(c->kv_bytes), MiB(c->scr_bytes), p->max_tokens, t1 - t0, t1 - g_t_start);
    *state = c;
    return SI_OK;
}

/* ---- the forward pass -------------------------------------------------------------------- */

/* y[n][M] = x[n][K] W^T: GEMV for up to 8 rows (decode), cuBLASLt GEMM beyond (prefill). */
static void matmul(cuda_state *c, const dev_mat *w, const float *x, int n, float *y) {
    const int r = n <= 8 ? cuda_gemv(w->type, w->d, w->M, w->K, x, n, y, c->st)
                         : cuda_gemm(c->gemm, w->type, w->d, w->M, w->K, x, n, y, c->gemm_scr,
                                     c->st);
    SI_ASSERT(r == 0);
}

static void cuda_forward(void *state, const si_batch *b, float *logits) {
    cuda_state *c = state;
    const si_model *m = c->m;
    const model_hparams *hp = &m->hp;
    const cuda_weights *w = c->w;
    const int n = b->n_tokens, mb = b->max_blocks;
    const int dim = hp->n_embd, q_dim = hp->n_head * hp->head_dim;
    const int kv_dim = hp->n_head_kv * hp->head_dim, ff = hp->n_ff;
    const size_t nv = (size_t)hp->n_vocab;
    SI_ASSERT(n > 0 && n <= c->p.max_tokens && b->n_seqs > 0 && b->n_seqs <= c->p.max_seqs);
    SI_ASSERT(mb > 0 && mb <= c->max_blocks);

    /* pack the batch: per token its id, position, KV slot, attention length and sequence */
    const batch_layout L = layout_of(&c->p, c->max_blocks);
    int32_t *h = c->h_in;
    int max_kv_len = 1;
    for (int t = 0; t < n; t++) {
        const int32_t s = b->seq[t], pos = b->pos[t];
        SI_ASSERT(s >= 0 && s < b->n_seqs && pos >= 0 && pos < b->seq_len[s] &&
                  pos < c->p.max_kv && b->token[t] >= 0 && b->token[t] < hp->n_vocab);
        /* NOTE: keys are stored rotated; the engine refuses streaming requests on CUDA */
        SI_ASSERT(!b->rope_on_read || !b->rope_on_read[s]);
        const int32_t blk = b->block_table[(size_t)s * mb + pos / KV_BLOCK_SIZE];
        SI_ASSERT(blk >= 0 && blk < c->p.n_blocks);
        h[L.token + t] = b->token[t];
        h[L.pos + t] = pos;
        h[L.slot + t] = blk * KV_BLOCK_SIZE + pos % KV_BLOCK_SIZE;
        h[L.kv_len + t] = pos + 1;
        h[L.seq + t] = s;
        if (pos + 1 > max_kv_len) max_kv_len = pos + 1;
    }
    int n_out = 0;
    int32_t *out_seq = c->out_seq;
    for (int s = 0; s < b->n_seqs; s++) {
        if (b->logits_row[s] < 0) continue;
        SI_ASSERT(b->logits_row[s] < n && b->seq[b->logits_row[s]] == s);
        h[L.out_row + n_out] = b->logits_row[s];
        out_seq[n_out++] = s;
    }
    memcpy(h + L.bt, b->block_table, (size_t)b->n_seqs * mb * sizeof(int32_t));
    const size_t in_bytes = (L.bt + (size_t)b->n_seqs * mb) * sizeof(int32_t);
    cudaStream_t st = c->st;
    CK(cudaMemcpyAsync(c->d_in, h, in_bytes, cudaMemcpyHostToDevice, st));
    const int32_t *d_token = c->d_in + L.token, *d_pos = c->d_in + L.pos;
    const int32_t *d_slot = c->d_in + L.slot, *d_kv_len = c->d_in + L.kv_len;
    cuda_fwd_token_block_tables(c->d_tok_bt, c->d_in + L.bt, c->d_in + L.seq, n, mb, st);
    cuda_attn_params ap = c->attn;
    ap.max_blocks = mb;

    SI_ASSERT(cuda_get_rows(w->tok_embd.type, w->tok_embd.d, dim, d_token, n, c->x, st) == 0);
    for (int il = 0; il < hp->n_layer; il++) {
        const dev_layer *D = &w->layers[il];
        uint16_t *kc = c->kc + il * c->layer_elems, *vc = c->vc + il * c->layer_elems;

        /* attention block */
        SI_ASSERT(cuda_rmsnorm(c->xb, NULL, SI_TYPE_F16, c->x, D->attn_norm, dim, n,
                               hp->rms_eps, st) == 0);
        matmul(c, &D->wq, c->xb, n, c->q);
        matmul(c, &D->wk, c->xb, n, c->k);
        matmul(c, &D->wv, c->xb, n, c->v);
        if (D->bq) cuda_fwd_add_bias(c->q, D->bq, q_dim, n, st);
        if (D->bk) cuda_fwd_add_bias(c->k, D->bk, kv_dim, n, st);
        if (D->bv) cuda_fwd_add_bias(c->v, D->bv, kv_dim, n, st);
        cuda_rope_kv_write(c->q, q_dim, c->k, kv_dim, c->v, kv_dim, d_pos, d_slot, NULL, n, kc,
                           vc, &c->rope, st);
        /* NOTE: one query per token with KV length pos + 1 (causal within its sequence): the
         * decode kernel serves prefill too until the tensor-core prefill kernel exists */
        SI_ASSERT(cuda_attention_decode(c->att, c->q, q_dim, kc, vc, c->d_tok_bt, d_kv_len, n,
                                        max_kv_len, NULL, NULL, &ap, c->attn_scr, st) == 0);
        matmul(c, &D->wo, c->att, n, c->xb);
        cuda_add(c->x, c->xb, (int64_t)n * dim, st);

        /* feed-forward block: down(silu(gate(x)) * up(x)) */
        SI_ASSERT(cuda_rmsnorm(c->xb, NULL, SI_TYPE_F16, c->x, D->ffn_norm, dim, n,
                               hp->rms_eps, st) == 0);
        matmul(c, &D->w_gate, c->xb, n, c->hb);
        matmul(c, &D->w_up, c->xb, n, c->hb2);
        cuda_swiglu(c->hb, c->hb, c->hb2, (int64_t)n * ff, st);
        matmul(c, &D->w_down, c->hb, n, c->xb);
        cuda_add(c->x, c->xb, (int64_t)n * dim, st);
    }

    /* logits for the rows asked for: gather, final norm, one matmul, one copy back */
    if (n_out > 0) {
        cuda_fwd_gather_rows(c->xo, c->x, c->d_in + L.out_row, n_out, dim, st);
        SI_ASSERT(cuda_rmsnorm(c->xb, NULL, SI_TYPE_F16, c->xo, w->output_norm, dim, n_out,
                               hp->rms_eps, st) == 0);
        matmul(c, &w->output, c->xb, n_out, c->logits);
        CK(cudaMemcpyAsync(c->h_logits, c->logits, (size_t)n_out * nv * sizeof(float),
                           cudaMemcpyDeviceToHost, st));
    }
    CK(cudaStreamSynchronize(st));
    for (int i = 0; i < n_out; i++)
        memcpy(logits + (size_t)out_seq[i] * nv, c->h_logits + (size_t)i * nv, nv * sizeof(float));
}

static void cuda_stats(const void *state, backend_stats *out) {
    const cuda_state *c = state;
    *out = (backend_stats){c->device, c->w->bytes, c->kv_bytes, c->scr_bytes};
}

static const si_backend CUDA_BACKEND = {
    .name = "cuda",
    .rope_on_read = false,
    .create = cuda_create,
    .forward = cuda_forward,
    .stats = cuda_stats,
    .free = cuda_free_state,
    .kv_blocks_for_fraction = cuda_kv_blocks_for_fraction,
};

const si_backend *cuda_backend_table(void) { return &CUDA_BACKEND; }

int cuda_backend_device_count(void) {
    static int count = -1; /* NOTE: benign race: every thread computes the same value */
    if (count < 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            (void)cudaGetLastError();
            n = 0;
        }
        count = n;
    }
    return count;
}
