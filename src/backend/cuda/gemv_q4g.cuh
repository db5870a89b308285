/* gemv_q4g.cuh — the decode GEMV (1-8 batch rows) of Q4_0 matrices kept in G8 order
 * (q4_0_g8.cuh); included by gemv.cu.
 *
 * Shaped like the F16 GEMV (gemv_fast.cuh), which streams near the bandwidth: no shared memory
 * for the weights. Lane l of a warp takes blocks c_beg + l, + 32, ... of its R rows: a block's
 * nibbles are one 16-byte ld.global.nc straight into registers, its scale a 2-byte load (the
 * warp's 32 blocks are four 128-byte runs and four 16-byte runs of scales), U blocks a row in
 * flight, the first ones issued before the PDL wait. The products are dp4a against x quantised
 * to q8 blocks (d = amax / 127 rounded to fp16, q = round(x / d), the sum of q for the -8 offset),
 * one f32 multiply-add a block, as the dp4a GEMV of the GGUF-order types (gemv_q8x.cuh).
 *
 * x comes as (Q4G_PRE) the CUDA_Q8X_ROW_BYTES rows the kernel before quantised for it (a norm,
 * SwiGLU, decode attention: cuda_gemv_pre), read through L1, or as (Q4G_F32) f32 rows that each
 * lane quantises per block with q8x_block (q8x_row.cuh), the quantiser those kernels use: the
 * same q and d, so both give the same bits. KS = 2 warps share a row group, each summing a
 * contiguous half of the row's blocks; the two sums meet in shared memory. The order of a row's
 * sums depends only on K (KS, the lanes' blocks), never on the batch rows, R or U: a request gets
 * the same bits alone and batched (test_cuda_kernels checks it).
 *
 * On the H200 (bench/RESULTS.md 2026-12-01 s17, bench/kernels/q4_split_gemv.cu): a Llama-2-7B
 * token's GEMV chain took 1,193 us with gemv_q8x.cuh on GGUF rows and ~1,050-1,085 us here. */
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q4_0_g8.cuh"
#include "backend/cuda/q8x_row.cuh"

#define GEMV_Q4G_WARPS 8
#define GEMV_Q4G_KS 2 /* warps a row group: part of the sums' order, so fixed */

enum { Q4G_PRE, Q4G_F32 };

__device__ __forceinline__ uint4 si_ldg_once16(const void *p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}
__device__ __forceinline__ uint16_t si_ldg_once2(const void *p) {
    uint16_t v;
    asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

/* Block c of batch row b of x as q8: the 32 int8 q in xw, d and the sum of q. */
template <int XIN>
__device__ __forceinline__ void q4g_x_block(const void *__restrict__ x, int K, int b, int c,
                                            uint32_t (&xw)[8], float &d, int &sum) {
    if (XIN == Q4G_PRE) {
        const uint8_t *row = (const uint8_t *)x + b * CUDA_Q8X_ROW_BYTES(K);
        const uint4 lo = __ldg((const uint4 *)(row + 32 * (size_t)c));
        const uint4 hi = __ldg((const uint4 *)(row + 32 * (size_t)c) + 1);
        xw[0] = lo.x; xw[1] = lo.y; xw[2] = lo.z; xw[3] = lo.w;
        xw[4] = hi.x; xw[5] = hi.y; xw[6] = hi.z; xw[7] = hi.w;
        d = __ldg((const float *)(row + K) + c);
        sum = __ldg((const int *)(row + K + K / 8) + c);
    } else {
        const float4 *p = (const float4 *)((const float *)x + (size_t)b * K + 32 * (size_t)c);
        float v[32];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float4 f = __ldg(p + i);
            v[4 * i] = f.x; v[4 * i + 1] = f.y; v[4 * i + 2] = f.z; v[4 * i + 3] = f.w;
        }
        int q[32];
        q8x_block<32>(v, q, &d, &sum);
#pragma unroll
        for (int i = 0; i < 8; i++)
            xw[i] = (uint32_t)(q[4 * i] & 0xFF) | ((uint32_t)(q[4 * i + 1] & 0xFF) << 8) |
                    ((uint32_t)(q[4 * i + 2] & 0xFF) << 16) | ((uint32_t)(q[4 * i + 3] & 0xFF) << 24);
    }
}

/* y[b][M] = x[b] W^T for b < nb <= NB; R rows a warp, U blocks a lane and row in flight */
template <int XIN, int NB, int R, int U>
__global__ void __launch_bounds__(GEMV_Q4G_WARPS * 32)
    gemv_q4g_kernel(const uint8_t *__restrict__ W, int M, int K, const void *__restrict__ x, int nb,
                    float *__restrict__ y) {
    constexpr int KS = GEMV_Q4G_KS;
    static_assert(R * NB <= 32, "a lane a sum");
    __shared__ float part[GEMV_Q4G_WARPS][R * NB];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % KS;
    const int row0 = (blockIdx.x * (GEMV_Q4G_WARPS / KS) + warp / KS) * R;
    const int nblk = K / 32;
    const int c_beg = nblk * slice / KS, c_end = nblk * (slice + 1) / KS;
    const uint8_t *rowp[R];
#pragma unroll
    for (int r = 0; r < R; r++) rowp[r] = W + (size_t)min(row0 + r, M - 1) * 18 * nblk;
    float acc[R][NB];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) acc[r][b] = 0.0f;
    uint4 q[R][U];
    uint16_t d[R][U];
    auto load = [&](int c0) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + 32 * u;
