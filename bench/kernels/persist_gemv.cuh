/* persist_gemv.cuh — persist_chain's "pgemv" lines: the chain's batch-1 GEMVs (Q4_0 or Q8_0,
 * x quantised ahead as the engine's norms do) in ONE persistent kernel, the structure that the
 * "dynamic" read line measures, with the work of a GEMV in it:
 *   - one CTA a multiprocessor: a producer lane streams chunks of whole weight rows (at most
 *     PG_CHUNK bytes) into a ring of shared-memory stages with cp.async.bulk; which chunk it
 *     takes next is dealt at run time (one atomic counter a matrix), so fast multiprocessors
 *     take more;
 *   - CW consumer warps multiply the staged rows with x (the q8x GEMV's units and dot,
 *     gemv_q8x_units.cuh), a warp R rows x one 32-unit segment at a time;
 *   - between two matrices the consumers of all CTAs meet at a grid barrier (the next matrix's
 *     x would be this one's output in a decode step) and then copy the next matrix's x from
 *     global memory; the producer does not wait: it runs on into the next matrices' chunks as
 *     far as the ring reaches, so the weight stream need not stop at a barrier.
 *
 * Variants (the line's name): "16x2" = 16 consumer warps x 2 rows an item; "xc": x kept in
 * registers while a warp's segment stays; "d4": four chunk atomics in flight; "nobarrier": no
 * grid barrier (x is the same for every matrix here); "noload": no weight loads (the
 * consumers' own rate); "relaxed": barriers without memory ordering; "fence": the acquire as
 * one fence after relaxed polls; "release only" / "acquire only": one side of the ordering;
 * "tagged": no barrier, y's words carry their matrix's epoch and every CTA reads them before
 * the next x; "tagged relaxed": a barrier without ordering, then the words the next x takes,
 * read in batches and checked (again where stale); "ring SxC": S stages of C bytes (default 10 x 18
 * KB); "gN": the warps in N groups, each stage consumed by one group (default: one group, every
 * warp visits every stage).
 *
 * bar_trace (NULL: none): for each matrix and CTA, when the CTA finished its part and when it
 * had the next matrix's x (%globaltimer), for the "barriers" line. ytag, epoch0: the tagged
 * variant's words (one a row of y) and the epoch of matrix 0 (matrix m's is epoch0 + m; each
 * launch takes an epoch0 past the last one's, so that old words never match).
 *
 * Each matrix writes its own y; main() checks them against the engine's GEMV (cuda_gemv_pre)
 * on the same random weights and x. A measurement of the structure, not an engine kernel: the
 * sum order over a row's segments depends on timing (shared-memory atomics). Needs
 * persist_chain.cu's chain, sa, mbar_wait, gtimer and grid_barrier. */
#include "backend/cuda/gemv_q8x_units.cuh"

constexpr int PG_STAGES_DEF = 10, PG_CHUNK_DEF = 18432; /* 8 Q4_0 rows of 4096 */
constexpr int PG_MAX_K = 11008, PG_MAX_ROWS = 64;

/* one GEMV of the chain: y[y_off + r] = W_r . x for the M rows of K at w_off; x at x_off in
 * CUDA_Q8X_ROW_BYTES(K) layout */
struct pg_mat {
    int M, K;
    unsigned long long w_off, x_off, y_off;
};

template <class T> __host__ __device__ constexpr size_t pg_row_bytes(int K) {
    return (size_t)(K / T::BE) * T::BB;
}

/* a ring of stages x chunk bytes */
template <class T> static size_t pg_smem_bytes(int PG_STAGES, int PG_CHUNK) {
    constexpr int XUB = 32 * T::UB + 16;
    return (size_t)PG_STAGES * PG_CHUNK + (size_t)PG_MAX_K / (32 * T::UB) * XUB +
           (size_t)PG_MAX_K / 32 * 8 + 2 * PG_STAGES * PG_MAX_ROWS * 4 + 2 * PG_STAGES * 8 +
           2 * PG_STAGES * 4;
}

/* What a pgemv variant does between two matrices (and of its work). All but PG_FULL, PG_FENCE
 * and the two tagged modes are measurements only, right here because x does not depend on y. */
enum {
    PG_FULL,          /* grid barrier: release arrival, acquire polls */
    PG_NOBARRIER,     /* only the CTA's own barrier */
    PG_NOLOAD,        /* as PG_FULL, but no weight loads: the consumers' own rate (timing only) */
    PG_RELAXED,       /* grid barrier without memory ordering */
    PG_FENCE,         /* release arrival, relaxed polls, one fence.acq_rel after them */
    PG_REL_ONLY,      /* only the release */
    PG_ACQ_ONLY,      /* only the acquire */
    PG_TAGGED,        /* no grid barrier: y's epoch-tagged words, all read before the next x */
    PG_TAGGED_RELAXED /* PG_RELAXED's barrier, then the next x's tagged words read and checked */
};

