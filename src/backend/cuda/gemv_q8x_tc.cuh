/* gemv_q8x_tc.cuh — the q8x GEMV (gemv_q8x.cuh) of Q4_0 and Q4_K for 5-8 rows of x on int8 tensor
 * cores, with the same bits as the q8x kernel (included by gemv_q8x.cuh).
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
 * Work: a tile = 16 weight rows (the MMA's M); CTAs walk tiles (persistent grid). Each warp
 * streams its units of the tile in items of UI units x 16 rows through an S-stage cp.async ring
 * (each unit copied as 16-byte pieces into a slot of TC_SLOT bytes: the slots of 8 consecutive
 * rows then start in distinct banks). Fragments (PTX ISA, m16n8k32 8-bit): lane
 * = 4 g + c holds A rows g and g + 8 at k 4c..4c+3 and 16+4c..16+4c+3, B column (x row) g at the
 * same k, C rows g, g + 8 x columns 2c, 2c + 1.
 *
 * Measured on the H200 (bench/RESULTS.md 2026-12-02 s24; persist_chain, the 129 GEMVs of a
 * Llama-2-7B token, us): 5 rows 2,073 (dp4a) -> 2,032, 6 rows 2,306 -> 2,051, 7 rows 2,490 ->
 * 2,141, 8 rows 2,808 -> 2,151; at 4 rows the dp4a kernel wins (1,615 against 2,030: the float
 * part is the same for 1 or 8 columns). Q8_0 was built the same way and measured: no faster than its dp4a kernel at any
 * row count (8 rows 3,142 against 3,150-3,252), so it is not here. The kernel is latency-bound
 * (~5 cycles a warp between issues, 1-2 CTAs an SM); Nsight Compute puts a third of its stall
 * samples in the per-CTA staging of x (nb x K bytes a CTA). */

/* The tensor-core side of a q8x unit type U, over a unit staged in a slot (tc_q4_0: at its
 * span's misalignment, tc_q4_k: 16-aligned):
 *   frag(): A words of sub-block j for lane c: k 4c..4c+3 (lo) and 16+4c..16+4c+3 (hi);
 *   P / params(): a row's per-unit numbers that the float part takes (h: the unit's half of
 *     its block, for types of half-block units);
 *   xterm(): what is stored beside x's scale from the sum of x's block (the q8 values);
 *   fold(): U's float part of a unit from the tensor cores' block sums S (of A x), the one
 *     sequence of roundings the dp4a kernel runs (U::fold).
 * PIECE: 0 when a unit is copied as its covering aligned span (16-byte pieces from the span's
 * start); else the unit is PIECES 16-aligned pieces at byte offsets piece_off(h, n) from u UBYTES. */
struct tc_q4_0 {
    using U = tqx_q4_0; /* A: the raw nibbles 0..15; the - 8 is in the x term */
    static constexpr int PIECE = 0, MIN_NB = 5; /* see the top */
    struct P {
        float dw[4];
    };
    __device__ static P params(const uint8_t *unit, int) {
        P p;
#pragma unroll
        for (int j = 0; j < 4; j++) p.dw[j] = si_h2f(si_ld16(unit + 18 * j));
        return p;
    }
    /* A Q4_0 block's byte c packs elements c (low nibble) and c + 16 (high) */
    __device__ static void frag(const uint8_t *unit, int j, int c, uint32_t &lo, uint32_t &hi) {
        const uint32_t w = si_ld32(unit + 18 * j + 2 + 4 * c);
        lo = w & 0x0F0F0F0Fu;
        hi = (w >> 4) & 0x0F0F0F0Fu;
    }
    __device__ static int xterm(int xsum) { return -128 * xsum; }
    /* tqx_q4_0's integer sum: 16 sum(q x) - 128 xs */
    __device__ static float fold(const P &p, const float *xd, const int *xt, const int *S) {
        int is[4];
#pragma unroll
        for (int j = 0; j < 4; j++) is[j] = 16 * S[j] + xt[j];
        return U::fold(p.dw, xd, is);
    }
};

/* Q4_K: a unit (half h of a 144-byte block) is the block's 16-byte header and its 64 bytes of
 * nibbles: pieces 0 (header) and 1..4 in a slot. Sub-blocks 2i and 2i + 1 are the low and high
 * nibbles of bytes 32i..32i+31. */
