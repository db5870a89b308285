/* gemm_q8x_mma.cu — matmul of the quantised types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K-Q6_K,
 * IQ4_NL, IQ4_XS) for MMQ_MIN_ROWS..MMQ_MAX_ROWS activation rows (batched decode, short prefill
 * chunks) on int8 tensor cores, reading every weight byte once per call: cuda_matmul_quant_rows
 * (cuda_ops.h). The path it replaces dequantised the whole weight to f16 scratch and ran cuBLASLt:
 * for Llama-2-7B Q4_0 that is 3.7 GB read + 13.2 GB written + 13.2 GB read per step, ~4.6 ms of
 * dequantisation alone on the H200.
 *
 * Two kernels a call:
 *  1. mmq_quantize_x: x (f32 [nb][K]) to Q8_0 blocks once, into global scratch (it stays in
 *     L2), exactly as gemv_q8x.cuh / gemv_mma.cuh do (q8x_quantize_x itself: d = amax / 127
 *     rounded to fp16, q = round(x / d)), laid out in mma fragment order (below) and padded to
 *     npad = 16, 32, 64 or 128 rows with zero blocks.
 *  2. mmq_kernel: a CTA owns a tile of MMQ_TILE_M = 128 weight rows and a range of K; per
 *     256-element segment of K it stages the tile's weight segments (the covering aligned
 *     16-byte span of each row, as gemv_mma.cuh) and the x segment of all npad rows through an
 *     MMQ_STAGES-deep cp.async ring, then each warp multiplies its 32 weight rows (two m16 tiles,
 *     fragments from gemv_mma.cuh's tmma_* builders) by NT n8 tiles of x with
 *     mma.sync.m16n8k32.s8: the x fragments and scales loaded once serve both m tiles, the weight
 *     fragments built once serve all NT n tiles. NT = 2 up to 16 rows, else 4: 4, 8 or 16
 *     warps (one per 32 weight rows and 32 batch rows).
 *
 * Scales, per 32-block, in f32 as the GEMV kernels apply them: y += sa * (dx * p) (+ mn * dx *
 * sum(q) for the types with a min; Q6_K: sa and sb for its two halves of 16; Q2_K, whose mins
 * are per 16: + mn * (dx * p') with p' the mma of its mins by x, a second mma a block instead of
 * x sums per 16). The int->float of the s32 block sum p costs no conversion instruction (I2F
 * issues at a fraction of the FFMA rate): the mma adds MMQ_BIAS = 0x4B400000 (the bits of 1.5 *
 * 2^23) to its sum, so the s32 result read as a float is exactly 1.5 * 2^23 + p (|p| <= 32 * 128 *
 * 128 < 2^22), and the quantiser stores dC = -dx * 1.5 * 2^23 beside dx (exact: dx has 11
 * significant bits), so that fmaf(dx, f, dC) = dx * p with one rounding. Two FFMAs per output and
 * block in all (four for Q6_K, Q3_K and Q2_K).
 *
 * Split-K: a shape with few 128-row tiles (4096-row matrices: 32) cannot fill the 132 SMs, so
 * S CTAs (a thread-block cluster, Hopper) share a tile, each a contiguous range of segments;
 * they leave their partial tiles in shared memory and each sums a 1/S slice of the tile over the
 * cluster's shared memory (distributed shared memory) in rank order. S depends on M, K and the
 * SM count only (mmq_split), never on the number of rows, so every output element is summed in
 * the same order for any 9..128 rows: a sequence's result does not depend on how many others
 * share its step (above 8 rows; at 1..8 rows cuda_gemv sums in its own order).
 *
 * x fragment layout (scratch), per segment of 256 elements: [n8 tile][block j of 8][lane][2
 * words]: lane 4 g + c holds row 8 tile + g, k 32 j + 4c..+3 and 32 j + 16 + 4c..+3 (the
 * m16n8k32 B fragment; 8-byte loads, a warp's 256 bytes contiguous); then float2 {dx, dC}
 * [j][npad]; then (types with a min) float dx * sum(q) [j][npad].
 *
 * The f16 path (Q4_0; HALF): at 64 rows the int8 kernel above runs at ~130-150 TOP/s on the
 * H200 (ncu, 2026-11-30 s9: 50-77 us for the 7B QKV and gate/up weights), bound by the f32 scale
 * FMAs and fragment building per 32-block, and the 4096-row weights went to dequantise +
 * cuBLASLt, so Q4_0's batched decode step spent 230 us a layer in matmuls. Here each weight is
 * dequantised in registers to f16 (d * q, rounded once; the block scale folded in, so the
 * accumulators need no per-block rescale) and multiplied on f16 tensor cores (mma.m16n8k16, f32
 * accumulation) by x converted to f16 once (mmq_x_half): the numbers of dequantise + cuBLASLt
 * without its copy. Same tiles, stages, split-K and epilogue; a warp holds one m16 tile and
 * eight n8 tiles from 64 rows. The k order inside a 32-block is permuted as the int8 fragments
 * permute it (lane c takes elements 4c..4c+3 and 16+4c..16+4c+3: one 32-bit word of a Q4_0
 * block), A and B alike, so a dot product is unchanged. x layout: mmq_half.cuh; the norm before
 * the QKV and gate/up matmuls writes it itself (cuda_add_rmsnorm_mmq, then
 * cuda_matmul_quant_rows_pre: one kernel fewer each).
 * Measured at 64 rows (test_cuda_kernels --mmq, s9), int8 -> f16: 12288 x 4096 48.7 -> 44.0 us,
 * 22016 x 4096 74.9 -> 69.9, 4096 x 11008 67.0 -> 57.8, 4096 x 4096 31.0 -> 26.5 (1.0-1.7x
 * dequantise + cuBLASLt, which the 4096-row weights took before); 64 x (512 + 128) Q4_0
 * all-decoding 5,083-5,116 -> 5,701-5,739 t/s. Still issue- and latency-bound (ncu: ~0.4-0.6
 * instructions a cycle a scheduler, 16 warps an SM), not at the tensor cores' rate. */
