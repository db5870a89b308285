/* cuda_fwd.cu — small kernels of the CUDA forward pass (see cuda_fwd.h). All are memory-bound
 * copies; a grid-stride loop over the flattened output, 256 threads a block. */
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_fwd.h"

static int fwd_grid(long long n) {
    const long long g = (n + 255) / 256;
    return (int)(g < 1 ? 1 : g > 65535 ? 65535 : g);
}

__global__ void add_bias_kernel(float *x, const float *bias, int n, long long total) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x)
        x[i] += bias[i % n];
}

__global__ void gather_rows_kernel(float *dst, const float *src, const int32_t *rows, int n_cols,
                                   long long total) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long r = i / n_cols, c = i % n_cols;
        dst[i] = src[(long long)rows[r] * n_cols + c];
    }
}

__global__ void token_bt_kernel(int32_t *dst, const int32_t *bt, const int32_t *tok_seq,
                                int max_blocks, long long total) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long t = i / max_blocks, j = i % max_blocks;
        dst[i] = bt[(long long)tok_seq[t] * max_blocks + j];
    }
}

extern "C" void cuda_fwd_add_bias(float *x, const float *bias, int n, int n_rows,
                                  cudaStream_t stream) {
    const long long total = (long long)n * n_rows;
    if (total <= 0) return;
    add_bias_kernel<<<fwd_grid(total), 256, 0, stream>>>(x, bias, n, total);
    CUDA_CHECK_LAUNCH();
}

extern "C" void cuda_fwd_gather_rows(float *dst, const float *src, const int32_t *rows,
                                     int n_rows, int n_cols, cudaStream_t stream) {
    const long long total = (long long)n_rows * n_cols;
    if (total <= 0) return;
    gather_rows_kernel<<<fwd_grid(total), 256, 0, stream>>>(dst, src, rows, n_cols, total);
    CUDA_CHECK_LAUNCH();
}

extern "C" void cuda_fwd_token_block_tables(int32_t *dst, const int32_t *bt,
                                            const int32_t *tok_seq, int n_tokens, int max_blocks,
                                            cudaStream_t stream) {
    const long long total = (long long)n_tokens * max_blocks;
    if (total <= 0) return;
    token_bt_kernel<<<fwd_grid(total), 256, 0, stream>>>(dst, bt, tok_seq, max_blocks, total);
    CUDA_CHECK_LAUNCH();
}
