/* gguf.c — the GGUF v2/v3 reader (the GGUF spec in ggml's docs/gguf.md).
 *
 * Layout: magic u32 "GGUF", version u32, n_tensors u64, n_kv u64; n_kv key/value pairs (key:
 * u64 length + bytes, value type u32, value); n_tensors tensor infos (name, n_dims u32, ne
 * u64[n_dims], type u32, offset u64); padding to general.alignment; the data section.
 *
 * The input is hostile until proven otherwise: every read is bounds-checked before it happens,
 * every count is checked against the bytes left before anything is allocated for it (so a count
 * of 2^60 fails cleanly instead of asking malloc for exabytes), and shape/offset arithmetic is
 * overflow-checked. Errors name the file, the key or tensor, and the byte offset. No path
 * leaks or aborts on bad input.
 *
 * NOTE: multi-byte scalars are assembled byte by byte (little-endian, alignment-free), but
 * scalar arrays are memcpy'd in their file width, which assumes a little-endian host. */
#include "model/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "quant/quant.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c assumes a little-endian host (scalar arrays are copied in file byte order)"
#endif

#define GGUF_MAX_DEPTH 8 /* nesting limit for arrays of arrays */

/* ---- cursor over the input ---------------------------------------------------------------- */

typedef struct gguf_rd {
    const uint8_t *p;
    size_t size;
    size_t pos;
    const char *name; /* file name for messages */
    char ctx[160];    /* what is being read, for messages ("key 'general.name'") */
} gguf_rd;

static size_t gguf_left(const gguf_rd *r) { return r->size - r->pos; }

static si_status gguf_truncated(const gguf_rd *r, const char *what) {
    if (r->ctx[0])
        return si_error(SI_ERR_FORMAT, "%s: truncated at byte %zu while reading %s of %s",
                        r->name, r->pos, what, r->ctx);
    return si_error(SI_ERR_FORMAT, "%s: truncated at byte %zu while reading %s", r->name, r->pos,
                    what);
}

static si_status gguf_rd_uint(gguf_rd *r, unsigned width, uint64_t *out, const char *what) {
    *out = 0;
    if (width > gguf_left(r))
        return gguf_truncated(r, what);
    uint64_t v = 0;
    for (unsigned i = 0; i < width; i++)
        v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += width;
    *out = v;
    return SI_OK;
}

static si_status gguf_rd_u32(gguf_rd *r, uint32_t *out, const char *what) {
    uint64_t v;
    si_status st = gguf_rd_uint(r, 4, &v, what);
    *out = (uint32_t)v;
    return st;
}

static si_status gguf_rd_u64(gguf_rd *r, uint64_t *out, const char *what) {
    return gguf_rd_uint(r, 8, out, what);
}

/* A string: u64 length then bytes. The copy is NUL-terminated. */
static si_status gguf_rd_str(gguf_rd *r, gguf_str *out, const char *what) {
    size_t at = r->pos;
    uint64_t len;
    si_status st = gguf_rd_u64(r, &len, what);
    if (st)
        return st;
    if (len > gguf_left(r)) {
        return si_error(SI_ERR_FORMAT,
                        "%s: %s%s%s at byte %zu: string length %llu exceeds the %zu bytes left",
                        r->name, what, r->ctx[0] ? " of " : "", r->ctx, at,
                        (unsigned long long)len, gguf_left(r));
    }
    char *s = malloc((size_t)len + 1);
    if (!s)
        return si_error(SI_ERR_NOMEM, "%s: out of memory reading a %llu-byte string", r->name,
                        (unsigned long long)len);
    memcpy(s, r->p + r->pos, (size_t)len);
    s[len] = '\0';
    r->pos += (size_t)len;
    out->len = len;
    out->s = s;
    return SI_OK;
}

/* ---- values --------------------------------------------------------------------------------- */

