/* test_forward_batch.c — forward_batch over ragged batches and paged KV (model/forward.h), on
 * synthetic tiny models (model/synth.h):
 *
 * (a) three sequences of different lengths run together, step by step, in ragged batches that
 *     mix prefill chunks and decodes, with their KV blocks drawn from a shuffled pool (so every
 *     sequence's blocks are scattered and interleaved with the others'), give exactly the logits
 *     of each sequence run alone through si_session. Tolerance 0: every operation but attention
 *     works row by row, and attention reads the same values in the same order through the block
 *     table, so batching must not change a single bit.
 * (b) StreamingLLM re-positioning: a rope_on_read sequence whose block table drops a middle
 *     block gives exactly the logits of a fresh sequence holding only the remaining tokens at
 *     positions 0..n-1. Exact only for a one-layer model: there a token's K/V depend on the
 *     token alone, so re-prefilling the remaining tokens stores the same (un-rotated) K/V. The
 *     same drop with keys stored rotated (rope_on_read=0) must differ (the test can fail), and
 *     rope_on_read=1 without a drop must agree with rope_on_read=0 up to f16 rounding.
 * (c) logits only for the rows asked for, including a row in the middle of a prefill chunk;
 *     nothing written past n_seqs rows or when no row asks.
 * (d) (a) and (b) for the llama (NORM RoPE) and qwen2 (NEOX RoPE, QKV bias, tied) tiny shapes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "core/fp16.h"
#include "model/batch.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/synth.h"
#include "swiftinfer.h"
#define TEST_TMPDIR_NAME "si_test_fwdb"
#include "test_tmpdir.h"

#define N_CTX 256
#define MAX_BLOCKS (N_CTX / KV_BLOCK_SIZE)
#define POOL_BLOCKS 48
#define N_SEQ 3

/* Writes and loads the shape (with n_layer layers when > 0) in q8_0. */
static si_model *load_shape(const char *shape, int n_layer) {
    synth_params p;
    assert_int_equal(synth_params_init(&p, shape), SI_OK);
    p.type = SI_TYPE_Q8_0;
    p.seed = 7;
    if (n_layer > 0) p.dims.n_layer = n_layer;
    char path[320];
    snprintf(path, sizeof path, "%s/%s-%d.gguf", g_dir, shape, n_layer);
    if (synth_write(&p, path)) fail_msg("synth_write %s: %s", path, si_last_error());
    si_model_params mp = si_model_default_params();
    mp.n_ctx = N_CTX;
    mp.n_threads = 3; /* uneven splits of (token, head) work */
    si_model *m = NULL;
    if (si_model_load(path, &mp, &m)) fail_msg("load %s: %s", path, si_last_error());
    return m;
}

static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void random_tokens(int32_t *tok, int n, int32_t n_vocab, uint32_t seed) {
    for (int i = 0; i < n; i++) tok[i] = (int32_t)(lcg(&seed) % (uint32_t)n_vocab);
}

/* Logits after each token of tok[0..n), one si_session_eval per token: [n][n_vocab]. */
static float *session_logits_each(si_model *m, const int32_t *tok, int n) {
    const size_t nv = (size_t)si_model_n_vocab(m);
    float *out = malloc((size_t)n * nv * sizeof *out);
    assert_non_null(out);
    si_session *s = NULL;
    assert_int_equal(si_session_create(m, &s), SI_OK);
    for (int i = 0; i < n; i++) {
        assert_int_equal(si_session_eval(s, tok + i, 1), SI_OK);
        memcpy(out + (size_t)i * nv, si_session_logits(s), nv * sizeof *out);
    }
    si_session_free(s);
    return out;
}

/* Fails unless a and b are bit-identical, reporting the largest difference. */
static void assert_same_logits(const float *a, const float *b, size_t n, const char *what) {
    if (memcmp(a, b, n * sizeof *a) == 0) return;
    double d = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)a[i] - b[i]) > d || isnan(a[i]) != isnan(b[i])) d = fabs((double)a[i] - b[i]);
    fail_msg("%s: logits differ (max |diff| %g)", what, d);
}

