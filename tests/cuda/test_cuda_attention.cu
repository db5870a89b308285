/* test_cuda_attention.cu — the paged attention kernels (attention.cu, attention_prefill.cu) and
 * the k_unrotated path of cuda_rope_kv_write against a double-precision CPU reference, then
 * prefill and decode timings.
 *
 * The reference is the CPU backend's (src/backend/cpu/attention.c) in double: q rounded to f16,
 * K/V read as f16 through shuffled block tables, keys of rope_on_read sequences rotated by slot
 * index in float (cpu_rope_table's incremental theta, cosf/sinf) and rounded to f16. Its softmax
 * weights are not rounded, so the tolerances cover the kernels' own rounding:
 *   - decode kernel (f32 weights; also prefill for head_dim 256): 1e-4 absolute;
 *   - tensor-core prefill: its softmax weights are rounded to f16 (relative error <= 2^-11), so
 *     |out - ref| <= 2^-11 * max|V| = 4.9e-4 for V in [-1, 1): tolerance 5e-4 absolute. A wrong
 *     key, mask or block gives errors of order 0.1 on early rows (few keys).
 * Inputs are random; q rows have the fused-QKV stride (q_dim + 2 kv_dim) with NaN between rows;
 * cache slots past what a sequence has written are NaN; outputs are NaN-filled before each
 * launch, so an unwritten element or a read past the causal limit fails.
 *
 * Decode runs under several kernel settings (attn_decode_config: version 2 at several splits,
 * version 1), each also checking that a sequence decoded alone gives bit for bit its row of the
 * batch; the decode timing table prints each setting's GB/s and fraction of 4.21 TB/s.
 *
 * FP8 E4M3 caches (kv_dtype SI_KV_FP8_E4M3): the host rounds K/V to E4M3 with cuda_fp8.h's
 * host conversion (the same round-to-nearest-even, saturating function the kernels call; its
 * agreement with the GPU's cvt instruction is checked first, over every E4M3 value, the ties
 * between neighbours and random floats), writes the bytes to the cache and gives the reference
 * their exact values (every E4M3 value is an f16 value), so the f16 tolerances hold. The RoPE
 * write's FP8 bytes must equal the E4M3 rounding of its f32 outputs exactly.
 *
 * Usage: test_cuda_attention [--small] [--no-bench] [--decode] [--fp8]
 *   --small: small shapes only, no timing (for compute-sanitizer memcheck/racecheck).
 *   --decode: the decode checks and timings only (no rope, no prefill).
 *   --fp8: the FP8-cache checks and timings only.
 * Exit status 1 on any failure. */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/attention.cuh" /* attn_decode_config */
#include "test_rand.cuh" /* rnd_f, rnd_int, dmalloc */
#include "timing.cuh" /* g_st, the stream every test and timing runs on */
#include <cuda_fp8.h>
extern "C" {
#include "core/fp16.h"
}

static int g_fail = 0, g_checks = 0;

static void report(const char *name, double err, double tol) {
    const bool ok = err <= tol && !std::isnan(err);
    g_checks++;
    if (!ok) g_fail++;
    printf("%-4s %-78s max abs err %.3e  tol %.1e\n", ok ? "PASS" : "FAIL", name, err, tol);
    fflush(stdout);
}

