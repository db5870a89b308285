/* swiftinfer.h — the public C API of SwiftInfer.
 *
 * Every function that can fail returns an si_status; on failure, si_last_error() returns a
 * message (thread-local, valid until the next failing call on the same thread) that names what
 * went wrong and where: the file, tensor, metadata key or byte offset.
 *
 * Ownership: every si_*_load / si_*_create has a matching *_free. Pointers returned by getters
 * belong to the object they came from and live as long as it does.
 */
#ifndef SWIFTINFER_H
#define SWIFTINFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. Append new values at the end. */
typedef enum si_status {
    SI_OK = 0,
    SI_ERR_IO,            /* a file could not be opened, read or mapped */
    SI_ERR_FORMAT,        /* a file or value is malformed (truncated, corrupt, out of bounds) */
    SI_ERR_UNSUPPORTED,   /* well-formed but not supported (version, tensor type, architecture) */
    SI_ERR_INVALID_ARG,   /* a caller's argument is invalid (flag, parameter, prompt) */
    SI_ERR_NOMEM,         /* an allocation failed */
    SI_ERR_NOT_FOUND,     /* a metadata key or tensor is missing */
    SI_ERR_CONTEXT_FULL,  /* the sequence does not fit the context window */
    SI_ERR_INTERNAL,      /* a bug: please report it */
} si_status;

/* The message of the last failure on this thread ("" if none). */
const char *si_last_error(void);

/* A short name for a status ("SI_ERR_FORMAT"). */
const char *si_status_name(si_status s);

/* Tensor element types. The numeric values are GGUF's (ggml_type), so a type read from a file
 * converts directly. Not every value in this range is supported: see si_type_name(). */
typedef enum si_type {
    SI_TYPE_F32 = 0,
    SI_TYPE_F16 = 1,
    SI_TYPE_Q4_0 = 2,
    SI_TYPE_Q4_1 = 3,
    SI_TYPE_Q5_0 = 6,
    SI_TYPE_Q5_1 = 7,
    SI_TYPE_Q8_0 = 8,
    SI_TYPE_Q8_1 = 9,
    SI_TYPE_Q2_K = 10,
    SI_TYPE_Q3_K = 11,
    SI_TYPE_Q4_K = 12,
    SI_TYPE_Q5_K = 13,
    SI_TYPE_Q6_K = 14,
    SI_TYPE_Q8_K = 15,
    SI_TYPE_IQ4_NL = 20,
    SI_TYPE_IQ4_XS = 23,
    SI_TYPE_BF16 = 30,
    SI_TYPE_COUNT = 31,
} si_type;

/* "q4_k", or NULL when SwiftInfer does not support the type. */
const char *si_type_name(si_type t);

/* ---- Models ------------------------------------------------------------------------------- */

typedef struct si_model si_model;

/* Where the model runs. AUTO: the CUDA backend when it is built in and a GPU is present
 * (cudaGetDeviceCount), else the CPU. */
typedef enum si_device {
    SI_DEVICE_AUTO = 0,
    SI_DEVICE_CPU,
    SI_DEVICE_CUDA,
} si_device;

typedef struct si_model_params {
    int32_t n_ctx;      /* context window in tokens; 0: the model's trained length, capped at 4096 */
    int32_t n_threads;  /* CPU threads; 0: all online cores */
    bool verbose;       /* print load progress to stderr */
    si_device device;   /* SI_DEVICE_CUDA without a usable GPU: si_model_load fails */
} si_model_params;

si_model_params si_model_default_params(void);

/* Loads a GGUF model: maps the file read-only, reads hyper-parameters, tensors and tokenizer.
 * On success *out owns the mapping; free it with si_model_free. */
si_status si_model_load(const char *path, const si_model_params *p, si_model **out);
void si_model_free(si_model *m);

int32_t si_model_n_vocab(const si_model *m);
int32_t si_model_n_ctx(const si_model *m);
/* The architecture name from general.architecture ("llama", "qwen2"). */
const char *si_model_arch(const si_model *m);

/* ---- Tokenizer ---------------------------------------------------------------------------- */

