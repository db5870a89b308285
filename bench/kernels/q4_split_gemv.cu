/* q4_split_gemv.cu — would Q4_0 stored "row-split" let the batch-1 decode GEMV stream like the
 * F16 one? (issue 6: Q4_0 batch-1 needs ~825 t/s; bench/RESULTS.md 2026-12-01 s17.)
 *
 * GGUF's Q4_0 block is 18 bytes (an fp16 scale, then 16 bytes of nibbles), so most blocks are not
 * 16-byte aligned and the engine's GEMV (gemv_q8x.cuh) stages rows through shared memory with
 * cp.async. Row-split keeps a row's bytes but reorders them: its nb scales (2 nb bytes), then its
 * nb 16-byte nibble blocks. With nb % 8 == 0 (K % 256 == 0, every Llama shape) rows and nibble
 * blocks are 16-byte aligned, so a lane loads a block's nibbles with one 16-byte ld.global.nc
 * straight into registers, as the F16 GEMV (gemv_fast.cuh) loads its pieces, and the scales of
 * 32 consecutive blocks are one 64-byte run for the warp.
 *
 * What it measures: the 129 matrices of a Llama-2-7B Q4_0 token, one kernel a matrix launched with
 * PDL in a CUDA graph (graph_us), for several shapes of the kernel (KS warps a row, R rows a warp,
 * U blocks a lane and row in flight), against the engine's cuda_gemv_pre on the same weights in
 * GGUF order with the same quantised x; every variant's y is checked against the engine's. Then
 * the token as the engine's graph has it ("as the engine": the norms, and stand-ins for the
 * short kernels between the GEMVs), since the GEMVs alone misjudged the engine (s17: 12 %
 * faster alone, 15 % slower in the engine).
 *
 *   q4_split_gemv [reps (default 20)] [attention ns (3000)] [SwiGLU ns (2000)]
 * exits 1 if a check fails */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/pdl.cuh"
#include "timing.cuh" /* tests/cuda: g_st, CUDA_CHECK, graph_us */

/* the 2-byte sibling of si_ldg_stream16 (cuda_common.cuh) */
__device__ __forceinline__ uint16_t ldg_once2(const void *p) {
    uint16_t v;
    asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}

/* Where block c of a row of nb blocks keeps its scale and its 16 bytes of nibbles:
 * ROW_SPLIT  the row's nb scales, then its nb nibble blocks;
 * G8_SPLIT   groups of 8 blocks (144 bytes, 16-byte aligned when the row is), each its 8 scales
 *            (16 bytes) then their 8 nibble blocks: a block's place depends on its flat index
 *            only, and a group is the 256-element segment the batched kernels already stage. */
enum { ROW_SPLIT, G8_SPLIT };
template <int LAYOUT> __device__ __forceinline__ size_t scale_at(int nb, int c) {
    return LAYOUT == ROW_SPLIT ? 2 * (size_t)c : 144 * (size_t)(c >> 3) + 2 * (c & 7);
}
template <int LAYOUT> __device__ __forceinline__ size_t nibbles_at(int nb, int c) {
    return LAYOUT == ROW_SPLIT ? 2 * (size_t)nb + 16 * (size_t)c
                               : 144 * (size_t)(c >> 3) + 16 + 16 * (c & 7);
}

/* GGUF order -> LAYOUT, one thread a block */
template <int LAYOUT> __global__ void split_rows_kernel(const uint8_t *src, uint8_t *dst, int M, int nb) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= (long long)M * nb) return;
    const long long r = i / nb;
    const int b = (int)(i - r * nb);
    const uint8_t *s = src + r * 18 * nb + 18 * b;
    uint8_t *row = dst + r * 18 * nb;
    row[scale_at<LAYOUT>(nb, b)] = s[0];
    row[scale_at<LAYOUT>(nb, b) + 1] = s[1];
    for (int j = 0; j < 16; j++) row[nibbles_at<LAYOUT>(nb, b) + j] = s[2 + j];
}

/* random GGUF Q4_0 blocks: any nibbles, scales of either sign in [2^-8, 2^-6) */
__global__ void fill_q4_0_kernel(uint8_t *w, long long n_blocks, unsigned seed) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n_blocks) return;
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    auto next = [&] {
        h ^= h << 13;
        h ^= h >> 17;
        h ^= h << 5;
        return h;
    };
    uint8_t *b = w + 18 * i;
    const uint32_t r = next();
    const __half d = __float2half((r & 1 ? -1.0f : 1.0f) * ldexpf(1.0f + (r >> 8) * 0x1p-24f, -8 + (int)(r >> 1) % 2));
    memcpy(b, &d, 2);
    for (int j = 0; j < 16; j += 4) {
        const uint32_t v = next();
        memcpy(b + 2 + j, &v, 4);
    }
}

