/* gemm_rows64.cu — y = x W^T for up to 64 activation rows, F16/BF16 weights, on Hopper's tensor
 * memory accelerator (TMA) and warpgroup MMA (wgmma): gemm_rows64.h says what it promises.
 * Built for sm_90a only (wgmma is not in plain sm_90), in a CMake target of its own.
 *
 * The shape: a decode step of 64 sequences reads every weight byte once for 64 x 4096 inputs, so
 * the matmul is memory-bound (~64 FLOP a byte) and the whole game is streaming W at the
 * bandwidth. One CTA a multiprocessor:
 *   - a producer warp streams tiles W[128 rows][64 k] (16 KB) and x[64 rows][64 k] (8 KB, from
 *     L2 after the first CTA) through STAGES shared-memory stages with cp.async.bulk.tensor,
 *     each stage completing on an mbarrier; the 128-byte swizzle the copy writes is the layout
 *     wgmma reads (K-major, 8-row groups 1024 bytes apart);
 *   - two consumer warpgroups each multiply 64 of the 128 weight rows by the 64 x rows
 *     (wgmma m64n64k16, f32 accumulators in registers: W is wgmma's A, x its B, so y's tile
 *     comes out transposed) and hand the stage back on a second mbarrier.
 * Work is divided stream-K: the units (tile, 64-wide k block) are numbered tile by tile and
 * every CTA takes an equal run of them, so all multiprocessors stream the same number of bytes
 * whatever the number of tiles (96 for QKV, 32 for the output projection: a tile a CTA would
 * leave SMs idle or the last wave half empty). A tile cut between CTAs is finished by the CTA
 * that holds its first k block (its "owner", which reaches it last: it is the end of its run):
 * the CTAs after it wrote their part (at the start of their runs) to a slot of the partial-sum
 * buffer and raised a flag; the owner adds them in k order and writes y. All CTAs are resident
 * at once (grid = multiprocessors, one CTA each), so the owner's wait always ends.
 *
 * Measured on the H200 (bench/RESULTS.md, 2026-12-01 03:51-04:44): correct, but not faster than
 * cuBLASLt, so it is off by default (SI_CUDA_ROWS64=1 turns it on). Its CTAs stream W at about
 * cuBLASLt's rate, but they do not finish together: with the work divided statically, the last
 * CTA ends 10-25 % after the median one (per-CTA %globaltimer, cuda_rows64_set_trace), where
 * cuBLASLt's many-CTA grids balance themselves. Balancing without atomics' nondeterminism and
 * without more partial-sum traffic is the open problem. */
#include <cuda.h>
#include <cudaTypedefs.h>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm_rows64.h"
#include "backend/cuda/pdl.cuh"

namespace {
constexpr int BK = 64;       /* k a stage: 128 bytes, the swizzle's width */
constexpr int BN = 64;       /* x rows (wgmma's n) */
constexpr int CONSUMERS = 2; /* consumer warpgroups */
constexpr int CONSUMER_THREADS = CONSUMERS * 128;
constexpr int THREADS = CONSUMER_THREADS + 32; /* + the producer warp */
constexpr int ACC = 64 * BN / 128;             /* f32 accumulators a thread for one m64 block */
constexpr int BM = CONSUMERS * 64;             /* weight rows a tile: 64 a warpgroup */
constexpr int STAGES = 8;
constexpr int W_BYTES = BM * BK * 2, X_BYTES = BN * BK * 2, STAGE_BYTES = W_BYTES + X_BYTES;
constexpr size_t SMEM = (size_t)STAGES * STAGE_BYTES + 1024 /* alignment */ + 2 * STAGES * 8;
} // namespace

struct cuda_rows64 {
    int n_sm;
    float *partial;  /* [n_sm][ACC][CONSUMER_THREADS]: a CTA's part of a tile it shares */
    unsigned *ready; /* [n_sm]: 1 once that part is written; the owner resets it */
    PFN_cuTensorMapEncodeTiled_v12000 encode;
};

/* ---- device side: the bulk tensor copy, wgmma (the mbarriers: bulk_copy.cuh) ---- */

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* box (c0 = k, c1 = row) of the 2-D tensor map into shared memory, completing on bar */
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, int c0, int c1,
                                         uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" ::"r"(si_smem_addr(dst)),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(si_smem_addr(bar))
                 : "memory");
}

