/* gemv_h16_mma.cuh — the F16/BF16 decode GEMV on tensor cores (mma.sync m16n8k16, f32
 * accumulate) for 1-8 batch rows; opt-in, SI_CUDA_GEMV_H16_MMA=1 (included by gemv.cu).
 *
 * Why: gemv_h16_kernel (gemv_fast.cuh) multiplies in f32 FMAs, one per weight per batch row:
 * at 2, 4 and 8 rows a chain of the 7B decode GEMVs runs at 79, 53 and 45 % of the H200's
 * bandwidth, bound by instruction issue. Here one instruction multiplies a 16-row x 16-k tile of
 * W by 16 k of all 8 batch rows. On the H200 (bench/RESULTS.md 2026-12-01 s14), 4 and 8
 * concurrent 7B F16 requests decode 38 % and 58 % faster with it, 2 alike, but one request alone
 * 7 % slower (in a chain of the decode GEMVs the FMA kernel streams at 96 % of the bandwidth
 * there, this one at 82 %). The engine promises a request the same output alone
 * and batched, so one kernel must serve every batch size 1-8, and the default stays the one
 * that is faster alone; a server that is rarely alone turns this one on.
 *
 * Work: a warp owns a tile of 16 rows and a slice of K (H16MMA_KS warps a tile, contiguous
 * slices, their partial sums added in slice order through shared memory: deterministic). It
 * copies the tile's chunks of 128 k (16 rows x 256 contiguous bytes, two rows a cp.async
 * instruction) into shared memory, H16MMA_S stages deep (the first issued before the PDL wait,
 * as weights no kernel writes), and builds the A fragments with ldmatrix; rows are padded to 272
 * bytes so that ldmatrix's 8 row addresses fall in distinct banks. Lane (g, c) = (lane / 4,
 * lane % 4) feeds batch row g's x, rounded to f16 (BF16 weights: bf16) as cuda_gemm rounds x for
 * cuBLASLt from 9 rows on. A batch column's sums do not depend on the other columns, so a row
 * gets the same bits at every batch size 1-8; whether a matrix takes this kernel depends on K
 * only (K % 128 == 0), never on the batch. Measured alternatives (same RESULTS section): each
 * lane loading its fragments straight from global memory (16-byte loads, 64 contiguous bytes a
 * row) streamed worse, 192-214 t/s alone. */

#include "backend/cuda/mma.cuh"

#define H16MMA_WARPS 8                      /* a CTA: one 16-row tile */
#define H16MMA_KS 8                         /* warps a tile */
#define H16MMA_S 2                          /* stages a warp */
#define H16MMA_CHUNK 128                    /* k a chunk */
#define H16MMA_ROWB (H16MMA_CHUNK * 2 + 16) /* bytes a staged row, padded */

template <bool BF>
__global__ void __launch_bounds__(H16MMA_WARPS * 32)
    gemv_h16mma_kernel(const uint8_t *__restrict__ W, int M, int K, const float *__restrict__ x,
                       int nb, float *__restrict__ y) {
    constexpr int KS = H16MMA_KS, S = H16MMA_S;
    static_assert(H16MMA_WARPS % KS == 0 && KS > 1, "KS divides the warps");
    extern __shared__ __align__(16) uint8_t h16mma_smem[]; /* [warps][S][16][H16MMA_ROWB] */
    __shared__ float part[H16MMA_WARPS][16][8];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % KS;
    const int g = lane / 4, c = lane % 4;
    const int row0 = (blockIdx.x * (H16MMA_WARPS / KS) + warp / KS) * 16;
    const int nchunk = K / H16MMA_CHUNK;
    const int j_beg = (int)((long long)nchunk * slice / KS);
    const int j_end = (int)((long long)nchunk * (slice + 1) / KS);
    uint8_t *ws = h16mma_smem + (size_t)warp * S * 16 * H16MMA_ROWB;
    const size_t rowb = (size_t)K * 2;
    /* copy chunk j into stage st: instruction i moves rows 2i, 2i + 1 (16 lanes x 16 bytes
     * each); one commit group per call, empty past the slice */
    auto issue = [&](int j, int st) {
        if (j < j_end) {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int r = 2 * i + lane / 16, p = lane % 16;
                const uint8_t *src = W + (size_t)min(row0 + r, M - 1) * rowb +
                                     (size_t)j * (H16MMA_CHUNK * 2) + 16 * p;
                si_cp_async16(ws + ((size_t)st * 16 + r) * H16MMA_ROWB + 16 * p, src);
            }
        }
        si_cp_async_commit();
    };