/* A KV pool whose free list is a shuffled permutation of the block ids, poisoned (f16 NaN) so
 * that reading a slot nobody wrote shows up in the logits. */
typedef struct pool {
    kv_cache *kv;
    int32_t free_list[POOL_BLOCKS];
    int next;
} pool;

static void pool_init(pool *p, const si_model *m, uint32_t seed) {
    const int32_t kv_dim = m->hp.n_head_kv * m->hp.head_dim;
    assert_int_equal(kv_cache_create(m->hp.n_layer, kv_dim, POOL_BLOCKS, KV_BLOCK_SIZE, &p->kv),
                     SI_OK);
    const size_t elems = (size_t)m->hp.n_layer * POOL_BLOCKS * KV_BLOCK_SIZE * kv_dim;
    memset(p->kv->k, 0xff, elems * sizeof(uint16_t));
    memset(p->kv->v, 0xff, elems * sizeof(uint16_t));
    for (int i = 0; i < POOL_BLOCKS; i++) p->free_list[i] = i;
    for (int i = POOL_BLOCKS - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)(lcg(&seed) % (uint32_t)(i + 1));
        int32_t t = p->free_list[i];
        p->free_list[i] = p->free_list[j];
        p->free_list[j] = t;
    }
    p->next = 0;
}

static int32_t pool_take(pool *p) {
    assert_true(p->next < POOL_BLOCKS);
    return p->free_list[p->next++];
}

/* A batch under construction; the per-sequence arrays are indexed by batch sequence index. */
typedef struct batch_buf {
    int32_t token[64], pos[64], seq[64];
    int32_t seq_len[N_SEQ], block_table[N_SEQ * MAX_BLOCKS], logits_row[N_SEQ];
    uint8_t rope_on_read[N_SEQ];
    si_batch b;
} batch_buf;

static void batch_begin(batch_buf *bb) {
    memset(bb, 0, sizeof *bb);
    bb->b = (si_batch){.token = bb->token, .pos = bb->pos, .seq = bb->seq,
                       .seq_len = bb->seq_len, .max_blocks = MAX_BLOCKS,
                       .block_table = bb->block_table, .rope_on_read = bb->rope_on_read,
                       .logits_row = bb->logits_row};
}

/* Adds tok[0..n) at positions pos0.. of a sequence with block table `table` (blocks taken from
 * the pool as positions enter new blocks); returns its batch sequence index. Its logits row is
 * the chunk's last token. */
static int batch_add(batch_buf *bb, pool *p, int32_t *table, const int32_t *tok, int n,
                     int32_t pos0, uint8_t rope_on_read) {
    const int s = bb->b.n_seqs++;
    assert_true(s < N_SEQ && bb->b.n_tokens + n <= 64);
    for (int i = 0; i < n; i++) {
        const int32_t pos = pos0 + i;
        if (table[pos / KV_BLOCK_SIZE] < 0) table[pos / KV_BLOCK_SIZE] = pool_take(p);
        bb->token[bb->b.n_tokens] = tok[i];
        bb->pos[bb->b.n_tokens] = pos;
        bb->seq[bb->b.n_tokens] = s;
        bb->b.n_tokens++;
    }
    bb->seq_len[s] = pos0 + n;
    memcpy(bb->block_table + (size_t)s * MAX_BLOCKS, table, MAX_BLOCKS * sizeof(int32_t));
    bb->logits_row[s] = bb->b.n_tokens - 1;
    bb->rope_on_read[s] = rope_on_read;
    return s;
}

static void table_init(int32_t *table) {
    for (int i = 0; i < MAX_BLOCKS; i++) table[i] = -1;
}

/* ---- (a) ragged batches vs one sequence at a time ------------------------------------------- */

