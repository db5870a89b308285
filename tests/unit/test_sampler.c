/* test_sampler.c — the si_sampler_* chain: greedy, top-k/top-p/min-p, penalties, determinism,
 * the empirical distribution against the softmax, and parameter checks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "swiftinfer.h"

/* Plain multinomial sampling: no truncation, temperature t. */
static si_sampling_params plain_params(float t, uint64_t seed) {
    si_sampling_params p = si_sampling_default_params();
    p.temperature = t;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

static si_sampler *make(const si_sampling_params *p, int32_t n_vocab) {
    si_sampler *s = NULL;
    si_status st = si_sampler_create(p, n_vocab, &s);
    if (st != SI_OK) fail_msg("si_sampler_create: %s", si_last_error());
    return s;
}

/* Deterministic pseudo-random logits in [-5, 5). */
static void fill_logits(float *l, int n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        l[i] = (float)(x >> 8) / 16777216.0f * 10.0f - 5.0f;
    }
}

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static void test_defaults(void **state) {
    (void)state;
    si_sampling_params p = si_sampling_default_params();
    assert_true(fabsf(p.temperature - 0.8f) < 1e-6f);
    assert_int_equal(p.top_k, 40);
    assert_true(fabsf(p.top_p - 0.95f) < 1e-6f);
    assert_true(fabsf(p.min_p - 0.05f) < 1e-6f);
    assert_true(p.repetition_penalty == 1.0f);
    assert_true(p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f);
    assert_int_equal(p.penalty_last_n, 64);
}

static void test_greedy_argmax(void **state) {
    (void)state;
    enum { N = 1000 };
    float l[N];
    si_sampling_params p = plain_params(0.0f, 1);
    si_sampler *s = make(&p, N);
    for (uint32_t k = 0; k < 20; k++) {
        fill_logits(l, N, k);
        assert_int_equal(si_sampler_sample(s, l, NULL, 0), argmax(l, N));
    }
    si_sampler_free(s);
    /* ties: lowest id */
    float t[5] = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
    s = make(&p, 5);
    assert_int_equal(si_sampler_sample(s, t, NULL, 0), 1);
    si_sampler_free(s);
}

static void test_top_k_1_is_greedy(void **state) {
    (void)state;
    enum { N = 500 };
    float l[N];
    const float temps[] = {0.1f, 1.0f, 5.0f, 100.0f};
    for (size_t ti = 0; ti < sizeof temps / sizeof temps[0]; ti++) {
        si_sampling_params p = plain_params(temps[ti], 42 + ti);
        p.top_k = 1;
        si_sampler *s = make(&p, N);
        for (uint32_t k = 0; k < 50; k++) {
            fill_logits(l, N, k + 100);
            assert_int_equal(si_sampler_sample(s, l, NULL, 0), argmax(l, N));
        }
        si_sampler_free(s);
    }
}

/* top_k = k at a huge temperature: only the k best ids come out, and all of them do. */
static void test_top_k_set(void **state) {
    (void)state;
    enum { N = 1000, K = 10, DRAWS = 4000 };
    float l[N];
    fill_logits(l, N, 7);
    /* the K best ids by brute force */
    int best[K];
    char used[N] = {0};
    for (int j = 0; j < K; j++) {
        int b = -1;
        for (int i = 0; i < N; i++)
            if (!used[i] && (b < 0 || l[i] > l[b])) b = i;
        used[b] = 1;
        best[j] = b;
    }
    si_sampling_params p = plain_params(1000.0f, 3);
    p.top_k = K;
    si_sampler *s = make(&p, N);
    int seen[N] = {0};
    for (int d = 0; d < DRAWS; d++) {
        int32_t t = si_sampler_sample(s, l, NULL, 0);
        assert_true(t >= 0 && t < N);
        assert_true(used[t]);
        seen[t]++;
    }
    for (int j = 0; j < K; j++)
        assert_true(seen[best[j]] > 0);
    si_sampler_free(s);
}

