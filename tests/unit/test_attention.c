/* test_attention.c — cpu_attention_paged (backend/cpu/attention.c): every SIMD level this CPU
 * has against the scalar reference, and the reference against a naive double-precision
 * attention written here.
 *
 * Random q, random f16 K/V pools (values in [-1, 1]) and block tables scattered over the pool
 * (a random permutation of blocks per sequence), over head_dim 64 and 128, GQA ratios
 * n_head / n_head_kv of 1, 3 and 4, context lengths 1, 15, 16, 17 and 300 (a batch of several
 * sequences, each with a few tokens at the end of its context, as prefill and decode make),
 * rope_on_read off and on (NORM and NEOX, partial rope_dim), 1 and 2 threads.
 *
 * Tolerances (absolute, on outputs that are convex combinations of values in [-1, 1]):
 *   SIMD vs reference: 2e-5 + 2 * 2^-11 * w_max (w_max: the head's largest weight, from the
 *     naive attention). Both round q, the rotated keys and the weights to f16 the same way; the
 *     scores differ by float summation order and FMA (~1e-7 relative), which can flip the f16
 *     rounding of a weight by one ulp (2^-11 relative), here allowed for two of the largest.
 *   reference vs naive double: 4e-3, the naive one rounding nothing (f16 query and weights
 *     account for ~1e-3).
 * A key lost, read twice or read from the wrong block or head moves outputs by ~w_i |v| (about
 * 1/n_kv), above both for these lengths. Outputs are poisoned (NaN) before every call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/fp16.h"

#define TEST_RAND_SEED 0x9E3779B97F4A7C15ull
#include "test_rand.h"

#define N_SEQS 3
#define TOKENS_PER_SEQ 3

typedef struct {
    int head_dim, n_head, n_head_kv, n_ctx, rope; /* rope: 0 off, 1 NORM, 2 NEOX */
} attn_case;

/* Naive attention in double: q and weights unrounded, keys rotated (and rounded to f16, as they
 * are stored) with the table when rotate. Returns the largest weight. */
static double naive_head(double *o, const float *qh, const kv_cache *kv, const int32_t *table, int kvh,
                       int n_kv, int rotate, const attn_params *p) {
    const int hd = p->head_dim, bs = kv->block_size;
    double *sc = malloc(sizeof(double) * (size_t)n_kv);
    float *kr = malloc(sizeof(float) * (size_t)hd);
    assert_non_null(sc);
    assert_non_null(kr);
    double max = -INFINITY;
    for (int i = 0; i < n_kv; i++) {
        const uint16_t *kh = kv_cache_k(kv, 0, table[i / bs], i % bs) + (size_t)kvh * hd;
        for (int d = 0; d < hd; d++) kr[d] = fp16_to_fp32(kh[d]);
        if (rotate) {
            const int half = p->rope->rope_dim / 2;
            const float *cs = p->rope_cos + (size_t)i * half, *sn = p->rope_sin + (size_t)i * half;
            for (int k = 0; k < half; k++) {
                const int a = p->rope->style == ROPE_NORM ? 2 * k : k;
                const int b = p->rope->style == ROPE_NORM ? 2 * k + 1 : k + half;
                const float x0 = kr[a], x1 = kr[b];
                kr[a] = fp16_to_fp32(fp32_to_fp16(x0 * cs[k] - x1 * sn[k]));
                kr[b] = fp16_to_fp32(fp32_to_fp16(x0 * sn[k] + x1 * cs[k]));
            }
        }
        double dot = 0;
        for (int d = 0; d < hd; d++) dot += (double)qh[d] * kr[d];
        sc[i] = dot / sqrt((double)hd);
        if (sc[i] > max) max = sc[i];
    }
    double sum = 0, w_max = 0;
    for (int i = 0; i < n_kv; i++) sum += (sc[i] = exp(sc[i] - max));
    for (int i = 0; i < n_kv; i++) w_max = fmax(w_max, sc[i] / sum);
    for (int d = 0; d < hd; d++) o[d] = 0;
    for (int i = 0; i < n_kv; i++) {
        const uint16_t *vh = kv_cache_v(kv, 0, table[i / bs], i % bs) + (size_t)kvh * hd;
        for (int d = 0; d < hd; d++) o[d] += sc[i] / sum * fp16_to_fp32(vh[d]);
    }
    free(sc);
    free(kr);
    return w_max;
}

