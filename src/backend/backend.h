/* backend.h — what the engine and si_session call to run the model: a small table of function
 * pointers per device (ggml-backend's design, DESIGN.md "Backends"). A backend owns everything
 * device-side for one model: the weights as its kernels read them, the paged KV storage and the
 * per-step scratch. Which KV blocks belong to which sequence stays the engine's business
 * (kv_pool): the backend only sees block ids in the batch's block tables.
 *
 * cpu  (src/backend/cpu/cpu_backend.c): forward_batch over a host kv_cache, weights in place.
 * cuda (src/backend/cuda/cuda_backend.c): weights uploaded once, KV pool and scratch in device
 *      memory, the same forward pass as a flat list of kernel launches. */
#ifndef SI_BACKEND_BACKEND_H
#define SI_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/batch.h"
#include "model/model.h"

/* Sizes fixed for the backend state's lifetime. */
typedef struct backend_params {
    int32_t n_blocks;   /* KV blocks of KV_BLOCK_SIZE tokens (all layers, K and V) */
    int32_t max_tokens; /* tokens per forward call */
    int32_t max_seqs;   /* sequences per forward call */
    int32_t max_kv;     /* KV length of any sequence; block tables have max_kv / 16 columns */
    int32_t kv_dtype;   /* si_kv_cache_dtype of the KV storage (SI_KV_F16 unless kv_fp8) */
} backend_params;

typedef struct backend_stats {
    const char *device;   /* "cpu" or the GPU's name */
    size_t weight_bytes;  /* device copies of the weights (0: used in place) */
    size_t kv_bytes;      /* the KV pool */
    size_t scratch_bytes; /* per-step scratch */
} backend_stats;

/* The most (token, count) penalty pairs a row of forward_sample takes (backend_sample.n_pen):
 * a window of up to 256 tokens always fits (the default, and the OpenAI server's, is 64); the
 * engine and si_session sample a row whose window holds more distinct ids on the host. */
#define BACKEND_PEN_MAX 256

/* One sequence's sampling for forward_sample: its logit biases, its penalties as
 * sampler_penalty_pairs' pairs and the sampler's factors (src/engine/sampler_pick.h), then the
 * chain after them with u, the
 * uniform draw in [0, 1) its own RNG made for this step (unused when temperature <= 0:
 * greedy). */
typedef struct backend_sample {
    float temperature;
    int32_t top_k;
    float top_p, min_p;
    double u;
    int32_t logprobs; /* < 0: none; else the picked token's logprob and the `logprobs` (<=
                       * SI_MAX_TOP_LOGPROBS) most likely tokens' (sampler_logprobs), of the
                       * logits before the penalties */
    float repetition, frequency, presence; /* sampler_penalise's factors */
    int32_t n_pen;                         /* 0..BACKEND_PEN_MAX pairs: */
    const int32_t *pen_tok, *pen_count;    /* distinct ids and their counts (host memory) */
    int32_t n_bias;                        /* 0..SI_MAX_LOGIT_BIAS logit biases, added first */
    const si_logit_bias *bias;             /* (host memory, distinct ids) */
} backend_sample;

/* One sequence's logprobs from forward_sample (backend_sample.logprobs >= 0): sampler_logprobs'
 * result for the picked token. */
typedef struct backend_logprobs {
    float logprob;
    int32_t n_top;
    si_token_logprob top[SI_MAX_TOP_LOGPROBS];
} backend_logprobs;

