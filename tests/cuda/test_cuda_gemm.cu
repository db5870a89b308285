/* test_cuda_gemm.cu — the decode-batch F16/BF16 matmul on TMA + wgmma (gemm_rows64.h, taken by
 * cuda_gemm / cuda_gemm_pre for up to 64 rows) against a double-precision reference on the same
 * rounded inputs, and against cuBLASLt (cuda_gemm_use_rows64(g, 0)) on the same call:
 *   - every output written (y poisoned with NaN bytes first);
 *   - y within 1e-4 (rel L2) of the reference, and of cuBLASLt (max |diff| / max |y|): both sum
 *     f32 products of the same f16/bf16 values, in different orders; cuBLASLt itself within
 *     1e-4 of the reference too (it takes the built-in table's configurations, gemm_table.h);
 *   - a second run gives the same bits (the split-K parts are added in a fixed order, no
 *     atomics), and the first rows of a 64-row run are bit-identical to a run of fewer rows (a
 *     row's result does not depend on the others: batching does not change a sequence's tokens);
 * on shapes whose 128-row tiles are fewer than, about as many as, and many more than the
 * multiprocessors (stream-K cuts tiles between CTAs at every offset), K of 1 to 172 k blocks,
 * 1..64 rows. Then timings at 64 rows on the Llama-2-7B decode shapes: one L2-flushed launch,
 * and back to back over copies of W that beat the L2 (as in a decode step), against cuBLASLt.
 *
 *   test_cuda_gemm [--small] [--no-bench] [--bench-only]
 * --small: small shapes, no timings (for compute-sanitizer); --bench-only: the timings alone.
 * Exit status 1 on any failure. */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm_rows64.h"
#include "timing.cuh"
#include <chrono>
extern "C" {
#include "core/fp16.h"
}

