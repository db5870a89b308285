/* gemv_q8x_tc.cuh — the q8x GEMV (gemv_q8x.cuh) of every q8x type but Q8_0 for 5-8 rows of x on
 * int8 tensor cores, with the same bits as the q8x kernel (included by gemv_q8x.cuh).
 *
 * Why: at 2-8 rows the dp4a kernel is bound by instruction issue (a 7B token's Q4_0 GEMVs take
 * 2.8 ms at 8 rows against 1.2 ms at 1). Here one mma.m16n8k32 gives the integer sums of a
 * 32-element block for 16 weight rows x 8 rows of x at once; what is left per (weight row, x row,
 * block) is the float part: a convert, a multiply and an fma.
 *
 * Why the same bits: the engine promises that a request decodes to the same tokens alone and in
 * any step of 1-8 rows, and batch 1 runs the dp4a kernel. Its result for one (weight row, x row)
 * is a fixed sequence of roundings: lane l (0..31) of a warp sums, in segment order, the values of
 * units u = 32 seg + l (tqx_*::fold of the unit's blocks), then the warp sums its lanes with
 * the xor butterfly (si_warp_sum): a tree that adds lanes l and l + 16, then l and l + 8, ... The
 * integer block sums are exact in any order, so this kernel takes them from the tensor cores and
 * replays the float sequence: "virtual lane" l's units in segment order through the same fold,
 * then the same tree. Warp w of the CTA owns the virtual lanes w, w + 8, w + 16, w + 24, so the
 * tree's first two levels (offsets 16, 8) are its own and the last three (4, 2, 1) are summed
 * through shared memory by one thread per (weight row, x row).
 *
 * Work: a tile = 16 weight rows (the MMA's M); CTAs walk tiles (persistent grid). A producer
 * warp streams the CTA's tiles in chunks of 16 units (1,152 bytes) of each of the 16 rows through
 * an S-stage ring: one bulk copy (cp.async.bulk) a row, completing on the stage's mbarrier; the
 * 8 consumer warps wait for a stage, take their units (warp w: units w and w + 8 of the chunk)
 * and hand the stage back on a second mbarrier. Fragments (mma.cuh, m16n8k32 8-bit): lane
 * = 4 g + c holds A rows g and g + 8 at k 4c..4c+3 and 16+4c..16+4c+3, B column (x row) g at the
 * same k, C rows g, g + 8 x columns 2c, 2c + 1.
 *
 * Measured on the H200 (bench/RESULTS.md 2026-12-02 s24 and s25; persist_chain, the 129 GEMVs of
 * a Llama-2-7B token, us). Q4_0: 5 rows 2,073 (dp4a) -> 1,779, 6 rows 2,306 -> 1,805, 8 rows
 * 2,808 -> 1,847; Q4_K: 5 rows 2,351 -> 2,152, 6 rows 2,560 -> 2,182, 8 rows 2,916 -> 2,233.
 * Below 5 rows the dp4a kernel wins (the float part costs the same for 1 or 8 columns). The first
 * form (s24) had each warp copy its units in 16-byte cp.async pieces: 8-14 % slower, a third of its
 * instructions the copies. 16 consumer warps where one CTA fits an SM (K = 11008): 1 % slower.
 * Q8_0 built the same way (s24) was no faster than its dp4a kernel at any row count. Q5_K and
 * Q6_K (the K-quant mixtures' other types, s47) take the same kernel; Q6_K's 16-element scales
 * need two mma's a block (gemv_q8x_tc_units.cuh's NS); s48 added Q4_1, Q5_0, Q5_1, Q3_K, IQ4_NL,
 * IQ4_XS and Q2_K (whose mins a 16 take each x block's first 16's sum: one more pass over x).
 *
 * 9-16 rows of x (s50; cuda_gemv_wide_ok in gemv.cu): a second column tile (NC = 2), x rows 8-15
 * as the B columns of a second mma on the same A fragments, so the weights are read and decoded
 * once; each (weight row, x row) has the same float sequence as at 1-8 rows. Its x takes
 * nb (K + 16) bytes of shared memory: 16 rows fit at K = 4096, at K = 11008 10-13 rows by the
 * type's chunk size (Q4_0, Q4_K: 12; Q6_K: 10), at K = 14336 9 rows and, for seven types, 10,
 * with x's scales kept for 10 rows instead of 16 (s52, TC_XS_COMPACT below).
 * Where it does not fit (s51; from 12 rows, gemv.cu's GEMV_PARTS_ROWS_MIN: at 9-11 two launches
 * cost less), x goes through shared memory in parts (2-4, a whole number of chunks each): every CTA
 * runs part 0 of its (at most 2) tiles, loads the next part of x, and so on, each tile's sums held
 * in registers across the parts, so the weights are still read once (s50 read them twice there: two
 * launches, rows 0-7 then 8-15). A part costs a stall: the consumers wait for its x while the ring
 * holds S chunks. */

