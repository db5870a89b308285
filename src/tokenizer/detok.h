/* detok.h — turning token ids back into text.
 *
 * tokenizer_token_to_piece_ex renders one token the way llama.cpp's token_to_piece does (GPT-2
 * byte-level chars back to bytes; SentencePiece U+2581 to ' ' and <0xXX> to the byte). Because
 * one character may span several tokens, the streaming detokeniser holds back an incomplete
 * UTF-8 tail until the next token completes it, so callers only ever see whole characters. */
#ifndef SI_TOKENIZER_DETOK_H
#define SI_TOKENIZER_DETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* As tokenizer_token_to_piece; special = true renders CONTROL and UNKNOWN tokens as their text
 * (tokenizer_token_to_piece renders them as ""). Returns the byte count (at most cap written),
 * the count needed when it exceeds cap, or -1 for a bad id. */
int32_t tokenizer_token_to_piece_ex(const tokenizer *t, int32_t id, bool special, char *out,
                                    int32_t cap);

/* Streaming detokeniser state: at most 3 held bytes (an incomplete UTF-8 prefix). */
typedef struct detok {
    uint8_t held[4];
    uint32_t n_held;
} detok;

/* Worst-case output of one detok_push of len bytes: invalid bytes become U+FFFD (3 bytes). */
#define DETOK_MAX_OUT(len) (3 * ((len) + 4))

void detok_init(detok *d);

/* Feeds bytes; writes to out only complete, valid UTF-8 (ill-formed sequences are replaced by
 * U+FFFD, one per maximal ill-formed subpart as in Unicode's "U+FFFD substitution of maximal
 * subparts"); holds back a trailing incomplete sequence. out must have room for
 * DETOK_MAX_OUT(len) bytes. Returns the bytes written. */
size_t detok_push(detok *d, const char *bytes, size_t len, char *out);

/* Pushes token id's piece (tokenizer_token_to_piece_ex with special). out must have room for
 * DETOK_MAX_OUT(piece length); pieces are at most the token's text length, so
 * DETOK_MAX_OUT(256) suffices for ordinary vocabularies. Returns bytes written or -1 for a bad
 * id or a piece longer than 256 bytes. */
int32_t detok_push_token(detok *d, const tokenizer *t, int32_t id, bool special, char *out);

/* End of stream: a held incomplete tail becomes one U+FFFD. out needs 3 bytes. Returns bytes
 * written (0 or 3). */
size_t detok_flush(detok *d, char *out);

#endif
