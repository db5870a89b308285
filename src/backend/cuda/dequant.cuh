/* dequant.cuh — register-level decoders of GGUF weight blocks (layouts: quant/quant_blocks.h).
 *
 * Every type is cut into "units": a unit is what one thread turns into floats at a time, NG
 * groups of 4 elements that are contiguous in the row (xo[g] = the group's first element, an
 * offset inside the block). Units are small so that a warp spreads a block over many lanes and
 * the activation loads stay float4. F16/BF16 are treated as 8-element "blocks" of 16 bytes.
 * The decoders read through si_ld16/si_ld32, which need only 2-byte alignment, so the same code
 * works on global memory and on shared-memory copies that start at any even offset. */
#ifndef SI_BACKEND_CUDA_DEQUANT_CUH
#define SI_BACKEND_CUDA_DEQUANT_CUH

#include "backend/cuda/cuda_common.cuh"

/* quant_blocks.h is C11: its _Static_assert is C++'s static_assert */
#ifndef _Static_assert
#define _Static_assert static_assert
#endif
#include "quant/quant_blocks.h"

struct tq_f16 {
    static constexpr int BE = 8, BB = 16, UPB = 1, NG = 2;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        SI_UNROLL
        for (int j = 0; j < 8; j++) w[j] = si_h2f(si_ld16(b + 2 * j));
        xo[0] = 0; xo[1] = 4;
    }
};

struct tq_bf16 {
    static constexpr int BE = 8, BB = 16, UPB = 1, NG = 2;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        SI_UNROLL
        for (int j = 0; j < 8; j++) w[j] = si_bf2f(si_ld16(b + 2 * j));
        xo[0] = 0; xo[1] = 4;
    }
};

struct tq_f32 { /* embeddings only */
    static constexpr int BE = 4, BB = 16, UPB = 1, NG = 1;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        SI_UNROLL
        for (int j = 0; j < 4; j++)
            w[j] = si_u2f(si_ld32(b + 4 * j));
        xo[0] = 0;
    }
};

/* x = d * q */
struct tq_q8_0 {
    static constexpr int BE = QK8_0, BB = sizeof(block_q8_0), UPB = 4, NG = 2;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const float d = si_h2f(si_ld16(b));
        const uint32_t q0 = si_ld32(b + 2 + 8 * u), q1 = si_ld32(b + 6 + 8 * u);
        SI_UNROLL
        for (int j = 0; j < 4; j++) {
            w[j] = d * (float)(int8_t)(q0 >> (8 * j));
            w[4 + j] = d * (float)(int8_t)(q1 >> (8 * j));
        }
        xo[0] = 8 * u; xo[1] = 8 * u + 4;
    }
};

/* x = d * (q - 8); qs[j]: element j (low nibble), j + 16 (high) */
struct tq_q4_0 {
    static constexpr int BE = QK4_0, BB = sizeof(block_q4_0), UPB = 4, NG = 2;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const float d = si_h2f(si_ld16(b));
        const uint32_t q = si_ld32(b + 2 + 4 * u);
        SI_UNROLL
        for (int j = 0; j < 4; j++) {
            w[j] = d * (float)((int)((q >> (8 * j)) & 15) - 8);
            w[4 + j] = d * (float)((int)((q >> (8 * j + 4)) & 15) - 8);
        }
        xo[0] = 4 * u; xo[1] = 16 + 4 * u;
    }
};

/* x = d * q + m */
struct tq_q4_1 {
    static constexpr int BE = QK4_1, BB = sizeof(block_q4_1), UPB = 4, NG = 2;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const float d = si_h2f(si_ld16(b)), m = si_h2f(si_ld16(b + 2));
        const uint32_t q = si_ld32(b + 4 + 4 * u);
        SI_UNROLL
        for (int j = 0; j < 4; j++) {
            w[j] = d * (float)((q >> (8 * j)) & 15) + m;
            w[4 + j] = d * (float)((q >> (8 * j + 4)) & 15) + m;
        }
        xo[0] = 4 * u; xo[1] = 16 + 4 * u;
    }
};