static void test_ragged_vs_session(void **state) {
    const char *shape = *state;
    si_model *m = load_shape(shape, 0);
    const size_t nv = (size_t)m->hp.n_vocab;
    /* prompt lengths, total lengths (the rest are decodes), first step */
    const int n_prompt[N_SEQ] = {37, 70, 5}, n_total[N_SEQ] = {45, 75, 30};
    const int start[N_SEQ] = {0, 2, 0};
    const int budget = 20; /* tokens per step: B's 70-token prompt takes four chunks */
    int32_t *tok[N_SEQ];
    float *ref[N_SEQ];
    for (int s = 0; s < N_SEQ; s++) {
        tok[s] = malloc(sizeof(int32_t) * (size_t)n_total[s]);
        random_tokens(tok[s], n_total[s], m->hp.n_vocab, 100u + (uint32_t)s);
        ref[s] = session_logits_each(m, tok[s], n_total[s]);
    }

    pool p;
    pool_init(&p, m, 2024);
    forward_scratch *ws = NULL;
    assert_int_equal(forward_scratch_create(m, 64, N_SEQ, N_CTX, &ws), SI_OK);
    float *logits = malloc(N_SEQ * nv * sizeof *logits);
    int32_t table[N_SEQ][MAX_BLOCKS];
    int done[N_SEQ] = {0};
    for (int s = 0; s < N_SEQ; s++) table_init(table[s]);

    int compared = 0, mixed_steps = 0;
    for (int step = 0; done[0] < n_total[0] || done[1] < n_total[1] || done[2] < n_total[2];
         step++) {
        batch_buf bb;
        batch_begin(&bb);
        int who[N_SEQ], chunk[N_SEQ], left = budget, n_prefill = 0, n_decode = 0;
        /* as a continuous-batching scheduler does: decodes first, then prefill chunks under
         * the token budget; a different sequence order every step */
        for (int pass = 0; pass < 2; pass++) {
            for (int k = 0; k < N_SEQ; k++) {
                const int s = (k + step) % N_SEQ;
                const bool decoding = done[s] >= n_prompt[s];
                if (step < start[s] || done[s] == n_total[s] || left == 0) continue;
                if (decoding != (pass == 0)) continue;
                int c = decoding ? 1 : n_prompt[s] - done[s];
                if (c > left) c = left;
                const int bi = batch_add(&bb, &p, table[s], tok[s] + done[s], c, done[s], 0);
                who[bi] = s;
                chunk[bi] = c;
                left -= c;
                if (decoding) n_decode++; else n_prefill++;
            }
        }
        if (n_prefill && n_decode) mixed_steps++;
        memset(logits, 0xff, N_SEQ * nv * sizeof *logits);
        forward_batch(m, p.kv, &bb.b, ws, logits);
        for (int bi = 0; bi < bb.b.n_seqs; bi++) {
            const int s = who[bi];
            done[s] += chunk[bi];
            char what[96];
            snprintf(what, sizeof what, "%s step %d seq %d after %d tokens", shape, step, s,
                     done[s]);
            assert_same_logits(logits + (size_t)bi * nv, ref[s] + (size_t)(done[s] - 1) * nv,
                               nv, what);
            compared++;
        }
    }
    assert_true(mixed_steps >= 3);
    assert_true(compared >= 40);
    /* the blocks really are scattered: some sequence's consecutive blocks are not adjacent */
    int scattered = 0;
    for (int s = 0; s < N_SEQ; s++)
        for (int i = 1; i < MAX_BLOCKS && table[s][i] >= 0; i++)
            scattered += table[s][i] != table[s][i - 1] + 1;
    assert_true(scattered > 0);

    free(logits);
    forward_scratch_free(ws);
    kv_cache_free(p.kv);
    for (int s = 0; s < N_SEQ; s++) {
        free(tok[s]);
        free(ref[s]);
    }
    si_model_free(m);
}

/* ---- (b) StreamingLLM: dropping a block of a rope_on_read sequence ------------------------ */

/* Prefills tok[0..n) at positions 0.. of a fresh sequence (table) in one batch. */
static void prefill(si_model *m, pool *p, forward_scratch *ws, int32_t *table, const int32_t *tok,
                    int n, uint8_t rope_on_read, float *logits) {
    batch_buf bb;
    batch_begin(&bb);
    batch_add(&bb, p, table, tok, n, 0, rope_on_read);
    forward_batch(m, p->kv, &bb.b, ws, logits);
}

/* Decodes one token at pos with the given table; logits out. */
static void decode(si_model *m, pool *p, forward_scratch *ws, int32_t *table, int32_t token,
                   int32_t pos, uint8_t rope_on_read, float *logits) {
    batch_buf bb;
    batch_begin(&bb);
    batch_add(&bb, p, table, &token, 1, pos, rope_on_read);
    forward_batch(m, p->kv, &bb.b, ws, logits);
}

