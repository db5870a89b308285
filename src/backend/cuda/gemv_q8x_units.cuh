/* gemv_q8x_units.cuh — the weight side of the q8x GEMV (gemv_q8x.cuh): one "unit" per lane.
 *
 * A unit is the part of a weight row that one lane multiplies by UB * 32 consecutive activations
 * (UB Q8_0 blocks of x; UB = 4, 128 elements, except Q8_0's 2). A warp owns a segment of 32
 * consecutive units, copied from global memory as one aligned byte span (32 * UBYTES bytes) into
 * shared memory; load() reads this lane's unit out of the staged segment into WORDS registers,
 * dot() multiplies them with the q8 x of the unit: xw: 8 * UB words = the unit's int8 activations,
 * xd[i]: the fp16-rounded scale of x block i, xs[i]: the sum of its 32 int8 values (the min/offset
 * terms need it). Integer sums (dp4a) per 32 (or 16) elements, then one float multiply-add per
 * block. The kernels add a unit's dot to a lane's sum through q8x_dot_add (Q3_K's, Q6_K's and
 * IQ4_XS's dot_add fuse their last multiply into that add, the same way in every kernel).
 *
 * Units: Q4_0 4 blocks (72 bytes), Q8_0 2 blocks (68), Q4_1 4 blocks (80), Q5_0 4 blocks (88),
 * Q5_1 4 blocks (96), Q2_K half a block (32 bytes of 2-bit quants, 8 scale bytes, d and dmin),
 * Q3_K half a block (32 bytes of 2-bit quants, the 32 bytes of high bits, scales and d), Q4_K
 * half a block (its 16-byte header + 64 bytes of nibbles), Q5_K half a block (header, the 32
 * bytes of high bits, 64 bytes of nibbles), Q6_K half a block (64 bytes of low bits, 32 of high
 * bits, 8 scales and d). BE: elements per weight block (K must be a multiple).
 */
#ifndef SI_BACKEND_CUDA_GEMV_Q8X_UNITS_CUH
#define SI_BACKEND_CUDA_GEMV_Q8X_UNITS_CUH

#include <type_traits>

#include "backend/cuda/dequant.cuh"

/* A 32-bit word at byte offset o (even) of a register array; o is a compile-time constant once
 * the loops around are unrolled, so the array stays in registers. */
SI_HD uint32_t si_wget32(const uint32_t *w, int o) {
    return (o & 3) ? si_funnel_r(w[o >> 2], w[(o >> 2) + 1], 8 * (o & 3)) : w[o >> 2];
}
SI_HD float si_wgeth(const uint32_t *w, int o) {
    return si_h2f((uint16_t)(w[o >> 2] >> (8 * (o & 3))));
}

/* N words of shared memory from a 2-byte-aligned address: aligned 4-byte loads, shifted by the
 * (run-time) misalignment. Reads one word past the N when misaligned. */
template <int N> SI_HD void si_lds_words2(const uint8_t *p, uint32_t *w) {
    const uint32_t sh = 8 * ((uint32_t)(uintptr_t)p & 3);
    const uint32_t *a = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
    uint32_t lo = a[0];
    SI_UNROLL
    for (int i = 0; i < N; i++) {
        const uint32_t hi = i + 1 < N || sh ? a[i + 1] : 0u; /* word N only when misaligned */
        w[i] = si_funnel_r(lo, hi, sh);
        lo = hi;
    }
}

/* N words from an 8-aligned address: 8-byte loads */
template <int N> SI_HD void si_lds_words8(const uint8_t *p, uint32_t *w) {
    SI_UNROLL
    for (int i = 0; i < N / 2; i++) {
        const uint2 v = ((const uint2 *)p)[i];
        w[2 * i] = v.x;
        w[2 * i + 1] = v.y;
    }
}

template <int N> SI_HD void si_lds_words16(const uint8_t *p, uint32_t *w) {
    SI_UNROLL
    for (int i = 0; i < N / 4; i++) {
        const uint4 v = ((const uint4 *)p)[i];
        w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
    }
}

/* The float part of a unit of the types x = d * q: s + d xd isum, block after block (Q4_0 takes a
 * 16th of it, Q5_0 and IQ4_NL all of it), from each block's weight scale dw, x scale and integer
 * sum: the one sequence of rounding steps every kernel of this arithmetic runs (the dp4a kernel's
 * dot makes the same steps between its blocks' sums; gemv_q8x_tc.cuh computes the integer sums
 * on tensor cores). */