template <class T> static T *dcopy(const std::vector<T> &h) {
    T *d = dmalloc<T>(h.size());
    CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
template <class T> static void poison(T *p, size_t n) { CUDA_CHECK(cudaMemset(p, 0xFF, n * sizeof(T))); }
template <class T> static std::vector<T> fetch(const T *d, size_t n) {
    std::vector<T> h(n);
    CUDA_CHECK(cudaStreamSynchronize(g_st));
    CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

/* max |a - b|; NaN anywhere gives NaN */
static double max_abs_err(const std::vector<float> &a, const std::vector<double> &b) {
    double mx = 0;
    for (size_t i = 0; i < b.size(); i++) {
        if (std::isnan(a[i])) return NAN;
        mx = std::max(mx, std::fabs(a[i] - b[i]));
    }
    return mx;
}

static float round_f16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

/* E4M3 on the host: cuda_fp8.h's host path of the kernels' conversion (round to nearest even,
 * saturated to +-448) and the exact value back */
static uint8_t to_e4m3(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
static float from_e4m3(uint8_t b) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(b, __NV_E4M3);
    return fp16_to_fp32(h.x);
}
static const char *kv_name(int kv_dtype) { return kv_dtype == SI_KV_FP8_E4M3 ? " fp8" : ""; }

static const float k_freq_base = 10000.0f, k_freq_scale = 1.0f;

/* (cos, sin) of slot `pos`, pair i: cpu_rope_table's arithmetic */
static void ref_cos_sin(int pos, int i, int rope_dim, float *cs, float *sn) {
    const float theta_scale = powf(k_freq_base, -2.0f / (float)rope_dim);
    float tb = (float)pos;
    for (int j = 0; j < i; j++) tb *= theta_scale;
    const float theta = k_freq_scale * tb;
    *cs = cosf(theta);
    *sn = sinf(theta);
}

/* rotates one head x[hd] to position pos in float, as cpu_rope / rope_head_from_table */
static void ref_rope_head(float *x, int pos, int rope_dim, bool neox) {
    const int half = rope_dim / 2;
    for (int i = 0; i < half; i++) {
        float cs, sn;
        ref_cos_sin(pos, i, rope_dim, &cs, &sn);
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * cs - x1 * sn;
        x[b] = x0 * sn + x1 * cs;
    }
}

/* ---- a paged cache holding several sequences ---- */
struct paged {
    int hd, n_head, n_head_kv, kvd, max_blocks, rope_dim;
    bool neox;
    int kv_dtype;                  /* SI_KV_F16 or SI_KV_FP8_E4M3: what the device cache holds */
    std::vector<int> len;          /* slots written per sequence */
    std::vector<uint8_t> rotate;   /* rope_on_read per sequence */
    std::vector<int32_t> bt;       /* [n_seqs][max_blocks], -1 past a sequence's blocks */
    std::vector<uint16_t> kc, vc;  /* [n_blocks][16][kvd] f16: the values the cache holds */
    std::vector<uint8_t> kc8, vc8; /* FP8: the E4M3 bytes of the same (kc, vc: their values) */
    void *dkc = nullptr, *dvc = nullptr;
    int32_t *dbt = nullptr;
    uint8_t *drot = nullptr;

    /* slot j of sequence s, KV head kh: the key as attention must see it (rotated by slot when
     * the sequence is rope_on_read, rounded to f16) and the value */
    void key(int s, int j, int kh, float *out) const {
        const size_t row = ((size_t)bt[(size_t)s * max_blocks + j / 16] * 16 + j % 16) * kvd + (size_t)kh * hd;
        for (int d = 0; d < hd; d++) out[d] = fp16_to_fp32(kc[row + d]);
        if (rotate[s]) {
            ref_rope_head(out, j, rope_dim, neox);
            for (int d = 0; d < hd; d++) out[d] = round_f16(out[d]);
        }
    }
    const uint16_t *value(int s, int j, int kh) const {
        return &vc[((size_t)bt[(size_t)s * max_blocks + j / 16] * 16 + j % 16) * kvd + (size_t)kh * hd];
    }
};

static paged make_paged(int hd, int n_head, int n_head_kv, const std::vector<int> &len,
                        const std::vector<uint8_t> &rotate, int rope_dim, bool neox,
                        int kv_dtype = SI_KV_F16) {
    paged c;
    c.hd = hd; c.n_head = n_head; c.n_head_kv = n_head_kv; c.kvd = n_head_kv * hd;
    c.rope_dim = rope_dim; c.neox = neox; c.len = len; c.rotate = rotate; c.kv_dtype = kv_dtype;
    const bool fp8 = kv_dtype == SI_KV_FP8_E4M3;
    const int n_seqs = (int)len.size();
    int max_len = 1, total = 0;
    for (int L : len) { max_len = std::max(max_len, L); total += (L + 15) / 16; }
    c.max_blocks = (max_len + 15) / 16 + 1; /* one spare column: -1, never to be read */
    const int n_blocks = total + 3;
    std::vector<int> perm(n_blocks);
    for (int i = 0; i < n_blocks; i++) perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) std::swap(perm[i], perm[rnd_int(i + 1)]);
    c.bt.assign((size_t)n_seqs * c.max_blocks, -1);
    int next = 0;
    for (int s = 0; s < n_seqs; s++)
        for (int b = 0; b < (len[s] + 15) / 16; b++) c.bt[(size_t)s * c.max_blocks + b] = perm[next++];
    /* every slot NaN (E4M3: 0xFF), then the written ones random: a read past a sequence's
     * length shows */
    const size_t n = (size_t)n_blocks * 16 * c.kvd;
    c.kc.assign(n, 0xFFFF);
    c.vc.assign(n, 0xFFFF);
    if (fp8) {
        c.kc8.assign(n, 0xFF);
        c.vc8.assign(n, 0xFF);
    }
    for (int s = 0; s < n_seqs; s++)
        for (int j = 0; j < len[s]; j++) {
            const size_t row = ((size_t)c.bt[(size_t)s * c.max_blocks + j / 16] * 16 + j % 16) * c.kvd;
            for (int i = 0; i < c.kvd; i++) {
                const float k = rnd_f() * 2.0f, v = rnd_f();
                if (fp8) {
                    c.kc8[row + i] = to_e4m3(k);
                    c.vc8[row + i] = to_e4m3(v);
                    c.kc[row + i] = fp32_to_fp16(from_e4m3(c.kc8[row + i])); /* exact */
                    c.vc[row + i] = fp32_to_fp16(from_e4m3(c.vc8[row + i]));
                } else {
                    c.kc[row + i] = fp32_to_fp16(k);
                    c.vc[row + i] = fp32_to_fp16(v);
                }
            }
        }
    if (fp8) {
        c.dkc = dcopy(c.kc8);
        c.dvc = dcopy(c.vc8);
    } else {
        c.dkc = dcopy(c.kc);
        c.dvc = dcopy(c.vc);
    }
    c.dbt = dcopy(c.bt); c.drot = dcopy(c.rotate);
    return c;
}
static void free_paged(paged &c) {
    CUDA_CHECK(cudaFree(c.dkc)); CUDA_CHECK(cudaFree(c.dvc));
    CUDA_CHECK(cudaFree(c.dbt)); CUDA_CHECK(cudaFree(c.drot));
}

/* The reference output of query rows: row r (q at q + r * q_stride) is of sequence row_seq[r]
 * and attends to its slots 0..n_kv[r]-1. Rows are split over threads. */
static std::vector<double> ref_attention(const paged &c, const std::vector<float> &q, int q_stride,
                                         const std::vector<int> &row_seq, const std::vector<int> &n_kv,
                                         float scale) {
    const int n_rows = (int)row_seq.size(), hd = c.hd, G = c.n_head / c.n_head_kv;
    std::vector<double> out((size_t)n_rows * c.n_head * hd);
    auto work = [&](int r0, int r1) {
        std::vector<float> kr(hd);
        std::vector<double> sc, qr(hd);
        for (int r = r0; r < r1; r++) {
            const int s = row_seq[r], L = n_kv[r];
            sc.resize(L);
            for (int h = 0; h < c.n_head; h++) {
                const int kh = h / G;
                for (int d = 0; d < hd; d++) qr[d] = round_f16(q[(size_t)r * q_stride + (size_t)h * hd + d]);
                double mx = -1e300;
                for (int j = 0; j < L; j++) {
                    c.key(s, j, kh, kr.data());
                    double dot = 0;
                    for (int d = 0; d < hd; d++) dot += qr[d] * kr[d];
                    sc[j] = dot * scale;
                    mx = std::max(mx, sc[j]);
                }
                double sum = 0;
                for (int j = 0; j < L; j++) { sc[j] = std::exp(sc[j] - mx); sum += sc[j]; }
                double *o = &out[((size_t)r * c.n_head + h) * hd];
                for (int d = 0; d < hd; d++) o[d] = 0;
                for (int j = 0; j < L; j++) {
                    const uint16_t *v = c.value(s, j, kh);
                    const double w = sc[j] / sum;
                    for (int d = 0; d < hd; d++) o[d] += w * fp16_to_fp32(v[d]);
                }
            }
        }
    };
    const int nt = std::max(1, std::min((int)std::thread::hardware_concurrency(), 32));
    std::vector<std::thread> th;
    for (int i = 0; i < nt; i++) th.emplace_back(work, (int)((long long)n_rows * i / nt), (int)((long long)n_rows * (i + 1) / nt));
    for (auto &t : th) t.join();
    return out;
}

/* q rows [n_rows][q_stride]: q_dim random values, then NaN (the fused K and V columns) */
static std::vector<float> random_q(int n_rows, int q_dim, int q_stride) {
    std::vector<float> q((size_t)n_rows * q_stride, NAN);
    for (int r = 0; r < n_rows; r++)
        for (int i = 0; i < q_dim; i++) q[(size_t)r * q_stride + i] = rnd_f();
    return q;
}

static cuda_rope_params rope_of(const paged &c) {
    return cuda_rope_params{c.n_head,      c.n_head_kv,  c.hd, c.rope_dim, k_freq_base,
                            k_freq_scale, NULL,         c.neox ? 1 : 0,   c.kv_dtype};
}

/* ---- prefill ---- */

struct seq_spec { int prefix, n_new; bool rotate; }; /* slots already cached, tokens in the batch */

/* q_pad: extra floats per q row (1: rows not 16-byte aligned, the kernel's scalar q loads) */
static void test_prefill(const char *what, int hd, int n_head, int n_head_kv,
                         const std::vector<seq_spec> &seqs, int rope_dim = 0, bool neox = false,
                         int q_pad = 0, int kv_dtype = SI_KV_F16) {
    const int n_seqs = (int)seqs.size();
    std::vector<int> len;
    std::vector<uint8_t> rot;
    bool any_rot = false;
    for (const seq_spec &s : seqs) { len.push_back(s.prefix + s.n_new); rot.push_back(s.rotate); any_rot |= s.rotate; }
    paged c = make_paged(hd, n_head, n_head_kv, len, rot, rope_dim ? rope_dim : hd, neox, kv_dtype);
    std::vector<int32_t> seq, pos;
    std::vector<int> n_kv;
    int max_kv = 1;
    for (int s = 0; s < n_seqs; s++)
        for (int i = 0; i < seqs[s].n_new; i++) {
            seq.push_back(s);
            pos.push_back(seqs[s].prefix + i);
            n_kv.push_back(seqs[s].prefix + i + 1);
            max_kv = std::max(max_kv, seqs[s].prefix + i + 1);
        }
    const int n = (int)seq.size(), q_dim = n_head * hd, q_stride = q_dim + 2 * c.kvd + q_pad;
    std::vector<float> q = random_q(n, q_dim, q_stride);
    const float scale = 1.0f / sqrtf((float)hd);
    const std::vector<double> ref = ref_attention(c, q, q_stride, std::vector<int>(seq.begin(), seq.end()), n_kv, scale);

    float *dq = dcopy(q), *dout = dmalloc<float>((size_t)n * q_dim);
    int32_t *dseq = dcopy(seq), *dpos = dcopy(pos);
    const cuda_attn_params p = {n_head, n_head_kv, hd, c.max_blocks, scale, kv_dtype};
    const cuda_rope_params rp = rope_of(c);
    const size_t sb = cuda_attention_prefill_scratch_bytes(&p, n, n_seqs);
    uint8_t *ds = dmalloc<uint8_t>(sb);
    poison(ds, sb);
    poison(dout, (size_t)n * q_dim);
    const int rc = cuda_attention_prefill(dout, dq, q_stride, c.dkc, c.dvc, c.dbt, dseq, dpos, n, n_seqs, max_kv,
                                          any_rot ? c.drot : NULL, any_rot ? &rp : NULL, &p, ds, g_st);
    const std::vector<float> o = fetch(dout, (size_t)n * q_dim);
    char name[160];
    snprintf(name, sizeof name, "prefill%s %s: hd=%d H=%d/%d tokens=%d seqs=%d%s%s%s", kv_name(kv_dtype), what, hd,
             n_head, n_head_kv, n, n_seqs, any_rot ? (neox ? " rope_on_read neox" : " rope_on_read norm") : "",
             q_pad ? " q_stride odd" : "",
             hd == 64 || hd == 128 ? "" : " (decode-kernel path)");
    if (rc) printf("     cuda_attention_prefill returned %d (unsupported shape)\n", rc);
    report(name, rc ? NAN : max_abs_err(o, ref), hd == 64 || hd == 128 ? 5e-4 : 1e-4);
    CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dout)); CUDA_CHECK(cudaFree(dseq));
    CUDA_CHECK(cudaFree(dpos)); CUDA_CHECK(cudaFree(ds));
    free_paged(c);
}

