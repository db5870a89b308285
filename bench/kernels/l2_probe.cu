/* l2_probe.cu — does asking the L2 for a weight ahead make reading it faster, and can the asking
 * overlap a short kernel? (issue 6: the decode step's L2 prefetch, src/backend/cuda/l2_ahead.cu;
 * findings in bench/RESULTS.md.)
 *
 * For each size S of a buffer W (default 4, 8, 16, 32 MiB), after an L2 flush, a read of W
 * (16-byte ld.global.nc.L1::no_allocate, as the decode GEMVs load, all multiprocessors) is
 * timed alone (median of reps) after W was:
 *   cold    not touched since the flush;
 *   read    read once by the same kernel (what a hit in the L2 gives);
 *   bulk    asked for with cp.async.bulk.prefetch.L2 (l2_ahead.cu's way: 16 KiB a thread, at
 *           most 64 CTAs of 32 threads), that kernel's own time printed too;
 *   line    asked for with prefetch.global.L2 one 128-byte line a thread;
 * Then the overlap: a 1-CTA kernel that spins for T us stands in for attention, then the read,
 * on one stream; a second stream asks for W (bulk) from the flush on. The time from the spin's
 * start to the read's end, with and without the second stream.
 *
 *   l2_probe [reps (default 20)] [MiB ...] */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "timing.cuh" /* tests/cuda: g_st, CUDA_CHECK, l2_flush */

__global__ void read_kernel(const uint4 *p, size_t n, unsigned *sink) {
    unsigned a = 0;
    const size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x, nt = (size_t)gridDim.x * blockDim.x;
    for (size_t i = t; i < n; i += 4 * nt) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            v[u] = i + u * nt < n ? si_ldg_stream16(p + i + u * nt) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 4; u++) a ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (a == 0x12345678u) *sink = a;
}

__global__ void bulk_kernel(const char *p, size_t n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x, nt = (size_t)gridDim.x * blockDim.x;
    for (size_t off = t * 16384; off < n; off += nt * 16384) {
        const unsigned sz = n - off < 16384 ? (unsigned)(n - off) : 16384u;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(sz) : "memory");
    }
#endif
}

__global__ void line_kernel(const char *p, size_t n) {
    const size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x, nt = (size_t)gridDim.x * blockDim.x;
    for (size_t off = t * 128; off < n; off += nt * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
}

__global__ void spin_kernel(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

static unsigned *g_sink_u;
static void read_w(const void *w, size_t bytes, cudaStream_t s) {
    read_kernel<<<132 * 4, 256, 0, s>>>((const uint4 *)w, bytes / 16, g_sink_u);
    CUDA_CHECK_LAUNCH();
}
static void bulk_w(const void *w, size_t bytes, cudaStream_t s) {
    const size_t ctas = std::min<size_t>(64, (bytes / 16384 + 31) / 32);
    bulk_kernel<<<(int)std::max<size_t>(1, ctas), 32, 0, s>>>((const char *)w, bytes);
    CUDA_CHECK_LAUNCH();
}
static void line_w(const void *w, size_t bytes, cudaStream_t s) {
    line_kernel<<<132 * 4, 256, 0, s>>>((const char *)w, bytes);
    CUDA_CHECK_LAUNCH();
}

static float elapsed_us(cudaEvent_t a, cudaEvent_t b) {
    float ms;
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1000.0f;
}
static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 20;
    std::vector<double> sizes;
    for (int i = 2; i < argc; i++) sizes.push_back(atof(argv[i]));
    if (sizes.empty()) sizes = {4, 8, 16, 32};
    CUDA_CHECK(cudaStreamCreateWithFlags(&g_st, cudaStreamNonBlocking));
    cudaStream_t s2;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&g_flush, k_flush_bytes));
    CUDA_CHECK(cudaMemset(g_flush, 0, k_flush_bytes));
    CUDA_CHECK(cudaMalloc(&g_sink, 64));
    CUDA_CHECK(cudaMalloc(&g_sink_u, 64));
    cudaEvent_t e0, e1, e2, fork;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    CUDA_CHECK(cudaEventCreate(&e2));
    CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    for (double mib : sizes) {
        const size_t bytes = (size_t)(mib * 1048576) & ~(size_t)15;
        void *w;
        CUDA_CHECK(cudaMalloc(&w, bytes));
        CUDA_CHECK(cudaMemset(w, 1, bytes));
        const char *names[] = {"cold", "read", "bulk", "line"};
        printf("W %.1f MiB (HBM at 4.21 TB/s: %.2f us):", mib, bytes / 4.21e6);
        for (int mode = 0; mode < 4; mode++) {
            std::vector<float> tr, tw;
            for (int r = 0; r <= reps; r++) {
                l2_flush();
                CUDA_CHECK(cudaEventRecord(e0, g_st));
                if (mode == 1) read_w(w, bytes, g_st);
                if (mode == 2) bulk_w(w, bytes, g_st);
                if (mode == 3) line_w(w, bytes, g_st);
                CUDA_CHECK(cudaEventRecord(e1, g_st));
                read_w(w, bytes, g_st);
                CUDA_CHECK(cudaEventRecord(e2, g_st));
                const float warm = elapsed_us(e0, e1), rd = elapsed_us(e1, e2);
                if (r) tr.push_back(rd), tw.push_back(warm);
            }
            printf("  %s %.2f us", names[mode], median(tr));
            if (mode) printf(" (its warming %.2f)", median(tw));
        }
        printf("\n");
        for (double spin_us : {2.0, 4.0, 8.0}) {
            printf("  spin %.0f us then read:", spin_us);
            for (int with = 0; with < 3; with++) {
                std::vector<float> t;
                for (int r = 0; r <= reps; r++) {
                    l2_flush();
                    CUDA_CHECK(cudaEventRecord(fork, g_st));
                    CUDA_CHECK(cudaStreamWaitEvent(s2, fork, 0));
                    if (with == 1) bulk_w(w, bytes, s2);
                    if (with == 2) line_w(w, bytes, s2);
                    CUDA_CHECK(cudaEventRecord(e0, g_st));
                    spin_kernel<<<1, 32, 0, g_st>>>((unsigned long long)(spin_us * 1000));
                    read_w(w, bytes, g_st);
                    CUDA_CHECK(cudaEventRecord(e1, g_st));
                    CUDA_CHECK(cudaEventRecord(fork, s2));
                    CUDA_CHECK(cudaStreamWaitEvent(g_st, fork, 0));
                    if (r) t.push_back(elapsed_us(e0, e1));
                }
                printf("  %s %.2f us", with == 0 ? "alone" : with == 1 ? "+bulk" : "+line",
                       median(t));
            }
            printf("\n");
        }
        CUDA_CHECK(cudaFree(w));
    }
    return 0;
}
