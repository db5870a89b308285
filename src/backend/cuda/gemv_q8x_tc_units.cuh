/* gemv_q8x_tc_units.cuh — the per-type side of the q8x GEMV on tensor cores (gemv_q8x_tc.cuh):
 * where a unit's blocks are, its A fragments and the float part that must give the dp4a kernel's
 * bits. SI_HD: test_cuda_decoders sums the fragments on the host and checks fold() against the
 * q8x unit's dot() bit for bit. */
#ifndef SI_BACKEND_CUDA_GEMV_Q8X_TC_UNITS_CUH
#define SI_BACKEND_CUDA_GEMV_Q8X_TC_UNITS_CUH

#include "backend/cuda/gemv_mma_units.cuh"
#include "backend/cuda/gemv_q8x_units.cuh"

/* The tensor-core side of a q8x unit type U, over a row's chunk of raw GGUF blocks in shared
 * memory:
 *   unit(): where unit i of the chunk (its half h of a block, for half-block units) starts;
 *   frag(): A words of 32-element block j of a unit (half h) for lane c: k 4c..4c+3 (lo),
 *     16+4c..16+4c+3 (hi); unsigned bytes where AU8, else signed;
 *   NS: integer sums a block: 1, or 2 (one of each 16 elements: the kernel runs the lo and the
 *     hi words through separate mma's), S[NS j + i];
 *   P / params(): a row's per-unit numbers that the float part takes;
 *   xterm(): what is stored beside x's scale from the sum of x's block (the q8 values); xhalf()
 *     where a type also needs the sum of the block's first 16 (x0): the stored term with x0;
 *   fold(): U's float part of a unit from the tensor cores' sums S (of A x), the one sequence of
 *     roundings the dp4a kernel runs (U::fold); fold_add() (acc + it) where U has dot_add.
 * The fragments read through si_ld32 (2-byte alignment: Q3_K's 110- and Q6_K's 210-byte blocks). */

/* units of 4 blocks of BB bytes that start with their fp16 d (Q4_0, Q5_0, IQ4_NL; P.dw: the
 * blocks' d) or with d | m << 16 (DM: Q4_1, Q5_1; P.dw: the blocks' first words) */
template <int BB, bool DM = false> struct tc_blocks4 {
    static constexpr int NS = 1;
    struct P {
        std::conditional_t<DM, uint32_t, float> dw[4];
    };
    SI_HD static const uint8_t *unit(const uint8_t *chunk, int i, int) {
        return chunk + 4 * BB * i;
    }
    SI_HD static P params(const uint8_t *unit, int) {
        P p;
        SI_UNROLL
        for (int j = 0; j < 4; j++)
            if constexpr (DM)
                p.dw[j] = si_ld32(unit + BB * j);
            else
                p.dw[j] = si_h2f(si_ld16(unit + BB * j));
        return p;
    }
};

struct tc_q4_0 : tc_blocks4<18> {
    using U = tqx_q4_0;              /* A: the raw nibbles 0..15; the - 8 is in the x term */
    static constexpr int MIN_NB = 5; /* see the top */
    static constexpr bool AU8 = true;
    /* A Q4_0 block's byte c packs elements c (low nibble) and c + 16 (high) */
    SI_HD static void frag(const uint8_t *unit, int, int j, int c, uint32_t &lo, uint32_t &hi) {
        const uint32_t w = si_ld32(unit + 18 * j + 2 + 4 * c);
        lo = w & 0x0F0F0F0Fu;
        hi = (w >> 4) & 0x0F0F0F0Fu;
    }
    SI_HD static int xterm(int xsum) { return -128 * xsum; }
    /* tqx_q4_0's integer sum: 16 sum(q x) - 128 xs */
    SI_HD static float fold(const P &p, const float *xd, const int *xt, const int *S) {
        int is[4];
        SI_UNROLL
        for (int j = 0; j < 4; j++)
            is[j] = 16 * S[j] + xt[j];
        return U::fold(p.dw, xd, is);
    }
};

