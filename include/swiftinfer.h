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
    SI_TYPE_BF16 = 30,
    SI_TYPE_COUNT = 31,
} si_type;

/* "q4_k", or NULL when SwiftInfer does not support the type. */
const char *si_type_name(si_type t);

/* ---- Models ------------------------------------------------------------------------------- */

typedef struct si_model si_model;

typedef struct si_model_params {
    int32_t n_ctx;      /* context window in tokens; 0: the model's trained length, capped at 4096 */
    int32_t n_threads;  /* CPU threads; 0: all online cores */
    bool verbose;       /* print load progress to stderr */
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

/* ---- Single-sequence generation (the reference path) ------------------------------------- */

typedef struct si_session si_session;

si_status si_session_create(si_model *m, si_session **out);
void si_session_free(si_session *s);

/* Evaluates n tokens at the end of the session's sequence and makes the last one's logits
 * available. Fails with SI_ERR_CONTEXT_FULL (and changes nothing) when they do not fit. */
si_status si_session_eval(si_session *s, const int32_t *tokens, int32_t n);
/* Logits of the last evaluated token: n_vocab floats, owned by the session. */
const float *si_session_logits(const si_session *s);
/* Tokens in the session so far. */
int32_t si_session_n_past(const si_session *s);
/* Forgets everything after the first n tokens. */
void si_session_truncate(si_session *s, int32_t n);

/* ---- Sampling ----------------------------------------------------------------------------- */

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
} si_sampling_params;

si_sampling_params si_sampling_default_params(void);

typedef struct si_sampler si_sampler;

si_status si_sampler_create(const si_sampling_params *p, int32_t n_vocab, si_sampler **out);
void si_sampler_free(si_sampler *s);
/* Picks the next token from logits (not modified). history: tokens so far, for the penalties. */
int32_t si_sampler_sample(si_sampler *s, const float *logits, const int32_t *history,
                          int32_t n_history);

#ifdef __cplusplus
}
#endif
#endif /* SWIFTINFER_H */