/* bytes of v minus off as int8 (v's bytes in [0, 127 + off]: + 0x80 - off never carries) */
SI_HD uint32_t si_u8_minus(uint32_t v, int off) {
    return (v + 0x80808080u - 0x01010101u * (uint32_t)off) ^ 0x80808080u;
}

/* Bits j .. j + 3 of the 32 high bits qh of a 5-bit block, each moved to bit 4 of its byte: the
 * high bits of elements j .. j + 3, to be or-ed onto their nibbles. */
SI_HD uint32_t si_q5_high4(uint32_t qh, int j) {
    /* bit i of the nibble times 2^(4 + 7k) lands on 4 + i + 7k: on bit 4 of byte i for k = i,
     * and for k != i on bits no other term uses (so no carries) and the mask drops */
    return ((qh >> j) & 15u) * 0x02040810u & 0x10101010u;
}

/* The 5-bit quants of a Q5_0/Q5_1 block's 4-byte word q = qs[j .. j + 3] (j a multiple of 4), as
 * bytes: lo those of elements j .. j + 3 (low nibbles), hi of j + 16 .. j + 19 (high nibbles),
 * each with its bit of qh on top. */
SI_HD void si_q5_quants(uint32_t q, uint32_t qh, int j, uint32_t &lo, uint32_t &hi) {
    lo = (q & 0x0F0F0F0Fu) | si_q5_high4(qh, j);
    hi = ((q >> 4) & 0x0F0F0F0Fu) | si_q5_high4(qh, 16 + j);
}

/* x = d * (q - 16), q = nibble | high bit << 4; qs[j]: element j (low nibble), j + 16 (high);
 * bit j of qh: element j's high bit */
struct tq_q5_0 {
    static constexpr int BE = QK5_0, BB = sizeof(block_q5_0), UPB = 4, NG = 2;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const float d = si_h2f(si_ld16(b));
        const uint32_t qh = si_ld32(b + 2), q = si_ld32(b + 6 + 4 * u);
        uint32_t lo, hi;
        si_q5_quants(q, qh, 4 * u, lo, hi);
        SI_UNROLL
        for (int j = 0; j < 4; j++) {
            w[j] = d * (float)((int)((lo >> (8 * j)) & 31) - 16);
            w[4 + j] = d * (float)((int)((hi >> (8 * j)) & 31) - 16);
        }
        xo[0] = 4 * u;
        xo[1] = 16 + 4 * u;
    }
};

/* x = d * q + m, q as tq_q5_0's */
struct tq_q5_1 {
    static constexpr int BE = QK5_1, BB = sizeof(block_q5_1), UPB = 4, NG = 2;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const float d = si_h2f(si_ld16(b)), m = si_h2f(si_ld16(b + 2));
        const uint32_t qh = si_ld32(b + 4), q = si_ld32(b + 8 + 4 * u);
        uint32_t lo, hi;
        si_q5_quants(q, qh, 4 * u, lo, hi);
        SI_UNROLL
        for (int j = 0; j < 4; j++) {
            w[j] = d * (float)((lo >> (8 * j)) & 31) + m;
            w[4 + j] = d * (float)((hi >> (8 * j)) & 31) + m;
        }
        xo[0] = 4 * u;
        xo[1] = 16 + 4 * u;
    }
};

/* 6-bit scale and min j of a q4_K block (ggml's get_scale_min_k4) */
SI_HD void si_scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* The factors of group g (sub-blocks 2g, 2g + 1) of a q4_K / q5_K block b (d, dmin, then the
 * 12 bytes of scales): x = d0 * q - mm0 in sub-block 2g, d1 * q - mm1 in 2g + 1. */
SI_HD void si_k4_group_scales(const uint8_t *b, int g, float *d0, float *mm0, float *d1,
                              float *mm1) {
    const float d = si_h2f(si_ld16(b)), dmin = si_h2f(si_ld16(b + 2));
    int sc0, m0, sc1, m1;
    si_scale_min_k4(2 * g, b + 4, &sc0, &m0);
    si_scale_min_k4(2 * g + 1, b + 4, &sc1, &m1);
    *d0 = d * sc0, *mm0 = dmin * m0, *d1 = d * sc1, *mm1 = dmin * m1;
}