struct tc_q4_k {
    using U = tqx_q4_k;
    static constexpr int PIECE = 1, PIECES = 5, MIN_NB = 5;
    /* (u >> 1) 144 = u UBYTES - 72 h for a unit u of half h */
    __device__ static int piece_off(int h, int n) { return (n ? 64 * h + 16 * n : 0) - 72 * h; }
    struct P {
        uint32_t dm, sc, m;
    };
    __device__ static P params(const uint8_t *unit, int h) {
        const uint4 hd = *(const uint4 *)unit;
        P p;
        p.dm = hd.x;
        U::scale_min(hd, h, p.sc, p.m);
        return p;
    }
    __device__ static void frag(const uint8_t *unit, int j, int c, uint32_t &lo, uint32_t &hi) {
        const uint8_t *q = unit + 16 + 32 * (j >> 1) + 4 * c;
        const int sh = 4 * (j & 1);
        lo = (*(const uint32_t *)q >> sh) & 0x0F0F0F0Fu;
        hi = (*(const uint32_t *)(q + 16) >> sh) & 0x0F0F0F0Fu;
    }
    __device__ static int xterm(int xsum) { return xsum; }
    /* tqx_q4_k's sums of odd sub-blocks are 16 times theirs (the unshifted high nibbles) */
    __device__ static float fold(const P &p, const float *xd, const int *xt, const int *S) {
        int sumi[4];
#pragma unroll
        for (int j = 0; j < 4; j++) sumi[j] = j & 1 ? 16 * S[j] : S[j];
        return U::fold(p.dm, p.sc, p.m, xd, xt, sumi);
    }
};

/* the tensor-core type of a q8x unit type (void: none) */
template <class T> struct q8x_tc_of { using type = void; };
template <> struct q8x_tc_of<tqx_q4_0> { using type = tc_q4_0; };
template <> struct q8x_tc_of<tqx_q4_k> { using type = tc_q4_k; };

#define TC_WARPS 8 /* warps a CTA: each owns 32 / TC_WARPS virtual lanes */
/* bytes a staged unit of one row: 20 words, so the slots of 8 rows start in distinct banks; a
 * Q4_0 unit (72 bytes) starts 8-aligned: its covering span fits */
#define TC_SLOT 80
#define TC_XPAD 16 /* x row stride K + 16 bytes: the 8 x rows of a B load in distinct banks */

/* shared memory: xq [nb][K + 16] | xd f32 [K/32][8] | xt i32 [K/32][8] | red f32 [2][warps][128]
 * | per warp S stages of UI x 16 slots */
static size_t tc_smem_bytes(int K, int nb, int UI, int S) {
    return (size_t)nb * (K + TC_XPAD) + (size_t)(K / 32) * 8 * 8 + 2 * TC_WARPS * 128 * 4 +
           (size_t)TC_WARPS * S * UI * 16 * TC_SLOT;
}

/* 16-byte pieces a staged unit takes: TC::PIECES, or its covering aligned span (units start
 * U::UBYTES-aligned up to 16: W is 16-aligned) */
template <class TC> __host__ __device__ constexpr int tc_pieces() {
    constexpr int ub = TC::U::UBYTES, al = (ub & -ub) < 16 ? (ub & -ub) : 16;
    if constexpr (TC::PIECE) return TC::PIECES;
    else return (ub + 16 - al + 15) / 16;
}

