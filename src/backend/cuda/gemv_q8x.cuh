/* gemv_q8x.cuh — decode GEMV of the quantised types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
 * Q6_K) with integer dot products against a q8 copy of x (llama.cpp's mmvq idea; included by
 * gemv.cu).
 *
 * Each CTA first quantises x to Q8_0 blocks in shared memory (exactly the CPU backend's
 * quantize_row_q8_0_ref: d = amax / 127 rounded to fp16, q = roundf(x / d)), with the integer
 * sum of each block's q kept beside d for the min/offset terms. An activation then costs one
 * byte and the products are dp4a (4 MACs an instruction; f32 FMAs and int->float conversions
 * would make the 4-bit types issue-bound). NOTE: the CPU backend quantises x to Q8_1 for Q4_1
 * (same q and d; the sum as fp16(d * sum)) and to Q8_K for the k-quants (one f32 scale per 256);
 * Q8_0 blocks of 32 for every type keep one quantiser and layout here and are at least as
 * precise (a scale per 32, exact integer sums).
 *
 * GGUF blocks (34, 18, 20, 144, 210 bytes) are mostly not 16-byte aligned, so the weights go
 * through a per-warp ring of S shared-memory stages (2 by default): a segment = 32 "units" of a
 * row (one per lane, gemv_q8x_units.cuh), then each lane reads its unit with conflict-free shared
 * loads and decodes it in registers. Where every segment is 16-byte aligned and whole 16-byte
 * words (K % 256 == 0: every model's rows but Q6_K's odd tails), lane 0 copies a stage's rows
 * with one cp.async.bulk each, completing on the stage's mbarrier; elsewhere the 32 lanes copy
 * the covering aligned span with 16-byte cp.async. The bulk copies took Llama-2-7B tg128 from
 * 663-670 to 689-693 t/s (Q4_0), 650-654 to 681-683 (Q4_K), 444 to 447-449 (Q8_0), same device
 * call (bench/RESULTS.md 2026-12-02 s26): the 16-byte copies cost the warp about a third of its
 * instructions (s16's Nsight Compute source counters). With bulk copies the ring's last free
 * stage is issued right after x's loads (fill_after_x, below: Q4_0 tg128 +3 %, s27). The x copy in
 * shared memory pads each unit's bytes by 16 so the lanes' 16-byte loads are conflict-free too.
 * The grid is persistent (at most the resident CTAs) so the x quantisation is paid once per CTA;
 * warps walk row groups of R rows (R rows share each x load). */
#include <type_traits>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/gemv_q8x_units.cuh"
#include "backend/cuda/gemv_trace.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8x_row.cuh"

#define GEMV_Q8X_MAX_K 14336 /* nb = 8 still fits the 227 KB of shared memory */
template <class T> static inline bool gemv_q8x_ok(int K) {
    return K % T::BE == 0 && K % 128 == 0 && K <= GEMV_Q8X_MAX_K;
}

template <class T> struct q8x_layout {
    static constexpr int XUB = 32 * T::UB + 16;                        /* x bytes per unit, padded */
    static constexpr int SEG = ((32 * T::UBYTES + 16 + 15) / 16) * 16; /* one row's staged segment */
};

/* Q8X_GLU's blocks of 32 outputs a CTA takes at most (one slot of 32 floats each) */
#define Q8X_GLU_SLOTS 8
#define Q8X_GLU_BYTES (Q8X_GLU_SLOTS * 32 * 4)

/* shared memory: xq [nb][units][XUB] | xd f32 [nb][K/32] | xs i32 [nb][K/32] | per warp S
 * stages of R row segments | per warp S mbarriers (bulk copies) | Q8X_GLU: its slots */
template <class T>
static size_t q8x_smem_bytes(int K, int nb, int warps, int R, int S, bool glu = false) {
    const size_t units = K / (32 * T::UB), nblk = K / 32;
    return (size_t)nb * units * q8x_layout<T>::XUB + (size_t)nb * nblk * 8 +
           (size_t)warps * S * (R * q8x_layout<T>::SEG + 8) + (glu ? Q8X_GLU_BYTES : 0);
}

/* How a warp's stages are filled (gemv_q8x_body's copy): Q8X_COPY_BULK by bulk copies, where
 * every segment is 16-byte aligned and of whole 16-byte words (K % 256 == 0 gives it for every
 * type but Q6_K's odd tails), else 16-byte cp.async. Q8X_COPY_FILL_AFTER_X (bulk only): the
 * ring's last free stage is issued right after x's loads, not when the consumer starts (below).
 * Timing knobs (read at the first call): SI_CUDA_GEMV_Q8X_BULK=0, cp.async always;
 * SI_CUDA_GEMV_Q8X_AFTER_X=0, no stage issued after x's loads. */
enum { Q8X_COPY_BULK = 1, Q8X_COPY_FILL_AFTER_X = 2 };
template <class T> static int q8x_copy_mode(const void *W, int K) {
    static int bulk = -1, after_x = 0;
    if (bulk < 0) {
        const char *e = getenv("SI_CUDA_GEMV_Q8X_BULK"), *a = getenv("SI_CUDA_GEMV_Q8X_AFTER_X");
        bulk = !(e && !strcmp(e, "0"));
        after_x = !(a && !strcmp(a, "0"));
    }
    const size_t units = K / (32 * T::UB), row_bytes = units * T::UBYTES;
    if (!bulk || (uintptr_t)W % 16 || row_bytes % 16 || (units % 32) * T::UBYTES % 16) return 0;
    return Q8X_COPY_BULK | (after_x ? Q8X_COPY_FILL_AFTER_X : 0);
}

/* x (nb rows of K floats, ld apart: 0 for K) -> q8_0, 8 lanes per block of 32 (a float4 each); the
 * caller's store(row, block, sub, q, d, sum) places 4 packed int8 q (elements 4 sub .. 4 sub + 3 of
 * the block) and, from the lane with sub == 0, the block's fp16-rounded d and sum of q. issued()
 * runs once per warp, right after its first x loads are issued and before their use: the caller
 * issues its weight copies there, so that they queue behind x (x is needed first). */
template <int NWARPS = 0 /* the warps that run it: 0 every warp of the CTA, else warps 0.. */,
          class F, class G>
