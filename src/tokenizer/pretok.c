/* pretok.c — the pre-tokeniser regex table (names and regexes as in llama.cpp's llama-vocab.cpp,
 * llm_tokenizer_bpe) and the split loop (llama.cpp's unicode_regex_split). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tokenizer/pretok.h"

#define PRETOK_MAX_RE 8

struct pretok {
    int n;
    pcre2_code *re[PRETOK_MAX_RE];
};

/* Shared regex strings. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3                                                                                  \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"    \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                   \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"    \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_CJK "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9e\xbf]+" /* [一-龥ࠀ-一가-퟿]+ */
#define RE_PORO " ?[^(\\s|.,!?\xe2\x80\xa6\xe3\x80\x82\xef\xbc\x8c\xe3\x80\x81\xe0\xa5\xa4\xdb\x94\xd8\x8c)]+"

typedef enum pre_kind {
    PRE_DEFAULT,
    PRE_LLAMA3,
    PRE_DEEPSEEK_LLM,
    PRE_DEEPSEEK_CODER,
    PRE_FALCON,
    PRE_STARCODER, /* starcoder, refact, command-r, smollm, codeshell, exaone, minerva */
    PRE_GPT2,      /* gpt-2, mpt, olmo, jais, ... */
    PRE_QWEN2,     /* qwen2, stablelm2 */
    PRE_PORO,      /* poro-chat, bloom, gpt3-finnish */
    PRE_CHATGLM4,
    PRE_VIKING,
    PRE_TEKKEN,
} pre_kind;

static const char *const k_re_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+",
                                           "[0-9][0-9][0-9]", NULL};
static const char *const k_re_llama3[] = {RE_LLAMA3, NULL};
static const char *const k_re_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf\xc7\x84-"
    "\xca\x93\xca\x95-\xca\xaf\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce"
    "\x88-\xce\x8a\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5\xcf\xb7-\xd2\x81\xd2\x8a-\xd4\xaf\xd4"
    "\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5\xe1\x8f\xb8-\xe1\x8f\xbd\xe1\xb2"
    "\x90-\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1"
    "\xb5\xb9-\xe1\xb6\x9a\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85"
    "\xe1\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd"
    "\x9f-\xe1\xbd\xbd\xe1\xbe\x80-\xe1\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe\xe1\xbf\x82-\xe1"
    "\xbf\x84\xe1\xbf\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-"
    "\xe1\xbf\xac\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2\x84\x82\xe2\x84\x87\xe2\x84"
    "\x8a-\xe2\x84\x93\xe2\x84\x95\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8\xe2"
    "\x84\xaa-\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf\xe2\x85\x85-"
    "\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3"
    "\xa4\xe2\xb3\xab-\xe2\xb3\xae\xe2\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea"
    "\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-\xea\x9e\x87\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-"
    "\xea\xae\xbf\xef\xac\x80-\xef\xac\x86\xef\xac\x93-\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba\xef\xbd"
    "\x81-\xef\xbd\x9a\xf0\x90\x90\x80-\xf0\x90\x91\x8f\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93"
    "\x98-\xf0\x90\x93\xbb\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91"
    "\xa2\xa0-\xf0\x91\xa3\x9f\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83]+",
    "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f\xe3\x80"
    "\x80-\xe3\x80\x82]+",
    "\\s+$",
    RE_CJK,
    "\\p{N}+",
    NULL};
static const char *const k_re_deepseek_coder[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RE_CJK,
                                                  "\\p{N}", NULL};
static const char *const k_re_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]",
                                          NULL};
static const char *const k_re_starcoder[] = {"\\p{N}", RE_GPT2, NULL};
static const char *const k_re_gpt2[] = {RE_GPT2, NULL};
static const char *const k_re_qwen2[] = {RE_QWEN2, NULL};
static const char *const k_re_poro[] = {RE_PORO, NULL};
static const char *const k_re_chatglm4[] = {RE_LLAMA3, NULL};
static const char *const k_re_viking[] = {RE_PORO, "\\p{N}", NULL};
static const char *const k_re_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?="
    "[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+",
    NULL};

