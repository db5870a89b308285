/* gemv_fast.cuh — the F16/BF16 decode GEMV that runs near the HBM roofline (included by gemv.cu;
 * the quantised types' fast path is gemv_q8x.cuh).
 *
 * gemv_h16_kernel: no shared memory. Rows are 16-byte aligned (K % 8 == 0), so each lane streams
 * its own 16-byte pieces of R rows straight to registers with ld.global.nc (L1::no_allocate: the
 * weights are read once), U pieces per row in flight per lane before the first use; x (f32,
 * L1-resident) is loaded once per piece and serves the R rows. A row is split over KS warps (4,
 * or 8 for long rows), each streaming a contiguous slice; their sums meet in shared memory.
 * Launched with programmatic dependent launch (pdl.cuh): weight loads start before the previous
 * kernel has finished. */

#include "backend/cuda/pdl.cuh"
/* ---------------------------------------------------------------- F16 / BF16 */

template <bool BF> __device__ __forceinline__ float2 si_h2x2f(uint32_t u) {
    if (BF) return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xFFFF0000u));
    return __half22float2(*(const __half2 *)&u);
}

#define GEMV_H16_WARPS 8
/* Warps per row: 4, or 8 for rows of GEMV_H16_LONG_K+ elements; the same for every batch size,
 * so that a row sums in the same order for 1..8 batch rows. On the H200 (bench/RESULTS.md,
 * 2026-11-30 s4), back to back, 4 warps a row beat 1 by 3-16 points of the bandwidth on every
 * Llama-2-7B shape (4096x4096 62 -> 75 %), and 8 warps (2 pieces a lane) took the 4096x11008
 * down projection from 83 to 92 % but cost the 4096-long rows 1-5 points. More warps stream
 * each row, so a short kernel ramps up sooner. At batch 1 those 8 warps take U = 8 pieces a
 * lane, all of an 11008 row's slice in one round, issued before the PDL wait: 7B F16 tg128
 * 256.7 -> 258.8 and 265.7 -> 268.5 t/s against U = 2, each pair in one device call
 * (bench/RESULTS.md 2026-11-30 s7). */
#define GEMV_H16_LONG_K 8192
/* Rows per warp R and 16-byte loads per row and lane in flight U, per batch size. Chosen on the
 * H200 (tests/cuda/LAST_RUN.md): more rows per warp share the x loads, more loads per lane are
 * more bytes in flight, both cost registers. At batch 1 (rows under GEMV_H16_LONG_K), R = 4,
 * U = 2 (78 registers, 3 CTAs a multiprocessor; a 4096-long row's slice in two rounds): each f32
 * x load from L1 serves four rows, a quarter of the L1 traffic a weight byte of R = 1. 7B tg128
 * against the former R, U = 1, 4 (48 registers, 5 CTAs), same device calls, 2 rounds
 * (bench/RESULTS.md 2026-12-03 s31): F16 256.0 -> 280.1 t/s on a slower H200, 267.4 -> 283.2 on
 * a faster one; 2 x 4 gave 271.4 and 276.1, 4 x 1 274.7, 8 x 1 266.1, 3 x 4 269.7 (80
 * registers); the down projection's rows (8192+ elements) at 2 x 8 or 2 x 4 instead of 1 x 8
 * did not gain. Again in s32 (one call, 2 rounds): F16 / BF16 281.7 / 282.2 at 4 x 2, 4 x 4
 * (112 registers) 269.8 / 270.8, down at 4 x 2 or 4 x 1 279.4-280.0 / 279.3-280.0. Timed alone, 1 x 4 had beaten 2 x 8 (90 registers) by 3-11 points of the
 * bandwidth on every shape; only whole decode steps decide. A second register buffer (chunk
 * i + 1 loading while chunk i is summed) measured 2-25 % slower, so there is none. NOTE: capping
 * the batch-1 instances at 40 registers (__launch_bounds__ minimum 6 CTAs, no spills) sped up a
 * chain of the 7B decode GEMVs alone by 1.9 % (bench/kernels/persist_chain) but slowed the
 * engine's tg128 by 1.6-2.3 % (F16 and BF16, same device call, 3 rounds; bench/RESULTS.md
 * 2026-12-01 s13): the decode step's other kernels need room on the multiprocessors too. */
