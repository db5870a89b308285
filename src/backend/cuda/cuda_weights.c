/* cuda_weights.c — a model's weights on the GPU (cuda_weights.h): two passes over the model's
 * tensors (sizing, then copying into one device allocation, with a progress bar), Wq/Wk/Wv and
 * gate/up of one type placed as one matrix each, norms and biases as f32, and a registry that
 * shares one upload among the CUDA states of the same model. */
#include "backend/cuda/cuda_weights.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops.h"
#include "core/error.h"
#include "quant/quant.h"

/* Two passes over the model's tensors: sizing (base NULL) then copying. */
typedef struct upload {
    uint8_t *base;
    size_t off, total, done, next_report;
    double t0;
} upload;

double cuda_now_s(void) {
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
        CUDA_CHECK(cudaMemcpy((uint8_t *)dst + o, (const uint8_t *)src + o, n,
                              cudaMemcpyHostToDevice));
        u->done += n;
        progress(u, false);
    }
}

bool cuda_weights_fusable(const si_tensor *a, const si_tensor *b) {
    return a->type == b->type && a->n_cols == b->n_cols;
}

int64_t cuda_weights_qk_rows(const model_layer *L) {
    if (!cuda_weights_fusable(&L->wq, &L->wk)) return 0;
    return L->wq.n_rows + L->wk.n_rows + (cuda_weights_fusable(&L->wq, &L->wv) ? L->wv.n_rows : 0);
}

/* The rows of parts[0..n_parts) (one type and row length) one after another, as one matrix. */
static si_status place_rows(upload *u, const si_tensor *const *parts, int n_parts,
                            const char *name, int layer, dev_mat *out) {
    const si_tensor *t = parts[0];
    int64_t rows = 0;
    for (int i = 0; i < n_parts; i++) rows += parts[i]->n_rows;
    const size_t bytes = cuda_weight_alloc_bytes(t->type, rows, t->n_cols);
    for (int i = 0; i < n_parts; i++)
        if (!bytes || !parts[i]->data)
            return si_error(SI_ERR_UNSUPPORTED,
                            "cuda: tensor %s (layer %d) has type %s, which "
                            "the CUDA kernels do not support (F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                            "Q5_1, Q2_K-Q6_K, IQ4_NL, IQ4_XS); use --device cpu",
                            name, layer, si_type_name(t->type) ? si_type_name(t->type) : "?");
    *out = (dev_mat){NULL, t->type, (int)rows, (int)t->n_cols};
    if (u->base) {
        out->d = u->base + u->off;
        size_t o = 0;
        for (int i = 0; i < n_parts; i++) {
            const size_t pb = quant_row_size(t->type, t->n_cols) * parts[i]->n_rows;
            upload_bytes(u, u->base + u->off + o, parts[i]->data, pb);
            o += pb;
        }
    }
    u->off += ALIGN_UP(bytes);
    return SI_OK;
}

static si_status place_mat(upload *u, const si_tensor *t, const char *name, int layer,
                           dev_mat *out) {
    return place_rows(u, &t, 1, name, layer, out);
}

/* n values of `type` as f32 into dst. */
static si_status vec_to_f32(const void *data, si_type type, int64_t n, const char *name,
                            float *dst) {
    if (type == SI_TYPE_F32) {
        memcpy(dst, data, (size_t)n * sizeof(float));
        return SI_OK;
    }
    const quant_traits *q = quant_get(type);
    if (!q || n % q->block_size)
        return si_error(SI_ERR_UNSUPPORTED, "cuda: vector %s has unsupported type %d", name,
                        (int)type);
    q->to_float(data, dst, n);
    return SI_OK;
}

/* Places n f32 values (host, already converted) on the device at the next offset: *out points
 * there. The sizing pass (no base) only advances the offset. */