/* max |a - b| / (max(ref) - min(ref)) */
static double rel_diff(const float *a, const float *ref, size_t n) {
    float lo = ref[0], hi = ref[0];
    double d = 0.0;
    for (size_t i = 0; i < n; i++) {
        assert_true(isfinite(a[i]) && isfinite(ref[i]));
        if (ref[i] < lo) lo = ref[i];
        if (ref[i] > hi) hi = ref[i];
        if (fabs((double)a[i] - ref[i]) > d) d = fabs((double)a[i] - ref[i]);
    }
    assert_true(hi > lo);
    return d / (hi - lo);
}

static void test_drop_block_repositions(void **state) {
    const char *shape = *state;
    si_model *m = load_shape(shape, 1);
    const size_t nv = (size_t)m->hp.n_vocab;
    enum { N = 40, KEEP = N - KV_BLOCK_SIZE }; /* 40 tokens in 3 blocks; drop block 1 */
    int32_t tok[N + 1];
    random_tokens(tok, N + 1, m->hp.n_vocab, 555u);
    const int32_t next = tok[N];
    int32_t kept[KEEP]; /* tokens 0..15 and 32..39 */
    for (int i = 0; i < KEEP; i++) kept[i] = tok[i < KV_BLOCK_SIZE ? i : i + KV_BLOCK_SIZE];

    pool p;
    pool_init(&p, m, 99);
    forward_scratch *ws = NULL;
    assert_int_equal(forward_scratch_create(m, 64, 1, N_CTX, &ws), SI_OK);
    float *dropped = malloc(nv * sizeof(float)), *fresh = malloc(nv * sizeof(float));
    float *rotated_drop = malloc(nv * sizeof(float)), *full = malloc(nv * sizeof(float));
    float *scratch = malloc(nv * sizeof(float));

    /* the streaming sequence: 40 tokens, then block 1 (positions 16..31) dropped; the tokens of
     * block 2 are now at positions 16..23 and the next token goes to 24 */
    int32_t t_stream[MAX_BLOCKS];
    table_init(t_stream);
    prefill(m, &p, ws, t_stream, tok, N, 1, scratch);
    for (int i = 1; i < MAX_BLOCKS - 1; i++) t_stream[i] = t_stream[i + 1];
    decode(m, &p, ws, t_stream, next, KEEP, 1, dropped);

    /* a fresh sequence holding only the remaining tokens at 0..23 */
    int32_t t_fresh[MAX_BLOCKS];
    table_init(t_fresh);
    prefill(m, &p, ws, t_fresh, kept, KEEP, 1, scratch);
    decode(m, &p, ws, t_fresh, next, KEEP, 1, fresh);
    assert_same_logits(dropped, fresh, nv, "dropped block vs fresh re-prefill");

    /* control: the same drop with keys stored rotated at their old positions differs */
    int32_t t_rot[MAX_BLOCKS];
    table_init(t_rot);
    prefill(m, &p, ws, t_rot, tok, N, 0, scratch);
    for (int i = 1; i < MAX_BLOCKS - 1; i++) t_rot[i] = t_rot[i + 1];
    decode(m, &p, ws, t_rot, next, KEEP, 0, rotated_drop);
    assert_true(rel_diff(rotated_drop, fresh, nv) > 1e-4);

    /* control: without the drop the logits differ too (the dropped tokens mattered) */
    int32_t t_full[MAX_BLOCKS];
    table_init(t_full);
    prefill(m, &p, ws, t_full, tok, N, 1, scratch);
    decode(m, &p, ws, t_full, next, N, 1, full);
    assert_true(rel_diff(full, fresh, nv) > 1e-4);

    free(dropped);
    free(fresh);
    free(rotated_drop);
    free(full);
    free(scratch);
    forward_scratch_free(ws);
    kv_cache_free(p.kv);
    si_model_free(m);
}

