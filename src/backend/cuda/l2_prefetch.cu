/* l2_prefetch.cu — pull the start of the next weight matrix into L2 while the small kernels
 * between two decode GEMVs run (cuda_ops.h: cuda_l2_prefetch).
 *
 * At batch 1 a layer is four GEMVs with latency-bound kernels between them (norm, RoPE + KV
 * write, attention, SwiGLU) during which HBM is idle, and each GEMV starts cold: its first
 * wave of loads pays the full DRAM latency with few bytes in flight. This kernel sits in the PDL
 * chain right after a GEMV: it lets the next kernel launch at once, waits for the GEMV to
 * complete (so that completion stays transitive down the chain, pdl.cuh), then issues
 * fire-and-forget L2 prefetches of the next GEMV's first bytes and exits. The bytes stream in
 * while the small kernels run; the GEMV's first loads then hit L2. Reads nothing a kernel writes;
 * the results of every kernel are the same with or without it. */
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/pdl.cuh"

#define L2PF_CHUNK (16 * 1024) /* bytes per bulk prefetch */

__global__ void __launch_bounds__(32) l2_prefetch_kernel(const uint8_t *p, size_t bytes) {
    si_pdl_trigger();
    si_pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i * L2PF_CHUNK < bytes; i += stride) {
        const size_t off = i * L2PF_CHUNK;
        const size_t left = bytes - off;
        const uint32_t len = (uint32_t)(left < L2PF_CHUNK ? left : L2PF_CHUNK) & ~15u;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        if (len) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(len) : "memory");
#else
        for (uint32_t b = 0; b < len; b += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off + b));
#endif
    }
}

static size_t g_cap = (size_t)-1; /* (size_t)-1: not read yet */
static int g_where = -1;

extern "C" size_t cuda_l2_prefetch_cap(void) {
    if (g_cap == (size_t)-1) {
        const char *e = getenv("SI_CUDA_L2_PREFETCH");
        const long mib = e ? strtol(e, NULL, 10) : 0;
        g_cap = mib > 0 ? (size_t)mib << 20 : 0;
    }
    return g_cap;
}

extern "C" int cuda_l2_prefetch_where(void) {
    if (g_where < 0) {
        const char *e = getenv("SI_CUDA_L2_PREFETCH_AT");
        g_where = e ? (int)strtol(e, NULL, 10) : 15;
    }
    return g_where;
}

extern "C" void cuda_l2_prefetch(const void *p, size_t bytes, cudaStream_t stream) {
    static int n_sm = 0;
    if (!n_sm) {
        int dev;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
    }
    const size_t chunks = (bytes + L2PF_CHUNK - 1) / L2PF_CHUNK;
    const int grid = (int)(chunks < (size_t)n_sm ? (chunks ? chunks : 1) : (size_t)n_sm);
    si_launch_pdl(l2_prefetch_kernel, grid, 32, 0, stream, (const uint8_t *)p, bytes);
}
