/* cuda_backend.c — the CUDA backend table (backend/backend.h): the whole llama-family forward
 * pass on one GPU.
 *
 * At create: the weights are uploaded once (cuda_weights.c: one device allocation shared by all
 * states of the same model), the paged KV pool gets one allocation, the per-step scratch
 * one more (all sized for the largest batch). The KV pool holds f16 by default, or FP8 E4M3
 * (backend_params.kv_dtype SI_KV_FP8_E4M3, vLLM's --kv-cache-dtype fp8): one byte per element,
 * scale 1, written by the RoPE kernel with round-to-nearest-even and saturation to +-448 and
 * widened exactly by the attention kernels as they read it (kv_elem.cuh); the layout is the same
 * in elements, so block ids, block tables and slots mean the same for both. Per step:
 * the batch's index arrays go over in one packed cudaMemcpyAsync, then the forward pass runs as
 * a flat list of kernel launches mirroring src/model/forward.c, and only the logits rows come
 * back.
 *
 * Decode steps (one token per sequence) run as CUDA graphs (cuda_graphs.c): the batch is padded
 * to a bucket and the whole forward pass replays as one launch; steps with more tokens per
 * sequence run eagerly with the prefill attention. Wq/Wk/Wv of one type are uploaded as one
 * matrix and so are gate/up, so each is one matmul. forward_sample samples on the GPU
 * (sample.cu) and brings back only the chosen ids. Streaming (attention-sink) sequences store
 * their keys un-rotated and attention rotates them by slot when it reads them (rope_on_read).
 *
 * NOTE: written in C, not CUDA C++: it includes the model's C11 headers; the kernels are
 * behind the C launchers of cuda_ops.h, cuda_fwd.h and cuda_sample.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_bandwidth.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_fwd.h"
#include "backend/cuda/cuda_graphs.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_sample.h"
#include "backend/cuda/cuda_weights.h"
#include "core/error.h"
#include "model/kv_cache.h"
#include "quant/quant.h"


/* ---- per-state memory -------------------------------------------------------------------- */

/* Profiling knob, never for results: SI_CUDA_STEP_TIMING=1 times every decode step (one token
 * per sequence) on the GPU (events around its copies and kernels), in the backend call (host
 * clock) and from its start to the next step's start when that has as many tokens, and prints
 * the means when the state is freed: for one-token steps and for the most frequent batched size.
 * Against the GPU time, the start-to-start time says how long the GPU idles between steps while
 * the host works (the engine's scheduling, sampling, events). */
#define STEP_TIMING_MAX_N 256
typedef struct step_sums {
    long steps, cycles;
    double gpu_ms, call_s, cycle_s;
    double worst_s[3]; /* the longest host times in the step, longest first */
    long worst_at[3];  /* their step numbers (0: the first step of this size) */
} step_sums;

typedef struct step_timing {
    bool on, open;
    cudaEvent_t begin, end;
    int n_tokens, prev_n;
    double t0, prev_t0;
    step_sums by_n[STEP_TIMING_MAX_N + 1]; /* [n_tokens], the last for all larger */
} step_timing;

typedef struct cuda_state {
    si_model *m;
    cuda_weights *w;
    backend_params p;
    int32_t max_blocks; /* block-table columns: ceil(max_kv / KV_BLOCK_SIZE) */
    cudaStream_t st;
    cuda_gemm_ctx *gemm;
    cuda_graphs *graphs; /* decode-step graphs, or NULL (SI_CUDA_GRAPHS=0) */
    cuda_rope_params rope;
    cuda_attn_params attn;
    char device[256];
    /* the KV pool: [n_layer][n_blocks][KV_BLOCK_SIZE][kv_dim] elements of p.kv_dtype (f16 or
     * FP8 E4M3: kv_elem bytes each), K then V; kc/vc: layer 0's K and V */
    void *kv_buf;
    size_t kv_bytes, layer_elems, kv_elem;
    uint8_t *kc, *vc;
    /* per-step scratch, one allocation; [max_tokens][...] rows as forward.c */
    void *scr_buf;
    size_t scr_bytes;
    /* x: the residual stream, x_main's rows; a batch-1 GEMV with the norm inside
     * (NORMED_IN_GEMV) writes the sum it adds to x_alt instead (the other CTAs still read x),
     * and the two swap; forward_launches starts each step at x_main */
    float *x, *x_alt, *x_main, *x_row;
    float *xb, *att;
    float *qkv; /* rows [q | k | v] (fused), or blocks q, k, v (see qkv_of) */
    float *ffn; /* rows [gate | up] (fused), or blocks gate, up */
    float *act; /* silu(gate) * up, the input of w_down */
    void *xq8;  /* [GEMV_WIDE_ROWS_MAX] rows of xb or act quantised for the GEMVs (pre_quant) */
    float *xo;     /* [max_seqs][n_embd] the rows that give logits */
    float *logits; /* [max_seqs][n_vocab] */
    void *gemm_scr, *attn_scr;
    int32_t *d_in;                /* the packed batch (layout: batch_layout) */
    cuda_sample_params *d_smp;    /* [max_seqs] per logits row: in d_in (batch_layout.smp) */
    int32_t *d_ids;               /* [max_seqs] sampled ids */
    cuda_logprobs *d_lp;          /* [max_seqs] their logprobs, for the rows that ask */
    float *d_adj_saved;           /* [max_seqs * ADJ_MAX] adjusted logits' raw values */
    /* the step's logit biases and penalty pairs: at d_in + adj_start (batch_layout), adj_rows
     * rows have some */
    size_t adj_start;
    int adj_rows;
    /* pinned host copies, two of the packed batch and of the ids: one per step begun ahead
     * (sample_begin), slot 0 for the steps that end in their call */
    int32_t *h_in_buf;         /* [2][in_ints] */
    int32_t *h_in;             /* the slot being packed */
    size_t in_ints;            /* layout_of(...).total */
    float *h_logits;           /* [max_seqs][n_vocab]: forward's, or the caller's rows */
    cuda_logprobs *h_lp;       /* [max_seqs] forward_sample's logprobs */
    int32_t *h_ids;            /* [2][max_seqs] */
    int32_t *out_seq; /* [max_seqs] host: the sequence of each logits row */
    /* steps begun and not ended (sample_begin / sample_end): how many, the oldest's slot, the
     * next one's, and each slot's event after its id's copy */
    int ahead_begun, ahead_oldest, ahead_next;
    cudaEvent_t ahead_done[2];
    step_timing timing;
} cuda_state;

static void step_timing_begin(step_timing *t, const si_batch *b, cudaStream_t st) {
    t->open = t->on && b->n_tokens == b->n_seqs;
    if (!t->open) {
        t->prev_n = 0;
        return;
    }
    t->n_tokens = b->n_tokens < STEP_TIMING_MAX_N ? b->n_tokens : STEP_TIMING_MAX_N;
    t->t0 = cuda_now_s();
    if (t->prev_n == t->n_tokens) {
        t->by_n[t->n_tokens].cycle_s += t->t0 - t->prev_t0;
        t->by_n[t->n_tokens].cycles++;
    }
    t->prev_n = t->n_tokens;
    t->prev_t0 = t->t0;
    CUDA_CHECK(cudaEventRecord(t->begin, st));
}

/* after the step's last asynchronous operation: records its end, synchronises, accumulates */
static void step_timing_end(step_timing *t, cudaStream_t st) {
    if (!t->open) return;
    CUDA_CHECK(cudaEventRecord(t->end, st));
    CUDA_CHECK(cudaEventSynchronize(t->end));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, t->begin, t->end));
    step_sums *s = &t->by_n[t->n_tokens];
    const double call = cuda_now_s() - t->t0;
    s->gpu_ms += ms;
    s->call_s += call;
    for (int i = 0; i < 3; i++) /* keep the three longest, in order */
        if (s->steps < i + 1 || call > s->worst_s[i]) {
            for (int j = 2; j > i; j--) {
                s->worst_s[j] = s->worst_s[j - 1];
                s->worst_at[j] = s->worst_at[j - 1];
            }
            s->worst_s[i] = call;
            s->worst_at[i] = s->steps;
            break;
        }
    s->steps++;
}