/* A stand-in for the short kernels between a decode layer's GEMVs (RoPE + attention after QKV,
 * SwiGLU after gate/up): launched with PDL like them, it lets the next kernel launch at once,
 * waits for the one before, then keeps its CTAs busy for ns nanoseconds with HBM idle. */
__global__ void gap_kernel(unsigned ns) {
    si_pdl_trigger();
    si_pdl_wait();
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

#define WARPS 8
/* y[nb][M] = x W^T for split Q4_0 W (LAYOUT) and NB rows of x quantised as the engine's norms
 * write them (CUDA_Q8X_ROW_BYTES: K int8, K/32 f32 d, K/32 i32 sums). Lane l of a warp slice
 * takes blocks c_beg + l, + 32, ... of its R rows, U of them a row in flight; KS warps share a
 * row group, each a contiguous slice of blocks, their sums meeting in shared memory (as
 * gemv_h16_kernel). A row sums in the same order for every NB. */
template <int LAYOUT, int NB, int KS, int R, int U>
__global__ void __launch_bounds__(WARPS * 32)
    q4s_gemv_kernel(const uint8_t *__restrict__ W, int M, int K, const uint8_t *__restrict__ xq,
                    float *__restrict__ y) {
    static_assert(R * NB <= 32, "a lane a sum");
    __shared__ float part[KS > 1 ? WARPS : 1][R * NB];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slice = warp % KS;
    const int row0 = (blockIdx.x * (WARPS / KS) + warp / KS) * R;
    if (KS == 1 && row0 >= M) return;
    const int nb = K / 32;
    const int c_beg = nb * slice / KS, c_end = nb * (slice + 1) / KS;
    const uint8_t *rowp[R];
#pragma unroll
    for (int r = 0; r < R; r++) rowp[r] = W + (size_t)min(row0 + r, M - 1) * 18 * nb;
    const size_t x_row = CUDA_Q8X_ROW_BYTES(K);
    float acc[R][NB];
    uint4 q[R][U];
    uint16_t d[R][U];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) acc[r][b] = 0.0f;
    auto load = [&](int c0) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + 32 * u;
#pragma unroll
            for (int r = 0; r < R; r++) {
                q[r][u] = c < c_end ? si_ldg_stream16(rowp[r] + nibbles_at<LAYOUT>(nb, c)) : make_uint4(0, 0, 0, 0);
                d[r][u] = c < c_end ? ldg_once2(rowp[r] + scale_at<LAYOUT>(nb, c)) : (uint16_t)0;
            }
        }
    };
    auto compute = [&](int c0) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int c = c0 + 32 * u;
            if (c >= c_end) break;
#pragma unroll
            for (int b = 0; b < NB; b++) {
                const uint8_t *xb_row = xq + b * x_row;
                const uint4 xa = __ldg((const uint4 *)(xb_row + 32 * (size_t)c));
                const uint4 xb = __ldg((const uint4 *)(xb_row + 32 * (size_t)c) + 1);
                const float dx = __ldg((const float *)(xb_row + K) + c);
                const int sx = __ldg((const int *)(xb_row + K + 4 * nb) + c);
                const uint32_t xw[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const uint32_t qw[4] = {q[r][u].x, q[r][u].y, q[r][u].z, q[r][u].w};
                    int sumi = 0;
#pragma unroll
                    for (int j = 0; j < 4; j++) { /* byte j packs elements j (low) and j + 16 */
                        sumi = __dp4a((int)(qw[j] & 0x0F0F0F0Fu), (int)xw[j], sumi);
                        sumi = __dp4a((int)((qw[j] >> 4) & 0x0F0F0F0Fu), (int)xw[4 + j], sumi);
                    }
                    acc[r][b] = fmaf(si_h2f(d[r][u]) * dx, (float)(sumi - 8 * sx), acc[r][b]);
                }
            }
        }
    };
    const int first = c_beg + lane;
    if (row0 < M) load(first); /* weights before the PDL wait, x after */
    si_pdl_trigger();
    si_pdl_wait();
    if (row0 < M)
        for (int c0 = first; c0 < c_end; c0 += 32 * U) {
            if (c0 != first) load(c0);
            compute(c0);
        }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const float v = si_warp_sum(acc[r][b]);
            if (KS > 1) {
                if (lane == 0) part[warp][r * NB + b] = v;
            } else if (lane == 0 && row0 + r < M) {
                y[(size_t)b * M + row0 + r] = v;
            }
        }
    if (KS > 1) {
        __syncthreads();
        if (slice == 0 && lane < R * NB && row0 + lane / NB < M) {
            float v = part[warp][lane];
#pragma unroll
            for (int s = 1; s < KS; s++) v += part[warp + s][lane];
            y[(size_t)(lane % NB) * M + row0 + lane / NB] = v;
        }
    }
}