#include <cooperative_groups.h>

#include "backend/cuda/cuda_ops.h"
/* in this order: gemv_mma.cuh (the tmma_* fragment builders) uses gemv_q8x.cuh's quantiser */
#include "backend/cuda/gemv_q8x.cuh"

#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/mmq_half.cuh"
#include "backend/cuda/weight_units.cuh"

namespace cg = cooperative_groups;

/* The row range of cuda_matmul_quant_rows. Below MMQ_MIN_ROWS cuda_gemv reads the weights once
 * per call too and its dp4a / one-m-tile kernels waste less of their work on padding. Above
 * MMQ_MAX_ROWS the caller dequantises and runs cuBLASLt. On paper (H200, Llama-2-7B Q4_0,
 * issue-bound: ~44 instructions to build a warp's 32 rows x 32 k of weight fragments plus ~20
 * per 8 batch rows) this kernel costs ~(44 + 2.5 n) issue slots per 576 weight bytes, i.e. it
 * stays at the HBM rate up to ~32 rows, ~2.6 TB/s of weights at 64 rows, ~1.5 at 128; dequant
 * + cuBLASLt costs ~31 us per 4096x11008 before its GEMM (f16 weights: 4x the bytes), so this
 * kernel wins by 3-5x at 16-64 rows and ~2x at 128; the two meet near 300-500 rows. 128 is
 * also the most one CTA's accumulators hold (one launch reads the weights once). */
#define MMQ_MIN_ROWS 9
#ifndef MMQ_MAX_ROWS
#define MMQ_MAX_ROWS 128
#endif
static_assert(MMQ_MAX_ROWS >= MMQ_MIN_ROWS && MMQ_MAX_ROWS <= 128, "MMQ_MAX_ROWS: 9..128");

/* cp.async stages (segments in flight per CTA, one being multiplied). 2 keeps two CTAs of 64
 * rows on an SM for every type (Q8_0: 2 x 108 KB); 3 needs one CTA per SM. */
#ifndef MMQ_STAGES
#define MMQ_STAGES 2
#endif
static_assert(MMQ_STAGES >= 2, "the split-K partial tile reuses the stage memory");

/* 32-blocks of a segment unrolled together: 2 lets the compiler load the next block's weight
 * fragments while this one's mmas run (no spills: <= 126 registers) */
#ifndef MMQ_UNROLL_J
#define MMQ_UNROLL_J 2
#endif

#define MMQ_TILE_M 128                  /* weight rows per CTA */
#define MMQ_MAX_SPLIT 8                 /* the portable cluster size */
#define MMQ_RED_STRIDE (MMQ_TILE_M + 4) /* floats a batch row of the partial tile (banks) */
#define MMQ_QCHUNK 2048 /* elements of x a quantiser CTA (128 threads) takes per row */
#define MMQ_BIAS 0x4B400000
#define MMQ_BIAS_F 12582912.0f /* 1.5 * 2^23 */

template <class T> struct mmq_min { static constexpr bool v = false; }; /* block min term? */
template <> struct mmq_min<tmma_q4_1> { static constexpr bool v = true; };
template <> struct mmq_min<tmma_q4_k> { static constexpr bool v = true; };
template <> struct mmq_min<tmma_q5_1> { static constexpr bool v = true; };
template <> struct mmq_min<tmma_q5_k> { static constexpr bool v = true; };

/* HALF: the f16 path (the header's last part): x staged as f16, 512 bytes a row a segment */
template <class T, bool HALF = false> struct mmq_layout {
    /* 16-byte words covering one row's segment: exact when SEGB % 16 == 0 (rows are then
     * 16-aligned: row bytes = K / 256 * SEGB), else from a 2-aligned start (Q6_K); the slot is
     * an odd number of words so that the 8 rows of a fragment load fall in distinct banks */
    static constexpr int NC = T::SEGB % 16 == 0 ? T::SEGB / 16 : (T::SEGB + 14 + 15) / 16;
    static constexpr int SEGP = 16 * (NC | 1);
    static constexpr bool MIN = mmq_min<T>::v;
    static constexpr int XB = HALF ? 512 : 256 + 64 + (MIN ? 32 : 0); /* x bytes a row a segment */
};

/* m16 tiles a warp (the kernel says why) */
template <bool HALF> __host__ __device__ static constexpr int mmq_mt() { return HALF ? 1 : 2; }

