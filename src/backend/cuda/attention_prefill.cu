/* attention_prefill.cu — causal prefill attention over the paged KV cache on tensor cores,
 * FlashAttention-2 style (Dao 2023): one CTA per (query head, query tile of PF_BM rows of one
 * sequence); each of its PF_WARPS warps owns 16 query rows and walks the keys in steps of PF_BN
 * with an online softmax (Milakov & Gimelshein 2018), so scores never leave registers. Products
 * are mma.sync m16n8k16 with f16 inputs and f32 accumulation: q is rounded to f16 as the CPU
 * reference rounds it; the softmax weights are rounded to f16 before the product with V, as the
 * CPU reference rounds its weights (there after normalising, here before: the same relative
 * rounding, 2^-11 at most).
 *
 * Query tiles never straddle a sequence and are aligned to positions (a tile holds positions
 * [PF_BM * i, PF_BM * (i + 1)) of its sequence), so with PF_BN == PF_BM only the last key step
 * of a tile needs the causal mask. The tiles are listed on the device (attn_prefill_tiles: no
 * host sync, so launches can be captured in CUDA graphs); the grid is sized by the host bound
 * n_tokens / PF_BM + 2 * n_seqs and surplus CTAs exit. The latest tiles (the most keys) start
 * first.
 *
 * K/V come through the block table, 16-byte cp.async per (key, 8 dims), double-buffered; keys
 * past the tile's last position are zero-filled and never read from the cache (their blocks may
 * not exist yet). FP8 E4M3 caches (kv_elem.cuh): the 16-byte copies (16 dims) land in a
 * double-buffered byte staging area, and once a step has landed the CTA widens it, exactly, into
 * a single f16 K/V tile for ldmatrix (one more pass through shared memory and one more barrier
 * per step; the copies still overlap the previous step's products). Streaming sequences' keys
 * are rotated by slot in shared memory once a step has landed (attn_rotated_key's arithmetic).
 * head_dims other than 64 and 128, and steps of at most PF_FEW_TOKENS tokens, run the decode
 * kernels with one query row per token (attn_decode_rows). */
#include <algorithm>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/mma.cuh"

/* Steps of this many tokens or fewer (a decode step's size, or decodes mixed with a short prompt
 * chunk) run the decode kernel, one query row per token: a token then gets the arithmetic of a
 * decode step, bit for bit, whatever it is batched with (so a request's greedy ids do not
 * depend on which prompt chunks shared its steps: test_cuda_model's engine exactness), and no
 * 64-row tile runs nearly empty. GEMV_ROWS_MAX: the matmuls' own row-count boundary. */
#define PF_FEW_TOKENS GEMV_ROWS_MAX
#define PF_BM 64 /* query rows per CTA */
#define PF_BN 64 /* keys per step; == PF_BM so only a tile's last step is masked */
#define PF_WARPS (PF_BM / 16)
#define PF_THREADS (PF_WARPS * 32)
#define PF_PAD 8 /* halves of padding per shared row: ldmatrix rows then hit distinct banks */
#define PF_SCAN_THREADS 1024

static bool pf_supported(int head_dim) { return head_dim == 64 || head_dim == 128; }

/* most query tiles n_tokens tokens of n_seqs sequences can form: a run of L tokens touches at
 * most floor(L / PF_BM) + 2 aligned windows, and every tile holds a token */
static int pf_max_tiles(int n_tokens, int n_seqs) {
    const long long bound = (long long)n_tokens / PF_BM + 2LL * n_seqs;
    return (int)(bound < n_tokens ? bound : n_tokens);
}

/* ---- the tile list ---- */

/* One query tile: rows t0 .. t0 + n_rows - 1 of the batch, sequence seq, positions from pos0. */
struct __align__(16) pf_tile {
    int t0, n_rows, seq, pos0;
};
/* in scratch: the count, padded to 16 bytes, then the tiles in batch order */
struct pf_tile_list {
    int count, pad_[3];
    pf_tile tile[1]; /* [cap] */
};
static size_t pf_tile_list_bytes(int cap) {
    return sizeof(pf_tile_list) + (size_t)(cap - 1) * sizeof(pf_tile);
}

/* A token starts a tile when it starts its sequence's run or an aligned window; the tiles
 * partition the batch in order, so a tile ends where the next starts. One CTA scans the batch
 * in chunks (warp ballots, then a scan of the warp counts), then fills in each tile. */
