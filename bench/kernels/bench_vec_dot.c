/* bench_vec_dot.c — single-threaded matrix-vector product per weight type and ISA level.
 *
 * For each type a ROWS x COLS weight matrix (random bytes with sane fp16 scales for the block
 * types, random values for the float types) is multiplied by one activation row: quantize_row
 * once, then vec_dot per weight row — what cpu_matmul does for one token. Prints the best of
 * several repetitions as GB/s of weight bytes (the number to compare with DRAM bandwidth) and
 * the speed-up over the scalar reference. A matrix of 4096 x 4096 (9-67 MB) is larger than L2
 * but, for the 4-bit types, may partly sit in L3 between repetitions.
 *
 * usage: bench_vec_dot [ROWS COLS]   (default 4096 4096)
 *
 * With --gemm, what cpu_matmul does for a prefill chunk on one thread instead: a ROWS x COLS
 * matrix (from_float of random values) times N activation rows at the best ISA level, two ways:
 *   dot:  quantize_row per activation row, then vec_dot per (weight row, activation row) (q4_0
 *         and q8_0's vec_dot rearrange the activation row on every call: only gemm is fast);
 *   gemm: quantize_row + prep_row per activation row, then gemm over chunks of GEMM_CHUNK
 *         weight rows (as matmul.c hands them to a thread).
 * Prints GFLOP/s (2 x ROWS x COLS x N per run, best of 15) and checks that both give the same
 * bits (the kernels promise it: batch invariance). N = 1 measures decode through gemm.
 *
 * usage: bench_vec_dot --gemm [ROWS COLS N]   (default 1536 576 128: SmolLM2's FFN up, pp128) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/cpu_kernels.h"
#include "core/fp16.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rng_u32(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

static float rng_float(void) { return (float)(rng_u32() >> 8) * (2.0f / 16777216.0f) - 1.0f; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* random bytes; fp16 scale fields set to small finite values (offsets from quant_blocks.h) */
static void fill_weights(si_type t, uint8_t *w, size_t bytes) {
    const quant_traits *q = quant_get(t);
    if (t == SI_TYPE_F32 || t == SI_TYPE_F16 || t == SI_TYPE_BF16) {
        const size_t n = bytes / (size_t)q->type_size;
        float buf[256];
        for (size_t i = 0; i < n; i += 256) {
            const size_t m = n - i < 256 ? n - i : 256;
            for (size_t j = 0; j < m; j++) buf[j] = 0.05f * rng_float();
            q->from_float(buf, w + i * (size_t)q->type_size, (int64_t)m);
        }
        return;
    }
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rng_u32();
    const uint16_t d = fp32_to_fp16(0.01f);
    for (size_t b = 0; b < bytes; b += (size_t)q->type_size) {
        uint8_t *p = w + b;
        switch (t) {
        case SI_TYPE_Q2_K: put16(p + 80, d); put16(p + 82, d); break;
        case SI_TYPE_Q3_K: put16(p + 108, d); break;
        case SI_TYPE_Q6_K: put16(p + 208, d); break;
        case SI_TYPE_Q4_1: case SI_TYPE_Q5_1: case SI_TYPE_Q4_K: case SI_TYPE_Q5_K:
            put16(p, d);
            put16(p + 2, d);
            break;
        default: put16(p, d); break; /* q4_0, q5_0, q8_0 */
        }
    }
}

/* from_float of random values: valid blocks of every type, scales included */
static void fill_weights_ff(si_type t, uint8_t *w, int64_t rows, int64_t cols) {
    const quant_traits *q = quant_get(t);
    float *buf = malloc((size_t)cols * sizeof(float));
    if (!buf) exit(1);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < cols; j++) buf[j] = 0.05f * rng_float();
        q->from_float(buf, w + (size_t)r * quant_row_size(t, cols), cols);
    }
    free(buf);
}

#define GEMM_CHUNK 64 /* weight rows per gemm call */