static inline int mmq_xb(bool min, bool half) { return half ? 512 : 256 + 64 + (min ? 32 : 0); }

/* dx * p from the biased mma result (see the header) */
__device__ __forceinline__ float mmq_dp(float dx, float dc, int biased) {
    return fmaf(dx, __int_as_float(biased), dc);
}

/* ---- the f16 path ---- */

/* Two int8 weights (bytes sel of s8x4: 0x4140 bytes 0 and 1, 0x4342 bytes 2 and 3) times the
 * block scale d, as f16x2 rounded once, as cuda_dequantize_f16 rounds them: byte_perm puts q + 128
 * under the exponent of 1024 (0x64XX is 1024 + XX exactly), the subtraction leaves q exactly. */
__device__ __forceinline__ uint32_t mmq_h2(uint32_t s8x4, uint32_t sel, __half2 d) {
    const uint32_t u = __byte_perm(s8x4 ^ 0x80808080u, 0x64u, sel);
    const __half2 h = __hmul2(__hsub2(*(const __half2 *)&u, __float2half2_rn(1152.0f)), d);
    return *(const uint32_t *)&h;
}

/* x (f32 [nb][K]) to f16 in the f16 path's fragment order (mmq_half.cuh), zero rows up to
 * npad; one thread per 4 elements */
__global__ void __launch_bounds__(256)
    mmq_x_half(const float *__restrict__ x, int K, int nb, int npad, uint8_t *__restrict__ xs) {
    si_pdl_wait(); /* x is the previous kernel's output; the scratch was read by an earlier one */
    si_pdl_trigger();
    const int k4 = K / 4, total = npad * k4;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int row = i / k4, k = 4 * (i - row * k4);
        uint2 v = make_uint2(0u, 0u);
        if (row < nb) {
            const float4 a = *(const float4 *)(x + (size_t)row * K + k);
            v = make_uint2(si_pack_h2(a.x, a.y), si_pack_h2(a.z, a.w));
        }
        *(uint2 *)(xs + mmq_half_offset(row, k, npad)) = v;
    }
}

/* grid (npad, ceil(K / MMQ_QCHUNK)), 128 threads: row blockIdx.x, elements of chunk blockIdx.y.
 * Rows nb..npad-1 get zero blocks (d = 0: they add 0 and are never stored). */
template <bool MIN>
__global__ void __launch_bounds__(128)
    mmq_quantize_x(const float *__restrict__ x, int K, int nb, int npad, uint8_t *__restrict__ xs) {
    const int n = blockIdx.x, k0 = blockIdx.y * MMQ_QCHUNK, kn = min(MMQ_QCHUNK, K - k0);
    const size_t xseg = (size_t)npad * (256 + 64 + (MIN ? 32 : 0));
    const int nt = n >> 3, g = n & 7, b0 = k0 / 32;
    auto store = [&](int, int bb, int sub, uint32_t q, float d, int sum) {
        const int blk = b0 + bb, j = blk & 7;
        uint8_t *sp = xs + (size_t)(blk >> 3) * xseg;
        const size_t qo = ((size_t)(nt * 8 + j) * 32 + 4 * g + (sub & 3)) * 8 + 4 * (sub >> 2);
        *(uint32_t *)(sp + qo) = q;
        if (sub == 0) {
            *(float2 *)(sp + (size_t)npad * 256 + ((size_t)j * npad + n) * 8) =
                make_float2(d, -d * MMQ_BIAS_F);
            if (MIN)
                *(float *)(sp + (size_t)npad * 320 + ((size_t)j * npad + n) * 4) = d * (float)sum;
        }
    };
    si_pdl_wait(); /* x is the previous kernel's output; the scratch was read by an earlier one */
    si_pdl_trigger();
    if (n >= nb) {
        for (int i = threadIdx.x; i < kn / 4; i += blockDim.x)
            store(0, i >> 3, i & 7, 0u, 0.0f, 0);
        return;
    }
    auto issued = [] {}; /* no copies to overlap with */
    q8x_quantize_x(x + (size_t)n * K + k0, kn, 1, issued, store);
}

/* grid (S, ceil(M / MMQ_TILE_M)), 32 * (MMQ_TILE_M / (16 MT)) * npad / (8 NT) threads (128 to
 * 512); S > 1:
 * launched as clusters of (S, 1, 1). W: GGUF rows of row_bytes = nseg * T::SEGB; xs: the
 * quantiser's layout for npad rows; y: f32 [nb][M]. Registers: at most 128 (80-126 with NT <= 4,
 * no spills), so two CTAs of 256 threads fit an SM, as their shared memory does. */
