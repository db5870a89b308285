/* test_tokenizer.c — the tokenizer against llama.cpp's own test vectors (ggml-vocab-*.gguf with
 * .inp strings and .out ids, from the shared test data) and on the default model's vocabulary
 * (SmolLM2: smollm pre-tokeniser, ChatML special tokens, EOG set). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/gguf.h"
#include "model/synth.h"
#include "tokenizer/detok.h"
#include "tokenizer/tokenizer.h"

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The vocab test folder: $SI_SHARED_DIR/testdata/tokenizer (or $SI_SHARED_DIR itself), else
 * $SI_SOURCE_DIR/../shared/testdata/tokenizer. NULL when absent. */
static const char *vocab_dir(void) {
    static char buf[4096];
    const char *sh = getenv("SI_SHARED_DIR");
    if (sh && *sh) {
        snprintf(buf, sizeof buf, "%s/testdata/tokenizer", sh);
        if (is_dir(buf)) return buf;
        snprintf(buf, sizeof buf, "%s", sh);
        if (is_dir(buf)) return buf;
    }
    const char *src = getenv("SI_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/../shared/testdata/tokenizer", src && *src ? src : ".");
    return is_dir(buf) ? buf : NULL;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

static tokenizer *load_tok(const char *path) {
    gguf_file *g = NULL;
    si_status s = gguf_open(path, &g);
    if (s != SI_OK) fail_msg("gguf_open(%s): %s", path, si_last_error());
    tokenizer *t = NULL;
    s = tokenizer_load(g, &t);
    if (s != SI_OK) fail_msg("tokenizer_load(%s): %s", path, si_last_error());
    gguf_close(g); /* the tokenizer copies what it needs */
    return t;
}

static void check_vocab(const char *name) {
    const char *dir = vocab_dir();
    if (!dir) {
        print_message("SKIP: tokenizer test data not found (set SI_SHARED_DIR or provide "
                      "$SI_SOURCE_DIR/../shared/testdata/tokenizer)\n");
        skip();
    }
    char path[4200], ipath[4300], opath[4300];
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, name);
    snprintf(ipath, sizeof ipath, "%s.inp", path);
    snprintf(opath, sizeof opath, "%s.out", path);
    tokenizer *t = load_tok(path);
    size_t ilen, olen;
    char *inp = read_all(ipath, &ilen), *outs = read_all(opath, &olen);
    assert_non_null(inp);
    assert_non_null(outs);

    static const char delim[] = "\n__ggml_vocab_test__\n";
    char *p = inp, *o = outs;
    int n_cases = 0, n_bad = 0;
    int32_t *ids = malloc(65536 * sizeof *ids);
    while (p < inp + ilen) {
        char *e = strstr(p, delim);
        assert_non_null(e);
        char *oe = strchr(o, '\n');
        assert_non_null(oe);
        *oe = '\0';
        int32_t want[4096];
        int nw = 0;
        for (char *q = o; *q;) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            want[nw++] = (int32_t)v;
            q = end;
        }
        int32_t n = tokenizer_encode(t, p, (size_t)(e - p), false, false, ids, 65536);
        bool ok = n == nw && memcmp(ids, want, (size_t)nw * sizeof *ids) == 0;
        if (!ok) {
            n_bad++;
            print_message("%s case %d: '%.*s'\n  want:", name, n_cases, (int)(e - p), p);
            for (int i = 0; i < nw; i++) print_message(" %d", want[i]);
            print_message("\n  got: ");
            for (int i = 0; i < n; i++) print_message(" %d", ids[i]);
            print_message("\n");
        }
        n_cases++;
        p = e + sizeof delim - 1;
        o = oe + 1;
    }
    print_message("%s: %d cases, %d mismatches\n", name, n_cases, n_bad);
    assert_true(n_cases > 0);
    assert_int_equal(n_bad, 0);
    free(ids);
    free(inp);
    free(outs);
    tokenizer_free(t);
}

static void test_vocab_gpt2(void **state) { (void)state; check_vocab("gpt-2"); }
static void test_vocab_starcoder(void **state) { (void)state; check_vocab("starcoder"); }
static void test_vocab_deepseek_coder(void **state) { (void)state; check_vocab("deepseek-coder"); }
static void test_vocab_falcon(void **state) { (void)state; check_vocab("falcon"); }
static void test_vocab_llama_spm(void **state) { (void)state; check_vocab("llama-spm"); }

/* ---- the default model -------------------------------------------------------------------- */

static tokenizer *load_default(void) {
    static char path[4096];
    const char *src = getenv("SI_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", src && *src ? src : ".");
    if (!is_file(path)) {
        print_message("SKIP: default model %s not found\n", path);
        return NULL;
    }
    return load_tok(path);
}

