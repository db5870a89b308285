/* quant_blocks.h — block layouts of the quantised tensor types, byte for byte as GGUF stores them
 * (ggml's block_q4_0 ... block_q8_K, ggml-common.h).
 *
 * Plain C with fixed-width fields only, so the same header can be included from CUDA later.
 * fp16 fields are stored as raw uint16_t bits (convert with fp16_to_fp32 from core/fp16.h).
 * Every struct has a _Static_assert on its size: a wrong size means a wrong file layout. */
#ifndef SI_QUANT_BLOCKS_H
#define SI_QUANT_BLOCKS_H

#include <stdint.h>

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32

/* super-block size of the k-quants, and bytes of packed 6-bit scales in q3_K/q4_K/q5_K */
#define QK_K 256
#define K_SCALE_SIZE 12

/* ---- legacy types: 32 elements per block ---- */

/* x = d * (q - 8), q in [0, 15]; qs[j] holds element j (low nibble) and j + 16 (high nibble) */
typedef struct {
    uint16_t d;             /* fp16 scale */
    uint8_t qs[QK4_0 / 2];  /* nibbles */
} block_q4_0;
_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");

/* x = d * q + m, q in [0, 15] */
typedef struct {
    uint16_t d;             /* fp16 scale */
    uint16_t m;             /* fp16 min */
    uint8_t qs[QK4_1 / 2];
} block_q4_1;
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");

/* x = d * (q - 16), q in [0, 31]; bit j of qh (little-endian uint32) is bit 4 of element j */
typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
} block_q5_0;
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");

/* x = d * q + m, q in [0, 31] */
typedef struct {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");

/* x = d * q */
typedef struct {
    uint16_t d;
    int8_t qs[QK8_0];
} block_q8_0;
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");

/* x = d * q; s = fp16(d * sum(qs)), used by the q4_1/q5_1 dot products for the min term */
typedef struct {
    uint16_t d;
    uint16_t s;
    int8_t qs[QK8_1];
} block_q8_1;
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");

/* ---- k-quants: 256-element super-blocks ---- */

/* 2-bit: 16 sub-blocks of 16; x = d * (scales & 15) * q - dmin * (scales >> 4) */
typedef struct {
    uint8_t scales[QK_K / 16]; /* 4-bit scale (low) and 4-bit min (high) */
    uint8_t qs[QK_K / 4];      /* 2-bit quants */
    uint16_t d;                /* fp16 super-block scale for the scales */
    uint16_t dmin;             /* fp16 super-block scale for the mins */
} block_q2_K;
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");

/* 3-bit: 16 sub-blocks of 16; x = d * (sc - 32) * ((q2 | hbit << 2) - 4), sc 6-bit */
typedef struct {
    uint8_t hmask[QK_K / 8];     /* high bit of each quant */
    uint8_t qs[QK_K / 4];        /* low 2 bits */
    uint8_t scales[K_SCALE_SIZE]; /* 16 6-bit scales, packed */
    uint16_t d;                  /* fp16 super-block scale */
} block_q3_K;
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");

/* 4-bit: 8 sub-blocks of 32; x = d * sc * q - dmin * m, sc and m 6-bit */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE]; /* 8 scales + 8 mins, 6 bits each, packed */
    uint8_t qs[QK_K / 2];
} block_q4_K;
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");

/* 5-bit: as q4_K plus one high bit per quant */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");

/* 6-bit: 16 sub-blocks of 16; x = d * scales[i] * (q - 32), scales int8 */
typedef struct {
    uint8_t ql[QK_K / 2];      /* low 4 bits */
    uint8_t qh[QK_K / 4];      /* high 2 bits */
    int8_t scales[QK_K / 16];
    uint16_t d;
} block_q6_K;
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");

/* ---- non-linear 4-bit types (ggml's IQ4_NL, IQ4_XS): a nibble indexes kvalues_iq4nl ---- */

#define QK4_NL 32

/* the 16 values a nibble of IQ4_NL / IQ4_XS stands for (ggml's kvalues_iq4nl; quant_iq.c) */
extern const int8_t kvalues_iq4nl[16];

/* x = d * kvalues_iq4nl[q]; qs[j] holds element j (low nibble) and j + 16 (high), as Q4_0 */
typedef struct {
    uint16_t d;
    uint8_t qs[QK4_NL / 2];
} block_iq4_nl;
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");

/* 8 sub-blocks of 32 in IQ4_NL's nibble layout; x = d * (ls - 32) * kvalues_iq4nl[q], ls the
 * sub-block's 6-bit scale: its low 4 bits in scales_l (sub-block 2i low nibble, 2i + 1 high), its
 * high 2 bits at bits 2 ib..2 ib + 1 of scales_h */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");

/* 8-bit activations for the k-quant dot products; d is a plain float */
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16]; /* sum of qs over each group of 16 */
} block_q8_K;
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");

#endif
