/* cpu_backend.c — the CPU backend table (forward_batch over a host kv_cache, weights read in
 * place from the mapped file) and the device registry of backend.h. */
#include "backend/backend.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/forward.h"
#include "model/kv_cache.h"

typedef struct cpu_state {
    si_model *m;
    kv_cache *kv;
    forward_scratch *ws;
} cpu_state;

static void cpu_free(void *state) {
    cpu_state *c = state;
    if (!c) return;
    forward_scratch_free(c->ws);
    kv_cache_free(c->kv);
    free(c);
}

static si_status cpu_create(si_model *m, const backend_params *p, void **state) {
    *state = NULL;
    if (p->kv_dtype != SI_KV_F16) /* the engine says so first, naming the flag */
        return si_error(SI_ERR_UNSUPPORTED, "cpu backend: the KV cache is f16 only "
                        "(--kv-cache-dtype fp8 needs --device cuda)");
    cpu_state *c = calloc(1, sizeof *c);
    if (!c) return si_error(SI_ERR_NOMEM, "cpu backend: out of memory");
    c->m = m;
    const int32_t kv_dim = m->hp.n_head_kv * m->hp.head_dim;
    si_status st;
    if ((st = kv_cache_create(m->hp.n_layer, kv_dim, p->n_blocks, KV_BLOCK_SIZE, &c->kv)) ||
        (st = forward_scratch_create(m, p->max_tokens, p->max_seqs, p->max_kv, &c->ws))) {
        cpu_free(c);
        return st;
    }
    *state = c;
    return SI_OK;
}

static void cpu_forward(void *state, const si_batch *b, float *logits) {
    cpu_state *c = state;
    forward_batch(c->m, c->kv, b, c->ws, logits);
}

static void cpu_stats(const void *state, backend_stats *out) {
    const cpu_state *c = state;
    *out = (backend_stats){.device = "cpu"};
    out->kv_bytes = kv_cache_block_bytes(c->kv->n_layer, c->kv->kv_dim, c->kv->block_size, 2) *
                    (size_t)c->kv->n_blocks;
}

static const si_backend CPU_BACKEND = {
    .name = "cpu",
    .rope_on_read = true,
    .create = cpu_create,
    .forward = cpu_forward,
    .stats = cpu_stats,
    .free = cpu_free,
    .kv_blocks_for_fraction = NULL,
    .copy_bandwidth = NULL,
};

const si_backend *backend_cpu(void) { return &CPU_BACKEND; }

#ifdef SI_HAVE_CUDA
/* src/backend/cuda/cuda_backend.c */
const si_backend *cuda_backend_table(void);
int cuda_backend_device_count(void);
const si_backend *backend_cuda(void) { return cuda_backend_table(); }
bool backend_cuda_usable(void) { return cuda_backend_device_count() > 0; }
#else
const si_backend *backend_cuda(void) { return NULL; }
bool backend_cuda_usable(void) { return false; }
#endif

si_status backend_resolve(si_device want, si_device *out) {
    switch (want) {
    case SI_DEVICE_AUTO:
        *out = backend_cuda_usable() ? SI_DEVICE_CUDA : SI_DEVICE_CPU;
        return SI_OK;
    case SI_DEVICE_CPU:
        *out = SI_DEVICE_CPU;
        return SI_OK;
    case SI_DEVICE_CUDA:
        if (!backend_cuda())
            return si_error(SI_ERR_UNSUPPORTED, "device cuda: this SwiftInfer was built without "
                            "CUDA (configure with -DSWIFTINFER_CUDA=ON); use --device cpu");
        if (!backend_cuda_usable())
            return si_error(SI_ERR_UNSUPPORTED, "device cuda: no CUDA GPU is visible (no driver "
                            "or no device); use --device cpu");
        *out = SI_DEVICE_CUDA;
        return SI_OK;
    }
    return si_error(SI_ERR_INVALID_ARG, "unknown device %d", (int)want);
}

const si_backend *backend_for_model(const si_model *m) {
    return m->device == SI_DEVICE_CUDA && backend_cuda() ? backend_cuda() : backend_cpu();
}

bool backend_penalties_on_device(const si_backend *be) {
    const char *e = getenv("SI_DEVICE_PENALTIES");
    return be->forward_sample && !(e && !strcmp(e, "0"));
}

si_status backend_check_kv_dtype(const si_backend *be, int32_t kv_dtype, const char *who) {
    if (kv_dtype != SI_KV_F16 && kv_dtype != SI_KV_FP8_E4M3)
        return si_error(SI_ERR_INVALID_ARG, "%s: kv_cache_dtype %d is not a si_kv_cache_dtype "
                        "(SI_KV_F16 %d, SI_KV_FP8_E4M3 %d)", who, kv_dtype, SI_KV_F16,
                        SI_KV_FP8_E4M3);
    if (kv_dtype == SI_KV_FP8_E4M3 && !be->kv_fp8)
        return si_error(SI_ERR_UNSUPPORTED, "%s: --kv-cache-dtype fp8 (an FP8 E4M3 KV cache) "
                        "needs the CUDA backend (--device cuda); the %s backend keeps its KV cache "
                        "in f16 (--kv-cache-dtype auto)", who, be->name);
    return SI_OK;
}
