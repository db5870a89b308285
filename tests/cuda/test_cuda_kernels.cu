/* test_cuda_kernels.cu — every CUDA kernel of src/backend/cuda against a CPU reference, then
 * timings (llm.c's dev/cuda habit: check at several sizes, then time with an L2 flush).
 *
 * References: the repo's scalar dequantisers (quant_get(t)->to_float) and fp16.h; RMSNorm, RoPE
 * (the same incremental-theta formula as cpu_rope) and attention in double precision here.
 * Inputs are random (quantised blocks: random bytes with random fp16 scales, so every bit
 * pattern occurs); every output buffer is poisoned with NaN (0xFF bytes) before each run, so an
 * unwritten element fails. Tolerances, per check, are printed with the measured error.
 *
 * Usage: test_cuda_kernels [--small] [--no-bench] [--gemv] [--mmq] [--types f16,q4_0,...]
 *   --small: small shapes only, no timing (for compute-sanitizer); --gemv: the GEMV checks and
 *   timings only; --mmq: only the quantised matmul for 9..128 rows (cuda_matmul_quant_rows),
 *   timed next to dequant + cuBLASLt; --types: only these weight types (GEMV and mmq). Exit
 *   status 1 on any failure. With SI_CUDA_GEMV_H16_MMA=1 the F16/BF16 GEMV checks run the
 *   opt-in tensor-core GEMV (tests/cuda/run.sh does both). Every GEMV check also compares each
 *   row of 2-8 rows with the 1-row run of that row of x, bit for bit (the engine's
 *   alone-vs-batched promise: 1 row runs the dp4a kernel, 5-8 rows of most quantised types the
 *   tensor-core one, gemv_q8x_tc.cuh). */
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "test_blocks.cuh" /* fill_random_blocks */
#include "test_rand.cuh"   /* rnd_f, rnd_int, dmalloc */
#include "timing.cuh"
extern "C" {
#include "core/fp16.h"
#include "quant/quant.h"
}