template <class T, int NT, bool HALF>
__global__ void __launch_bounds__(512, 1)
    mmq_kernel(const uint8_t *__restrict__ W, int M, int nseg, size_t row_bytes,
               const uint8_t *__restrict__ xs, int npad, int nb, float *__restrict__ y) {
    using L = mmq_layout<T, HALF>;
    constexpr int SEGP = L::SEGP, NC = L::NC, SEGB = T::SEGB, STW = MMQ_TILE_M * SEGP;
    constexpr int UJ = MMQ_UNROLL_J; /* (a macro is not expanded in the pragma) */
    constexpr bool M16 = mma_min16<T>::v; /* Q2_K: a min per 16 weights (gemv_mma_units.cuh) */
    extern __shared__ __align__(16) uint8_t smem[];
    const int tid = threadIdx.x, nthr = blockDim.x, warp = tid / 32, lane = tid % 32;
    /* m16 tiles a warp: 2 (32 rows, 4 warps along M) on the int8 path, whose fragments cost more
     * than its mmas; 1 (16 rows, 8 warps) on the f16 path: twice the warps a CTA, each weight
     * still dequantised once up to 64 rows (ncu: 2 warps a scheduler left it latency-bound) */
    constexpr int MT = mmq_mt<HALF>(), WM = MMQ_TILE_M / (16 * MT);
    const int g = lane >> 2, c = lane & 3, wm = warp % WM, wn = warp / WM;
    const int S = gridDim.x, rank = blockIdx.x, m0 = blockIdx.y * MMQ_TILE_M;
    const int sg0 = (int)((long long)nseg * rank / S),
              sg1 = (int)((long long)nseg * (rank + 1) / S);
    const int xseg = npad * L::XB, stb = STW + xseg;
    /* this warp's n8 tiles that hold a batch row < nb (warp-uniform) */
    const int ntl = min(NT, max(0, (nb + 7) / 8 - wn * NT));

    auto row_src = [&](int r, int sg) {
        return (uintptr_t)(W + (size_t)min(m0 + r, M - 1) * row_bytes + (size_t)sg * SEGB);
    };
    /* the producer: the weight segments of the tile's rows (rows past M repeat the last row)
     * and the x segment into stage pst; one commit group per call (empty past the range) */
    int pw = sg0, px = sg0, pst = 0;
    auto produce_w = [&]() {
        if (pw < sg1) {
            uint8_t *dst = smem + (size_t)pst * stb;
            for (int i = tid; i < MMQ_TILE_M * NC; i += nthr) {
                const int r = i / NC, k = i - r * NC;
                const uintptr_t s = row_src(r, pw), a0 = s & ~(uintptr_t)15;
                if (a0 + 16 * k < s + SEGB)
                    si_cp_async16(dst + r * SEGP + 16 * k, (const void *)(a0 + 16 * k));
            }
        }
        pw++;
    };
    auto produce_x = [&]() {
        if (px < sg1) {
            uint8_t *dst = smem + (size_t)pst * stb + STW;
            const uint8_t *src = xs + (size_t)px * xseg;
            for (int i = tid; i < xseg / 16; i += nthr)
                si_cp_async16(dst + 16 * i, src + 16 * i);
        }
        px++;
        si_cp_async_commit();
        if (++pst == MMQ_STAGES) pst = 0;
    };

    /* the weights of the first stages are read before waiting for the kernel before (PDL: they
     * are written by none); x and y only after it */
    {
        const int pst0 = pst;
#pragma unroll
        for (int i = 0; i < MMQ_STAGES - 1; i++) {
            produce_w();
            if (++pst == MMQ_STAGES) pst = 0;
        }
        pst = pst0;
    }
    si_pdl_wait();
#pragma unroll
    for (int i = 0; i < MMQ_STAGES - 1; i++)
        produce_x();

    float acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[mt][nt][e] = 0.0f;

    int st = 0;
    for (int sg = sg0; sg < sg1; sg++) {
        produce_w(); /* into the stage consumed in the previous iteration */
        produce_x();
        si_cp_async_wait<MMQ_STAGES - 1>();
        __syncthreads();
        const uint8_t *sw = smem + (size_t)st * stb, *sx = sw + STW;
        const uint8_t *rp[MT][2]; /* rows g and g + 8 of this warp's m tiles */
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = 16 * MT * wm + 16 * mt + 8 * h + g;
                rp[mt][h] = sw + r * SEGP + (row_src(r, sg) & 15);
            }
        if constexpr (HALF) {
            /* this warp's x: + (8 nt + j) * 512 */
            const uint8_t *xh = sx + ((size_t)wn * NT * 256 + lane) * 16;
#pragma unroll UJ
            for (int j = 0; j < 8; j++) {
                /* [m tile][row g, g + 8][k 4c, 4c + 2, 16 + 4c, 16 + 4c + 2 (pairs)] as f16 */
                uint32_t a[MT][2][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        uint32_t lo, hi;
                        float sa, sb, mn;
                        T::frag(rp[mt][h], j, c, lo, hi, sa, sb, mn);
                        const __half2 d = __float2half2_rn(sa); /* an f16 value: exact */
                        a[mt][h][0] = mmq_h2(lo, 0x4140u, d);
                        a[mt][h][1] = mmq_h2(lo, 0x4342u, d);
                        a[mt][h][2] = mmq_h2(hi, 0x4140u, d);
                        a[mt][h][3] = mmq_h2(hi, 0x4342u, d);
                    }
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    if (nt < ntl) {
                        const uint4 b = *(const uint4 *)(xh + (size_t)(8 * nt + j) * 512);
#pragma unroll
                        for (int mt = 0; mt < MT; mt++) {
                            si_mma_h16(acc[mt][nt], a[mt][0][0], a[mt][1][0], a[mt][0][1],
                                       a[mt][1][1], b.x, b.y);
                            si_mma_h16(acc[mt][nt], a[mt][0][2], a[mt][1][2], a[mt][0][3],
                                       a[mt][1][3], b.z, b.w);
                        }
                    }
                }
            }
        } else {
            const uint8_t *xb = sx + (size_t)(wn * NT * 8 * 32 + lane) * 8; /* + (8 nt + j) * 256 */
            const uint8_t *xd =
                sx + (size_t)npad * 256 + (8 * wn * NT + 2 * c) * 8; /* + (j npad + 8 nt) * 8 */
            const uint8_t *xm =
                sx + (size_t)npad * 320 + (8 * wn * NT + 2 * c) * 4; /* + (j npad + 8 nt) * 4 */
#pragma unroll UJ
            for (int j = 0; j < 8; j++) {
                uint32_t lo[MT][2], hi[MT][2], ml[MT][2], mh[MT][2];
                float sa[MT][2], sb[MT][2], mn[MT][2];
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        T::frag(rp[mt][h], j, c, lo[mt][h], hi[mt][h], sa[mt][h], sb[mt][h],
                                mn[mt][h]);
                        /* the second mma's words: Q2_K's mins, else the halves of 16's */
                        ml[mt][h] = 0u;
                        mh[mt][h] = hi[mt][h];
                        if constexpr (M16) T::mins(rp[mt][h], j, ml[mt][h], mh[mt][h]);
                    }
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    if (nt < ntl) {
                        const uint2 b = *(const uint2 *)(xb + (size_t)(8 * nt + j) * 256);
                        /* dx, dC of batch rows 2c and 2c + 1 */
                        const float4 d = *(const float4 *)(xd + ((size_t)j * npad + 8 * nt) * 8);
                        float2 mx = make_float2(0.0f, 0.0f);
                        if constexpr (L::MIN)
                            mx = *(const float2 *)(xm + ((size_t)j * npad + 8 * nt) * 4);
#pragma unroll
                        for (int mt = 0; mt < MT; mt++) {
                            float *a = acc[mt][nt]; /* rows g, g + 8 x columns 2c, 2c + 1 */
                            int p[4];
                            if constexpr (T::TWO || M16) {
                                /* two mmas: Q6_K's and Q3_K's halves of 16 (scales sa, sb), or
                                 * Q2_K's 32 weights (sa = d) and its mins (mn = -dmin) */
                                int q[4];
                                si_mma_i8(p, lo[mt][0], lo[mt][1], M16 ? hi[mt][0] : 0u,
                                          M16 ? hi[mt][1] : 0u, b.x, b.y, MMQ_BIAS);
                                si_mma_i8(q, ml[mt][0], ml[mt][1], mh[mt][0], mh[mt][1], b.x, b.y,
                                          MMQ_BIAS);
                                const float s0 = M16 ? mn[mt][0] : sb[mt][0],
                                            s1 = M16 ? mn[mt][1] : sb[mt][1];
                                a[0] = fmaf(sa[mt][0], mmq_dp(d.x, d.y, p[0]), a[0]);
                                a[0] = fmaf(s0, mmq_dp(d.x, d.y, q[0]), a[0]);
                                a[1] = fmaf(sa[mt][0], mmq_dp(d.z, d.w, p[1]), a[1]);
                                a[1] = fmaf(s0, mmq_dp(d.z, d.w, q[1]), a[1]);
                                a[2] = fmaf(sa[mt][1], mmq_dp(d.x, d.y, p[2]), a[2]);
                                a[2] = fmaf(s1, mmq_dp(d.x, d.y, q[2]), a[2]);
                                a[3] = fmaf(sa[mt][1], mmq_dp(d.z, d.w, p[3]), a[3]);
                                a[3] = fmaf(s1, mmq_dp(d.z, d.w, q[3]), a[3]);
                            } else {
                                si_mma_i8(p, lo[mt][0], lo[mt][1], hi[mt][0], hi[mt][1], b.x, b.y,
                                          MMQ_BIAS);
                                a[0] = fmaf(sa[mt][0], mmq_dp(d.x, d.y, p[0]), a[0]);
                                a[1] = fmaf(sa[mt][0], mmq_dp(d.z, d.w, p[1]), a[1]);
                                a[2] = fmaf(sa[mt][1], mmq_dp(d.x, d.y, p[2]), a[2]);
                                a[3] = fmaf(sa[mt][1], mmq_dp(d.z, d.w, p[3]), a[3]);
                                if constexpr (L::MIN) {
                                    a[0] = fmaf(mn[mt][0], mx.x, a[0]);
                                    a[1] = fmaf(mn[mt][0], mx.y, a[1]);
                                    a[2] = fmaf(mn[mt][1], mx.x, a[2]);
                                    a[3] = fmaf(mn[mt][1], mx.y, a[3]);
                                }
                            }
                        }
                    }
                }
            }
        }
        __syncthreads(); /* this stage is refilled by the next iteration's producer */
        if (++st == MMQ_STAGES) st = 0;
    }
    si_cp_async_wait<0>(); /* the trailing groups are empty; nothing may land after this */
    si_pdl_trigger();

    if (S == 1) {
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int m = m0 + 16 * MT * wm + 16 * mt + g + 8 * (e >> 1),
                              n = 8 * (wn * NT + nt) + 2 * c + (e & 1);
                    if (nt < ntl && m < M && n < nb) y[(size_t)n * M + m] = acc[mt][nt][e];
                }
        return;
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* split-K: the partial tile [npad][MMQ_RED_STRIDE] over the stage memory (free: the loop
     * ended with a barrier), then each CTA sums its slice of the tile over the cluster */
    float *red = (float *)smem;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = 16 * MT * wm + 16 * mt + g + 8 * (e >> 1),
                          n = 8 * (wn * NT + nt) + 2 * c + (e & 1);
                if (nt < ntl) red[n * MMQ_RED_STRIDE + r] = acc[mt][nt][e];
            }
    cg::cluster_group cl = cg::this_cluster();
    cl.sync();                               /* every CTA's partial tile is written */
    const int total = nb * (MMQ_TILE_M / 4); /* float4 groups of 4 consecutive weight rows */
    const int e0 = (int)((long long)total * rank / S),
              e1 = (int)((long long)total * (rank + 1) / S);
    for (int e = e0 + tid; e < e1; e += nthr) {
        const int n = e / (MMQ_TILE_M / 4), r = 4 * (e - n * (MMQ_TILE_M / 4));
        float *loc = red + n * MMQ_RED_STRIDE + r;
        float4 part[MMQ_MAX_SPLIT];
#pragma unroll
        for (int s = 0; s < MMQ_MAX_SPLIT; s++)
            if (s < S) part[s] = *(const float4 *)cl.map_shared_rank(loc, (unsigned)s);
        float4 v = part[0];
#pragma unroll
        for (int s = 1; s < MMQ_MAX_SPLIT; s++)
            if (s < S) {
                v.x += part[s].x;
                v.y += part[s].y;
                v.z += part[s].z;
                v.w += part[s].w;
            }
        float *yo = y + (size_t)n * M + m0 + r;
        const float vv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (m0 + r + i < M) yo[i] = vv[i];
    }
    cl.sync(); /* no CTA leaves while another reads its shared memory */