/* PG_TAGGED: y also as 8-byte (epoch, value bits) words, stored and loaded whole (single-copy
 * atomic), so that a reader that sees the epoch sees the value: no fence, no barrier */
__device__ __forceinline__ void pg_st_tagged(unsigned long long *p, unsigned epoch, float v) {
    const unsigned long long w = (unsigned long long)epoch << 32 | __float_as_uint(v);
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
}
__device__ __forceinline__ unsigned pg_ld_epoch(const unsigned long long *p) {
    unsigned long long w;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
    return (unsigned)(w >> 32);
}

/* CW consumer warps, R rows an item, XC: x kept in registers, DEAL chunk atomics in flight,
 * a ring of PG_STAGES stages of PG_CHUNK bytes, the warps in groups of WG (stage s is group
 * s % (CW / WG)'s; the producer ends a matrix with a marker stage a group); ctr: the barrier's
 * counter, then one chunk counter a matrix, all zero at launch */
template <class T, int CW, int R, bool XC, int MODE = PG_FULL, int DEAL = 1,
          int PG_STAGES = PG_STAGES_DEF, int PG_CHUNK = PG_CHUNK_DEF, int WG = CW>
__global__ void __launch_bounds__(CW * 32 + 32, 1)
    persistent_gemv(const uint8_t *__restrict__ w, const pg_mat *__restrict__ mats, int n_mats,
                    const uint8_t *__restrict__ xg, float *__restrict__ y, unsigned *ctr,
                    unsigned long long *bar_trace, unsigned long long *ytag, unsigned epoch0) {
    constexpr int XUB = 32 * T::UB + 16, PG_CONS = CW * 32, G = CW / WG;
    static_assert(CW % WG == 0 && PG_STAGES % G == 0, "stage s belongs to group s % G");
    extern __shared__ __align__(128) uint8_t smem[];
    uint8_t *ring = smem;
    uint8_t *xq = ring + (size_t)PG_STAGES * PG_CHUNK;
    float *xd = (float *)(xq + (size_t)PG_MAX_K / (32 * T::UB) * XUB);
    int *xs = (int *)(xd + PG_MAX_K / 32);
    float *ypart = (float *)(xs + PG_MAX_K / 32); /* [PG_STAGES][PG_MAX_ROWS] */
    int *rowcnt = (int *)(ypart + PG_STAGES * PG_MAX_ROWS);
    uint64_t *full = (uint64_t *)(rowcnt + PG_STAGES * PG_MAX_ROWS), *empty = full + PG_STAGES;
    int *stage_row = (int *)(empty + PG_STAGES), *stage_n = stage_row + PG_STAGES;
    const int tid = threadIdx.x;
    if (tid == 0) {
        for (int s = 0; s < PG_STAGES; s++) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(full + s)));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(empty + s)),
                         "r"(WG * 32));
        }
        asm volatile("fence.mbarrier_init.release.cluster;");
    }
    for (int i = tid; i < PG_STAGES * PG_MAX_ROWS; i += blockDim.x) {
        ypart[i] = 0.0f;
        rowcnt[i] = 0;
    }
    __syncthreads();

    if (tid >= PG_CONS) { /* the producer warp, one lane */
        if (tid != PG_CONS) return;
        int it = 0;
        auto take_stage = [&]() {
            const int s = it % PG_STAGES;
            if (it >= PG_STAGES) mbar_wait(empty + s, ((it / PG_STAGES) - 1) & 1);
            it++;
            return s;
        };
        for (int m = 0; m < n_mats; m++) {
            const pg_mat mt = mats[m];
            const size_t rb = pg_row_bytes<T>(mt.K);
            const int rpc = max(1, (int)(PG_CHUNK / rb)), nch = (mt.M + rpc - 1) / rpc;
            chunk_dealer<DEAL> deal;
            deal.start(ctr + 1 + m);
            for (unsigned k; (k = deal.next(ctr + 1 + m)) < (unsigned)nch;) {
                const int s = take_stage(), r0 = (int)k * rpc, n = min(rpc, mt.M - r0);
                const uint32_t bytes = (uint32_t)(n * rb);
                stage_row[s] = r0;
                stage_n[s] = n;
                if (MODE == PG_NOLOAD) { /* the stage's old bytes, at once */
                    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(full + s))
                                 : "memory");
                    continue;
                }
                asm volatile(
                    "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(full + s)),
                    "r"(bytes)
                    : "memory");
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                             "[%0], [%1], %2, [%3];" ::"r"(sa(ring + (size_t)s * PG_CHUNK)),
                             "l"(w + mt.w_off + (size_t)r0 * rb), "r"(bytes), "r"(sa(full + s))
                             : "memory");
            }
            for (int g = 0; g < G; g++) { /* the end of matrix m: a stage without rows a group */
                const int s = take_stage();
                stage_n[s] = 0;
                asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(full + s))
                             : "memory");
            }
        }
        return;
    }

    const int lane = tid % 32, group = tid / 32 / WG, warp = tid / 32 % WG; /* within it */
    /* the q8 row of matrix mt's x into the GEMV's padded layout */
    auto load_x = [&](const pg_mat &mt) {
        const uint8_t *src = xg + mt.x_off;
        const int nblk = mt.K / 32;
        for (int i = tid; i < mt.K / 16; i += PG_CONS) {
            const int u = i / (2 * T::UB), c = i - u * 2 * T::UB;
            *(uint4 *)(xq + (size_t)u * XUB + 16 * c) = ((const uint4 *)src)[i];
        }
        for (int i = tid; i < nblk; i += PG_CONS) {
            xd[i] = ((const float *)(src + mt.K))[i];
            xs[i] = ((const int *)(src + mt.K + 4 * nblk))[i];
        }
        asm volatile("bar.sync 1, %0;" ::"r"(PG_CONS) : "memory");
    };
    /* The warps do not meet between stages: a stage's items (R rows x one 32-unit segment)
     * are numbered on from the group's stage before, warp w of the group takes those = w mod
     * WG, and each thread arrives on the stage's empty barrier when its warp is done with it,
     * so the warps spread over the group's staged chunks. A row of several segments is summed in
     * ypart; the warp that adds its last segment (rowcnt) writes it. */
    int m = 0, base = 0;
    pg_mat mt = mats[0];
    load_x(mt);
    uint32_t xw[8 * T::UB]; /* this lane's x unit, of segment xsg */
    float xdv[T::UB];
    int xsv[T::UB], xsg = -1;
    for (int it = group; m < n_mats; it += G) { /* this group's stages */
        const int s = it % PG_STAGES;
        mbar_wait(full + s, (it / PG_STAGES) & 1);
        const int n = stage_n[s], r0 = stage_row[s];
        if (n == 0) { /* matrix m is done here: every CTA's part of it before the next x */
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(empty + s))
                         : "memory");
            unsigned long long *tr =
                bar_trace ? bar_trace + 2 * ((size_t)m * gridDim.x + blockIdx.x) : NULL;
            if (tr) { /* when the whole CTA is done with m */
                asm volatile("bar.sync 1, %0;" ::"r"(PG_CONS) : "memory");
                if (tid == 0) tr[0] = gtimer();
            }
            if (MODE == PG_RELAXED || MODE == PG_TAGGED_RELAXED)
                grid_barrier<PG_CONS, BAR_RELAXED>(ctr, m);
            else if (MODE == PG_FENCE)
                grid_barrier<PG_CONS, BAR_FENCE>(ctr, m);
            else if (MODE == PG_REL_ONLY)
                grid_barrier<PG_CONS, BAR_REL_ONLY>(ctr, m);
            else if (MODE == PG_ACQ_ONLY)
                grid_barrier<PG_CONS, BAR_ACQ_ONLY>(ctr, m);
            else if (MODE != PG_NOBARRIER && MODE != PG_TAGGED)
                grid_barrier<PG_CONS>(ctr, m);
            else
                asm volatile("bar.sync 1, %0;" ::"r"(PG_CONS) : "memory"); /* before load_x */
            if (MODE == PG_TAGGED && m + 1 < n_mats) /* all of m's y, seen by its epochs */
                for (int i = tid; i < mt.M; i += PG_CONS)
                    while (pg_ld_epoch(ytag + mt.y_off + i) != epoch0 + m) {
                    }
            if (MODE == PG_TAGGED_RELAXED && m + 1 < n_mats) {
                /* after a barrier without ordering, the words the next x takes (its K), read 8
                 * at a time a thread; a word without m's epoch (not yet visible) is read again */
                const int kn = mats[m + 1].K;
                const unsigned want = epoch0 + m;
                for (int i0 = tid; i0 < kn; i0 += 8 * PG_CONS) {
                    unsigned e[8];
#pragma unroll
                    for (int k = 0; k < 8; k++) {
                        const int i = i0 + k * PG_CONS;
                        e[k] = i < kn ? pg_ld_epoch(ytag + mt.y_off + i) : want;
                    }
#pragma unroll
                    for (int k = 0; k < 8; k++)
                        while (e[k] != want)
                            e[k] = pg_ld_epoch(ytag + mt.y_off + i0 + k * PG_CONS);
                }
            }
            if (++m < n_mats) {
                mt = mats[m];
                load_x(mt);
            }
            if (tr && tid == 0) tr[1] = gtimer(); /* and when it has the next x */
            xsg = -1;
            base = 0;
            continue;
        }
        const size_t rb = pg_row_bytes<T>(mt.K);
        const int units = mt.K / (32 * T::UB), nseg = (units + 31) / 32;
        const int groups = (n + R - 1) / R, items = groups * nseg;
        const uint8_t *stage = ring + (size_t)s * PG_CHUNK;
        for (int i = ((warp - base) % WG + WG) % WG; i < items; i += WG) {
            const int g = i / nseg, sg = i - g * nseg, u = sg * 32 + lane;
            float v[R] = {};
            if (u < units) {
                if (!XC || sg != xsg) { /* XC: x stays in registers while sg does */
                    const uint4 *xp = (const uint4 *)(xq + (size_t)u * XUB);
#pragma unroll
                    for (int k = 0; k < 2 * T::UB; k++) {
                        const uint4 q = xp[k];
                        xw[4 * k] = q.x;
                        xw[4 * k + 1] = q.y;
                        xw[4 * k + 2] = q.z;
                        xw[4 * k + 3] = q.w;
                    }
#pragma unroll
                    for (int k = 0; k < T::UB; k++) {
                        xdv[k] = xd[u * T::UB + k];
                        xsv[k] = xs[u * T::UB + k];
                    }
                    xsg = sg;
                }
#pragma unroll
                for (int r = 0; r < R; r++) {
                    if (g * R + r >= n) break;
                    uint32_t wr[T::WORDS];
                    T::load(stage + (g * R + r) * rb + (size_t)sg * 32 * T::UBYTES, lane, wr);
                    v[r] = T::dot(wr, xw, xdv, xsv);
                }
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int row = g * R + r;
                const float sum = si_warp_sum(v[r]);
                if (lane != 0 || row >= n) continue;
                if (nseg == 1) {
                    y[mt.y_off + r0 + row] = sum;
                    if (MODE == PG_TAGGED || MODE == PG_TAGGED_RELAXED)
                        pg_st_tagged(ytag + mt.y_off + r0 + row, epoch0 + m, sum);
                    continue;
                }
                float *yp = ypart + s * PG_MAX_ROWS + row;
                int *cnt = rowcnt + s * PG_MAX_ROWS + row;
                atomicAdd(yp, sum);
                __threadfence_block();
                if (atomicAdd(cnt, 1) == nseg - 1) { /* the row's last segment */
                    const float v = atomicExch(yp, 0.0f);
                    y[mt.y_off + r0 + row] = v;
                    if (MODE == PG_TAGGED || MODE == PG_TAGGED_RELAXED)
                        pg_st_tagged(ytag + mt.y_off + r0 + row, epoch0 + m, v);
                    *cnt = 0;
                }
            }
        }
        base = (base + items) % WG;
        __syncwarp();
        asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(empty + s)) : "memory");
    }
}