static void step_sums_report(int n, const step_sums *s) {
    if (!s->steps) return;
    fprintf(stderr, "cuda step timing: %ld decode steps of %d token(s), mean GPU %.1f us, mean "
            "host time in the step %.1f us", s->steps, n, 1e3 * s->gpu_ms / s->steps,
            1e6 * s->call_s / s->steps);
    if (s->cycles) fprintf(stderr, ", start to next start %.1f us", 1e6 * s->cycle_s / s->cycles);
    fprintf(stderr, "; longest:");
    for (int i = 0; i < 3 && i < s->steps; i++)
        fprintf(stderr, " %.1f us (step %ld)", 1e6 * s->worst_s[i], s->worst_at[i]);
    fprintf(stderr, "\n");
}

static void step_timing_report(const step_timing *t) {
    if (!t->on) return;
    int most = 2;
    for (int n = 2; n <= STEP_TIMING_MAX_N; n++)
        if (t->by_n[n].steps > t->by_n[most].steps) most = n;
    step_sums_report(1, &t->by_n[1]);
    step_sums_report(most, &t->by_n[most]);
    CUDA_CHECK(cudaEventDestroy(t->begin));
    CUDA_CHECK(cudaEventDestroy(t->end));
}

/* Logit adjustments a logits row may bring: penalty pairs and logit biases */
#define ADJ_MAX (BACKEND_PEN_MAX + SI_MAX_LOGIT_BIAS)

/* The packed batch, in int32 units: token, pos, slot, kv_len, seq [max_tokens] each, out_row
 * [max_seqs], k_unrot (bytes) [max_tokens], row_ror (bytes), the logits rows' sampling
 * parameters (cuda_sample_params [max_seqs], 8-byte aligned), block tables [rows][bt_stride]
 * for the attention rows (tokens in a decode step, sequences otherwise; at most
 * max(max_tokens, max_seqs) rows of at most max_blocks columns), then, right after the rows a
 * step has, its logits rows' adjustments: penalty pairs (token, count) and logit biases (token,
 * float bits), at most ADJ_MAX a row. The variable parts come last so that a step copies only
 * what it has; one copy takes all of it. */
typedef struct batch_layout {
    size_t token, pos, slot, kv_len, seq, out_row, k_unrot, row_ror, smp, bt, total;
} batch_layout;

static batch_layout layout_of(const backend_params *p, int32_t max_blocks) {
    batch_layout l;
    const size_t T = (size_t)p->max_tokens, S = (size_t)p->max_seqs, R = T > S ? T : S;
    l.token = 0;
    l.pos = T;
    l.slot = 2 * T;
    l.kv_len = 3 * T;
    l.seq = 4 * T;
    l.out_row = 5 * T;
    l.k_unrot = l.out_row + S;
    l.row_ror = l.k_unrot + (T + 3) / 4;
    l.smp = (l.row_ror + (R + 3) / 4 + 1) / 2 * 2;
    l.bt = l.smp + S * (sizeof(cuda_sample_params) / sizeof(int32_t));
    /* the second slot stays 8-byte aligned */
    l.total = (l.bt + R * max_blocks + S * ADJ_MAX * 2 + 1) / 2 * 2;
    return l;
}

/* Floats between the blocks of an unfused Q/K/V or gate/up split: keeps each block 256-byte
 * aligned, as cuBLASLt's outputs prefer. */
#define SPLIT_PAD 64
static size_t split_at(size_t n_floats) {
    return (n_floats + SPLIT_PAD - 1) / SPLIT_PAD * SPLIT_PAD;
}

static size_t gemm_need(const si_tensor *t, int64_t rows, size_t T) {
    return cuda_gemm_scratch_bytes(t->type, (int)rows, (int)t->n_cols, (int)T);
}

/* Scratch layout; with base NULL only sizes it. */
static size_t scratch_layout(cuda_state *c, const si_model *m, const backend_params *p,
                             int32_t max_blocks, uint8_t *base) {
    const model_hparams *hp = &m->hp;
    const size_t T = (size_t)p->max_tokens, S = (size_t)p->max_seqs;
    const size_t q_dim = (size_t)hp->n_head * hp->head_dim;
    const size_t kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t ff = (size_t)hp->n_ff;
    size_t off = 0;
#define TAKE(field, bytes)                                                                     \
    do {                                                                                       \
        if (base) c->field = (void *)(base + off);                                             \
        off += ALIGN_UP(bytes);                                                                \
    } while (0)
    TAKE(x_main, T * hp->n_embd * 4);
    TAKE(x_row, hp->n_embd * 4);
    TAKE(xb, T * hp->n_embd * 4);
    TAKE(qkv, (T * (q_dim + 2 * kv_dim) + 2 * SPLIT_PAD) * 4);
    TAKE(att, T * q_dim * 4);
    TAKE(ffn, (T * 2 * ff + SPLIT_PAD) * 4);
    TAKE(act, T * ff * 4);
    {
        /* rows of the norms' outputs, SwiGLU's, or attention's (the output projection's x) */
        size_t kmax = (size_t)(hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff);
        if ((size_t)q_dim > kmax) kmax = (size_t)q_dim;
        TAKE(xq8, GEMV_WIDE_ROWS_MAX * CUDA_Q8X_ROW_BYTES(kmax));
    }
    TAKE(xo, S * hp->n_embd * 4);
    TAKE(logits, S * hp->n_vocab * 4);
    /* the GEMM's f16 copies of x and of a dequantised weight: the largest any matmul needs */
    size_t g = gemm_need(&m->output, m->output.n_rows, S);
    for (int il = 0; il < hp->n_layer; il++) {
        const model_layer *L = &m->layers[il];
        const si_tensor *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up,
                                   &L->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
            const size_t n = gemm_need(mats[i], mats[i]->n_rows, T);
            if (n > g) g = n;
        }
        const int64_t qk_rows = cuda_weights_qk_rows(L);
        const size_t nq = gemm_need(&L->wq, qk_rows, T);
        const size_t ng = gemm_need(&L->w_gate, 2 * (int64_t)ff, T);
        if (qk_rows && nq > g) g = nq;
        if (cuda_weights_fusable(&L->w_gate, &L->w_up) && ng > g) g = ng;
    }
    TAKE(gemm_scr, g);
    const cuda_attn_params ap = {hp->n_head, hp->n_head_kv, hp->head_dim, max_blocks, 1.0f,
                                 p->kv_dtype};
    const size_t a_dec = cuda_attention_scratch_bytes(&ap, (int)T, p->max_kv);
    const size_t a_pre = cuda_attention_prefill_scratch_bytes(&ap, (int)T, (int)S);
    TAKE(attn_scr, a_dec > a_pre ? a_dec : a_pre);
    TAKE(d_in, layout_of(p, max_blocks).total * 4);
    TAKE(d_ids, S * 4);
    TAKE(d_lp, S * sizeof(cuda_logprobs));
    TAKE(d_adj_saved, S * ADJ_MAX * 4);
#undef TAKE
    if (base) {
        c->x = c->x_main;
        c->x_alt = c->x_row;
    }
    return off;
}

#define CUDA_RESERVE ((size_t)512 << 20) /* cuBLASLt workspace, context, fragmentation */

static si_status cuda_kv_blocks_for_fraction(const si_model *m, const backend_params *p,
                                             double fraction, size_t block_bytes,
                                             int64_t *n_blocks) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    size_t wbytes = 0;
    si_status st;
    if ((st = cuda_weights_bytes_to_upload(m, &wbytes))) return st;
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
    if (c->st) CUDA_CHECK(cudaStreamSynchronize(c->st));
    step_timing_report(&c->timing);
    if (c->kv_buf) CUDA_CHECK(cudaFree(c->kv_buf));
    if (c->scr_buf) CUDA_CHECK(cudaFree(c->scr_buf));
    if (c->h_in_buf) CUDA_CHECK(cudaFreeHost(c->h_in_buf));
    for (int i = 0; i < 2; i++)
        if (c->ahead_done[i]) CUDA_CHECK(cudaEventDestroy(c->ahead_done[i]));
    if (c->h_logits) CUDA_CHECK(cudaFreeHost(c->h_logits));
    if (c->h_lp) CUDA_CHECK(cudaFreeHost(c->h_lp));
    if (c->h_ids) CUDA_CHECK(cudaFreeHost(c->h_ids));
    free(c->out_seq);
    cuda_graphs_free(c->graphs);
    if (c->gemm) cuda_gemm_free(c->gemm);
    if (c->st) CUDA_CHECK(cudaStreamDestroy(c->st));
    if (c->w) cuda_weights_put(c->w);
    free(c);
}

