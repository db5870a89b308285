/* attention.cu — decode attention over the paged KV cache, flash-decoding style (Dao et al.,
 * "Flash-Decoding for long-context inference", 2023): the keys of a sequence are split into
 * parts of ATTN_PART; one CTA per (KV head, sequence, part) computes, with an online softmax
 * (Milakov & Gimelshein 2018), an unnormalised partial output and its (max, sum) for all the
 * query heads of that KV head's GQA group, so K and V are read once per group; a second kernel
 * combines the parts. Keys are found through the block table: position p lives in block
 * block_table[s][p / 16], slot p % 16. Each lane owns 8 dimensions (one 16-byte load of K or V);
 * head_dim / 8 lanes share a key, 32 / (head_dim / 8) keys per warp step. Keys of streaming
 * sequences are rotated on read (attn_rotated_key). The same kernels serve prefill for head_dims
 * the tensor-core kernel (attention_prefill.cu) lacks, one query row per token (attn_rows). */
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/attention.cuh"

/* Rotates the 8 elements d0..d0+7 of a key that a lane holds (kf, stored un-rotated; the head's
 * row is krow) to slot j, rounded to f16: attn_rotated_key's values, from registers and vector
 * loads where the pairing allows (NORM: the pairs are inside the 8; NEOX with rope_dim / 2 a
 * multiple of 8: the partners are the 8 elements half away). */
__device__ __forceinline__ void attn_rotate_key8(float kf[8], const __half *krow, int d0, int j,
                                                 const attn_rope &r) {
    if (d0 >= 2 * r.half) return; /* past rope_dim: not rotated */
    const float2 *cs = r.table + (size_t)j * r.half;
    float y0, y1;
    if (!r.neox && d0 + 8 <= 2 * r.half) {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 c = cs[d0 / 2 + k];
            rope_rotate(kf[2 * k], kf[2 * k + 1], c.x, c.y, &y0, &y1);
            kf[2 * k] = __half2float(__float2half_rn(y0));
            kf[2 * k + 1] = __half2float(__float2half_rn(y1));
        }
    } else if (r.neox && r.half % 8 == 0) {
        const bool first = d0 < r.half; /* e0 of its pairs, else e1 */
        const int i0 = first ? d0 : d0 - r.half;
        const uint4 pv = __ldg((const uint4 *)(krow + (first ? d0 + r.half : d0 - r.half)));
        const __half *ph = (const __half *)&pv;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float2 c = cs[i0 + k];
            const float partner = __half2float(ph[k]);
            if (first) rope_rotate(kf[k], partner, c.x, c.y, &y0, &y1);
            else rope_rotate(partner, kf[k], c.x, c.y, &y0, &y1);
            kf[k] = __half2float(__float2half_rn(first ? y0 : y1));
        }
    } else {
#pragma unroll
        for (int k = 0; k < 8; k++) kf[k] = attn_rotated_key(krow, d0 + k, j, r);
    }
}

/* ROT: the batch may hold streaming sequences (rope.on_read not NULL). A separate instantiation,
 * so that the rotation's registers do not cost the usual case its third CTA per SM (measured:
 * 64 sequences x 640 keys 360 us at 3 CTAs/SM, 490 us at 2; head_dim 256 would spill at 3). */