/* rope_on_read=1 rotates the f16 key where rope_on_read=0 stores the f16 of the rotated key:
 * the same computation up to one f16 rounding of each key. Checked directly on the layer-0
 * keys (within one f16 ulp), then on the logits of the full two-layer model: these move more
 * than the keys (measured 4.8e-3 of the range on tiny and tiny-qwen2) because a key's last bit
 * can flip the f16 rounding of a softmax weight and the q8_0 rounding of a whole activation
 * block downstream; the bound leaves 4x room. */
static void test_rope_on_read_matches_rotated(void **state) {
    const char *shape = *state;
    si_model *m = load_shape(shape, 0);
    const size_t nv = (size_t)m->hp.n_vocab;
    enum { N = 50 };
    int32_t tok[N];
    random_tokens(tok, N, m->hp.n_vocab, 31337u);
    pool p;
    pool_init(&p, m, 5);
    forward_scratch *ws = NULL;
    assert_int_equal(forward_scratch_create(m, 64, 1, N_CTX, &ws), SI_OK);
    float *a = malloc(nv * sizeof(float)), *b = malloc(nv * sizeof(float));
    int32_t ta[MAX_BLOCKS], tb[MAX_BLOCKS];
    table_init(ta);
    table_init(tb);
    prefill(m, &p, ws, ta, tok, N - 1, 0, a);
    decode(m, &p, ws, ta, tok[N - 1], N - 1, 0, a);
    prefill(m, &p, ws, tb, tok, N - 1, 1, b);
    decode(m, &p, ws, tb, tok[N - 1], N - 1, 1, b);
    /* layer 0: the stored un-rotated key, rotated by cpu_rope at its slot, is the stored rotated
     * key up to the f16 rounding of each (keys there depend on the token alone) */
    const model_hparams *hp = &m->hp;
    const rope_params rp = {hp->head_dim, hp->rope_dim, hp->rope_freq_base, hp->rope_freq_scale,
                            m->rope_freqs, hp->rope};
    const int kv_dim = p.kv->kv_dim;
    float *k = malloc((size_t)kv_dim * sizeof *k);
    double kerr = 0.0, kmax = 0.0;
    for (int pos = 0; pos < N; pos++) {
        const int blk = pos / KV_BLOCK_SIZE, slot = pos % KV_BLOCK_SIZE;
        const uint16_t *rot = kv_cache_k(p.kv, 0, ta[blk], slot);
        const uint16_t *raw = kv_cache_k(p.kv, 0, tb[blk], slot);
        for (int i = 0; i < kv_dim; i++) k[i] = fp16_to_fp32(raw[i]);
        cpu_rope(k, hp->n_head_kv, pos, &rp);
        for (int i = 0; i < kv_dim; i++) {
            const double e = fabs((double)k[i] - fp16_to_fp32(rot[i]));
            if (e > kerr) kerr = e;
            if (fabs(k[i]) > kmax) kmax = fabs(k[i]);
        }
    }
    free(k);
    print_message("%s: layer-0 keys: max |diff| %.3g, max |k| %.3g\n", shape, kerr, kmax);
    const double d = rel_diff(b, a, nv);
    print_message("%s: rope_on_read vs rotated keys: max diff / range %.3g\n", shape, d);
    assert_true(kerr <= kmax / 1024.0); /* one f16 ulp at the largest key */
    assert_true(d < 2e-2);
    free(a);
    free(b);
    forward_scratch_free(ws);
    kv_cache_free(p.kv);
    si_model_free(m);
}

/* ---- (c) logits only for the rows asked for ------------------------------------------------ */

