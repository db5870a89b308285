/* test_gguf.c — the GGUF reader and writer: round trips of every value type and of tensors,
 * every truncation of a valid file, hand-made corruptions (each must fail with the right status
 * and a message naming the file and the field), and the real SmolLM2 model when present. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "model/gguf.h"
#include "quant/quant.h"
#define TEST_TMPDIR_NAME "si_test_gguf"
#include "test_tmpdir.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static void tmp_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", g_dir, name);
}

static uint8_t *read_all(const char *path, size_t *size) {
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *size = (size_t)n;
    return b;
}

static void fill_bytes(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

/* ---- round trip of every value type ------------------------------------------------------- */

static const char *const k_utf8 = "h\xc3\xa9llo \xe2\x86\x92 \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\xa6\x99\nline2";

static void test_roundtrip_values(void **state) {
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    gguf_value v;
    memset(&v, 0, sizeof(v));
    v.type = GGUF_TYPE_UINT8, v.u64 = 255;
    assert_int_equal(gguf_writer_set(w, "t.u8", &v), SI_OK);
    v.type = GGUF_TYPE_INT8, v.i64 = -128;
    assert_int_equal(gguf_writer_set(w, "t.i8", &v), SI_OK);
    v.type = GGUF_TYPE_UINT16, v.u64 = 65535;
    assert_int_equal(gguf_writer_set(w, "t.u16", &v), SI_OK);
    v.type = GGUF_TYPE_INT16, v.i64 = -32768;
    assert_int_equal(gguf_writer_set(w, "t.i16", &v), SI_OK);
    assert_int_equal(gguf_writer_set_u32(w, "t.u32", UINT32_MAX), SI_OK);
    assert_int_equal(gguf_writer_set_i32(w, "t.i32", INT32_MIN), SI_OK);
    assert_int_equal(gguf_writer_set_f32(w, "t.f32", 1.5f), SI_OK);
    assert_int_equal(gguf_writer_set_bool(w, "t.true", true), SI_OK);
    assert_int_equal(gguf_writer_set_bool(w, "t.false", false), SI_OK);
    assert_int_equal(gguf_writer_set_str(w, "t.str", k_utf8), SI_OK);
    assert_int_equal(gguf_writer_set_str(w, "t.empty", ""), SI_OK);
    v.type = GGUF_TYPE_UINT64, v.u64 = UINT64_MAX;
    assert_int_equal(gguf_writer_set(w, "t.u64max", &v), SI_OK);
    v.type = GGUF_TYPE_INT64, v.i64 = INT64_MIN;
    assert_int_equal(gguf_writer_set(w, "t.i64min", &v), SI_OK);
    v.type = GGUF_TYPE_INT64, v.i64 = INT64_MAX;
    assert_int_equal(gguf_writer_set(w, "t.i64max", &v), SI_OK);
    v.type = GGUF_TYPE_FLOAT64, v.f64 = M_PI;
    assert_int_equal(gguf_writer_set(w, "t.f64", &v), SI_OK);
    /* replacing a key keeps its position and takes the new value */
    assert_int_equal(gguf_writer_set_u32(w, "t.replaced", 1), SI_OK);
    assert_int_equal(gguf_writer_set_u32(w, "t.replaced", 2), SI_OK);

    const uint8_t a_u8[] = {0, 1, 254, 255};
    const int64_t a_i64[] = {INT64_MIN, -1, 0, INT64_MAX};
    const double a_f64[] = {-0.0, 1e300, M_E};
    const uint8_t a_bool[] = {1, 0, 1};
    const char *const a_str[] = {"", "a", k_utf8, "<|im_end|>"};
    assert_int_equal(gguf_writer_set_arr(w, "a.u8", GGUF_TYPE_UINT8, a_u8, 4), SI_OK);
    assert_int_equal(gguf_writer_set_arr(w, "a.i64", GGUF_TYPE_INT64, a_i64, 4), SI_OK);
    assert_int_equal(gguf_writer_set_arr(w, "a.f64", GGUF_TYPE_FLOAT64, a_f64, 3), SI_OK);
    assert_int_equal(gguf_writer_set_arr(w, "a.bool", GGUF_TYPE_BOOL, a_bool, 3), SI_OK);
    assert_int_equal(gguf_writer_set_arr(w, "a.empty", GGUF_TYPE_INT32, NULL, 0), SI_OK);
    assert_int_equal(gguf_writer_set_arr_str(w, "a.str", a_str, 4), SI_OK);
    assert_int_equal(gguf_writer_set_arr_str(w, "a.str_empty", NULL, 0), SI_OK);
    assert_int_not_equal(gguf_writer_set_arr(w, "a.bad", GGUF_TYPE_STRING, a_str, 1), SI_OK);

    /* [[1, 2], [], [3]] of int32, and [[["x", "y"]], []] */
    int32_t i1[] = {1, 2}, i3[] = {3};
    gguf_value inner[3];
    memset(inner, 0, sizeof(inner));
    for (int i = 0; i < 3; i++)
        inner[i].type = GGUF_TYPE_ARRAY, inner[i].arr.type = GGUF_TYPE_INT32;
    inner[0].arr.n = 2, inner[0].arr.data = i1;
    inner[1].arr.n = 0, inner[1].arr.data = NULL;
    inner[2].arr.n = 1, inner[2].arr.data = i3;
    gguf_value nested = {.type = GGUF_TYPE_ARRAY};
    nested.arr.type = GGUF_TYPE_ARRAY, nested.arr.n = 3, nested.arr.data = inner;
    assert_int_equal(gguf_writer_set(w, "a.nested", &nested), SI_OK);
    gguf_str xy[2] = {{1, "x"}, {1, "y"}};
    gguf_value lvl3 = {.type = GGUF_TYPE_ARRAY};
    lvl3.arr.type = GGUF_TYPE_STRING, lvl3.arr.n = 2, lvl3.arr.data = xy;
    gguf_value lvl2[2];
    memset(lvl2, 0, sizeof(lvl2));
    lvl2[0].type = GGUF_TYPE_ARRAY, lvl2[0].arr.type = GGUF_TYPE_ARRAY;
    lvl2[0].arr.n = 1, lvl2[0].arr.data = &lvl3;
    lvl2[1].type = GGUF_TYPE_ARRAY, lvl2[1].arr.type = GGUF_TYPE_ARRAY;
    gguf_value lvl1 = {.type = GGUF_TYPE_ARRAY};
    lvl1.arr.type = GGUF_TYPE_ARRAY, lvl1.arr.n = 2, lvl1.arr.data = lvl2;
    assert_int_equal(gguf_writer_set(w, "a.nested3", &lvl1), SI_OK);

    char path[300];
    tmp_path(path, sizeof(path), "values.gguf");
    assert_int_equal(gguf_writer_write(w, path), SI_OK);
    gguf_writer_free(w);
    char tmp[310];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_int_not_equal(access(tmp, F_OK), 0);

    gguf_file *f = NULL;
    assert_int_equal(gguf_open(path, &f), SI_OK);
    assert_non_null(f);
    assert_int_equal(f->version, 3);
    assert_int_equal(f->n_tensors, 0);
    assert_int_equal(f->n_kv, 25);
    assert_string_equal(f->kv[0].key.s, "t.u8");
    assert_string_equal(f->kv[15].key.s, "t.replaced");

    int64_t i;
    double d;
    bool b;
    const char *s;
    assert_int_equal(gguf_get_int(f, "t.u8", &i), SI_OK);
    assert_int_equal(i, 255);
    assert_int_equal(gguf_get_int(f, "t.i8", &i), SI_OK);
    assert_int_equal(i, -128);
    assert_int_equal(gguf_get_int(f, "t.u16", &i), SI_OK);
    assert_int_equal(i, 65535);
    assert_int_equal(gguf_get_int(f, "t.i16", &i), SI_OK);
    assert_int_equal(i, -32768);
    assert_int_equal(gguf_get_int(f, "t.u32", &i), SI_OK);
    assert_int_equal(i, UINT32_MAX);
    assert_int_equal(gguf_get_int(f, "t.i32", &i), SI_OK);
    assert_int_equal(i, INT32_MIN);
    assert_int_equal(gguf_get_int(f, "t.i64min", &i), SI_OK);
    assert_true(i == INT64_MIN);
    assert_int_equal(gguf_get_int(f, "t.i64max", &i), SI_OK);
    assert_true(i == INT64_MAX);
    assert_int_equal(gguf_get_int(f, "t.replaced", &i), SI_OK);
    assert_int_equal(i, 2);
    assert_true(gguf_get(f, "t.u64max")->u64 == UINT64_MAX);
    assert_int_equal(gguf_get(f, "t.u64max")->type, GGUF_TYPE_UINT64);
    assert_int_equal(gguf_get_int(f, "t.u64max", &i), SI_ERR_FORMAT);
    assert_non_null(strstr(si_last_error(), "t.u64max"));
    assert_int_equal(gguf_get_float(f, "t.f32", &d), SI_OK);
    assert_true(d == 1.5);
    assert_int_equal(gguf_get_float(f, "t.f64", &d), SI_OK);
    assert_true(d == M_PI);
    assert_int_equal(gguf_get_float(f, "t.i32", &d), SI_OK);
    assert_true(d == (double)INT32_MIN);
    assert_int_equal(gguf_get_bool(f, "t.true", &b), SI_OK);
    assert_true(b);
    assert_int_equal(gguf_get_bool(f, "t.false", &b), SI_OK);
    assert_false(b);
    assert_int_equal(gguf_get_str(f, "t.str", &s), SI_OK);
    assert_string_equal(s, k_utf8);
    assert_int_equal(gguf_get(f, "t.str")->str.len, strlen(k_utf8));
    assert_int_equal(gguf_get_str(f, "t.empty", &s), SI_OK);
    assert_string_equal(s, "");

    /* wrong types and absent keys */
    assert_int_equal(gguf_get_int(f, "t.str", &i), SI_ERR_FORMAT);
    assert_non_null(strstr(si_last_error(), "t.str"));
    assert_non_null(strstr(si_last_error(), "string"));
    assert_non_null(strstr(si_last_error(), "integer"));
    assert_int_equal(gguf_get_str(f, "t.u8", &s), SI_ERR_FORMAT);
    assert_non_null(strstr(si_last_error(), "uint8"));
    assert_int_equal(gguf_get_bool(f, "t.u8", &b), SI_ERR_FORMAT);
    assert_int_equal(gguf_get_float(f, "t.str", &d), SI_ERR_FORMAT);
    assert_int_equal(gguf_get_int(f, "no.such.key", &i), SI_ERR_NOT_FOUND);
    assert_non_null(strstr(si_last_error(), "no.such.key"));
    assert_null(gguf_get(f, "no.such.key"));

    const gguf_value *a;
    assert_int_equal(gguf_get_arr(f, "a.u8", GGUF_TYPE_UINT8, &a), SI_OK);
    assert_int_equal(a->arr.n, 4);
    assert_memory_equal(a->arr.data, a_u8, sizeof(a_u8));
    assert_int_equal(gguf_get_arr(f, "a.i64", GGUF_TYPE_INT64, &a), SI_OK);
    assert_memory_equal(a->arr.data, a_i64, sizeof(a_i64));
    assert_int_equal(gguf_get_arr(f, "a.f64", GGUF_TYPE_FLOAT64, &a), SI_OK);
    assert_memory_equal(a->arr.data, a_f64, sizeof(a_f64));
    assert_int_equal(gguf_get_arr(f, "a.bool", GGUF_TYPE_BOOL, &a), SI_OK);
    assert_memory_equal(a->arr.data, a_bool, sizeof(a_bool));
    assert_int_equal(gguf_get_arr(f, "a.empty", GGUF_TYPE_INT32, &a), SI_OK);
    assert_int_equal(a->arr.n, 0);
    assert_int_equal(gguf_get_arr(f, "a.str", GGUF_TYPE_STRING, &a), SI_OK);
    assert_int_equal(a->arr.n, 4);
    for (int k = 0; k < 4; k++) {
        const gguf_str *e = &((const gguf_str *)a->arr.data)[k];
        assert_string_equal(e->s, a_str[k]);
        assert_int_equal(e->len, strlen(a_str[k]));
    }
    assert_int_equal(gguf_get_arr(f, "a.str_empty", GGUF_TYPE_STRING, &a), SI_OK);
    assert_int_equal(a->arr.n, 0);
    assert_int_equal(gguf_get_arr(f, "a.u8", GGUF_TYPE_INT32, &a), SI_ERR_FORMAT);
    assert_non_null(strstr(si_last_error(), "a.u8"));
    assert_non_null(strstr(si_last_error(), "int32"));
    assert_int_equal(gguf_get_arr(f, "t.u8", GGUF_TYPE_UINT8, &a), SI_ERR_FORMAT);

    assert_int_equal(gguf_get_arr(f, "a.nested", GGUF_TYPE_ARRAY, &a), SI_OK);
    assert_int_equal(a->arr.n, 3);
    const gguf_value *in = a->arr.data;
    assert_int_equal(in[0].type, GGUF_TYPE_ARRAY);
    assert_int_equal(in[0].arr.type, GGUF_TYPE_INT32);
    assert_int_equal(in[0].arr.n, 2);
    assert_memory_equal(in[0].arr.data, i1, sizeof(i1));
    assert_int_equal(in[1].arr.n, 0);
    assert_int_equal(in[2].arr.n, 1);
    assert_int_equal(((const int32_t *)in[2].arr.data)[0], 3);
    assert_int_equal(gguf_get_arr(f, "a.nested3", GGUF_TYPE_ARRAY, &a), SI_OK);
    in = a->arr.data;
    assert_int_equal(a->arr.n, 2);
    assert_int_equal(in[0].arr.type, GGUF_TYPE_ARRAY);
    assert_int_equal(in[0].arr.n, 1);
    const gguf_value *l3 = in[0].arr.data;
    assert_int_equal(l3->arr.type, GGUF_TYPE_STRING);
    assert_int_equal(l3->arr.n, 2);
    assert_string_equal(((const gguf_str *)l3->arr.data)[1].s, "y");
    assert_int_equal(in[1].arr.n, 0);
    gguf_close(f);
}