/* ---- decode ---- */

/* A decode kernel setting (attn_decode_config): version 1 or 2; version 2's keys per CTA and
 * stages per warp (0: default, the 3-CTAs-per-SM two-stage variant where it exists; 3: the
 * head_dim's own, three stages at head_dim 128/256, "s3") */
struct dcfg { int version, part, stages; };
static const char *dcfg_name(dcfg k) {
    static char b[32];
    if (k.version == 1) snprintf(b, sizeof b, "v1 part 256");
    else if (k.part == 0) snprintf(b, sizeof b, "v2 default split%s", k.stages == 3 ? " s3" : "");
    else snprintf(b, sizeof b, "v2 part %d%s", k.part, k.stages == 3 ? " s3" : "");
    return b;
}
static void dcfg_set(dcfg k) { attn_decode_config(k.version, k.part, k.stages); }
/* the engine's: parts of ATTN_PART_V2 keys for steps of more than ATTN_SPLIT_ROWS rows, each row
 * split by its length for shorter ones (attention.cu, attn_split_for) */
static const dcfg k_dcfg_default = {2, 0, 0};

/* Decode of n_seqs sequences (q rows with the fused-QKV stride) against the reference, for
 * every setting in cfgs; rope_on_read is passed only when some sequence is rotated (otherwise
 * NULL: the kernels' other instantiation). Then each sequence alone (n_seqs 1, max_kv_len its
 * own length, so a different grid) must give bit for bit its row of the batch: under a fixed
 * split always, under the default one when the batch has at most ATTN_SPLIT_ROWS rows (more
 * take the other side's split, so only the agreement is printed). */
static void test_decode(int hd, int n_head, int n_head_kv, const std::vector<int> &len,
                        const std::vector<uint8_t> &rot, int rope_dim, bool neox,
                        const std::vector<dcfg> &cfgs, int kv_dtype = SI_KV_F16) {
    const int n_seqs = (int)len.size();
    paged c = make_paged(hd, n_head, n_head_kv, len, rot, rope_dim, neox, kv_dtype);
    const int q_dim = n_head * hd, q_stride = q_dim + 2 * c.kvd;
    int max_kv = 1;
    bool any_rot = false;
    for (int L : len) max_kv = std::max(max_kv, L);
    for (uint8_t r : rot) any_rot |= r != 0;
    std::vector<float> q = random_q(n_seqs, q_dim, q_stride);
    const float scale = 1.0f / sqrtf((float)hd);
    std::vector<int> row_seq(n_seqs);
    for (int s = 0; s < n_seqs; s++) row_seq[s] = s;
    const std::vector<double> ref = ref_attention(c, q, q_stride, row_seq, len, scale);
    float *dq = dcopy(q), *dout = dmalloc<float>((size_t)n_seqs * q_dim), *dalone = dmalloc<float>(q_dim);
    int32_t *dlen = dcopy(std::vector<int32_t>(len.begin(), len.end()));
    const cuda_attn_params p = {n_head, n_head_kv, hd, c.max_blocks, scale, kv_dtype};
    const cuda_rope_params rp = rope_of(c);
    const char *kvn = kv_name(kv_dtype);
    for (const dcfg &k : cfgs) {
        dcfg_set(k);
        const size_t sb = cuda_attention_scratch_bytes(&p, n_seqs, max_kv);
        uint8_t *ds = dmalloc<uint8_t>(sb);
        poison(ds, sb);
        poison(dout, (size_t)n_seqs * q_dim);
        const int rc = cuda_attention_decode(dout, dq, q_stride, c.dkc, c.dvc, c.dbt, dlen, n_seqs, max_kv,
                                             any_rot ? c.drot : NULL, &rp, &p, ds, g_st);
        const std::vector<float> o = fetch(dout, (size_t)n_seqs * q_dim);
        char name[200];
        if (any_rot)
            snprintf(name, sizeof name, "decode%s %s rope_on_read %s rd=%d: hd=%d H=%d/%d seqs=%d max_len=%d",
                     kvn, dcfg_name(k), neox ? "neox" : "norm", rope_dim, hd, n_head, n_head_kv, n_seqs, max_kv);
        else
            snprintf(name, sizeof name, "decode%s %s: hd=%d H=%d/%d seqs=%d max_len=%d", kvn, dcfg_name(k), hd,
                     n_head, n_head_kv, n_seqs, max_kv);
        report(name, rc ? NAN : max_abs_err(o, ref), 1e-4);
        /* each sequence alone: bit-identical to its row in the batch (error: differing floats) */
        double n_diff = rc ? NAN : 0;
        for (int s = 0; s < n_seqs && !rc; s++) {
            poison(ds, sb);
            poison(dalone, q_dim);
            if (cuda_attention_decode(dalone, dq + (size_t)s * q_stride, q_stride, c.dkc, c.dvc,
                                      c.dbt + (size_t)s * c.max_blocks, dlen + s, 1, std::max(1, len[s]),
                                      any_rot ? c.drot + s : NULL, &rp, &p, ds, g_st) != 0) {
                n_diff = NAN;
                break;
            }
            const std::vector<float> a = fetch(dalone, q_dim);
            if (memcmp(a.data(), &o[(size_t)s * q_dim], q_dim * sizeof(float)) != 0)
                for (int i = 0; i < q_dim; i++) n_diff += a[i] != o[(size_t)s * q_dim + i];
        }
        snprintf(name, sizeof name, "decode%s %s: hd=%d H=%d/%d each sequence alone == its batch row (bitwise)",
                 kvn, dcfg_name(k), hd, n_head, n_head_kv);
        const bool fixed = k.part > 0 || (k.version == 1 && kv_dtype == SI_KV_F16);
        if (fixed || n_seqs <= ATTN_SPLIT_ROWS) report(name, n_diff, 0);
        else printf("INFO %s: not promised for %d rows, %g floats differ\n", name, n_seqs, n_diff);
        CUDA_CHECK(cudaFree(ds));
    }
    dcfg_set(k_dcfg_default);
    CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dout)); CUDA_CHECK(cudaFree(dalone));
    CUDA_CHECK(cudaFree(dlen));
    free_paged(c);
}

/* ---- decode with the RoPE + KV write folded in (cuda_attention_decode_rope) ---- */

/* Row x[n] quantised as the GEMVs' x (CUDA_Q8X_ROW_BYTES(n): int8 q, f32 d rounded to f16, int32
 * sums of q per 32), by ggml's quantize_row_q8_0_ref arithmetic (d = amax / 127, q = round(x / d)
 * through 1 / d) */
