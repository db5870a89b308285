/* persist_chain.cu — how close to the bandwidth can one batch-1 decode token stream its weights,
 * one kernel a matrix (as the engine does) or one persistent kernel for the whole token? A
 * feasibility measurement for a persistent decode kernel (issue 6: Q4_0 batch-1 at 75 % of
 * 4.21 TB/s needs ~825 t/s; the engine's one-kernel-a-matmul chain reaches ~620).
 *
 * The bytes are those of Llama-2-7B's matrices in one type (default Q4_0: M x K / 32 x 18 bytes):
 * per layer QKV 12288 x 4096, output 4096 x 4096, gate/up 22016 x 4096, down 4096 x 11008; 32
 * layers; then the 32000 x 4096 output matrix. Nothing is computed from them but a checksum, so
 * this is the ceiling of the streaming alone:
 *   kernels     one read kernel a matrix (16-byte ld.global.nc, 4 in flight a thread), launched
 *               back to back in a CUDA graph: the shape of the engine's chain, without its work;
 *   kernels+pdl the same launched with programmatic dependent launch, each kernel issuing its
 *               first loads before it waits for the one before (as the engine's GEMVs do);
 *   persistent  one kernel, one CTA a multiprocessor. A producer warp streams the CTA's slice of
 *               every matrix in turn into a ring of shared-memory stages (cp.async.bulk, one
 *               mbarrier a stage); four consumer warps read each stage. Between two matrices the
 *               consumers of all CTAs meet at a grid barrier, as a real decode step must (the next
 *               matrix's x depends on every CTA's rows); the producer does not wait for it, so
 *               the stream runs on across the barrier as far as the ring reaches;
 *   nobarrier   the same without the grid barrier: what the barriers cost.
 * For the persistent kinds it also prints when the CTAs finished (min / median / max after the
 * first start): whether the multiprocessors stream at the same rate.
 *
 *   persist_chain [bytes-per-1024-elements (default 576: Q4_0; F16 2048, Q8_0 1088)] [reps] */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

constexpr int STAGES = 12, CHUNK = 16384; /* the ring: 192 KB a CTA */
constexpr int CONSUMERS = 128, THREADS = CONSUMERS + 32;
constexpr int MAX_MATS = 256;

struct chain {
    int n;                                /* matrices */
    unsigned long long off[MAX_MATS + 1]; /* byte offsets, 16-aligned; off[n] = total */
};

__device__ __forceinline__ unsigned long long umin(unsigned long long a, unsigned long long b) {
    return a < b ? a : b;
}

__device__ __forceinline__ uint32_t sa(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity) {
    asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra W;\n}" ::"r"(sa(b)),
                 "r"(parity)
                 : "memory");
}

__device__ __forceinline__ unsigned long long gtimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* the CTA's slice [b, e) of matrix m: equal 16-byte-aligned runs */
__device__ __forceinline__ void slice(const chain &c, int m, unsigned long long &b,
                                      unsigned long long &e) {
    const unsigned long long n16 = (c.off[m + 1] - c.off[m]) / 16;
    b = c.off[m] + 16 * (n16 * blockIdx.x / gridDim.x);
    e = c.off[m] + 16 * (n16 * (blockIdx.x + 1) / gridDim.x);
}