static void test_smollm_special(void **state) {
    (void)state;
    tokenizer *t = load_default();
    if (!t) skip();
    assert_int_equal(tokenizer_bos(t), 1);
    assert_int_equal(tokenizer_eos(t), 2);
    int32_t im_start = tokenizer_find(t, "<|im_start|>");
    int32_t im_end = tokenizer_find(t, "<|im_end|>");
    assert_true(im_start >= 0);
    assert_true(im_end >= 0);

    const char *chat = "<|im_start|>user\nhi<|im_end|>";
    int32_t ids[64];
    int32_t n = tokenizer_encode(t, chat, strlen(chat), true, true, ids, 64);
    assert_true(n >= 4);
    assert_int_equal(ids[0], im_start); /* add_bos_token is false: no BOS */
    assert_int_equal(ids[n - 1], im_end);
    int32_t user = tokenizer_find(t, "user");
    assert_int_equal(ids[1], user);

    /* without parse_special the markers are plain text */
    int32_t n2 = tokenizer_encode(t, chat, strlen(chat), false, false, ids, 64);
    assert_true(n2 > n);
    for (int i = 0; i < n2; i++) assert_int_not_equal(ids[i], im_start);

    assert_true(tokenizer_is_eog(t, im_end));
    assert_true(tokenizer_is_eog(t, tokenizer_eos(t)));
    assert_false(tokenizer_is_eog(t, im_start));
    assert_false(tokenizer_is_eog(t, user));
    assert_false(tokenizer_is_eog(t, -1));
    assert_false(tokenizer_is_eog(t, tokenizer_n_vocab(t)));

    /* control tokens render as "" unless asked */
    char buf[64];
    assert_int_equal(tokenizer_token_to_piece(t, im_end, buf, sizeof buf), 0);
    assert_int_equal(tokenizer_token_to_piece_ex(t, im_end, true, buf, sizeof buf), 10);
    assert_memory_equal(buf, "<|im_end|>", 10);
    assert_int_equal(tokenizer_token_to_piece(t, -1, buf, sizeof buf), -1);
    /* a too-small buffer reports the size needed */
    assert_int_equal(tokenizer_token_to_piece_ex(t, im_end, true, buf, 3), 10);
    /* the vocabulary's own text (the chat templates' bos_token / eos_token) */
    char *txt = tokenizer_token_text(t, im_end);
    assert_string_equal(txt, "<|im_end|>");
    free(txt);
    txt = tokenizer_token_text(t, -1);
    assert_string_equal(txt, "");
    free(txt);
    assert_false(tokenizer_adds_bos(t));
    tokenizer_free(t);
}

/* si_chat_apply_template on the default model: its ChatML template with the default system
 * prompt, the errors it names, and a model without a template. */
static void test_smollm_chat_apply_template(void **state) {
    (void)state;
    char path[4096];
    const char *src = getenv("SI_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", src && *src ? src : ".");
    if (!is_file(path)) {
        print_message("SKIP: default model %s not found\n", path);
        skip();
    }
    si_model_params mp = si_model_default_params();
    mp.device = SI_DEVICE_CPU;
    si_model *m = NULL;
    assert_int_equal(si_model_load(path, &mp, &m), SI_OK);
    char *out = NULL;
    assert_int_equal(si_chat_apply_template(m, "[{\"role\": \"user\", \"content\": \"hi\"}]",
                                            NULL, true, &out),
                     SI_OK);
    assert_string_equal(out, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
                             "trained by Hugging Face<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                             "<|im_start|>assistant\n");
    si_free(out);
    out = (char *)1;
    assert_int_equal(si_chat_apply_template(m, "[{\"role\": ", NULL, true, &out),
                     SI_ERR_INVALID_ARG);
    assert_null(out);
    assert_non_null(strstr(si_last_error(), "JSON"));
    assert_int_equal(si_chat_apply_template(m, NULL, NULL, true, &out), SI_ERR_INVALID_ARG);
    si_model_free(m);

    char tiny[] = "/tmp/si_test_chat_XXXXXX";
    int fd = mkstemp(tiny);
    assert_true(fd >= 0);
    close(fd);
    synth_params sp;
    assert_int_equal(synth_params_init(&sp, "tiny"), SI_OK);
    assert_int_equal(synth_write(&sp, tiny), SI_OK);
    assert_int_equal(si_model_load(tiny, &mp, &m), SI_OK);
    assert_int_equal(si_chat_apply_template(m, "[]", NULL, true, &out), SI_ERR_NOT_FOUND);
    assert_non_null(strstr(si_last_error(), "no chat template"));
    si_model_free(m);
    unlink(tiny);
}

/* Round trip: decoding the ids of a text gives the text back (byte-level BPE is lossless). */
static void test_smollm_roundtrip(void **state) {
    (void)state;
    tokenizer *t = load_default();
    if (!t) skip();
    static const char *const texts[] = {
        "Hello world", "  leading spaces\n\n\n   \t tabs", "12345678 digits 3.14159",
        "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c", /* 你好，世界 */
        "emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", "int main(void) { return 0; }\n",
        "caf\xc3\xa9 na\xc3\xafve \xc3\x84pfel",
    };
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        const char *s = texts[k];
        int32_t ids[256];
        int32_t n = tokenizer_encode(t, s, strlen(s), false, false, ids, 256);
        assert_true(n > 0 && n <= 256);
        char out[1024];
        size_t o = 0;
        detok d;
        detok_init(&d);
        for (int32_t i = 0; i < n; i++) {
            char tmp[DETOK_MAX_OUT(256)];
            int32_t m = detok_push_token(&d, t, ids[i], false, tmp);
            assert_true(m >= 0);
            memcpy(out + o, tmp, (size_t)m);
            o += (size_t)m;
        }
        o += detok_flush(&d, out + o);
        assert_int_equal(o, strlen(s));
        assert_memory_equal(out, s, o);
    }
    tokenizer_free(t);
}

