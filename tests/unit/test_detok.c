/* test_detok.c — the streaming detokeniser: only whole UTF-8 characters come out, a character
 * split over several pushes comes out once complete, ill-formed bytes become U+FFFD (one per
 * maximal subpart), and flush turns a dangling tail into U+FFFD. Plus token_to_piece on the
 * SentencePiece test vocabulary (U+2581 -> ' ', <0xXX> -> byte) when the test data is present. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "model/gguf.h"
#include "tokenizer/detok.h"
#include "tokenizer/tokenizer.h"

#define FFFD "\xef\xbf\xbd"

/* Pushes s one chunk of `step` bytes at a time, then flushes; returns the concatenated output. */
static size_t run(const char *s, size_t n, size_t step, char *out) {
    detok d;
    detok_init(&d);
    size_t o = 0;
    for (size_t i = 0; i < n; i += step) {
        size_t k = n - i < step ? n - i : step;
        char tmp[DETOK_MAX_OUT(64)];
        size_t m = detok_push(&d, s + i, k, tmp);
        assert_true(m <= DETOK_MAX_OUT(k));
        memcpy(out + o, tmp, m);
        o += m;
    }
    o += detok_flush(&d, out + o);
    return o;
}

static void expect(const char *in, size_t n, const char *want) {
    for (size_t step = 1; step <= 5; step++) {
        char out[512];
        size_t o = run(in, n, step, out);
        if (o != strlen(want) || memcmp(out, want, o) != 0)
            fail_msg("step %zu: input of %zu bytes gave %zu bytes, want %zu", step, n, o, strlen(want));
    }
}

static void test_valid_passthrough(void **state) {
    (void)state;
    const char *s = "a\xc3\xa9\xe4\xbd\xa0\xf0\x9f\x98\x80z"; /* a é 你 😀 z */
    expect(s, strlen(s), s);
    expect("", 0, "");
}

/* Each push returns only complete characters: the 4-byte emoji split 1+3 yields nothing, then
 * all four bytes. */
static void test_holds_incomplete_tail(void **state) {
    (void)state;
    detok d;
    detok_init(&d);
    char out[64];
    assert_int_equal(detok_push(&d, "x\xf0", 2, out), 1);
    assert_memory_equal(out, "x", 1);
    assert_int_equal(detok_push(&d, "\x9f\x98", 2, out), 0);
    assert_int_equal(detok_push(&d, "\x80y", 2, out), 5);
    assert_memory_equal(out, "\xf0\x9f\x98\x80y", 5);
    assert_int_equal(detok_flush(&d, out), 0);
}

static void test_invalid_bytes(void **state) {
    (void)state;
    expect("\x80", 1, FFFD);                          /* lone continuation */
    expect("a\xff" "b", 3, "a" FFFD "b");             /* never-valid byte */
    expect("\xc0\xaf", 2, FFFD FFFD);                 /* overlong lead: each byte */
    expect("\xe4\xbd" "a", 3, FFFD "a");              /* truncated 3-byte seq, one U+FFFD */
    expect("\xed\xa0\x80", 3, FFFD FFFD FFFD);        /* surrogate: ED then A0 out of range */
    expect("\xf0\x9f\x98", 3, FFFD);                  /* dangling at end -> flush */
    expect("\xf4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD); /* > U+10FFFF */
}

/* Every output of every push is valid UTF-8 on its own, for arbitrary bytes. */
static bool valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return false;
        if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F) ||
            (c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] > 0x8F))
            return false;
        i += k;
    }
    return true;
}

static void test_random_bytes_never_broken(void **state) {
    (void)state;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int iter = 0; iter < 2000; iter++) {
        detok d;
        detok_init(&d);
        for (int p = 0; p < 8; p++) {
            char in[8], out[DETOK_MAX_OUT(8)];
            size_t n = (size_t)(x % 8);
            for (size_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                /* bias towards UTF-8-looking bytes */
                uint8_t b = (uint8_t)x;
                in[i] = (char)((x >> 8) % 3 == 0 ? (0x80 | (b & 0x3F)) : b);
            }
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t m = detok_push(&d, in, n, out);
            assert_true(valid_utf8((const uint8_t *)out, m));
        }
        char out[4];
        size_t m = detok_flush(&d, out);
        assert_true(valid_utf8((const uint8_t *)out, m));
    }
}