typedef struct si_backend {
    const char *name; /* "cpu", "cuda" */
    /* true when attention can rotate keys stored un-rotated (si_batch.rope_on_read), which
     * streaming (attention-sink) sequences need */
    bool rope_on_read;
    /* true when the KV storage can hold FP8 E4M3 (backend_params.kv_dtype SI_KV_FP8_E4M3) */
    bool kv_fp8;
    /* Prepares m for this device and allocates KV storage and scratch for p. *state is the
     * caller's until free. Errors name what did not fit. */
    si_status (*create)(si_model *m, const backend_params *p, void **state);
    /* forward_batch's contract (src/model/forward.h): writes each token's K/V, attends through
     * the block tables, and writes n_vocab logits to logits_host + s * n_vocab for each
     * sequence s with b->logits_row[s] >= 0 (host memory; the call returns when they are
     * there). Rows of sequences that want no logits are unspecified. */
    void (*forward)(void *state, const si_batch *b, float *logits_host);
    /* Optional (NULL: not offered). forward, then samples on the device: ids[s] = the token
     * sequence s picks from its logits with smp[s] (sampler_pick's result for the same logits
     * after smp[s]'s n_bias biases, each one float addition, and its n_pen penalties,
     * sampler_penalise's arithmetic exactly),
     * -1 for sequences with b->logits_row[s] < 0; lp[s] its logprobs where smp[s].logprobs >= 0
     * (lp may be NULL when none asks). smp, ids, lp: [b->n_seqs], host memory; the logits stay
     * on the device. */
    void (*forward_sample)(void *state, const si_batch *b, const backend_sample *smp, int32_t *ids,
                           backend_logprobs *lp);
    /* Optional (NULL: not offered): forward_sample in two halves for batches of one sequence
     * without logprobs, so that the next step can run while the host takes the last one's id
     * (si_session's step ahead). sample_begin enqueues b's forward pass and the sampling with
     * smp and returns at once; with feed_back, b's (only) token is the id the step begun
     * before it picks, taken on the device (b->token[0] is then a placeholder). sample_end
     * waits for the oldest begun step and returns its id. At most two steps are begun and not
     * ended; every sample_begin has its sample_end, and neither forward nor forward_sample is
     * called while one is outstanding. */
    void (*sample_begin)(void *state, const si_batch *b, const backend_sample *smp, bool feed_back);
    int32_t (*sample_end)(void *state);
    /* Optional (NULL: none): host memory for max_seqs rows of n_vocab logits, owned by the
     * state, which forward fills with no copy on the host when given it as logits_host (on a
     * GPU: pinned memory the device copies into directly; si_session and the engine keep their
     * logits there). */
    float *(*logits_buffer)(void *state);
    void (*stats)(const void *state, backend_stats *out);
    void (*free)(void *state);
    /* KV blocks of block_bytes that fit in `fraction` of the device's free memory once m's
     * weights and the scratch for p (p->n_blocks ignored) are taken out; SI_ERR_NOMEM with the
     * numbers when nothing is left. NULL on backends without their own memory (cpu). */
    si_status (*kv_blocks_for_fraction)(const si_model *m, const backend_params *p,
                                        double fraction, size_t block_bytes, int64_t *n_blocks);
    /* The device memory's bandwidth, the roofline of `bench` (cuda_copy_bandwidth): best and
     * mean of `runs` copies of `bytes`, counting bytes read plus written. NULL on backends that
     * use the host's memory (cpu: bench_memory measures it). */
    si_status (*copy_bandwidth)(size_t bytes, int runs, double *best_gbps, double *mean_gbps);
} si_backend;

/* The backend tables. backend_cuda() is NULL when SwiftInfer was built without CUDA. */
const si_backend *backend_cpu(void);
const si_backend *backend_cuda(void);

/* True when the CUDA backend is built in and the runtime sees at least one GPU. */
bool backend_cuda_usable(void);

/* Resolves a requested device: AUTO becomes CUDA when usable, else CPU; CUDA without a usable
 * GPU is SI_ERR_UNSUPPORTED with the reason. */
si_status backend_resolve(si_device want, si_device *out);

/* The table for the device m was loaded for (m->device). */
const si_backend *backend_for_model(const si_model *m);

/* True when rows whose penalties read the history may be sampled by be's forward_sample (given
 * their pairs) rather than on the host: be offers forward_sample and SI_DEVICE_PENALTIES is not
 * 0 (=0: the host samples them, as before; for tests and A/B runs). */
bool backend_penalties_on_device(const si_backend *be);

/* SI_OK when be can keep a KV cache of kv_dtype (si_kv_cache_dtype); else the error, naming
 * who asked (e.g. "engine", "session") and the flag's fix. */
si_status backend_check_kv_dtype(const si_backend *be, int32_t kv_dtype, const char *who);

#endif
