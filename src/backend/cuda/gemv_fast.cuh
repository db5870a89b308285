/* gemv_fast.cuh — the decode GEMV paths that run near the HBM roofline (included by gemv.cu).
 *
 * F16/BF16 (gemv_h16_kernel): no shared memory. Rows are 16-byte aligned (K % 8 == 0), so each
 * lane streams its own 16-byte pieces of R rows straight to registers with ld.global.nc
 * (L1::no_allocate: the weights are read once), U pieces per row in flight per lane before the
 * first use; x (f32, L1-resident) is loaded once per piece and serves the R rows.
 *
 * Q8_0/Q4_0 (gemv_q8x_kernel, llama.cpp's mmvq idea): each CTA first quantises x to Q8_0 blocks
 * in shared memory (exactly the CPU backend's vec_dot_type: d = amax/127 rounded to fp16,
 * q = roundf(x / d)), so an activation costs 1 byte and the products are dp4a (4 MACs per
 * instruction; f32 FMAs and int->float conversions would make the 4-bit type issue-bound).
 * GGUF blocks (34 and 18 bytes) are not 16-byte aligned, so the weights go through a per-warp
 * double-buffered cp.async staging area: a segment = 32 "units" (one per lane; a unit is 4 Q4_0
 * blocks = 72 bytes or 2 Q8_0 blocks = 68 bytes), copied as the covering aligned 16-byte span,
 * then each lane reads its unit with conflict-free 8- or 4-byte shared loads (strides of 72 and
 * 68 bytes hit distinct banks) and decodes it in registers. The x copy in shared memory pads
 * each unit's bytes by 16 so the lanes' 16-byte loads are conflict-free too.
 * The grid is persistent (at most the resident CTAs) so the x quantisation is paid once per CTA. */

/* ---------------------------------------------------------------- F16 / BF16 */

__device__ __forceinline__ uint4 si_ldg_stream16(const void *p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

template <bool BF> __device__ __forceinline__ float2 si_h2x2f(uint32_t u) {
    if (BF) return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xFFFF0000u));
    return __half22float2(*(const __half2 *)&u);
}

#define GEMV_H16_WARPS 8
/* Rows per warp R and 16-byte loads per row and lane in flight U, per batch size. Chosen on the
 * H200 (tests/cuda/LAST_RUN.md): more rows per warp share the x loads, more loads per lane are
 * more bytes in flight, both cost registers. At batch 1, occupancy won: R = 1, U = 4 (36
 * registers) beat 2 x 8 (90) by 3-11 points on every shape. A second register buffer (chunk
 * i + 1 loading while chunk i is summed) measured 2-25 % slower, so there is none. */
#ifndef GEMV_H16_NB1
#define GEMV_H16_NB1 1, 4
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

template <bool BF, int NB, int R, int U>
__global__ void __launch_bounds__(GEMV_H16_WARPS * 32)
    gemv_h16_kernel(const uint4 *__restrict__ W, int M, int K, const float *__restrict__ x, int nb,
                    float *__restrict__ y) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = (blockIdx.x * GEMV_H16_WARPS + warp) * R;
    if (row0 >= M) return;
    const int n16 = K / 8; /* 16-byte pieces per row */
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
            for (int r = 0; r < R; r++) w[r][u] = c < n16 ? si_ldg_stream16(rowp[r] + c) : make_uint4(0, 0, 0, 0);
        }
    };
    auto compute = [&](const uint4(&w)[R][U], int c0) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + 32 * u;
            if (c >= n16) break;
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
    for (int c0 = lane; c0 < n16; c0 += 32 * U) {
        uint4 w[R][U];
        load(w, c0);
        compute(w, c0);
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const float v = si_warp_sum(acc[r][b]);
            if (lane == 0 && b < nb && row0 + r < M) y[(size_t)b * M + row0 + r] = v;
        }
}

template <bool BF, int NB, int R, int U>
static void gemv_h16_launch_nb(const void *W, int M, int K, const float *x, int nb, float *y,
                               cudaStream_t st) {
    const int grid = si_div_up(M, GEMV_H16_WARPS * R);
    gemv_h16_kernel<BF, NB, R, U><<<grid, GEMV_H16_WARPS * 32, 0, st>>>((const uint4 *)W, M, K, x, nb, y);
    CUDA_CHECK_LAUNCH();
}