static int bench_gemm(int argc, char **argv) { /* argv: [ROWS COLS N] */
    const int64_t rows = argc > 2 ? atoll(argv[0]) : 1536, cols = argc > 2 ? atoll(argv[1]) : 576;
    const int n = argc > 2 ? atoi(argv[2]) : 128;
    const si_type types[] = {SI_TYPE_Q4_0, SI_TYPE_Q8_0, SI_TYPE_Q4_1, SI_TYPE_F16, SI_TYPE_Q4_K, SI_TYPE_Q6_K};
    float *x = malloc((size_t)cols * n * sizeof(float));
    float *y1 = malloc((size_t)rows * n * sizeof(float)), *y2 = malloc((size_t)rows * n * sizeof(float));
    uint8_t *xq = malloc(((size_t)cols * 4 + 64) * n), *xp = malloc(((size_t)cols * 4 + 64) * n);
    if (!x || !y1 || !y2 || !xq || !xp) return 1;
    for (int64_t i = 0; i < cols * n; i++) x[i] = rng_float();
    printf("bench_vec_dot --gemm: %lld x %lld weights x %d activation rows, 1 thread, %s; GFLOP/s, best of 15\n",
           (long long)rows, (long long)cols, n, cpu_isa_level_name(cpu_isa_detected()));
    printf("%-6s %10s %10s %8s\n", "type", "dot", "gemm", "speed-up");
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        const si_type t = types[ti];
        if (cols % quant_get(t)->block_size) continue;
        const cpu_kernels *k = cpu_kernels_get(t);
        const size_t wrow = quant_row_size(t, cols), xrow = quant_row_size(k->vec_dot_type, cols);
        const size_t prow = k->prep_row ? k->prep_size(cols) : 0;
        uint8_t *w = malloc(wrow * (size_t)rows);
        if (!w) return 1;
        fill_weights_ff(t, w, rows, cols);
        double best[2] = {1e30, 1e30};
        for (int rep = 0; rep < 15; rep++) {
            for (int v = 0; v < 2; v++) {
                const double t0 = now_s();
                for (int r = 0; r < n; r++) {
                    k->quantize_row(x + (size_t)r * cols, xq + (size_t)r * xrow, cols);
                    if (v && prow) k->prep_row(xq + (size_t)r * xrow, xp + (size_t)r * prow, cols);
                }
                if (!v) {
                    for (int r = 0; r < n; r++)
                        for (int64_t o = 0; o < rows; o++)
                            y1[(size_t)r * rows + o] = k->vec_dot(w + (size_t)o * wrow, xq + (size_t)r * xrow, cols);
                } else {
                    for (int64_t o0 = 0; o0 < rows; o0 += GEMM_CHUNK) {
                        const int nw = (int)(rows - o0 < GEMM_CHUNK ? rows - o0 : GEMM_CHUNK);
                        cpu_gemm(k, w + (size_t)o0 * wrow, wrow, nw, xq, xrow, xp, prow, n, cols, y2 + o0, (size_t)rows);
                    }
                }
                const double dt = now_s() - t0;
                if (dt < best[v]) best[v] = dt;
            }
        }
        const double flop = 2.0 * (double)rows * (double)cols * n;
        const int same = memcmp(y1, y2, (size_t)rows * n * sizeof(float)) == 0;
        printf("%-6s %10.1f %10.1f %7.2fx %s\n", quant_get(t)->name, flop / best[0] / 1e9, flop / best[1] / 1e9,
               best[0] / best[1], same ? "" : "RESULTS DIFFER");
        free(w);
    }
    free(x);
    free(y1);
    free(y2);
    free(xq);
    free(xp);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--gemm")) return bench_gemm(argc - 2, argv + 2);
    const int64_t rows = argc > 2 ? atoll(argv[1]) : 4096, cols = argc > 2 ? atoll(argv[2]) : 4096;
    const si_type types[] = {SI_TYPE_Q4_0, SI_TYPE_Q8_0, SI_TYPE_Q4_1, SI_TYPE_F16, SI_TYPE_Q4_K,
                             SI_TYPE_Q6_K, SI_TYPE_Q5_0, SI_TYPE_Q5_1, SI_TYPE_BF16, SI_TYPE_Q2_K,
                             SI_TYPE_Q3_K, SI_TYPE_Q5_K, SI_TYPE_F32};
    float *x = malloc((size_t)cols * sizeof(float));
    float *y = malloc((size_t)rows * sizeof(float));
    void *xq = malloc((size_t)cols * 4 + 4096);
    if (!x || !y || !xq) return 1;
    for (int64_t i = 0; i < cols; i++) x[i] = rng_float();
    printf("bench_vec_dot: %lld x %lld mat-vec, 1 thread, CPU level %s; GB/s of weight bytes, best of reps\n",
           (long long)rows, (long long)cols, cpu_isa_level_name(cpu_isa_detected()));
    printf("%-6s %9s", "type", "MB");
    for (int l = 0; l <= (int)cpu_isa_detected(); l++) printf(" %12s", cpu_isa_level_name((cpu_isa)l));
    printf("   speed-up\n");
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        const si_type t = types[ti];
        const size_t row_bytes = quant_row_size(t, cols), bytes = row_bytes * (size_t)rows;
        uint8_t *w = malloc(bytes);
        if (!w) return 1;
        fill_weights(t, w, bytes);
        printf("%-6s %9.1f", quant_get(t)->name, bytes / 1e6);
        double gbs[CPU_ISA_COUNT] = {0};
        for (int l = 0; l <= (int)cpu_isa_detected(); l++) {
            const cpu_kernels *k = cpu_kernels_get_isa(t, (cpu_isa)l);
            double best = 1e30, spent = 0;
            for (int rep = 0; rep < 50 && (rep < 3 || spent < 0.5); rep++) {
                const double t0 = now_s();
                k->quantize_row(x, xq, cols);
                for (int64_t r = 0; r < rows; r++) y[r] = k->vec_dot(w + (size_t)r * row_bytes, xq, cols);
                const double dt = now_s() - t0;
                spent += dt;
                if (dt < best) best = dt;
            }
            gbs[l] = bytes / best / 1e9;
            printf(" %12.2f", gbs[l]);
            fflush(stdout);
        }
        printf("   x%.1f\n", gbs[cpu_isa_detected()] / gbs[0]);
        free(w);
    }
    free(x);
    free(y);
    free(xq);
    return 0;
}
