/* heap.c — binary heap: sift up on push, sift down on pop, elements moved with memcpy. */
#include "core/heap.h"

#include <stdlib.h>
#include <string.h>

#define AT(h, i) ((h)->data + (i) * (h)->elem)

void heap_init(heap *h, size_t elem, bool (*before)(const void *a, const void *b)) {
    *h = (heap){.elem = elem, .before = before};
}

void heap_free(heap *h) {
    free(h->data);
    h->data = NULL;
    h->n = h->cap = 0;
}

bool heap_push(heap *h, const void *e) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        unsigned char *d = realloc(h->data, (cap + 1) * h->elem);
        if (!d) return false;
        h->data = d;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!h->before(e, AT(h, p))) break;
        memcpy(AT(h, i), AT(h, p), h->elem);
        i = p;
    }
    memcpy(AT(h, i), e, h->elem);
    return true;
}

void heap_pop(heap *h, void *out) {
    memcpy(out, AT(h, 0), h->elem);
    unsigned char *last = AT(h, h->cap); /* scratch slot */
    memcpy(last, AT(h, --h->n), h->elem);
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h->before(AT(h, c + 1), AT(h, c))) c++;
        if (!h->before(AT(h, c), last)) break;
        memcpy(AT(h, i), AT(h, c), h->elem);
        i = c;
    }
    if (n) memcpy(AT(h, i), last, h->elem);
}
