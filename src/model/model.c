/* model.c — si_model_load / si_model_free and the model's public accessors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "model/model.h"

si_model_params si_model_default_params(void) {
    return (si_model_params){.n_ctx = 0, .n_threads = 0, .verbose = false,
                             .device = SI_DEVICE_AUTO};
}

si_status si_model_load(const char *path, const si_model_params *p, si_model **out) {
    si_model_params defaults = si_model_default_params();
    if (!p) p = &defaults;
    if (!path || !out) return si_error(SI_ERR_INVALID_ARG, "si_model_load: NULL argument");
    if (p->n_ctx < 0) return si_error(SI_ERR_INVALID_ARG, "n_ctx must be >= 0 (got %d)", p->n_ctx);
    *out = NULL;
    si_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return si_error(SI_ERR_NOMEM, "%s: out of memory", path);
    }
    si_status st;
    if ((st = backend_resolve(p->device, &m->device))) goto fail;
    if (p->verbose) fprintf(stderr, "loading %s ...\n", path);
    if ((st = gguf_open(path, &m->file)) || (st = arch_load(m)) ||
        (st = tokenizer_load(m->file, &m->tok)))
        goto fail;
    if (tokenizer_n_vocab(m->tok) != m->hp.n_vocab) {
        st = si_error(SI_ERR_FORMAT, "%s: tokenizer has %d tokens but token_embd.weight has %d rows",
                      path, tokenizer_n_vocab(m->tok), m->hp.n_vocab);
        goto fail;
    }
    if (gguf_get_str(m->file, "tokenizer.chat_template", &m->chat_template) != SI_OK)
        m->chat_template = NULL;
    m->n_ctx = p->n_ctx ? p->n_ctx : (m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096);
    if ((st = pool_create(p->n_threads, &m->pool))) goto fail;
    if (p->verbose)
        fprintf(stderr, "loaded %s: %s, %d layers, width %d, %d heads (%d kv), vocab %d, ctx %d\n",
                path, m->arch, m->hp.n_layer, m->hp.n_embd, m->hp.n_head, m->hp.n_head_kv,
                m->hp.n_vocab, m->n_ctx);
    *out = m;
    return SI_OK;
fail:
    si_model_free(m);
    return st;
}

void si_model_free(si_model *m) {
    if (!m) return;
    pool_free(m->pool);
    tokenizer_free(m->tok);
    free(m->layers);
    gguf_close(m->file);
    free(m->path);
    free(m);
}

int32_t si_model_n_vocab(const si_model *m) { return m->hp.n_vocab; }
int32_t si_model_n_ctx(const si_model *m) { return m->n_ctx; }
const char *si_model_arch(const si_model *m) { return m->arch; }

int32_t si_tokenize(const si_model *m, const char *text, size_t len, bool add_special,
                    bool parse_special, int32_t *out, int32_t cap) {
    return tokenizer_encode(m->tok, text, len, add_special, parse_special, out, cap);
}

int32_t si_token_to_piece(const si_model *m, int32_t token, char *out, int32_t cap) {
    return tokenizer_token_to_piece(m->tok, token, out, cap);
}

int32_t si_token_bos(const si_model *m) { return tokenizer_bos(m->tok); }

bool si_token_is_eog(const si_model *m, int32_t token) { return tokenizer_is_eog(m->tok, token); }
