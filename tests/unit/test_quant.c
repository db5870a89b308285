/* test_quant.c — the quant type-traits table and the scalar reference kernels (quant/).
 *
 * For every type: random rows -> from_float -> to_float within a per-type error bound relative
 * to the row's absmax; vec_dot(w, quantise(x)) against a double dot of the dequantised values;
 * the table (names, sizes, row sizes, unsupported ids). Known-answer tests decode hand-built
 * blocks of each legacy type with values worked out by hand from the GGUF layout.
 * tests/python/test_quant_vs_gguf.py checks the same kernels bit for bit against gguf-py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "quant/quant.h"
#include "quant/quant_blocks.h"

/* ---- helpers ---- */

#define TEST_RAND_SEED 0x9E3779B97F4A7C15ull
#include "test_rand.h"

static float absmax(const float *x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

typedef struct {
    si_type type;
    const char *name;
    int32_t block_size, type_size;
    si_type vec_dot_type;
    /* round trip: max |x - deq(q(x))| <= max_err * absmax(row) */
    double max_err;
} type_case;

/* Bounds (relative to the row's absmax; rows have a few outliers at ~3x the bulk):
 *   f32 exact; f16 2^-11 (half ulp of the largest value); bf16 2^-8;
 *   q8_0/q8_1: step amax/127 per block, error <= half a step plus fp16 rounding of d -> 0.6/127;
 *   q4_0: step amax/8, the far end clamps from 16 to 15 so up to one step -> 1.05/8;
 *   q5_0: likewise 1.05/16; q4_1: step (max-min)/15 <= 2 amax/15, half a step -> 0.6*2/15;
 *   q5_1: 0.6*2/31; q8_K: half a step of amax/127 (d is float) -> 0.51/127;
 *   k-quants: 16/32-element sub-blocks with quantised 4/6-bit scales and mins, no closed form:
 *   q2_K 0.40, q3_K 0.20, q4_K 0.10, q5_K 0.05, q6_K 0.03 (measured maxima on these rows:
 *   0.25, 0.12, 0.049, 0.022, 0.016); iq4_nl and iq4_xs, 16 table values from -127 to 113 at most
 *   24 apart (half a step ~ 0.095 of the largest), 0.12 (measured 0.060 and 0.047 on the first
 *   row). */
static const type_case cases[] = {
    {SI_TYPE_F32, "f32", 1, 4, SI_TYPE_F32, 0.0},
    {SI_TYPE_F16, "f16", 1, 2, SI_TYPE_F16, 1.0 / 2048},
    {SI_TYPE_BF16, "bf16", 1, 2, SI_TYPE_BF16, 1.0 / 256},
    {SI_TYPE_Q4_0, "q4_0", 32, 18, SI_TYPE_Q8_0, 1.05 / 8},
    {SI_TYPE_Q4_1, "q4_1", 32, 20, SI_TYPE_Q8_1, 0.6 * 2 / 15},
    {SI_TYPE_Q5_0, "q5_0", 32, 22, SI_TYPE_Q8_0, 1.05 / 16},
    {SI_TYPE_Q5_1, "q5_1", 32, 24, SI_TYPE_Q8_1, 0.6 * 2 / 31},
    {SI_TYPE_Q8_0, "q8_0", 32, 34, SI_TYPE_Q8_0, 0.6 / 127},
    {SI_TYPE_Q8_1, "q8_1", 32, 36, SI_TYPE_Q8_1, 0.6 / 127},
    {SI_TYPE_Q2_K, "q2_k", 256, 84, SI_TYPE_Q8_K, 0.40},
    {SI_TYPE_Q3_K, "q3_k", 256, 110, SI_TYPE_Q8_K, 0.20},
    {SI_TYPE_Q4_K, "q4_k", 256, 144, SI_TYPE_Q8_K, 0.10},
    {SI_TYPE_Q5_K, "q5_k", 256, 176, SI_TYPE_Q8_K, 0.05},
    {SI_TYPE_Q6_K, "q6_k", 256, 210, SI_TYPE_Q8_K, 0.03},
    {SI_TYPE_Q8_K, "q8_k", 256, 292, SI_TYPE_Q8_K, 0.51 / 127},
    {SI_TYPE_IQ4_NL, "iq4_nl", 32, 18, SI_TYPE_Q8_0, 0.12},
    {SI_TYPE_IQ4_XS, "iq4_xs", 256, 136, SI_TYPE_Q8_K, 0.12},
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

/* ---- table ---- */

static void test_table(void **state) {
    (void)state;
    for (size_t c = 0; c < N_CASES; c++) {
        const quant_traits *q = quant_get(cases[c].type);
        assert_non_null(q);
        assert_string_equal(q->name, cases[c].name);
        assert_string_equal(si_type_name(cases[c].type), cases[c].name);
        assert_int_equal(q->block_size, cases[c].block_size);
        assert_int_equal(q->type_size, cases[c].type_size);
        assert_int_equal(q->vec_dot_type, cases[c].vec_dot_type);
        assert_non_null(q->to_float);
        assert_non_null(q->from_float);
        assert_non_null(q->vec_dot);
        assert_int_equal(quant_row_size(cases[c].type, 0), 0);
        assert_int_equal(quant_row_size(cases[c].type, 4096),
                         (size_t)(4096 / cases[c].block_size) * (size_t)cases[c].type_size);
    }
    assert_int_equal(quant_row_size(SI_TYPE_Q4_K, 4096), 4096 / 256 * 144);
    assert_int_equal(quant_row_size(SI_TYPE_Q8_0, 4096), 4096 / 32 * 34);
}

static void test_unsupported(void **state) {
    (void)state;
    const int bad[] = {4, 5, 16, 17, 21, 22, 29, SI_TYPE_COUNT, 31, 39, 1000, -1, -30};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_null(quant_get((si_type)bad[i]));
        assert_null(si_type_name((si_type)bad[i]));
        assert_int_equal(quant_row_size((si_type)bad[i], 256), 0);
    }
}

/* ---- round trip and dot, every type, several lengths ---- */

static void test_round_trip(void **state) {
    (void)state;
    for (size_t c = 0; c < N_CASES; c++) {
        const quant_traits *q = quant_get(cases[c].type);
        const int64_t blocks[] = {1, 3, 16};
        for (size_t b = 0; b < 3; b++) {
            const int64_t n = blocks[b] * (q->block_size == 1 ? 256 : q->block_size);
            float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
            void *qb = malloc(quant_row_size(cases[c].type, n));
            assert_true(x && y && qb);
            fill_random(x, n, b == 2 ? 1e-3f : 1.0f);
            for (int64_t i = 0; i < n; i++) y[i] = NAN; /* poisoned */
            q->from_float(x, qb, n);
            q->to_float(qb, y, n);
            double worst = 0;
            for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)y[i] - x[i]));
            const double rel = worst / absmax(x, n);
            if (!(rel <= cases[c].max_err))
                fail_msg("%s n=%lld: max error %.4g x absmax, bound %.4g", q->name, (long long)n,
                         rel, cases[c].max_err);
            free(x);
            free(y);
            free(qb);
        }
    }
}

