/* pretok.h — regex pre-tokenisation for byte-level BPE (llama.cpp's unicode_regex_split).
 *
 * tokenizer.ggml.pre names a list of regexes; each one refines the split of the previous: within
 * every piece, matches and the gaps between them both become pieces. Regexes run with PCRE2
 * (UTF + UCP, so \p{L}, \p{N}, \s are Unicode-aware), each confined to its piece so that
 * look-aheads and '$' see the piece's end as the end of input, as std::regex does in llama.cpp. */
#ifndef SI_TOKENIZER_PRETOK_H
#define SI_TOKENIZER_PRETOK_H

#include <stdbool.h>
#include <stddef.h>

#include "swiftinfer.h"

typedef struct pretok pretok;

/* Compiles the regexes for a tokenizer.ggml.pre name (NULL or "" = "default").
 * SI_ERR_UNSUPPORTED for an unknown name. Sets *add_bos / *ignore_merges to llama.cpp's
 * defaults for that pre-tokeniser. */
si_status pretok_create(const char *pre_name, pretok **out, bool *add_bos, bool *ignore_merges);
void pretok_free(pretok *p);

/* A byte range of the text. */
typedef struct pretok_span {
    size_t off, len;
} pretok_span;

/* Splits valid UTF-8 text (text[0..len), no NUL needed) into pieces. *spans is a malloc'd array
 * (grown as needed; pass NULL/0 the first time) of *n_spans pieces covering the whole text in
 * order. Returns SI_OK or SI_ERR_NOMEM / SI_ERR_INTERNAL (regex failure). */
si_status pretok_split(const pretok *p, const char *text, size_t len, pretok_span **spans,
                       size_t *n_spans, size_t *cap_spans);

#endif
