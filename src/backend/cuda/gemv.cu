/* gemv.cu — decode matmul (cuda_gemv). Fast paths: gemv_fast.cuh (F16/BF16, K % 8 == 0),
 * gemv_q8x.cuh (the quantised types with x quantised to q8, dp4a; K % 128 == 0; Q4_0 at 5-8 rows
 * on int8 tensor cores with the same bits, gemv_q8x_tc.cuh), gemv_mma.cuh (opt-in, not the
 * same bits: int8 tensor cores from GEMV_MMA_MIN_NB batch rows; K % 256 == 0) and
 * gemv_direct.cuh (the 32-element-block types on the rows the q8x kernels do not take, f32 x);
 * every other shape takes the general kernel here, which multiplies f32 x.
 *
 * General kernel: memory-bound, every weight byte is read once, with 16-byte cp.async
 * copies into shared memory (GGUF blocks are 18, 20, 34, 210 bytes: a thread cannot load its own
 * block with aligned 16-byte loads, so a warp copies the aligned byte span that covers a row
 * segment, then each lane decodes units of it in registers). Two stages per warp: the next
 * segment is in flight while this one is decoded. Each warp owns GEMV_ROWS rows so that one
 * float4 activation load feeds GEMV_ROWS weight groups. f32 accumulation, warp-shuffle sum.
 * Launched with PDL as the other decode kernels are: the matrices whose K is no multiple of 128
 * (SmolLM2-135M's 576: its QKV, output and gate/up projections) took this kernel at batch 1
 * (gemv_direct.cuh's since session 60);
 * launched the usual way, it could not start until the kernel before it had finished, where the
 * chain's other kernels overlap the one before's tail. Measured on an H100, same call, 2 rounds
 * (bench/RESULTS.md 2026-12-07 s58), SmolLM2-135M-shaped tg128: Q4_0 1,440 -> 1,763 t/s, Q4_1
 * 1,550 -> 1,930, Q8_0 1,480 -> 1,748 (F16 2,100). The q8x kernels on those rows instead (a
 * partial last unit zeroed in registers, so that the norm and the SwiGLU ran inside the GEMVs: 6
 * kernels a layer instead of 8) were built and measured slower (s59, H100, same call, 2 rounds:
 * Q4_0 1,752 -> 1,455 t/s, Q4_1 1,925 -> 1,458, Q8_0 1,737 -> 1,627; the q8x GEMV at 960 x 576
 * took 6.7-7.0 us where F16's took 4.8: at this size each CTA's quantisation of x and set-up
 * outweigh the kernels saved), and the ragged tail's extra state cost Llama-2-7B Q4_0 tg128 4 %
 * (624 -> 601): backed out (`9e6ce12`, `bc2a4bb`). */
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/pdl.cuh"

template <class T> __host__ __device__ constexpr int gemv_buf_bytes() {
    return ((gemv_seg<T>::SEGB * T::BB + 15) / 16) * 16 + 16;
}