#else
    __trap(); /* clusters need sm_90; the host never splits below it */
#endif
}

/* ---- host ---- */

static int g_mmq_on = -1;    /* SI_CUDA_MMQ=0 turns the path off (the caller falls back) */
static int g_mmq_split = -1; /* SI_CUDA_MMQ_SPLIT=1..8 forces S (experiments); 0: chosen */
static int g_mmq_half = -1;  /* SI_CUDA_MMQ_HALF=0: Q4_0 takes the int8 path (timing) */
static int g_mmq_nt = 0;     /* SI_CUDA_MMQ_NT=4|8: n8 tiles a warp at 64 rows (timing) */
static int g_n_sm = 0, g_cc_major = 0;
static int g_pdl_cluster = -1; /* PDL together with a cluster launch: -1 untried, 0 refused, 1 ok */

static void mmq_init() {
    if (g_mmq_on >= 0) return;
    int dev;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&g_n_sm, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&g_cc_major, cudaDevAttrComputeCapabilityMajor, dev));
    const char *e = getenv("SI_CUDA_MMQ_SPLIT");
    g_mmq_split = e ? atoi(e) : 0;
    if (g_mmq_split < 0 || g_mmq_split > MMQ_MAX_SPLIT) g_mmq_split = 0;
    e = getenv("SI_CUDA_MMQ_NT");
    if (e) g_mmq_nt = atoi(e);
    e = getenv("SI_CUDA_MMQ_HALF");
    g_mmq_half = !(e && e[0] == '0');
    e = getenv("SI_CUDA_MMQ");
    g_mmq_on = !(e && e[0] == '0');
}