unsigned gguf_vtype_width(gguf_vtype t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

void gguf_value_free(gguf_value *v) {
    if (v->type == GGUF_TYPE_STRING) {
        free(v->str.s);
    } else if (v->type == GGUF_TYPE_ARRAY) {
        if (v->arr.type == GGUF_TYPE_STRING) {
            gguf_str *s = v->arr.data;
            for (uint64_t i = 0; s && i < v->arr.n; i++)
                free(s[i].s);
        } else if (v->arr.type == GGUF_TYPE_ARRAY) {
            gguf_value *e = v->arr.data;
            for (uint64_t i = 0; e && i < v->arr.n; i++)
                gguf_value_free(&e[i]);
        }
        free(v->arr.data);
    }
    memset(v, 0, sizeof(*v));
}

static si_status gguf_rd_value(gguf_rd *r, gguf_vtype type, gguf_value *v, int depth);

/* The array body after the value type: elem type u32, n u64, n elements. v->type is set to
 * ARRAY first so that whatever was filled in is freed by gguf_value_free on error. */
static si_status gguf_rd_array(gguf_rd *r, gguf_value *v, int depth) {
    size_t at = r->pos;
    v->type = GGUF_TYPE_ARRAY;
    v->arr.type = GGUF_TYPE_UINT8;
    v->arr.n = 0;
    v->arr.data = NULL;
    if (depth >= GGUF_MAX_DEPTH)
        return si_error(SI_ERR_FORMAT, "%s: %s at byte %zu: arrays nested deeper than %d",
                        r->name, r->ctx, at, GGUF_MAX_DEPTH);
    uint32_t et;
    uint64_t n;
    si_status st = gguf_rd_u32(r, &et, "array element type");
    if (st)
        return st;
    if (et >= GGUF_TYPE_COUNT)
        return si_error(SI_ERR_FORMAT, "%s: %s at byte %zu: unknown array element type %u",
                        r->name, r->ctx, at, et);
    if ((st = gguf_rd_u64(r, &n, "array length")))
        return st;
    /* smallest encoding of one element: scalar width, 8 (string length), 12 (nested header) */
    unsigned w = gguf_vtype_width((gguf_vtype)et);
    size_t min = w ? w : et == GGUF_TYPE_STRING ? 8 : 12;
    if (n > gguf_left(r) / min)
        return si_error(SI_ERR_FORMAT,
                        "%s: %s at byte %zu: array length %llu of %s needs more than the %zu "
                        "bytes left",
                        r->name, r->ctx, at, (unsigned long long)n,
                        gguf_vtype_name((gguf_vtype)et), gguf_left(r));
    if (w) {
        size_t nb = (size_t)n * w;
        void *d = malloc(nb ? nb : 1);
        if (!d)
            return si_error(SI_ERR_NOMEM, "%s: out of memory for a %zu-byte array", r->name, nb);
        memcpy(d, r->p + r->pos, nb);
        r->pos += nb;
        v->arr.type = (gguf_vtype)et;
        v->arr.n = n;
        v->arr.data = d;
        return SI_OK;
    }
    size_t esz = et == GGUF_TYPE_STRING ? sizeof(gguf_str) : sizeof(gguf_value);
    void *d = calloc(n ? (size_t)n : 1, esz);
    if (!d)
        return si_error(SI_ERR_NOMEM, "%s: out of memory for a %llu-element array", r->name,
                        (unsigned long long)n);
    /* calloc'd: all n slots are freeable (NULL strings, empty arrays) if we stop early */
    v->arr.type = (gguf_vtype)et;
    v->arr.n = n;
    v->arr.data = d;
    for (uint64_t i = 0; i < n; i++) {
        if (et == GGUF_TYPE_STRING) {
            if ((st = gguf_rd_str(r, &((gguf_str *)d)[i], "array string")))
                return st;
        } else if ((st = gguf_rd_array(r, &((gguf_value *)d)[i], depth + 1))) {
            return st;
        }
    }
    return SI_OK;
}

static si_status gguf_rd_value(gguf_rd *r, gguf_vtype type, gguf_value *v, int depth) {
    memset(v, 0, sizeof(*v));
    if (type == GGUF_TYPE_ARRAY)
        return gguf_rd_array(r, v, depth);
    if (type == GGUF_TYPE_STRING) {
        si_status st = gguf_rd_str(r, &v->str, "string value");
        if (!st)
            v->type = GGUF_TYPE_STRING;
        return st;
    }
    unsigned w = gguf_vtype_width(type);
    SI_ASSERT(w != 0); /* callers validated type < GGUF_TYPE_COUNT */
    uint64_t u;
    si_status st = gguf_rd_uint(r, w, &u, "value");
    if (st)
        return st;
    v->type = type;
    switch (type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        v->u64 = u;
        break;
    case GGUF_TYPE_INT8: v->i64 = (int8_t)u; break;
    case GGUF_TYPE_INT16: v->i64 = (int16_t)u; break;
    case GGUF_TYPE_INT32: v->i64 = (int32_t)u; break;
    case GGUF_TYPE_INT64: v->i64 = (int64_t)u; break;
    case GGUF_TYPE_FLOAT32: {
        uint32_t b = (uint32_t)u;
        float f;
        memcpy(&f, &b, 4);
        v->f64 = f;
        break;
    }
    case GGUF_TYPE_FLOAT64: memcpy(&v->f64, &u, 8); break;
    case GGUF_TYPE_BOOL: v->b = u != 0; break;
    default: SI_ASSERT(0);
    }
    return SI_OK;
}

/* ---- duplicate detection: an open-addressing set of string indices ------------------------ */

typedef struct gguf_set {
    uint64_t *slot; /* index + 1; 0 = empty */
    size_t mask;
} gguf_set;

static uint64_t gguf_hash(const gguf_str *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < s->len; i++)
        h = (h ^ (uint8_t)s->s[i]) * 1099511628211ull;
    return h;
}

