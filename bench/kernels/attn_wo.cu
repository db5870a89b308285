/* attn_wo.cu — would decode attention with the output projection inside it reach the Q4_0
 * batch-1 target? (issue 6: Llama-2-7B Q4_0 tg128 needs ~825 t/s, the engine 754 in s37; s30 put
 * the output projection at 4.8 us a layer in the graph, 47 % of its bytes' time: latency, not
 * bytes. bench/RESULTS.md s36 worked this fusion out; session 40, lent no GPU, wrote it.)
 *
 * ANSWER (session 41, one H100, bench/RESULTS.md 2026-12-05 14:27): no. It passes its checks but
 * adds 1.1-1.9 us a layer more than the engine's attention + output projection at 16-512 keys
 * (16 us more at 2048), so the engine does not use it; kept as the record of the measurement.
 *
 * The fused kernel: batch 1, MHA (a KV head a query head), head_dim 128, an f16 cache, Q4_0 W_o.
 * A cluster of C = 4 CTAs a head (128 CTAs for 32 heads); CTA c of head h:
 *   0. before its PDL wait, copies W_o's rows [c E/C, (c+1) E/C) x the head's 128 columns (4 Q4_0
 *      blocks, 72 bytes a row: 72 KB) into shared memory (cp.async, 8 bytes at a time);
 *   1. after the wait, head h's attention over its quarter of the keys (online softmax in base 2,
 *      8 warps, a key a warp at a time, 4 dimensions a lane), the 8 warps merged;
 *   2. the C CTAs' softmax states merged through distributed shared memory in rank order, by
 *      every CTA alike: the head's output o (128 floats), quantised to 4 q8 blocks as the engine's
 *      producers quantise (q8x_block);
 *   3. its 1024 rows' dot products with o (tqx_q4_0, the engine's Q4_0 unit: the 4 blocks are a
 *      unit, 72 bytes), into part[h][row];
 *   4. the cross-head sum in a fixed order: the 32 CTAs of rank c meet at a counter (monotonic
 *      across launches: no reset), then each sums 32 of the slice's rows over the heads in head
 *      order into y. The meeting needs all 128 CTAs resident at once (one wave: 78 KB of shared
 *      memory and 256 threads a CTA, 132 SMs), which the PDL chain gives: the kernel after this
 *      one starts only when every CTA of this one has run its trigger.
 * Not here (the engine's attention kernel does them, at ~2.4 us with the output projection's
 * quantisation): RoPE of q and k, the new token's K/V write, GQA, the paged block table (the cache
 * is read as one table in order), 2-8 rows with the same arithmetic as 1.
 *
 * What it measures: 32 layers in a CUDA graph (PDL edges as in the engine), each a stand-in QKV
 * GEMV (the engine's cuda_gemv_pre, 12288 x 4096 Q4_0, 32 weight copies) then either the engine's
 * attention (cuda_attention_decode_rope, out quantised for the next GEMV) + output projection
 * (cuda_gemv_pre) or the fused kernel; the QKV GEMVs alone are the floor. Per layer: (graph -
 * floor) / 32, for each KV length. The fused kernel's y is checked against a double-precision
 * reference (the CPU's dequantised W_o times attention's output): max |y - ref| / max |ref| <=
 * 2e-2 (o's q8 rounding is ~0.4 % of each element).
 *
 *   attn_wo [reps (default 20)] [kv lengths, comma-separated (default 64,128,512)]
 * exits 1 if a check fails */
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemv_q8x_units.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8x_row.cuh"
#include "test_rand.cuh"
#include "timing.cuh" /* tests/cuda: g_st, graph_us */
extern "C" {
#include "quant/quant.h"
}

namespace cg = cooperative_groups;

constexpr int HD = 128, NH = 32, E = NH * HD, C = 4, RPC = E / C, THREADS = 256;
constexpr int WARPS = THREADS / 32, ROW_BYTES = E / 32 * 18, UB = 72 /* a row's 4 blocks */;
constexpr int RPH = RPC / NH; /* rows of a slice each CTA sums in step 4 */
constexpr int LAYERS = 32, QKV_M = 3 * E;

struct aw_smem {
    uint8_t w[RPC * UB];       /* first: 16-aligned */
    float acc[HD];             /* this CTA's partial output, read by the cluster */
    float m, l;
    alignas(16) float wacc[WARPS][HD]; /* float4 stores */
    float wm[WARPS], wl[WARPS];
    alignas(16) uint32_t xq[HD / 4]; /* o as q8: 4 blocks of 32 int8 (uint4 loads) */
    float xd[4];
    int xs[4];
};