/* 4 groups of 64: qs[32g + l] holds element 64g + l (low, sub-block 2g) and 64g + 32 + l (high,
 * sub-block 2g + 1); x = d * sc * q - dmin * m. 32 units of 4 bytes. */
struct tq_q4_k {
    static constexpr int BE = QK_K, BB = sizeof(block_q4_K), UPB = 32, NG = 2;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const int g = u >> 3, k = u & 7;
        float d0, mm0, d1, mm1;
        si_k4_group_scales(b, g, &d0, &mm0, &d1, &mm1);
        const uint32_t q = si_ld32(b + 16 + 32 * g + 4 * k);
        SI_UNROLL
        for (int j = 0; j < 4; j++) {
            w[j] = d0 * (float)((q >> (8 * j)) & 15) - mm0;
            w[4 + j] = d1 * (float)((q >> (8 * j + 4)) & 15) - mm1;
        }
        xo[0] = 64 * g + 4 * k; xo[1] = 64 * g + 32 + 4 * k;
    }
};

/* tq_q4_k's layout (qs after the 32 bytes qh) plus a high bit: bit 2g of qh[l] for element
 * 64g + l, bit 2g + 1 for 64g + 32 + l (ggml's dequantize_row_q5_K); x = d * sc * q - dmin * m.
 * 32 units of 4 bytes. */
struct tq_q5_k {
    static constexpr int BE = QK_K, BB = sizeof(block_q5_K), UPB = 32, NG = 2;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const int g = u >> 3, k = u & 7;
        float d0, mm0, d1, mm1;
        si_k4_group_scales(b, g, &d0, &mm0, &d1, &mm1);
        const uint32_t q = si_ld32(b + 48 + 32 * g + 4 * k), qh = si_ld32(b + 16 + 4 * k);
        SI_UNROLL
        for (int j = 0; j < 4; j++) {
            const uint32_t h = qh >> (8 * j + 2 * g);
            w[j] = d0 * (float)(((q >> (8 * j)) & 15) | ((h & 1) << 4)) - mm0;
            w[4 + j] = d1 * (float)(((q >> (8 * j + 4)) & 15) | ((h & 2) << 3)) - mm1;
        }
        xo[0] = 64 * g + 4 * k;
        xo[1] = 64 * g + 32 + 4 * k;
    }
};

/* Q2_K: two halves of 128; in half n, l < 32: bits 2g..2g+1 of qs[32n + l] (bytes 16..79) give
 * element 128n + 32g + l, of sub-block 8n + 2g + l / 16, whose byte scales[...] holds its scale
 * (low nibble) and min (high) (ggml's dequantize_row_q2_K); x = d * sc * q - dmin * m. 16 units
 * of 16 elements (4 consecutive l). */
struct tq_q2_k {
    static constexpr int BE = QK_K, BB = sizeof(block_q2_K), UPB = 16, NG = 4;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const int n = u >> 3, l0 = 4 * (u & 7);
        const float d = si_h2f(si_ld16(b + 80)), dmin = si_h2f(si_ld16(b + 82));
        const uint32_t q = si_ld32(b + 16 + 32 * n + l0);
        SI_UNROLL
        for (int g = 0; g < 4; g++) {
            const int sc = b[8 * n + 2 * g + (l0 >> 4)];
            const float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
            SI_UNROLL
            for (int j = 0; j < 4; j++)
                w[4 * g + j] = dl * (float)((q >> (8 * j + 2 * g)) & 3) - ml;
            xo[g] = 128 * n + 32 * g + l0;
        }
    }
};

/* 6-bit scale j (0..15) of a Q3_K block from its 12 scale bytes s: the low nibble of s[j] (j < 8)
 * or the high one of s[j - 8], and bits 2 (j / 4)..+1 of s[8 + j % 4] on top (ggml's packing;
 * the weight's scale is this minus 32) */