/* Q4_1 (x = d q + m): A the raw nibbles (tmma_q4_1's words), the min term from x's sum */
struct tc_q4_1 : tc_blocks4<20, true> {
    using U = tqx_q4_1;
    static constexpr int MIN_NB = 5;
    static constexpr bool AU8 = true;
    SI_HD static void frag(const uint8_t *unit, int, int j, int c, uint32_t &lo, uint32_t &hi) {
        float sa, sb, mn; /* the matmul's float scales: unused here */
        tmma_q4_1::frag(unit, j, c, lo, hi, sa, sb, mn);
    }
    SI_HD static int xterm(int xsum) { return xsum; }
    /* tqx_q4_1's integer sums are 16 times theirs (the unshifted high nibbles) */
    SI_HD static float fold(const P &p, const float *xd, const int *xt, const int *S) {
        float s16 = 0.0f;
        SI_UNROLL
        for (int j = 0; j < 4; j++)
            s16 = U::step(s16, p.dw[j], xd[j], xt[j], 16 * S[j]);
        return 0.0625f * s16;
    }
};

/* Q5_0 (x = d (q - 16)): A q - 16 as int8 (tmma_q5_0's words), so the sums are tqx_q5_0's */
struct tc_q5_0 : tc_blocks4<22> {
    using U = tqx_q5_0;
    static constexpr int MIN_NB = 5;
    static constexpr bool AU8 = false;
    SI_HD static void frag(const uint8_t *unit, int, int j, int c, uint32_t &lo, uint32_t &hi) {
        float sa, sb, mn;
        tmma_q5_0::frag(unit, j, c, lo, hi, sa, sb, mn);
    }
    SI_HD static int xterm(int) { return 0; }
    SI_HD static float fold(const P &p, const float *xd, const int *, const int *S) {
        return q8x_fold_d(p.dw, xd, S);
    }
};

/* Q5_1 (x = d q + m): A the 5-bit values 0..31 (tmma_q5_1's words), the min term from x's sum */
struct tc_q5_1 : tc_blocks4<24, true> {
    using U = tqx_q5_1;
    static constexpr int MIN_NB = 5;
    static constexpr bool AU8 = true;
    SI_HD static void frag(const uint8_t *unit, int, int j, int c, uint32_t &lo, uint32_t &hi) {
        float sa, sb, mn;
        tmma_q5_1::frag(unit, j, c, lo, hi, sa, sb, mn);
    }
    SI_HD static int xterm(int xsum) { return xsum; }
    SI_HD static float fold(const P &p, const float *xd, const int *xt, const int *S) {
        float s = 0.0f;
        SI_UNROLL
        for (int j = 0; j < 4; j++)
            s = U::step(s, p.dw[j], xd[j], xt[j], S[j]);
        return s;
    }
};

/* IQ4_NL (x = d kvalues[q]): A the table values (tmma_iq4_nl's words) */
struct tc_iq4_nl : tc_blocks4<18> {
    using U = tqx_iq4_nl;
    static constexpr int MIN_NB = 5;
    static constexpr bool AU8 = false;
    SI_HD static void frag(const uint8_t *unit, int, int j, int c, uint32_t &lo, uint32_t &hi) {
        float sa, sb, mn;
        tmma_iq4_nl::frag(unit, j, c, lo, hi, sa, sb, mn);
    }
    SI_HD static int xterm(int) { return 0; }
    SI_HD static float fold(const P &p, const float *xd, const int *, const int *S) {
        return q8x_fold_d(p.dw, xd, S);
    }
};

/* Q4_K: a unit is half h of a 144-byte block: the block's 16-byte header and its 64 bytes of
 * nibbles at 16 + 64 h (unit() points 64 h into the block). Sub-blocks 2i and 2i + 1 of the unit
 * are the low and high nibbles of its bytes 32i..32i+31. */
