/* sample.cu — token sampling on the GPU, the CPU sampler's chain after the penalties
 * (src/engine/sampler_pick.h): greedy, or top-k -> top-p -> min-p -> temperature -> softmax ->
 * draw with the host's u. One CTA per row and no sort.
 *
 * Every set the chain keeps is a prefix of one total order (higher logit first, then lower id),
 * so each is {i : rank(i) >= cut} for a 64-bit rank = (order-preserving bits of the logit) << 32
 * | (2^32 - 1 - id), and each cut is found by a radix selection over the row (4-bit digits, most
 * significant first): a pass sums, per digit, the count and the weight of the elements still in
 * the current bucket, and the bucket where the running total reaches the target is refined until
 * it holds one element. The weights are the CPU's own float values (count 1 for top-k,
 * p = expf(l - max) / total for top-p, the tempered softmax for the draw), summed in double as
 * the CPU's cumulative sums are; only the summation order differs, so ids can differ from the
 * CPU's only when u or top_p falls within rounding (~1e-16 relative) of a cumulative boundary. */
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_sample.h"

#define SMP_THREADS 512
#define SMP_WARPS (SMP_THREADS / 32)
#define SMP_DIGITS 16 /* 4-bit digits */

struct smp_smem {
    double wacc[SMP_WARPS][SMP_DIGITS];
    int wcnt[SMP_WARPS][SMP_DIGITS];
    double acc[SMP_DIGITS];
    int cnt[SMP_DIGITS];
    double red_d[SMP_WARPS];
    unsigned long long red_u[SMP_WARPS];
};

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

__device__ double smp_block_sum(double v, smp_smem &sm) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) sm.red_d[threadIdx.x / 32] = v;
    __syncthreads();
    double t = 0.0;
    for (int w = 0; w < SMP_WARPS; w++) t += sm.red_d[w]; /* fixed order: deterministic */
    __syncthreads();
    return t;
}

template <bool MAX>
__device__ unsigned long long smp_block_ext(unsigned long long v, smp_smem &sm) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long w = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? (w > v ? w : v) : (w < v ? w : v);
    }
    if (threadIdx.x % 32 == 0) sm.red_u[threadIdx.x / 32] = v;
    __syncthreads();
    unsigned long long t = sm.red_u[0];
    for (int w = 1; w < SMP_WARPS; w++) {
        const unsigned long long x = sm.red_u[w];
        t = MAX ? (x > t ? x : t) : (x < t ? x : t);
    }
    __syncthreads();
    return t;
}

/* An element's weight in a mass selection: the CPU's float probability
 * (float)(expf(l / t - m) / total). */
struct smp_weight {
    float t, m;
    double total;
    __device__ double operator()(float l) const {
        return (double)(float)((double)expf(l / t - m) / total);
    }
};

/* The rank of the first element, in the order, of {i : rank(i) >= lo} at which the running sum
 * of the weights (COUNT: 1 each, else w) reaches target (sum >= target, or sum > target when
 * strict); 0 when it never does. */
template <bool COUNT>
__device__ unsigned long long smp_select(const float *l, int n, unsigned long long lo,
                                         const smp_weight &w, double target, bool strict,
                                         smp_smem &sm) {
    unsigned long long prefix = 0;
    int shift = 64; /* bits below the known prefix */
    double before = 0.0; /* weight of the elements before the current bucket */
    for (;;) {
        const int sh = shift - 4;
        double acc[SMP_DIGITS];
        int cnt[SMP_DIGITS];
#pragma unroll
        for (int j = 0; j < SMP_DIGITS; j++) {
            acc[j] = 0.0;
            cnt[j] = 0;
        }
        for (int i = threadIdx.x; i < n; i += SMP_THREADS) {
            const float v = l[i];
            const unsigned long long r = smp_rank(v, i);
            if (r < lo || (shift < 64 && (r >> shift) != (prefix >> shift))) continue;
            const int d = (int)(r >> sh) & (SMP_DIGITS - 1);
            const double wt = COUNT ? 0.0 : w(v);
#pragma unroll
            for (int j = 0; j < SMP_DIGITS; j++)
                if (d == j) {
                    if (!COUNT) acc[j] += wt;
                    cnt[j]++;
                }
        }
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
        for (int j = 0; j < SMP_DIGITS; j++) {
            double a = acc[j];
            int c = cnt[j];
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
            sm.acc[threadIdx.x] = COUNT ? (double)c : a;
            sm.cnt[threadIdx.x] = c;
        }
        __syncthreads();
        /* every thread scans the same totals: the choice is uniform */
        int pick = -1, last = -1;
        for (int d = SMP_DIGITS - 1; d >= 0; d--) {
            if (!sm.cnt[d]) continue;
            last = d;
            const double c = before + sm.acc[d];
            if (strict ? c > target : c >= target) {
                pick = d;
                break;
            }
            before = c;
        }
        if (pick < 0) {
            if (shift == 64 || last < 0) {
                __syncthreads();
                return 0; /* the whole set falls short of the target */
            }
            /* the bucket's parts summed in another order fell just short: its last element */
            pick = last;
            before -= sm.acc[last];
        }
        const int n_in = sm.cnt[pick];
        __syncthreads(); /* sm is reused by the next pass */
        prefix |= (unsigned long long)pick << sh;
        shift = sh;
        if (n_in == 1 || shift == 0) break;
    }
    unsigned long long found = 0;
    for (int i = threadIdx.x; i < n; i += SMP_THREADS) {
        const unsigned long long r = smp_rank(l[i], i);
        if (r >= lo && (shift == 64 || (r >> shift) == (prefix >> shift)) && r > found) found = r;
    }
    return smp_block_ext<true>(found, sm);
}