/* UI: units of a warp's item (of its 32 / TC_WARPS a segment), S: cp.async stages a warp */
template <class TC, int UI, int S, int XIN>
__global__ void __launch_bounds__(TC_WARPS * 32)
    gemv_q8x_tc_kernel(const uint8_t *__restrict__ W, int M, int K, size_t row_bytes,
                       const float *__restrict__ x, int nb, float *__restrict__ y) {
    using U = typename TC::U;
    constexpr int V = 32 / TC_WARPS, PARTS = V / UI, UB = U::UB;
    static_assert(V % UI == 0 && TC_WARPS % 2 == 0, "a warp's units are one half of blocks");
    static_assert(16 * tc_pieces<TC>() <= TC_SLOT, "a unit's pieces fit its slot");
    extern __shared__ __align__(16) uint8_t smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = lane & 3;
    const int half = warp & 1; /* of the blocks, for half-block units: virtual lanes warp + 8 i */
    const int units = K / (32 * UB), nblk = K / 32, nseg = (units + 31) / 32;
    const int ntiles = (M + 15) / 16, xrow = K + TC_XPAD;
    uint8_t *xq = smem;
    float *xd = (float *)(smem + (size_t)nb * xrow);
    int *xt = (int *)(xd + (size_t)nblk * 8);
    float *red = (float *)(xt + (size_t)nblk * 8);
    uint8_t *sw = (uint8_t *)(red + 2 * TC_WARPS * 128) + (size_t)warp * S * UI * 16 * TC_SLOT;

    /* first byte of row r of tile t (rows past M repeat the last row) */
    auto row_src = [&](int t, int r) {
        return (uintptr_t)(W + (size_t)min(16 * t + r, M - 1) * row_bytes);
    };
    /* unit i of part p of segment sg: virtual lane warp + TC_WARPS (p UI + i) */
    auto unit_of = [&](int sg, int p, int i) { return 32 * sg + warp + TC_WARPS * (p * UI + i); };
    /* A warp's items: (tile, segment, part) in that order over the CTA's tiles; the producer
     * runs S - 1 items ahead, one commit group a call (empty past the last item). An item is
     * UI x 16 units of NC 16-byte copies (tc_pieces a unit); this lane's copies are k = lane + 32 m:
     * chunk k % NC of row (k / NC) % 16 of unit k / (16 NC), the same in every item, so only
     * the rows' addresses change, once a tile. */
    constexpr int NC = TC_SLOT / 16, NK = UI * 16 * NC, NM = (NK + 31) / 32;
    int pt = blockIdx.x, psg = 0, pp = 0, ps = 0;
    /* per copy: its row's first byte + its unit's offset in an item, the first unit of an item
     * from which it is past the row (0: no copy), 16 x its chunk, its offset in a stage */
    uintptr_t cp_src[NM];
    int cp_lim[NM], cp_ch[NM], cp_dst[NM];
#pragma unroll
    for (int m = 0; m < NM; m++) {
        const int k = lane + 32 * m, piece = k / NC, i = piece >> 4;
        cp_lim[m] = k < NK ? units - TC_WARPS * i : 0;
        cp_ch[m] = 16 * (k - piece * NC);
        cp_dst[m] = piece * TC_SLOT + cp_ch[m];
    }
    auto set_rows = [&]() {
#pragma unroll
        for (int m = 0; m < NM; m++) {
            const int piece = (lane + 32 * m) / NC;
            cp_src[m] = row_src(pt, piece & 15) + (size_t)(TC_WARPS * (piece >> 4)) * U::UBYTES;
            if constexpr (TC::PIECE) cp_src[m] += TC::piece_off(half, cp_ch[m] / 16);
        }
    };
    if (pt < ntiles) set_rows();
    auto produce = [&]() {
        if (pt < ntiles) {
            uint8_t *stage_p = sw + (size_t)ps * UI * 16 * TC_SLOT;
            const int u0 = unit_of(psg, pp, 0);
            const size_t off = (size_t)u0 * U::UBYTES;
#pragma unroll
            for (int m = 0; m < NM; m++) {
                const uintptr_t s = cp_src[m] + off;
                if constexpr (TC::PIECE) {
                    if (u0 < cp_lim[m] && cp_ch[m] < 16 * TC::PIECES)
                        si_cp_async16(stage_p + cp_dst[m], (const void *)s);
                } else if (u0 < cp_lim[m] && cp_ch[m] < (int)(s & 15) + U::UBYTES) { /* in the span */
                    si_cp_async16(stage_p + cp_dst[m],
                                  (const void *)((s & ~(uintptr_t)15) + cp_ch[m]));
                }
            }
            if (++pp == PARTS) {
                pp = 0;
                if (++psg == nseg) {
                    psg = 0;
                    pt += gridDim.x;
                    if (pt < ntiles) set_rows();
                }
            }
        }
        si_cp_async_commit();
        if (++ps == S) ps = 0;
    };
    /* PDL (pdl.cuh): weights, which no kernel writes, are issued before the wait */
#pragma unroll
    for (int i = 0; i < S - 1; i++)
        produce();
    si_pdl_trigger();
    si_pdl_wait();

    /* x: q8 rows [nb][K + 16]; scales and x terms of the sums transposed to [block][x row] (one
     * 8-byte load gives a lane its two columns') */
    if (XIN == Q8X_PRE) { /* CUDA_Q8X_ROW_BYTES layout: K q, K/32 f32 d, K/32 i32 sums */
        const uint8_t *xg = (const uint8_t *)x;
        const size_t rs = CUDA_Q8X_ROW_BYTES(K);
        const int qc = K / 16;
        for (int b = 0; b < nb; b++)
            for (int j = threadIdx.x; j < qc; j += blockDim.x)
                si_cp_async16(xq + (size_t)b * xrow + 16 * j, xg + b * rs + 16 * (size_t)j);
        si_cp_async_commit();
        /* the scales and sums transposed through registers, all x rows' in flight at once (one
         * load after another would cost an L2 round trip each) */
        for (int j = threadIdx.x; j < nblk; j += blockDim.x) {
            float dv[8];
            int sv[8];
#pragma unroll
            for (int b = 0; b < 8; b++) {
                const uint8_t *r = xg + b * rs + K;
                if (b < nb) {
                    dv[b] = __ldg((const float *)r + j);
                    sv[b] = __ldg((const int *)(r + 4 * (size_t)nblk) + j);
                }
            }
#pragma unroll
            for (int b = 0; b < 8; b++)
                if (b < nb) {
                    xd[8 * j + b] = dv[b];
                    xt[8 * j + b] = TC::xterm(sv[b]);
                }
        }
        si_cp_async_wait<0>(); /* the newest group: the weights issued so far are in too */
    } else {
        q8x_quantize_x(
            x, K, nb, []() {},
            [&](int bi, int bb, int sub, uint32_t q, float d, int sum) {
                *(uint32_t *)(xq + (size_t)bi * xrow + 32 * bb + 4 * sub) = q;
                if (sub == 0) {
                    xd[8 * bb + bi] = d;
                    xt[8 * bb + bi] = TC::xterm(sum);
                }
            });
    }
    __syncthreads();

    const uint8_t *xg = xq + (size_t)min(g, nb - 1) * xrow; /* this lane's B column */
    int stage = 0, buf = 0;
    for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
        [[maybe_unused]] const uint32_t row_g0 = (uint32_t)row_src(t, g),
                                        row_g1 = (uint32_t)row_src(t, g + 8);
        float p[V][4]; /* virtual lane i's sums: rows g, g + 8 x columns 2c, 2c + 1 */
#pragma unroll
        for (int i = 0; i < V; i++)
#pragma unroll
            for (int q = 0; q < 4; q++)
                p[i][q] = 0.0f;
        for (int sg = 0; sg < nseg; sg++) {
#pragma unroll
            for (int part = 0; part < PARTS; part++) {
                produce(); /* into the stage consumed in the previous item */
                si_cp_async_wait<S - 1>();
                __syncwarp();
                const uint8_t *st = sw + (size_t)stage * UI * 16 * TC_SLOT;
#pragma unroll
                for (int i = 0; i < UI; i++) {
                    const int u = unit_of(sg, part, i);
                    if (u >= units) break; /* warp-uniform; the units after it are out too */
                    const uint8_t *r0 = st + (i * 16 + g) * TC_SLOT;
                    const uint8_t *r1 = st + (i * 16 + g + 8) * TC_SLOT;
                    if constexpr (!TC::PIECE) { /* at its span's misalignment */
                        const uint32_t uo = (uint32_t)u * U::UBYTES;
                        r0 += (row_g0 + uo) & 15;
                        r1 += (row_g1 + uo) & 15;
                    }
                    int acc[UB][4]; /* C: (g, 2c), (g, 2c + 1), (g + 8, 2c), (g + 8, 2c + 1) */
                    float xd0[UB], xd1[UB];
                    int xt0[UB], xt1[UB];
#pragma unroll
                    for (int j = 0; j < UB; j++) {
                        const int blk = u * UB + j;
                        const uint32_t b0 = *(const uint32_t *)(xg + 32 * blk + 4 * c);
                        const uint32_t b1 = *(const uint32_t *)(xg + 32 * blk + 16 + 4 * c);
                        uint32_t lo0, hi0, lo1, hi1;
                        TC::frag(r0, j, c, lo0, hi0);
                        TC::frag(r1, j, c, lo1, hi1);
                        si_mma_i8<true>(acc[j], lo0, lo1, hi0, hi1, b0, b1);
                        const float2 d2 = *(const float2 *)(xd + 8 * blk + 2 * c);
                        const int2 t2 = *(const int2 *)(xt + 8 * blk + 2 * c);
                        xd0[j] = d2.x, xd1[j] = d2.y, xt0[j] = t2.x, xt1[j] = t2.y;
                    }
                    const typename TC::P pr0 = TC::params(r0, half), pr1 = TC::params(r1, half);
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        int sums[UB];
#pragma unroll
                        for (int j = 0; j < UB; j++) sums[j] = acc[j][q];
                        p[part * UI + i][q] += TC::fold(q < 2 ? pr0 : pr1, q & 1 ? xd1 : xd0,
                                                        q & 1 ? xt1 : xt0, sums);
                    }
                }
                __syncwarp(); /* this stage is refilled by the next produce() */
                if (++stage == S) stage = 0;
            }
        }
        /* the butterfly's offsets 16 and 8 (virtual lanes i and i + V / 2, ...), here */