/* A zero row stays exactly zero (exercises the d == 0 / amax == 0 paths). */
static void test_zero_row(void **state) {
    (void)state;
    for (size_t c = 0; c < N_CASES; c++) {
        const quant_traits *q = quant_get(cases[c].type);
        const int64_t n = 512;
        float x[512] = {0}, y[512];
        uint8_t qb[512 * 4];
        for (int64_t i = 0; i < n; i++) y[i] = NAN;
        q->from_float(x, qb, n);
        q->to_float(qb, y, n);
        for (int64_t i = 0; i < n; i++) assert_true(y[i] == 0.0f);
    }
}

/* vec_dot(w, x_q) equals the dot of the dequantised operands up to float accumulation error:
 * tol = 1e-5 * sum|w_i x_i|. q4_1/q5_1 also use s = fp16(d * sum q) for the min term, rounded
 * from the unrounded d: add 2^-10 * sum over blocks |m| * |sum of dequantised x|. */
static void test_vec_dot(void **state) {
    (void)state;
    for (size_t c = 0; c < N_CASES; c++) {
        const quant_traits *q = quant_get(cases[c].type);
        const quant_traits *qx = quant_get(q->vec_dot_type);
        assert_non_null(qx);
        const int64_t lens[] = {1, 4, 32};
        for (size_t li = 0; li < 3; li++) {
            const int64_t n = lens[li] * (q->block_size == 1 ? 256 : q->block_size);
            float *w = malloc((size_t)n * 4), *x = malloc((size_t)n * 4);
            float *wd = malloc((size_t)n * 4), *xd = malloc((size_t)n * 4);
            void *wq = malloc(quant_row_size(cases[c].type, n));
            void *xq = malloc(quant_row_size(q->vec_dot_type, n));
            assert_true(w && x && wd && xd && wq && xq);
            fill_random(w, n, 0.05f);
            fill_random(x, n, 2.0f);
            if (cases[c].type == SI_TYPE_Q4_1 || cases[c].type == SI_TYPE_Q5_1)
                for (int64_t i = 0; i < n; i++) w[i] += 0.1f; /* a real min term */
            q->from_float(w, wq, n);
            qx->from_float(x, xq, n);
            q->to_float(wq, wd, n);
            qx->to_float(xq, xd, n);
            double ref = 0, mag = 0, extra = 0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)wd[i] * xd[i];
                mag += fabs((double)wd[i] * xd[i]);
            }
            if (cases[c].type == SI_TYPE_Q4_1 || cases[c].type == SI_TYPE_Q5_1) {
                for (int64_t b = 0; b < n / 32; b++) {
                    double sx = 0, m = fabs((double)wd[b * 32]); /* bound |m| by any element */
                    for (int j = 0; j < 32; j++) {
                        sx += xd[b * 32 + j];
                        m = fmax(m, fabs((double)wd[b * 32 + j]));
                    }
                    extra += m * fabs(sx) / 1024.0;
                }
            }
            const double got = q->vec_dot(wq, xq, n);
            const double tol = 1e-5 * mag + extra;
            if (!(fabs(got - ref) <= tol))
                fail_msg("%s n=%lld: vec_dot %.9g, reference %.9g, tol %.3g", q->name,
                         (long long)n, got, ref, tol);
            free(w); free(x); free(wd); free(xd); free(wq); free(xq);
        }
    }
}