/* ---- tensors ------------------------------------------------------------------------------- */

typedef struct tspec {
    const char *name;
    si_type type;
    uint32_t n_dims;
    int64_t ne[4];
} tspec;

static const tspec k_tensors[] = {
    {"blk.0.attn_q.weight", SI_TYPE_Q8_0, 2, {64, 3, 1, 1}},
    {"blk.0.ffn.weight", SI_TYPE_Q4_0, 3, {32, 2, 2, 1}},
    {"norm.f16", SI_TYPE_F16, 1, {7, 1, 1, 1}},
    {"four.d", SI_TYPE_F32, 4, {3, 2, 1, 2}},
    {"last", SI_TYPE_F32, 2, {8, 2, 1, 1}}, /* 64 bytes: the file ends with no padding */
};
#define N_TENSORS (sizeof(k_tensors) / sizeof(k_tensors[0]))

static size_t tspec_bytes(const tspec *t) {
    return quant_row_size(t->type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}

/* Writes a file with a few keys and the tensors above; alignment 0 = default. Returns the
 * data buffers (to compare, freed by the caller). */
static uint8_t **write_tensor_file(const char *path, uint32_t alignment) {
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", "llama"), SI_OK);
    if (alignment)
        assert_int_equal(gguf_writer_set_u32(w, "general.alignment", alignment), SI_OK);
    assert_int_equal(gguf_writer_set_u32(w, "llama.block_count", 1), SI_OK);
    const char *toks[] = {"<s>", "a", "b"};
    assert_int_equal(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 3), SI_OK);
    uint8_t **data = calloc(N_TENSORS, sizeof(uint8_t *));
    for (size_t i = 0; i < N_TENSORS; i++) {
        const tspec *t = &k_tensors[i];
        size_t n = tspec_bytes(t);
        assert_true(n > 0);
        data[i] = malloc(n);
        fill_bytes(data[i], n, (uint32_t)i + 1);
        assert_int_equal(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, data[i]),
                         SI_OK);
    }
    /* a duplicate tensor name and a bad shape are refused */
    assert_int_not_equal(gguf_writer_add_tensor(w, "last", SI_TYPE_F32, 1, k_tensors[0].ne,
                                                data[0]),
                         SI_OK);
    int64_t bad_ne[1] = {33};
    assert_int_not_equal(gguf_writer_add_tensor(w, "bad", SI_TYPE_Q8_0, 1, bad_ne, data[0]),
                         SI_OK);
    assert_int_equal(gguf_writer_write(w, path), SI_OK);
    gguf_writer_free(w);
    return data;
}

