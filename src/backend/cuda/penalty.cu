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

/* The biases of a row (value: a float's bits, added), or, with restore, their undoing */
static __device__ void add_biases(float *row, const cuda_sample_params &p, const int32_t *pen,
                                  float *saved, bool restore) {
    for (int j = threadIdx.x; j < p.bias_n; j += blockDim.x) {
        const int k = p.bias_at + j;
        const int32_t t = pen[2 * k];
        if (restore) {
            row[t] = saved[k];
            continue;
        }
        saved[k] = row[t];
        row[t] = __fadd_rn(row[t], __int_as_float(pen[2 * k + 1]));
    }
}

/* The penalties of a row (value: a count), the fed token counted once more where pen_fed, or,
 * with restore, their undoing. Every thread of the CTA calls it (a barrier inside). */
static __device__ void add_penalties(float *row, const cuda_sample_params &p, const int32_t *pen,
                                     int32_t fed, float *saved, bool restore) {
    bool seen = false; /* fed among this thread's pairs */
    for (int j = threadIdx.x; j < p.pen_n; j += blockDim.x) {
        const int k = p.pen_at + j;
        const int32_t t = pen[2 * k];
        seen |= p.pen_fed && t == fed;
        if (restore) {
            row[t] = saved[k];
            continue;
        }
        saved[k] = row[t];
        const int32_t count = pen[2 * k + 1] + (p.pen_fed && t == fed);
        row[t] = penalise(row[t], count, p.repetition, p.frequency, p.presence);
    }
    const bool fed_alone = p.pen_fed && !__syncthreads_or(seen);
    if (fed_alone && threadIdx.x == 0) {
        const int k = p.pen_at + p.pen_n;
        if (restore) {
            row[fed] = saved[k];
        } else {
            saved[k] = row[fed];
            row[fed] = penalise(row[fed], 1, p.repetition, p.frequency, p.presence);
        }
    }
}

/* the biases, then the penalties (a token may be in both); restore undoes them in reverse */
__global__ void penalise_kernel(float *logits, int n_vocab, const cuda_sample_params *params,
                                const int32_t *pen, const int32_t *fed, float *saved,
                                bool restore) {
    const cuda_sample_params p = params[blockIdx.x];
    float *row = logits + (size_t)blockIdx.x * n_vocab;
    const int32_t fed_tok = p.pen_fed ? fed[blockIdx.x] : -1;
    if (!restore) add_biases(row, p, pen, saved, false);
    __syncthreads();
    add_penalties(row, p, pen, fed_tok, saved, restore);
    __syncthreads();
    if (restore) add_biases(row, p, pen, saved, true);
}

extern "C" void cuda_penalise_rows(float *logits, int n_vocab, int n_rows,
                                   const cuda_sample_params *params, const int32_t *pen,
                                   const int32_t *fed, float *saved, bool restore,
                                   cudaStream_t stream) {
    if (n_rows <= 0) return;
    penalise_kernel<<<n_rows, PENALTY_THREADS, 0, stream>>>(logits, n_vocab, params, pen, fed,
                                                            saved, restore);
    CUDA_CHECK(cudaGetLastError());
}