static int g_fail = 0, g_checks = 0;
static const char *g_types; /* --types: comma-separated GEMV types to test, NULL = all */
static bool type_selected(const char *name) {
    const size_t n = strlen(name);
    for (const char *p = g_types; (p = strstr(p, name)) != NULL; p += n)
        if ((p == g_types || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return true;
    return false;
}
static FILE *g_summary; /* collected result lines, printed again at the end */
static char g_sum_buf[1 << 16];

static void report(const char *name, double err, double tol) {
    const bool ok = err <= tol && !std::isnan(err);
    g_checks++;
    if (!ok) g_fail++;
    char line[256];
    snprintf(line, sizeof line, "%-4s %-48s err %.3e  tol %.1e\n", ok ? "PASS" : "FAIL", name, err, tol);
    fputs(line, stdout);
    fputs(line, g_summary);
}

template <class T> static void poison(T *p, size_t n) { CUDA_CHECK(cudaMemset(p, 0xFF, n * sizeof(T))); }
template <class T> static void h2d(T *d, const T *h, size_t n) {
    CUDA_CHECK(cudaMemcpy(d, h, n * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T> static void d2h(T *h, const T *d, size_t n) {
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h, d, n * sizeof(T), cudaMemcpyDeviceToHost));
}

/* max |a - b| / max(max |b|, tiny); NaN anywhere gives NaN */
static double rel_max_err(const float *a, const double *b, size_t n) {
    double mx = 0, mb = 1e-30;
    for (size_t i = 0; i < n; i++) {
        if (std::isnan(a[i])) return NAN;
        mx = std::max(mx, std::fabs(a[i] - b[i]));
        mb = std::max(mb, std::fabs(b[i]));
    }
    return mx / mb;
}

/* ---- random GGUF weights ---- */
struct wtype { si_type t; const char *name; };
static const wtype k_types[] = {
    {SI_TYPE_F16, "f16"},   {SI_TYPE_BF16, "bf16"}, {SI_TYPE_Q8_0, "q8_0"}, {SI_TYPE_Q4_0, "q4_0"},
    {SI_TYPE_Q4_1, "q4_1"}, {SI_TYPE_Q5_0, "q5_0"}, {SI_TYPE_Q5_1, "q5_1"}, {SI_TYPE_Q4_K, "q4_k"},
    {SI_TYPE_Q5_K, "q5_k"}, {SI_TYPE_Q6_K, "q6_k"}, {SI_TYPE_Q2_K, "q2_k"}, {SI_TYPE_Q3_K, "q3_k"},
    {SI_TYPE_IQ4_NL, "iq4_nl"}, {SI_TYPE_IQ4_XS, "iq4_xs"}};

static const double k_peak_gbs = 4210.0;
static char g_bench_buf[1 << 16];
static FILE *g_bench;
static void bench_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bench_line(const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fputs(line, stdout);
    fputs(line, g_bench);
}

/* a plain streaming read (16-byte loads, 4 in flight per thread) of n 16-byte words */
__global__ void read_kernel(const uint4 *p, size_t n, float *sink) {
    uint32_t a = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = i + j * stride < n ? __ldg(p + i + j * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int j = 0; j < 4; j++) a ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
    }
    if (a == 0x12345678u) *sink = (float)a; /* keeps the loads */
}
static void read_bytes(const void *p, size_t bytes) {
    read_kernel<<<132 * 4, 512, 0, g_st>>>((const uint4 *)p, bytes / 16, g_sink);
    CUDA_CHECK_LAUNCH();
}
__global__ void empty_kernel() {}

/* ---- GEMV ---- */
static void test_gemv(si_type t, const char *tn, int M, int K, bool bench) {
    const quant_traits *qt = quant_get(t);
    const size_t row_bytes = quant_row_size(t, K), alloc = cuda_weight_alloc_bytes(t, M, K);
    std::vector<uint8_t> hw(alloc, 0);
    fill_random_blocks(t, hw.data(), row_bytes * M);
    const int NBMAX = 8;
    std::vector<float> hx((size_t)NBMAX * K);
    for (auto &v : hx) v = rnd_f();
    /* quantised types with K % 128 == 0 (and K <= 14336): the kernel quantises x to Q8_0 blocks
     * first (for Q8_0/Q4_0 exactly as the CPU backend's vec_dot_type); the reference then uses the
     * repo's Q8_0 round trip of x. */
    std::vector<float> hxr(hx);
    if (t != SI_TYPE_F16 && t != SI_TYPE_BF16 && K % 128 == 0 && K <= 14336) {
        const quant_traits *q8 = quant_get(SI_TYPE_Q8_0);
        std::vector<uint8_t> tmp(quant_row_size(SI_TYPE_Q8_0, K));
        for (int b = 0; b < NBMAX; b++) {
            q8->from_float(hx.data() + (size_t)b * K, tmp.data(), K);
            q8->to_float(tmp.data(), hxr.data() + (size_t)b * K, K);
        }
    }
    /* F16/BF16 on the tensor-core GEMV (SI_CUDA_GEMV_H16_MMA=1, gemv_h16_mma.cuh): x is
     * rounded to the weight's type first, and the reference rounds it alike */
    const char *h16mma = getenv("SI_CUDA_GEMV_H16_MMA");
    if ((t == SI_TYPE_F16 || t == SI_TYPE_BF16) && h16mma && h16mma[0] == '1' && K % 128 == 0)
        for (auto &v : hxr)
            v = t == SI_TYPE_F16 ? __half2float(__float2half_rn(v))
                                 : __bfloat162float(__float2bfloat16_rn(v));
    /* reference: dequantise each row with the repo's to_float, dot in double */
    std::vector<double> ref((size_t)NBMAX * M);
    auto ref_rows = [&](int m0, int m1) {
        std::vector<float> row(K);
        for (int m = m0; m < m1; m++) {
            qt->to_float(hw.data() + (size_t)m * row_bytes, row.data(), K);
            for (int b = 0; b < NBMAX; b++) {
                double s = 0;
                const float *xb = hxr.data() + (size_t)b * K;
                for (int k = 0; k < K; k++) s += (double)row[k] * xb[k];
                ref[(size_t)b * M + m] = s;
            }
        }
    };
    { /* the reference of the large shapes is most of this test's time: split it over threads */
        std::vector<std::thread> th;
        const int nt = M >= 1024 ? 8 : 1;
        for (int i = 0; i < nt; i++) th.emplace_back(ref_rows, (int)((long long)M * i / nt), (int)((long long)M * (i + 1) / nt));
        for (auto &t : th) t.join();
    }
    /* 9-16 rows (cuda_gemv_wide_ok): x rows 8-15 are rows 7-0 (a column tile that read the
     * other's x rows would be caught), so the reference and the 1-row runs of rows 0-7 serve
     * them too */
    const int NBX = GEMV_WIDE_ROWS_MAX;
    static_assert(GEMV_WIDE_ROWS_MAX == 2 * 8, "x rows 8-15 are rows 7-0");
    auto x_of = [&](int b) { return b < NBMAX ? b : 2 * NBMAX - 1 - b; }; /* row b's x row */
    ref.resize((size_t)NBX * M);
    for (int b = NBMAX; b < NBX; b++)
        std::copy_n(ref.begin() + (size_t)x_of(b) * M, M, ref.begin() + (size_t)b * M);
    uint8_t *dw = dmalloc<uint8_t>(alloc);
    float *dx = dmalloc<float>((size_t)NBX * K), *dy = dmalloc<float>((size_t)NBX * M);
    h2d(dw, hw.data(), alloc);
    for (int b = 0; b < NBX; b++)
        h2d(dx + (size_t)b * K, hx.data() + (size_t)x_of(b) * K, K);
    std::vector<float> hy((size_t)NBX * M), y1((size_t)NBMAX * M);
    size_t inv_bad = 0; /* each batch row against the 1-row run of its x row, bit for bit */
    bool y1_ok = true;
    for (int b = 0; b < NBMAX && y1_ok; b++) {
        poison(dy, (size_t)M);
        y1_ok = cuda_gemv(t, dw, M, K, dx + (size_t)b * K, 1, dy, g_st) == 0;
        d2h(y1.data() + (size_t)b * M, dy, (size_t)M);
    }
    /* 7 and 8 rows once more with the tensor-core kernel on (7: a batch column unused); 9, 10,
     * 12, 13 and 16 rows where they are GEMVs (one 16-column launch, x whole where it fits, else
     * in parts: K = 11008 and 14336 take both ways) */
    const int runs[][2] = {{1, 0}, {2, 0}, {3, 0}, {4, 0},  {5, 0},  {6, 0},  {7, 0}, {8, 0},
                           {7, 1}, {8, 1}, {9, 0}, {10, 0}, {12, 0}, {13, 0}, {16, 0}};
    int nb_most = 1; /* the most rows checked against the 1-row runs */
    for (const auto &r : runs) {
        const int nb = r[0];
        if (nb > NBMAX && !cuda_gemv_wide_ok(t, K, nb)) continue;
        cuda_gemv_set_tensor_cores(r[1]);
        poison(dy, (size_t)NBX * M);
        const int rc = cuda_gemv(t, dw, M, K, dx, nb, dy, g_st);
        cuda_gemv_set_tensor_cores(0);
        if (rc != 0) { report("gemv launch", NAN, 0); continue; }
        d2h(hy.data(), dy, (size_t)nb * M);
        /* f32 accumulation of up to 11008 products, different order from the double ref */
        const double err = rel_max_err(hy.data(), ref.data(), (size_t)nb * M);
        char name[96];
        snprintf(name, sizeof name, "gemv %-5s M=%-5d K=%-5d nb=%d%s", tn, M, K, nb, r[1] ? " mma" : "");
        report(name, err, 1e-4);
        if (nb == 1 || r[1]) continue;
        nb_most = std::max(nb_most, nb);
        for (int b = 0; b < nb; b++)
            inv_bad += memcmp(y1.data() + (size_t)x_of(b) * M, hy.data() + (size_t)b * M,
                              (size_t)M * 4) != 0;
    }
    {
        char name[112];
        snprintf(name, sizeof name, "gemv %-5s M=%-5d K=%-5d rows same bits nb 1..%d (mismatches)",
                 tn, M, K, nb_most);
        report(name, y1_ok ? (double)inv_bad : NAN, 0);
    }
    if (bench) {
        /* what a plain streaming read of the same weight bytes takes in this timing (launch and
         * event overhead included): the ceiling for one launch of this size */
        const double us_read = time_median_us([&] { read_bytes(dw, row_bytes * M); }, 50);
        std::vector<void *> cw = l2_beating_copies(dw, alloc);
        const double us_read_s = time_stream_us([&](int i) { read_bytes(cw[i], row_bytes * M); }, (int)cw.size());
        bench_line("read  %-5s %5dx%-5d       %8.2f us  %7.1f GB/s  (plain read of the weight bytes) | back to back %6.2f us %5.1f%%\n",
                   tn, M, K, us_read, (double)row_bytes * M / us_read * 1e-3, us_read_s,
                   100.0 * (double)row_bytes * M / us_read_s * 1e-3 / k_peak_gbs);
        /* {rows, tensor cores} */
        const int runs[][2] = {{1, 0}, {2, 0}, {4, 0}, {8, 0}, {8, 1}, {12, 0}, {16, 0}};
        for (const auto &r : runs) {
            const int nb = r[0];
            if (nb > NBMAX && !cuda_gemv_wide_ok(t, K, nb)) continue;
            cuda_gemv_set_tensor_cores(r[1]);
            const double us = time_median_us([&] { cuda_gemv(t, dw, M, K, dx, nb, dy, g_st); }, 50);
            const double us_s = time_stream_us([&](int i) { cuda_gemv(t, cw[i], M, K, dx, nb, dy, g_st); }, (int)cw.size());
            cuda_gemv_set_tensor_cores(0);
            const double bytes = (double)row_bytes * M + (double)nb * K * 4 + (double)nb * M * 4;
            const double gbs = bytes / us * 1e-3;
            bench_line("gemv  %-5s %5dx%-5d nb=%d%s  %8.2f us  %7.1f GB/s  %5.1f%% of 4.21 TB/s | back to back %6.2f us %5.1f%%\n",
                       tn, M, K, nb, r[1] ? " mma" : "    ", us, gbs, 100.0 * gbs / k_peak_gbs, us_s,
                       100.0 * bytes / us_s * 1e-3 / k_peak_gbs);
        }
        free_copies(cw);
    }
    CUDA_CHECK(cudaFree(dw));
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
}

/* ---- cuBLASLt GEMM ---- */
static void test_gemm(cuda_gemm_ctx *g, si_type t, const char *tn, int M, int K, int N, bool bench) {
    const quant_traits *qt = quant_get(t);
    const size_t row_bytes = quant_row_size(t, K), alloc = cuda_weight_alloc_bytes(t, M, K);
    std::vector<uint8_t> hw(alloc, 0);
    fill_random_blocks(t, hw.data(), row_bytes * M);
    std::vector<float> hx((size_t)N * K);
    for (auto &v : hx) v = rnd_f();
    uint8_t *dw = dmalloc<uint8_t>(alloc);
    float *dx = dmalloc<float>(hx.size()), *dy = dmalloc<float>((size_t)N * M);
    const size_t sb = cuda_gemm_scratch_bytes(t, M, K, N);
    uint8_t *ds = dmalloc<uint8_t>(sb);
    h2d(dw, hw.data(), alloc);
    h2d(dx, hx.data(), hx.size());
    poison(dy, (size_t)N * M);
    if (cuda_gemm(g, t, dw, M, K, dx, N, dy, ds, g_st) != 0) report("gemm launch", NAN, 0);
    std::vector<float> hy((size_t)N * M);
    d2h(hy.data(), dy, hy.size());
    /* sampled reference: 512 (row, column) pairs plus a full-poison check of every output */
    bool all_written = true;
    for (float v : hy) all_written &= !std::isnan(v);
    std::vector<float> wrow(K);
    double num = 0, den = 0;
    for (int i = 0; i < 512; i++) {
        const int m = rnd_int(M), n = rnd_int(N);
        qt->to_float(hw.data() + (size_t)m * row_bytes, wrow.data(), K);
        double s = 0;
        for (int k = 0; k < K; k++) s += (double)wrow[k] * hx[(size_t)n * K + k];
        const double d = hy[(size_t)n * M + m] - s;
        num += d * d;
        den += s * s;
    }
    char name[96];
    snprintf(name, sizeof name, "gemm %-5s M=%-5d K=%-5d N=%-4d (rel L2)", tn, M, K, N);
    /* x is rounded to f16 (bf16 for BF16 weights) for the tensor cores */
    report(name, all_written ? std::sqrt(num / den) : NAN, t == SI_TYPE_BF16 ? 1e-2 : 2e-3);
    if (bench) {
        const double us = time_median_us([&] { cuda_gemm(g, t, dw, M, K, dx, N, dy, ds, g_st); }, 20);
        double us_dq = 0;
        if (t != SI_TYPE_F16 && t != SI_TYPE_BF16)
            us_dq = time_median_us([&] { cuda_dequantize_f16(t, dw, (int64_t)M * K, ds, g_st); }, 20);
        const double tflops = 2.0 * M * K * N / us * 1e-6;
        bench_line("gemm  %-5s %5dx%-5d N=%-4d %9.1f us  %6.1f TFLOP/s  (dequant to f16: %.1f us)\n", tn, M,
                   K, N, us, tflops, us_dq);
    }
    CUDA_CHECK(cudaFree(dw));
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
    CUDA_CHECK(cudaFree(ds));
}

/* ---- quantised matmul for 9..128 rows on int8 tensor cores (cuda_matmul_quant_rows) ---- */
static void test_mmq(cuda_gemm_ctx *g, si_type t, const char *tn, int M, int K, bool bench) {
    const quant_traits *qt = quant_get(t);
    const size_t row_bytes = quant_row_size(t, K), alloc = cuda_weight_alloc_bytes(t, M, K);
    std::vector<uint8_t> hw(alloc, 0);
    fill_random_blocks(t, hw.data(), row_bytes * M);
    const int NBMAX = 128;
    std::vector<float> hx((size_t)NBMAX * K);
    for (auto &v : hx) v = rnd_f();
    std::fill(hx.begin() + 3 * (size_t)K, hx.begin() + 4 * (size_t)K, 0.0f); /* row 3: d = 0 blocks */
    /* the int8 path quantises x to Q8_0 as cuda_gemv does: the reference takes the repo's round
     * trip; the f16 path rounds x and each dequantised weight to f16: so does the reference */
    const bool half = cuda_matmul_quant_rows_half(t);
    auto f16 = [](float v) { return __half2float(__float2half_rn(v)); };
    std::vector<float> hxr(hx.size());
    if (half) {
        for (size_t i = 0; i < hx.size(); i++) hxr[i] = f16(hx[i]);
    } else {
        const quant_traits *q8 = quant_get(SI_TYPE_Q8_0);
        std::vector<uint8_t> tmp(quant_row_size(SI_TYPE_Q8_0, K));
        for (int b = 0; b < NBMAX; b++) {
            q8->from_float(hx.data() + (size_t)b * K, tmp.data(), K);
            q8->to_float(tmp.data(), hxr.data() + (size_t)b * K, K);
        }
    }
    /* reference rows: all of them up to 4096x4096, else the 128-row tile edges and 512 random */
    std::vector<int> rows;
    if ((long long)M * K <= 4096LL * 4096) {
        for (int m = 0; m < M; m++) rows.push_back(m);
    } else {
        for (int m : {0, 1, 7, 8, 15, 16, 31, 32, 127, 128, M / 2, M - 129, M - 128, M - 2, M - 1})
            if (m >= 0 && m < M) rows.push_back(m);
        for (int i = 0; i < 512; i++) rows.push_back(rnd_int(M));
        std::sort(rows.begin(), rows.end());
        rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    }
    const int nr = (int)rows.size();
    std::vector<double> ref((size_t)nr * NBMAX); /* [row index][batch row] */
    auto ref_rows = [&](int i0, int i1) {
        std::vector<float> row(K);
        for (int i = i0; i < i1; i++) {
            qt->to_float(hw.data() + (size_t)rows[i] * row_bytes, row.data(), K);
            if (half)
                for (float &v : row) v = f16(v);
            for (int b = 0; b < NBMAX; b++) {
                double s = 0;
                const float *xb = hxr.data() + (size_t)b * K;
                for (int k = 0; k < K; k++) s += (double)row[k] * xb[k];
                ref[(size_t)i * NBMAX + b] = s;
            }
        }
    };
    {
        std::vector<std::thread> th;
        const int nt = nr >= 256 ? 8 : 1;
        for (int i = 0; i < nt; i++) th.emplace_back(ref_rows, (int)((long long)nr * i / nt), (int)((long long)nr * (i + 1) / nt));
        for (auto &t : th) t.join();
    }
    const size_t sb = cuda_matmul_quant_rows_scratch_bytes(t, K, NBMAX);
    uint8_t *dw = dmalloc<uint8_t>(alloc), *ds = dmalloc<uint8_t>(sb);
    float *dx = dmalloc<float>(hx.size()), *dy = dmalloc<float>((size_t)NBMAX * M);
    h2d(dw, hw.data(), alloc);
    h2d(dx, hx.data(), hx.size());
    std::vector<float> hy((size_t)NBMAX * M), first9;
    size_t inv_bad = 0;
    for (int nb : {9, 16, 33, 64, 100, 128}) {
        poison(dy, (size_t)NBMAX * M);
        poison(ds, sb); /* everything the kernel reads from scratch must have been written */
        char name[112];
        snprintf(name, sizeof name, "mmq  %-5s M=%-5d K=%-5d nb=%d", tn, M, K, nb);
        if (cuda_matmul_quant_rows(t, dw, M, K, dx, nb, dy, ds, g_st) != 0) { report(name, NAN, 0); continue; }
        d2h(hy.data(), dy, hy.size());
        /* rows < nb all written (no NaN), rows >= nb untouched (the 0xFF poison bits) */
        bool written = true;
        size_t touched = 0;
        for (size_t i = 0; i < (size_t)nb * M; i++) written &= !std::isnan(hy[i]);
        for (size_t i = (size_t)nb * M; i < hy.size(); i++) {
            uint32_t u;
            memcpy(&u, &hy[i], 4);
            touched += u != 0xFFFFFFFFu;
        }
        double mx = 0, mb = 1e-30;
        for (int i = 0; i < nr; i++)
            for (int b = 0; b < nb; b++) {
                const double r = ref[(size_t)i * NBMAX + b];
                mx = std::max(mx, std::fabs(hy[(size_t)b * M + rows[i]] - r));
                mb = std::max(mb, std::fabs(r));
            }
        /* f32 accumulation of up to 11008 products in another order than the double reference;
         * the x quantisation (or f16 rounding) is in the reference: cuda_gemv's tolerance */
        report(name, written && !touched ? mx / mb : NAN, 1e-4);
        if (nb == 9) first9.assign(hy.begin(), hy.begin() + 9 * (size_t)M);
        else if (!first9.empty())
            for (size_t i = 0; i < first9.size(); i++) inv_bad += memcmp(&first9[i], &hy[i], 4) != 0;
    }
    char name[112];
    snprintf(name, sizeof name, "mmq  %-5s M=%-5d K=%-5d rows 0-8 same bits nb 9..128 (mismatches)", tn, M, K);
    report(name, first9.empty() ? NAN : (double)inv_bad, 0);
    if (bench) {
        const double us_read = time_median_us([&] { read_bytes(dw, row_bytes * M); }, 50);
        bench_line("read  %-5s %5dx%-5d        %8.2f us  %7.1f GB/s  (plain read of the weight bytes)\n", tn, M, K,
                   us_read, (double)row_bytes * M / us_read * 1e-3);
        const size_t sg = cuda_gemm_scratch_bytes(t, M, K, NBMAX);
        uint8_t *dsg = dmalloc<uint8_t>(sg);
        for (int nb : {16, 32, 64, 128}) {
            const double us = time_median_us([&] { cuda_matmul_quant_rows(t, dw, M, K, dx, nb, dy, ds, g_st); }, 50);
            const double us_g = time_median_us([&] { cuda_gemm(g, t, dw, M, K, dx, nb, dy, dsg, g_st); }, 20);
            const double bytes = (double)row_bytes * M + (double)nb * K * 4 + (double)nb * M * 4;
            bench_line("mmq   %-5s %5dx%-5d nb=%-3d %8.2f us  %7.1f GB/s  %5.1f%% of 4.21 TB/s | dequant+cuBLASLt "
                       "%8.2f us %5.1f%% | %.2fx\n",
                       tn, M, K, nb, us, bytes / us * 1e-3, 100.0 * bytes / us * 1e-3 / k_peak_gbs, us_g,
                       100.0 * bytes / us_g * 1e-3 / k_peak_gbs, us_g / us);
        }
        CUDA_CHECK(cudaFree(dsg));
    }
    CUDA_CHECK(cudaFree(dw));
    CUDA_CHECK(cudaFree(ds));
    CUDA_CHECK(cudaFree(dx));
    CUDA_CHECK(cudaFree(dy));
}

/* The shapes and row counts cuda_matmul_quant_rows must decline (rc -1, nothing launched). */
static void test_mmq_declines() {
    int bad = 0;
    uint8_t *p = dmalloc<uint8_t>(1 << 20);
    float *f = (float *)p;
    bad += cuda_matmul_quant_rows(SI_TYPE_Q4_0, p, 64, 352, f, 16, f, p, g_st) != -1;  /* K % 256 */
    bad += cuda_matmul_quant_rows(SI_TYPE_Q4_0, p, 64, 512, f, 8, f, p, g_st) != -1;   /* < 9 rows */
    bad += cuda_matmul_quant_rows(SI_TYPE_Q4_0, p, 64, 512, f, 129, f, p, g_st) != -1; /* > 128 */
    bad += cuda_matmul_quant_rows(SI_TYPE_F16, p, 64, 512, f, 16, f, p, g_st) != -1;   /* not quantised */
    bad += cuda_matmul_quant_rows_scratch_bytes(SI_TYPE_F16, 512, 16) != 0;
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaFree(p));
    report("mmq  declines K=352, 8 rows, 129 rows, f16 (failures)", bad, 0);
}

/* ---- RMSNorm ---- */
static void test_rmsnorm(int n, int rows, bool bench) {
    std::vector<float> x((size_t)n * rows), w(n);
    for (auto &v : x) v = rnd_f() * 3.0f;
    for (auto &v : w) v = rnd_f();
    std::vector<double> ref(x.size());
    const float eps = 1e-5f;
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)x[(size_t)r * n + i] * x[(size_t)r * n + i];
        const double sc = 1.0 / std::sqrt(ss / n + eps);
        for (int i = 0; i < n; i++) ref[(size_t)r * n + i] = x[(size_t)r * n + i] * sc * w[i];
    }
    float *dx = dmalloc<float>(x.size()), *dw = dmalloc<float>(n), *dout = dmalloc<float>(x.size());
    uint16_t *dh = dmalloc<uint16_t>(x.size());
    h2d(dx, x.data(), x.size());
    h2d(dw, w.data(), n);
    for (si_type ht : {SI_TYPE_F16, SI_TYPE_BF16}) {
        poison(dout, x.size());
        poison(dh, x.size());
        cuda_rmsnorm(dout, dh, ht, dx, dw, n, rows, eps, g_st);
        std::vector<float> o(x.size()), oh(x.size());
        std::vector<uint16_t> h(x.size());
        d2h(o.data(), dout, o.size());
        d2h(h.data(), dh, h.size());
        for (size_t i = 0; i < h.size(); i++) oh[i] = ht == SI_TYPE_F16 ? fp16_to_fp32(h[i]) : bf16_to_fp32(h[i]);
        char name[96];
        snprintf(name, sizeof name, "rmsnorm n=%d rows=%d f32", n, rows);
        if (ht == SI_TYPE_F16) report(name, rel_max_err(o.data(), ref.data(), o.size()), 1e-5);
        snprintf(name, sizeof name, "rmsnorm n=%d rows=%d + %s out", n, rows, ht == SI_TYPE_F16 ? "f16" : "bf16");
        report(name, rel_max_err(oh.data(), ref.data(), oh.size()), ht == SI_TYPE_F16 ? 1e-3 : 8e-3);
    }
    if (bench) {
        const double us = time_median_us([&] { cuda_rmsnorm(dout, dh, SI_TYPE_F16, dx, dw, n, rows, eps, g_st); }, 50);
        const double gbs = (double)x.size() * (4 + 4 + 2) / us * 1e-3;
        bench_line("rmsnorm n=%d rows=%-4d (+f16)   %8.2f us  %7.1f GB/s\n", n, rows, us, gbs);
    }
    CUDA_CHECK(cudaFree(dx)); CUDA_CHECK(cudaFree(dw)); CUDA_CHECK(cudaFree(dout)); CUDA_CHECK(cudaFree(dh));
}

