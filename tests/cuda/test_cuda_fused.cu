/* test_cuda_fused.cu — the fused kernels of the decode chain against the unfused ones they
 * replace, bit for bit (they promise the same values, not merely close ones):
 *   - cuda_add_rmsnorm (x += y; out = rmsnorm(x)) == cuda_add then cuda_rmsnorm, also with out
 *     aliasing y (as the forward pass calls it) and with y NULL;
 *   - x written ahead by the norm as f16 in the batched quantised matmul's layout
 *     (cuda_add_rmsnorm_mmq, 9..64 rows, padding rows zero): the same bytes as the matmul's own
 *     conversion of the f32 output leaves in its scratch, the same f32 output, and
 *     cuda_matmul_quant_rows_pre on it == cuda_matmul_quant_rows on the f32 output;
 *   - x converted to F16/BF16 ahead by the norm (cuda_add_rmsnorm_half) or by the SwiGLU
 *     (cuda_fwd_swiglu_rows_half): the same bytes as cuda_gemm's own conversion, and
 *     cuda_gemm_pre on them == cuda_gemm on the f32 rows (9, 64, 100 rows);
 *   - x quantised ahead by the norm (out_q8) or by the fused SwiGLU (cuda_fwd_swiglu_rows):
 *     cuda_gemv_pre on it == cuda_gemv on the f32 output, for every quantised type and 1..8
 *     rows (the GEMV would quantise that f32 x itself, in every CTA); and the q8 rows written
 *     alone (out NULL) are the same bytes;
 *   - the batch-1 GEMV with the norm inside (cuda_gemv_norm) == the norm (out_q8) then
 *     cuda_gemv_pre, y and the residual sum, for every quantised type, with and without the add;
 *   - that GEMV of a [gate; up] matrix ending in SwiGLU (cuda_gemv_norm_glu) == it then the
 *     SwiGLU kernel's q8 output, for every quantised type (SI_CUDA_GEMV_GLU=2: every shape;
 *     with SI_CUDA_GEMV_Q8X_NORM_WIDE=0, refused: the kernel is 16-warp only);
 * every output poisoned (NaN bytes) first, so an unwritten element fails. Then timings at batch
 * 1 on Llama-2-7B shapes (median of 50, cudaEvent, L2 flushed): cuda_gemv vs cuda_gemv_pre.
 *
 *   test_cuda_fused [--small] [--no-bench]
 * --small: small shapes, no timings (for compute-sanitizer). Exit status 1 on any mismatch. */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_fwd.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/mmq_half.cuh"
#include "test_blocks.cuh" /* fill_random_blocks, rnd_f (test_rand.cuh) */
extern "C" {
#include "core/fp16.h"
#include "quant/quant.h"
}

static int g_fail = 0, g_checks = 0;

template <class T> static T *dalloc(size_t n) {
    T *p;
    CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n * sizeof(T), 16)));
    CUDA_CHECK(cudaMemset(p, 0xFF, std::max<size_t>(n * sizeof(T), 16))); /* poison */
    return p;
}
static float *dfloats(const std::vector<float> &h) {
    float *d = dalloc<float>(h.size());
    CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    return d;
}
static std::vector<float> hfloats(const float *d, size_t n) {
    std::vector<float> h(n);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
    return h;
}
static std::vector<float> rnd_vec(size_t n, float scale) {
    std::vector<float> v(n);
    for (auto &x : v) x = scale * rnd_f();
    return v;
}

/* identical bits (NaN included: a poisoned, unwritten element of both still fails, as NaN
 * bytes mean nothing was written) */
static void check_same(const char *what, const std::vector<float> &a, const std::vector<float> &b) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < a.size(); i++) {
        const bool nan = std::isnan(a[i]) || std::isnan(b[i]);
        if (nan || memcmp(&a[i], &b[i], 4) != 0) {
            if (!bad) first = i;
            bad++;
        }
    }
    g_checks++;
    if (bad) {
        g_fail++;
        printf("FAIL %-56s %zu of %zu differ (first [%zu]: %.9g vs %.9g)\n", what, bad, a.size(),
               first, a[first], b[first]);
    } else {
        printf("PASS %-56s %zu values identical\n", what, a.size());
    }
}