__device__ __forceinline__ void q8x_quantize_x(const float *__restrict__ x, int K, int nb, F issued,
                                               G store, int ld = 0) {
    constexpr int UNR = 4;
    const int nwarps = NWARPS ? NWARPS : blockDim.x / 32, warp = threadIdx.x / 32,
              lane = threadIdx.x % 32;
    const int nblk = K / 32, total = nb * nblk, sub = lane & 7;
    const size_t rs = ld ? ld : K;
    bool first = true;
    for (int wb = warp * 4; wb < total; wb += nwarps * 4 * UNR) { /* warp-uniform */
        const int base = wb + (lane >> 3);
        float4 v[UNR];
#pragma unroll
        for (int i = 0; i < UNR; i++) {
            const int blk = base + i * nwarps * 4;
            const int bi = blk / nblk, bb = blk - bi * nblk;
            v[i] = blk < total ? __ldg((const float4 *)(x + bi * rs + 32 * bb + 4 * sub))
                               : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        if (first) {
            issued();
            first = false;
        }
#pragma unroll
        for (int i = 0; i < UNR; i++) {
            const int blk = base + i * nwarps * 4;
            float d;
            int sum;
            const uint32_t packed = q8x_block4(v[i], &d, &sum);
            if (blk < total) {
                const int bi = blk / nblk, bb = blk - bi * nblk;
                store(bi, bb, sub, packed, d, sum);
            }
        }
    }
    if (first) issued(); /* this warp had no x blocks */
}

/* Where x comes from (XIN):
 * Q8X_F32: nb rows of K floats, quantised by every CTA;
 * Q8X_PRE: already quantised, nb rows of CUDA_Q8X_ROW_BYTES(K) (cuda_ops.h), so the CTA copies
 *   it instead of quantising it: every CTA used to read and quantise all of x (for 4096-row
 *   shapes nearly as many bytes from L2 as the weights from HBM);
 * Q8X_NORM: one row of K floats that the norm before the matmul has not seen yet: every CTA adds
 *   the residual, normalises and quantises the row itself (q8x_norm_in), so that the decode
 *   chain has no norm kernel between this GEMV and the one before it. The same arithmetic as
 *   rmsnorm_kernel's (norm.cuh) at the same thread count: the same bits as norm + Q8X_PRE. */
enum { Q8X_F32, Q8X_PRE, Q8X_NORM };

/* Q8X_NORM's inputs: the row is x + add (add NULL: x), normalised with weight w and eps; CTA 0
 * writes x + add to x_out (not in place: the other CTAs still read x) unless add is NULL.
 * glu_q8 (the GLU kernel, gemv_q8x_body): where silu(gate) * up goes, quantised. */
struct q8x_norm_in {
    const float *add, *w;
    float *x_out;
    float eps;
    uint8_t *glu_q8;
};

/* copy (q8x_copy_mode): with Q8X_COPY_BULK lane 0 of each warp fills a stage with one
 * cp.async.bulk per row, which completes on the stage's mbarrier, instead of 32 lanes issuing
 * 16-byte cp.async copies of the covering span (the same bytes at the same place: the segments
 * are aligned).
 * GLU (Q8X_NORM, R = 2, batch 1): W is [gate; up], M = 2 n rows, and the GEMV ends in SwiGLU:
 * output o's two rows are gate row o and up row n + o, and instead of y it writes silu(gate) x
 * up quantised into nin.glu_q8 (CUDA_Q8X_ROW_BYTES(n) layout), for the down GEMV: the SwiGLU
 * kernel between them goes. The q8 blocks of 32 outputs are what ties warps together, so a CTA
 * takes whole blocks (dealt round-robin over the CTAs), its warps put the outputs into shared
 * memory, and once all are in (one CTA barrier at the end) a warp a block quantises it, as the
 * SwiGLU kernel would: the same bits. */
template <class T, int NB, int R, int S, int XIN, int NH = 1 /* Q8X_NORM: CTA of NH x 256 */,
          bool GLU = false>
__device__ __forceinline__ void gemv_q8x_body(const uint8_t *__restrict__ W, int M, int K,
                                              size_t row_bytes, const float *__restrict__ x, int nb,
                                              float *__restrict__ y, q8x_norm_in nin, int copy) {
    constexpr int XUB = q8x_layout<T>::XUB, SEG = q8x_layout<T>::SEG, SEGBYTES = 32 * T::UBYTES;
    extern __shared__ __align__(16) uint8_t smem[];
    const int nwarps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int units = K / (32 * T::UB), nblk = K / 32, nseg = (units + 31) / 32;
    const bool bulk = copy & Q8X_COPY_BULK, fill_after_x = bulk && (copy & Q8X_COPY_FILL_AFTER_X);
    uint8_t *xq = smem;
    float *xd = (float *)(smem + (size_t)nb * units * XUB);
    int *xs = (int *)(xd + (size_t)nb * nblk);
    uint8_t *sw = (uint8_t *)(xs + (size_t)nb * nblk) + (size_t)warp * S * R * SEG;
    uint64_t *bar_all =
        (uint64_t *)((uint8_t *)(xs + (size_t)nb * nblk) + (size_t)nwarps * S * R * SEG);
    uint64_t *bar = bar_all + warp * S; /* this warp's stages' barriers */
    static_assert(!GLU || (XIN == Q8X_NORM && R == 2), "GLU: the norm GEMV's gate and up rows");
    float(*glu_h)[32] = (float(*)[32])(bar_all + nwarps * S); /* GLU: the CTA's blocks */
    const int n_glu = M / 2;
    q8x_trace tr; /* empty unless GEMV_Q8X_TRACE */
    tr.start();
    if (bulk) {
        if (lane == 0)
            for (int s = 0; s < S; s++)
                si_mbar_init(bar + s, 1);
        __syncwarp();
    }

    /* A warp's work is a sequence of items (row group g of R rows, segment sg): all segments of
     * group g, then group g + gstep (groups strided over all warps of the grid). Dealt CTA-major,
     * the last, partial round fills the first CTAs whole, and the others end a group earlier:
     * their SMs free up for the next kernel's CTAs, which start their loads there. Dealing it
     * warp-major instead (group g to warp g / gridDim.x of CTA g % gridDim.x: a few warps of every
     * CTA in the last round) kept every SM busy to the end and was slower on an H100 (bench/
     * RESULTS.md 2026-12-06 s53: tg128 Q4_0 619.6 -> 610.8 t/s, Q4_K 607.9 -> 599.1). */
    const int gstep = gridDim.x * nwarps;
    /* GLU: group g is output g, and warp w of CTA c takes outputs 32 b + h nwarps + w of blocks
     * b = c, c + gridDim.x, ..., h = 0 .. 32 / nwarps - 1 */
    auto next_group = [&](int g) {
        if constexpr (GLU) {
            g += nwarps;
            return g % 32 < nwarps ? g + ((int)gridDim.x - 1) * 32 : g; /* the CTA's next block */
        } else {
            return g + gstep;
        }
    };
    auto live = [&](int g) { return GLU ? g < n_glu : g * R < M; };
    auto next = [&](int &g, int &sg) {
        if (++sg == nseg) {
            sg = 0;
            g = next_group(g);
        }
    };
    /* first byte of segment sg of row r of group g (rows past M repeat the last row) */
    auto seg_src = [&](int g, int r, int sg) {
        const int row = GLU ? g + r * n_glu : min(g * R + r, M - 1);
        return (uintptr_t)(W + (size_t)row * row_bytes + (size_t)sg * SEGBYTES);
    };
    /* the producer: issues item (pg, psg) into stage ps and moves on; with cp.async, one commit
     * group per call (empty past the last item), so that wait_group<S - 1> always means "the
     * oldest is in"; with bulk copies, the stage's mbarrier says it */
    const int g0 = GLU ? blockIdx.x * 32 + warp : blockIdx.x * nwarps + warp;
    int pg = g0, psg = 0, ps = 0;
    auto produce = [&]() {
        if (live(pg) && bulk) {
            if (lane == 0) {
                const uint32_t bytes = (uint32_t)min(32, units - psg * 32) * T::UBYTES;
                si_mbar_expect_tx(bar + ps, R * bytes);
#pragma unroll
                for (int r = 0; r < R; r++)
                    si_bulk_copy(sw + (ps * R + r) * SEG, (const void *)seg_src(pg, r, psg), bytes,
                                 bar + ps);
            }
            next(pg, psg);
        } else if (live(pg)) {
            const int n = min(32, units - psg * 32);
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uintptr_t s = seg_src(pg, r, psg);
                /* n * UBYTES is whole: Q6_K's odd UBYTES comes with an even unit count per row */
                const uintptr_t a0 = s & ~(uintptr_t)15, a1 = (s + (size_t)n * T::UBYTES + 15) & ~(uintptr_t)15;
                uint8_t *dst = sw + (ps * R + r) * SEG;
                const int nc = (int)((a1 - a0) / 16);
                for (int i = lane; i < nc; i += 32)
                    si_cp_async16(dst + 16 * i, (const void *)(a0 + 16 * i));
            }
            next(pg, psg);
        }
        if (!bulk) si_cp_async_commit();
        if (++ps == S) ps = 0;
    };
    /* Launched with PDL (pdl.cuh): the first S - 1 items, weights that no kernel writes, are
     * issued before the wait, while the kernel before this one may still run; they stay in
     * flight while x is quantised. With fill_after_x the last free stage follows right after x's
     * loads are issued (not before the wait: x's loads, which queue behind the weights already
     * asked for, would wait for it too), so that HBM has work while x arrives and is prepared.
     * A per-CTA trace of the Llama-2-7B GEMV chain (bench/gemv_trace.py, bench/RESULTS.md
     * 2026-12-02 s27) put x in shared memory 1.1-1.4 us (x quantised ahead) and ~3 us (the norm
     * inside) after the PDL wait, itself 1.2-1.8 us after the kernel before had finished, with
     * the S - 1 stages landed long before; the whole ring before the wait made x later still.
     * Measured, same call, tg128: Q4_0 682 -> 703 t/s, Q4_K 670 -> 689, Q8_0 428 -> 432. */
#pragma unroll
    for (int i = 0; i < S - 1; i++) produce();
    /* Q8X_NORM: thread t = threadIdx.x % NORM_THREADS holds the row's float4 j = t + k
     * NORM_THREADS; with NH = 2 parts (a CTA of 2 NORM_THREADS threads) thread
     * t + h NORM_THREADS holds half h of them (norm.cuh's order): slot i < kn is k = k0 + i */
    constexpr int NV = NORM_VEC / NH;
    const int nt = threadIdx.x % NORM_THREADS, nh = threadIdx.x / NORM_THREADS, n4 = K / 4;
    const int kn = NH == 1 ? NORM_VEC : norm_half(n4), k0 = nh * kn;
    float4 g[NV]; /* Q8X_NORM: the norm weight, which no kernel writes, also before it */
    if (XIN == Q8X_NORM) {
#pragma unroll
        for (int i = 0; i < NV; i++)
            if (i < kn && nt + (k0 + i) * NORM_THREADS < n4)
                g[i] = __ldg((const float4 *)nin.w + nt + (k0 + i) * NORM_THREADS);
    }
    si_pdl_trigger();
    si_pdl_wait();
    tr.waited();
    if (XIN == Q8X_NORM) {
        /* rmsnorm_kernel's row (norm.cuh) quantised as q8x_quantize_x would: 8 consecutive
         * lanes hold one block of 32. With NH = 2 each half of a thread's float4 is loaded,
         * summed and quantised by its own thread: a CTA of 16 warps, one an SM, does the work
         * that two CTAs of 8 did twice */
        __shared__ float red[NORM_RED];
        float4 v[NV];
        norm_row_load_slots(v, (const float4 *)x, (const float4 *)nin.add, n4, nt, k0, kn, [&] {
            if (fill_after_x) produce();
        });
        const int kh = NH == 1 ? norm_half(n4) : kn;
        const float s0 = norm_row_sq(v, n4, nt, k0, 0, kh);
        const float s1 = NH == 1 ? norm_row_sq(v, n4, nt, k0, kh, NV) : 0.0f;
        tr.loaded(s0);
        if (nin.add && blockIdx.x == 0) {
#pragma unroll
            for (int i = 0; i < NV; i++)
                if (i < kn && nt + (k0 + i) * NORM_THREADS < n4)
                    ((float4 *)nin.x_out)[nt + (k0 + i) * NORM_THREADS] = v[i];
        }
        const float scale = norm_row_scale(s0, s1, NH == 1, red, K, nin.eps);
        tr.scaled();
#pragma unroll
        for (int i = 0; i < NV; i++) {
            const int j = nt + (k0 + i) * NORM_THREADS;
            if (i >= kn || j >= n4) break;
            float d;
            int sum;
            const uint32_t q = q8x_block4(norm_out4(v[i], scale, g[i]), &d, &sum);
            const int bb = j / 8, u = bb / T::UB, ub = bb % T::UB, sub = j & 7;
            *(uint32_t *)(xq + (size_t)u * XUB + 32 * ub + 4 * sub) = q;
            if (sub == 0) {
                xd[bb] = d;
                xs[bb] = sum;
            }
        }
    } else if (XIN == Q8X_PRE) {
        /* x came quantised (CUDA_Q8X_ROW_BYTES layout, from the norm before): copy it into the
         * padded layout; this group is the newest, so waiting for it waits for the weights too */
        const uint8_t *xg = (const uint8_t *)x;
        const size_t rs = CUDA_Q8X_ROW_BYTES(K);
        const int qc = K / 16, dc = nblk / 4, per_row = qc + 2 * dc;
        for (int i = threadIdx.x; i < nb * per_row; i += blockDim.x) {
            const int b = i / per_row, j = i - b * per_row;
            const uint8_t *src = xg + (size_t)b * rs;
            uint8_t *dst;
            if (j < qc) {
                const int u = j / (2 * T::UB), c = j - u * 2 * T::UB;
                dst = xq + ((size_t)b * units + u) * XUB + 16 * c;
                src += 16 * (size_t)j;
            } else if (j < qc + dc) {
                dst = (uint8_t *)(xd + (size_t)b * nblk) + 16 * (j - qc);
                src += K + 16 * (size_t)(j - qc);
            } else {
                dst = (uint8_t *)(xs + (size_t)b * nblk) + 16 * (j - qc - dc);
                src += K + 4 * (size_t)nblk + 16 * (size_t)(j - qc - dc);
            }
            si_cp_async16(dst, src);
        }
        si_cp_async_commit();
        if (fill_after_x) produce(); /* bulk: not a cp.async group */
        si_cp_async_wait<0>();
    } else {
        q8x_quantize_x(
            x, K, nb,
            [&]() {
                if (fill_after_x) produce();
            },
            [&](int bi, int bb, int sub, uint32_t q, float d, int sum) {
                const int u = bb / T::UB, ub = bb % T::UB;
                *(uint32_t *)(xq + ((size_t)bi * units + u) * XUB + 32 * ub + 4 * sub) = q;
                if (sub == 0) {
                    xd[(size_t)bi * nblk + bb] = d;
                    xs[(size_t)bi * nblk + bb] = sum;
                }
            });
    }
    __syncthreads();
    tr.x_ready();
    int rg = g0, seg = 0, stage = 0;
    if (!live(rg)) { /* no CTA-wide barrier below (but the trace's; GLU: every warp is live) */
        tr.end();
        return;
    }

    float acc[R][NB];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) acc[r][b] = 0.0f;

    uint32_t phase = 0; /* bulk: bit s, the parity of stage s's next phase */
    bool ring_full = fill_after_x;
    for (;;) {
        /* into the stage consumed in the previous iteration (with fill_after_x, the first
         * iteration's is in flight already) */
        if (!ring_full) produce();
        ring_full = false;
        if (bulk) {
            si_mbar_wait(bar + stage, (phase >> stage) & 1);
            phase ^= 1u << stage;
        } else {
            si_cp_async_wait<S - 1>();
        }
        __syncwarp();
        const int u = seg * 32 + lane;
        if (u < units) {
            uint32_t w[R][T::WORDS];
#pragma unroll
            for (int r = 0; r < R; r++)
                T::load(sw + (stage * R + r) * SEG + (seg_src(rg, r, seg) & 15), lane, w[r]);
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
                const size_t xi = (size_t)b * nblk + u * T::UB;
                if constexpr (T::UB == 4) { /* 16-byte aligned: nblk % 4 == 0, XUB % 16 == 0 */
                    const float4 dv = *(const float4 *)(xd + xi);
                    const int4 sv = *(const int4 *)(xs + xi);
                    d[0] = dv.x, d[1] = dv.y, d[2] = dv.z, d[3] = dv.w;
                    sq[0] = sv.x, sq[1] = sv.y, sq[2] = sv.z, sq[3] = sv.w;
                } else if constexpr (T::UB == 2) { /* 8-byte aligned */
                    const float2 dv = *(const float2 *)(xd + xi);
                    const int2 sv = *(const int2 *)(xs + xi);
                    d[0] = dv.x, d[1] = dv.y;
                    sq[0] = sv.x, sq[1] = sv.y;
                } else {
#pragma unroll
                    for (int i = 0; i < T::UB; i++) {
                        d[i] = xd[xi + i];
                        sq[i] = xs[xi + i];
                    }
                }
#pragma unroll
                for (int r = 0; r < R; r++)
                    acc[r][b] = q8x_dot_add<T>(acc[r][b], w[r], xw, d, sq);
            }
        }
        __syncwarp(); /* this stage is refilled by the next produce() */
        if (seg == nseg - 1) {
            if constexpr (GLU) {
                const float gate = si_warp_sum(acc[0][0]), up = si_warp_sum(acc[1][0]);
                acc[0][0] = acc[1][0] = 0.0f;
                const int slot = (rg / 32 - (int)blockIdx.x) / (int)gridDim.x;
                if (lane == 0) glu_h[slot][rg % 32] = si_silu_mul(gate, up);
            } else {
#pragma unroll
                for (int r = 0; r < R; r++)
#pragma unroll
                    for (int b = 0; b < NB; b++) {
                        const float v = si_warp_sum(acc[r][b]);
                        acc[r][b] = 0.0f;
                        if (lane == 0 && b < nb && rg * R + r < M)
                            y[(size_t)b * M + rg * R + r] = v;
                    }
            }
        }
        next(rg, seg);
        if (!live(rg)) break;
        if (++stage == S) stage = 0;
    }
    si_cp_async_wait<0>(); /* no copy outlives the warp (the trailing groups are empty) */
    if constexpr (GLU) {
        /* every output of the CTA's blocks in: warp s quantises block blockIdx.x + s gridDim.x
         * (q8x_row_store4's arithmetic, 8 lanes of 4; the other lanes repeat them) */
        __syncthreads();
        const int b = blockIdx.x + warp * gridDim.x;
        if (warp < Q8X_GLU_SLOTS && b < n_glu / 32) {
            float d;
            int sum;
            const uint32_t q = q8x_block4(((const float4 *)glu_h[warp])[lane & 7], &d, &sum);
            if (lane < 8) *(uint32_t *)(nin.glu_q8 + 32 * b + 4 * lane) = q;
            if (lane == 0) q8x_row_store_scale(nin.glu_q8, n_glu, 32 * b, d, sum);
        }
    }
    tr.end();
}