static si_status gguf_set_init(gguf_set *set, uint64_t n, const char *name) {
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    set->slot = calloc(cap, sizeof(uint64_t));
    set->mask = cap - 1;
    return set->slot ? SI_OK : si_error(SI_ERR_NOMEM, "%s: out of memory", name);
}

/* Inserts strs[i] (strs laid out at byte stride `stride`, gguf_str first); returns false when
 * an equal string is already present. */
static bool gguf_set_add(gguf_set *set, const void *base, size_t stride, uint64_t i) {
    const gguf_str *s = (const gguf_str *)((const char *)base + i * stride);
    size_t h = (size_t)gguf_hash(s) & set->mask;
    while (set->slot[h]) {
        const gguf_str *o = (const gguf_str *)((const char *)base + (set->slot[h] - 1) * stride);
        if (o->len == s->len && memcmp(o->s, s->s, (size_t)s->len) == 0)
            return false;
        h = (h + 1) & set->mask;
    }
    set->slot[h] = i + 1;
    return true;
}

/* ---- the file ------------------------------------------------------------------------------- */

static si_status gguf_rd_header(gguf_rd *r, gguf_file *f) {
    uint32_t magic;
    uint64_t n_tensors, n_kv;
    si_status st = gguf_rd_u32(r, &magic, "magic");
    if (st)
        return st;
    if (magic != GGUF_MAGIC)
        return si_error(SI_ERR_FORMAT, "%s: bad magic 0x%08x at byte 0 (expected \"GGUF\")",
                        r->name, magic);
    if ((st = gguf_rd_u32(r, &f->version, "version")))
        return st;
    if (f->version == 1)
        return si_error(SI_ERR_UNSUPPORTED,
                        "%s: GGUF version 1 is not supported (only versions 2 and 3); re-convert "
                        "the model with a current converter",
                        r->name);
    if (f->version == 0x02000000u || f->version == 0x03000000u)
        return si_error(SI_ERR_UNSUPPORTED,
                        "%s: GGUF version field 0x%08x looks big-endian; only little-endian "
                        "files are supported",
                        r->name, f->version);
    if (f->version != 2 && f->version != 3)
        return si_error(SI_ERR_UNSUPPORTED,
                        "%s: GGUF version %u is not supported (only versions 2 and 3)", r->name,
                        f->version);
    if ((st = gguf_rd_u64(r, &n_tensors, "n_tensors")))
        return st;
    if ((st = gguf_rd_u64(r, &n_kv, "n_kv")))
        return st;
    /* a kv takes at least 13 bytes (key length, value type, 1-byte value); a tensor info at
     * least 24 (name length, n_dims, type, offset) */
    if (n_kv > gguf_left(r) / 13)
        return si_error(SI_ERR_FORMAT,
                        "%s: n_kv %llu at byte 16 is impossible: only %zu bytes follow the header",
                        r->name, (unsigned long long)n_kv, gguf_left(r));
    if (n_tensors > gguf_left(r) / 24)
        return si_error(SI_ERR_FORMAT,
                        "%s: n_tensors %llu at byte 8 is impossible: only %zu bytes follow the "
                        "header",
                        r->name, (unsigned long long)n_tensors, gguf_left(r));
    f->n_kv = n_kv;
    f->n_tensors = n_tensors;
    return SI_OK;
}

