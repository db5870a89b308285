/* attention.cu — decode attention over the paged KV cache, flash-decoding style (Dao et al.,
 * "Flash-Decoding for long-context inference", 2023): the keys of a sequence are split into
 * parts (attn_split_for); one CTA per (KV head, query row, part) computes, with an online
 * softmax (Milakov & Gimelshein 2018), an unnormalised partial output and its (max, sum) for all
 * the query heads of that KV head's GQA group, so K and V are read once per group; a second
 * kernel combines the parts (version 2 skips it when every row fits one part, as a short decode
 * step's do: the tile kernel normalises its output itself, the same bits). Keys are found
 * through the block table: position p lives in block block_table[s][p / 16], slot p % 16. Keys of
 * streaming sequences are rotated on read (attn_rotate_key8). The same kernels serve prefill for
 * head_dims the tensor-core kernel (attention_prefill.cu) lacks, one query row per token
 * (attn_rows).
 *
 * The kernel (attn_decode_tile) is memory-bound: the H200 needs ~32 KB of loads in flight per SM
 * (Little's law: 4.2 TB/s / 132 SMs x ~1 us). Each warp streams its own stages of SK keys (one
 * paged block, or half of one) through shared memory with cp.async, NS stages deep, so a warp has
 * (NS - 1) stages of K and V in flight while it computes one (hd 128: 16 KB, 8 warps per SM; the
 * "wide" variant: 8 KB, 12 warps per SM); the block-table entries of a warp's stages are read
 * ahead, one per lane. Within a stage each
 * lane owns 8 dimensions (16 bytes) of a key, head_dim / 8 lanes share a key; the lane copies
 * exactly the 16-byte pieces it later reads, so a stage needs no barrier beyond the warp. The
 * online softmax is updated once per T keys of a lane group (one max, one rescale of the
 * accumulators per T keys). The GQA group size is a template parameter (1, 2, 4, 8), so q and the
 * accumulators of absent heads cost no registers. A row's split depends on its own length and on
 * which side of ATTN_SPLIT_ROWS the step's row count is, never on the other rows: a sequence's
 * output must not depend on the other sequences of a step of up to ATTN_SPLIT_ROWS rows.
 * Version 1 (the first kernel) stays selectable for comparison: SI_CUDA_ATTN_V1=1.
 *
 * FP8 E4M3 caches (kv_elem.cuh, vLLM's --kv-cache-dtype fp8): version 2 with the element type as
 * a template parameter; a lane copies its 8 elements (8 bytes) per key with an 8-byte cp.async
 * and widens them to f16 in registers after the shared-memory read. The stages are half the
 * bytes, so a warp keeps 2 NS - 1 of them (the same bytes in flight as f16's NS). Version 1
 * reads f16 only: FP8 caches always run version 2. */
#include <stdlib.h>
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/attention.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/q8x_row.cuh"

/* N-byte (16 or 8) global->shared copy; src_bytes 0 writes zeros (keys past the part). 16 bytes
 * bypass L1 (.cg); 8 bytes (FP8 keys) can only go through it (.ca). */
template <int N>
__device__ __forceinline__ void attn_cp_async(void *smem, const void *gmem, int src_bytes) {
    static_assert(N == 16 || N == 8, "cp.async sizes used");
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    if constexpr (N == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
                     "r"(src_bytes)
                     : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem),
                     "r"(src_bytes)
                     : "memory");
}
__device__ __forceinline__ void attn_cp_async_commit(void) {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void attn_cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
/* 2^x (ex2.approx: relative error 2^-22; 2^-inf = 0) */
__device__ __forceinline__ float attn_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* The online-softmax state (max m, sum l, output acc) cleared, and this lane's 8 dimensions
 * (dc * 8 ..) of the GM query heads of KV head kvh's group from q_row, rotated by rot (the
 * fused decode step: rot[i] the angles of pair i, half of them) when rot is not NULL, then
 * rounded to f16 as the CPU reference (and ggml's f16 K matmul) does; heads past G (G < GM)
 * get q = 0 and are not written. */
template <int HD, int GM>
__device__ __forceinline__ void attn_init_rows(float (&qr)[GM][8], float (&acc)[GM][8],
                                               float (&m)[GM], float (&l)[GM],
                                               const float *q_row, int kvh, int G, int dc,
                                               const float2 *rot, int half, int neox) {
#pragma unroll
    for (int g = 0; g < GM; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            acc[g][j] = 0.0f;
            qr[g][j] = 0.0f;
        }
        if (g >= G) continue;
        const float *qh = q_row + (kvh * G + g) * HD;
#pragma unroll
        for (int j = 0; j < 8; j++) qr[g][j] = qh[dc * 8 + j];
        if (rot)
            rope_rotate8(qr[g], dc * 8, rot, half, neox, [=](int d, float p[8]) {
#pragma unroll
                for (int j = 0; j < 8; j++) p[j] = qh[d + j];
            });
#pragma unroll
        for (int j = 0; j < 8; j++) qr[g][j] = __half2float(__float2half_rn(qr[g][j]));
    }
}

/* Merges the online-softmax states (running max m, sum l, unnormalised output acc) of the lane
 * groups of a warp that hold other keys of the same query heads (lanes o = LPT .. 16 apart),
 * for the first G of GM heads; ex is the exponential the kernel's scores are in. */
template <int GM, int LPT, class E>
__device__ __forceinline__ void attn_merge_lane_groups(float (&m)[GM], float (&l)[GM],
                                                       float (&acc)[GM][8], int G, E ex) {
#pragma unroll
    for (int g = 0; g < GM; g++) {
        if (g >= G) break;
#pragma unroll
        for (int o = LPT; o < 32; o <<= 1) {
            const float om = __shfl_xor_sync(0xffffffffu, m[g], o);
            const float ol = __shfl_xor_sync(0xffffffffu, l[g], o);
            const float mn = fmaxf(m[g], om);
            const float c0 = mn == -INFINITY ? 0.0f : ex(m[g] - mn);
            const float c1 = mn == -INFINITY ? 0.0f : ex(om - mn);
            l[g] = l[g] * c0 + ol * c1;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float oa = __shfl_xor_sync(0xffffffffu, acc[g][j], o);
                acc[g][j] = acc[g][j] * c0 + oa * c1;
            }
            m[g] = mn;
        }
    }
}
__device__ __forceinline__ void attn_h8_to_f(uint4 u, float f[8]) {
    const __half2 *h = (const __half2 *)&u;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float2 a = __half22float2(h[j]);
        f[2 * j] = a.x;
        f[2 * j + 1] = a.y;
    }
}

/* Rotates the 8 elements d0..d0+7 of a key that a lane holds (kf, stored un-rotated; the head's
 * row is krow, in global or shared memory) to slot j, rounded to f16: attn_rotated_key's values,
 * from registers and vector loads where the pairing allows (rope_rotate8: NORM with the 8 inside
 * rope_dim; NEOX with rope_dim / 2 a multiple of 8), else element by element. */