SI_HD int si_q3k_scale(const uint8_t *s, int j) {
    const int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
    return lo | (((s[8 + (j & 3)] >> (2 * (j >> 2))) & 3) << 4);
}

/* Q3_K: tq_q2_k's 2-bit layout (qs at bytes 32..95) with a high bit, bit 4n + g of hmask[l]
 * (bytes 0..31), that is clear for q - 4 (ggml's dequantize_row_q3_K); x = d * (sc - 32) * q,
 * q = 2-bit value - (high bit ? 0 : 4), sc si_q3k_scale of sub-block 8n + 2g + l / 16. 16 units of
 * 16 elements. */
struct tq_q3_k {
    static constexpr int BE = QK_K, BB = sizeof(block_q3_K), UPB = 16, NG = 4;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const int n = u >> 3, l0 = 4 * (u & 7);
        const float d = si_h2f(si_ld16(b + 108));
        const uint32_t q = si_ld32(b + 32 + 32 * n + l0), hm = si_ld32(b + l0);
        SI_UNROLL
        for (int g = 0; g < 4; g++) {
            const float dl = d * (float)(si_q3k_scale(b + 96, 8 * n + 2 * g + (l0 >> 4)) - 32);
            SI_UNROLL
            for (int j = 0; j < 4; j++) {
                const int q2 = (int)((q >> (8 * j + 2 * g)) & 3);
                w[4 * g + j] = dl * (float)(q2 - ((hm >> (8 * j + 4 * n + g)) & 1 ? 0 : 4));
            }
            xo[g] = 128 * n + 32 * g + l0;
        }
    }
};

/* The 16 values a nibble of IQ4_NL / IQ4_XS stands for (ggml's kvalues_iq4nl), 4 int8 a word */
#define SI_IQ4NL_W0 0xBFAD9881u /* -127, -104, -83, -65 */
#define SI_IQ4NL_W1 0xF6EADDCFu /* -49, -35, -22, -10 */
#define SI_IQ4NL_W2 0x26190D01u /* 1, 13, 25, 38 */
#define SI_IQ4NL_W3 0x71594535u /* 53, 69, 89, 113 */

/* The values of the low (lo) and high (hi) nibbles of the 4 bytes of q, as int8 bytes. A prmt
 * looks 4 nibbles up at once in 8 table bytes (its selector's bit 3 must be clear), so each half
 * word's 4 nibbles, in memory order (lo 0, hi 0, lo 1, hi 1), are looked up in values 0..7 and
 * in 8..15 and a third prmt picks per byte by the nibble's bit 3; two more sort the 8 values into
 * lo and hi: 16 PTX instructions a word, against 32 when each group of 4 nibbles was gathered
 * first (llama.cpp's get_int_from_table_16 works the same way). One H100, Llama-2-7B shape, tg128:
 * IQ4_XS 383 -> 468 t/s, IQ4_NL 398 -> 481 (bench/RESULTS.md, 2026-12-05 s42). */
SI_HD void si_iq4nl_word(uint32_t q, uint32_t &lo, uint32_t &hi) {
    const uint32_t n = q & 0x77777777u; /* the indices within a half table */
    const uint32_t sel = 0x32103210u | ((q >> 1) & 0x44444444u); /* byte k, or k + 4 if bit 3 */
    const uint32_t v0 =
        si_prmt(si_prmt(SI_IQ4NL_W0, SI_IQ4NL_W1, n), si_prmt(SI_IQ4NL_W2, SI_IQ4NL_W3, n), sel);
    const uint32_t v1 = si_prmt(si_prmt(SI_IQ4NL_W0, SI_IQ4NL_W1, n >> 16),
                                si_prmt(SI_IQ4NL_W2, SI_IQ4NL_W3, n >> 16), sel >> 16);
    lo = si_prmt(v0, v1, 0x6420u);
    hi = si_prmt(v0, v1, 0x7531u);
}