static void check_tensor_file(uint32_t alignment) {
    char path[300];
    tmp_path(path, sizeof(path), "tensors.gguf");
    uint8_t **data = write_tensor_file(path, alignment);
    gguf_file *f = NULL;
    assert_int_equal(gguf_open(path, &f), SI_OK);
    uint64_t align = alignment ? alignment : 32;
    assert_int_equal(f->alignment, align);
    assert_int_equal(f->n_tensors, N_TENSORS);
    assert_int_equal(f->data_offset % align, 0);
    assert_true(f->mapped);
    for (size_t i = 0; i < N_TENSORS; i++) {
        const tspec *s = &k_tensors[i];
        const gguf_tensor *t = gguf_find_tensor(f, s->name);
        assert_non_null(t);
        assert_ptr_equal(t, &f->tensors[i]); /* insertion order */
        assert_int_equal(t->type, s->type);
        assert_int_equal(t->n_dims, s->n_dims);
        for (int d = 0; d < 4; d++)
            assert_int_equal(t->ne[d], s->ne[d]);
        assert_int_equal(t->nbytes, tspec_bytes(s));
        assert_int_equal(t->offset % align, 0);
        assert_int_equal(((const uint8_t *)t->data - f->base) % align, 0);
        assert_memory_equal(t->data, data[i], t->nbytes);
        free(data[i]);
    }
    free(data);
    assert_null(gguf_find_tensor(f, "nope"));
    /* the last tensor ends exactly at the end of the file */
    const gguf_tensor *last = &f->tensors[N_TENSORS - 1];
    assert_int_equal(f->data_offset + last->offset + last->nbytes, f->size);
    gguf_close(f);
}