template <class KV>
__device__ __forceinline__ void attn_rotate_key8(float kf[8], const typename KV::T *krow, int d0,
                                                 int j, const attn_rope &r) {
    if (d0 >= 2 * r.half) return; /* past rope_dim: not rotated */
    if (r.neox ? r.half % 8 == 0 : d0 + 8 <= 2 * r.half) {
        rope_rotate8(kf, d0, r.table + (size_t)j * r.half, r.half, r.neox,
                     [=](int d, float p[8]) { attn_h8_to_f(KV::load_h8(krow + d), p); });
#pragma unroll
        for (int k = 0; k < 8; k++) kf[k] = __half2float(__float2half_rn(kf[k]));
    } else {
#pragma unroll
        for (int k = 0; k < 8; k++) kf[k] = attn_rotated_key<KV>(krow, d0 + k, j, r);
    }
}

/* 8 floats from p (16-byte aligned) */
__device__ __forceinline__ void attn_load_f8(const float *p, float x[8]) {
    const float4 a = *(const float4 *)p, b = *(const float4 *)(p + 4);
    x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w;
    x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
}

/* 8 elements of the cache's type from floats, as one 16-byte (f16) or 8-byte (FP8) word */
template <class KV> struct alignas(8 * KV::BYTES) attn_pack8 {
    typename KV::T e[8];
};
template <class KV> __device__ __forceinline__ attn_pack8<KV> attn_to_kv8(const float x[8]) {
    attn_pack8<KV> w;
#pragma unroll
    for (int k = 0; k < 8; k++) w.e[k] = KV::from_float(x[k]);
    return w;
}

/* The fused decode step's new key and value of KV head kvh, query row r (attn_fresh): chunk c
 * of 2 * HD / 8 (k's chunks, then v's) per lane of one warp; k rotated to pos[r] (angles rot),
 * both written to the caches at slot[r] and to sm_new[0] (k) and sm_new[1] (v), where the
 * warp's stage holding key len - 1 reads them. The same values as rope_kv_kernel writes. */
template <int HD, class KV>
__device__ __forceinline__ void attn_write_new(const attn_fresh &f, int r, int kvh, int kv_dim,
                                               int slot, const float2 *rot,
                                               typename KV::T (*sm_new)[HD], int lane) {
    using W = attn_pack8<KV>;
    for (int c = lane; c < 2 * (HD / 8); c += 32) {
        const bool is_k = c < HD / 8;
        const int d0 = (is_k ? c : c - HD / 8) * 8;
        const float *row = (is_k ? f.k + (size_t)r * f.k_stride : f.v + (size_t)r * f.v_stride) +
                           (size_t)kvh * HD;
        float x[8];
        attn_load_f8(row + d0, x);
        if (is_k)
            rope_rotate8(x, d0, rot, f.rope.rope_dim / 2, f.rope.neox,
                         [=](int d, float p[8]) { attn_load_f8(row + d, p); });
        const W w = attn_to_kv8<KV>(x);
        *(W *)&sm_new[is_k ? 0 : 1][d0] = w;
        if (slot >= 0) {
            typename KV::T *cache = (typename KV::T *)(is_k ? f.k_cache : f.v_cache);
            *(W *)(cache + (size_t)slot * kv_dim + (size_t)kvh * HD + d0) = w;
        }
    }
}

/* Where the decode kernels also write their output (attn_extra, attention.cuh): quantised for
 * the output projection's GEMV (cuda_gemv_pre; q8x_row.cuh): row r's element i at q8_row(r),
 * CUDA_Q8X_ROW_BYTES(n) bytes a row of n = n_head * head_dim; and/or as f16 for its cuBLASLt
 * GEMM (cuda_gemm_pre): [row][n]. store() is called by all 32 lanes of a warp with 32
 * consecutive elements (i from `base`, a multiple of 32 as head_dim is). */
struct attn_extra_row {
    uint8_t *row; /* this row's quantised, or NULL */
    __half *h;    /* this row's f16, or NULL */
    int base, n;
    __device__ __forceinline__ void store(int i, float v) const {
        if (row) q8x_row_store1(row, n, base + i, v);
        if (h) h[base + i] = __float2half_rn(v);
    }
};
__device__ __forceinline__ attn_extra_row attn_extra_of(attn_extra ex, int r, int n, int base) {
    return {ex.q8 ? ex.q8 + (size_t)r * CUDA_Q8X_ROW_BYTES(n) : NULL,
            ex.h ? (__half *)ex.h + (size_t)r * n : NULL, base, n};
}

/* Geometry of attn_decode_tile for a head_dim: LPT lanes per key (8 elements of K and of V
 * each: 16 bytes of f16), TPW keys per warp step, SK keys per stage (inside one paged block),
 * NSTEP warp steps per stage, NS stages per warp; MINB CTAs per SM (the register bound; shared
 * memory allows as many). Shared memory (f16): ATTN_WARPS * NS stages of K then V: hd 64 64 KB
 * (3 CTAs/SM), hd 128 and 256 96 KB (2 CTAs/SM). WIDE (hd 128/256, groups <= 4, no rotation;
 * the default where it exists, unless attn_decode_config's stages = 3): two stages, 64 KB, 3
 * CTAs/SM: less in flight per warp, more warps. FP8 (KV::BYTES 1): 2 NS - 1 stages of half the
 * bytes: hd 64 56 KB, hd 128/256 80 KB, WIDE 48 KB. */
/* The end of a decode tile kernel: the ATTN_WARPS warps' partial softmax rows for the G query
 * heads of one KV head, in shared memory (maxima sm_m and sums sm_l [ATTN_WARPS][GX], unnormalised
 * outputs sm_acc [ATTN_WARPS][GX][HD] flat), merged in warp order with ex (exp2 for base-2
 * maxima, __expf for natural ones) and stored as part `part` of rows (row0 + g) * n_parts + part
 * (part_acc, part_ml); when out is not NULL (the row has this one part) it is normalised into
 * out rows row0 + g instead (attn_merge_parts would do the same with c = 1), and quantised into
 * q8 too. */