#pragma unroll
        for (int h = V / 2; h >= 1; h /= 2)
#pragma unroll
            for (int i = 0; i < h; i++)
#pragma unroll
                for (int q = 0; q < 4; q++)
                    p[i][q] += p[i + h][q];
        float *rb = red + (size_t)buf * TC_WARPS * 128 + warp * 128;
        rb[8 * g + 2 * c] = p[0][0];
        rb[8 * g + 2 * c + 1] = p[0][1];
        rb[8 * (g + 8) + 2 * c] = p[0][2];
        rb[8 * (g + 8) + 2 * c + 1] = p[0][3];
        /* one barrier a tile: red is double-buffered, and tile t's sums are read before any
         * thread passes tile t + 1's barrier */
        __syncthreads();
        if (threadIdx.x < 128) { /* offsets 4, 2, 1 across the warps; (row, x row) */
            const int row = threadIdx.x >> 3, xr = threadIdx.x & 7;
            float v[TC_WARPS];
            rb = red + (size_t)buf * TC_WARPS * 128;
#pragma unroll
            for (int w = 0; w < TC_WARPS; w++)
                v[w] = rb[w * 128 + threadIdx.x];
#pragma unroll
            for (int h = TC_WARPS / 2; h >= 1; h /= 2)
#pragma unroll
                for (int i = 0; i < h; i++)
                    v[i] += v[i + h];
            if (xr < nb && 16 * t + row < M) y[(size_t)xr * M + 16 * t + row] = v[0];
        }
        buf ^= 1;
    }
    si_cp_async_wait<0>(); /* no copy outlives the warp (the trailing groups are empty) */
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