#ifndef GEMV_H16_NB1
#define GEMV_H16_NB1 4, 2
#endif
#ifndef GEMV_H16_NB2
#define GEMV_H16_NB2 2, 8
#endif
#ifndef GEMV_H16_NB4
#define GEMV_H16_NB4 4, 4
#endif
#ifndef GEMV_H16_NB8
#define GEMV_H16_NB8 4, 2
#endif

/* KS warps share a row group (KS > 1): warp slice s sums the contiguous s-th KS-th of the row's
 * pieces, and the group's first warp adds the KS partial sums in slice order. */
template <bool BF, int NB, int R, int U, int KS>
__global__ void __launch_bounds__(GEMV_H16_WARPS * 32)
    gemv_h16_kernel(const uint4 *__restrict__ W, int M, int K, const float *__restrict__ x, int nb,
                    float *__restrict__ y) {
    static_assert(GEMV_H16_WARPS % KS == 0 && R * NB <= 32, "KS divides the warps; a lane a sum");
    __shared__ float part[KS > 1 ? GEMV_H16_WARPS : 1][R][NB];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % KS;
    const int row0 = (blockIdx.x * (GEMV_H16_WARPS / KS) + warp / KS) * R;
    if (KS == 1 && row0 >= M) return;
    const int n16 = K / 8; /* 16-byte pieces per row */
    const int c_beg = (int)((long long)n16 * slice / KS);
    const int c_end = (int)((long long)n16 * (slice + 1) / KS);
    const uint4 *rowp[R];
#pragma unroll
    for (int r = 0; r < R; r++) rowp[r] = W + (size_t)min(row0 + r, M - 1) * n16;
    float acc[R][NB];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) acc[r][b] = 0.0f;

    auto load = [&](uint4(&w)[R][U], int c0) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + 32 * u;
#pragma unroll
            for (int r = 0; r < R; r++) w[r][u] = c < c_end ? si_ldg_stream16(rowp[r] + c) : make_uint4(0, 0, 0, 0);
        }
    };
    auto compute = [&](const uint4(&w)[R][U], int c0) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + 32 * u;
            if (c >= c_end) break;
#pragma unroll
            for (int b = 0; b < NB; b++) {
                if (b >= nb) break;
                const float4 *xp = (const float4 *)(x + (size_t)b * K + 8 * (size_t)c);
                const float4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const float2 a = si_h2x2f<BF>(w[r][u].x), bq = si_h2x2f<BF>(w[r][u].y);
                    const float2 cq = si_h2x2f<BF>(w[r][u].z), d = si_h2x2f<BF>(w[r][u].w);
                    float s = acc[r][b];
                    s = fmaf(a.x, x0.x, s); s = fmaf(a.y, x0.y, s);
                    s = fmaf(bq.x, x0.z, s); s = fmaf(bq.y, x0.w, s);
                    s = fmaf(cq.x, x1.x, s); s = fmaf(cq.y, x1.y, s);
                    s = fmaf(d.x, x1.z, s); s = fmaf(d.y, x1.w, s);
                    acc[r][b] = s;
                }
            }
        }
    };
    /* launched with PDL (pdl.cuh): the first pieces of weights, which no kernel writes, are
     * loaded while the kernel before (the norm, attention, SwiGLU) still runs; x is read only
     * after the wait. NOTE: also asking the next pieces into L2 (prefetch.global.L2) measured
     * slower on the H200: 7B F16 tg128 212.6 vs 221.2 t/s without, GEMVs 2-7 points of the
     * bandwidth lower (bench/gpu-2026-11-30-s3/gemv_prefetch_ab.txt). */
    uint4 w[R][U];
    const int first = c_beg + lane;
    if (row0 < M) load(w, first);
    si_pdl_trigger();
    si_pdl_wait();
    if (row0 < M)
        for (int c0 = first; c0 < c_end; c0 += 32 * U) {
            if (c0 != first) load(w, c0);
            compute(w, c0);
        }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const float v = si_warp_sum(acc[r][b]);
            if (KS > 1) {
                if (lane == 0) part[warp][r][b] = v;
            } else if (lane == 0 && b < nb && row0 + r < M) {
                y[(size_t)b * M + row0 + r] = v;
            }
        }
    if (KS > 1) {
        __syncthreads();
        if (slice == 0 && lane < R * NB) {
            const int r = lane / NB, b = lane % NB;
            float v = part[warp][r][b];
#pragma unroll
            for (int s2 = 1; s2 < KS; s2++) v += part[warp + s2][r][b];
            if (b < nb && row0 + r < M) y[(size_t)b * M + row0 + r] = v;
        }
    }
}