static int warm_decode(cuda_state *c, int *n_graphs);

static si_status cuda_create(si_model *m, const backend_params *p, void **state) {
    *state = NULL;
    const model_hparams *hp = &m->hp;
    const double t0 = cuda_now_s();
    if (hp->head_dim != 64 && hp->head_dim != 128 && hp->head_dim != 256)
        return si_error(SI_ERR_UNSUPPORTED, "cuda: head_dim %d is not supported by the CUDA "
                        "attention kernel (64, 128, 256); use --device cpu", hp->head_dim);
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv || hp->n_head / hp->n_head_kv > 8)
        return si_error(SI_ERR_UNSUPPORTED, "cuda: %d query heads over %d KV heads: the CUDA "
                        "attention kernel takes GQA groups of at most 8; use --device cpu",
                        hp->n_head, hp->n_head_kv);
    if (p->kv_dtype != SI_KV_F16 && p->kv_dtype != SI_KV_FP8_E4M3)
        return si_error(SI_ERR_INVALID_ARG, "cuda: KV cache dtype %d is neither f16 nor fp8",
                        p->kv_dtype);
    cuda_state *c = calloc(1, sizeof *c);
    if (!c) return si_error(SI_ERR_NOMEM, "cuda: out of memory");
    c->m = m;
    c->p = *p;
    c->max_blocks = (p->max_kv + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE;
    struct cudaDeviceProp prop;
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    snprintf(c->device, sizeof c->device, "%s", prop.name);
    si_status st;
    if ((st = cuda_weights_get(m, &c->w))) {
        free(c);
        return st;
    }
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
    c->timing.on = getenv("SI_CUDA_STEP_TIMING") && atoi(getenv("SI_CUDA_STEP_TIMING")) == 1;
    if (c->timing.on) {
        CUDA_CHECK(cudaEventCreate(&c->timing.begin));
        CUDA_CHECK(cudaEventCreate(&c->timing.end));
    }
    if (cuda_gemm_create(&c->gemm) != 0) {
        cuda_free_state(c);
        return si_error(SI_ERR_INTERNAL, "cuda: cuBLASLt could not be initialised");
    }
    const int32_t kv_dim = hp->n_head_kv * hp->head_dim;
    c->layer_elems = (size_t)p->n_blocks * KV_BLOCK_SIZE * kv_dim;
    c->kv_elem = p->kv_dtype == SI_KV_FP8_E4M3 ? 1 : 2;
    c->kv_bytes = 2 * (size_t)hp->n_layer * c->layer_elems * c->kv_elem;
    c->scr_bytes = scratch_layout(c, m, p, c->max_blocks, NULL);
    c->in_ints = layout_of(p, c->max_blocks).total;
    for (int i = 0; i < 2; i++)
        CUDA_CHECK(cudaEventCreateWithFlags(&c->ahead_done[i], cudaEventDisableTiming));
    if (!(c->out_seq = malloc((size_t)p->max_seqs * sizeof(int32_t)))) {
        cuda_free_state(c);
        return si_error(SI_ERR_NOMEM, "cuda: out of memory");
    }
    if (cudaMalloc(&c->kv_buf, c->kv_bytes) != cudaSuccess ||
        cudaMalloc(&c->scr_buf, c->scr_bytes) != cudaSuccess ||
        cudaMallocHost((void **)&c->h_in_buf, 2 * c->in_ints * 4) != cudaSuccess ||
        cudaMallocHost((void **)&c->h_logits, (size_t)p->max_seqs * hp->n_vocab * 4) !=
            cudaSuccess ||
        cudaMallocHost((void **)&c->h_lp, (size_t)p->max_seqs * sizeof *c->h_lp) != cudaSuccess ||
        cudaMallocHost((void **)&c->h_ids, 2 * (size_t)p->max_seqs * sizeof *c->h_ids) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        const size_t kvb = c->kv_bytes, sb = c->scr_bytes;
        cuda_free_state(c);
        return si_error(SI_ERR_NOMEM, "cuda: the KV pool (%d blocks, %.0f MiB) and scratch "
                        "(%.0f MiB for %d tokens) do not fit beside the weights: %.0f MiB free "
                        "of %.0f MiB; use fewer blocks (--kv-memory, --gpu-memory-fraction) or "
                        "--device cpu", p->n_blocks, MiB(kvb), MiB(sb), p->max_tokens,
                        MiB(free_b), MiB(total_b));
    }
    /* NOTE: zeroed once so that the padding rows of a graphed step, which read block 0, see
     * finite values (their results are never used, but NaN/Inf there would be confusing) */
    CUDA_CHECK(cudaMemsetAsync(c->kv_buf, 0, c->kv_bytes, c->st)); /* ordered before every step */
    c->h_in = c->h_in_buf;
    c->kc = c->kv_buf;
    c->vc = c->kc + (size_t)hp->n_layer * c->layer_elems * c->kv_elem;
    scratch_layout(c, m, p, c->max_blocks, c->scr_buf);
    c->d_smp = (cuda_sample_params *)(c->d_in + layout_of(p, c->max_blocks).smp);
    c->graphs = cuda_graphs_create(p->max_seqs < p->max_tokens ? p->max_seqs : p->max_tokens,
                                   p->max_kv);
    c->rope = (cuda_rope_params){hp->n_head,       hp->n_head_kv,         hp->head_dim,
                                 hp->rope_dim,     hp->rope_freq_base,    hp->rope_freq_scale,
                                 c->w->rope_freqs, hp->rope == ROPE_NEOX, p->kv_dtype};
    c->attn = (cuda_attn_params){
        hp->n_head, hp->n_head_kv, hp->head_dim, c->max_blocks, 1.0f / sqrtf((float)hp->head_dim),
        p->kv_dtype};
    const double tw = cuda_now_s();
    int n_graphs;
    const int warmed = warm_decode(c, &n_graphs);
    const double t1 = cuda_now_s();
    if (warmed)
        fprintf(stderr, "cuda: decode kernels loaded for batches of 1-%d rows, %d step graphs "
                "captured, in %.2f s\n", warmed, n_graphs, t1 - tw);
    fprintf(stderr, "cuda: %s: KV pool %d blocks (%.0f MiB, %s), scratch %.0f MiB for %d tokens; "
            "ready in %.2f s (%.2f s after program start)\n", c->device, p->n_blocks,
            MiB(c->kv_bytes), c->kv_elem == 1 ? "fp8_e4m3" : "f16", MiB(c->scr_bytes), p->max_tokens, t1 - t0, t1 - cuda_program_start_s());
    *state = c;
    return SI_OK;
}

/* ---- the forward pass -------------------------------------------------------------------- */

/* What one step launches: every kernel's grid depends on these only, so that a decode step's
 * launches can be captured once per bucket and replayed. */
typedef struct step_shape {
    int n_tokens;   /* rows through the layers (a graphed step: its bucket, padding included) */
    int n_out;      /* logits rows computed (graphed: the bucket) */
    int n_seqs;     /* the batch's sequences */
    int kv_cap;     /* bound on every row's KV length: sizes attention's grid */
    int bt_stride;  /* columns of the packed block tables: ceil(kv_cap / KV_BLOCK_SIZE) */
    bool decode;    /* one token per sequence: decode attention, one row per token */
    bool streaming; /* some sequence keeps its keys un-rotated (rope_on_read) */
    bool graphed;   /* run through the graph cache */
} step_shape;

/* Profiling knob, never for results: SI_CUDA_SKIP=mask leaves the masked launches out of every
 * layer (1 attention norm, 2 QKV, 4 RoPE + KV write, 8 attention, 16 output projection, 32 FFN
 * norm, 64 gate/up, 128 SwiGLU, 256 down), so that tg timings show what each costs inside a
 * graphed step (scripts/gpu_decode_ab.sh). The outputs are then garbage. */
static bool skip(int what) {
    static int mask = -1;
    if (mask < 0) {
        const char *e = getenv("SI_CUDA_SKIP");
        mask = e ? atoi(e) : 0;
    }
    return (mask & what) != 0;
}