static void test_logits_rows(void **state) {
    (void)state;
    si_model *m = load_shape("tiny", 0);
    const size_t nv = (size_t)m->hp.n_vocab;
    int32_t tok[N_SEQ][12];
    float *ref[N_SEQ];
    for (int s = 0; s < N_SEQ; s++) {
        random_tokens(tok[s], 12, m->hp.n_vocab, 7u + (uint32_t)s);
        ref[s] = session_logits_each(m, tok[s], 12);
    }
    pool p;
    pool_init(&p, m, 11);
    forward_scratch *ws = NULL;
    assert_int_equal(forward_scratch_create(m, 64, N_SEQ, N_CTX, &ws), SI_OK);
    /* one row past the n_seqs rows, to see that nothing is written there */
    float *logits = malloc((N_SEQ + 1) * nv * sizeof *logits);
    float *poison = malloc((N_SEQ + 1) * nv * sizeof *poison);
    memset(poison, 0xff, (N_SEQ + 1) * nv * sizeof *poison);

    /* a batch asking for nothing writes nothing */
    int32_t table[N_SEQ][MAX_BLOCKS];
    batch_buf bb;
    batch_begin(&bb);
    for (int s = 0; s < N_SEQ; s++) {
        table_init(table[s]);
        batch_add(&bb, &p, table[s], tok[s], 6, 0, 0);
        bb.logits_row[s] = -1;
    }
    memcpy(logits, poison, (N_SEQ + 1) * nv * sizeof *logits);
    forward_batch(m, p.kv, &bb.b, ws, logits);
    assert_memory_equal(logits, poison, (N_SEQ + 1) * nv * sizeof *logits);

    /* the rest of the prompts; sequence 0 wants the logits of its 9th token (mid-chunk),
     * sequence 1 none, sequence 2 its last */
    batch_begin(&bb);
    const int r0 = batch_add(&bb, &p, table[0], tok[0] + 6, 6, 6, 0);
    bb.logits_row[r0] = 2; /* token 8 of sequence 0 */
    const int r1 = batch_add(&bb, &p, table[1], tok[1] + 6, 6, 6, 0);
    bb.logits_row[r1] = -1;
    batch_add(&bb, &p, table[2], tok[2] + 6, 6, 6, 0);
    memcpy(logits, poison, (N_SEQ + 1) * nv * sizeof *logits);
    forward_batch(m, p.kv, &bb.b, ws, logits);
    assert_same_logits(logits, ref[0] + 8 * nv, nv, "mid-chunk row");
    assert_same_logits(logits + 2 * nv, ref[2] + 11 * nv, nv, "last row");
    /* NOTE: rows of sequences that ask for none hold unspecified values (the output matmul
     * writes its rows compactly first), but nothing is written past row n_seqs - 1 */
    assert_memory_equal(logits + N_SEQ * nv, poison, nv * sizeof *logits);

    /* and their caches are complete: a decode of each sequence matches the session */
    batch_begin(&bb);
    for (int s = 0; s < N_SEQ; s++) batch_add(&bb, &p, table[s], &tok[s][11], 1, 11, 0);
    /* re-evaluating token 11 at slot 11 rewrites the same K/V, so this is its logits again */
    forward_batch(m, p.kv, &bb.b, ws, logits);
    for (int s = 0; s < N_SEQ; s++)
        assert_same_logits(logits + (size_t)s * nv, ref[s] + 11 * nv, nv, "re-decode");

    free(logits);
    free(poison);
    forward_scratch_free(ws);
    kv_cache_free(p.kv);
    for (int s = 0; s < N_SEQ; s++) free(ref[s]);
    si_model_free(m);
}

int main(void) {
    static const char *const shapes[] = {"tiny", "tiny-qwen2"};
    struct CMUnitTest tests[8];
    size_t n = 0;
    for (size_t i = 0; i < 2; i++) {
        struct CMUnitTest a = cmocka_unit_test_prestate(test_ragged_vs_session, (void *)shapes[i]);
        struct CMUnitTest b = cmocka_unit_test_prestate(test_drop_block_repositions,
                                                        (void *)shapes[i]);
        struct CMUnitTest c = cmocka_unit_test_prestate(test_rope_on_read_matches_rotated,
                                                        (void *)shapes[i]);
        a.name = i ? "ragged_vs_session/tiny-qwen2" : "ragged_vs_session/tiny";
        b.name = i ? "drop_block_repositions/tiny-qwen2" : "drop_block_repositions/tiny";
        c.name = i ? "rope_on_read_vs_rotated/tiny-qwen2" : "rope_on_read_vs_rotated/tiny";
        tests[n++] = a;
        tests[n++] = b;
        tests[n++] = c;
    }
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_logits_rows);
    return _cmocka_run_group_tests("forward_batch", tests, n, setup_dir, teardown_dir);
}