SI_HD float q8x_fold_d(const float *dw, const float *xd, const int *isum) {
    float s = 0.0f;
    SI_UNROLL
    for (int b = 0; b < 4; b++)
        s = fmaf(dw[b] * xd[b], (float)isum[b], s);
    return s;
}

/* x = d * (q - 8). Units of 4 blocks = 72 bytes: 8-aligned, lanes' 8-byte loads hit distinct
 * banks (stride 18 words). */
struct tqx_q4_0 {
    static constexpr int BE = 32, UB = 4, BB = 18, UBYTES = 72, WORDS = 18;
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        si_lds_words8<WORDS>(seg + lane * UBYTES, w);
    }
    /* The high nibbles are not shifted down: dp4a of the bytes q & 0xF0 (unsigned) gives 16
     * times their sum, so the block's integer sum is kept times 16 and so is s, scaled back at
     * the end. Scaling by 16 is exact in integers and floats, so the result has the same bits
     * as with the shift, one instruction a word fewer. */
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        float dw[UB];
        int isum[UB];
        SI_UNROLL
        for (int b = 0; b < UB; b++) {
            int lo = 0, hi16 = 0;
            SI_UNROLL
            for (int j = 0; j < 4; j++) {
                const uint32_t q = si_wget32(w, BB * b + 2 + 4 * j);
                lo = si_dp4a((int)(q & 0x0F0F0F0Fu), (int)xw[8 * b + j], lo);
                hi16 = si_dp4a_us(q & 0xF0F0F0F0u, xw[8 * b + 4 + j], hi16);
            }
            dw[b] = si_wgeth(w, BB * b);
            isum[b] = 16 * lo + hi16 - 128 * xs[b];
        }
        return fold(dw, xd, isum);
    }
    /* The float part of a unit from its blocks' integer sums 16 * sum(q x) - 128 * xs (q the
     * raw nibbles) */
    SI_HD static float fold(const float *dw, const float *xd, const int *isum) {
        return 0.0625f * q8x_fold_d(dw, xd, isum);
    }
};

/* x = d * q. Units of 2 blocks = 68 bytes: 4-aligned (stride 17 words, distinct banks). */
struct tqx_q8_0 {
    static constexpr int BE = 32, UB = 2, BB = 34, UBYTES = 68, WORDS = 17;
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        const uint32_t *p = (const uint32_t *)(seg + lane * UBYTES);
        SI_UNROLL
        for (int i = 0; i < WORDS; i++) w[i] = p[i];
    }
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        float s = 0.0f;
        SI_UNROLL
        for (int b = 0; b < UB; b++) {
            int sumi = 0;
            SI_UNROLL
            for (int j = 0; j < 8; j++)
                sumi = si_dp4a((int)si_wget32(w, BB * b + 2 + 4 * j), (int)xw[8 * b + j], sumi);
            s = fmaf(si_wgeth(w, BB * b) * xd[b], (float)sumi, s); /* as q8x_fold_d's steps */
        }
        (void)xs;
        return s;
    }
};

/* x = d * q + m. Units of 4 blocks = 80 bytes: rows are 16-aligned (K % 128 == 0), so 16-byte
 * loads; stride 20 words puts a quarter-warp's loads on distinct banks. The min term uses the
 * exact integer sum of the q8 x (ggml's q8_1 keeps it as fp16(d * sum), less precise). */
struct tqx_q4_1 {
    static constexpr int BE = 32, UB = 4, BB = 20, UBYTES = 80, WORDS = 20;
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        si_lds_words16<WORDS>(seg + lane * UBYTES, w);
    }
    /* the high nibbles unshifted, everything times 16, as tqx_q4_0 */
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        float s16 = 0.0f;
        SI_UNROLL
        for (int b = 0; b < UB; b++) {
            int lo = 0, hi16 = 0;
            SI_UNROLL
            for (int j = 0; j < 4; j++) {
                const uint32_t q = w[5 * b + 1 + j];
                lo = si_dp4a((int)(q & 0x0F0F0F0Fu), (int)xw[8 * b + j], lo);
                hi16 = si_dp4a_us(q & 0xF0F0F0F0u, xw[8 * b + 4 + j], hi16);
            }
            s16 = step(s16, w[5 * b], xd[b], xs[b], 16 * lo + hi16);
        }
        return 0.0625f * s16;
    }
    /* one block's float step, from its d | m << 16, x's scale and sum and the integer sum
     * 16 * sum(q x): the one sequence of rounding steps every kernel of this arithmetic runs,
     * block after block, then a 16th (tc_q4_1's fold) */
    SI_HD static float step(float s16, uint32_t dmw, float xd, int xs, int isum16) {
        const float2 dm = si_h2x2f(dmw); /* d, m */
        return fmaf(xd, fmaf(dm.x, (float)isum16, 16.0f * (dm.y * (float)xs)), s16);
    }
};