__global__ void __launch_bounds__(PF_SCAN_THREADS)
    attn_prefill_tiles(const int32_t *__restrict__ seq, const int32_t *__restrict__ pos,
                       int n_tokens, int cap, pf_tile_list *list) {
    __shared__ int warp_off[PF_SCAN_THREADS / 32];
    __shared__ int chunk_total;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int base = 0;
    for (int c0 = 0; c0 < n_tokens; c0 += PF_SCAN_THREADS) {
        const int t = c0 + threadIdx.x;
        const bool start = t < n_tokens && (t == 0 || seq[t] != seq[t - 1] || pos[t] % PF_BM == 0);
        const unsigned ballot = __ballot_sync(0xffffffffu, start);
        if (lane == 0) warp_off[warp] = __popc(ballot);
        __syncthreads();
        if (warp == 0) {
            const int n = warp_off[lane];
            int incl = n;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const int y = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o) incl += y;
            }
            warp_off[lane] = incl - n;
            if (lane == 31) chunk_total = incl;
        }
        __syncthreads();
        if (start) {
            const int idx = base + warp_off[warp] + __popc(ballot & ((1u << lane) - 1u));
            /* more tiles than the grid holds: the batch broke its contract (a sequence's tokens
             * not contiguous); fail loudly rather than skip rows */
            if (idx >= cap) __trap();
            list->tile[idx].t0 = t;
        }
        base += chunk_total;
        __syncthreads(); /* warp_off and chunk_total are rewritten by the next chunk; the starts
                          * are read below */
    }
    for (int i = threadIdx.x; i < base; i += PF_SCAN_THREADS) {
        pf_tile *tl = &list->tile[i];
        const int t0 = tl->t0;
        tl->n_rows = (i + 1 < base ? list->tile[i + 1].t0 : n_tokens) - t0;
        tl->seq = seq[t0];
        tl->pos0 = pos[t0];
    }
    if (threadIdx.x == 0) list->count = base;
}

