/* kv_pool.h — the engine's KV block pool: which physical blocks of the kv_cache are free, who
 * holds them, and which full blocks can be reused by a later request (prefix caching).
 *
 * The design is vLLM v1's block pool (DESIGN.md, "KV cache"):
 * - every block has a reference count; sequences hold block ids, never memory;
 * - blocks whose count is zero sit on one free queue. Blocks with no prefix hash are put at its
 *   head and blocks that still hold a cached prefix at its tail, and allocation pops the head:
 *   cached blocks are recycled only when no plain free block is left, least recently freed
 *   first (an LRU list);
 * - a *full* block is identified by a hash chain: XXH3_64bits over (parent block's hash, the
 *   block's KV_BLOCK_SIZE tokens). The map from hash to block also keeps the parent hash and the
 *   tokens, and a look-up compares them, so a 64-bit collision can never hand out wrong K/V:
 *   equal parent hashes and equal tokens at every level mean an equal prefix.
 *
 * Running out of blocks is not an error: kv_pool_alloc returns -1 and the scheduler preempts.
 * Single-threaded: only the engine thread touches a pool. */
#ifndef SI_ENGINE_KV_POOL_H
#define SI_ENGINE_KV_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/kv_cache.h"
#include "swiftinfer.h"

/* The parent hash of a sequence's first block. */
#define KV_HASH_ROOT 0x5349465449534b56ull

typedef struct kv_pool kv_pool;

typedef struct kv_pool_stats {
    int32_t n_blocks;   /* total */
    int32_t n_free;     /* reference count zero (cached ones included): allocatable */
    int32_t n_cached;   /* blocks in the prefix map (held or free) */
    int32_t n_used;     /* reference count above zero */
    int64_t hits;       /* prompt blocks found in the prefix cache */
    int64_t misses;     /* full prompt blocks looked up and not found */
    int64_t evictions;  /* cached blocks recycled for new data */
} kv_pool_stats;

/* A pool of n_blocks blocks (all free, none cached). SI_ERR_INVALID_ARG when n_blocks < 1,
 * SI_ERR_NOMEM. Free with kv_pool_free. */
si_status kv_pool_create(int32_t n_blocks, kv_pool **out);
void kv_pool_free(kv_pool *p);

/* Takes a free block (reference count becomes 1), evicting its cached prefix hash if it had
 * one. Returns the block id, or -1 when no block is free. */
int32_t kv_pool_alloc(kv_pool *p);

/* Blocks kv_pool_alloc can still hand out. */
int32_t kv_pool_n_free(const kv_pool *p);

/* One more holder of block b (a prefix-cache hit): a free cached block leaves the free queue. */
void kv_pool_ref(kv_pool *p, int32_t b);

/* One holder fewer. At zero the block goes to the free queue: at the tail (evicted last) when
 * it holds a cached prefix, at the head otherwise. */
void kv_pool_unref(kv_pool *p, int32_t b);

int32_t kv_pool_refcount(const kv_pool *p, int32_t b);

/* The hash of a full block of KV_BLOCK_SIZE tokens whose predecessor has hash parent. */
uint64_t kv_pool_block_hash(uint64_t parent, const int32_t *tokens);

/* The cached block with this hash, parent and tokens, or -1. Does not take a reference and
 * does not count hits; see kv_pool_count. */
int32_t kv_pool_lookup(const kv_pool *p, uint64_t hash, uint64_t parent, const int32_t *tokens);

/* Records that held block b now holds the full block (parent, tokens) with this hash. When the
 * hash is already cached by another block, b stays unpublished (the first copy wins). */
void kv_pool_publish(kv_pool *p, int32_t b, uint64_t hash, uint64_t parent,
                     const int32_t *tokens);

/* Adds to the hit and miss counters. */
void kv_pool_count(kv_pool *p, int32_t hits, int32_t misses);

kv_pool_stats kv_pool_get_stats(const kv_pool *p);

/* Checks every invariant (free queue == blocks of count zero, links consistent, the map and
 * the blocks agree, counters add up); aborts with a message naming the broken one. */
void kv_pool_check(const kv_pool *p);

#endif
