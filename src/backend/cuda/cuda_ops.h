/* cuda_ops.h — the CUDA backend's kernel layer: C-callable launchers over device pointers.
 *
 * Every launcher enqueues work on `stream` and returns at once; nothing here allocates or
 * synchronises (scratch is the caller's, sized by the *_bytes functions). Launchers that take a
 * tensor type return 0, or -1 when the type or shape is not supported (nothing is launched).
 * Launch failures abort through CUDA_CHECK (an internal invariant, as SI_ASSERT).
 *
 * Weight matrices are GGUF row-major: W[M][K], each row K / block_size blocks of
 * quant/quant_blocks.h. The GEMV reads them with 16-byte loads, so a weight buffer must start
 * 16-byte aligned (cudaMalloc gives 256) and be allocated to a multiple of 16 bytes
 * (cuda_weight_alloc_bytes). */
#ifndef SI_BACKEND_CUDA_OPS_H
#define SI_BACKEND_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "swiftinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes to allocate for an M x K weight of type t (the row bytes rounded up to 16), or 0 when t
 * is not supported by cuda_gemv. */
size_t cuda_weight_alloc_bytes(si_type t, int64_t M, int64_t K);

/* ---- matmul (gemv.cu, gemm.cu) ---- */

/* Decode matmul: y[b][m] = sum_k W[m][k] * x[b][k] for b < n_batch (1..8; 9..16 where
 * cuda_gemv_wide_ok says so).
 * W: M x K of type t in {F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K},
 * K a multiple of the block size; x: f32 [n_batch][K], 16-byte aligned; y: f32 [n_batch][M]. For
 * the quantised types with K % 128 == 0 (k-quants: K % 256) and K <= 14336, x is first quantised
 * to Q8_0 blocks (for Q8_0/Q4_0 as the CPU backend's vec_dot_type, ggml's quantize_row_q8_0_ref)
 * and the products are integer (dp4a); every other case multiplies the f32 x. Each output row's
 * arithmetic is the same for every n_batch (batch invariance), unless the tensor-core kernel is on
 * (below). */
int cuda_gemv(si_type t, const void *W, int M, int K, const float *x, int n_batch, float *y,
              cudaStream_t stream);
#define GEMV_ROWS_MAX 8 /* the rows one GEMV launch takes */

/* Steps of 9..GEMV_WIDE_ROWS_MAX rows of the types whose 5-8-row GEMV runs on int8 tensor cores
 * (every quantised type but Q8_0; K % 256 == 0), where cuda_gemv_wide_ok says so: cuda_gemv and
 * cuda_gemv_pre take them in one launch of that kernel where x fits in its shared memory, else
 * (9..12 rows; Q4_0, Q5_K: to 16) as two launches, rows 0-7 and then the rest; each row with its
 * one-row bits either way. Else they are the batched matmul's (cuda_matmul_quant_rows). */
#define GEMV_WIDE_ROWS_MAX 16
int cuda_gemv_wide_ok(si_type t, int K, int n_batch);

/* cuda_gemv with x already quantised (xq: n_batch rows of CUDA_Q8X_ROW_BYTES(K), as
 * cuda_add_rmsnorm's out_q8 writes them), for the cases where cuda_gemv would quantise x itself:
 * cuda_gemv_pre_ok(t, K, n_batch). Same results as cuda_gemv on the f32 x; -1 where not ok. */
int cuda_gemv_pre_ok(si_type t, int K, int n_batch);
int cuda_gemv_pre(si_type t, const void *W, int M, int K, const void *xq, int n_batch, float *y,
                  cudaStream_t stream);

/* Batch-1 GEMV with the norm before it inside (no norm kernel between this GEMV and the kernel
 * before it): x_out = x + add (add may be NULL: nothing added, x_out not written; x_out must not
 * alias x or add), then y = W (rmsnorm(x_out) * norm_w) — the same bits as
 * cuda_add_rmsnorm(out_q8) followed by cuda_gemv_pre, or, where cuda_gemv_pre does not take the
 * rows (the 32-element-block types at K % 128 != 0), cuda_add_rmsnorm (f32 out) followed by
 * cuda_gemv. x, add, norm_w: K floats. -1 where not cuda_gemv_norm_ok(t, M, K) (those types,
 * K <= CUDA_NORM_Q8_MAX, shared memory for the norm's 256 threads). */
int cuda_gemv_norm_ok(si_type t, int M, int K);
int cuda_gemv_norm(si_type t, const void *W, int M, int K, const float *x, const float *add,
                   const float *norm_w, float eps, float *x_out, float *y, cudaStream_t stream);