template <class T, int NB>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv_kernel(const uint8_t *__restrict__ W, int M, int K, size_t row_bytes,
                const float *__restrict__ x, int nb, float *__restrict__ y) {
    constexpr int SEGB = gemv_seg<T>::SEGB, BUF = gemv_buf_bytes<T>(), R = GEMV_ROWS;
    constexpr int NW = T::NG * 4;
    extern __shared__ __align__(16) uint8_t smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = (blockIdx.x * GEMV_WARPS + warp) * R;
    if (row0 >= M) return; /* whole warp; no CTA-wide barrier below */
    uint8_t *sw = smem + (size_t)warp * 2 * R * BUF;
    const int nblk = K / T::BE, nseg = (nblk + SEGB - 1) / SEGB;
    const uint8_t *rowp[R];
#pragma unroll
    for (int r = 0; r < R; r++) rowp[r] = W + (size_t)min(row0 + r, M - 1) * row_bytes;

    auto issue = [&](int seg, int stage) {
        const int b0 = seg * SEGB, n = min(SEGB, nblk - b0);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const uintptr_t s = (uintptr_t)(rowp[r] + (size_t)b0 * T::BB);
            const uintptr_t a0 = s & ~(uintptr_t)15, a1 = (s + (size_t)n * T::BB + 15) & ~(uintptr_t)15;
            uint8_t *dst = sw + (stage * R + r) * BUF;
            const int nc = (int)((a1 - a0) / 16);
            for (int i = lane; i < nc; i += 32) si_cp_async16(dst + 16 * i, (const void *)(a0 + 16 * i));
        }
        si_cp_async_commit();
    };

    float acc[R][NB];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) acc[r][b] = 0.0f;

    /* launched with PDL (pdl.cuh): the first segment's weights are asked for while the kernel
     * before may still run; x is read only after the wait */
    issue(0, 0);
    si_pdl_trigger();
    si_pdl_wait();
    for (int seg = 0; seg < nseg; seg++) {
        const int stage = seg & 1;
        if (seg + 1 < nseg) {
            issue(seg + 1, stage ^ 1);
            si_cp_async_wait<1>();
        } else {
            si_cp_async_wait<0>();
        }
        __syncwarp();
        const int b0 = seg * SEGB, units = min(SEGB, nblk - b0) * T::UPB;
        const uint8_t *src[R];
#pragma unroll
        for (int r = 0; r < R; r++)
            src[r] = sw + (stage * R + r) * BUF + ((uintptr_t)(rowp[r] + (size_t)b0 * T::BB) & 15);
        for (int u = lane; u < units; u += 32) {
            const int blk = u / T::UPB, uu = u % T::UPB;
            float w[R][NW];
            int xo[T::NG];
#pragma unroll
            for (int r = 0; r < R; r++) T::unit(src[r] + blk * T::BB, uu, w[r], xo);
            const float *xb = x + (size_t)(b0 + blk) * T::BE;
#pragma unroll
            for (int b = 0; b < NB; b++) {
                if (b < nb) {
#pragma unroll
                    for (int g = 0; g < T::NG; g++) {
                        const float4 xv = __ldg((const float4 *)(xb + (size_t)b * K + xo[g]));
#pragma unroll
                        for (int r = 0; r < R; r++)
                            acc[r][b] += w[r][4 * g] * xv.x + w[r][4 * g + 1] * xv.y +
                                         w[r][4 * g + 2] * xv.z + w[r][4 * g + 3] * xv.w;
                    }
                }
            }
        }
        __syncwarp();
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const float v = si_warp_sum(acc[r][b]);
            if (lane == 0 && b < nb && row0 + r < M) y[(size_t)b * M + row0 + r] = v;
        }
}

template <class T, int NB>
static void gemv_launch_nb(const void *W, int M, int K, const float *x, int nb, float *y,
                           cudaStream_t st) {
    const size_t row_bytes = (size_t)(K / T::BE) * T::BB;
    const int grid = si_div_up(M, GEMV_WARPS * GEMV_ROWS);
    const size_t smem = (size_t)GEMV_WARPS * 2 * GEMV_ROWS * gemv_buf_bytes<T>();
    si_launch_pdl(gemv_kernel<T, NB>, grid, GEMV_WARPS * 32, smem, st, (const uint8_t *)W, M, K,
                  row_bytes, x, nb, y);
}

template <class T>
static int gemv_launch(const void *W, int M, int K, const float *x, int nb, float *y,
                       cudaStream_t st) {
    if (K % T::BE != 0 || K % 4 != 0) return -1;
    if (nb <= 1) gemv_launch_nb<T, 1>(W, M, K, x, nb, y, st);
    else if (nb <= 2) gemv_launch_nb<T, 2>(W, M, K, x, nb, y, st);
    else if (nb <= 4) gemv_launch_nb<T, 4>(W, M, K, x, nb, y, st);
    else gemv_launch_nb<T, 8>(W, M, K, x, nb, y, st);
    return 0;
}

#include "backend/cuda/gemv_fast.cuh"
#include "backend/cuda/gemv_h16_mma.cuh"
#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/gemv_q8x.cuh"
#include "backend/cuda/weight_units.cuh"

/* after gemv_q8x.cuh: q8x_norm_in, norm.cuh */
#include "backend/cuda/gemv_direct.cuh"

