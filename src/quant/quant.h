/* quant.h — tensor element types: one type-traits table (ggml's design).
 *
 * Each supported type has a scalar reference dequantiser (to_float), quantiser (from_float) and
 * dot product (vec_dot) against activations quantised to its vec_dot_type. Block layouts are
 * exactly GGUF's (see quant_blocks.h); the numeric type ids are ggml_type's. */
#ifndef SI_QUANT_H
#define SI_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "swiftinfer.h"

typedef struct quant_traits {
    const char *name;     /* "q4_k" */
    int32_t block_size;   /* elements per block */
    int32_t type_size;    /* bytes per block */
    si_type vec_dot_type; /* activations are quantised to this type for vec_dot */
    /* n is a multiple of block_size for every function below */
    void (*to_float)(const void *src, float *dst, int64_t n);
    void (*from_float)(const float *src, void *dst, int64_t n);
    /* sum over n elements of w[i] * x[i]; w of this type, x of vec_dot_type */
    float (*vec_dot)(const void *w, const void *x, int64_t n);
} quant_traits;

/* The traits of t, or NULL when t is not a supported type. */
const quant_traits *quant_get(si_type t);

/* Bytes in a row of n elements of type t (n a multiple of the block size). */
size_t quant_row_size(si_type t, int64_t n);

#endif