__device__ __forceinline__ void cp_async8(void *smem, const void *g) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(s), "l"(g));
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* q pre-scaled: q * scale * log2(e), so that the softmax is in base 2 */
__global__ void __launch_bounds__(THREADS)
    attn_wo_kernel(const uint8_t *__restrict__ W, const float *__restrict__ q,
                   const __half *__restrict__ kc, const __half *__restrict__ vc, int L,
                   float *__restrict__ part, float *__restrict__ y, unsigned *counters) {
    extern __shared__ __align__(16) uint8_t raw[];
    aw_smem &s = *reinterpret_cast<aw_smem *>(raw);
    cg::cluster_group cl = cg::this_cluster();
    const int c = (int)cl.block_rank(), h = blockIdx.x / C;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

    /* 0. the slice of W_o: weights, which no kernel writes, so before the wait */
    const uint8_t *wsrc = W + (size_t)c * RPC * ROW_BYTES + (size_t)UB * h;
    for (int i = tid; i < RPC * (UB / 8); i += THREADS) {
        const int r = i / (UB / 8), k = i % (UB / 8);
        cp_async8(s.w + r * UB + 8 * k, wsrc + (size_t)r * ROW_BYTES + 8 * k);
    }
    si_cp_async_commit();
    si_pdl_trigger();
    si_pdl_wait();

    /* 1. attention over this CTA's keys [k0, k1) */
    const int kper = (L + C - 1) / C, k0 = c * kper, k1 = min(L, k0 + kper);
    const float4 qv = ((const float4 *)(q + h * HD))[lane];
    float m = -INFINITY, l = 0.0f, a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int j = k0 + warp; j < k1; j += WARPS) {
        const size_t off = (size_t)j * E + h * HD + 4 * lane;
        const uint2 kr = *(const uint2 *)(kc + off), vr = *(const uint2 *)(vc + off);
        const float2 k01 = __half22float2(*(const __half2 *)&kr.x);
        const float2 k23 = __half22float2(*(const __half2 *)&kr.y);
        float sc = qv.x * k01.x + qv.y * k01.y + qv.z * k23.x + qv.w * k23.y;
#pragma unroll
        for (int o = 16; o; o >>= 1)
            sc += __shfl_xor_sync(0xffffffffu, sc, o);
        const float mn = fmaxf(m, sc), corr = exp2f(m - mn), p = exp2f(sc - mn);
        const float2 v01 = __half22float2(*(const __half2 *)&vr.x);
        const float2 v23 = __half22float2(*(const __half2 *)&vr.y);
        l = l * corr + p;
        a[0] = a[0] * corr + p * v01.x;
        a[1] = a[1] * corr + p * v01.y;
        a[2] = a[2] * corr + p * v23.x;
        a[3] = a[3] * corr + p * v23.y;
        m = mn;
    }
    if (lane == 0) {
        s.wm[warp] = m;
        s.wl[warp] = l;
    }
    *(float4 *)&s.wacc[warp][4 * lane] = make_float4(a[0], a[1], a[2], a[3]);
    __syncthreads();
    if (tid < HD) {
        float M = -INFINITY, A = 0.0f, Ls = 0.0f;
        for (int w = 0; w < WARPS; w++)
            M = fmaxf(M, s.wm[w]);
        if (M != -INFINITY)
            for (int w = 0; w < WARPS; w++) {
                const float f = exp2f(s.wm[w] - M);
                A += s.wacc[w][tid] * f;
                Ls += s.wl[w] * f;
            }
        s.acc[tid] = A;
        if (tid == 0) {
            s.m = M;
            s.l = Ls;
        }
    }
    cl.sync();

    /* 2. the head's output from the C partials, in rank order, in every CTA alike; warp b of
     * threads 0..127 holds q8 block b */
    if (tid < HD) {
        float mr[C], lr[C], ar[C], M = -INFINITY;
#pragma unroll
        for (int r = 0; r < C; r++) {
            const aw_smem *p = cl.map_shared_rank(&s, r);
            mr[r] = p->m;
            lr[r] = p->l;
            ar[r] = p->acc[tid];
            M = fmaxf(M, mr[r]);
        }
        float A = 0.0f, Ls = 0.0f;
#pragma unroll
        for (int r = 0; r < C; r++)
            if (mr[r] != -INFINITY) {
                const float f = exp2f(mr[r] - M);
                A += ar[r] * f;
                Ls += lr[r] * f;
            }
        const float o[1] = {Ls > 0.0f ? A / Ls : 0.0f};
        int qq[1], sum;
        float d;
        q8x_block<1>(o, qq, &d, &sum);
        ((int8_t *)s.xq)[tid] = (int8_t)qq[0];
        if (lane == 0) {
            s.xd[warp] = d;
            s.xs[warp] = sum;
        }
    }
    cl.sync(); /* also: the peers are done reading this CTA's partial before it may exit */

    /* 3. the slice's rows times o */
    si_cp_async_wait<0>();
    __syncthreads();
    uint32_t xw[HD / 4];