static si_status gguf_rd_kvs(gguf_rd *r, gguf_file *f) {
    f->kv = calloc(f->n_kv ? (size_t)f->n_kv : 1, sizeof(gguf_kv));
    if (!f->kv)
        return si_error(SI_ERR_NOMEM, "%s: out of memory for %llu keys", r->name,
                        (unsigned long long)f->n_kv);
    uint64_t n = f->n_kv;
    f->n_kv = 0; /* counts the fully or partly filled entries, for gguf_close */
    gguf_set set;
    si_status st = gguf_set_init(&set, n, r->name);
    if (st)
        return st;
    for (uint64_t i = 0; i < n && !st; i++) {
        size_t at = r->pos;
        gguf_kv *kv = &f->kv[i];
        f->n_kv = i + 1;
        snprintf(r->ctx, sizeof(r->ctx), "key #%llu", (unsigned long long)i);
        if ((st = gguf_rd_str(r, &kv->key, "key")))
            break;
        snprintf(r->ctx, sizeof(r->ctx), "key '%.100s'", kv->key.s);
        if (!gguf_set_add(&set, f->kv, sizeof(gguf_kv), i)) {
            st = si_error(SI_ERR_FORMAT, "%s: key '%s' at byte %zu: duplicate key", r->name,
                          kv->key.s, at);
            break;
        }
        uint32_t type;
        if ((st = gguf_rd_u32(r, &type, "value type")))
            break;
        if (type >= GGUF_TYPE_COUNT) {
            st = si_error(SI_ERR_FORMAT, "%s: key '%s' at byte %zu: unknown value type %u",
                          r->name, kv->key.s, at, type);
            break;
        }
        st = gguf_rd_value(r, (gguf_vtype)type, &kv->value, 0);
    }
    free(set.slot);
    r->ctx[0] = '\0';
    return st;
}

static si_status gguf_rd_alignment(gguf_rd *r, gguf_file *f) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_value *v = gguf_get(f, "general.alignment");
    if (!v)
        return SI_OK;
    int64_t a;
    si_status st = gguf_get_int(f, "general.alignment", &a);
    if (st)
        return st;
    if (a <= 0 || (a & (a - 1)) != 0)
        return si_error(SI_ERR_FORMAT,
                        "%s: key 'general.alignment': alignment %lld is not a non-zero power of "
                        "two",
                        r->name, (long long)a);
    f->alignment = (uint64_t)a;
    return SI_OK;
}

/* Block size and bytes per block of a tensor type, or false when unsupported. */
static bool gguf_type_traits(uint32_t type, int64_t *block, int64_t *tsize) {
    if (type >= SI_TYPE_COUNT)
        return false;
    const quant_traits *q = quant_get((si_type)type);
    if (!q)
        return false;
    *block = q->block_size;
    *tsize = q->type_size;
    return true;
}