/* Tokenises UTF-8 text. add_special: prepend BOS when the model asks for it (tokenizer.ggml.
 * add_bos_token). parse_special: text such as "<|im_end|>" becomes its special token instead of
 * plain characters. Writes at most cap ids into out and returns the total count needed, or -1 on
 * error (see si_last_error). */
int32_t si_tokenize(const si_model *m, const char *text, size_t len, bool add_special,
                    bool parse_special, int32_t *out, int32_t cap);

/* The bytes of one token as it appears in text (control tokens render as ""). Returns the byte
 * count written (at most cap), or the count needed when it exceeds cap, or -1 for a bad id. */
int32_t si_token_to_piece(const si_model *m, int32_t token, char *out, int32_t cap);

/* The beginning-of-sequence token, or -1 when the model has none. */
int32_t si_token_bos(const si_model *m);

/* True when a token ends generation (EOS, EOT, <|im_end|>, <|eot_id|>, ...). */
bool si_token_is_eog(const si_model *m, int32_t token);

/* ---- Chat --------------------------------------------------------------------------------- */

/* Renders a conversation with the model's own chat template (tokenizer.chat_template), run the
 * way Hugging Face transformers' apply_chat_template runs it (jinja2 semantics, bos_token and
 * eos_token set, raise_exception). messages_json: an OpenAI-style JSON array of message objects
 * ({"role", "content"}, tool_calls and the like kept as they are); tools_json: a JSON array of
 * tool definitions, or NULL. On SI_OK *out is a NUL-terminated prompt (free it with si_free) to
 * tokenise with add_special and parse_special (si_tokenize, or as si_request.prompt): a BOS the
 * template writes itself is left out of it where the tokenizer adds one, so the prompt gets one.
 * SI_ERR_NOT_FOUND: the model has no chat template; SI_ERR_INVALID_ARG: malformed JSON (the
 * offset is named) or a conversation the template rejects (its message); SI_ERR_FORMAT: the
 * template does not parse or fails while running (line and column named). */
si_status si_chat_apply_template(const si_model *m, const char *messages_json,
                                 const char *tools_json, bool add_generation_prompt, char **out);

/* Frees memory the library returned to the caller (si_chat_apply_template's prompt). */
void si_free(void *p);

/* ---- Single-sequence generation (the reference path) ------------------------------------- */

typedef struct si_session si_session;

/* Element type of a KV cache (si_session_params and si_engine_params .kv_cache_dtype), vLLM's
 * --kv-cache-dtype. FP8 halves the KV bytes (twice the blocks for the same memory, half the
 * bytes each decode step reads) at the cost of rounding every cached K and V element to E4M3
 * (3 mantissa bits, saturated to +-448, scale 1: no calibration, vLLM's default without scales).
 * The CUDA backend only; elsewhere si_session_create_params and si_engine_create say
 * SI_ERR_UNSUPPORTED. */
typedef enum si_kv_cache_dtype {
    SI_KV_F16 = 0,      /* f16 (the default; vLLM's "auto") */
    SI_KV_FP8_E4M3 = 1, /* OCP FP8 E4M3, round to nearest even, saturating */
} si_kv_cache_dtype;

typedef struct si_session_params {
    int32_t n_batch;        /* tokens per prefill pass (llama.cpp's n_batch: larger passes read
                             * the weights fewer times; the backend's scratch grows with it);
                             * results do not depend on it. Default SI_SESSION_DEFAULT_BATCH */
    int32_t kv_cache_dtype; /* si_kv_cache_dtype (default SI_KV_F16) */
} si_session_params;
#define SI_SESSION_DEFAULT_BATCH 512
si_session_params si_session_default_params(void);

/* A session on m (not owned; it must outlive the session) with its KV cache for the model's
 * context allocated once. params may be NULL (the defaults). SI_ERR_INVALID_ARG for bad params,
 * SI_ERR_UNSUPPORTED for an FP8 cache off the CUDA backend, SI_ERR_NOMEM. */
si_status si_session_create_params(si_model *m, const si_session_params *params, si_session **out);
/* The same with the defaults but n_batch */
si_status si_session_create_batch(si_model *m, int32_t n_batch, si_session **out);
si_status si_session_create(si_model *m, si_session **out);
void si_session_free(si_session *s);

