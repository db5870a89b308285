/* test_matmul.c — the threaded, tiled cpu_matmul (backend/cpu/matmul.c) against cpu_matmul_ref,
 * the plain loop over quant/'s scalar kernels.
 *
 * Every weight type with a dot product, weight shapes whose row counts do not divide into the
 * chunk sizes, 1, 2, 3, 4, 8, 9, 17 and 64 activation rows (decode, batched decode through the
 * multi-row kernels with full and partial tiles of 8, fewer rows than threads, prefill) and pools of 1, 2 and 3 threads. Outputs (and a guard zone after them) are poisoned
 * with NaN / a sentinel before every run, the quantisation scratch with 0xFF bytes.
 *
 * Tolerance: |fast - ref| <= 1e-4 * sum_k |w[o][k]| * |x[r][k]| (w dequantised). Both sides
 * quantise the activations identically and compute the same integer block sums; they may differ
 * only in the order of the float accumulation over blocks (SIMD kernels), which moves the result
 * by ~n_blocks * 2^-24 of that bound. A lost or doubled block moves it by ~1e-2 of it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "quant/quant.h"

#define GUARD 16
#define SENTINEL 12345.0f

#define TEST_RAND_SEED 0x2545F4914F6CDD1Dull
#include "test_rand.h"

/* A weight type cpu_matmul supports: it has a dot product and its activations a quantiser. */
static bool matmul_type(si_type t) {
    const quant_traits *qt = quant_get(t);
    if (!qt || !qt->vec_dot || !qt->from_float || !qt->to_float) return false;
    const quant_traits *xt = quant_get(qt->vec_dot_type);
    return xt && xt->from_float;
}

/* One case: W (n_out x n_cols) of type t times n_rows activation rows on pool p. */
static void check_case(thread_pool *p, si_type t, int64_t n_cols, int64_t n_out, int n_rows) {
    const quant_traits *qt = quant_get(t);
    const size_t w_row = quant_row_size(t, n_cols);
    float *wf = malloc(sizeof(float) * (size_t)(n_out * n_cols));
    uint8_t *wq = malloc(w_row * (size_t)n_out);
    float *x = malloc(sizeof(float) * (size_t)(n_rows * n_cols));
    const size_t n_outs = (size_t)n_rows * (size_t)n_out;
    float *out = malloc(sizeof(float) * (n_outs + GUARD));
    float *ref = malloc(sizeof(float) * n_outs);
    assert_true(wf && wq && x && out && ref);

    fill_random(wf, n_out * n_cols, 0.02f);
    for (int64_t o = 0; o < n_out; o++) qt->from_float(wf + o * n_cols, wq + (size_t)o * w_row, n_cols);
    for (int64_t o = 0; o < n_out; o++) qt->to_float(wq + (size_t)o * w_row, wf + o * n_cols, n_cols);
    fill_random(x, (int64_t)n_rows * n_cols, 1.0f);
    si_tensor W = {.data = wq, .type = t, .n_cols = n_cols, .n_rows = n_out};

    const size_t scratch_bytes = cpu_matmul_scratch(&W, n_rows);
    uint8_t *scratch = malloc(scratch_bytes);
    assert_non_null(scratch);

    for (size_t i = 0; i < n_outs; i++) ref[i] = NAN;
    memset(scratch, 0xFF, scratch_bytes);
    cpu_matmul_ref(ref, &W, x, n_rows, scratch);

    for (size_t i = 0; i < n_outs; i++) out[i] = NAN;
    for (int g = 0; g < GUARD; g++) out[n_outs + g] = SENTINEL;
    memset(scratch, 0xFF, scratch_bytes);
    cpu_matmul(p, out, &W, x, n_rows, scratch);

    for (int g = 0; g < GUARD; g++)
        if (out[n_outs + g] != SENTINEL)
            fail_msg("%s %lldx%lld rows %d threads %d: wrote past the output", qt->name,
                     (long long)n_out, (long long)n_cols, n_rows, pool_size(p));
    for (int r = 0; r < n_rows; r++) {
        for (int64_t o = 0; o < n_out; o++) {
            double bound = 0.0;
            for (int64_t k = 0; k < n_cols; k++)
                bound += fabs((double)wf[o * n_cols + k] * x[(int64_t)r * n_cols + k]);
            const float a = out[(size_t)r * n_out + o], b = ref[(size_t)r * n_out + o];
            if (!isfinite(a) || !isfinite(b) || fabs((double)a - b) > 1e-4 * bound)
                fail_msg("%s %lldx%lld rows %d threads %d: out[%d][%lld] = %g, ref %g (bound %g)",
                         qt->name, (long long)n_out, (long long)n_cols, n_rows, pool_size(p), r,
                         (long long)o, a, b, 1e-4 * bound);
        }
    }
    free(wf), free(wq), free(x), free(out), free(ref), free(scratch);
}

