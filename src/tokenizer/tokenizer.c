/* tokenizer.c — loading a tokenizer from GGUF metadata (tokenizer.ggml.*) and the encode entry
 * point: special-token partitioning, then byte-level BPE or SentencePiece on the raw pieces.
 *
 * Behaviour mirrors llama.cpp's llama-vocab (load, tokenizer_st_partition, tokenize_impl):
 * defaults per model type, the EOG set (eos/eot/eom/FIM ids plus well-known end texts), and
 * user-defined tokens split out of the text even when parse_special is false. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"

/* ---- small helpers ------------------------------------------------------------------------ */

bool tok_ids_push(tok_ids *ids, int32_t id) {
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        int32_t *v = realloc(ids->v, cap * sizeof *v);
        if (!v) return false;
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return true;
}

uint64_t tok_hash(const void *p, size_t n, uint64_t seed) { return XXH3_64bits_withSeed(p, n, seed); }

static bool map_init(tok_map *m, size_t n_keys) {
    size_t cap = 16;
    while (cap < n_keys * 2) cap <<= 1;
    m->slot = malloc(cap * sizeof *m->slot);
    if (!m->slot) return false;
    memset(m->slot, 0xff, cap * sizeof *m->slot); /* -1 */
    m->mask = (uint32_t)(cap - 1);
    return true;
}

int32_t tok_find(const tokenizer *t, const char *s, size_t n) {
    uint32_t i = (uint32_t)tok_hash(s, n, 0) & t->ids.mask;
    for (;; i = (i + 1) & t->ids.mask) {
        int32_t id = t->ids.slot[i];
        if (id < 0) return -1;
        if (t->len[id] == n && memcmp(t->blob + t->off[id], s, n) == 0) return id;
    }
}

static uint64_t merge_hash(const char *l, size_t ln, const char *r, size_t rn) {
    return tok_hash(l, ln, 0) * 0x9E3779B97F4A7C15ull ^ tok_hash(r, rn, 1);
}

int32_t tok_merge_rank(const tokenizer *t, const char *l, size_t ln, const char *r, size_t rn) {
    if (!t->merges.slot) return -1;
    uint32_t i = (uint32_t)merge_hash(l, ln, r, rn) & t->merges.mask;
    for (;; i = (i + 1) & t->merges.mask) {
        int32_t k = t->merges.slot[i];
        if (k < 0) return -1;
        const char *m = t->mblob + t->m_off[k];
        if (t->m_llen[k] == ln && t->m_rlen[k] == rn && memcmp(m, l, ln) == 0 &&
            memcmp(m + ln, r, rn) == 0)
            return k;
    }
}

/* ---- loading ------------------------------------------------------------------------------ */