template <class TC, int UI, int S, int XIN>
static int gemv_q8x_tc_launch_us(const void *W, int M, int K, const float *x, int nb, float *y,
                                 cudaStream_t st) {
    using U = typename TC::U;
    void (*kernel)(const uint8_t *, int, int, size_t, const float *, int, float *) =
        gemv_q8x_tc_kernel<TC, UI, S, XIN>;
    int smem_optin, n_sm;
    q8x_device(&smem_optin, &n_sm);
    static bool attr_set = false; /* per instance: the attribute is per kernel */
    if (!attr_set) {
        CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_optin));
        attr_set = true;
    }
    const size_t smem = tc_smem_bytes(K, nb, UI, S);
    if (smem > (size_t)smem_optin) return -1;
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, TC_WARPS * 32, smem));
    const int grid = min((M + 15) / 16, max(1, per_sm) * n_sm);
    const size_t row_bytes = (size_t)(K / (32 * U::UB)) * U::UBYTES;
    si_launch_pdl(kernel, grid, TC_WARPS * 32, smem, st, (const uint8_t *)W, M, K, row_bytes, x, nb,
                  y);
    return 0;
}

/* 2 units an item x 3 stages where they fit, else 2 stages (K = 14336 at 8 rows). Measured
 * against (UI, S) = (2, 2), (2, 4), (4, 2), (4, 3), (1, 2), (1, 4) at 2, 4 and 8 rows (s24 calls 3
 * and 4): (2, 3) best or within 1 % for Q4_0. */
template <class TC, int XIN>
static int gemv_q8x_tc_launch(const void *W, int M, int K, const float *x, int nb, float *y,
                              cudaStream_t st) {
    if (!gemv_q8x_ok<typename TC::U>(K) || nb < 1 || nb > 8) return -1;
    if (gemv_q8x_tc_launch_us<TC, 2, 3, XIN>(W, M, K, x, nb, y, st) == 0) return 0;
    return gemv_q8x_tc_launch_us<TC, 2, 2, XIN>(W, M, K, x, nb, y, st);
}