template <class T, int NB, int R, int S, int XIN>
__global__ void __launch_bounds__(256)
    gemv_q8x_kernel(const uint8_t *__restrict__ W, int M, int K, size_t row_bytes,
                    const float *__restrict__ x, int nb, float *__restrict__ y, int copy) {
    gemv_q8x_body<T, NB, R, S, XIN>(W, M, K, row_bytes, x, nb, y, q8x_norm_in{}, copy);
}

/* Q8X_NORM's kernel (the others do without its extra parameter), of NH x NORM_THREADS threads;
 * with NH = 1 two CTAs an SM (at most 128 registers a thread). GLU: gemv_q8x_body's. */
template <class T, int R, int S, int NH, bool GLU = false>
__global__ void __launch_bounds__((NH * NORM_THREADS), 2 / NH)
    gemv_q8x_norm_kernel(const uint8_t *__restrict__ W, int M, int K, size_t row_bytes,
                         const float *__restrict__ x, float *__restrict__ y, q8x_norm_in nin,
                         int copy) {
    gemv_q8x_body<T, 1, R, S, Q8X_NORM, NH, GLU>(W, M, K, row_bytes, x, 1, y, nin, copy);
}

/* The GLU kernel (gemv_q8x_body) deals whole blocks of 32 outputs to a CTA; it runs where that
 * takes at most one round of row groups in eight more than the plain kernel's dealing: the
 * kernel boundary it saves outweighs that much more tail. Llama-2-7B's 11,008 outputs over 132
 * CTAs of 16 warps: 3 blocks, 6 rounds, as 11,008 / 2,112 gives; Llama-3-8B's 14,336: 4 blocks,
 * 8 rounds against 7. Measured on an H100, tg128 (bench/RESULTS.md 2026-12-07 s55 and s56):
 * Llama-2-7B Q4_0 618 -> 628 t/s, Q4_K 606 -> 613, Q8_0 355 -> 355; Llama-3-8B Q4_0 508 -> 515,
 * Q4_K 504 -> 509. Shapes past one in eight (TinyLlama's 5,632: 4 rounds against 3) are not
 * measured and keep the GEMV and the SwiGLU kernel. SI_CUDA_GEMV_GLU (read at the first call): 0
 * never, 1 (the default) under that rule, 2 regardless of the rounds. */