static si_status load_vocab(tokenizer *t, const gguf_file *f) {
    const gguf_value *toks = NULL;
    si_status s = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks);
    if (s != SI_OK)
        return s == SI_ERR_NOT_FOUND
                   ? si_error(s, "%s: tokenizer.ggml.tokens missing", f->path ? f->path : "gguf")
                   : s;
    if (toks->arr.n == 0 || toks->arr.n > INT32_MAX / 2)
        return si_error(SI_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries",
                        f->path ? f->path : "gguf", (unsigned long long)toks->arr.n);
    int32_t n = (int32_t)toks->arr.n;
    const gguf_str *strs = toks->arr.data;
    t->n_vocab = n;

    const gguf_value *scores = NULL, *types = NULL;
    if (gguf_get(f, "tokenizer.ggml.scores")) {
        s = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores);
        if (s != SI_OK) return s;
        if (scores->arr.n != (uint64_t)n)
            return si_error(SI_ERR_FORMAT, "tokenizer.ggml.scores: %llu entries for %d tokens",
                            (unsigned long long)scores->arr.n, n);
    }
    if (gguf_get(f, "tokenizer.ggml.token_type")) {
        s = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types);
        if (s != SI_OK) return s;
        if (types->arr.n != (uint64_t)n)
            return si_error(SI_ERR_FORMAT, "tokenizer.ggml.token_type: %llu entries for %d tokens",
                            (unsigned long long)types->arr.n, n);
    }

    /* Empty texts become "[EMPTY_<id>]" as in llama.cpp. */
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += (strs[i].len ? strs[i].len : 24) + 1;
    if (total > UINT32_MAX) return si_error(SI_ERR_FORMAT, "tokenizer.ggml.tokens: too large");
    t->blob = malloc(total);
    t->off = malloc(n * sizeof *t->off);
    t->len = malloc(n * sizeof *t->len);
    t->score = calloc(n, sizeof *t->score);
    t->type = malloc(n);
    t->eog = calloc(n, 1);
    if (!t->blob || !t->off || !t->len || !t->score || !t->type || !t->eog || !map_init(&t->ids, n))
        return si_error(SI_ERR_NOMEM, "tokenizer: out of memory for %d tokens", n);
    size_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        t->off[i] = (uint32_t)pos;
        if (strs[i].len) {
            memcpy(t->blob + pos, strs[i].s, strs[i].len);
            t->len[i] = (uint32_t)strs[i].len;
        } else {
            t->len[i] = (uint32_t)snprintf(t->blob + pos, 24, "[EMPTY_%d]", i);
        }
        pos += t->len[i];
        t->blob[pos++] = '\0';
        if (scores) memcpy(&t->score[i], (const float *)scores->arr.data + i, sizeof(float));
        int32_t ty = TOK_TYPE_NORMAL;
        if (types) memcpy(&ty, (const int32_t *)types->arr.data + i, sizeof ty);
        t->type[i] = (ty >= TOK_TYPE_NORMAL && ty <= TOK_TYPE_BYTE) ? (uint8_t)ty : TOK_TYPE_UNDEFINED;

        /* Insert; a later duplicate text replaces the earlier id (token_to_id[word] = i). */
        const char *key = t->blob + t->off[i];
        uint32_t h = (uint32_t)tok_hash(key, t->len[i], 0) & t->ids.mask;
        for (;; h = (h + 1) & t->ids.mask) {
            int32_t id = t->ids.slot[h];
            if (id < 0 || (t->len[id] == t->len[i] && memcmp(t->blob + t->off[id], key, t->len[i]) == 0)) {
                t->ids.slot[h] = i;
                break;
            }
        }
    }
    return SI_OK;
}

static si_status load_merges(tokenizer *t, const gguf_file *f) {
    const gguf_value *mv = NULL;
    si_status s = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &mv);
    if (s == SI_ERR_NOT_FOUND)
        return si_error(SI_ERR_FORMAT, "%s: tokenizer.ggml.merges missing for a gpt2 tokenizer",
                        f->path ? f->path : "gguf");
    if (s != SI_OK) return s;
    if (mv->arr.n > INT32_MAX / 2) return si_error(SI_ERR_FORMAT, "tokenizer.ggml.merges: too many");
    uint32_t n = (uint32_t)mv->arr.n;
    const gguf_str *strs = mv->arr.data;
    size_t total = 1;
    for (uint32_t i = 0; i < n; i++) total += strs[i].len;
    if (total > UINT32_MAX) return si_error(SI_ERR_FORMAT, "tokenizer.ggml.merges: too large");
    t->n_merges = n;
    t->mblob = malloc(total);
    t->m_off = malloc((n + 1) * sizeof *t->m_off);
    t->m_llen = malloc((n + 1) * sizeof *t->m_llen);
    t->m_rlen = malloc((n + 1) * sizeof *t->m_rlen);
    if (!t->mblob || !t->m_off || !t->m_llen || !t->m_rlen || !map_init(&t->merges, n))
        return si_error(SI_ERR_NOMEM, "tokenizer: out of memory for %u merges", n);
    size_t pos = 0;
    for (uint32_t i = 0; i < n; i++) {
        /* llama.cpp: split at the first space from index 1; no space -> ("", "") */
        const char *w = strs[i].s;
        size_t wl = strs[i].len, sp = 0;
        for (size_t j = 1; j < wl; j++)
            if (w[j] == ' ') { sp = j; break; }
        t->m_off[i] = (uint32_t)pos;
        if (sp) {
            memcpy(t->mblob + pos, w, sp);
            memcpy(t->mblob + pos + sp, w + sp + 1, wl - sp - 1);
            t->m_llen[i] = (uint32_t)sp;
            t->m_rlen[i] = (uint32_t)(wl - sp - 1);
        } else {
            t->m_llen[i] = t->m_rlen[i] = 0;
        }
        const char *l = t->mblob + pos;
        size_t ln = t->m_llen[i], rn = t->m_rlen[i];
        pos += ln + rn;
        /* first occurrence keeps its rank (bpe_ranks.emplace) */
        uint32_t h = (uint32_t)merge_hash(l, ln, l + ln, rn) & t->merges.mask;
        for (;; h = (h + 1) & t->merges.mask) {
            int32_t k = t->merges.slot[h];
            if (k < 0) { t->merges.slot[h] = (int32_t)i; break; }
            if (t->m_llen[k] == ln && t->m_rlen[k] == rn &&
                memcmp(t->mblob + t->m_off[k], l, ln + rn) == 0)
                break;
        }
    }
    return SI_OK;
}

