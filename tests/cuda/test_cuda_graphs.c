/* test_cuda_graphs.c — the decode-step graph cache's buckets (cuda_graphs.h), which need no GPU:
 * steps of 1-16 rows are their own bucket and larger ones round up to a power of two, capped at
 * the cache's rows; SI_CUDA_GRAPH_POW2=1 gives powers of two throughout; cuda_graphs_next_rows
 * walks exactly the buckets a step can get (the warm-up captures those); KV lengths round up to
 * 256, 512, ... capped at the cache's KV. CTest label cuda_host (built where nvcc is). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "backend/cuda/cuda_graphs.h"

static int rows_of(const cuda_graphs *g, int n) {
    int rows, kv;
    cuda_graphs_bucket(g, n, 1, &rows, &kv);
    return rows;
}

/* every step size's bucket holds it, is what next_rows walks, and is the smallest such bucket */
static void check_walk(const cuda_graphs *g, int max_rows) {
    int walk[64], n_walk = 0;
    for (int r = 1; r; r = cuda_graphs_next_rows(g, r)) {
        assert_true(n_walk < 64);
        walk[n_walk++] = r;
    }
    assert_int_equal(walk[n_walk - 1], max_rows);
    for (int n = 1; n <= max_rows; n++) {
        const int b = rows_of(g, n);
        int i = 0;
        while (i < n_walk && walk[i] < n)
            i++;
        assert_true(i < n_walk);
        assert_int_equal(b, walk[i]);
    }
}

static void test_rows_exact_to_sixteen(void **state) {
    (void)state;
    unsetenv("SI_CUDA_GRAPH_POW2");
    cuda_graphs *g = cuda_graphs_create(64, 4096);
    assert_non_null(g);
    for (int n = 1; n <= 16; n++)
        assert_int_equal(rows_of(g, n), n);
    assert_int_equal(rows_of(g, 17), 32);
    assert_int_equal(rows_of(g, 32), 32);
    assert_int_equal(rows_of(g, 33), 64);
    assert_int_equal(rows_of(g, 64), 64);
    const int want[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 32, 64, 0};
    int r = 1;
    for (int i = 1; i < (int)(sizeof want / sizeof want[0]); i++) {
        r = cuda_graphs_next_rows(g, r);
        assert_int_equal(r, want[i]);
        if (!r) break;
    }
    check_walk(g, 64);
    cuda_graphs_free(g);
}

static void test_rows_capped(void **state) {
    (void)state;
    unsetenv("SI_CUDA_GRAPH_POW2");
    cuda_graphs *g = cuda_graphs_create(24, 4096); /* 17-24 rows: one bucket of 24 */
    assert_int_equal(rows_of(g, 17), 24);
    assert_int_equal(rows_of(g, 24), 24);
    assert_int_equal(cuda_graphs_next_rows(g, 16), 24);
    assert_int_equal(cuda_graphs_next_rows(g, 24), 0);
    check_walk(g, 24);
    cuda_graphs_free(g);
    g = cuda_graphs_create(6, 4096); /* fewer rows than the exact buckets */
    assert_int_equal(rows_of(g, 6), 6);
    assert_int_equal(cuda_graphs_next_rows(g, 6), 0);
    check_walk(g, 6);
    cuda_graphs_free(g);
}

static void test_rows_pow2_knob(void **state) {
    (void)state;
    setenv("SI_CUDA_GRAPH_POW2", "1", 1);
    cuda_graphs *g = cuda_graphs_create(64, 4096);
    unsetenv("SI_CUDA_GRAPH_POW2");
    assert_int_equal(rows_of(g, 1), 1);
    assert_int_equal(rows_of(g, 3), 4);
    assert_int_equal(rows_of(g, 5), 8);
    assert_int_equal(rows_of(g, 9), 16);
    check_walk(g, 64);
    cuda_graphs_free(g);
    /* no cache (graphs off): the warm-up's batch sizes are powers of two */
    assert_int_equal(cuda_graphs_next_rows(NULL, 1), 2);
    assert_int_equal(cuda_graphs_next_rows(NULL, 4), 8);
}

static void test_kv_buckets(void **state) {
    (void)state;
    cuda_graphs *g = cuda_graphs_create(8, 4096);
    int rows, kv;
    cuda_graphs_bucket(g, 3, 1, &rows, &kv);
    assert_int_equal(kv, 256);
    cuda_graphs_bucket(g, 3, 257, &rows, &kv);
    assert_int_equal(kv, 512);
    cuda_graphs_bucket(g, 3, 5000, &rows, &kv); /* capped: the caller pads only when it fits */
    assert_int_equal(kv, 4096);
    assert_int_equal(cuda_graphs_next_kv(g, 2048), 4096);
    assert_int_equal(cuda_graphs_next_kv(g, 4096), 0);
    cuda_graphs_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_exact_to_sixteen),
        cmocka_unit_test(test_rows_capped),
        cmocka_unit_test(test_rows_pow2_knob),
        cmocka_unit_test(test_kv_buckets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
