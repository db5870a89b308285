/* gguf.h — GGUF v2/v3 reader and writer (the GGUF spec in ggml's docs/gguf.md).
 *
 * The reader maps the file read-only and validates every count, length, offset and tensor
 * extent before use; errors name the file, the key or tensor, and the byte offset. Metadata is
 * copied into owned structures (strings NUL-terminated); tensor data stays in the mapping. */
#ifndef SI_MODEL_GGUF_H
#define SI_MODEL_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "swiftinfer.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

typedef enum gguf_vtype {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT = 13,
} gguf_vtype;

typedef struct gguf_str {
    uint64_t len;
    char *s; /* NUL-terminated copy (may contain inner NULs; len is authoritative) */
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
    gguf_vtype type;
    union {
        uint64_t u64;  /* UINT8/16/32/64 */
        int64_t i64;   /* INT8/16/32/64 */
        double f64;    /* FLOAT32/64 */
        bool b;        /* BOOL */
        gguf_str str;  /* STRING */
        struct {
            gguf_vtype type; /* element type */
            uint64_t n;
            /* scalars: n packed elements in their file width (uint8_t, int32_t, float, ...);
             * BOOL: n bytes; STRING: gguf_str[n]; ARRAY: gguf_value[n] (each of type ARRAY) */
            void *data;
        } arr;
    };
};

typedef struct gguf_kv {
    gguf_str key;
    gguf_value value;
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the contiguous (row) dimension; unused dims are 1 */
    si_type type;
    uint64_t offset;  /* relative to the start of the data section */
    size_t nbytes;
    const void *data; /* into the mapping */
} gguf_tensor;

typedef struct gguf_file {
    char *path;
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset; /* byte offset of the tensor data section in the file */
    const uint8_t *base;  /* the whole file */
    size_t size;
    bool mapped; /* base is an mmap we own (else borrowed from the caller) */
} gguf_file;

/* Opens and validates a GGUF file; tensor data is mmap'd read-only. */
si_status gguf_open(const char *path, gguf_file **out);
/* Parses a GGUF image already in memory (borrowed: buf must outlive the result). name is used
 * in messages. Used by gguf_open and the fuzz target. */
si_status gguf_parse(const void *buf, size_t size, const char *name, gguf_file **out);
void gguf_close(gguf_file *f);

/* Metadata look-ups. NULL / SI_ERR_NOT_FOUND when absent; SI_ERR_FORMAT (message naming the key
 * and the types) when present with an incompatible type. */
const gguf_value *gguf_get(const gguf_file *f, const char *key);
si_status gguf_get_int(const gguf_file *f, const char *key, int64_t *out); /* any integer type */
si_status gguf_get_float(const gguf_file *f, const char *key, double *out); /* f32/f64/int */
si_status gguf_get_bool(const gguf_file *f, const char *key, bool *out);
si_status gguf_get_str(const gguf_file *f, const char *key, const char **out);
/* An array whose elements are of elem_type. */
si_status gguf_get_arr(const gguf_file *f, const char *key, gguf_vtype elem_type,
                       const gguf_value **out);

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

const char *gguf_vtype_name(gguf_vtype t);
/* Bytes of a scalar of type t in the file; 0 for STRING, ARRAY and invalid types. */
unsigned gguf_vtype_width(gguf_vtype t);
/* Frees what v owns (its string, its array and their strings and arrays) and zeroes it. */
void gguf_value_free(gguf_value *v);

/* ---- Writer ---- */

typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);
/* Setting a key that exists replaces it. Values are deep-copied. */
si_status gguf_writer_set(gguf_writer *w, const char *key, const gguf_value *v);
si_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
si_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
si_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
si_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
si_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* A scalar array (elem_type not STRING/ARRAY): n packed elements copied from data. */
si_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_vtype elem_type,
                              const void *data, uint64_t n);
si_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs,
                                  uint64_t n);
/* Adds a tensor; data (quant_row_size(type, ne[0]) * rows bytes) is referenced, not copied,
 * and must stay valid until gguf_writer_write returns. */
si_status gguf_writer_add_tensor(gguf_writer *w, const char *name, si_type type,
                                 uint32_t n_dims, const int64_t *ne, const void *data);
/* Writes a GGUF v3 file (alignment from general.alignment if set, else 32). */
si_status gguf_writer_write(gguf_writer *w, const char *path);

#endif
