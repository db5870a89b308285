/* penalty.cu — the sampler's logit biases and its repetition, frequency and presence penalties
 * applied to logits rows on the device (cuda_penalise_rows, cuda_sample.h), so that a request
 * with them is sampled where its logits are. The host counts each row's window into (token,
 * count) pairs (sampler_penalty_pairs) and sends its biases as (token, bias) pairs; here each
 * pair is one thread's, and its logit gets the CPU's arithmetic with every rounding spelled out
 * (__fadd_rn, __fdiv_rn and friends: no contraction into an FMA, no approximate division), so
 * the adjusted logits are the CPU's bit for bit. */
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_sample.h"

#define PENALTY_THREADS 256

/* sampler_penalise (src/engine/sampler.c), operation for operation */
static __device__ float penalise(float logit, int32_t count, float repetition, float frequency,
                                 float presence) {
    const float l = logit > 0.0f ? __fdiv_rn(logit, repetition) : __fmul_rn(logit, repetition);
    return __fsub_rn(l, __fadd_rn(__fmul_rn(__int2float_rn(count), frequency), presence));
}

/* One list of a row: (token, value) entries k = at .. at + n - 1 of pen; bias: value is a
 * float's bits, added, else a count for penalise. */
static __device__ void adjust(float *row, const cuda_sample_params &p, const int32_t *pen,
                              float *saved, int at, int n, bool bias, bool restore) {
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const int k = at + j;
        const int32_t t = pen[2 * k];
        if (restore) {
            row[t] = saved[k];
            continue;
        }
        saved[k] = row[t];
        row[t] = bias ? __fadd_rn(row[t], __int_as_float(pen[2 * k + 1]))
                      : penalise(row[t], pen[2 * k + 1], p.repetition, p.frequency, p.presence);
    }
}

/* the biases, then the penalties (a token may be in both); restore undoes them in reverse */
__global__ void penalise_kernel(float *logits, int n_vocab, const cuda_sample_params *params,
                                const int32_t *pen, float *saved, bool restore) {
    const cuda_sample_params p = params[blockIdx.x];
    float *row = logits + (size_t)blockIdx.x * n_vocab;
    const bool first_bias = !restore;
    adjust(row, p, pen, saved, first_bias ? p.bias_at : p.pen_at, first_bias ? p.bias_n : p.pen_n,
           first_bias, restore);
    __syncthreads();
    adjust(row, p, pen, saved, first_bias ? p.pen_at : p.bias_at, first_bias ? p.pen_n : p.bias_n,
           !first_bias, restore);
}

extern "C" void cuda_penalise_rows(float *logits, int n_vocab, int n_rows,
                                   const cuda_sample_params *params, const int32_t *pen,
                                   float *saved, bool restore, cudaStream_t stream) {
    if (n_rows <= 0) return;
    penalise_kernel<<<n_rows, PENALTY_THREADS, 0, stream>>>(logits, n_vocab, params, pen, saved,
                                                            restore);
    CUDA_CHECK(cudaGetLastError());
}