static void test_tensors_align32(void **state) { check_tensor_file(0); }
static void test_tensors_align64(void **state) { check_tensor_file(64); }

/* Every proper prefix of a valid file fails cleanly (each copy is exactly len bytes, so a
 * sanitizer would catch any read past it). */
static void test_truncations(void **state) {
    char path[300];
    tmp_path(path, sizeof(path), "trunc.gguf");
    uint8_t **data = write_tensor_file(path, 0);
    for (size_t i = 0; i < N_TENSORS; i++)
        free(data[i]);
    free(data);
    size_t size;
    uint8_t *buf = read_all(path, &size);
    gguf_file *f = NULL;
    assert_int_equal(gguf_parse(buf, size, "trunc.gguf", &f), SI_OK);
    gguf_close(f);
    for (size_t len = 0; len < size; len++) {
        uint8_t *cut = malloc(len ? len : 1);
        memcpy(cut, buf, len);
        f = (gguf_file *)1;
        si_status st = gguf_parse(cut, len, "trunc.gguf", &f);
        if (st == SI_OK)
            fail_msg("prefix of %zu/%zu bytes parsed OK", len, size);
        assert_null(f);
        assert_non_null(strstr(si_last_error(), "trunc.gguf"));
        free(cut);
    }
    free(buf);
}