template <bool BF>
static int gemv_h16_launch(const void *W, int M, int K, const float *x, int nb, float *y,
                           cudaStream_t st) {
    if (K % 8 != 0) return -1;
    if (nb <= 1) gemv_h16_launch_nb<BF, 1, GEMV_H16_NB1>(W, M, K, x, nb, y, st);
    else if (nb <= 2) gemv_h16_launch_nb<BF, 2, GEMV_H16_NB2>(W, M, K, x, nb, y, st);
    else if (nb <= 4) gemv_h16_launch_nb<BF, 4, GEMV_H16_NB4>(W, M, K, x, nb, y, st);
    else gemv_h16_launch_nb<BF, 8, GEMV_H16_NB8>(W, M, K, x, nb, y, st);
    return 0;
}

/* ---------------------------------------------------------------- Q8_0 / Q4_0 with q8 x */

/* A 32-bit word at byte offset o (even) of a register array; o is a compile-time constant once
 * the loops around are unrolled, so the array stays in registers. */
__device__ __forceinline__ uint32_t si_wget32(const uint32_t *w, int o) {
    return (o & 3) ? __funnelshift_r(w[o >> 2], w[(o >> 2) + 1], 8 * (o & 3)) : w[o >> 2];
}
__device__ __forceinline__ float si_wgeth(const uint32_t *w, int o) {
    return si_h2f((uint16_t)(w[o >> 2] >> (8 * (o & 3))));
}

/* UB blocks of BB bytes per unit (UBYTES = UB * BB bytes, WORDS 32-bit words); LD: the shared
 * load width (8 for 8-aligned units, 4 otherwise). dot(): a unit of one row against the q8 x of
 * those UB blocks (xw: UB * 8 words, xd/xs: UB scales and sums of q), added to acc. */
struct tqx_q4_0 {
    static constexpr int UB = 4, BB = 18, UBYTES = 72, WORDS = 18, LD = 8;
    __device__ static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        float s = 0.0f;
#pragma unroll
        for (int b = 0; b < UB; b++) {
            int sumi = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint32_t q = si_wget32(w, BB * b + 2 + 4 * j);
                sumi = __dp4a((int)(q & 0x0F0F0F0Fu), (int)xw[8 * b + j], sumi);
                sumi = __dp4a((int)((q >> 4) & 0x0F0F0F0Fu), (int)xw[8 * b + 4 + j], sumi);
            }
            s = fmaf(si_wgeth(w, BB * b) * xd[b], (float)(sumi - 8 * xs[b]), s);
        }
        return s;
    }
};

struct tqx_q8_0 {
    static constexpr int UB = 2, BB = 34, UBYTES = 68, WORDS = 17, LD = 4;
    __device__ static float dot(const uint32_t *w, const uint32_t *xw, const float *xd, const int *xs) {
        float s = 0.0f;
#pragma unroll
        for (int b = 0; b < UB; b++) {
            int sumi = 0;
#pragma unroll
            for (int j = 0; j < 8; j++) sumi = __dp4a((int)si_wget32(w, BB * b + 2 + 4 * j), (int)xw[8 * b + j], sumi);
            s = fmaf(si_wgeth(w, BB * b) * xd[b], (float)sumi, s);
        }
        (void)xs;
        return s;
    }
};

#define GEMV_Q8X_MAX_K 14336 /* nb = 8 still fits the 227 KB of shared memory */
static inline bool gemv_q8x_ok(int K) { return K % 128 == 0 && K <= GEMV_Q8X_MAX_K; }

template <class T> struct q8x_layout {
    static constexpr int XUB = 32 * T::UB + 16;                        /* x bytes per unit, padded */
    static constexpr int SEG = ((32 * T::UBYTES + 16 + 15) / 16) * 16; /* one row's staged segment */
};

/* shared memory: xq [nb][units][XUB] | xd f32 [nb][K/32] | xs i32 [nb][K/32] | stages */
template <class T> static size_t q8x_smem_bytes(int K, int nb, int warps, int R) {
    const size_t units = K / (32 * T::UB), nblk = K / 32;
    return (size_t)nb * units * q8x_layout<T>::XUB + (size_t)nb * nblk * 8 +
           (size_t)warps * 2 * R * q8x_layout<T>::SEG;
}