/* wgmma's shared-memory matrix descriptor for a K-major tile in the 128-byte swizzle: rows of
 * 128 bytes, 8-row groups 1024 bytes apart (stride byte offset); the leading byte offset is not
 * used by this layout. The tile starts 1024-byte aligned; a k step of 16 elements (32 bytes)
 * inside it adds 2 to the start address field (16-byte units). */
__device__ __forceinline__ uint64_t smem_desc(const void *tile) {
    return (uint64_t)((si_smem_addr(tile) & 0x3FFFF) >> 4) | (uint64_t)1 << 16 |
           (uint64_t)(1024 >> 4) << 32 | (uint64_t)1 << 62;
}

/* d[64 x 64] += A[64 x 16] B[64 x 16]^T, both K-major in shared memory */
template <bool BF>
__device__ __forceinline__ void wgmma_64x64x16(float (&d)[ACC], uint64_t a, uint64_t b) {
#define SI_D8(i)                                                                                   \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define SI_WGMMA(T)                                                                                \
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"                                    \
                 " wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T " "                        \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "         \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, "     \
                 "%31}, %32, %33, p, 1, 1, 0, 0;\n}"                                               \
                 : SI_D8(0), SI_D8(8), SI_D8(16), SI_D8(24)                                        \
                 : "l"(a), "l"(b), "r"(1))
    if (BF)
        SI_WGMMA("bf16");
    else
        SI_WGMMA("f16");
#undef SI_WGMMA
#undef SI_D8
}

__device__ __forceinline__ void wgmma_fence(void) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit(void) {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
/* until at most N committed groups are still running */
template <int N> __device__ __forceinline__ void wgmma_wait(void) {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void consumers_sync(void) {
    asm volatile("bar.sync 1, %0;" ::"n"(CONSUMER_THREADS) : "memory");
}
__device__ __forceinline__ void flag_release(unsigned *f) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(f), "r"(1u) : "memory");
}
__device__ __forceinline__ unsigned flag_acquire(const unsigned *f) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(f) : "memory");
    return v;
}
#endif

/* cuda_rows64_set_trace's timestamps: %globaltimer into trace[i] when tracing */
__device__ __forceinline__ void stamp(unsigned long long *trace, int i) {
    if (!trace) return;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    trace[i] = t;
}

/* the first unit of CTA p's run when `units` are divided among P CTAs */
__device__ __forceinline__ int64_t run_start(int64_t units, int p, int P) { return units * p / P; }