/* ---- hand-made corruptions ------------------------------------------------------------------ */

typedef struct bb {
    uint8_t b[4096];
    size_t n;
} bb;

static void bb_u32(bb *o, uint32_t v) {
    for (int i = 0; i < 4; i++)
        o->b[o->n++] = (uint8_t)(v >> (8 * i));
}
static void bb_u64(bb *o, uint64_t v) {
    for (int i = 0; i < 8; i++)
        o->b[o->n++] = (uint8_t)(v >> (8 * i));
}
static void bb_str(bb *o, const char *s) {
    bb_u64(o, strlen(s));
    memcpy(o->b + o->n, s, strlen(s));
    o->n += strlen(s);
}

/* A small file: kv general.alignment u32 (align), kv "k2" (type vtype2, u32 7), optionally a
 * duplicate "k2", one tensor "w" F32-ish [ttype] of n_dims dims 32x2(x1..), at toff, then
 * data_len data bytes after the padding. */
typedef struct spec {
    uint32_t magic, version, align, vtype2, n_dims, ttype;
    uint64_t n_kv, keylen, toff;
    size_t data_len;
    bool dup_key;
} spec;

static spec spec_default(void) {
    spec s = {.magic = GGUF_MAGIC, .version = 3, .align = 32, .vtype2 = GGUF_TYPE_UINT32,
              .n_dims = 2, .ttype = SI_TYPE_F32, .n_kv = 2, .keylen = UINT64_MAX,
              .toff = 0, .data_len = 256, .dup_key = false};
    return s;
}