static int g_fail = 0, g_checks = 0;
static uint64_t g_rng = 0x6A09E667F3BCC909ull;
static float rnd_f() { /* [-1, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) / 8388608.0 - 1.0);
}

static void check(const char *what, int M, int K, int n, const char *tn, double err, double tol) {
    const bool ok = err <= tol && !std::isnan(err);
    g_checks++;
    g_fail += !ok;
    printf("%-4s %-30s %-4s M=%-5d K=%-5d n=%-2d err %.3e  tol %.1e\n", ok ? "PASS" : "FAIL", what,
           tn, M, K, n, err, tol);
}

/* n random values rounded to the weight type: the 2-byte codes and their float values */
static void rnd_half(bool bf, size_t n, std::vector<uint16_t> &code, std::vector<float> &val) {
    code.resize(n);
    val.resize(n);
    for (size_t i = 0; i < n; i++) {
        const float v = rnd_f();
        code[i] = bf ? fp32_to_bf16(v) : fp32_to_fp16(v);
        val[i] = bf ? bf16_to_fp32(code[i]) : fp16_to_fp32(code[i]);
    }
}

struct problem {
    si_type t;
    int M, K, n;
    std::vector<float> w, x; /* the rounded values */
    uint16_t *dw = nullptr, *dx = nullptr;
    float *dy = nullptr;
    problem(si_type t_, int M_, int K_, int n_) : t(t_), M(M_), K(K_), n(n_) {
        std::vector<uint16_t> cw, cx;
        rnd_half(t == SI_TYPE_BF16, (size_t)M * K, cw, w);
        rnd_half(t == SI_TYPE_BF16, (size_t)n * K, cx, x);
        CUDA_CHECK(cudaMalloc(&dw, cw.size() * 2));
        CUDA_CHECK(cudaMalloc(&dx, cx.size() * 2));
        CUDA_CHECK(cudaMalloc(&dy, (size_t)n * M * 4));
        CUDA_CHECK(cudaMemcpy(dw, cw.data(), cw.size() * 2, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dx, cx.data(), cx.size() * 2, cudaMemcpyHostToDevice));
    }
    ~problem() {
        CUDA_CHECK(cudaFree(dw));
        CUDA_CHECK(cudaFree(dx));
        CUDA_CHECK(cudaFree(dy));
    }
    /* y for the first rows rows (poisoned first), through rows64 or cuBLASLt */
    std::vector<float> run(cuda_gemm_ctx *g, bool rows64, int rows) {
        cuda_gemm_use_rows64(g, rows64);
        CUDA_CHECK(cudaMemset(dy, 0xFF, (size_t)n * M * 4));
        if (cuda_gemm_pre(g, t, dw, M, K, rows, dy, dx, g_st) != 0) return {};
        std::vector<float> y((size_t)rows * M);
        CUDA_CHECK(cudaStreamSynchronize(g_st));
        CUDA_CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
        return y;
    }
};

/* one weight of each shape, x of 64 rows; y for the first n rows at n = 1, 9, 33, 64 */
static void test_shape(cuda_gemm_ctx *g, si_type t, int M, int K) {
    const char *tn = t == SI_TYPE_BF16 ? "bf16" : "f16";
    problem pr(t, M, K, 64);
    const std::vector<float> y64 = pr.run(g, true, 64);
    for (int n : {1, 9, 33, 64}) {
        const std::vector<float> y = n == 64 ? y64 : pr.run(g, true, n), y_lt = pr.run(g, false, n);
        if (y.empty() || y_lt.empty()) {
            check("launch", M, K, n, tn, NAN, 0);
            continue;
        }
        bool written = true;
        for (float v : y)
            written &= !std::isnan(v);
        /* the reference: every element of small problems, 2048 sampled ones of large */
        const size_t total = (size_t)n * M, samples = total <= 65536 ? total : 2048;
        double num = 0, num_lt = 0, den = 0;
        bool written_lt = true;
        for (float v : y_lt)
            written_lt &= !std::isnan(v);
        for (size_t s = 0; s < samples; s++) {
            const size_t e = samples == total ? s : (size_t)((rnd_f() + 1.0f) * 0.5f * (total - 1));
            const size_t r = e / M, m = e % M;
            double ref = 0;
            for (int k = 0; k < K; k++)
                ref += (double)pr.w[m * K + k] * pr.x[r * K + k];
            num += (y[e] - ref) * (y[e] - ref);
            num_lt += (y_lt[e] - ref) * (y_lt[e] - ref);
            den += ref * ref;
        }
        check("rows64 vs reference (rel L2)", M, K, n, tn, written ? std::sqrt(num / den) : NAN,
              1e-4);
        /* cuBLASLt as cuda_gemm calls it: at 64 rows on the Llama-2-7B shapes, the configuration
         * of the built-in table where this GPU has one (gemm_table.h) */
        check("cuBLASLt vs reference (rel L2)", M, K, n, tn,
              written_lt ? std::sqrt(num_lt / den) : NAN, 1e-4);
        double mx = 0, my = 1e-30;
        for (size_t e = 0; e < total; e++) {
            mx = std::max(mx, (double)std::fabs(y[e] - y_lt[e]));
            my = std::max(my, (double)std::fabs(y_lt[e]));
        }
        check("rows64 vs cuBLASLt (max rel)", M, K, n, tn, written ? mx / my : NAN, 1e-4);
        /* n < 64: the same bits as those rows of the 64-row run; n = 64: as a second run */
        const std::vector<float> again = n == 64 ? pr.run(g, true, 64) : y64;
        check(n == 64 ? "rows64 run twice: same bits" : "rows64 rows as in 64: same bits", M, K, n,
              tn, memcmp(again.data(), y.data(), total * 4) ? 1 : 0, 0);
    }
}

/* ---- timings (timing.cuh) ---- */
static void bench_shape(cuda_gemm_ctx *g, int M, int K, const char *what) {
    const int n = 64;
    problem pr(SI_TYPE_F16, M, K, n);
    const size_t wb = (size_t)M * K * 2;
    const int copies = (int)std::max<size_t>(2, (k_flush_bytes + wb - 1) / wb);
    std::vector<uint16_t *> cw{pr.dw};
    for (int i = 1; i < copies; i++) {
        uint16_t *c;
        CUDA_CHECK(cudaMalloc(&c, wb));
        CUDA_CHECK(cudaMemcpy(c, pr.dw, wb, cudaMemcpyDeviceToDevice));
        cw.push_back(c);
    }
    for (int rows64 = 1; rows64 >= 0; rows64--) {
        cuda_gemm_use_rows64(g, rows64);
        CUDA_CHECK(cudaDeviceSynchronize());
        const auto h0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 20; i++)
            cuda_gemm_pre(g, pr.t, cw[i % copies], M, K, n, pr.dy, pr.dx, g_st);
        const double host_us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0)
                .count() /
            20;
        CUDA_CHECK(cudaDeviceSynchronize());
        printf("host %-9s %-8s %.2f us a call to enqueue\n", what, rows64 ? "rows64" : "cuBLASLt",
               host_us);
        const double us =
            time_median_us([&] { cuda_gemm_pre(g, pr.t, pr.dw, M, K, n, pr.dy, pr.dx, g_st); }, 30);
        const double us_s = time_stream_us(
            [&](int i) { cuda_gemm_pre(g, pr.t, cw[i], M, K, n, pr.dy, pr.dx, g_st); }, copies);
        printf("time %-9s f16 %5dx%-5d n=64 %-8s %7.2f us %5.1f%% of 4.21 TB/s | back to back "
               "%7.2f us %5.1f%%\n",
               what, M, K, rows64 ? "rows64" : "cuBLASLt", us, 100.0 * wb / us * 1e-3 / 4210.0,
               us_s, 100.0 * wb / us_s * 1e-3 / 4210.0);
    }
    /* where each CTA's time goes: start, owner wait, end (us after the first start) */
    unsigned long long *dt;
    CUDA_CHECK(cudaMalloc(&dt, 3 * 1024 * 8));
    CUDA_CHECK(cudaMemset(dt, 0, 3 * 1024 * 8));
    cuda_gemm_use_rows64(g, 1);
    for (int rep = 0; rep < 3; rep++) {
        cuda_gemm_pre(g, pr.t, cw[rep % copies], M, K, n, pr.dy, pr.dx, g_st);
        cuda_rows64_set_trace(dt);
        cuda_gemm_pre(g, pr.t, cw[(rep + 1) % copies], M, K, n, pr.dy, pr.dx, g_st);
        cuda_rows64_set_trace(nullptr);
        std::vector<unsigned long long> h(3 * 1024);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(h.data(), dt, h.size() * 8, cudaMemcpyDeviceToHost));
        int P = 0;
        while (P < 1024 && h[3 * P])
            P++;
        unsigned long long t0 = ~0ull;
        for (int p = 0; p < P; p++)
            t0 = std::min(t0, h[3 * p]);
        std::vector<double> st, en;
        for (int p = 0; p < P; p++) {
            st.push_back((h[3 * p] - t0) * 1e-3);
            en.push_back((h[3 * p + 2] - t0) * 1e-3);
        }
        std::vector<double> ss = st, se = en;
        std::sort(ss.begin(), ss.end());
        std::sort(se.begin(), se.end());
        printf("trace %-9s P=%d start max %.2f | end min %.2f p10 %.2f p50 %.2f p90 %.2f max %.2f "
               "us | slowest:",
               what, P, ss.back(), se[0], se[P / 10], se[P / 2], se[P * 9 / 10], se.back());
        for (int k = 0; k < 6; k++) {
            const int p = (int)(std::max_element(en.begin(), en.end()) - en.begin());
            printf(" %d(%.1f)", p, en[p]);
            en[p] = -1;
        }
        printf("\n");
        CUDA_CHECK(cudaMemset(dt, 0, 3 * 1024 * 8));
    }
    CUDA_CHECK(cudaFree(dt));
    for (int i = 1; i < copies; i++)
        CUDA_CHECK(cudaFree(cw[i]));
}