static void test_add_rmsnorm(int n, int rows) {
    const auto hx = rnd_vec((size_t)n * rows, 2.0f), hy = rnd_vec((size_t)n * rows, 1.0f);
    const auto hw = rnd_vec(n, 1.5f);
    float *w = dfloats(hw), *y = dfloats(hy);
    /* reference: add, then norm */
    float *x1 = dfloats(hx), *o1 = dalloc<float>((size_t)n * rows);
    cuda_add(x1, y, (int64_t)n * rows, 0);
    if (cuda_rmsnorm(o1, NULL, SI_TYPE_F16, x1, w, n, rows, 1e-5f, 0) != 0) { g_fail++; return; }
    const auto rx = hfloats(x1, hx.size()), ro = hfloats(o1, hx.size());
    char name[128];
    /* fused, out separate */
    float *x2 = dfloats(hx), *o2 = dalloc<float>((size_t)n * rows);
    if (cuda_add_rmsnorm(o2, NULL, x2, y, w, n, rows, 1e-5f, 0) != 0) { g_fail++; return; }
    snprintf(name, sizeof name, "add_rmsnorm n=%d rows=%d: out", n, rows);
    check_same(name, hfloats(o2, hx.size()), ro);
    snprintf(name, sizeof name, "add_rmsnorm n=%d rows=%d: x += y", n, rows);
    check_same(name, hfloats(x2, hx.size()), rx);
    /* fused, out aliasing y (the forward pass's call) */
    float *x3 = dfloats(hx), *y3 = dfloats(hy);
    if (cuda_add_rmsnorm(y3, NULL, x3, y3, w, n, rows, 1e-5f, 0) != 0) { g_fail++; return; }
    snprintf(name, sizeof name, "add_rmsnorm n=%d rows=%d: out aliasing y", n, rows);
    check_same(name, hfloats(y3, hx.size()), ro);
    /* nothing added: the plain norm */
    float *x4 = dfloats(rx), *o4 = dalloc<float>((size_t)n * rows);
    if (cuda_add_rmsnorm(o4, NULL, x4, NULL, w, n, rows, 1e-5f, 0) != 0) { g_fail++; return; }
    snprintf(name, sizeof name, "add_rmsnorm n=%d rows=%d: y NULL", n, rows);
    check_same(name, hfloats(o4, hx.size()), ro);
    for (float *p : {w, y, x1, o1, x2, o2, x3, y3, x4, o4}) CUDA_CHECK(cudaFree(p));
}

struct qtype { si_type t; const char *name; };
static const qtype k_qtypes[] = {
    {SI_TYPE_Q8_0, "q8_0"}, {SI_TYPE_Q4_0, "q4_0"}, {SI_TYPE_Q4_1, "q4_1"}, {SI_TYPE_Q5_0, "q5_0"},
    {SI_TYPE_Q5_1, "q5_1"}, {SI_TYPE_Q4_K, "q4_k"}, {SI_TYPE_Q5_K, "q5_k"}, {SI_TYPE_Q6_K, "q6_k"},
    {SI_TYPE_Q2_K, "q2_k"}, {SI_TYPE_Q3_K, "q3_k"}, {SI_TYPE_IQ4_NL, "iq4_nl"},
    {SI_TYPE_IQ4_XS, "iq4_xs"}};

/* M x K weights of type t: random blocks (test_blocks.cuh; quantising random floats through the
 * repo's quantisers took minutes at the 14336 x 4096 and 22016 x 4096 shapes for the K-quants) */
static void *make_weights(si_type t, int M, int K) {
    const quant_traits *qt = quant_get(t);
    const size_t row = (size_t)(K / qt->block_size) * qt->type_size;
    std::vector<uint8_t> h(row * M);
    fill_random_blocks(t, h.data(), h.size());
    void *d;
    CUDA_CHECK(cudaMalloc(&d, cuda_weight_alloc_bytes(t, M, K)));
    CUDA_CHECK(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice));
    return d;
}

/* the norm's f16 rows in the batched quantised matmul's layout (cuda_add_rmsnorm_mmq) against
 * the matmul converting the norm's f32 rows itself (cuda_matmul_quant_rows, Q4_0 on the f16
 * path): the scratch bytes, the f32 output and y */