/* x = d * sc_j * q - dmin * m_j over 8 sub-blocks j of 32. Unit = half h of a block (lane & 1):
 * sub-blocks 4h..4h+3 = x blocks 0..3 of the unit, from the nibbles qs[64h .. 64h + 63]
 * (low nibbles of the first 32 bytes: sub-block 4h, high: 4h + 1, and so on). Blocks (144
 * bytes) are 16-aligned, the two lanes of a block read its header (broadcast) and their 64
 * bytes; the 16-byte loads of a quarter-warp land on distinct banks (stride 9 x 16 bytes).
 * load() unpacks the 6-bit scales and mins of the 4 sub-blocks (get_scale_min_k4) into one
 * byte each: w[0] = d | dmin << 16, w[1] = scales, w[2] = mins, w[3..18] = the nibbles. */
struct tqx_q4_k {
    static constexpr int BE = 256, UB = 4, UBYTES = 72, WORDS = 19;
    /* the 6-bit scales (sc) and mins (m) of half h's 4 sub-blocks, one byte each, from the
     * header's words hd.y, hd.z, hd.w (scales[0..11]). j < 4: sc = s[j] & 63, m = s[j + 4] & 63;
     * j >= 4: the low (sc) or high (m) nibble of s[j + 4] plus bits 6..7 of s[j - 4] (sc) or
     * s[j] (m) as bits 4..5 */
    SI_HD static void scale_min(uint4 hd, int h, uint32_t &sc, uint32_t &m) {
        sc = h ? (hd.w & 0x0F0F0F0Fu) | ((hd.y >> 2) & 0x30303030u) : hd.y & 0x3F3F3F3Fu;
        m = h ? ((hd.w >> 4) & 0x0F0F0F0Fu) | ((hd.z >> 2) & 0x30303030u) : hd.z & 0x3F3F3F3Fu;
    }
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        const uint8_t *blk = seg + (lane >> 1) * 144;
        const int h = lane & 1;
        const uint4 hd = *(const uint4 *)blk; /* d, dmin | scales[0..3] | [4..7] | [8..11] */
        w[0] = hd.x;
        scale_min(hd, h, w[1], w[2]);
        si_lds_words16<16>(blk + 16 + 64 * h, w + 3);
    }
    /* odd t: the high nibbles unshifted (as tqx_q4_0), so the sum and the min term are 16 times
     * theirs and x's scale a 16th: the same bits, 8 shifts fewer */
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        int sumi[UB];
        SI_UNROLL
        for (int t = 0; t < UB; t++) {
            sumi[t] = 0;
            SI_UNROLL
            for (int j = 0; j < 8; j++) {
                const uint32_t q = w[3 + 8 * (t >> 1) + j];
                sumi[t] = t & 1 ? si_dp4a_us(q & 0xF0F0F0F0u, xw[8 * t + j], sumi[t])
                                : si_dp4a((int)(q & 0x0F0F0F0Fu), (int)xw[8 * t + j], sumi[t]);
            }
        }
        return fold<true>(w[0], w[1], w[2], xd, xs, sumi);
    }
    /* The float part of a unit, from d | dmin << 16, the sub-blocks' scale and min bytes, x's
     * scales and sums and the integer sums (HI16, Q4_K's: odd t 16 times theirs; Q5_K's are
     * all as they are): the one sequence of rounding steps every kernel of this arithmetic
     * runs (as tqx_q4_0::fold). */
    template <bool HI16>
    SI_HD static float fold(uint32_t dmw, uint32_t sc, uint32_t m, const float *xd, const int *xs,
                            const int *sumi) {
        const float2 dm = si_h2x2f(dmw); /* d, dmin */
        float s = 0.0f;
        SI_UNROLL
        for (int t = 0; t < UB; t++) {
            const bool hi = HI16 && (t & 1);
            const int sc_t = (sc >> (8 * t)) & 0xFF, m_t = (m >> (8 * t)) & 0xFF;
            const float min_t = -dm.y * (float)(m_t * xs[t]);
            s = fmaf(hi ? 0.0625f * xd[t] : xd[t],
                     fmaf(dm.x, (float)(sc_t * sumi[t]), hi ? 16.0f * min_t : min_t), s);
        }
        return s;
    }
};

/* x = d * (q - 16), q = nibble | high bit << 4 (tq_q5_0). Units of 4 blocks = 88 bytes: rows are
 * 8-aligned (K % 128 == 0), so 8-byte loads; the fields sit at even offsets (si_wget32). */