static std::vector<uint8_t> ref_q8x_row(const float *x, int n) {
    std::vector<uint8_t> row(CUDA_Q8X_ROW_BYTES(n));
    float *dd = (float *)(row.data() + n);
    int32_t *ss = (int32_t *)(dd + n / 32);
    for (int b = 0; b < n / 32; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = std::max(amax, std::fabs(x[32 * b + j]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            const int q = (int)roundf(x[32 * b + j] * id);
            row[32 * b + j] = (uint8_t)(int8_t)q;
            sum += q;
        }
        dd[b] = round_f16(d);
        ss[b] = sum;
    }
    return row;
}

/* A decode step of n_seqs sequences whose last slot, len[s] - 1, is the step's new token (q, k,
 * v in fused-QKV rows; RoPE position len[s] - 1 + 5 (s % 3), so the angles follow pos, not the
 * slot), two ways on copies of one cache: cuda_rope_kv_write then cuda_attention_decode, and the
 * fused kernel. Both caches must be equal byte for byte, the outputs bit for bit, the fused call
 * must leave q, k and v as given, and its output must match the reference over the two-kernel
 * path's cache and rotated q; its quantised output (out_q8) must be ref_q8x_row of its output,
 * byte for byte. Under version 1 with f16 caches (and for rope_dim % 16 != 0) the
 * fused call must decline (1) and write nothing. */
static void test_decode_fused(int hd, int n_head, int n_head_kv, const std::vector<int> &len,
                              int rope_dim, bool neox, const std::vector<dcfg> &cfgs,
                              int kv_dtype = SI_KV_F16) {
    const int n = (int)len.size();
    paged c = make_paged(hd, n_head, n_head_kv, len, std::vector<uint8_t>(n, 0), rope_dim, neox,
                         kv_dtype);
    const bool fp8 = kv_dtype == SI_KV_FP8_E4M3;
    const int q_dim = n_head * hd, qs = q_dim + 2 * c.kvd, max_kv = *std::max_element(len.begin(), len.end());
    std::vector<float> qkv((size_t)n * qs);
    for (auto &x : qkv) x = rnd_f();
    std::vector<int32_t> pos(n), slot(n);
    for (int s = 0; s < n; s++) {
        const int j = len[s] - 1;
        pos[s] = j + 5 * (s % 3);
        slot[s] = c.bt[(size_t)s * c.max_blocks + j / 16] * 16 + j % 16;
    }
    const size_t cache_bytes = c.kc.size() * (fp8 ? 1 : 2), out_n = (size_t)n * q_dim;
    float *dqa = dcopy(qkv), *dqb = dcopy(qkv), *da = dmalloc<float>(out_n), *db = dmalloc<float>(out_n);
    int32_t *dpos = dcopy(pos), *dslot = dcopy(slot), *dlen = dcopy(std::vector<int32_t>(len.begin(), len.end()));
    uint8_t *kca = dmalloc<uint8_t>(cache_bytes), *vca = dmalloc<uint8_t>(cache_bytes);
    uint8_t *kcb = dmalloc<uint8_t>(cache_bytes), *vcb = dmalloc<uint8_t>(cache_bytes);
    const bool with_q8 = q_dim % 128 == 0; /* out_q8's condition */
    const size_t q8_bytes = (size_t)n * CUDA_Q8X_ROW_BYTES(q_dim);
    uint8_t *dq8 = dmalloc<uint8_t>(q8_bytes);
    uint16_t *dh = dmalloc<uint16_t>((size_t)n * q_dim); /* out_h */
    const float scale = 1.0f / sqrtf((float)hd);
    const cuda_attn_params p = {n_head, n_head_kv, hd, c.max_blocks, scale, kv_dtype};
    const cuda_rope_params rp = rope_of(c);
    std::vector<int> row_seq(n);
    for (int s = 0; s < n; s++) row_seq[s] = s;
    char name[200];
    for (const dcfg &k : cfgs) {
        dcfg_set(k);
        const size_t sb = cuda_attention_scratch_bytes(&p, n, max_kv);
        uint8_t *ds = dmalloc<uint8_t>(sb);
        CUDA_CHECK(cudaMemcpy(dqa, qkv.data(), qkv.size() * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dqb, qkv.data(), qkv.size() * sizeof(float), cudaMemcpyHostToDevice));
        for (uint8_t *d : {kca, kcb}) CUDA_CHECK(cudaMemcpy(d, c.dkc, cache_bytes, cudaMemcpyDeviceToDevice));
        for (uint8_t *d : {vca, vcb}) CUDA_CHECK(cudaMemcpy(d, c.dvc, cache_bytes, cudaMemcpyDeviceToDevice));
        poison(da, out_n);
        poison(db, out_n);
        poison(ds, sb);
        cuda_rope_kv_write(dqa, qs, dqa + q_dim, qs, dqa + q_dim + c.kvd, qs, dpos, dslot, NULL, n, kca, vca,
                           &rp, g_st);
        const int rca = cuda_attention_decode(da, dqa, qs, kca, vca, c.dbt, dlen, n, max_kv, NULL, &rp, &p, ds,
                                              g_st);
        poison(ds, sb);
        poison(dq8, q8_bytes);
        poison(dh, (size_t)n * q_dim);
        const int rc = cuda_attention_decode_rope(db, dqb, qs, dqb + q_dim, qs, dqb + q_dim + c.kvd,
                                                  qs, dpos, dslot, kcb, vcb, c.dbt, dlen, n, max_kv,
                                                  &rp, &p, with_q8 ? dq8 : NULL, dh, ds, g_st);
        const std::vector<uint8_t> q8 = fetch(dq8, q8_bytes);
        const std::vector<uint16_t> oh = fetch(dh, (size_t)n * q_dim);
        const std::vector<float> oa = fetch(da, out_n), ob = fetch(db, out_n);
        const std::vector<float> qa = fetch(dqa, qkv.size()), qb = fetch(dqb, qkv.size());
        const std::vector<uint8_t> ka = fetch(kca, cache_bytes), kb = fetch(kcb, cache_bytes);
        const std::vector<uint8_t> va = fetch(vca, cache_bytes), vb = fetch(vcb, cache_bytes);
        snprintf(name, sizeof name, "decode+rope%s %s %s rd=%d: hd=%d H=%d/%d seqs=%d max_len=%d", kv_name(kv_dtype),
                 dcfg_name(k), neox ? "neox" : "norm", rope_dim, hd, n_head, n_head_kv, n, max_kv);
        /* version 1 reads f16 only: FP8 caches run version 2 under it (attn_version) */
        const bool declines = (k.version == 1 && !fp8) || rope_dim % 16 != 0;
        if (declines) { /* 1 and nothing written: the output stays poisoned, the cache as it was */
            bool untouched = kb == fetch((const uint8_t *)c.dkc, cache_bytes) &&
                             vb == fetch((const uint8_t *)c.dvc, cache_bytes);
            for (size_t i = 0; i < out_n; i++) { /* still the 0xFF poison */
                uint32_t bits;
                memcpy(&bits, &ob[i], 4);
                untouched &= bits == 0xFFFFFFFFu;
            }
            snprintf(name + strlen(name), sizeof name - strlen(name), ": declines (rc 1, nothing written)");
            report(name, rc == 1 && untouched ? 0 : NAN, 0);
            CUDA_CHECK(cudaFree(ds));
            continue;
        }
        double n_diff = rc || rca ? NAN : 0;
        for (size_t i = 0; i < out_n && !rc; i++) n_diff += memcmp(&oa[i], &ob[i], sizeof(float)) != 0;
        report((std::string(name) + ": output == two kernels' (bitwise)").c_str(), n_diff, 0);
        double c_diff = 0;
        for (size_t i = 0; i < cache_bytes; i++) c_diff += (ka[i] != kb[i]) + (va[i] != vb[i]);
        report((std::string(name) + ": caches == two kernels' (bytes)").c_str(), c_diff, 0);
        report((std::string(name) + ": q, k, v left as given").c_str(),
               memcmp(qb.data(), qkv.data(), qkv.size() * sizeof(float)) ? NAN : 0, 0);
        double q8_diff = 0; /* bytes differing from the output's quantisation */
        for (int r = 0; r < n && with_q8; r++) {
            const std::vector<uint8_t> want = ref_q8x_row(&ob[(size_t)r * q_dim], q_dim);
            for (size_t i = 0; i < want.size(); i++) q8_diff += q8[r * want.size() + i] != want[i];
        }
        if (with_q8) report((std::string(name) + ": out_q8 == q8 of out (bytes)").c_str(), q8_diff, 0);
        double h_diff = 0; /* out_h: out rounded to f16, as cuda_gemm's conversion */
        for (size_t i = 0; i < out_n; i++) h_diff += oh[i] != fp32_to_fp16(ob[i]);
        report((std::string(name) + ": out_h == f16 of out (bits)").c_str(), h_diff, 0);
        /* the reference over the two-kernel path's cache (rotated k, v at each new slot) and q */
        if (fp8) {
            c.kc8 = ka;
            c.vc8 = va;
            for (size_t i = 0; i < ka.size(); i++) {
                c.kc[i] = fp32_to_fp16(from_e4m3(ka[i]));
                c.vc[i] = fp32_to_fp16(from_e4m3(va[i]));
            }
        } else {
            memcpy(c.kc.data(), ka.data(), cache_bytes);
            memcpy(c.vc.data(), va.data(), cache_bytes);
        }
        const std::vector<double> ref = ref_attention(c, qa, qs, row_seq, len, scale);
        report((std::string(name) + ": vs reference").c_str(), max_abs_err(ob, ref), 1e-4);
        CUDA_CHECK(cudaFree(ds));
    }
    dcfg_set(k_dcfg_default);
    for (void *d : std::initializer_list<void *>{dqa, dqb, da, db, dpos, dslot, dlen, kca, vca, kcb, vcb, dq8, dh})
        CUDA_CHECK(cudaFree(d));
    free_paged(c);
}

/* ---- cuda_rope_kv_write with k_unrotated ---- */

/* Tokens flagged k_unrotated keep k as given (in place and in the cache); q is rotated for all.
 * FP8 caches: every cached byte must be the E4M3 rounding of the kernel's own f32 k (rotated in
 * place, checked against the reference) and of v, exactly; v has values past 448 there, to
 * check the saturation. */
static void test_rope_k_unrotated(int n_tokens, int n_head, int n_head_kv, int hd, bool neox,
                                  int kv_dtype = SI_KV_F16) {
    const bool fp8 = kv_dtype == SI_KV_FP8_E4M3;
    const int qd = n_head * hd, kvd = n_head_kv * hd;
    std::vector<float> q((size_t)n_tokens * qd), k((size_t)n_tokens * kvd), v((size_t)n_tokens * kvd);
    for (auto &x : q) x = rnd_f();
    for (auto &x : k) x = rnd_f();
    for (size_t i = 0; i < v.size(); i++) v[i] = rnd_f() * (fp8 && i % 5 == 0 ? 1000.0f : 1.0f);
    std::vector<int32_t> pos(n_tokens), slot(n_tokens);
    std::vector<uint8_t> unrot(n_tokens);
    for (int t = 0; t < n_tokens; t++) { pos[t] = rnd_int(4096); slot[t] = t; unrot[t] = t % 2; }
    float *dq = dcopy(q), *dk = dcopy(k), *dv = dcopy(v);
    int32_t *dpos = dcopy(pos), *dslot = dcopy(slot);
    uint8_t *dun = dcopy(unrot);
    const size_t cache_n = (size_t)n_tokens * kvd, esz = fp8 ? 1 : 2;
    uint8_t *dkc = dmalloc<uint8_t>(cache_n * esz), *dvc = dmalloc<uint8_t>(cache_n * esz);
    poison(dkc, cache_n * esz); poison(dvc, cache_n * esz);
    const cuda_rope_params p = {n_head, n_head_kv, hd, hd, k_freq_base, k_freq_scale, NULL, neox ? 1 : 0, kv_dtype};
    cuda_rope_kv_write(dq, qd, dk, kvd, dv, kvd, dpos, dslot, dun, n_tokens, dkc, dvc, &p, g_st);
    const std::vector<float> oq = fetch(dq, q.size()), ok = fetch(dk, k.size());
    const std::vector<uint8_t> kc = fetch(dkc, cache_n * esz), vc = fetch(dvc, cache_n * esz);
    const uint16_t *kc16 = (const uint16_t *)kc.data(), *vc16 = (const uint16_t *)vc.data();
    double eq = 0, ek = 0, ec = 0, n_bad = 0;
    for (int t = 0; t < n_tokens; t++) {
        for (int h = 0; h < n_head; h++) ref_rope_head(&q[(size_t)t * qd + (size_t)h * hd], pos[t], hd, neox);
        if (!unrot[t])
            for (int h = 0; h < n_head_kv; h++) ref_rope_head(&k[(size_t)t * kvd + (size_t)h * hd], pos[t], hd, neox);
        for (int i = 0; i < qd; i++) eq = std::max(eq, (double)std::fabs(oq[(size_t)t * qd + i] - q[(size_t)t * qd + i]));
        for (int i = 0; i < kvd; i++) {
            const size_t e = (size_t)t * kvd + i;
            ek = std::max(ek, (double)std::fabs(ok[e] - k[e]));
            if (fp8) { /* the bytes of the kernel's own f32 values, exactly */
                n_bad += kc[e] != to_e4m3(ok[e]);
                n_bad += vc[e] != to_e4m3(v[e]);
                continue;
            }
            /* the cache: f16 of the (un)rotated k, and of v */
            ec = std::max(ec, (double)std::fabs(fp16_to_fp32(kc16[e]) - round_f16(k[e])));
            ec = std::max(ec, (double)std::fabs(fp16_to_fp32(vc16[e]) - round_f16(v[e])));
            if (std::isnan(ok[e]) || std::isnan(fp16_to_fp32(kc16[e])) || std::isnan(fp16_to_fp32(vc16[e]))) ec = NAN;
        }
    }
    const char *kvn = kv_name(kv_dtype), *rn = neox ? "neox" : "norm";
    char name[160];
    snprintf(name, sizeof name, "rope_kv_write%s k_unrotated (odd tokens) %s T=%d H=%d/%d hd=%d: q rotated", kvn,
             rn, n_tokens, n_head, n_head_kv, hd);
    report(name, eq, 2e-5);
    snprintf(name, sizeof name, "rope_kv_write%s k_unrotated %s: k in place (odd tokens as given)", kvn, rn);
    report(name, ek, 2e-5);
    if (fp8) {
        snprintf(name, sizeof name, "rope_kv_write fp8 k_unrotated %s: cache bytes = e4m3(k out), e4m3(v) (count)",
                 rn);
        report(name, n_bad, 0);
    } else {
        /* one f16 ulp where sincosf and cosf/sinf round a rotated k to neighbouring halves */
        snprintf(name, sizeof name, "rope_kv_write k_unrotated %s: cache = f16(k as given / rotated), f16(v)", rn);
        report(name, ec, 1e-3);
    }
    CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dk)); CUDA_CHECK(cudaFree(dv)); CUDA_CHECK(cudaFree(dpos));
    CUDA_CHECK(cudaFree(dslot)); CUDA_CHECK(cudaFree(dun)); CUDA_CHECK(cudaFree(dkc)); CUDA_CHECK(cudaFree(dvc));
}