extern "C" size_t cuda_weight_alloc_bytes(si_type t, int64_t M, int64_t K) {
    return with_weight_units(t, (size_t)0, [&](auto u) {
        using T = typename decltype(u)::tq;
        return (((size_t)M * (size_t)(K / T::BE) * T::BB) + 15) & ~(size_t)15;
    });
}

/* Batch rows from which the quantised types take the tensor-core kernel (gemv_mma.cuh) rather
 * than the dp4a one (gemv_q8x.cuh) when it is on (cuda_gemv_set_tensor_cores); both quantise x
 * the same way. The dp4a kernel's time grows with the batch rows, the tensor-core one's hardly:
 * on the H200 (32000x4096) they cross near 6 rows for Q4_0/Q4_1 (at 8: 26 -> 34 % and 30 -> 38 %
 * of 4.21 TB/s), near 8 for the others; at 1-4 rows the dp4a kernel is 1.2-2x faster. */
#ifndef GEMV_MMA_MIN_NB
#define GEMV_MMA_MIN_NB 7
#endif

static int g_mma = -1; /* -1: not decided yet (SI_CUDA_GEMV_MMA decides on first use) */

extern "C" void cuda_gemv_set_tensor_cores(int on) { g_mma = on != 0; }

static bool gemv_mma_on() {
    if (g_mma < 0) {
        const char *e = getenv("SI_CUDA_GEMV_MMA");
        g_mma = e && e[0] == '1';
    }
    return g_mma == 1;
}

/* A quantised type (weight_units U): the tensor-core or dp4a kernel where K allows it
 * (K % 256 == 0 / K % 128 == 0, K <= 14336, shared memory fits), else the f32-activation kernels:
 * gemv_direct.cuh's for the 32-element-block types, the general one above for the rest. */
template <class U>
static int gemv_quant(const void *W, int M, int K, const float *x, int nb, float *y,
                      cudaStream_t st) {
    using TM = typename U::tmma;
    using TX = typename U::tqx;
    using T = typename U::tq;
    if constexpr (!std::is_void<TM>::value)
        if (nb >= GEMV_MMA_MIN_NB && gemv_mma_on() && gemv_mma_ok<TM>(K) &&
            gemv_mma_launch<TM>(W, M, K, x, nb, y, st) == 0)
            return 0;
    if (gemv_q8x_ok<TX>(K) && gemv_q8x_launch<TX>(W, M, K, x, nb, y, st) == 0) return 0;
    if (gemv_direct_launch<T>(W, M, K, x, nb, y, st) == 0) return 0;
    return gemv_launch<T>(W, M, K, x, nb, y, st);
}

/* ---- 9-16 rows (cuda_gemv_wide_ok) */

/* A step of 9-16 rows ran the batched matmul (gemm_q8x_mma.cu), rows padded to 16, and was far
 * slower than one of 8: on an H100, Llama-2-7B Q4_0, 8 requests 2,311 all-decoding t/s, 9
 * requests 1,455; its four matmuls took 4.38 ms a step at 9 rows against 2.12 ms at 8 (8 rows run
 * the tensor-core GEMV, at 16 rows the matmul has few warps an SM). Two GEMV launches (rows 0-7,
 * then 1-8 more) read the weights twice and still cost less up to 12 rows for every type
 * measured, up to 16 for Q4_0 (whose matmul is the slower f16 path) and Q5_K (bench/RESULTS.md
 * s49, H100, all-decoding t/s at 9 / 12 / 16 requests, the matmul (9-15 rows padded to 16) ->
 * two launches: Q4_0 1,452 / 1,880 / 2,331 -> 1,968 / 2,235 / 2,598; Q4_K_M 1,433 / 1,838 /
 * 2,299 -> 1,663 / 1,889 / 2,211; at 16 rows Q3_K_M 1,924 -> 1,842, Q5_K_M 1,963 -> 2,151, these
 * two with attention split as for 1-8 rows both ways). Q8_0, whose 8-row GEMV is the dp4a kernel,
 * keeps the matmul. One launch of the tensor-core kernel takes all 9-16 rows, two mma's an A
 * fragment, so the weights are read and decoded once (s50): with x whole in shared memory where
 * it fits (gemv_q8x_tc_fits: K = 4096 at 16 rows; K = 11008 at 10-13 by the type's chunk size,
 * Q4_0 and Q4_K 12; K = 14336 at 9 rows, and at 10 for Q4_0, Q4_1, Q4_K, Q2_K, Q3_K, IQ4_NL and
 * IQ4_XS, with x's scales in rows of 10 x rows, not 16: s52), else with x in parts (s51). Timing
 * knobs (read at the first call): SI_CUDA_GEMV_WIDE=0, every step of 9+ rows takes the matmul
 * again; SI_CUDA_GEMV_TC16=0 (gemv_q8x_tc.cuh), two launches instead of one;
 * SI_CUDA_GEMV_TC_PARTS=1, one launch only where x fits whole, else two (s50's way);
 * SI_CUDA_GEMV_TC_COMPACT=0, no 10-row scales (9-10 rows at K = 14336 take two launches again);
 * SI_CUDA_GEMV_SPLIT=0, never two launches (where one does not fit: the matmul; on an H100 that
 * was 4-5 % slower for Llama-2-7B Q4_0 at 13-16 requests, 36-52 % for Llama-3-8B Q4_0 at 9-16,
 * whose down projection never fits whole; s50). */