struct tqx_q5_0 {
    static constexpr int BE = 32, UB = 4, BB = 22, UBYTES = 88, WORDS = 22;
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        si_lds_words8<WORDS>(seg + lane * UBYTES, w);
    }
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        float s = 0.0f;
        SI_UNROLL
        for (int b = 0; b < UB; b++) {
            const uint32_t qh = si_wget32(w, BB * b + 2);
            int sumi = 0;
            SI_UNROLL
            for (int j = 0; j < 4; j++) {
                const uint32_t q = si_wget32(w, BB * b + 6 + 4 * j);
                uint32_t lo, hi;
                si_q5_quants(q, qh, 4 * j, lo, hi);
                sumi = si_dp4a((int)lo, (int)xw[8 * b + j], sumi);
                sumi = si_dp4a((int)hi, (int)xw[8 * b + 4 + j], sumi);
            }
            /* q8x_fold_d's step */
            s = fmaf(si_wgeth(w, BB * b) * xd[b], (float)(sumi - 16 * xs[b]), s);
        }
        return s;
    }
};

/* x = d * q + m, q as tqx_q5_0's. Units of 4 blocks = 96 bytes: 16-byte loads (rows are
 * 16-aligned); block b is w[6b] = d | m << 16, w[6b + 1] = qh, w[6b + 2 ..] = qs. The min term
 * uses the exact integer sum of the q8 x, as tqx_q4_1. */
struct tqx_q5_1 {
    static constexpr int BE = 32, UB = 4, BB = 24, UBYTES = 96, WORDS = 24;
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        si_lds_words16<WORDS>(seg + lane * UBYTES, w);
    }
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        float s = 0.0f;
        SI_UNROLL
        for (int b = 0; b < UB; b++) {
            const uint32_t qh = w[6 * b + 1];
            int sumi = 0;
            SI_UNROLL
            for (int j = 0; j < 4; j++) {
                const uint32_t q = w[6 * b + 2 + j];
                uint32_t lo, hi;
                si_q5_quants(q, qh, 4 * j, lo, hi);
                sumi = si_dp4a((int)lo, (int)xw[8 * b + j], sumi);
                sumi = si_dp4a((int)hi, (int)xw[8 * b + 4 + j], sumi);
            }
            s = step(s, w[6 * b], xd[b], xs[b], sumi);
        }
        return s;
    }
    /* one block's float step (d | m << 16, x's scale and sum, the integer sum(q x)), as
     * tqx_q4_1::step: every kernel runs it block after block (tc_q5_1's fold) */
    SI_HD static float step(float s, uint32_t dmw, float xd, int xs, int isum) {
        const float2 dm = si_h2x2f(dmw); /* d, m */
        return fmaf(xd, fmaf(dm.x, (float)isum, dm.y * (float)xs), s);
    }
};

/* x = d * sc_j * q - dmin * m_j, q = nibble | high bit << 4 (tq_q5_k). Unit = half h of a
 * 176-byte block (lane & 1), as tqx_q4_k's: sub-blocks 4h..4h+3 = x blocks 0..3 of the unit,
 * nibbles from qs[64h .. 64h + 63], high bits 4h + t of the 32 bytes qh (element l of sub-block
 * 4h + t: bit 4h + t of qh[l]). Blocks are 16-aligned. w[0] = d | dmin << 16, w[1] = scales,
 * w[2] = mins (tqx_q4_k::scale_min), w[3..10] = qh >> 4h (bit t of each byte: sub-block 4h + t),
 * w[11..26] = the nibbles. */
struct tqx_q5_k {
    static constexpr int BE = 256, UB = 4, UBYTES = 88, WORDS = 27;
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        const uint8_t *blk = seg + (lane >> 1) * 176;
        const int h = lane & 1;
        const uint4 hd = *(const uint4 *)blk; /* d, dmin | scales[0..3] | [4..7] | [8..11] */
        w[0] = hd.x;
        tqx_q4_k::scale_min(hd, h, w[1], w[2]);
        si_lds_words16<8>(blk + 16, w + 3);
        SI_UNROLL
        for (int j = 0; j < 8; j++)
            w[3 + j] >>= 4 * h;
        si_lds_words16<16>(blk + 48 + 64 * h, w + 11);
    }
    /* the float part: Q4_K's (the integer sums all as they are) */
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        int sumi[UB];
        SI_UNROLL
        for (int t = 0; t < UB; t++) {
            sumi[t] = 0;
            SI_UNROLL
            for (int j = 0; j < 8; j++) {
                const uint32_t q = w[11 + 8 * (t >> 1) + j];
                const uint32_t nib = (t & 1 ? q >> 4 : q) & 0x0F0F0F0Fu;
                const uint32_t q5 = nib | (((w[3 + j] >> t) & 0x01010101u) << 4);
                sumi[t] = si_dp4a((int)q5, (int)xw[8 * t + j], sumi[t]);
            }
        }
        return tqx_q4_k::fold<false>(w[0], w[1], w[2], xd, xs, sumi);
    }
};