/* ---- E4M3 conversion: the GPU's cvt (the kernels') against the host's (the reference's) ---- */

__global__ void e4m3_kernel(const float *x, int n, uint8_t *out, float *back) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = kv_fp8::from_float(x[i]);
    back[i] = kv_fp8::to_float(out[i]);
}
__global__ void e4m3_load8_kernel(const uint8_t *b, int n8, float *out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    const uint4 h = kv_fp8::load_h8(b + 8 * i);
    const __half *hh = (const __half *)&h;
    for (int j = 0; j < 8; j++) out[8 * i + j] = __half2float(hh[j]);
}

/* Every finite E4M3 value, each midpoint between neighbours (ties: to even), values just either
 * side of them, the saturation range and random floats: the device conversion must give the
 * host's bytes, and both some known anchors; reading back (one value and 8 at a time) must give
 * the exact values. */
static void test_e4m3_conversion() {
    std::vector<float> x;
    std::vector<float> pos_vals;
    for (int b = 0; b < 0x7F; b++) pos_vals.push_back(from_e4m3((uint8_t)b)); /* 0 .. 448 */
    for (size_t i = 0; i < pos_vals.size(); i++) {
        const float a = pos_vals[i];
        x.push_back(a);
        if (i + 1 < pos_vals.size()) {
            const float mid = 0.5f * (a + pos_vals[i + 1]);
            x.push_back(mid);
            x.push_back(nextafterf(mid, 0.0f));
            x.push_back(nextafterf(mid, 1e30f));
        }
    }
    for (float v : {464.0f, 463.9f, 480.0f, 500.0f, 1e6f, 3.0e38f}) x.push_back(v);
    for (int i = 0; i < 20000; i++) x.push_back(rnd_f() * (float)(1 << rnd_int(12)) / (float)(1 << rnd_int(14)));
    const size_t n0 = x.size();
    for (size_t i = 0; i < n0; i++) x.push_back(-x[i]);
    while (x.size() % 8) x.push_back(0.0f);
    const int n = (int)x.size();
    float *dx = dcopy(x), *dback = dmalloc<float>(n), *dload = dmalloc<float>(n);
    uint8_t *db = dmalloc<uint8_t>(n);
    poison(db, n); poison(dback, n); poison(dload, n);
    e4m3_kernel<<<(n + 255) / 256, 256, 0, g_st>>>(dx, n, db, dback);
    e4m3_load8_kernel<<<(n / 8 + 255) / 256, 256, 0, g_st>>>(db, n / 8, dload);
    CUDA_CHECK(cudaGetLastError());
    const std::vector<uint8_t> b = fetch(db, n);
    const std::vector<float> back = fetch(dback, n), load = fetch(dload, n);
    double n_diff = 0, n_back = 0;
    for (int i = 0; i < n; i++) {
        n_diff += b[i] != to_e4m3(x[i]);
        n_back += !(back[i] == from_e4m3(b[i])) + !(load[i] == from_e4m3(b[i]));
    }
    /* anchors, independent of either conversion: 1 = 0x38, 448 = 0x7E, saturation, the smallest
     * subnormal 2^-9 = 0x01, its half a tie that rounds to even (0), 1.0625 (between 1 and
     * 1.125) a tie that rounds to even (1.0), 1.1875 one that rounds up to 1.25 = 0x3A */
    const struct { float x; uint8_t b; } anchors[] = {
        {1.0f, 0x38}, {448.0f, 0x7E}, {1000.0f, 0x7E}, {-1000.0f, 0xFE}, {0.001953125f, 0x01},
        {0.0009765625f, 0x00}, {1.0625f, 0x38}, {1.1875f, 0x3A}, {-2.0f, 0xC0}};
    double n_anchor = 0;
    for (const auto &a : anchors) n_anchor += to_e4m3(a.x) != a.b;
    char name[160];
    snprintf(name, sizeof name, "e4m3: GPU cvt == host conversion, %d floats (count differing)", n);
    report(name, n_diff, 0);
    report("e4m3: GPU read-back (one and 8 at a time) == exact values (count differing)", n_back, 0);
    report("e4m3: host conversion on known values: 1, 448, saturation, subnormal, ties to even", n_anchor, 0);
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dback)); CUDA_CHECK(cudaFree(dload)); CUDA_CHECK(cudaFree(db));
}

