/* attention.c — causal attention over a ragged batch, reading K/V from the paged f16 cache
 * through each sequence's block table (vLLM's PagedAttention, Kwon et al. 2023), scalar
 * reference.
 *
 * Query t of sequence s attends to the slots 0..pos[t] of s; slot j lives in block
 * block_table[s][j / block_size] at offset j % block_size. Sequences marked rope_on_read store
 * their keys un-rotated and rotate each key here by its slot position, so that dropping a block
 * re-positions every key after it (StreamingLLM's positions-inside-the-cache, Xiao et al. 2023).
 * Threads claim (token, head) pairs one by one; each thread has its own preallocated scratch. The
 * per-head kernel here is the reference; attention_simd.c has AVX2 and AVX-512 ones, picked by
 * cpu_isa_active() (SWIFTINFER_ISA caps it). */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "core/fp16.h"

void cpu_rope_table(float *cos_out, float *sin_out, int32_t n_pos, const rope_params *p) {
    /* exactly cpu_rope's arithmetic (incremental theta), so that a rotation read from the table
     * is bit-identical to cpu_rope's */
    const float theta_scale = powf(p->freq_base, -2.0f / (float)p->rope_dim);
    const int half = p->rope_dim / 2;
    for (int32_t pos = 0; pos < n_pos; pos++) {
        float theta_base = (float)pos;
        for (int i = 0; i < half; i++) {
            const float ff = p->freq_factors ? p->freq_factors[i] : 1.0f;
            const float theta = p->freq_scale * (theta_base / ff);
            cos_out[(size_t)pos * half + i] = cosf(theta);
            sin_out[(size_t)pos * half + i] = sinf(theta);
            theta_base *= theta_scale;
        }
    }
}

/* Rotates one head v[head_dim] by the table row (cs, sn)[rope_dim / 2] of its position. */
static void rope_head_from_table(float *v, const float *cs, const float *sn, const rope_params *p) {
    const int half = p->rope_dim / 2;
    for (int i = 0; i < half; i++) {
        const int a = p->style == ROPE_NORM ? 2 * i : i;
        const int b = p->style == ROPE_NORM ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * cs[i] - x1 * sn[i];
        v[b] = x0 * sn[i] + x1 * cs[i];
    }
}

size_t cpu_attention_paged_scratch(int n_threads, int32_t max_kv, int head_dim) {
    /* per thread: scores [max_kv], the rounded query [head_dim], a rotated key [head_dim] */
    return (size_t)n_threads * ((size_t)max_kv + 2 * (size_t)head_dim) * sizeof(float);
}

/* The attention of one query head qh[head_dim] over slots 0..n_kv-1 of a sequence (block table
 * `table`, KV head kvh) into oh[head_dim]. scratch: [max_kv + 2 * head_dim] floats. */
typedef void (*attn_head_fn)(float *oh, const float *qh, const kv_cache *kv, int32_t layer,
                             const int32_t *table, int kvh, int n_kv, int rotate,
                             const attn_params *p, float *scratch);

#if defined(__x86_64__) || defined(__i386__)
/* NOTE: declared here rather than in a header, as cpu_kernels.c does: only the dispatch below
 * should reach them (attention_simd.c). */
void attention_head_avx2(float *oh, const float *qh, const kv_cache *kv, int32_t layer,
                         const int32_t *table, int kvh, int n_kv, int rotate,
                         const attn_params *p, float *scratch);
void attention_head_avx512(float *oh, const float *qh, const kv_cache *kv, int32_t layer,
                           const int32_t *table, int kvh, int n_kv, int rotate,
                           const attn_params *p, float *scratch);
#endif

