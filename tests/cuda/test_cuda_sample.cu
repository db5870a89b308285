/* test_cuda_sample.cu — the GPU sampler (cuda_sample, sample.cu) against the CPU chain itself
 * (sampler_pick of src/engine/sampler.c, linked in: one implementation of the reference).
 *
 *   test_cuda_sample [--small | --no-bench | --time-only]
 *
 * Vocabularies of 32000 and 128256 (--small: 1000 and 5000), 8 rows a call, 40 calls each:
 * every row gets its own logits (spread, peaked, heavy ties, constant, half -inf, sharp), its own
 * parameters (greedy; top-k, top-p, min-p, temperature alone and combined; top_k >= vocab) and
 * its own u. The ids (output poisoned first) must equal sampler_pick's on the same logits, row
 * for row: both follow the same chain on the same float probabilities and differ only in the
 * order of the double sums (the exponentials are sampler_expf on both sides, bit for bit, and
 * min-p adds the host's logf), so a legitimate mismatch needs u or top_p within ~1e-16 of a
 * cumulative boundary — any mismatch is reported as FAIL with its row. Then timings (median of 21,
 * cudaEvent): one call for 1, 8, 24, 32 and 64 rows (the cluster sizes' ranges on the H200: 16, 8,
 * 4, 2) at 128256 and 32000 for five parameter sets (--no-bench: none; tests/cuda/run.sh runs that
 * at each SI_CUDA_SAMPLE_CLUSTER). Then cuda_logprobs_rows against sampler_logprobs (the engine's
 * CPU logprobs) on rows of every kind, 0-20 top tokens or none (check_logprobs). First,
 * div_to_float against the division (check_div_to_float), and sampler_expf on the device against
 * the host's, bit for bit (check_sampler_expf). Then cuda_penalise_rows against sampler_penalise,
 * and the ids sampled from its rows (check_penalties). --time-only: the timings alone (for ncu). */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/backend.h" /* BACKEND_PEN_MAX */
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_sample.h"
#include "backend/cuda/div_to_float.cuh"
#include "engine/sampler_exp.h"
#include "engine/sampler_pick.h"

static int g_fail = 0;
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32() {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}
static double rnd_unit() { return rnd_u32() / 4294967296.0; } /* [0, 1) */
static float rnd_normal() {                                    /* Box-Muller */
    const double a = rnd_unit() + 1e-12, b = rnd_unit();
    return (float)(std::sqrt(-2.0 * std::log(a)) * std::cos(6.283185307179586 * b));
}

enum { ROW_SPREAD, ROW_PEAKED, ROW_TIES, ROW_CONSTANT, ROW_MASKED, ROW_SHARP, ROW_KINDS };
static const char *ROW_NAMES[ROW_KINDS] = {"spread",   "peaked",    "ties",
                                           "constant", "half -inf", "sharp"};

static void fill_row(float *l, int n, int kind) {
    for (int i = 0; i < n; i++) {
        float v = 2.5f * rnd_normal();
        if (kind == ROW_TIES) v = std::round(v * 2.0f) / 2.0f; /* ~30 distinct values */
        if (kind == ROW_CONSTANT) v = 1.25f;
        if (kind == ROW_MASKED && (rnd_u32() & 1)) v = -INFINITY;
        l[i] = v;
    }
    if (kind == ROW_PEAKED)
        for (int j = 0; j < 4; j++) l[rnd_u32() % n] += 12.0f;
    if (kind == ROW_SHARP) /* a language model's usual row: a few tokens hold nearly all the mass */
        for (int j = 0; j < 3; j++)
            l[rnd_u32() % n] += 24.0f + 2.0f * j;
}

