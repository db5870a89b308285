/* sample.cu — token sampling on the GPU, the CPU sampler's chain after the penalties
 * (src/engine/sampler_pick.h): greedy, or top-k -> top-p -> min-p -> temperature -> softmax ->
 * draw with the host's u. One cluster of CTAs per row and no sort of the row (a top-k set, or
 * what top-p's pre-filter leaves, of at most SMP_SMALL_K is sorted and finished in one CTA:
 * smp_finish_small).
 *
 * Every set the chain keeps is a prefix of one total order (higher logit first, then lower id),
 * so each is {i : rank(i) >= cut} for a 64-bit rank = (order-preserving bits of the logit) << 32
 * | (2^32 - 1 - id), and the top-k and top-p cuts are found by a radix selection over the row
 * (4-bit digits, most significant first): a pass sums, per digit, the count and the weight of the
 * elements still in the current bucket, and the bucket where the running total reaches the target
 * is refined until it holds at most SMP_SELECT_SMALL elements, which one CTA sorts and walks. The
 * draw walks the kept set in id order, as the CPU
 * does: one prefix-sum pass (smp_draw). The weights are the CPU's float values (count 1 for
 * top-k, p = e^(l - max) / total for top-p, the tempered softmax for the draw), summed in double
 * as the CPU's cumulative sums are. The exponentials are sampler_expf (src/engine/sampler_exp.h),
 * the CPU sampler's own, bit for bit (CUDA's expf is not the C library's: a weight that differed
 * in its last bit moved a cumulative sum by ~1e-7 relative, and the neighbouring id was drawn
 * when u fell that close to a boundary: session 61, test_cuda_model's parts_at_boundary), and
 * min-p's threshold adds the host's logf(min_p) (cuda_sample_params.log_min_p). So only the
 * order of the double sums differs from the CPU's (~1e-16 relative).
 *
 * A row is a cluster of C CTAs (thread block clusters, sm_90; on the H200 C = 16 for up to 4
 * rows, 8 up to 16, 4 up to 33, 2 up to 66, else 1): each CTA takes every C-th run of SMP_THREADS
 * elements, and every reduction (a pass's digit totals, the sums, the maxima) adds the CTAs' block
 * totals through distributed shared memory in rank order, so that every CTA makes the same choice
 * and the result does not depend on timing. The passes are bound by their instructions and their
 * latency (a weighted pass costs an exponential and a division, made a multiplication, an element),
 * so more CTAs a row pay while their clusters fit on the GPU at once: a 128256-entry row, one row,
 * sampled 690-1,360 us at one CTA against 120-236 us at eight (test_cuda_sample's timings,
 * bench/RESULTS.md 2026-12-03 s32), at 16 (s36) top-p 0.95 86-88 us against 114-116 at 8. */
#include <cooperative_groups.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_sample.h"
#include "backend/cuda/div_to_float.cuh"
#include "engine/sampler_exp.h"

namespace cg = cooperative_groups;

#define SMP_THREADS 512
#define SMP_WARPS (SMP_THREADS / 32)
#define SMP_DIGITS 16 /* 4-bit digits */
#define SMP_CLUSTER_PORTABLE 8 /* the portable cluster size */
#define SMP_CLUSTER_MAX 16     /* CTAs a row at most: sm_90's non-portable cluster size */

/* What the whole cluster reads of a CTA (blk_*) alternates between two slots, one reduction to
 * the next (smp_slot): a reduction writes its slot, a cluster barrier, every CTA reads; the next
 * reduction writes the other slot, and this one is written again only after the next barrier,
 * which no CTA reaches before it has read. So one barrier a reduction, not two (a CTA leaves
 * only after a barrier that follows its last read of another's: smp_draw's, smp_finish_small's,
 * or the greedy path's). */
struct smp_smem {
    double wacc[SMP_WARPS][SMP_DIGITS];
    int wcnt[SMP_WARPS][SMP_DIGITS];
    double blk_acc[2][SMP_DIGITS]; /* this CTA's digit totals, read by the whole cluster */
    int blk_cnt[2][SMP_DIGITS];
    double acc[SMP_DIGITS]; /* the cluster's */
    int cnt[SMP_DIGITS];
    double red_d[SMP_WARPS];
    unsigned long long red_u[SMP_WARPS];
    double blk_d[2]; /* this CTA's total, read by the whole cluster */
    unsigned long long blk_u[2];
    int turn[SMP_THREADS]; /* each thread's reductions so far (every thread makes the same) */
    int gather_n;          /* CTA 0's: elements a selection's last bucket gathered (smp_select) */
    unsigned long long gather_rank; /* CTA 0's: what the selection found in them */
};
/* The slot of this reduction; every thread calls it once a reduction. */
__device__ __forceinline__ int smp_slot(smp_smem &sm) { return sm.turn[threadIdx.x]++ & 1; }