/* The reference kernel. */
static void attention_head_ref(float *oh, const float *qh, const kv_cache *kv, int32_t layer,
                               const int32_t *table, int kvh, int n_kv, int rotate,
                               const attn_params *p, float *scratch) {
    const int bs = kv->block_size, hd = p->head_dim;
    const float scale = 1.0f / sqrtf((float)hd);
    float *sc = scratch;        /* [max_kv] */
    float *qr = sc + p->max_kv; /* [head_dim] */
    float *kr = qr + hd;        /* [head_dim] */
    const int rope_half = p->rope ? p->rope->rope_dim / 2 : 0;

    /* NOTE: the cache is f16, and the products with it take f16 inputs: the query is
     * rounded to f16 here and the attention weights below, as ggml's f16 matmuls do. This
     * keeps our logits within rounding noise of llama.cpp's rather than a little apart. */
    for (int d = 0; d < hd; d++) qr[d] = fp16_to_fp32(fp32_to_fp16(qh[d]));

    float max = -INFINITY;
    for (int i = 0; i < n_kv; i++) {
        const uint16_t *kh = kv_cache_k(kv, layer, table[i / bs], i % bs) + (size_t)kvh * hd;
        float dot = 0.0f;
        if (rotate) {
            /* un-rotated key: rotate it to its slot position, then round back to f16 as a
             * key stored rotated would be */
            for (int d = 0; d < hd; d++) kr[d] = fp16_to_fp32(kh[d]);
            rope_head_from_table(kr, p->rope_cos + (size_t)i * rope_half,
                                 p->rope_sin + (size_t)i * rope_half, p->rope);
            for (int d = 0; d < hd; d++) dot += qr[d] * fp16_to_fp32(fp32_to_fp16(kr[d]));
        } else {
            for (int d = 0; d < hd; d++) dot += qr[d] * fp16_to_fp32(kh[d]);
        }
        sc[i] = dot * scale;
        if (sc[i] > max) max = sc[i];
    }
    float sum = 0.0f;
    for (int i = 0; i < n_kv; i++) {
        sc[i] = expf(sc[i] - max);
        sum += sc[i];
    }
    const float inv = 1.0f / sum;
    memset(oh, 0, sizeof(float) * (size_t)hd);
    for (int i = 0; i < n_kv; i++) {
        const uint16_t *vh = kv_cache_v(kv, layer, table[i / bs], i % bs) + (size_t)kvh * hd;
        const float w = fp16_to_fp32(fp32_to_fp16(sc[i] * inv));
        for (int d = 0; d < hd; d++) oh[d] += w * fp16_to_fp32(vh[d]);
    }
}

/* The kernel of level isa or the best lower one that handles this head_dim. */
static attn_head_fn attention_kernel(cpu_isa isa, int head_dim) {
#if defined(__x86_64__) || defined(__i386__)
    if (isa >= CPU_ISA_AVX512 && head_dim % 16 == 0) return attention_head_avx512;
    if (isa >= CPU_ISA_AVX2 && head_dim % 8 == 0) return attention_head_avx2;
#else
    (void)isa;
    (void)head_dim;
#endif
    return attention_head_ref;
}

typedef struct {
    float *out;       /* [n_tokens][n_head * head_dim] */
    const float *q;   /* [n_tokens][n_head * head_dim], already rotated */
    const kv_cache *kv;
    int32_t layer;
    const si_batch *b;
    const attn_params *p;
    float *scratch;   /* [threads][max_kv + 2 * head_dim] */
    attn_head_fn head;
    atomic_int_fast64_t next; /* the next (token, head) task nobody has claimed */
} attn_job;

/* NOTE: tasks are claimed one at a time from a counter, not split by thread index: a prompt's
 * tokens attend to ever longer prefixes (a static split gave the second of two threads three
 * times the first one's keys for a 32-token prompt), and a descheduled worker's share is taken
 * by the others. Each task writes only its own output row, so the results do not depend on who
 * runs it. */
static void attention_worker(void *ctx, int ith, int nth) {
    (void)nth;
    attn_job *j = ctx;
    const attn_params *p = j->p;
    const si_batch *b = j->b;
    const int group = p->n_head / p->n_head_kv;
    const int hd = p->head_dim;
    float *scratch = j->scratch + (size_t)ith * ((size_t)p->max_kv + 2 * (size_t)hd);

    const int64_t n_tasks = (int64_t)b->n_tokens * p->n_head;
    for (int64_t c; (c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < n_tasks;) {
        const int64_t task = n_tasks - 1 - c; /* last tokens first: in a prompt they are the longest */
        const int t = (int)(task / p->n_head), h = (int)(task % p->n_head);
        const int32_t s = b->seq[t];
        const int32_t *table = b->block_table + (size_t)s * b->max_blocks;
        const int rotate = b->rope_on_read && b->rope_on_read[s];
        j->head(j->out + ((size_t)t * p->n_head + h) * hd, j->q + ((size_t)t * p->n_head + h) * hd,
                j->kv, j->layer, table, h / group, b->pos[t] + 1, rotate, p, scratch);
    }
}

void cpu_attention_paged_isa(thread_pool *pool, float *out, const float *q, const kv_cache *kv,
                             int32_t layer, const si_batch *b, const attn_params *p,
                             float *scratch, cpu_isa isa) {
    SI_ASSERT(isa <= cpu_isa_detected());
    for (int t = 0; t < b->n_tokens; t++) SI_ASSERT(b->pos[t] >= 0 && b->pos[t] < p->max_kv);
    attn_job job = {.out = out, .q = q, .kv = kv, .layer = layer, .b = b, .p = p,
                    .scratch = scratch, .head = attention_kernel(isa, p->head_dim)};
    atomic_init(&job.next, 0);
    pool_run(pool, attention_worker, &job);
}

void cpu_attention_paged(thread_pool *pool, float *out, const float *q, const kv_cache *kv,
                         int32_t layer, const si_batch *b, const attn_params *p, float *scratch) {
    cpu_attention_paged_isa(pool, out, q, kv, layer, b, p, scratch, cpu_isa_active());
}
