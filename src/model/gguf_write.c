/* gguf_write.c — the GGUF v3 writer (the GGUF spec in ggml's docs/gguf.md).
 *
 * Keys and tensors are written in insertion order. Tensor data offsets are multiples of the
 * alignment (general.alignment if set, else 32) and every tensor's data is zero-padded to the
 * alignment, as ggml's writer does. The file is written to `path.tmp` and renamed over `path`
 * only when complete, so a failure never leaves a half-written file behind. */
#include "model/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "quant/quant.h"

typedef struct gguf_wtensor {
    char *name;
    si_type type;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    size_t nbytes;
    const void *data; /* borrowed */
} gguf_wtensor;

struct gguf_writer {
    gguf_kv *kv;
    size_t n_kv, cap_kv;
    gguf_wtensor *t;
    size_t n_t, cap_t;
};

/* ---- owned values: deep copy (gguf_value_free frees them) ---------------------------------- */

static bool gguf_w_str_copy(gguf_str *dst, const gguf_str *src) {
    dst->len = src->len;
    dst->s = malloc((size_t)src->len + 1);
    if (!dst->s)
        return false;
    if (src->len)
        memcpy(dst->s, src->s, (size_t)src->len);
    dst->s[src->len] = '\0';
    return true;
}

/* Deep-copies src into dst (zeroed on failure). */
static si_status gguf_w_value_copy(gguf_value *dst, const gguf_value *src, int depth) {
    memset(dst, 0, sizeof(*dst));
    if ((unsigned)src->type >= GGUF_TYPE_COUNT)
        return si_error(SI_ERR_INVALID_ARG, "gguf writer: unknown value type %d", (int)src->type);
    if (src->type == GGUF_TYPE_STRING) {
        dst->type = GGUF_TYPE_STRING;
        return gguf_w_str_copy(&dst->str, &src->str) ? SI_OK
                                                      : si_error(SI_ERR_NOMEM, "gguf writer: out of memory");
    }
    if (src->type != GGUF_TYPE_ARRAY) {
        *dst = *src;
        return SI_OK;
    }
    if (depth >= 8)
        return si_error(SI_ERR_INVALID_ARG, "gguf writer: arrays nested deeper than 8");
    gguf_vtype et = src->arr.type;
    if ((unsigned)et >= GGUF_TYPE_COUNT)
        return si_error(SI_ERR_INVALID_ARG, "gguf writer: unknown array element type %d", (int)et);
    size_t esz = et == GGUF_TYPE_STRING ? sizeof(gguf_str)
                 : et == GGUF_TYPE_ARRAY ? sizeof(gguf_value)
                                         : gguf_vtype_width(et);
    if (src->arr.n > SIZE_MAX / esz)
        return si_error(SI_ERR_INVALID_ARG, "gguf writer: array too large");
    void *d = calloc(src->arr.n ? (size_t)src->arr.n : 1, esz);
    if (!d)
        return si_error(SI_ERR_NOMEM, "gguf writer: out of memory");
    dst->type = GGUF_TYPE_ARRAY;
    dst->arr.type = et;
    dst->arr.n = src->arr.n;
    dst->arr.data = d;
    if (et == GGUF_TYPE_STRING) {
        for (uint64_t i = 0; i < src->arr.n; i++)
            if (!gguf_w_str_copy(&((gguf_str *)d)[i], &((const gguf_str *)src->arr.data)[i])) {
                gguf_value_free(dst);
                return si_error(SI_ERR_NOMEM, "gguf writer: out of memory");
            }
    } else if (et == GGUF_TYPE_ARRAY) {
        for (uint64_t i = 0; i < src->arr.n; i++) {
            const gguf_value *e = &((const gguf_value *)src->arr.data)[i];
            si_status st = e->type == GGUF_TYPE_ARRAY
                               ? gguf_w_value_copy(&((gguf_value *)d)[i], e, depth + 1)
                               : si_error(SI_ERR_INVALID_ARG,
                                          "gguf writer: element %llu of an array of arrays is "
                                          "not an array",
                                          (unsigned long long)i);
            if (st) {
                gguf_value_free(dst);
                return st;
            }
        }
    } else if (src->arr.n) {
        memcpy(d, src->arr.data, (size_t)src->arr.n * esz);
    }
    return SI_OK;
}