template <class T, int NB, int R>
__global__ void __launch_bounds__(256)
    gemv_q8x_kernel(const uint8_t *__restrict__ W, int M, int K, size_t row_bytes,
                    const float *__restrict__ x, int nb, float *__restrict__ y) {
    constexpr int XUB = q8x_layout<T>::XUB, SEG = q8x_layout<T>::SEG;
    extern __shared__ __align__(16) uint8_t smem[];
    const int nwarps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int units = K / (32 * T::UB), nblk = K / 32, nseg = (units + 31) / 32;
    uint8_t *xq = smem;
    float *xd = (float *)(smem + (size_t)nb * units * XUB);
    int *xs = (int *)(xd + (size_t)nb * nblk);
    uint8_t *sw = (uint8_t *)(xs + (size_t)nb * nblk) + (size_t)warp * 2 * R * SEG;

    const int gstep = gridDim.x * nwarps; /* row groups of R rows, strided over all warps */
    int rg = blockIdx.x * nwarps + warp, seg = 0;

    auto issue = [&](int g, int sg, int stage) {
        const int u0 = sg * 32, n = min(32, units - u0);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int row = min(g * R + r, M - 1);
            const uintptr_t s = (uintptr_t)(W + (size_t)row * row_bytes + (size_t)u0 * T::UBYTES);
            const uintptr_t a0 = s & ~(uintptr_t)15, a1 = (s + (size_t)n * T::UBYTES + 15) & ~(uintptr_t)15;
            uint8_t *dst = sw + (stage * R + r) * SEG;
            const int nc = (int)((a1 - a0) / 16);
            for (int i = lane; i < nc; i += 32) si_cp_async16(dst + 16 * i, (const void *)(a0 + 16 * i));
        }
        si_cp_async_commit();
    };
    /* the first weights are in flight while x is quantised */
    if (rg * R < M) issue(rg, 0, 0);

    /* x -> q8_0 in shared memory: 8 lanes per 32-block, one float4 each */
    {
        const int total = nb * nblk, sub = lane & 7;
        constexpr int UNR = 4;
        for (int wb = warp * 4; wb < total; wb += nwarps * 4 * UNR) { /* warp-uniform */
            const int base = wb + (lane >> 3);
            float4 v[UNR];
#pragma unroll
            for (int i = 0; i < UNR; i++) {
                const int blk = base + i * nwarps * 4;
                const int bi = blk / nblk, bb = blk - bi * nblk;
                v[i] = blk < total ? __ldg((const float4 *)(x + (size_t)bi * K + 32 * bb + 4 * sub))
                                   : make_float4(0.f, 0.f, 0.f, 0.f);
            }
#pragma unroll
            for (int i = 0; i < UNR; i++) {
                const int blk = base + i * nwarps * 4;
                float amax = fmaxf(fmaxf(fabsf(v[i].x), fabsf(v[i].y)), fmaxf(fabsf(v[i].z), fabsf(v[i].w)));
#pragma unroll
                for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
                const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
                const int q0 = (int)roundf(v[i].x * id), q1 = (int)roundf(v[i].y * id);
                const int q2 = (int)roundf(v[i].z * id), q3 = (int)roundf(v[i].w * id);
                int sum = q0 + q1 + q2 + q3;
#pragma unroll
                for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
                if (blk < total) {
                    const int bi = blk / nblk, bb = blk - bi * nblk, u = bb / T::UB, ub = bb % T::UB;
                    const uint32_t packed = (uint32_t)(q0 & 0xFF) | ((uint32_t)(q1 & 0xFF) << 8) |
                                            ((uint32_t)(q2 & 0xFF) << 16) | ((uint32_t)(q3 & 0xFF) << 24);
                    *(uint32_t *)(xq + ((size_t)bi * units + u) * XUB + 32 * ub + 4 * sub) = packed;
                    if (sub == 0) {
                        xd[blk] = __half2float(__float2half_rn(d));
                        xs[blk] = sum;
                    }
                }
            }
        }
    }
    __syncthreads();
    if (rg * R >= M) return; /* no CTA-wide barrier below */

    float acc[R][NB];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) acc[r][b] = 0.0f;

    for (int stage = 0;; stage ^= 1) {
        /* next item: the next segment of this row group, or the next row group */
        const int nrg = seg + 1 < nseg ? rg : rg + gstep, nsg = seg + 1 < nseg ? seg + 1 : 0;
        const bool more = nrg * R < M;
        if (more) {
            issue(nrg, nsg, stage ^ 1);
            si_cp_async_wait<1>();
        } else {
            si_cp_async_wait<0>();
        }
        __syncwarp();
        const int u = seg * 32 + lane;
        if (u < units) {
            uint32_t w[R][T::WORDS];
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int row = min(rg * R + r, M - 1);
                const uintptr_t s = (uintptr_t)(W + (size_t)row * row_bytes + (size_t)seg * 32 * T::UBYTES);
                const uint8_t *p = sw + (stage * R + r) * SEG + (s & 15) + (size_t)lane * T::UBYTES;
                if (T::LD == 8) {
#pragma unroll
                    for (int i = 0; i < T::WORDS / 2; i++) {
                        const uint2 v = ((const uint2 *)p)[i];
                        w[r][2 * i] = v.x;
                        w[r][2 * i + 1] = v.y;
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < T::WORDS; i++) w[r][i] = ((const uint32_t *)p)[i];
                }
            }
#pragma unroll
            for (int b = 0; b < NB; b++) {
                if (b >= nb) break;
                uint32_t xw[8 * T::UB];
                const uint4 *xp = (const uint4 *)(xq + ((size_t)b * units + u) * XUB);
#pragma unroll
                for (int i = 0; i < 2 * T::UB; i++) {
                    const uint4 v = xp[i];
                    xw[4 * i] = v.x; xw[4 * i + 1] = v.y; xw[4 * i + 2] = v.z; xw[4 * i + 3] = v.w;
                }
                float d[T::UB];
                int sq[T::UB];
#pragma unroll
                for (int i = 0; i < T::UB; i++) {
                    d[i] = xd[(size_t)b * nblk + u * T::UB + i];
                    sq[i] = xs[(size_t)b * nblk + u * T::UB + i];
                }
#pragma unroll
                for (int r = 0; r < R; r++) acc[r][b] += T::dot(w[r], xw, d, sq);
            }
        }
        __syncwarp();
        if (seg == nseg - 1) {
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    const float v = si_warp_sum(acc[r][b]);
                    acc[r][b] = 0.0f;
                    if (lane == 0 && b < nb && rg * R + r < M) y[(size_t)b * M + rg * R + r] = v;
                }
        }
        if (!more) break;
        rg = nrg;
        seg = nsg;
    }
}