/* ---- element-wise ---- */
static void test_elementwise(int64_t n, bool bench) {
    std::vector<float> a(n), b(n);
    for (auto &v : a) v = rnd_f() * 6.0f;
    for (auto &v : b) v = rnd_f() * 2.0f;
    std::vector<double> rs(n), ra(n);
    for (int64_t i = 0; i < n; i++) {
        rs[i] = a[i] / (1.0 + std::exp(-(double)a[i])) * b[i];
        ra[i] = (double)a[i] + b[i];
    }
    float *da = dmalloc<float>(n), *db = dmalloc<float>(n), *dout = dmalloc<float>(n);
    h2d(da, a.data(), n);
    h2d(db, b.data(), n);
    std::vector<float> o(n);
    poison(dout, n);
    cuda_swiglu(dout, da, db, n, g_st);
    d2h(o.data(), dout, n);
    char name[96];
    snprintf(name, sizeof name, "swiglu n=%lld", (long long)n);
    report(name, rel_max_err(o.data(), rs.data(), n), 1e-6);
    CUDA_CHECK(cudaMemcpy(dout, da, n * 4, cudaMemcpyDeviceToDevice));
    cuda_add(dout, db, n, g_st);
    d2h(o.data(), dout, n);
    snprintf(name, sizeof name, "add n=%lld", (long long)n);
    report(name, rel_max_err(o.data(), ra.data(), n), 1e-7);
    if (bench) {
        double us = time_median_us([&] { cuda_swiglu(dout, da, db, n, g_st); }, 50);
        bench_line("swiglu n=%-9lld              %8.2f us  %7.1f GB/s\n", (long long)n, us, 12.0 * n / us * 1e-3);
        us = time_median_us([&] { cuda_add(dout, db, n, g_st); }, 50);
        bench_line("add    n=%-9lld              %8.2f us  %7.1f GB/s\n", (long long)n, us, 12.0 * n / us * 1e-3);
    }
    CUDA_CHECK(cudaFree(da)); CUDA_CHECK(cudaFree(db)); CUDA_CHECK(cudaFree(dout));
}