/* A row's cluster of C CTAs: its barrier, this CTA's rank, a CTA's shared memory by rank. C = 1
 * is a plain CTA (no cluster launch): a CTA barrier, its own shared memory. */
template <int C> struct smp_cl {
    static __device__ __forceinline__ void sync() {
        if (C > 1)
            cg::this_cluster().sync();
        else
            __syncthreads();
    }
    static __device__ __forceinline__ int rank() {
        return C > 1 ? (int)cg::this_cluster().block_rank() : 0;
    }
    template <class T> static __device__ __forceinline__ T *at(T *p, int r) {
        return C > 1 ? cg::this_cluster().map_shared_rank(p, (unsigned)r) : p;
    }
};

/* The row's elements this CTA visits: i = first, first + step, ... (each thread a strided run) */
struct smp_span {
    int first, step;
};
template <int C> __device__ __forceinline__ smp_span smp_my_span() {
    return smp_span{smp_cl<C>::rank() * SMP_THREADS + (int)threadIdx.x, SMP_THREADS * C};
}

/* f(v, i) with v = l[i] for i = first, first + step, ... below end, in that order, the loads
 * issued SMP_AHEAD at a time ahead of their uses. A pass over a row is a few dozen loads a
 * thread, each an L2 hit of several hundred cycles (the logits were just written); loops whose
 * bodies branch kept them one at a time, so every pass was bound by their latency. */
#define SMP_AHEAD 8
template <class F>
__device__ __forceinline__ void smp_each(const float *l, int first, int end, int step, F f) {
    for (int i0 = first; i0 < end; i0 += SMP_AHEAD * step) {
        float v[SMP_AHEAD];
#pragma unroll
        for (int j = 0; j < SMP_AHEAD; j++)
            v[j] = i0 + j * step < end ? l[i0 + j * step] : 0.0f;
#pragma unroll
        for (int j = 0; j < SMP_AHEAD; j++)
            if (i0 + j * step < end) f(v[j], i0 + j * step);
    }
}

/* Logit bits ordered as the floats are (-0 counted as +0, which compares equal on the CPU). */
__device__ __forceinline__ uint32_t smp_key(float f) {
    const uint32_t b = __float_as_uint(f + 0.0f);
    return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}
/* Larger rank = earlier in the order; never 0, which therefore means "none". */
__device__ __forceinline__ unsigned long long smp_rank(float f, int i) {
    return (unsigned long long)smp_key(f) << 32 | (0xFFFFFFFFu - (uint32_t)i);
}
__device__ __forceinline__ int smp_id(unsigned long long r) {
    return (int)(0xFFFFFFFFu - (uint32_t)r);
}
/* The lowest rank of the elements whose logit is >= thr. */
__device__ __forceinline__ unsigned long long smp_cut_at(float thr) {
    return (unsigned long long)smp_key(thr) << 32;
}

/* The sum of v over the cluster's threads: warps, then the CTA's warps in order, then the CTAs
 * in rank order (fixed orders: deterministic). Every thread of the cluster gets it. */
template <int C> __device__ double smp_cluster_sum(double v, smp_smem &sm) {
    const int slot = smp_slot(sm);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) sm.red_d[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int w = 0; w < SMP_WARPS; w++)
            t += sm.red_d[w];
        sm.blk_d[slot] = t;
    }
    smp_cl<C>::sync(); /* every CTA's total is written */
    double t = 0.0;
    for (int r = 0; r < C; r++)
        t += smp_cl<C>::at(sm.blk_d, r)[slot];
    return t;
}

/* The maximum of v over the cluster's threads, to every thread of it. */
template <int C> __device__ unsigned long long smp_cluster_max(unsigned long long v, smp_smem &sm) {
    const int slot = smp_slot(sm);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x % 32 == 0) sm.red_u[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long t = sm.red_u[0];
        for (int w = 1; w < SMP_WARPS; w++)
            t = max(t, sm.red_u[w]);
        sm.blk_u[slot] = t;
    }
    smp_cl<C>::sync();
    unsigned long long t = smp_cl<C>::at(sm.blk_u, 0)[slot];
    for (int r = 1; r < C; r++)
        t = max(t, smp_cl<C>::at(sm.blk_u, r)[slot]);
    return t;
}

/* An element's weight in a mass selection: the CPU's float probability
 * (float)(sampler_expf(l / t - m) / total), the division by total made a multiplication
 * (div_to_float.cuh). */
struct smp_weight {
    float t, m;
    double total, rinv;
    __device__ smp_weight(float t_, float m_, double total_)
        : t(t_), m(m_), total(total_), rinv(1.0 / total_) {}
    __device__ double operator()(float l) const { /* l / 1 is l: no division (top-p's) */
        return (double)div_to_float((double)sampler_expf((t == 1.0f ? l : l / t) - m), total, rinv);
    }
};

