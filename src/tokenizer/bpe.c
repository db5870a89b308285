/* bpe.c — byte-level BPE (GPT-2, "Language Models are Unsupervised Multitask Learners"), with
 * llama.cpp's exact merge procedure (llm_tokenizer_bpe_session):
 *   text -> code points (invalid UTF-8 bytes become U+FFFD) -> regex pieces (pretok.c) ->
 *   each piece's bytes mapped to GPT-2's printable code points -> per piece, repeatedly merge
 *   the adjacent pair of lowest merge rank (ties: leftmost) -> token ids; a final symbol with no
 *   token falls back to the ids of its single bytes where those exist. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/heap.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tokenizer_impl.h"

/* ---- UTF-8 -------------------------------------------------------------------------------- */

size_t tok_utf8_len(uint8_t lead) {
    static const uint8_t k[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return k[lead >> 4];
}

/* llama.cpp's unicode_cpt_from_utf8: checks the lead and continuation bytes, not overlongs. */
size_t tok_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    if (!(c & 0x80)) { *cp = c; return 1; }
    if (!(c & 0x40)) return 0;
    if (!(c & 0x20)) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (!(c & 0x10)) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    if (!(c & 0x08)) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
              ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        /* NOTE: beyond U+10FFFF llama.cpp would go on; we treat it as invalid (PCRE2 needs valid UTF-8) */
        return *cp <= 0x10FFFF ? 4 : 0;
    }
    return 0;
}

size_t tok_utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- GPT-2 byte <-> unicode --------------------------------------------------------------- */

/* Printable bytes map to themselves; the other 68 (0-32, 127-160, 173) to U+0100 + k in order. */
static uint32_t byte_to_cp(uint8_t b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    if (b <= 32) return 256u + b;                 /* 0..32 -> 256..288 */
    if (b <= 160) return 256u + 33 + (b - 127);   /* 127..160 -> 289..322 */
    return 256u + 33 + 34;                        /* 173 -> 323 */
}

static int cp_to_byte(uint32_t cp) {
    if (cp < 256) {
        uint8_t b = (uint8_t)cp;
        return byte_to_cp(b) == cp ? b : -1;
    }
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 127);
    if (cp == 323) return 173;
    return -1;
}

size_t bpe_decode_text(const char *s, size_t n, char *out, size_t cap) {
    size_t o = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = tok_utf8_decode((const uint8_t *)s + i, n - i, &cp);
        int b = k ? cp_to_byte(cp) : -1;
        if (b < 0) { /* not a byte-level char: copy as is (llama.cpp throws here) */
            size_t m = k ? k : 1;
            for (size_t j = 0; j < m; j++, o++)
                if (o < cap) out[o] = s[i + j];
            i += m;
            continue;
        }
        if (o < cap) out[o] = (char)b;
        o++;
        i += k;
    }
    return o;
}

/* ---- init --------------------------------------------------------------------------------- */

si_status bpe_init(tokenizer *t, const char *pre_name) {
    bool add_bos = false, ignore_merges = false;
    si_status s = pretok_create(pre_name, &t->pre, &add_bos, &ignore_merges);
    if (s != SI_OK) return s;
    t->add_bos = add_bos;
    t->ignore_merges = ignore_merges;
    return SI_OK;
}

void bpe_free(tokenizer *t) {
    pretok_free(t->pre);
    t->pre = NULL;
}

/* ---- merging ------------------------------------------------------------------------------ */

typedef struct sym {
    int32_t prev, next;
    uint32_t off, n; /* into the piece */
} sym;

typedef struct bigram {
    int32_t rank, left, right;
    uint32_t rn; /* right symbol's size when queued: a changed size means the entry is stale */
} bigram;

typedef struct bpe_work {
    sym *syms;
    size_t cap_syms;
    heap queue; /* of bigram */
    char *word;
    size_t cap_word;
} bpe_work;

