/* test_sampler_pick.c — sampler_pick (the chain after the penalties as a pure function) against
 * its definition computed the slow way (sort everything, cut, renormalise, walk), and
 * sampler_draw + sampler_pick against si_sampler_sample on the same seed: the pair the engine
 * uses when a device samples must give the very tokens the host sampler gives. And sampler_expf,
 * the weights' e^x, against e^x. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h" /* backend_sample */
#include "engine/sampler_exp.h"
#include "engine/sampler_pick.h"

#define NV 3000

static uint32_t rng(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

static double uniform(uint64_t *s) { return rng(s) / 4294967296.0; }

/* Logits with a few repeated values (ties are ordered by id) and a peaked head. */
static void fill_logits(float *l, int n, uint64_t *s) {
    for (int i = 0; i < n; i++) l[i] = (float)(uniform(s) * 12.0 - 8.0);
    for (int i = 0; i < n / 50; i++) l[rng(s) % n] = l[rng(s) % n];
    for (int i = 0; i < 5; i++) l[rng(s) % n] += 2.0f;
}

static void to_cands(const float *l, int n, sampler_cand *c) {
    for (int i = 0; i < n; i++) c[i] = (sampler_cand){i, l[i], 0.0f};
}

static int by_order(const void *pa, const void *pb) {
    const sampler_cand *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int by_id(const void *pa, const void *pb) {
    const sampler_cand *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

/* The chain's definition on a fully sorted vocabulary. */
static int32_t pick_slow(const float *l, int n, const sampler_chain *p, double u) {
    static sampler_cand c[NV];
    to_cands(l, n, c);
    qsort(c, (size_t)n, sizeof *c, by_order);
    if (p->temperature <= 0.0f) return c[0].id;
    int k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    const float max = c[0].logit;
    if (p->top_p < 1.0f) {
        double total = 0.0, cum = 0.0;
        for (int i = 0; i < k; i++)
            total += sampler_expf(c[i].logit - max);
        for (int i = 0; i < k; i++) {
            cum += (float)(sampler_expf(c[i].logit - max) / total);
            if (cum >= p->top_p) {
                k = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f)
        for (int i = 1; i < k; i++)
            if (c[i].logit < max + logf(p->min_p)) {
                k = i;
                break;
            }
    qsort(c, (size_t)k, sizeof *c, by_id); /* the draw walks the kept tokens in id order */
    double sum = 0.0, cum = 0.0;
    for (int i = 0; i < k; i++)
        sum += sampler_expf(c[i].logit / p->temperature - max / p->temperature);
    for (int i = 0; i < k; i++) {
        cum += (float)(sampler_expf(c[i].logit / p->temperature - max / p->temperature) / sum);
        if (u < cum) return c[i].id;
    }
    return c[k - 1].id;
}

static sampler_chain random_chain(uint64_t *s) {
    static const int32_t ks[] = {0, 1, 5, 40, 1000};
    static const float ps[] = {1.0f, 0.5f, 0.9f, 0.99f};
    static const float mps[] = {0.0f, 0.01f, 0.1f, 0.5f};
    static const float ts[] = {0.0f, 0.3f, 0.8f, 1.0f, 1.7f};
    return (sampler_chain){ts[rng(s) % 5], ks[rng(s) % 5], ps[rng(s) % 4], mps[rng(s) % 4]};
}

static void test_pick_matches_definition(void **state) {
    (void)state;
    static float l[NV];
    static sampler_cand c[NV];
    uint64_t s = 1;
    int non_greedy_differs_from_argmax = 0;
    for (int it = 0; it < 400; it++) {
        fill_logits(l, NV, &s);
        const sampler_chain p = random_chain(&s);
        const double u = uniform(&s);
        to_cands(l, NV, c);
        const int32_t got = sampler_pick(c, NV, &p, u), want = pick_slow(l, NV, &p, u);
        if (got != want)
            fail_msg("iteration %d (t %g k %d p %g min_p %g u %.17g): sampler_pick %d, definition "
                     "%d", it, (double)p.temperature, p.top_k, (double)p.top_p,
                     (double)p.min_p, u, got, want);
        const sampler_chain greedy = {0};
        non_greedy_differs_from_argmax += got != pick_slow(l, NV, &greedy, 0);
    }
    print_message("%d of 400 picks are not the argmax\n", non_greedy_differs_from_argmax);
    assert_true(non_greedy_differs_from_argmax > 100); /* the draws do reach past the argmax */
}

static void test_all_impossible_is_first(void **state) {
    (void)state;
    float l[8];
    sampler_cand c[8];
    for (int i = 0; i < 8; i++) l[i] = -INFINITY;
    const sampler_chain p = {0.8f, 3, 0.9f, 0.05f};
    to_cands(l, 8, c);
    assert_int_equal(sampler_pick(c, 8, &p, 0.7), 0);
}

/* sampler_draw + sampler_pick reproduce si_sampler_sample token for token (same seed). */
static void test_draw_then_pick_is_sample(void **state) {
    (void)state;
    static float l[NV];
    static sampler_cand c[NV];
    si_sampling_params sp = si_sampling_default_params();
    sp.top_p = 0.9f;
    sp.seed = 1234;
    si_sampler *a = NULL, *b = NULL;
    assert_int_equal(si_sampler_create(&sp, NV, &a), SI_OK);
    assert_int_equal(si_sampler_create(&sp, NV, &b), SI_OK);
    const int32_t hist[3] = {1, 2, 3};
    assert_true(sampler_history_free(b, 3)); /* default penalties are off */
    uint64_t s = 99;
    for (int it = 0; it < 200; it++) {
        fill_logits(l, NV, &s);
        sampler_chain ch;
        double u;
        sampler_draw(b, &ch, &u);
        to_cands(l, NV, c);
        assert_int_equal(si_sampler_sample(a, l, hist, 3), sampler_pick(c, NV, &ch, u));
    }
    si_sampler_free(a);
    si_sampler_free(b);

    sp.repetition_penalty = 1.3f;
    assert_int_equal(si_sampler_create(&sp, NV, &a), SI_OK);
    assert_false(sampler_history_free(a, 3));
    assert_true(sampler_history_free(a, 0));
    si_sampler_free(a);
}

/* sampler_peek_sample says the draw sampler_draw_sample makes next and changes nothing: two
 * peeks agree, the draw that follows is the peeked one, and the next peek is the next draw. */
static void test_peek_is_next_draw(void **state) {
    (void)state;
    si_sampling_params sp = si_sampling_default_params();
    sp.temperature = 0.8f, sp.top_k = 40, sp.seed = 7;
    si_sampler *a = NULL;
    assert_int_equal(si_sampler_create(&sp, NV, &a), SI_OK);
    backend_sample peek, again, drawn, prev = {0};
    for (int it = 0; it < 100; it++) {
        sampler_peek_sample(a, &peek);
        sampler_peek_sample(a, &again);
        sampler_draw_sample(a, &drawn);
        assert_true(peek.u == again.u && peek.u == drawn.u);
        assert_true(peek.temperature == drawn.temperature && peek.top_k == drawn.top_k &&
                    peek.top_p == drawn.top_p && peek.min_p == drawn.min_p &&
                    peek.logprobs == drawn.logprobs);
        assert_true(drawn.u >= 0.0 && drawn.u < 1.0 && drawn.u != prev.u); /* the RNG moved on */
        prev = drawn;
    }
    si_sampler_free(a);
}

/* sampler_penalty_pairs against counting the window by hand (random histories over a small
 * vocabulary, windows of 0-40 tokens, -1 (all) and 0 (off), ids outside the vocabulary among
 * them): the same distinct ids with the same counts, in order of first occurrence; -1 and
 * nothing written when they exceed cap, without leaving counts behind for the next call. Then
 * si_sampler_sample with logit biases and penalties, and sampler_draw + sampler_pick on the
 * logits biased (sampler_logit_bias, one float addition each) and then penalised pair by pair
 * with sampler_penalise, give the same tokens: the biases and pairs are what the device gets. */
static void test_penalty_pairs(void **state) {
    (void)state;
    enum { V = 40, H = 120 };
    static float l[NV], pen[NV];
    static sampler_cand c[NV];
    int32_t hist[H], tok[V], cnt[V], want_tok[V], want_cnt[V];
    uint64_t s = 5;
    for (int it = 0; it < 300; it++) {
        si_sampling_params sp = si_sampling_default_params();
        const int32_t lasts[] = {-1, 0, 1, 7, 40, 64};
        sp.penalty_last_n = lasts[rng(&s) % 6];
        sp.repetition_penalty = 1.25f, sp.frequency_penalty = 0.3f, sp.presence_penalty = -0.7f;
        si_sampler *a = NULL;
        assert_int_equal(si_sampler_create(&sp, V, &a), SI_OK);
        const int n = (int)(rng(&s) % H);
        for (int i = 0; i < n; i++)
            hist[i] = (int32_t)(rng(&s) % (V + 4)) - 2; /* -2..V+1: a few outside */
        /* by hand */
        int nw = 0;
        const int from =
            sp.penalty_last_n < 0 || n <= sp.penalty_last_n ? 0 : n - sp.penalty_last_n;
        for (int i = sp.penalty_last_n == 0 ? n : from; i < n; i++) {
            if (hist[i] < 0 || hist[i] >= V) continue;
            int k = 0;
            while (k < nw && want_tok[k] != hist[i])
                k++;
            if (k == nw) want_tok[nw] = hist[i], want_cnt[nw++] = 0;
            want_cnt[k]++;
        }
        const int cap = (int)(rng(&s) % (V + 1));
        memset(tok, 0x55, sizeof tok);
        const int32_t got = sampler_penalty_pairs(a, hist, n, cap, tok, cnt);
        if (nw > cap) {
            assert_int_equal(got, -1);
            for (int k = 0; k < V; k++)
                assert_int_equal(tok[k], 0x55555555);
        } else {
            assert_int_equal(got, nw);
            assert_memory_equal(tok, want_tok, (size_t)nw * sizeof *tok);
            assert_memory_equal(cnt, want_cnt, (size_t)nw * sizeof *cnt);
        }
        assert_int_equal(sampler_penalty_pairs(a, hist, n, V, tok, cnt), nw); /* nothing left */
        si_sampler_free(a);
    }

    si_sampling_params sp = si_sampling_default_params();
    sp.temperature = 0.9f, sp.top_k = 0, sp.seed = 3;
    sp.repetition_penalty = 1.3f, sp.frequency_penalty = 0.45f, sp.presence_penalty = 0.2f;
    si_logit_bias lb[40];
    for (int k = 0; k < 40; k++) /* half of them on the penalised head of the vocabulary */
        lb[k] = (si_logit_bias){k < 20 ? 3 * k : 100 + 7 * k, (float)(uniform(&s) * 6.0 - 3.0)};
    sp.logit_bias = lb, sp.n_logit_bias = 40;
    si_sampler *a = NULL, *b = NULL;
    assert_int_equal(si_sampler_create(&sp, NV, &a), SI_OK);
    assert_int_equal(si_sampler_create(&sp, NV, &b), SI_OK);
    static int32_t ptok[NV], pcnt[NV];
    int changed = 0;
    for (int it = 0; it < 200; it++) {
        fill_logits(l, NV, &s);
        for (int i = 0; i < H; i++)
            hist[i] = (int32_t)(rng(&s) % 60); /* the head of the vocab */
        memcpy(pen, l, sizeof l);
        const si_logit_bias *bias;
        const int32_t nb = sampler_logit_bias(b, &bias);
        assert_int_equal(nb, 40);
        for (int k = 0; k < nb; k++)
            pen[bias[k].token] += bias[k].bias;
        const int32_t np = sampler_penalty_pairs(b, hist, H, NV, ptok, pcnt);
        assert_true(np > 0);
        for (int k = 0; k < np; k++)
            pen[ptok[k]] = sampler_penalise(pen[ptok[k]], pcnt[k], sp.repetition_penalty,
                                            sp.frequency_penalty, sp.presence_penalty);
        sampler_chain ch;
        double u;
        sampler_draw(b, &ch, &u);
        to_cands(pen, NV, c);
        const int32_t via_pairs = sampler_pick(c, NV, &ch, u);
        to_cands(l, NV, c);
        changed += via_pairs != sampler_pick(c, NV, &ch, u);
        assert_int_equal(si_sampler_sample(a, l, hist, H), via_pairs);
    }
    assert_true(changed >
                0); /* the adjustments moved some picks: the check above means something */
    si_sampler_free(a);
    si_sampler_free(b);
}

/* Within 2 ulps of e^x (a double exp) wherever e^x is a normal float, on every 1009th float of
 * [-104, 89] (~2 million); 0 from -inf and at or below -104, infinity past 88.8, NaN kept, e^0
 * = 1 exactly, and never decreasing along the sweep. */
static void test_sampler_expf(void **state) {
    (void)state;
    double worst = 0.0;
    float prev = 0.0f, prev_x = -INFINITY;
    for (uint32_t b = 0xC2D00000u; b >= 0x80000000u; b -= 1009) { /* -104 up to -0 */
        float x;
        memcpy(&x, &b, sizeof x);
        const float y = sampler_expf(x);
        if (y < prev)
            fail_msg("sampler_expf(%a) = %a < sampler_expf(%a) = %a", (double)x, (double)y,
                     (double)prev_x, (double)prev);
        prev = y, prev_x = x;
        const double e = exp((double)x);
        if (e < 0x1p-126) continue;
        const double ulp = (double)nextafterf((float)e, INFINITY) - (double)(float)e;
        const double u = fabs((double)y - e) / ulp;
        if (u > 2.0)
            fail_msg("sampler_expf(%a) = %a, e^x = %a: %.2f ulps", (double)x, (double)y, e, u);
        worst = u > worst ? u : worst;
    }
    for (uint32_t b = 0; b <= 0x42B20000u; b += 1009) { /* 0 up to 89 */
        float x;
        memcpy(&x, &b, sizeof x);
        const float y = sampler_expf(x);
        const double e = exp((double)x);
        if (e > 0x1.fffffep127) {
            assert_true(isinf(y));
            continue;
        }
        const double ulp = (double)nextafterf((float)e, INFINITY) - (double)(float)e;
        const double u = fabs((double)y - e) / ulp;
        if (u > 2.0)
            fail_msg("sampler_expf(%a) = %a, e^x = %a: %.2f ulps", (double)x, (double)y, e, u);
        worst = u > worst ? u : worst;
    }
    assert_true(worst > 0.0 && worst <= 2.0); /* a sweep that measured something */
    assert_true(sampler_expf(0.0f) == 1.0f && sampler_expf(-0.0f) == 1.0f);
    assert_true(sampler_expf(-INFINITY) == 0.0f && sampler_expf(-104.0f) == 0.0f);
    assert_true(sampler_expf(-100.0f) > 0.0f && sampler_expf(-100.0f) < 0x1p-126f); /* subnormal */
    assert_true(isinf(sampler_expf(89.0f)) && isinf(sampler_expf(INFINITY)));
    assert_true(isnan(sampler_expf(NAN)));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pick_matches_definition),
        cmocka_unit_test(test_all_impossible_is_first),
        cmocka_unit_test(test_draw_then_pick_is_sample),
        cmocka_unit_test(test_peek_is_next_draw),
        cmocka_unit_test(test_penalty_pairs),
        cmocka_unit_test(test_sampler_expf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