static cuda_sample_params random_params(int n) {
    static const float temps[] = {0.0f, 0.3f, 0.8f, 1.0f, 1.5f};
    static const float top_ps[] = {1.0f, 0.5f, 0.9f, 0.95f, 0.999f};
    static const float min_ps[] = {0.0f, 0.0f, 0.02f, 0.1f, 0.5f};
    const int top_ks[] = {0, 0, 1, 40, 128, 1000, n + 5}; /* 1-128: smp_finish_small */
    cuda_sample_params p = {};                            /* no logit biases or penalties */
    p.temperature = temps[rnd_u32() % 5];
    p.top_k = top_ks[rnd_u32() % 7];
    p.top_p = top_ps[rnd_u32() % 5];
    p.min_p = min_ps[rnd_u32() % 5];
    p.log_min_p = p.min_p > 0.0f ? logf(p.min_p) : 0.0f; /* the host's, as the engine packs it */
    p.u = rnd_unit();
    return p;
}

static int32_t cpu_pick(const float *l, int n, const cuda_sample_params &p,
                        std::vector<sampler_cand> &c) {
    for (int i = 0; i < n; i++) c[i] = sampler_cand{i, l[i], 0.0f};
    const sampler_chain ch = {p.temperature, p.top_k, p.top_p, p.min_p};
    return sampler_pick(c.data(), n, &ch, p.u);
}

/* One call's R rows of n logits, each of a random kind with random parameters (draw), on the
 * host and, after upload, the device (ids too: the logprobs kernel reads them). */
struct test_rows {
    static const int R = 8;
    int n;
    int kinds[R];
    std::vector<float> h_l;
    std::vector<cuda_sample_params> h_p;
    std::vector<int32_t> h_ids;
    float *d_l;
    cuda_sample_params *d_p;
    int32_t *d_ids;

    explicit test_rows(int n_) : n(n_), h_l((size_t)R * n_), h_p(R), h_ids(R) {
        CUDA_CHECK(cudaMalloc(&d_l, h_l.size() * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&d_p, R * sizeof(cuda_sample_params)));
        CUDA_CHECK(cudaMalloc(&d_ids, R * sizeof(int32_t)));
    }
    ~test_rows() {
        CUDA_CHECK(cudaFree(d_l));
        CUDA_CHECK(cudaFree(d_p));
        CUDA_CHECK(cudaFree(d_ids));
    }
    const float *row(int r) const { return &h_l[(size_t)r * n]; }
    void draw() {
        for (int r = 0; r < R; r++) {
            kinds[r] = (int)(rnd_u32() % ROW_KINDS);
            fill_row(&h_l[(size_t)r * n], n, kinds[r]);
            h_p[r] = random_params(n);
        }
    }
    void upload() {
        CUDA_CHECK(cudaMemcpy(d_l, h_l.data(), h_l.size() * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_p, h_p.data(), R * sizeof(cuda_sample_params),
                              cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_ids, h_ids.data(), R * sizeof(int32_t), cudaMemcpyHostToDevice));
    }
};

static void check_vocab(int n, int calls) {
    test_rows t(n);
    const int R = test_rows::R;
    std::vector<cuda_sample_params> &h_p = t.h_p;
    std::vector<int32_t> &h_ids = t.h_ids;
    const int *kinds = t.kinds;
    std::vector<sampler_cand> cands(n);
    int rows = 0, bad = 0, by_kind[ROW_KINDS] = {0}, beyond_argmax = 0;
    for (int call = 0; call < calls; call++) {
        t.draw();
        t.upload();
        CUDA_CHECK(cudaMemset(t.d_ids, 0xFF, R * sizeof(int32_t))); /* poison: -1 */
        cuda_sample(t.d_l, n, R, t.d_p, t.d_ids, 0);
        CUDA_CHECK(cudaMemcpy(h_ids.data(), t.d_ids, R * sizeof(int32_t), cudaMemcpyDeviceToHost));
        for (int r = 0; r < R; r++) {
            const float *l = t.row(r);
            const int32_t want = cpu_pick(l, n, h_p[r], cands);
            cuda_sample_params greedy = h_p[r];
            greedy.temperature = 0.0f;
            beyond_argmax += want != cpu_pick(l, n, greedy, cands);
            rows++;
            by_kind[kinds[r]]++;
            if (h_ids[r] != want) {
                bad++;
                const cuda_sample_params &p = h_p[r];
                printf("FAIL sample n=%d call %d row %d (%s): gpu %d cpu %d (t %g top_k %d "
                       "top_p %g min_p %g u %.17g)\n",
                       n, call, r, ROW_NAMES[kinds[r]], h_ids[r], want, (double)p.temperature,
                       p.top_k, (double)p.top_p, (double)p.min_p, p.u);
            }
        }
    }
    g_fail |= bad != 0;
    printf("%s sample vocab %d: %d/%d rows give the CPU's id (spread %d, peaked %d, ties %d, "
           "constant %d, half -inf %d, sharp %d rows; %d draws not the argmax); tolerance: exact\n",
           bad ? "FAIL" : "PASS", n, rows - bad, rows, by_kind[0], by_kind[1], by_kind[2],
           by_kind[3], by_kind[4], by_kind[5], beyond_argmax);
}