static void test_matmul_vs_ref(void **state) {
    (void)state;
    /* (n_cols, n_out): columns multiples of 256 (k-quant blocks); row counts prime-ish so that
     * chunks and tiles have ragged ends; 301 rows span several chunks of every size */
    static const int64_t SHAPES[][2] = {{256, 7}, {512, 67}, {768, 301}};
    static const int ROWS[] = {1, 2, 3, 4, 8, 9, 17, 64};
    int n_types = 0;
    for (int nth = 1; nth <= 3; nth++) {
        thread_pool *p = NULL;
        assert_int_equal(pool_create(nth, &p), SI_OK);
        for (int t = 0; t < (int)SI_TYPE_COUNT; t++) {
            if (!matmul_type((si_type)t)) continue;
            if (nth == 1) n_types++;
            for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++)
                for (size_t r = 0; r < sizeof ROWS / sizeof ROWS[0]; r++)
                    check_case(p, (si_type)t, SHAPES[s][0], SHAPES[s][1], ROWS[r]);
        }
        pool_free(p);
    }
    /* at least f32, f16, bf16, the legacy and the k-quant types */
    assert_true(n_types >= 12);
}

/* A matmul right after another on the same pool and scratch: the chunk counter and barrier
 * must start afresh each time (a stale counter would skip rows, left NaN). */
static void test_back_to_back(void **state) {
    (void)state;
    thread_pool *p = NULL;
    assert_int_equal(pool_create(2, &p), SI_OK);
    for (int i = 0; i < 50; i++) check_case(p, SI_TYPE_Q4_0, 256, 37 + i, 1 + i % 5);
    pool_free(p);
}

/* cpu_matmul_multi: three matrices of one type (different row counts, like Q/K/V) against the
 * same activations give exactly what three cpu_matmul calls give, for every type and row count
 * of decode and prefill, and write nothing past any output. */
static void test_matmul_multi_is_three_matmuls(void **state) {
    (void)state;
    thread_pool *p = NULL;
    assert_int_equal(pool_create(2, &p), SI_OK);
    static const int ROWS[] = {1, 4, 17};
    static const int64_t N_OUT[3] = {67, 23, 23};
    const int64_t n_cols = 512;
    for (int t = 0; t < (int)SI_TYPE_COUNT; t++) {
        if (!matmul_type((si_type)t)) continue;
        const quant_traits *qt = quant_get((si_type)t);
        const size_t w_row = quant_row_size((si_type)t, n_cols);
        si_tensor W[3];
        uint8_t *wq[3];
        float *wf = malloc(sizeof(float) * (size_t)(N_OUT[0] * n_cols));
        assert_non_null(wf);
        for (int m = 0; m < 3; m++) {
            wq[m] = malloc(w_row * (size_t)N_OUT[m]);
            assert_non_null(wq[m]);
            fill_random(wf, N_OUT[m] * n_cols, 0.02f);
            for (int64_t o = 0; o < N_OUT[m]; o++)
                qt->from_float(wf + o * n_cols, wq[m] + (size_t)o * w_row, n_cols);
            W[m] = (si_tensor){.data = wq[m], .type = (si_type)t, .n_cols = n_cols, .n_rows = N_OUT[m]};
        }
        for (size_t r = 0; r < sizeof ROWS / sizeof ROWS[0]; r++) {
            const int n_rows = ROWS[r];
            float *x = malloc(sizeof(float) * (size_t)(n_rows * n_cols));
            uint8_t *scratch = malloc(cpu_matmul_scratch(&W[0], n_rows));
            float *one[3], *multi[3];
            assert_true(x && scratch);
            fill_random(x, n_rows * n_cols, 1.0f);
            for (int m = 0; m < 3; m++) {
                const size_t n = (size_t)n_rows * (size_t)N_OUT[m];
                one[m] = malloc(sizeof(float) * n);
                multi[m] = malloc(sizeof(float) * (n + GUARD));
                assert_true(one[m] && multi[m]);
                for (size_t i = 0; i < n; i++) multi[m][i] = NAN;
                for (int g = 0; g < GUARD; g++) multi[m][n + g] = SENTINEL;
                cpu_matmul(p, one[m], &W[m], x, n_rows, scratch);
            }
            const si_tensor *Ws[3] = {&W[0], &W[1], &W[2]};
            cpu_matmul_multi(p, 3, multi, Ws, x, n_rows, scratch);
            for (int m = 0; m < 3; m++) {
                const size_t n = (size_t)n_rows * (size_t)N_OUT[m];
                if (memcmp(one[m], multi[m], n * sizeof(float)) != 0)
                    fail_msg("%s rows %d matrix %d: cpu_matmul_multi differs from cpu_matmul",
                             qt->name, n_rows, m);
                for (int g = 0; g < GUARD; g++) assert_true(multi[m][n + g] == SENTINEL);
                free(one[m]), free(multi[m]);
            }
            free(x), free(scratch);
        }
        for (int m = 0; m < 3; m++) free(wq[m]);
        free(wf);
    }
    pool_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_multi_is_three_matmuls),
        cmocka_unit_test(test_matmul_vs_ref),
        cmocka_unit_test(test_back_to_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