__device__ __forceinline__ float pf_exp2(float x) { /* ex2.approx: 2 ulp; exp2(-inf) = 0 */
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Shared memory, in halves. f16 caches: q, then K and V tiles [2][PF_BN][LD] each (the copies'
 * double buffer). FP8: q, one K and one V tile [PF_BN][LD] (widened from the staging), then the
 * staging of the copies, K then V, [2][PF_BN][D] bytes each (S: halves from the start). */
template <int D, class KV> struct pf_layout {
    static constexpr bool FP8 = KV::BYTES == 1;
    static constexpr int LD = D + PF_PAD;                 /* halves per shared row */
    static constexpr int NBUF = FP8 ? 1 : 2;              /* f16 K/V tiles */
    static constexpr int Q = 0;                           /* [PF_BM][LD] */
    static constexpr int K = Q + PF_BM * LD;              /* [NBUF][PF_BN][LD] */
    static constexpr int V = K + NBUF * PF_BN * LD;       /* [NBUF][PF_BN][LD] */
    static constexpr int S = V + NBUF * PF_BN * LD;       /* FP8: the staging */
    static constexpr int SLD = FP8 ? D : LD;              /* elements per row of the copies */
    static constexpr int SBUF = PF_BN * D / 2;            /* halves per staging buffer */
    /* where copy buffer b of K (V) lands: KC (VC) + b * CB: the f16 tiles, or the staging */
    static constexpr int KC = FP8 ? S : K, VC = FP8 ? S + 2 * SBUF : V;
    static constexpr int CB = FP8 ? SBUF : PF_BN * LD;
    static constexpr size_t bytes = (size_t)(S + (FP8 ? 4 * SBUF : 0)) * sizeof(__half);
};

/* Keys kv0..kv0+PF_BN-1 of the tile into buffers sk/sv (rows of SLD elements): cache rows up to
 * last_pos (cp.async), zeros past it. */
template <int D, class KV>
__device__ __forceinline__ void pf_load_kv(typename KV::T *sk, typename KV::T *sv,
                                           const typename KV::T *kc, const typename KV::T *vc,
                                           const int32_t *bt, int kv0, int last_pos, int kv_dim,
                                           int kvh) {
    using T = typename KV::T;
    constexpr int EPC = 16 / KV::BYTES;                   /* elements per 16-byte chunk */
    constexpr int CH = D / EPC, LD = pf_layout<D, KV>::SLD, ITERS = PF_BN * CH / PF_THREADS;
    static_assert(PF_BN * CH % PF_THREADS == 0, "whole 16-byte chunks per thread");
    /* unrolled, so the block-table loads of all chunks are in flight together */
#pragma unroll
    for (int it = 0; it < ITERS; it++) {
        const int c = it * PF_THREADS + threadIdx.x;
        const int j = c / CH, d = (c % CH) * EPC, key = kv0 + j;
        T *dk = sk + j * LD + d, *dv = sv + j * LD + d;
        if (key <= last_pos) {
            const size_t slot =
                (size_t)bt[key / ATTN_KV_BLOCK] * ATTN_KV_BLOCK + key % ATTN_KV_BLOCK;
            const size_t off = slot * kv_dim + (size_t)kvh * D + d;
            si_cp_async16(dk, kc + off);
            si_cp_async16(dv, vc + off);
        } else {
            *(uint4 *)dk = make_uint4(0, 0, 0, 0);
            *(uint4 *)dv = make_uint4(0, 0, 0, 0);
        }
    }
    si_cp_async_commit();
}

/* FP8: the landed staging rows (sk8/sv8: [PF_BN][D] bytes) widened into the f16 tiles sk/sv
 * ([PF_BN][LD]), exactly; zero-filled rows stay zero. */
template <int D>
__device__ __forceinline__ void pf_widen_kv(__half *sk, __half *sv, const kv_fp8::T *sk8,
                                            const kv_fp8::T *sv8) {
    constexpr int LD = pf_layout<D, kv_fp8>::LD;
    for (int c = threadIdx.x; c < PF_BN * D / 8; c += PF_THREADS) {
        const int j = c / (D / 8), d = (c % (D / 8)) * 8;
        *(uint4 *)(sk + j * LD + d) = kv_fp8::load_h8(sk8 + j * D + d);
        *(uint4 *)(sv + j * LD + d) = kv_fp8::load_h8(sv8 + j * D + d);
    }
}

/* Rotates the landed keys kv0.. (up to last_pos) of a streaming sequence by slot, in place. */
template <int D>
__device__ __forceinline__ void pf_rotate_keys(__half *sk, int kv0, int last_pos,
                                               const attn_rope &r) {
    constexpr int LD = D + PF_PAD;
    for (int idx = threadIdx.x; idx < PF_BN * r.half; idx += PF_THREADS) {
        const int j = idx / r.half, i = idx % r.half, key = kv0 + j;
        if (key > last_pos) continue;
        int e0, e1;
        rope_pair(i, r.half, r.neox, &e0, &e1);
        const float2 cs = r.table[(size_t)key * r.half + i];
        __half *row = sk + j * LD;
        float y0, y1;
        rope_rotate(__half2float(row[e0]), __half2float(row[e1]), cs.x, cs.y, &y0, &y1);
        row[e0] = __float2half_rn(y0);
        row[e1] = __float2half_rn(y1);
    }
}

template <int D, class KV>
__global__ void __launch_bounds__(PF_THREADS, 2)
    attn_prefill_kernel(float *__restrict__ out, const float *__restrict__ q, int q_stride,
                        int q_vec4 /* q rows 16-byte aligned: float4 loads */,
                        const typename KV::T *__restrict__ kc,
                        const typename KV::T *__restrict__ vc,
                        const int32_t *__restrict__ block_table, int n_head, int n_head_kv,
                        int max_blocks, float scale_log2, attn_rope rope,
                        const pf_tile_list *__restrict__ tiles) {
    using L = pf_layout<D, KV>;
    using T = typename KV::T;
    constexpr int LD = L::LD, KS = D / 16, NT = PF_BN / 8, DT = D / 8;
    extern __shared__ __align__(16) __half pf_smem[];
    __half *sq = pf_smem + L::Q;

    const int tile = tiles->count - 1 - (int)blockIdx.y; /* the latest tiles first */
    if (tile < 0) return;
    const int h = blockIdx.x, kvh = h / (n_head / n_head_kv), kv_dim = n_head_kv * D;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const pf_tile tl = tiles->tile[tile];
    const int t0 = tl.t0, n_rows = tl.n_rows, s = tl.seq, pos0 = tl.pos0;
    const int last_pos = pos0 + n_rows - 1;
    const int n_steps = last_pos / PF_BN + 1;
    const int32_t *bt = block_table + (size_t)s * max_blocks;
    const bool rotate = rope.on_read && rope.on_read[s];

    pf_load_kv<D, KV>((T *)(pf_smem + L::KC), (T *)(pf_smem + L::VC), kc, vc, bt, 0, last_pos,
                      kv_dim, kvh);

    /* q, rounded to f16 as the CPU reference does; rows past the tile are zero. Every load is
     * issued before the first conversion: one at a time, the prologue would wait out a memory
     * latency per element (measured: ~20 us per CTA). */
    {
        constexpr int QV = PF_BM * D / 4 / PF_THREADS; /* groups of 4 floats per thread */
        float4 v[QV];
#pragma unroll
        for (int it = 0; it < QV; it++) {
            const int idx = it * PF_THREADS + tid, r = idx / (D / 4), d = idx % (D / 4) * 4;
            const float *src = q + (size_t)(t0 + r) * q_stride + (size_t)h * D + d;
            v[it] = r >= n_rows ? make_float4(0.0f, 0.0f, 0.0f, 0.0f)
                    : q_vec4    ? *(const float4 *)src
                                : make_float4(src[0], src[1], src[2], src[3]);
        }
#pragma unroll
        for (int it = 0; it < QV; it++) {
            const int idx = it * PF_THREADS + tid, r = idx / (D / 4), d = idx % (D / 4) * 4;
            *(__half2 *)(sq + r * LD + d) = __floats2half2_rn(v[it].x, v[it].y);
            *(__half2 *)(sq + r * LD + d + 2) = __floats2half2_rn(v[it].z, v[it].w);
        }
    }
    __syncthreads();
    uint32_t qf[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
        si_ldsm_x4(qf[ks], sq + (warp * 16 + lane % 16) * LD + ks * 16 + (lane / 16) * 8);

    /* this thread's two rows (g and g + 8 of the warp's 16), clamped into the tile so that
     * rows past it see at least one key too (their results are never stored) */
    const int g = lane / 4, cq = lane % 4;
    const int row_pos_lo = min(pos0 + warp * 16 + g, last_pos);
    const int row_pos_hi = min(pos0 + warp * 16 + g + 8, last_pos);
    float o[DT][4];
#pragma unroll
    for (int i = 0; i < DT; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;

    for (int step = 0; step < n_steps; step++) {
        const int buf = step & 1, kv0 = step * PF_BN;
        if (step + 1 < n_steps) {
            pf_load_kv<D, KV>((T *)(pf_smem + L::KC + (buf ^ 1) * L::CB),
                              (T *)(pf_smem + L::VC + (buf ^ 1) * L::CB), kc, vc, bt,
                              kv0 + PF_BN, last_pos, kv_dim, kvh);
            si_cp_async_wait<1>();
        } else {
            si_cp_async_wait<0>();
        }
        __syncthreads();
        __half *sk = pf_smem + L::K + (L::FP8 ? 0 : buf) * PF_BN * LD;
        __half *sv = pf_smem + L::V + (L::FP8 ? 0 : buf) * PF_BN * LD;
        if constexpr (L::FP8) {
            pf_widen_kv<D>(sk, sv, (const kv_fp8::T *)(pf_smem + L::KC + buf * L::CB),
                           (const kv_fp8::T *)(pf_smem + L::VC + buf * L::CB));
            __syncthreads();
        }
        if (rotate) {
            pf_rotate_keys<D>(sk, kv0, last_pos, rope);
            __syncthreads();
        }

        /* scores S = q K^T for the warp's 16 rows x PF_BN keys */
        float sc[NT][4];
#pragma unroll
        for (int i = 0; i < NT; i++) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t b[4];
                si_ldsm_x4(b, sk + (np * 16 + (lane / 16) * 8 + lane % 8) * LD + ks * 16 +
                                  ((lane / 8) % 2) * 8);
                si_mma_h16(sc[2 * np], qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3], b[0], b[1]);
                si_mma_h16(sc[2 * np + 1], qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3], b[2], b[3]);
            }
        }

        /* causal mask (last step only), then the online softmax in the log2 domain */
        const bool diag = step == n_steps - 1;
        float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
        for (int i = 0; i < NT; i++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = kv0 + i * 8 + cq * 2 + (e & 1);
                const int rp = e < 2 ? row_pos_lo : row_pos_hi;
                float x = sc[i][e] * scale_log2;
                if (diag && key > rp) x = -INFINITY;
                sc[i][e] = x;
            }
            mx_lo = fmaxf(mx_lo, fmaxf(sc[i][0], sc[i][1]));
            mx_hi = fmaxf(mx_hi, fmaxf(sc[i][2], sc[i][3]));
        }
