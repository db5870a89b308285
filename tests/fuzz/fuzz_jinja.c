/* fuzz_jinja.c — libFuzzer target for the chat-template interpreter: the input is a template
 * source, parsed with chat_template_parse and, when it parses, rendered over a fixed
 * conversation (system, user with Unicode and quotes, assistant with a tool call, tool reply)
 * with both entry points. Errors are expected; any crash, sanitizer report, leak or hang past
 * the interpreter's limits is a finding. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat_template.h"

static const char *MSGS_JSON =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"caf\\u00e9 \\\"q\\\" {{x}}\\n\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"abcDEF123\","
    "   \"function\": {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"abcDEF123\", \"content\": \"42\"}]";
static const char *TOOLS_JSON =
    "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *src = malloc(size + 1);
    if (!src)
        return 0;
    memcpy(src, data, size);
    src[size] = 0; /* an inner NUL just ends the template early */
    chat_template *t = NULL;
    if (chat_template_parse(src, &t) == SI_OK) {
        chat_message msgs[3] = {{"system", "S"}, {"user", "hi \xc3\xa9"}, {"assistant", "yo"}};
        char *out = NULL;
        if (chat_template_render(t, msgs, 3, true, "<s>", "</s>", &out) == SI_OK)
            free(out);
        out = NULL;
        if (chat_template_render_json(t, MSGS_JSON, TOOLS_JSON, false, "<s>", "</s>", &out) == SI_OK)
            free(out);
        chat_template_free(t);
    }
    free(src);
    return 0;
}