#define GEMV_SPLIT_ROWS_MOST 12 /* two launches: the types but Q4_0 and Q5_K (theirs: 16) */
/* x in parts from 12 rows: below, two launches (rows 0-7, then 1-3 more) cost less where they
 * are allowed (s51, H100, Llama-3-8B Q4_0, all-decoding t/s, x in parts against two launches:
 * 9 rows 2,204 / 2,376, 10 rows 2,427 / 2,421, 11 rows 2,637 / 2,700, 12 rows 3,106 / 2,766,
 * 16 rows 3,833 / 3,697; Q4_K_M at 9 rows 1,695 / 1,677) */
#define GEMV_PARTS_ROWS_MIN 12
static bool gemv_wide_on(void) {
    static const bool on = !si_env_off("SI_CUDA_GEMV_WIDE");
    return on;
}
static bool gemv_split_on(void) {
    static const bool on = !si_env_off("SI_CUDA_GEMV_SPLIT");
    return on;
}

/* How a GEMV of 9-16 rows runs: not at all (the batched matmul takes it), one launch of the
 * tensor-core kernel (x whole or in parts), or two launches */
enum { WIDE_NONE, WIDE_ONE, WIDE_TWO };
static int gemv_wide_plan(si_type t, int K, int n_batch) {
    if (n_batch <= GEMV_ROWS_MAX || n_batch > GEMV_WIDE_ROWS_MAX || K % 256 || !gemv_wide_on() ||
        gemv_mma_on())
        return WIDE_NONE;
    return with_q8x_unit(t, (int)WIDE_NONE, [&](auto u) {
        using TX = decltype(u);
        using TC = typename q8x_tc_of<TX>::type;
        if constexpr (std::is_void<TC>::value)
            return (int)WIDE_NONE;
        else {
            if (!gemv_q8x_ok<TX>(K)) return (int)WIDE_NONE;
            const int split_most =
                std::is_same<TX, tqx_q4_0>::value || std::is_same<TX, tqx_q5_k>::value
                    ? GEMV_WIDE_ROWS_MAX
                    : GEMV_SPLIT_ROWS_MOST;
            const bool split = gemv_split_on() && n_batch <= split_most;
            if (gemv_q8x_tc16_on()) {
                if (gemv_q8x_tc_fits<TC>(K, n_batch)) return (int)WIDE_ONE;
                if (gemv_q8x_tc_parts_fit<TC>(K, n_batch) &&
                    (n_batch >= GEMV_PARTS_ROWS_MIN || !split || gemv_q8x_tc_parts_knob() >= 2))
                    return (int)WIDE_ONE;
            }
            return (int)(split ? WIDE_TWO : WIDE_NONE);
        }
    });
}

extern "C" int cuda_gemv_wide_ok(si_type t, int K, int n_batch) {
    return gemv_wide_plan(t, K, n_batch) != WIDE_NONE;
}