/* Evaluates n tokens at the end of the session's sequence and makes the last one's logits
 * available. Fails with SI_ERR_CONTEXT_FULL (and changes nothing) when they do not fit. */
si_status si_session_eval(si_session *s, const int32_t *tokens, int32_t n);
/* Logits of the last evaluated token: n_vocab floats, owned by the session; NULL when the last
 * call was si_session_eval_sample and the token was picked on the device. */
const float *si_session_logits(const si_session *s);
/* Tokens in the session so far. */
int32_t si_session_n_past(const si_session *s);
/* Forgets everything after the first n tokens. */
void si_session_truncate(si_session *s, int32_t n);

typedef struct si_sampler si_sampler; /* a sampling chain with its RNG (below) */
/* si_session_eval, then *id = the token smp picks from the last one's logits, the same token
 * (and the same draw from smp's RNG) as si_sampler_sample(smp, logits, history, n_history).
 * Where the backend samples on the device (CUDA), only the id comes back from the GPU, not
 * n_vocab logits (smp's logit biases and penalties are applied there, unless its penalty
 * window holds more than 256 distinct ids): the way to generate one sequence. history: the
 * tokens so far, these included (for the penalties). There (smp without penalties), before it
 * returns, it also starts the next step on the device, fed the id it returns and sampled with
 * smp's next draw, which the next call uses when it evaluates that id with that draw (else it
 * is dropped; the ids are the same either way; SI_SESSION_AHEAD=0 at session creation turns
 * it off): the GPU does not wait while the caller handles the token.
 * si_session_eval's errors, and SI_ERR_INVALID_ARG when smp or id is NULL. */
si_status si_session_eval_sample(si_session *s, const int32_t *tokens, int32_t n, si_sampler *smp,
                                 const int32_t *history, int32_t n_history, int32_t *id);

/* ---- Sampling ----------------------------------------------------------------------------- */

/* One entry of si_sampling_params.logit_bias: bias added to token's logit (OpenAI's
 * logit_bias: -100 bans a token in practice, 100 all but forces it). */
typedef struct si_logit_bias {
    int32_t token;
    float bias;
} si_logit_bias;

#define SI_MAX_LOGIT_BIAS 300 /* entries a sampler takes (OpenAI's limit) */

typedef struct si_sampling_params {
    float temperature;        /* 0: greedy */
    int32_t top_k;            /* 0: off */
    float top_p;              /* 1: off */
    float min_p;              /* 0: off */
    float repetition_penalty; /* 1: off (llama.cpp's repeat_penalty) */
    float frequency_penalty;  /* 0: off (OpenAI) */
    float presence_penalty;   /* 0: off (OpenAI) */
    int32_t penalty_last_n;   /* how many recent tokens the penalties look at; -1: all */
    uint64_t seed;            /* same seed, same inputs => same tokens */
    /* n_logit_bias (0..SI_MAX_LOGIT_BIAS) distinct in-vocabulary tokens whose logits get a
     * finite bias, first in the chain (before the penalties, as llama.cpp and vLLM order
     * them); logprobs stay those of the model's logits. Copied by si_sampler_create. */
    const si_logit_bias *logit_bias;
    int32_t n_logit_bias;
} si_sampling_params;

si_sampling_params si_sampling_default_params(void);

/* si_sampler: declared with the session functions above */
si_status si_sampler_create(const si_sampling_params *p, int32_t n_vocab, si_sampler **out);
void si_sampler_free(si_sampler *s);
/* Picks the next token from logits (not modified). history: tokens so far, for the penalties. */
int32_t si_sampler_sample(si_sampler *s, const float *logits, const int32_t *history,
                          int32_t n_history);


/* ---- Engine: continuous batching over a paged KV cache ------------------------------------ */

/* An engine runs many requests on one model at once: one engine thread loops schedule ->
 * forward -> sample -> emit over a ragged batch (vLLM v1's design), with a paged KV pool, prefix
 * caching, preemption and StreamingLLM attention sinks (DESIGN.md, "Schedule" and "KV cache").
 * Every si_engine_* function may be called from any thread. */