static int q8x_glu_knob(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("SI_CUDA_GEMV_GLU");
        v = e && (e[0] == '0' || e[0] == '2') ? e[0] - '0' : 1;
    }
    return v;
}

/* At most this many CTAs per SM (0: as many as fit). Every CTA reads and quantises all of x, so
 * fewer CTAs, each walking more rows, cut that cost. */
#ifndef GEMV_Q8X_CTAS_PER_SM
#define GEMV_Q8X_CTAS_PER_SM 0
#endif

/* Q8X_NORM in one CTA of 16 warps an SM (gemv_q8x_body's NH = 2: each half of a norm thread's
 * float4 in its own thread), where it fits, instead of two of 8: the norm and the quantisation of
 * x, which every CTA does for the whole row, once an SM instead of twice. A per-CTA trace of the 7B
 * chain (bench/RESULTS.md 2026-12-02 s28) had x ready ~3.3 us after the PDL wait in the QKV GEMV:
 * the loads 1.4 us, the sums 0.6, the quantisation 1.3 (about 110 instructions a float4, issued by
 * 16 warps an SM). Knob: SI_CUDA_GEMV_Q8X_NORM_WIDE=0, two CTAs of 8 (read at the first call).
 * Measured and not kept (same s28 section): 16-warp CTAs for the other batch-1 GEMVs, and the
 * wide norm GEMV at 3 stages (SI_CUDA_GEMV_Q8X_NORM=2,3), both slower through the engine. */