/* random weights of T's blocks: an fp16 scale in [2^-10, 2^-9) and random bytes after it */
template <class T> __global__ void pg_fill_w(uint8_t *w, size_t n_blocks, unsigned seed) {
    for (size_t b = blockIdx.x * (size_t)blockDim.x + threadIdx.x; b < n_blocks;
         b += (size_t)gridDim.x * blockDim.x) {
        uint8_t *p = w + b * T::BB;
        unsigned h = (unsigned)b * 2654435761u ^ seed;
        const __half d = __float2half(0.0009765625f * (1.0f + (h & 1023) / 1024.0f));
        memcpy(p, &d, 2);
        for (int i = 2; i < T::BB; i++) {
            h = h * 1664525u + 1013904223u;
            p[i] = (uint8_t)(h >> 24);
        }
    }
}

/* a random q8 row of K in CUDA_Q8X_ROW_BYTES layout: q in [-127, 127], d in [0.01, 0.02), the
 * exact sum of each block's q */
__global__ void pg_fill_x(uint8_t *x, int K, unsigned seed) {
    const int nblk = K / 32;
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < nblk; b += gridDim.x * blockDim.x) {
        unsigned h = (unsigned)b * 2246822519u ^ seed;
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            h = h * 1664525u + 1013904223u;
            const int q = (int)(h >> 24) % 255 - 127;
            x[32 * b + i] = (uint8_t)(q & 0xFF);
            sum += q;
        }
        ((float *)(x + K))[b] = 0.01f * (1.0f + (h & 255) / 256.0f);
        ((int *)(x + K + 4 * nblk))[b] = sum;
    }
}