#pragma unroll
            for (int r = 0; r < R; r++) {
                q[r][u] = c < c_end ? si_ldg_once16(rowp[r] + q4g_nibbles_at(c)) : make_uint4(0, 0, 0, 0);
                d[r][u] = c < c_end ? si_ldg_once2(rowp[r] + q4g_scale_at(c)) : (uint16_t)0;
            }
        }
    };
    auto compute = [&](int c0) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + 32 * u;
            if (c >= c_end) break;
#pragma unroll
            for (int b = 0; b < NB; b++) {
                if (b >= nb) break;
                uint32_t xw[8];
                float dx;
                int sx;
                q4g_x_block<XIN>(x, K, b, c, xw, dx, sx);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const uint32_t qw[4] = {q[r][u].x, q[r][u].y, q[r][u].z, q[r][u].w};
                    int sumi = 0;
#pragma unroll
                    for (int j = 0; j < 4; j++) { /* byte j packs elements j (low), j + 16 */
                        sumi = __dp4a((int)(qw[j] & 0x0F0F0F0Fu), (int)xw[j], sumi);
                        sumi = __dp4a((int)((qw[j] >> 4) & 0x0F0F0F0Fu), (int)xw[4 + j], sumi);
                    }
                    acc[r][b] = fmaf(si_h2f(d[r][u]) * dx, (float)(sumi - 8 * sx), acc[r][b]);
                }
            }
        }
    };
    /* launched with PDL (pdl.cuh): weights, which no kernel writes, before the wait; x after */
    const int first = c_beg + lane;
    if (row0 < M) load(first);
    si_pdl_trigger();
    si_pdl_wait();
    if (row0 < M)
        for (int c0 = first; c0 < c_end; c0 += 32 * U) {
            if (c0 != first) load(c0);
            compute(c0);
        }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const float v = si_warp_sum(acc[r][b]);
            if (lane == 0) part[warp][r * NB + b] = v;
        }
    __syncthreads();
    if (slice == 0 && lane < R * NB) {
        const int r = lane / NB, b = lane % NB;
        float v = part[warp][lane];
#pragma unroll
        for (int s = 1; s < KS; s++) v += part[warp + s][lane];
        if (b < nb && row0 + r < M) y[(size_t)b * M + row0 + r] = v;
    }
}

template <int XIN, int NB, int R, int U>
static void gemv_q4g_launch_nb(const void *W, int M, int K, const void *x, int nb, float *y,
                               cudaStream_t st) {
    si_launch_pdl(gemv_q4g_kernel<XIN, NB, R, U>,
                  si_div_up(M, GEMV_Q4G_WARPS / GEMV_Q4G_KS * R), GEMV_Q4G_WARPS * 32, 0, st,
                  (const uint8_t *)W, M, K, x, nb, y);
}

/* Rows a warp and blocks in flight, per batch rows, chosen on the H200 (bench/RESULTS.md
 * 2026-12-01 s17, bench/kernels/q4_split_gemv.cu; the chain of a 7B token's GEMVs): at one row
 * 8 x 1 for the 8192+-row matrices (QKV 88 % of 4.21 TB/s against 85 at 4 x 1), 4 x 1 for the
 * long rows (down 75 %), 4 x 2 for the 4096 x 4096 output projection (65 %); at 2 rows 4 x 2, at
 * 3-4 rows 2 x 2, at 5-8 rows 4 x 1. They do not change a row's sums. */
template <int XIN>
static int gemv_q4g_launch(const void *W, int M, int K, const void *x, int nb, float *y,
                           cudaStream_t st) {
    if (!si_q4_0_g8(K) || nb < 1 || nb > 8) return -1;
    if (nb == 1 && M >= 8192) gemv_q4g_launch_nb<XIN, 1, 8, 1>(W, M, K, x, nb, y, st);
    else if (nb == 1 && K >= 8192) gemv_q4g_launch_nb<XIN, 1, 4, 1>(W, M, K, x, nb, y, st);
    else if (nb == 1) gemv_q4g_launch_nb<XIN, 1, 4, 2>(W, M, K, x, nb, y, st);
    else if (nb == 2) gemv_q4g_launch_nb<XIN, 2, 4, 2>(W, M, K, x, nb, y, st);
    else if (nb <= 4) gemv_q4g_launch_nb<XIN, 4, 2, 2>(W, M, K, x, nb, y, st);
    else gemv_q4g_launch_nb<XIN, 8, 4, 1>(W, M, K, x, nb, y, st);
    return 0;
}