static void run_case(const attn_case *c, thread_pool *pool) {
    const int hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv, bs = KV_BLOCK_SIZE;
    const int32_t max_kv = c->n_ctx;
    const int max_blocks = (c->n_ctx + bs - 1) / bs;
    const int n_blocks = N_SEQS * max_blocks + 2;
    kv_cache *kv = NULL;
    assert_int_equal(kv_cache_create(1, nkv * hd, n_blocks, bs, &kv), SI_OK);
    const size_t pool_elems = (size_t)n_blocks * bs * nkv * hd;
    for (size_t i = 0; i < pool_elems; i++) {
        kv->k[i] = fp32_to_fp16(rng_sym());
        kv->v[i] = fp32_to_fp16(rng_sym());
    }
    /* scattered block tables: a random permutation of the pool, split between the sequences */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)n_blocks);
    assert_non_null(perm);
    for (int i = 0; i < n_blocks; i++) perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) {
        const int j = (int)(rng_u32() % (uint32_t)(i + 1));
        const int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int32_t table[N_SEQS * 64];
    assert_true(max_blocks <= 64);
    for (int s = 0; s < N_SEQS; s++)
        for (int b = 0; b < max_blocks; b++) table[s * max_blocks + b] = perm[s * max_blocks + b];

    /* the last TOKENS_PER_SEQ positions of each sequence's context (fewer when it is shorter),
     * the sequences interleaved; sequence s has context n_ctx - s (at least 1) */
    int32_t pos[N_SEQS * TOKENS_PER_SEQ], seq[N_SEQS * TOKENS_PER_SEQ], seq_len[N_SEQS];
    uint8_t rope_on_read[N_SEQS];
    int n_tokens = 0;
    for (int k = 0; k < TOKENS_PER_SEQ; k++) {
        for (int s = 0; s < N_SEQS; s++) {
            const int len = c->n_ctx - s > 0 ? c->n_ctx - s : 1;
            seq_len[s] = len;
            rope_on_read[s] = c->rope ? (uint8_t)(s != 1) : 0; /* a mixed batch */
            if (k >= len) continue;
            pos[n_tokens] = len - 1 - k;
            seq[n_tokens] = s;
            n_tokens++;
        }
    }
    si_batch b = {0};
    b.n_tokens = n_tokens;
    b.pos = pos;
    b.seq = seq;
    b.n_seqs = N_SEQS;
    b.seq_len = seq_len;
    b.max_blocks = max_blocks;
    b.block_table = table;
    b.rope_on_read = rope_on_read;

    rope_params rp = {hd, c->rope == 2 ? hd : hd / 2, 10000.0f, 1.0f, NULL,
                      c->rope == 2 ? ROPE_NEOX : ROPE_NORM};
    float *cs = malloc(sizeof(float) * (size_t)max_kv * rp.rope_dim / 2);
    float *sn = malloc(sizeof(float) * (size_t)max_kv * rp.rope_dim / 2);
    assert_non_null(cs);
    assert_non_null(sn);
    cpu_rope_table(cs, sn, max_kv, &rp);
    attn_params p = {nh, nkv, hd, nkv * hd, max_kv, &rp, cs, sn};

    const size_t n_out = (size_t)n_tokens * nh * hd;
    float *q = malloc(sizeof(float) * n_out);
    float *ref = malloc(sizeof(float) * n_out);
    float *out = malloc(sizeof(float) * n_out);
    double *naive = malloc(sizeof(double) * (size_t)hd);
    double *w_max = malloc(sizeof(double) * (size_t)n_tokens * nh); /* [token][head] */
    float *scratch = malloc(cpu_attention_paged_scratch(pool_size(pool), max_kv, hd));
    assert_non_null(q);
    assert_non_null(ref);
    assert_non_null(out);
    assert_non_null(naive);
    assert_non_null(w_max);
    assert_non_null(scratch);
    /* q in [-4.5, 4.5], k in [-1, 1]: scores q.k / sqrt(hd) of standard deviation 1.5, a spread
     * of weights, neither uniform nor one-hot */
    for (size_t i = 0; i < n_out; i++) q[i] = rng_sym() * 4.5f;

    for (size_t i = 0; i < n_out; i++) ref[i] = NAN;
    cpu_attention_paged_isa(pool, ref, q, kv, 0, &b, &p, scratch, CPU_ISA_SCALAR);

    /* the reference against the naive one */
    for (int t = 0; t < n_tokens; t++) {
        for (int h = 0; h < nh; h++) {
            const int s = seq[t];
            w_max[t * nh + h] = naive_head(naive, q + ((size_t)t * nh + h) * hd, kv, table + s * max_blocks,
                       h / (nh / nkv), pos[t] + 1, rope_on_read[s], &p);
            for (int d = 0; d < hd; d++) {
                const float r = ref[((size_t)t * nh + h) * hd + d];
                if (!(fabs(r - naive[d]) <= 4e-3))
                    fail_msg("ref vs naive: hd %d heads %d/%d ctx %d rope %d t %d h %d d %d: %.7g vs %.7g",
                             hd, nh, nkv, c->n_ctx, c->rope, t, h, d, r, naive[d]);
            }
        }
    }
    /* every SIMD level against the reference */
    for (int isa = CPU_ISA_SCALAR + 1; isa <= (int)cpu_isa_detected(); isa++) {
        for (size_t i = 0; i < n_out; i++) out[i] = NAN;
        cpu_attention_paged_isa(pool, out, q, kv, 0, &b, &p, scratch, (cpu_isa)isa);
        for (size_t i = 0; i < n_out; i++) {
            const double e = fabs((double)out[i] - ref[i]);
            if (!(e <= 2e-5 + 2 * 0x1p-11 * w_max[i / (size_t)hd]))
                fail_msg("%s vs ref: hd %d heads %d/%d ctx %d rope %d elem %zu: %.7g vs %.7g",
                         cpu_isa_level_name((cpu_isa)isa), hd, nh, nkv, c->n_ctx, c->rope, i,
                         out[i], ref[i]);
        }
    }
    free(q);
    free(ref);
    free(out);
    free(naive);
    free(w_max);
    free(scratch);
    free(cs);
    free(sn);
    free(perm);
    kv_cache_free(kv);
}

