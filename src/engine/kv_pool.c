/* kv_pool.c — reference-counted KV blocks, a free queue that doubles as the prefix cache's LRU
 * list, and an open-addressing map from block hash to block (see kv_pool.h). */
#include "engine/kv_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/error.h"

typedef struct kv_block {
    int32_t ref;
    int32_t prev, next; /* free-queue links (-1: none); valid only while ref == 0 */
    bool cached;        /* in the map */
    uint64_t hash, parent;
} kv_block;

struct kv_pool {
    int32_t n_blocks;
    kv_block *blocks;    /* [n_blocks] */
    int32_t *tokens;     /* [n_blocks][KV_BLOCK_SIZE] tokens of cached blocks */
    int32_t head, tail;  /* free queue */
    int32_t n_free, n_cached;
    int32_t *map;        /* [map_cap] block id or -1; linear probing on hash */
    uint32_t map_mask;
    int64_t hits, misses, evictions;
};

si_status kv_pool_create(int32_t n_blocks, kv_pool **out) {
    *out = NULL;
    if (n_blocks < 1) return si_error(SI_ERR_INVALID_ARG, "kv pool: %d blocks (need at least 1)",
                                      n_blocks);
    kv_pool *p = calloc(1, sizeof *p);
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)n_blocks) cap *= 2;
    if (p) {
        p->blocks = calloc((size_t)n_blocks, sizeof *p->blocks);
        p->tokens = malloc((size_t)n_blocks * KV_BLOCK_SIZE * sizeof *p->tokens);
        p->map = malloc(cap * sizeof *p->map);
    }
    if (!p || !p->blocks || !p->tokens || !p->map) {
        kv_pool_free(p);
        return si_error(SI_ERR_NOMEM, "kv pool: cannot allocate the tables for %d blocks",
                        n_blocks);
    }
    p->n_blocks = n_blocks;
    p->map_mask = cap - 1;
    for (uint32_t i = 0; i < cap; i++) p->map[i] = -1;
    for (int32_t b = 0; b < n_blocks; b++) {
        p->blocks[b].prev = b - 1;
        p->blocks[b].next = b + 1 < n_blocks ? b + 1 : -1;
    }
    p->head = 0;
    p->tail = n_blocks - 1;
    p->n_free = n_blocks;
    *out = p;
    return SI_OK;
}

void kv_pool_free(kv_pool *p) {
    if (!p) return;
    free(p->blocks);
    free(p->tokens);
    free(p->map);
    free(p);
}

/* ---- free queue ------------------------------------------------------------------------------ */

static void queue_remove(kv_pool *p, int32_t b) {
    kv_block *k = &p->blocks[b];
    if (k->prev >= 0) p->blocks[k->prev].next = k->next;
    else p->head = k->next;
    if (k->next >= 0) p->blocks[k->next].prev = k->prev;
    else p->tail = k->prev;
    k->prev = k->next = -1;
    p->n_free--;
}

static void queue_push(kv_pool *p, int32_t b, bool at_tail) {
    kv_block *k = &p->blocks[b];
    if (at_tail) {
        k->prev = p->tail;
        k->next = -1;
        if (p->tail >= 0) p->blocks[p->tail].next = b;
        else p->head = b;
        p->tail = b;
    } else {
        k->prev = -1;
        k->next = p->head;
        if (p->head >= 0) p->blocks[p->head].prev = b;
        else p->tail = b;
        p->head = b;
    }
    p->n_free++;
}

/* ---- hash map -------------------------------------------------------------------------------- */

static uint32_t map_slot(const kv_pool *p, uint64_t hash) {
    return (uint32_t)(hash ^ (hash >> 32)) & p->map_mask;
}

/* Removes block b from the map (backward-shift deletion keeps probe chains unbroken). */
static void map_remove(kv_pool *p, int32_t b) {
    uint32_t i = map_slot(p, p->blocks[b].hash);
    while (p->map[i] != b) {
        SI_ASSERT(p->map[i] >= 0);
        i = (i + 1) & p->map_mask;
    }
    for (;;) {
        p->map[i] = -1;
        uint32_t j = i;
        for (;;) {
            j = (j + 1) & p->map_mask;
            if (p->map[j] < 0) goto done;
            uint32_t home = map_slot(p, p->blocks[p->map[j]].hash);
            /* the entry at j may move to i when its home is not in (i, j] cyclically */
            bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
            if (!stays) break;
        }
        p->map[i] = p->map[j];
        i = j;
    }
done:
    p->blocks[b].cached = false;
    p->n_cached--;
}

/* ---- public ---------------------------------------------------------------------------------- */

int32_t kv_pool_alloc(kv_pool *p) {
    int32_t b = p->head;
    if (b < 0) return -1;
    queue_remove(p, b);
    if (p->blocks[b].cached) {
        map_remove(p, b);
        p->evictions++;
    }
    p->blocks[b].ref = 1;
    return b;
}

int32_t kv_pool_n_free(const kv_pool *p) { return p->n_free; }

