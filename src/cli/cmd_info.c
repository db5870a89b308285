/* cmd_info.c — `swiftinfer info FILE`: print a GGUF file's header, every metadata key and the
 * tensor table, then totals.
 *
 * The output is line-oriented so scripts (tests/python/test_gguf_vs_gguf_py.py) can parse it:
 *   kv KEY TYPE VALUE           one key per line; strings quoted, with \n \t \r \\ \" and
 *                               \xNN escapes (bytes >= 0x80 are printed as they are)
 *   kv KEY array[ELEM] N [e0, e1, ...]   at most INFO_MAX_ELEMS elements, then "..."
 *   tensor INDEX NAME TYPE SHAPE OFFSET BYTES   SHAPE is ne0xne1x..., OFFSET is relative to
 *                                               the data section */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "model/gguf.h"

#define INFO_MAX_ELEMS 8

static void info_usage(FILE *f) {
    fprintf(f, "usage: swiftinfer info [--help] FILE\n\n"
               "Prints the GGUF version, every metadata key with its type and value (long arrays:\n"
               "their length and first %d elements), the tensor table (name, type, shape, offset\n"
               "in the data section, bytes) and totals.\n",
            INFO_MAX_ELEMS);
}

static void info_str(const gguf_str *s) {
    putchar('"');
    for (uint64_t i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->s[i];
        switch (c) {
        case '\n': fputs("\\n", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '"': fputs("\\\"", stdout); break;
        default:
            if (c < 0x20 || c == 0x7f)
                printf("\\x%02x", c);
            else
                putchar(c);
        }
    }
    putchar('"');
}

/* One element of a scalar array, read from its packed file width. */
static void info_scalar_elem(gguf_vtype t, const void *data, uint64_t i) {
    switch (t) {
    case GGUF_TYPE_UINT8: printf("%u", ((const uint8_t *)data)[i]); break;
    case GGUF_TYPE_INT8: printf("%d", ((const int8_t *)data)[i]); break;
    case GGUF_TYPE_UINT16: printf("%u", ((const uint16_t *)data)[i]); break;
    case GGUF_TYPE_INT16: printf("%d", ((const int16_t *)data)[i]); break;
    case GGUF_TYPE_UINT32: printf("%" PRIu32, ((const uint32_t *)data)[i]); break;
    case GGUF_TYPE_INT32: printf("%" PRId32, ((const int32_t *)data)[i]); break;
    case GGUF_TYPE_UINT64: printf("%" PRIu64, ((const uint64_t *)data)[i]); break;
    case GGUF_TYPE_INT64: printf("%" PRId64, ((const int64_t *)data)[i]); break;
    case GGUF_TYPE_FLOAT32: printf("%.9g", (double)((const float *)data)[i]); break;
    case GGUF_TYPE_FLOAT64: printf("%.17g", ((const double *)data)[i]); break;
    case GGUF_TYPE_BOOL: fputs(((const uint8_t *)data)[i] ? "true" : "false", stdout); break;
    default: fputs("?", stdout);
    }
}

static void info_value(const gguf_value *v, int depth);

static void info_array(const gguf_value *v, int depth) {
    printf("array[%s] %" PRIu64 " [", gguf_vtype_name(v->arr.type), v->arr.n);
    uint64_t shown = v->arr.n < INFO_MAX_ELEMS ? v->arr.n : INFO_MAX_ELEMS;
    for (uint64_t i = 0; i < shown; i++) {
        if (i)
            fputs(", ", stdout);
        if (v->arr.type == GGUF_TYPE_STRING)
            info_str(&((const gguf_str *)v->arr.data)[i]);
        else if (v->arr.type == GGUF_TYPE_ARRAY)
            info_value(&((const gguf_value *)v->arr.data)[i], depth + 1);
        else
            info_scalar_elem(v->arr.type, v->arr.data, i);
    }
    if (shown < v->arr.n)
        fputs(shown ? ", ..." : "...", stdout);
    putchar(']');
}

static void info_value(const gguf_value *v, int depth) {
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        printf("%s %" PRIu64, gguf_vtype_name(v->type), v->u64);
        break;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        printf("%s %" PRId64, gguf_vtype_name(v->type), v->i64);
        break;
    case GGUF_TYPE_FLOAT32: printf("float32 %.9g", v->f64); break;
    case GGUF_TYPE_FLOAT64: printf("float64 %.17g", v->f64); break;
    case GGUF_TYPE_BOOL: printf("bool %s", v->b ? "true" : "false"); break;
    case GGUF_TYPE_STRING:
        fputs("string ", stdout);
        info_str(&v->str);
        break;
    case GGUF_TYPE_ARRAY: info_array(v, depth); break;
    default: fputs("?", stdout);
    }
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            info_usage(stdout);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "swiftinfer info: unknown option '%s'\n", argv[i]);
            info_usage(stderr);
            return 2;
        }
        if (path) {
            fprintf(stderr, "swiftinfer info: more than one FILE given\n");
            return 2;
        }
        path = argv[i];
    }
    if (!path) {
        info_usage(stderr);
        return 2;
    }
    gguf_file *f = NULL;
    if (gguf_open(path, &f) != SI_OK) {
        fprintf(stderr, "swiftinfer: %s\n", si_last_error());
        return 1;
    }
    printf("file: %s\n", path);
    printf("version: %" PRIu32 "\n", f->version);
    printf("size: %zu\n", f->size);
    printf("alignment: %" PRIu64 "\n", f->alignment);
    printf("data_offset: %" PRIu64 "\n", f->data_offset);
    printf("n_kv: %" PRIu64 "\n", f->n_kv);
    printf("n_tensors: %" PRIu64 "\n", f->n_tensors);
    printf("\n# metadata: kv KEY TYPE VALUE\n");
    for (uint64_t i = 0; i < f->n_kv; i++) {
        fputs("kv ", stdout);
        fwrite(f->kv[i].key.s, 1, (size_t)f->kv[i].key.len, stdout);
        putchar(' ');
        info_value(&f->kv[i].value, 0);
        putchar('\n');
    }
    printf("\n# tensors: tensor INDEX NAME TYPE SHAPE OFFSET BYTES\n");
    uint64_t total_bytes = 0, total_elems = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const char *tn = si_type_name(t->type);
        char shape[128];
        int n = 0;
        int64_t elems = 1;
        for (uint32_t d = 0; d < t->n_dims || (d == 0 && t->n_dims == 0); d++) {
            n += snprintf(shape + n, sizeof(shape) - (size_t)n, "%s%" PRId64, d ? "x" : "",
                          t->ne[d]);
            elems *= t->ne[d];
        }
        for (uint32_t d = t->n_dims; d < GGUF_MAX_DIMS; d++)
            elems *= t->ne[d];
        printf("tensor %" PRIu64 " %s %s %s %" PRIu64 " %zu\n", i, t->name.s,
               tn ? tn : "unknown", shape, t->offset, t->nbytes);
        total_bytes += t->nbytes;
        total_elems += (uint64_t)elems;
    }
    printf("\ntotal: %" PRIu64 " tensors, %" PRIu64 " elements, %" PRIu64 " bytes (%.2f MiB)\n",
           f->n_tensors, total_elems, total_bytes, (double)total_bytes / (1024.0 * 1024.0));
    gguf_close(f);
    return 0;
}
