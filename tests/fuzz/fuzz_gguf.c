/* fuzz_gguf.c — libFuzzer target for the GGUF reader: parses the input with gguf_parse, then
 * walks every key (all getters, with every element type for arrays, nested arrays included)
 * and every tensor (find by name, touch the first and last data byte), then gguf_close. Any
 * crash, sanitizer report or leak is a finding. Seeds: tests/fuzz/corpus/gguf/. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/gguf.h"

static volatile uint64_t g_sink;

static void fuzz_walk_value(const gguf_value *v, int depth) {
    if (v->type == GGUF_TYPE_STRING) {
        g_sink += v->str.len + (uint8_t)(v->str.len ? v->str.s[v->str.len - 1] : 0);
        return;
    }
    if (v->type != GGUF_TYPE_ARRAY) {
        g_sink += v->u64;
        return;
    }
    g_sink += v->arr.n;
    if (v->arr.type == GGUF_TYPE_STRING) {
        const gguf_str *s = v->arr.data;
        for (uint64_t i = 0; i < v->arr.n; i++)
            g_sink += s[i].len + (uint8_t)s[i].s[s[i].len]; /* the NUL terminator */
    } else if (v->arr.type == GGUF_TYPE_ARRAY) {
        const gguf_value *e = v->arr.data;
        for (uint64_t i = 0; i < v->arr.n; i++)
            fuzz_walk_value(&e[i], depth + 1);
    } else if (v->arr.n) {
        g_sink += ((const uint8_t *)v->arr.data)[0];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    if (gguf_parse(data, size, "fuzz.gguf", &f) != SI_OK)
        return 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const char *key = f->kv[i].key.s;
        int64_t iv;
        double dv;
        bool bv;
        const char *sv;
        const gguf_value *av;
        g_sink += (uintptr_t)gguf_get(f, key);
        g_sink += gguf_get_int(f, key, &iv) + gguf_get_float(f, key, &dv);
        g_sink += gguf_get_bool(f, key, &bv) + gguf_get_str(f, key, &sv);
        for (int t = 0; t < GGUF_TYPE_COUNT; t++)
            g_sink += gguf_get_arr(f, key, (gguf_vtype)t, &av);
        g_sink += strlen(gguf_vtype_name(f->kv[i].value.type));
        fuzz_walk_value(&f->kv[i].value, 0);
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const gguf_tensor *found = gguf_find_tensor(f, t->name.s);
        if (!found && strlen(t->name.s) == t->name.len)
            __builtin_trap(); /* a name without inner NULs must be found */
        const uint8_t *d = t->data;
        if (t->nbytes)
            g_sink += d[0] + d[t->nbytes - 1];
    }
    g_sink += (uintptr_t)gguf_find_tensor(f, "x") + (uintptr_t)gguf_get(f, "general.alignment");
    gguf_close(f);
    return 0;
}