/* A fusion's timing switch: on unless the environment sets name to 0 (read once, into *cache,
 * -1 until then). Either way the results are the same. */
static bool fusion_on(const char *name, int *cache) {
    if (*cache < 0) {
        const char *e = getenv(name);
        *cache = !(e && atoi(e) == 0);
    }
    return *cache != 0;
}

/* Whether a decode step's RoPE + KV write runs inside the attention kernel
 * (cuda_attention_decode_rope); SI_CUDA_ATTN_FUSE=0: the two kernels. */
static bool attn_fuse_on(void) {
    static int on = -1;
    return fusion_on("SI_CUDA_ATTN_FUSE", &on);
}

/* Whether the fused decode attention also quantises its output for the output projection's
 * GEMV (cuda_attention_decode_rope's out_q8), which would quantise it itself;
 * SI_CUDA_ATTN_Q8=0: the GEMV does. */
static bool attn_q8_on(void) {
    static int on = -1;
    return fusion_on("SI_CUDA_ATTN_Q8", &on);
}

/* Whether the norm before a matmul of w over n rows should also quantise its output for it: the
 * GEMV would quantise x itself (cuda_gemv_pre_ok), once in every CTA. */
static bool pre_quant(const dev_mat *w, int n) { return cuda_gemv_pre_ok(w->type, w->K, n); }

/* Whether the kernel before a matmul of w over n rows (a norm, SwiGLU, decode attention) should
 * write its output in w's type for it: matmul takes cuBLASLt with x converted to F16/BF16 there,
 * a kernel of its own (cuda_gemm_pre). SI_CUDA_GEMM_PRE=0: the GEMM converts. */
static bool pre_half(const dev_mat *w, int n) {
    static int on = -1;
    return n > 8 && (w->type == SI_TYPE_F16 || w->type == SI_TYPE_BF16) &&
           fusion_on("SI_CUDA_GEMM_PRE", &on);
}

/* Whether a batch-1 GEMV of a quantised type runs the norm before it in its own CTAs
 * (cuda_gemv_norm), so that no norm kernel sits between it and the GEMV before;
 * SI_CUDA_GEMV_NORM=0: the norm kernel quantises x for it. */
static bool gemv_norm_on(void) {
    static int on = -1;
    return fusion_on("SI_CUDA_GEMV_NORM", &on);
}

/* What the norm before a matmul wrote for it besides c->xb (norm_for, matmul_normed), or
 * (NORMED_IN_GEMV) that it did not run: the matmul's GEMV runs it, with weight nw, adding c->xb
 * first when add; and, set by the caller for a [gate; up] matrix, glu_q8: where that GEMV is to
 * write silu(gate) x up quantised for the down GEMV instead of y, if it can. */
typedef enum { NORMED_F32, NORMED_Q8, NORMED_MMQ, NORMED_HALF, NORMED_IN_GEMV } normed_kind;
typedef struct normed {
    normed_kind kind;
    const float *nw;
    bool add;
    void *glu_q8;
} normed;

/* Whether the matmul of w over n rows is a GEMV that can run the norm before it itself */
static bool gemv_runs_norm(const cuda_state *c, const dev_mat *w, int n) {
    return n == 1 && w->K == c->m->hp.n_embd && gemv_norm_on() &&
           cuda_gemv_norm_ok(w->type, w->M, w->K);
}

/* RMSNorm of c->x into c->xb (adding c->xb first when add), and for the matmul of w after it:
 * quantised into c->xq8 (NORMED_Q8) when that GEMV can take it, or as f16 into c->gemm_scr in
 * the batched quantised matmul's layout (NORMED_MMQ) when w is its only reader and that matmul
 * can take it (cuda_matmul_quant_rows_pre: one kernel fewer). w_only: w is the only matmul to
 * read the result, so the f32 rows may be left out when it takes q8. One row whose only reader
 * is a GEMV that can run the norm itself (cuda_gemv_norm_ok): nothing is launched here
 * (NORMED_IN_GEMV; measured on the H200, tg128 Q8_0 425 -> 442.7 t/s, bench/RESULTS.md s11). */
static normed norm_for(cuda_state *c, const float *nw, bool add, const dev_mat *w, int n,
                       int what, bool w_only) {
    const model_hparams *hp = &c->m->hp;
    if (w_only && gemv_runs_norm(c, w, n)) return (normed){NORMED_IN_GEMV, nw, add, NULL};
    const bool pre = pre_quant(w, n) && hp->n_embd <= CUDA_NORM_Q8_MAX;
    const bool mmq = !pre && w_only && hp->n_embd <= CUDA_NORM_Q8_MAX &&
                     cuda_matmul_quant_rows_pre_ok(w->type, w->K, n);
    const bool half = !pre && !mmq && w_only && pre_half(w, n);
    const normed_kind kind = pre    ? NORMED_Q8
                             : mmq  ? NORMED_MMQ
                             : half ? NORMED_HALF
                                    : NORMED_F32;
    if (skip(what)) return (normed){kind, nw, add, NULL};
    float *xb_add = add ? c->xb : NULL;
    if (mmq) {
        SI_ASSERT(cuda_add_rmsnorm_mmq(c->xb, c->gemm_scr, c->x, xb_add, nw, hp->n_embd, n,
                                       hp->rms_eps, c->st) == 0);
        return (normed){kind, nw, add, NULL};
    }
    if (half) { /* w, the only reader, takes the converted rows: no f32 rows */
        SI_ASSERT(cuda_add_rmsnorm_half(NULL, c->gemm_scr, w->type, c->x, xb_add, nw, hp->n_embd,
                                        n, hp->rms_eps, c->st) == 0);
        return (normed){kind, nw, add, NULL};
    }
    /* The f32 rows are not read when w (the only reader) takes the q8 copy. Leaving them out
     * was measured on the H200 (s8 call 8, tg128, 3 rounds): Q8_0 432.3 -> 435.6 t/s, but Q4_0
     * 644.4 -> 637.7 (the chain's timing, not the bytes), so only Q8_0 leaves them out. */
    float *out = pre && w_only && w->type == SI_TYPE_Q8_0 ? NULL : c->xb;
    SI_ASSERT(cuda_add_rmsnorm(out, pre ? c->xq8 : NULL, c->x, xb_add, nw, hp->n_embd, n,
                               hp->rms_eps, c->st) == 0);
    return (normed){kind, nw, add, NULL};
}

/* y[n][M] = xb[n][K] W^T where xb is norm_for's output, read from what it wrote for w; true
 * where the GEMV wrote silu(gate) x up into pn.glu_q8 instead of y */
static void matmul(cuda_state *c, const dev_mat *w, const float *x, int n, float *y);
static bool matmul_normed(cuda_state *c, const dev_mat *w, int n, float *y, normed pn) {
    const normed_kind kind = pn.kind;
    bool glu = false;
    if (kind == NORMED_IN_GEMV) {
        SI_ASSERT(n == 1);
        const float *add = pn.add ? c->xb : NULL;
        const float eps = c->m->hp.rms_eps;
        float *x_out = pn.add ? c->x_alt : NULL;
        glu = pn.glu_q8 && cuda_gemv_norm_glu(w->type, w->d, w->M, w->K, c->x, add, pn.nw, eps,
                                              x_out, pn.glu_q8, c->st) == 0;
        if (!glu)
            SI_ASSERT(cuda_gemv_norm(w->type, w->d, w->M, w->K, c->x, add, pn.nw, eps, x_out, y,
                                     c->st) == 0);
        if (pn.add) { /* the sum is the residual now */
            float *t = c->x;
            c->x = c->x_alt;
            c->x_alt = t;
        }
    } else if (kind == NORMED_Q8 && pre_quant(w, n))
        SI_ASSERT(cuda_gemv_pre(w->type, w->d, w->M, w->K, c->xq8, n, y, c->st) == 0);
    else if (kind == NORMED_MMQ)
        SI_ASSERT(cuda_matmul_quant_rows_pre(w->type, w->d, w->M, w->K, n, y, c->gemm_scr,
                                             c->st) == 0);
    else if (kind == NORMED_HALF)
        SI_ASSERT(cuda_gemm_pre(c->gemm, w->type, w->d, w->M, w->K, n, y, c->gemm_scr, c->st) ==
                  0);
    else
        matmul(c, w, c->xb, n, y);
    return glu;
}