/* ---- timing ---- */

/* Median of 20 runs of f after an L2 flush (timing.cuh's time_median_us), so every run starts
 * from cold caches, as a layer of a real forward pass does for its K/V. */
template <class F> static double time_us(F f) { return time_median_us(f, 20); }

/* The prefill kernel on n_seqs sequences of n_new tokens each from position 0 (no reference:
 * random cache), L2 flushed. FLOPs: 4 * head_dim * n_head per (query, visible key). */
static void bench_prefill(int n_seqs, int n_new, int n_head, int n_head_kv, int hd) {
    std::vector<int> len(n_seqs, n_new);
    paged c = make_paged(hd, n_head, n_head_kv, len, std::vector<uint8_t>(n_seqs, 0), hd, false);
    std::vector<int32_t> seq, pos;
    double flops = 0;
    for (int s = 0; s < n_seqs; s++)
        for (int i = 0; i < n_new; i++) {
            seq.push_back(s);
            pos.push_back(i);
            flops += 4.0 * hd * n_head * (i + 1);
        }
    const int n = (int)seq.size(), q_dim = n_head * hd, q_stride = q_dim + 2 * c.kvd;
    std::vector<float> q = random_q(n, q_dim, q_stride);
    float *dq = dcopy(q), *dout = dmalloc<float>((size_t)n * q_dim);
    int32_t *dseq = dcopy(seq), *dpos = dcopy(pos);
    const cuda_attn_params p = {n_head, n_head_kv, hd, c.max_blocks, 1.0f / sqrtf((float)hd)};
    const size_t sb = cuda_attention_prefill_scratch_bytes(&p, n, n_seqs);
    uint8_t *ds = dmalloc<uint8_t>(sb);
    const double us = time_us([&] {
        if (cuda_attention_prefill(dout, dq, q_stride, c.dkc, c.dvc, c.dbt, dseq, dpos, n, n_seqs, n_new, NULL,
                                   NULL, &p, ds, g_st) != 0) {
            printf("FAIL bench: cuda_attention_prefill rejected the shape\n");
            g_fail++;
        }
    });
    printf("TIME prefill %d x %-5d tokens H=%d/%d hd=%d (causal): %9.1f us  %6.1f TFLOP/s  (x32 layers: %.2f ms)\n",
           n_seqs, n_new, n_head, n_head_kv, hd, us, flops / us * 1e-6, us * 32 * 1e-3);
    CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dout)); CUDA_CHECK(cudaFree(dseq));
    CUDA_CHECK(cudaFree(dpos)); CUDA_CHECK(cudaFree(ds));
    free_paged(c);
}

/* The decode kernel: n_seqs sequences of len keys, L2 flushed, each setting of cfgs on the same
 * cache; GB/s of K and V read and their fraction of the H200's measured copy bandwidth. Without
 * rope_on_read every setting's output is also checked against the reference (1e-4). */
static const double k_copy_gbs = 4210.0; /* H200 measured copy bandwidth (issue 6) */
static void bench_decode(int n_seqs, int len, int n_head, int n_head_kv, int hd, bool rotate,
                         const std::vector<dcfg> &cfgs, int kv_dtype = SI_KV_F16) {
    paged c = make_paged(hd, n_head, n_head_kv, std::vector<int>(n_seqs, len),
                         std::vector<uint8_t>(n_seqs, rotate), hd, true, kv_dtype);
    const int esz = kv_dtype == SI_KV_FP8_E4M3 ? 1 : 2;
    const int q_dim = n_head * hd;
    std::vector<float> q = random_q(n_seqs, q_dim, q_dim);
    float *dq = dcopy(q), *dout = dmalloc<float>((size_t)n_seqs * q_dim);
    int32_t *dlen = dcopy(std::vector<int32_t>(n_seqs, len));
    const cuda_attn_params p = {n_head, n_head_kv, hd, c.max_blocks, 1.0f / sqrtf((float)hd), kv_dtype};
    const cuda_rope_params rp = rope_of(c);
    const double bytes = (double)n_seqs * len * c.kvd * 2 * esz;
    std::vector<double> ref;
    for (size_t ci = 0; ci < cfgs.size(); ci++) {
        dcfg_set(cfgs[ci]);
        const size_t sb = cuda_attention_scratch_bytes(&p, n_seqs, len);
        uint8_t *ds = dmalloc<uint8_t>(sb);
        poison(dout, (size_t)n_seqs * q_dim);
        const double us = time_us([&] {
            if (cuda_attention_decode(dout, dq, q_dim, c.dkc, c.dvc, c.dbt, dlen, n_seqs, len,
                                      rotate ? c.drot : NULL, &rp, &p, ds, g_st) != 0) {
                printf("FAIL bench: cuda_attention_decode rejected the shape\n");
                g_fail++;
            }
        });
        const double gbs = bytes / us * 1e-3;
        printf("TIME decode%s %2d seqs x len %-5d H=%d/%d hd=%d%s %-12s: %8.1f us  %7.1f GB/s  %5.1f%% of %.0f"
               "  (x32 layers: %.2f ms)\n", kv_name(kv_dtype), n_seqs, len, n_head, n_head_kv, hd,
               rotate ? " rope_on_read" : "", dcfg_name(cfgs[ci]), us, gbs, 100.0 * gbs / k_copy_gbs, k_copy_gbs, us * 32 * 1e-3);
        fflush(stdout);
        if (!rotate) {
            const std::vector<float> o = fetch(dout, (size_t)n_seqs * q_dim);
            if (ref.empty()) {
                std::vector<int> row_seq(n_seqs);
                for (int s = 0; s < n_seqs; s++) row_seq[s] = s;
                ref = ref_attention(c, q, q_dim, row_seq, std::vector<int>(n_seqs, len), p.scale);
            }
            char name[160];
            snprintf(name, sizeof name, "decode%s %s (timed shape): hd=%d H=%d/%d seqs=%d len=%d",
                     kv_name(kv_dtype), dcfg_name(cfgs[ci]), hd, n_head, n_head_kv, n_seqs, len);
            report(name, max_abs_err(o, ref), 1e-4);
        }
        CUDA_CHECK(cudaFree(ds));
    }
    dcfg_set(k_dcfg_default);
    CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dout)); CUDA_CHECK(cudaFree(dlen));
    free_paged(c);
}