static const char *const *const k_regexes[] = {
    [PRE_DEFAULT] = k_re_default,     [PRE_LLAMA3] = k_re_llama3,
    [PRE_DEEPSEEK_LLM] = k_re_deepseek_llm, [PRE_DEEPSEEK_CODER] = k_re_deepseek_coder,
    [PRE_FALCON] = k_re_falcon,       [PRE_STARCODER] = k_re_starcoder,
    [PRE_GPT2] = k_re_gpt2,           [PRE_QWEN2] = k_re_qwen2,
    [PRE_PORO] = k_re_poro,           [PRE_CHATGLM4] = k_re_chatglm4,
    [PRE_VIKING] = k_re_viking,       [PRE_TEKKEN] = k_re_tekken,
};

/* tokenizer.ggml.pre names, as llama-vocab maps them. add_bos / ignore_merges: its per-name
 * defaults (tokenizer.ggml.add_bos_token, when present, overrides add_bos later). */
static const struct {
    const char *name;
    pre_kind kind;
    bool add_bos, ignore_merges;
} k_names[] = {
    {"default", PRE_DEFAULT, false, false},
    {"llama3", PRE_LLAMA3, true, true},
    {"llama-v3", PRE_LLAMA3, true, true},
    {"llama-bpe", PRE_LLAMA3, true, true},
    {"falcon3", PRE_LLAMA3, true, true},
    {"falcon-h1", PRE_LLAMA3, true, true},
    {"pixtral", PRE_LLAMA3, true, true},
    {"midm-2.0", PRE_LLAMA3, true, true},
    {"lfm2", PRE_LLAMA3, true, true},
    {"dbrx", PRE_LLAMA3, false, false},
    {"smaug-bpe", PRE_LLAMA3, false, false},
    {"deepseek-llm", PRE_DEEPSEEK_LLM, false, false},
    {"deepseek-coder", PRE_DEEPSEEK_CODER, false, false},
    {"falcon", PRE_FALCON, false, false},
    {"mpt", PRE_GPT2, false, false},
    {"starcoder", PRE_STARCODER, false, false},
    {"gpt-2", PRE_GPT2, false, false},
    {"phi-2", PRE_GPT2, false, false},
    {"jina-es", PRE_GPT2, false, false},
    {"jina-de", PRE_GPT2, false, false},
    {"gigachat", PRE_GPT2, false, false},
    {"jina-v1-en", PRE_GPT2, false, false},
    {"jina-v2-es", PRE_GPT2, false, false},
    {"jina-v2-de", PRE_GPT2, false, false},
    {"jina-v2-code", PRE_GPT2, false, false},
    {"roberta-bpe", PRE_GPT2, false, false},
    {"a.x-4.0", PRE_GPT2, false, false},
    {"mellum", PRE_GPT2, false, false},
    {"trillion", PRE_GPT2, false, false},
    {"granite-docling", PRE_GPT2, false, false},
    {"jais", PRE_GPT2, false, false},
    {"olmo", PRE_GPT2, false, false},
    {"refact", PRE_STARCODER, false, false},
    {"command-r", PRE_STARCODER, false, false},
    {"smollm", PRE_STARCODER, false, false},
    {"codeshell", PRE_STARCODER, false, false},
    {"exaone", PRE_STARCODER, false, false},
    {"minerva-7b", PRE_STARCODER, false, false},
    {"qwen2", PRE_QWEN2, false, false},
    {"deepseek-r1-qwen", PRE_QWEN2, false, false},
    {"megrez", PRE_QWEN2, false, false},
    {"stablelm2", PRE_QWEN2, false, false},
    {"poro-chat", PRE_PORO, false, false},
    {"bloom", PRE_PORO, false, false},
    {"gpt3-finnish", PRE_PORO, false, false},
    {"chatglm-bpe", PRE_CHATGLM4, false, false},
    {"viking", PRE_VIKING, false, false},
    {"tekken", PRE_TEKKEN, true, true},
};