/* cuda_gemv_norm of a [gate; up] matrix (M = 2 n rows, gate's first) that ends in SwiGLU: instead
 * of y it writes silu(gate) x up quantised into out_q8 (CUDA_Q8X_ROW_BYTES(n), for cuda_gemv_pre
 * of the down matrix) — the same bits as cuda_gemv_norm then cuda_fwd_swiglu_rows' q8 output, one
 * kernel. -1 (nothing launched) where it does not run: where cuda_gemv_norm would not or
 * cuda_gemv_pre does not take the rows, for
 * M % 256 != 0 (n % 128, as the down GEMV's q8 rows need), for kernel shapes other than one 16-warp
 * CTA an SM of 2 rows a warp at 2 stages (so not with SI_CUDA_GEMV_Q8X_NORM_WIDE=0), and where
 * dealing whole q8 blocks to CTAs would take more than 8/7 the plain GEMV's rounds (gemv_q8x.cuh,
 * q8x_glu_knob; SI_CUDA_GEMV_GLU=0: never, =2: regardless of the rounds). */
int cuda_gemv_norm_glu(si_type t, const void *W, int M, int K, const float *x, const float *add,
                       const float *norm_w, float eps, float *x_out, void *out_q8,
                       cudaStream_t stream);

/* The int8 tensor-core GEMV (gemv_mma.cuh) for 7-8 batch rows of the quantised types: ~30%
 * faster than dp4a for Q4_0/Q4_1 at 8 rows on the H200, but its sums run in another order
 * than the 1-row kernel's, so a sequence's logits would depend on how many others share its
 * decode step. Off by default (the engine promises identical outputs alone and batched); on
 * with on != 0 or SI_CUDA_GEMV_MMA=1 in the environment. */
void cuda_gemv_set_tensor_cores(int on);

/* Batched-decode matmul of the quantised types on tensor cores (gemm_q8x_mma.cu): the same
 * y[b][m] = sum_k W[m][k] * x[b][k] for n_rows in 9..128, W of type Q8_0, Q4_0, Q4_1, Q4_K or
 * Q6_K with K % 256 == 0, reading each weight byte once (no dequantised copy). Two paths:
 *  - Q4_0 (cuda_matmul_quant_rows_half): x is converted to f16 and each weight
 *    dequantised to f16 in registers (d * q rounded once, as cuda_dequantize_f16 does), f16
 *    tensor cores with f32 accumulation: cuda_gemm's numbers, without the dequantised copy;
 *  - the others (and Q4_0 with SI_CUDA_MMQ_HALF=0): x is quantised to Q8_0 blocks first,
 *    exactly as cuda_gemv's quantised kernels do (so the same reference and tolerance hold),
 *    int8 tensor cores, scales applied in f32.
 * scratch: at least
 * cuda_matmul_quant_rows_scratch_bytes(t, K, n_rows) bytes, 16-byte aligned; W, x 16-byte
 * aligned. Each output element is summed in the same order for every n_rows in 9..128 (but not
 * in cuda_gemv's order). Returns 0, or -1 (nothing launched) for another type, shape or row
 * count, or when SI_CUDA_MMQ=0 is set in the environment: the caller then uses cuda_gemm.
 * Nothing is allocated or synchronised (capturable in a CUDA graph once it has run eagerly). */
int cuda_matmul_quant_rows_half(si_type t);
size_t cuda_matmul_quant_rows_scratch_bytes(si_type t, int K, int n_rows);
/* Whether cuda_matmul_quant_rows beats dequantise + cuBLASLt for an M-row weight of type t and
 * n_rows activation rows (measured on the H200; gemm_q8x_mma.cu says where). */
int cuda_matmul_quant_rows_pays(si_type t, int M, int n_rows);
int cuda_matmul_quant_rows(si_type t, const void *W, int M, int K, const float *x, int n_rows,
                           float *y, void *scratch, cudaStream_t stream);
/* The same with x already in scratch, in the f16 path's layout (mmq_half.cuh), as
 * cuda_add_rmsnorm_mmq writes it: one kernel fewer. For the types, K and row counts of
 * cuda_matmul_quant_rows_pre_ok (Q4_0 on the f16 path, 9..64 rows, K % 256 == 0); -1 otherwise. */
int cuda_matmul_quant_rows_pre_ok(si_type t, int K, int n_rows);
int cuda_matmul_quant_rows_pre(si_type t, const void *W, int M, int K, int n_rows, float *y,
                               const void *scratch, cudaStream_t stream);