#pragma unroll
        for (int o2 = 1; o2 < 4; o2 <<= 1) {
            mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, o2));
            mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, o2));
        }
        /* every row has a key <= its position in every step, so the new maxima are finite */
        const float mn_lo = fmaxf(m_lo, mx_lo), mn_hi = fmaxf(m_hi, mx_hi);
        const float c_lo = pf_exp2(m_lo - mn_lo), c_hi = pf_exp2(m_hi - mn_hi);
        m_lo = mn_lo;
        m_hi = mn_hi;
        float sum_lo = 0.0f, sum_hi = 0.0f;
        uint32_t pa[PF_BN / 16][4];
#pragma unroll
        for (int i = 0; i < NT; i++) {
            const float p0 = pf_exp2(sc[i][0] - mn_lo), p1 = pf_exp2(sc[i][1] - mn_lo);
            const float p2 = pf_exp2(sc[i][2] - mn_hi), p3 = pf_exp2(sc[i][3] - mn_hi);
            sum_lo += p0 + p1;
            sum_hi += p2 + p3;
            /* the C fragments of two adjacent 8-key tiles are the A fragment of 16 keys */
            pa[i / 2][(i % 2) * 2 + 0] = si_pack_h2(p0, p1);
            pa[i / 2][(i % 2) * 2 + 1] = si_pack_h2(p2, p3);
        }
        l_lo = l_lo * c_lo + sum_lo;
        l_hi = l_hi * c_hi + sum_hi;
