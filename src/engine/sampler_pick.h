/* sampler_pick.h — the sampler's chain after the penalties (sampler.c) as a pure function of the
 * logits, the parameters and one uniform draw. si_sampler_sample is penalties + sampler_pick; a
 * device that samples (the backend's forward_sample, e.g. src/backend/cuda/sample.cu) follows
 * the same chain and is tested against sampler_pick. The engine lets the device sample only for
 * requests whose penalties cannot change the logits (sampler_history_free), with the u that
 * sampler_draw takes from the request's own RNG, so seeds keep their meaning. Internal. */
#ifndef SI_ENGINE_SAMPLER_PICK_H
#define SI_ENGINE_SAMPLER_PICK_H

#include <stdbool.h>
#include <stdint.h>

#include "swiftinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sampler_cand {
    int32_t id;
    float logit; /* logit after penalties, later scaled by 1/temperature */
    float p;     /* probability within the current candidate set */
} sampler_cand;

/* The chain's parameters (si_sampling_params without the penalties and the seed). */
typedef struct sampler_chain {
    float temperature; /* <= 0: greedy */
    int32_t top_k;     /* 0: off */
    float top_p;       /* 1: off */
    float min_p;       /* 0: off */
} sampler_chain;

/* The token picked from the n candidates c[0..n) (every token's id and logit, in id order; c is
 * used as scratch and reordered). Order: higher logit first, then lower id.
 * temperature <= 0: the first token in that order (argmax, ties to the lowest id).
 * Otherwise: top-k (the first top_k tokens) -> top-p (the shortest prefix whose probabilities,
 * softmax before temperature, sum to >= top_p) -> min-p (logit >= max + log(min_p)) ->
 * temperature -> softmax -> walking the kept tokens in id order, the first token at which the
 * cumulative probability exceeds u (u uniform in [0, 1); the kept token with the highest id if
 * rounding leaves u above the total). When every logit is -inf: the first token in the order. */
int32_t sampler_pick(sampler_cand *c, int32_t n, const sampler_chain *p, double u);

/* True when s's penalties leave the logits unchanged for a history of n_history tokens (none
 * configured, or no history to look at): sampling then depends on the logits and u only. */
bool sampler_history_free(const si_sampler *s, int32_t n_history);

/* s's logit biases (its copy of si_sampling_params.logit_bias) to *bias; returns how many.
 * si_sampler_sample adds each to its token's logit (one float addition) before the penalties. */
int32_t sampler_logit_bias(const si_sampler *s, const si_logit_bias **bias);

/* The penalties s's parameters apply for a history of n_history tokens, as (token, count)
 * pairs: each distinct in-vocabulary id of the window (the last penalty_last_n tokens; all when
 * -1) and how often it occurs there, in order of first occurrence, to tok[0..n) and count[0..n).
 * Returns n (0 when sampler_history_free), or -1, tok and count untouched, when the window
 * holds more than cap distinct ids. si_sampler_sample penalises exactly these logits; a device
 * that samples is given them (backend_sample.pen_*). */
int32_t sampler_penalty_pairs(si_sampler *s, const int32_t *history, int32_t n_history, int32_t cap,
                              int32_t *tok, int32_t *count);

/* One logit after the penalties for a token seen count (> 0) times in the window: divided by
 * repetition when positive, else multiplied by it (llama.cpp's repeat_penalty), then less
 * count * frequency + presence (OpenAI's), each operation rounded to float in this order (a
 * device that applies penalties rounds the same way: the same logits, bit for bit). */
float sampler_penalise(float logit, int32_t count, float repetition, float frequency,
                       float presence);

/* s's chain, and *u: the uniform draw s's RNG makes for one token, exactly as si_sampler_sample
 * does (one draw when temperature > 0; none, and *u = 0, when greedy). */
void sampler_draw(si_sampler *s, sampler_chain *chain, double *u);

/* sampler_draw into *q, a backend_sample (src/backend/backend.h) for one step of the backend's
 * forward_sample: s's logit biases, its chain and u, its penalty factors with no pairs
 * (q->n_pen = 0: the caller attaches sampler_penalty_pairs' where the history calls for them);
 * no logprobs (q->logprobs = -1). */
struct backend_sample;
void sampler_draw_sample(si_sampler *s, struct backend_sample *q);
/* The draw sampler_draw_sample would make next, s unchanged: for a step run ahead (si_session),
 * which the next real draw confirms or not. */
void sampler_peek_sample(const si_sampler *s, struct backend_sample *q);

/* The engine's logprobs for token tok from raw logits[n_vocab] (before penalties and
 * temperature): *logprob = logits[tok] - logsumexp(logits) (max + log of the double sum of
 * exp(logit - max), rounded to float), and the k (<= SI_MAX_TOP_LOGPROBS) most likely tokens in
 * top, most likely first, ties to the lower id. Returns how many entries top got (k, or n_vocab
 * when smaller). A device that computes logprobs (cuda_logprobs_rows) is tested against it. */
int32_t sampler_logprobs(const float *logits, int32_t n_vocab, int32_t tok, int32_t k,
                         float *logprob, si_token_logprob *top);

#ifdef __cplusplus
}
#endif

#endif