template <int HD, int GX, class E>
__device__ __forceinline__ void attn_store_merged(const float (*sm_m)[GX], const float (*sm_l)[GX],
                                                  const float *sm_acc, int G, size_t row0,
                                                  int n_parts, int part, float *out,
                                                  attn_extra_row q8, float *part_acc,
                                                  float *part_ml, E ex) {
    for (int idx = threadIdx.x; idx < G * HD; idx += ATTN_WARPS * 32) {
        const int g = idx / HD, d = idx % HD;
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < ATTN_WARPS; w++) mx = fmaxf(mx, sm_m[w][g]);
        float a = 0.0f, ls = 0.0f;
#pragma unroll
        for (int w = 0; w < ATTN_WARPS; w++) {
            const float c = mx == -INFINITY ? 0.0f : ex(sm_m[w][g] - mx);
            a += sm_acc[(w * GX + g) * HD + d] * c;
            ls += sm_l[w][g] * c;
        }
        const size_t row = (row0 + g) * n_parts + part;
        if (out) {
            const float o = ls > 0.0f ? a / ls : 0.0f;
            out[(row0 + g) * HD + d] = o;
            q8.store(idx, o); /* a warp holds 32 consecutive d: one Q8_0 block */
            continue;
        }
        part_acc[row * HD + d] = a;
        if (d == 0) {
            part_ml[2 * row] = mx;
            part_ml[2 * row + 1] = ls;
        }
    }
}

template <int HD, bool WIDE, class KV> struct attn_geo {
    static constexpr int LPT = HD / 8, TPW = 32 / LPT;
    static constexpr int SK = HD <= 128 ? 16 : 8;
    static constexpr int NSTEP = SK / TPW;
    static constexpr int NS16 = WIDE ? 2 : HD <= 64 ? 4 : 3; /* stages of f16 */
    static constexpr int NS = KV::BYTES == 2 ? NS16 : 2 * NS16 - 1;
    static constexpr int MINB = WIDE ? 3 : 2;
    static constexpr int STAGE = SK * HD; /* elements of K (then as many of V) per stage */
    static constexpr size_t SMEM = (size_t)ATTN_WARPS * NS * 2 * STAGE * KV::BYTES;
    static_assert(ATTN_KV_BLOCK % SK == 0 && SK % TPW == 0, "a stage inside one block");
    static_assert(SMEM >= (size_t)ATTN_WARPS * ATTN_MAXG * HD * sizeof(float), "merge fits");
};
/* The most keys a part may have: a warp reads its stages' block-table entries one per lane. */
#define ATTN_PART_MAX 1024
static_assert(ATTN_PART_MAX <= 32 * ATTN_WARPS * 8, "<= 32 stages per warp (SK >= 8)");

/* How a launch splits each row's keys into parts, one CTA per (KV head, row, part). keys > 0: a
 * fixed split, parts of `keys` keys. keys == 0: the split of a row depends on its length alone
 * (attn_split_keys), at most `most` parts (more only where a part would pass
 * ATTN_SPLIT_KEYS_MAX).
 * n_parts: the grid's parts, the most that any row of the launch can have. Either way a row's
 * sums never depend on the other rows of the launch (attn_split_for says which split a launch
 * takes). */
struct attn_split {
    int keys, most, min_keys, n_parts;
};
#define ATTN_SPLIT_ONE_PART 256 /* by length: rows of at most this many keys are one part */
__host__ __device__ __forceinline__ int attn_div_up(int a, int b) { return (a + b - 1) / b; }
/* the parts a row of len keys is cut into at most (non-decreasing in len, so the grid's n_parts
 * is this at the launch's longest row): by length, parts of about min_keys keys, at most `most`
 * unless parts would pass ATTN_SPLIT_KEYS_MAX keys */
__host__ __device__ __forceinline__ int attn_split_parts_max(attn_split s, int len) {
    if (s.keys > 0) return attn_div_up(len > 0 ? len : 1, s.keys);
    if (len <= ATTN_SPLIT_ONE_PART) return 1;
    return max(min(s.most, attn_div_up(len, s.min_keys)), attn_div_up(len, ATTN_SPLIT_KEYS_MAX));
}
/* keys per part of a row of len keys: a multiple of ATTN_KV_BLOCK, at most ATTN_PART_MAX */
__host__ __device__ __forceinline__ int attn_split_keys(attn_split s, int len) {
    if (s.keys > 0) return s.keys;
    const int n = len > 0 ? len : 1;
    return attn_div_up(attn_div_up(n, attn_split_parts_max(s, n)), ATTN_KV_BLOCK) * ATTN_KV_BLOCK;
}
/* the parts that hold keys of a row of len keys (0 for none) */
__host__ __device__ __forceinline__ int attn_split_parts(attn_split s, int len) {
    return len > 0 ? attn_div_up(len, attn_split_keys(s, len)) : 0;
}

/* Dimension d of one query head's output from its np parts (part_acc / part_ml rows row ..
 * row + np - 1), whose largest maximum is mx: the sums in part order, normalised (the combine
 * kernel's merge). */
template <int HD, bool LOG2>
__device__ __forceinline__ float attn_merge_parts(const float *part_acc, const float *part_ml,
                                                  size_t row, int np, int d, float mx) {
    float a = 0.0f, ls = 0.0f;
#pragma unroll 8
    for (int p = 0; p < np; p++) {
        const float2 ml = __ldcg((const float2 *)(part_ml + 2 * (row + p)));
        const float c = ml.x == -INFINITY ? 0.0f : LOG2 ? attn_exp2(ml.x - mx) : __expf(ml.x - mx);
        a += __ldcg(part_acc + (row + p) * HD + d) * c;
        ls += ml.y * c;
    }
    return ls > 0.0f ? a / ls : 0.0f;
}

/* One CTA: keys [part * part_keys, +part_keys) of query row blockIdx.y, KV head blockIdx.x, for
 * its G = n_head / n_head_kv <= GM query heads, part_keys = attn_split_keys(split, the row's
 * length). scale2 = scale * log2(e): scores, maxima and exponentials are in base 2 (part_ml too).
 * CTAs past a row's keys return at once (a merge reads only the parts a row has). Rows are
 * normalised into out directly when split.n_parts == 1 (no combine kernel).
 * NOTE: s21 (3eef2a2) had the last CTA of a split row merge its parts (per-row counters, a fence
 * and an atomic in every CTA, the merge's code in this kernel) instead of the combine kernel.
 * That code, never run in one-part launches, took the 64-sequence step from 10.7 to 11.7 ms
 * (s29), and in split launches the combine kernel measured faster: 1 / 4 / 8 requests of
 * 2,048-token prompts, Q4_0, 494 / 1,110 / 1,546 -> 514-520 / 1,214-1,216 / 1,767-1,775 t/s
 * (bench/RESULTS.md 2026-12-02 s30). Removed. */