struct tc_q4_k {
    using U = tqx_q4_k;
    static constexpr int MIN_NB = 5;
    static constexpr int NS = 1;
    static constexpr bool AU8 = true;
    struct P {
        uint32_t dm, sc, m;
    };
    SI_HD static const uint8_t *unit(const uint8_t *chunk, int i, int h) {
        return chunk + 144 * (i >> 1) + 64 * h;
    }
    SI_HD static P params(const uint8_t *unit, int h) {
        const uint4 hd = *(const uint4 *)(unit - 64 * h);
        P p;
        p.dm = hd.x;
        U::scale_min(hd, h, p.sc, p.m);
        return p;
    }
    SI_HD static void frag(const uint8_t *unit, int, int j, int c, uint32_t &lo, uint32_t &hi) {
        const uint8_t *q = unit + 16 + 32 * (j >> 1) + 4 * c;
        const int sh = 4 * (j & 1);
        lo = (*(const uint32_t *)q >> sh) & 0x0F0F0F0Fu;
        hi = (*(const uint32_t *)(q + 16) >> sh) & 0x0F0F0F0Fu;
    }
    SI_HD static int xterm(int xsum) { return xsum; }
    /* tqx_q4_k's sums of odd sub-blocks are 16 times theirs (the unshifted high nibbles) */
    SI_HD static float fold(const P &p, const float *xd, const int *xt, const int *S) {
        int sumi[4];
        SI_UNROLL
        for (int j = 0; j < 4; j++)
            sumi[j] = j & 1 ? 16 * S[j] : S[j];
        return U::fold<true>(p.dm, p.sc, p.m, xd, xt, sumi);
    }
};

/* Q5_K: a unit is half h of a 176-byte block (unit() points at the block); A: the 5-bit values
 * 0..31 (tmma_q5_k's words: the nibble plus the high bit), the sums as they are; the float part
 * Q4_K's. */
struct tc_q5_k {
    using U = tqx_q5_k;
    static constexpr int MIN_NB = 6; /* at 5 rows 1.6 % slower than dp4a (s47) */
    static constexpr int NS = 1;
    static constexpr bool AU8 = true;
    using P = tc_q4_k::P;
    SI_HD static const uint8_t *unit(const uint8_t *chunk, int i, int) {
        return chunk + 176 * (i >> 1);
    }
    /* the header is Q4_K's; its params() takes a unit 64 h bytes into the block */
    SI_HD static P params(const uint8_t *unit, int h) { return tc_q4_k::params(unit + 64 * h, h); }
    SI_HD static void frag(const uint8_t *unit, int h, int j, int c, uint32_t &lo, uint32_t &hi) {
        float sa, sb, mn; /* the matmul's float scales: unused here */
        tmma_q5_k::frag(unit, 4 * h + j, c, lo, hi, sa, sb, mn);
    }
    SI_HD static int xterm(int xsum) { return xsum; }
    SI_HD static float fold(const P &p, const float *xd, const int *xt, const int *S) {
        return tqx_q4_k::fold<false>(p.dm, p.sc, p.m, xd, xt, S);
    }
};

/* Q6_K: a unit is half h of a 210-byte block (unit() points at the block, 2-byte aligned); A:
 * q - 32 as int8 (tmma_q6_k's words), two sums a block (each 16 elements has its own int8
 * scale, and scale x (q - 32) does not fit a byte) */
struct tc_q6_k {
    using U = tqx_q6_k;
    static constexpr int MIN_NB = 5;
    static constexpr int NS = 2;
    static constexpr bool AU8 = false;
    struct P {
        uint32_t sc[2];
        uint16_t d;
    };
    SI_HD static const uint8_t *unit(const uint8_t *chunk, int i, int) {
        return chunk + 210 * (i >> 1);
    }
    SI_HD static P params(const uint8_t *unit, int h) {
        P p;
        p.sc[0] = si_ld32(unit + 192 + 8 * h);
        p.sc[1] = si_ld32(unit + 196 + 8 * h);
        p.d = si_ld16(unit + 208);
        return p;
    }
    SI_HD static void frag(const uint8_t *unit, int h, int j, int c, uint32_t &lo, uint32_t &hi) {
        float sa, sb, mn;
        tmma_q6_k::frag(unit, 4 * h + j, c, lo, hi, sa, sb, mn);
    }
    SI_HD static int xterm(int) { return 0; } /* the - 32 is in A */
    SI_HD static float fold(const P &p, const float *xd, const int *xt, const int *S) {
        return fold_add(0.0f, p, xd, xt, S);
    }
    SI_HD static float fold_add(float acc, const P &p, const float *xd, const int *, const int *S) {
        return U::fold(p.sc, p.d, xd, S, acc);
    }
};