static size_t build(bb *o, const spec *s) {
    o->n = 0;
    bb_u32(o, s->magic);
    bb_u32(o, s->version);
    bb_u64(o, 1);
    bb_u64(o, s->n_kv + (s->dup_key ? 1 : 0));
    if (s->keylen != UINT64_MAX) {
        bb_u64(o, s->keylen);
        memcpy(o->b + o->n, "general.alignment", 17);
        o->n += 17;
    } else {
        bb_str(o, "general.alignment");
    }
    bb_u32(o, GGUF_TYPE_UINT32);
    bb_u32(o, s->align);
    for (int k = 0; k < (s->dup_key ? 2 : 1); k++) {
        bb_str(o, "k2");
        bb_u32(o, s->vtype2);
        bb_u32(o, 7);
    }
    bb_str(o, "w");
    bb_u32(o, s->n_dims);
    for (uint32_t d = 0; d < s->n_dims; d++)
        bb_u64(o, d == 0 ? 32 : d == 1 ? 2 : 1);
    bb_u32(o, s->ttype);
    bb_u64(o, s->toff);
    uint32_t a = s->align && !(s->align & (s->align - 1)) ? s->align : 32;
    while (o->n % a)
        o->b[o->n++] = 0;
    memset(o->b + o->n, 0x5a, s->data_len);
    o->n += s->data_len;
    return o->n;
}

static void expect_fail(const spec *s, si_status want, const char *word) {
    static bb o;
    size_t n = build(&o, s);
    gguf_file *f = NULL;
    si_status st = gguf_parse(o.b, n, "x.gguf", &f);
    if (st != want)
        fail_msg("expected %s, got %s (%s)", si_status_name(want), si_status_name(st),
                 si_last_error());
    assert_null(f);
    const char *msg = si_last_error();
    if (!strstr(msg, "x.gguf") || !strstr(msg, word))
        fail_msg("message '%s' lacks 'x.gguf' or '%s'", msg, word);
}

static void test_corruptions(void **state) {
    static bb o;
    spec s = spec_default();
    gguf_file *f = NULL;
    size_t n = build(&o, &s);
    assert_int_equal(gguf_parse(o.b, n, "x.gguf", &f), SI_OK); /* the baseline is valid */
    assert_int_equal(f->n_tensors, 1);
    assert_int_equal(f->tensors[0].nbytes, 256);
    gguf_close(f);

    s = spec_default(), s.magic = 0x46554746u;
    expect_fail(&s, SI_ERR_FORMAT, "magic");
    s = spec_default(), s.version = 1;
    expect_fail(&s, SI_ERR_UNSUPPORTED, "version");
    s = spec_default(), s.version = 99;
    expect_fail(&s, SI_ERR_UNSUPPORTED, "version");
    s = spec_default(), s.version = 2; /* v2 is accepted */
    n = build(&o, &s);
    assert_int_equal(gguf_parse(o.b, n, "x.gguf", &f), SI_OK);
    gguf_close(f);
    s = spec_default(), s.n_kv = 1ull << 60;
    expect_fail(&s, SI_ERR_FORMAT, "n_kv");
    s = spec_default(), s.keylen = 1ull << 60;
    expect_fail(&s, SI_ERR_FORMAT, "length");
    s = spec_default(), s.keylen = UINT64_MAX - 1;
    expect_fail(&s, SI_ERR_FORMAT, "length");
    s = spec_default(), s.vtype2 = 13;
    expect_fail(&s, SI_ERR_FORMAT, "type");
    s = spec_default(), s.vtype2 = 0xffffffffu;
    expect_fail(&s, SI_ERR_FORMAT, "type");
    s = spec_default(), s.ttype = 99;
    expect_fail(&s, SI_ERR_UNSUPPORTED, "type 99");
    s = spec_default(), s.ttype = 4; /* a removed ggml type id */
    expect_fail(&s, SI_ERR_UNSUPPORTED, "'w'");
    s = spec_default(), s.n_dims = 5;
    expect_fail(&s, SI_ERR_FORMAT, "n_dims");
    s = spec_default(), s.toff = 4;
    expect_fail(&s, SI_ERR_FORMAT, "offset");
    s = spec_default(), s.toff = 1024;
    expect_fail(&s, SI_ERR_FORMAT, "past end");
    s = spec_default(), s.toff = UINT64_MAX - 31; /* aligned, and overflows any naive sum */
    expect_fail(&s, SI_ERR_FORMAT, "past end");
    s = spec_default(), s.data_len = 255;
    expect_fail(&s, SI_ERR_FORMAT, "past end");
    s = spec_default(), s.align = 48;
    expect_fail(&s, SI_ERR_FORMAT, "alignment");
    s = spec_default(), s.align = 0;
    expect_fail(&s, SI_ERR_FORMAT, "alignment");
    s = spec_default(), s.dup_key = true;
    expect_fail(&s, SI_ERR_FORMAT, "duplicate");
    s = spec_default(), s.ttype = SI_TYPE_Q8_0; /* ne[0] = 32 is fine for Q8_0, 68 bytes */
    n = build(&o, &s);
    assert_int_equal(gguf_parse(o.b, n, "x.gguf", &f), SI_OK);
    assert_int_equal(f->tensors[0].nbytes, 68);
    gguf_close(f);
    s = spec_default(), s.ttype = SI_TYPE_Q4_K; /* ne[0] = 32 is not a multiple of 256 */
    if (quant_get(SI_TYPE_Q4_K))
        expect_fail(&s, SI_ERR_FORMAT, "block size");
}

