/* persist_chain.cu — how close to the bandwidth can one batch-1 decode token stream its weights:
 * one kernel a matrix (as the engine does), one persistent kernel for the whole token, and the
 * engine's own GEMVs (issue 6: Q4_0 batch-1 at 75 % of 4.21 TB/s needs ~825 t/s). Findings:
 * bench/RESULTS.md, 2026-12-01 05:54 and (dynamic, pgemv) 11:10.
 *
 * The bytes are those of Llama-2-7B's matrices in one type (Q4_0: M x K / 32 x 18 bytes):
 * per layer QKV 12288 x 4096, output 4096 x 4096, gate/up 22016 x 4096, down 4096 x 11008; 32
 * layers; then the 32000 x 4096 output matrix. The read modes compute nothing from them but a
 * checksum, so they are the ceiling of the streaming alone:
 *   kernels     one read kernel a matrix (16-byte ld.global.nc, 4 in flight a thread), launched
 *               back to back in a CUDA graph: the shape of the engine's chain, without its work;
 *   kernels+pdl the same launched with programmatic dependent launch, each kernel issuing its
 *               first loads before it waits for the one before (as the engine's GEMVs do);
 *   probe ...   kernels+pdl shaped more like a GEMV (probe_kernel says how);
 *   gemv        the engine's GEMVs (cuda_gemv_pre for the quantised types, x quantised ahead as
 *               the engine's norms do; cuda_gemv for F16) on the same bytes, in a graph: what
 *               the engine's chain of matmuls reaches without its other kernels; gemv+norm
 *               (batch 1, quantised types): QKV's and gate/up's GEMV with the norm inside
 *               (cuda_gemv_norm), as the engine runs them; gemv+norm noadd the same with no
 *               residual to add (each CTA's norm reads one row of x, not two); then each layer
 *               shape alone (its 32 matrices in a chain), read+pdl against gemv; built with
 *               -DGEMV_Q8X_TRACE (gemv.cu too: gemv_trace.cuh), the two norm chains are also
 *               traced per CTA into trace-TYPE.csv and trace-TYPE-noadd.csv (bench/gemv_trace.py);
 *   persistent  one kernel, one CTA a multiprocessor. A producer warp streams the CTA's slice of
 *               every matrix in turn into a ring of shared-memory stages (cp.async.bulk, one
 *               mbarrier a stage); four consumer warps read each stage. Between two matrices the
 *               consumers of all CTAs meet at a grid barrier, as a real decode step must (the next
 *               matrix's x depends on every CTA's rows); the producer does not wait for it, so
 *               the stream runs on across the barrier as far as the ring reaches;
 *   nobarrier   the same without the grid barrier: what the barriers cost. For both persistent
 *               kinds one more traced run prints when the CTAs finished (min / median / max
 *               after the first start): whether the multiprocessors stream at the same rate;
 *   dynamic     persistent, but a matrix's chunks are dealt at run time (one atomic counter a
 *               matrix, the producer takes the next chunk when it has a free stage), so a fast
 *               multiprocessor takes more chunks than a slow one; the barrier as above, and the
 *               producer again runs on across it into the next matrix's chunks;
 *   dyn-nobarrier  the same without the barriers; "d4": with four counter atomics in flight
 *               (chunk_dealer), not one;
 *   pgemv       (q4_0, q8_0) the GEMVs themselves in one such dynamic persistent kernel
 *               (persist_gemv.cuh), checked against the engine's GEMVs on random weights, and
 *               those GEMVs ("gemv-rand") timed on the same bytes.
 * Graphs are timed back to back (the mean of 4 x reps launches after reps), the persistent kernel
 * as the median of reps launches (tests/cuda/timing.cuh).
 *
 *   persist_chain q4_0|q4_k|q5_k|q6_k|q8_0|f16|q4_1|q5_0|q5_1|q3_k|iq4_nl|iq4_xs|q2_k [reps
 * (default 20)] [gemv batch rows (default 1)] */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "timing.cuh" /* tests/cuda: g_st, CUDA_CHECK, the median and back-to-back timings */

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

/* The chunks of one matrix as a producer takes them from the matrix's counter: D atomics in
 * flight, so that taking a chunk does not wait for a round trip to L2 (with one, a producer
 * that must wait for each index takes at most one chunk a round trip). Indices come in
 * increasing order; once one is past the end, so are all later ones. */
template <int D> struct chunk_dealer {
    unsigned q[D];
    __device__ __forceinline__ void start(unsigned *ctr) {
#pragma unroll
        for (int i = 0; i < D; i++)
            q[i] = atomicAdd(ctr, 1u);
    }
    __device__ __forceinline__ unsigned next(unsigned *ctr) {
        const unsigned k = q[0];
#pragma unroll
        for (int i = 0; i + 1 < D; i++)
            q[i] = q[i + 1];
        q[D - 1] = atomicAdd(ctr, 1u);
        return k;
    }
};

/* f(m, p, bytes, it) for each chunk of the CTA's slice of every matrix in turn (it counts the
 * chunks: the ring stage is it % STAGES), then done(m) after matrix m's last chunk: the one walk
 * that the producer and the consumers must agree on. DYNAMIC (the producer's walk only): the
 * chunks are not a fixed slice but taken from matrix m's counter next[m] one at a time, and
 * done(m, it) takes a stage too (the consumers learn from it that m has ended). */