/* Each thread's digit totals of a selection pass, in shared memory (a column a thread: no bank
 * conflicts): an element adds to its digit's with a load, an add and a store, where totals in
 * registers took a compare and a predicated add for every digit (ncu, s36: the passes were
 * bound by instruction issue). Dynamic shared memory: more than the static 48 KB. */
struct smp_hist {
    double acc[SMP_DIGITS][SMP_THREADS];
    int cnt[SMP_DIGITS][SMP_THREADS];
};

/* Every CTA appends the ranks of its part of the row that `keep` accepts to CTA 0's set
 * (through CTA 0's count; at most cap are stored), then the cluster barrier: CTA 0 has them, in
 * no particular order. smp_select's last bucket and smp_finish_small's set. */
template <int C, class K>
__device__ void smp_gather_to_first(const float *l, int n, unsigned long long *set0, int *count0,
                                    int cap, K keep) {
    const smp_span sp = smp_my_span<C>();
    unsigned long long *set = smp_cl<C>::at(set0, 0);
    int *count = smp_cl<C>::at(count0, 0);
    smp_each(l, sp.first, n, sp.step, [&](float v, int i) {
        const unsigned long long r = smp_rank(v, i);
        if (!keep(r)) return;
        const int slot = atomicAdd(count, 1);
        if (slot < cap) set[slot] = r;
    });
    smp_cl<C>::sync();
}

/* Where r goes among set[0..k) in the order (larger ranks first): how many are larger */
__device__ __forceinline__ int smp_place(const unsigned long long *set, int k,
                                         unsigned long long r) {
    int pos = 0;
    for (int j = 0; j < k; j++)
        pos += set[j] > r;
    return pos;
}

/* A selection's last bucket, in CTA 0's smp_hist (free by then): at most SMP_SELECT_SMALL
 * elements, walked in the order by one thread there instead of more passes over the row (a cluster
 * barrier each, ~4 more for a bucket of 512). */
#define SMP_SELECT_SMALL SMP_THREADS /* one thread a candidate */
struct smp_gather {
    unsigned long long rank[SMP_SELECT_SMALL]; /* as gathered */
    unsigned long long sorted[SMP_SELECT_SMALL];
    double term[SMP_SELECT_SMALL]; /* sorted's weights */
};
static_assert(sizeof(smp_gather) <= sizeof(smp_hist), "the gather fits the digit totals' room");

/* The rank of the first element, in the order, of {i : rank(i) >= lo} at which the running sum
 * of the weights (COUNT: 1 each, else w) reaches target (sum >= target); 0 when it never does.
 * Radix passes narrow it to a bucket of at most SMP_SELECT_SMALL elements, which CTA 0 sorts and
 * walks from the weight before the bucket. */