#pragma unroll
    for (int i = 0; i < HD / 16; i++) {
        const uint4 v = ((const uint4 *)s.xq)[i];
        xw[4 * i] = v.x, xw[4 * i + 1] = v.y, xw[4 * i + 2] = v.z, xw[4 * i + 3] = v.w;
    }
    const float xd[4] = {s.xd[0], s.xd[1], s.xd[2], s.xd[3]};
    const int xs[4] = {s.xs[0], s.xs[1], s.xs[2], s.xs[3]};
    for (int r = tid; r < RPC; r += THREADS) {
        uint32_t w[tqx_q4_0::WORDS];
        tqx_q4_0::load(s.w + r * UB, 0, w);
        part[(size_t)h * E + c * RPC + r] = tqx_q4_0::dot(w, xw, xd, xs);
    }

    /* 4. the cross-head sum: the NH CTAs of rank c meet, then each sums RPH rows in head order */
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        const unsigned t = atomicAdd(&counters[c], 1u), target = (t / NH + 1) * NH;
        while ((int)(ld_acquire(&counters[c]) - target) < 0) {
        }
    }
    __syncthreads();
    if (tid < RPH) {
        const int row = c * RPC + h * RPH + tid;
        float acc = 0.0f;
        for (int g = 0; g < NH; g++)
            acc += __ldcg(&part[(size_t)g * E + row]);
        y[row] = acc;
    }
}

static void launch_fused(const uint8_t *W, const float *q, const __half *kc, const __half *vc,
                         int L, float *part, float *y, unsigned *counters) {
    cudaLaunchAttribute attr[2];
    si_cluster_attr(&attr[0], C);
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(NH * C);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = sizeof(aw_smem);
    cfg.stream = g_st;
    cfg.attrs = attr;
    cfg.numAttrs = cuda_pdl_on() ? 2 : 1;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, attn_wo_kernel, W, q, kc, vc, L, part, y, counters));
}

/* n Q4_0 blocks: hashed nibbles, fp16 scales in [0.0025, 0.01) */
__global__ void fill_q4_0_kernel(uint8_t *w, long long n, unsigned seed) {
    for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; b < n;
         b += (long long)gridDim.x * blockDim.x) {
        uint8_t *p = w + 18 * b;
        unsigned x = (unsigned)b * 2654435761u ^ seed;
        *(__half *)p = __float2half(0.0025f + 0.0075f * (float)(x & 1023) / 1024.0f);
        for (int i = 0; i < 16; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            p[2 + i] = (uint8_t)x;
        }
    }
}

static void must(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "attn_wo: %s returned %d\n", what, rc);
        exit(1);
    }
}