template <class T, int NB, int R>
static int gemv_q8x_launch_nb(const void *W, int M, int K, const float *x, int nb, float *y,
                              cudaStream_t st) {
    static int smem_optin = 0, n_sm = 0; /* per instance: the attribute is per kernel */
    if (!smem_optin) {
        int dev;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
        int optin;
        CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        CUDA_CHECK(cudaFuncSetAttribute(gemv_q8x_kernel<T, NB, R>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
        smem_optin = optin;
    }
    int warps = 8;
    size_t smem = q8x_smem_bytes<T>(K, nb, warps, R);
    if (smem > (size_t)smem_optin) {
        warps = 4;
        smem = q8x_smem_bytes<T>(K, nb, warps, R);
        if (smem > (size_t)smem_optin) return -1;
    }
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_q8x_kernel<T, NB, R>, warps * 32, smem));
    const int need = si_div_up(M, warps * R);
    const int grid = min(need, max(1, per_sm) * n_sm);
    const size_t row_bytes = (size_t)(K / 32) * T::BB;
    gemv_q8x_kernel<T, NB, R><<<grid, warps * 32, smem, st>>>((const uint8_t *)W, M, K, row_bytes, x, nb, y);
    CUDA_CHECK_LAUNCH();
    return 0;
}

template <class T>
static int gemv_q8x_launch(const void *W, int M, int K, const float *x, int nb, float *y,
                           cudaStream_t st) {
    if (!gemv_q8x_ok(K)) return -1;
    /* batch 1: long rows (K = 11008) go faster with 2 rows per warp (half the CTAs quantise x;
     * 2 rows in flight per segment), short ones with 1 (more warps) */
    if (nb <= 1 && K >= 8192) return gemv_q8x_launch_nb<T, 1, 2>(W, M, K, x, nb, y, st);
    if (nb <= 1) return gemv_q8x_launch_nb<T, 1, 1>(W, M, K, x, nb, y, st);
    if (nb <= 2) return gemv_q8x_launch_nb<T, 2, 1>(W, M, K, x, nb, y, st);
    if (nb <= 4) return gemv_q8x_launch_nb<T, 4, 2>(W, M, K, x, nb, y, st);
    return gemv_q8x_launch_nb<T, 8, 2>(W, M, K, x, nb, y, st);
}