#pragma unroll
        for (int i = 0; i < DT; i++) {
            o[i][0] *= c_lo; o[i][1] *= c_lo;
            o[i][2] *= c_hi; o[i][3] *= c_hi;
        }

        /* o += P V */
#pragma unroll
        for (int kk = 0; kk < PF_BN / 16; kk++) {
#pragma unroll
            for (int dp = 0; dp < D / 16; dp++) {
                uint32_t b[4];
                si_ldsm_x4<true>(b, sv + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LD +
                                        dp * 16 + (lane / 16) * 8);
                si_mma_h16(o[2 * dp], pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3], b[0], b[1]);
                si_mma_h16(o[2 * dp + 1], pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3], b[2], b[3]);
            }
        }
        __syncthreads(); /* the next step's load overwrites the other buffer */
    }

#pragma unroll
    for (int o2 = 1; o2 < 4; o2 <<= 1) {
        l_lo += __shfl_xor_sync(0xffffffffu, l_lo, o2);
        l_hi += __shfl_xor_sync(0xffffffffu, l_hi, o2);
    }
    const float inv_lo = 1.0f / l_lo, inv_hi = 1.0f / l_hi;
    const int r_lo = warp * 16 + g, r_hi = r_lo + 8;
    const size_t out_stride = (size_t)n_head * D;
#pragma unroll
    for (int i = 0; i < DT; i++) {
        const int d = h * D + i * 8 + cq * 2;
        if (r_lo < n_rows)
            *(float2 *)(out + (size_t)(t0 + r_lo) * out_stride + d) =
                make_float2(o[i][0] * inv_lo, o[i][1] * inv_lo);
        if (r_hi < n_rows)
            *(float2 *)(out + (size_t)(t0 + r_hi) * out_stride + d) =
                make_float2(o[i][2] * inv_hi, o[i][3] * inv_hi);
    }
}

/* scratch: the rotation table for max_blocks * 16 slots, then the tile list (tensor-core path);
 * the decode kernels' scratch for the other head_dims */
static size_t pf_table_bytes(const cuda_attn_params *p) {
    return rope_cos_sin_table_bytes(p->max_blocks * ATTN_KV_BLOCK, p->head_dim);
}

/* Kernels above 48 KB of shared memory must opt in, once (not a stream operation: done from
 * cuda_attention_prefill_scratch_bytes too, so it has happened before any graph capture). */
template <int D, class KV> static void pf_opt_in(void) {
    CUDA_CHECK(cudaFuncSetAttribute(attn_prefill_kernel<D, KV>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)pf_layout<D, KV>::bytes));
}
static void pf_raise_smem_limit(void) {
    static bool done = false;
    if (done) return;
    pf_opt_in<64, kv_f16>();
    pf_opt_in<128, kv_f16>();
    pf_opt_in<64, kv_fp8>();
    pf_opt_in<128, kv_fp8>();
    done = true;
}