#pragma unroll
    for (int s = 0; s < S; s++)
        issue(j_beg + s, s);
    si_pdl_trigger();
    si_pdl_wait();
    const float *xg = x + (size_t)min(g, nb - 1) * K + 2 * c;
    /* ldmatrix row addresses: lane l gives row (l / 8 & 1) * 8 + l % 8 of matrix l / 8, whose k
     * offset is (l / 16) * 8 */
    const int lr = ((lane >> 3) & 1) * 8 + (lane & 7), lk = (lane >> 4) * 8;
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int st = 0;
    for (int j = j_beg; j < j_end; j++) {
        si_cp_async_wait<S - 1>(); /* chunk j has landed */
        __syncwarp();
        const uint8_t *base = ws + ((size_t)st * 16 + lr) * H16MMA_ROWB + 2 * lk;
#pragma unroll
        for (int k16 = 0; k16 < H16MMA_CHUNK / 16; k16++) {
            uint32_t a[4];
            si_ldsm_x4(a, base + 32 * k16);
            uint32_t b0 = 0u, b1 = 0u;
            if (g < nb) {
                const float *xk = xg + (size_t)j * H16MMA_CHUNK + 16 * k16;
                const float2 x0 = __ldg((const float2 *)xk), x1 = __ldg((const float2 *)(xk + 8));
                b0 = si_pack_h2<BF>(x0.x, x0.y);
                b1 = si_pack_h2<BF>(x1.x, x1.y);
            }
            si_mma_h16<BF>(d, a[0], a[1], a[2], a[3], b0, b1);
        }
        __syncwarp(); /* every lane is done with stage st: refill it */
        issue(j + S, st);
        if (++st == S) st = 0;
    }
    si_cp_async_wait<0>();
    auto store = [&](int r, int b, float v) {
        if (b < nb && row0 + r < M) y[(size_t)b * M + row0 + r] = v;
    };
    part[warp][g][2 * c] = d[0];
    part[warp][g][2 * c + 1] = d[1];
    part[warp][g + 8][2 * c] = d[2];
    part[warp][g + 8][2 * c + 1] = d[3];
    __syncthreads();
    if (slice != 0) return;
    for (int i = lane; i < 16 * 8; i += 32) {
        const int r = i / 8, b = i % 8;
        float v = part[warp][r][b];
#pragma unroll
        for (int s2 = 1; s2 < KS; s2++)
            v += part[warp + s2][r][b];
        store(r, b, v);
    }
}

/* Whether F16/BF16 GEMVs of 1-8 rows take this kernel (SI_CUDA_GEMV_H16_MMA=1, read once) for a
 * row length of K */
static bool gemv_h16mma_on(int K) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("SI_CUDA_GEMV_H16_MMA");
        on = e && e[0] == '1';
    }
    return on == 1 && K % H16MMA_CHUNK == 0;
}

template <bool BF>
static int gemv_h16mma_launch(const void *W, int M, int K, const float *x, int nb, float *y,
                              cudaStream_t st) {
    constexpr size_t smem = (size_t)H16MMA_WARPS * H16MMA_S * 16 * H16MMA_ROWB;
    auto kernel = gemv_h16mma_kernel<BF>;
    static bool raised = false; /* above 48 KB: opt in once per instance */
    if (!raised) {
        CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        raised = true;
    }
    si_launch_pdl(kernel, si_div_up(M, H16MMA_WARPS / H16MMA_KS * 16), H16MMA_WARPS * 32, smem, st,
                  (const uint8_t *)W, M, K, x, nb, y);
    return 0;
}
