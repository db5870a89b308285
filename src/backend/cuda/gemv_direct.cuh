/* gemv_direct.cuh — the decode GEMV of the 32-element-block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * IQ4_NL) on rows the q8x kernels do not take (K % 128 != 0: SmolLM2-135M's 576, the default
 * model's QKV, output, gate/up and tied logits matrices). Included by gemv.cu after
 * gemv_q8x.cuh (q8x_norm_in, norm.cuh).
 *
 * gemv_direct_kernel: no shared-memory staging. Each lane decodes its units (dequant.cuh: NG
 * groups of 4 elements; the decoders read with 2-byte loads, so blocks at any even offset)
 * straight from global memory into registers, R rows at a time, as gemv_h16_kernel streams F16
 * rows: the first units' weights are loaded and decoded before the PDL wait, while the kernel
 * before still runs, and x (f32, L1-resident) is read after it. The general kernel (gemv.cu)
 * copies a segment into shared memory, waits for it, then reads x: at SmolLM2's sizes every
 * GEMV is latency-bound, and those serial steps are most of its time (960 x 576 Q4_0, one
 * row, H100: 6.6 us for 311 KB where F16's gemv_h16 takes 4.7 us for 1.1 MB; s59).
 * A row is split over KS = 4 warps, each summing a contiguous slice of its units (a 576-long row
 * of 72 units: one unit a lane, all in flight together); the slices' sums meet in shared
 * memory in slice order. Rows per warp R by batch rows as gemv_h16's.
 *
 * Measured on the H200 (bench/RESULTS.md 2026-12-07 s60, same call, 2 rounds), SmolLM2-135M-
 * shaped tg128, the general kernel -> this one after the norm kernel -> this one with the norm
 * inside: Q4_0 1,819 -> 2,062 -> 2,290 t/s, Q4_1 2,017 -> 2,062 -> 2,264, Q8_0 1,799 -> 2,143 ->
 * 2,309 (F16 2,206). NOTE: at 49152 x 576 (the tied logits) it reads Q4_0 at 14.5 % of the
 * bandwidth (26.5 us, F16's kernel 25.1 us for 3.6x the bytes): 18 of 32 lanes a warp decode a
 * unit each with three 2-byte loads, too few bytes in flight for a large matrix.
 *
 * NV > 0, batch 1 (cuda_gemv_norm): one row that the norm before has not seen; every CTA adds
 * the residual, normalises the row into shared memory with norm.cuh's arithmetic (NV float4 a
 * thread: K <= NV x 1,024) and multiplies that, as gemv_q8x.cuh's Q8X_NORM does for the q8x
 * kernels: the decode chain has no norm kernel before this GEMV, and y has the bits of the norm
 * kernel then this GEMV. CTA 0 writes x + add to nin.x_out. */

#define GEMV_DIRECT_WARPS 8 /* NORM_THREADS: the norm's arithmetic takes a CTA of 256 */
#define GEMV_DIRECT_KS 4
static_assert(GEMV_DIRECT_WARPS * 32 == NORM_THREADS, "the norm's thread count");

template <class T, int NB, int R, int NV = 0>
__global__ void __launch_bounds__(GEMV_DIRECT_WARPS * 32)
    gemv_direct_kernel(const uint8_t *__restrict__ W, int M, int K, size_t row_bytes,
                       const float *__restrict__ x, int nb, float *__restrict__ y,
                       q8x_norm_in nin) {
    constexpr int KS = GEMV_DIRECT_KS, NW = T::NG * 4;
    static_assert(GEMV_DIRECT_WARPS % KS == 0 && R * NB <= 32,
                  "KS divides the warps; a lane a sum");
    static_assert(NV == 0 || NB == 1, "the norm runs on one row");
    __shared__ float part[GEMV_DIRECT_WARPS][R][NB];
    extern __shared__ float4 x_normed[]; /* NV > 0: the normalised row, K / 4 float4 */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % KS;
    const int row0 = (blockIdx.x * (GEMV_DIRECT_WARPS / KS) + warp / KS) * R;
    const int nu = K / T::BE * T::UPB; /* units a row */
    const int c_beg = (int)((long long)nu * slice / KS),
              c_end = (int)((long long)nu * (slice + 1) / KS);
    const uint8_t *rowp[R];
#pragma unroll
    for (int r = 0; r < R; r++)
        rowp[r] = W + (size_t)min(row0 + r, M - 1) * row_bytes;
    float acc[R][NB];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++)
            acc[r][b] = 0.0f;

    float w[R][NW];
    int xo[T::NG];
    auto decode = [&](int c) {
#pragma unroll
        for (int r = 0; r < R; r++)
            T::unit(rowp[r] + (size_t)(c / T::UPB) * T::BB, c % T::UPB, w[r], xo);
    };
    auto accumulate = [&](int c) {
        const size_t k0 = (size_t)(c / T::UPB) * T::BE;
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (b >= nb) break;
#pragma unroll
            for (int g = 0; g < T::NG; g++) {
                const size_t k = (size_t)b * K + k0 + xo[g];
                const float4 xv = NV ? x_normed[k / 4] : __ldg((const float4 *)(x + k));
#pragma unroll
                for (int r = 0; r < R; r++)
                    acc[r][b] += w[r][4 * g] * xv.x + w[r][4 * g + 1] * xv.y +
                                 w[r][4 * g + 2] * xv.z + w[r][4 * g + 3] * xv.w;
            }
        }
    };
    /* launched with PDL (pdl.cuh): the weights and the norm's weight, which no kernel writes,
     * are loaded (and the weights decoded) while the kernel before still runs; x after the wait */
    const int n4 = K / 4, t = threadIdx.x;
    float4 g[NV ? NV : 1];