/* Prefill matmul through cuBLASLt on tensor cores: the same y = x W^T for n_rows activation
 * rows. F16/BF16 weights are used in place (x is converted to the weight's type); quantised
 * weights are first dequantised to f16 in scratch. Accumulation and y are f32. */
typedef struct cuda_gemm_ctx cuda_gemm_ctx;
int cuda_gemm_create(cuda_gemm_ctx **out);
void cuda_gemm_free(cuda_gemm_ctx *g);
size_t cuda_gemm_scratch_bytes(si_type t, int M, int K, int n_rows);
int cuda_gemm(cuda_gemm_ctx *g, si_type t, const void *W, int M, int K, const float *x,
              int n_rows, float *y, void *scratch, cudaStream_t stream);
/* The same for F16/BF16 weights with x already converted to the weight's type at the start of
 * scratch ([n_rows][K], as cuda_add_rmsnorm_half and cuda_fwd_swiglu_rows write it): the
 * numbers of cuda_gemm on the f32 x, one kernel fewer. -1 for another type. */
int cuda_gemm_pre(cuda_gemm_ctx *g, si_type t, const void *W, int M, int K, int n_rows, float *y,
                  const void *scratch, cudaStream_t stream);
/* on != 0: both take the TMA + wgmma kernel of gemm_rows64.h (H100/H200 only) for up to 64 rows
 * where it takes the shape, cuBLASLt otherwise; on = 0: cuBLASLt always. Off by default, since
 * it is not faster yet (gemm_rows64.h); SI_CUDA_ROWS64=1 in the environment turns it on from the
 * start. Returns whether this GPU has the kernel. */
int cuda_gemm_use_rows64(cuda_gemm_ctx *g, int on);

/* n elements (a multiple of the block size) of type t to f16 (dst) — the GEMM's dequantiser. */
int cuda_dequantize_f16(si_type t, const void *src, int64_t n, void *dst, cudaStream_t stream);

/* ---- norms and element-wise (norm.cu, elementwise.cu) ---- */

/* out[r][i] = x[r][i] / rms(x[r]) * w[i]. out may be NULL; out_h (may be NULL) receives the
 * same values as f16 (out_h_type SI_TYPE_F16) or bf16 (SI_TYPE_BF16), the next matmul's input. */
int cuda_rmsnorm(float *out, void *out_h, si_type out_h_type, const float *x, const float *w,
                 int n, int n_rows, float eps, cudaStream_t stream);

/* x[r][i] += y[r][i], then out[r][i] = x[r][i] / rms(x[r]) * w[i]: cuda_add and cuda_rmsnorm
 * in one kernel (the same values). out may alias y. y may be NULL (nothing added). out_q8 (may be
 * NULL; needs n % 128 == 0 and n <= CUDA_NORM_Q8_MAX) receives out's rows quantised for the GEMVs
 * of the quantised types (cuda_gemv_pre), CUDA_Q8X_ROW_BYTES(n) bytes a row: fused norm +
 * quantise. out may be NULL when out_q8 is not (only the quantised rows are wanted). */
#define CUDA_NORM_Q8_MAX 8192
int cuda_add_rmsnorm(float *out, void *out_q8, float *x, const float *y, const float *w, int n,
                     int n_rows, float eps, cudaStream_t stream);
/* The same (out not NULL), also writing out's rows as f16 into out_mmq in the layout
 * cuda_matmul_quant_rows_pre reads (mmq_half.cuh; padded rows zero): fused norm + convert for
 * the batched quantised matmul. Needs n % 256 == 0, n <= CUDA_NORM_Q8_MAX, 9..128 rows. */
int cuda_add_rmsnorm_mmq(float *out, void *out_mmq, float *x, const float *y, const float *w,
                         int n, int n_rows, float eps, cudaStream_t stream);
/* The same, writing out's rows as out_h_type (F16 or BF16) into out_h ([n_rows][n], rounded to
 * nearest) for cuda_gemm_pre; out may be NULL (only the converted rows are wanted): fused norm +
 * convert for cuBLASLt. */
int cuda_add_rmsnorm_half(float *out, void *out_h, si_type out_h_type, float *x, const float *y,
                          const float *w, int n, int n_rows, float eps, cudaStream_t stream);

/* Bytes of one row of x quantised for the GEMVs: K int8 q, then K / 32 f32 scales d (fp16-
 * rounded, d = amax / 127, q = round(x / d)), then K / 32 int32 sums of q — Q8_0 blocks with
 * their sums, as the GEMV kernels quantise x themselves. K % 128 == 0 keeps rows 16-aligned. */