int main(int argc, char **argv) {
    bool small = false, bench = true, checks = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small"))
            small = true;
        else if (!strcmp(argv[i], "--no-bench"))
            bench = false;
        else if (!strcmp(argv[i], "--bench-only"))
            checks = false;
        else {
            fprintf(stderr, "usage: %s [--small] [--no-bench] [--bench-only]\n", argv[0]);
            return 2;
        }
    }
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major,
           prop.minor);
    timing_init(); /* g_st: the checks run on it too */
    cuda_gemm_ctx *g;
    if (cuda_gemm_create(&g) != 0) {
        fprintf(stderr, "cuda_gemm_create failed\n");
        return 1;
    }
    if (!cuda_gemm_use_rows64(g, 1)) {
        /* the kernel exists for compute capability 9.0 only; there it must be available */
        const bool hopper = prop.major == 9 && prop.minor == 0;
        printf("%s: rows64 is not available on this GPU\n", hopper ? "FAIL" : "SKIP");
        return hopper ? 1 : 0;
    }
    struct shape {
        int M, K;
    };
    std::vector<shape> shapes{{128, 64}, {256, 192}, {384, 1024}, {1280, 704}};
    if (!small)
        for (shape s : {shape{4096, 4096},
                        {12288, 4096},
                        {4096, 11008},
                        {22016, 4096},
                        {32000, 4096},
                        {2048, 4160}})
            shapes.push_back(s);
    for (si_type t : {SI_TYPE_F16, SI_TYPE_BF16})
        for (shape s : shapes)
            if (checks) test_shape(g, t, s.M, s.K);
    if (bench && !small) {
        bench_shape(g, 12288, 4096, "QKV");
        bench_shape(g, 4096, 4096, "out proj");
        bench_shape(g, 22016, 4096, "gate/up");
        bench_shape(g, 4096, 11008, "down");
        bench_shape(g, 32000, 4096, "logits");
    }
    cuda_gemm_free(g);
    timing_free();
    printf("\n==== summary: %d checks, %d failed ====\n%s\n", g_checks, g_fail,
           g_fail ? "FAILED" : "ALL PASSED");
    return g_fail ? 1 : 0;
}
