/* test_gemm_table.c — the CUDA backend's table of matmul configurations (gemm_table.h), which
 * needs no GPU: a table parses field by field with comments and blank lines, lookups match on
 * all four keys, each malformed line is rejected naming its line and leaving the table empty, and
 * every built-in table parses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "backend/cuda/gemm_table.h"

static void test_parses_fields_and_comments(void **state) {
    (void)state;
    gemm_table t;
    char err[160];
    const char *text = "# measured somewhere\n"
                       "\n"
                       "f16 12288 4096 64 66 27 35 1 0 0 2 3   # QKV\n"
                       "  bf16 4096 11008 32 21 13 7 2 4 1 5 17\r\n"
                       "f16 1 1 1 0 0 0 1 0 0 0 65535"; /* no final newline */
    assert_int_equal(gemm_table_parse(&t, text, err, sizeof err), 0);
    assert_int_equal(t.n, 3);
    const gemm_table_entry *e = gemm_table_find(&t, SI_TYPE_BF16, 4096, 11008, 32);
    assert_non_null(e);
    assert_int_equal(e->id, 21);
    assert_int_equal(e->tile, 13);
    assert_int_equal(e->stages, 7);
    assert_int_equal(e->splitk, 2);
    assert_int_equal(e->red, 4);
    assert_int_equal(e->swizzle, 1);
    assert_int_equal(e->custom, 5);
    assert_int_equal(e->cluster, 17);
    e = gemm_table_find(&t, SI_TYPE_F16, 12288, 4096, 64);
    assert_non_null(e);
    assert_int_equal(e->tile, 27);
    assert_int_equal(e->cluster, 3);
    assert_int_equal(gemm_table_find(&t, SI_TYPE_F16, 1, 1, 1)->cluster, 65535);
    /* every key must match */
    assert_null(gemm_table_find(&t, SI_TYPE_BF16, 12288, 4096, 64));
    assert_null(gemm_table_find(&t, SI_TYPE_F16, 12288, 4096, 63));
    assert_null(gemm_table_find(&t, SI_TYPE_F16, 12288, 4095, 64));
    assert_null(gemm_table_find(&t, SI_TYPE_F16, 12287, 4096, 64));
    gemm_table_free(&t);
    assert_int_equal(t.n, 0);
    assert_int_equal(gemm_table_parse(&t, "", err, sizeof err), 0);
    assert_int_equal(t.n, 0);
}

static void test_rejects_malformed_lines(void **state) {
    (void)state;
    const struct {
        const char *text, *msg;
    } bad[] = {
        {"f16 1 2 3\n", "line 1: expected TYPE"},
        {"f16 1 1 99999999999999999999 0 0 0 1 0 0 0 0\n", "line 1: expected TYPE"},
        {"f16 1 1 1 0 4294967296 0 1 0 0 0 0\n", "line 1: expected TYPE"},
        {"f16 1 1 1 0 -1 0 1 0 0 0 0\n", "line 1: expected TYPE"},
        {"f16 1 1 1 0 +1 0 1 0 0 0 0\n", "line 1: expected TYPE"},
        {"f16x 1 1 1 0 0 0 1 0 0 0 0\n", "line 1: TYPE must be"},
        {"# ok\nf32 1 1 1 0 0 0 1 0 0 0 0\n", "line 2: TYPE must be f16 or bf16"},
        {"f16 1 1 1 0 0 0 1 0 0 0 0 9\n", "line 1: unexpected text"},
        {"f16 1 1 1 0 0 0 1 0 0 0 0x\n", "line 1: expected TYPE"},
        {"f16 0 1 1 0 0 0 1 0 0 0 0\n", "line 1: expected TYPE"},
        {"f16 1 1 1 0 0 0 0 0 0 0 0\n", "line 1: expected TYPE"},
        {"f16 1 1 1 0 0 0 1 0 0 0 65536\n", "line 1: expected TYPE"},
        {"f16 1 1 1 -1 0 0 1 0 0 0 0\n", "line 1: expected TYPE"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gemm_table t;
        char err[160] = "";
        assert_int_equal(gemm_table_parse(&t, bad[i].text, err, sizeof err), -1);
        assert_int_equal(t.n, 0);
        assert_null(t.e);
        assert_non_null(strstr(err, bad[i].msg));
    }
    /* a line too long for the parser's buffer, after good ones: rejected, table left empty */
    char longer[600];
    strcpy(longer, "f16 1 1 1 0 0 0 1 0 0 0 0\n# ");
    memset(longer + strlen(longer), 'x', 400);
    longer[sizeof longer - 1] = '\0';
    gemm_table t;
    char err[160];
    assert_int_equal(gemm_table_parse(&t, longer, err, sizeof err), -1);
    assert_int_equal(t.n, 0);
    assert_non_null(strstr(err, "line 2: longer than"));
}

static void test_builtin_tables_parse(void **state) {
    (void)state;
    const char *h200 = gemm_table_builtin("NVIDIA H200", 13);
    assert_non_null(h200);
    gemm_table t;
    char err[160];
    assert_int_equal(gemm_table_parse(&t, h200, err, sizeof err), 0);
    assert_true(t.n > 0);
    assert_non_null(gemm_table_find(&t, SI_TYPE_F16, 22016, 4096, 64));
    gemm_table_free(&t);
    /* measured with one cuBLASLt major version and one GPU only */
    assert_null(gemm_table_builtin("NVIDIA H200", 12));
    assert_null(gemm_table_builtin("NVIDIA H100 80GB HBM3", 13));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parses_fields_and_comments),
        cmocka_unit_test(test_rejects_malformed_lines),
        cmocka_unit_test(test_builtin_tables_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
