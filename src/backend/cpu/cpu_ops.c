/* cpu_ops.c — scalar reference implementations of the CPU backend's operations.
 *
 * These are the readable reference; SIMD versions (a later issue) are tested against them. */
#include "backend/cpu/cpu_ops.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "core/error.h"
#include "core/fp16.h"
#include "quant/quant.h"

void cpu_rmsnorm(float *out, const float *x, const float *w, int n, int n_rows, float eps) {
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * n;
        float *o = out + (size_t)r * n;
        double ss = 0.0; /* ggml accumulates the sum of squares in double (ggml_float) */
        for (int i = 0; i < n; i++) ss += (double)xr[i] * xr[i];
        const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
        for (int i = 0; i < n; i++) o[i] = xr[i] * scale * w[i];
    }
}

void cpu_add_bias(float *x, const float *b, int n, int n_rows) {
    for (int r = 0; r < n_rows; r++)
        for (int i = 0; i < n; i++) x[(size_t)r * n + i] += b[i];
}

void cpu_get_row(float *out, const si_tensor *E, int64_t row) {
    const quant_traits *qt = quant_get(E->type);
    const uint8_t *src = (const uint8_t *)E->data + (size_t)row * quant_row_size(E->type, E->n_cols);
    qt->to_float(src, out, E->n_cols);
}

/* NOTE: the angles depend on pos and i only, so cos/sin are computed once per call, not once
 * per head: the same floats as before (the same incremental theta), 1 / n_heads of the sincosf
 * calls, which ran serially between the pool's jobs (a batched decode step calls this twice per
 * token and layer). */
#define ROPE_MAX_HALF 512

void cpu_rope(float *x, int n_heads, int32_t pos, const rope_params *p) {
    /* theta_i = pos * scale * base^(-2i/rope_dim) / factor_i, computed incrementally as ggml
     * does so that our rotations round the same way. */
    const float theta_scale = powf(p->freq_base, -2.0f / (float)p->rope_dim);
    const int half = p->rope_dim / 2;
    SI_ASSERT(half <= ROPE_MAX_HALF);
    float cs[ROPE_MAX_HALF], sn[ROPE_MAX_HALF];
    float theta_base = (float)pos;
    for (int i = 0; i < half; i++) {
        const float ff = p->freq_factors ? p->freq_factors[i] : 1.0f;
        const float theta = p->freq_scale * (theta_base / ff);
        cs[i] = cosf(theta);
        sn[i] = sinf(theta);
        theta_base *= theta_scale;
    }
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * p->head_dim;
        for (int i = 0; i < half; i++) {
            const int a = p->style == ROPE_NORM ? 2 * i : i;
            const int b = p->style == ROPE_NORM ? 2 * i + 1 : i + half;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * cs[i] - x1 * sn[i];
            v[b] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

void cpu_swiglu(float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

typedef struct {
    float *gate;
    const float *up;
    int64_t n;
    atomic_int_fast64_t next; /* the next slice nobody has claimed */
} swiglu_job;

/* NOTE: slices are claimed from a counter rather than split by thread index, so that a worker
 * the OS has descheduled does not hold the step up (element-wise: same results either way) */
#define SWIGLU_SLICE 256

static void swiglu_worker(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    swiglu_job *j = ctx;
    for (int64_t b; (b = atomic_fetch_add_explicit(&j->next, SWIGLU_SLICE, memory_order_relaxed)) < j->n;)
        cpu_swiglu(j->gate + b, j->up + b, j->n - b < SWIGLU_SLICE ? j->n - b : SWIGLU_SLICE);
}

/* NOTE: below this many elements a pool wake-up costs more than the expf calls it shares */
#define SWIGLU_MIN_PARALLEL 4096

void cpu_swiglu_pool(thread_pool *pool, float *gate, const float *up, int64_t n) {
    if (n < SWIGLU_MIN_PARALLEL || pool_size(pool) == 1) {
        cpu_swiglu(gate, up, n);
        return;
    }
    swiglu_job j = {.gate = gate, .up = up, .n = n};
    atomic_init(&j.next, 0);
    pool_run(pool, swiglu_worker, &j);
}

void cpu_add(float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
}