template <int HD, int GM, bool ROT, bool WIDE, class KV>
__global__ void __launch_bounds__(ATTN_WARPS * 32, (attn_geo<HD, WIDE, KV>::MINB))
    attn_decode_tile(const float *__restrict__ q, int q_stride, const typename KV::T *kc,
                     const typename KV::T *vc, const int32_t *__restrict__ block_table,
                     attn_rows rows, int n_head, int n_head_kv, int max_blocks, float scale2,
                     attn_rope rope, attn_fresh fresh, attn_split split, float *part_acc,
                     float *part_ml, float *out, attn_extra ex) {
    using geo = attn_geo<HD, WIDE, KV>;
    using E = typename KV::T;         /* the cache's element */
    constexpr int CP = 8 * KV::BYTES; /* bytes a lane copies per key (8 elements) */
    constexpr int LPT = geo::LPT, TPW = geo::TPW, SK = geo::SK, NSTEP = geo::NSTEP;
    constexpr int NS = geo::NS, STAGE = geo::STAGE;
    /* keys per lane group per softmax update: GM * T scores live in registers */
    constexpr int T = NSTEP < 16 / GM ? NSTEP : 16 / GM;
    static_assert(NSTEP % T == 0, "whole updates per stage");
    extern __shared__ __align__(16) unsigned char attn_smem[];
    __shared__ float sm_m[ATTN_WARPS][GM], sm_l[ATTN_WARPS][GM];
    /* the fused step's new token (attn_fresh): its angles, its k and v as the cache holds them */
    __shared__ float2 sm_rot[HD / 2];
    __shared__ __align__(16) E sm_new[2][HD];
    /* launched with PDL (pdl.cuh) after the RoPE + KV write (or, fused, the QKV matmul): the
     * kernel after this one (the output matmul, whose weight loads need nothing from here) may
     * launch at once; the row lengths and block tables, which the host wrote before the step,
     * are read before the wait, and so are the first stages of keys that earlier steps wrote
     * (below); q and the rest of the cache after it */
    si_pdl_trigger();
    const int kvh = blockIdx.x, r = blockIdx.y, part = blockIdx.z;
    const int len = rows.row_pos ? rows.row_pos[r] + 1 : rows.seq_len[r];
    const int s = rows.row_seq ? rows.row_seq[r] : r; /* both loads in flight together */
    const int part_keys = attn_split_keys(split, len), n_parts = split.n_parts;
    const int p0 = part * part_keys;
    const int G = n_head / n_head_kv, kv_dim = n_head_kv * HD;
    if (p0 >= len) {
        si_pdl_wait();
        if (part == 0 && n_parts == 1) { /* no keys: zeros, as a merge writes */
            const attn_extra_row q8 = attn_extra_of(ex, r, n_head * HD, kvh * G * HD);
            for (int i = threadIdx.x; i < G * HD; i += ATTN_WARPS * 32) {
                out[((size_t)r * n_head + kvh * G) * HD + i] = 0.0f;
                q8.store(i, 0.0f);
            }
        }
        return;
    }
    const int p1 = min(p0 + part_keys, len);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tsub = lane / LPT, dc = lane % LPT;
    /* fused: key len - 1 is this step's, taken from sm_new, never copied from the cache */
    const bool fuse = !ROT && fresh.k;
    const int new_key = fuse ? len - 1 : -1;
    int new_slot = -1;
    if (fuse) { /* the host's inputs: the angles before the wait */
        new_slot = fresh.slot[r];
        rope_fill_angles(sm_rot, (float)fresh.pos[r], fresh.rope);
        __syncthreads();
    }

    /* the warp's stages: k = 0..nk-1 holds keys p0 + (warp + ATTN_WARPS * k) * SK + [0, SK);
     * lane k reads stage k's block-table entry ahead */
    const int n_units = (p1 - p0 + SK - 1) / SK;
    const int nk = n_units > warp ? (n_units - warp + ATTN_WARPS - 1) / ATTN_WARPS : 0;
    const int32_t *bt = block_table + (size_t)s * max_blocks;
    int bt_lane = 0;
    if (lane < nk) bt_lane = bt[(p0 + (warp + ATTN_WARPS * lane) * SK) / ATTN_KV_BLOCK];

    E *wsm = (E *)attn_smem + (size_t)warp * NS * 2 * STAGE; /* [NS][K, V][SK][HD] */
    const size_t col = (size_t)kvh * HD + dc * 8;
    /* Stage k into buffer k % NS: the lane's (key t, 8 elements dc) pieces; keys past p1 (the
     * tail of the last block, unwritten) are zero-filled. Every lane commits a group per call,
     * empty or not, so wait_group counts stages. */
    auto issue = [&](int k) {
        if (k < nk) {
            const int blk = __shfl_sync(0xffffffffu, bt_lane, k);
            const int key0 = p0 + (warp + ATTN_WARPS * k) * SK;
            const size_t row0 = (size_t)blk * ATTN_KV_BLOCK + key0 % ATTN_KV_BLOCK;
            E *kd = wsm + (k % NS) * 2 * STAGE, *vd = kd + STAGE;
#pragma unroll
            for (int i = 0; i < NSTEP; i++) {
                const int t = i * TPW + tsub;
                const size_t off = (row0 + t) * kv_dim + col;
                const int nb = key0 + t < p1 && key0 + t != new_key ? CP : 0;
                attn_cp_async<CP>(kd + t * HD + dc * 8, kc + off, nb);
                attn_cp_async<CP>(vd + t * HD + dc * 8, vc + off, nb);
            }
        }
        attn_cp_async_commit();
    };
    /* Keys from `written` on may have been written by this step's RoPE kernel: in a decode row
     * (one new token a sequence, no row_pos) only the last, len - 1 (none when fused: that one
     * is not copied); a streaming sequence's or a prefill row's could be anywhere. The stages
     * wholly before it are issued before the wait (warp-uniform), while the kernels before this
     * one may still run. */
    const int written = ROT || rows.row_pos ? p0 : fuse ? len : len - 1;
    bool waited = false;
#pragma unroll
    for (int k = 0; k < NS - 1; k++) {
        if (!waited && (k >= nk || p0 + (warp + ATTN_WARPS * k + 1) * SK > written)) {
            si_pdl_wait();
            waited = true;
        }
        issue(k);
    }
    if (!waited) si_pdl_wait();
    const bool rotate = ROT && rope.on_read[s];
    /* the warp whose stage holds the new key writes it (its own stage reads it after a
     * __syncwarp of the loop below) */
    if (fuse && new_key >= p0 && new_key < p1 && warp == (new_key - p0) / SK % ATTN_WARPS)
        attn_write_new<HD, KV>(fresh, r, kvh, kv_dim, new_slot, sm_rot, sm_new, lane);
    float qr[GM][8], acc[GM][8], m[GM], l[GM];
    attn_init_rows<HD, GM>(qr, acc, m, l, q + (size_t)r * q_stride, kvh, G, dc,
                           fuse ? sm_rot : NULL, fresh.rope.rope_dim / 2, fresh.rope.neox);

    for (int k = 0; k < nk; k++) {
        __syncwarp(); /* every lane is done with stage k - 1, whose buffer is refilled now */
        issue(k + NS - 1);
        attn_cp_async_wait<NS - 1>(); /* stage k has landed */
        __syncwarp();                 /* and is visible to the whole warp (rotation partners) */
        const E *kd = wsm + (k % NS) * 2 * STAGE, *vd = kd + STAGE;
        const int key0 = p0 + (warp + ATTN_WARPS * k) * SK;
#pragma unroll
        for (int i0 = 0; i0 < NSTEP; i0 += T) {
            float sc[GM][T];
#pragma unroll
            for (int i = 0; i < T; i++) {
                const int t = (i0 + i) * TPW + tsub;
                const bool valid = key0 + t < p1;
                float kf[8];
                attn_h8_to_f(KV::load_h8((key0 + t == new_key ? sm_new[0] : kd + t * HD) + dc * 8),
                             kf);
                if (ROT && rotate && valid)
                    attn_rotate_key8<KV>(kf, kd + t * HD, dc * 8, key0 + t, rope);
#pragma unroll
                for (int g = 0; g < GM; g++) {
                    float d = 0.0f;
#pragma unroll
                    for (int j = 0; j < 8; j++) d = fmaf(qr[g][j], kf[j], d);
#pragma unroll
                    for (int o = LPT / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
                    sc[g][i] = valid ? d * scale2 : -INFINITY;
                }
            }
#pragma unroll
            for (int g = 0; g < GM; g++) {
                float mt = sc[g][0];
#pragma unroll
                for (int i = 1; i < T; i++) mt = fmaxf(mt, sc[g][i]);
                const float mn = fmaxf(m[g], mt);
                const float mu = mn == -INFINITY ? 0.0f : mn; /* no key yet: all weights 0 */
                const float c = attn_exp2(m[g] - mu);
                l[g] *= c;
#pragma unroll
                for (int j = 0; j < 8; j++) acc[g][j] *= c;
#pragma unroll
                for (int i = 0; i < T; i++) {
                    sc[g][i] = attn_exp2(sc[g][i] - mu);
                    l[g] += sc[g][i];
                }
                m[g] = mn;
            }
#pragma unroll
            for (int i = 0; i < T; i++) {
                const int t = (i0 + i) * TPW + tsub;
                float vf[8];
                attn_h8_to_f(KV::load_h8((key0 + t == new_key ? sm_new[1] : vd + t * HD) + dc * 8),
                             vf);
#pragma unroll
                for (int g = 0; g < GM; g++)
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[g][j] = fmaf(sc[g][i], vf[j], acc[g][j]);
            }
        }
    }
    attn_cp_async_wait<0>(); /* only empty groups are left; the stages become the merge buffer */

    /* merge the TPW key groups of the warp, then the warps */
    attn_merge_lane_groups<GM, LPT>(m, l, acc, GM, [](float x) { return attn_exp2(x); });
    float *sm_acc = (float *)attn_smem; /* [ATTN_WARPS][GM][HD], over the stages */
    __syncthreads();                    /* every warp is done with its stages */
    if (tsub == 0) {
#pragma unroll
        for (int g = 0; g < GM; g++) {
            float4 *dst = (float4 *)(sm_acc + (warp * GM + g) * HD + dc * 8);
            dst[0] = make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
            dst[1] = make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
            if (dc == 0) {
                sm_m[warp][g] = m[g];
                sm_l[warp][g] = l[g];
            }
        }
    }
    __syncthreads();
    /* out directly when the launch's rows are one part; else the parts, merged by the combine
     * kernel */
    const attn_extra_row q8 = attn_extra_of(ex, r, n_head * HD, kvh * G * HD);
    attn_store_merged<HD, GM>(sm_m, sm_l, sm_acc, G, (size_t)r * n_head + kvh * G, n_parts, part,
                              n_parts == 1 ? out : NULL, q8, part_acc, part_ml,
                              [](float x) { return attn_exp2(x); });
}

/* Version 1 (SI_CUDA_ATTN_V1=1, for comparison): one key per lane group per step, an online-
 * softmax update per key, loads issued one step ahead at most.
 * ROT: the batch may hold streaming sequences (rope.on_read not NULL). A separate instantiation,
 * so that the rotation's registers do not cost the usual case its third CTA per SM (measured:
 * 64 sequences x 640 keys 360 us at 3 CTAs/SM, 490 us at 2; head_dim 256 would spill at 3). */
template <int HD, bool ROT>
__global__ void __launch_bounds__(ATTN_WARPS * 32, ROT || HD > 128 ? 2 : 3)
    attn_decode_part_v1(const float *__restrict__ q, int q_stride, const __half *__restrict__ kc,
                     const __half *__restrict__ vc, const int32_t *__restrict__ block_table,
                     attn_rows rows, int n_head, int n_head_kv, int max_blocks, float scale,
                     attn_rope rope, int n_parts, float *part_acc, float *part_ml) {
    constexpr int LPT = HD / 8, TPW = 32 / LPT;
    __shared__ float sm_acc[ATTN_WARPS][ATTN_MAXG][HD];
    __shared__ float sm_m[ATTN_WARPS][ATTN_MAXG], sm_l[ATTN_WARPS][ATTN_MAXG];
    const int kvh = blockIdx.x, r = blockIdx.y, part = blockIdx.z;
    const int s = rows.row_seq ? rows.row_seq[r] : r;
    const int len = rows.row_pos ? rows.row_pos[r] + 1 : rows.seq_len[r];
    const bool rotate = ROT && rope.on_read[s];
    const int G = n_head / n_head_kv, kv_dim = n_head_kv * HD;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tsub = lane / LPT, dc = lane % LPT;
    const int p0 = part * ATTN_PART, p1 = min(p0 + ATTN_PART, len);

    float qr[ATTN_MAXG][8], acc[ATTN_MAXG][8], m[ATTN_MAXG], l[ATTN_MAXG];
    attn_init_rows<HD, ATTN_MAXG>(qr, acc, m, l, q + (size_t)r * q_stride, kvh, G, dc, NULL, 0,
                                  0);
    const int32_t *bt = block_table + (size_t)s * max_blocks;
    for (int p = p0 + warp * TPW + tsub; p - tsub < p1; p += ATTN_WARPS * TPW) {
        const bool valid = p < p1;
        float kf[8], vf[8];
        if (valid) {
            const size_t off =
                ((size_t)bt[p / ATTN_KV_BLOCK] * ATTN_KV_BLOCK + p % ATTN_KV_BLOCK) * kv_dim +
                               (size_t)kvh * HD + dc * 8;
            const uint4 kv4 = __ldg((const uint4 *)(kc + off));
            const uint4 vv4 = __ldg((const uint4 *)(vc + off));
            const __half2 *k2 = (const __half2 *)&kv4, *v2 = (const __half2 *)&vv4;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 a = __half22float2(k2[j]), b = __half22float2(v2[j]);
                kf[2 * j] = a.x; kf[2 * j + 1] = a.y;
                vf[2 * j] = b.x; vf[2 * j + 1] = b.y;
            }
            if (rotate) attn_rotate_key8<kv_f16>(kf, kc + off - dc * 8, dc * 8, p, rope);
        }
#pragma unroll
        for (int g = 0; g < ATTN_MAXG; g++) {
            if (g >= G) break;
            float d = 0.0f;
            if (valid) {
#pragma unroll
                for (int j = 0; j < 8; j++) d += qr[g][j] * kf[j];
            }
#pragma unroll
            for (int o = LPT / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
            if (valid) {
                const float sc = d * scale, mn = fmaxf(m[g], sc);
                const float c = __expf(m[g] - mn), pw = __expf(sc - mn);
                l[g] = l[g] * c + pw;
#pragma unroll
                for (int j = 0; j < 8; j++) acc[g][j] = acc[g][j] * c + pw * vf[j];
                m[g] = mn;
            }
        }
    }
    /* merge the TPW key groups of the warp, then the warps */
    attn_merge_lane_groups<ATTN_MAXG, LPT>(m, l, acc, G, [](float x) { return __expf(x); });
#pragma unroll
    for (int g = 0; g < ATTN_MAXG; g++) {
        if (g >= G) break;
        if (tsub == 0) {
#pragma unroll
            for (int j = 0; j < 8; j++) sm_acc[warp][g][dc * 8 + j] = acc[g][j];
            if (dc == 0) { sm_m[warp][g] = m[g]; sm_l[warp][g] = l[g]; }
        }
    }
    __syncthreads();
    /* version 1 always leaves the combine to its kernel: no out */
    attn_store_merged<HD, ATTN_MAXG>(sm_m, sm_l, &sm_acc[0][0][0], G, (size_t)r * n_head + kvh * G,
                                     n_parts, part, (float *)NULL, attn_extra_row{NULL, NULL, 0, 0},
                                     part_acc, part_ml, [](float x) { return __expf(x); });
}

/* Out row r, head blockIdx.x: the row's parts (those holding keys: attn_split_parts) merged
 * and normalised. LOG2: part maxima in base 2 (version 2), else natural (version 1). The maximum
 * is taken by all threads at once and the sums are unrolled, so the parts' loads overlap (one
 * long sequence has 16+ parts); the sums run in part order, whatever the batch. */
template <int HD, bool LOG2>
__global__ void __launch_bounds__(HD)
    attn_decode_combine(float *out, attn_extra ex, const float *part_acc,
                        const float *part_ml, attn_rows rows, int n_head, attn_split split) {
    __shared__ float sm_mx[HD / 32];
    si_pdl_trigger(); /* the output matmul after it may launch now (pdl.cuh) */
    const int h = blockIdx.x, r = blockIdx.y, d = threadIdx.x;
    const int len = rows.row_pos ? rows.row_pos[r] + 1 : rows.seq_len[r];
    const int n_parts = split.n_parts, np = min(n_parts, attn_split_parts(split, len));
    const size_t row0 = ((size_t)r * n_head + h) * n_parts;
    float mx = -INFINITY;
    for (int p = d; p < np; p += HD) mx = fmaxf(mx, part_ml[2 * (row0 + p)]);
    mx = si_warp_max(mx);
    if (d % 32 == 0) sm_mx[d / 32] = mx;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < HD / 32; w++) mx = fmaxf(mx, sm_mx[w]);
    const float o = attn_merge_parts<HD, LOG2>(part_acc, part_ml, row0, np, d, mx);
    out[((size_t)r * n_head + h) * HD + d] = o;
    attn_extra_of(ex, r, n_head * HD, h * HD).store(d, o);
}

