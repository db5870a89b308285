/* gemv_direct.cuh — the decode GEMV of the 32-element-block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * IQ4_NL) on rows the q8x kernels do not take (K % 128 != 0: SmolLM2-135M's 576, the default
 * model's QKV, output, gate/up and tied logits matrices). Included by gemv.cu.
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
 * memory in slice order. Rows per warp R by batch rows as gemv_h16's. */

#define GEMV_DIRECT_WARPS 8
#define GEMV_DIRECT_KS 4

template <class T, int NB, int R>
__global__ void __launch_bounds__(GEMV_DIRECT_WARPS * 32)
    gemv_direct_kernel(const uint8_t *__restrict__ W, int M, int K, size_t row_bytes,
                       const float *__restrict__ x, int nb, float *__restrict__ y) {
    constexpr int KS = GEMV_DIRECT_KS, NW = T::NG * 4;
    static_assert(GEMV_DIRECT_WARPS % KS == 0 && R * NB <= 32,
                  "KS divides the warps; a lane a sum");
    __shared__ float part[GEMV_DIRECT_WARPS][R][NB];
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
        const float *xb = x + (size_t)(c / T::UPB) * T::BE;
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (b >= nb) break;
#pragma unroll
            for (int g = 0; g < T::NG; g++) {
                const float4 xv = __ldg((const float4 *)(xb + (size_t)b * K + xo[g]));
#pragma unroll
                for (int r = 0; r < R; r++)
                    acc[r][b] += w[r][4 * g] * xv.x + w[r][4 * g + 1] * xv.y +
                                 w[r][4 * g + 2] * xv.z + w[r][4 * g + 3] * xv.w;
            }
        }
    };
    /* launched with PDL (pdl.cuh): the weights, which no kernel writes, are loaded and decoded
     * while the kernel before still runs; x only after the wait */
    const int first = c_beg + lane;
    const bool live = row0 < M && first < c_end;
    if (live) decode(first);
    si_pdl_trigger();
    si_pdl_wait();
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
                  (const uint8_t *)W, M, K, row_bytes, x, nb, y);
}

/* Timing knob (read at the first call): SI_CUDA_GEMV_DIRECT=0, these rows take the general
 * kernel again. */
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
