/* openai.h — the OpenAI API's request and response JSON (jansson), with no HTTP in it.
 *
 * Follows the OpenAI REST reference for POST /v1/chat/completions and POST /v1/completions:
 * request fields, their ranges, the error object {"error": {message, type, param, code}}, and
 * the objects chat.completion, chat.completion.chunk and text_completion. Fields the API has but
 * SwiftInfer does not use are ignored, as OpenAI ignores unknown ones. vLLM's extensions top_k,
 * min_p, repetition_penalty, ignore_eos and stop_token_ids are honoured, plus SwiftInfer's own
 * `streaming: {sink, window}` (StreamingLLM attention sinks, DESIGN.md "KV cache").
 *
 * Parsing is split in two so the fuzz target can run the first half without a model:
 *   oai_parse_request    JSON body -> validated oai_request (or an oai_error);
 *   oai_prepare_prompts  oai_request + model -> token ids per prompt (chat template, tokenizer,
 *                        context check). */
#ifndef SI_SERVER_OPENAI_H
#define SI_SERVER_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "swiftinfer.h"

#define OAI_MAX_CHOICES 128 /* n x prompts in one request */
#define OAI_MAX_STOP 16

typedef enum { OAI_CHAT, OAI_COMPLETION } oai_kind;

/* An HTTP status and the OpenAI error object that goes with it. */
typedef struct oai_error {
    int http_status;
    const char *type; /* "invalid_request_error", ... */
    const char *code; /* NULL -> null */
    char param[64];   /* "" -> null */
    char message[512];
} oai_error;

/* One completions prompt: text or token ids (exactly one is set). */
typedef struct oai_prompt {
    char *text;
    int32_t *tokens;
    int32_t n_tokens;
} oai_prompt;

typedef struct oai_request {
    oai_kind kind;
    char *model;          /* NULL when omitted */
    /* chat: the messages as a JSON array, content parts flattened to strings, other keys kept */
    char *messages_json;
    char *tools_json;     /* NULL when absent */
    char **roles, **contents; /* chat: per message (content "" when null), for built-in formats */
    int n_messages;
    oai_prompt *prompts;  /* completions: one or more prompts */
    int n_prompts;
    int n;                /* choices per prompt */
    int32_t max_tokens;   /* 0: not given */
    si_sampling_params sampling; /* its logit_bias points at logit_bias below */
    si_logit_bias *logit_bias;   /* logit_bias's entries (n_logit_bias in sampling) */
    bool seeded;          /* seed given: choice i of a prompt uses seed + i */
    char *stop[OAI_MAX_STOP];
    int n_stop;
    int32_t *stop_token_ids;
    int n_stop_token_ids;
    bool ignore_eos;
    bool logprobs;        /* chat: logprobs: true; completions: logprobs given */
    int top_logprobs;     /* chat: top_logprobs; completions: the logprobs number */
    bool stream;
    bool include_usage;   /* stream_options.include_usage */
    bool echo;            /* completions: not supported; rejected when true */
    int32_t stream_sink, stream_window; /* streaming extension; window 0: off */
} oai_request;

/* Parses and validates a request body. On true *out is filled (free it with oai_request_free);
 * on false *err says why (400 for malformed JSON or a bad field, naming the field) and *out
 * holds nothing to free. body need not be NUL-terminated. */
bool oai_parse_request(const char *body, size_t len, oai_kind kind, oai_request *out,
                       oai_error *err);
void oai_request_free(oai_request *r);

/* Token ids for each prompt of r on model m: chat messages rendered through tmpl (the model's
 * parsed chat template, or NULL to use the built-in ChatML / Llama-3 formats detected from
 * tmpl_source), completions prompts tokenised or range-checked. Checks prompt + max_tokens
 * against the context (400 context_length_exceeded with both numbers). On true (*ids)[i] /
 * (*n_ids)[i] (malloc'd, i < *n_out) belong to the caller, free with oai_prompts_free. */
struct chat_template;
bool oai_prepare_prompts(const oai_request *r, si_model *m, const struct chat_template *tmpl,
                         const char *tmpl_source, const char *bos_text, const char *eos_text,
                         int32_t ***ids, int32_t **n_ids, int *n_out, oai_error *err);
void oai_prompts_free(int32_t **ids, int32_t *n_ids, int n);

/* Fills err (printf-style message). Returns false, for `return oai_fail(...)`. */
bool oai_fail(oai_error *err, int http_status, const char *type, const char *code,
              const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* {"error": {...}} as a malloc'd string. */
char *oai_error_json(const oai_error *err);

/* ---- Responses ---------------------------------------------------------------------------- */

/* One choice's output so far. */
typedef struct oai_choice {
    int index;
    char *text;
    size_t text_len, text_cap;
    si_finish_reason finish;
    si_usage usage;
    json_t *logprobs; /* chat: array of content entries; completions: {tokens, ...} object */
    size_t text_offset; /* completions logprobs: bytes of token text so far */
    bool started;       /* streaming chat: role delta sent */
} oai_choice;

/* Appends one TOKEN or FINISH event's text and logprobs to c. */
bool oai_choice_add_event(oai_choice *c, const oai_request *r, si_model *m, const si_event *ev);
void oai_choice_free(oai_choice *c);

/* Logprob entries of one token event: chat {token, logprob, bytes, top_logprobs} appended to
 * the array *arr, completions appended to the four arrays of the object *obj. */
void oai_logprobs_add(json_t **acc, const oai_request *r, si_model *m, const si_event *ev,
                      size_t *text_offset);

/* usage: prompt_tokens counted once per prompt (first choice), completion summed. */
json_t *oai_usage_json(const oai_choice *choices, int n_choices, int n_per_prompt);

/* The whole non-streaming response (chat.completion / text_completion), malloc'd. */
char *oai_response_json(const oai_request *r, const char *id, int64_t created, const char *model,
                        const oai_choice *choices, int n_choices);

/* One streaming chunk for choice `index`: text delta (may be empty), role (chat first chunk),
 * finish reason (SI_FINISH_NONE: null), logprobs of this delta (stolen; may be NULL).
 * Returns "data: {...}\n\n" malloc'd. */
char *oai_chunk(const oai_request *r, const char *id, int64_t created, const char *model,
                int index, const char *text, size_t text_len, bool role, si_finish_reason finish,
                json_t *logprobs);
/* The final usage chunk (choices []) for stream_options.include_usage. */
char *oai_usage_chunk(const oai_request *r, const char *id, int64_t created, const char *model,
                      const oai_choice *choices, int n_choices);

/* OpenAI's finish_reason string for an engine reason. */
const char *oai_finish_name(si_finish_reason f);

#endif