/* y[n][M] = x[n][K] W^T: GEMV for up to 8 rows (decode; 16 where cuda_gemv_wide_ok), the int8
 * tensor-core kernel for the row counts and shapes where it beats the alternative (batched
 * decode of a quantised weight; no dequantised copy), cuBLASLt GEMM otherwise. */
static void matmul(cuda_state *c, const dev_mat *w, const float *x, int n, float *y) {
    const int r =
        n <= GEMV_ROWS_MAX || cuda_gemv_wide_ok(w->type, w->K, n)
            ? cuda_gemv(w->type, w->d, w->M, w->K, x, n, y, c->st)
        : cuda_matmul_quant_rows_pays(w->type, w->M, n) &&
                cuda_matmul_quant_rows(w->type, w->d, w->M, w->K, x, n, y, c->gemm_scr, c->st) == 0
            ? 0
            : cuda_gemm(c->gemm, w->type, w->d, w->M, w->K, x, n, y, c->gemm_scr, c->st);
    SI_ASSERT(r == 0);
}

/* Q, K and V of n rows in the qkv scratch and their row strides: rows [q | k | v] when the
 * weights are fused, rows [q | k] then a block of v when Wq and Wk are, three blocks otherwise. */
typedef struct qkv_view {
    float *q, *k, *v;
    int qs, ks, vs;
} qkv_view;

static qkv_view qkv_of(const cuda_state *c, const dev_layer *D, int n) {
    const model_hparams *hp = &c->m->hp;
    const int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    if (D->qkv_fused) {
        const int s = q_dim + 2 * kv_dim;
        return (qkv_view){c->qkv, c->qkv + q_dim, c->qkv + q_dim + kv_dim, s, s, s};
    }
    if (D->qk_fused) {
        const int s = q_dim + kv_dim;
        float *v = c->qkv + split_at((size_t)n * s);
        return (qkv_view){c->qkv, c->qkv + q_dim, v, s, s, kv_dim};
    }
    float *k = c->qkv + split_at((size_t)n * q_dim), *v = k + split_at((size_t)n * kv_dim);
    return (qkv_view){c->qkv, k, v, q_dim, kv_dim, kv_dim};
}

static void attention_block(cuda_state *c, const dev_layer *D, int il, const step_shape *sh) {
    const model_hparams *hp = &c->m->hp;
    const batch_layout L = layout_of(&c->p, c->max_blocks);
    const int n = sh->n_tokens;
    const int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    cudaStream_t st = c->st;
    uint8_t *kc = c->kc + il * c->layer_elems * c->kv_elem;
    uint8_t *vc = c->vc + il * c->layer_elems * c->kv_elem;
    const int32_t *d_pos = c->d_in + L.pos, *d_bt = c->d_in + L.bt;
    const uint8_t *k_unrot = sh->streaming ? (const uint8_t *)(c->d_in + L.k_unrot) : NULL;
    const uint8_t *row_ror = sh->streaming ? (const uint8_t *)(c->d_in + L.row_ror) : NULL;

    /* the residual of the previous layer's FFN (c->xb, pending unless il == 0) is added here.
     * Wq|Wk fused and Wv apart: at one row both GEMVs run the norm, the first adding the
     * residual, the second reading the sum (no norm kernel between them and the GEMV before). */
    const bool qk = D->qk_fused;
    const normed pre = norm_for(c, D->attn_norm, il > 0, D->qkv_fused || qk ? &D->wqkv : &D->wq, n,
                                1, D->qkv_fused || (qk && gemv_runs_norm(c, &D->wv, n)));
    const qkv_view v = qkv_of(c, D, n);
    if (D->qkv_fused || qk) {
        if (!skip(2)) matmul_normed(c, &D->wqkv, n, c->qkv, pre);
        if (D->b_qkv) cuda_fwd_add_bias(c->qkv, D->b_qkv, D->wqkv.M, n, st); /* [bq | bk (| bv)] */
    }
    if (qk) {
        const normed pv = pre.kind == NORMED_IN_GEMV ? (normed){NORMED_IN_GEMV, pre.nw, false, NULL}
                                                     : (normed){NORMED_F32};
        if (!skip(2)) matmul_normed(c, &D->wv, n, v.v, pv);
        if (D->b_qkv) cuda_fwd_add_bias(v.v, D->b_qkv + q_dim + kv_dim, kv_dim, n, st);
    } else if (!D->qkv_fused) {
        /* the quantised copy is for wq's type; wk, wv take it when theirs is the same */
        matmul_normed(c, &D->wq, n, v.q, pre);
        matmul_normed(c, &D->wk, n, v.k, D->wk.type == D->wq.type ? pre : (normed){NORMED_F32});
        matmul_normed(c, &D->wv, n, v.v, D->wv.type == D->wq.type ? pre : (normed){NORMED_F32});
        if (D->b_qkv) {
            cuda_fwd_add_bias(v.q, D->b_qkv, q_dim, n, st);
            cuda_fwd_add_bias(v.k, D->b_qkv + q_dim, kv_dim, n, st);
            cuda_fwd_add_bias(v.v, D->b_qkv + q_dim + kv_dim, kv_dim, n, st);
        }
    }
    cuda_attn_params ap = c->attn;
    ap.max_blocks = sh->bt_stride;
    /* a decode step rotates and caches the new tokens inside attention's kernel where it can
     * (1: it cannot, the two kernels run) */
    int fused = 1;
    /* and, where it does, quantises its output for the output projection, or converts it for
     * its cuBLASLt GEMM */
    const bool att_q8 = attn_q8_on() && pre_quant(&D->wo, n) && q_dim % 128 == 0;
    const bool att_h = !att_q8 && D->wo.type == SI_TYPE_F16 && pre_half(&D->wo, n);
    if (sh->decode && !sh->streaming && attn_fuse_on() && !skip(4) && !skip(8)) {
        fused = cuda_attention_decode_rope(c->att, v.q, v.qs, v.k, v.ks, v.v, v.vs, d_pos,
                                           c->d_in + L.slot, kc, vc, d_bt, c->d_in + L.kv_len, n,
                                           sh->kv_cap, &c->rope, &ap, att_q8 ? c->xq8 : NULL,
                                           att_h ? c->gemm_scr : NULL, c->attn_scr, st);
        SI_ASSERT(fused >= 0);
    }
    if (fused != 0) {
        if (!skip(4))
            cuda_rope_kv_write(v.q, v.qs, v.k, v.ks, v.v, v.vs, d_pos, c->d_in + L.slot, k_unrot,
                               n, kc, vc, &c->rope, st);
        if (skip(8)) {
        } else if (sh->decode) {
            SI_ASSERT(cuda_attention_decode(c->att, v.q, v.qs, kc, vc, d_bt, c->d_in + L.kv_len,
                                            n, sh->kv_cap, row_ror, &c->rope, &ap, c->attn_scr,
                                            st) == 0);
        } else {
            SI_ASSERT(cuda_attention_prefill(c->att, v.q, v.qs, kc, vc, d_bt, c->d_in + L.seq,
                                             d_pos, n, sh->n_seqs, sh->kv_cap, row_ror,
                                             &c->rope, &ap, c->attn_scr, st) == 0);
        }
    }
    /* its residual add: ffn_block's norm */
    if (skip(16)) {
    } else if (fused == 0 && att_q8) {
        SI_ASSERT(cuda_gemv_pre(D->wo.type, D->wo.d, D->wo.M, D->wo.K, c->xq8, n, c->xb, st) == 0);
    } else if (fused == 0 && att_h) {
        SI_ASSERT(cuda_gemm_pre(c->gemm, D->wo.type, D->wo.d, D->wo.M, D->wo.K, n, c->xb,
                                c->gemm_scr, st) == 0);
    } else {
        matmul(c, &D->wo, c->att, n, c->xb);
    }
}