/* Raw blobs that stress the array paths: a huge array count, deep nesting. */
static void test_hostile_arrays(void **state) {
    static bb o;
    gguf_file *f = NULL;
    /* an array of 2^61 uint64 elements */
    o.n = 0;
    bb_u32(&o, GGUF_MAGIC), bb_u32(&o, 3), bb_u64(&o, 0), bb_u64(&o, 1);
    bb_str(&o, "big"), bb_u32(&o, GGUF_TYPE_ARRAY), bb_u32(&o, GGUF_TYPE_UINT64);
    bb_u64(&o, 1ull << 61);
    assert_int_equal(gguf_parse(o.b, o.n, "x.gguf", &f), SI_ERR_FORMAT);
    assert_non_null(strstr(si_last_error(), "big"));
    /* an array of 2^40 strings */
    o.n = 0;
    bb_u32(&o, GGUF_MAGIC), bb_u32(&o, 3), bb_u64(&o, 0), bb_u64(&o, 1);
    bb_str(&o, "strs"), bb_u32(&o, GGUF_TYPE_ARRAY), bb_u32(&o, GGUF_TYPE_STRING);
    bb_u64(&o, 1ull << 40);
    assert_int_equal(gguf_parse(o.b, o.n, "x.gguf", &f), SI_ERR_FORMAT);
    /* arrays nested 100 deep */
    o.n = 0;
    bb_u32(&o, GGUF_MAGIC), bb_u32(&o, 3), bb_u64(&o, 0), bb_u64(&o, 1);
    bb_str(&o, "deep"), bb_u32(&o, GGUF_TYPE_ARRAY);
    for (int i = 0; i < 100; i++)
        bb_u32(&o, GGUF_TYPE_ARRAY), bb_u64(&o, 1);
    bb_u32(&o, GGUF_TYPE_UINT8), bb_u64(&o, 0);
    assert_int_equal(gguf_parse(o.b, o.n, "x.gguf", &f), SI_ERR_FORMAT);
    assert_non_null(strstr(si_last_error(), "nested"));
    /* huge n_tensors */
    o.n = 0;
    bb_u32(&o, GGUF_MAGIC), bb_u32(&o, 3), bb_u64(&o, UINT64_MAX), bb_u64(&o, 0);
    assert_int_equal(gguf_parse(o.b, o.n, "x.gguf", &f), SI_ERR_FORMAT);
    assert_non_null(strstr(si_last_error(), "n_tensors"));
    /* a tensor with ne that overflow int64 in product */
    o.n = 0;
    bb_u32(&o, GGUF_MAGIC), bb_u32(&o, 3), bb_u64(&o, 1), bb_u64(&o, 0);
    bb_str(&o, "t"), bb_u32(&o, 2), bb_u64(&o, 1ull << 40), bb_u64(&o, 1ull << 40);
    bb_u32(&o, SI_TYPE_F32), bb_u64(&o, 0);
    assert_int_equal(gguf_parse(o.b, o.n, "x.gguf", &f), SI_ERR_FORMAT);
    /* ne = 0 */
    o.n = 0;
    bb_u32(&o, GGUF_MAGIC), bb_u32(&o, 3), bb_u64(&o, 1), bb_u64(&o, 0);
    bb_str(&o, "t"), bb_u32(&o, 1), bb_u64(&o, 0), bb_u32(&o, SI_TYPE_F32), bb_u64(&o, 0);
    assert_int_equal(gguf_parse(o.b, o.n, "x.gguf", &f), SI_ERR_FORMAT);
    assert_non_null(strstr(si_last_error(), "ne[0]"));
    /* a duplicate tensor name */
    o.n = 0;
    bb_u32(&o, GGUF_MAGIC), bb_u32(&o, 3), bb_u64(&o, 2), bb_u64(&o, 0);
    for (int i = 0; i < 2; i++)
        bb_str(&o, "t"), bb_u32(&o, 1), bb_u64(&o, 8), bb_u32(&o, SI_TYPE_F32), bb_u64(&o, 0);
    while (o.n % 32)
        o.b[o.n++] = 0;
    memset(o.b + o.n, 0, 32), o.n += 32;
    assert_int_equal(gguf_parse(o.b, o.n, "x.gguf", &f), SI_ERR_FORMAT);
    assert_non_null(strstr(si_last_error(), "duplicate"));
    assert_null(f);
}