/* Q3_K: a unit is half h of a 110-byte block (unit() points at the block, 2-byte aligned); A: the
 * 3-bit values less 4 as int8 (tmma_q3_k's words); Q6_K's sums and float part (int8 scales a
 * 16, one d) */
struct tc_q3_k {
    using U = tqx_q3_k;
    static constexpr int MIN_NB =
        8; /* its fragments cost: 5-6 rows 4-11 % slower than dp4a (s48) */
    static constexpr int NS = 2;
    static constexpr bool AU8 = false;
    using P = tc_q6_k::P;
    SI_HD static const uint8_t *unit(const uint8_t *chunk, int i, int) {
        return chunk + 110 * (i >> 1);
    }
    SI_HD static P params(const uint8_t *unit, int h) {
        P p;
        U::scale_words(unit, h, p.sc);
        p.d = si_ld16(unit + 108);
        return p;
    }
    SI_HD static void frag(const uint8_t *unit, int h, int j, int c, uint32_t &lo, uint32_t &hi) {
        float sa, sb, mn;
        tmma_q3_k::frag(unit, 4 * h + j, c, lo, hi, sa, sb, mn);
    }
    SI_HD static int xterm(int) { return 0; }
    SI_HD static float fold(const P &p, const float *xd, const int *xt, const int *S) {
        return fold_add(0.0f, p, xd, xt, S);
    }
    SI_HD static float fold_add(float acc, const P &p, const float *xd, const int *, const int *S) {
        return tqx_q6_k::fold(p.sc, p.d, xd, S, acc);
    }
};

/* IQ4_XS: a unit is half h of a 136-byte block (unit() points at the block); A: the table values
 * (tmma_iq4_xs's words) */
struct tc_iq4_xs {
    using U = tqx_iq4_xs;
    static constexpr int MIN_NB = 5;
    static constexpr int NS = 1;
    static constexpr bool AU8 = false;
    struct P {
        uint32_t sc;
        uint16_t d;
    };
    SI_HD static const uint8_t *unit(const uint8_t *chunk, int i, int) {
        return chunk + 136 * (i >> 1);
    }
    SI_HD static P params(const uint8_t *unit, int h) {
        const uint32_t hd0 = si_ld32(unit);
        P p;
        p.sc = U::scale_word(hd0, si_ld32(unit + 4), h);
        p.d = (uint16_t)hd0;
        return p;
    }
    SI_HD static void frag(const uint8_t *unit, int h, int j, int c, uint32_t &lo, uint32_t &hi) {
        float sa, sb, mn;
        tmma_iq4_xs::frag(unit, 4 * h + j, c, lo, hi, sa, sb, mn);
    }
    SI_HD static int xterm(int) { return 0; }
    SI_HD static float fold(const P &p, const float *xd, const int *xt, const int *S) {
        return fold_add(0.0f, p, xd, xt, S);
    }
    SI_HD static float fold_add(float acc, const P &p, const float *xd, const int *, const int *S) {
        return U::fold(p.sc, p.d, xd, S, acc);
    }
};

/* Q2_K: a unit is half h of an 84-byte block (unit() points at the block, 4-byte aligned); A: the
 * 2-bit values times their 16's scale (tmma_q2_k's words, at most 45), so one sum a block is
 * tqx_q2_k's sc-weighted sum (a 4^t-th of it); the mins a 16 need the first 16's x sum too
 * (xhalf: packed with the block's) */