/* Reads an optional id key; out of range -> keep the default (llama.cpp warns and does the same). */
static si_status get_id(tokenizer *t, const gguf_file *f, const char *key, int32_t *id) {
    int64_t v;
    si_status s = gguf_get_int(f, key, &v);
    if (s == SI_ERR_NOT_FOUND) return SI_OK;
    if (s != SI_OK) return s;
    if (v >= 0 && v < t->n_vocab) *id = (int32_t)v;
    return SI_OK;
}

static si_status get_flag(const gguf_file *f, const char *key, bool *flag) {
    si_status s = gguf_get_bool(f, key, flag);
    return s == SI_ERR_NOT_FOUND ? SI_OK : s;
}

static bool text_is(const tokenizer *t, int32_t id, const char *const *list) {
    for (; *list; list++)
        if (strlen(*list) == t->len[id] && memcmp(*list, t->blob + t->off[id], t->len[id]) == 0)
            return true;
    return false;
}

/* Auto-detection by text, as llama-vocab does for models whose metadata lacks the ids. */
static const char *const k_eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL};
static const char *const k_eom_texts[] = {"<|eom_id|>", NULL};
#define FW "\xef\xbd\x9c" /* U+FF5C FULLWIDTH VERTICAL LINE */
#define SP "\xe2\x96\x81" /* U+2581 */
static const char *const k_fim_pre_texts[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                              "<" FW "fim" SP "begin" FW ">", "<PRE>", SP "<PRE>",
                                              "<|code_prefix|>", NULL};
static const char *const k_fim_suf_texts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                              "<" FW "fim" SP "hole" FW ">", "<SUF>", SP "<SUF>",
                                              "<|code_suffix|>", NULL};
static const char *const k_fim_mid_texts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                              "<" FW "fim" SP "end" FW ">", "<MID>", SP "<MID>",
                                              "<|code_middle|>", NULL};
static const char *const k_fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL};
static const char *const k_fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                              "<REPO>", "<reponame>", NULL};
static const char *const k_fim_sep_texts[] = {"<|file_sep|>", NULL};
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
    NULL};