/* Split-K factor for mtiles tiles of nseg segments: the S in {1, 2, 4, 8} (S <= nseg, max_s)
 * with the least ceil(CTAs / slots) x (segments per CTA + 2), the 2 standing for the pipeline
 * fill and the cluster reduction; slots = 2 CTAs per SM (what 64 rows of every type fit). Ties
 * go to the larger S (finer work, better balance). Depends on the shape and SM count only. */
static int mmq_split(int mtiles, int nseg, int max_s) {
    if (g_cc_major < 9) return 1;
    if (g_mmq_split > 0) return min(g_mmq_split, nseg);
    const long long slots = 2LL * g_n_sm;
    int best = 1;
    long long best_cost = -1;
    for (int s = 1; s <= max_s && s <= nseg; s *= 2) {
        const long long waves = ((long long)mtiles * s + slots - 1) / slots;
        const long long cost = waves * ((nseg + s - 1) / s + 2);
        if (best_cost < 0 || cost <= best_cost) {
            best = s;
            best_cost = cost;
        }
    }
    return best;
}

template <class T, int NT, bool HALF>
static int mmq_launch(const uint8_t *W, int M, int K, const uint8_t *xs, int npad, int nb, float *y,
                      int S, cudaStream_t st) {
    using L = mmq_layout<T, HALF>;
    static int smem_optin = 0;
    /* per WN (1, 2, 4) and S: 0 unknown, 1 fits, 2 does not */
    static int clusters_ok[4][MMQ_MAX_SPLIT + 1];
    auto kernel = mmq_kernel<T, NT, HALF>;
    if (!smem_optin) {
        int dev, optin;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
        /* two CTAs of ~110 KB per SM: all of the unified L1/shared array as shared memory (the
         * kernel reads global memory only through cp.async.cg, which bypasses L1) */
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        cudaSharedmemCarveoutMaxShared));
        smem_optin = optin;
    }
    const int wn = npad / (8 * NT); /* 1, or 2 for 128 rows */
    const size_t smem = (size_t)MMQ_STAGES * ((size_t)MMQ_TILE_M * L::SEGP + (size_t)npad * L::XB);
    if (smem > (size_t)smem_optin) return -1;
    const int nseg = K / 256;
    const size_t row_bytes = (size_t)nseg * T::SEGB;
    const dim3 block(32 * (MMQ_TILE_M / (16 * mmq_mt<HALF>())) * wn);
    cudaLaunchAttribute attr[2];
    cudaLaunchConfig_t cfg = {};
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = attr;
    for (;;) { /* S as chosen, or smaller if such a cluster cannot be resident (never seen) */
        cfg.gridDim = dim3(S, (M + MMQ_TILE_M - 1) / MMQ_TILE_M);
        cfg.numAttrs = 0;
        if (S > 1) {
            si_cluster_attr(&attr[0], S);
            cfg.numAttrs = 1;
            int &ok = clusters_ok[wn - 1][S];
            if (!ok) {
                int n = 0;
                CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, (const void *)kernel, &cfg));
                ok = n > 0 ? 1 : 2;
            }
            if (ok == 2) {
                S /= 2;
                continue;
            }
        }
        break;
    }
    /* PDL (pdl.cuh) on a cluster launch too, unless the first such launch was refused */
    const bool pdl = cuda_pdl_on() && (S == 1 || g_pdl_cluster != 0);
    if (pdl) {
        attr[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[cfg.numAttrs].val.programmaticStreamSerializationAllowed = 1;
        cfg.numAttrs++;
    }
    cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, W, M, nseg, row_bytes, xs, npad, nb, y);
    if (err != cudaSuccess && pdl && S > 1 && g_pdl_cluster < 0) {
        (void)cudaGetLastError();
        fprintf(stderr, "cuda: cluster launch with PDL refused (%s); clusters launch without it\n",
                cudaGetErrorName(err));
        g_pdl_cluster = 0;
        cfg.numAttrs--;
        err = cudaLaunchKernelEx(&cfg, kernel, W, M, nseg, row_bytes, xs, npad, nb, y);
    }
    CUDA_CHECK(err);
    if (pdl && S > 1) g_pdl_cluster = 1;
    return 0;
}