typedef void (*q4s_launch_fn)(const uint8_t *, int, int, const uint8_t *, float *);
template <int LAYOUT, int NB, int KS, int R, int U>
static void q4s_launch(const uint8_t *W, int M, int K, const uint8_t *xq, float *y) {
    si_launch_pdl(q4s_gemv_kernel<LAYOUT, NB, KS, R, U>, si_div_up(M, WARPS / KS * R), WARPS * 32,
                  0, g_st, W, M, K, xq, y);
}
#define CFG(L, NB, KS, R, U) {#L " NB" #NB " KS" #KS " R" #R " U" #U, L, NB, q4s_launch<L, NB, KS, R, U>}
static const struct {
    const char *name;
    int layout, nb;
    q4s_launch_fn launch;
} k_cfgs[] = {
    CFG(ROW_SPLIT, 1, 1, 4, 2), CFG(ROW_SPLIT, 1, 2, 4, 2),
    CFG(G8_SPLIT, 1, 1, 1, 4),  CFG(G8_SPLIT, 1, 1, 2, 4),  CFG(G8_SPLIT, 1, 1, 4, 2),
    CFG(G8_SPLIT, 1, 1, 4, 4),  CFG(G8_SPLIT, 1, 2, 2, 2),  CFG(G8_SPLIT, 1, 2, 4, 2),
    CFG(G8_SPLIT, 1, 2, 8, 1),  CFG(G8_SPLIT, 1, 2, 4, 1),  CFG(G8_SPLIT, 1, 4, 4, 2),
    CFG(G8_SPLIT, 1, 2, 8, 2),
    CFG(G8_SPLIT, 2, 2, 4, 2),  CFG(G8_SPLIT, 2, 2, 2, 2),  CFG(G8_SPLIT, 2, 2, 4, 1),
    CFG(G8_SPLIT, 4, 2, 4, 2),  CFG(G8_SPLIT, 4, 2, 2, 2),  CFG(G8_SPLIT, 4, 2, 2, 1),
    CFG(G8_SPLIT, 8, 2, 4, 1),  CFG(G8_SPLIT, 8, 2, 2, 2),  CFG(G8_SPLIT, 8, 2, 2, 1),
    CFG(G8_SPLIT, 8, 2, 1, 2),
};
constexpr int N_CFG = sizeof k_cfgs / sizeof k_cfgs[0];

/* nb rows of x quantised on the host as the engine's q8x rows: d = amax / 127 rounded to fp16,
 * q = round(x / d), the sums of q */