static si_status load_special(tokenizer *t, const gguf_file *f) {
    si_status s;
    int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
    if ((s = get_id(t, f, "tokenizer.ggml.bos_token_id", &t->bos)) ||
        (s = get_id(t, f, "tokenizer.ggml.eos_token_id", &t->eos)) ||
        (s = get_id(t, f, "tokenizer.ggml.eot_token_id", &t->eot)) ||
        (s = get_id(t, f, "tokenizer.ggml.eom_token_id", &t->eom)) ||
        (s = get_id(t, f, "tokenizer.ggml.unknown_token_id", &t->unk)) ||
        (s = get_id(t, f, "tokenizer.ggml.padding_token_id", &t->pad)) ||
        (s = get_id(t, f, "tokenizer.ggml.fim_pre_token_id", &fim_pre)) ||
        (s = get_id(t, f, "tokenizer.ggml.fim_suf_token_id", &fim_suf)) ||
        (s = get_id(t, f, "tokenizer.ggml.fim_mid_token_id", &fim_mid)) ||
        (s = get_id(t, f, "tokenizer.ggml.fim_pad_token_id", &fim_pad)) ||
        (s = get_id(t, f, "tokenizer.ggml.fim_rep_token_id", &fim_rep)) ||
        (s = get_id(t, f, "tokenizer.ggml.fim_sep_token_id", &fim_sep)) ||
        (s = get_flag(f, "tokenizer.ggml.add_bos_token", &t->add_bos)) ||
        (s = get_flag(f, "tokenizer.ggml.add_eos_token", &t->add_eos)))
        return si_error_wrap(s, "tokenizer: ");

    /* NOTE: llama.cpp walks an unordered map here, so which of several candidates becomes the
     * eot id is unspecified; we take the lowest id. All candidates end generation anyway. */
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (t->eot < 0 && text_is(t, id, k_eot_texts)) {
            t->eot = id;
            t->type[id] = TOK_TYPE_CONTROL;
        }
        if (t->eom < 0 && text_is(t, id, k_eom_texts)) {
            t->eom = id;
            t->type[id] = TOK_TYPE_CONTROL;
        }
        if (fim_pre < 0 && text_is(t, id, k_fim_pre_texts)) { fim_pre = id; t->type[id] = TOK_TYPE_CONTROL; }
        if (fim_suf < 0 && text_is(t, id, k_fim_suf_texts)) { fim_suf = id; t->type[id] = TOK_TYPE_CONTROL; }
        if (fim_mid < 0 && text_is(t, id, k_fim_mid_texts)) { fim_mid = id; t->type[id] = TOK_TYPE_CONTROL; }
        if (fim_pad < 0 && text_is(t, id, k_fim_pad_texts)) { fim_pad = id; t->type[id] = TOK_TYPE_CONTROL; }
        if (fim_rep < 0 && text_is(t, id, k_fim_rep_texts)) { fim_rep = id; t->type[id] = TOK_TYPE_CONTROL; }
        if (fim_sep < 0 && text_is(t, id, k_fim_sep_texts)) { fim_sep = id; t->type[id] = TOK_TYPE_CONTROL; }
    }
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (text_is(t, id, k_eog_texts)) {
            t->eog[id] = 1;
            t->type[id] = TOK_TYPE_CONTROL;
        }
    }
    int32_t extra[] = {fim_pad, fim_rep, fim_sep, t->eos, t->eot, t->eom};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        if (extra[i] >= 0) t->eog[extra[i]] = 1;

    /* Special tokens for partitioning, longest text first. */
    t->special = malloc((size_t)t->n_vocab * sizeof *t->special);
    if (!t->special) return si_error(SI_ERR_NOMEM, "tokenizer: out of memory");
    for (int32_t id = 0; id < t->n_vocab; id++) {
        uint8_t ty = t->type[id];
        if (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED || ty == TOK_TYPE_UNKNOWN)
            t->special[t->n_special++] = id;
    }
    /* insertion sort by length desc, stable on id (few hundred entries at most in practice) */
    for (int32_t i = 1; i < t->n_special; i++) {
        int32_t v = t->special[i], j = i;
        while (j > 0 && t->len[t->special[j - 1]] < t->len[v]) {
            t->special[j] = t->special[j - 1];
            j--;
        }
        t->special[j] = v;
    }
    return SI_OK;
}