template <int HD, bool ROT>
__global__ void __launch_bounds__(ATTN_WARPS * 32, ROT || HD > 128 ? 2 : 3)
    attn_decode_part(const float *__restrict__ q, int q_stride, const __half *__restrict__ kc,
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
#pragma unroll
    for (int g = 0; g < ATTN_MAXG; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            acc[g][j] = 0.0f;
            /* q rounded to f16 as the CPU reference (and ggml's f16 K matmul) does */
            qr[g][j] = g < G ? __half2float(__float2half_rn(
                                   q[(size_t)r * q_stride + (kvh * G + g) * HD + dc * 8 + j]))
                             : 0.0f;
        }
    }
    const int32_t *bt = block_table + (size_t)s * max_blocks;
    for (int p = p0 + warp * TPW + tsub; p - tsub < p1; p += ATTN_WARPS * TPW) {
        const bool valid = p < p1;
        float kf[8], vf[8];
        if (valid) {
            const size_t off = ((size_t)bt[p / ATTN_KV_BLOCK] * ATTN_KV_BLOCK + p % ATTN_KV_BLOCK) * kv_dim +
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
            if (rotate) attn_rotate_key8(kf, kc + off - dc * 8, dc * 8, p, rope);
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
#pragma unroll
    for (int g = 0; g < ATTN_MAXG; g++) {
        if (g >= G) break;
#pragma unroll
        for (int o = LPT; o < 32; o <<= 1) {
            const float om = __shfl_xor_sync(0xffffffffu, m[g], o);
            const float ol = __shfl_xor_sync(0xffffffffu, l[g], o);
            const float mn = fmaxf(m[g], om);
            const float c0 = mn == -INFINITY ? 0.0f : __expf(m[g] - mn);
            const float c1 = mn == -INFINITY ? 0.0f : __expf(om - mn);
            l[g] = l[g] * c0 + ol * c1;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float oa = __shfl_xor_sync(0xffffffffu, acc[g][j], o);
                acc[g][j] = acc[g][j] * c0 + oa * c1;
            }
            m[g] = mn;
        }
        if (tsub == 0) {
#pragma unroll
            for (int j = 0; j < 8; j++) sm_acc[warp][g][dc * 8 + j] = acc[g][j];
            if (dc == 0) { sm_m[warp][g] = m[g]; sm_l[warp][g] = l[g]; }
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < G * HD; idx += ATTN_WARPS * 32) {
        const int g = idx / HD, d = idx % HD;
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < ATTN_WARPS; w++) mx = fmaxf(mx, sm_m[w][g]);
        float a = 0.0f, ls = 0.0f;
#pragma unroll
        for (int w = 0; w < ATTN_WARPS; w++) {
            const float c = mx == -INFINITY ? 0.0f : __expf(sm_m[w][g] - mx);
            a += sm_acc[w][g][d] * c;
            ls += sm_l[w][g] * c;
        }
        const size_t row = ((size_t)r * n_head + kvh * G + g) * n_parts + part;
        part_acc[row * HD + d] = a;
        if (d == 0) { part_ml[2 * row] = mx; part_ml[2 * row + 1] = ls; }
    }
}

template <int HD>
__global__ void attn_decode_combine(float *out, const float *part_acc, const float *part_ml,
                                    int n_head, int n_parts) {
    const int h = blockIdx.x, s = blockIdx.y, d = threadIdx.x;
    const size_t row0 = ((size_t)s * n_head + h) * n_parts;
    float mx = -INFINITY;
    for (int p = 0; p < n_parts; p++) mx = fmaxf(mx, part_ml[2 * (row0 + p)]);
    float a = 0.0f, ls = 0.0f;
    for (int p = 0; p < n_parts; p++) {
        const float pm = part_ml[2 * (row0 + p)];
        if (pm == -INFINITY) continue;
        const float c = __expf(pm - mx);
        a += part_acc[(row0 + p) * HD + d] * c;
        ls += part_ml[2 * (row0 + p) + 1] * c;
    }
    out[((size_t)s * n_head + h) * HD + d] = ls > 0.0f ? a / ls : 0.0f;
}

/* scratch: the rotation table of keys rotated on read (always reserved: whether a sequence
 * needs it is only known on the device), then the parts' outputs and (max, sum) */
size_t attn_decode_scratch_bytes(const cuda_attn_params *p, int n_rows, int max_kv_len) {
    const int n_kv = max_kv_len > 0 ? max_kv_len : 1;
    const size_t parts = (size_t)si_div_up(n_kv, ATTN_PART);
    return rope_cos_sin_table_bytes(n_kv, p->head_dim) +
           (size_t)n_rows * p->n_head * parts * (p->head_dim + 2) * sizeof(float);
}

