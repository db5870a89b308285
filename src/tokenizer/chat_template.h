/* chat_template.h — renders a conversation with a model's own tokenizer.chat_template (Jinja).
 *
 * The template is executed by a Jinja2-subset interpreter (jinja.h) configured the way Hugging
 * Face transformers' apply_chat_template configures jinja2: trim_blocks and lstrip_blocks on,
 * loop controls (break/continue) enabled, globals raise_exception(msg) and strftime_now(fmt), and
 * the variables messages, add_generation_prompt, bos_token, eos_token and tools (None).
 * Rendering is bounded (steps, output size, memory, recursion), so a hostile template fails with
 * an error instead of hanging the server. */
#ifndef SI_TOKENIZER_CHAT_TEMPLATE_H
#define SI_TOKENIZER_CHAT_TEMPLATE_H

#include <stdbool.h>

#include "swiftinfer.h"
#include "tokenizer/chat_format.h"

typedef struct chat_template chat_template;

/* Parses a template. On SI_OK *out is a new template (free with chat_template_free); it keeps
 * no pointer to source. Fails with SI_ERR_INVALID_ARG for NULL arguments, SI_ERR_FORMAT for a
 * syntax error (si_last_error() names the line and column: "chat template: line 3, column 12:
 * unknown tag 'foo'"), SI_ERR_NOMEM. */
si_status chat_template_parse(const char *source, chat_template **out);

/* Renders msgs[0..n_msgs) (each a dict {"role", "content"} in the template) into *out, a
 * malloc'd NUL-terminated string the caller frees. bos_token / eos_token may be NULL (-> "").
 * Failures (*out is NULL, si_last_error() names the template line and column):
 *   SI_ERR_INVALID_ARG  the template called raise_exception(msg) — the conversation is not one
 *                       the model accepts (e.g. roles that do not alternate); msg is in the
 *                       error text — or NULL t/out/msgs/role/content, n_msgs < 0;
 *   SI_ERR_FORMAT       the template failed at run time (type error, undefined function, ...);
 *   SI_ERR_UNSUPPORTED  the template exceeded a limit (steps, output size, memory, recursion);
 *   SI_ERR_NOMEM. */
si_status chat_template_render(const chat_template *t, const chat_message *msgs, int n_msgs,
                               bool add_generation_prompt, const char *bos_token,
                               const char *eos_token, char **out);

/* Like chat_template_render, but messages and tools are JSON texts as in an OpenAI request:
 * messages_json an array of message objects (with tool_calls, name, ... kept as they are),
 * tools_json an array of tool definitions or NULL (-> tools is None). Malformed JSON fails
 * with SI_ERR_INVALID_ARG naming the offset. */
si_status chat_template_render_json(const chat_template *t, const char *messages_json,
                                    const char *tools_json, bool add_generation_prompt,
                                    const char *bos_token, const char *eos_token, char **out);

void chat_template_free(chat_template *t);

#endif