/* Sum over {rank >= cut} of expf(l / t - m), in double. */
__device__ double smp_exp_sum(const float *l, int n, unsigned long long cut, float t, float m,
                              smp_smem &sm) {
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += SMP_THREADS) {
        const float v = l[i];
        if (smp_rank(v, i) >= cut) s += (double)expf(v / t - m);
    }
    return smp_block_sum(s, sm);
}

__global__ void __launch_bounds__(SMP_THREADS)
    sample_kernel(const float *logits, int n, const cuda_sample_params *params, int32_t *ids) {
    __shared__ smp_smem sm;
    const float *l = logits + (size_t)blockIdx.x * n;
    const cuda_sample_params p = params[blockIdx.x];
    unsigned long long best = 0;
    for (int i = threadIdx.x; i < n; i += SMP_THREADS) {
        const unsigned long long r = smp_rank(l[i], i);
        best = r > best ? r : best;
    }
    best = smp_block_ext<true>(best, sm);
    const float M = l[smp_id(best)];
    if (p.temperature <= 0.0f || M == -INFINITY) { /* greedy; or nothing possible to draw */
        if (threadIdx.x == 0) ids[blockIdx.x] = smp_id(best);
        return;
    }
    unsigned long long cut = 0; /* the kept set: {rank >= cut} */
    int n_set = n;
    if (p.top_k > 0 && p.top_k < n) {
        cut = smp_select<true>(l, n, 0, smp_weight{1.0f, 0.0f, 1.0}, (double)p.top_k, false, sm);
        n_set = p.top_k;
    }
    if (p.top_p < 1.0f) {
        const double total = smp_exp_sum(l, n, cut, 1.0f, M, sm);
        /* the CPU's exact pre-filter (tokens below it cannot be in the nucleus) */
        const float floor = M + logf((float)(total * (1.0 - (double)p.top_p) / n_set));
        const unsigned long long lo = smp_cut_at(floor) > cut ? smp_cut_at(floor) : cut;
        const unsigned long long r = smp_select<false>(l, n, lo, smp_weight{1.0f, M, total},
                                                       (double)p.top_p, false, sm);
        cut = r ? r : lo;
    }
    if (p.min_p > 0.0f) {
        const unsigned long long m = smp_cut_at(M + logf(p.min_p));
        cut = m > cut ? m : cut;
    }
    const float mt = M / p.temperature;
    const double sum = smp_exp_sum(l, n, cut, p.temperature, mt, sm);
    unsigned long long r =
        smp_select<false>(l, n, cut, smp_weight{p.temperature, mt, sum}, p.u, true, sm);
    if (!r) { /* rounding left u at or above the total: the set's last element */
        unsigned long long lowest = ~0ull;
        for (int i = threadIdx.x; i < n; i += SMP_THREADS) {
            const unsigned long long x = smp_rank(l[i], i);
            if (x >= cut && x < lowest) lowest = x;
        }
        r = smp_block_ext<false>(lowest, sm);
    }
    if (threadIdx.x == 0) ids[blockIdx.x] = smp_id(r);
}

extern "C" void cuda_sample(const float *logits, int n_vocab, int n_rows,
                            const cuda_sample_params *params, int32_t *ids, cudaStream_t stream) {
    if (n_rows <= 0 || n_vocab <= 0) return;
    sample_kernel<<<n_rows, SMP_THREADS, 0, stream>>>(logits, n_vocab, params, ids);
    CUDA_CHECK_LAUNCH();
}
