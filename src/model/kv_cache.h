/* kv_cache.h — paged KV storage: a pool of fixed-size blocks per layer for K and V, allocated
 * once. This is only the memory; which blocks belong to which sequence (reference counts,
 * prefix hashes, LRU) is the engine's block pool (src/engine/kv_pool.h). This host kv_cache (the
 * CPU backend's) is f16; the CUDA backend keeps its own pool of the same layout in device
 * memory, f16 or FP8 E4M3 (si_kv_cache_dtype; cuda_backend.c), whose block size in bytes
 * kv_cache_block_bytes gives with elem_bytes 1. */
#ifndef SI_MODEL_KV_CACHE_H
#define SI_MODEL_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "swiftinfer.h"

#define KV_BLOCK_SIZE 16 /* tokens per block (vLLM's default) */

typedef struct kv_cache {
    int32_t n_layer;
    int32_t n_blocks;
    int32_t block_size;
    int32_t kv_dim;  /* n_head_kv * head_dim */
    uint16_t *k;     /* f16 [n_layer][n_blocks][block_size][kv_dim] */
    uint16_t *v;     /* f16 [n_layer][n_blocks][block_size][kv_dim] */
} kv_cache;

/* Bytes one block costs across all layers (K and V) with elem_bytes per element: 2 for this
 * f16 kv_cache; 1 for the CUDA backend's FP8 E4M3 pool (SI_KV_FP8_E4M3). */
size_t kv_cache_block_bytes(int32_t n_layer, int32_t kv_dim, int32_t block_size,
                            size_t elem_bytes);

si_status kv_cache_create(int32_t n_layer, int32_t kv_dim, int32_t n_blocks, int32_t block_size,
                          kv_cache **out);
void kv_cache_free(kv_cache *kv);

/* The K (or V) row of slot `slot` of block `block` in layer `layer`. */
static inline uint16_t *kv_cache_k(const kv_cache *kv, int32_t layer, int32_t block, int32_t slot) {
    return kv->k + (((size_t)layer * kv->n_blocks + block) * kv->block_size + slot) * kv->kv_dim;
}
static inline uint16_t *kv_cache_v(const kv_cache *kv, int32_t layer, int32_t block, int32_t slot) {
    return kv->v + (((size_t)layer * kv->n_blocks + block) * kv->block_size + slot) * kv->kv_dim;
}

#endif