template <int C, bool COUNT>
__device__ unsigned long long smp_select(const float *l, int n, unsigned long long lo,
                                         const smp_weight &w, double target, smp_smem &sm,
                                         smp_hist &h) {
    const smp_span sp = smp_my_span<C>();
    const int t = threadIdx.x;
    unsigned long long prefix = 0;
    int shift = 64; /* bits below the known prefix */
    double before = 0.0; /* weight of the elements before the current bucket */
    for (;;) {
        const int sh = shift - 4, slot = smp_slot(sm);
#pragma unroll
        for (int j = 0; j < SMP_DIGITS; j++) {
            if (!COUNT) h.acc[j][t] = 0.0;
            h.cnt[j][t] = 0;
        }
        smp_each(l, sp.first, n, sp.step, [&](float v, int i) {
            const unsigned long long r = smp_rank(v, i);
            if (r < lo || (shift < 64 && (r >> shift) != (prefix >> shift))) return;
            const int d = (int)(r >> sh) & (SMP_DIGITS - 1);
            if (!COUNT) h.acc[d][t] += w(v);
            h.cnt[d][t]++;
        });
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
        for (int j = 0; j < SMP_DIGITS; j++) {
            double a = COUNT ? 0.0 : h.acc[j][t];
            int c = h.cnt[j][t];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) {
                if (!COUNT) a += __shfl_xor_sync(0xffffffffu, a, o);
                c += __shfl_xor_sync(0xffffffffu, c, o);
            }
            if (lane == 0) {
                sm.wacc[warp][j] = a;
                sm.wcnt[warp][j] = c;
            }
        }
        __syncthreads();
        if (threadIdx.x < SMP_DIGITS) {
            double a = 0.0;
            int c = 0;
            for (int k = 0; k < SMP_WARPS; k++) {
                a += sm.wacc[k][threadIdx.x];
                c += sm.wcnt[k][threadIdx.x];
            }
            sm.blk_acc[slot][threadIdx.x] = COUNT ? (double)c : a;
            sm.blk_cnt[slot][threadIdx.x] = c;
        }
        smp_cl<C>::sync(); /* every CTA's digit totals are written */
        if (threadIdx.x < SMP_DIGITS) {
            double a = 0.0;
            int c = 0;
            for (int r = 0; r < C; r++) { /* rank order: the same in every CTA */
                a += smp_cl<C>::at(sm.blk_acc, r)[slot][threadIdx.x];
                c += smp_cl<C>::at(sm.blk_cnt, r)[slot][threadIdx.x];
            }
            sm.acc[threadIdx.x] = a;
            sm.cnt[threadIdx.x] = c;
        }
        __syncthreads();
        /* every thread of the cluster scans the same totals: the choice is uniform */
        int pick = -1, last = -1;
        for (int d = SMP_DIGITS - 1; d >= 0; d--) {
            if (!sm.cnt[d]) continue;
            last = d;
            const double c = before + sm.acc[d];
            if (c >= target) {
                pick = d;
                break;
            }
            before = c;
        }
        if (pick < 0) {
            if (shift == 64 || last < 0) {
                smp_cl<C>::sync(); /* the other CTAs have read this one's totals */
                return 0;          /* the whole set falls short of the target */
            }
            /* the bucket's parts summed in another order fell just short: its last element */
            pick = last;
            before -= sm.acc[last];
        }
        const int n_in = sm.cnt[pick];
        prefix |= (unsigned long long)pick << sh;
        shift = sh;
        if (n_in <= SMP_SELECT_SMALL || shift == 0) break;
    }
    /* the bucket's elements into CTA 0 (whose threads are done with its smp_hist: they read it
     * before the last barrier) */
    smp_gather &g = *(smp_gather *)&h;
    smp_gather_to_first<C>(l, n, g.rank, &sm.gather_n, SMP_SELECT_SMALL, [&](unsigned long long r) {
        return r >= lo && (r >> shift) == (prefix >> shift);
    });
    if (smp_cl<C>::rank() == 0) {
        const int k = sm.gather_n; /* the bucket's count: 1 .. SMP_SELECT_SMALL */
        if (t < k) {
            const unsigned long long r = g.rank[t];
            const int pos = smp_place(g.rank, k, r);
            g.sorted[pos] = r;
            g.term[pos] = COUNT ? 1.0 : w(l[smp_id(r)]);
        }
        __syncthreads();
        if (t == 0) { /* the last one when rounding left the sum short of the target */
            double cum = before;
            int i = 0;
            for (; i < k - 1; i++) {
                cum += g.term[i];
                if (cum >= target) break;
            }
            sm.gather_rank = g.sorted[i];
            sm.gather_n = 0; /* for the next selection's gather, after the barrier below */
        }
    }
    smp_cl<C>::sync(); /* CTA 0's answer is written */
    return *smp_cl<C>::at(&sm.gather_rank, 0);
}

/* Sum over {rank >= cut} of sampler_expf(l / t - m), in double. */
template <int C>
__device__ double smp_exp_sum(const float *l, int n, unsigned long long cut, float t, float m,
                              smp_smem &sm) {
    const smp_span sp = smp_my_span<C>();
    double s = 0.0;
    smp_each(l, sp.first, n, sp.step, [&](float v, int i) {
        if (smp_rank(v, i) >= cut) s += (double)sampler_expf(v / t - m);
    });
    return smp_cluster_sum<C>(s, sm);
}

/* How many elements have rank >= cut. */
template <int C>
__device__ int smp_count(const float *l, int n, unsigned long long cut, smp_smem &sm) {
    const smp_span sp = smp_my_span<C>();
    int c = 0;
    smp_each(l, sp.first, n, sp.step, [&](float v, int i) { c += smp_rank(v, i) >= cut; });
    return (int)smp_cluster_sum<C>((double)c, sm); /* integers: exact in double */
}

/* ---- the draw: the kept set walked in id order ----------------------------------------------
 * The CPU walks the kept tokens in id order (sampler_pick), so the draw is a prefix sum, not a
 * selection: CTA r of the cluster takes the r-th of C contiguous chunks of the row, its thread t
 * the t-th contiguous run of that chunk, and one pass sums each run's weights. Then one thread
 * walks those sums in id order: the CTAs' totals (every CTA's thread 0, the same sums, so they
 * agree on the CTA), then in that CTA its warps', its lanes', the run's elements. Each level
 * enters the first part at which the running sum would exceed u; rounding (the parts are summed
 * in another order than the CPU's single running sum) can leave u above a part's last element,
 * and then the level enters its last part that has weight: u sits within rounding of a boundary,
 * where the CPU may pick either side too. */
struct smp_scan {
    double run[SMP_THREADS]; /* each thread's run: its weights summed in id order */
    double warp[SMP_WARPS];  /* each warp's runs, summed in lane order */
    int warp_last[SMP_WARPS];
    int last; /* the CTA's kept element with the highest id; -1: none */
};

/* The part of part[0..m) in which the running sum from *cum first exceeds u (u >= *cum); *cum
 * becomes the sum before it. Rounding past them all: the last part with weight. */
