/* matmul.c — the CPU matrix multiplication out = x · Wᵀ against quantised weights.
 *
 * As in ggml, activations are first quantised to the weight type's vec_dot_type (Q8_0, Q8_1,
 * Q8_K or F16) so that the inner product runs on integers; then weight rows are dotted with each
 * quantised activation row. One pool job does both phases:
 *
 *  1. quantise: the activation rows (or, for a single row without a gemm kernel, slices of its
 *     blocks) are pieces that threads claim from an atomic counter; a row is also rearranged
 *     into its gemm kernel's layout (cpu_kernels.h's prep_row) right after it is quantised.
 *     Each thread counts its finished pieces into `q_done`, and every thread waits until all
 *     pieces are done before
 *  2. multiply: weight rows are cut into chunks that threads claim from a second counter.
 * Nothing is assigned to a thread by its index: when the OS deschedules a worker (a busy or
 * over-subscribed machine), the threads that run take its share instead of waiting for it.
 *
 * Decode (one activation row) is memory-bound: each chunk of weights is streamed once. Prefill
 * (many rows) is tiled so that a chunk of weight rows (MM_CHUNK_PREFILL bytes, meant to stay in
 * L2) is multiplied with every activation row before the next chunk is touched: each weight byte
 * comes from DRAM once per matmul instead of once per activation row. A chunk goes to the
 * type's gemm kernel with all activation rows: it decodes each weight block once per tile of
 * activation rows (8-16, held in registers), not once per activation row. Every row count takes
 * that path when the type has a gemm kernel; the results per row are bit-identical to vec_dot's,
 * so they never depend on the batch (cpu_kernels.h).
 *
 * The dot products and activation quantisers are the best this CPU has (cpu_kernels_get: AVX-512
 * VNNI, AVX2 or scalar, by CPUID). cpu_matmul_ref is the plain reference loop over quant/'s
 * scalar kernels; tests/unit/test_matmul.c compares the two. */
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MM_PAUSE() _mm_pause()
#else
#define MM_PAUSE() ((void)0)
#endif

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "quant/quant.h"

/* NOTE: sizes picked for AVX-512 Xeons (48 KiB L1d, >= 1 MiB L2, shared by two hyper-threads):
 * a 96 KiB prefill chunk per thread leaves L2 room for the activation tiles passing through.
 * Decode chunks are large (capped below at MM_MIN_CHUNKS_PER_THREAD per thread for balance):
 * each thread then streams long runs of consecutive weight rows, which the kernels' software
 * prefetch (4 KiB ahead) and the hardware prefetchers follow; with 16 KiB chunks the two
 * threads' chunks interleaved, a quarter of the prefetches landed in the other thread's chunk
 * and every chunk began cold (TinyLlama q4_0 decode, quiet machine: 27 -> 34 t/s). */
#define MM_CHUNK_DECODE (256 * 1024)
/* up to this many activation rows (batched decode of several sequences) the gemm kernels stream
 * each weight row once per tile without reuse across tiles, so the matmul is bound by DRAM like
 * a single row and takes decode chunks */
#define MM_DECODE_ROWS 16
#define MM_CHUNK_PREFILL (96 * 1024)
#define MM_MIN_CHUNKS_PER_THREAD 4

/* The kernels one matmul uses: where to quantise activations to and how to dot. */
typedef struct {
    const cpu_kernels *ck;
    int64_t x_block; /* elements per block of vec_dot_type */
    size_t x_block_bytes;
} mm_kernels;

/* The fastest kernels this CPU has for weights of type t (cpu_kernels.h, chosen from CPUID). */
static mm_kernels mm_kernels_for(si_type t) {
    const cpu_kernels *ck = cpu_kernels_get(t);
    SI_ASSERT(ck != NULL && ck->vec_dot != NULL && ck->quantize_row != NULL);
    const quant_traits *xt = quant_get(ck->vec_dot_type);
    SI_ASSERT(xt != NULL);
    return (mm_kernels){ck, xt->block_size, (size_t)xt->type_size};
}

/* NOTE: every row count takes gemm where the type has one: decode (one row) too, since its
 * activation row is then rearranged once per matmul instead of once per weight row (q4_0 / q8_0
 * vec_dot rearrange on the fly). gemm and vec_dot give bit-identical results per row
 * (cpu_kernels.h), so the choice is only speed. */
static int mm_uses_gemm(const cpu_kernels *ck) { return ck->gemm != NULL; }