/* ---- building ------------------------------------------------------------------------------- */

gguf_writer *gguf_writer_new(void) { return calloc(1, sizeof(gguf_writer)); }

void gguf_writer_free(gguf_writer *w) {
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key.s);
        gguf_value_free(&w->kv[i].value);
    }
    free(w->kv);
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->t);
    free(w);
}

si_status gguf_writer_set(gguf_writer *w, const char *key, const gguf_value *v) {
    gguf_value copy;
    si_status st = gguf_w_value_copy(&copy, v, 0);
    if (st)
        return si_error_wrap(st, "key '%s': ", key);
    size_t len = strlen(key);
    for (size_t i = 0; i < w->n_kv; i++) {
        if (w->kv[i].key.len == len && memcmp(w->kv[i].key.s, key, len) == 0) {
            gguf_value_free(&w->kv[i].value);
            w->kv[i].value = copy;
            return SI_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        gguf_kv *kv = realloc(w->kv, cap * sizeof(*kv));
        if (!kv) {
            gguf_value_free(&copy);
            return si_error(SI_ERR_NOMEM, "gguf writer: out of memory");
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    gguf_str k = {.len = len, .s = (char *)key};
    if (!gguf_w_str_copy(&w->kv[w->n_kv].key, &k)) {
        gguf_value_free(&copy);
        return si_error(SI_ERR_NOMEM, "gguf writer: out of memory");
    }
    w->kv[w->n_kv++].value = copy;
    return SI_OK;
}

si_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    gguf_value x = {.type = GGUF_TYPE_UINT32, .u64 = v};
    return gguf_writer_set(w, key, &x);
}

si_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) {
    gguf_value x = {.type = GGUF_TYPE_INT32, .i64 = v};
    return gguf_writer_set(w, key, &x);
}

si_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
    gguf_value x = {.type = GGUF_TYPE_FLOAT32, .f64 = v};
    return gguf_writer_set(w, key, &x);
}

si_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    gguf_value x = {.type = GGUF_TYPE_BOOL, .b = v};
    return gguf_writer_set(w, key, &x);
}

si_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    gguf_value x = {.type = GGUF_TYPE_STRING, .str = {.len = strlen(v), .s = (char *)v}};
    return gguf_writer_set(w, key, &x);
}

si_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_vtype elem_type,
                              const void *data, uint64_t n) {
    if (gguf_vtype_width(elem_type) == 0)
        return si_error(SI_ERR_INVALID_ARG,
                        "gguf writer: key '%s': gguf_writer_set_arr takes scalar elements, not %s",
                        key, gguf_vtype_name(elem_type));
    gguf_value x = {.type = GGUF_TYPE_ARRAY};
    x.arr.type = elem_type;
    x.arr.n = n;
    x.arr.data = (void *)data;
    return gguf_writer_set(w, key, &x);
}

si_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs,
                                  uint64_t n) {
    gguf_str *s = calloc(n ? (size_t)n : 1, sizeof(gguf_str));
    if (!s)
        return si_error(SI_ERR_NOMEM, "gguf writer: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        s[i].len = strlen(strs[i]);
        s[i].s = (char *)strs[i];
    }
    gguf_value x = {.type = GGUF_TYPE_ARRAY};
    x.arr.type = GGUF_TYPE_STRING;
    x.arr.n = n;
    x.arr.data = s;
    si_status st = gguf_writer_set(w, key, &x);
    free(s);
    return st;
}