typedef struct si_engine si_engine;
typedef uint64_t si_request_id;

typedef struct si_engine_params {
    int32_t max_num_seqs;       /* sequences running at once (default 64) */
    int32_t max_batched_tokens; /* tokens per step, prefill chunks included (default 512) */
    int32_t max_wait_ms;        /* dynamic batching: when idle, wait at most this long ... */
    int32_t min_batch;          /* ... for at least this many requests before starting (1) */
    size_t kv_memory;           /* bytes for the KV pool; 0: see n_blocks */
    int32_t n_blocks;           /* KV blocks of 16 tokens when kv_memory is 0; both 0: room
                                 * for max_num_seqs full contexts, capped at 1 GiB, at least one
                                 * context */
    float gpu_memory_fraction;  /* CUDA only, > 0: the KV pool gets this fraction of the free GPU
                                 * memory minus the weights and scratch (vLLM's
                                 * gpu_memory_utilization); overrides kv_memory and n_blocks */
    int32_t kv_cache_dtype;     /* si_kv_cache_dtype (default SI_KV_F16); kv_memory and
                                 * gpu_memory_fraction buy blocks at its element size */
} si_engine_params;

si_engine_params si_engine_default_params(void);

/* Creates an engine on m (not owned; it must outlive the engine) and starts its thread.
 * Allocates the KV pool and the per-step scratch once. SI_ERR_INVALID_ARG for bad params (a
 * KV budget smaller than one block names both sizes), SI_ERR_NOMEM. */
si_status si_engine_create(si_model *m, const si_engine_params *p, si_engine **out);

/* Stops the engine thread, drops every request (unread events included) and frees everything.
 * No other call on e may be in progress or follow. */
void si_engine_free(si_engine *e);

#define SI_MAX_TOP_LOGPROBS 20
#define SI_MAX_STOP_LEN 128   /* bytes per stop string */
#define SI_EVENT_TEXT_CAP 1024 /* an event's text delta always fits (NUL included) */

typedef enum si_event_type {
    SI_EVENT_NONE = 0, /* si_engine_next_event timed out */
    SI_EVENT_TOKEN,    /* one sampled token, with its text delta */
    SI_EVENT_FINISH,   /* the last event of a request: reason, usage, last text delta */
    SI_EVENT_ERROR,    /* the last event of a request that failed: status and message */
} si_event_type;

typedef enum si_finish_reason {
    SI_FINISH_NONE = 0,
    SI_FINISH_STOP,      /* end-of-generation token, stop token id or stop string */
    SI_FINISH_LENGTH,    /* max_tokens (or the context) reached */
    SI_FINISH_CANCELLED, /* si_engine_cancel */
    SI_FINISH_ERROR,
} si_finish_reason;

/* "stop", "length", "cancelled", "error" (OpenAI's names where they exist). */
const char *si_finish_reason_name(si_finish_reason r);

typedef struct si_usage {
    int32_t prompt_tokens;
    int32_t completion_tokens; /* sampled tokens, a final stop token included */
    int32_t cached_tokens;     /* prompt tokens whose K/V came from the prefix cache */
} si_usage;

typedef struct si_token_logprob {
    int32_t token;
    float logprob; /* natural log of the model's probability (before sampling transforms) */
} si_token_logprob;

typedef struct si_event {
    si_event_type type;
    si_request_id id;
    int32_t token;        /* TOKEN: the sampled id */
    /* TOKEN / FINISH: new text, whole UTF-8 characters only; text held back while it may
     * still become a stop string comes in a later event, and a matched stop string never
     * comes. Concatenating every event's text gives the output. */
    size_t text_len;
    char text[SI_EVENT_TEXT_CAP];
    float logprob;        /* TOKEN with logprobs: the sampled token's */
    int32_t n_top;        /* TOKEN: entries in top (the request's top_logprobs) */
    si_token_logprob top[SI_MAX_TOP_LOGPROBS];
    si_finish_reason finish_reason; /* FINISH, ERROR */
    si_usage usage;                 /* FINISH, ERROR */
    si_status status;               /* ERROR */
    char error[256];                /* ERROR */
} si_event;