static void test_norm_mmq(int M, int K, int rows) {
    char name[128];
    if (!cuda_matmul_quant_rows_pre_ok(SI_TYPE_Q4_0, K, rows)) {
        snprintf(name, sizeof name, "norm_mmq K=%d rows=%d: the f16 path declined", K, rows);
        check_same(name, {NAN}, {0.0f});
        return;
    }
    const auto hx = rnd_vec((size_t)K * rows, 2.0f), hy = rnd_vec((size_t)K * rows, 1.0f);
    const auto hw = rnd_vec(K, 1.5f);
    float *w = dfloats(hw), *y = dfloats(hy), *x1 = dfloats(hx), *x2 = dfloats(hx);
    float *o1 = dalloc<float>((size_t)K * rows), *o2 = dalloc<float>((size_t)K * rows);
    const size_t sb = cuda_matmul_quant_rows_scratch_bytes(SI_TYPE_Q4_0, K, rows);
    uint8_t *s1 = dalloc<uint8_t>(sb), *s2 = dalloc<uint8_t>(sb);
    void *wq = make_weights(SI_TYPE_Q4_0, M, K);
    float *y1 = dalloc<float>((size_t)M * rows), *y2 = dalloc<float>((size_t)M * rows);
    if (cuda_add_rmsnorm(o1, NULL, x1, y, w, K, rows, 1e-5f, 0) != 0 ||
        cuda_matmul_quant_rows(SI_TYPE_Q4_0, wq, M, K, o1, rows, y1, s1, 0) != 0 ||
        cuda_add_rmsnorm_mmq(o2, s2, x2, y, w, K, rows, 1e-5f, 0) != 0 ||
        cuda_matmul_quant_rows_pre(SI_TYPE_Q4_0, wq, M, K, rows, y2, s2, 0) != 0) {
        g_fail++;
        printf("FAIL norm_mmq K=%d rows=%d: a call refused\n", K, rows);
        return;
    }
    snprintf(name, sizeof name, "norm_mmq K=%d rows=%d: f32 out", K, rows);
    check_same(name, hfloats(o2, hx.size()), hfloats(o1, hx.size()));
    /* the layout's bytes (all of it: padding rows included) compared as floats, bit for bit */
    const size_t nf = mmq_half_bytes(K, mmq_npad(rows)) / 4;
    snprintf(name, sizeof name, "norm_mmq K=%d rows=%d: f16 layout == the matmul's", K, rows);
    check_same(name, hfloats((float *)s2, nf), hfloats((float *)s1, nf));
    snprintf(name, sizeof name, "norm_mmq M=%d K=%d rows=%d: y", M, K, rows);
    check_same(name, hfloats(y2, (size_t)M * rows), hfloats(y1, (size_t)M * rows));
    for (float *p : {w, y, x1, x2, o1, o2, y1, y2}) CUDA_CHECK(cudaFree(p));
    for (void *p : {(void *)s1, (void *)s2, wq}) CUDA_CHECK(cudaFree(p));
}

/* x converted to F16/BF16 ahead by the norm (cuda_add_rmsnorm_half) or by the SwiGLU
 * (cuda_fwd_swiglu_rows_half) against cuBLASLt converting the f32 rows itself (cuda_gemm): the
 * converted bytes and y through cuda_gemm_pre, bit for bit */
static void test_gemm_pre(cuda_gemm_ctx *g, si_type t, int M, int K, int rows, bool swiglu) {
    char name[128];
    const char *tn = t == SI_TYPE_F16 ? "f16" : "bf16";
    const auto hx = rnd_vec((size_t)K * rows, 2.0f), hy = rnd_vec((size_t)K * rows, 1.0f);
    const auto hw = rnd_vec(K, 1.5f);
    float *w = dfloats(hw), *y = dfloats(hy), *x1 = dfloats(hx), *x2 = dfloats(hx);
    float *gu = dfloats(rnd_vec((size_t)rows * 2 * K, 3.0f));
    float *o1 = dalloc<float>((size_t)K * rows);
    const size_t sb = cuda_gemm_scratch_bytes(t, M, K, rows);
    uint8_t *s1 = dalloc<uint8_t>(sb), *s2 = dalloc<uint8_t>(sb);
    std::vector<uint16_t> hwt((size_t)M * K);
    for (auto &v : hwt) {
        const float f = 0.05f * rnd_f();
        v = t == SI_TYPE_F16 ? fp32_to_fp16(f) : fp32_to_bf16(f);
    }
    uint16_t *wt = dalloc<uint16_t>(hwt.size());
    CUDA_CHECK(cudaMemcpy(wt, hwt.data(), hwt.size() * 2, cudaMemcpyHostToDevice));
    float *y1 = dalloc<float>((size_t)M * rows), *y2 = dalloc<float>((size_t)M * rows);
    const bool ok =
        swiglu ? (cuda_fwd_swiglu_rows(o1, NULL, gu, K, rows, 0),
                  cuda_fwd_swiglu_rows_half(s2, t, gu, K, rows, 0) == 0)
               : cuda_add_rmsnorm(o1, NULL, x1, y, w, K, rows, 1e-5f, 0) == 0 &&
                     cuda_add_rmsnorm_half(NULL, s2, t, x2, y, w, K, rows, 1e-5f, 0) == 0;
    if (!ok || cuda_gemm(g, t, wt, M, K, o1, rows, y1, s1, 0) != 0 ||
        cuda_gemm_pre(g, t, wt, M, K, rows, y2, s2, 0) != 0) {
        g_fail++;
        g_checks++;
        printf("FAIL gemm_pre %s K=%d rows=%d: a call refused\n", tn, K, rows);
        return;
    }
    const char *what = swiglu ? "swiglu" : "norm";
    const size_t nf = (size_t)K * rows / 2; /* the converted rows, as floats */
    snprintf(name, sizeof name, "%s_half %s K=%d rows=%d: == cuBLASLt's conversion", what, tn, K,
             rows);
    check_same(name, hfloats((float *)s2, nf), hfloats((float *)s1, nf));
    if (!swiglu) {
        snprintf(name, sizeof name, "norm_half %s K=%d rows=%d: x += y", tn, K, rows);
        check_same(name, hfloats(x2, hx.size()), hfloats(x1, hx.size()));
    }
    snprintf(name, sizeof name, "%s_half + gemm_pre %s M=%d K=%d rows=%d: y", what, tn, M, K, rows);
    check_same(name, hfloats(y2, (size_t)M * rows), hfloats(y1, (size_t)M * rows));
    for (float *p : {w, y, x1, x2, gu, o1, y1, y2}) CUDA_CHECK(cudaFree(p));
    for (void *p : {(void *)s1, (void *)s2, (void *)wt}) CUDA_CHECK(cudaFree(p));
}

