/* attention.cuh — paged attention (attention.cu: decode; attention_prefill.cu: prefill on tensor
 * cores): what both share. */
#ifndef SI_BACKEND_CUDA_ATTENTION_CUH
#define SI_BACKEND_CUDA_ATTENTION_CUH
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/kv_elem.cuh"
#define ATTN_WARPS 4
#define ATTN_PART 256  /* keys per CTA of version 1: the flash-decoding split */
/* keys per CTA of version 2 by default: on the H200 (test_cuda_attention, 2026-11-30) 512 beat
 * 256 on every decode shape timed: 64 x 640 MHA 95.4 vs 93.4 % of 4.21 TB/s, 1 x 4096 61.7 vs
 * 56.7, 8 x 2048 GQA 49.9 vs 43.3, 32 x 1024 GQA 58.6 vs 54.4. 1024 (s9, 64 x (512 + 128)
 * through the engine, SI_CUDA_ATTN_PART): every row of that batch fits one part, so the combine
 * kernel is left out: all-decoding F16 6,581-6,630 -> 6,737-6,742 t/s, Q4_0 5,703-5,725 ->
 * 5,793-5,807 (768 the same). The kernel alone (test_cuda_attention, s9 call 10), 512 -> 1024:
 * 64 x 640 165.3 -> 160.8 us, 1 x 4096 26.9 -> 26.5, 32 x 1024 GQA 54.0 -> 40.9, but 8 x 2048 GQA
 * 29.9 -> 33.0 (128 CTAs instead of 256). The split of every step of more than ATTN_SPLIT_ROWS
 * rows. */
#define ATTN_PART_V2 1024
/* Steps of at most ATTN_SPLIT_ROWS query rows (those whose matmuls are GEMVs, so that a row's
 * result is the same alone and batched) split each row by its length instead (attention.cu,
 * attn_split_for), so that one sequence's attention is not a few CTAs each streaming a long
 * stretch of its cache: parts of about ATTN_SPLIT_KEYS_KVH keys a KV head (256 keys for 32 KV
 * heads, 64 at least; SI_CUDA_ATTN_SPLIT_KEYS=N sets N keys instead), at most ATTN_SPLIT_PARTS
 * parts (SI_CUDA_ATTN_SPLIT_PARTS=N sets N) unless parts would pass ATTN_SPLIT_KEYS_MAX keys
 * (long rows: 8,064 keys are 16 parts). On the H200, Llama-2-7B through the engine, 512-token
 * prompts, 128 generated, 1 / 2 / 4 / 8 concurrent requests (bench/RESULTS.md 2026-12-01 20:56
 * UTC, all-decoding t/s, two rounds): F16 248-250 / 412-413 / 541-542 / 841-844 with 1024-key
 * parts -> 260-261 / 427-430 / 578-582 / 960-963 split; Q4_0 547-553 / 910-913 / 1,583-1,585 /
 * 2,007-2,011 -> 574-582 / 946-951 / 1,554-1,561 / 1,955-1,968 (parts of 64 keys gave one
 * request 590 and eight 1,878, of 512 keys 566 and 1,941); Q4_0 with the split rows merged by
 * their last CTA (s21; removed in s30) 584-586 / - / 1,570-1,576 / 1,876-1,893. At most 8 parts
 * (2026-12-01 s22; it was 256 CTAs, i.e. 8 parts for 32 KV heads but 32 parts of 64 keys for
 * Llama-3-8B's 8): Llama-3-8B Q4_0 with 2,048-token prompts, 1 / 4 / 8 requests, 64-key parts
 * 420 / 1,073 / 1,370 t/s, 256-key 420 / 1,320 / 1,625, 128-key 438 / 1,207 / 1,570, 512-key
 * 374 / 1,193 / 1,674, 1,024 (the old split) 293 / 971 / 1,682; with 512-token prompts 64-key
 * parts 477 / 1,425 / 1,782, 256-key 441 / 1,360 / 1,865. Llama-2-7B Q4_0, 2,048-token prompts
 * (8 parts of 256+ keys) 524 / 1,097 / 1,276, 512-key parts 489 / 1,088 / 1,260, 1,024-key 381 /
 * 1,078 / 1,226. Qwen2-7B Q4_0 (4 KV heads), 2,048-token prompts: at most 8 parts 244 / 679 /
 * 866, 16 parts 236 / 646 / 787, 64 (the old rule) 242 / 595 / 736. A single-KV-head model was
 * not measured. Parts of at most 512 keys (s22): Llama-3-8B Q4_0, 7,936-token prompts, 1 / 4 / 8
 * requests: 8 parts (~1,000 keys) 298 / 985 / 1,115, 16 (~500) 369 / 975 / 1,148, 32 (~250,
 * s21's) 392 / 930 / 1,074. */
/* Not up to 16 rows, though steps of 9-16 rows may be GEMVs too (cuda_gemv_wide_ok): on an H100
 * (bench/RESULTS.md s49, timing knob SI_CUDA_ATTN_SPLIT_ROWS=16) Llama-2-7B at 9 / 12 / 16
 * requests of 512 + 128 tokens ran 2-4 % slower split by length than in 1,024-key parts (Q4_0
 * 1,968 / 2,235 / 2,598 -> 1,904 / 2,182 / 2,549 all-decoding t/s). */
