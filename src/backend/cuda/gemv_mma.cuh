/* gemv_mma.cuh — decode GEMV of the quantised types on int8 tensor cores (mma.sync m16n8k32
 * s8 x s8 -> s32): 8 activation rows for the instructions of one (included by gemv.cu; used from
 * GEMV_MMA_MIN_NB rows).
 *
 * The dp4a kernel (gemv_q8x.cuh) issues one dp4a per 4 weights per activation row: at batch 8
 * it is bound by instruction issue, not by memory. Here a warp multiplies a 16-row x 32-k weight
 * tile by the 32 x 8 q8 activations (all batch rows at once) in one instruction. NOTE: the
 * fragment building around it (2 rows x 4 bytes per lane, their scales, 4 scaled f32 updates
 * per lane per 32-block) is ~40 instructions per 288 bytes of Q4_0, more than the dp4a kernel
 * needs per byte at batch 1, so at 1-4 rows that kernel stays faster. x is quantised
 * to Q8_0 per CTA exactly as in gemv_q8x.cuh (same values, so the same reference); the
 * per-32 weight scale, x scale and the min terms are applied in f32 to each s32 tile result.
 *
 * Work: a tile = 16 rows; K is cut into segments of 256 (8 blocks of 32, one k-quant
 * super-block). The warps of a CTA split a tile's segments (split-K, summed through shared
 * memory at the tile's end); CTAs walk tiles persistently. Each warp stages its 16 row segments
 * with cp.async in an S-stage ring (row slots of an odd number of 16-byte words, so that the 8
 * rows read by a fragment load fall in distinct banks), then builds the A fragments from them.
 *
 * Fragments (PTX ISA, mma.m16n8k32 .s8): lane = 4 g + c holds A rows g and g + 8, k 4c..4c+3
 * (a0, a1) and 16+4c..16+4c+3 (a2, a3); B column (batch row) g, the same k; C rows g, g + 8,
 * columns 2c, 2c + 1. Q4_0's byte c of the 16 packs elements c (low) and c + 16 (high), so one
 * 32-bit word of a block gives a row's a0 and a2 — the GGUF layout fits the fragment. */

#include "backend/cuda/gemv_mma_units.cuh"
#include "backend/cuda/mma.cuh"

#define GEMV_MMA_MAX_K 14336
template <class T> static inline bool gemv_mma_ok(int K) { return K % 256 == 0 && K <= GEMV_MMA_MAX_K; }

template <class T> struct mma_layout {
    /* a staged row segment: the covering aligned span, an odd number of 16-byte words */
    static constexpr int SEGP = 16 * ((((T::SEGB + 30) / 16) & 1) ? (T::SEGB + 30) / 16 : (T::SEGB + 30) / 16 + 1);
    static constexpr int NC = SEGP / 16; /* 16-byte copies per row at most */
};

/* shared memory: xq [nb][K + 16] int8 | xd, xm f32 [K/32][8] | red f32x4 [warps][32] | stages */
template <class T> static size_t mma_smem_bytes(int K, int nb, int warps, int S) {
    return (size_t)nb * (K + 16) + (size_t)(K / 32) * 8 * 4 * 2 + (size_t)warps * 32 * 16 +
           (size_t)warps * S * 16 * mma_layout<T>::SEGP;
}

