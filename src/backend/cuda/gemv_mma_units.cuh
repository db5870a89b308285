/* gemv_mma_units.cuh — the weight side of the int8 tensor-core kernels (gemv_mma.cuh's GEMV,
 * gemm_q8x_mma.cu's matmul): per type, frag() builds one lane's A-fragment words of a 32-block
 * from a staged 256-element row segment (SEGB bytes), with the block's scales and min term.
 * SI_HD: test_cuda_decoders runs them on the host against the CPU's dequantisers.
 *
 * Fragments (PTX ISA, mma.m16n8k32 .s8): lane = 4 g + c holds A rows g and g + 8, k 4c..4c+3
 * (a0, a1) and 16+4c..16+4c+3 (a2, a3). A weight is sa * q + mn for k < 16 and sb * q + mn for
 * k >= 16 (q the int8 byte), but for the types of mma_min16 (Q2_K), where it is sa * q + mn * m:
 * m the byte of the same k in the words mins() gives (the block's min term is per 16 elements,
 * so the kernels multiply those words by x on the tensor cores too, instead of using x's sums
 * per 32). */
#ifndef SI_BACKEND_CUDA_GEMV_MMA_UNITS_CUH
#define SI_BACKEND_CUDA_GEMV_MMA_UNITS_CUH

#include "backend/cuda/dequant.cuh"

/* The A words of one row for the 32-block j of a staged 256-element segment (lo: k 4c..4c+3, hi:
 * k 16+4c..), as int8; sa/sb: the weight scale of k < 16 / k >= 16 (they differ only for Q6_K,
 * TWO = true: its scales are per 16); mn: the coefficient of the block's x sum (min terms). */
SI_HD uint32_t si_nib_s8(uint32_t v, int sh, int off) { /* nibbles - off */
    const uint32_t q = (v >> sh) & 0x0F0F0F0Fu;
    /* q + 0x80 - off per byte never carries; ^ 0x80 wraps it to the int8 q - off */
    return off ? (q + 0x80808080u - 0x01010101u * (uint32_t)off) ^ 0x80808080u : q;
}

struct tmma_q4_0 {
    static constexpr int SEGB = 8 * 18;
    static constexpr bool TWO = false;
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        const uint8_t *b = row + 18 * j;
        const uint32_t w = si_ld32(b + 2 + 4 * c);
        lo = si_nib_s8(w, 0, 8);
        hi = si_nib_s8(w, 4, 8);
        sa = sb = si_h2f(si_ld16(b));
        mn = 0.0f;
    }
};

struct tmma_q8_0 {
    static constexpr int SEGB = 8 * 34;
    static constexpr bool TWO = false;
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        const uint8_t *b = row + 34 * j;
        lo = si_ld32(b + 2 + 4 * c);
        hi = si_ld32(b + 18 + 4 * c);
        sa = sb = si_h2f(si_ld16(b));
        mn = 0.0f;
    }
};

struct tmma_q4_1 {
    static constexpr int SEGB = 8 * 20;
    static constexpr bool TWO = false;
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        const uint8_t *b = row + 20 * j;
        const uint32_t w = si_ld32(b + 4 + 4 * c);
        lo = si_nib_s8(w, 0, 0);
        hi = si_nib_s8(w, 4, 0);
        sa = sb = si_h2f(si_ld16(b));
        mn = si_h2f(si_ld16(b + 2));
    }
};

/* sub-block j: nibbles (low for even j, high for odd) of qs[32 (j / 2) + l] */
struct tmma_q4_k {
    static constexpr int SEGB = 144;
    static constexpr bool TWO = false;
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        const uint8_t *q = row + 16 + 32 * (j >> 1);
        lo = si_nib_s8(si_ld32(q + 4 * c), 4 * (j & 1), 0);
        hi = si_nib_s8(si_ld32(q + 16 + 4 * c), 4 * (j & 1), 0);
        int sc, m;
        si_scale_min_k4(j, row + 4, &sc, &m);
        sa = sb = si_h2f(si_ld16(row)) * (float)sc;
        mn = -si_h2f(si_ld16(row + 2)) * (float)m;
    }
};

