/* sampler_exp_bench.c — the host side of sampler_expf (src/engine/sampler_exp.h): its time an
 * element against the C library's expf (a sum over 128,256 arguments spread as logits less their
 * maximum, best of 50); the CPU sampler's pick (sampler_pick) over 128,256 logits for three
 * chains (best of 30); and with --sweep sampler_expf's error over every float of [-104, 88.7]
 * against a double exp() and how often it differs from expf (about a minute).
 *
 *   cmake -B build && cmake --build build --target swiftinfer
 *   gcc -O2 -ffp-contract=off -Isrc -Iinclude bench/sampler_exp_bench.c build/libswiftinfer.a \
 *       -lm -lpthread -o /tmp/sampler_exp_bench
 *   /tmp/sampler_exp_bench [--sweep] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/sampler_exp.h"
#include "engine/sampler_pick.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double ulps(float got, double want) {
    const double ulp = (double)nextafterf((float)want, INFINITY) - (double)(float)want;
    return fabs((double)got - want) / ulp;
}

int main(int argc, char **argv) {
    enum { N = 128256 };
    static float x[N];
    unsigned s = 1;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = (float)((s >> 8) % 100000) / 100000.0f * 12.0f - 20.0f;
    }
    for (int which = 0; which < 2; which++) {
        double best = 1e9, check = 0.0;
        for (int r = 0; r < 50; r++) {
            const double t0 = now_s();
            double sum = 0.0;
            for (int i = 0; i < N; i++)
                sum += which ? expf(x[i]) : sampler_expf(x[i]);
            const double t = now_s() - t0;
            best = t < best ? t : best;
            check += sum;
        }
        printf("%-12s %.2f ns an element (sum %.9g)\n", which ? "expf" : "sampler_expf",
               1e9 * best / N, check);
    }
    static sampler_cand c[N];
    const struct {
        const char *name;
        sampler_chain chain;
    } chains[] = {{"t 1.0 alone (whole vocabulary)", {1.0f, 0, 1.0f, 0.0f}},
                  {"t 0.8 top-k 40 top-p 0.95 min-p 0.05", {0.8f, 40, 0.95f, 0.05f}},
                  {"t 0.8 top-p 0.95 min-p 0.05 (top-k off)", {0.8f, 0, 0.95f, 0.05f}}};
    for (int k = 0; k < 3; k++) {
        double best = 1e9;
        long ids = 0;
        for (int r = 0; r < 30; r++) {
            for (int i = 0; i < N; i++) c[i] = (sampler_cand){i, x[i], 0.0f};
            const double t0 = now_s();
            ids += sampler_pick(c, N, &chains[k].chain, 0.37);
            const double t = now_s() - t0;
            best = t < best ? t : best;
        }
        printf("sampler_pick, %-40s %.3f ms (ids sum %ld)\n", chains[k].name, 1e3 * best, ids);
    }
    if (argc > 1 && !strcmp(argv[1], "--sweep")) {
        double worst = 0.0, worst_libc = 0.0;
        float at = 0.0f;
        long n = 0, differ = 0;
        for (float v = -104.0f; v <= 88.7f; v = nextafterf(v, INFINITY)) {
            const double e = exp((double)v);
            if (e < 0x1p-126) continue; /* normal results only */
            const float a = sampler_expf(v), b = expf(v);
            const double u = ulps(a, e), ub = ulps(b, e);
            if (u > worst) worst = u, at = v;
            worst_libc = ub > worst_libc ? ub : worst_libc;
            differ += a != b;
            n++;
        }
        printf("sweep: %ld floats; sampler_expf within %.3f ulps (worst at %a), expf within %.3f; "
               "they differ on %ld (%.2f %%)\n",
               n, worst, (double)at, worst_libc, differ, 100.0 * (double)differ / (double)n);
    }
    return 0;
}
