/* chat_format.h — a built-in renderer for the two common chat formats, ChatML and Llama-3.
 *
 * Until the Jinja subset (chat_template.c) lands, this renders conversations the way the
 * tokenizer.chat_template of most ChatML and Llama-3 models does, without interpreting Jinja.
 * The template source is only inspected for a few well-known patterns:
 *   - which format it is ("<|im_start|>" -> ChatML, "<|start_header_id|>" -> Llama-3);
 *   - a default system prompt, as in SmolLM2's
 *       {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n...
 *       <|im_end|>\n' }}{% endif %}
 *     which is emitted before the first message when that message is not a system message;
 *   - `message['content'] | trim`, as in Meta's Llama-3 template: contents are then stripped of
 *     leading and trailing ASCII whitespace.
 * Templates that do more (tools, dates, Llama-3.1's default system block) are not reproduced. */
#ifndef SI_TOKENIZER_CHAT_FORMAT_H
#define SI_TOKENIZER_CHAT_FORMAT_H

#include <stdbool.h>

#include "swiftinfer.h"

typedef enum {
    CHAT_FORMAT_UNKNOWN,
    CHAT_FORMAT_CHATML, /* <|im_start|>ROLE\nCONTENT<|im_end|>\n */
    /* <|begin_of_text|> once, then <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> */
    CHAT_FORMAT_LLAMA3,
} chat_format;

typedef struct {
    const char *role;
    const char *content;
} chat_message;

/* The format of a tokenizer.chat_template text, from its characteristic special tokens.
 * template_source may be NULL (-> CHAT_FORMAT_UNKNOWN). */
chat_format chat_format_detect(const char *template_source);

/* Renders msgs[0..n) in format f, then the assistant header if add_generation_prompt.
 * template_source (may be NULL) is scanned for a default system prompt and the trim filter; with
 * NULL, ChatML has no default system prompt and does not trim, Llama-3 trims (Meta's template).
 * Llama-3 output starts with "<|begin_of_text|>" (the template's bos_token) when n > 0, so the
 * tokenizer must not add another BOS. On SI_OK *out is a malloc'd NUL-terminated string that the
 * caller frees. Fails with SI_ERR_UNSUPPORTED for CHAT_FORMAT_UNKNOWN, SI_ERR_INVALID_ARG for a
 * NULL out, msgs (with n > 0), role or content, or n < 0, SI_ERR_NOMEM. */
si_status chat_format_render(chat_format f, const char *template_source, const chat_message *msgs,
                             int n, bool add_generation_prompt, char **out);

#endif