/* cuda_gemv / cuda_gemv_pre (XIN Q8X_PRE) of 9-16 rows as gemv_wide_plan says: one launch, or
 * rows 0-7 and then the rest, each row with its one-row bits either way */
template <int XIN>
static int gemv_wide(si_type t, const void *W, int M, int K, const void *x, int nb, float *y,
                     cudaStream_t st) {
    const int plan = gemv_wide_plan(t, K, nb);
    if (plan == WIDE_ONE)
        return with_q8x_unit(t, -1, [&](auto u) {
            using TC = typename q8x_tc_of<decltype(u)>::type;
            if constexpr (std::is_void<TC>::value)
                return -1;
            else
                return gemv_q8x_tc_launch<TC, XIN>(W, M, K, (const float *)x, nb, y, st);
        });
    if (plan != WIDE_TWO) return -1;
    const size_t x_bytes = XIN == Q8X_PRE ? CUDA_Q8X_ROW_BYTES(K) : (size_t)K * sizeof(float);
    const void *rest = (const uint8_t *)x + GEMV_ROWS_MAX * x_bytes;
    float *y_rest = y + (size_t)GEMV_ROWS_MAX * M;
    if constexpr (XIN == Q8X_PRE) {
        if (cuda_gemv_pre(t, W, M, K, x, GEMV_ROWS_MAX, y, st) != 0) return -1;
        return cuda_gemv_pre(t, W, M, K, rest, nb - GEMV_ROWS_MAX, y_rest, st);
    } else {
        if (cuda_gemv(t, W, M, K, (const float *)x, GEMV_ROWS_MAX, y, st) != 0) return -1;
        return cuda_gemv(t, W, M, K, (const float *)rest, nb - GEMV_ROWS_MAX, y_rest, st);
    }
}

extern "C" int cuda_gemv(si_type t, const void *W, int M, int K, const float *x, int n_batch,
                         float *y, cudaStream_t stream) {
    if (n_batch < 1 || M < 1 || K < 1 || ((uintptr_t)W & 15) || ((uintptr_t)x & 15)) return -1;
    if (n_batch > GEMV_ROWS_MAX) return gemv_wide<Q8X_F32>(t, W, M, K, x, n_batch, y, stream);
    switch (t) {
    case SI_TYPE_F16:
        if (gemv_h16mma_on(K)) return gemv_h16mma_launch<false>(W, M, K, x, n_batch, y, stream);
        if (K % 8 == 0) return gemv_h16_launch<false>(W, M, K, x, n_batch, y, stream);
        return gemv_launch<tq_f16>(W, M, K, x, n_batch, y, stream);
    case SI_TYPE_BF16:
        if (gemv_h16mma_on(K)) return gemv_h16mma_launch<true>(W, M, K, x, n_batch, y, stream);
        if (K % 8 == 0) return gemv_h16_launch<true>(W, M, K, x, n_batch, y, stream);
        return gemv_launch<tq_bf16>(W, M, K, x, n_batch, y, stream);
    default:
        return with_weight_units(t, -1, [&](auto u) {
            using U = decltype(u);
            if constexpr (std::is_void<typename U::tqx>::value)
                return -1; /* F16/BF16: above */
            else
                return gemv_quant<U>(W, M, K, x, n_batch, y, stream);
        });
    }
}

/* ---- x quantised ahead by the norm (cuda_gemv_pre) */

extern "C" int cuda_gemv_pre_ok(si_type t, int K, int n_batch) {
    if (n_batch > GEMV_ROWS_MAX) return cuda_gemv_wide_ok(t, K, n_batch);
    if (n_batch < 1) return 0;
    if (n_batch >= GEMV_MMA_MIN_NB && gemv_mma_on()) return 0; /* cuda_gemv takes gemv_mma */
    return with_q8x_unit(t, 0, [&](auto u) { return (int)gemv_q8x_ok<decltype(u)>(K); });
}