/* ---- known answers, hand-built legacy blocks ---- */

/* fp16 bit patterns: 0x3400 = 0.25, 0x3800 = 0.5, 0x3C00 = 1.0, 0x4000 = 2.0, 0xC000 = -2.0 */

static void test_kat_q4_0(void **state) {
    (void)state;
    block_q4_0 b;
    b.d = 0x4000; /* 2.0 */
    memset(b.qs, 0x88, sizeof(b.qs)); /* every nibble 8 -> (8 - 8) * 2 = 0 */
    b.qs[0] = 0x9F;  /* elem 0: (15-8)*2 = 14; elem 16: (9-8)*2 = 2 */
    b.qs[15] = 0x07; /* elem 15: (7-8)*2 = -2; elem 31: (0-8)*2 = -16 */
    float y[32];
    quant_get(SI_TYPE_Q4_0)->to_float(&b, y, 32);
    for (int j = 0; j < 32; j++) {
        float e = j == 0 ? 14.f : j == 16 ? 2.f : j == 15 ? -2.f : j == 31 ? -16.f : 0.f;
        assert_true(y[j] == e);
    }
}

static void test_kat_q4_1(void **state) {
    (void)state;
    block_q4_1 b;
    b.d = 0x3800; /* 0.5 */
    b.m = 0xC000; /* -2.0 */
    memset(b.qs, 0, sizeof(b.qs)); /* 0 * 0.5 - 2 = -2 */
    b.qs[0] = 0x3A;                /* elem 0: 10*0.5-2 = 3; elem 16: 3*0.5-2 = -0.5 */
    float y[32];
    quant_get(SI_TYPE_Q4_1)->to_float(&b, y, 32);
    for (int j = 0; j < 32; j++) {
        float e = j == 0 ? 3.f : j == 16 ? -0.5f : -2.f;
        assert_true(y[j] == e);
    }
}

static void test_kat_q5_0(void **state) {
    (void)state;
    block_q5_0 b;
    b.d = 0x3C00;                       /* 1.0 */
    memset(b.qs, 0, sizeof(b.qs));      /* (0|0) - 16 = -16 */
    const uint8_t qh[4] = {0x01, 0, 0, 0x80}; /* high bit of elem 0 and elem 31 */
    memcpy(b.qh, qh, 4);
    b.qs[0] = 0x05;  /* elem 0: (5|16)-16 = 5; elem 16: 0-16 = -16 */
    b.qs[15] = 0xF0; /* elem 15: 0-16 = -16; elem 31: (15|16)-16 = 15 */
    float y[32];
    quant_get(SI_TYPE_Q5_0)->to_float(&b, y, 32);
    for (int j = 0; j < 32; j++) {
        float e = j == 0 ? 5.f : j == 31 ? 15.f : -16.f;
        assert_true(y[j] == e);
    }
}

