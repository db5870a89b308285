/* kv_cache.c — the paged KV storage: one f16 allocation for K and one for V, each
 * [n_layer][n_blocks][block_size][kv_dim], made once at start (DESIGN.md, "KV cache"). Which
 * block belongs to which sequence is decided elsewhere (the engine's block pool). */
#include "model/kv_cache.h"

#include <stdlib.h>

#include "core/error.h"

size_t kv_cache_block_bytes(int32_t n_layer, int32_t kv_dim, int32_t block_size,
                            size_t elem_bytes) {
    /* K and V */
    return 2 * (size_t)n_layer * (size_t)block_size * (size_t)kv_dim * elem_bytes;
}

si_status kv_cache_create(int32_t n_layer, int32_t kv_dim, int32_t n_blocks, int32_t block_size,
                          kv_cache **out) {
    *out = NULL;
    if (n_layer <= 0 || kv_dim <= 0 || n_blocks <= 0 || block_size <= 0)
        return si_error(SI_ERR_INVALID_ARG, "kv cache: bad shape (%d layers, kv_dim %d, %d blocks "
                        "of %d tokens)", n_layer, kv_dim, n_blocks, block_size);
    kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return si_error(SI_ERR_NOMEM, "kv cache: out of memory");
    kv->n_layer = n_layer;
    kv->n_blocks = n_blocks;
    kv->block_size = block_size;
    kv->kv_dim = kv_dim;
    const size_t elems = (size_t)n_layer * n_blocks * block_size * kv_dim;
    kv->k = malloc(elems * sizeof(uint16_t));
    kv->v = malloc(elems * sizeof(uint16_t));
    if (!kv->k || !kv->v) {
        kv_cache_free(kv);
        return si_error(SI_ERR_NOMEM, "kv cache: out of memory for %d blocks (%zu MiB)", n_blocks,
                        (kv_cache_block_bytes(n_layer, kv_dim, block_size, sizeof(uint16_t)) * n_blocks) >> 20);
    }
    *out = kv;
    return SI_OK;
}

void kv_cache_free(kv_cache *kv) {
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv);
}