template <class T, int S>
__global__ void __launch_bounds__(256)
    gemv_mma_kernel(const uint8_t *__restrict__ W, int M, int K, size_t row_bytes,
                    const float *__restrict__ x, int nb, float *__restrict__ y) {
    constexpr int SEGP = mma_layout<T>::SEGP, NC = mma_layout<T>::NC;
    extern __shared__ __align__(16) uint8_t smem[];
    const int nwarps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane >> 2, c = lane & 3;
    const int nblk = K / 32, nseg = K / 256, ntiles = (M + 15) / 16, xrow = K + 16;
    uint8_t *xq = smem;
    float *xd = (float *)(smem + (size_t)nb * xrow), *xm = xd + (size_t)nblk * 8;
    float4 *red = (float4 *)(xm + (size_t)nblk * 8);
    uint8_t *sw = (uint8_t *)(red + nwarps * 32) + (size_t)warp * S * 16 * SEGP;

    /* first byte of segment sg of row r of tile t (rows past M repeat the last row) */
    auto seg_src = [&](int t, int r, int sg) {
        return (uintptr_t)(W + (size_t)min(16 * t + r, M - 1) * row_bytes + (size_t)sg * T::SEGB);
    };
    /* A warp's items: its segments warp, warp + nwarps, ... of tile blockIdx.x, then of the
     * CTA's next tile. The producer runs S - 1 items ahead; one commit group per call. */
    int pt = warp < nseg ? blockIdx.x : ntiles, psg = warp, ps = 0;
    auto produce = [&]() {
        if (pt < ntiles) {
            uint8_t *dst = sw + (size_t)ps * 16 * SEGP;
            for (int i = lane; i < 16 * NC; i += 32) {
                const int r = i / NC, k = i - r * NC;
                const uintptr_t s = seg_src(pt, r, psg), a0 = s & ~(uintptr_t)15;
                if (a0 + 16 * k < s + T::SEGB) si_cp_async16(dst + r * SEGP + 16 * k, (const void *)(a0 + 16 * k));
            }
            psg += nwarps;
            if (psg >= nseg) { psg = warp; pt += gridDim.x; }
        }
        si_cp_async_commit();
        if (++ps == S) ps = 0;
    };

    /* x scales of batch rows >= nb are read (their columns are computed, never stored) */
    for (int i = threadIdx.x; i < nblk * 8; i += blockDim.x)
        if ((i & 7) >= nb) xd[i] = xm[i] = 0.0f;
    q8x_quantize_x(
        x, K, nb,
        [&]() {
#pragma unroll
            for (int i = 0; i < S - 1; i++) produce();
        },
        [&](int bi, int bb, int sub, uint32_t q, float d, int sum) {
            *(uint32_t *)(xq + (size_t)bi * xrow + 32 * bb + 4 * sub) = q;
            if (sub == 0) {
                xd[8 * bb + bi] = d;
                xm[8 * bb + bi] = d * (float)sum;
            }
        });
    __syncthreads();

    const uint8_t *xg = xq + (size_t)min(g, nb - 1) * xrow; /* this lane's B column */
    int stage = 0;
    for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* rows g, g + 8 x columns 2c, 2c + 1 */
        for (int sg = warp; sg < nseg; sg += nwarps) {
            produce(); /* into the stage consumed in the previous iteration */
            si_cp_async_wait<S - 1>();
            __syncwarp();
            const uint8_t *st = sw + (size_t)stage * 16 * SEGP;
            const uint8_t *r0 = st + g * SEGP + (seg_src(t, g, sg) & 15);
            const uint8_t *r1 = st + (g + 8) * SEGP + (seg_src(t, g + 8, sg) & 15);
#pragma unroll 2
            for (int j = 0; j < 8; j++) {
                const int blk = 8 * sg + j;
                const uint32_t b0 = *(const uint32_t *)(xg + 32 * blk + 4 * c);
                const uint32_t b1 = *(const uint32_t *)(xg + 32 * blk + 16 + 4 * c);
                uint32_t lo0, hi0, lo1, hi1;
                float sa0, sb0, mn0, sa1, sb1, mn1;
                T::frag(r0, j, c, lo0, hi0, sa0, sb0, mn0);
                T::frag(r1, j, c, lo1, hi1, sa1, sb1, mn1);
                const float2 dx = *(const float2 *)(xd + 8 * blk + 2 * c);
                const float2 mx = *(const float2 *)(xm + 8 * blk + 2 * c);
                int p[4];
                constexpr bool M16 = mma_min16<T>::v;
                if constexpr (T::TWO || M16) {
                    /* two mmas: Q6_K's and Q3_K's halves of 16 (scales sa, sb), or Q2_K's 32
                     * weights (sa = d) and its mins (mn = -dmin) */
                    uint32_t ml0 = 0u, mh0 = hi0, ml1 = 0u, mh1 = hi1;
                    if constexpr (M16) {
                        T::mins(r0, j, ml0, mh0);
                        T::mins(r1, j, ml1, mh1);
                    }
                    const float s0 = M16 ? mn0 : sb0, s1 = M16 ? mn1 : sb1;
                    int q[4];
                    si_mma_i8(p, lo0, lo1, M16 ? hi0 : 0u, M16 ? hi1 : 0u, b0, b1);
                    si_mma_i8(q, ml0, ml1, mh0, mh1, b0, b1);
                    acc[0] += dx.x * (sa0 * (float)p[0] + s0 * (float)q[0]);
                    acc[1] += dx.y * (sa0 * (float)p[1] + s0 * (float)q[1]);
                    acc[2] += dx.x * (sa1 * (float)p[2] + s1 * (float)q[2]);
                    acc[3] += dx.y * (sa1 * (float)p[3] + s1 * (float)q[3]);
                } else {
                    si_mma_i8(p, lo0, lo1, hi0, hi1, b0, b1);
                    acc[0] += fmaf(sa0 * dx.x, (float)p[0], mn0 * mx.x);
                    acc[1] += fmaf(sa0 * dx.y, (float)p[1], mn0 * mx.y);
                    acc[2] += fmaf(sa1 * dx.x, (float)p[2], mn1 * mx.x);
                    acc[3] += fmaf(sa1 * dx.y, (float)p[3], mn1 * mx.y);
                }
            }
            __syncwarp(); /* this stage is refilled by the next produce() */
            if (++stage == S) stage = 0;
        }
        /* split-K: the warps' partial tiles summed by warp 0 */
        red[warp * 32 + lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        __syncthreads();
        if (warp == 0) {
            float4 s = red[lane];
            for (int w = 1; w < nwarps; w++) {
                const float4 v = red[w * 32 + lane];
                s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
            }
            const int m0 = 16 * t + g, m1 = m0 + 8, n0 = 2 * c, n1 = n0 + 1;
            if (m0 < M && n0 < nb) y[(size_t)n0 * M + m0] = s.x;
            if (m0 < M && n1 < nb) y[(size_t)n1 * M + m0] = s.y;
            if (m1 < M && n0 < nb) y[(size_t)n0 * M + m1] = s.z;
            if (m1 < M && n1 < nb) y[(size_t)n1 * M + m1] = s.w;
        }
        __syncthreads(); /* red is rewritten for the next tile */
    }
    si_cp_async_wait<0>(); /* no copy outlives the warp (the trailing groups are empty) */
}