template <bool BARRIER>
__global__ void __launch_bounds__(THREADS, 1)
    persistent(const uint8_t *__restrict__ w, const chain c, unsigned *arrived,
               unsigned long long *trace, unsigned *sink) {
    extern __shared__ __align__(128) uint8_t smem[];
    uint64_t *full = (uint64_t *)(smem + STAGES * CHUNK), *empty = full + STAGES;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(full + s)));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(empty + s)),
                         "r"(CONSUMERS));
        }
        asm volatile("fence.mbarrier_init.release.cluster;");
    }
    __syncthreads();
    const unsigned long long t0 = gtimer();
    if (threadIdx.x >= CONSUMERS) { /* the producer warp, one lane */
        if (threadIdx.x != CONSUMERS) return;
        int it = 0;
        for (int m = 0; m < c.n; m++) {
            unsigned long long b, e;
            slice(c, m, b, e);
            for (unsigned long long p = b; p < e; p += CHUNK, it++) {
                const int s = it % STAGES;
                if (it >= STAGES) mbar_wait(empty + s, ((it / STAGES) - 1) & 1);
                const uint32_t bytes = (uint32_t)umin(CHUNK, e - p);
                asm volatile(
                    "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(full + s)),
                    "r"(bytes)
                    : "memory");
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                             "[%0], [%1], %2, [%3];" ::"r"(sa(smem + s * CHUNK)),
                             "l"(w + p), "r"(bytes), "r"(sa(full + s))
                             : "memory");
            }
        }
        return;
    }
    unsigned acc = 0;
    int it = 0;
    for (int m = 0; m < c.n; m++) {
        unsigned long long b, e;
        slice(c, m, b, e);
        for (unsigned long long p = b; p < e; p += CHUNK, it++) {
            const int s = it % STAGES;
            mbar_wait(full + s, (it / STAGES) & 1);
            const int n16 = (int)(umin(CHUNK, e - p) / 16);
            const uint4 *q = (const uint4 *)(smem + s * CHUNK);
            for (int i = threadIdx.x; i < n16; i += CONSUMERS) {
                const uint4 v = q[i];
                acc ^= v.x + v.y + v.z + v.w;
            }
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(empty + s))
                         : "memory");
        }
        if (BARRIER) { /* consumers of every CTA; the counter only grows within a launch */
            asm volatile("bar.sync 1, %0;" ::"r"(CONSUMERS));
            if (threadIdx.x == 0) {
                const unsigned target = (unsigned)(m + 1) * gridDim.x;
                asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(arrived) : "memory");
                unsigned v;
                do {
                    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                                 : "=r"(v)
                                 : "l"(arrived)
                                 : "memory");
                } while (v < target);
            }
            asm volatile("bar.sync 1, %0;" ::"r"(CONSUMERS));
        }
    }
    if (acc == 0x9e3779b9u) sink[0] = acc; /* keeps the reads */
    if (threadIdx.x == 0 && trace) {
        unsigned smid;
        asm("mov.u32 %0, %%smid;" : "=r"(smid));
        trace[3 * blockIdx.x] = t0;
        trace[3 * blockIdx.x + 1] = gtimer();
        trace[3 * blockIdx.x + 2] = smid;
    }
}

/* PDL: the first loads are issued before the wait for the kernel before, as the engine's GEMVs
 * do (their weights are not written by it), and the next kernel may launch at once */
template <bool PDL>
__global__ void read_kernel(const uint4 *__restrict__ p, size_t n16, unsigned *sink) {
    unsigned acc = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    bool first = true;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int k = 0; k < 4; k++)
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[k].x), "=r"(v[k].y), "=r"(v[k].z), "=r"(v[k].w)
                         : "l"(p + i + k * stride));
        if (PDL && first) {
            asm volatile("griddepcontrol.launch_dependents;");
            asm volatile("griddepcontrol.wait;" ::: "memory");
            first = false;
        }
#pragma unroll
        for (int k = 0; k < 4; k++)
            acc ^= v[k].x + v[k].y + v[k].z + v[k].w;
    }
    if (PDL && first) {
        asm volatile("griddepcontrol.launch_dependents;");
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    for (; i < n16; i += stride) {
        const uint4 v = p[i];
        acc ^= v.x + v.y + v.z + v.w;
    }
    if (acc == 0x9e3779b9u) sink[0] = acc;
}