/* Encoding 10 KB must take milliseconds. */
static void test_smollm_speed(void **state) {
    (void)state;
    tokenizer *t = load_default();
    if (!t) skip();
    static const char chunk[] = "The quick brown fox jumps over the lazy dog. 1234567 "
                                "\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80\n   code(x) {}\n";
    size_t n = 0, cap = 10240;
    char *text = malloc(cap + sizeof chunk);
    while (n < cap) {
        memcpy(text + n, chunk, sizeof chunk - 1);
        n += sizeof chunk - 1;
    }
    int32_t *ids = malloc(n * sizeof *ids);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int32_t k = tokenizer_encode(t, text, n, false, true, ids, (int32_t)n);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    print_message("encoded %zu bytes into %d tokens in %.2f ms\n", n, k, ms);
    assert_true(k > 0);
    assert_true(ms < 200.0);
    free(text);
    free(ids);
    tokenizer_free(t);
}

/* ---- a synthetic vocabulary written with the GGUF writer ---------------------------------- */

static si_status synth_load(const char *pre, tokenizer **out) {
    static const char *const toks[] = {"a", "b", "ab", "\xc4\xa0", "\xc4\xa0" "ab", "<|im_end|>", "c"};
    static const char *const merges[] = {"a b", "\xc4\xa0 ab"};
    int32_t types[] = {1, 1, 1, 1, 1, 3, 4};
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    assert_int_equal(gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2"), SI_OK);
    assert_int_equal(gguf_writer_set_str(w, "tokenizer.ggml.pre", pre), SI_OK);
    assert_int_equal(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 7), SI_OK);
    assert_int_equal(gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 2), SI_OK);
    assert_int_equal(gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 7), SI_OK);
    assert_int_equal(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 5), SI_OK);
    char path[256];
    snprintf(path, sizeof path, "/tmp/si_test_tok_%d.gguf", (int)getpid());
    assert_int_equal(gguf_writer_write(w, path), SI_OK);
    gguf_writer_free(w);
    gguf_file *g = NULL;
    assert_int_equal(gguf_open(path, &g), SI_OK);
    si_status s = tokenizer_load(g, out);
    gguf_close(g);
    remove(path);
    return s;
}

static void test_synthetic(void **state) {
    (void)state;
    tokenizer *t = NULL;
    assert_int_equal(synth_load("no-such-pre", &t), SI_ERR_UNSUPPORTED);
    assert_null(t);
    assert_non_null(strstr(si_last_error(), "no-such-pre"));

    assert_int_equal(synth_load("gpt-2", &t), SI_OK);
    int32_t ids[8];
    /* "ab ab" -> pieces "ab", " ab" -> merges a+b, then Ġ+ab */
    assert_int_equal(tokenizer_encode(t, "ab ab", 5, false, false, ids, 8), 2);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 4);
    /* cap smaller than the count: the total is returned, only cap ids written */
    ids[1] = -7;
    assert_int_equal(tokenizer_encode(t, "ab ab", 5, false, false, ids, 1), 2);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], -7);
    /* control tokens only with parse_special; user-defined ("c") always */
    assert_int_equal(tokenizer_encode(t, "a<|im_end|>", 11, false, true, ids, 8), 2);
    assert_int_equal(ids[1], 5);
    assert_int_equal(tokenizer_encode(t, "acb", 3, false, false, ids, 8), 3);
    assert_int_equal(ids[1], 6);
    assert_true(tokenizer_is_eog(t, 5));
    assert_int_equal(tokenizer_encode(t, "", 0, true, true, ids, 8), 0);
    assert_int_equal(tokenizer_encode(t, NULL, 1, false, false, ids, 8), -1);
    tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocab_gpt2),
        cmocka_unit_test(test_vocab_starcoder),
        cmocka_unit_test(test_vocab_deepseek_coder),
        cmocka_unit_test(test_vocab_falcon),
        cmocka_unit_test(test_vocab_llama_spm),
        cmocka_unit_test(test_smollm_special),
        cmocka_unit_test(test_smollm_chat_apply_template),
        cmocka_unit_test(test_smollm_roundtrip),
        cmocka_unit_test(test_smollm_speed),
        cmocka_unit_test(test_synthetic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