template <bool DYNAMIC, int DEAL, class F, class G>
__device__ __forceinline__ void each_chunk(const chain &c, unsigned *next, F f, G done) {
    int it = 0;
    for (int m = 0; m < c.n; m++) {
        if (DYNAMIC) {
            const unsigned long long size = c.off[m + 1] - c.off[m];
            const unsigned nchunks = (unsigned)((size + CHUNK - 1) / CHUNK);
            chunk_dealer<DEAL> deal;
            deal.start(next + m);
            for (unsigned k; (k = deal.next(next + m)) < nchunks; it++) {
                const unsigned long long p = c.off[m] + (unsigned long long)k * CHUNK;
                f(m, p, (uint32_t)umin(CHUNK, c.off[m + 1] - p), it);
            }
            done(m, it++);
            continue;
        }
        unsigned long long b, e;
        slice(c, m, b, e);
        for (unsigned long long p = b; p < e; p += CHUNK, it++)
            f(m, p, (uint32_t)umin(CHUNK, e - p), it);
        done(m, it);
    }
}

/* the grid barrier after matrix m: the NCONS consumers of every CTA; the counter only grows
 * within a launch. How its memory ordering is done (ORD):
 *   BAR_ACQ_POLL  the arrival a release, every poll an acquire;
 *   BAR_FENCE     the arrival a release, the polls relaxed, one acquire fence after them (the
 *                 same ordering: a relaxed read that sees the release, then fence.acq_rel);
 *   BAR_RELAXED   none (a measurement only: the CTAs' memory is not ordered);
 *   BAR_REL_ONLY, BAR_ACQ_ONLY  only the release arrival, only the acquire polls (measurements
 *                 only: which side costs). */
enum { BAR_ACQ_POLL, BAR_FENCE, BAR_RELAXED, BAR_REL_ONLY, BAR_ACQ_ONLY };
template <int NCONS, int ORD = BAR_ACQ_POLL>
__device__ __forceinline__ void grid_barrier(unsigned *arrived, int m) {
    asm volatile("bar.sync 1, %0;" ::"r"(NCONS));
    if (threadIdx.x == 0) {
        const unsigned target = (unsigned)(m + 1) * gridDim.x;
        if (ORD == BAR_RELAXED || ORD == BAR_ACQ_ONLY)
            asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(arrived) : "memory");
        else
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(arrived) : "memory");
        unsigned v;
        do {
            if (ORD == BAR_ACQ_POLL || ORD == BAR_ACQ_ONLY)
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                             : "=r"(v)
                             : "l"(arrived)
                             : "memory");
            else
                asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];"
                             : "=r"(v)
                             : "l"(arrived)
                             : "memory");
        } while (v < target);
        if (ORD == BAR_FENCE) asm volatile("fence.acq_rel.gpu;" ::: "memory");
    }
    asm volatile("bar.sync 1, %0;" ::"r"(NCONS));
}

#include "persist_gemv.cuh" /* the "pgemv" line */