__device__ int smp_walk(const double *part, int m, double u, double *cum) {
    int fallback = -1;
    double before = *cum;
    for (int q = 0; q < m; q++) {
        if (part[q] > 0.0) {
            if (u < *cum + part[q]) return q;
            fallback = q;
            before = *cum;
        }
        *cum += part[q];
    }
    *cum = before;
    return fallback;
}

/* Element i's place: CTA rank r's chunk of the row, thread t's run of it, [*lo, *hi). */
template <int C> __device__ void smp_run_bounds(int n, int r, int t, int *lo, int *hi) {
    const int chunk = (n + C - 1) / C, len = (chunk + SMP_THREADS - 1) / SMP_THREADS;
    const int end = min(n, (r + 1) * chunk);
    *lo = min(end, r * chunk + t * len);
    *hi = min(end, *lo + len);
}

/* The id drawn from {rank >= cut} with weights w: the first element, in id order, at which the
 * running sum exceeds u; the kept element with the highest id when rounding leaves u at or above
 * the total. Every CTA of the cluster calls it; one thread writes *id. */
template <int C>
__device__ void smp_draw(const float *l, int n, unsigned long long cut, const smp_weight &w,
                         double u, smp_smem &sm, smp_scan &sc, int32_t *id) {
    const int r = smp_cl<C>::rank(), lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int slot = smp_slot(sm);
    int lo, hi;
    smp_run_bounds<C>(n, r, threadIdx.x, &lo, &hi);
    double s = 0.0;
    int last = -1;
    smp_each(l, lo, hi, 1, [&](float v, int i) {
        if (smp_rank(v, i) >= cut) {
            s += w(v);
            last = i;
        }
    });
    sc.run[threadIdx.x] = s;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
    if (lane == 0) sc.warp_last[warp] = last;
    __syncthreads();
    if (threadIdx.x < SMP_WARPS) {
        double t = 0.0;
        for (int j = 0; j < 32; j++)
            t += sc.run[threadIdx.x * 32 + j];
        sc.warp[threadIdx.x] = t;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        int lst = -1;
        for (int q = 0; q < SMP_WARPS; q++) {
            t += sc.warp[q];
            lst = max(lst, sc.warp_last[q]);
        }
        sm.blk_d[slot] = t;
        sc.last = lst;
    }
    smp_cl<C>::sync(); /* every CTA's total is written */
    double cum = 0.0;
    int cta = -1, kept_last = -1;
    if (threadIdx.x == 0) {
        double total[C];
        for (int q = 0; q < C; q++) {
            total[q] = smp_cl<C>::at(sm.blk_d, q)[slot];
            kept_last = max(kept_last, *smp_cl<C>::at(&sc.last, q));
        }
        cta = smp_walk(total, C, u, &cum);
        if (cta >= 0 && u >= cum + total[cta]) cta = -1; /* u at or above the total */
    }
    smp_cl<C>::sync(); /* every CTA has read the others' totals */
    if (threadIdx.x != 0) return;
    if (cta < 0) { /* the set's last element; CTA 0 writes it */
        if (r == 0) *id = kept_last;
        return;
    }
    if (cta != r) return;
    const int wq = smp_walk(sc.warp, SMP_WARPS, u, &cum);
    const int t = wq * 32 + smp_walk(&sc.run[wq * 32], 32, u, &cum);
    smp_run_bounds<C>(n, r, t, &lo, &hi);
    int pick = -1;
    bool found = false;
    smp_each(l, lo, hi, 1, [&](float v, int i) {
        if (found || smp_rank(v, i) < cut) return;
        const double x = w(v);
        if (x > 0.0) {
            pick = i;
            found = u < cum + x;
            cum += x;
        }
    });
    *id = pick;
}

/* A small set, top-k's (top_k <= SMP_SMALL_K, the usual 40 or 50) or what top-p's pre-filter
 * leaves of a peaked row, is finished in CTA 0 in the CPU's own order rather than by more passes
 * over the row: every CTA appends the set's ranks to
 * CTA 0's shared memory, CTA 0 sorts them and finds their id order (a place is the number of
 * larger ranks, or smaller ids), and runs sampler_pick's top-p, min-p and draw over them: each
 * term (an exponential, a division) computed by its own thread, each sum by thread 0 in the CPU's
 * order with the CPU's float and double roundings, except the top-k softmax total, which the CPU
 * sums in its selection's order. Row passes cost ~1.5 us each (a cluster barrier and the loads);
 * the full chain's selections take tens of them. */
#define SMP_SMALL_K 128
static_assert(SMP_SMALL_K <= SMP_THREADS, "smp_finish_small: one thread a candidate");

struct smp_small {
    unsigned long long rank[SMP_SMALL_K]; /* the set, as appended */
    unsigned long long sorted[SMP_SMALL_K];
    float logit[SMP_SMALL_K]; /* sorted's logits */
    int by_id[SMP_SMALL_K];   /* places in sorted, in id order */
    double term[SMP_SMALL_K]; /* the terms of the current sum */
    double total;
    int n; /* the set's size as appended; then how many of sorted are kept */
};