/* Warps per CTA, cp.async stages per warp, CTAs per SM at most (0: as many as fit). H200 sweep
 * at 8 batch rows: 8 warps x 2 stages beat 8 x 3 (by 0-4 points), 4 x 4 and 8 x 4 capped at one
 * CTA per SM (by 5-15). */
#ifndef GEMV_MMA_WARPS
#define GEMV_MMA_WARPS 8
#endif
#ifndef GEMV_MMA_STAGES
#define GEMV_MMA_STAGES 2
#endif
#ifndef GEMV_MMA_CTAS_PER_SM
#define GEMV_MMA_CTAS_PER_SM 0
#endif

template <class T>
static int gemv_mma_launch(const void *W, int M, int K, const float *x, int nb, float *y, cudaStream_t st) {
    constexpr int S = GEMV_MMA_STAGES;
    if (!gemv_mma_ok<T>(K)) return -1;
    static int smem_optin = 0, n_sm = 0; /* per instance: the attribute is per kernel */
    if (!smem_optin) {
        int dev;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
        int optin;
        CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        CUDA_CHECK(cudaFuncSetAttribute(gemv_mma_kernel<T, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
        smem_optin = optin;
    }
    int warps = GEMV_MMA_WARPS;
    size_t smem = mma_smem_bytes<T>(K, nb, warps, S);
    while (smem > (size_t)smem_optin && warps > 1) {
        warps /= 2;
        smem = mma_smem_bytes<T>(K, nb, warps, S);
    }
    if (smem > (size_t)smem_optin) return -1;
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_mma_kernel<T, S>, warps * 32, smem));
    if (GEMV_MMA_CTAS_PER_SM > 0) per_sm = min(per_sm, GEMV_MMA_CTAS_PER_SM);
    const int grid = min((M + 15) / 16, max(1, per_sm) * n_sm);
    const size_t row_bytes = (size_t)(K / 256) * T::SEGB;
    gemv_mma_kernel<T, S><<<grid, warps * 32, smem, st>>>((const uint8_t *)W, M, K, row_bytes, x, nb, y);
    CUDA_CHECK_LAUNCH();
    return 0;
}