template <bool BF, int NB, int R, int U, int KS>
static void gemv_h16_launch_nb(const void *W, int M, int K, const float *x, int nb, float *y,
                               cudaStream_t st) {
    const int grid = si_div_up(M, GEMV_H16_WARPS / KS * R);
    si_launch_pdl(gemv_h16_kernel<BF, NB, R, U, KS>, grid, GEMV_H16_WARPS * 32, 0, st,
                  (const uint4 *)W, M, K, x, nb, y);
}

template <bool BF, int KS>
static void gemv_h16_launch_ks(const void *W, int M, int K, const float *x, int nb, float *y,
                               cudaStream_t st) {
    if (nb <= 1 && KS == 8) gemv_h16_launch_nb<BF, 1, 1, 8, KS>(W, M, K, x, nb, y, st);
    else if (nb <= 1) gemv_h16_launch_nb<BF, 1, GEMV_H16_NB1, KS>(W, M, K, x, nb, y, st);
    else if (nb <= 2) gemv_h16_launch_nb<BF, 2, GEMV_H16_NB2, KS>(W, M, K, x, nb, y, st);
    else if (nb <= 4) gemv_h16_launch_nb<BF, 4, GEMV_H16_NB4, KS>(W, M, K, x, nb, y, st);
    else gemv_h16_launch_nb<BF, 8, GEMV_H16_NB8, KS>(W, M, K, x, nb, y, st);
}

/* Timing knobs, not for the engine, each U,KS (U pieces in flight per lane, KS warps a row; read
 * at the first call): SI_CUDA_GEMV_H16 for batch 1 of every shape, else SI_CUDA_GEMV_H16_LONG for
 * batch 1 of rows of GEMV_H16_LONG_K+ elements. U never changes the per-lane order of the sums; a
 * KS other than the shape's does (batch 1 then no longer sums like 2..8 rows). */
static int gemv_h16_knob(int which) {
    static const int v[2] = {si_env_digit_pair("SI_CUDA_GEMV_H16"),
                             si_env_digit_pair("SI_CUDA_GEMV_H16_LONG")};
    return v[which];
}

/* batch 1 at a knob's (U, KS) = 10 U + KS; false when that pair is not instantiated */
template <bool BF>
static bool gemv_h16_launch_uks(int uks, const void *W, int M, int K, const float *x, int nb,
                                float *y, cudaStream_t st) {
    switch (uks) {
    case 84: gemv_h16_launch_nb<BF, 1, 1, 8, 4>(W, M, K, x, nb, y, st); return true;
    case 44: gemv_h16_launch_nb<BF, 1, 1, 4, 4>(W, M, K, x, nb, y, st); return true;
    case 28: gemv_h16_launch_nb<BF, 1, 1, 2, 8>(W, M, K, x, nb, y, st); return true;
    case 48: gemv_h16_launch_nb<BF, 1, 1, 4, 8>(W, M, K, x, nb, y, st); return true;
    case 88: gemv_h16_launch_nb<BF, 1, 1, 8, 8>(W, M, K, x, nb, y, st); return true;
    case 42: gemv_h16_launch_nb<BF, 1, 1, 4, 2>(W, M, K, x, nb, y, st); return true;
    case 41: gemv_h16_launch_nb<BF, 1, 1, 4, 1>(W, M, K, x, nb, y, st); return true;
    default: return false;
    }
}

template <bool BF>
static int gemv_h16_launch(const void *W, int M, int K, const float *x, int nb, float *y,
                           cudaStream_t st) {
    if (K % 8 != 0) return -1;
    if (nb <= 1) {
        int knob = gemv_h16_knob(0);
        if (!knob && K >= GEMV_H16_LONG_K) knob = gemv_h16_knob(1);
        if (gemv_h16_launch_uks<BF>(knob, W, M, K, x, nb, y, st)) return 0;
    }
    if (K >= GEMV_H16_LONG_K) gemv_h16_launch_ks<BF, 8>(W, M, K, x, nb, y, st);
    else gemv_h16_launch_ks<BF, 4>(W, M, K, x, nb, y, st);
    return 0;
}