si_status tokenizer_load(const gguf_file *f, tokenizer **out) {
    *out = NULL;
    const char *model = NULL, *pre = NULL;
    si_status s = gguf_get_str(f, "tokenizer.ggml.model", &model);
    if (s == SI_ERR_NOT_FOUND)
        return si_error(s, "%s: tokenizer.ggml.model missing", f->path ? f->path : "gguf");
    if (s != SI_OK) return s;
    s = gguf_get_str(f, "tokenizer.ggml.pre", &pre);
    if (s != SI_OK && s != SI_ERR_NOT_FOUND) return s;
    if (s == SI_ERR_NOT_FOUND) pre = NULL;

    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return si_error(SI_ERR_NOMEM, "tokenizer: out of memory");
    t->eot = t->eom = t->pad = -1;
    if (strcmp(model, "gpt2") == 0) {
        t->kind = TOK_KIND_BPE;
        t->bos = t->eos = 11; /* llama.cpp's defaults for gpt2 */
        t->unk = -1;
    } else if (strcmp(model, "llama") == 0) {
        t->kind = TOK_KIND_SPM;
        t->bos = 1;
        t->eos = 2;
        t->unk = 0;
        t->add_bos = true;
        t->add_space_prefix = true;
    } else {
        free(t);
        return si_error(SI_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model '%s' is not supported (gpt2, llama)",
                        f->path ? f->path : "gguf", model);
    }
    if ((s = load_vocab(t, f)) != SI_OK) goto fail;
    if (t->bos >= t->n_vocab) t->bos = -1;
    if (t->eos >= t->n_vocab) t->eos = -1;
    if (t->unk >= t->n_vocab) t->unk = -1;
    if (t->kind == TOK_KIND_BPE) {
        if ((s = load_merges(t, f)) != SI_OK) goto fail;
        if ((s = bpe_init(t, pre)) != SI_OK) goto fail; /* sets add_bos / ignore_merges per pre */
    }
    if ((s = get_flag(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix)) != SI_OK) goto fail;
    if ((s = load_special(t, f)) != SI_OK) goto fail;
    *out = t;
    return SI_OK;
fail:
    tokenizer_free(t);
    return s;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    bpe_free(t);
    free(t->blob);
    free(t->off);
    free(t->len);
    free(t->score);
    free(t->type);
    free(t->eog);
    free(t->ids.slot);
    free(t->mblob);
    free(t->m_off);
    free(t->m_llen);
    free(t->m_rlen);
    free(t->merges.slot);
    free(t->special);
    free(t);
}

/* ---- encoding ----------------------------------------------------------------------------- */

typedef struct frag {
    int32_t id; /* >= 0: a special token; -1: raw text [off, off+len) */
    size_t off, len;
} frag;

typedef struct frags {
    frag *v;
    size_t n, cap;
} frags;

static bool frags_push(frags *fs, frag f) {
    if (fs->n == fs->cap) {
        size_t cap = fs->cap ? fs->cap * 2 : 16;
        frag *v = realloc(fs->v, cap * sizeof *v);
        if (!v) return false;
        fs->v = v;
        fs->cap = cap;
    }
    fs->v[fs->n++] = f;
    return true;
}

/* llama.cpp's tokenizer_st_partition: for each special token (longest first) split every raw
 * fragment at each of its occurrences. CONTROL and UNKNOWN tokens only when parse_special;
 * USER_DEFINED tokens always. */