#pragma unroll
    for (int i = 0; i < NV; i++)
        if (t + i * NORM_THREADS < n4) g[i] = __ldg((const float4 *)nin.w + t + i * NORM_THREADS);
    const int first = c_beg + lane;
    const bool live = row0 < M && first < c_end;
    if (live) decode(first);
    si_pdl_trigger();
    si_pdl_wait();
    if constexpr (NV > 0) { /* rmsnorm_kernel's row (norm.cu), into x_normed */
        __shared__ float red[NORM_RED];
        float4 v[NV];
        norm_row_load_slots(v, (const float4 *)x, (const float4 *)nin.add, n4, t, 0, NV, [] {});
        const int kh = norm_half(n4);
        const float s0 = norm_row_sq(v, n4, t, 0, 0, kh), s1 = norm_row_sq(v, n4, t, 0, kh, NV);
        if (nin.add && blockIdx.x == 0) {
#pragma unroll
            for (int i = 0; i < NV; i++)
                if (t + i * NORM_THREADS < n4) ((float4 *)nin.x_out)[t + i * NORM_THREADS] = v[i];
        }
        const float scale = norm_row_scale(s0, s1, true, red, K, nin.eps);
#pragma unroll
        for (int i = 0; i < NV; i++)
            if (t + i * NORM_THREADS < n4)
                x_normed[t + i * NORM_THREADS] = norm_out4(v[i], scale, g[i]);
        __syncthreads();
    }
    if (live)
        for (int c = first; c < c_end; c += 32) {
            if (c != first) decode(c);
            accumulate(c);
        }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const float v = si_warp_sum(acc[r][b]);
            if (lane == 0) part[warp][r][b] = v;
        }
    __syncthreads();
    if (slice == 0 && lane < R * NB) {
        const int r = lane / NB, b = lane % NB;
        float v = part[warp][r][b];
#pragma unroll
        for (int s = 1; s < KS; s++)
            v += part[warp + s][r][b];
        if (b < nb && row0 + r < M) y[(size_t)b * M + row0 + r] = v;
    }
}

template <class T, int NB, int R>
static void gemv_direct_launch_nb(const void *W, int M, int K, const float *x, int nb, float *y,
                                  cudaStream_t st) {
    const size_t row_bytes = (size_t)(K / T::BE) * T::BB;
    const int grid = si_div_up(M, GEMV_DIRECT_WARPS / GEMV_DIRECT_KS * R);
    si_launch_pdl(gemv_direct_kernel<T, NB, R>, grid, GEMV_DIRECT_WARPS * 32, 0, st,
                  (const uint8_t *)W, M, K, row_bytes, x, nb, y, q8x_norm_in{});
}

/* Timing knob (read at the first call): SI_CUDA_GEMV_DIRECT=0, these rows take the general
 * kernel again, and the norm before them its own kernel (cuda_gemv_norm_ok false). */
static bool gemv_direct_on(void) {
    static const bool on = !si_env_off("SI_CUDA_GEMV_DIRECT");
    return on;
}

/* -1 where the kernel does not take the type or the shape (the caller then takes another) */
template <class T>
static int gemv_direct_launch(const void *W, int M, int K, const float *x, int nb, float *y,
                              cudaStream_t st) {
    if constexpr (T::BE != 32) {
        return -1;
    } else {
        if (K % T::BE != 0 || !gemv_direct_on()) return -1;
        if (nb <= 1)
            gemv_direct_launch_nb<T, 1, 4>(W, M, K, x, nb, y, st);
        else if (nb <= 2)
            gemv_direct_launch_nb<T, 2, 2>(W, M, K, x, nb, y, st);
        else if (nb <= 4)
            gemv_direct_launch_nb<T, 4, 4>(W, M, K, x, nb, y, st);
        else
            gemv_direct_launch_nb<T, 8, 4>(W, M, K, x, nb, y, st);
        return 0;
    }
}

/* Whether gemv_direct_norm_launch takes T's rows of K (the row in registers: K <= NORM_VEC_MAX) */
template <class T> static bool gemv_direct_norm_ok(int K) {
    return T::BE == 32 && K % T::BE == 0 && K <= NORM_VEC_MAX && gemv_direct_on();
}

/* cuda_gemv_norm on the direct kernel (nin.glu_q8 unused: the caller refuses it) */
template <class T>
static int gemv_direct_norm_launch(const void *W, int M, int K, const float *x, float *y,
                                   const q8x_norm_in &nin, cudaStream_t st) {
    if constexpr (T::BE != 32) {
        return -1;
    } else {
        if (!gemv_direct_norm_ok<T>(K)) return -1;
        const size_t row_bytes = (size_t)(K / T::BE) * T::BB, smem = (size_t)K * sizeof(float);
        const int grid = si_div_up(M, GEMV_DIRECT_WARPS / GEMV_DIRECT_KS * 4);
        /* NV = 1 for rows of up to 1,024 (SmolLM2's 576), else the norm kernel's NORM_VEC */
        if (K <= NORM_THREADS * 4)
            si_launch_pdl(gemv_direct_kernel<T, 1, 4, 1>, grid, GEMV_DIRECT_WARPS * 32, smem, st,
                          (const uint8_t *)W, M, K, row_bytes, x, 1, y, nin);
        else
            si_launch_pdl(gemv_direct_kernel<T, 1, 4, NORM_VEC>, grid, GEMV_DIRECT_WARPS * 32, smem,
                          st, (const uint8_t *)W, M, K, row_bytes, x, 1, y, nin);
        return 0;
    }
}