/* ctr: the barrier's counter, then (DYNAMIC) one chunk counter a matrix; all zero at launch */
template <bool BARRIER, bool DYNAMIC, int DEAL = 1>
__global__ void __launch_bounds__(THREADS, 1)
    persistent(const uint8_t *__restrict__ w, const chain c, unsigned *ctr,
               unsigned long long *trace, unsigned *sink) {
    extern __shared__ __align__(128) uint8_t smem[];
    uint64_t *full = (uint64_t *)(smem + STAGES * CHUNK), *empty = full + STAGES;
    uint32_t *stage_bytes = (uint32_t *)(empty + STAGES); /* DYNAMIC: 0 = matrix ended */
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
        auto take_stage = [&](int it) {
            const int s = it % STAGES;
            if (it >= STAGES) mbar_wait(empty + s, ((it / STAGES) - 1) & 1);
            return s;
        };
        each_chunk<DYNAMIC, DEAL>(
            c, ctr + 1,
            [&](int, unsigned long long p, uint32_t bytes, int it) {
                const int s = take_stage(it);
                stage_bytes[s] = bytes;
                asm volatile(
                    "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(full + s)),
                    "r"(bytes)
                    : "memory");
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                             "[%0], [%1], %2, [%3];" ::"r"(sa(smem + s * CHUNK)),
                             "l"(w + p), "r"(bytes), "r"(sa(full + s))
                             : "memory");
            },
            [&](int, int it) {
                if (!DYNAMIC) return;
                const int s = take_stage(it); /* the end marker: a stage without bytes */
                stage_bytes[s] = 0;
                asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(full + s))
                             : "memory");
            });
        return;
    }
    unsigned acc = 0;
    auto consume =
        [&](int it) { /* stage it's bytes; returns how many */
                      const int s = it % STAGES;
                      mbar_wait(full + s, (it / STAGES) & 1);
                      const uint32_t bytes = stage_bytes[s];
                      const uint4 *q = (const uint4 *)(smem + s * CHUNK);
                      for (int i = threadIdx.x; i < (int)(bytes / 16); i += CONSUMERS) {
                          const uint4 v = q[i];
                          acc ^= v.x + v.y + v.z + v.w;
                      }
                      /* each consumer read stage_bytes[s] before its arrival, which the producer's
                       * next write to it waits for */
                      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(empty + s))
                                   : "memory");
                      return bytes;
        };
    if (DYNAMIC) {
        for (int m = 0, it = 0; m < c.n; it++)
            if (consume(it) == 0) {
                if (BARRIER) grid_barrier<CONSUMERS>(ctr, m);
                m++;
            }
    } else {
        each_chunk<false, 1>(
            c, ctr + 1, [&](int, unsigned long long, uint32_t, int it) { consume(it); },
            [&](int m, int) {
                if (BARRIER) grid_barrier<CONSUMERS>(ctr, m);
            });
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

/* Probes of what a GEMV adds to a PDL read (the "probe" lines): ONESHOT, a grid of CTAs that
 * each load 4 x 16 bytes a thread before the PDL wait and nothing after (as gemv_h16_kernel at
 * batch 1, K = 4096: 1,024 pieces a CTA, many waves), else grid-stride over n_sm x 8 CTAs as
 * read_kernel; XDEP 1, the loaded words are multiplied by x (16 bytes of a 16 KB x a piece,
 * which the kernel before may have written, read after the wait), summed over the CTA through
 * shared memory and written to y[blockIdx], as a GEMV's rows are; XDEP 2, each piece as 8
 * halves times 32 bytes of f32 x, as gemv_h16_kernel reads them. */
template <bool ONESHOT, int XDEP>
__global__ void __launch_bounds__(256)
    probe_kernel(const uint4 *__restrict__ p, size_t n16, const float4 *x, float *y) {
    __shared__ float red[8];
    const size_t stride = ONESHOT ? 256 : (size_t)gridDim.x * 256;
    size_t i = ONESHOT ? blockIdx.x * 1024ull + threadIdx.x : blockIdx.x * 256ull + threadIdx.x;
    float acc = 0.0f;
    bool first = true;
    for (; i < n16; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const size_t j = i + k * stride < n16 ? i + k * stride : i;
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[k].x), "=r"(v[k].y), "=r"(v[k].z), "=r"(v[k].w)
                         : "l"(p + j));
        }
        if (first) {
            asm volatile("griddepcontrol.launch_dependents;");
            asm volatile("griddepcontrol.wait;" ::: "memory");
            first = false;
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (XDEP == 2) { /* as gemv_h16_kernel: 8 halves a piece, 8 f32 x (32 bytes) */
                const float4 *xp = x + 2 * ((i + k * stride) % 512);
                const float4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
                const float2 a = __half22float2(*(const __half2 *)&v[k].x);
                const float2 b = __half22float2(*(const __half2 *)&v[k].y);
                const float2 c2 = __half22float2(*(const __half2 *)&v[k].z);
                const float2 d = __half22float2(*(const __half2 *)&v[k].w);
                acc = fmaf(a.x, x0.x, acc);
                acc = fmaf(a.y, x0.y, acc);
                acc = fmaf(b.x, x0.z, acc);
                acc = fmaf(b.y, x0.w, acc);
                acc = fmaf(c2.x, x1.x, acc);
                acc = fmaf(c2.y, x1.y, acc);
                acc = fmaf(d.x, x1.z, acc);
                acc = fmaf(d.y, x1.w, acc);
                continue;
            }
            const float4 xv = XDEP ? x[(i + k * stride) % 1024] : make_float4(1.f, 1.f, 1.f, 1.f);
            acc += __uint_as_float(v[k].x & 0x3fffffffu) * xv.x +
                   __uint_as_float(v[k].y & 0x3fffffffu) * xv.y +
                   __uint_as_float(v[k].z & 0x3fffffffu) * xv.z +
                   __uint_as_float(v[k].w & 0x3fffffffu) * xv.w;
        }
        if (ONESHOT) break;
    }
    if (first) {
        asm volatile("griddepcontrol.launch_dependents;");
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    if (XDEP) {
        for (int o = 16; o; o >>= 1)
            acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = acc;
        __syncthreads();
        if (threadIdx.x == 0) {
            float t = 0.0f;
            for (int k = 0; k < 8; k++)
                t += red[k];
            y[blockIdx.x % 4096] = t;
        }
    } else if (acc == 1234.5f) {
        y[0] = acc;
    }
}

/* The pgemv lines (false if a check failed): random T weights and x, the engine's GEMV chain
 * (cuda_gemv_pre, one kernel a matrix in a graph, as "gemv") and persistent_gemv's variants on
 * them, y compared, all timed. */
template <int M> using mode = std::integral_constant<int, M>;