/* The FP8-cache checks: the conversion, the RoPE write, prefill (tensor-core kernel and the
 * decode-kernel fallback) and decode (MHA and GQA, lengths past several 512-key parts, shuffled
 * blocks, rope_on_read; every setting, version 1's included: FP8 runs version 2 under it); then
 * the decode timings of the f16 table's shapes (bytes: one per element). */
static void fp8_tests(bool small, bool bench, bool prefill) {
    const int F8 = SI_KV_FP8_E4M3;
    test_e4m3_conversion();
    if (prefill) {
        test_rope_k_unrotated(small ? 6 : 64, 8, 2, 64, false, F8);
        test_rope_k_unrotated(small ? 6 : 64, 8, 2, 128, true, F8);
        if (small) {
            test_prefill("ragged, prefix cached", 64, 4, 1, {{0, 70, false}, {21, 45, false}, {64, 1, false}}, 0,
                         false, 0, F8);
            test_prefill("mixed streaming", 128, 4, 1, {{0, 40, true}, {30, 20, false}, {70, 9, true}}, 128, true,
                         0, F8);
            test_prefill("fallback", 256, 4, 2, {{0, 20, false}, {9, 7, true}}, 256, true, 0, F8);
        } else {
            test_prefill("one sequence 1024 from pos 0", 128, 8, 8, {{0, 1024, false}}, 0, false, 0, F8);
            test_prefill("ragged, prefix cached", 128, 32, 4,
                         {{0, 100, false}, {517, 333, false}, {64, 64, false}, {1000, 1, false}}, 0, false, 0, F8);
            test_prefill("ragged, prefix cached", 64, 16, 2, {{0, 100, false}, {37, 200, false}}, 0, false, 0, F8);
            test_prefill("chunks straddling 64-position windows", 128, 8, 1,
                         {{63, 2, false}, {127, 2, false}, {0, 1, false}, {62, 67, false}}, 0, false, 1, F8);
            test_prefill("mixed streaming", 128, 32, 8, {{0, 300, true}, {200, 77, false}, {1000, 130, true}}, 128,
                         true, 0, F8);
            test_prefill("mixed streaming, partial rope", 64, 8, 2, {{513, 200, true}, {0, 65, false}}, 32, false,
                         0, F8);
            test_prefill("fallback", 256, 8, 2, {{0, 100, false}, {300, 70, true}}, 256, true, 0, F8);
        }
    }
    if (small) {
        const std::vector<dcfg> cf = {k_dcfg_default, {2, 16, 0}, {2, 64, 3}, {1, 0, 0}};
        test_decode(128, 8, 2, {1, 17, 70}, {1, 0, 1}, 128, true, cf, F8);
        test_decode(64, 8, 2, {50, 30}, {1, 1}, 36, true, cf, F8); /* per-element rotation path */
        test_decode(128, 32, 32, {1, 300}, {0, 0}, 128, false, cf, F8);
        test_decode(256, 4, 2, {40, 9}, {0, 0}, 256, false, cf, F8);
    } else {
        const std::vector<dcfg> cf = {k_dcfg_default, {2, 512, 0}, {2, 16, 0}, {2, 1024, 0}, {2, 256, 3},
                                      {2, 1024, 3}, {1, 0, 0}};
        /* MHA: block and split edges, several 512-key parts */
        test_decode(128, 32, 32, {1, 15, 16, 17, 255, 257, 640, 1000, 1537}, std::vector<uint8_t>(9, 0), 128,
                    false, cf, F8);
        /* GQA 4 and 8, long */
        test_decode(128, 32, 8, {2048, 1, 700, 33}, std::vector<uint8_t>(4, 0), 128, false, cf, F8);
        test_decode(128, 16, 2, {400, 20, 1100}, std::vector<uint8_t>(3, 0), 128, false, cf, F8);
        test_decode(64, 16, 2, {1023, 64, 1}, std::vector<uint8_t>(3, 0), 64, false, cf, F8);
        test_decode(256, 16, 2, {300, 1025}, std::vector<uint8_t>(2, 0), 256, false, cf, F8);
        /* sinks: rope_on_read (neox vector path, norm, per-element path), mixed with plain rows */
        test_decode(128, 32, 8, {1, 17, 600, 1000}, {1, 0, 1, 1}, 128, true, cf, F8);
        test_decode(64, 16, 2, {513, 2000}, {1, 0}, 32, false, cf, F8);
        test_decode(64, 8, 2, {50, 700}, {1, 1}, 36, true, cf, F8);
        test_decode(256, 8, 1, {100, 900}, {0, 1}, 256, false, cf, F8);
    }
    if (bench) {
        const std::vector<dcfg> cf = {k_dcfg_default, {2, 512, 0}, {2, 1024, 0}, {2, 256, 3}, {2, 512, 3}};
        bench_decode(64, 640, 32, 32, 128, false, cf, F8);
        bench_decode(1, 4096, 32, 32, 128, false, cf, F8);
        bench_decode(8, 2048, 32, 8, 128, false, cf, F8);
        bench_decode(32, 1024, 32, 8, 128, false, cf, F8);
        bench_decode(64, 640, 32, 32, 128, true, {k_dcfg_default}, F8);
    }
}