template <class T, bool HALF>
static int mmq_run(const void *W, int M, int K, const float *x, int nb, float *y, void *scratch,
                   cudaStream_t st) {
    constexpr bool MIN = mmq_layout<T>::MIN;
    const int npad = mmq_npad(nb), nseg = K / 256;
    /* The f16 path at most 4: on the H200 (test_cuda_kernels --mmq, Q4_0 at 64 rows, 2026-11-30
     * s9) the 4096-row 7B weights took 26.2 us (4096 x 4096) and 57.2 us (4096 x 11008) at S = 4,
     * 29.5 and 62.4 at 8, the model's pick, and the others are as fast or faster at S <= 4 (what
     * the model then picks: 12288 rows S = 2, 43.8 us; 22016 S = 4, 69.8; 32000 S = 1, 77.3). */
    const int S = mmq_split((M + MMQ_TILE_M - 1) / MMQ_TILE_M, nseg, HALF ? 4 : MMQ_MAX_SPLIT);
    uint8_t *xs = (uint8_t *)scratch;
    if (HALF && x)
        si_launch_pdl(mmq_x_half, dim3(min(1024, si_div_up(npad * K / 4, 256))), dim3(256), 0, st,
                      x, K, nb, npad, xs);
    else if (!HALF)
        si_launch_pdl(mmq_quantize_x<MIN>, dim3(npad, (K + MMQ_QCHUNK - 1) / MMQ_QCHUNK), dim3(128),
                      0, st, x, K, nb, npad, xs);
    const uint8_t *w = (const uint8_t *)W;
    /* 64 and 128 rows: four n8 tiles a warp, so 8 or 16 warps a CTA. On the H200 (2026-11-30
     * s4) that beat eight tiles a warp (half the warps) at 64 rows on every 7B shape, Q4_0 and
     * Q8_0: 4-14 % less time; Q4_0 64 x (512 + 128) all-decoding 4,830 -> 4,965 t/s. The sums
     * are the same in the same order either way. */
    /* the f16 path: eight n8 tiles a warp from 64 rows (8 or 16 warps of one m16 tile); four
     * at 128 rows would be 1,024 threads */
    const int nt8 = HALF ? (npad == 128 || g_mmq_nt != 4) : g_mmq_nt == 8;
    if (npad >= 64 && nt8) return mmq_launch<T, 8, HALF>(w, M, K, xs, npad, nb, y, S, st);
    switch (npad) {
    case 16: return mmq_launch<T, 2, HALF>(w, M, K, xs, npad, nb, y, S, st);
    default: return mmq_launch<T, 4, HALF>(w, M, K, xs, npad, nb, y, S, st); /* 32, 64, 128 */
    }
}