template <class T, class R>
static bool pgemv_line(T, uint8_t *w, const chain &c, const int (*mk)[2], unsigned *ctr, int n_sm,
                       int reps, R report) {
    cudaStream_t st = g_st;
    const si_type type = std::is_same<T, tqx_q4_0>::value ? SI_TYPE_Q4_0 : SI_TYPE_Q8_0;
    const unsigned long long x11k = 16 * ((CUDA_Q8X_ROW_BYTES(4096) + 15) / 16);
    std::vector<pg_mat> mats(c.n);
    unsigned long long ys = 0;
    for (int m = 0; m < c.n; m++) {
        mats[m] = {mk[m][0], mk[m][1], c.off[m], mk[m][1] == 4096 ? 0ull : x11k, ys};
        ys += mk[m][0];
        if ((mk[m][1] != 4096 && mk[m][1] != PG_MAX_K) || pg_row_bytes<T>(mk[m][1]) % 16) {
            fprintf(stderr, "persist_chain: pgemv takes K = 4096 or %d only\n", PG_MAX_K);
            exit(1);
        }
        pg_fill_w<T><<<1024, 256, 0, st>>>(w + c.off[m], (size_t)mk[m][0] * mk[m][1] / 32, 77u + m);
        CUDA_CHECK_LAUNCH();
    }
    uint8_t *xg;
    pg_mat *d_mats;
    float *y, *y_ref;
    CUDA_CHECK(cudaMalloc(&xg, x11k + CUDA_Q8X_ROW_BYTES(PG_MAX_K)));
    CUDA_CHECK(cudaMalloc(&d_mats, sizeof(pg_mat) * c.n));
    CUDA_CHECK(cudaMalloc(&y, 4 * ys));
    CUDA_CHECK(cudaMalloc(&y_ref, 4 * ys));
    unsigned long long *ytag; /* the tagged variant's y words, epoch 0 (none) at first */
    CUDA_CHECK(cudaMalloc(&ytag, 8 * ys));
    CUDA_CHECK(cudaMemset(ytag, 0, 8 * ys));
    std::shared_ptr<unsigned> epoch = std::make_shared<unsigned>(1u);
    CUDA_CHECK(cudaMemcpy(d_mats, mats.data(), sizeof(pg_mat) * c.n, cudaMemcpyHostToDevice));
    pg_fill_x<<<4, 128, 0, st>>>(xg, 4096, 5u);
    pg_fill_x<<<4, 128, 0, st>>>(xg + x11k, PG_MAX_K, 6u);
    CUDA_CHECK_LAUNCH();

    auto gemv_ref = [&](int m) {
        if (cuda_gemv_pre(type, w + c.off[m], mk[m][0], mk[m][1], xg + mats[m].x_off, 1,
                          y_ref + mats[m].y_off, st) != 0) {
            fprintf(stderr, "persist_chain: the GEMV refused %dx%d\n", mk[m][0], mk[m][1]);
            exit(1);
        }
    };
    std::vector<int> all;
    for (int m = 0; m < c.n; m++)
        all.push_back(m);
    /* the persistent kernel with CW consumer warps taking R rows at a time */
    auto launcher = [&](auto kernel, int cw, int stages = PG_STAGES_DEF, int chunk = PG_CHUNK_DEF) {
        if ((size_t)chunk < pg_row_bytes<T>(PG_MAX_K)) { /* a stage holds one row at least */
            fprintf(stderr, "persist_chain: pgemv chunks of %d bytes < a row\n", chunk);
            exit(1);
        }
        const size_t smem = pg_smem_bytes<T>(stages, chunk);
        CUDA_CHECK(
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        return [=](unsigned long long *bar_trace) {
            CUDA_CHECK(cudaMemsetAsync(ctr, 0, 4 * (c.n + 1), st));
            kernel<<<n_sm, 32 * cw + 32, smem, st>>>(w, d_mats, c.n, xg, y, ctr, bar_trace, ytag,
                                                     *epoch);
            CUDA_CHECK_LAUNCH();
            *epoch += 256; /* > the matrices */
        };
    };
    /* the two-group kernel (16 warps x 2 rows, x in registers, 10 x 18 KB) with barrier mode M */
    auto g2 = [&](auto m) {
        return launcher(persistent_gemv<T, 16, 2, true, decltype(m)::value, 1, 10, PG_CHUNK_DEF, 8>,
                        16);
    };
    struct variant {
        const char *name;
        std::function<void(unsigned long long *)> launch; /* bar_trace or NULL */
    };
    const variant variants[] = {
        {"pgemv 16x2", launcher(persistent_gemv<T, 16, 2, false>, 16)},
        {"pgemv 16x2 xc", launcher(persistent_gemv<T, 16, 2, true>, 16)},
        {"pgemv 8x2 xc", launcher(persistent_gemv<T, 8, 2, true>, 8)},
        {"pgemv 16x2 xc d4", launcher(persistent_gemv<T, 16, 2, true, PG_FULL, 4>, 16)},
        {"pgemv 16x2 xc nobarrier", launcher(persistent_gemv<T, 16, 2, true, PG_NOBARRIER>, 16)},
        {"pgemv 16x2 xc noload", launcher(persistent_gemv<T, 16, 2, true, PG_NOLOAD>, 16)},
        {"pgemv 16x2 xc ring 5x18K",
         launcher(persistent_gemv<T, 16, 2, true, PG_FULL, 1, 5>, 16, 5)},
        {"pgemv 16x2 xc ring 5x36K",
         launcher(persistent_gemv<T, 16, 2, true, PG_FULL, 1, 5, 36864>, 16, 5, 36864)},
        {"pgemv 16x2 xc ring 8x18K",
         launcher(persistent_gemv<T, 16, 2, true, PG_FULL, 1, 8>, 16, 8)},
        {"pgemv 16x2 xc g2", g2(mode<PG_FULL>{})},
        {"pgemv 16x2 xc g2 relaxed", g2(mode<PG_RELAXED>{})},
        {"pgemv 16x2 xc g2 fence", g2(mode<PG_FENCE>{})},
        {"pgemv 16x2 xc g2 release only", g2(mode<PG_REL_ONLY>{})},
        {"pgemv 16x2 xc g2 acquire only", g2(mode<PG_ACQ_ONLY>{})},
        {"pgemv 16x2 xc g2 tagged", g2(mode<PG_TAGGED>{})},
        {"pgemv 16x2 xc g2 tagged relaxed", g2(mode<PG_TAGGED_RELAXED>{})},
        {"pgemv 16x2 xc fence", launcher(persistent_gemv<T, 16, 2, true, PG_FENCE>, 16)},
        {"pgemv 16x2 xc g4 ring 8x18K fence",
         launcher(persistent_gemv<T, 16, 2, true, PG_FENCE, 1, 8, PG_CHUNK_DEF, 4>, 16, 8)},
        {"pgemv 16x2 xc g4 ring 8x18K",
         launcher(persistent_gemv<T, 16, 2, true, PG_FULL, 1, 8, PG_CHUNK_DEF, 4>, 16, 8)},
        {"pgemv 20x2 xc g5",
         launcher(persistent_gemv<T, 20, 2, true, PG_FULL, 1, 10, PG_CHUNK_DEF, 4>, 20)},
        {"pgemv 16x2 xc g4 ring 8x18K nobarrier",
         launcher(persistent_gemv<T, 16, 2, true, PG_NOBARRIER, 1, 8, PG_CHUNK_DEF, 4>, 16, 8)},
        {"pgemv 16x2 xc g4 ring 8x18K noload",
         launcher(persistent_gemv<T, 16, 2, true, PG_NOLOAD, 1, 8, PG_CHUNK_DEF, 4>, 16, 8)}};
    for (int m : all)
        gemv_ref(m);
    bool ok = true;
    for (const variant &v : variants) {
        CUDA_CHECK(cudaMemsetAsync(y, 0xff, 4 * ys, st)); /* NaN until written */
        v.launch(nullptr);
        CUDA_CHECK(cudaStreamSynchronize(st));
        std::vector<float> a(ys), b(ys);
        CUDA_CHECK(cudaMemcpy(a.data(), y, 4 * ys, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(b.data(), y_ref, 4 * ys, cudaMemcpyDeviceToHost));
        double worst = 0.0, big = 0.0;
        size_t bad = 0;
        for (size_t i = 0; i < ys; i++) {
            big = std::max(big, (double)fabsf(b[i]));
            const double d = fabs((double)a[i] - (double)b[i]);
            if (!(d <= worst)) worst = d; /* NaN (a row never written) sticks */
        }
        for (size_t i = 0; i < ys; i++)
            if (!(fabs((double)a[i] - (double)b[i]) <= 1e-4 * big)) bad++;
        if (strstr(v.name, "noload")) /* computed on stale stages: only its time counts */
            printf("%s: timing only\n", v.name);
        else
            printf("%s check: %llu rows of %d matrices, max |y - y_gemv| %.3g of max |y_gemv| "
                   "%.3g, %zu beyond 1e-4 of it: %s\n",
                   v.name, ys, c.n, worst, big, bad, bad ? "FAIL" : "PASS");
        if (bad && !strstr(v.name, "noload")) ok = false;
        report(v.name, time_median_us([&] { v.launch(nullptr); }, reps));
    }
    for (const variant &v : variants) { /* where the barriers' time goes, in a traced run */
        if (strncmp(v.name, "pgemv 16x2 xc g2", 16)) continue;
        const size_t nt = 2 * (size_t)c.n * n_sm;
        unsigned long long *d_tr;
        CUDA_CHECK(cudaMalloc(&d_tr, 8 * nt));
        v.launch(d_tr);
        std::vector<unsigned long long> h(nt);
        CUDA_CHECK(cudaMemcpy(h.data(), d_tr, 8 * nt, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaFree(d_tr));
        double spread = 0, sync = 0, resume = 0;
        for (int m = 0; m < c.n - 1; m++) { /* the last matrix has no next x */
            unsigned long long a0 = ~0ull, a1 = 0, r0 = ~0ull, r1 = 0;
            for (int b = 0; b < n_sm; b++) {
                const unsigned long long a = h[2 * ((size_t)m * n_sm + b)],
                                         r = h[2 * ((size_t)m * n_sm + b) + 1];
                a0 = std::min(a0, a), a1 = std::max(a1, a), r0 = std::min(r0, r),
                r1 = std::max(r1, r);
            }
            spread += (a1 - a0) * 1e-3, sync += ((double)r0 - (double)a1) * 1e-3,
                resume += (r1 - r0) * 1e-3;
        }
        const int nb = c.n - 1;
        printf("barriers (%s, traced): per matrix, the CTAs finish their part over %.2f us (first "
               "to last), the first has the next x %.2f us after the last finished, the last %.2f "
               "us after the first; summed over %d matrices: %.0f + %.0f + %.0f us\n",
               v.name, spread / nb, sync / nb, resume / nb, nb, spread, sync, resume);
    }
    /* the engine's chain on these bytes */
    report("gemv-rand", graph_us(reps, all, gemv_ref));
    CUDA_CHECK(cudaFree(xg));
    CUDA_CHECK(cudaFree(d_mats));
    CUDA_CHECK(cudaFree(y));
    CUDA_CHECK(cudaFree(y_ref));
    CUDA_CHECK(cudaFree(ytag));
    return ok;
}

#ifdef GEMV_Q8X_TRACE
#include "backend/cuda/gemv_trace.cuh"
extern "C" void cuda_gemv_trace_reset(void *buf, unsigned launches);

/* A build with -DGEMV_Q8X_TRACE (gemv_trace.cuh): one graph launch of the chain, after warm-up
 * launches, traced; every CTA's record goes to trace-TYPE.csv (times in ns from the chain's first
 * CTA start) for bench/gemv_trace.py. */
template <class L>
static void trace_chain(const std::vector<int> &mats, L launch, const int (*mk)[2],
                        const char *name) {
    cudaStream_t st = g_st;
    const unsigned n = (unsigned)mats.size();
    q8x_trace_rec *buf;
    CUDA_CHECK(cudaMalloc(&buf, sizeof(q8x_trace_rec) * n * Q8X_TRACE_MAX_CTAS));
    CUDA_CHECK(cudaMemset(buf, 0, sizeof(q8x_trace_rec) * n * Q8X_TRACE_MAX_CTAS));
    cudaGraphExec_t ge = graph_of(mats, launch);
    for (int i = 0; i < 5; i++)
        CUDA_CHECK(cudaGraphLaunch(ge, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    cuda_gemv_trace_reset(buf, n);
    CUDA_CHECK(cudaGraphLaunch(ge, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<q8x_trace_rec> h((size_t)n * Q8X_TRACE_MAX_CTAS);
    CUDA_CHECK(cudaMemcpy(h.data(), buf, h.size() * sizeof h[0], cudaMemcpyDeviceToHost));
    unsigned long long t0 = ~0ull;
    for (const q8x_trace_rec &r : h)
        if (r.grid && r.start < t0) t0 = r.start;
    char path[96];
    snprintf(path, sizeof path, "trace-%s.csv", name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fprintf(f, "launch,M,K,cta,smid,grid,start,waited,x_ready,end,loaded,scaled\n");
    for (unsigned l = 0; l < n; l++)
        for (int c = 0; c < Q8X_TRACE_MAX_CTAS; c++) {
            const q8x_trace_rec &r = h[(size_t)l * Q8X_TRACE_MAX_CTAS + c];
            if (!r.grid) continue;
            /* loaded, scaled: -1 where the launch has no norm inside */
            const auto rel = [&](unsigned long long t) { return t ? (long long)(t - t0) : -1LL; };
            fprintf(f, "%u,%d,%d,%d,%u,%u,%lld,%lld,%lld,%lld,%lld,%lld\n", l, mk[mats[l]][0],
                    mk[mats[l]][1], c, r.smid, r.grid, rel(r.start), rel(r.waited), rel(r.x_ready),
                    rel(r.end), rel(r.loaded), rel(r.scaled));
        }
    fclose(f);
    printf("trace: %u launches written to %s\n", n, path);
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaFree(buf));
}
#endif

/* the weight types it measures, with their bytes per 1024 elements */
static const struct {
    const char *name;
    si_type t;
    int per1024;
} k_types[] = {
    {"q4_0", SI_TYPE_Q4_0, 576}, {"q4_k", SI_TYPE_Q4_K, 576},     {"q5_k", SI_TYPE_Q5_K, 704},
    {"q6_k", SI_TYPE_Q6_K, 840}, {"q8_0", SI_TYPE_Q8_0, 1088},    {"f16", SI_TYPE_F16, 2048},
    {"q4_1", SI_TYPE_Q4_1, 640}, {"q5_0", SI_TYPE_Q5_0, 704},     {"q5_1", SI_TYPE_Q5_1, 768},
    {"q3_k", SI_TYPE_Q3_K, 440}, {"iq4_nl", SI_TYPE_IQ4_NL, 576}, {"iq4_xs", SI_TYPE_IQ4_XS, 544},
    {"q2_k", SI_TYPE_Q2_K, 336}};

int main(int argc, char **argv) {
    int ti = -1;
    for (int i = 0; argc > 1 && i < (int)(sizeof k_types / sizeof k_types[0]); i++)
        if (!strcmp(argv[1], k_types[i].name)) ti = i;
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    const int nb = argc > 3 ? atoi(argv[3]) : 1; /* the GEMVs' batch rows */
    if (ti < 0 || reps < 1 || nb < 1 || nb > 8) {
        fprintf(stderr, "usage: persist_chain q4_0|q4_k|q5_k|q6_k|q8_0|f16|q4_1|q5_0|q5_1|q3_k|"
                        "iq4_nl|iq4_xs|q2_k [reps] [gemv batch rows 1..8]\n");
        return 2;
    }
    const si_type type = k_types[ti].t;
    const int per1024 = k_types[ti].per1024;
    /* the matrices in decode order, each with the engine's allocation (cuda_weight_alloc_bytes,
     * which rounds to 16 bytes) */
    const int shapes[4][2] = {{12288, 4096}, {4096, 4096}, {22016, 4096}, {4096, 11008}};
    chain c{};
    int mk[MAX_MATS][2];
    unsigned long long off = 0;
    for (int l = 0; l <= 32; l++)
        for (int j = 0; j < (l < 32 ? 4 : 1); j++) {
            const int M = l < 32 ? shapes[j][0] : 32000, K = l < 32 ? shapes[j][1] : 4096;
            mk[c.n][0] = M;
            mk[c.n][1] = K;
            c.off[c.n++] = off;
            off += cuda_weight_alloc_bytes(type, M, K);
        }
    c.off[c.n] = off;
    const double gb = off * 1e-9;
    int dev = 0, n_sm = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
    printf("persist_chain %s: %d matrices, %.3f GB a token (%d bytes a 1024 elements), %d SMs, %d "
           "reps, gemv batch rows %d\n",
           k_types[ti].name, c.n, gb, per1024, n_sm, reps, nb);
    uint8_t *w;
    unsigned *sink, *ctr; /* the persistent kernels' counters */
    unsigned long long *trace;
    CUDA_CHECK(cudaMalloc(&w, off));
    CUDA_CHECK(cudaMemset(w, 0x5a, off));
    CUDA_CHECK(cudaMalloc(&sink, 4));
    CUDA_CHECK(cudaMalloc(&ctr, 4 * (MAX_MATS + 1)));
    CUDA_CHECK(cudaMalloc(&trace, 3 * 8 * (size_t)n_sm));
    timing_init();
    cudaStream_t st = g_st;
    auto report = [&](const char *what, double us) {
        printf("%-14s %8.1f us a token  %6.0f GB/s  %5.1f %% of 4.21 TB/s  = %6.1f tokens/s\n",
               what, us, gb / (us * 1e-6), 100.0 * gb / (us * 1e-6) / 4210.0, 1e6 / us);
    };

    /* a launch of 256-thread CTAs on st, with the PDL attribute when pdl */
    auto launch256 = [&](auto kernel, unsigned grid, bool pdl, auto... args) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = grid;
        cfg.blockDim = 256;
        cfg.stream = st;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at;
        cfg.numAttrs = pdl;
        CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
    };
    auto n16_of = [&](int m) { return (size_t)(c.off[m + 1] - c.off[m]) / 16; };
    /* kernels: one read kernel a matrix; pdl: launched with PDL */
    auto read = [&](int m, bool pdl) {
        launch256(pdl ? read_kernel<true> : read_kernel<false>, n_sm * 8, pdl,
                  (const uint4 *)(w + c.off[m]), n16_of(m), sink);
    };
    /* gemv: the engine's decode GEMVs on these bytes, batch 1 (they launch with PDL themselves):
     * x as the engine hands it (q8 rows for the quantised types, f32 for F16) */
    float *x, *y;
    const size_t x_bytes = 8 * (CUDA_Q8X_ROW_BYTES(11008) + 4 * 11008);
    CUDA_CHECK(cudaMalloc(&x, x_bytes));
    CUDA_CHECK(cudaMalloc(&y, 8 * 4 * 32000));
    CUDA_CHECK(cudaMemset(x, 0x01, x_bytes));
    auto gemv = [&](int m) {
        const void *W = w + c.off[m];
        const int r = type == SI_TYPE_F16
                          ? cuda_gemv(type, W, mk[m][0], mk[m][1], x, nb, y, st)
                          : cuda_gemv_pre(type, W, mk[m][0], mk[m][1], x, nb, y, st);
        if (r != 0) {
            fprintf(stderr, "persist_chain: the GEMV refused %dx%d\n", mk[m][0], mk[m][1]);
            exit(1);
        }
    };
    std::vector<int> all;
    for (int m = 0; m < c.n; m++)
        all.push_back(m);
    report("kernels", graph_us(reps, all, [&](int m) { read(m, false); }));
    report("kernels+pdl", graph_us(reps, all, [&](int m) { read(m, true); }));
    { /* the probes: what of a GEMV's structure costs against read+pdl */
        auto probe = [&](int m, bool oneshot, int xdep) {
            auto k = !oneshot    ? (xdep ? probe_kernel<false, 1> : probe_kernel<false, 0>)
                     : xdep == 2 ? probe_kernel<true, 2>
                     : xdep      ? probe_kernel<true, 1>
                                 : probe_kernel<true, 0>;
            const size_t n16 = n16_of(m);
            launch256(k, oneshot ? (unsigned)((n16 + 1023) / 1024) : (unsigned)n_sm * 8, true,
                      (const uint4 *)(w + c.off[m]), n16, (const float4 *)x, y);
        };
        report("probe stride", graph_us(reps, all, [&](int m) { probe(m, false, 0); }));
        report("probe stride+x", graph_us(reps, all, [&](int m) { probe(m, false, 1); }));
        report("probe 1shot", graph_us(reps, all, [&](int m) { probe(m, true, 0); }));
        report("probe 1shot+x", graph_us(reps, all, [&](int m) { probe(m, true, 1); }));
        report("probe 1shot+x32", graph_us(reps, all, [&](int m) { probe(m, true, 2); }));
    }
    CUDA_CHECK(
        cudaMemset(w, type == SI_TYPE_F16 ? 0x11 : 0x3c, off)); /* finite f16 values and scales */
    report("gemv", graph_us(reps, all, gemv));
    if (type != SI_TYPE_F16 &&
        nb == 1) { /* as the engine at batch 1: QKV and gate/up run the norm inside */
        float *xf;
        CUDA_CHECK(cudaMalloc(&xf, 4 * 4 * 4096));
        CUDA_CHECK(cudaMemset(xf, 0x3c, 4 * 4 * 4096));
        auto gemv_norm = [&](int m) {
            if (m >= 128 || m % 2) return gemv(m);
            if (cuda_gemv_norm(type, w + c.off[m], mk[m][0], mk[m][1], xf, xf + 4096, xf + 8192,
                               1e-5f, xf + 12288, y, st) != 0) {
                fprintf(stderr, "persist_chain: cuda_gemv_norm refused %dx%d\n", mk[m][0],
                        mk[m][1]);
                exit(1);
            }
        };
        report("gemv+norm", graph_us(reps, all, gemv_norm));
#ifdef GEMV_Q8X_TRACE
        trace_chain(all, gemv_norm, mk, k_types[ti].name);
#endif
        /* the same with no residual to add: each CTA's norm reads one row of x, not two */
        auto gemv_norm_noadd = [&](int m) {
            if (m >= 128 || m % 2) return gemv(m);
            if (cuda_gemv_norm(type, w + c.off[m], mk[m][0], mk[m][1], xf, NULL, xf + 8192, 1e-5f,
                               NULL, y, st) != 0)
                exit(1);
        };
        report("gemv+norm noadd", graph_us(reps, all, gemv_norm_noadd));
#ifdef GEMV_Q8X_TRACE
        trace_chain(all, gemv_norm_noadd, mk, (std::string(k_types[ti].name) + "-noadd").c_str());
#endif
        CUDA_CHECK(cudaFree(xf));
    }
    /* each layer shape alone: its 32 matrices in a chain, read (PDL) and the GEMV */
    for (int j = 0; j < 4; j++) {
        std::vector<int> same;
        double bytes = 0;
        for (int l = 0; l < 32; l++) {
            same.push_back(4 * l + j);
            bytes += (double)(c.off[4 * l + j + 1] - c.off[4 * l + j]);
        }
        const double r_us = graph_us(reps, same, [&](int m) { read(m, true); });
        const double g_us = graph_us(reps, same, gemv);
        printf("  %5dx%-5d x32: read+pdl %7.1f us (%5.1f %%)  gemv %7.1f us (%5.1f %%): %4.2f us "
               "a matrix more\n",
               mk[j][0], mk[j][1], r_us, 100.0 * bytes / (r_us * 1e-6) * 1e-9 / 4210.0, g_us,
               100.0 * bytes / (g_us * 1e-6) * 1e-9 / 4210.0, (g_us - r_us) / 32);
    }
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));

    const size_t smem = STAGES * CHUNK + 2 * STAGES * 8 + STAGES * 4;
    for (int kind = 0; kind < 6; kind++) {
        const bool barrier = kind % 2 == 0, dynamic = kind >= 2;
        auto k = kind >= 4 ? (barrier ? persistent<true, true, 4> : persistent<false, true, 4>)
                 : dynamic ? (barrier ? persistent<true, true> : persistent<false, true>)
                           : (barrier ? persistent<true, false> : persistent<false, false>);
        CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        auto launch = [&](unsigned long long *tr) {
            CUDA_CHECK(cudaMemsetAsync(ctr, 0, 4 * (c.n + 1), st));
            k<<<n_sm, THREADS, smem, st>>>(w, c, ctr, tr, sink);
            CUDA_CHECK_LAUNCH();
        };
        static const char *names[] = {"persistent",    "nobarrier",  "dynamic",
                                      "dyn-nobarrier", "dynamic d4", "dyn-nobarrier d4"};
        report(names[kind], time_median_us([&] { launch(nullptr); }, reps));
        launch(trace); /* one more, traced */
        CUDA_CHECK(cudaStreamSynchronize(st));
        std::vector<double> ends;
        std::vector<unsigned long long> h(3 * (size_t)n_sm);
        CUDA_CHECK(cudaMemcpy(h.data(), trace, h.size() * 8, cudaMemcpyDeviceToHost));
        unsigned long long t0 = ~0ull;
        for (int i = 0; i < n_sm; i++)
            t0 = std::min(t0, h[3 * i]);
        for (int i = 0; i < n_sm; i++)
            ends.push_back((h[3 * i + 1] - t0) * 1e-3);
        std::vector<double> s = ends;
        std::sort(s.begin(), s.end());
        printf("  traced run: CTAs end min %.1f  p50 %.1f  max %.1f us after the first start; "
               "slowest SMs:",
               s[0], s[n_sm / 2], s.back());
        for (int k2 = 0; k2 < 5; k2++) {
            const int i = (int)(std::max_element(ends.begin(), ends.end()) - ends.begin());
            printf(" %llu", h[3 * i + 2]);
            ends[i] = -1;
        }
        printf("\n");
    }
    bool ok = true;
    if (nb == 1 && type == SI_TYPE_Q4_0)
        ok = pgemv_line(tqx_q4_0{}, w, c, mk, ctr, n_sm, reps, report);
    if (nb == 1 && type == SI_TYPE_Q8_0)
        ok = pgemv_line(tqx_q8_0{}, w, c, mk, ctr, n_sm, reps, report);
    timing_free();
    return ok ? 0 : 1;
}