#include "backend/cuda/gemv_q8x_tc_units.cuh"

/* consumer warps a CTA (and one producer warp): each owns 32 / TC_WARPS virtual lanes */
#define TC_WARPS 8
#define TC_CHUNK 16 /* units a chunk: a whole number of blocks (Q4_0: 16 x 72 = 1,152 bytes) */
#define TC_XPAD 16  /* x row stride K + 16 bytes: the 8 x rows of a B load in distinct banks */

/* A chunk row's bytes (a multiple of 16) and its stride in shared memory: 16 or 32 bytes more
 * (room for the 16-byte words that cover a row starting mid-word), so that rows are an odd
 * multiple of 4 banks apart and lanes (g, c), which read the same offset of rows g at + 4 c, hit
 * distinct banks (Q4_0: 1,168 bytes = 292 words) */
template <class TC> struct tc_chunk {
    static constexpr int BYTES = TC_CHUNK * TC::U::UBYTES;
    static constexpr int ROW = BYTES + (BYTES / 4 % 8 == 0 ? 16 : 32);
    /* rows are whole 16-byte words at any K % 256 == 0 (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q4_K,
     * Q5_K; not the 84-, 110-, 136- and 210-byte blocks of Q2_K, Q3_K, IQ4_XS, Q6_K): no front
     * offsets */
    static constexpr bool ROWS16 = 256 / (32 * TC::U::UB) * TC::U::UBYTES % 16 == 0;
    static_assert(BYTES % 16 == 0 && ROW / 4 % 8 == 4, "chunk rows: whole 16-byte words");
};

/* shared memory: mbarriers full [S], empty [S] | S stages of 16 chunk rows | xq [nb][K + 16] |
 * xd f32 [K/32][XS] | xt i32 [K/32][XS] | red f32 [2][warps][16 XS], where K is the x columns
 * held (the row's, or a part's: tc_part_k) and XS the x rows a transposed x block holds: 8 NC,
 * or TC_XS_COMPACT (below) */
template <class TC> static size_t tc_smem_bytes(int K, int nb, int S, int NC, int XS = 0) {
    XS = XS ? XS : 8 * NC;
    return (size_t)16 * S + (size_t)S * 16 * tc_chunk<TC>::ROW + (size_t)nb * (K + TC_XPAD) +
           (size_t)(K / 32) * XS * 8 + 2 * TC_WARPS * 16 * XS * 4;
}

/* 9-10 rows whose x does not fit whole beside 16-row scales (K = 14336) may fit beside 10-row
 * ones: xd, xt and red with rows of TC_XS_COMPACT x rows, not 16 (Q4_0 at K = 14336: 9 rows at 3
 * stages, 10 at 2), so that x is whole, in one launch, not in parts or two launches. The 16-row
 * kernels stay as they were where they fit (the same PTX). Measured on the H200 (bench/RESULTS.md
 * s52, Llama-3-8B Q4_0, all-decoding t/s, two launches -> x whole): 9 requests 2,379 -> 2,512,
 * 10 requests 2,398 -> 2,736.
 * Knob SI_CUDA_GEMV_TC_COMPACT (read at the first call): 0, never (9-10 rows at K = 14336 take two
 * launches again); 1, every 9-10-row launch whose x fits whole takes the compact scales (for the
 * tests: the compact kernel on small shapes, under the sanitizers); unset, where 16 do not fit. */
#define TC_XS_COMPACT 10
static int gemv_q8x_tc_compact_knob(void) {
    static int knob = -2;
    if (knob == -2) {
        const char *e = getenv("SI_CUDA_GEMV_TC_COMPACT");
        knob = e ? (atoi(e) != 0) : -1;
    }
    return knob;
}
/* which x-scale rows a launch of nb rows may take: 16 (8 NC), compact, both (16 first) */
static bool tc_xs_full_ok(int nb) {
    return nb <= 8 || nb > TC_XS_COMPACT || gemv_q8x_tc_compact_knob() != 1;
}
static bool tc_xs_compact_ok(int nb) {
    return nb > 8 && nb <= TC_XS_COMPACT && gemv_q8x_tc_compact_knob() != 0;
}

