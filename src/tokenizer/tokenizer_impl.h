/* tokenizer_impl.h — the private tokenizer struct shared by tokenizer.c, bpe.c, spm.c, detok.c.
 *
 * Layout follows llama.cpp's llama-vocab: token texts, scores and types (GGUF token_type values
 * used as attributes), a text -> id hash map, BPE merge ranks, and the special ids. */
#ifndef SI_TOKENIZER_IMPL_H
#define SI_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum tok_type {
    TOK_TYPE_UNDEFINED = 0,
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,
    TOK_TYPE_USER_DEFINED = 4,
    TOK_TYPE_UNUSED = 5,
    TOK_TYPE_BYTE = 6,
};

typedef enum tok_kind { TOK_KIND_BPE, TOK_KIND_SPM } tok_kind;

/* A growable id vector used while encoding (the output may exceed the caller's cap). */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;

bool tok_ids_push(tok_ids *ids, int32_t id);

/* Open-addressing hash map from byte strings to int32 values; keys live elsewhere and are
 * reached through a callback-free layout: each slot holds a value index, and the caller's key
 * arrays (off/len into blob) give the key of that index. */
typedef struct tok_map {
    int32_t *slot; /* -1 empty, else index */
    uint32_t mask;
} tok_map;

uint64_t tok_hash(const void *p, size_t n, uint64_t seed);

struct pretok;

struct tokenizer {
    tok_kind kind;
    int32_t n_vocab;

    char *blob;        /* all token texts, each NUL-terminated */
    uint32_t *off;     /* (n_vocab) start of each token's text in blob */
    uint32_t *len;     /* (n_vocab) byte length of each text */
    float *score;      /* (n_vocab) */
    uint8_t *type;     /* (n_vocab) enum tok_type */
    uint8_t *eog;      /* (n_vocab) 1 when the token ends generation */
    tok_map ids;       /* text -> id */

    /* BPE merges: "left right" pairs, rank = index. */
    uint32_t n_merges;
    char *mblob;        /* merge strings, left then right, no separator */
    uint32_t *m_off;    /* (n_merges) start of the left part in mblob */
    uint32_t *m_llen;   /* (n_merges) */
    uint32_t *m_rlen;   /* (n_merges) */
    tok_map merges;     /* (left,right) -> rank */

    int32_t bos, eos, eot, eom, unk, pad;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;

    /* CONTROL / USER_DEFINED / UNKNOWN tokens, longest text first (tokenizer_st_partition). */
    int32_t *special;
    int32_t n_special;

    struct pretok *pre; /* BPE only */
};

/* Token text look-up: id or -1. */
int32_t tok_find(const tokenizer *t, const char *s, size_t n);
/* Merge rank of (left, right): rank or -1. */
int32_t tok_merge_rank(const tokenizer *t, const char *l, size_t ln, const char *r, size_t rn);

/* bpe.c */
si_status bpe_init(tokenizer *t, const char *pre_name);
void bpe_free(tokenizer *t);
/* Appends the ids of raw text (no special tokens inside) to ids. */
si_status bpe_encode(const tokenizer *t, const char *text, size_t len, tok_ids *ids);
/* GPT-2 byte-level decoding of a token's text (unicode chars -> bytes). Returns bytes needed. */
size_t bpe_decode_text(const char *s, size_t n, char *out, size_t cap);

/* spm.c */
si_status spm_encode(const tokenizer *t, const char *text, size_t len, bool prefix_space,
                     tok_ids *ids);
int32_t spm_byte_token(const tokenizer *t, uint8_t byte);

/* UTF-8 helpers (llama.cpp's unicode_len_utf8 / unicode_cpt_from_utf8 semantics). */
size_t tok_utf8_len(uint8_t lead);
/* Decodes one code point at s[0..n); returns bytes consumed, or 0 when invalid. */
size_t tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);
size_t tok_utf8_encode(uint32_t cp, char *out);

#endif