static std::vector<uint8_t> q8x_rows(int K, int nb, unsigned seed) {
    const size_t rb = CUDA_Q8X_ROW_BYTES(K);
    std::vector<uint8_t> rows(rb * nb);
    srand(seed);
    for (int r = 0; r < nb; r++) {
        uint8_t *row = rows.data() + r * rb;
        float *xd = (float *)(row + K);
        int *xs = (int *)(xd + K / 32);
        for (int b = 0; b < K / 32; b++) {
            float v[32], amax = 0.0f;
            for (int j = 0; j < 32; j++) {
                v[j] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
                amax = fmaxf(amax, fabsf(v[j]));
            }
            const float d = __half2float(__float2half(amax / 127.0f));
            int sum = 0;
            for (int j = 0; j < 32; j++) {
                const int qv = (int)lrintf(v[j] / d);
                row[32 * b + j] = (uint8_t)(int8_t)qv;
                sum += qv;
            }
            xd[b] = d;
            xs[b] = sum;
        }
    }
    return rows;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 20;
    /* the stand-ins for attention and SwiGLU, ns (the "as the engine" lines) */
    const int gap_attn = argc > 2 ? atoi(argv[2]) : 3000, gap_swiglu = argc > 3 ? atoi(argv[3]) : 2000;
    if (reps < 1 || gap_attn < 0 || gap_swiglu < 0) {
        fprintf(stderr, "usage: q4_split_gemv [reps] [attention ns] [SwiGLU ns]\n");
        return 2;
    }
    timing_init();
    /* a Llama-2-7B token's matrices in decode order (32 layers of QKV, output, gate/up, down; the
     * 32000-row output), each at the engine's allocation (16-byte aligned) */
    const int shapes[5][2] = {{12288, 4096}, {4096, 4096}, {22016, 4096}, {4096, 11008}, {32000, 4096}};
    std::vector<int> mat_shape;
    std::vector<size_t> off;
    size_t total = 0;
    for (int l = 0; l <= 32; l++)
        for (int j = 0; j < (l < 32 ? 4 : 1); j++) {
            const int s = l < 32 ? j : 4;
            mat_shape.push_back(s);
            off.push_back(total);
            total += cuda_weight_alloc_bytes(SI_TYPE_Q4_0, shapes[s][0], shapes[s][1]);
        }
    const int n_mat = (int)off.size();
    double gb = 0;
    for (int m = 0; m < n_mat; m++) gb += 18.0 * shapes[mat_shape[m]][0] * (shapes[mat_shape[m]][1] / 32) * 1e-9;
    printf("q4_split_gemv: %d matrices, %.3f GB a token, %d reps\n", n_mat, gb, reps);

    uint8_t *w_gguf, *w_split[2], *xq4k, *xq11k;
    float *y, *y_ref;
    CUDA_CHECK(cudaMalloc(&w_gguf, total));
    CUDA_CHECK(cudaMalloc(&w_split[ROW_SPLIT], total));
    CUDA_CHECK(cudaMalloc(&w_split[G8_SPLIT], total));
    CUDA_CHECK(cudaMalloc(&y, 8 * 4 * 32000));
    CUDA_CHECK(cudaMalloc(&y_ref, 8 * 4 * 32000));
    for (int m = 0; m < n_mat; m++) {
        const int M = shapes[mat_shape[m]][0], nb = shapes[mat_shape[m]][1] / 32;
        const long long n = (long long)M * nb;
        const unsigned g = (unsigned)((n + 255) / 256);
        fill_q4_0_kernel<<<g, 256, 0, g_st>>>(w_gguf + off[m], n, 77u + m);
        split_rows_kernel<ROW_SPLIT><<<g, 256, 0, g_st>>>(w_gguf + off[m], w_split[ROW_SPLIT] + off[m], M, nb);
        split_rows_kernel<G8_SPLIT><<<g, 256, 0, g_st>>>(w_gguf + off[m], w_split[G8_SPLIT] + off[m], M, nb);
    }
    CUDA_CHECK_LAUNCH();
    const std::vector<uint8_t> x4k = q8x_rows(4096, 8, 1), x11k = q8x_rows(11008, 8, 2);
    CUDA_CHECK(cudaMalloc(&xq4k, x4k.size()));
    CUDA_CHECK(cudaMalloc(&xq11k, x11k.size()));
    CUDA_CHECK(cudaMemcpy(xq4k, x4k.data(), x4k.size(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(xq11k, x11k.data(), x11k.size(), cudaMemcpyHostToDevice));
    auto x_of = [&](int m) { return shapes[mat_shape[m]][1] == 4096 ? xq4k : xq11k; };
    auto engine = [&](int m, int nb) {
        const int M = shapes[mat_shape[m]][0], K = shapes[mat_shape[m]][1];
        if (cuda_gemv_pre(SI_TYPE_Q4_0, w_gguf + off[m], M, K, x_of(m), nb, y_ref, g_st) != 0) {
            fprintf(stderr, "q4_split_gemv: cuda_gemv_pre refused %dx%d\n", M, K);
            exit(1);
        }
    };
    auto split = [&](int cfg, int m) {
        const int M = shapes[mat_shape[m]][0], K = shapes[mat_shape[m]][1];
        k_cfgs[cfg].launch(w_split[k_cfgs[cfg].layout] + off[m], M, K, x_of(m), y);
    };

    /* the checks: the first matrix of each shape, every variant against the engine's GEMV at the
     * same batch rows, and the G8 KS2 variants' batch row 0 against their one-row variant's bits
     * (the engine promises a request the same output alone and batched) */
    bool ok = true;
    int ks2_nb1 = -1;
    for (int c = 0; c < N_CFG; c++)
        if (k_cfgs[c].layout == G8_SPLIT && k_cfgs[c].nb == 1 && strstr(k_cfgs[c].name, "KS2")) ks2_nb1 = c;
    for (int s = 0; s < 5; s++) {
        int m = 0;
        while (mat_shape[m] != s) m++;
        const int M = shapes[s][0];
        std::vector<float> ref(8 * M), got(8 * M), row0(M);
        split(ks2_nb1, m);
        CUDA_CHECK(cudaMemcpy(row0.data(), y, 4 * M, cudaMemcpyDeviceToHost));
        for (int c = 0; c < N_CFG; c++) {
            const int nb = k_cfgs[c].nb;
            engine(m, nb);
            CUDA_CHECK(cudaMemcpy(ref.data(), y_ref, 4 * M * nb, cudaMemcpyDeviceToHost));
            double ymax = 0;
            for (int i = 0; i < M * nb; i++) ymax = fmax(ymax, fabs(ref[i]));
            CUDA_CHECK(cudaMemset(y, 0xff, 4 * M * nb)); /* NaN: a row not written fails */
            split(c, m);
            CUDA_CHECK(cudaMemcpy(got.data(), y, 4 * M * nb, cudaMemcpyDeviceToHost));
            double worst = 0;
            for (int i = 0; i < M * nb; i++) {
                const double e = fabs((double)got[i] - ref[i]);
                worst = std::isnan(e) ? INFINITY : fmax(worst, e);
            }
            bool pass = worst <= 1e-4 * ymax;
            const bool same_order = k_cfgs[c].layout == G8_SPLIT && strstr(k_cfgs[c].name, "KS2");
            int differ = 0;
            if (same_order)
                for (int i = 0; i < M; i++) differ += memcmp(&got[i], &row0[i], 4) != 0;
            pass = pass && differ == 0;
            ok = ok && pass;
            printf("check %5dx%-5d %-26s max |y - y_engine| %.3g of max |y_engine| %.3g%s: %s\n",
                   M, shapes[s][1], k_cfgs[c].name, worst, ymax,
                   !same_order ? "" : differ ? ", row 0 NOT as at one row" : ", row 0 as at one row",
                   pass ? "PASS" : "FAIL");
        }
    }

    /* each layer shape alone, one batch row: its 32 matrices in a chain, the engine's and the
     * one-row variants */
    int best[5] = {-1, -1, -1, -1, -1};
    for (int s = 0; s < 4; s++) {
        std::vector<int> same;
        for (int m = 0; m < n_mat; m++)
            if (mat_shape[m] == s) same.push_back(m);
        const double bytes = 18.0 * shapes[s][0] * (shapes[s][1] / 32) * same.size();
        auto pct = [&](double us) { return 100.0 * bytes / (us * 1e-6) * 1e-9 / 4210.0; };
        const double e_us = graph_us(reps, same, [&](int m) { engine(m, 1); });
        printf("%5dx%-5d x32  engine (gemv_q8x)          %7.1f us  %5.1f %%\n", shapes[s][0], shapes[s][1], e_us, pct(e_us));
        double best_us = 1e30;
        for (int c = 0; c < N_CFG; c++) {
            if (k_cfgs[c].nb != 1) continue;
            const double us = graph_us(reps, same, [&](int m) { split(c, m); });
            printf("%5dx%-5d x32  %-26s %7.1f us  %5.1f %%\n", shapes[s][0], shapes[s][1], k_cfgs[c].name, us, pct(us));
            if (us < best_us && k_cfgs[c].layout == G8_SPLIT) best_us = us, best[s] = c;
        }
    }
    best[4] = best[2]; /* the output matrix: K = 4096 and many rows, as gate/up */
    std::vector<int> all;
    for (int m = 0; m < n_mat; m++) all.push_back(m);
    auto token = [&](const char *what, double us) {
        printf("token %-44s %7.1f us  %5.1f %% of 4.21 TB/s  = %6.1f tokens/s\n", what, us,
               100.0 * gb / (us * 1e-6) / 4210.0, 1e6 / us);
    };
    char name[96];
    for (int nb : {1, 2, 4, 8}) {
        snprintf(name, sizeof name, "engine (gemv_q8x) NB%d", nb);
        token(name, graph_us(reps, all, [&](int m) { engine(m, nb); }));
        if (nb == 1) {
            snprintf(name, sizeof name, "G8 best a shape (%d %d %d %d)", best[0], best[1], best[2], best[3]);
            token(name, graph_us(reps, all, [&](int m) { split(best[mat_shape[m]], m); }));
        }
        for (int c = 0; c < N_CFG; c++)
            if (k_cfgs[c].nb == nb) token(k_cfgs[c].name, graph_us(reps, all, [&](int m) { split(c, m); }));
    }
    token("engine (gemv_q8x) NB1, again", graph_us(reps, all, [&](int m) { engine(m, 1); }));

    /* The token as the engine's decode graph has it at batch 1 (the chains above have nothing
     * between the GEMVs, and misjudged: bench/RESULTS.md s17): QKV and gate/up behind their
     * norm, which the engine runs inside its GEMV (cuda_gemv_norm) and a split variant as a
     * kernel before it (cuda_add_rmsnorm quantising x, as norm_for does); gap_kernel after QKV
     * and gate/up for attention and SwiGLU (3 and 2 us unless given). */
    float *xf, *wn;
    CUDA_CHECK(cudaMalloc(&xf, 4 * 4096));
    CUDA_CHECK(cudaMalloc(&wn, 4 * 4096));
    {
        std::vector<float> h(4096);
        for (int i = 0; i < 4096; i++) h[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
        CUDA_CHECK(cudaMemcpy(xf, h.data(), 4 * 4096, cudaMemcpyHostToDevice));
        for (int i = 0; i < 4096; i++) h[i] = 1.0f + (float)(i % 7) / 10.0f;
        CUDA_CHECK(cudaMemcpy(wn, h.data(), 4 * 4096, cudaMemcpyHostToDevice));
    }
    auto as_engine = [&](int m, bool staged, int cfg) { /* staged: the engine's gemv_q8x */
        const int sh = mat_shape[m], M = shapes[sh][0], K = shapes[sh][1];
        const bool normed = sh == 0 || sh == 2;
        if (normed && staged) {
            if (cuda_gemv_norm(SI_TYPE_Q4_0, w_gguf + off[m], M, K, xf, NULL, wn, 1e-5f, NULL,
                               y_ref, g_st) != 0)
                exit(1);
        } else if (normed) {
            if (cuda_add_rmsnorm(NULL, xq4k, xf, NULL, wn, 4096, 1, 1e-5f, g_st) != 0) exit(1);
            split(cfg < 0 ? best[sh] : cfg, m);
        } else if (staged) {
            engine(m, 1);
        } else {
            split(cfg < 0 ? best[sh] : cfg, m);
        }
        if (sh == 0 || sh == 2)
            si_launch_pdl(gap_kernel, 32, 128, 0, g_st, (unsigned)(sh == 0 ? gap_attn : gap_swiglu));
    };
    token("as the engine: engine (gemv_q8x, norm inside)", graph_us(reps, all, [&](int m) { as_engine(m, true, 0); }));
    /* the per-shape choice the engine integration (a3bfdb4) made */
    auto find = [&](const char *n) {
        for (int c = 0; c < N_CFG; c++)
            if (!strcmp(k_cfgs[c].name, n)) return c;
        exit(1);
    };
    best[0] = best[2] = best[4] = find("G8_SPLIT NB1 KS2 R8 U1");
    best[1] = find("G8_SPLIT NB1 KS2 R4 U2");
    best[3] = find("G8_SPLIT NB1 KS2 R4 U1");
    token("as the engine: G8 as a3bfdb4 (+ norm kernel)", graph_us(reps, all, [&](int m) { as_engine(m, false, -1); }));
    for (int c = 0; c < N_CFG; c++)
        if (k_cfgs[c].nb == 1 && k_cfgs[c].layout == G8_SPLIT) {
            snprintf(name, sizeof name, "as the engine: %s", k_cfgs[c].name);
            token(name, graph_us(reps, all, [&](int m) { as_engine(m, false, c); }));
        }
    token("as the engine: engine, again", graph_us(reps, all, [&](int m) { as_engine(m, true, 0); }));
    CUDA_CHECK(cudaFree(xf));
    CUDA_CHECK(cudaFree(wn));
    CUDA_CHECK(cudaFree(w_gguf));
    CUDA_CHECK(cudaFree(w_split[0]));
    CUDA_CHECK(cudaFree(w_split[1]));
    CUDA_CHECK(cudaFree(xq4k));
    CUDA_CHECK(cudaFree(xq11k));
    CUDA_CHECK(cudaFree(y));
    CUDA_CHECK(cudaFree(y_ref));
    timing_free();
    printf("q4_split_gemv: %s\n", ok ? "all checks passed" : "A CHECK FAILED");
    return ok ? 0 : 1;
}