/* x = d * sc * q - dmin * m over 16 sub-blocks of 16 (tq_q2_k). Unit = half h of an 84-byte
 * block (lane & 1): x block t (0..3) of the unit is elements 128h + 32t + l, bits 2t..2t+1 of
 * qs[32h + l], of sub-blocks 8h + 2t (l < 16) and 8h + 2t + 1. Rows are K / 256 x 84 bytes, so
 * blocks are 4-aligned: 4-byte loads. w[0..7] = qs[32h ..], w[8..9] = the 8 sub-blocks' scale |
 * min << 4 bytes, w[10] = d | dmin << 16. A block's two halves of 16 have their own mins, so
 * each needs its own x sum: the first half's by dp4a with ones, the second's the block's less
 * it. The 2-bit values are not shifted down: dp4a of the bytes q & (3 << 2t) (unsigned) gives
 * 4^t times their sum, and d / 4^t takes it back (powers of two: the same bits as with the
 * shift, one instruction a word fewer, as tqx_q4_0's high nibbles). */
struct tqx_q2_k {
    static constexpr int BE = 256, UB = 4, UBYTES = 42, WORDS = 11;
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        const uint8_t *blk = seg + (lane >> 1) * 84;
        const int h = lane & 1;
        const uint32_t *q = (const uint32_t *)(blk + 16 + 32 * h);
        SI_UNROLL
        for (int j = 0; j < 8; j++)
            w[j] = q[j];
        w[8] = *(const uint32_t *)(blk + 8 * h);
        w[9] = *(const uint32_t *)(blk + 8 * h + 4);
        w[10] = *(const uint32_t *)(blk + 80);
    }
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        const float2 dm = si_h2x2f(w[10]); /* d, dmin */
        /* the 8 sub-blocks' scales and mins, a byte each */
        const uint32_t sc[2] = {w[8] & 0x0F0F0F0Fu, w[9] & 0x0F0F0F0Fu};
        const uint32_t mn[2] = {(w[8] >> 4) & 0x0F0F0F0Fu, (w[9] >> 4) & 0x0F0F0F0Fu};
        float s = 0.0f;
        SI_UNROLL
        for (int t = 0; t < UB; t++) {
            const uint32_t mask = 0x03030303u << (2 * t);
            int sum0 = 0, sum1 = 0, x0 = 0;
            SI_UNROLL
            for (int j = 0; j < 4; j++) {
                sum0 = si_dp4a_us(w[j] & mask, xw[8 * t + j], sum0);
                sum1 = si_dp4a_us(w[4 + j] & mask, xw[8 * t + 4 + j], sum1);
                x0 = si_dp4a(0x01010101, (int)xw[8 * t + j], x0);
            }
            const int k = 2 * (t & 1); /* sub-blocks 2t, 2t + 1: bytes k, k + 1 of word t / 2 */
            const int isum = si_byte(sc[t >> 1], k) * sum0 + si_byte(sc[t >> 1], k + 1) * sum1;
            s = step(s, dm, t, xd[t], isum, msum(mn[t >> 1], t, x0, xs[t]));
        }
        return s;
    }
    /* x block t's min term: its two 16s' mins (bytes of mnw, the word of the mins of x blocks
     * 2 (t / 2), 2 (t / 2) + 1) times their x sums (x0: the first 16's, xs: the block's) */
    SI_HD static int msum(uint32_t mnw, int t, int x0, int xs) {
        const int k = 2 * (t & 1);
        return si_byte(mnw, k) * x0 + si_byte(mnw, k + 1) * (xs - x0);
    }
    /* x block t's float step, from d and dmin, the integer sum 4^t sum(sc q x) (the 2-bit values
     * unshifted) and the min term: the one sequence of rounding steps every kernel of this
     * arithmetic runs, block after block (tc_q2_k's fold) */
    SI_HD static float step(float s, float2 dm, int t, float xd, int isum4, int msum) {
        const float d4 = dm.x * (1.0f / (float)(1 << (2 * t))); /* d / 4^t */
        return fmaf(xd, fmaf(d4, (float)isum4, -dm.y * (float)msum), s);
    }
};