static void test_get_rows(si_type t, const char *tn, int n_vocab, int n_cols, int n_ids) {
    const quant_traits *qt = quant_get(t);
    const size_t rb = quant_row_size(t, n_cols), bytes = rb * n_vocab;
    std::vector<uint8_t> he(bytes);
    fill_random_blocks(t, he.data(), bytes);
    std::vector<int32_t> ids(n_ids);
    for (auto &v : ids) v = rnd_int(n_vocab);
    ids[0] = n_vocab - 1;
    std::vector<double> ref((size_t)n_ids * n_cols);
    std::vector<float> row(n_cols);
    for (int i = 0; i < n_ids; i++) {
        qt->to_float(he.data() + (size_t)ids[i] * rb, row.data(), n_cols);
        for (int j = 0; j < n_cols; j++) ref[(size_t)i * n_cols + j] = row[j];
    }
    uint8_t *de = dmalloc<uint8_t>(bytes);
    int32_t *di = dmalloc<int32_t>(n_ids);
    float *dout = dmalloc<float>(ref.size());
    h2d(de, he.data(), bytes);
    h2d(di, ids.data(), n_ids);
    poison(dout, ref.size());
    const int rc = cuda_get_rows(t, de, n_cols, di, n_ids, dout, g_st);
    std::vector<float> o(ref.size());
    d2h(o.data(), dout, o.size());
    char name[96];
    snprintf(name, sizeof name, "get_rows %-5s vocab=%d n=%d ids=%d", tn, n_vocab, n_cols, n_ids);
    /* same products as to_float; only an FMA contraction (q4_1/q4_k mins) may round differently */
    report(name, rc ? NAN : rel_max_err(o.data(), ref.data(), o.size()), 1e-6);
    CUDA_CHECK(cudaFree(de)); CUDA_CHECK(cudaFree(di)); CUDA_CHECK(cudaFree(dout));
}