/* ---- host side ---- */

/* 0: not read from the environment yet; stages 0: the head_dim's default. g_attn_part: keys per
 * part of a fixed split, or 0: the default split (attn_split_for). g_split_parts: the most parts
 * a short step's row is cut into, or 0: attn_split_for's. g_split_rows: the most rows a short
 * step has (ATTN_SPLIT_ROWS; timing knob SI_CUDA_ATTN_SPLIT_ROWS=N, 1..64: a sequence's output is
 * then the same alone and in any step of up to N rows). */
static int g_attn_version = 0, g_attn_part = 0, g_attn_stages = 0, g_split_parts = 0;
static int g_split_keys = 0, g_split_rows = ATTN_SPLIT_ROWS;

static bool attn_part_ok(int k) {
    return k >= ATTN_KV_BLOCK && k <= ATTN_PART_MAX && k % ATTN_KV_BLOCK == 0;
}

static void attn_config_defaults(void) {
    if (g_attn_version) return;
    const char *v1 = getenv("SI_CUDA_ATTN_V1");
    const char *pk = getenv("SI_CUDA_ATTN_PART"), *st = getenv("SI_CUDA_ATTN_STAGES");
    const char *sc = getenv("SI_CUDA_ATTN_SPLIT_PARTS"), *sk = getenv("SI_CUDA_ATTN_SPLIT_KEYS");
    const char *sr = getenv("SI_CUDA_ATTN_SPLIT_ROWS");
    if (sr && atoi(sr) >= 1 && atoi(sr) <= 64) g_split_rows = atoi(sr);
    g_attn_stages = st && atoi(st) == 3 ? 3 : 0;
    g_attn_part = pk && attn_part_ok(atoi(pk)) ? atoi(pk) : 0;
    g_split_parts = sc && atoi(sc) >= 1 ? atoi(sc) : 0;
    g_split_keys = sk && attn_part_ok(atoi(sk)) ? atoi(sk) : 0;
    g_attn_version = v1 && atoi(v1) == 1 ? 1 : 2;
}