static void test_top_p_tiny_keeps_max(void **state) {
    (void)state;
    enum { N = 300 };
    float l[N];
    si_sampling_params p = plain_params(10.0f, 9);
    p.top_p = 1e-6f;
    si_sampler *s = make(&p, N);
    for (uint32_t k = 0; k < 50; k++) {
        fill_logits(l, N, k + 500);
        assert_int_equal(si_sampler_sample(s, l, NULL, 0), argmax(l, N));
    }
    si_sampler_free(s);
}

/* probs of logits {log .5, log .3, log .15, log .05}: top_p = 0.7 keeps {0, 1} (0.5 < 0.7 <= 0.8).
 */
static void test_top_p_nucleus(void **state) {
    (void)state;
    float l[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    si_sampling_params p = plain_params(1.0f, 11);
    p.top_p = 0.7f;
    si_sampler *s = make(&p, 4);
    int seen[4] = {0};
    for (int d = 0; d < 5000; d++)
        seen[si_sampler_sample(s, l, NULL, 0)]++;
    assert_true(seen[0] > 0 && seen[1] > 0);
    assert_int_equal(seen[2], 0);
    assert_int_equal(seen[3], 0);
    /* renormalised 0.5/0.8 = 0.625 */
    assert_true(fabs(seen[0] / 5000.0 - 0.625) < 0.03);
    si_sampler_free(s);
}

/* min_p = 0.2 with probs {.4, .3, .1, .07, ...}: threshold .08 keeps {0, 1, 2} only. */
static void test_min_p_filters(void **state) {
    (void)state;
    float l[6] = {logf(0.4f), logf(0.3f), logf(0.1f), logf(0.07f), logf(0.07f), logf(0.06f)};
    si_sampling_params p = plain_params(1.0f, 5);
    p.min_p = 0.2f;
    si_sampler *s = make(&p, 6);
    int seen[6] = {0};
    for (int d = 0; d < 5000; d++)
        seen[si_sampler_sample(s, l, NULL, 0)]++;
    assert_true(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    assert_int_equal(seen[3] + seen[4] + seen[5], 0);
    si_sampler_free(s);

    /* min_p = 0: nothing filtered, the small ones do come out */
    p.min_p = 0.0f;
    s = make(&p, 6);
    memset(seen, 0, sizeof seen);
    for (int d = 0; d < 5000; d++)
        seen[si_sampler_sample(s, l, NULL, 0)]++;
    assert_true(seen[3] > 0 && seen[4] > 0 && seen[5] > 0);
    si_sampler_free(s);
}

static int32_t greedy_with(float rep, float freq, float pres, int32_t last_n, const float *l, int n,
                           const int32_t *hist, int n_hist) {
    si_sampling_params p = plain_params(0.0f, 1);
    p.repetition_penalty = rep;
    p.frequency_penalty = freq;
    p.presence_penalty = pres;
    p.penalty_last_n = last_n;
    si_sampler *s = make(&p, n);
    int32_t t = si_sampler_sample(s, l, hist, n_hist);
    si_sampler_free(s);
    return t;
}

static void test_penalties(void **state) {
    (void)state;
    /* repetition, positive logit: 2.0 / 1.5 = 1.333 < 1.9 */
    float a[3] = {2.0f, 1.9f, -3.0f};
    int32_t h0[1] = {0};
    assert_int_equal(greedy_with(1.0f, 0, 0, 64, a, 3, h0, 1), 0);
    assert_int_equal(greedy_with(1.5f, 0, 0, 64, a, 3, h0, 1), 1);
    assert_int_equal(greedy_with(1.04f, 0, 0, 64, a, 3, h0, 1), 0); /* 2/1.04 = 1.923 > 1.9 */
    /* repetition, negative logit: -1.0 * 1.5 = -1.5 < -1.2 */
    float b[2] = {-1.0f, -1.2f};
    assert_int_equal(greedy_with(1.0f, 0, 0, 64, b, 2, h0, 1), 0);
    assert_int_equal(greedy_with(1.5f, 0, 0, 64, b, 2, h0, 1), 1);
    /* frequency: 3.0 - 3 * 0.4 = 1.8 < 2.0; 3.0 - 3 * 0.3 = 2.1 > 2.0 */
    float c[2] = {3.0f, 2.0f};
    int32_t h3[3] = {0, 0, 0};
    assert_int_equal(greedy_with(1.0f, 0.4f, 0, 64, c, 2, h3, 3), 1);
    assert_int_equal(greedy_with(1.0f, 0.3f, 0, 64, c, 2, h3, 3), 0);
    /* presence does not scale with the count: 3.0 - 0.6 = 2.4 < 2.5; 3.0 - 0.4 = 2.6 > 2.5 */
    float d[2] = {3.0f, 2.5f};
    assert_int_equal(greedy_with(1.0f, 0, 0.6f, 64, d, 2, h3, 3), 1);
    assert_int_equal(greedy_with(1.0f, 0, 0.4f, 64, d, 2, h3, 3), 0);
    /* all three: 3.0 / 1.2 = 2.5, - 2 * 0.1 - 0.2 = 2.1 < 2.2 (token 1 seen once: 2.2/1.2 - .3 =
     * 1.533) */
    float e[3] = {3.0f, 2.2f, 2.15f};
    int32_t h4[3] = {0, 1, 0};
    assert_int_equal(greedy_with(1.2f, 0.1f, 0.2f, 64, e, 3, h4, 3), 2);
    /* the window: token 0 only before the last 2 history tokens is not penalised */
    int32_t h5[4] = {0, 0, 2, 2};
    assert_int_equal(greedy_with(1.5f, 0, 0, 2, a, 3, h5, 4), 0);
    assert_int_equal(greedy_with(1.5f, 0, 0, 3, a, 3, h5, 4), 1);
    assert_int_equal(greedy_with(1.5f, 0, 0, -1, a, 3, h5, 4), 1);
    assert_int_equal(greedy_with(1.5f, 0, 0, 0, a, 3, h5, 4), 0);
    /* out-of-vocabulary history ids are ignored */
    int32_t hbad[3] = {-1, 7, 99};
    assert_int_equal(greedy_with(1.5f, 1.0f, 1.0f, 64, a, 3, hbad, 3), 0);
    /* the caller's logits are not modified */
    float keep[3] = {2.0f, 1.9f, -3.0f};
    (void)greedy_with(1.5f, 0.5f, 0.5f, 64, a, 3, h3, 3);
    assert_memory_equal(a, keep, sizeof keep);
}

/* Logit biases: added to their tokens' logits before the penalties (llama.cpp's and vLLM's
 * order), copied at creation (the caller's array may change after). */
static void test_logit_bias(void **state) {
    (void)state;
    float a[3] = {2.0f, 1.9f, -3.0f};
    si_sampling_params p = plain_params(0.0f, 1);
    si_logit_bias lb[2] = {{0, -0.2f}, {2, 5.5f}};
    p.logit_bias = lb;
    p.n_logit_bias = 1; /* 2.0 - 0.2 = 1.8 < 1.9 */
    si_sampler *s = make(&p, 3);
    lb[0].bias = 0.0f; /* the sampler kept its own copy */
    assert_int_equal(si_sampler_sample(s, a, NULL, 0), 1);
    si_sampler_free(s);
    lb[0].bias = -0.2f;
    p.n_logit_bias = 2; /* -3.0 + 5.5 = 2.5: the highest */
    s = make(&p, 3);
    assert_int_equal(si_sampler_sample(s, a, NULL, 0), 2);
    si_sampler_free(s);
    /* the order: (3 - 2) / 2 = 0.5 > 0 picks token 0; the penalty first (3 / 2 - 2 = -0.5)
     * would pick token 1 */
    float b[2] = {3.0f, 0.0f};
    si_logit_bias lb0 = {0, -2.0f};
    p.logit_bias = &lb0;
    p.n_logit_bias = 1;
    p.repetition_penalty = 2.0f;
    int32_t h0[1] = {0};
    s = make(&p, 2);
    assert_int_equal(si_sampler_sample(s, b, h0, 1), 0);
    si_sampler_free(s);
    /* the caller's logits are not modified */
    const float keep[3] = {2.0f, 1.9f, -3.0f};
    assert_memory_equal(a, keep, sizeof keep);
}

/* The penalties are recomputed from history at each call: counts must not leak between calls. */
static void test_penalties_stateless(void **state) {
    (void)state;
    float a[3] = {2.0f, 1.9f, -3.0f};
    int32_t h0[1] = {0};
    si_sampling_params p = plain_params(0.0f, 1);
    p.frequency_penalty = 0.06f; /* one count: 1.94 > 1.9; two counts would give 1.88 < 1.9 */
    si_sampler *s = make(&p, 3);
    for (int i = 0; i < 5; i++)
        assert_int_equal(si_sampler_sample(s, a, h0, 1), 0);
    si_sampler_free(s);
}

static void draw_seq(uint64_t seed, int32_t *out, int n) {
    enum { N = 64 };
    float l[N];
    fill_logits(l, N, 1234);
    si_sampling_params p = si_sampling_default_params();
    p.temperature = 1.5f;
    p.seed = seed;
    si_sampler *s = make(&p, N);
    for (int i = 0; i < n; i++)
        out[i] = si_sampler_sample(s, l, out, i);
    si_sampler_free(s);
}

static void test_seed_determinism(void **state) {
    (void)state;
    enum { D = 1000 };
    static int32_t a[D], b[D], c[D];
    draw_seq(1234, a, D);
    draw_seq(1234, b, D);
    draw_seq(1235, c, D);
    assert_memory_equal(a, b, sizeof a);
    int differ = 0;
    for (int i = 0; i < D; i++)
        differ += a[i] != c[i];
    assert_true(differ > D / 10);
    /* the sequence is not constant either */
    int changes = 0;
    for (int i = 1; i < D; i++)
        changes += a[i] != a[i - 1];
    assert_true(changes > D / 10);
}

/* 20000 draws from softmax(l / T) over 4 tokens: max |freq - p| < 0.02 (about 5.5 sigma at
 * p = 0.5) and Pearson's chi-square below 16.27 (3 degrees of freedom, p = 0.001). */
static void check_distribution(const float *l, float temp, uint64_t seed) {
    enum { D = 20000 };
    double e[4], sum = 0.0;
    for (int i = 0; i < 4; i++)
        sum += e[i] = exp((double)l[i] / temp);
    for (int i = 0; i < 4; i++)
        e[i] /= sum;
    si_sampling_params p = plain_params(temp, seed);
    si_sampler *s = make(&p, 4);
    int seen[4] = {0};
    for (int d = 0; d < D; d++)
        seen[si_sampler_sample(s, l, NULL, 0)]++;
    si_sampler_free(s);
    double chi2 = 0.0, maxdiff = 0.0;
    for (int i = 0; i < 4; i++) {
        double f = (double)seen[i] / D;
        maxdiff = fmax(maxdiff, fabs(f - e[i]));
        chi2 += (seen[i] - D * e[i]) * (seen[i] - D * e[i]) / (D * e[i]);
    }
    if (maxdiff >= 0.02 || chi2 >= 16.27)
        fail_msg("T=%g: max abs diff %.4f, chi2 %.2f (counts %d %d %d %d, expected %.3f %.3f "
                 "%.3f %.3f)",
                 (double)temp, maxdiff, chi2, seen[0], seen[1], seen[2], seen[3], e[0], e[1], e[2],
                 e[3]);
}

static void test_distribution(void **state) {
    (void)state;
    const float l[4] = {1.0f, 2.0f, 0.5f, -1.0f};
    check_distribution(l, 1.0f, 77);
    check_distribution(l, 0.7f, 78);
    check_distribution(l, 2.0f, 79);
}

static void test_bad_params(void **state) {
    (void)state;
    si_sampler *s = (si_sampler *)&s;
    si_sampling_params ok = si_sampling_default_params();
    struct {
        const char *field;
        si_sampling_params p;
        int32_t n_vocab;
    } cases[20];
    int n = 0;
#define BAD(fieldname, stmt, nv)                                                                   \
    do {                                                                                           \
        cases[n].field = fieldname;                                                                \
        cases[n].p = ok;                                                                           \
        si_sampling_params *q = &cases[n].p;                                                       \
        stmt;                                                                                      \
        cases[n].n_vocab = nv;                                                                     \
        n++;                                                                                       \
    } while (0)
    BAD("temperature", q->temperature = -0.1f, 10);
    BAD("temperature", q->temperature = NAN, 10);
    BAD("top_p", q->top_p = 0.0f, 10);
    BAD("top_p", q->top_p = 1.01f, 10);
    BAD("min_p", q->min_p = -0.01f, 10);
    BAD("min_p", q->min_p = 1.5f, 10);
    BAD("n_vocab", (void)q, 0);
    BAD("n_vocab", (void)q, -5);
    BAD("repetition_penalty", q->repetition_penalty = 0.0f, 10);
    BAD("repetition_penalty", q->repetition_penalty = -1.0f, 10);
    BAD("top_k", q->top_k = -1, 10);
    BAD("penalty_last_n", q->penalty_last_n = -2, 10);
    static const si_logit_bias lb_out[] = {{10, 1.0f}}, lb_neg[] = {{-1, 1.0f}},
                               lb_nan[] = {{3, NAN}}, lb_inf[] = {{3, -INFINITY}},
                               lb_twice[] = {{3, 1.0f}, {4, 2.0f}, {3, -1.0f}};
    BAD("logit_bias token 10", (q->logit_bias = lb_out, q->n_logit_bias = 1), 10);
    BAD("logit_bias token -1", (q->logit_bias = lb_neg, q->n_logit_bias = 1), 10);
    BAD("finite", (q->logit_bias = lb_nan, q->n_logit_bias = 1), 10);
    BAD("finite", (q->logit_bias = lb_inf, q->n_logit_bias = 1), 10);
    BAD("twice", (q->logit_bias = lb_twice, q->n_logit_bias = 3), 10);
    BAD("n_logit_bias", (q->logit_bias = lb_twice, q->n_logit_bias = SI_MAX_LOGIT_BIAS + 1), 10);
    BAD("n_logit_bias", (q->logit_bias = NULL, q->n_logit_bias = 1), 10);
    BAD("n_logit_bias", (q->logit_bias = lb_twice, q->n_logit_bias = -1), 10);
#undef BAD
    for (int i = 0; i < n; i++) {
        s = (si_sampler *)&s;
        si_status st = si_sampler_create(&cases[i].p, cases[i].n_vocab, &s);
        assert_int_equal(st, SI_ERR_INVALID_ARG);
        assert_null(s);
        if (!strstr(si_last_error(), cases[i].field))
            fail_msg("case %d: message '%s' does not name '%s'", i, si_last_error(),
                     cases[i].field);
    }
    /* the edges that are allowed */
    si_sampling_params edge = ok;
    edge.temperature = 0.0f;
    edge.top_p = 1.0f;
    edge.min_p = 1.0f;
    edge.penalty_last_n = -1;
    edge.top_k = 0;
    assert_int_equal(si_sampler_create(&edge, 1, &s), SI_OK);
    float one = 0.5f;
    assert_int_equal(si_sampler_sample(s, &one, NULL, 0), 0);
    si_sampler_free(s);
    si_sampler_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_greedy_argmax),
        cmocka_unit_test(test_top_k_1_is_greedy),
        cmocka_unit_test(test_top_k_set),
        cmocka_unit_test(test_top_p_tiny_keeps_max),
        cmocka_unit_test(test_top_p_nucleus),
        cmocka_unit_test(test_min_p_filters),
        cmocka_unit_test(test_penalties),
        cmocka_unit_test(test_penalties_stateless),
        cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_distribution),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