static void place_f32(upload *u, const float *host, int64_t n, const float **out) {
    if (u->base) {
        *out = (const float *)(u->base + u->off);
        upload_bytes(u, u->base + u->off, host, (size_t)n * sizeof(float));
    }
    u->off += ALIGN_UP((size_t)n * sizeof(float));
}

/* A vector (norm weights, RoPE factors) as f32, whatever its stored type. */
static si_status place_vec(upload *u, const void *data, si_type type, int64_t n, const char *name,
                           const float **out) {
    *out = NULL;
    if (!data) return SI_OK;
    if (u->base) {
        float *tmp = malloc((size_t)n * sizeof(float));
        if (!tmp) return si_error(SI_ERR_NOMEM, "cuda: out of memory converting %s", name);
        const si_status st = vec_to_f32(data, type, n, name, tmp);
        if (!st) place_f32(u, tmp, n, out);
        free(tmp);
        return st;
    }
    place_f32(u, NULL, n, out);
    return SI_OK;
}

static si_status place_tvec(upload *u, const si_tensor *t, const char *name, const float **out) {
    return place_vec(u, t->data, t->type, t->n_cols * t->n_rows, name, out);
}

/* qwen2's Q, K and V biases as one f32 vector [bq | bk | bv] matching the fused rows (a missing
 * one is zeros); NULL when the layer has none. */
static si_status place_qkv_bias(upload *u, const model_layer *L, int64_t q_dim, int64_t kv_dim,
                                int layer, const float **out) {
    const si_tensor *b[3] = {&L->bq, &L->bk, &L->bv};
    const int64_t len[3] = {q_dim, kv_dim, kv_dim};
    const char *names[3] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
    *out = NULL;
    if (!b[0]->data && !b[1]->data && !b[2]->data) return SI_OK;
    for (int i = 0; i < 3; i++)
        if (b[i]->data && b[i]->n_cols * b[i]->n_rows != len[i])
            return si_error(SI_ERR_INVALID_ARG, "cuda: %s (layer %d) has %lld values, not %lld",
                            names[i], layer, (long long)(b[i]->n_cols * b[i]->n_rows),
                            (long long)len[i]);
    const int64_t n = q_dim + 2 * kv_dim;
    if (u->base) {
        float *tmp = calloc((size_t)n, sizeof(float));
        if (!tmp) return si_error(SI_ERR_NOMEM, "cuda: out of memory converting biases");
        si_status st = SI_OK;
        for (int i = 0, o = 0; i < 3 && !st; o += (int)len[i], i++)
            if (b[i]->data) st = vec_to_f32(b[i]->data, b[i]->type, len[i], names[i], tmp + o);
        if (!st) place_f32(u, tmp, n, out);
        free(tmp);
        return st;
    }
    place_f32(u, NULL, n, out);
    return SI_OK;
}

static si_status place_layer(upload *u, const model_hparams *hp, const model_layer *L, int il,
                             dev_layer *D) {
    const int64_t q_dim = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    const si_tensor *qkv[3] = {&L->wq, &L->wk, &L->wv}, *gu[2] = {&L->w_gate, &L->w_up};
    const bool qk = cuda_weights_qk_rows(L) > 0;
    D->qkv_fused = qk && cuda_weights_fusable(&L->wq, &L->wv);
    D->qk_fused = qk && !D->qkv_fused;
    /* fused gate/up: one matmul, then the row-wise SwiGLU (four elements a thread) */
    D->gate_up_fused = cuda_weights_fusable(&L->w_gate, &L->w_up) && hp->n_ff % 4 == 0;
    si_status st;
    if ((st = place_tvec(u, &L->attn_norm, "attn_norm", &D->attn_norm)) ||
        (st = place_tvec(u, &L->ffn_norm, "ffn_norm", &D->ffn_norm)) ||
        (st = place_qkv_bias(u, L, q_dim, kv_dim, il, &D->b_qkv)))
        return st;
    if (D->qkv_fused) st = place_rows(u, qkv, 3, "attn_q/k/v", il, &D->wqkv);
    else if (D->qk_fused)
        st = place_rows(u, qkv, 2, "attn_q/k", il, &D->wqkv);
    else if (!(st = place_mat(u, &L->wq, "attn_q", il, &D->wq)))
        st = place_mat(u, &L->wk, "attn_k", il, &D->wk);
    if (!st && !D->qkv_fused) st = place_mat(u, &L->wv, "attn_v", il, &D->wv);
    if (st || (st = place_mat(u, &L->wo, "attn_output", il, &D->wo))) return st;
    if (D->gate_up_fused) st = place_rows(u, gu, 2, "ffn_gate/up", il, &D->w_gate_up);
    else if (!(st = place_mat(u, &L->w_gate, "ffn_gate", il, &D->w_gate)))
        st = place_mat(u, &L->w_up, "ffn_up", il, &D->w_up);
    if (st) return st;
    return place_mat(u, &L->w_down, "ffn_down", il, &D->w_down);
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
    for (int il = 0; il < hp->n_layer; il++)
        if ((st = place_layer(u, hp, &m->layers[il], il, &w->layers[il]))) return st;
    return SI_OK;
}