/* x = d * (sc - 32) * q, q = 2-bit value - (high bit ? 0 : 4) (tq_q3_k). Unit = half h of a
 * 110-byte block (lane & 1): x block t (0..3) is elements 128h + 32t + l: bits 2t..2t+1 of
 * qs[32h + l], bit 4h + t of hmask[l], sub-blocks 8h + 2t (l < 16) and 8h + 2t + 1. Blocks are
 * 2-aligned: 4-byte loads shifted by the lane's misalignment (as tqx_q6_k). w[0..7] = qs[32h ..],
 * w[8..15] = hmask << 4 (1 - h) (bit 4 + t of each byte: x block t), w[16..17] = the 8
 * sub-blocks' scales minus 32, an int8 each, w[18] = d.
 * A byte of q is made whole in one select: the high bit moved to bit 7 and spread over its byte
 * by PRMT's sign mode (0xFF where set), then the 2-bit value where the 0x03 mask is and the
 * complement of that spread everywhere else: set high bit, the value; clear, value | 0xFC, that
 * is value - 4 as int8. */
struct tqx_q3_k {
    static constexpr int BE = 256, UB = 4, UBYTES = 55, WORDS = 19;
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        const uint8_t *blk = seg + (lane >> 1) * 110;
        const int h = lane & 1;
        si_lds_words2<8>(blk + 32 + 32 * h, w);
        si_lds_words2<8>(blk, w + 8);
        SI_UNROLL
        for (int j = 0; j < 8; j++)
            w[8 + j] <<= 4 - 4 * h;
        scale_words(blk, h, w + 16);
        w[18] = si_ld16(blk + 108);
    }
    /* the int8 scales of half h's 8 sub-blocks, 4 a word (2-aligned blk, as load's) */
    SI_HD static void scale_words(const uint8_t *blk, int h, uint32_t *sw) {
        uint32_t s[3];
        si_lds_words2<3>(blk + 96, s);
        /* sub-block 8h + i: the low (h = 0) or high nibble of scales[i] (s[0], s[1]) with bits
         * 2 (i / 4) + 4h..+1 of scales[8 + i % 4] (s[2]) on top (si_q3k_scale), minus 32: the
         * 6-bit values plus 0x60 stay within their bytes, and flipping bit 7 takes 0x80 off */
        const uint32_t s0 =
            ((s[0] >> 4 * h) & 0x0F0F0F0Fu) | (((s[2] >> 4 * h) & 0x03030303u) << 4);
        const uint32_t s1 =
            ((s[1] >> 4 * h) & 0x0F0F0F0Fu) | (((s[2] >> (4 * h + 2)) & 0x03030303u) << 4);
        sw[0] = (s0 + 0x60606060u) ^ 0x80808080u;
        sw[1] = (s1 + 0x60606060u) ^ 0x80808080u;
    }
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        return dot_add(0.0f, w, xw, xd, xs);
    }
    /* acc + the unit's dot, its last multiply (by d) fused with the add, as tqx_q6_k's: the
     * float steps are tqx_q6_k::fold's (the same int8 scales a 16, the same d) */
    SI_HD static float dot_add(float acc, const uint32_t *w, const uint32_t *xw, const float *xd,
                               const int *xs) {
        float s = 0.0f;
        SI_UNROLL
        for (int t = 0; t < UB; t++) {
            int isum = 0;
            SI_UNROLL
            for (int lh = 0; lh < 2; lh++) {
                int sumi = 0;
                SI_UNROLL
                for (int j = 0; j < 4; j++) {
                    const uint32_t set = si_prmt(w[8 + 4 * lh + j] << (3 - t), 0, 0xBA98u);
                    const uint32_t a = w[4 * lh + j] >> (2 * t);
                    /* (a & 0x03) | (~set & 0xFC) a byte: LUT (0xF0 & 0xAA) | (~0xCC & ~0xAA) */
                    const uint32_t q = si_lop3<0xB1>(a, set, 0x03030303u);
                    sumi = si_dp4a((int)q, (int)xw[8 * t + 4 * lh + j], sumi);
                }
                const int sb = 2 * t + lh; /* scale byte of this 16 */
                isum += (int)(int8_t)(w[16 + (sb >> 2)] >> (8 * (sb & 3))) * sumi;
            }
            s = fmaf(xd[t], (float)isum, s);
        }
        (void)xs;
        return fmaf(si_h2f((uint16_t)w[18]), s, acc);
    }
};

/* x = d * kvalues[q] (tq_iq4_nl). Units of 4 blocks = 72 bytes, Q4_0's layout (tqx_q4_0); the
 * nibbles become their table values (int8) before the dp4a. */