/* bytes of gemm's prepared layout per activation row (0: gemm reads the quantised rows) */
static size_t mm_prep_row(const cpu_kernels *ck, int64_t n_cols) {
    return mm_uses_gemm(ck) && ck->prep_row ? ck->prep_size(n_cols) : 0;
}

#define MM_ALIGN 64 /* the prepared rows start on a cache line */

size_t cpu_matmul_scratch(const si_tensor *W, int n_rows) {
    /* the larger of what the dispatched kernels and the reference quantise to */
    const cpu_kernels *ck = mm_kernels_for(W->type).ck;
    const size_t fast = quant_row_size(ck->vec_dot_type, W->n_cols);
    const size_t ref = quant_row_size(quant_get(W->type)->vec_dot_type, W->n_cols);
    const size_t prep = mm_prep_row(ck, W->n_cols);
    return (fast > ref ? fast : ref) * (size_t)n_rows + (prep ? MM_ALIGN + prep * (size_t)n_rows : 0);
}

/* One weight matrix of a job: its rows are chunks first_chunk .. first_chunk + n_chunks - 1 of
 * the job's chunk numbering. */
typedef struct {
    const uint8_t *w;
    float *out;      /* [n_rows][n_out] */
    int64_t n_out;   /* W's rows */
    int64_t chunk_rows, first_chunk;
} mm_mat;

typedef struct {
    mm_kernels k;
    mm_mat mats[CPU_MATMUL_MAX_MATS];
    int n_mats;
    const float *x;  /* [n_rows][n_cols] */
    uint8_t *xq;     /* [n_rows][xq_row]: x in vec_dot_type */
    uint8_t *xp;     /* [n_rows][xp_row]: xq in gemm's prepared layout (xp_row 0: none) */
    int64_t n_cols;        /* the weights' columns (input) */
    int n_rows;            /* activation rows */
    size_t xq_row, xp_row, w_row; /* bytes per quantised / prepared activation row, weight row */
    int q_parts;           /* pieces each activation row is quantised in */
    int64_t n_chunks;      /* over all matrices */
    atomic_int_fast64_t next_piece; /* the next quantisation piece nobody has claimed */
    atomic_int_fast64_t q_done;     /* quantisation pieces finished */
    atomic_int_fast64_t next_chunk; /* the next weight chunk nobody has claimed */
} mm_job;

/* Phase 1: claims quantisation pieces until none is left, then waits for the others' pieces. */
static void mm_quantise(mm_job *j) {
    const cpu_kernels *ck = j->k.ck;
    const int64_t blocks = j->n_cols / j->k.x_block;
    const int64_t n_pieces = (int64_t)j->n_rows * j->q_parts;
    for (int64_t u; (u = atomic_fetch_add_explicit(&j->next_piece, 1, memory_order_relaxed)) <
                    n_pieces;) {
        const int64_t r = u / j->q_parts;
        int64_t b0, b1;
        pool_split(blocks, (int)(u % j->q_parts), j->q_parts, &b0, &b1);
        uint8_t *xq = j->xq + (size_t)r * j->xq_row;
        if (b1 > b0)
            ck->quantize_row(j->x + r * j->n_cols + b0 * j->k.x_block,
                             xq + (size_t)b0 * j->k.x_block_bytes, (b1 - b0) * j->k.x_block);
        if (j->xp_row) ck->prep_row(xq, j->xp + (size_t)r * j->xp_row, j->n_cols); /* whole rows */
        atomic_fetch_add_explicit(&j->q_done, 1, memory_order_release);
    }
    for (uint32_t i = 0; atomic_load_explicit(&j->q_done, memory_order_acquire) < n_pieces; i++) {
        MM_PAUSE();
        if (i % 1024 == 1023) sched_yield();
    }
}

/* Phase 2 for rows [o0, o1) of matrix m: every activation row. */
static void mm_chunk(const mm_job *j, const mm_mat *m, int64_t o0, int64_t o1) {
    const cpu_kernels *ck = j->k.ck;
    if (!mm_uses_gemm(ck)) {
        for (int r = 0; r < j->n_rows; r++)
            for (int64_t o = o0; o < o1; o++)
                m->out[(size_t)r * m->n_out + o] =
                    ck->vec_dot(m->w + (size_t)o * j->w_row, j->xq + (size_t)r * j->xq_row, j->n_cols);
        return;
    }
    /* gemm decodes each weight block once per group of activation rows; the chunk of weight
     * rows stays in L2 while the activation rows pass */
    cpu_gemm(ck, m->w + (size_t)o0 * j->w_row, j->w_row, (int)(o1 - o0), j->xq, j->xq_row, j->xp,
             j->xp_row, j->n_rows, j->n_cols, m->out + o0, (size_t)m->n_out);
}

