/* arch.c — the architecture table: which GGUF metadata keys and tensor names each supported
 * architecture uses, and the options of the shared llama-family forward pass.
 *
 * Names follow llama.cpp's GGUF conventions ({arch}.block_count, blk.N.attn_q.weight, ...). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/model.h"
#include "quant/quant.h"

typedef struct arch_info {
    const char *name;
    rope_style rope;
    bool qkv_bias; /* blk.N.attn_{q,k,v}.bias required */
} arch_info;

static const arch_info ARCHS[] = {
    {"llama", ROPE_NORM, false}, /* Llama 2/3, SmolLM2, TinyLlama, Mistral 7B */
    {"qwen2", ROPE_NEOX, true},
};

/* A metadata key "{arch}.suffix". */
static const char *arch_key(char *buf, size_t cap, const char *arch, const char *suffix) {
    snprintf(buf, cap, "%s.%s", arch, suffix);
    return buf;
}

static si_status get_int(si_model *m, const char *suffix, bool required, int64_t def,
                         int32_t *out) {
    char key[128];
    int64_t v;
    si_status st = gguf_get_int(m->file, arch_key(key, sizeof key, m->arch, suffix), &v);
    if (st == SI_ERR_NOT_FOUND && !required) v = def;
    else if (st != SI_OK) return si_error_wrap(st, "%s: ", m->path);
    if (v < 0 || v > INT32_MAX)
        return si_error(SI_ERR_FORMAT, "%s: key '%s' = %lld is out of range", m->path, key,
                        (long long)v);
    *out = (int32_t)v;
    return SI_OK;
}

static si_status get_float(si_model *m, const char *suffix, double def, float *out) {
    char key[128];
    double v;
    si_status st = gguf_get_float(m->file, arch_key(key, sizeof key, m->arch, suffix), &v);
    if (st == SI_ERR_NOT_FOUND) v = def;
    else if (st != SI_OK) return si_error_wrap(st, "%s: ", m->path);
    *out = (float)v;
    return SI_OK;
}

/* Looks up a tensor and checks its shape: n_cols x n_rows (n_rows 1 for a vector). */
static si_status get_tensor(si_model *m, const char *name, bool required, int64_t n_cols,
                            int64_t n_rows, si_tensor *out) {
    const gguf_tensor *t = gguf_find_tensor(m->file, name);
    *out = (si_tensor){0};
    if (!t) {
        if (!required) return SI_OK;
        return si_error(SI_ERR_NOT_FOUND, "%s: missing tensor '%s' required by architecture '%s'",
                        m->path, name, m->arch);
    }
    int64_t rows = 1;
    for (uint32_t d = 1; d < t->n_dims; d++) rows *= t->ne[d];
    if (t->ne[0] != n_cols || rows != n_rows)
        return si_error(SI_ERR_FORMAT,
                        "%s: tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", m->path,
                        name, (long long)t->ne[0], (long long)rows, (long long)n_cols,
                        (long long)n_rows);
    if (n_rows == 1 && t->type != SI_TYPE_F32)
        return si_error(SI_ERR_UNSUPPORTED, "%s: tensor '%s' is %s; norms and biases must be f32",
                        m->path, name, si_type_name(t->type));
    *out = (si_tensor){t->data, t->type, n_cols, n_rows};
    return SI_OK;
}