static bool q8x_norm_wide(void) {
    static const bool on = !si_env_off("SI_CUDA_GEMV_Q8X_NORM_WIDE");
    return on;
}

/* the device's opt-in shared memory per CTA and SM count (first call) */
static void q8x_device(int *smem_optin, int *n_sm) {
    static int optin = 0, sms = 0;
    if (!optin) {
        int dev;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    }
    *smem_optin = optin;
    *n_sm = sms;
}

/* nin: Q8X_NORM's inputs (nb 1; NULL otherwise) */
template <class T, int NB, int R, int S, int XIN>
static int gemv_q8x_launch_nb(const void *W, int M, int K, const float *x, int nb, float *y,
                              cudaStream_t st, const q8x_norm_in *nin = NULL) {
    static_assert(XIN != Q8X_NORM || NB == 1, "the norm runs on one row");
    void (*kernel)(const uint8_t *, int, int, size_t, const float *, int, float *, int) = NULL;
    void (*norm_kernel)(const uint8_t *, int, int, size_t, const float *, float *, q8x_norm_in,
                        int) = NULL;
    int smem_optin, n_sm;
    q8x_device(&smem_optin, &n_sm);
    /* 8 warps, or fewer where x (nb up to 8 rows of K up to GEMV_Q8X_MAX_K) and the stages
     * would not fit: with 1 warp every supported shape fits. The norm's arithmetic needs
     * NORM_THREADS, or 2 x NORM_THREADS (q8x_norm_wide) */
    int warps = 8, norm_warps = 0;
    const bool glu = XIN == Q8X_NORM && nin && nin->glu_q8; /* the GLU kernel, 16 warps only */
    if constexpr (XIN == Q8X_NORM) {
        const bool wide =
            q8x_norm_wide() && q8x_smem_bytes<T>(K, 1, 16, R, S, glu) + NORM_RED * sizeof(float) <=
                                   (size_t)smem_optin; /* + body's static red */
        if (glu) {
            if constexpr (R == 2 && S == 2)
                norm_kernel = wide ? gemv_q8x_norm_kernel<T, R, S, 2, true> : NULL;
            if (!norm_kernel || M % 256) return -1; /* n % 128: q8 rows of cuda_gemv_pre */
        } else {
            norm_kernel =
                wide ? gemv_q8x_norm_kernel<T, R, S, 2> : gemv_q8x_norm_kernel<T, R, S, 1>;
        }
        warps = norm_warps = wide ? 16 : 8;
    } else {
        kernel = gemv_q8x_kernel<T, NB, R, S, XIN>;
    }
    const void *fn = kernel ? (const void *)kernel : (const void *)norm_kernel;
    /* per kernel: the attribute is per kernel; static shared memory (the norm's) counts too */
    static int dyn_max[3] = {0, 0, 0};
    int &dm = dyn_max[glu ? 2 : warps == 16];
    if (!dm) {
        cudaFuncAttributes fa;
        CUDA_CHECK(cudaFuncGetAttributes(&fa, fn));
        CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        smem_optin - (int)fa.sharedSizeBytes));
        dm = smem_optin - (int)fa.sharedSizeBytes;
    }
    smem_optin = dm;
    size_t smem = q8x_smem_bytes<T>(K, nb, warps, R, S, glu);
    while (smem > (size_t)smem_optin && warps > 1) {
        warps /= 2;
        smem = q8x_smem_bytes<T>(K, nb, warps, R, S, glu);
    }
    if (smem > (size_t)smem_optin || (XIN == Q8X_NORM && warps != norm_warps)) return -1;
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, warps * 32, smem));
    if (GEMV_Q8X_CTAS_PER_SM > 0) per_sm = min(per_sm, GEMV_Q8X_CTAS_PER_SM);
    const int need = si_div_up(M, warps * R);
    int grid = min(need, max(1, per_sm) * n_sm);
    if (glu) { /* whole blocks of 32 outputs a CTA, in at most 8/7 the rounds (q8x_glu_knob) */
        const int rounds = si_div_up(M / 2, grid * warps), blocks = M / 64;
        grid = min(blocks, max(1, per_sm) * n_sm);
        const int per_cta = si_div_up(blocks, grid);
        if (per_cta > Q8X_GLU_SLOTS ||
            (q8x_glu_knob() != 2 && per_cta * (32 / warps) * 7 > rounds * 8))
            return -1;
    }
    const size_t row_bytes = (size_t)(K / (32 * T::UB)) * T::UBYTES; /* units x bytes */
    const int copy = q8x_copy_mode<T>(W, K);
    if constexpr (XIN == Q8X_NORM)
        si_launch_pdl(norm_kernel, grid, warps * 32, smem, st, (const uint8_t *)W, M, K, row_bytes,
                      x, y, *nin, copy);
    else
        si_launch_pdl(kernel, grid, warps * 32, smem, st, (const uint8_t *)W, M, K, row_bytes, x,
                      nb, y, copy);
    return 0;
}