#define ATTN_SPLIT_ROWS GEMV_ROWS_MAX
#define ATTN_SPLIT_PARTS 8
#define ATTN_SPLIT_KEYS_MAX 512
#define ATTN_SPLIT_KEYS_KVH 8
#define ATTN_MAXG 8    /* query heads per KV head (GQA group) */
#define ATTN_KV_BLOCK 16
static_assert(ATTN_KV_BLOCK == ROPE_KV_BLOCK, "one paged block size");

/* Keys rotated on read (StreamingLLM sequences): on_read[s] marks sequence s; table holds the
 * (cos, sin) of every cache slot (rope_cos_sin_table), rope_dim / 2 = half pairs per slot. */
struct attn_rope {
    const uint8_t *on_read; /* [n_seqs] or NULL */
    const float2 *table;    /* [max_kv_len][half] */
    int half, neox;
};

/* Element d of key row k ([head_dim] of KV's elements, stored un-rotated) rotated to slot j and
 * rounded to f16, exactly as an f16 key stored rotated would have been (the CPU backend's
 * rope_on_read); FP8 keys are rotated from their exact value and rounded to f16 alike. */
template <class KV>
__device__ __forceinline__ float attn_rotated_key(const typename KV::T *k, int d, int j,
                                                  const attn_rope &r) {
    if (d >= 2 * r.half) return KV::to_float(k[d]);
    const int i = r.neox ? (d < r.half ? d : d - r.half) : d / 2;
    int e0, e1;
    rope_pair(i, r.half, r.neox, &e0, &e1);
    const float2 cs = r.table[(size_t)j * r.half + i];
    float y0, y1;
    rope_rotate(KV::to_float(k[e0]), KV::to_float(k[e1]), cs.x, cs.y, &y0, &y1);
    return __half2float(__float2half_rn(d == e0 ? y0 : y1));
}

/* Which query rows the decode kernel serves: row r is of sequence row_seq[r] (r when NULL) and
 * attends to its first row_pos[r] + 1 keys (seq_len[r] when row_pos is NULL). */
struct attn_rows {
    const int32_t *seq_len, *row_seq, *row_pos;
};

/* A decode step's new token of each query row, for the decode kernel that does the RoPE + KV
 * write's work too (cuda_attention_decode_rope): row r's q is rotated to pos[r] as it is loaded
 * (q stays as given in memory); its k (rotated) and v, f32 rows at k + r * k_stride and
 * v + r * v_stride, are written into the caches at slot[r] (not when < 0) by the CTA whose part
 * holds the row's last key, len - 1, which reads them from shared memory, not back from the
 * cache. k == NULL: no new token (every key is in the cache). */
struct attn_fresh {
    const float *k, *v;
    int k_stride, v_stride;
    const int32_t *pos, *slot;
    void *k_cache, *v_cache;
    rope_args rope;
};

/* Bytes of decode scratch for n_rows query rows of at most max_kv_len keys, for the kernel
 * version and split in force (attn_decode_config). Also lets the decode kernels use more than
 * 48 KB of shared memory (once per process): call it before capturing a graph. */
size_t attn_decode_scratch_bytes(const cuda_attn_params *p, int n_rows, int max_kv_len);

/* The decode (flash-decoding) kernels over n_rows query rows (q row r at q + r * q_stride), as
 * cuda_attention_decode; prefill runs them for head_dims its tensor-core kernel lacks and for
 * steps of a few tokens. fresh: the step's new tokens, or NULL (attn_fresh); ex: where the
 * output is also written (cuda_attention_decode_rope's out_q8 and out_h), or NULLs. */
typedef struct attn_extra {
    uint8_t *q8; /* quantised as cuda_gemv_pre reads it (CUDA_Q8X_ROW_BYTES a row), or NULL */
    void *h;     /* as f16 [n_rows][n_head * head_dim], for cuda_gemm_pre, or NULL */
} attn_extra;
int attn_decode_rows(float *out, const float *q, int q_stride, const void *k_cache,
                     const void *v_cache, const int32_t *block_table, attn_rows rows,
                     int n_rows, int max_kv_len, const uint8_t *rope_on_read,
                     const cuda_rope_params *rope, const cuda_attn_params *p, void *scratch,
                     cudaStream_t stream, const attn_fresh *fresh, attn_extra ex);

/* Timing and test knob, not for the engine: the decode kernel version (1: the first kernel, one
 * softmax update per key, ATTN_PART keys per CTA, f16 caches only: FP8 caches always run version
 * 2 at its split; 2: the pipelined kernel), version 2's keys per
 * CTA (a multiple of 16, at most 1024) and its stages per warp (0: the default, two stages and 3
 * CTAs per SM where that variant exists (head_dim 128/256, groups <= 4, no rotation on read), else
 * the head_dim's own; 3: the head_dim's own for f16 caches, three stages at head_dim 128/256);
 * part_keys 0 restores the default split (attn_split_for in attention.cu: ATTN_PART_V2 keys a
 * part for steps of more than ATTN_SPLIT_ROWS rows, by length for shorter ones); other
 * out-of-range values keep the setting (stages: negative). Defaults: version 2, the default
 * split, default stages; the environment's SI_CUDA_ATTN_V1=1, SI_CUDA_ATTN_PART=N and
 * SI_CUDA_ATTN_STAGES=3, read at the first call, change them. Scratch must be sized
 * (attn_decode_scratch_bytes) after a change.
 * Not thread-safe: call it while no other thread launches attention. */
void attn_decode_config(int version, int part_keys, int stages);
#endif