/* x = d * (q - 16): block j's nibbles as tmma_q4_0's, bit k of qh (bytes 2..5) on top */
struct tmma_q5_0 {
    static constexpr int SEGB = 8 * 22;
    static constexpr bool TWO = false;
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        const uint8_t *b = row + 22 * j;
        const uint32_t w = si_ld32(b + 6 + 4 * c), qh = si_ld32(b + 2);
        si_q5_quants(w, qh, 4 * c, lo, hi);
        lo = si_u8_minus(lo, 16);
        hi = si_u8_minus(hi, 16);
        sa = sb = si_h2f(si_ld16(b));
        mn = 0.0f;
    }
};

/* x = d * q + m, q as tmma_q5_0's (qh at bytes 4..7, nibbles from 8) */
struct tmma_q5_1 {
    static constexpr int SEGB = 8 * 24;
    static constexpr bool TWO = false;
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        const uint8_t *b = row + 24 * j;
        const uint32_t w = si_ld32(b + 8 + 4 * c), qh = si_ld32(b + 4);
        si_q5_quants(w, qh, 4 * c, lo, hi);
        sa = sb = si_h2f(si_ld16(b));
        mn = si_h2f(si_ld16(b + 2));
    }
};

/* sub-block j: tmma_q4_k's nibbles (qs from byte 48) with bit j of qh[l] (bytes 16..47) on top */
struct tmma_q5_k {
    static constexpr int SEGB = 176;
    static constexpr bool TWO = false;
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        const uint8_t *q = row + 48 + 32 * (j >> 1), *qh = row + 16 + 4 * c;
        lo = si_nib_s8(si_ld32(q + 4 * c), 4 * (j & 1), 0) |
             (((si_ld32(qh) >> j) & 0x01010101u) << 4);
        hi = si_nib_s8(si_ld32(q + 16 + 4 * c), 4 * (j & 1), 0) |
             (((si_ld32(qh + 16) >> j) & 0x01010101u) << 4);
        int sc, m;
        si_scale_min_k4(j, row + 4, &sc, &m);
        sa = sb = si_h2f(si_ld16(row)) * (float)sc;
        mn = -si_h2f(si_ld16(row + 2)) * (float)m;
    }
};

/* 32-block j = 4n + t: elements 128n + 32t + l from bits 2t..2t+1 of qs[32n + l] and bit
 * 4n + t of hmask[l] (tq_q3_k); scales si_q3k_scale(8n + 2t + l / 16) - 32 */
struct tmma_q3_k {
    static constexpr int SEGB = 110;
    static constexpr bool TWO = true;
    SI_HD static uint32_t q3(const uint8_t *qs, const uint8_t *hm, int n, int t) {
        const uint32_t v = ((si_ld32(qs) >> (2 * t)) & 0x03030303u) |
                           (((si_ld32(hm) >> (4 * n + t)) & 0x01010101u) << 2);
        return si_u8_minus(v, 4);
    }
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        const int n = j >> 2, t = j & 3;
        const uint8_t *qs = row + 32 + 32 * n + 4 * c, *hm = row + 4 * c;
        lo = q3(qs, hm, n, t);
        hi = q3(qs + 16, hm + 16, n, t);
        const float d = si_h2f(si_ld16(row + 108));
        sa = d * (float)(si_q3k_scale(row + 96, 8 * n + 2 * t) - 32);
        sb = d * (float)(si_q3k_scale(row + 96, 8 * n + 2 * t + 1) - 32);
        mn = 0.0f;
    }
};

/* 32-block j = 4n + t: elements 128n + 32t + l from bits 2t..2t+1 of qs[32n + l] (bytes
 * 16..79); scale and min the low and high nibble of scales[8n + 2t + l / 16]; x = d * sc * q -
 * dmin * m. frag's bytes are sc * q (at most 45: one multiply of the four never carries), sa = sb
 * = d; mins() the two halves' m, each in all four bytes of its word, and mn = -dmin. */