/* The draw from the k (<= SMP_SMALL_K) elements of {rank >= cut}: top-k's set (total < 0: its
 * softmax total and top-p's pre-filter are computed here), or the survivors of top-p's
 * pre-filter, total the softmax total it used. Every CTA of the cluster calls it, CTA 0's
 * thread 0 writes the id. */
template <int C>
__device__ void smp_finish_small(const float *l, int n, unsigned long long cut, int k, float M,
                                 double total, const cuda_sample_params &p, smp_small &sk,
                                 int32_t *id) {
    smp_gather_to_first<C>(l, n, sk.rank, &sk.n, SMP_SMALL_K,
                           [&](unsigned long long r) { return r >= cut; });
    if (smp_cl<C>::rank() != 0) return; /* the set is in CTA 0; the others are done with it */
    const int t = threadIdx.x; /* k <= SMP_SMALL_K < SMP_THREADS: one thread a candidate */
    if (t < k) {
        const unsigned long long r = sk.rank[t];
        const int pos = smp_place(sk.rank, k, r);
        int pos_id = 0;
        for (int j = 0; j < k; j++)
            pos_id += smp_id(sk.rank[j]) < smp_id(r);
        const float v = l[smp_id(r)];
        sk.sorted[pos] = r;
        sk.logit[pos] = v;
        sk.by_id[pos_id] = pos;
        sk.term[pos] = sampler_expf(v - M); /* the top-k softmax's */
    }
    __syncthreads();
    if (t == 0 && total >= 0.0) { /* the pre-filtered survivors */
        sk.total = total;
        sk.n = k;
    } else if (t == 0) { /* top-k's set; top-p's exact pre-filter: the survivors are a prefix */
        double total = 0.0;
        for (int i = 0; i < k; i++)
            total += sk.term[i];
        int kept = k;
        if (p.top_p < 1.0f) {
            const float floor = M + logf((float)(total * (1.0 - (double)p.top_p) / k));
            while (kept > 1 && !(sk.logit[kept - 1] >= floor))
                kept--;
        }
        sk.total = total;
        sk.n = kept;
    }
    __syncthreads();
    if (p.top_p < 1.0f) {
        if (t < sk.n) sk.term[t] = (float)(sk.term[t] / sk.total);
        __syncthreads();
        if (t == 0) { /* top-p: the shortest prefix whose mass reaches top_p */
            double cum = 0.0;
            for (int i = 0; i < sk.n; i++) {
                cum += sk.term[i];
                if (cum >= p.top_p) {
                    sk.n = i + 1;
                    break;
                }
            }
        }
        __syncthreads();
    }
    int kept = sk.n;
    if (p.min_p > 0.0f) { /* every thread alike: logit >= max + log(min_p), a prefix */
        const float threshold = M + p.log_min_p;
        int keep = 1;
        while (keep < kept && sk.logit[keep] >= threshold)
            keep++;
        kept = keep;
    }
    /* temperature, softmax and the draw over the kept ones in id order (terms of the others 0,
     * which leave every sum as it is) */
    const float mt = M / p.temperature;
    if (t < k) {
        const int j = sk.by_id[t];
        sk.term[t] = j < kept ? (double)sampler_expf(sk.logit[j] / p.temperature - mt) : 0.0;
    }
    __syncthreads();
    if (t == 0) {
        double sum = 0.0;
        for (int i = 0; i < k; i++)
            sum += sk.term[i];
        sk.total = sum;
    }
    __syncthreads();
    if (t < k) sk.term[t] = (float)(sk.term[t] / sk.total);
    __syncthreads();
    if (t == 0) {
        double cum = 0.0;
        int last = -1;
        for (int i = 0; i < k; i++) {
            if (sk.by_id[i] >= kept) continue;
            last = i;
            cum += sk.term[i];
            if (p.u < cum) break;
        }
        *id = smp_id(sk.sorted[sk.by_id[last]]); /* the last kept if rounding left u above */
    }
}

/* One cluster of C CTAs a row; every decision below is the same in all of its CTAs (they see
 * the same cluster-wide totals), so they leave together, and rank 0 writes the id. */