static void test_argmax(int n, int rows, bool bench) {
    std::vector<float> l((size_t)n * rows);
    for (auto &v : l) v = rnd_f() * 10.0f;
    std::vector<int32_t> ref(rows);
    for (int r = 0; r < rows; r++) {
        const int a = rnd_int(n), b = rnd_int(n); /* a planted tie: the lower index wins */
        l[(size_t)r * n + a] = 20.0f;
        l[(size_t)r * n + b] = 20.0f;
        ref[r] = std::min(a, b);
    }
    float *dl = dmalloc<float>(l.size());
    int32_t *dout = dmalloc<int32_t>(rows);
    h2d(dl, l.data(), l.size());
    poison(dout, rows);
    cuda_argmax(dl, n, rows, dout, g_st);
    std::vector<int32_t> o(rows);
    d2h(o.data(), dout, rows);
    int bad = 0;
    for (int r = 0; r < rows; r++) bad += o[r] != ref[r];
    char name[96];
    snprintf(name, sizeof name, "argmax n=%d rows=%d (mismatches)", n, rows);
    report(name, bad, 0);
    if (bench) {
        const double us = time_median_us([&] { cuda_argmax(dl, n, rows, dout, g_st); }, 50);
        bench_line("argmax n=%-7d rows=%-3d          %8.2f us  %7.1f GB/s\n", n, rows, us, 4.0 * n * rows / us * 1e-3);
    }
    CUDA_CHECK(cudaFree(dl)); CUDA_CHECK(cudaFree(dout));
}