static bool partition(const tokenizer *t, const char *text, size_t len, bool parse_special, frags *fs) {
    frags tmp = {0};
    if (!frags_push(fs, (frag){-1, 0, len})) return false;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        uint8_t ty = t->type[id];
        if (!parse_special && (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_UNKNOWN)) continue;
        const char *st = t->blob + t->off[id];
        size_t sl = t->len[id];
        if (sl == 0) continue;
        bool any = false;
        for (size_t i = 0; i < fs->n && !any; i++)
            if (fs->v[i].id < 0 && fs->v[i].len >= sl && memmem(text + fs->v[i].off, fs->v[i].len, st, sl))
                any = true;
        if (!any) continue;
        tmp.n = 0;
        for (size_t i = 0; i < fs->n; i++) {
            frag f = fs->v[i];
            if (f.id >= 0) {
                if (!frags_push(&tmp, f)) goto oom;
                continue;
            }
            size_t pos = f.off, end = f.off + f.len;
            while (pos < end) {
                const char *m = end - pos >= sl ? memmem(text + pos, end - pos, st, sl) : NULL;
                if (!m) break;
                size_t mo = (size_t)(m - text);
                if (mo > pos && !frags_push(&tmp, (frag){-1, pos, mo - pos})) goto oom;
                if (!frags_push(&tmp, (frag){id, 0, 0})) goto oom;
                pos = mo + sl;
            }
            if (pos < end && !frags_push(&tmp, (frag){-1, pos, end - pos})) goto oom;
        }
        frags sw = *fs;
        *fs = tmp;
        tmp = sw;
    }
    free(tmp.v);
    return true;
oom:
    free(tmp.v);
    return false;
}

int32_t tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_special,
                         bool parse_special, int32_t *out, int32_t cap) {
    if (!t || (!text && len) || cap < 0 || (cap > 0 && !out)) {
        si_error(SI_ERR_INVALID_ARG, "tokenizer_encode: bad arguments");
        return -1;
    }
    tok_ids ids = {0};
    frags fs = {0};
    si_status s = SI_OK;
    if (len > 0 && !partition(t, text, len, parse_special, &fs)) {
        s = si_error(SI_ERR_NOMEM, "tokenizer_encode: out of memory");
        goto done;
    }
    if (add_special && t->add_bos && t->bos >= 0 && !tok_ids_push(&ids, t->bos)) goto nomem;
    bool prev_special = true; /* SPM: prefix a space to the first raw fragment */
    for (size_t i = 0; i < fs.n; i++) {
        if (fs.v[i].id >= 0) {
            if (!tok_ids_push(&ids, fs.v[i].id)) goto nomem;
            prev_special = true;
            continue;
        }
        if (t->kind == TOK_KIND_BPE)
            s = bpe_encode(t, text + fs.v[i].off, fs.v[i].len, &ids);
        else
            s = spm_encode(t, text + fs.v[i].off, fs.v[i].len, t->add_space_prefix && prev_special, &ids);
        if (s != SI_OK) goto done;
        prev_special = false;
    }
    if (add_special && t->add_eos && t->eos >= 0 && !tok_ids_push(&ids, t->eos)) goto nomem;
    if (ids.n > INT32_MAX) {
        s = si_error(SI_ERR_INVALID_ARG, "tokenizer_encode: text too long (%zu tokens)", ids.n);
        goto done;
    }
    if (ids.n > 0 && cap > 0) memcpy(out, ids.v, (ids.n < (size_t)cap ? ids.n : (size_t)cap) * sizeof *out);
    goto done;
nomem:
    s = si_error(SI_ERR_NOMEM, "tokenizer_encode: out of memory");
done:
    free(fs.v);
    free(ids.v);
    return s == SI_OK ? (int32_t)ids.n : -1;
}

/* ---- getters ------------------------------------------------------------------------------ */

int32_t tokenizer_n_vocab(const tokenizer *t) { return t->n_vocab; }
int32_t tokenizer_bos(const tokenizer *t) { return t->bos; }
int32_t tokenizer_eos(const tokenizer *t) { return t->eos; }
bool tokenizer_adds_bos(const tokenizer *t) { return t->add_bos && t->bos >= 0; }

char *tokenizer_token_text(const tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return strdup("");
    return strndup(t->blob + t->off[id], t->len[id]);
}
bool tokenizer_is_eog(const tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && t->eog[id];
}
int32_t tokenizer_find(const tokenizer *t, const char *piece) {
    return piece ? tok_find(t, piece, strlen(piece)) : -1;
}