/* Variants, per batch case (batch 1 with K < 8192, batch 1 with K >= 8192, batch 2, 4, 8,
 * batch 1 on a matrix of at most GEMV_Q8X_SMALL_MK elements, batch 1 of the 4-bit types with
 * K >= 8192, batch 1 of the 4-bit types on a small matrix with x quantised ahead, and 2-4 rows
 * of Q4_0, Q4_K and Q8_0):
 * GEMV_Q8X_R rows per warp (they share each x load; more cost registers), GEMV_Q8X_S cp.async
 * stages per warp (S - 1 segments in flight while one is decoded; more cost shared memory, so
 * fewer CTAs). Batch 1 measured on the H200 in whole decode steps (scripts/gpu_gemv_sweep.sh,
 * bench/RESULTS.md 2026-11-30 s4), 7B tg128 against R, S = 1, 2 (K < 8192) and 2, 2: 2, 4
 * gave Q8_0 301 -> 331 t/s and Q4_0 411 -> 436; 1, 4 and 1, 3 gained less or nothing.
 * The small case (Llama-2-7B's output projection, right after attention, whose CTAs hold 64-96
 * KB of shared memory on 32 SMs): 2, 2 is half the shared memory of 2, 4, so that a GEMV CTA
 * fits beside an attention CTA and starts its loads before attention ends; measured in the
 * same device call (bench/RESULTS.md 2026-11-30 s6): Q4_0 tg128 612.3 -> 623.6 t/s, Q8_0 422.9
 * -> 422.2 (2, 3: no gain; 1, 2: slower). */