extern "C" int cuda_gemv_pre(si_type t, const void *W, int M, int K, const void *xq, int n_batch,
                             float *y, cudaStream_t stream) {
    if (!cuda_gemv_pre_ok(t, K, n_batch) || M < 1 || ((uintptr_t)W & 15) || ((uintptr_t)xq & 15))
        return -1;
    if (n_batch > GEMV_ROWS_MAX) return gemv_wide<Q8X_PRE>(t, W, M, K, xq, n_batch, y, stream);
    const float *x = (const float *)xq; /* the kernels' x parameter; Q8X_PRE reads it as bytes */
    return with_q8x_unit(t, -1, [&](auto u) {
        return gemv_q8x_launch<decltype(u), Q8X_PRE>(W, M, K, x, n_batch, y, stream);
    });
}

/* ---- the norm before it inside (cuda_gemv_norm) */

/* The q8x kernels' norm GEMV where they take the rows, else gemv_direct.cuh's (32-element-block
 * types) */
extern "C" int cuda_gemv_norm_ok(si_type t, int M, int K) {
    if (cuda_gemv_pre_ok(t, K, 1))
        return with_q8x_unit(t, 0,
                             [&](auto u) { return (int)gemv_q8x_norm_ok<decltype(u)>(M, K); });
    return with_weight_units(
        t, 0, [&](auto u) { return (int)gemv_direct_norm_ok<typename decltype(u)::tq>(K); });
}

/* y, or (glu_q8 set) silu(gate) x up quantised: cuda_gemv_norm and cuda_gemv_norm_glu */
static int gemv_norm(si_type t, const void *W, int M, int K, const float *x, const float *add,
                     const float *norm_w, float eps, float *x_out, float *y, uint8_t *glu_q8,
                     cudaStream_t stream) {
    if (!cuda_gemv_norm_ok(t, M, K) || !x || !norm_w || (add && !x_out) ||
        (add && (x_out == x || x_out == add)) || ((uintptr_t)W & 15) || ((uintptr_t)x & 15) ||
        ((uintptr_t)norm_w & 15) || ((uintptr_t)add & 15) || ((uintptr_t)x_out & 15) ||
        ((uintptr_t)glu_q8 & 15))
        return -1;
    const q8x_norm_in nin = {add, norm_w, x_out, eps, glu_q8};
    if (cuda_gemv_pre_ok(t, K, 1))
        return with_q8x_unit(t, -1, [&](auto u) {
            return gemv_q8x_norm_launch<decltype(u)>(W, M, K, x, y, nin, stream);
        });
    if (glu_q8) return -1; /* the direct kernel writes y only */
    return with_weight_units(t, -1, [&](auto u) {
        return gemv_direct_norm_launch<typename decltype(u)::tq>(W, M, K, x, y, nin, stream);
    });
}

extern "C" int cuda_gemv_norm(si_type t, const void *W, int M, int K, const float *x,
                              const float *add, const float *norm_w, float eps, float *x_out,
                              float *y, cudaStream_t stream) {
    return !y ? -1 : gemv_norm(t, W, M, K, x, add, norm_w, eps, x_out, y, NULL, stream);
}

extern "C" int cuda_gemv_norm_glu(si_type t, const void *W, int M, int K, const float *x,
                                  const float *add, const float *norm_w, float eps, float *x_out,
                                  void *out_q8, cudaStream_t stream) {
    /* off (q8x_glu_knob): refused before any launch work, as the forward pass asks every layer */
    return !out_q8 || !q8x_glu_knob()
               ? -1
               : gemv_norm(t, W, M, K, x, add, norm_w, eps, x_out, NULL, (uint8_t *)out_q8, stream);
}

#ifdef GEMV_Q8X_TRACE
/* gemv_trace.cuh: the next GEMV launched is launch 0 of the trace; buf holds `launches` x
 * Q8X_TRACE_MAX_CTAS records (bench/kernels/persist_chain) */
extern "C" void cuda_gemv_trace_reset(void *buf, unsigned launches) {
    const unsigned zero = 0;
    CUDA_CHECK(cudaMemcpyToSymbol(q8x_trace_buf, &buf, sizeof buf));
    CUDA_CHECK(cudaMemcpyToSymbol(q8x_trace_launches, &launches, sizeof launches));
    CUDA_CHECK(cudaMemcpyToSymbol(q8x_trace_seq, &zero, sizeof zero));
    CUDA_CHECK(cudaMemcpyToSymbol(q8x_trace_done, &zero, sizeof zero));
}
#endif