template <int C>
__global__ void __launch_bounds__(SMP_THREADS)
    sample_kernel(const float *logits, int n, const cuda_sample_params *params, int32_t *ids) {
    __shared__ smp_smem sm;
    __shared__ smp_small sk;
    __shared__ smp_scan sc;
    extern __shared__ __align__(16) unsigned char smp_dyn[];
    smp_hist &h = *(smp_hist *)smp_dyn;
    const int row = blockIdx.x / C;
    const bool writer = smp_cl<C>::rank() == 0 && threadIdx.x == 0;
    if (threadIdx.x == 0) sk.n = sm.gather_n = 0; /* before the first cluster barrier below */
    sm.turn[threadIdx.x] = 0;
    const float *l = logits + (size_t)row * n;
    const cuda_sample_params p = params[row];
    const smp_span sp = smp_my_span<C>();
    unsigned long long best = 0;
    smp_each(l, sp.first, n, sp.step, [&](float v, int i) {
        const unsigned long long r = smp_rank(v, i);
        best = r > best ? r : best;
    });
    best = smp_cluster_max<C>(best, sm);
    const float M = l[smp_id(best)];
    if (p.temperature <= 0.0f || M == -INFINITY) { /* greedy; or nothing possible to draw */
        if (writer) ids[row] = smp_id(best);
        smp_cl<C>::sync(); /* the others have read this CTA's maximum (smp_smem) */
        return;
    }
    unsigned long long cut = 0; /* the kept set: {rank >= cut} */
    int n_set = n;
    if (p.top_k > 0 && p.top_k < n) {
        cut = smp_select<C, true>(l, n, 0, smp_weight{1.0f, 0.0f, 1.0}, (double)p.top_k, sm, h);
        n_set = p.top_k;
        if (n_set <= SMP_SMALL_K) {
            smp_finish_small<C>(l, n, cut, n_set, M, -1.0, p, sk, &ids[row]);
            return;
        }
    }
    if (p.top_p < 1.0f) {
        const double total = smp_exp_sum<C>(l, n, cut, 1.0f, M, sm);
        /* the CPU's exact pre-filter (tokens below it cannot be in the nucleus) */
        const float floor = M + logf((float)(total * (1.0 - (double)p.top_p) / n_set));
        const unsigned long long lo = smp_cut_at(floor) > cut ? smp_cut_at(floor) : cut;
        const int n_lo = smp_count<C>(l, n, lo, sm);
        if (n_lo <= SMP_SMALL_K) { /* a peaked row: few survive (the nucleus, and then some) */
            smp_finish_small<C>(l, n, lo, n_lo, M, total, p, sk, &ids[row]);
            return;
        }
        const unsigned long long r =
            smp_select<C, false>(l, n, lo, smp_weight{1.0f, M, total}, (double)p.top_p, sm, h);
        cut = r ? r : lo;
    }
    if (p.min_p > 0.0f) {
        const unsigned long long m = smp_cut_at(M + p.log_min_p);
        cut = m > cut ? m : cut;
    }
    const float mt = M / p.temperature;
    const double sum = smp_exp_sum<C>(l, n, cut, p.temperature, mt, sm);
    smp_draw<C>(l, n, cut, smp_weight{p.temperature, mt, sum}, p.u, sm, sc, &ids[row]);
}

/* n_rows rows at C CTAs a row (cfg's attr: room for the cluster attribute) */
template <int C>
static cudaLaunchConfig_t sample_config(int n_rows, cudaStream_t stream,
                                        cudaLaunchAttribute *attr) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(n_rows * C);
    cfg.blockDim = dim3(SMP_THREADS);
    cfg.dynamicSmemBytes = sizeof(smp_hist);
    cfg.stream = stream;
    cfg.attrs = attr;
    if (C > 1) {
        si_cluster_attr(&attr[0], C);
        cfg.numAttrs = 1;
    }
    return cfg;
}

/* The kernel for C CTAs a row allowed its dynamic shared memory (and, at 16, the non-portable
 * cluster size); then how many such clusters (of one row) the device can hold at once, 0 where
 * none can be. */
template <int C> static int sample_prepare(void) {
    CUDA_CHECK(cudaFuncSetAttribute(sample_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)sizeof(smp_hist)));
    if (C == 1) return 1;
    if (C > SMP_CLUSTER_PORTABLE &&
        cudaFuncSetAttribute(sample_kernel<C>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
            cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = sample_config<C>(1, 0, attr);
    int fits = 0;
    if (cudaOccupancyMaxActiveClusters(&fits, (const void *)sample_kernel<C>, &cfg) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        fits = 0;
    }
    return fits;
}

template <int C>
static void sample_launch(const float *logits, int n_vocab, int n_rows,
                          const cuda_sample_params *params, int32_t *ids, cudaStream_t stream) {
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = sample_config<C>(n_rows, stream, attr);
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, sample_kernel<C>, logits, n_vocab, params, ids));
}

/* CTAs a row: the most of 16, 8, 4, 2 at which every row's cluster fits on the GPU at once (one
 * CTA a multiprocessor; 16, a non-portable size, only while the rows take at most half of the
 * multiprocessors, so that the GPCs' shapes cannot leave a cluster waiting), else one: a second
 * wave of clusters costs more than it saves (the cluster's barriers, one a pass). On the H200 (132
 * multiprocessors; test_cuda_sample's timings, same device call, bench/RESULTS.md 2026-12-03
 * s32): 1 and 8 rows at 8 CTAs 2.2-5.8x faster than at one, 64 rows at 2 1.3-1.9x faster (but
 * top-k 40 + top-p over 32000 entries 8 % slower) and at 8 (four waves) up to 2.5x slower; s36:
 * one 128256-entry row at 16 against 8, top-p 0.95 114-116 -> 88 us, t 1.0 32-33 -> 22. Knob
 * SI_CUDA_SAMPLE_CLUSTER=1|2|4|8|16 (read at the first call): that many, always. */