static void test_io_errors(void **state) {
    gguf_file *f = NULL;
    assert_int_equal(gguf_open("/nonexistent/dir/m.gguf", &f), SI_ERR_IO);
    assert_non_null(strstr(si_last_error(), "/nonexistent/dir/m.gguf"));
    assert_null(f);
    assert_int_equal(gguf_open(g_dir, &f), SI_ERR_IO); /* a directory */
    char path[300];
    tmp_path(path, sizeof(path), "empty.gguf");
    FILE *fp = fopen(path, "wb");
    fclose(fp);
    assert_int_equal(gguf_open(path, &f), SI_ERR_FORMAT);
    assert_non_null(strstr(si_last_error(), "truncated at byte 0"));

    gguf_writer *w = gguf_writer_new();
    assert_int_equal(gguf_writer_set_u32(w, "general.alignment", 24), SI_OK);
    tmp_path(path, sizeof(path), "bad_align.gguf");
    assert_int_equal(gguf_writer_write(w, path), SI_ERR_INVALID_ARG);
    assert_int_equal(gguf_writer_set_u32(w, "general.alignment", 16), SI_OK);
    assert_int_equal(gguf_writer_write(w, "/nonexistent/dir/out.gguf"), SI_ERR_IO);
    assert_non_null(strstr(si_last_error(), "/nonexistent/dir/out.gguf"));
    gguf_writer_free(w);
}

/* ---- the real model ------------------------------------------------------------------------ */

static void test_real_model(void **state) {
    const char *src = getenv("SI_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", src ? src : ".");
    if (access(path, R_OK) != 0) {
        print_message("model %s absent: skipping\n", path);
        skip();
    }
    gguf_file *f = NULL;
    if (gguf_open(path, &f) != SI_OK)
        fail_msg("%s", si_last_error());
    assert_int_equal(f->version, 3);
    assert_int_equal(f->n_tensors, 272);
    assert_int_equal(f->n_kv, 33);
    const char *arch;
    assert_int_equal(gguf_get_str(f, "general.architecture", &arch), SI_OK);
    assert_string_equal(arch, "llama");
    int64_t n_layer;
    assert_int_equal(gguf_get_int(f, "llama.block_count", &n_layer), SI_OK);
    assert_int_equal(n_layer, 30);
    const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->type, SI_TYPE_Q8_0);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 576);
    assert_int_equal(t->ne[1], 49152);
    const gguf_value *toks;
    assert_int_equal(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks), SI_OK);
    assert_int_equal(toks->arr.n, 49152);
    gguf_close(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_values),
        cmocka_unit_test(test_tensors_align32),
        cmocka_unit_test(test_tensors_align64),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_corruptions),
        cmocka_unit_test(test_hostile_arrays),
        cmocka_unit_test(test_io_errors),
        cmocka_unit_test(test_real_model),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