si_status gguf_writer_add_tensor(gguf_writer *w, const char *name, si_type type,
                                 uint32_t n_dims, const int64_t *ne, const void *data) {
    const quant_traits *q = quant_get(type);
    if (!q)
        return si_error(SI_ERR_UNSUPPORTED, "gguf writer: tensor '%s': type %d is not supported",
                        name, (int)type);
    if (n_dims > GGUF_MAX_DIMS)
        return si_error(SI_ERR_INVALID_ARG, "gguf writer: tensor '%s': n_dims %u exceeds %d",
                        name, n_dims, GGUF_MAX_DIMS);
    gguf_wtensor t = {.type = type, .n_dims = n_dims, .data = data};
    int64_t n_el = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 1 || n_el > INT64_MAX / t.ne[d])
            return si_error(SI_ERR_INVALID_ARG, "gguf writer: tensor '%s': bad ne[%u] = %lld",
                            name, d, (long long)t.ne[d]);
        n_el *= t.ne[d];
    }
    if (t.ne[0] % q->block_size != 0)
        return si_error(SI_ERR_INVALID_ARG,
                        "gguf writer: tensor '%s': ne[0] = %lld is not a multiple of %d", name,
                        (long long)t.ne[0], q->block_size);
    t.nbytes = quant_row_size(type, t.ne[0]) * (size_t)(n_el / t.ne[0]);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return si_error(SI_ERR_INVALID_ARG, "gguf writer: duplicate tensor name '%s'", name);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 16;
        gguf_wtensor *nt = realloc(w->t, cap * sizeof(*nt));
        if (!nt)
            return si_error(SI_ERR_NOMEM, "gguf writer: out of memory");
        w->t = nt;
        w->cap_t = cap;
    }
    t.name = strdup(name);
    if (!t.name)
        return si_error(SI_ERR_NOMEM, "gguf writer: out of memory");
    w->t[w->n_t++] = t;
    return SI_OK;
}

/* ---- writing -------------------------------------------------------------------------------- */

typedef struct gguf_out {
    FILE *fp;
    int err; /* first errno, 0 if none */
} gguf_out;

static void gguf_put(gguf_out *o, const void *p, size_t n) {
    if (o->err || n == 0)
        return;
    if (fwrite(p, 1, n, o->fp) != n)
        o->err = errno ? errno : EIO;
}

static void gguf_put_uint(gguf_out *o, uint64_t v, unsigned width) {
    uint8_t b[8];
    for (unsigned i = 0; i < width; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    gguf_put(o, b, width);
}

static void gguf_put_str(gguf_out *o, const gguf_str *s) {
    gguf_put_uint(o, s->len, 8);
    gguf_put(o, s->s, (size_t)s->len);
}

static void gguf_put_zeros(gguf_out *o, uint64_t n) {
    static const uint8_t zero[64];
    while (n > 0) {
        size_t k = n < sizeof(zero) ? (size_t)n : sizeof(zero);
        gguf_put(o, zero, k);
        n -= k;
    }
}

/* The body of a value (no type tag); arrays: elem type, n, elements. */
static void gguf_put_value(gguf_out *o, const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_STRING: gguf_put_str(o, &v->str); return;
    case GGUF_TYPE_ARRAY: {
        gguf_put_uint(o, (uint32_t)v->arr.type, 4);
        gguf_put_uint(o, v->arr.n, 8);
        if (v->arr.type == GGUF_TYPE_STRING) {
            for (uint64_t i = 0; i < v->arr.n; i++)
                gguf_put_str(o, &((const gguf_str *)v->arr.data)[i]);
        } else if (v->arr.type == GGUF_TYPE_ARRAY) {
            for (uint64_t i = 0; i < v->arr.n; i++)
                gguf_put_value(o, &((const gguf_value *)v->arr.data)[i]);
        } else {
            /* packed in file width; the host is little-endian (checked in gguf.c) */
            gguf_put(o, v->arr.data, (size_t)v->arr.n * gguf_vtype_width(v->arr.type));
        }
        return;
    }
    case GGUF_TYPE_FLOAT32: {
        float f = (float)v->f64;
        uint32_t b;
        memcpy(&b, &f, 4);
        gguf_put_uint(o, b, 4);
        return;
    }
    case GGUF_TYPE_FLOAT64: {
        uint64_t b;
        memcpy(&b, &v->f64, 8);
        gguf_put_uint(o, b, 8);
        return;
    }
    case GGUF_TYPE_BOOL: gguf_put_uint(o, v->b ? 1 : 0, 1); return;
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        gguf_put_uint(o, v->u64, gguf_vtype_width(v->type));
        return;
    default: /* signed: two's complement truncation to the width */
        gguf_put_uint(o, (uint64_t)v->i64, gguf_vtype_width(v->type));
        return;
    }
}