/* S: stages of the chunk ring; NC: column tiles, 8 rows of x each (1: 1-8 rows, 2: 9-16: each A
 * fragment goes through two mma's, one a tile). MT: 1, the CTA walks its tiles (persistent grid)
 * with all of x in shared memory (cpp = the row's chunks); else x in parts of cpp chunks, each
 * part in shared memory in turn, and the CTA's at most MT tiles (blockIdx.x + j gridDim.x) run
 * every part, their sums held in registers across the parts (each virtual lane's float sequence
 * stays the same: the chunks go in order). K % 256 == 0 (the launcher checks); rows start
 * 2-aligned. */
template <class TC, int S, int XIN, int NC, int MT, int XS = 8 * NC>
__global__ void __launch_bounds__((TC_WARPS + 1) * 32)
    gemv_q8x_tc_kernel(const uint8_t *__restrict__ W, int M, int K, size_t row_bytes,
                       const float *__restrict__ x, int nb, float *__restrict__ y, int cpp) {
    using U = typename TC::U;
    constexpr int V = 32 / TC_WARPS, UB = U::UB, NS = TC::NS;
    constexpr int XMAX = 8 * NC; /* x rows of the column tiles; XS of them held (nb <= XS) */
    static_assert(XS % 2 == 0 && XS > XMAX - 8 && XS <= XMAX, "XS: an 8-byte load, two columns");
    constexpr int CB = tc_chunk<TC>::BYTES, ROW = tc_chunk<TC>::ROW, CBLK = TC_CHUNK * UB;
    constexpr bool ROWS16 = tc_chunk<TC>::ROWS16;
    static_assert(TC_WARPS == 8, "a warp's units: w + 8 i of a segment");
    extern __shared__ __align__(16) uint8_t smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = lane & 3;
    const int half = warp & 1; /* of the blocks, for half-block units: virtual lanes warp + 8 i */
    const int units = K / (32 * UB), nblk = K / 32, nch = (units + TC_CHUNK - 1) / TC_CHUNK;
    const int ntiles = (M + 15) / 16, nparts = MT == 1 ? 1 : (nch + cpp - 1) / cpp;
    const int xrow = MT == 1 ? K + TC_XPAD : 32 * min(nblk, cpp * CBLK) + TC_XPAD; /* a part's */
    uint64_t *full = (uint64_t *)smem, *empty = full + S;
    uint8_t *stages = smem + 16 * S;
    uint8_t *xq = stages + (size_t)S * 16 * ROW;
    float *xd = (float *)(xq + (size_t)nb * xrow);
    const int xblk = MT == 1 ? nblk : xrow / 32; /* x blocks shared memory holds */
    int *xt = (int *)(xd + (size_t)xblk * XS);
    float *red = (float *)(xt + (size_t)xblk * XS);
    if (threadIdx.x == 0)
        for (int s = 0; s < S; s++) {
            si_mbar_init(full + s, 1);
            si_mbar_init(empty + s, TC_WARPS);
        }
    __syncthreads();

    if (warp == TC_WARPS) {
        /* the producer: for each part, for each of the CTA's tiles, chunks q of the part in order,
         * one bulk copy a row (rows past M repeat the last row) of the 16-byte words that cover it
         * (rows of Q6_K's odd block counts start 2-14 bytes into a word: row_front); weights,
         * which no kernel writes, from before the PDL wait */
        si_pdl_trigger();
        int it = 0;
        for (int part = 0; part < nparts; part++)
            for (int t = blockIdx.x, j = 0; t < ntiles && (MT == 1 || j < MT); t += gridDim.x, j++)
                for (int q = MT == 1 ? 0 : part * cpp;
                     q < (MT == 1 ? nch : min(nch, (part + 1) * cpp)); q++, it++) {
                    const int s = it % S;
                    if (it >= S) si_mbar_wait(empty + s, (it / S - 1) & 1);
                    const uint32_t bytes = (uint32_t)min((size_t)CB, row_bytes - (size_t)q * CB);
                    const size_t src =
                        (size_t)min(16 * t + lane, M - 1) * row_bytes + (size_t)q * CB;
                    const uint32_t front = ROWS16 ? 0u : (uint32_t)src & 15;
                    const uint32_t span = ROWS16 ? bytes : (front + bytes + 15) & ~15u;
                    const uint32_t total =
                        ROWS16 ? 16 * bytes : __reduce_add_sync(0xffffffffu, lane < 16 ? span : 0u);
                    if (lane == 0) si_mbar_expect_tx(full + s, total);
                    __syncwarp();
                    if (lane < 16)
                        si_bulk_copy(stages + ((size_t)s * 16 + lane) * ROW, W + (src - front),
                                     span, full + s);
                }
        return; /* every copy issued is waited for by the consumers */
    }
    si_pdl_trigger();
    si_pdl_wait();

    /* the consumers: for each part of x (MT 1: x whole), x into shared memory, then each of the
     * CTA's tiles' chunks of the part; a tile's sums are finished after the last part */
    constexpr int NT = TC_WARPS * 32;
    static_assert(16 * XMAX <= NT, "one consumer thread a (weight row, x row) of a tile");
    const uint8_t *xg[NC]; /* this lane's B column of each tile: x row 8 n + g */
#pragma unroll
    for (int n = 0; n < NC; n++)
        xg[n] = xq + (size_t)min(8 * n + g, nb - 1) * xrow;
    /* where row r's staged chunk starts in its stage row (the producer's front) */
    auto row_front = [&](int r) {
        return ROWS16 ? 0 : (int)(((size_t)min(r, M - 1) * row_bytes) & 15);
    };
    /* virtual lane warp + 8 i's sums of tile j: rows g, g + 8 x columns 8 n + 2c, 8 n + 2c + 1 */
    float p[MT][V][NC][4];
    int it = 0, buf = 0;
    for (int part = 0; part < nparts; part++) {
        const int ch0 = MT == 1 ? 0 : part * cpp, ch1 = MT == 1 ? nch : min(nch, ch0 + cpp);
        const int b0 = ch0 * CBLK, xn = MT == 1 ? nblk : min(nblk, ch1 * CBLK) - b0; /* its x */
        if (part > 0) si_bar_sync_n(1, NT); /* every consumer is done with the last part */
        /* x blocks [b0, b0 + xn): q8 rows [nb][xrow]; scales and x terms of the sums transposed
         * to [block - b0][x row] (one 8-byte load gives a lane its two columns') */
        if (XIN == Q8X_PRE) { /* CUDA_Q8X_ROW_BYTES layout: K q, K/32 f32 d, K/32 i32 sums */
            const uint8_t *xg = (const uint8_t *)x;
            const size_t rs = CUDA_Q8X_ROW_BYTES(K);
            const int qc = MT == 1 ? K / 16 : 2 * xn; /* 16-byte pieces */
            for (int b = 0; b < nb; b++)
                for (int j = threadIdx.x; j < qc; j += NT)
                    si_cp_async16(xq + (size_t)b * xrow + 16 * j,
                                  xg + b * rs + 32 * (size_t)b0 + 16 * (size_t)j);
            si_cp_async_commit();
            /* the scales and sums transposed through registers, all x rows' in flight at once
             * (one load after another would cost an L2 round trip each) */
            for (int j = threadIdx.x; j < xn; j += NT) {
                float dv[XMAX];
                int sv[XMAX];
#pragma unroll
                for (int b = 0; b < XMAX; b++) {
                    const uint8_t *r = xg + b * rs + K;
                    if (b < nb) {
                        dv[b] = __ldg((const float *)r + b0 + j);
                        sv[b] = __ldg((const int *)(r + 4 * (size_t)nblk) + b0 + j);
                    }
                }
#pragma unroll
                for (int b = 0; b < XMAX; b++)
                    if (b < nb) {
                        xd[XS * j + b] = dv[b];
                        xt[XS * j + b] = TC::xterm(sv[b]);
                    }
            }
            si_cp_async_wait<0>();
        } else {
            q8x_quantize_x<TC_WARPS>(
                x + 32 * (size_t)b0, MT == 1 ? K : 32 * xn, nb, []() {},
                [&](int bi, int bb, int sub, uint32_t q, float d, int sum) {
                    *(uint32_t *)(xq + (size_t)bi * xrow + 32 * bb + 4 * sub) = q;
                    if (sub == 0) {
                        xd[XS * bb + bi] = d;
                        xt[XS * bb + bi] = TC::xterm(sum);
                    }
                },
                MT == 1 ? 0 : K); /* x's rows are K apart */
        }
        if constexpr (tc_has_xhalf<TC>::value) { /* each x block's first 16's sum beside it */
            si_bar_sync_n(1, NT);
            for (int i = threadIdx.x; i < nb * xn; i += NT) {
                const int bi = i / xn, bb = i % xn;
                const int *q = (const int *)(xq + (size_t)bi * xrow + 32 * bb);
                int x0 = 0;
#pragma unroll
                for (int k = 0; k < 4; k++)
                    x0 = si_dp4a(q[k], 0x01010101, x0);
                xt[XS * bb + bi] = TC::xhalf(xt[XS * bb + bi], x0);
            }
        }
        si_bar_sync_n(1, NT); /* the consumers: x is in */

        /* MT 1: tiles t0 in turn; else t0 = blockIdx.x only, its j the CTA's tiles */
        for (int t0 = blockIdx.x; t0 < ntiles; t0 += MT * gridDim.x)
#pragma unroll
            for (int jt = 0; jt < MT; jt++) {
                const int t = t0 + jt * gridDim.x;
                if (t >= ntiles) break; /* CTA-uniform */
                const int front0 = row_front(16 * t + g), front1 = row_front(16 * t + g + 8);
                if (part == 0)
#pragma unroll
                    for (int i = 0; i < V; i++)
#pragma unroll
                        for (int n = 0; n < NC; n++)
#pragma unroll
                            for (int q = 0; q < 4; q++)
                                p[jt][i][n][q] = 0.0f;
                for (int ch = ch0; ch < ch1; ch++, it++) {
                    const int s = it % S;
                    si_mbar_wait(full + s, (it / S) & 1);
                    const uint8_t *st = stages + (size_t)s * 16 * ROW;
#pragma unroll
                    for (int k = 0; k < TC_CHUNK / TC_WARPS; k++) { /* units warp, warp + 8 */
                        const int u = TC_CHUNK * ch + warp + TC_WARPS * k;
                        if (u >= units) break; /* warp-uniform; the unit after it is out too */
                        const uint8_t *r0 =
                            TC::unit(st + g * ROW + front0, warp + TC_WARPS * k, half);
                        const uint8_t *r1 =
                            TC::unit(st + (g + 8) * ROW + front1, warp + TC_WARPS * k, half);
                        /* C of tile n: (g, 2c), (g, 2c + 1), (g + 8, 2c), (g + 8, 2c + 1) */
                        int acc[NC][NS * UB][4];
                        float xd0[NC][UB], xd1[NC][UB];
                        int xt0[NC][UB], xt1[NC][UB];
#pragma unroll
                        for (int j = 0; j < UB; j++) {
                            const int blk = u * UB + j - b0; /* in the part */
                            uint32_t lo0, hi0, lo1, hi1;
                            TC::frag(r0, half, j, c, lo0, hi0);
                            TC::frag(r1, half, j, c, lo1, hi1);
#pragma unroll
                            for (int n = 0; n < NC; n++) {
                                const uint8_t *xb = xg[n] + 32 * blk + 4 * c;
                                const uint32_t b0w = *(const uint32_t *)xb;
                                const uint32_t b1w = *(const uint32_t *)(xb + 16);
                                if constexpr (NS == 1) {
                                    si_mma_i8<TC::AU8>(acc[n][j], lo0, lo1, hi0, hi1, b0w, b1w);
                                } else { /* each 16's sum: the other half's A words zero */
                                    si_mma_i8<TC::AU8>(acc[n][2 * j], lo0, lo1, 0u, 0u, b0w, b1w);
                                    si_mma_i8<TC::AU8>(acc[n][2 * j + 1], 0u, 0u, hi0, hi1, b0w,
                                                       b1w);
                                }
                                /* columns past XS (x rows past nb): not held, not stored */
                                const bool held = XS == XMAX || n == 0 || 8 * n + 2 * c < XS;
                                const float2 d2 =
                                    held ? *(const float2 *)(xd + XS * blk + 8 * n + 2 * c)
                                         : make_float2(0.0f, 0.0f);
                                const int2 t2 = held
                                                    ? *(const int2 *)(xt + XS * blk + 8 * n + 2 * c)
                                                    : make_int2(0, 0);
                                xd0[n][j] = d2.x, xd1[n][j] = d2.y;
                                xt0[n][j] = t2.x, xt1[n][j] = t2.y;
                            }
                        }
                        const typename TC::P pr0 = TC::params(r0, half), pr1 = TC::params(r1, half);
                        /* into its virtual lane's sums (selected, so that p stays in registers),
                         * as the dp4a kernel adds a unit's dot (fold_add where the type has one) */
                        const int vi = (TC_CHUNK / TC_WARPS) * (ch & 1) + k;
                        float val[NC][4]; /* with fold_add: the lane's sums */
                        constexpr bool ADD = tc_has_fold_add<TC>::value;
#pragma unroll
                        for (int n = 0; n < NC; n++)
#pragma unroll
                            for (int q = 0; q < 4; q++)
                                val[n][q] = 0.0f;
                        if constexpr (ADD)
#pragma unroll
                            for (int i = 0; i < V; i++)
                                if (i == vi)
#pragma unroll
                                    for (int n = 0; n < NC; n++)
#pragma unroll
                                        for (int q = 0; q < 4; q++)
                                            val[n][q] = p[jt][i][n][q];
#pragma unroll
                        for (int n = 0; n < NC; n++)
#pragma unroll
                            for (int q = 0; q < 4; q++) {
                                int sums[NS * UB];
#pragma unroll
                                for (int j = 0; j < NS * UB; j++)
                                    sums[j] = acc[n][j][q];
                                const typename TC::P &pr = q < 2 ? pr0 : pr1;
                                const float *xdq = q & 1 ? xd1[n] : xd0[n];
                                const int *xtq = q & 1 ? xt1[n] : xt0[n];
                                if constexpr (ADD)
                                    val[n][q] = TC::fold_add(val[n][q], pr, xdq, xtq, sums);
                                else
                                    val[n][q] = TC::fold(pr, xdq, xtq, sums);
                            }
#pragma unroll
                        for (int i = 0; i < V; i++)
                            if (i == vi)
#pragma unroll
                                for (int n = 0; n < NC; n++)
#pragma unroll
                                    for (int q = 0; q < 4; q++)
                                        p[jt][i][n][q] =
                                            ADD ? val[n][q] : p[jt][i][n][q] + val[n][q];
                    }
                    __syncwarp();
                    if (lane == 0) si_mbar_arrive(empty + s); /* this warp is done with the stage */
                }
                if (part < nparts - 1) continue; /* the tile's sums go on in the next part */
                    /* the butterfly's offsets 16 and 8 (virtual lanes i and i + V / 2, ...), here
                     */
#pragma unroll
                for (int h = V / 2; h >= 1; h /= 2)
#pragma unroll
                    for (int i = 0; i < h; i++)
#pragma unroll
                        for (int n = 0; n < NC; n++)
#pragma unroll
                            for (int q = 0; q < 4; q++)
                                p[jt][i][n][q] += p[jt][i + h][n][q];
                /* red: [warp][weight row 0..15][x row 0..XS-1] */
                float *rb = red + ((size_t)buf * TC_WARPS + warp) * 16 * XS;
#pragma unroll
                for (int n = 0; n < NC; n++) {
                    if (XS < XMAX && n > 0 && 8 * n + 2 * c >= XS) break;
                    rb[XS * g + 8 * n + 2 * c] = p[jt][0][n][0];
                    rb[XS * g + 8 * n + 2 * c + 1] = p[jt][0][n][1];
                    rb[XS * (g + 8) + 8 * n + 2 * c] = p[jt][0][n][2];
                    rb[XS * (g + 8) + 8 * n + 2 * c + 1] = p[jt][0][n][3];
                }
                /* one barrier a tile: red is double-buffered, and tile t's sums are read before
                 * any thread passes tile t + 1's barrier */
                si_bar_sync_n(1, NT);
                if (threadIdx.x < 16 * XS) { /* offsets 4, 2, 1 across the warps; (row, x row) */
                    const int row = threadIdx.x / XS, xr = threadIdx.x % XS;
                    float v[TC_WARPS];
                    rb = red + (size_t)buf * TC_WARPS * 16 * XS;
#pragma unroll
                    for (int w = 0; w < TC_WARPS; w++)
                        v[w] = rb[w * 16 * XS + threadIdx.x];
#pragma unroll
                    for (int h = TC_WARPS / 2; h >= 1; h /= 2)
#pragma unroll
                        for (int i = 0; i < h; i++)
                            v[i] += v[i + h];
                    if (xr < nb && 16 * t + row < M) y[(size_t)xr * M + 16 * t + row] = v[0];
                }
                buf ^= 1;
            }
    }
}