/* x = d * kvalues[q]; qs[j]: element j (low nibble), j + 16 (high), as tq_q4_0 */
struct tq_iq4_nl {
    static constexpr int BE = 32, BB = 18, UPB = 4, NG = 2;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const float d = si_h2f(si_ld16(b));
        uint32_t lo, hi;
        si_iq4nl_word(si_ld32(b + 2 + 4 * u), lo, hi);
        SI_UNROLL
        for (int j = 0; j < 4; j++) {
            w[j] = d * (float)(int8_t)(lo >> (8 * j));
            w[4 + j] = d * (float)(int8_t)(hi >> (8 * j));
        }
        xo[0] = 4 * u;
        xo[1] = 16 + 4 * u;
    }
};

/* The 6-bit scale of sub-block ib of an IQ4_XS block b (as stored; the weight's is it - 32): low
 * nibble from scales_l (bytes 4..7), high 2 bits from scales_h (bytes 2..3) */
SI_HD int si_iq4xs_scale(const uint8_t *b, int ib) {
    return ((b[4 + ib / 2] >> (4 * (ib & 1))) & 0xF) | (((si_ld16(b + 2) >> (2 * ib)) & 3) << 4);
}

/* 8 sub-blocks of 32 in IQ4_NL's layout (qs from byte 8); x = d * (ls - 32) * kvalues[q].
 * 32 units of 8 elements: sub-block u / 4, bytes 4 (u % 4).. of its 16 */
struct tq_iq4_xs {
    static constexpr int BE = 256, BB = 136, UPB = 32, NG = 2;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const int ib = u >> 2, k = u & 3;
        const float dl = si_h2f(si_ld16(b)) * (float)(si_iq4xs_scale(b, ib) - 32);
        uint32_t lo, hi;
        si_iq4nl_word(si_ld32(b + 8 + 16 * ib + 4 * k), lo, hi);
        SI_UNROLL
        for (int j = 0; j < 4; j++) {
            w[j] = dl * (float)(int8_t)(lo >> (8 * j));
            w[4 + j] = dl * (float)(int8_t)(hi >> (8 * j));
        }
        xo[0] = 32 * ib + 4 * k;
        xo[1] = 32 * ib + 16 + 4 * k;
    }
};

/* Two halves of 128; in half n, l < 32: ql[64n + l], ql[64n + l + 32], qh[32n + l] give elements
 * 128n + l, +32, +64, +96 (ggml's dequantize_row_q6_K); x = d * scales[e / 16] * (q - 32).
 * 16 units of 16 elements (4 consecutive l). */
struct tq_q6_k {
    static constexpr int BE = QK_K, BB = sizeof(block_q6_K), UPB = 16, NG = 4;
    SI_HD static void unit(const uint8_t *b, int u, float *w, int *xo) {
        const int n = u >> 3, l0 = 4 * (u & 7);
        const float d = si_h2f(si_ld16(b + 208));
        const int8_t *sc = (const int8_t *)(b + 192) + 8 * n + (l0 >> 4);
        const uint32_t qa = si_ld32(b + 64 * n + l0), qb = si_ld32(b + 64 * n + l0 + 32);
        const uint32_t qh = si_ld32(b + 128 + 32 * n + l0);
        const float s0 = d * sc[0], s1 = d * sc[2], s2 = d * sc[4], s3 = d * sc[6];
        SI_UNROLL
        for (int j = 0; j < 4; j++) {
            const uint32_t a = (qa >> (8 * j)) & 0xFF, c = (qb >> (8 * j)) & 0xFF;
            const uint32_t h = (qh >> (8 * j)) & 0xFF;
            w[j] = s0 * (float)((int)((a & 15) | ((h & 3) << 4)) - 32);
            w[4 + j] = s1 * (float)((int)((c & 15) | (((h >> 2) & 3) << 4)) - 32);
            w[8 + j] = s2 * (float)((int)((a >> 4) | (((h >> 4) & 3) << 4)) - 32);
            w[12 + j] = s3 * (float)((int)((c >> 4) | (((h >> 6) & 3) << 4)) - 32);
        }
        const int e = 128 * n + l0;
        xo[0] = e; xo[1] = e + 32; xo[2] = e + 64; xo[3] = e + 96;
    }
};

#endif