void attn_decode_config(int version, int part_keys, int stages) {
    attn_config_defaults();
    if (stages >= 0) g_attn_stages = stages == 3 ? 3 : 0;
    if (version == 1 || version == 2) g_attn_version = version;
    if (part_keys == 0 || attn_part_ok(part_keys)) g_attn_part = part_keys;
}

/* the kernel version in force for p's caches (version 1 reads f16 only) */
static int attn_version(const cuda_attn_params *p) {
    attn_config_defaults();
    return p->kv_dtype == SI_KV_F16 ? g_attn_version : 2;
}

/* The split of a launch of n_rows query rows of at most n_kv keys. Version 1: ATTN_PART keys a
 * part; a configured part size (attn_decode_config, SI_CUDA_ATTN_PART): that. By default, a step
 * of more than ATTN_SPLIT_ROWS rows takes ATTN_PART_V2 keys a part, and a shorter one splits
 * each row by its length, into parts of about ATTN_SPLIT_KEYS_KVH keys a KV head, at most
 * ATTN_SPLIT_PARTS: one Llama-2-7B sequence's 640 keys are then 3 CTAs a KV head instead of
 * one. Both are fixed for a row count's side of ATTN_SPLIT_ROWS, so a row gets the same sums
 * alone and in any step of up to that many rows. */
