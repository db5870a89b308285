/* cuda_sample.h — token sampling on the GPU (sample.cu): the CPU sampler's chain after the
 * penalties (src/engine/sampler_pick.h) on logits that never leave the device; only the ids come
 * back (and, for requests that ask, their logprobs). C-callable; enqueues on `stream` and
 * returns at once. */
#ifndef SI_BACKEND_CUDA_SAMPLE_H
#define SI_BACKEND_CUDA_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "swiftinfer.h" /* SI_MAX_TOP_LOGPROBS */

#ifdef __cplusplus
extern "C" {
#endif

/* One row's sampling parameters, as sampler_pick's: temperature <= 0 is greedy (argmax, ties to
 * the lowest id); otherwise top-k (0: off) -> top-p (1: off) -> min-p (0: off) -> temperature ->
 * softmax -> the token where the cumulative probability, in the order higher logit first then
 * lower id, first exceeds u (a uniform draw in [0, 1) made by the host's sampler). */
typedef struct cuda_sample_params {
    double u;
    float temperature;
    int32_t top_k;
    float top_p, min_p;
    float log_min_p;  /* logf(min_p) by the host's C library (min_p > 0): min-p keeps logits >=
                       * max + log_min_p, sampler_pick's threshold bit for bit */
    int32_t logprobs; /* for cuda_logprobs_rows: < 0 none, else that many top tokens (<= 20) */
    /* for cuda_penalise_rows: the factors of sampler_penalise and the row's pen_n (token,
     * count) pairs, pen_at the first's index in the step's pairs (pen_n 0: none); its bias_n
     * logit biases, (token, the bias's float bits) pairs from bias_at on */
    float repetition, frequency, presence;
    int32_t pen_at, pen_n;
    int32_t bias_at, bias_n;
} cuda_sample_params;

/* The logit biases and penalties of the sampler's chain (sampler_logit_bias,
 * sampler_penalty_pairs, sampler_penalise in src/engine/sampler_pick.h) on the device, in place
 * before cuda_sample, each logit rounded as the CPU rounds it (bit for bit). For each row
 * r < n_rows: first, for j < params[r].bias_n and k = params[r].bias_at + j, with
 * (t, b) = (pen[2 k], pen[2 k + 1] as a float), saved[k] = logits[r][t] and logits[r][t] += b;
 * then, for j < params[r].pen_n and k = params[r].pen_at + j, with (t, c) = (pen[2 k],
 * pen[2 k + 1]), saved[k] = logits[r][t] and logits[r][t] = sampler_penalise(saved[k], c,
 * params[r]'s factors). Each list's ids must be distinct and in [0, n_vocab). With restore,
 * puts the saved values back in the reverse order (the raw logits, for cuda_logprobs_rows).
 * Device pointers; one CTA a row. */
void cuda_penalise_rows(float *logits, int n_vocab, int n_rows, const cuda_sample_params *params,
                        const int32_t *pen, float *saved, bool restore, cudaStream_t stream);

/* ids[r] = the token sampled from logits row r (f32 [n_rows][n_vocab]) with params[r], for
 * r < n_rows; params and ids are device pointers. One cluster of 1-8 CTAs per row; no sort: the
 * cut-offs are found by radix selection over the row (see sample.cu). */
void cuda_sample(const float *logits, int n_vocab, int n_rows, const cuda_sample_params *params,
                 int32_t *ids, cudaStream_t stream);

/* A row's logprobs (sampler_logprobs' on the CPU): the picked token's, and the most likely
 * tokens' with theirs, most likely first, ties to the lower id. */
typedef struct cuda_logprobs {
    float logprob;
    int32_t n_top;
    int32_t top_id[SI_MAX_TOP_LOGPROBS];
    float top_logprob[SI_MAX_TOP_LOGPROBS];
} cuda_logprobs;

/* out[r] = the logprobs of ids[r] in logits row r and the params[r].logprobs most likely
 * tokens', for the rows r < n_rows whose params[r].logprobs >= 0 (others untouched); device
 * pointers. One CTA a row: max, the double sum of exp, then one pass a top token. */
void cuda_logprobs_rows(const float *logits, int n_vocab, int n_rows,
                        const cuda_sample_params *params, const int32_t *ids, cuda_logprobs *out,
                        cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