static int sample_cluster_size(int n_rows) {
    static int n_sm = 0, knob = -1, fits[SMP_CLUSTER_MAX + 1];
    if (!n_sm) {
        int dev;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
        const char *e = getenv("SI_CUDA_SAMPLE_CLUSTER");
        knob = e ? atoi(e) : 0;
        fits[1] = sample_prepare<1>();
        fits[2] = sample_prepare<2>();
        fits[4] = sample_prepare<4>();
        fits[8] = sample_prepare<8>();
        fits[16] = sample_prepare<16>();
    }
    if (knob == 1 || knob == 2 || knob == 4 || knob == 8 || knob == 16) return knob;
    for (int c = SMP_CLUSTER_MAX; c > 1; c /= 2) {
        const long long ctas = (long long)n_rows * c;
        if (fits[c] >= n_rows && (c > SMP_CLUSTER_PORTABLE ? 2 * ctas : ctas) <= n_sm) return c;
    }
    return 1;
}

extern "C" void cuda_sample(const float *logits, int n_vocab, int n_rows,
                            const cuda_sample_params *params, int32_t *ids, cudaStream_t stream) {
    if (n_rows <= 0 || n_vocab <= 0) return;
    switch (sample_cluster_size(n_rows)) {
    case 16: sample_launch<16>(logits, n_vocab, n_rows, params, ids, stream); break;
    case 8: sample_launch<8>(logits, n_vocab, n_rows, params, ids, stream); break;
    case 4: sample_launch<4>(logits, n_vocab, n_rows, params, ids, stream); break;
    case 2: sample_launch<2>(logits, n_vocab, n_rows, params, ids, stream); break;
    default: sample_launch<1>(logits, n_vocab, n_rows, params, ids, stream); break;
    }
}

/* ---- logprobs ------------------------------------------------------------------------------- */

/* One CTA a row that wants logprobs: the CPU's sampler_logprobs in the same arithmetic (float
 * max, double sum of exp(l - max), lse = max + (float)log(sum)); the sum's order differs (fixed:
 * deterministic). The top tokens one pass each: the highest rank below the last one taken. */
__global__ void __launch_bounds__(SMP_THREADS)
    logprobs_kernel(const float *logits, int n, const cuda_sample_params *params,
                    const int32_t *ids, cuda_logprobs *out) {
    __shared__ smp_smem sm;
    const int row = blockIdx.x, k = params[row].logprobs;
    if (k < 0) return;
    sm.turn[threadIdx.x] = 0;
    const float *l = logits + (size_t)row * n;
    const smp_span sp = smp_my_span<1>();
    unsigned long long best = 0;
    smp_each(l, sp.first, n, sp.step, [&](float v, int i) {
        const unsigned long long r = smp_rank(v, i);
        best = r > best ? r : best;
    });
    const float mx = l[smp_id(smp_cluster_max<1>(best, sm))];
    double s = 0.0;
    smp_each(l, sp.first, n, sp.step, [&](float v, int) { s += exp((double)v - mx); });
    const float lse = mx + (float)log(smp_cluster_sum<1>(s, sm));
    cuda_logprobs *o = &out[row];
    if (threadIdx.x == 0) o->logprob = l[ids[row]] - lse;
    unsigned long long prev = ~0ull;
    int t = 0;
    for (; t < k && t < SI_MAX_TOP_LOGPROBS; t++) {
        unsigned long long b = 0; /* 0: none left */
        smp_each(l, sp.first, n, sp.step, [&](float v, int i) {
            const unsigned long long r = smp_rank(v, i);
            if (r < prev && r > b) b = r;
        });
        b = smp_cluster_max<1>(b, sm);
        if (!b) break;
        if (threadIdx.x == 0) {
            o->top_id[t] = smp_id(b);
            o->top_logprob[t] = l[smp_id(b)] - lse;
        }
        prev = b;
    }
    if (threadIdx.x == 0) o->n_top = t;
}

extern "C" void cuda_logprobs_rows(const float *logits, int n_vocab, int n_rows,
                                   const cuda_sample_params *params, const int32_t *ids,
                                   cuda_logprobs *out, cudaStream_t stream) {
    if (n_rows <= 0 || n_vocab <= 0) return;
    logprobs_kernel<<<n_rows, SMP_THREADS, 0, stream>>>(logits, n_vocab, params, ids, out);
    CUDA_CHECK(cudaGetLastError());
}