#ifndef GEMV_Q8X_R
#define GEMV_Q8X_R 2, 2, 1, 2, 2, 2, 2, 2, 4
#endif
#ifndef GEMV_Q8X_S
#define GEMV_Q8X_S 4, 4, 2, 2, 2, 2, 3, 3, 2
#endif
#define GEMV_Q8X_SMALL_MK (4096LL * 4096)
template <int I> static constexpr int q8x_rows() {
    constexpr int r[] = {GEMV_Q8X_R};
    return r[I];
}
template <int I> static constexpr int q8x_stages() {
    constexpr int s[] = {GEMV_Q8X_S};
    return s[I];
}
/* The batch-1 case (5, 6, 7, 0 or 1 above) of a matrix M x K of type T with x from XIN. Q4_0 and
 * Q4_K take the small case's 2, 2 for every shape but rows of 8192+ (7B's down projection: each
 * warp streams its two 11008-long rows in 11 segments, one in flight, and only 256 CTAs run, so
 * a third stage puts more bytes in flight; case 6): measured with the knob
 * SI_CUDA_GEMV_Q8X_LONG, same device call, 2 rounds (bench/RESULTS.md 2026-12-01 s15): tg128
 * Q4_0 646.1 / 651.2 -> 660.6 / 656.8 t/s, Q4_K 643.5 / 640.1 -> 655.1 / 654.5 (2, 4: +0.3 %
 * and +0.0 %; one row a warp: slower), Q8_0 alike within 0.3 %, so it keeps 2, 2 there. Q6_K
 * and Q4_1 take 2, 2 for those rows (they had 2, 4): Q6_K 420.9 / 419.9 -> 437.4 / 438.7 (2, 3:
 * 428), Q4_1 611.0 / 610.4 -> 618.6 / 618.3 (2, 3 alike). Q8_0 takes 2, 2 for every shape but
 * the norm-fused ones
 * (Q8X_NORM: QKV and gate/up), i.e. the output projection, down (x quantised ahead) and the
 * output matrix (f32 x); the other types as above. Measured on the H200 in whole decode steps,
 * 7B tg128, 2-3 rounds against the binary before, in one device call each (bench/RESULTS.md
 * 2026-12-01 s13): Q4_0 626-629 -> 645-658 t/s, Q4_K 613-620 -> 645-649, Q8_0 441-446 ->
 * 448-451; Q8_0 with its norm-fused GEMVs at 2, 2 too ran 432-434 (8-warp CTAs then; see below).
 * Fewer stages are less shared memory a CTA, so the next kernel's CTAs fit beside it sooner. Case
 * 7: since the 4-bit dot lost its shifts (s19), the small matrix with x quantised ahead (7B's
 * output projection) runs better at 2, 3 again (knob SI_CUDA_GEMV_Q8X_SMALL, two device calls, 2
 * rounds each, tg128 Q4_0: 675.8 / 675.5 -> 684.5 / 679.1 and 676.8 / 669.9 -> 683.8 / 685.2 t/s;
 * 1, 2: 668.1 / 673.9).
 * The norm-fused GEMVs (Q8X_NORM) of rows under 8192 take 2, 2 for every type: since they run as
 * one 16-warp CTA an SM where it fits (q8x_norm_wide, s28), 2 x 2 stages let Q8_0, Q4_1 and Q6_K
 * fit too (they had 2 x 4 at 8 warps). Knob SI_CUDA_GEMV_Q8X_NORM=2,2, same device call, 2 rounds
 * (bench/RESULTS.md 2026-12-02 s29): tg128 Q8_0 437.1 / 435.4 -> 462.0 / 459.6 t/s, Q4_1 635.3 /
 * 632.5 -> 684.3 / 682.1, Q6_K 435.7 / 435.7 -> 473.5 / 474.5. */
template <class T, int XIN> static int q8x_batch1_case(int M, int K) {
    const bool four_bit = std::is_same<T, tqx_q4_0>::value || std::is_same<T, tqx_q4_k>::value;
    if (K >= 8192 && !std::is_same<T, tqx_q8_0>::value) return four_bit ? 6 : 5;
    if (XIN == Q8X_NORM && K < 8192) return 5;
    if (four_bit && (long long)M * K <= GEMV_Q8X_SMALL_MK) return 7;
    const bool two_stages = four_bit || (std::is_same<T, tqx_q8_0>::value && XIN != Q8X_NORM);
    if (two_stages || (long long)M * K <= GEMV_Q8X_SMALL_MK) return 5;
    return K < 8192 ? 0 : 1;
}

/* Case 8: 2-4 rows of Q4_0, Q4_K and Q8_0 at 4 rows a warp (cases 2 and 3 have 1 and 2), so that
 * each x load serves more weights. Measured on the H200 (bench/RESULTS.md 2026-12-02 s23) with
 * knobs, same binary: the 129 Llama-2-7B GEMVs (persist_chain TYPE 10 NB) at 2 rows Q4_0 1,428
 * -> 1,255 us, Q8_0 2,707 -> 2,089 (2 x 3: 2,023), Q4_K 1,453 -> 1,269; at 4 rows Q4_0 1,693 ->
 * 1,598, Q8_0 2,366 -> 2,244, Q4_K 1,907 -> 1,712. Through the engine (512-token prompts, all-
 * decoding t/s, 2 rounds): 2 requests Q4_0 932 / 937 -> 1,015 / 1,015; 3 requests Q4_0 1,298 /
 * 1,297 -> 1,316 / 1,319, Q8_0 987 / 991 -> 1,006 / 1,009; 4 requests +0.2 to +1.6 %. 8 rows
 * lost at 4 x 2, 2 x 3, 1 x 2 and 1 x 3 (2,797 -> 2,874-3,677 us for Q4_0), so case 4 stays.
 * Q4_1 and Q6_K were not measured and keep cases 2 and 3. The rows a warp do not change a
 * row's arithmetic. */
template <class T> static constexpr bool q8x_four_rows_wide() {
    return std::is_same<T, tqx_q4_0>::value || std::is_same<T, tqx_q4_k>::value ||
           std::is_same<T, tqx_q8_0>::value;
}

template <class T, int NB, int I, int XIN>
static int gemv_q8x_launch_case(const void *W, int M, int K, const float *x, int nb, float *y,
                                cudaStream_t st, const q8x_norm_in *nin = NULL) {
    return gemv_q8x_launch_nb<T, NB, q8x_rows<I>(), q8x_stages<I>(), XIN>(W, M, K, x, nb, y, st, nin);
}

/* batch 1 at q8x_batch1_case's case */
template <class T, int XIN>
static int gemv_q8x_launch_batch1(const void *W, int M, int K, const float *x, int nb, float *y,
                                  cudaStream_t st, const q8x_norm_in *nin = NULL) {
    switch (q8x_batch1_case<T, XIN>(M, K)) {
    case 5: return gemv_q8x_launch_case<T, 1, 5, XIN>(W, M, K, x, nb, y, st, nin);
    case 6: return gemv_q8x_launch_case<T, 1, 6, XIN>(W, M, K, x, nb, y, st, nin);
    case 7: return gemv_q8x_launch_case<T, 1, 7, XIN>(W, M, K, x, nb, y, st, nin);
    case 0: return gemv_q8x_launch_case<T, 1, 0, XIN>(W, M, K, x, nb, y, st, nin);
    default: return gemv_q8x_launch_case<T, 1, 1, XIN>(W, M, K, x, nb, y, st, nin);
    }
}

