/* spm.c — SentencePiece-style tokenisation as llama.cpp does it for tokenizer.ggml.model =
 * "llama" (llm_tokenizer_spm_session): spaces become U+2581, a space is prefixed at the start
 * and after special tokens (add_space_prefix), characters are merged pairwise, highest token
 * score first (ties: leftmost), while the merged text is a token; leftovers fall back to the
 * <0xXX> byte tokens. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/heap.h"
#include "tokenizer/tokenizer_impl.h"

int32_t spm_byte_token(const tokenizer *t, uint8_t byte) {
    static const char hex[] = "0123456789ABCDEF";
    char buf[7] = {'<', '0', 'x', hex[byte >> 4], hex[byte & 15], '>', 0};
    int32_t id = tok_find(t, buf, 6);
    if (id >= 0) return id;
    char c = (char)byte;
    id = tok_find(t, &c, 1); /* llama.cpp falls back to the byte as a one-character token */
    return id >= 0 ? id : t->unk;
}

typedef struct ssym {
    int32_t prev, next;
    uint32_t off, n;
} ssym;

typedef struct sbigram {
    float score;
    int32_t left, right;
    uint32_t size;
} sbigram;

/* max-heap on score, ties: smaller left first */
static bool sb_before(const void *va, const void *vb) {
    const sbigram *a = va, *b = vb;
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct spm_work {
    const tokenizer *t;
    const char *text;
    ssym *syms;
    heap queue; /* of sbigram */
} spm_work;

static bool try_add_bigram(spm_work *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return true;
    uint32_t size = w->syms[l].n + w->syms[r].n;
    int32_t id = tok_find(w->t, w->text + w->syms[l].off, size);
    if (id < 0) return true;
    return heap_push(&w->queue, &(sbigram){w->t->score[id], l, r, size});
}

si_status spm_encode(const tokenizer *t, const char *raw, size_t len, bool prefix_space,
                     tok_ids *ids) {
    si_status s = SI_OK;
    spm_work w = {.t = t};
    heap_init(&w.queue, sizeof(sbigram), sb_before);
    /* escape: ' ' -> U+2581 (3 bytes) */
    size_t cap = (len + 1) * 3;
    char *text = malloc(cap);
    ssym *syms = malloc((len + 1) * sizeof *syms);
    if (!text || !syms) goto nomem;
    size_t n = 0;
    if (prefix_space) {
        memcpy(text, "\xe2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (raw[i] == ' ') {
            memcpy(text + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            text[n++] = raw[i];
        }
    }
    w.text = text;
    w.syms = syms;
    int32_t ns = 0;
    for (size_t off = 0; off < n; ns++) {
        size_t cl = tok_utf8_len((uint8_t)text[off]);
        if (cl > n - off) cl = n - off;
        syms[ns] = (ssym){ns - 1, off + cl == n ? -1 : ns + 1, (uint32_t)off, (uint32_t)cl};
        off += cl;
    }
    for (int32_t i = 1; i < ns; i++)
        if (!try_add_bigram(&w, i - 1, i)) goto nomem;
    while (w.queue.n > 0) {
        sbigram b;
        heap_pop(&w.queue, &b);
        ssym *l = &syms[b.left], *r = &syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) syms[r->next].prev = b.left;
        if (!try_add_bigram(&w, l->prev, b.left) || !try_add_bigram(&w, b.left, l->next)) goto nomem;
    }
    /* NOTE: llama.cpp's resegment() also consults a reverse-merge map, but a final symbol that
     * is not a token is always a single character (merges only form tokens), so it reduces to
     * the byte fallback. */
    for (int32_t i = 0; ns > 0 && i != -1; i = syms[i].next) {
        const ssym *sy = &syms[i];
        int32_t id = tok_find(t, text + sy->off, sy->n);
        if (id >= 0) {
            if (!tok_ids_push(ids, id)) goto nomem;
            continue;
        }
        for (uint32_t j = 0; j < sy->n; j++) {
            int32_t bid = spm_byte_token(t, (uint8_t)text[sy->off + j]);
            if (bid < 0) {
                s = si_error(SI_ERR_FORMAT, "spm: no token for byte 0x%02X and no unknown token",
                             (uint8_t)text[sy->off + j]);
                goto done;
            }
            if (!tok_ids_push(ids, bid)) goto nomem;
        }
    }
    goto done;
nomem:
    s = si_error(SI_ERR_NOMEM, "spm: out of memory");
done:
    free(text);
    free(syms);
    heap_free(&w.queue);
    return s;
}