static void mm_worker(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    mm_job *j = ctx;
    mm_quantise(j);
    int i = 0; /* chunks are claimed in increasing order: the matrix index only moves forward */
    for (int64_t c; (c = atomic_fetch_add_explicit(&j->next_chunk, 1, memory_order_relaxed)) <
                    j->n_chunks;) {
        while (i + 1 < j->n_mats && c >= j->mats[i + 1].first_chunk) i++;
        const mm_mat *m = &j->mats[i];
        const int64_t o0 = (c - m->first_chunk) * m->chunk_rows;
        const int64_t o1 = o0 + m->chunk_rows < m->n_out ? o0 + m->chunk_rows : m->n_out;
        mm_chunk(j, m, o0, o1);
    }
}

void cpu_matmul_multi(thread_pool *pool, int n_mats, float *const *outs, const si_tensor *const *Ws,
                      const float *x, int n_rows, void *scratch) {
    SI_ASSERT(n_mats >= 1 && n_mats <= CPU_MATMUL_MAX_MATS);
    const si_tensor *W = Ws[0];
    for (int i = 1; i < n_mats; i++)
        SI_ASSERT(Ws[i]->type == W->type && Ws[i]->n_cols == W->n_cols);
    const int nth = pool_size(pool);
    mm_job job = {
        .k = mm_kernels_for(W->type),
        .n_mats = n_mats,
        .x = x,
        .xq = scratch,
        .n_cols = W->n_cols,
        .n_rows = n_rows,
        .w_row = quant_row_size(W->type, W->n_cols),
    };
    job.xq_row = quant_row_size(job.k.ck->vec_dot_type, W->n_cols);
    job.xp_row = mm_prep_row(job.k.ck, W->n_cols);
    if (job.xp_row) {
        const uintptr_t end = (uintptr_t)(job.xq + job.xq_row * (size_t)n_rows);
        job.xp = (uint8_t *)((end + MM_ALIGN - 1) / MM_ALIGN * MM_ALIGN);
    }
    /* with fewer activation rows than threads, split each row's blocks so nobody idles (not
     * when the rows are prepared for gemm: prep_row takes whole rows) */
    job.q_parts = n_rows >= nth || job.xp_row ? 1 : (nth + n_rows - 1) / n_rows;

    const size_t target = n_rows <= MM_DECODE_ROWS ? MM_CHUNK_DECODE : MM_CHUNK_PREFILL;
    for (int i = 0; i < n_mats; i++) {
        mm_mat *m = &job.mats[i];
        m->w = Ws[i]->data;
        m->out = outs[i];
        m->n_out = Ws[i]->n_rows;
        int64_t rows = (int64_t)(target / job.w_row);
        const int64_t balanced = m->n_out / ((int64_t)nth * MM_MIN_CHUNKS_PER_THREAD);
        if (rows > balanced) rows = balanced; /* small matrices: enough chunks for every thread */
        if (rows < 1) rows = 1;
        m->chunk_rows = rows;
        m->first_chunk = job.n_chunks;
        job.n_chunks += (m->n_out + rows - 1) / rows;
    }
    atomic_init(&job.next_piece, 0);
    atomic_init(&job.q_done, 0);
    atomic_init(&job.next_chunk, 0);
    pool_run(pool, mm_worker, &job);
}

void cpu_matmul(thread_pool *pool, float *out, const si_tensor *W, const float *x, int n_rows,
                void *scratch) {
    cpu_matmul_multi(pool, 1, &out, &W, x, n_rows, scratch);
}

void cpu_matmul_ref(float *out, const si_tensor *W, const float *x, int n_rows, void *scratch) {
    const quant_traits *qt = quant_get(W->type);
    const quant_traits *xt = quant_get(qt->vec_dot_type);
    const size_t xq_row = quant_row_size(qt->vec_dot_type, W->n_cols);
    const size_t w_row = quant_row_size(W->type, W->n_cols);
    uint8_t *xq = scratch;
    for (int r = 0; r < n_rows; r++)
        xt->from_float(x + (size_t)r * W->n_cols, xq + (size_t)r * xq_row, W->n_cols);
    for (int r = 0; r < n_rows; r++)
        for (int64_t o = 0; o < W->n_rows; o++)
            out[(size_t)r * W->n_rows + o] = qt->vec_dot(
                (const uint8_t *)W->data + (size_t)o * w_row, xq + (size_t)r * xq_row, W->n_cols);
}