typedef void (*si_event_fn)(const si_event *ev, void *user);

typedef struct si_request {
    const char *prompt;           /* UTF-8 text (BOS added when the model asks, special tokens
                                   * parsed); NULL: use prompt_tokens */
    const int32_t *prompt_tokens;
    int32_t n_prompt_tokens;
    si_sampling_params sampling;  /* seed: per request; same seed, same output */
    int32_t max_tokens;           /* 0: up to the context (streaming: no limit) */
    const char *const *stop;      /* stop strings, each 1..SI_MAX_STOP_LEN bytes */
    int32_t n_stop;
    const int32_t *stop_token_ids;
    int32_t n_stop_token_ids;
    bool ignore_eos;              /* keep going past end-of-generation tokens */
    bool logprobs;                /* report each sampled token's logprob */
    int32_t top_logprobs;         /* and this many most likely alternatives (0..20) */
    /* Streaming generation (StreamingLLM): stream_window > 0 keeps the first stream_sink
     * tokens (rounded up to whole blocks of 16) and the last stream_window tokens (rounded up
     * likewise) in the cache: constant memory, unbounded length. */
    int32_t stream_sink;
    int32_t stream_window;
    /* When set, events are delivered by calling on_event on the engine thread (it must return
     * quickly and must not call back into the engine, except si_engine_cancel and
     * si_engine_get_stats) instead of being read with si_engine_next_event. */
    si_event_fn on_event;
    void *user;
} si_request;

/* Greedy sampling, no limit but the context, no stops, no logprobs, no streaming. */
si_request si_request_default(void);

/* Queues a request; the engine copies everything it needs. *id identifies it. Errors (the
 * request is not queued): SI_ERR_INVALID_ARG (empty prompt, token out of range, bad stop
 * string, top_logprobs out of range), SI_ERR_CONTEXT_FULL (prompt + max_tokens exceed the
 * context or the whole KV pool; the message gives the numbers), SI_ERR_NOMEM. */
si_status si_engine_submit(si_engine *e, const si_request *r, si_request_id *id);

/* Takes the request's next event into *ev, waiting up to timeout_ms (< 0: forever, 0: do not
 * wait); on time-out ev->type is SI_EVENT_NONE. After the FINISH or ERROR event the id is
 * forgotten. SI_ERR_NOT_FOUND for an unknown or finished id, SI_ERR_INVALID_ARG for a request
 * with a callback. */
si_status si_engine_next_event(si_engine *e, si_request_id id, si_event *ev, int timeout_ms);

/* Asks the engine to stop the request at its next step; its FINISH event (reason cancelled)
 * follows every event already produced, with the usage so far. SI_ERR_NOT_FOUND when the id is
 * unknown or already finished. */
si_status si_engine_cancel(si_engine *e, si_request_id id);

/* The whole output of one request. */
typedef struct si_result {
    char *text;         /* NUL-terminated */
    size_t text_len;
    int32_t *tokens;    /* sampled tokens */
    int32_t n_tokens;
    si_finish_reason finish_reason;
    si_usage usage;
} si_result;

/* Submits r (its on_event is ignored), waits for it to finish and fills *out (free it with
 * si_result_free). Errors as si_engine_submit, or the request's error status. */
si_status si_generate(si_engine *e, const si_request *r, si_result *out);
void si_result_free(si_result *r);

typedef struct si_engine_stats {
    int32_t running, waiting;
    int32_t kv_blocks_total, kv_blocks_used, kv_blocks_free, kv_blocks_cached;
    int64_t prefix_hits, prefix_misses; /* full prompt blocks found / not found */
    int64_t tokens_computed;            /* tokens run through the model */
    int64_t preemptions;
    int64_t steps;
    int64_t host_sampled_steps; /* steps whose logits came back to be sampled on the host (every
                                 * step on the CPU; on a GPU, a step with a row whose penalty
                                 * window holds more ids than the device takes) */
} si_engine_stats;

/* A snapshot taken after the engine's last step. */
void si_engine_get_stats(si_engine *e, si_engine_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* SWIFTINFER_H */
