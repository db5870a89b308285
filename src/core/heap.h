/* heap.h — a growable binary heap of fixed-size elements ordered by a caller's comparator: the
 * priority queue of the BPE and SentencePiece merge loops. */
#ifndef SI_CORE_HEAP_H
#define SI_CORE_HEAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct heap {
    unsigned char *data; /* cap + 1 elements: the last is scratch for pops */
    size_t n, cap, elem;
    bool (*before)(const void *a, const void *b); /* true when a comes out before b */
} heap;

/* An empty heap of elem-byte elements; allocates nothing until the first push. */
void heap_init(heap *h, size_t elem, bool (*before)(const void *a, const void *b));
void heap_free(heap *h);
/* Copies *e in; false when out of memory (the heap is unchanged). */
bool heap_push(heap *h, const void *e);
/* Copies the first element to *out and removes it; the heap must not be empty. */
void heap_pop(heap *h, void *out);

#endif