struct tqx_iq4_nl {
    static constexpr int BE = 32, UB = 4, BB = 18, UBYTES = 72, WORDS = 18;
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        si_lds_words8<WORDS>(seg + lane * UBYTES, w);
    }
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        float s = 0.0f;
        SI_UNROLL
        for (int b = 0; b < UB; b++) {
            int sumi = 0;
            SI_UNROLL
            for (int j = 0; j < 4; j++) {
                uint32_t lo, hi;
                si_iq4nl_word(si_wget32(w, BB * b + 2 + 4 * j), lo, hi);
                sumi = si_dp4a((int)lo, (int)xw[8 * b + j], sumi);
                sumi = si_dp4a((int)hi, (int)xw[8 * b + 4 + j], sumi);
            }
            s = fmaf(si_wgeth(w, BB * b) * xd[b], (float)sumi, s); /* as q8x_fold_d's steps */
        }
        (void)xs;
        return s;
    }
};

/* x = d * (ls - 32) * kvalues[q] (tq_iq4_xs). Unit = half h of a 136-byte block (lane & 1): its
 * sub-blocks 4h..4h+3 are x blocks 0..3, their nibbles qs[64h ..] (bytes 8 + 64h ..). Blocks are
 * 8-aligned: 8-byte loads. w[0] = d | scales_h << 16, w[1] = the 4 sub-blocks' 6-bit scales, a byte
 * each, w[2..17] = the nibbles. */
struct tqx_iq4_xs {
    static constexpr int BE = 256, UB = 4, UBYTES = 68, WORDS = 18;
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        const uint8_t *blk = seg + (lane >> 1) * 136;
        const int h = lane & 1;
        uint32_t hd[2];
        si_lds_words8<2>(blk, hd); /* d | scales_h << 16, scales_l */
        w[0] = hd[0];
        w[1] = scale_word(hd[0], hd[1], h);
        si_lds_words8<16>(blk + 8 + 64 * h, w + 2);
    }
    /* half h's 4 6-bit scales, a byte each, from the block's first two words: sub-block 4h + t
     * is nibble t of scales_l's bytes 2h, 2h + 1 (low first), bits 2t.. of scales_h >> 8h on
     * top */
    SI_HD static uint32_t scale_word(uint32_t hd0, uint32_t hd1, int h) {
        const uint32_t sl = hd1 >> (16 * h), sh = hd0 >> (16 + 8 * h);
        uint32_t sw = 0;
        SI_UNROLL
        for (int t = 0; t < 4; t++)
            sw |= (((sl >> (4 * t)) & 0xFu) | (((sh >> (2 * t)) & 3u) << 4)) << (8 * t);
        return sw;
    }
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        return dot_add(0.0f, w, xw, xd, xs);
    }
    /* acc + the unit's dot, its last multiply (by d) fused with the add (as tqx_q6_k's); fold's
     * steps */
    SI_HD static float dot_add(float acc, const uint32_t *w, const uint32_t *xw, const float *xd,
                               const int *xs) {
        float s = 0.0f;
        SI_UNROLL
        for (int t = 0; t < UB; t++) {
            int sumi = 0;
            SI_UNROLL
            for (int j = 0; j < 4; j++) {
                uint32_t lo, hi;
                si_iq4nl_word(w[2 + 4 * t + j], lo, hi);
                sumi = si_dp4a((int)lo, (int)xw[8 * t + j], sumi);
                sumi = si_dp4a((int)hi, (int)xw[8 * t + 4 + j], sumi);
            }
            s = fmaf(xd[t], (float)(scale(w[1], t) * sumi), s);
        }
        (void)xs;
        return fmaf(si_h2f((uint16_t)w[0]), s, acc);
    }
    /* The float part of a unit, from its scale word, d's bits, x's scales and the integer sums,
     * added to acc: the one sequence of rounding steps every kernel of this arithmetic runs */
    SI_HD static float fold(uint32_t scw, uint16_t d, const float *xd, const int *sumi, float acc) {
        float s = 0.0f;
        SI_UNROLL
        for (int t = 0; t < UB; t++)
            s = fmaf(xd[t], (float)(scale(scw, t) * sumi[t]), s);
        return fmaf(si_h2f(d), s, acc);
    }
    /* sub-block t's scale: its 6-bit byte minus 32 */
    SI_HD static int scale(uint32_t scw, int t) { return ((int)(scw >> (8 * t)) & 0xFF) - 32; }
};