static attn_split attn_split_for(const cuda_attn_params *p, int n_rows, int n_kv) {
    attn_config_defaults();
    /* by length: parts of ATTN_SPLIT_KEYS_KVH keys a KV head (so a row's CTAs depend on its
     * length, not on the GQA group), 64 to ATTN_SPLIT_KEYS_MAX keys */
    const int min_keys = min(max(ATTN_SPLIT_KEYS_KVH * p->n_head_kv, 64), ATTN_SPLIT_KEYS_MAX);
    attn_split s = {0, 0, g_split_keys ? g_split_keys : min_keys / 16 * 16, 0};
    if (attn_version(p) == 1) s.keys = ATTN_PART;
    else if (g_attn_part > 0) s.keys = g_attn_part;
    else if (n_rows > g_split_rows) s.keys = ATTN_PART_V2;
    else s.most = g_split_parts > 0 ? g_split_parts : ATTN_SPLIT_PARTS;
    s.n_parts = attn_split_parts_max(s, n_kv);
    return s;
}

/* the wide variant exists for these (GM 8 and the rotation need more registers than 3 CTAs/SM
 * allow: they would spill) */
template <int HD, int GM, bool ROT> struct attn_has_wide {
    static constexpr bool value = HD >= 128 && GM <= 4 && !ROT;
};

template <int HD, int GM, bool ROT, bool WIDE, class KV> static void attn_smem_opt_in(void) {
    CUDA_CHECK(cudaFuncSetAttribute(attn_decode_tile<HD, GM, ROT, WIDE, KV>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)attn_geo<HD, WIDE, KV>::SMEM));
    CUDA_CHECK(cudaFuncSetAttribute(attn_decode_tile<HD, GM, ROT, WIDE, KV>,
                                    cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared));
}
template <int HD, int GM, class KV> static void attn_smem_opt_in_g(void) {
    attn_smem_opt_in<HD, GM, false, false, KV>();
    attn_smem_opt_in<HD, GM, true, false, KV>();
    attn_smem_opt_in<HD, GM, false, attn_has_wide<HD, GM, false>::value, KV>();
}
template <int HD, class KV> static void attn_smem_opt_in_hd(void) {
    attn_smem_opt_in_g<HD, 1, KV>();
    attn_smem_opt_in_g<HD, 2, KV>();
    attn_smem_opt_in_g<HD, 4, KV>();
    attn_smem_opt_in_g<HD, 8, KV>();
}
template <class KV> static void attn_smem_opt_in_kv(void) {
    attn_smem_opt_in_hd<64, KV>();
    attn_smem_opt_in_hd<128, KV>();
    attn_smem_opt_in_hd<256, KV>();
}
/* Kernels above 48 KB of shared memory opt in, once (not a stream operation: done from
 * attn_decode_scratch_bytes too, so it has happened before any graph capture). */
static void attn_raise_smem_limit(void) {
    static bool done = false;
    if (done) return;
    attn_smem_opt_in_kv<kv_f16>();
    attn_smem_opt_in_kv<kv_fp8>();
    done = true;
}

/* scratch: the rotation table of keys rotated on read (always reserved: whether a sequence
 * needs it is only known on the device), then the parts' outputs and (max, sum) */
size_t attn_decode_scratch_bytes(const cuda_attn_params *p, int n_rows, int max_kv_len) {
    attn_raise_smem_limit();
    const int n_kv = max_kv_len > 0 ? max_kv_len : 1;
    /* a launch of r <= n_rows rows: the most parts of either side of ATTN_SPLIT_ROWS */
    attn_config_defaults();
    const int few = n_rows < g_split_rows ? n_rows : g_split_rows;
    const size_t parts_many = (size_t)n_rows * attn_split_for(p, n_rows, n_kv).n_parts;
    const size_t parts_few = (size_t)few * attn_split_for(p, few, n_kv).n_parts;
    return rope_cos_sin_table_bytes(n_kv, p->head_dim) +
           (parts_many > parts_few ? parts_many : parts_few) * p->n_head * (p->head_dim + 2) *
               sizeof(float);
}

extern "C" size_t cuda_attention_scratch_bytes(const cuda_attn_params *p, int n_seqs,
                                               int max_kv_len) {
    return attn_decode_scratch_bytes(p, n_seqs, max_kv_len);
}

struct attn_launch_args {
    float *out;
    const float *q;
    int q_stride;
    const void *kc, *vc; /* of the launch's KV element type */
    const int32_t *bt;
    attn_rows rows;
    int n_rows;
    attn_split split;
    attn_rope rope;
    attn_fresh fresh;
    attn_extra ex;
    const cuda_attn_params *p;
    float *part_acc, *part_ml;
    cudaStream_t st;
};

template <int HD, int GM, bool ROT, bool WIDE, class KV>
static void attn_launch_tile(const attn_launch_args &a) {
    const cuda_attn_params *p = a.p;
    const dim3 grid(p->n_head_kv, a.n_rows, a.split.n_parts);
    using T = typename KV::T;
    si_launch_pdl(attn_decode_tile<HD, GM, ROT, WIDE, KV>, grid, ATTN_WARPS * 32,
                  attn_geo<HD, WIDE, KV>::SMEM, a.st, a.q, a.q_stride, (const T *)a.kc,
                  (const T *)a.vc, a.bt, a.rows, p->n_head, p->n_head_kv, p->max_blocks,
                  p->scale * 1.4426950408889634f, a.rope, a.fresh, a.split, a.part_acc, a.part_ml,
                  a.out, a.ex);
}

template <int HD, int GM, class KV> static void attn_launch_g(const attn_launch_args &a) {
    constexpr bool has_wide = attn_has_wide<HD, GM, false>::value;
    if (a.rope.on_read) attn_launch_tile<HD, GM, true, false, KV>(a);
    /* the two-stage variant where it exists: on the H200, fp8 64 x 640 keys ran 133.7 -> 107.7
     * us a layer with it (2026-11-30 s4); f16 gained 1.4-1.5 % in the 64 x (512 + 128) engine
     * run and 0-0.7 % at batch 1 of the 7B shapes (s7, bench/RESULTS.md) */
    else if (has_wide && (g_attn_stages != 3 || KV::BYTES == 1))
        attn_launch_tile<HD, GM, false, has_wide, KV>(a);
    else attn_launch_tile<HD, GM, false, false, KV>(a);
}