#define CUDA_Q8X_ROW_BYTES(K) ((size_t)(K) + (size_t)(K) / 4)

/* out[i] = silu(gate[i]) * up[i] (out may alias gate). */
void cuda_swiglu(float *out, const float *gate, const float *up, int64_t n, cudaStream_t stream);

/* x[i] += y[i] */
void cuda_add(float *x, const float *y, int64_t n, cudaStream_t stream);

/* out[i][:] = row ids[i] of E (n_vocab x n_cols, type F32, F16, BF16 or a quantised type of
 * cuda_gemv's),
 * dequantised to f32. ids: device [n_ids]. */
int cuda_get_rows(si_type t, const void *E, int n_cols, const int32_t *ids, int n_ids,
                  float *out, cudaStream_t stream);

/* out[r] = the index of the largest of logits[r][0..n) (ties: the lowest index), r < n_rows. */
void cuda_argmax(const float *logits, int n, int n_rows, int32_t *out, cudaStream_t stream);

/* ---- RoPE + paged KV write (rope.cu) ---- */

typedef struct cuda_rope_params {
    int n_head, n_head_kv, head_dim, rope_dim;
    float freq_base, freq_scale;
    const float *freq_factors; /* device [rope_dim/2] or NULL */
    int neox;                  /* 0: pairs (2i, 2i+1) (ROPE_NORM); 1: (i, i + rope_dim/2) */
    int kv_dtype;              /* the caches' elements: SI_KV_F16 (0) or SI_KV_FP8_E4M3 */
} cuda_rope_params;

/* For each of n_tokens tokens: rotates q in place (f32 [n_tokens][n_head*head_dim], row stride
 * q_stride floats) and k (f32, stride k_stride) at position pos[t], then writes the rotated k
 * and v (f32, stride v_stride) into slot slot[t] of the paged caches of one layer,
 * k_cache/v_cache: [n_blocks][KV_BLOCK_SIZE][n_head_kv*head_dim] of p->kv_dtype (f16, rounded
 * to nearest; or FP8 E4M3, rounded to nearest even and saturated to +-448); a slot is
 * block * KV_BLOCK_SIZE + offset (from the sequence's block table); slot < 0: not cached.
 * k is rotated in place too. pos, slot: device [n_tokens].
 * k_unrotated: device [n_tokens] or NULL; nonzero: token t belongs to a streaming
 * (rope_on_read) sequence, so its k is neither rotated (in place nor in the cache) and is
 * stored as given; its q is still rotated. */
void cuda_rope_kv_write(float *q, int q_stride, float *k, int k_stride, const float *v,
                        int v_stride, const int32_t *pos, const int32_t *slot,
                        const uint8_t *k_unrotated, int n_tokens, void *k_cache, void *v_cache,
                        const cuda_rope_params *p, cudaStream_t stream);

/* ---- paged attention (attention.cu) ---- */

typedef struct cuda_attn_params {
    int n_head, n_head_kv, head_dim; /* head_dim 64, 128 or 256; n_head / n_head_kv <= 8 */
    int max_blocks;                  /* row length of block_table */
    float scale;                     /* usually 1/sqrt(head_dim) */
    int kv_dtype; /* the caches' elements: SI_KV_F16 (0) or SI_KV_FP8_E4M3 (read exactly) */
} cuda_attn_params;

/* Keys of a streaming (StreamingLLM attention-sink) sequence, marked by a nonzero
 * rope_on_read[], are stored un-rotated and rotated here by their slot index j (the key's index
 * in the sequence's block-table order) with `rope` (the formula of cuda_rope_kv_write, rotated
 * value rounded to f16 as a stored key would be), as the CPU backend's attention does. An FP8
 * key is rotated from its E4M3 value and rounded to f16 too (not back to E4M3). */

/* Scratch bytes for cuda_attention_decode with n_seqs sequences of at most max_kv_len keys. */
size_t cuda_attention_scratch_bytes(const cuda_attn_params *p, int n_seqs, int max_kv_len);