/* down(silu(gate(x)) * up(x)) */
static void ffn_block(cuda_state *c, const dev_layer *D, const step_shape *sh) {
    const model_hparams *hp = &c->m->hp;
    const int n = sh->n_tokens, ff = hp->n_ff;
    cudaStream_t st = c->st;
    /* the down GEMV's x quantised by the fused SwiGLU, as the norms do for the others */
    const bool pre_down = D->gate_up_fused && pre_quant(&D->w_down, n);
    /* or converted by it for cuBLASLt */
    const bool half_down = D->gate_up_fused && !pre_down && pre_half(&D->w_down, n);
    normed pre = norm_for(c, D->ffn_norm, true, D->gate_up_fused ? &D->w_gate_up : &D->w_gate, n,
                          32, D->gate_up_fused);
    /* batch 1: the gate/up GEMV ends in the SwiGLU kernel's work where it can
     * (cuda_gemv_norm_glu: one kernel boundary fewer a layer; SI_CUDA_GEMV_GLU=0: never) */
    if (pre_down && pre.kind == NORMED_IN_GEMV) pre.glu_q8 = c->xq8;
    if (D->gate_up_fused) {
        const bool glu = !skip(64) && matmul_normed(c, &D->w_gate_up, n, c->ffn, pre);
        if (skip(128) || glu) {
        } else if (half_down) {
            SI_ASSERT(cuda_fwd_swiglu_rows_half(c->gemm_scr, D->w_down.type, c->ffn, ff, n, st) ==
                      0);
        } else { /* the f32 rows only where the down matmul reads them */
            cuda_fwd_swiglu_rows(pre_down ? NULL : c->act, pre_down ? c->xq8 : NULL, c->ffn, ff, n,
                                 st);
        }
    } else {
        float *up = c->ffn + split_at((size_t)n * ff);
        matmul_normed(c, &D->w_gate, n, c->ffn, pre);
        matmul_normed(c, &D->w_up, n, up,
                      D->w_up.type == D->w_gate.type ? pre : (normed){NORMED_F32});
        cuda_swiglu(c->act, c->ffn, up, (int64_t)n * ff, st);
    }
    /* the result is added by the next layer's norm, or at the end */
    if (skip(256)) {
    } else if (pre_down) {
        SI_ASSERT(cuda_gemv_pre(D->w_down.type, D->w_down.d, D->w_down.M, D->w_down.K, c->xq8, n,
                                c->xb, st) == 0);
    } else if (half_down) {
        SI_ASSERT(cuda_gemm_pre(c->gemm, D->w_down.type, D->w_down.d, D->w_down.M, D->w_down.K, n,
                                c->xb, c->gemm_scr, st) == 0);
    } else {
        matmul(c, &D->w_down, c->act, n, c->xb);
    }
}

/* The whole forward pass of a packed step, device work only (capturable): embeddings, the
 * layers, and logits for the first sh->n_out rows of out_row into c->logits. */
static void forward_launches(cuda_state *c, const step_shape *sh) {
    const model_hparams *hp = &c->m->hp;
    const cuda_weights *w = c->w;
    const batch_layout L = layout_of(&c->p, c->max_blocks);
    const int dim = hp->n_embd;
    cudaStream_t st = c->st;
    c->x = c->x_main;
    c->x_alt = c->x_row;
    SI_ASSERT(cuda_get_rows(w->tok_embd.type, w->tok_embd.d, dim, c->d_in + L.token,
                            sh->n_tokens, c->x, st) == 0);
    for (int il = 0; il < hp->n_layer; il++) {
        attention_block(c, &w->layers[il], il, sh);
        ffn_block(c, &w->layers[il], sh);
    }
    /* One row (batch-1 decode): the output matrix's GEMV adds the last layer's FFN residual and
     * runs the output norm itself, as the layers' GEMVs do (norm_for): the same bits as the add,
     * gather and norm kernels below, three kernel boundaries fewer a token.
     * SI_CUDA_GEMV_OUT_NORM=0: the three kernels. */
    static int out_norm = -1;
    if (sh->n_tokens == 1 && sh->n_out == 1 && fusion_on("SI_CUDA_GEMV_OUT_NORM", &out_norm) &&
        gemv_runs_norm(c, &w->output, 1)) {
        matmul_normed(c, &w->output, 1, c->logits,
                      (normed){NORMED_IN_GEMV, w->output_norm, true, NULL});
        return;
    }
    cuda_add(c->x, c->xb, (int64_t)sh->n_tokens * dim, st); /* the last layer's FFN residual */
    if (sh->n_out > 0) {
        cuda_fwd_gather_rows(c->xo, c->x, c->d_in + L.out_row, sh->n_out, dim, st);
        SI_ASSERT(cuda_rmsnorm(c->xb, NULL, SI_TYPE_F16, c->xo, w->output_norm, dim, sh->n_out,
                               hp->rms_eps, st) == 0);
        matmul(c, &w->output, c->xb, sh->n_out, c->logits);
    }
}

typedef struct graph_ctx {
    cuda_state *c;
    const step_shape *sh;
} graph_ctx;

static void forward_body(void *ctx, cudaStream_t stream) {
    const graph_ctx *g = ctx;
    SI_ASSERT(stream == g->c->st);
    forward_launches(g->c, g->sh);
}

/* Rows [from, to) of the packed batch h as harmless padding: token 0 at position 0, not cached
 * (slot -1), KV length 1, sequence 0, keys not rotated on read; logits rows [out_from, to) read
 * row 0. (Their block-table rows, written by the caller, read block 0.) */
static void pad_rows(int32_t *h, const batch_layout *L, int from, int to, int out_from) {
    uint8_t *k_unrot = (uint8_t *)(h + L->k_unrot);
    for (int t = from; t < to; t++) {
        h[L->token + t] = 0;
        h[L->pos + t] = 0;
        h[L->slot + t] = -1;
        h[L->kv_len + t] = 1;
        h[L->seq + t] = 0;
        k_unrot[t] = 0;
    }
    for (int i = out_from; i < to; i++) h[L->out_row + i] = 0;
}

/* Packs b into h_in and chooses the step's shape: a decode step with graphs on is padded to its
 * bucket with harmless rows (token 0 at position 0, not cached (slot -1), KV length 1, reading
 * block 0, logits row 0). Returns the number of real logits rows (c->out_seq: their sequences)
 * and the bytes of h_in to copy. */
static int pack_step(cuda_state *c, const si_batch *b, step_shape *sh, size_t *bytes) {
    const model_hparams *hp = &c->m->hp;
    const batch_layout L = layout_of(&c->p, c->max_blocks);
    const int n = b->n_tokens, mb = b->max_blocks;
    SI_ASSERT(n > 0 && n <= c->p.max_tokens && b->n_seqs > 0 && b->n_seqs <= c->p.max_seqs);
    SI_ASSERT(mb > 0 && mb <= c->max_blocks);
    int32_t *h = c->h_in;
    uint8_t *k_unrot = (uint8_t *)(h + L.k_unrot), *row_ror = (uint8_t *)(h + L.row_ror);
    int max_kv_len = 1;
    bool streaming = false;
    for (int t = 0; t < n; t++) {
        const int32_t s = b->seq[t], pos = b->pos[t];
        SI_ASSERT(s >= 0 && s < b->n_seqs && pos >= 0 && pos < b->seq_len[s] &&
                  pos < c->p.max_kv && b->token[t] >= 0 && b->token[t] < hp->n_vocab);
        const bool ror = b->rope_on_read && b->rope_on_read[s];
        const int32_t blk = b->block_table[(size_t)s * mb + pos / KV_BLOCK_SIZE];
        SI_ASSERT(blk >= 0 && blk < c->p.n_blocks);
        h[L.token + t] = b->token[t];
        h[L.pos + t] = pos;
        h[L.slot + t] = blk * KV_BLOCK_SIZE + pos % KV_BLOCK_SIZE;
        h[L.kv_len + t] = pos + 1;
        h[L.seq + t] = s;
        k_unrot[t] = ror;
        streaming |= ror;
        if (pos + 1 > max_kv_len) max_kv_len = pos + 1;
    }
    int n_out = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        if (b->logits_row[s] < 0) continue;
        SI_ASSERT(b->logits_row[s] < n && b->seq[b->logits_row[s]] == s);
        h[L.out_row + n_out] = b->logits_row[s];
        c->out_seq[n_out++] = s;
    }
    *sh = (step_shape){n, n_out, b->n_seqs, max_kv_len, 0, n == b->n_seqs, streaming, false};
    if (sh->decode && c->graphs) {
        int rows, kv_cap;
        cuda_graphs_bucket(c->graphs, n, max_kv_len, &rows, &kv_cap);
        if (rows >= n && kv_cap >= max_kv_len) {
            pad_rows(h, &L, n, rows, n_out);
            sh->n_tokens = sh->n_out = rows;
            sh->kv_cap = kv_cap;
            sh->graphed = true;
        }
    }
    /* block tables of the attention rows: one per token in a decode step, else per sequence */
    sh->bt_stride = (sh->kv_cap + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE;
    SI_ASSERT(sh->bt_stride <= c->max_blocks);
    const int rows = sh->decode ? sh->n_tokens : b->n_seqs;
    const int cols = sh->bt_stride < mb ? sh->bt_stride : mb;
    for (int r = 0; r < rows; r++) {
        const int s = !sh->decode ? r : r < n ? b->seq[r] : -1;
        int32_t *dst = h + L.bt + (size_t)r * sh->bt_stride;
        const int have = s >= 0 ? cols : 0;
        if (have) memcpy(dst, b->block_table + (size_t)s * mb, (size_t)have * sizeof(int32_t));
        memset(dst + have, 0, (size_t)(sh->bt_stride - have) * sizeof(int32_t));
        row_ror[r] = s >= 0 && b->rope_on_read && b->rope_on_read[s];
    }
    *bytes = (L.bt + (size_t)rows * sh->bt_stride) * sizeof(int32_t);
    return n_out;
}