template <bool BF>
__global__ void __launch_bounds__(THREADS, 1)
    rows64_kernel(const __grid_constant__ CUtensorMap tw, const __grid_constant__ CUtensorMap tx,
                  float *__restrict__ y, int M, int n_rows, int kbs, int64_t units,
                  float *__restrict__ partial, unsigned *ready, unsigned long long *trace) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(smem + (size_t)STAGES * STAGE_BYTES), *empty = full + STAGES;
    const int P = gridDim.x, p = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t u0 = run_start(units, p, P), u1 = run_start(units, p + 1, P);
    auto w_tile = [&](int s) { return smem + (size_t)s * STAGE_BYTES; };
    auto x_tile = [&](int s) { return smem + (size_t)s * STAGE_BYTES + W_BYTES; };
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            si_mbar_init(&full[s], 1);
            si_mbar_init(&empty[s], CONSUMERS * 4); /* one arrival a consumer warp */
        }
    }
    __syncthreads();
    /* every CTA is resident: the kernel after this one may launch as CTAs finish, and read its
     * own weights while the slowest CTAs here still stream theirs (pdl.cuh) */
    si_pdl_trigger();
    if (threadIdx.x == 0) stamp(trace, 3 * p);

    if (warp == CONSUMERS * 4) { /* the producer */
        if (lane != 0) return;
        const int n = (int)(u1 - u0), first = n < STAGES ? n : STAGES;
        asm volatile("prefetch.tensormap [%0];" ::"l"((uint64_t)&tw) : "memory");
        asm volatile("prefetch.tensormap [%0];" ::"l"((uint64_t)&tx) : "memory");
        /* the first stages' weights do not depend on the kernel before: read them now */
        for (int i = 0; i < first; i++) {
            const int64_t u = u0 + i, t = u / kbs;
            si_mbar_expect_tx(&full[i], STAGE_BYTES);
            tma_load(w_tile(i), &tw, (int)(u - t * kbs) * BK, (int)t * BM, &full[i]);
        }
        si_pdl_wait();
        for (int i = 0; i < first; i++) {
            const int64_t u = u0 + i, t = u / kbs;
            tma_load(x_tile(i), &tx, (int)(u - t * kbs) * BK, 0, &full[i]);
        }
        for (int i = first; i < n; i++) {
            const int s = i % STAGES;
            const int64_t u = u0 + i, t = u / kbs;
            si_mbar_wait(&empty[s], (uint32_t)(i / STAGES - 1) & 1);
            si_mbar_expect_tx(&full[s], STAGE_BYTES);
            tma_load(w_tile(s), &tw, (int)(u - t * kbs) * BK, (int)t * BM, &full[s]);
            tma_load(x_tile(s), &tx, (int)(u - t * kbs) * BK, 0, &full[s]);
        }
        return;
    }

    /* the consumers: warpgroup wg multiplies weight rows [64 wg, 64 wg + 64) of each tile */
    si_pdl_wait(); /* y, partial and ready may still be in use by the kernel before */
    const int tc = threadIdx.x, wg = warp / 4;
    /* accumulator i holds y[n_of(i)][tile row m_of(i)] (wgmma's m64nNk16 f32 layout) */
    const int m_lane = wg * 64 + (warp % 4) * 16 + lane / 4, n_lane = 2 * (lane % 4);
    auto m_of = [&](int i) { return m_lane + 8 * ((i >> 1) & 1); };
    auto n_of = [&](int i) { return n_lane + 8 * (i >> 2) + (i & 1); };
    float acc[ACC];
    int i = 0;
    for (int64_t u = u0; u < u1;) {
        const int64_t t = u / kbs, tile_end = (t + 1) * kbs,
                      seg_end = u1 < tile_end ? u1 : tile_end;
        const bool head = u == t * kbs, whole = head && seg_end == tile_end;
#pragma unroll
        for (int j = 0; j < ACC; j++)
            acc[j] = 0.0f;
        /* each stage's MMAs run while the next stage is waited for; a stage goes back to the
         * producer once the MMAs after it have been issued and its own have completed */
        for (int first = i; u < seg_end; u++, i++) {
            const int s = i % STAGES;
            si_mbar_wait(&full[s], (uint32_t)(i / STAGES) & 1);
            const uint64_t a = smem_desc(w_tile(s) + wg * 64 * BK * 2), b = smem_desc(x_tile(s));
            wgmma_fence();
#pragma unroll
            for (int k = 0; k < BK / 16; k++)
                wgmma_64x64x16<BF>(acc, a + 2 * k, b + 2 * k);
            wgmma_commit();
            wgmma_wait<1>();
            if (i > first && lane == 0) si_mbar_arrive(&empty[(i - 1) % STAGES]);
        }
        wgmma_wait<0>();
        if (lane == 0) si_mbar_arrive(&empty[(i - 1) % STAGES]);
        if (!head) { /* the tile's owner adds this part: leave it in this CTA's slot */
            float *slot = partial + (size_t)p * ACC * CONSUMER_THREADS;
#pragma unroll
            for (int j = 0; j < ACC; j++)
                slot[j * CONSUMER_THREADS + tc] = acc[j];
            __threadfence();
            consumers_sync();
            if (tc == 0) flag_release(&ready[p]);
            continue;
        }
        if (!whole) { /* the owner: CTAs p + 1 .. q_end - 1 hold the rest, in k order */
            int q_end = p + 1;
            while (q_end < P && run_start(units, q_end, P) < tile_end)
                q_end++;
            if (tc < q_end - p - 1) { /* one thread a flag, all at once */
                while (flag_acquire(&ready[p + 1 + tc]) == 0) {
                }
                ready[p + 1 + tc] = 0; /* for the next launch, which starts after this one ends */
            }
            consumers_sync();
            for (int q = p + 1; q < q_end; q++) {
                const float *slot = partial + (size_t)q * ACC * CONSUMER_THREADS;
#pragma unroll
                for (int j = 0; j < ACC; j++)
                    acc[j] += __ldcg(&slot[j * CONSUMER_THREADS + tc]);
            }
        }
        if (tc == 0 && !whole) stamp(trace, 3 * p + 1);
        float *yt = y + t * BM;
#pragma unroll
        for (int j = 0; j < ACC; j++)
            if (n_of(j) < n_rows) yt[(size_t)n_of(j) * M + m_of(j)] = acc[j];
    }
    if (tc == 0) stamp(trace, 3 * p + 2);