si_status pretok_create(const char *pre_name, pretok **out, bool *add_bos, bool *ignore_merges) {
    *out = NULL;
    const char *name = (pre_name && *pre_name) ? pre_name : "default";
    int found = -1;
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++)
        if (strcmp(k_names[i].name, name) == 0) {
            found = (int)i;
            break;
        }
    if (found < 0)
        return si_error(SI_ERR_UNSUPPORTED,
                        "tokenizer.ggml.pre '%s': unknown pre-tokenizer (supported: default, gpt-2, "
                        "llama-bpe, smollm, starcoder, qwen2, deepseek-coder, deepseek-llm, falcon, "
                        "tekken, ...)",
                        name);
    pretok *p = calloc(1, sizeof *p);
    if (!p) return si_error(SI_ERR_NOMEM, "pretok: out of memory");
    const char *const *list = k_regexes[k_names[found].kind];
    for (; *list; list++) {
        SI_ASSERT(p->n < PRETOK_MAX_RE);
        int err;
        PCRE2_SIZE eoff;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)*list, PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &eoff, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            int idx = p->n;
            pretok_free(p);
            return si_error(SI_ERR_INTERNAL, "pre-tokenizer '%s': regex %d fails to compile at %zu: %s",
                            name, idx, (size_t)eoff, (const char *)msg);
        }
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
        p->re[p->n++] = re;
    }
    *add_bos = k_names[found].add_bos;
    *ignore_merges = k_names[found].ignore_merges;
    *out = p;
    return SI_OK;
}

void pretok_free(pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->re[i]);
    free(p);
}

static bool spans_push(pretok_span **v, size_t *n, size_t *cap, size_t off, size_t len) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        pretok_span *nv = realloc(*v, c * sizeof *nv);
        if (!nv) return false;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = (pretok_span){off, len};
    return true;
}

si_status pretok_split(const pretok *p, const char *text, size_t len, pretok_span **spans,
                       size_t *n_spans, size_t *cap_spans) {
    pretok_span *cur = *spans, *next = NULL;
    size_t n_cur = 0, cap_cur = *cap_spans, n_next = 0, cap_next = 0;
    si_status s = SI_OK;
    pcre2_match_data *md = NULL;
    if (len == 0) {
        *n_spans = 0;
        return SI_OK;
    }
    if (!spans_push(&cur, &n_cur, &cap_cur, 0, len)) goto nomem;
    for (int r = 0; r < p->n; r++) {
        md = pcre2_match_data_create_from_pattern(p->re[r], NULL);
        if (!md) goto nomem;
        n_next = 0;
        for (size_t i = 0; i < n_cur; i++) {
            const char *seg = text + cur[i].off;
            size_t seglen = cur[i].len, start = 0, pos = 0;
            while (pos < seglen) {
                int rc = pcre2_match(p->re[r], (PCRE2_SPTR)seg, seglen, pos, PCRE2_NO_UTF_CHECK, md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    s = si_error(SI_ERR_INTERNAL, "pre-tokenizer: regex %d failed: %s", r, (const char *)msg);
                    goto done;
                }
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
                size_t ms = ov[0], me = ov[1];
                if (me == ms) { /* empty match: step one character (never for our regexes) */
                    pos = ms + 1;
                    while (pos < seglen && ((uint8_t)seg[pos] & 0xC0) == 0x80) pos++;
                    continue;
                }
                if (ms > start && !spans_push(&next, &n_next, &cap_next, cur[i].off + start, ms - start))
                    goto nomem;
                if (!spans_push(&next, &n_next, &cap_next, cur[i].off + ms, me - ms)) goto nomem;
                start = pos = me;
            }
            if (start < seglen && !spans_push(&next, &n_next, &cap_next, cur[i].off + start, seglen - start))
                goto nomem;
        }
        pcre2_match_data_free(md);
        md = NULL;
        pretok_span *tv = cur;
        size_t tcap = cap_cur;
        cur = next;
        n_cur = n_next;
        cap_cur = cap_next;
        next = tv;
        cap_next = tcap;
    }
    goto done;
nomem:
    s = si_error(SI_ERR_NOMEM, "pre-tokenizer: out of memory");
done:
    pcre2_match_data_free(md);
    free(next);
    *spans = cur;
    *cap_spans = cap_cur;
    *n_spans = s == SI_OK ? n_cur : 0;
    return s;
}
