/* fuzz_openai_request.c — libFuzzer target for the server's request parser (src/server/
 * openai.c): the first byte picks the endpoint (even: chat/completions, odd: completions), the
 * rest is the request body. A body must become either a validated request or an OpenAI error
 * with an HTTP status of 400..599; the error, a response and a streaming chunk are then
 * serialised, so the JSON builders see whatever strings the parser let through. Any crash,
 * sanitizer report or leak is a finding. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    oai_kind kind = (data[0] & 1) ? OAI_COMPLETION : OAI_CHAT;
    oai_request r;
    oai_error err;
    if (!oai_parse_request((const char *)data + 1, size - 1, kind, &r, &err)) {
        if (err.http_status < 400 || err.http_status > 599) abort();
        free(oai_error_json(&err));
        return 0;
    }
    if (r.n < 1 || r.n > OAI_MAX_CHOICES || r.n_stop > OAI_MAX_STOP || r.top_logprobs < 0 ||
        r.top_logprobs > SI_MAX_TOP_LOGPROBS || (kind == OAI_CHAT && !r.messages_json) ||
        (kind == OAI_COMPLETION && r.n_prompts < 1))
        abort();
    /* one choice whose text is the last message or first text prompt (arbitrary UTF-8) */
    const char *text = kind == OAI_CHAT ? r.contents[r.n_messages - 1]
                                        : (r.prompts[0].text ? r.prompts[0].text : "");
    oai_choice c;
    memset(&c, 0, sizeof c);
    c.text = strdup(text);
    c.text_len = c.text ? strlen(c.text) : 0;
    c.finish = SI_FINISH_STOP;
    free(oai_response_json(&r, "id-1", 0, r.model ? r.model : "m", &c, 1));
    free(oai_chunk(&r, "id-1", 0, "m", 0, text, strlen(text), true, SI_FINISH_NONE, NULL));
    free(oai_usage_chunk(&r, "id-1", 0, "m", &c, 1));
    oai_choice_free(&c);
    oai_request_free(&r);
    return 0;
}