int main(int argc, char **argv) {
    bool small = false, bench = true, prefill = true, only_fp8 = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small")) small = true;
        else if (!strcmp(argv[i], "--no-bench")) bench = false;
        else if (!strcmp(argv[i], "--decode")) prefill = false;
        else if (!strcmp(argv[i], "--fp8")) only_fp8 = true;
        else { fprintf(stderr, "usage: %s [--small] [--no-bench] [--decode] [--fp8]\n", argv[0]); return 2; }
    }
    if (small) bench = false;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
    timing_init();

    fp8_tests(small, bench, prefill);
    if (only_fp8) {
        printf("\n%d checks, %d failed\n%s\n", g_checks, g_fail, g_fail ? "FAILED" : "ALL PASSED");
        timing_free();
        return g_fail ? 1 : 0;
    }

    /* k_unrotated of cuda_rope_kv_write */
    if (prefill) {
        test_rope_k_unrotated(small ? 6 : 64, 8, 2, 64, false);
        test_rope_k_unrotated(small ? 6 : 64, 8, 2, 64, true);
    }

    /* prefill: {cached prefix, new tokens, rope_on_read} per sequence */
    const std::vector<seq_spec> ragged = {{0, 100, false}, {517, 333, false}, {64, 64, false},
                                          {1000, 1, false}, {37, 200, false}};
    const std::vector<seq_spec> straddle = {{63, 2, false}, {127, 2, false}, {0, 1, false}, {191, 3, false},
                                            {62, 67, false}, {255, 2, false}, {5, 1, false}, {319, 2, false}};
    if (small && prefill) {
        test_prefill("ragged, prefix cached", 64, 4, 1, {{0, 70, false}, {21, 45, false}, {64, 1, false}});
        test_prefill("ragged, prefix cached", 128, 8, 2, {{0, 17, false}, {100, 30, false}});
        test_prefill("chunks straddling 64-position windows", 64, 2, 2, straddle, 0, false, 1);
        test_prefill("mixed streaming", 128, 4, 1, {{0, 40, true}, {30, 20, false}, {70, 9, true}}, 128, true);
        test_prefill("mixed streaming, partial rope", 64, 8, 1, {{10, 50, true}, {0, 5, false}}, 32, false);
        test_prefill("fallback", 256, 4, 2, {{0, 20, false}, {9, 7, true}}, 256, true);
    } else if (prefill) {
        test_prefill("one sequence 2048 from pos 0", 128, 8, 8, {{0, 2048, false}});
        test_prefill("one sequence 2048 from pos 0", 64, 4, 1, {{0, 2048, false}});
        test_prefill("ragged, prefix cached", 128, 16, 4, ragged);
        test_prefill("ragged, prefix cached", 128, 32, 4, ragged);
        test_prefill("ragged, prefix cached", 64, 8, 8, ragged);
        test_prefill("ragged, prefix cached", 64, 16, 2, ragged);
        test_prefill("chunks straddling 64-position windows", 128, 8, 1, straddle, 0, false, 1);
        test_prefill("mixed streaming", 128, 32, 8,
                     {{0, 300, true}, {200, 77, false}, {1000, 130, true}, {0, 1, true}}, 128, true);
        test_prefill("mixed streaming, partial rope", 64, 8, 2, {{513, 200, true}, {0, 65, false}}, 32, false);
        test_prefill("mixed streaming", 128, 8, 1, {{40, 100, true}, {0, 129, true}}, 128, false);
        test_prefill("fallback", 256, 8, 2, {{0, 100, false}, {300, 70, true}}, 256, true);
        test_prefill("streaming, rope_dim 36", 64, 8, 2, {{100, 50, true}}, 36, false);
    }
    if (small) {
        /* part 16: one block per CTA (idle warps); v1: the first kernel */
        const std::vector<dcfg> cf = {k_dcfg_default, {2, 16, 0}, {2, 64, 3}, {1, 0, 0}};
        test_decode(128, 8, 2, {1, 17, 70}, {1, 0, 1}, 128, true, cf);
        test_decode(64, 4, 4, {40, 33}, {1, 1}, 32, false, cf);
        test_decode(64, 8, 2, {50, 30}, {1, 1}, 36, true, cf); /* rope_dim / 2 odd: per-element path */
        test_decode(128, 12, 4, {1, 33, 300}, {0, 0, 0}, 128, false, cf); /* G = 3 */
        test_decode(64, 16, 2, {70, 16}, {0, 0}, 64, false, cf);          /* G = 8 */
        test_decode(256, 4, 2, {40, 9}, {0, 0}, 256, false, cf);
    } else {
        /* version 2 at the default split, one block per CTA, the longest split (32 stages per warp
         * at hd 256), 64 keys, three stages; version 1 */
        const std::vector<dcfg> cf = {k_dcfg_default, {2, 16, 0}, {2, 64, 0}, {2, 256, 0}, {2, 1024, 0}, {2, 256, 3},
                                      {2, 1024, 3}, {1, 0, 0}};
        test_decode(128, 32, 8, {1, 17, 300, 1000}, {1, 0, 1, 1}, 128, true, cf);
        test_decode(64, 16, 2, {513, 2000}, {1, 0}, 32, false, cf);
        test_decode(256, 8, 1, {100, 70}, {0, 1}, 256, false, cf);
        test_decode(64, 8, 2, {50, 300}, {1, 1}, 36, true, cf); /* rope_dim / 2 odd: per-element path */
        test_decode(64, 8, 2, {50, 300}, {1, 1}, 36, false, cf);
        test_decode(128, 16, 2, {400, 20, 1}, {1, 0, 1}, 128, true, cf); /* G = 8 rotated */
        /* without rope_on_read: block and split edges, every group size */
        test_decode(128, 32, 32, {1, 15, 16, 17, 255, 256, 257, 640, 1000}, std::vector<uint8_t>(9, 0), 128,
                    false, cf);
        test_decode(128, 32, 8, {2048, 1, 700, 33}, std::vector<uint8_t>(4, 0), 128, false, cf);
        test_decode(128, 12, 4, {300, 5, 1024}, std::vector<uint8_t>(3, 0), 128, false, cf); /* G = 3 */
        test_decode(64, 16, 8, {1023, 64, 1}, std::vector<uint8_t>(3, 0), 64, false, cf);
        test_decode(64, 16, 2, {777, 9}, std::vector<uint8_t>(2, 0), 64, false, cf);
        test_decode(64, 14, 2, {100, 31}, std::vector<uint8_t>(2, 0), 64, false, cf); /* G = 7 */
        test_decode(256, 8, 8, {600, 16}, std::vector<uint8_t>(2, 0), 256, false, cf);
        test_decode(256, 16, 2, {300, 1025}, std::vector<uint8_t>(2, 0), 256, false, cf);
    }

    /* decode with RoPE + KV write fused: MHA at block and part edges, GQA, NEOX, partial rope,
     * each head_dim; rope_dim 36 and version 1 decline */
    {
        const std::vector<dcfg> cf = small ? std::vector<dcfg>{k_dcfg_default, {2, 16, 0}, {2, 64, 3}, {1, 0, 0}}
                                           : std::vector<dcfg>{k_dcfg_default, {2, 16, 0}, {2, 1024, 0},
                                                               {2, 256, 3}, {1, 0, 0}};
        for (int F : {SI_KV_F16, SI_KV_FP8_E4M3}) {
            if (small) {
                test_decode_fused(128, 8, 2, {1, 17, 70}, 128, false, cf, F);
                test_decode_fused(64, 8, 2, {50, 16}, 32, true, cf, F);
                test_decode_fused(256, 4, 4, {40, 9}, 256, true, cf, F);
                test_decode_fused(64, 9, 3, {5, 40, 16}, 64, false, cf, F); /* SmolLM2: G = 3 */
                test_decode_fused(64, 8, 2, {30}, 36, false, {k_dcfg_default}, F);
            } else {
                test_decode_fused(128, 32, 32, {1, 15, 16, 17, 255, 512, 513, 640, 1537}, 128, false, cf, F);
                test_decode_fused(128, 32, 8, {2048, 1, 700, 33}, 128, true, cf, F);
                test_decode_fused(128, 12, 4, {300, 5, 1024}, 64, false, cf, F); /* G = 3, partial */
                test_decode_fused(64, 16, 2, {1023, 64, 1}, 64, true, cf, F);
                test_decode_fused(64, 14, 2, {100, 31}, 32, false, cf, F); /* G = 7 */
                test_decode_fused(64, 9, 3, {1, 200, 513, 48}, 64, false, cf, F); /* SmolLM2 */
                test_decode_fused(256, 16, 2, {300, 1025}, 256, true, cf, F);
                test_decode_fused(256, 8, 8, {600, 16}, 128, false, cf, F);
                test_decode_fused(64, 8, 2, {50, 300}, 36, true, {k_dcfg_default}, F);
            }
        }
    }

    if (bench && prefill) {
        /* Llama-2-7B attention: 32 heads, head_dim 128, no GQA */
        bench_prefill(1, 512, 32, 32, 128);
        bench_prefill(1, 2048, 32, 32, 128);
        bench_prefill(8, 256, 32, 32, 128);
        bench_prefill(1, 2048, 32, 8, 128); /* Llama-3-8B GQA */
        bench_prefill(1, 2048, 32, 32, 64);
    }
    if (bench) {
        /* decode: Llama-2-7B batched (64 x 512+128), one long sequence, Llama-3-8B GQA 32/8 */
        const std::vector<dcfg> cf = {k_dcfg_default, {2, 128, 0}, {2, 512, 0}, {2, 1024, 0}, {2, 256, 3},
                                      {2, 128, 3}, {2, 512, 3}, {1, 0, 0}};
        bench_decode(64, 640, 32, 32, 128, false, cf);
        bench_decode(1, 4096, 32, 32, 128, false, cf);
        bench_decode(8, 2048, 32, 8, 128, false, cf);
        bench_decode(32, 1024, 32, 8, 128, false, cf);
        /* one and a few sequences (the default split by length against fixed parts) */
        bench_decode(1, 128, 32, 32, 128, false, {k_dcfg_default, {2, 1024, 0}});
        bench_decode(1, 640, 32, 32, 128, false, {k_dcfg_default, {2, 1024, 0}, {2, 128, 0}});
        bench_decode(1, 640, 32, 8, 128, false, {k_dcfg_default, {2, 1024, 0}, {2, 64, 0}});
        bench_decode(4, 1024, 32, 32, 128, false, {k_dcfg_default, {2, 1024, 0}, {2, 256, 0}});
        bench_decode(1, 16384, 32, 8, 128, false, {k_dcfg_default, {2, 1024, 0}, {2, 512, 0}});
        bench_decode(64, 640, 32, 32, 128, true, {k_dcfg_default, {1, 0, 0}});
        bench_decode(1, 4096, 32, 32, 128, true, {k_dcfg_default, {1, 0, 0}});
        bench_decode(8, 2048, 32, 8, 128, true, {k_dcfg_default, {1, 0, 0}});
    }
    printf("\n%d checks, %d failed\n%s\n", g_checks, g_fail, g_fail ? "FAILED" : "ALL PASSED");
    timing_free();
    return g_fail ? 1 : 0;
}