/* ---- token_to_piece on the SentencePiece test vocabulary ---------------------------------- */

static tokenizer *load_spm(void) {
    char path[4096];
    const char *sh = getenv("SI_SHARED_DIR"), *src = getenv("SI_SOURCE_DIR");
    struct stat st;
    if (sh && *sh) {
        snprintf(path, sizeof path, "%s/testdata/tokenizer/ggml-vocab-llama-spm.gguf", sh);
        if (stat(path, &st) != 0) snprintf(path, sizeof path, "%s/ggml-vocab-llama-spm.gguf", sh);
    } else {
        snprintf(path, sizeof path, "%s/../shared/testdata/tokenizer/ggml-vocab-llama-spm.gguf",
                 src && *src ? src : ".");
    }
    if (stat(path, &st) != 0) {
        print_message("SKIP: %s not found (set SI_SHARED_DIR)\n", path);
        return NULL;
    }
    gguf_file *g = NULL;
    if (gguf_open(path, &g) != SI_OK) fail_msg("gguf_open: %s", si_last_error());
    tokenizer *t = NULL;
    if (tokenizer_load(g, &t) != SI_OK) fail_msg("tokenizer_load: %s", si_last_error());
    gguf_close(g);
    return t;
}

static void test_spm_pieces(void **state) {
    (void)state;
    tokenizer *t = load_spm();
    if (!t) skip();
    char buf[64];
    /* <0xE4> <0xBD> <0xA0> are byte tokens: the streaming detokeniser joins them into 你 */
    int32_t b0 = tokenizer_find(t, "<0xE4>"), b1 = tokenizer_find(t, "<0xBD>"), b2 = tokenizer_find(t, "<0xA0>");
    assert_true(b0 >= 0 && b1 >= 0 && b2 >= 0);
    assert_int_equal(tokenizer_token_to_piece(t, b0, buf, sizeof buf), 1);
    assert_int_equal((uint8_t)buf[0], 0xE4);
    detok d;
    detok_init(&d);
    char out[DETOK_MAX_OUT(256)];
    assert_int_equal(detok_push_token(&d, t, b0, false, out), 0);
    assert_int_equal(detok_push_token(&d, t, b1, false, out), 0);
    assert_int_equal(detok_push_token(&d, t, b2, false, out), 3);
    assert_memory_equal(out, "\xe4\xbd\xa0", 3);

    /* "▁Hello" -> " Hello"; BOS (control) -> "" */
    int32_t hello = tokenizer_find(t, "\xe2\x96\x81Hello");
    assert_true(hello >= 0);
    assert_int_equal(tokenizer_token_to_piece(t, hello, buf, sizeof buf), 6);
    assert_memory_equal(buf, " Hello", 6);
    assert_int_equal(tokenizer_token_to_piece(t, tokenizer_bos(t), buf, sizeof buf), 0);
    assert_int_equal(tokenizer_token_to_piece_ex(t, tokenizer_bos(t), true, buf, sizeof buf), 3);
    assert_memory_equal(buf, "<s>", 3);

    /* round trip of a mixed text through encode + streaming decode (minus the prefix space) */
    const char *s = "Hello \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 world";
    int32_t ids[128];
    int32_t n = tokenizer_encode(t, s, strlen(s), false, false, ids, 128);
    assert_true(n > 0 && n <= 128);
    char text[512];
    size_t o = 0;
    detok_init(&d);
    for (int32_t i = 0; i < n; i++) {
        int32_t m = detok_push_token(&d, t, ids[i], false, text + o);
        assert_true(m >= 0);
        o += (size_t)m;
    }
    o += detok_flush(&d, text + o);
    assert_int_equal(o, strlen(s) + 1);
    assert_int_equal(text[0], ' ');
    assert_memory_equal(text + 1, s, strlen(s));
    tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_passthrough),
        cmocka_unit_test(test_holds_incomplete_tail),
        cmocka_unit_test(test_invalid_bytes),
        cmocka_unit_test(test_random_bytes_never_broken),
        cmocka_unit_test(test_spm_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