/* From how many rows of x a type's tensor-core kernel runs (TC::MIN_NB, 2-8); timing knob
 * SI_CUDA_GEMV_Q8X_TC=n for every type (read at the first call), 9: never. */
template <class TC> static int gemv_q8x_tc_min_nb() {
    static int knob = -1;
    if (knob < 0) {
        const char *e = getenv("SI_CUDA_GEMV_Q8X_TC");
        knob = e && atoi(e) > 0 ? atoi(e) : 0;
    }
    return knob ? knob : TC::MIN_NB;
}

/* 9-16 rows whose x does not fit in shared memory whole (K = 11008 past 10-13 rows, K = 14336)
 * can take it in parts, at most TC_PARTS_MOST; a CTA then holds the sums of at most TC_PART_TILES
 * tiles (the launcher adds CTAs past one an SM where 2 tiles each would not cover M) */
#define TC_PARTS_MOST 4
#define TC_PART_TILES 2

/* Knob SI_CUDA_GEMV_TC_PARTS=n (read at the first call): 1, x is never taken in parts (9-16 rows
 * whose x does not fit whole take two launches, s50's way); n = 2-4, every 9-16-row launch takes
 * x in parts, n or the fewest more that fit, 2 tiles a CTA, however small the shape (for the
 * tests: the parted path on small shapes, under the sanitizers); unset or 0: parts where x does
 * not fit whole. */