/* version 1 only for kv_f16 (attn_version) */
template <int HD, class KV> static void attn_launch(const attn_launch_args &a, int version) {
    const cuda_attn_params *p = a.p;
    const bool rot = a.rope.on_read != NULL, v1 = version == 1 && KV::BYTES == 2;
    const __half *kc = (const __half *)a.kc, *vc = (const __half *)a.vc; /* v1: f16 */
    const int n_parts = a.split.n_parts;
    if (v1) {
        const dim3 grid(p->n_head_kv, a.n_rows, n_parts);
        if (rot)
            attn_decode_part_v1<HD, true><<<grid, ATTN_WARPS * 32, 0, a.st>>>(
                a.q, a.q_stride, kc, vc, a.bt, a.rows, p->n_head, p->n_head_kv,
                p->max_blocks, p->scale, a.rope, n_parts, a.part_acc, a.part_ml);
        else
            attn_decode_part_v1<HD, false><<<grid, ATTN_WARPS * 32, 0, a.st>>>(
                a.q, a.q_stride, kc, vc, a.bt, a.rows, p->n_head, p->n_head_kv,
                p->max_blocks, p->scale, a.rope, n_parts, a.part_acc, a.part_ml);
    } else {
        const int G = p->n_head / p->n_head_kv;
        if (G <= 1) attn_launch_g<HD, 1, KV>(a);
        else if (G <= 2) attn_launch_g<HD, 2, KV>(a);
        else if (G <= 4) attn_launch_g<HD, 4, KV>(a);
        else attn_launch_g<HD, 8, KV>(a);
    }
    CUDA_CHECK_LAUNCH();
    /* the tile kernel wrote out: every row fits one part (a decode step's short rows). Else the
     * combine kernel, launched in full stream order (not PDL), so that the output projection's
     * GEMV, which streams weights before its PDL wait, cannot launch while the tile kernel still
     * runs (that cost F16 7-19 % at 1-8 requests: bench/RESULTS.md 2026-12-01 s21, call 7) */
    if (!v1 && n_parts == 1) return;
    if (v1)
        attn_decode_combine<HD, false><<<dim3(p->n_head, a.n_rows), HD, 0, a.st>>>(
            a.out, a.ex, a.part_acc, a.part_ml, a.rows, p->n_head, a.split);
    else
        attn_decode_combine<HD, true><<<dim3(p->n_head, a.n_rows), HD, 0, a.st>>>(
            a.out, a.ex, a.part_acc, a.part_ml, a.rows, p->n_head, a.split);
    CUDA_CHECK_LAUNCH();
}

int attn_decode_rows(float *out, const float *q, int q_stride, const void *k_cache,
                     const void *v_cache, const int32_t *block_table, attn_rows rows,
                     int n_rows, int max_kv_len, const uint8_t *rope_on_read,
                     const cuda_rope_params *rope, const cuda_attn_params *p, void *scratch,
                     cudaStream_t stream, const attn_fresh *fresh, attn_extra ex) {
    if (n_rows <= 0) return 0;
    if (p->n_head_kv <= 0 || p->n_head % p->n_head_kv || p->n_head / p->n_head_kv > ATTN_MAXG)
        return -1;
    if (rope_on_read && (!rope || rope->rope_dim > p->head_dim || rope->rope_dim % 2)) return -1;
    const bool fp8 = p->kv_dtype == SI_KV_FP8_E4M3;
    if (!fp8 && p->kv_dtype != SI_KV_F16) return -1;
    decltype(&attn_launch<64, kv_f16>) launch;
    switch (p->head_dim) {
    case 64: launch = fp8 ? attn_launch<64, kv_fp8> : attn_launch<64, kv_f16>; break;
    case 128: launch = fp8 ? attn_launch<128, kv_fp8> : attn_launch<128, kv_f16>; break;
    case 256: launch = fp8 ? attn_launch<256, kv_fp8> : attn_launch<256, kv_f16>; break;
    default: return -1;
    }
    attn_raise_smem_limit();
    const int version = attn_version(p);
    const int n_kv = max_kv_len > 0 ? max_kv_len : 1;
    const attn_split split = attn_split_for(p, n_rows, n_kv);
    float2 *table = (float2 *)scratch;
    float *part_acc = (float *)((char *)scratch + rope_cos_sin_table_bytes(n_kv, p->head_dim));
    const attn_rope ar = {rope_on_read, table, rope_on_read ? rope->rope_dim / 2 : 0,
                          rope_on_read ? rope->neox : 0};
    if (rope_on_read) rope_cos_sin_table(table, n_kv, rope, stream);
    attn_fresh none = {};
    attn_launch_args a = {out, q, q_stride, k_cache, v_cache, block_table, rows, n_rows,
                          split, ar, fresh ? *fresh : none, ex, p, part_acc,
                          part_acc + (size_t)n_rows * p->n_head * split.n_parts * p->head_dim,
                          stream};
    launch(a, version);
    return 0;
}

extern "C" int cuda_attention_decode(float *out, const float *q, int q_stride,
                                     const void *k_cache, const void *v_cache,
                                     const int32_t *block_table, const int32_t *seq_len,
                                     int n_seqs, int max_kv_len, const uint8_t *rope_on_read,
                                     const cuda_rope_params *rope, const cuda_attn_params *p,
                                     void *scratch, cudaStream_t stream) {
    const attn_rows rows = {seq_len, NULL, NULL};
    return attn_decode_rows(out, q, q_stride, k_cache, v_cache, block_table, rows, n_seqs,
                            max_kv_len, rope_on_read, rope, p, scratch, stream, NULL,
                            attn_extra{NULL, NULL});
}

extern "C" int cuda_attention_decode_rope(float *out, const float *q, int q_stride,
                                          const float *k, int k_stride, const float *v,
                                          int v_stride, const int32_t *pos, const int32_t *slot,
                                          void *k_cache, void *v_cache,
                                          const int32_t *block_table, const int32_t *seq_len,
                                          int n_seqs, int max_kv_len,
                                          const cuda_rope_params *rope,
                                          const cuda_attn_params *p, void *out_q8,
                                          void *out_h, void *scratch, cudaStream_t stream) {
    /* the tile kernel (version 2) with its 8-element rotation: rope_dim a multiple of 16 */
    if (attn_version(p) != 2 || rope->kv_dtype != p->kv_dtype || rope->rope_dim <= 0 ||
        rope->rope_dim > p->head_dim || rope->rope_dim % 16)
        return 1;
    if (out_q8 && (p->n_head * p->head_dim) % 128) return -1; /* q8x rows stay 16-aligned */
    const attn_rows rows = {seq_len, NULL, NULL};
    const attn_fresh fresh = {k, v, k_stride, v_stride, pos, slot, k_cache, v_cache,
                              rope_args_of(rope)};
    return attn_decode_rows(out, q, q_stride, k_cache, v_cache, block_table, rows, n_seqs,
                            max_kv_len, NULL, rope, p, scratch, stream, &fresh,
                            attn_extra{(uint8_t *)out_q8, out_h});
}