/* Timing knobs, not for the engine, each R,S (R rows per warp, S cp.async stages per warp; read at
 * the first call): SI_CUDA_GEMV_Q8X for every batch-1 shape, else SI_CUDA_GEMV_Q8X_SMALL for
 * batch 1 on matrices of at most GEMV_Q8X_SMALL_MK elements, SI_CUDA_GEMV_Q8X_LONG for batch 1
 * with K >= 8192, SI_CUDA_GEMV_Q8X_NORM for the GEMVs with the norm inside. gemv_q8x_launch_rs
 * has the pairs they may name. */
static int gemv_q8x_knob(int which) {
    static const int v[4] = {
        si_env_digit_pair("SI_CUDA_GEMV_Q8X"), si_env_digit_pair("SI_CUDA_GEMV_Q8X_SMALL"),
        si_env_digit_pair("SI_CUDA_GEMV_Q8X_LONG"), si_env_digit_pair("SI_CUDA_GEMV_Q8X_NORM")};
    return v[which];
}

/* batch 1 at a knob's (R, S) = 10 R + S; -2 when that pair is not instantiated */
template <class T, int XIN>
static int gemv_q8x_launch_rs(int rs, const void *W, int M, int K, const float *x, int nb, float *y,
                              cudaStream_t st, const q8x_norm_in *nin = NULL) {
    switch (rs) {
    case 12: return gemv_q8x_launch_nb<T, 1, 1, 2, XIN>(W, M, K, x, nb, y, st, nin);
    case 13: return gemv_q8x_launch_nb<T, 1, 1, 3, XIN>(W, M, K, x, nb, y, st, nin);
    case 14: return gemv_q8x_launch_nb<T, 1, 1, 4, XIN>(W, M, K, x, nb, y, st, nin);
    case 22: return gemv_q8x_launch_nb<T, 1, 2, 2, XIN>(W, M, K, x, nb, y, st, nin);
    case 23: return gemv_q8x_launch_nb<T, 1, 2, 3, XIN>(W, M, K, x, nb, y, st, nin);
    case 24: return gemv_q8x_launch_nb<T, 1, 2, 4, XIN>(W, M, K, x, nb, y, st, nin);
    default: return -2;
    }
}

#include "backend/cuda/gemv_q8x_tc.cuh"

/* x: nb rows of K floats, or (Q8X_PRE) of CUDA_Q8X_ROW_BYTES(K) quantised bytes */
template <class T, int XIN = Q8X_F32>
static int gemv_q8x_launch(const void *W, int M, int K, const float *x, int nb, float *y,
                           cudaStream_t st) {
    if (!gemv_q8x_ok<T>(K)) return -1;
    /* the same bits on tensor cores, for the types that have them (q8x_tc_of) */
    using TC = typename q8x_tc_of<T>::type;
    if constexpr (!std::is_void<TC>::value)
        if (nb >= 2 && nb >= gemv_q8x_tc_min_nb<TC>() &&
            gemv_q8x_tc_launch<TC, XIN>(W, M, K, x, nb, y, st) == 0)
            return 0;
    if (nb <= 1) {
        int knob = gemv_q8x_knob(0);
        if (!knob && (long long)M * K <= GEMV_Q8X_SMALL_MK) knob = gemv_q8x_knob(1);
        if (!knob && K >= 8192) knob = gemv_q8x_knob(2);
        const int r = gemv_q8x_launch_rs<T, XIN>(knob, W, M, K, x, nb, y, st);
        if (r != -2) return r;
    }
    if (nb <= 1) return gemv_q8x_launch_batch1<T, XIN>(W, M, K, x, nb, y, st);
    if (nb <= 2 && q8x_four_rows_wide<T>())
        return gemv_q8x_launch_case<T, 2, 8, XIN>(W, M, K, x, nb, y, st);
    if (nb <= 2) return gemv_q8x_launch_case<T, 2, 2, XIN>(W, M, K, x, nb, y, st);
    if (nb <= 4 && q8x_four_rows_wide<T>())
        return gemv_q8x_launch_case<T, 4, 8, XIN>(W, M, K, x, nb, y, st);
    if (nb <= 4) return gemv_q8x_launch_case<T, 4, 3, XIN>(W, M, K, x, nb, y, st);
    return gemv_q8x_launch_case<T, 8, 4, XIN>(W, M, K, x, nb, y, st);
}

/* Q8X_NORM: batch 1 at the (R, S) gemv_q8x_launch would take (no knobs); -1 where it cannot run
 * (gemv_q8x_norm_ok false) */
template <class T> static bool gemv_q8x_norm_ok(int M, int K) {
    if (!gemv_q8x_ok<T>(K) || K > NORM_VEC_MAX || M < 1) return false;
    int smem_optin, n_sm;
    q8x_device(&smem_optin, &n_sm);
    static constexpr int rows[] = {GEMV_Q8X_R}, stages[] = {GEMV_Q8X_S};
    const int c = q8x_batch1_case<T, Q8X_NORM>(M, K);
    const int R = rows[c], S = stages[c];
    return q8x_smem_bytes<T>(K, 1, NORM_THREADS / 32, R, S) + NORM_RED * sizeof(float) <=
           (size_t)smem_optin; /* + the norm's static shared memory */
}

template <class T>
static int gemv_q8x_norm_launch(const void *W, int M, int K, const float *x, float *y,
                                const q8x_norm_in &nin, cudaStream_t st) {
    if (!gemv_q8x_norm_ok<T>(M, K)) return -1;
    const int r = gemv_q8x_launch_rs<T, Q8X_NORM>(gemv_q8x_knob(3), W, M, K, x, 1, y, st, &nin);
    if (r != -2) return r;
    return gemv_q8x_launch_batch1<T, Q8X_NORM>(W, M, K, x, 1, y, st, &nin);
}