static int gemv_q8x_tc_parts_knob(void) {
    static int knob = -1;
    if (knob < 0) {
        const char *e = getenv("SI_CUDA_GEMV_TC_PARTS");
        knob = e ? max(0, min(TC_PARTS_MOST, atoi(e))) : 0;
    }
    return knob;
}

/* x's bytes of shared memory at cpp chunks a part (the row's chunks: all of it) */
template <class TC> static int tc_part_k(int K, int cpp) {
    return 32 * min(K / 32, cpp * TC_CHUNK * TC::U::UB);
}
template <class TC> static int tc_chunks(int K) {
    return si_div_up(K / (32 * TC::U::UB), TC_CHUNK);
}

/* Whether a launch of nb rows (1-16) has the shared memory for its stages (2 at the least), all of
 * x and the reductions at K (9-10 rows: with the compact scales if need be) */
template <class TC> static bool gemv_q8x_tc_fits(int K, int nb) {
    int smem_optin, n_sm;
    q8x_device(&smem_optin, &n_sm);
    return (tc_xs_full_ok(nb) &&
            tc_smem_bytes<TC>(K, nb, 2, nb > 8 ? 2 : 1) <= (size_t)smem_optin) ||
           (tc_xs_compact_ok(nb) &&
            tc_smem_bytes<TC>(K, nb, 2, 2, TC_XS_COMPACT) <= (size_t)smem_optin);
}