extern "C" size_t cuda_attention_prefill_scratch_bytes(const cuda_attn_params *p, int max_tokens,
                                                       int max_seqs) {
    const int max_kv = p->max_blocks * ATTN_KV_BLOCK;
    if (!pf_supported(p->head_dim)) return attn_decode_scratch_bytes(p, max_tokens, max_kv);
    pf_raise_smem_limit();
    const size_t pf = pf_table_bytes(p) + pf_tile_list_bytes(pf_max_tiles(max_tokens, max_seqs));
    const size_t few = attn_decode_scratch_bytes(p, std::min(max_tokens, PF_FEW_TOKENS), max_kv);
    return std::max(pf, few);
}

template <int D, class KV>
static void pf_launch(float *out, const float *q, int q_stride, const void *kc, const void *vc,
                      const int32_t *bt, int n_tiles_max, attn_rope rope,
                      const cuda_attn_params *p, const pf_tile_list *tiles, cudaStream_t st) {
    const dim3 grid(p->n_head, n_tiles_max);
    const int q_vec4 = q_stride % 4 == 0 && (uintptr_t)q % 16 == 0;
    using T = typename KV::T;
    attn_prefill_kernel<D, KV><<<grid, PF_THREADS, pf_layout<D, KV>::bytes, st>>>(
        out, q, q_stride, q_vec4, (const T *)kc, (const T *)vc, bt, p->n_head, p->n_head_kv,
        p->max_blocks, p->scale * 1.4426950408889634f, rope, tiles);
    CUDA_CHECK_LAUNCH();
}

extern "C" int cuda_attention_prefill(float *out, const float *q, int q_stride,
                                      const void *k_cache, const void *v_cache,
                                      const int32_t *block_table, const int32_t *seq,
                                      const int32_t *pos, int n_tokens, int n_seqs,
                                      int max_kv_len, const uint8_t *rope_on_read,
                                      const cuda_rope_params *rope, const cuda_attn_params *p,
                                      void *scratch, cudaStream_t stream) {
    if (n_tokens <= 0) return 0;
    if (n_seqs <= 0 || max_kv_len > p->max_blocks * ATTN_KV_BLOCK) return -1;
    if (!pf_supported(p->head_dim) || n_tokens <= PF_FEW_TOKENS) {
        const attn_rows rows = {NULL, seq, pos};
        return attn_decode_rows(out, q, q_stride, k_cache, v_cache, block_table, rows, n_tokens,
                                max_kv_len, rope_on_read, rope, p, scratch, stream, NULL,
                                attn_extra{NULL, NULL});
    }
    if (p->n_head_kv <= 0 || p->n_head % p->n_head_kv || p->n_head / p->n_head_kv > ATTN_MAXG)
        return -1;
    if (rope_on_read && (!rope || rope->rope_dim > p->head_dim || rope->rope_dim % 2)) return -1;
    if (p->kv_dtype != SI_KV_F16 && p->kv_dtype != SI_KV_FP8_E4M3) return -1;
    float2 *table = (float2 *)scratch;
    pf_tile_list *tiles = (pf_tile_list *)((char *)scratch + pf_table_bytes(p));
    const attn_rope ar = {rope_on_read, table, rope_on_read ? rope->rope_dim / 2 : 0,
                          rope_on_read ? rope->neox : 0};
    if (rope_on_read) rope_cos_sin_table(table, max_kv_len, rope, stream);
    const int cap = pf_max_tiles(n_tokens, n_seqs);
    attn_prefill_tiles<<<1, PF_SCAN_THREADS, 0, stream>>>(seq, pos, n_tokens, cap, tiles);
    CUDA_CHECK_LAUNCH();
    pf_raise_smem_limit();
    return kv_dispatch(p->kv_dtype, [&](auto kv) {
        using KV = decltype(kv);
        if (p->head_dim == 64)
            pf_launch<64, KV>(out, q, q_stride, k_cache, v_cache, block_table, cap, ar, p, tiles,
                              stream);
        else
            pf_launch<128, KV>(out, q, q_stride, k_cache, v_cache, block_table, cap, ar, p, tiles,
                               stream);
        return 0;
    });
}