static void test_simd_vs_reference(void **state) {
    (void)state;
    const int hds[] = {64, 128};
    const int gqa[][2] = {{4, 4}, {6, 2}, {8, 2}}; /* ratios 1, 3, 4 */
    const int ctxs[] = {1, 15, 16, 17, 300};
    int n = 0;
    for (int threads = 1; threads <= 2; threads++) {
        thread_pool *pool = NULL;
        assert_int_equal(pool_create(threads, &pool), SI_OK);
        for (size_t a = 0; a < 2; a++)
            for (size_t g = 0; g < 3; g++)
                for (size_t c = 0; c < 5; c++)
                    for (int rope = 0; rope <= 2; rope++, n++) {
                        const attn_case ac = {hds[a], gqa[g][0], gqa[g][1], ctxs[c], rope};
                        run_case(&ac, pool);
                    }
        pool_free(pool);
    }
    print_message("%d cases, levels up to %s\n", n, cpu_isa_level_name(cpu_isa_detected()));
}

/* A head_dim that is not a multiple of a vector width falls back to the reference kernel. */
static void test_odd_head_dim(void **state) {
    (void)state;
    thread_pool *pool = NULL;
    assert_int_equal(pool_create(2, &pool), SI_OK);
    const attn_case ac = {36, 4, 2, 40, 1};
    run_case(&ac, pool);
    pool_free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simd_vs_reference),
        cmocka_unit_test(test_odd_head_dim),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