/* the sampling parameters of the packed batch in h_in */
static cuda_sample_params *h_smp_of(const cuda_state *c) {
    return (cuda_sample_params *)(c->h_in + layout_of(&c->p, c->max_blocks).smp);
}

/* The sampling parameters of the n_out logits rows into h_in's, with each row's logit biases
 * and penalty pairs after the packed batch's first `bytes` (adj_start; *bytes grows by them);
 * logprobs where lp and a row asks, *any_lp saying whether one does. */
static void pack_sampling(cuda_state *c, const backend_sample *smp, int n_out, bool lp,
                          bool *any_lp, size_t *bytes) {
    cuda_sample_params *h_smp = h_smp_of(c);
    c->adj_start = *bytes / sizeof(int32_t);
    c->adj_rows = 0;
    int32_t *pairs = c->h_in + c->adj_start;
    int at = 0;
    for (int i = 0; i < n_out; i++) {
        const backend_sample *q = &smp[c->out_seq[i]];
        SI_ASSERT(q->n_pen >= 0 && q->n_pen <= BACKEND_PEN_MAX && q->n_bias >= 0 &&
                  q->n_bias <= SI_MAX_LOGIT_BIAS);
        h_smp[i] = (cuda_sample_params){.u = q->u,
                                        .temperature = q->temperature,
                                        .top_k = q->top_k,
                                        .top_p = q->top_p,
                                        .min_p = q->min_p,
                                        .log_min_p = q->min_p > 0.0f ? logf(q->min_p) : 0.0f,
                                        .logprobs = lp ? q->logprobs : -1,
                                        .repetition = q->repetition,
                                        .frequency = q->frequency,
                                        .presence = q->presence,
                                        .pen_at = at,
                                        .pen_n = q->n_pen,
                                        .bias_at = at + q->n_pen,
                                        .bias_n = q->n_bias};
        *any_lp |= h_smp[i].logprobs >= 0;
        for (int j = 0; j < q->n_pen; j++, at++) {
            SI_ASSERT(q->pen_tok[j] >= 0 && q->pen_tok[j] < c->m->hp.n_vocab);
            pairs[2 * at] = q->pen_tok[j];
            pairs[2 * at + 1] = q->pen_count[j];
        }
        for (int j = 0; j < q->n_bias; j++, at++) {
            SI_ASSERT(q->bias[j].token >= 0 && q->bias[j].token < c->m->hp.n_vocab);
            pairs[2 * at] = q->bias[j].token;
            memcpy(&pairs[2 * at + 1], &q->bias[j].bias, sizeof(float));
        }
        c->adj_rows += q->n_pen > 0 || q->n_bias > 0;
    }
    *bytes += (size_t)at * 2 * sizeof(int32_t);
}

/* Packs b into h_in slot `slot` (with smp: the logits rows' sampling, pack_sampling), copies it
 * over and enqueues its forward pass (a graph replay for a decode step). With feed_back,
 * d_in[0], token 0 (batch_layout's first array), is not copied: it holds the id the step before
 * sampled into it (sample_begin). Returns the number of real logits rows, in c->logits in the
 * order of c->out_seq. */
static int run_step(cuda_state *c, const si_batch *b, int slot, bool feed_back,
                    const backend_sample *smp, bool lp, bool *any_lp) {
    step_shape sh;
    size_t bytes;
    step_timing_begin(&c->timing, b, c->st);
    c->h_in = c->h_in_buf + (size_t)slot * c->in_ints;
    const int n_out = pack_step(c, b, &sh, &bytes);
    if (smp) pack_sampling(c, smp, n_out, lp, any_lp, &bytes);
    const size_t skip = feed_back ? 1 : 0;
    CUDA_CHECK(cudaMemcpyAsync(c->d_in + skip, c->h_in + skip, bytes - skip * sizeof(int32_t),
                               cudaMemcpyHostToDevice, c->st));
    graph_ctx g = {c, &sh};
    if (sh.graphed)
        cuda_graphs_run(c->graphs, sh.n_tokens, sh.kv_cap, sh.streaming, c->st, forward_body, &g);
    else
        forward_launches(c, &sh);
    return n_out;
}

/* the batch size warmed after r: the graphs' next bucket (powers of two without graphs) */
static int next_warm_rows(const cuda_state *c, int r, int max_rows) {
    const int next = cuda_graphs_next_rows(c->graphs, r);
    return next > 0 && next < max_rows ? next : max_rows;
}

/* A decode step of padding rows (pad_rows) for every batch bucket, run once before the first
 * request, sampled greedily and with top-k/top-p/min-p: so that the first real decode step of a
 * batch size does not load kernels. CUDA loads a kernel's module at its first launch (lazy
 * loading), cuBLASLt's kernels up to 20 ms each; on the H200 the first 64-row step of a 7B model
 * took 21 ms against 9 ms (bench/RESULTS.md 2026-12-01 14:53 UTC, call 4). Then each bucket's
 * graphs for every KV bucket are captured (cuda_graphs_capture; the first graphed step of a
 * bucket would otherwise pay ~5 ms for it). Padding rows write no KV and their results are
 * discarded, so this changes no request's tokens. Returns the largest batch bucket warmed and
 * the graphs captured in *n_graphs. SI_CUDA_WARMUP=0 skips it, =1 skips the captures. */
