/* elementwise.cu — the small memory-bound operations of a llama layer and its ends: SwiGLU
 * (Shazeer 2020), residual add, embedding row gather (get_rows, dequantising), greedy argmax,
 * and the f16 dequantiser the prefill GEMM uses. Grid-stride loops; argmax keeps the lowest
 * index on ties, as the CPU sampler does. */
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/weight_units.cuh"

static int ew_grid(int64_t n) {
    const int64_t g = (n + EW_THREADS - 1) / EW_THREADS;
    return (int)(g < 65535 * 8 ? (g > 0 ? g : 1) : 65535 * 8);
}

/* swiglu and add sit between matmuls of a decode step: launched with PDL (pdl.cuh) */
__global__ void swiglu_kernel(float *out, const float *gate, const float *up, int64_t n) {
    si_pdl_trigger();
    si_pdl_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        out[i] = si_silu_mul(gate[i], up[i]);
    }
}

__global__ void add_kernel(float *x, const float *y, int64_t n) {
    si_pdl_trigger();
    si_pdl_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] += y[i];
}

extern "C" void cuda_swiglu(float *out, const float *gate, const float *up, int64_t n,
                            cudaStream_t stream) {
    if (n <= 0) return;
    si_launch_pdl(swiglu_kernel, ew_grid(n), EW_THREADS, 0, stream, out, gate, up, n);
}

extern "C" void cuda_add(float *x, const float *y, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    si_launch_pdl(add_kernel, ew_grid(n), EW_THREADS, 0, stream, x, y, n);
}

/* one CTA per (row, chunk of units) */
template <class T>
__global__ void get_rows_kernel(const uint8_t *E, int n_cols, size_t row_bytes,
                                const int32_t *ids, float *out) {
    const int i = blockIdx.y;
    const uint8_t *row = E + (size_t)ids[i] * row_bytes;
    const int units = n_cols / T::BE * T::UPB;
    for (int u = blockIdx.x * blockDim.x + threadIdx.x; u < units; u += gridDim.x * blockDim.x) {
        const int blk = u / T::UPB;
        float w[T::NG * 4];
        int xo[T::NG];
        T::unit(row + (size_t)blk * T::BB, u % T::UPB, w, xo);
        float *o = out + (size_t)i * n_cols + (size_t)blk * T::BE;
#pragma unroll
        for (int g = 0; g < T::NG; g++)
#pragma unroll
            for (int j = 0; j < 4; j++) o[xo[g] + j] = w[4 * g + j];
    }
}

template <class T>
static int get_rows_launch(const void *E, int n_cols, const int32_t *ids, int n_ids, float *out,
                           cudaStream_t st) {
    if (n_cols % T::BE) return -1;
    const int units = n_cols / T::BE * T::UPB;
    dim3 grid(si_div_up(units, EW_THREADS), n_ids);
    get_rows_kernel<T><<<grid, EW_THREADS, 0, st>>>((const uint8_t *)E, n_cols,
                                                    (size_t)(n_cols / T::BE) * T::BB, ids, out);
    CUDA_CHECK_LAUNCH();
    return 0;
}

extern "C" int cuda_get_rows(si_type t, const void *E, int n_cols, const int32_t *ids, int n_ids,
                             float *out, cudaStream_t stream) {
    if (n_ids <= 0) return 0;
    if (t == SI_TYPE_F32) return get_rows_launch<tq_f32>(E, n_cols, ids, n_ids, out, stream);
    return with_weight_units(t, -1, [&](auto u) {
        return get_rows_launch<typename decltype(u)::tq>(E, n_cols, ids, n_ids, out, stream);
    });
}

/* dequantise to f16: one thread per unit */
template <class T>
__global__ void dequant_f16_kernel(const uint8_t *src, int64_t n_units, __half *dst) {
    for (int64_t u = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; u < n_units;
         u += (int64_t)gridDim.x * blockDim.x) {
        const int64_t blk = u / T::UPB;
        float w[T::NG * 4];
        int xo[T::NG];
        T::unit(src + blk * T::BB, (int)(u % T::UPB), w, xo);
        __half *o = dst + blk * T::BE;
#pragma unroll
        for (int g = 0; g < T::NG; g++) {
            /* 4 contiguous halves: one 8-byte store */
            __half2 a = __floats2half2_rn(w[4 * g], w[4 * g + 1]);
            __half2 b = __floats2half2_rn(w[4 * g + 2], w[4 * g + 3]);
            uint2 v;
            v.x = *(uint32_t *)&a;
            v.y = *(uint32_t *)&b;
            *(uint2 *)(o + xo[g]) = v;
        }
    }
}

template <class T>
static int dequant_launch(const void *src, int64_t n, void *dst, cudaStream_t st) {
    if (n % T::BE) return -1;
    const int64_t units = n / T::BE * T::UPB;
    dequant_f16_kernel<T><<<ew_grid(units), EW_THREADS, 0, st>>>((const uint8_t *)src, units,
                                                                 (__half *)dst);
    CUDA_CHECK_LAUNCH();
    return 0;
}

extern "C" int cuda_dequantize_f16(si_type t, const void *src, int64_t n, void *dst,
                                   cudaStream_t stream) {
    if (t == SI_TYPE_F32) return dequant_launch<tq_f32>(src, n, dst, stream);
    return with_weight_units(t, -1, [&](auto u) {
        using T = typename decltype(u)::tq;
        if constexpr (std::is_same<T, tq_f16>::value)
            return -1; /* cuBLASLt reads f16 as it is */
        else
            return dequant_launch<T>(src, n, dst, stream);
    });
}

__global__ void __launch_bounds__(ARGMAX_THREADS)
    argmax_kernel(const float *logits, int n, int32_t *out) {
    __shared__ float sv[32];
    __shared__ int si[32];
    const float *l = logits + (size_t)blockIdx.x * n;
    float best = -INFINITY;
    int bi = n; /* NaN-free logits always replace this */
    for (int i = threadIdx.x; i < n; i += ARGMAX_THREADS) {
        const float v = l[i];
        if (v > best) { best = v; bi = i; } /* i grows: the first max is kept */
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > best || (ov == best && oi < bi)) { best = ov; bi = oi; }
    }
    if (threadIdx.x % 32 == 0) { sv[threadIdx.x / 32] = best; si[threadIdx.x / 32] = bi; }
    __syncthreads();
    if (threadIdx.x < 32) {
        best = sv[threadIdx.x];
        bi = si[threadIdx.x];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, best, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > best || (ov == best && oi < bi)) { best = ov; bi = oi; }
        }
        if (threadIdx.x == 0) out[blockIdx.x] = bi < n ? bi : 0;
    }
}

extern "C" void cuda_argmax(const float *logits, int n, int n_rows, int32_t *out,
                            cudaStream_t stream) {
    if (n_rows <= 0 || n <= 0) return;
    argmax_kernel<<<n_rows, ARGMAX_THREADS, 0, stream>>>(logits, n, out);
    CUDA_CHECK_LAUNCH();
}
