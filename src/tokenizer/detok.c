/* detok.c — token_to_piece (llama.cpp's rules per token type) and a streaming UTF-8-safe
 * detokeniser (see detok.h). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tokenizer/detok.h"
#include "tokenizer/tokenizer_impl.h"

static int32_t copy_out(const char *s, size_t n, char *out, int32_t cap) {
    if (n > INT32_MAX) return -1;
    if ((int32_t)n <= cap) memcpy(out, s, n);
    return (int32_t)n;
}

int32_t tokenizer_token_to_piece_ex(const tokenizer *t, int32_t id, bool special, char *out,
                                    int32_t cap) {
    if (!t || id < 0 || id >= t->n_vocab || cap < 0 || (cap > 0 && !out)) {
        si_error(SI_ERR_INVALID_ARG, "token_to_piece: bad token id %d", id);
        return -1;
    }
    const char *text = t->blob + t->off[id];
    size_t n = t->len[id];
    uint8_t ty = t->type[id];
    if (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_UNKNOWN) return special ? copy_out(text, n, out, cap) : 0;
    if (ty == TOK_TYPE_USER_DEFINED) return copy_out(text, n, out, cap);
    if (t->kind == TOK_KIND_BPE) {
        if (ty != TOK_TYPE_NORMAL) return 0;
        size_t need = bpe_decode_text(text, n, out, (size_t)cap);
        return need > INT32_MAX ? -1 : (int32_t)need;
    }
    if (ty == TOK_TYPE_NORMAL) { /* U+2581 -> ' ' */
        size_t o = 0;
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && memcmp(text + i, "\xe2\x96\x81", 3) == 0) {
                if (o < (size_t)cap) out[o] = ' ';
                o++;
                i += 3;
            } else {
                if (o < (size_t)cap) out[o] = text[i];
                o++;
                i++;
            }
        }
        return (int32_t)o;
    }
    if (ty == TOK_TYPE_BYTE) { /* "<0xXX>" */
        if (n != 6) return 0;
        char hex[3] = {text[3], text[4], 0};
        char b = (char)strtol(hex, NULL, 16);
        return copy_out(&b, 1, out, cap);
    }
    return 0;
}

int32_t tokenizer_token_to_piece(const tokenizer *t, int32_t id, char *out, int32_t cap) {
    return tokenizer_token_to_piece_ex(t, id, false, out, cap);
}

/* ---- streaming ---------------------------------------------------------------------------- */

void detok_init(detok *d) { d->n_held = 0; }

static const char k_fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Length of a sequence from its lead byte (0: invalid lead), and the allowed range of the
 * second byte (Unicode Table 3-7, well-formed UTF-8). */
static int seq_info(uint8_t c, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (c < 0x80) return 1;
    if (c < 0xC2) return 0;
    if (c < 0xE0) return 2;
    if (c < 0xF0) {
        if (c == 0xE0) *lo = 0xA0;
        if (c == 0xED) *hi = 0x9F;
        return 3;
    }
    if (c < 0xF5) {
        if (c == 0xF0) *lo = 0x90;
        if (c == 0xF4) *hi = 0x8F;
        return 4;
    }
    return 0;
}

size_t detok_push(detok *d, const char *bytes, size_t len, char *out) {
    size_t nh = d->n_held, total = nh + len, o = 0, i = 0;
    uint8_t held[4];
    memcpy(held, d->held, sizeof held);
#define AT(j) ((j) < nh ? held[(j)] : (uint8_t)bytes[(j) - nh])
    d->n_held = 0;
    while (i < total) {
        uint8_t lo, hi, c = AT(i);
        int need = seq_info(c, &lo, &hi);
        if (need == 1) {
            out[o++] = (char)c;
            i++;
            continue;
        }
        if (need == 0) {
            memcpy(out + o, k_fffd, 3);
            o += 3;
            i++;
            continue;
        }
        int k = 1; /* bytes of the sequence seen valid so far */
        while (k < need && i + k < total) {
            uint8_t b = AT(i + k);
            bool ok = k == 1 ? (b >= lo && b <= hi) : ((b & 0xC0) == 0x80);
            if (!ok) break;
            k++;
        }
        if (k == need) {
            for (int j = 0; j < need; j++) out[o++] = (char)AT(i + j);
            i += need;
        } else if (i + k == total) { /* incomplete tail: hold it */
            for (int j = 0; j < k; j++) d->held[j] = AT(i + j);
            d->n_held = (uint32_t)k;
            i += k;
        } else { /* maximal ill-formed subpart -> one U+FFFD */
            memcpy(out + o, k_fffd, 3);
            o += 3;
            i += k;
        }
    }
#undef AT
    return o;
}

int32_t detok_push_token(detok *d, const tokenizer *t, int32_t id, bool special, char *out) {
    char piece[256];
    int32_t n = tokenizer_token_to_piece_ex(t, id, special, piece, (int32_t)sizeof piece);
    if (n < 0) return -1;
    if (n > (int32_t)sizeof piece) {
        si_error(SI_ERR_INVALID_ARG, "detok: token %d's piece is %d bytes (max 256)", id, n);
        return -1;
    }
    return (int32_t)detok_push(d, piece, (size_t)n, out);
}

size_t detok_flush(detok *d, char *out) {
    if (d->n_held == 0) return 0;
    d->n_held = 0;
    memcpy(out, k_fffd, 3);
    return 3;
}