int main(int argc, char **argv) {
    const int per1024 = argc > 1 ? atoi(argv[1]) : 576;
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (per1024 < 16 || per1024 % 16 || reps < 1) {
        fprintf(stderr,
                "usage: persist_chain [bytes-per-1024-elements, a multiple of 16] [reps]\n");
        return 2;
    }
    const long long shapes[4][2] = {{12288, 4096}, {4096, 4096}, {22016, 4096}, {4096, 11008}};
    chain c{};
    unsigned long long off = 0;
    for (int l = 0; l < 32; l++)
        for (auto &s : shapes) {
            c.off[c.n++] = off;
            off += (unsigned long long)(s[0] * s[1] / 1024 * per1024 + 15) / 16 * 16;
        }
    c.off[c.n++] = off;
    off += (unsigned long long)(32000LL * 4096 / 1024 * per1024 + 15) / 16 * 16;
    c.off[c.n] = off;
    const double gb = off * 1e-9;
    int dev = 0, n_sm = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
    printf(
        "persist_chain: %d matrices, %.3f GB a token (%d bytes a 1024 elements), %d SMs, %d reps\n",
        c.n, gb, per1024, n_sm, reps);
    uint8_t *w;
    unsigned *sink, *arrived;
    unsigned long long *trace;
    CK(cudaMalloc(&w, off));
    CK(cudaMemset(w, 0x5a, off));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMalloc(&arrived, 4));
    CK(cudaMalloc(&trace, 3 * 8 * (size_t)n_sm));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto report = [&](const char *what, float ms_total) {
        const double us = ms_total * 1e3 / reps;
        printf("%-11s %8.1f us a token  %6.0f GB/s  %5.1f %% of 4.21 TB/s  = %6.1f tokens/s\n",
               what, us, gb / (us * 1e-6), 100.0 * gb / (us * 1e-6) / 4210.0, 1e6 / us);
    };

    /* kernels: one read kernel a matrix, in a graph; then the same launched with PDL */
    float ms;
    for (int pdl = 0; pdl < 2; pdl++) {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int m = 0; m < c.n; m++) {
            const uint4 *p = (const uint4 *)(w + c.off[m]);
            const size_t n16 = (c.off[m + 1] - c.off[m]) / 16;
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = n_sm * 8;
            cfg.blockDim = 256;
            cfg.stream = st;
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            at[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = at;
            cfg.numAttrs = pdl;
            CK(cudaLaunchKernelEx(&cfg, pdl ? read_kernel<true> : read_kernel<false>, p, n16,
                                  sink));
        }
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e0, st));
        for (int r = 0; r < reps; r++)
            CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        report(pdl ? "kernels+pdl" : "kernels", ms);
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
    }

    const size_t smem = STAGES * CHUNK + 2 * STAGES * 8;
    for (int barrier = 1; barrier >= 0; barrier--) {
        auto k = barrier ? persistent<true> : persistent<false>;
        CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        float tot = 0;
        std::vector<double> ends;
        for (int r = 0; r <= reps; r++) {
            CK(cudaMemsetAsync(arrived, 0, 4, st));
            CK(cudaEventRecord(e0, st));
            k<<<n_sm, THREADS, smem, st>>>(w, c, arrived, r == reps ? trace : nullptr, sink);
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            CK(cudaGetLastError());
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (r > 0) tot += ms; /* the first is a warm-up */
        }
        report(barrier ? "persistent" : "nobarrier", tot);
        std::vector<unsigned long long> h(3 * (size_t)n_sm);
        CK(cudaMemcpy(h.data(), trace, h.size() * 8, cudaMemcpyDeviceToHost));
        unsigned long long t0 = ~0ull;
        for (int i = 0; i < n_sm; i++)
            t0 = std::min(t0, h[3 * i]);
        for (int i = 0; i < n_sm; i++)
            ends.push_back((h[3 * i + 1] - t0) * 1e-3);
        std::vector<double> s = ends;
        std::sort(s.begin(), s.end());
        printf("  last rep: CTAs end min %.1f  p50 %.1f  max %.1f us after the first start; "
               "slowest SMs:",
               s[0], s[n_sm / 2], s.back());
        for (int k2 = 0; k2 < 5; k2++) {
            const int i = (int)(std::max_element(ends.begin(), ends.end()) - ends.begin());
            printf(" %llu", h[3 * i + 2]);
            ends[i] = -1;
        }
        printf("\n");
    }
    return 0;
}
