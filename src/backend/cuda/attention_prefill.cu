/* attention_prefill.cu — causal prefill attention over the paged KV cache.
 * For now every head_dim runs the decode kernels with one query row per token (attn_rows); the
 * tensor-core kernel comes next. */
#include "backend/cuda/attention.cuh"

extern "C" size_t cuda_attention_prefill_scratch_bytes(const cuda_attn_params *p, int max_tokens,
                                                       int max_seqs) {
    (void)max_seqs;
    return attn_decode_scratch_bytes(p, max_tokens, p->max_blocks * ATTN_KV_BLOCK);
}

extern "C" int cuda_attention_prefill(float *out, const float *q, int q_stride,
                                      const uint16_t *k_cache, const uint16_t *v_cache,
                                      const int32_t *block_table, const int32_t *seq,
                                      const int32_t *pos, int n_tokens, int n_seqs,
                                      int max_kv_len, const uint8_t *rope_on_read,
                                      const cuda_rope_params *rope, const cuda_attn_params *p,
                                      void *scratch, cudaStream_t stream) {
    if (n_tokens <= 0) return 0;
    if (n_seqs <= 0 || max_kv_len > p->max_blocks * ATTN_KV_BLOCK) return -1;
    const attn_rows rows = {NULL, seq, pos};
    return attn_decode_rows(out, q, q_stride, k_cache, v_cache, block_table, rows, n_tokens,
                            max_kv_len, rope_on_read, rope, p, scratch, stream);
}