/* x = d * sc[e / 16] * (q - 32), q 6-bit. Unit = half h of a block (lane & 1): elements
 * 128h + 32t + l (t, l < 32) are ql[64h + 32 (t & 1) + l] (low nibble for t < 2, high for
 * t >= 2) with bits 2t..2t+1 of qh[32h + l] on top (ggml's dequantize_row_q6_K), scale
 * sc[8h + 2t + l / 16]. Blocks are 210 bytes, so only 2-aligned: 4-byte loads shifted by the
 * lane's misalignment. w[0..15] = ql, w[16..23] = qh, w[24..25] = the 8 scales, w[26] = d. */
struct tqx_q6_k {
    static constexpr int BE = 256, UB = 4, UBYTES = 105, WORDS = 27;
    SI_HD static void load(const uint8_t *seg, int lane, uint32_t *w) {
        const uint8_t *blk = seg + (lane >> 1) * 210;
        const int h = lane & 1;
        si_lds_words2<16>(blk + 64 * h, w);
        si_lds_words2<8>(blk + 128 + 32 * h, w + 16);
        si_lds_words2<2>(blk + 192 + 8 * h, w + 24);
        w[26] = si_ld16(blk + 208);
    }
    SI_HD static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        return dot_add(0.0f, w, xw, xd, xs);
    }
    /* acc + the unit's dot as every kernel adds it: the last multiply fused with the add. Each
     * 16's sum is scaled as soon as it is made (the order before s47: with the sums of all four
     * blocks made first, tg128 ran 2.3 % slower on an H100). */
    SI_HD static float dot_add(float acc, const uint32_t *w, const uint32_t *xw, const float *xd,
                               const int *xs) {
        float s = 0.0f;
        SI_UNROLL
        for (int t = 0; t < UB; t++) {
            int isum = 0;
            SI_UNROLL
            for (int lh = 0; lh < 2; lh++) {
                int sumi = 0;
                SI_UNROLL
                for (int j = 0; j < 4; j++) {
                    const uint32_t lo = (w[8 * (t & 1) + 4 * lh + j] >> (4 * (t >> 1))) & 0x0F0F0F0Fu;
                    const uint32_t hi = ((w[16 + 4 * lh + j] >> (2 * t)) & 0x03030303u) << 4;
                    /* bytes q in [0, 63] -> q - 32 as int8: q + 96 never carries, ^ 0x80 wraps */
                    const uint32_t q = ((lo | hi) + 0x60606060u) ^ 0x80808080u;
                    sumi = si_dp4a((int)q, (int)xw[8 * t + 4 * lh + j], sumi);
                }
                isum += scale(w + 24, 2 * t + lh) * sumi;
            }
            s = fmaf(xd[t], (float)isum, s); /* fold's steps */
        }
        (void)xs;
        return fmaf(si_h2f((uint16_t)w[26]), s, acc);
    }
    /* The float part of a unit, from its 8 int8 scales (2 words), d's bits, x's scales and the
     * integer sums of each 16 elements, added to acc: the one sequence of rounding steps every
     * kernel of this arithmetic runs (dot_add runs the same steps). The part ends in a multiply
     * by d, fused with the add to acc, explicitly: left to the compiler, the dp4a kernel's
     * acc += dot() was fused and the tensor-core kernel's was not (s47: other bits for rows of
     * 2+ segments). */
    SI_HD static float fold(const uint32_t *scw, uint16_t d, const float *xd, const int *sumi,
                            float acc) {
        float s = 0.0f;
        SI_UNROLL
        for (int t = 0; t < UB; t++)
            s = fmaf(
                xd[t],
                (float)(scale(scw, 2 * t) * sumi[2 * t] + scale(scw, 2 * t + 1) * sumi[2 * t + 1]),
                s);
        return fmaf(si_h2f(d), s, acc);
    }
    /* the int8 scale of sub-block sb (of 16 elements) */
    SI_HD static int scale(const uint32_t *scw, int sb) {
        return (int)(int8_t)(scw[sb >> 2] >> (8 * (sb & 3)));
    }
};

/* acc + a unit's dot, the one way every kernel adds it: T::dot_add where the type has one (its
 * dot ends in a multiply that is fused with the add: Q6_K), else acc + T::dot */
template <class T, class = void> struct q8x_has_dot_add : std::false_type {};
template <class T>
struct q8x_has_dot_add<T, std::void_t<decltype(&T::dot_add)>> : std::true_type {};
template <class T>
SI_HD float q8x_dot_add(float acc, const uint32_t *w, const uint32_t *xw, const float *xd,
                        const int *xs) {
    if constexpr (q8x_has_dot_add<T>::value)
        return T::dot_add(acc, w, xw, xd, xs);
    else
        return acc + T::dot(w, xw, xd, xs);
}

#endif