/* lower rank first, ties: leftmost first (llama.cpp's order) */
static bool bg_less(const void *va, const void *vb) {
    const bigram *a = va, *b = vb;
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static bool add_bigram(const tokenizer *t, bpe_work *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return true;
    const sym *a = &w->syms[l], *b = &w->syms[r];
    int32_t rank = tok_merge_rank(t, w->word + a->off, a->n, w->word + b->off, b->n);
    if (rank < 0) return true;
    return heap_push(&w->queue, &(bigram){rank, l, r, b->n});
}

/* Merges one piece (already byte-level encoded in w->word[0..n)) and appends its ids. */
static bool bpe_piece(const tokenizer *t, bpe_work *w, size_t n, tok_ids *ids) {
    const char *word = w->word;
    if (t->ignore_merges) {
        int32_t id = tok_find(t, word, n);
        if (id >= 0) return tok_ids_push(ids, id);
    }
    int32_t ns = 0;
    for (size_t off = 0; off < n; ns++) {
        size_t cl = tok_utf8_len((uint8_t)word[off]);
        if (cl > n - off) cl = n - off;
        w->syms[ns] = (sym){ns - 1, off + cl == n ? -1 : ns + 1, (uint32_t)off, (uint32_t)cl};
        off += cl;
    }
    w->queue.n = 0;
    for (int32_t i = 1; i < ns; i++)
        if (!add_bigram(t, w, i - 1, i)) return false;
    while (w->queue.n > 0) {
        bigram b;
        heap_pop(&w->queue, &b);
        sym *l = &w->syms[b.left], *r = &w->syms[b.right];
        if (l->n == 0 || r->n == 0 || r->n != b.rn) continue; /* outdated */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->syms[r->next].prev = b.left;
        if (!add_bigram(t, w, l->prev, b.left) || !add_bigram(t, w, b.left, l->next)) return false;
    }
    for (int32_t i = 0; i < ns; i++) {
        const sym *s = &w->syms[i];
        if (s->n == 0) continue;
        int32_t id = tok_find(t, word + s->off, s->n);
        if (id >= 0) {
            if (!tok_ids_push(ids, id)) return false;
            continue;
        }
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t bid = tok_find(t, word + s->off + j, 1);
            if (bid >= 0 && !tok_ids_push(ids, bid)) return false;
        }
    }
    return true;
}

si_status bpe_encode(const tokenizer *t, const char *text, size_t len, tok_ids *ids) {
    si_status s = SI_OK;
    pretok_span *spans = NULL;
    size_t n_spans = 0, cap_spans = 0;
    bpe_work w = {0};
    heap_init(&w.queue, sizeof(bigram), bg_less);
    /* Re-encode as code points (llama.cpp: invalid bytes -> U+FFFD, one byte at a time). */
    char *clean = malloc(len * 3 + 1);
    if (!clean) goto nomem;
    size_t cl = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = tok_utf8_decode((const uint8_t *)text + i, len - i, &cp);
        if (k == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) {
            /* NOTE: surrogates are kept by llama.cpp; PCRE2 cannot match them, so we replace
             * them too (a difference only on such malformed input). */
            cp = 0xFFFD;
            k = k ? k : 1;
        }
        cl += tok_utf8_encode(cp, clean + cl);
        i += k;
    }
    s = pretok_split(t->pre, clean, cl, &spans, &n_spans, &cap_spans);
    if (s != SI_OK) goto done;
    for (size_t i = 0; i < n_spans; i++) {
        size_t n = spans[i].len;
        if (2 * n > w.cap_word) {
            free(w.word);
            free(w.syms);
            w.cap_word = 2 * n;
            w.word = malloc(w.cap_word);
            w.syms = malloc(w.cap_word * sizeof *w.syms);
            if (!w.word || !w.syms) goto nomem;
        }
        size_t wn = 0;
        for (size_t j = 0; j < n; j++)
            wn += tok_utf8_encode(byte_to_cp((uint8_t)clean[spans[i].off + j]), w.word + wn);
        if (!bpe_piece(t, &w, wn, ids)) goto nomem;
    }
    goto done;
nomem:
    s = si_error(SI_ERR_NOMEM, "bpe: out of memory");
done:
    free(clean);
    free(spans);
    free(w.word);
    free(w.syms);
    heap_free(&w.queue);
    return s;
}