static si_status gguf_rd_tensor(gguf_rd *r, gguf_file *f, gguf_tensor *t, uint64_t i) {
    size_t at = r->pos;
    snprintf(r->ctx, sizeof(r->ctx), "tensor #%llu", (unsigned long long)i);
    si_status st = gguf_rd_str(r, &t->name, "name");
    if (st)
        return st;
    const char *nm = t->name.s;
    snprintf(r->ctx, sizeof(r->ctx), "tensor '%.100s'", nm);
    if ((st = gguf_rd_u32(r, &t->n_dims, "n_dims")))
        return st;
    if (t->n_dims > GGUF_MAX_DIMS)
        return si_error(SI_ERR_FORMAT, "%s: tensor '%s' at byte %zu: n_dims %u exceeds %d",
                        r->name, nm, at, t->n_dims, GGUF_MAX_DIMS);
    int64_t n_el = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if ((uint32_t)d >= t->n_dims)
            continue;
        uint64_t ne;
        if ((st = gguf_rd_u64(r, &ne, "ne")))
            return st;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return si_error(SI_ERR_FORMAT, "%s: tensor '%s' at byte %zu: ne[%d] = %llu is invalid",
                            r->name, nm, at, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        if (n_el > INT64_MAX / t->ne[d])
            return si_error(SI_ERR_FORMAT,
                            "%s: tensor '%s' at byte %zu: element count overflows (ne[%d] = %llu)",
                            r->name, nm, at, d, (unsigned long long)ne);
        n_el *= t->ne[d];
    }
    uint32_t type;
    if ((st = gguf_rd_u32(r, &type, "type")))
        return st;
    int64_t block, tsize;
    if (!gguf_type_traits(type, &block, &tsize))
        return si_error(SI_ERR_UNSUPPORTED,
                        "%s: tensor '%s' at byte %zu: tensor type %u is not supported", r->name,
                        nm, at, type);
    t->type = (si_type)type;
    if (t->ne[0] % block != 0)
        return si_error(SI_ERR_FORMAT,
                        "%s: tensor '%s' at byte %zu: ne[0] = %lld is not a multiple of the "
                        "type's block size %lld",
                        r->name, nm, at, (long long)t->ne[0], (long long)block);
    /* bytes = (n_el / block) * tsize; n_el fits int64, tsize is small, still check */
    uint64_t blocks = (uint64_t)(n_el / block);
    if (blocks > SIZE_MAX / (uint64_t)tsize)
        return si_error(SI_ERR_FORMAT, "%s: tensor '%s' at byte %zu: byte size overflows",
                        r->name, nm, at);
    t->nbytes = (size_t)(blocks * (uint64_t)tsize);
    if ((st = gguf_rd_u64(r, &t->offset, "offset")))
        return st;
    if (t->offset % f->alignment != 0)
        return si_error(SI_ERR_FORMAT,
                        "%s: tensor '%s' at byte %zu: data offset %llu is not a multiple of the "
                        "alignment %llu",
                        r->name, nm, at, (unsigned long long)t->offset,
                        (unsigned long long)f->alignment);
    return SI_OK;
}