static void test_kat_q5_1(void **state) {
    (void)state;
    block_q5_1 b;
    b.d = 0x4000; /* 2.0 */
    b.m = 0x3C00; /* 1.0 */
    memset(b.qs, 0, sizeof(b.qs));       /* 0*2+1 = 1 */
    const uint8_t qh[4] = {0, 0, 0x02, 0}; /* bit 17: high bit of elem 17 */
    memcpy(b.qh, qh, 4);
    b.qs[1] = 0x21; /* elem 1: 1*2+1 = 3; elem 17: (2|16)*2+1 = 37 */
    float y[32];
    quant_get(SI_TYPE_Q5_1)->to_float(&b, y, 32);
    for (int j = 0; j < 32; j++) {
        float e = j == 1 ? 3.f : j == 17 ? 37.f : 1.f;
        assert_true(y[j] == e);
    }
}

static void test_kat_q8_0_q8_1(void **state) {
    (void)state;
    block_q8_0 a;
    a.d = 0x3400; /* 0.25 */
    memset(a.qs, 0, sizeof(a.qs));
    a.qs[0] = -128; /* -32 */
    a.qs[31] = 127; /* 31.75 */
    float y[32];
    quant_get(SI_TYPE_Q8_0)->to_float(&a, y, 32);
    for (int j = 0; j < 32; j++) assert_true(y[j] == (j == 0 ? -32.f : j == 31 ? 31.75f : 0.f));

    block_q8_1 b;
    b.d = 0x3C00;
    b.s = 0;
    memset(b.qs, 0, sizeof(b.qs));
    b.qs[5] = -3;
    quant_get(SI_TYPE_Q8_1)->to_float(&b, y, 32);
    for (int j = 0; j < 32; j++) assert_true(y[j] == (j == 5 ? -3.f : 0.f));
}

/* Quantiser known answer: x_j = j - 16. q4_0: max by magnitude is -16, d = -16 / -8 = 2,
 * q_j = trunc((j-16)/2 + 8.5) = floor((j+1)/2) capped at 15. q8_0: d = 16/127, x/d = (j-16)*127/16. */
static void test_kat_quantise(void **state) {
    (void)state;
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    block_q4_0 b;
    quant_get(SI_TYPE_Q4_0)->from_float(x, &b, 32);
    assert_int_equal(b.d, 0x4000);
    for (int j = 0; j < 16; j++) {
        int lo = (j + 1) / 2, hi = (j + 16 + 1) / 2;
        if (hi > 15) hi = 15;
        assert_int_equal(b.qs[j], lo | (hi << 4));
    }
    block_q8_0 c;
    quant_get(SI_TYPE_Q8_0)->from_float(x, &c, 32);
    /* 16/127 = 0.12598...; nearest fp16 is 0x3008 (0.1259765625 = 129/1024) */
    assert_int_equal(c.d, 0x3008);
    assert_int_equal(c.qs[0], -127);
    assert_int_equal(c.qs[16], 0);
    assert_int_equal(c.qs[17], 8);   /* 127/16 = 7.94 -> 8 */
    assert_int_equal(c.qs[31], 119); /* 15*127/16 = 119.06 -> 119 */

    block_q8_0 w;
    w.d = 0x3C00;
    memset(w.qs, 2, sizeof(w.qs));
    c.d = 0x3800;
    memset(c.qs, 3, sizeof(c.qs));
    /* 32 * (2*3) * (1.0 * 0.5) = 96 */
    assert_true(quant_get(SI_TYPE_Q8_0)->vec_dot(&w, &c, 32) == 96.0f);
}

/* q8_K follows ggml: iscale = -127 / (signed absmax), bsums per 16. x_j = j - 100 (j < 256):
 * signed absmax 155, iscale = -127/155, so x = 155 -> -127 and x = -100 -> 81.9 -> 82. */
static void test_kat_q8_k(void **state) {
    (void)state;
    float x[256];
    for (int j = 0; j < 256; j++) x[j] = (float)(j - 100);
    block_q8_K b;
    quant_get(SI_TYPE_Q8_K)->from_float(x, &b, 256);
    assert_int_equal(b.qs[255], -127);
    assert_int_equal(b.qs[0], 82);
    assert_int_equal(b.qs[100], 0);
    assert_true(b.d == 1.0f / (-127.f / 155.f));
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += b.qs[g * 16 + j];
        assert_int_equal(b.bsums[g], s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),         cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_round_trip),    cmocka_unit_test(test_zero_row),
        cmocka_unit_test(test_vec_dot),       cmocka_unit_test(test_kat_q4_0),
        cmocka_unit_test(test_kat_q4_1),      cmocka_unit_test(test_kat_q5_0),
        cmocka_unit_test(test_kat_q5_1),      cmocka_unit_test(test_kat_q8_0_q8_1),
        cmocka_unit_test(test_kat_quantise),  cmocka_unit_test(test_kat_q8_k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