static si_status load_hparams(si_model *m, const arch_info *ai) {
    model_hparams *hp = &m->hp;
    si_status st;
    hp->rope = ai->rope;
    if ((st = get_int(m, "block_count", true, 0, &hp->n_layer)) ||
        (st = get_int(m, "embedding_length", true, 0, &hp->n_embd)) ||
        (st = get_int(m, "feed_forward_length", true, 0, &hp->n_ff)) ||
        (st = get_int(m, "attention.head_count", true, 0, &hp->n_head)) ||
        (st = get_int(m, "context_length", false, 2048, &hp->n_ctx_train)))
        return st;
    if (hp->n_layer < 1 || hp->n_embd < 1 || hp->n_ff < 1 || hp->n_head < 1)
        return si_error(SI_ERR_FORMAT, "%s: block_count, embedding_length, feed_forward_length "
                        "and head_count must be positive", m->path);
    if ((st = get_int(m, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv)) ||
        (st = get_int(m, "attention.key_length", false, hp->n_embd / hp->n_head, &hp->head_dim)))
        return st;
    if ((st = get_int(m, "rope.dimension_count", false, hp->head_dim, &hp->rope_dim)) ||
        (st = get_float(m, "rope.freq_base", 10000.0, &hp->rope_freq_base)) ||
        (st = get_float(m, "attention.layer_norm_rms_epsilon", 1e-5, &hp->rms_eps)))
        return st;
    if (hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv != 0 || hp->head_dim < 2 ||
        hp->head_dim % 2 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return si_error(SI_ERR_FORMAT, "%s: inconsistent attention shape (heads %d, kv heads %d, "
                        "head dim %d, rope dim %d)", m->path, hp->n_head, hp->n_head_kv,
                        hp->head_dim, hp->rope_dim);

    /* RoPE scaling: linear ("position interpolation") is a frequency scale; others unsupported. */
    char key[128];
    const char *scaling = NULL;
    hp->rope_freq_scale = 1.0f;
    st = gguf_get_str(m->file, arch_key(key, sizeof key, m->arch, "rope.scaling.type"), &scaling);
    if (st != SI_OK && st != SI_ERR_NOT_FOUND) return si_error_wrap(st, "%s: ", m->path);
    if (scaling && strcmp(scaling, "none") != 0) {
        float factor = 1.0f;
        if ((st = get_float(m, "rope.scaling.factor", 1.0, &factor))) return st;
        if (strcmp(scaling, "linear") != 0)
            return si_error(SI_ERR_UNSUPPORTED, "%s: rope scaling type '%s' is not supported "
                            "(supported: none, linear)", m->path, scaling);
        if (!(factor > 0.0f))
            return si_error(SI_ERR_FORMAT, "%s: rope.scaling.factor must be positive", m->path);
        hp->rope_freq_scale = 1.0f / factor;
    }
    return SI_OK;
}

si_status arch_load(si_model *m) {
    const arch_info *ai = NULL;
    si_status st = gguf_get_str(m->file, "general.architecture", &m->arch);
    if (st) return si_error_wrap(st, "%s: ", m->path);
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (strcmp(ARCHS[i].name, m->arch) == 0) ai = &ARCHS[i];
    if (!ai)
        return si_error(SI_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported "
                        "(supported: llama, qwen2)", m->path, m->arch);
    if ((st = load_hparams(m, ai))) return st;

    model_hparams *hp = &m->hp;
    const gguf_tensor *embd = gguf_find_tensor(m->file, "token_embd.weight");
    if (!embd)
        return si_error(SI_ERR_NOT_FOUND, "%s: missing tensor 'token_embd.weight'", m->path);
    hp->n_vocab = (int32_t)(embd->n_dims >= 2 ? embd->ne[1] : 0);
    if ((st = get_tensor(m, "token_embd.weight", true, hp->n_embd, hp->n_vocab, &m->tok_embd)) ||
        (st = get_tensor(m, "output_norm.weight", true, hp->n_embd, 1, &m->output_norm)) ||
        (st = get_tensor(m, "output.weight", false, hp->n_embd, hp->n_vocab, &m->output)))
        return st;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */

    si_tensor freqs;
    if ((st = get_tensor(m, "rope_freqs.weight", false, hp->rope_dim / 2, 1, &freqs))) return st;
    m->rope_freqs = freqs.data;

    int64_t q_dim = (int64_t)hp->n_head * hp->head_dim, kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return si_error(SI_ERR_NOMEM, "%s: out of memory", m->path);
    for (int il = 0; il < hp->n_layer; il++) {
        model_layer *L = &m->layers[il];
        char n[96];
#define T(field, suffix, req, cols, rows)                                                      \
    snprintf(n, sizeof n, "blk.%d.%s", il, suffix);                                            \
    if ((st = get_tensor(m, n, req, cols, rows, &L->field))) return st;
        T(attn_norm, "attn_norm.weight", true, hp->n_embd, 1)
        T(wq, "attn_q.weight", true, hp->n_embd, q_dim)
        T(wk, "attn_k.weight", true, hp->n_embd, kv_dim)
        T(wv, "attn_v.weight", true, hp->n_embd, kv_dim)
        T(bq, "attn_q.bias", ai->qkv_bias, q_dim, 1)
        T(bk, "attn_k.bias", ai->qkv_bias, kv_dim, 1)
        T(bv, "attn_v.bias", ai->qkv_bias, kv_dim, 1)
        T(wo, "attn_output.weight", true, q_dim, hp->n_embd)
        T(ffn_norm, "ffn_norm.weight", true, hp->n_embd, 1)
        T(w_gate, "ffn_gate.weight", true, hp->n_embd, hp->n_ff)
        T(w_up, "ffn_up.weight", true, hp->n_embd, hp->n_ff)
        T(w_down, "ffn_down.weight", true, hp->n_ff, hp->n_embd)
#undef T
    }
    return SI_OK;
}
