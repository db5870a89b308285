/* tokenizer.h — tokenizers built from GGUF metadata (tokenizer.ggml.*).
 *
 * Byte-level BPE (tokenizer.ggml.model = "gpt2", pre-tokeniser regexes chosen by
 * tokenizer.ggml.pre, run with PCRE2) and SentencePiece ("llama"). Ids equal llama.cpp's. */
#ifndef SI_TOKENIZER_H
#define SI_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"
#include "swiftinfer.h"

typedef struct tokenizer tokenizer;

/* Builds the tokenizer from f's metadata (copies what it needs: f may be closed afterwards). */
si_status tokenizer_load(const gguf_file *f, tokenizer **out);
void tokenizer_free(tokenizer *t);

/* Same contract as si_tokenize: returns the total count (may exceed cap; only cap written), or
 * -1 on error with si_last_error set. */
int32_t tokenizer_encode(const tokenizer *t, const char *text, size_t len, bool add_special,
                         bool parse_special, int32_t *out, int32_t cap);

/* Same contract as si_token_to_piece. */
int32_t tokenizer_token_to_piece(const tokenizer *t, int32_t id, char *out, int32_t cap);

int32_t tokenizer_n_vocab(const tokenizer *t);
int32_t tokenizer_bos(const tokenizer *t); /* -1 when none */
int32_t tokenizer_eos(const tokenizer *t); /* -1 when none */
/* Whether encoding with add_special prepends BOS (tokenizer.ggml.add_bos_token and the like). */
bool tokenizer_adds_bos(const tokenizer *t);
/* A malloc'd copy of token id's text in the vocabulary ("<|im_end|>"), "" for an id outside it
 * (-1: no such token); NULL when out of memory. */
char *tokenizer_token_text(const tokenizer *t, int32_t id);
bool tokenizer_is_eog(const tokenizer *t, int32_t id);
/* The id whose text is exactly piece (e.g. "<|im_start|>"), or -1. */
int32_t tokenizer_find(const tokenizer *t, const char *piece);

#endif