static si_status gguf_rd_tensors(gguf_rd *r, gguf_file *f) {
    uint64_t n = f->n_tensors;
    f->n_tensors = 0;
    f->tensors = calloc(n ? (size_t)n : 1, sizeof(gguf_tensor));
    size_t *info_at = malloc((n ? (size_t)n : 1) * sizeof(size_t));
    gguf_set set = {0};
    si_status st = SI_OK;
    if (!f->tensors || !info_at) {
        st = si_error(SI_ERR_NOMEM, "%s: out of memory for %llu tensors", r->name,
                      (unsigned long long)n);
        goto done;
    }
    if ((st = gguf_set_init(&set, n, r->name)))
        goto done;
    for (uint64_t i = 0; i < n; i++) {
        info_at[i] = r->pos;
        f->n_tensors = i + 1;
        if ((st = gguf_rd_tensor(r, f, &f->tensors[i], i)))
            goto done;
        if (!gguf_set_add(&set, f->tensors, sizeof(gguf_tensor), i)) {
            st = si_error(SI_ERR_FORMAT, "%s: tensor '%s' at byte %zu: duplicate tensor name",
                          r->name, f->tensors[i].name.s, info_at[i]);
            goto done;
        }
    }
    r->ctx[0] = '\0';
    /* the data section starts at the next multiple of the alignment */
    uint64_t pad = (f->alignment - r->pos % f->alignment) % f->alignment;
    if (pad > UINT64_MAX - r->pos) {
        st = si_error(SI_ERR_FORMAT, "%s: data section offset overflows", r->name);
        goto done;
    }
    f->data_offset = r->pos + pad;
    for (uint64_t i = 0; i < n; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint64_t avail = f->data_offset <= r->size ? r->size - f->data_offset : 0;
        if (f->data_offset > r->size || t->offset > avail || t->nbytes > avail - t->offset) {
            st = si_error(SI_ERR_FORMAT,
                          "%s: tensor '%s' at byte %zu: data [%llu, %llu+%zu) extends past end "
                          "of file (size %zu)",
                          r->name, t->name.s, info_at[i],
                          (unsigned long long)f->data_offset + t->offset,
                          (unsigned long long)f->data_offset + t->offset, t->nbytes, r->size);
            goto done;
        }
        t->data = r->p + f->data_offset + t->offset;
    }
done:
    free(set.slot);
    free(info_at);
    return st;
}

si_status gguf_parse(const void *buf, size_t size, const char *name, gguf_file **out) {
    *out = NULL;
    if (!name)
        name = "<memory>";
    gguf_file *f = calloc(1, sizeof(*f));
    if (!f)
        return si_error(SI_ERR_NOMEM, "%s: out of memory", name);
    f->path = strdup(name);
    if (!f->path) {
        free(f);
        return si_error(SI_ERR_NOMEM, "%s: out of memory", name);
    }
    f->base = buf;
    f->size = size;
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    gguf_rd r = {.p = buf, .size = size, .pos = 0, .name = f->path, .ctx = ""};
    si_status st = gguf_rd_header(&r, f);
    if (!st) {
        /* both counts were checked against the bytes left; hold them until their stage */
        uint64_t n_tensors = f->n_tensors;
        f->n_tensors = 0;
        st = gguf_rd_kvs(&r, f);
        if (!st)
            st = gguf_rd_alignment(&r, f);
        if (!st) {
            f->n_tensors = n_tensors;
            if (n_tensors > gguf_left(&r) / 24)
                st = si_error(SI_ERR_FORMAT,
                              "%s: n_tensors %llu is impossible: only %zu bytes follow the "
                              "metadata at byte %zu",
                              r.name, (unsigned long long)n_tensors, gguf_left(&r), r.pos);
            else
                st = gguf_rd_tensors(&r, f);
        }
    }
    if (st) {
        f->base = NULL; /* borrowed: gguf_close must not unmap it */
        gguf_close(f);
        return st;
    }
    *out = f;
    return SI_OK;
}