/* Whether 9-16 rows can take x in parts (the most, at 2 stages) where it does not fit whole */
template <class TC> static bool gemv_q8x_tc_parts_fit(int K, int nb) {
    int smem_optin, n_sm;
    q8x_device(&smem_optin, &n_sm);
    const int cpp = si_div_up(tc_chunks<TC>(K), TC_PARTS_MOST);
    return nb > 8 && gemv_q8x_tc_parts_knob() != 1 &&
           tc_smem_bytes<TC>(tc_part_k<TC>(K, cpp), nb, 2, 2) <= (size_t)smem_optin;
}

/* 9-16 rows in one launch (NC = 2); timing knob SI_CUDA_GEMV_TC16=0: never (cuda_gemv then
 * splits them in two launches; read at the first call) */
static bool gemv_q8x_tc16_on(void) {
    static const bool on = !si_env_off("SI_CUDA_GEMV_TC16");
    return on;
}

/* one launch at S stages, x in parts of cpp chunks (MT 1: x whole, cpp its chunks), its scales
 * in rows of XS x rows; -1 where the shared memory is short. packed: MT tiles a CTA where they
 * can be (the knob's test shapes). */
template <class TC, int S, int XIN, int NC, int MT, int XS = 8 * NC>
static int gemv_q8x_tc_launch_s(const void *W, int M, int K, const float *x, int nb, float *y,
                                cudaStream_t st, int cpp, bool packed) {
    using U = typename TC::U;
    void (*kernel)(const uint8_t *, int, int, size_t, const float *, int, float *, int) =
        gemv_q8x_tc_kernel<TC, S, XIN, NC, MT, XS>;
    if (nb > XS) return -1;
    int smem_optin, n_sm;
    q8x_device(&smem_optin, &n_sm);
    static bool attr_set = false; /* per instance: the attribute is per kernel */
    if (!attr_set) {
        CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_optin));
        attr_set = true;
    }
    const size_t smem = tc_smem_bytes<TC>(tc_part_k<TC>(K, cpp), nb, S, NC, XS);
    if (smem > (size_t)smem_optin) return -1;
    constexpr int threads = (TC_WARPS + 1) * 32;
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    const int ntiles = (M + 15) / 16;
    int grid = min(ntiles, max(1, per_sm) * n_sm);
    if (MT > 1) grid = packed ? si_div_up(ntiles, MT) : max(grid, si_div_up(ntiles, MT));
    const size_t row_bytes = (size_t)(K / (32 * U::UB)) * U::UBYTES;
    si_launch_pdl(kernel, grid, threads, smem, st, (const uint8_t *)W, M, K, row_bytes, x, nb, y,
                  cpp);
    return 0;
}