#else
    __trap(); /* built without sm_90a: cuda_rows64_create refuses such a GPU, so never reached */
#endif
}

/* ---- host side ---- */

static unsigned long long *g_trace;
extern "C" void cuda_rows64_set_trace(unsigned long long *dev) { g_trace = dev; }

extern "C" cuda_rows64 *cuda_rows64_create(void) {
    const char *e = getenv("SI_CUDA_ROWS64");
    if (e && e[0] == '0') return NULL;
    int dev = 0, major = 0, minor = 0, n_sm = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
    if (major != 9 || minor != 0) return NULL;
    cuda_rows64 *r = (cuda_rows64 *)calloc(1, sizeof *r);
    if (!r) return NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&r->encode, 12000,
                                         cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        free(r);
        return NULL;
    }
    r->n_sm = n_sm;
    CUDA_CHECK(cudaMalloc(&r->partial, (size_t)n_sm * ACC * CONSUMER_THREADS * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&r->ready, (size_t)n_sm * sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(r->ready, 0, (size_t)n_sm * sizeof(unsigned)));
    CUDA_CHECK(cudaFuncSetAttribute(rows64_kernel<false>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM));
    CUDA_CHECK(cudaFuncSetAttribute(rows64_kernel<true>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM));
    return r;
}

extern "C" void cuda_rows64_free(cuda_rows64 *r) {
    if (!r) return;
    CUDA_CHECK(cudaFree(r->partial));
    CUDA_CHECK(cudaFree(r->ready));
    free(r);
}

extern "C" int cuda_rows64_ok(const cuda_rows64 *r, si_type t, int M, int K, int n_rows) {
    return r && (t == SI_TYPE_F16 || t == SI_TYPE_BF16) && n_rows >= 1 && n_rows <= BN && M >= BM &&
           M % BM == 0 && K >= BK && K % BK == 0;
}

/* a rows x K row-major matrix of 2-byte elements, read in boxes of box_rows x BK, swizzled */
static void tensor_map(const cuda_rows64 *r, CUtensorMap *map, bool bf, const void *base, int K,
                       int rows, int box_rows) {
    const cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)rows};
    const cuuint64_t stride[1] = {(cuuint64_t)K * 2};
    const cuuint32_t box[2] = {BK, (cuuint32_t)box_rows}, step[2] = {1, 1};
    const CUresult rc =
        r->encode(map, bf ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                  (void *)base, dim, stride, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled failed (%d) for %d x %d\n", (int)rc, rows, K);
        abort();
    }
}

extern "C" int cuda_rows64_matmul(cuda_rows64 *r, si_type t, const void *W, int M, int K,
                                  const void *x, int n_rows, float *y, cudaStream_t stream) {
    if (!cuda_rows64_ok(r, t, M, K, n_rows)) return -1;
    const bool bf = t == SI_TYPE_BF16;
    CUtensorMap tw, tx; /* x's rows past n_rows read as zeros */
    tensor_map(r, &tw, bf, W, K, M, BM);
    tensor_map(r, &tx, bf, x, K, n_rows, BN);
    const int kbs = K / BK;
    const int64_t units = (int64_t)(M / BM) * kbs;
    const int grid = units < r->n_sm ? (int)units : r->n_sm;
    si_launch_pdl(bf ? rows64_kernel<true> : rows64_kernel<false>, dim3(grid), dim3(THREADS), SMEM,
                  stream, tw, tx, y, M, n_rows, kbs, units, r->partial, r->ready, g_trace);
    return 0;
}