si_status gguf_open(const char *path, gguf_file **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return si_error(SI_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return si_error(SI_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return si_error(SI_ERR_IO, "%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    void *base = NULL;
    if (size > 0) {
        base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (base == MAP_FAILED) {
            int e = errno;
            close(fd);
            return si_error(SI_ERR_IO, "%s: cannot mmap %zu bytes: %s", path, size, strerror(e));
        }
    }
    close(fd); /* the mapping stays valid */
    si_status st = gguf_parse(base ? base : "", size, path, out);
    if (st) {
        if (base)
            munmap(base, size);
        return st;
    }
    (*out)->mapped = base != NULL;
    return SI_OK;
}

void gguf_close(gguf_file *f) {
    if (!f)
        return;
    for (uint64_t i = 0; f->kv && i < f->n_kv; i++) {
        free(f->kv[i].key.s);
        gguf_value_free(&f->kv[i].value);
    }
    free(f->kv);
    for (uint64_t i = 0; f->tensors && i < f->n_tensors; i++)
        free(f->tensors[i].name.s);
    free(f->tensors);
    if (f->mapped && f->base)
        munmap((void *)f->base, f->size);
    free(f->path);
    free(f);
}

/* ---- look-ups ------------------------------------------------------------------------------- */

const gguf_value *gguf_get(const gguf_file *f, const char *key) {
    size_t len = strlen(key);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_str *k = &f->kv[i].key;
        if (k->len == len && k->s && memcmp(k->s, key, len) == 0)
            return &f->kv[i].value;
    }
    return NULL;
}

static si_status gguf_not_found(const gguf_file *f, const char *key) {
    return si_error(SI_ERR_NOT_FOUND, "%s: key '%s' not found", f->path, key);
}

static si_status gguf_wrong_type(const gguf_file *f, const char *key, const char *expected,
                                 const gguf_value *v) {
    if (v->type == GGUF_TYPE_ARRAY)
        return si_error(SI_ERR_FORMAT, "%s: key '%s': expected %s, found array of %s", f->path,
                        key, expected, gguf_vtype_name(v->arr.type));
    return si_error(SI_ERR_FORMAT, "%s: key '%s': expected %s, found %s", f->path, key, expected,
                    gguf_vtype_name(v->type));
}

si_status gguf_get_int(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_value *v = gguf_get(f, key);
    if (!v)
        return gguf_not_found(f, key);
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        if (v->u64 > (uint64_t)INT64_MAX)
            return si_error(SI_ERR_FORMAT, "%s: key '%s': value %llu does not fit an int64",
                            f->path, key, (unsigned long long)v->u64);
        *out = (int64_t)v->u64;
        return SI_OK;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        *out = v->i64;
        return SI_OK;
    default:
        return gguf_wrong_type(f, key, "an integer", v);
    }
}

si_status gguf_get_float(const gguf_file *f, const char *key, double *out) {
    const gguf_value *v = gguf_get(f, key);
    if (!v)
        return gguf_not_found(f, key);
    switch (v->type) {
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64:
        *out = v->f64;
        return SI_OK;
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        *out = (double)v->u64;
        return SI_OK;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        *out = (double)v->i64;
        return SI_OK;
    default:
        return gguf_wrong_type(f, key, "a number", v);
    }
}

si_status gguf_get_bool(const gguf_file *f, const char *key, bool *out) {
    const gguf_value *v = gguf_get(f, key);
    if (!v)
        return gguf_not_found(f, key);
    if (v->type != GGUF_TYPE_BOOL)
        return gguf_wrong_type(f, key, "bool", v);
    *out = v->b;
    return SI_OK;
}

si_status gguf_get_str(const gguf_file *f, const char *key, const char **out) {
    const gguf_value *v = gguf_get(f, key);
    if (!v)
        return gguf_not_found(f, key);
    if (v->type != GGUF_TYPE_STRING)
        return gguf_wrong_type(f, key, "string", v);
    *out = v->str.s;
    return SI_OK;
}

si_status gguf_get_arr(const gguf_file *f, const char *key, gguf_vtype elem_type,
                       const gguf_value **out) {
    const gguf_value *v = gguf_get(f, key);
    if (!v)
        return gguf_not_found(f, key);
    if (v->type != GGUF_TYPE_ARRAY || v->arr.type != elem_type) {
        char want[48];
        snprintf(want, sizeof(want), "array of %s", gguf_vtype_name(elem_type));
        return gguf_wrong_type(f, key, want, v);
    }
    *out = v;
    return SI_OK;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    size_t len = strlen(name);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_str *n = &f->tensors[i].name;
        if (n->len == len && n->s && memcmp(n->s, name, len) == 0)
            return &f->tensors[i];
    }
    return NULL;
}

const char *gguf_vtype_name(gguf_vtype t) {
    static const char *const names[GGUF_TYPE_COUNT] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
        "bool",  "string", "array", "uint64", "int64", "float64",
    };
    return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "unknown";
}