static si_status gguf_w_alignment(const gguf_writer *w, uint64_t *out) {
    *out = GGUF_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key.s, "general.alignment") != 0)
            continue;
        const gguf_value *v = &w->kv[i].value;
        int64_t a;
        switch (v->type) {
        case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
            a = v->u64 > (uint64_t)INT64_MAX ? -1 : (int64_t)v->u64;
            break;
        case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
            a = v->i64;
            break;
        default: a = -1;
        }
        if (a <= 0 || (a & (a - 1)) != 0)
            return si_error(SI_ERR_INVALID_ARG,
                            "gguf writer: key 'general.alignment' must be a non-zero power of two "
                            "integer");
        *out = (uint64_t)a;
    }
    return SI_OK;
}

si_status gguf_writer_write(gguf_writer *w, const char *path) {
    uint64_t align;
    si_status st = gguf_w_alignment(w, &align);
    if (st)
        return st;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp)
        return si_error(SI_ERR_NOMEM, "%s: out of memory", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    gguf_out o = {.fp = fopen(tmp, "wb"), .err = 0};
    if (!o.fp) {
        st = si_error(SI_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return st;
    }
    errno = 0;
    gguf_put_uint(&o, GGUF_MAGIC, 4);
    gguf_put_uint(&o, 3, 4);
    gguf_put_uint(&o, w->n_t, 8);
    gguf_put_uint(&o, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        gguf_put_str(&o, &w->kv[i].key);
        gguf_put_uint(&o, (uint32_t)w->kv[i].value.type, 4);
        gguf_put_value(&o, &w->kv[i].value);
    }
    /* pos: bytes written so far, tracked for the padding before the data section */
    long here = ftell(o.fp);
    if (here < 0 && !o.err)
        o.err = errno ? errno : EIO;
    uint64_t pos = here < 0 ? 0 : (uint64_t)here, off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const gguf_wtensor *t = &w->t[i];
        gguf_str name = {.len = strlen(t->name), .s = t->name};
        gguf_put_str(&o, &name);
        gguf_put_uint(&o, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++)
            gguf_put_uint(&o, (uint64_t)t->ne[d], 8);
        gguf_put_uint(&o, (uint32_t)t->type, 4);
        gguf_put_uint(&o, off, 8);
        pos += 8 + name.len + 4 + 8ull * t->n_dims + 4 + 8;
        off += ((uint64_t)t->nbytes + align - 1) / align * align;
    }
    gguf_put_zeros(&o, (align - pos % align) % align);
    for (size_t i = 0; i < w->n_t; i++) {
        const gguf_wtensor *t = &w->t[i];
        gguf_put(&o, t->data, t->nbytes);
        gguf_put_zeros(&o, (align - t->nbytes % align) % align);
    }
    if (!o.err && fflush(o.fp) != 0)
        o.err = errno ? errno : EIO;
    if (fclose(o.fp) != 0 && !o.err)
        o.err = errno ? errno : EIO;
    if (o.err) {
        st = si_error(SI_ERR_IO, "%s: write failed: %s", tmp, strerror(o.err));
        unlink(tmp);
        free(tmp);
        return st;
    }
    if (rename(tmp, path) != 0) {
        st = si_error(SI_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp,
                      strerror(errno));
        unlink(tmp);
        free(tmp);
        return st;
    }
    free(tmp);
    return SI_OK;
}