/* y from x quantised by the norm (or the SwiGLU) == y from the same f32 x, 1-16 rows (9-16 where
 * cuda_gemv_wide_ok) */
static void test_gemv_pre(const qtype &q, int M, int K, bool swiglu) {
    void *W = make_weights(q.t, M, K);
    const int R = GEMV_WIDE_ROWS_MAX;
    const auto hw = rnd_vec(K, 1.0f);
    float *w = dfloats(hw);
    float *x = dfloats(rnd_vec((size_t)R * K, 1.0f)), *xb = dalloc<float>((size_t)R * K);
    float *gu = dfloats(rnd_vec((size_t)R * 2 * K, 3.0f));
    uint8_t *xq = dalloc<uint8_t>((size_t)R * CUDA_Q8X_ROW_BYTES(K));
    uint8_t *xq2 = dalloc<uint8_t>((size_t)R * CUDA_Q8X_ROW_BYTES(K));
    float *y1 = dalloc<float>((size_t)R * M), *y2 = dalloc<float>((size_t)R * M);
    for (int nb = 1; nb <= R; nb++) {
        if (!cuda_gemv_pre_ok(q.t, K, nb)) {
            printf("SKIP %s %dx%d nb=%d: no GEMV on x quantised ahead (cuda_gemv_pre_ok)\n", q.name,
                   M, K, nb);
            continue;
        }
        CUDA_CHECK(cudaMemset(xq, 0xFF, (size_t)R * CUDA_Q8X_ROW_BYTES(K)));
        CUDA_CHECK(cudaMemset(y1, 0xFF, (size_t)R * M * 4));
        CUDA_CHECK(cudaMemset(y2, 0xFF, (size_t)R * M * 4));
        if (swiglu) {
            cuda_fwd_swiglu_rows(xb, xq, gu, K, nb, 0);
        } else if (cuda_add_rmsnorm(xb, xq, x, NULL, w, K, nb, 1e-5f, 0) != 0) {
            g_fail++;
            continue;
        }
        const int r1 = cuda_gemv(q.t, W, M, K, xb, nb, y1, 0);
        const int r2 = cuda_gemv_pre(q.t, W, M, K, xq, nb, y2, 0);
        char name[128];
        snprintf(name, sizeof name, "gemv_pre %s %dx%d nb=%d x from %s", q.name, M, K, nb,
                 swiglu ? "swiglu" : "norm");
        if (r1 || r2) {
            g_checks++;
            g_fail++;
            printf("FAIL %s: launch returned %d / %d\n", name, r1, r2);
            continue;
        }
        check_same(name, hfloats(y2, (size_t)nb * M), hfloats(y1, (size_t)nb * M));
        /* the q8 rows alone (out NULL, as the forward pass asks when only they are read): the
         * same bytes */
        const size_t qb = (size_t)nb * CUDA_Q8X_ROW_BYTES(K);
        CUDA_CHECK(cudaMemset(xq2, 0xFF, qb));
        if (swiglu) cuda_fwd_swiglu_rows(NULL, xq2, gu, K, nb, 0);
        else if (cuda_add_rmsnorm(NULL, xq2, x, NULL, w, K, nb, 1e-5f, 0) != 0) g_fail++;
        std::vector<uint8_t> a(qb), b(qb);
        CUDA_CHECK(cudaMemcpy(a.data(), xq, qb, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(b.data(), xq2, qb, cudaMemcpyDeviceToHost));
        g_checks++;
        const bool same = a == b;
        if (!same) g_fail++;
        printf("%s %s %dx%d nb=%d: q8 rows alone (out NULL) == with out\n", same ? "PASS" : "FAIL",
               swiglu ? "swiglu" : "norm", M, K, nb);
    }
    for (void *p : {(void *)W, (void *)w, (void *)x, (void *)xb, (void *)gu, (void *)xq,
                    (void *)xq2, (void *)y1, (void *)y2})
        CUDA_CHECK(cudaFree(p));
}

/* the batch-1 GEMV with the norm inside (cuda_gemv_norm) == cuda_add_rmsnorm (out_q8) then
 * cuda_gemv_pre, y and the residual sum bit for bit; x left as it was; with add NULL, x_out not
 * written. Rows the q8x kernels do not take (K % 128 != 0: gemv_direct.cuh, the 32-element-block
 * types): == cuda_add_rmsnorm (f32 out) then cuda_gemv (the GLU GEMV's refusal there:
 * test_gemv_norm_glu_refused). */
static void test_gemv_norm(const qtype &q, int M, int K) {
    if (!cuda_gemv_norm_ok(q.t, M, K)) {
        g_checks++;
        g_fail++;
        printf("FAIL gemv_norm %s %dx%d: not ok\n", q.name, M, K);
        return;
    }
    void *W = make_weights(q.t, M, K);
    const auto hx = rnd_vec(K, 2.0f);
    float *w = dfloats(rnd_vec(K, 1.5f)), *x = dfloats(hx), *add = dfloats(rnd_vec(K, 1.0f));
    float *xr = dalloc<float>(K), *x_out = dalloc<float>(K);
    float *y1 = dalloc<float>(M), *y2 = dalloc<float>(M);
    uint8_t *xq = dalloc<uint8_t>(CUDA_Q8X_ROW_BYTES(K));
    float *xn = dalloc<float>(K); /* the norm's f32 row, for gemv_direct */
    const bool q8x = cuda_gemv_pre_ok(q.t, K, 1);
    for (bool with_add : {false, true}) {
        CUDA_CHECK(cudaMemcpy(xr, x, (size_t)K * 4, cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaMemset(x_out, 0xFF, (size_t)K * 4));
        CUDA_CHECK(cudaMemset(y1, 0xFF, (size_t)M * 4));
        CUDA_CHECK(cudaMemset(y2, 0xFF, (size_t)M * 4));
        const float *a = with_add ? add : NULL;
        const int r1 = q8x ? cuda_add_rmsnorm(NULL, xq, xr, a, w, K, 1, 1e-5f, 0) ||
                                 cuda_gemv_pre(q.t, W, M, K, xq, 1, y1, 0)
                           : cuda_add_rmsnorm(xn, NULL, xr, a, w, K, 1, 1e-5f, 0) ||
                                 cuda_gemv(q.t, W, M, K, xn, 1, y1, 0);
        const int r2 = cuda_gemv_norm(q.t, W, M, K, x, a, w, 1e-5f, with_add ? x_out : NULL, y2, 0);
        char name[128];
        snprintf(name, sizeof name, "gemv_norm %s %dx%d %s: y", q.name, M, K,
                 with_add ? "x + add" : "x");
        if (r1 || r2) {
            g_checks++;
            g_fail++;
            printf("FAIL %s: launch returned %d / %d\n", name, r1, r2);
            continue;
        }
        check_same(name, hfloats(y2, M), hfloats(y1, M));
        snprintf(name, sizeof name, "gemv_norm %s %dx%d %s: x unchanged", q.name, M, K,
                 with_add ? "x + add" : "x");
        check_same(name, hfloats(x, K), hx);
        const auto ho = hfloats(x_out, K);
        if (with_add) {
            snprintf(name, sizeof name, "gemv_norm %s %dx%d: x_out == the norm's x += add",
                     q.name, M, K);
            check_same(name, ho, hfloats(xr, K));
        } else {
            const bool untouched = std::all_of(ho.begin(), ho.end(), [](float v) {
                return std::isnan(v);
            });
            g_checks++;
            if (!untouched) g_fail++;
            printf("%s gemv_norm %s %dx%d: x_out not written without add\n",
                   untouched ? "PASS" : "FAIL", q.name, M, K);
        }
    }
    /* what cannot run says so */
    g_checks++;
    const bool refused = cuda_gemv_norm(q.t, W, M, K, x, add, w, 1e-5f, x, y2, 0) == -1 &&
                         cuda_gemv_norm(q.t, W, M, K, x, add, w, 1e-5f, NULL, y2, 0) == -1;
    if (!refused) g_fail++;
    printf("%s gemv_norm %s: x_out aliasing x, or missing, is refused\n", refused ? "PASS" : "FAIL",
           q.name);
    for (void *p : {(void *)W, (void *)w, (void *)x, (void *)add, (void *)xr, (void *)x_out,
                    (void *)y1, (void *)y2, (void *)xq, (void *)xn})
        CUDA_CHECK(cudaFree(p));
}

/* the GLU GEMV refuses rows the q8x kernels do not take (gemv_direct.cuh's norm GEMV writes y
 * only; the engine then runs its SwiGLU kernel), launching nothing */
static void test_gemv_norm_glu_refused(const qtype &q, int n, int K) {
    const int M = 2 * n;
    void *W = make_weights(q.t, M, K);
    float *w = dfloats(rnd_vec(K, 1.5f)), *x = dfloats(rnd_vec(K, 2.0f));
    uint8_t *q8 = dalloc<uint8_t>(CUDA_Q8X_ROW_BYTES(n));
    CUDA_CHECK(cudaMemset(q8, 0xA5, CUDA_Q8X_ROW_BYTES(n)));
    const bool refused = cuda_gemv_norm_glu(q.t, W, M, K, x, NULL, w, 1e-5f, NULL, q8, 0) == -1;
    std::vector<uint8_t> h(CUDA_Q8X_ROW_BYTES(n));
    CUDA_CHECK(cudaMemcpy(h.data(), q8, h.size(), cudaMemcpyDeviceToHost));
    const bool untouched = std::all_of(h.begin(), h.end(), [](uint8_t v) { return v == 0xA5; });
    g_checks++;
    if (!refused || !untouched) g_fail++;
    printf("%s gemv_norm_glu %s %dx%d: refused where the q8x kernels do not take the rows, "
           "nothing written\n",
           refused && untouched ? "PASS" : "FAIL", q.name, M, K);
    for (void *p : {W, (void *)w, (void *)x, (void *)q8})
        CUDA_CHECK(cudaFree(p));
}

/* the batch-1 GEMV with the norm inside ending in SwiGLU (cuda_gemv_norm_glu; run with
 * SI_CUDA_GEMV_GLU=2, so that shapes its dealing rule would refuse run too) == cuda_gemv_norm
 * then cuda_fwd_swiglu_rows' q8 output, byte for byte; and the residual sum alike. The two q8
 * outputs are poisoned with different bytes, so an unwritten byte differs. */
static void test_gemv_norm_glu(const qtype &q, int n, int K) {
    const int M = 2 * n;
    const size_t qb = CUDA_Q8X_ROW_BYTES(n);
    void *W = make_weights(q.t, M, K);
    float *w = dfloats(rnd_vec(K, 1.5f)), *x = dfloats(rnd_vec(K, 2.0f));
    float *add = dfloats(rnd_vec(K, 1.0f)), *x_out1 = dalloc<float>(K), *x_out2 = dalloc<float>(K);
    float *gu = dalloc<float>(M);
    uint8_t *q1 = dalloc<uint8_t>(qb), *q2 = dalloc<uint8_t>(qb);
    const bool narrow = si_env_off("SI_CUDA_GEMV_Q8X_NORM_WIDE"); /* as gemv_q8x.cuh reads it */
    for (bool with_add : {false, true}) {
        const float *a = with_add ? add : NULL;
        CUDA_CHECK(cudaMemset(q1, 0xFF, qb));
        CUDA_CHECK(cudaMemset(q2, 0xFE, qb));
        CUDA_CHECK(cudaMemset(x_out1, 0xFF, (size_t)K * 4));
        CUDA_CHECK(cudaMemset(x_out2, 0xFF, (size_t)K * 4));
        const int r1 =
            cuda_gemv_norm(q.t, W, M, K, x, a, w, 1e-5f, with_add ? x_out1 : NULL, gu, 0);
        if (!r1) cuda_fwd_swiglu_rows(NULL, q1, gu, n, 1, 0);
        const int r2 =
            cuda_gemv_norm_glu(q.t, W, M, K, x, a, w, 1e-5f, with_add ? x_out2 : NULL, q2, 0);
        char name[128];
        snprintf(name, sizeof name, "gemv_norm_glu %s %dx%d %s", q.name, M, K,
                 with_add ? "x + add" : "x");
        g_checks++;
        std::vector<uint8_t> h2(qb);
        CUDA_CHECK(cudaMemcpy(h2.data(), q2, qb, cudaMemcpyDeviceToHost));
        if (narrow) { /* the GLU kernel is a 16-warp CTA's only: refused, nothing written */
            const bool ok = !r1 && r2 == -1 &&
                            std::all_of(h2.begin(), h2.end(), [](uint8_t b) { return b == 0xFE; });
            if (!ok) g_fail++;
            printf("%s %s: refused in 8-warp CTAs (SI_CUDA_GEMV_Q8X_NORM_WIDE=0), nothing "
                   "written (launches returned %d / %d)\n",
                   ok ? "PASS" : "FAIL", name, r1, r2);
            continue;
        }
        if (r1 || r2) {
            g_fail++;
            printf("FAIL %s: launch returned %d / %d\n", name, r1, r2);
            continue;
        }
        std::vector<uint8_t> h1(qb);
        CUDA_CHECK(cudaMemcpy(h1.data(), q1, qb, cudaMemcpyDeviceToHost));
        size_t bad = 0;
        for (size_t i = 0; i < qb; i++)
            bad += h1[i] != h2[i];
        if (bad) g_fail++;
        printf("%s %s: q8 silu(gate) x up, %zu of %zu bytes differ\n", bad ? "FAIL" : "PASS", name,
               bad, qb);
        if (with_add) {
            snprintf(name, sizeof name, "gemv_norm_glu %s %dx%d: x_out == x + add", q.name, M, K);
            check_same(name, hfloats(x_out2, K), hfloats(x_out1, K));
        }
    }
    /* what cannot run says so, writing nothing: no output, or n % 128 != 0 (the q8 rows' rule) */
    CUDA_CHECK(cudaMemset(q2, 0xFE, qb));
    const bool refused =
        cuda_gemv_norm_glu(q.t, W, M, K, x, NULL, w, 1e-5f, NULL, NULL, 0) == -1 &&
        cuda_gemv_norm_glu(q.t, W, M - 2, K, x, NULL, w, 1e-5f, NULL, q2, 0) == -1 &&
        cuda_gemv_norm_glu(q.t, W, M - 64, K, x, NULL, w, 1e-5f, NULL, q2, 0) == -1;
    std::vector<uint8_t> h2(qb);
    CUDA_CHECK(cudaMemcpy(h2.data(), q2, qb, cudaMemcpyDeviceToHost));
    const bool untouched = std::all_of(h2.begin(), h2.end(), [](uint8_t b) { return b == 0xFE; });
    g_checks++;
    if (!refused || !untouched) g_fail++;
    printf("%s gemv_norm_glu %s: no output, or M %% 256 != 0, refused, nothing written\n",
           refused && untouched ? "PASS" : "FAIL", q.name);
    for (void *p : {(void *)W, (void *)w, (void *)x, (void *)add, (void *)x_out1, (void *)x_out2,
                    (void *)gu, (void *)q1, (void *)q2})
        CUDA_CHECK(cudaFree(p));
}

/* median of reps, each after an L2 flush (a 256 MB write) */
template <class F> static double time_us(F f, int reps = 50) {
    static void *flush = nullptr;
    const size_t fb = (size_t)256 << 20;
    if (!flush) CUDA_CHECK(cudaMalloc(&flush, fb));
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int i = 0; i < reps; i++) {
        CUDA_CHECK(cudaMemsetAsync(flush, i, fb, 0));
        CUDA_CHECK(cudaEventRecord(a, 0));
        f();
        CUDA_CHECK(cudaEventRecord(b, 0));
        CUDA_CHECK(cudaEventSynchronize(b));
        float t;
        CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    return 1000.0 * ms[ms.size() / 2];
}

static void bench_gemv_pre(const qtype &q, int M, int K) {
    void *W = make_weights(q.t, M, K);
    float *x = dfloats(rnd_vec(K, 1.0f)), *w = dfloats(rnd_vec(K, 1.0f));
    float *xb = dalloc<float>(K), *y = dalloc<float>(M);
    uint8_t *xq = dalloc<uint8_t>(CUDA_Q8X_ROW_BYTES(K));
    cuda_add_rmsnorm(xb, xq, x, NULL, w, K, 1, 1e-5f, 0);
    const double bytes = (double)cuda_weight_alloc_bytes(q.t, M, K);
    const double t1 = time_us([&] { cuda_gemv(q.t, W, M, K, xb, 1, y, 0); });
    const double t2 = time_us([&] { cuda_gemv_pre(q.t, W, M, K, xq, 1, y, 0); });
    printf("bench gemv %-5s %5dx%-5d nb=1  f32 x %7.2f us (%5.1f%% of 4.21 TB/s)   "
           "x quantised ahead %7.2f us (%5.1f%%)\n",
           q.name, M, K, t1, 100.0 * bytes / (t1 * 1e-6) / 4.21e12, t2,
           100.0 * bytes / (t2 * 1e-6) / 4.21e12);
    for (void *p : {(void *)W, (void *)x, (void *)w, (void *)xb, (void *)y, (void *)xq})
        CUDA_CHECK(cudaFree(p));
}

/* batch 1, one L2-flushed launch each: norm kernel + cuda_gemv_pre against cuda_gemv_norm (the
 * decode chain overlaps the first pair through PDL, which a kernel timed alone cannot show) */
static void bench_gemv_norm(const qtype &q, int M, int K) {
    void *W = make_weights(q.t, M, K);
    float *x = dfloats(rnd_vec(K, 1.0f)), *w = dfloats(rnd_vec(K, 1.0f));
    float *add = dfloats(rnd_vec(K, 1.0f)), *x_out = dalloc<float>(K), *y = dalloc<float>(M);
    uint8_t *xq = dalloc<uint8_t>(CUDA_Q8X_ROW_BYTES(K));
    CUDA_CHECK(cudaMemcpy(x_out, x, (size_t)K * 4, cudaMemcpyDeviceToDevice));
    const double t1 = time_us([&] {
        cuda_add_rmsnorm(NULL, xq, x_out, add, w, K, 1, 1e-5f, 0);
        cuda_gemv_pre(q.t, W, M, K, xq, 1, y, 0);
    });
    const double t2 =
        time_us([&] { cuda_gemv_norm(q.t, W, M, K, x, add, w, 1e-5f, x_out, y, 0); });
    printf("bench gemv %-5s %5dx%-5d nb=1  norm + gemv_pre %7.2f us   gemv_norm %7.2f us\n",
           q.name, M, K, t1, t2);
    for (void *p : {(void *)W, (void *)x, (void *)w, (void *)add, (void *)x_out, (void *)y,
                    (void *)xq})
        CUDA_CHECK(cudaFree(p));
}

int main(int argc, char **argv) {
    bool small = false, bench = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small")) small = true, bench = false;
        else if (!strcmp(argv[i], "--no-bench")) bench = false;
        else {
            fprintf(stderr, "usage: %s [--small] [--no-bench]\n", argv[0]);
            return 2;
        }
    }
    test_add_rmsnorm(4096, small ? 2 : 8);
    test_add_rmsnorm(576, 3);
    test_add_rmsnorm(100, 5);
    test_add_rmsnorm(99, 3);   /* n % 4 != 0: the scalar loop */
    test_add_rmsnorm(8196, 2); /* past the registers' reach: the scalar loop */
    for (int rows : {9, 16, 33, 64}) test_norm_mmq(small ? 300 : 4096, small ? 512 : 4096, rows);
    {
        cuda_gemm_ctx *g;
        if (cuda_gemm_create(&g) != 0) return 1;
        for (si_type t : {SI_TYPE_F16, SI_TYPE_BF16})
            for (int rows : {9, 64, 100}) {
                test_gemm_pre(g, t, small ? 300 : 4096, small ? 512 : 4096, rows, false);
                test_gemm_pre(g, t, small ? 200 : 4096, small ? 768 : 11008, rows, true);
            }
        cuda_gemm_free(g);
    }
    for (const qtype &q : k_qtypes) {
        test_gemv_pre(q, small ? 64 : 1000, 4096, false);
        test_gemv_pre(q, small ? 64 : 300, small ? 1024 : 11008, true);
    }
    for (const qtype &q : k_qtypes) {
        if (small) {
            test_gemv_norm(q, 64, 1024);
            test_gemv_norm(q, 300, 2048);
            test_gemv_norm(q, 100, 3072); /* 3 float4 a thread: 2 + 1 in a 16-warp CTA */
        } else {
            test_gemv_norm(q, 1000, 4096);  /* batch 1 on a small matrix: 2 rows x 2 stages */
            test_gemv_norm(q, 12288, 4096); /* K < 8192: 2 x 4 */
            test_gemv_norm(q, 3000, 8192);  /* K = 8192, the longest row the norm holds */
            test_gemv_norm(q, 700, 5120);   /* 5 float4 a thread: 3 + 2 in a 16-warp CTA */
        }
        /* rows the q8x kernels do not take: gemv_direct.cuh's norm GEMV, one float4 a thread
         * (SmolLM2-135M's QKV and gate/up; 7 x 352: a partial CTA) and NORM_VEC (K = 2,080) */
        if (quant_get(q.t)->block_size == 32) {
            test_gemv_norm(q, 7, 352);
            test_gemv_norm(q, small ? 40 : 960, 576);
            if (!small) test_gemv_norm(q, 3072, 576);
            test_gemv_norm(q, 33, 2080);
        }
    }
    /* the GLU GEMV on every shape, its dealing rule (gemv_q8x.cuh) aside */
    setenv("SI_CUDA_GEMV_GLU", "2", 1);
    for (const qtype &q : k_qtypes) {
        test_gemv_norm_glu(q, 128, 2048); /* 4 blocks: 4 CTAs */
        test_gemv_norm_glu(q, small ? 256 : 2176, 3072);
        test_gemv_norm_glu(q, 8576, 256); /* 268 blocks: 2-3 a CTA on 132 SMs */
        if (!small) {
            test_gemv_norm_glu(q, 11008, 4096); /* Llama-2-7B: 3 blocks a CTA */
            test_gemv_norm_glu(q, 14336, 4096); /* Llama-3-8B: 4 */
            test_gemv_norm_glu(q, 21120, 1024); /* 5 */
        }
        /* SmolLM2-135M's gate/up */
        if (quant_get(q.t)->block_size == 32) test_gemv_norm_glu_refused(q, 1536, 576);
    }
    if (bench)
        for (const qtype &q : k_qtypes) {
            bench_gemv_norm(q, 12288, 4096);
            bench_gemv_norm(q, 22016, 4096);
            bench_gemv_pre(q, 4096, 4096);
            bench_gemv_pre(q, 12288, 4096);
            bench_gemv_pre(q, 22016, 4096);
            bench_gemv_pre(q, 4096, 11008);
        }
    printf("==== summary: %d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