static std::vector<int> parse_lengths(const char *s) {
    std::vector<int> v;
    for (const char *p = s; *p;) {
        char *end;
        const long n = strtol(p, &end, 10);
        if (end == p || n < 1 || n > 8192) return {};
        v.push_back((int)n);
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return {};
    }
    return v;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 20;
    const std::vector<int> lens = parse_lengths(argc > 2 ? argv[2] : "64,128,512");
    if (reps < 1 || lens.empty()) {
        fprintf(stderr, "usage: attn_wo [reps] [kv lengths, e.g. 64,128,512 (1..8192)]\n");
        return 2;
    }
    const int lmax = *std::max_element(lens.begin(), lens.end());
    const int lpad = (lmax + 15) / 16 * 16;
    timing_init();
    CUDA_CHECK(cudaFuncSetAttribute(attn_wo_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)sizeof(aw_smem)));
    const size_t qkv_bytes = cuda_weight_alloc_bytes(SI_TYPE_Q4_0, QKV_M, E);
    const size_t wo_bytes = cuda_weight_alloc_bytes(SI_TYPE_Q4_0, E, E);
    const size_t kv_elems = (size_t)lpad * E;
    std::vector<uint8_t *> wqkv(LAYERS), wo(LAYERS);
    std::vector<__half *> kc(LAYERS), vc(LAYERS);
    for (int l = 0; l < LAYERS; l++) {
        wqkv[l] = dmalloc<uint8_t>(qkv_bytes);
        wo[l] = dmalloc<uint8_t>(wo_bytes);
        kc[l] = dmalloc<__half>(kv_elems);
        vc[l] = dmalloc<__half>(kv_elems);
        fill_q4_0_kernel<<<1024, 256, 0, g_st>>>(wqkv[l], (long long)QKV_M * (E / 32), 11u + l);
        fill_q4_0_kernel<<<1024, 256, 0, g_st>>>(wo[l], (long long)E * (E / 32), 101u + l);
    }
    CUDA_CHECK_LAUNCH();
    /* q ~ U(-1, 1) pre-scaled as the kernel takes it; K, V ~ U(-1, 1) in f16, the same in every
     * layer (the host keeps layer 0's for the reference) */
    const float qscale = 1.0f / sqrtf((float)HD) * 1.4426950408889634f;
    std::vector<float> hq(E), hqs(E);
    for (int i = 0; i < E; i++)
        hq[i] = rnd_f(), hqs[i] = hq[i] * qscale;
    std::vector<__half> hk(kv_elems), hv(kv_elems);
    for (size_t i = 0; i < kv_elems; i++)
        hk[i] = __float2half(rnd_f()), hv[i] = __float2half(rnd_f());
    for (int l = 0; l < LAYERS; l++) {
        CUDA_CHECK(cudaMemcpy(kc[l], hk.data(), kv_elems * 2, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(vc[l], hv.data(), kv_elems * 2, cudaMemcpyHostToDevice));
    }
    float *q = dmalloc<float>(E), *qs = dmalloc<float>(E), *knew = dmalloc<float>(E);
    float *vnew = dmalloc<float>(E), *qkv = dmalloc<float>(QKV_M), *y = dmalloc<float>(E);
    float *attn_out = dmalloc<float>(E), *part = dmalloc<float>((size_t)NH * E);
    CUDA_CHECK(cudaMemcpy(q, hq.data(), E * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(qs, hqs.data(), E * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(knew, hq.data(), E * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(vnew, hq.data(), E * 4, cudaMemcpyHostToDevice));
    uint8_t *xq = dmalloc<uint8_t>(CUDA_Q8X_ROW_BYTES(E)),
            *attn_q8 = dmalloc<uint8_t>(CUDA_Q8X_ROW_BYTES(E));
    CUDA_CHECK(cudaMemset(xq, 0, CUDA_Q8X_ROW_BYTES(E)));
    unsigned *counters = dmalloc<unsigned>(C);
    CUDA_CHECK(cudaMemset(counters, 0, C * sizeof(unsigned)));
    std::vector<int32_t> bt(lpad / 16);
    for (int i = 0; i < lpad / 16; i++)
        bt[i] = i;
    int32_t *block_table = dmalloc<int32_t>(bt.size()), *seq_len = dmalloc<int32_t>(1);
    int32_t *pos = dmalloc<int32_t>(1), *slot = dmalloc<int32_t>(1);
    CUDA_CHECK(cudaMemcpy(block_table, bt.data(), bt.size() * 4, cudaMemcpyHostToDevice));

    /* the CPU's W_o of layer 0 for the reference */
    std::vector<uint8_t> hwo(wo_bytes);
    CUDA_CHECK(cudaMemcpy(hwo.data(), wo[0], wo_bytes, cudaMemcpyDeviceToHost));
    std::vector<float> wdeq((size_t)E * E);
    quant_get(SI_TYPE_Q4_0)->to_float(hwo.data(), wdeq.data(), (int64_t)E * E);

    const cuda_rope_params rope = {NH, NH, HD, HD, 10000.0f, 1.0f, NULL, 0, 0};
    const cuda_attn_params ap = {NH, NH, HD, lpad / 16, 1.0f / sqrtf((float)HD), 0};
    void *scratch = dmalloc<uint8_t>(cuda_attention_scratch_bytes(&ap, 1, lmax));

    printf("attn_wo: Llama-2-7B layer shapes, batch 1, Q4_0; %d layers a graph, %d reps\n", LAYERS,
           reps);
    printf("%6s %10s %12s %12s %12s %10s\n", "keys", "floor us", "engine us", "fused us",
           "saved us", "fused err");
    int fail = 0;
    for (const int L : lens) {
        /* the check: layer 0, the fused kernel alone, on the cache as the host has it (the engine's
         * kernel below writes its new token at slot L - 1) */
        CUDA_CHECK(cudaMemcpy(kc[0], hk.data(), kv_elems * 2, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(vc[0], hv.data(), kv_elems * 2, cudaMemcpyHostToDevice));
        launch_fused(wo[0], qs, kc[0], vc[0], L, part, y, counters);
        CUDA_CHECK(cudaStreamSynchronize(g_st));
        std::vector<float> hy(E);
        CUDA_CHECK(cudaMemcpy(hy.data(), y, E * 4, cudaMemcpyDeviceToHost));
        std::vector<double> o(E);
        for (int h = 0; h < NH; h++) {
            std::vector<double> sc(L);
            double mx = -1e300, den = 0;
            for (int j = 0; j < L; j++) {
                double d = 0;
                for (int i = 0; i < HD; i++)
                    d += (double)hq[h * HD + i] * __half2float(hk[(size_t)j * E + h * HD + i]);
                sc[j] = d / sqrt((double)HD);
                mx = std::max(mx, sc[j]);
            }
            for (int j = 0; j < L; j++)
                den += sc[j] = exp(sc[j] - mx);
            for (int i = 0; i < HD; i++) {
                double a = 0;
                for (int j = 0; j < L; j++)
                    a += sc[j] * __half2float(hv[(size_t)j * E + h * HD + i]);
                o[h * HD + i] = a / den;
            }
        }
        double err = 0, mag = 1e-30;
        for (int r = 0; r < E; r++) {
            double ref = 0;
            for (int k = 0; k < E; k++)
                ref += (double)wdeq[(size_t)r * E + k] * o[k];
            err = std::max(err, std::isnan(hy[r]) ? INFINITY : fabs(hy[r] - ref));
            mag = std::max(mag, fabs(ref));
        }
        const double rel = err / mag;
        fail += !(rel <= 2e-2);

        const int32_t hl = L, hp = L - 1;
        CUDA_CHECK(cudaMemcpy(seq_len, &hl, 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(pos, &hp, 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(slot, &hp, 4, cudaMemcpyHostToDevice));
        std::vector<int> floor_ops, engine_ops, fused_ops;
        for (int l = 0; l < LAYERS; l++) {
            floor_ops.push_back(3 * l);
            engine_ops.insert(engine_ops.end(), {3 * l, 3 * l + 1, 3 * l + 2});
            fused_ops.insert(fused_ops.end(), {3 * l, 3 * l + 1});
        }
        auto qkv_gemv = [&](int l) {
            must(cuda_gemv_pre(SI_TYPE_Q4_0, wqkv[l], QKV_M, E, xq, 1, qkv, g_st), "QKV GEMV");
        };
        auto engine = [&](int op) {
            const int l = op / 3;
            if (op % 3 == 0) return qkv_gemv(l);
            if (op % 3 == 1) {
                must(cuda_attention_decode_rope(attn_out, q, E, knew, E, vnew, E, pos, slot, kc[l],
                                                vc[l], block_table, seq_len, 1, L, &rope, &ap,
                                                attn_q8, NULL, scratch, g_st),
                     "cuda_attention_decode_rope");
                return;
            }
            must(cuda_gemv_pre(SI_TYPE_Q4_0, wo[l], E, E, attn_q8, 1, y, g_st), "output GEMV");
        };
        auto fused = [&](int op) {
            const int l = op / 3;
            if (op % 3 == 0) return qkv_gemv(l);
            launch_fused(wo[l], qs, kc[l], vc[l], L, part, y, counters);
        };
        const double t0 = graph_us(reps, floor_ops, [&](int op) { qkv_gemv(op / 3); }) / LAYERS;
        const double ta = graph_us(reps, engine_ops, engine) / LAYERS;
        const double tb = graph_us(reps, fused_ops, fused) / LAYERS;
        printf("%6d %10.2f %12.2f %12.2f %12.2f %10.2e %s\n", L, t0, ta - t0, tb - t0, ta - tb, rel,
               rel <= 2e-2 ? "PASS" : "FAIL");
    }
    printf("(per layer; floor: the QKV GEMV alone; engine / fused: what attention + output "
           "projection add to it)\n");
    printf("==== attn_wo: %s\n", fail ? "FAILED" : "checks passed");
    return fail ? 1 : 0;
}