void kv_pool_ref(kv_pool *p, int32_t b) {
    SI_ASSERT(b >= 0 && b < p->n_blocks);
    if (p->blocks[b].ref++ == 0) queue_remove(p, b);
}

void kv_pool_unref(kv_pool *p, int32_t b) {
    SI_ASSERT(b >= 0 && b < p->n_blocks && p->blocks[b].ref > 0);
    if (--p->blocks[b].ref == 0) queue_push(p, b, p->blocks[b].cached);
}

int32_t kv_pool_refcount(const kv_pool *p, int32_t b) { return p->blocks[b].ref; }

uint64_t kv_pool_block_hash(uint64_t parent, const int32_t *tokens) {
    unsigned char buf[sizeof parent + KV_BLOCK_SIZE * sizeof(int32_t)];
    memcpy(buf, &parent, sizeof parent);
    memcpy(buf + sizeof parent, tokens, KV_BLOCK_SIZE * sizeof(int32_t));
    return XXH3_64bits(buf, sizeof buf);
}

int32_t kv_pool_lookup(const kv_pool *p, uint64_t hash, uint64_t parent, const int32_t *tokens) {
    for (uint32_t i = map_slot(p, hash);; i = (i + 1) & p->map_mask) {
        int32_t b = p->map[i];
        if (b < 0) return -1;
        const kv_block *k = &p->blocks[b];
        if (k->hash == hash && k->parent == parent &&
            !memcmp(p->tokens + (size_t)b * KV_BLOCK_SIZE, tokens,
                    KV_BLOCK_SIZE * sizeof *tokens))
            return b;
    }
}

void kv_pool_publish(kv_pool *p, int32_t b, uint64_t hash, uint64_t parent,
                     const int32_t *tokens) {
    kv_block *k = &p->blocks[b];
    SI_ASSERT(k->ref > 0);
    if (k->cached || kv_pool_lookup(p, hash, parent, tokens) >= 0) return;
    uint32_t i = map_slot(p, hash);
    while (p->map[i] >= 0) i = (i + 1) & p->map_mask;
    p->map[i] = b;
    k->cached = true;
    k->hash = hash;
    k->parent = parent;
    memcpy(p->tokens + (size_t)b * KV_BLOCK_SIZE, tokens, KV_BLOCK_SIZE * sizeof *tokens);
    p->n_cached++;
}

void kv_pool_count(kv_pool *p, int32_t hits, int32_t misses) {
    p->hits += hits;
    p->misses += misses;
}

kv_pool_stats kv_pool_get_stats(const kv_pool *p) {
    kv_pool_stats s = {p->n_blocks, p->n_free, p->n_cached, p->n_blocks - p->n_free,
                       p->hits, p->misses, p->evictions};
    return s;
}

#define CHECK(x, ...)                                                                 \
    do {                                                                              \
        if (!(x)) {                                                                   \
            fprintf(stderr, "kv_pool_check: " __VA_ARGS__);                           \
            fputc('\n', stderr);                                                      \
            si_assert_fail(#x, __FILE__, __LINE__);                                   \
        }                                                                             \
    } while (0)

void kv_pool_check(const kv_pool *p) {
    int32_t n = 0, prev = -1;
    for (int32_t b = p->head; b >= 0; prev = b, b = p->blocks[b].next) {
        CHECK(n < p->n_blocks, "free queue has a cycle");
        CHECK(p->blocks[b].ref == 0, "block %d on the free queue has %d references", b,
              p->blocks[b].ref);
        CHECK(p->blocks[b].prev == prev, "block %d: broken prev link", b);
        n++;
    }
    CHECK(prev == p->tail, "free queue tail is %d, walk ended at %d", p->tail, prev);
    CHECK(n == p->n_free, "free queue holds %d blocks, counter says %d", n, p->n_free);
    int32_t n_zero = 0, n_cached = 0;
    for (int32_t b = 0; b < p->n_blocks; b++) {
        CHECK(p->blocks[b].ref >= 0, "block %d: negative count", b);
        n_zero += p->blocks[b].ref == 0;
        n_cached += p->blocks[b].cached;
    }
    CHECK(n_zero == n, "%d blocks have no references but %d are on the free queue", n_zero, n);
    CHECK(n_cached == p->n_cached, "%d cached blocks, counter says %d", n_cached, p->n_cached);
    int32_t in_map = 0;
    for (uint32_t i = 0; i <= p->map_mask; i++) {
        int32_t b = p->map[i];
        if (b < 0) continue;
        in_map++;
        CHECK(b < p->n_blocks && p->blocks[b].cached, "map slot %u: block %d not cached", i, b);
        const int32_t *t = p->tokens + (size_t)b * KV_BLOCK_SIZE;
        CHECK(kv_pool_block_hash(p->blocks[b].parent, t) == p->blocks[b].hash,
              "block %d: stored hash does not match its tokens", b);
        CHECK(kv_pool_lookup(p, p->blocks[b].hash, p->blocks[b].parent, t) == b,
              "block %d cannot be found by its own hash", b);
    }
    CHECK(in_map == p->n_cached, "map holds %d blocks, %d are cached", in_map, p->n_cached);
}