/* 3 stages where they fit, else 2 (K = 14336 at 8 rows). K % 256 == 0 (every model's); other
 * shapes take the dp4a kernel. 9-16 rows: x whole where it fits (gemv_q8x_tc_fits; at 9-10 rows
 * with the compact scales where the 16-row ones do not fit), else in the fewest parts that fit
 * (3 stages before 2 at the same count; gemv_q8x_tc_parts_fit). */
template <class TC, int XIN>
static int gemv_q8x_tc_launch(const void *W, int M, int K, const float *x, int nb, float *y,
                              cudaStream_t st) {
    if (!gemv_q8x_ok<typename TC::U>(K) || K % 256 || nb < 1 || nb > 16) return -1;
    const int nch = tc_chunks<TC>(K);
    if (nb > 8) {
        if (!gemv_q8x_tc16_on()) return -1;
        const int knob = gemv_q8x_tc_parts_knob();
        if (knob < 2) {
            if (tc_xs_full_ok(nb) &&
                (gemv_q8x_tc_launch_s<TC, 3, XIN, 2, 1>(W, M, K, x, nb, y, st, nch, false) == 0 ||
                 gemv_q8x_tc_launch_s<TC, 2, XIN, 2, 1>(W, M, K, x, nb, y, st, nch, false) == 0))
                return 0;
            if (tc_xs_compact_ok(nb) && (gemv_q8x_tc_launch_s<TC, 3, XIN, 2, 1, TC_XS_COMPACT>(
                                             W, M, K, x, nb, y, st, nch, false) == 0 ||
                                         gemv_q8x_tc_launch_s<TC, 2, XIN, 2, 1, TC_XS_COMPACT>(
                                             W, M, K, x, nb, y, st, nch, false) == 0))
                return 0;
            if (knob == 1) return -1;
        }
        for (int np = max(2, knob); np <= TC_PARTS_MOST; np++) {
            const int cpp = si_div_up(nch, np);
            if (gemv_q8x_tc_launch_s<TC, 3, XIN, 2, TC_PART_TILES>(W, M, K, x, nb, y, st, cpp,
                                                                   knob >= 2) == 0 ||
                gemv_q8x_tc_launch_s<TC, 2, XIN, 2, TC_PART_TILES>(W, M, K, x, nb, y, st, cpp,
                                                                   knob >= 2) == 0)
                return 0;
        }
        return -1;
    }
    if (gemv_q8x_tc_launch_s<TC, 3, XIN, 1, 1>(W, M, K, x, nb, y, st, nch, false) == 0) return 0;
    return gemv_q8x_tc_launch_s<TC, 2, XIN, 1, 1>(W, M, K, x, nb, y, st, nch, false);
}
