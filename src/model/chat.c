/* chat.c — si_chat_apply_template: a conversation rendered with the model's own chat template
 * (tokenizer/chat_template.c runs it), ready to tokenise. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

si_status si_chat_apply_template(const si_model *m, const char *messages_json,
                                 const char *tools_json, bool add_generation_prompt, char **out) {
    if (!m || !messages_json || !out)
        return si_error(SI_ERR_INVALID_ARG, "si_chat_apply_template: NULL argument");
    *out = NULL;
    if (!m->chat_template)
        return si_error(SI_ERR_NOT_FOUND, "%s: the model has no chat template "
                        "(tokenizer.chat_template)", m->path);
    chat_template *t = NULL;
    si_status st = chat_template_parse(m->chat_template, &t);
    if (st != SI_OK) return st;
    char *bos = tokenizer_token_text(m->tok, tokenizer_bos(m->tok));
    char *eos = tokenizer_token_text(m->tok, tokenizer_eos(m->tok));
    if (!bos || !eos) st = si_error(SI_ERR_NOMEM, "si_chat_apply_template: out of memory");
    else
        st = chat_template_render_json(t, messages_json, tools_json, add_generation_prompt, bos,
                                       eos, out);
    /* one BOS: the tokenizer adds it (add_special), so the template's own comes off */
    const size_t nb = bos ? strlen(bos) : 0;
    if (st == SI_OK && nb && tokenizer_adds_bos(m->tok) && !strncmp(*out, bos, nb))
        memmove(*out, *out + nb, strlen(*out + nb) + 1);
    free(bos);
    free(eos);
    chat_template_free(t);
    return st;
}

void si_free(void *p) { free(p); }