static double g_t_start;
__attribute__((constructor)) static void record_start(void) { g_t_start = cuda_now_s(); }

double cuda_program_start_s(void) { return g_t_start; }

static pthread_mutex_t g_weights_mu = PTHREAD_MUTEX_INITIALIZER;
static cuda_weights *g_weights; /* uploaded models, by si_model pointer */

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

si_status cuda_weights_bytes_to_upload(const si_model *m, size_t *bytes) {
    pthread_mutex_lock(&g_weights_mu);
    bool uploaded = false;
    for (cuda_weights *w = g_weights; w; w = w->next) uploaded |= w->m == m;
    pthread_mutex_unlock(&g_weights_mu);
    *bytes = 0;
    return uploaded ? SI_OK : weights_bytes(m, bytes);
}

void cuda_weights_put(cuda_weights *w) {
    pthread_mutex_lock(&g_weights_mu);
    if (--w->refs == 0) {
        for (cuda_weights **pp = &g_weights; *pp; pp = &(*pp)->next)
            if (*pp == w) {
                *pp = w->next;
                break;
            }
        if (w->buf) CUDA_CHECK(cudaFree(w->buf));
        free(w->layers);
        free(w);
    }
    pthread_mutex_unlock(&g_weights_mu);
}

si_status cuda_weights_get(const si_model *m, cuda_weights **out) {
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
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (cudaMalloc(&w->buf, w->bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        w->buf = NULL;
        st = si_error(SI_ERR_NOMEM, "cuda: the model does not fit: its weights need %.0f MiB "
                      "but the GPU has %.0f MiB free (of %.0f MiB); use a smaller type or "
                      "--device cpu", MiB(w->bytes), MiB(free_b), MiB(total_b));
        goto fail;
    }
    u = (upload){.base = w->buf, .total = w->bytes, .t0 = cuda_now_s()};
    if ((st = place_all(&u, m, w))) goto fail;
    /* NOTE: a cudaMemcpy from pageable memory may return before its DMA lands, and the states'
     * streams do not wait for the legacy stream: wait here, once */
    CUDA_CHECK(cudaDeviceSynchronize());
    progress(&u, true);
    const double dt = cuda_now_s() - u.t0;
    fprintf(stderr, "\ncuda: %.0f MiB of weights uploaded in %.2f s (%.1f GB/s)\n", MiB(w->bytes),
            dt, dt > 0 ? w->bytes / dt / 1e9 : 0.0);
    w->next = g_weights;
    g_weights = w;
    *out = w;
    pthread_mutex_unlock(&g_weights_mu);
    return SI_OK;
fail:
    if (w->buf) CUDA_CHECK(cudaFree(w->buf));
    free(w->layers);
    free(w);
    pthread_mutex_unlock(&g_weights_mu);
    return st;
}