struct tmma_q2_k {
    static constexpr int SEGB = 84;
    static constexpr bool TWO = false;
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        const int n = j >> 2, t = j & 3;
        const uint8_t *qs = row + 16 + 32 * n + 4 * c, *sc = row + 8 * n + 2 * t;
        lo = ((si_ld32(qs) >> (2 * t)) & 0x03030303u) * (uint32_t)(sc[0] & 15);
        hi = ((si_ld32(qs + 16) >> (2 * t)) & 0x03030303u) * (uint32_t)(sc[1] & 15);
        sa = sb = si_h2f(si_ld16(row + 80));
        mn = -si_h2f(si_ld16(row + 82));
    }
    SI_HD static void mins(const uint8_t *row, int j, uint32_t &ml, uint32_t &mh) {
        const uint8_t *sc = row + 8 * (j >> 2) + 2 * (j & 3);
        ml = (uint32_t)(sc[0] >> 4) * 0x01010101u;
        mh = (uint32_t)(sc[1] >> 4) * 0x01010101u;
    }
};

/* the types whose min term is per 16 elements (frag's mn times the mma of mins() by x) */
template <class T> struct mma_min16 { static constexpr bool v = false; };
template <> struct mma_min16<tmma_q2_k> { static constexpr bool v = true; };

/* x = d * kvalues[q]: tmma_q4_0's nibbles as their table values */
struct tmma_iq4_nl {
    static constexpr int SEGB = 8 * 18;
    static constexpr bool TWO = false;
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        const uint8_t *b = row + 18 * j;
        si_iq4nl_word(si_ld32(b + 2 + 4 * c), lo, hi);
        sa = sb = si_h2f(si_ld16(b));
        mn = 0.0f;
    }
};

/* sub-block j: IQ4_NL's nibbles at bytes 8 + 16 j, scale d * (ls_j - 32) */
struct tmma_iq4_xs {
    static constexpr int SEGB = 136;
    static constexpr bool TWO = false;
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        si_iq4nl_word(si_ld32(row + 8 + 16 * j + 4 * c), lo, hi);
        sa = sb = si_h2f(si_ld16(row)) * (float)(si_iq4xs_scale(row, j) - 32);
        mn = 0.0f;
    }
};

/* 32-block j = 4h + t: elements 128h + 32t + l from ql[64h + 32 (t & 1) + l] (low nibble for
 * t < 2, high otherwise) and bits 2t..2t+1 of qh[32h + l]; scale sc[8h + 2t + l / 16] */
struct tmma_q6_k {
    static constexpr int SEGB = 210;
    static constexpr bool TWO = true;
    SI_HD static uint32_t q6(const uint8_t *ql, const uint8_t *qh, int t) {
        const uint32_t v = ((si_ld32(ql) >> (4 * (t >> 1))) & 0x0F0F0F0Fu) |
                           (((si_ld32(qh) >> (2 * t)) & 0x03030303u) << 4);
        return (v + 0x60606060u) ^ 0x80808080u; /* q - 32 as int8 (q + 96 never carries) */
    }
    SI_HD static void frag(const uint8_t *row, int j, int c, uint32_t &lo, uint32_t &hi, float &sa,
                           float &sb, float &mn) {
        const int h = j >> 2, t = j & 3;
        const uint8_t *ql = row + 64 * h + 32 * (t & 1) + 4 * c, *qh = row + 128 + 32 * h + 4 * c;
        lo = q6(ql, qh, t);
        hi = q6(ql + 16, qh + 16, t);
        const float d = si_h2f(si_ld16(row + 208));
        const int8_t *sc = (const int8_t *)(row + 192 + 8 * h + 2 * t);
        sa = d * (float)sc[0];
        sb = d * (float)sc[1];
        mn = 0.0f;
    }
};

#endif