/* ---- RoPE + paged KV write ---- */
static void ref_rope(float *x, int n_heads, int pos, int head_dim, int rope_dim, float base, float fscale,
                     bool neox) {
    /* cpu_rope's formula (backend/cpu/cpu_ops.c): incremental theta, float arithmetic */
    const float theta_scale = powf(base, -2.0f / (float)rope_dim);
    const int half = rope_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        float tb = (float)pos;
        for (int i = 0; i < half; i++) {
            const float theta = fscale * tb;
            const double c = cos((double)theta), s = sin((double)theta);
            const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            const double x0 = v[a], x1 = v[b];
            v[a] = (float)(x0 * c - x1 * s);
            v[b] = (float)(x0 * s + x1 * c);
            tb *= theta_scale;
        }
    }
}

static void test_rope_kv(int n_tokens, int n_head, int n_head_kv, int hd, int rope_dim, bool neox) {
    const int qd = n_head * hd, kvd = n_head_kv * hd, n_blocks = n_tokens + 8;
    std::vector<float> q((size_t)n_tokens * qd), k((size_t)n_tokens * kvd), v((size_t)n_tokens * kvd);
    for (auto &x : q) x = rnd_f();
    for (auto &x : k) x = rnd_f();
    for (auto &x : v) x = rnd_f();
    std::vector<int32_t> pos(n_tokens), slot(n_tokens);
    std::vector<int> perm(n_blocks * 16);
    for (int i = 0; i < n_blocks * 16; i++) perm[i] = i;
    for (int i = n_blocks * 16 - 1; i > 0; i--) std::swap(perm[i], perm[rnd_int(i + 1)]);
    for (int t = 0; t < n_tokens; t++) {
        pos[t] = rnd_int(8192);
        slot[t] = t == 1 ? -1 : perm[t]; /* token 1: not cached */
    }
    float *dq = dmalloc<float>(q.size()), *dk = dmalloc<float>(k.size()), *dv = dmalloc<float>(v.size());
    int32_t *dpos = dmalloc<int32_t>(n_tokens), *dslot = dmalloc<int32_t>(n_tokens);
    const size_t cache_n = (size_t)n_blocks * 16 * kvd;
    uint16_t *dkc = dmalloc<uint16_t>(cache_n), *dvc = dmalloc<uint16_t>(cache_n);
    h2d(dq, q.data(), q.size()); h2d(dk, k.data(), k.size()); h2d(dv, v.data(), v.size());
    h2d(dpos, pos.data(), n_tokens); h2d(dslot, slot.data(), n_tokens);
    poison(dkc, cache_n); poison(dvc, cache_n);
    cuda_rope_params p = {n_head, n_head_kv, hd, rope_dim, 10000.0f, 1.0f, NULL, neox ? 1 : 0};
    cuda_rope_kv_write(dq, qd, dk, kvd, dv, kvd, dpos, dslot, NULL, n_tokens, dkc, dvc, &p, g_st);
    std::vector<float> oq(q.size()), ok(k.size());
    std::vector<uint16_t> kc(cache_n), vc(cache_n);
    d2h(oq.data(), dq, oq.size()); d2h(ok.data(), dk, ok.size());
    d2h(kc.data(), dkc, cache_n); d2h(vc.data(), dvc, cache_n);
    std::vector<double> rq(q.size()), rk(k.size());
    for (int t = 0; t < n_tokens; t++) {
        ref_rope(&q[(size_t)t * qd], n_head, pos[t], hd, rope_dim, 10000.0f, 1.0f, neox);
        ref_rope(&k[(size_t)t * kvd], n_head_kv, pos[t], hd, rope_dim, 10000.0f, 1.0f, neox);
    }
    for (size_t i = 0; i < q.size(); i++) rq[i] = q[i];
    for (size_t i = 0; i < k.size(); i++) rk[i] = k[i];
    /* cache rows: f16 of the reference, exactly; poisoned slots elsewhere must stay poisoned */
    double cache_err = 0;
    for (int t = 0; t < n_tokens; t++) {
        if (slot[t] < 0) continue;
        for (int i = 0; i < kvd; i++) {
            const float kg = fp16_to_fp32(kc[(size_t)slot[t] * kvd + i]);
            const float vg = fp16_to_fp32(vc[(size_t)slot[t] * kvd + i]);
            const double ek = std::fabs(kg - k[(size_t)t * kvd + i]), ev = vg - fp16_to_fp32(fp32_to_fp16(v[(size_t)t * kvd + i]));
            cache_err = std::max(cache_err, std::isnan(kg) || std::isnan(vg) ? NAN : std::max(ek, std::fabs(ev)));
        }
    }
    int untouched_bad = 0;
    for (size_t s = 0; s < (size_t)n_blocks * 16; s++) {
        bool used = false;
        for (int t = 0; t < n_tokens; t++) used |= slot[t] == (int)s;
        if (!used && (kc[s * kvd] != 0xFFFF || vc[s * kvd] != 0xFFFF)) untouched_bad++;
    }
    char name[96];
    snprintf(name, sizeof name, "rope %s q  T=%d H=%d/%d hd=%d rd=%d", neox ? "neox" : "norm", n_tokens, n_head,
             n_head_kv, hd, rope_dim);
    /* sincosf vs double sin/cos at |theta| up to 8192 rad: a few ulp of the argument */
    report(name, rel_max_err(oq.data(), rq.data(), oq.size()), 2e-5);
    snprintf(name, sizeof name, "rope %s k  T=%d H=%d/%d hd=%d rd=%d", neox ? "neox" : "norm", n_tokens, n_head,
             n_head_kv, hd, rope_dim);
    report(name, rel_max_err(ok.data(), rk.data(), ok.size()), 2e-5);
    snprintf(name, sizeof name, "kv write (abs err, f16) T=%d + untouched slots", n_tokens);
    report(name, untouched_bad ? NAN : cache_err, 2e-3);
    CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dk)); CUDA_CHECK(cudaFree(dv));
    CUDA_CHECK(cudaFree(dpos)); CUDA_CHECK(cudaFree(dslot)); CUDA_CHECK(cudaFree(dkc)); CUDA_CHECK(cudaFree(dvc));
}