/* The types of the f16 path. It takes any type with one scale a 32-block and no min (tmma frag
 * gives q - offset), but Q8_0's 272-byte segments leave one CTA an SM (135 KB a CTA at 64 rows):
 * 64 x (512 + 128) all-decoding 4,848 t/s on the int8 path, 4,655-4,677 on this one (H200,
 * 2026-11-30 s9), so only Q4_0 takes it. */
static bool mmq_half_type(si_type t) { return t == SI_TYPE_Q4_0; }

/* the types with tensor-core fragments (weight_units.cuh) */
static bool mmq_type(si_type t) {
    return with_mma_frags(t, false, [](auto) { return true; });
}

/* the types whose blocks have a min term (mmq_min) */
static bool mmq_min_type(si_type t) {
    return with_mma_frags(t, false, [](auto m) { return mmq_min<decltype(m)>::v; });
}

extern "C" size_t cuda_matmul_quant_rows_scratch_bytes(si_type t, int K, int n_rows) {
    if (!mmq_type(t) || K < 256 || K % 256 != 0 || n_rows < MMQ_MIN_ROWS) return 0;
    const int npad = mmq_npad(min(n_rows, MMQ_MAX_ROWS));
    /* the f16 path's size for its types whether or not SI_CUDA_MMQ_HALF turns it off */
    return (size_t)(K / 256) * npad *
           mmq_xb(mmq_min_type(t), mmq_half_type(t));
}

extern "C" int cuda_matmul_quant_rows_half(si_type t) {
    mmq_init();
    return g_mmq_half && mmq_half_type(t);
}

/* Measured on the H200 (test_cuda_kernels --mmq, 2026-11-30; Llama-2-7B shapes, against
 * dequantise + cuBLASLt): at 16 rows the int8 path is 1.2-2.7x faster on every shape and type, at
 * 32 rows 1.0-2.2x (Q6_K: 0.8x on the 4096-row shapes), at 64 rows 1.1-1.6x on weights of
 * 12288+ rows but 0.6-0.8x on the 4096-row ones, at 128 rows 0.4-0.9x everywhere. It is
 * instruction-issue bound (~200 issue slots a warp per 576 weight bytes of Q4_0 at 64 rows).
 * Q4_0's f16 path (s9): 1.0-1.7x at 64 rows on every shape (and one kernel fewer than dequantise
 * + cuBLASLt in the step), 0.7-0.9x at 128 rows but for the 32000-row output (1.2x). Q2_K (an
 * H100, 2026-12-06 s46): 1.4-2.6x at 16 rows, 1.1-2.0x at 32, at 64 rows 1.2-1.5x on 12288+
 * rows and 0.7-0.8x on the 4096-row ones, 0.5-0.8x at 128: the same rule. */
extern "C" int cuda_matmul_quant_rows_pays(si_type t, int M, int n_rows) {
    mmq_init();
    if (n_rows <= 16 || (n_rows <= 64 && cuda_matmul_quant_rows_half(t))) return 1;
    if (n_rows <= 32) return t != SI_TYPE_Q6_K || M >= 8192;
    return n_rows <= 64 && M >= 8192 && t != SI_TYPE_Q6_K;
}

extern "C" int cuda_matmul_quant_rows(si_type t, const void *W, int M, int K, const float *x,
                                      int n_rows, float *y, void *scratch, cudaStream_t stream) {
    if (!mmq_type(t) || n_rows < MMQ_MIN_ROWS || n_rows > MMQ_MAX_ROWS || M < 1 || K < 256 ||
        K % 256 != 0 || ((uintptr_t)W & 15) || !x || ((uintptr_t)x & 15) ||
        ((uintptr_t)scratch & 15) || !scratch)
        return -1;
    mmq_init();
    if (!g_mmq_on) return -1;
    if (cuda_matmul_quant_rows_half(t)) /* Q4_0 (mmq_half_type) */
        return mmq_run<tmma_q4_0, true>(W, M, K, x, n_rows, y, scratch, stream);
    return with_mma_frags(t, -1, [&](auto m) {
        return mmq_run<decltype(m), false>(W, M, K, x, n_rows, y, scratch, stream);
    });
}

extern "C" int cuda_matmul_quant_rows_pre_ok(si_type t, int K, int n_rows) {
    mmq_init();
    return g_mmq_on && cuda_matmul_quant_rows_half(t) && n_rows >= MMQ_MIN_ROWS &&
           cuda_matmul_quant_rows_pays(t, 0, n_rows) && K >= 256 && K % 256 == 0;
}

extern "C" int cuda_matmul_quant_rows_pre(si_type t, const void *W, int M, int K, int n_rows,
                                          float *y, const void *scratch, cudaStream_t stream) {
    if (!cuda_matmul_quant_rows_pre_ok(t, K, n_rows) || M < 1 || ((uintptr_t)W & 15) ||
        ((uintptr_t)scratch & 15) || !scratch)
        return -1;
    /* only Q4_0 takes the f16 path (mmq_half_type) */
    return mmq_run<tmma_q4_0, true>(W, M, K, (const float *)NULL, n_rows, y, (void *)scratch,
                                    stream);
}