static int warm_decode(cuda_state *c, int *n_graphs) {
    const char *e = getenv("SI_CUDA_WARMUP");
    *n_graphs = 0;
    if (e && !strcmp(e, "0")) return 0;
    const bool graphs = c->graphs && !(e && !strcmp(e, "1"));
    const batch_layout L = layout_of(&c->p, c->max_blocks);
    const int max_rows = c->p.max_seqs < c->p.max_tokens ? c->p.max_seqs : c->p.max_tokens;
    int32_t *h = c->h_in;
    int r = 1;
    for (;; r = next_warm_rows(c, r, max_rows)) {
        /* every KV bucket's kernels: the largest reaches the parts' combine kernel too */
        step_shape sh = {r, r, r, c->p.max_kv, c->max_blocks, true, false, false};
        pad_rows(h, &L, 0, r, 0);
        uint8_t *row_ror = (uint8_t *)(h + L.row_ror);
        memset(row_ror, 0, (size_t)r);
        memset(h + L.bt, 0, (size_t)r * sh.bt_stride * sizeof(int32_t));
        cuda_sample_params *h_smp = (cuda_sample_params *)(h + L.smp);
        const cuda_sample_params greedy = {.u = 0.5f, .top_p = 1.0f, .logprobs = -1};
        const cuda_sample_params chain = {.u = 0.5f,
                                          .temperature = 0.8f,
                                          .top_k = 40,
                                          .top_p = 0.9f,
                                          .min_p = 0.05f,
                                          .log_min_p = logf(0.05f),
                                          .logprobs = -1};
        for (int i = 0; i < r; i++) /* greedy, and sampled through the whole chain */
            h_smp[i] = i % 2 ? chain : greedy;
        const size_t bytes = (L.bt + (size_t)r * sh.bt_stride) * sizeof(int32_t);
        CUDA_CHECK(cudaMemcpyAsync(c->d_in, h, bytes, cudaMemcpyHostToDevice, c->st));
        forward_launches(c, &sh);
        /* loaded too: the penalties' kernel (no pairs here: it changes nothing) */
        cuda_penalise_rows(c->logits, c->m->hp.n_vocab, r, c->d_smp, c->d_in + L.bt, c->d_adj_saved,
                           false, c->st);
        cuda_sample(c->logits, c->m->hp.n_vocab, r, c->d_smp, c->d_ids, c->st);
        CUDA_CHECK(cudaStreamSynchronize(c->st)); /* h_in is reused */
        int rows = r, kv = 0;
        if (graphs) cuda_graphs_bucket(c->graphs, r, 1, &rows, &kv); /* the first KV bucket */
        for (; kv; kv = cuda_graphs_next_kv(c->graphs, kv)) {
            step_shape gs = {r, r, r, kv, (kv + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE, true, false,
                             true};
            graph_ctx g = {c, &gs};
            if (cuda_graphs_capture(c->graphs, r, kv, 0, c->st, forward_body, &g) == 0)
                ++*n_graphs;
        }
        if (r == max_rows) break;
    }
    return r;
}

static void cuda_forward(void *state, const si_batch *b, float *logits) {
    cuda_state *c = state;
    SI_ASSERT(!c->ahead_begun);
    const size_t nv = (size_t)c->m->hp.n_vocab;
    const int n_out = run_step(c, b, 0, false, NULL, false, NULL);
    const bool direct = logits == c->h_logits; /* pinned: the rows straight to their places */
    for (int i = 0, run; direct && i < n_out; i += run) { /* one copy a run of consecutive rows */
        for (run = 1; i + run < n_out && c->out_seq[i + run] == c->out_seq[i] + run; run++) {
        }
        CUDA_CHECK(cudaMemcpyAsync(logits + (size_t)c->out_seq[i] * nv, c->logits + i * nv,
                                   (size_t)run * nv * sizeof(float), cudaMemcpyDeviceToHost,
                                   c->st));
    }
    if (!direct && n_out > 0)
        CUDA_CHECK(cudaMemcpyAsync(c->h_logits, c->logits, (size_t)n_out * nv * sizeof(float),
                                   cudaMemcpyDeviceToHost, c->st));
    step_timing_end(&c->timing, c->st);
    CUDA_CHECK(cudaStreamSynchronize(c->st));
    for (int i = 0; i < (direct ? 0 : n_out); i++)
        memcpy(logits + (size_t)c->out_seq[i] * nv, c->h_logits + (size_t)i * nv,
               nv * sizeof(float));
}

static float *cuda_logits_buffer(void *state) { return ((cuda_state *)state)->h_logits; }

/* The sampling half of a step of n_out logits rows (their parameters came with the batch):
 * their logit biases and penalties applied, the sampling kernel's ids to d_ids (device), then into
 * h_ids's slot. */
static void enqueue_sample(cuda_state *c, int n_out, int32_t *d_ids, int slot) {
    if (n_out <= 0) return;
    if (c->adj_rows)
        cuda_penalise_rows(c->logits, c->m->hp.n_vocab, n_out, c->d_smp, c->d_in + c->adj_start,
                           c->d_adj_saved, false, c->st);
    cuda_sample(c->logits, c->m->hp.n_vocab, n_out, c->d_smp, d_ids, c->st);
    CUDA_CHECK(cudaMemcpyAsync(c->h_ids + (size_t)slot * c->p.max_seqs, d_ids,
                               (size_t)n_out * sizeof *c->h_ids, cudaMemcpyDeviceToHost, c->st));
}

/* forward_sample: the forward pass, then the sampling kernel on the logits rows where they
 * are, and the logprobs kernel when a row asks; only the ids (and logprobs) come back. */
static void cuda_forward_sample(void *state, const si_batch *b, const backend_sample *smp,
                                int32_t *ids, backend_logprobs *lp) {
    cuda_state *c = state;
    SI_ASSERT(!c->ahead_begun);
    bool any_lp = false;
    const int n_out = run_step(c, b, 0, false, smp, lp != NULL, &any_lp);
    enqueue_sample(c, n_out, c->d_ids, 0);
    const cuda_sample_params *h_smp = h_smp_of(c);
    cuda_logprobs *h_lp = c->h_lp;
    if (any_lp) { /* of the raw logits: the adjusted ones put back first */
        if (c->adj_rows)
            cuda_penalise_rows(c->logits, c->m->hp.n_vocab, n_out, c->d_smp, c->d_in + c->adj_start,
                               c->d_adj_saved, true, c->st);
        cuda_logprobs_rows(c->logits, c->m->hp.n_vocab, n_out, c->d_smp, c->d_ids, c->d_lp, c->st);
        CUDA_CHECK(cudaMemcpyAsync(h_lp, c->d_lp, (size_t)n_out * sizeof *h_lp,
                                   cudaMemcpyDeviceToHost, c->st));
    }
    step_timing_end(&c->timing, c->st);
    CUDA_CHECK(cudaStreamSynchronize(c->st));
    for (int s = 0; s < b->n_seqs; s++) ids[s] = -1;
    for (int i = 0; i < n_out; i++) {
        ids[c->out_seq[i]] = c->h_ids[i];
        if (h_smp[i].logprobs < 0) continue;
        backend_logprobs *o = &lp[c->out_seq[i]];
        o->logprob = h_lp[i].logprob;
        o->n_top = h_lp[i].n_top;
        for (int t = 0; t < o->n_top; t++)
            o->top[t] = (si_token_logprob){h_lp[i].top_id[t], h_lp[i].top_logprob[t]};
    }
}

/* sample_begin / sample_end (backend.h): a step's host buffers are its slot's, the slots taken
 * in turn, so that the step begun while another runs packs into the buffers of one already
 * ended (whose copies have run). The id is sampled into d_in[0], row 0's token, where a step
 * fed back finds it (run_step does not copy over it). SI_CUDA_STEP_TIMING=1 times such a step
 * by waiting for it. */
static void cuda_sample_begin(void *state, const si_batch *b, const backend_sample *smp,
                              bool feed_back) {
    cuda_state *c = state;
    SI_ASSERT(c->ahead_begun < 2 && b->n_seqs == 1 && b->logits_row[0] >= 0);
    const int slot = c->ahead_next;
    bool any_lp = false;
    const int n_out = run_step(c, b, slot, feed_back, smp, false, &any_lp);
    enqueue_sample(c, n_out, c->d_in, slot);
    CUDA_CHECK(cudaEventRecord(c->ahead_done[slot], c->st));
    step_timing_end(&c->timing, c->st);
    c->ahead_next ^= 1;
    if (!c->ahead_begun++) c->ahead_oldest = slot;
}

static int32_t cuda_sample_end(void *state) {
    cuda_state *c = state;
    SI_ASSERT(c->ahead_begun > 0);
    const int slot = c->ahead_oldest;
    CUDA_CHECK(cudaEventSynchronize(c->ahead_done[slot]));
    c->ahead_oldest ^= 1;
    c->ahead_begun--;
    return c->h_ids[(size_t)slot * c->p.max_seqs];
}

static void cuda_stats(const void *state, backend_stats *out) {
    const cuda_state *c = state;
    *out = (backend_stats){c->device, c->w->bytes, c->kv_bytes, c->scr_bytes};
}

static const si_backend CUDA_BACKEND = {
    .name = "cuda",
    .rope_on_read = true,
    .kv_fp8 = true,
    .create = cuda_create,
    .forward = cuda_forward,
    .forward_sample = cuda_forward_sample,
    .sample_begin = cuda_sample_begin,
    .sample_end = cuda_sample_end,
    .logits_buffer = cuda_logits_buffer,
    .stats = cuda_stats,
    .free = cuda_free_state,
    .kv_blocks_for_fraction = cuda_kv_blocks_for_fraction,
    .copy_bandwidth = cuda_copy_bandwidth,
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