struct tc_q2_k {
    using U = tqx_q2_k;
    static constexpr int MIN_NB = 6; /* at 5 rows 7 % slower than dp4a (s48) */
    static constexpr int NS = 1;
    static constexpr bool AU8 = true;
    struct P {
        uint32_t dm;    /* d | dmin << 16 */
        uint32_t mn[2]; /* the 8 sub-blocks' mins, a byte each */
    };
    SI_HD static const uint8_t *unit(const uint8_t *chunk, int i, int) {
        return chunk + 84 * (i >> 1);
    }
    SI_HD static P params(const uint8_t *unit, int h) {
        P p;
        p.dm = si_ld32(unit + 80);
        p.mn[0] = (si_ld32(unit + 8 * h) >> 4) & 0x0F0F0F0Fu;
        p.mn[1] = (si_ld32(unit + 8 * h + 4) >> 4) & 0x0F0F0F0Fu;
        return p;
    }
    SI_HD static void frag(const uint8_t *unit, int h, int j, int c, uint32_t &lo, uint32_t &hi) {
        float sa, sb, mn;
        tmma_q2_k::frag(unit, 4 * h + j, c, lo, hi, sa, sb, mn);
    }
    SI_HD static int xterm(int xsum) { return xsum; }
    /* the block's sum in the low 16 bits, x0 in the high (each within +-32 x 127) */
    SI_HD static int xhalf(int xsum, int x0) {
        return (int)(((uint32_t)x0 << 16) | ((uint32_t)xsum & 0xFFFFu));
    }
    SI_HD static float fold(const P &p, const float *xd, const int *xt, const int *S) {
        const float2 dm = si_h2x2f(p.dm);
        float s = 0.0f;
        SI_UNROLL
        for (int t = 0; t < 4; t++) {
            const int xs = (int16_t)(xt[t] & 0xFFFF), x0 = (int16_t)((uint32_t)xt[t] >> 16);
            s = U::step(s, dm, t, xd[t], S[t] * (1 << (2 * t)), U::msum(p.mn[t >> 1], t, x0, xs));
        }
        return s;
    }
};

/* whether TC adds its float part to a sum itself (fold_add: as U::dot_add, q8x_dot_add) */
template <class TC, class = void> struct tc_has_fold_add : std::false_type {};
template <class TC>
struct tc_has_fold_add<TC, std::void_t<decltype(&TC::fold_add)>> : std::true_type {};

/* the tensor-core type of a q8x unit type (void: none) */
/* whether TC's x terms take the first 16's sum too (xhalf) */
template <class TC, class = void> struct tc_has_xhalf : std::false_type {};
template <class TC> struct tc_has_xhalf<TC, std::void_t<decltype(&TC::xhalf)>> : std::true_type {};

template <class T> struct q8x_tc_of { using type = void; };
template <> struct q8x_tc_of<tqx_q4_0> { using type = tc_q4_0; };
template <> struct q8x_tc_of<tqx_q4_k> { using type = tc_q4_k; };
template <> struct q8x_tc_of<tqx_q5_k> { using type = tc_q5_k; };
template <> struct q8x_tc_of<tqx_q6_k> { using type = tc_q6_k; };
template <> struct q8x_tc_of<tqx_q4_1> { using type = tc_q4_1; };
template <> struct q8x_tc_of<tqx_q5_0> { using type = tc_q5_0; };
template <> struct q8x_tc_of<tqx_q5_1> { using type = tc_q5_1; };
template <> struct q8x_tc_of<tqx_q3_k> { using type = tc_q3_k; };
template <> struct q8x_tc_of<tqx_iq4_nl> { using type = tc_iq4_nl; };
template <> struct q8x_tc_of<tqx_iq4_xs> { using type = tc_iq4_xs; };
template <> struct q8x_tc_of<tqx_q2_k> { using type = tc_q2_k; };

#endif