/* ---- paged decode attention ---- */
static void test_attention(const std::vector<int> &lens, int n_head, int n_head_kv, int hd, bool bench) {
    const int n_seqs = (int)lens.size(), kvd = n_head_kv * hd, qd = n_head * hd, G = n_head / n_head_kv;
    int max_len = 0, total_blocks = 0;
    for (int L : lens) { max_len = std::max(max_len, L); total_blocks += (L + 15) / 16; }
    const int max_blocks = (max_len + 15) / 16, n_blocks = total_blocks + 3;
    std::vector<int> perm(n_blocks);
    for (int i = 0; i < n_blocks; i++) perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) std::swap(perm[i], perm[rnd_int(i + 1)]);
    std::vector<int32_t> bt((size_t)n_seqs * max_blocks, -1);
    int next = 0;
    for (int s = 0; s < n_seqs; s++)
        for (int b = 0; b < (lens[s] + 15) / 16; b++) bt[(size_t)s * max_blocks + b] = perm[next++];
    const size_t cache_n = (size_t)n_blocks * 16 * kvd;
    std::vector<uint16_t> kc(cache_n), vc(cache_n);
    for (auto &x : kc) x = fp32_to_fp16(rnd_f() * 2.0f);
    for (auto &x : vc) x = fp32_to_fp16(rnd_f());
    std::vector<float> q((size_t)n_seqs * qd);
    for (auto &x : q) x = rnd_f();
    const float scale = 1.0f / sqrtf((float)hd);
    /* reference: double softmax, q rounded to f16 as the kernel (and the CPU backend) does */
    std::vector<double> ref(q.size());
    for (int s = 0; s < n_seqs; s++)
        for (int h = 0; h < n_head; h++) {
            const int kh = h / G, L = lens[s];
            std::vector<double> sc(L);
            double mx = -1e300;
            for (int p = 0; p < L; p++) {
                const size_t row = ((size_t)bt[(size_t)s * max_blocks + p / 16] * 16 + p % 16) * kvd + (size_t)kh * hd;
                double d = 0;
                for (int i = 0; i < hd; i++)
                    d += (double)fp16_to_fp32(fp32_to_fp16(q[((size_t)s * n_head + h) * hd + i])) * fp16_to_fp32(kc[row + i]);
                sc[p] = d * scale;
                mx = std::max(mx, sc[p]);
            }
            double sum = 0;
            for (int p = 0; p < L; p++) { sc[p] = std::exp(sc[p] - mx); sum += sc[p]; }
            for (int i = 0; i < hd; i++) {
                double o = 0;
                for (int p = 0; p < L; p++) {
                    const size_t row = ((size_t)bt[(size_t)s * max_blocks + p / 16] * 16 + p % 16) * kvd + (size_t)kh * hd;
                    o += sc[p] * fp16_to_fp32(vc[row + i]);
                }
                ref[((size_t)s * n_head + h) * hd + i] = o / sum;
            }
        }
    uint16_t *dkc = dmalloc<uint16_t>(cache_n), *dvc = dmalloc<uint16_t>(cache_n);
    float *dq = dmalloc<float>(q.size()), *dout = dmalloc<float>(q.size());
    int32_t *dbt = dmalloc<int32_t>(bt.size()), *dlen = dmalloc<int32_t>(n_seqs);
    h2d(dkc, kc.data(), cache_n); h2d(dvc, vc.data(), cache_n); h2d(dq, q.data(), q.size());
    h2d(dbt, bt.data(), bt.size()); h2d(dlen, lens.data(), n_seqs);
    cuda_attn_params p = {n_head, n_head_kv, hd, max_blocks, scale};
    const size_t sb = cuda_attention_scratch_bytes(&p, n_seqs, max_len);
    uint8_t *ds = dmalloc<uint8_t>(sb);
    poison(dout, q.size());
    poison(ds, sb);
    const int rc = cuda_attention_decode(dout, dq, qd, dkc, dvc, dbt, dlen, n_seqs, max_len, NULL, NULL, &p, ds, g_st);
    std::vector<float> o(q.size());
    d2h(o.data(), dout, o.size());
    char name[96];
    snprintf(name, sizeof name, "attn decode seqs=%d max_len=%d H=%d/%d hd=%d", n_seqs, max_len, n_head, n_head_kv, hd);
    report(name, rc ? NAN : rel_max_err(o.data(), ref.data(), o.size()), 2e-5);
    if (bench) {
        const double us = time_median_us([&] { cuda_attention_decode(dout, dq, qd, dkc, dvc, dbt, dlen, n_seqs, max_len, NULL, NULL, &p, ds, g_st); }, 50);
        double bytes = 0;
        for (int L : lens) bytes += (double)L * kvd * 2 * 2;
        bench_line("attn  seqs=%-2d len=%-5d H=%d/%d hd=%d  %8.2f us  %7.1f GB/s  %5.1f%% of 4.21 TB/s\n", n_seqs,
                   max_len, n_head, n_head_kv, hd, us, bytes / us * 1e-3, 100.0 * bytes / us * 1e-3 / k_peak_gbs);
    }
    CUDA_CHECK(cudaFree(dkc)); CUDA_CHECK(cudaFree(dvc)); CUDA_CHECK(cudaFree(dq)); CUDA_CHECK(cudaFree(dout));
    CUDA_CHECK(cudaFree(dbt)); CUDA_CHECK(cudaFree(dlen)); CUDA_CHECK(cudaFree(ds));
}

