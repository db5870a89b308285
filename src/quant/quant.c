/* quant.c — the type-traits table (ggml's type_traits design), indexed by si_type.
 *
 * Type ids, names, block sizes and bytes per block follow ggml / the GGUF spec; the per-type
 * kernels live in quant_float.c, quant_legacy.c, quant_k.c and quant_iq.c, which each export one
 * quant_traits object per type. */
#include "quant/quant.h"

/* NOTE: declared here rather than in a header: nothing but this table should reach them. */
extern const quant_traits quant_traits_f32, quant_traits_f16, quant_traits_bf16;
extern const quant_traits quant_traits_q4_0, quant_traits_q4_1, quant_traits_q5_0,
    quant_traits_q5_1, quant_traits_q8_0, quant_traits_q8_1;
extern const quant_traits quant_traits_q2_k, quant_traits_q3_k, quant_traits_q4_k,
    quant_traits_q5_k, quant_traits_q6_k, quant_traits_q8_k;
extern const quant_traits quant_traits_iq4_nl, quant_traits_iq4_xs;

static const quant_traits *const quant_table[SI_TYPE_COUNT] = {
    [SI_TYPE_F32] = &quant_traits_f32,       [SI_TYPE_F16] = &quant_traits_f16,
    [SI_TYPE_BF16] = &quant_traits_bf16,     [SI_TYPE_Q4_0] = &quant_traits_q4_0,
    [SI_TYPE_Q4_1] = &quant_traits_q4_1,     [SI_TYPE_Q5_0] = &quant_traits_q5_0,
    [SI_TYPE_Q5_1] = &quant_traits_q5_1,     [SI_TYPE_Q8_0] = &quant_traits_q8_0,
    [SI_TYPE_Q8_1] = &quant_traits_q8_1,     [SI_TYPE_Q2_K] = &quant_traits_q2_k,
    [SI_TYPE_Q3_K] = &quant_traits_q3_k,     [SI_TYPE_Q4_K] = &quant_traits_q4_k,
    [SI_TYPE_Q5_K] = &quant_traits_q5_k,     [SI_TYPE_Q6_K] = &quant_traits_q6_k,
    [SI_TYPE_Q8_K] = &quant_traits_q8_k,     [SI_TYPE_IQ4_NL] = &quant_traits_iq4_nl,
    [SI_TYPE_IQ4_XS] = &quant_traits_iq4_xs,
};

const quant_traits *quant_get(si_type t) {
    /* the enum's underlying type may be unsigned: compare as int to catch negatives */
    int i = (int)t;
    if (i < 0 || i >= (int)SI_TYPE_COUNT) return NULL;
    return quant_table[i];
}

size_t quant_row_size(si_type t, int64_t n) {
    const quant_traits *q = quant_get(t);
    if (!q || n < 0) return 0;
    return (size_t)(n / q->block_size) * (size_t)q->type_size;
}

const char *si_type_name(si_type t) {
    const quant_traits *q = quant_get(t);
    return q ? q->name : NULL;
}