/* Decode attention (flash-decoding: the KV length is split over blocks, online softmax, then a
 * combine pass). One query token per sequence: q f32 [n_seqs][n_head*head_dim], row stride
 * q_stride floats (rounded to f16 as the CPU reference does), out f32 [n_seqs][n_head*head_dim].
 * Sequence s attends to its first seq_len[s] cached positions, read through
 * block_table[s][pos / KV_BLOCK_SIZE]. k_cache/v_cache: one layer's pools as for
 * cuda_rope_kv_write, of p->kv_dtype (FP8: always decode kernel version 2). max_kv_len: host bound on seq_len (sizes the grid, which depends on
 * n_seqs and max_kv_len only, so the launch can be captured into a CUDA graph).
 * rope_on_read: device [n_seqs] (per query row) or NULL; rope: needed when it is not NULL. */
int cuda_attention_decode(float *out, const float *q, int q_stride, const void *k_cache,
                          const void *v_cache, const int32_t *block_table,
                          const int32_t *seq_len, int n_seqs, int max_kv_len,
                          const uint8_t *rope_on_read, const cuda_rope_params *rope,
                          const cuda_attn_params *p, void *scratch, cudaStream_t stream);

/* cuda_rope_kv_write and then cuda_attention_decode in one kernel, for a decode step of
 * sequences none of which is streaming (no rope_on_read): row s's query token is the
 * sequence's last position, seq_len[s] - 1, at RoPE position pos[s]; its q (as for
 * cuda_attention_decode, un-rotated) is rotated as attention loads it, its k (f32, row stride
 * k_stride) rotated and written with v (stride v_stride) into slot slot[s] of the caches (not
 * when < 0). The same cache contents and outputs, bit for bit, as the two calls; q and k stay
 * as given in memory. Returns 0 when it ran, 1 when the kernel does not cover the shapes
 * (decode kernel version 1, rope_dim not a multiple of 16, caches of another type than rope's):
 * run the two calls instead; -1 on bad parameters, as cuda_attention_decode. out_q8: NULL, or
 * n_seqs rows of CUDA_Q8X_ROW_BYTES(n_head * head_dim) that receive out quantised for the
 * output projection (cuda_gemv_pre; n_head * head_dim % 128 == 0). out_h: NULL, or f16
 * [n_seqs][n_head * head_dim] that receives out rounded to nearest, for the output projection's
 * cuda_gemm_pre. scratch: as for cuda_attention_decode. */
int cuda_attention_decode_rope(float *out, const float *q, int q_stride, const float *k,
                               int k_stride, const float *v, int v_stride, const int32_t *pos,
                               const int32_t *slot, void *k_cache, void *v_cache,
                               const int32_t *block_table, const int32_t *seq_len, int n_seqs,
                               int max_kv_len, const cuda_rope_params *rope,
                               const cuda_attn_params *p, void *out_q8, void *out_h,
                               void *scratch, cudaStream_t stream);

/* Prefill attention on tensor cores. Query row t (of n_tokens; q f32, row stride q_stride floats,
 * rotated) belongs to sequence seq[t] at cache position pos[t] and attends causally to slots
 * 0..pos[t] of that sequence (written before the call), read through block_table[seq[t]]
 * (row stride p->max_blocks). Rows of one sequence are contiguous with consecutive positions.
 * rope_on_read: device [n_seqs] or NULL; nonzero: that sequence's keys are stored un-rotated and
 * rotated by slot index on read with `rope`. out: f32 [n_tokens][n_head*head_dim].
 * max_kv_len: host bound on pos[t] + 1, at most p->max_blocks * KV_BLOCK_SIZE. head_dim 64 and
 * 128 run the tensor-core kernel (q and the softmax weights rounded to f16, f32 accumulation;
 * FP8 K/V tiles are widened to f16, exactly, in shared memory);
 * other head_dims, and steps of at most GEMV_ROWS_MAX tokens (where each token then gets a
 * decode step's arithmetic, bit for bit), run the decode kernel with one query row per token. The grid depends on
 * n_tokens, n_seqs and max_kv_len only (the query tiles are listed on the device), so the
 * launch can be captured into a CUDA graph. scratch: cuda_attention_prefill_scratch_bytes for
 * n_tokens <= max_tokens and n_seqs <= max_seqs; that call also raises the kernel's shared
 * memory limit (once per process, not a stream operation), so make it before capturing. */
size_t cuda_attention_prefill_scratch_bytes(const cuda_attn_params *p, int max_tokens, int max_seqs);
int cuda_attention_prefill(float *out, const float *q, int q_stride, const void *k_cache,
                           const void *v_cache, const int32_t *block_table,
                           const int32_t *seq, const int32_t *pos, int n_tokens, int n_seqs,
                           int max_kv_len, const uint8_t *rope_on_read,
                           const cuda_rope_params *rope, const cuda_attn_params *p,
                           void *scratch, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