int main(int argc, char **argv) {
    bool small = false, bench = true, gemv_only = false, mmq_only = false;
    int only_m = 0, only_k = 0; /* --shape MxK: only that GEMV / mmq shape (e.g. for ncu) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small")) small = true;
        else if (!strcmp(argv[i], "--no-bench")) bench = false;
        else if (!strcmp(argv[i], "--gemv")) gemv_only = true;
        else if (!strcmp(argv[i], "--mmq")) mmq_only = true;
        else if (!strcmp(argv[i], "--types") && i + 1 < argc) g_types = argv[++i];
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc && sscanf(argv[++i], "%dx%d", &only_m, &only_k) == 2) {}
        else { fprintf(stderr, "usage: %s [--small] [--no-bench] [--gemv] [--mmq] [--types f16,q4_0,...] [--shape MxK]\n", argv[0]); return 2; }
    }
    if (small) bench = false;
    g_summary = fmemopen(g_sum_buf, sizeof g_sum_buf, "w");
    g_bench = fmemopen(g_bench_buf, sizeof g_bench_buf, "w");
    setvbuf(g_summary, NULL, _IONBF, 0);
    setvbuf(g_bench, NULL, _IONBF, 0);
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB, cc %d.%d\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20, prop.major, prop.minor);
    timing_init();

    /* GEMV: Llama-2-7B shapes (timed), the fused QKV and gate+up shapes, and odd ones */
    printf("gemv paths (gemv.cu): f16/bf16 with K %% 8 == 0: streaming kernel; quantised types "
           "with K %% 128 == 0\n"
           "  (k-quants: K %% 256 == 0) and K <= 14336: x quantised to q8_0 per CTA, dp4a kernel, "
           "all but Q8_0\n"
           "  from 5-8 rows (SI_CUDA_GEMV_Q8X_TC, K %% 256 == 0) the same arithmetic on "
           "int8 tensor\n"
           "  cores (\"mma\": the approximate\n"
           "  int8 tensor-core kernel, off by default, for nb >= 7 when K %% 256 == 0); any other "
           "shape:\n"
           "  f32-x kernels: gemv_direct for the 32-element-block types (SI_CUDA_GEMV_DIRECT=0: "
           "the general one), the general one for the rest.\n"
           "  A failing check names type, M, K and nb, so the path is known from those.\n");
    struct shape { int M, K; bool timed; };
    std::vector<shape> shapes;
    /* K = 352 and 576 (no multiple of 128) and K = 16384 (> 14336): the quantised types take the
     * f32-activation path (Q4_K/Q6_K only at 16384: 352 and 576 are no multiple of their 256);
     * 960 x 576 is SmolLM2-135M's QKV (the default model's) and 49152 x 576 its tied logits, both
     * timed; 300 x 14336: the q8x
     * kernel's largest K (Llama-3-8B's down), where x of 2-8 rows leaves room for fewer warps */
    /* 40 x 2048: Q6_K rows of whole 16-byte words (512, 768: rows starting mid-word); 16 x 4096:
     * 2 chunks of the tensor-core kernel (Q4_0, the K-quants), so SI_CUDA_GEMV_TC_PARTS=2 (run.sh)
     * takes 9-16 rows' x in 2 parts (and 64 x 512, 37 x 768 put 2 tiles in one CTA). No small
     * shape makes a CTA reuse a stage of its ring (at most 3 chunks): racecheck does not see the
     * ring's mbarrier handoff and reports its bulk copy into a used stage as a WAR hazard (s51:
     * 20 x 8192 with or without parts; the copy waits on the stage's "empty" mbarrier, which
     * every consumer warp arrives on after reading it) */
    if (small)
        shapes = {{64, 512, false}, {37, 768, false},  {5, 256, false},
                  {7, 352, false},  {40, 2048, false}, {16, 4096, false}};
    else
        shapes = {{4096, 4096, true},
                  {11008, 4096, true},
                  {4096, 11008, true},
                  {32000, 4096, true},
                  {12288, 4096, true} /* fused QKV */,
                  {22016, 4096, true} /* fused gate+up */,
                  {1000, 2816, false},
                  {3, 256, false},
                  {129, 768, false},
                  {7, 352, false},
                  {300, 14336, false},
                  {3, 16384, false},
                  {960, 576, true},
                  {49152, 576, true}};
    auto skip_shape = [&](const shape &s) { return only_m && (s.M != only_m || s.K != only_k); };
    if (bench) {
        const double us = time_median_us([&] { empty_kernel<<<1, 32, 0, g_st>>>(); CUDA_CHECK_LAUNCH(); }, 50);
        bench_line("empty kernel                    %8.2f us  (launch + event overhead of this timing)\n", us);
    }
    if (!mmq_only)
        for (const wtype &w : k_types)
            for (const shape &s : shapes) {
                if (s.K % quant_get(w.t)->block_size || skip_shape(s)) continue;
                if (g_types && !type_selected(w.name)) continue;
                test_gemv(w.t, w.name, s.M, s.K, bench && s.timed);
            }

    if (!gemv_only || mmq_only) {
        /* quantised matmul for 9..128 rows: the Llama-2-7B decode shapes (fused QKV and gate+up,
         * wo, down, output; timed) and ragged ones (M not a multiple of the 128-row tile, K of
         * 11 and 3 segments: split-K over uneven ranges, S = 1 at K = 256) */
        printf("mmq (gemm_q8x_mma.cu): quantised types, 9..128 rows, K %% 256 == 0: Q4_0 on f16\n"
               "  tensor cores (x and the dequantised weights rounded to f16), the others with x\n"
               "  quantised to q8_0 once into scratch on int8 tensor cores; split-K over a thread-block\n"
               "  cluster where the 128-row tiles are few; checked at nb = 9, 16, 33, 64, 100, 128 (row 3\n"
               "  of x all zero).\n");
        cuda_gemm_ctx *gemm;
        if (cuda_gemm_create(&gemm) != 0) { fprintf(stderr, "cuda_gemm_create failed\n"); return 1; }
        test_mmq_declines();
        std::vector<shape> ms;
        if (small) ms = {{200, 512, false}, {37, 768, false}, {129, 256, false}};
        else ms = {{4096, 4096, true}, {12288, 4096, true}, {22016, 4096, true}, {4096, 11008, true},
                   {32000, 4096, true}, {1000, 2816, false}, {37, 768, false}, {129, 256, false}};
        for (const wtype &w : k_types) {
            if (w.t == SI_TYPE_F16 || w.t == SI_TYPE_BF16) continue;
            if (g_types && !type_selected(w.name)) continue;
            for (const shape &s : ms)
                if (!skip_shape(s)) test_mmq(gemm, w.t, w.name, s.M, s.K, bench && s.timed);
        }
        cuda_gemm_free(gemm);
    }
    if (gemv_only || mmq_only) goto done;
    {
    cuda_gemm_ctx *gemm;
    if (cuda_gemm_create(&gemm) != 0) { fprintf(stderr, "cuda_gemm_create failed\n"); return 1; }
    for (const wtype &w : k_types) {
        if (small) test_gemm(gemm, w.t, w.name, 256, 512, 33, false);
        else {
            test_gemm(gemm, w.t, w.name, 4096, 4096, 512, bench);
            test_gemm(gemm, w.t, w.name, 11008, 4096, 2048, bench);
            test_gemm(gemm, w.t, w.name, 4096, 11008, 2048, bench);
        }
    }
    cuda_gemm_free(gemm);

    test_rmsnorm(4096, small ? 3 : 1, bench);
    test_rmsnorm(100, 5, false);
    if (!small) test_rmsnorm(4096, 512, bench);
    test_elementwise(small ? 1000 : 11008 * 512, bench);
    test_elementwise(7, false);
    test_get_rows(SI_TYPE_F32, "f32", 100, 256, 5);
    for (const wtype &w : k_types) test_get_rows(w.t, w.name, small ? 50 : 32000, small ? 256 : 4096, 9);
    test_argmax(small ? 1000 : 32000, 3, bench);
    test_argmax(small ? 50 : 128256, 2, bench);
    test_argmax(1, 1, false);

    for (bool neox : {false, true}) {
        test_rope_kv(small ? 5 : 64, 32, 8, 128, 128, neox);
        test_rope_kv(3, 8, 8, 64, 32, neox); /* partial rotation */
    }

    if (small) {
        test_attention({1, 17, 300}, 8, 2, 128, false);
        test_attention({40}, 4, 4, 64, false);
    } else {
        test_attention({1, 17, 300, 1000}, 32, 8, 128, false);
        test_attention({4096}, 32, 32, 128, bench);       /* Llama-2-7B, one long sequence */
        test_attention({513, 2000}, 16, 2, 64, false);
        test_attention({100, 70}, 8, 1, 256, false);
        if (bench) {
            std::vector<int> l8(8, 2048);
            test_attention(l8, 32, 8, 128, true);         /* Llama-3-8B GQA, batch 8 */
            std::vector<int> l64(64, 640);
            test_attention(l64, 32, 32, 128, true);       /* 64 seqs of 512 + 128 */
        }
    }

    }
done:
    fflush(g_summary);
    fflush(g_bench);
    printf("\n==== summary: %d checks, %d failed ====\n%s", g_checks, g_fail, g_sum_buf);
    if (bench) printf("\n==== timings (median, L2 flushed) ====\n%s", g_bench_buf);
    printf("\n%s\n", g_fail ? "FAILED" : "ALL PASSED");
    timing_free();
    return g_fail ? 1 : 0;
}