static bool lp_close(float a, float b) { /* 1e-5, or the same infinity */
    return a == b || std::fabs((double)a - (double)b) <= 1e-5;
}

__global__ void div_to_float_kernel(const double *x, const double *d, int n, float *fast,
                                    float *exact) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fast[i] = div_to_float(x[i], d[i], 1.0 / d[i]);
    exact[i] = (float)(x[i] / d[i]);
}

/* div_to_float (the sampler's weights' division as a multiplication) against the division, bit
 * for bit: quotients a probability's size (a float x, as expf gives, over a larger total), and
 * quotients placed within a few double ulps of a midpoint between two floats (x = the midpoint
 * times d: the cases where the product's rounding could differ), and some below float's normal
 * range. */
static void check_div_to_float() {
    const int n = 1 << 20;
    std::vector<double> x(n), d(n);
    for (int i = 0; i < n; i++) {
        d[i] = 1.0 + rnd_unit() * 1e5;
        const int kind = i % 4;
        if (kind == 0) { /* a float over a larger total */
            x[i] = (double)(float)(rnd_unit() * d[i]);
        } else if (kind == 3) { /* tiny: float subnormal or zero quotients */
            x[i] = rnd_unit() * 2e-38 * d[i];
        } else { /* near the midpoint above a random float q, within +-8 double ulps */
            const float q = (float)(rnd_unit() * 0.999 + 1e-7);
            const double mid = ((double)q + (double)std::nextafter(q, 2.0f)) / 2.0;
            const double near = mid + (double)((int)(rnd_u32() % 17) - 8) * std::ldexp(mid, -52);
            x[i] = near * d[i];
        }
    }
    double *d_x, *d_d;
    float *d_fast, *d_exact;
    CUDA_CHECK(cudaMalloc(&d_x, n * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&d_d, n * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&d_fast, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_exact, n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_x, x.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_d, d.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    div_to_float_kernel<<<n / 256, 256>>>(d_x, d_d, n, d_fast, d_exact);
    CUDA_CHECK(cudaGetLastError());
    std::vector<float> fast(n), exact(n);
    CUDA_CHECK(cudaMemcpy(fast.data(), d_fast, n * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(exact.data(), d_exact, n * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0, host_bad = 0;
    for (int i = 0; i < n; i++) {
        bad += memcmp(&fast[i], &exact[i], sizeof(float)) != 0;
        const float h = (float)(x[i] / d[i]); /* the CPU's rounding: the device's division agrees */
        host_bad += memcmp(&h, &exact[i], sizeof(float)) != 0;
    }
    g_fail |= bad != 0 || host_bad != 0;
    printf("%s div_to_float: %d/%d quotients as the division rounds them (%d differ between the "
           "device's and the host's division); tolerance: exact\n",
           bad || host_bad ? "FAIL" : "PASS", n - bad, n, host_bad);
    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_d));
    CUDA_CHECK(cudaFree(d_fast));
    CUDA_CHECK(cudaFree(d_exact));
}

__global__ void sampler_expf_kernel(const float *x, int n, float *y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sampler_expf(x[i]);
}

/* sampler_expf, the samplers' e^x, computed by the device against the host's, bit for bit: every
 * 61st float from -104 to 89 (~36 million: every exponent, the subnormal results, the overflow)
 * and the edges (+-0, +-inf, NaN, the cut-offs); and the host's within 2 ulps of e^x (a double
 * exp) where e^x is a normal float. */
static void check_sampler_expf() {
    std::vector<float> x;
    const float edges[] = {0.0f,    -0.0f,   -INFINITY, INFINITY, NAN,    -104.0f, -103.99f,
                           -87.33f, -1e-30f, 1e-30f,    88.72f,   88.73f, 88.8f,   88.81f};
    for (float e : edges)
        x.push_back(e);
    for (uint32_t b = 0x80000000u; b <= 0xC2D00000u; b += 61) { /* -0 down to -104 */
        float f;
        memcpy(&f, &b, 4);
        x.push_back(f);
    }
    for (uint32_t b = 0; b <= 0x42B20000u; b += 61) { /* 0 up to 89 */
        float f;
        memcpy(&f, &b, 4);
        x.push_back(f);
    }
    const int n = (int)x.size();
    float *d_x, *d_y;
    CUDA_CHECK(cudaMalloc(&d_x, (size_t)n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_y, (size_t)n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_x, x.data(), (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    sampler_expf_kernel<<<(n + 255) / 256, 256>>>(d_x, n, d_y);
    CUDA_CHECK(cudaGetLastError());
    std::vector<float> y(n);
    CUDA_CHECK(cudaMemcpy(y.data(), d_y, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0, far = 0;
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        const float h = sampler_expf(x[i]);
        if (memcmp(&h, &y[i], sizeof(float)) != 0) {
            if (bad < 5)
                printf("  sampler_expf(%a): device %a, host %a\n", (double)x[i], (double)y[i],
                       (double)h);
            bad++;
        }
        const double e = std::exp((double)x[i]);
        if (!(e >= 0x1p-126 && e <= 0x1.fffffep127)) continue;
        const double ulp = (double)std::nextafter((float)e, INFINITY) - (double)(float)e;
        const double u = std::fabs((double)h - e) / ulp;
        worst = u > worst ? u : worst;
        far += u > 2.0;
    }
    g_fail |= bad != 0 || far != 0;
    printf("%s sampler_expf: %d/%d arguments give the host's bits on the device; %d beyond 2 ulps "
           "of e^x (worst %.3f); tolerance: exact, 2 ulps\n",
           bad || far ? "FAIL" : "PASS", n - bad, n, far, worst);
    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_y));
}

/* cuda_logprobs_rows against sampler_logprobs (the engine's CPU logprobs) on the same rows: the
 * picked token's logprob within 1e-5 (the double sum's order differs), the same top ids in the
 * same order (ties to the lower id), theirs within 1e-5; rows that ask for none untouched. */
static void check_logprobs(int n, int calls) {
    const int ks[] = {-1, 0, 1, 5, 20};
    test_rows t(n);
    const int R = test_rows::R;
    std::vector<cuda_sample_params> &h_p = t.h_p;
    std::vector<int32_t> &h_ids = t.h_ids;
    const int *kinds = t.kinds;
    std::vector<cuda_logprobs> h_o(R);
    cuda_logprobs *d_o;
    CUDA_CHECK(cudaMalloc(&d_o, R * sizeof(cuda_logprobs)));
    int rows = 0, bad = 0, tops = 0;
    for (int call = 0; call < calls; call++) {
        t.draw();
        for (int r = 0; r < R; r++) {
            h_p[r].logprobs = ks[rnd_u32() % 5];
            h_ids[r] = (int32_t)(rnd_u32() % (uint32_t)n);
        }
        t.upload();
        CUDA_CHECK(cudaMemset(d_o, 0x7F, R * sizeof(cuda_logprobs))); /* poison */
        cuda_logprobs_rows(t.d_l, n, R, t.d_p, t.d_ids, d_o, 0);
        CUDA_CHECK(cudaMemcpy(h_o.data(), d_o, R * sizeof(cuda_logprobs), cudaMemcpyDeviceToHost));
        for (int r = 0; r < R; r++) {
            const int k = h_p[r].logprobs;
            const cuda_logprobs &o = h_o[r];
            bool ok;
            if (k < 0) {
                cuda_logprobs poison;
                memset(&poison, 0x7F, sizeof poison);
                ok = !memcmp(&o, &poison, sizeof o);
            } else {
                float lp;
                si_token_logprob top[SI_MAX_TOP_LOGPROBS];
                const int nt = sampler_logprobs(t.row(r), n, h_ids[r], k, &lp, top);
                ok = o.n_top == nt && lp_close(o.logprob, lp);
                for (int t = 0; ok && t < nt; t++)
                    ok = o.top_id[t] == top[t].token && lp_close(o.top_logprob[t], top[t].logprob);
                tops += nt;
            }
            rows++;
            if (!ok) {
                bad++;
                printf("FAIL logprobs n=%d call %d row %d (%s, %d top): gpu logprob %.9g n_top %d "
                       "first id %d\n",
                       n, call, r, ROW_NAMES[kinds[r]], k, (double)o.logprob, o.n_top, o.top_id[0]);
            }
        }
    }
    g_fail |= bad != 0;
    printf("%s logprobs vocab %d: %d/%d rows give the CPU's logprob and top tokens (%d top entries "
           "compared; rows asking none untouched); tolerance: ids exact, logprobs 1e-5\n",
           bad ? "FAIL" : "PASS", n, rows - bad, rows, tops);
    CUDA_CHECK(cudaFree(d_o));
}

/* cuda_penalise_rows against the CPU's chain (a float addition per logit bias, then
 * sampler_penalise) on rows of every kind: each row with 0, 1, 40 or SI_MAX_LOGIT_BIAS logit
 * biases (of +-100 and smaller, inexact ones), its own penalty factors (a repetition penalty
 * above and below 1, frequency and presence penalties of either sign, inexact ones among them,
 * so that an FMA or an approximate division would show) and 0, 1, 64 or BACKEND_PEN_MAX distinct
 * penalised ids with counts 1-64, some of them biased too. Every logit of the adjusted rows must
 * be the CPU's bit for bit (the untouched ones unchanged), the sampling kernel must then pick
 * sampler_pick's id from the CPU's adjusted row, and restore must give back the raw rows bit for
 * bit. */
/* A token id not yet seen (marked in seen) */
static int32_t distinct_id(std::vector<uint8_t> &seen, int n) {
    int32_t id;
    do
        id = (int32_t)(rnd_u32() % (uint32_t)n);
    while (seen[id]);
    seen[id] = 1;
    return id;
}

static void check_penalties(int n, int calls) {
    static const float reps[] = {1.0f, 1.1f, 1.3f, 0.7f, 2.0f};
    static const float freqs[] = {0.0f, 0.3f, -0.45f, 1.7f};
    static const float press[] = {0.0f, 0.6f, -1.1f, 1e-30f};
    const int counts[] = {0, 1, 64, BACKEND_PEN_MAX};
    const int bias_counts[] = {0, 1, 40, SI_MAX_LOGIT_BIAS};
    static const float biases[] = {-100.0f, 100.0f, 0.3f, -1.7f, 5.0f, 1e-3f};
    test_rows t(n);
    const int R = test_rows::R;
    std::vector<cuda_sample_params> &h_p = t.h_p;
    std::vector<int32_t> pairs, h_ids(R);
    std::vector<float> want((size_t)R * n), got((size_t)R * n);
    std::vector<sampler_cand> cands(n);
    std::vector<uint8_t> seen(n);
    int32_t *d_pairs;
    float *d_saved;
    const size_t adj_max = BACKEND_PEN_MAX + SI_MAX_LOGIT_BIAS; /* entries a row */
    CUDA_CHECK(cudaMalloc(&d_pairs, (size_t)R * adj_max * 2 * sizeof(int32_t)));
    CUDA_CHECK(cudaMalloc(&d_saved, (size_t)R * adj_max * sizeof(float)));
    int rows = 0, bad = 0, bad_ids = 0, bad_restore = 0, changed = 0;
    for (int call = 0; call < calls; call++) {
        t.draw();
        want = t.h_l;
        pairs.clear();
        for (int r = 0; r < R; r++) {
            cuda_sample_params &p = h_p[r];
            p.repetition = reps[rnd_u32() % 5];
            p.frequency = freqs[rnd_u32() % 4];
            p.presence = press[rnd_u32() % 4];
            /* the biases first (as the chain applies them), then the penalties; a token may
             * be in both lists */
            p.bias_at = (int)(pairs.size() / 2);
            p.bias_n = std::min(bias_counts[rnd_u32() % 4], n);
            std::fill(seen.begin(), seen.end(), 0);
            for (int j = 0; j < p.bias_n; j++) {
                const int32_t id = distinct_id(seen, n);
                const float b = biases[rnd_u32() % 6] * (float)(rnd_unit() + 0.5);
                int32_t bits;
                memcpy(&bits, &b, sizeof bits);
                pairs.push_back(id);
                pairs.push_back(bits);
                float &l = want[(size_t)r * n + id];
                const float before = l;
                l += b;
                changed += memcmp(&l, &before, sizeof l) != 0;
            }
            p.pen_at = (int)(pairs.size() / 2);
            p.pen_n = std::min(counts[rnd_u32() % 4], n);
            std::fill(seen.begin(), seen.end(), 0);
            for (int j = 0; j < p.pen_n; j++) {
                const int32_t id = distinct_id(seen, n);
                const int32_t c = 1 + (int32_t)(rnd_u32() % 64);
                pairs.push_back(id);
                pairs.push_back(c);
                float &l = want[(size_t)r * n + id];
                const float before = l;
                l = sampler_penalise(l, c, p.repetition, p.frequency, p.presence);
                changed += memcmp(&l, &before, sizeof l) != 0;
            }
        }
        t.upload();
        if (!pairs.empty())
            CUDA_CHECK(cudaMemcpy(d_pairs, pairs.data(), pairs.size() * sizeof(int32_t),
                                  cudaMemcpyHostToDevice));
        cuda_penalise_rows(t.d_l, n, R, t.d_p, d_pairs, d_saved, false, 0);
        CUDA_CHECK(cudaMemset(t.d_ids, 0xFF, R * sizeof(int32_t))); /* poison: -1 */
        cuda_sample(t.d_l, n, R, t.d_p, t.d_ids, 0);
        CUDA_CHECK(
            cudaMemcpy(got.data(), t.d_l, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(h_ids.data(), t.d_ids, R * sizeof(int32_t), cudaMemcpyDeviceToHost));
        for (int r = 0; r < R; r++) {
            rows++;
            const size_t at = (size_t)r * n;
            const bool same = !memcmp(&got[at], &want[at], (size_t)n * sizeof(float));
            const int32_t id = cpu_pick(&want[at], n, h_p[r], cands);
            bad += !same;
            bad_ids += h_ids[r] != id;
            if (!same || h_ids[r] != id)
                printf("FAIL penalties n=%d call %d row %d (%s, %d pairs, rep %g freq %g pres %g): "
                       "logits %s, gpu id %d cpu %d\n",
                       n, call, r, ROW_NAMES[t.kinds[r]], h_p[r].pen_n, (double)h_p[r].repetition,
                       (double)h_p[r].frequency, (double)h_p[r].presence, same ? "same" : "DIFFER",
                       h_ids[r], id);
        }
        cuda_penalise_rows(t.d_l, n, R, t.d_p, d_pairs, d_saved, true, 0);
        CUDA_CHECK(
            cudaMemcpy(got.data(), t.d_l, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
        for (int r = 0; r < R; r++)
            bad_restore += memcmp(&got[(size_t)r * n], t.row(r), (size_t)n * sizeof(float)) != 0;
    }
    g_fail |= bad || bad_ids || bad_restore || !changed;
    printf("%s penalties vocab %d: %d/%d rows penalised bit for bit as the CPU (%d logits "
           "changed), ids sampled from them the CPU's for %d/%d, %d/%d rows restored bit for bit; "
           "tolerance: exact\n",
           bad || bad_ids || bad_restore || !changed ? "FAIL" : "PASS", n, rows - bad, rows,
           changed, rows - bad_ids, rows, rows - bad_restore, rows);
    CUDA_CHECK(cudaFree(d_pairs));
    CUDA_CHECK(cudaFree(d_saved));
}

static void time_sampler(int n) {
    const int max_rows = 64, reps = 21;
    std::vector<float> h_l((size_t)max_rows * n);
    float *d_l;
    cuda_sample_params *d_p;
    int32_t *d_ids;
    CUDA_CHECK(cudaMalloc(&d_l, h_l.size() * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_p, max_rows * sizeof(cuda_sample_params)));
    CUDA_CHECK(cudaMalloc(&d_ids, max_rows * sizeof(int32_t)));
    struct {
        const char *name;
        cuda_sample_params p;
        int kind;
    } sets[] = {
        {"greedy", {0.5, 0.0f, 0, 1.0f, 0.0f}, ROW_SPREAD},
        {"t 0.8 top-k 40 top-p 0.9", {0.5, 0.8f, 40, 0.9f, 0.0f}, ROW_SPREAD},
        {"t 0.8 top-p 0.95 (top-k off)", {0.5, 0.8f, 0, 0.95f, 0.0f}, ROW_SPREAD},
        {"t 1.0 only (whole vocabulary)", {0.5, 1.0f, 0, 1.0f, 0.0f}, ROW_SPREAD},
        {"t 0.7 top-p 0.9, sharp rows", {0.5, 0.7f, 0, 0.9f, 0.0f}, ROW_SHARP},
    };
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    int uploaded = -1; /* the kind of the rows on the device */
    for (auto &s : sets) {
        if (s.kind != uploaded) {
            for (int r = 0; r < max_rows; r++)
                fill_row(&h_l[(size_t)r * n], n, s.kind);
            CUDA_CHECK(
                cudaMemcpy(d_l, h_l.data(), h_l.size() * sizeof(float), cudaMemcpyHostToDevice));
            uploaded = s.kind;
        }
        std::vector<cuda_sample_params> h_p(max_rows, s.p);
        CUDA_CHECK(cudaMemcpy(d_p, h_p.data(), max_rows * sizeof(cuda_sample_params),
                              cudaMemcpyHostToDevice));
        printf("timing sample vocab %d, %-30s:", n, s.name);
        for (int rows : {1, 8, 24, 32, 64}) {
            std::vector<float> ms;
            for (int k = 0; k < reps; k++) {
                CUDA_CHECK(cudaEventRecord(e0));
                cuda_sample(d_l, n, rows, d_p, d_ids, 0);
                CUDA_CHECK(cudaEventRecord(e1));
                CUDA_CHECK(cudaEventSynchronize(e1));
                float t;
                CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
                ms.push_back(t);
            }
            std::sort(ms.begin(), ms.end());
            printf("  %d rows %7.1f us", rows, ms[reps / 2] * 1000.0);
        }
        printf("\n");
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaFree(d_l));
    CUDA_CHECK(cudaFree(d_p));
    CUDA_CHECK(cudaFree(d_ids));
}

int main(int argc, char **argv) {
    const bool small = argc > 1 && !strcmp(argv[1], "--small");
    const bool bench = !(argc > 1 && !strcmp(argv[1], "--no-bench"));
    if (argc > 1 && !strcmp(argv[1], "--time-only")) { /* for a profiler: the timings alone */
        time_sampler(128256);
        time_sampler(32000);
        return 0;
    }
    check_div_to_float();
    check_sampler_expf();
    if (small) {
        check_vocab(1000, 10);
        check_vocab(5000, 10);
        check_logprobs(1000, 4);
        check_penalties(1000, 4);
    } else {
        check_vocab(32000, 40);
        check_vocab(128256, 40);
        check_logprobs(32000, 10);
        check_logprobs(128256, 10);
        check_penalties(32000, 10);
        check_penalties(128256, 10);
        if (bench) {
            time_sampler(128256);
            time_sampler(32000);
        }
    }
    printf("%s\n", g_fail ? "TEST_CUDA_SAMPLE: FAILED" : "TEST_CUDA_SAMPLE: PASSED");
    return g_fail;
}