extern "C" size_t cuda_attention_scratch_bytes(const cuda_attn_params *p, int n_seqs,
                                               int max_kv_len) {
    return attn_decode_scratch_bytes(p, n_seqs, max_kv_len);
}

template <int HD>
static void attn_launch(float *out, const float *q, int q_stride, const uint16_t *kc,
                        const uint16_t *vc, const int32_t *bt, attn_rows rows, int n_rows,
                        int n_parts, attn_rope rope, const cuda_attn_params *p, float *part_acc,
                        cudaStream_t st) {
    float *part_ml = part_acc + (size_t)n_rows * p->n_head * n_parts * HD;
    dim3 grid(p->n_head_kv, n_rows, n_parts);
    if (rope.on_read)
        attn_decode_part<HD, true><<<grid, ATTN_WARPS * 32, 0, st>>>(
            q, q_stride, (const __half *)kc, (const __half *)vc, bt, rows, p->n_head,
            p->n_head_kv, p->max_blocks, p->scale, rope, n_parts, part_acc, part_ml);
    else
        attn_decode_part<HD, false><<<grid, ATTN_WARPS * 32, 0, st>>>(
            q, q_stride, (const __half *)kc, (const __half *)vc, bt, rows, p->n_head,
            p->n_head_kv, p->max_blocks, p->scale, rope, n_parts, part_acc, part_ml);
    CUDA_CHECK_LAUNCH();
    attn_decode_combine<HD><<<dim3(p->n_head, n_rows), HD, 0, st>>>(out, part_acc, part_ml,
                                                                    p->n_head, n_parts);
    CUDA_CHECK_LAUNCH();
}

int attn_decode_rows(float *out, const float *q, int q_stride, const uint16_t *k_cache,
                     const uint16_t *v_cache, const int32_t *block_table, attn_rows rows,
                     int n_rows, int max_kv_len, const uint8_t *rope_on_read,
                     const cuda_rope_params *rope, const cuda_attn_params *p, void *scratch,
                     cudaStream_t stream) {
    if (n_rows <= 0) return 0;
    if (p->n_head_kv <= 0 || p->n_head % p->n_head_kv || p->n_head / p->n_head_kv > ATTN_MAXG)
        return -1;
    if (rope_on_read && (!rope || rope->rope_dim > p->head_dim || rope->rope_dim % 2)) return -1;
    const int n_kv = max_kv_len > 0 ? max_kv_len : 1;
    const int n_parts = si_div_up(n_kv, ATTN_PART);
    float2 *table = (float2 *)scratch;
    float *part_acc = (float *)((char *)scratch + rope_cos_sin_table_bytes(n_kv, p->head_dim));
    attn_rope ar = {rope_on_read, table, rope_on_read ? rope->rope_dim / 2 : 0,
                    rope_on_read ? rope->neox : 0};
    decltype(&attn_launch<64>) launch;
    switch (p->head_dim) {
    case 64: launch = attn_launch<64>; break;
    case 128: launch = attn_launch<128>; break;
    case 256: launch = attn_launch<256>; break;
    default: return -1;
    }
    if (rope_on_read) rope_cos_sin_table(table, n_kv, rope, stream);
    launch(out, q, q_stride, k_cache, v_cache, block_table, rows, n_rows, n_parts, ar, p, part_acc,
           stream);
    return 0;
}

extern "C" int cuda_attention_decode(float *out, const float *q, int q_stride,
                                     const uint16_t *k_cache, const uint16_t *v_cache,
                                     const int32_t *block_table, const int32_t *seq_len,
                                     int n_seqs, int max_kv_len, const uint8_t *rope_on_read,
                                     const cuda_rope_params *rope, const cuda_attn_params *p,
                                     void *scratch, cudaStream_t stream) {
    const attn_rows rows = {seq_len, NULL, NULL};
    return attn_decode_rows(out, q, q_stride, k_cache, v_cache, block_table, rows, n_seqs,
                            max_kv_len, rope_on_read, rope, p, scratch, stream);
}
