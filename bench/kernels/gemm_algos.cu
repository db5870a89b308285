/* gemm_algos.cu — which cuBLASLt algorithm is fastest for the F16 matmuls of a batched decode
 * step (y[n][M] = x[n][K] W^T, the layout cuda_gemm uses: W col-major K x M transposed, x K x n,
 * y M x n), against the heuristic's first choice, which cuda_gemm takes. For each Llama-2-7B
 * weight shape and n rows: up to 32 heuristic candidates, each timed alone (median of 30, L2
 * flushed before each), printed with its tile, stages, split-K, swizzle and cluster shape.
 * Timing only (random f16 data, nothing checked). With --parts P (2 or 4), the shapes whose
 * output is added to the residual (o, down) as the engine could split them: K in P slices, one
 * strided-batched matmul writing P partial outputs (cuda_gemm_pre_parts' layout).
 *
 * With --search, beyond the heuristic: every configuration cuBLASLt accepts for these types
 * (each algorithm id x tile x stages x split-K x reduction x swizzle x custom option x cluster
 * shape, kept where cublasLtMatmulAlgoCheck passes), each timed back to back in a CUDA graph
 * over copies of W that beat the L2 (as a decode step's graph runs it); the best 8 are timed
 * again longer and printed, the best written to the --table file in the engine's format
 * (cuda_gemm_table_load: "f16 M K n id tile stages splitk red swizzle custom cluster").
 *
 * Configurations are timed in a fixed random order until --budget seconds (default 90) a shape;
 * --narrow searches split-K 1 and 2 without CTA swizzling only (on the H200 the best of the full
 * space were there, and the narrow space is timed whole in the budget).
 *
 *   gemm_algos [--parts P] [--search [--narrow] [--budget S] [--table FILE]] [n ...]  (n: 64) */
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/gemm.cuh"
#include "timing.cuh" /* tests/cuda: the kernel tests' L2 flush and median timing, on g_st */

#define LK(x)                                                                                      \
    do {                                                                                           \
        cublasStatus_t s_ = (x);                                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "%s:%d: cublasLt status %d\n", __FILE__, __LINE__, (int)s_);           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

__global__ void fill(__half *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2half((float)((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f);
}
static unsigned cfg_attr(const cublasLtMatmulAlgo_t &a, cublasLtMatmulAlgoConfigAttributes_t at) {
    unsigned v = 0;
    size_t w = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&a, at, &v, sizeof v, &w);
    return v;
}

/* the uint32 array capability at of algorithm a; {fallback} when it lists none */
static std::vector<uint32_t> cap_list(const cublasLtMatmulAlgo_t &a,
                                      cublasLtMatmulAlgoCapAttributes_t at, uint32_t fallback) {
    size_t bytes = 0;
    cublasLtMatmulAlgoCapGetAttribute(&a, at, NULL, 0, &bytes);
    std::vector<uint32_t> v(bytes / 4);
    if (!v.empty()) cublasLtMatmulAlgoCapGetAttribute(&a, at, v.data(), bytes, &bytes);
    if (v.empty()) v.push_back(fallback);
    return v;
}
static int32_t cap_int(const cublasLtMatmulAlgo_t &a, cublasLtMatmulAlgoCapAttributes_t at) {
    int32_t v = 0;
    size_t w = 0;
    cublasLtMatmulAlgoCapGetAttribute(&a, at, &v, sizeof v, &w);
    return v;
}

/* Every configuration cuBLASLt accepts for op (la, lb, lc) within ws bytes of workspace (narrow:
 * split-K 1 or 2 and no CTA swizzling only, where the best of a full search were) */
static std::vector<gemm_table_entry> all_configs(cublasLtHandle_t lt, cublasLtMatmulDesc_t op,
                                         cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                                         cublasLtMatrixLayout_t lc, size_t ws, bool narrow) {
    int ids[256], nid = 0;
    LK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F,
                                CUDA_R_32F, CUDA_R_32F, 256, ids, &nid));
    const int32_t splits[] = {1, 2, 3, 4, 6, 8};
    const uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1,
                                 CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1,
                                 CUBLASLT_CLUSTER_SHAPE_4x1x1, CUBLASLT_CLUSTER_SHAPE_1x4x1};
    std::vector<gemm_table_entry> out;
    for (int i = 0; i < nid; i++) {
        cublasLtMatmulAlgo_t a;
        if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F,
                                   CUDA_R_32F, CUDA_R_32F, ids[i], &a) != CUBLAS_STATUS_SUCCESS)
            continue;
        const auto tiles = cap_list(a, CUBLASLT_ALGO_CAP_TILE_IDS, CUBLASLT_MATMUL_TILE_UNDEFINED);
        const auto stages =
            cap_list(a, CUBLASLT_ALGO_CAP_STAGES_IDS, CUBLASLT_MATMUL_STAGES_UNDEFINED);
        const bool splitk = cap_int(a, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
        const uint32_t red_mask = (uint32_t)cap_int(a, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
        const int swz = !narrow && cap_int(a, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) ? 1 : 0;
        const int custom = cap_int(a, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX);
        size_t tried = 0, kept = 0;
        for (uint32_t t : tiles)
            for (uint32_t sg : stages)
                for (int cu = 0; cu <= custom; cu++)
                    for (int sw = 0; sw <= swz; sw++)
                        for (int32_t sk : splits) {
                            if ((sk > 1 && !splitk) || (narrow && sk > 2)) break;
                            for (uint32_t red = 0; red <= 4; red = red ? red << 1 : 1) {
                                if ((sk == 1) != (red == 0)) continue;
                                if (red && !(red_mask & red)) continue;
                                for (uint16_t cl : clusters) {
                                    gemm_table_entry c = {SI_TYPE_F16, 0, 0, 0, ids[i], t, sg,
                                                          red, (uint32_t)sw, (uint32_t)cu, sk, cl};
                                    cublasLtMatmulAlgo_t ca;
                                    cublasLtMatmulHeuristicResult_t r;
                                    tried++;
                                    if (cuda_gemm_table_algo(lt, &c, &ca) != 0 ||
                                        cublasLtMatmulAlgoCheck(lt, op, la, lb, lc, lc, &ca, &r) !=
                                            CUBLAS_STATUS_SUCCESS ||
                                        r.workspaceSize > ws)
                                        continue;
                                    out.push_back(c);
                                    kept++;
                                }
                            }
                        }
        if (kept)
            fprintf(stderr, "  algo id %d: %zu of %zu configurations accepted\n", ids[i], kept,
                    tried);
    }
    return out;
}

static void print_cfg(FILE *f, const gemm_table_entry &c) {
    fprintf(f, "%d %u %u %d %u %u %u %u", c.id, c.tile, c.stages, c.splitk, c.red, c.swizzle,
            c.custom, (unsigned)c.cluster);
}

/* --search for one shape: every accepted configuration timed briefly in a graph over the W
 * copies, the best 8 again for longer, against the heuristic's first choice */
static void search(cublasLtHandle_t lt, const char *name, int M, int K, int n, void *work,
                   size_t ws, int budget_s, bool narrow, FILE *table) {
    cudaStream_t st = g_st;
    __half *W, *x;
    float *y;
    CUDA_CHECK(cudaMalloc(&W, (size_t)M * K * 2));
    CUDA_CHECK(cudaMalloc(&x, (size_t)n * K * 2));
    CUDA_CHECK(cudaMalloc(&y, (size_t)n * M * 4));
    fill<<<1024, 256, 0, st>>>(W, (size_t)M * K, 1);
    fill<<<1024, 256, 0, st>>>(x, (size_t)n * K, 2);
    std::vector<void *> Ws = l2_beating_copies(W, (size_t)M * K * 2);
    std::vector<int> mats(Ws.size());
    for (size_t i = 0; i < mats.size(); i++) mats[i] = (int)i;
    gemm_lt_descs d;
    cuda_gemm_lt_descs(false, M, K, K, n, &d);
    const cublasLtMatmulDesc_t op = d.op;
    const cublasLtMatrixLayout_t la = d.la, lb = d.lb, lc = d.lc;
    const double bytes = (double)M * K * 2 + (double)n * K * 2 + (double)n * M * 4;
    const float alpha = 1, beta = 0;
    /* per matmul, back to back in a graph (reps rounds of the copies); < 0: it failed */
    auto time_algo = [&](const cublasLtMatmulAlgo_t &a, int reps) {
        if (cublasLtMatmul(lt, op, &alpha, W, la, x, lb, &beta, y, lc, y, lc, &a, work, ws, st) !=
                CUBLAS_STATUS_SUCCESS ||
            cudaStreamSynchronize(st) != cudaSuccess)
            return -1.0;
        return graph_us(reps, mats, [&](int m) {
                   cublasLtMatmul(lt, op, &alpha, Ws[m], la, x, lb, &beta, y, lc, y, lc, &a, work,
                                  ws, st);
               }) /
               mats.size();
    };
    cublasLtMatmulPreference_t pref;
    LK(cublasLtMatmulPreferenceCreate(&pref));
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                            sizeof ws));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    LK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found));
    const double first = found ? time_algo(heur.algo, 8) : 0;
    std::vector<gemm_table_entry> cfgs = all_configs(lt, op, la, lb, lc, ws, narrow);
    /* in a fixed random order, so that a budget cut leaves a sample of every kind */
    srand(12345);
    for (size_t i = cfgs.size(); i > 1; i--) std::swap(cfgs[i - 1], cfgs[rand() % i]);
    std::vector<std::pair<double, size_t>> quick;
    const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    size_t timed = 0;
    for (size_t i = 0; i < cfgs.size(); i++, timed++) {
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(budget_s)) break;
        cublasLtMatmulAlgo_t a;
        if (cuda_gemm_table_algo(lt, &cfgs[i], &a) != 0) continue;
        const double us = time_algo(a, 2);
        if (us > 0) quick.push_back({us, i});
        if ((i + 1) % 200 == 0) fprintf(stderr, "  %s: %zu of %zu timed\n", name, i + 1, cfgs.size());
    }
    std::sort(quick.begin(), quick.end());
    printf("%-7s M=%-5d K=%-5d n=%-3d heuristic first: %8.2f us %5.1f%%  (%zu configurations "
           "accepted, %zu timed in the %d s budget, %zu ran)\n",
           name, M, K, n, first, 100.0 * bytes / first * 1e-3 / 4210.0, cfgs.size(), timed,
           budget_s, quick.size());
    std::vector<std::pair<double, size_t>> best;
    for (size_t j = 0; j < quick.size() && j < 8; j++) {
        cublasLtMatmulAlgo_t a;
        cuda_gemm_table_algo(lt, &cfgs[quick[j].second], &a);
        best.push_back({time_algo(a, 8), quick[j].second});
    }
    std::sort(best.begin(), best.end());
    for (const auto &b : best) {
        printf("%-7s M=%-5d K=%-5d n=%-3d search:    %8.2f us %5.1f%%  %.3fx first  cfg ", name,
               M, K, n, b.first, 100.0 * bytes / b.first * 1e-3 / 4210.0, first / b.first);
        print_cfg(stdout, cfgs[b.second]);
        printf("\n");
    }
    if (table && !best.empty()) {
        fprintf(table, "f16 %d %d %d ", M, K, n);
        print_cfg(table, cfgs[best[0].second]);
        fprintf(table, "  # %.2f us, heuristic %.2f\n", best[0].first, first);
        fflush(table);
    }
    fflush(stdout);
    cublasLtMatmulPreferenceDestroy(pref);
    cuda_gemm_lt_descs_free(&d);
    free_copies(Ws);
    CUDA_CHECK(cudaFree(W));
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
}

int main(int argc, char **argv) {
    std::vector<int> ns;
    int parts = 1;
    bool do_search = false;
    int budget_s = 90;
    bool narrow = false;
    FILE *table = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--parts") && i + 1 < argc) parts = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--search")) do_search = true;
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc) budget_s = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--narrow")) narrow = true;
        else if (!strcmp(argv[i], "--table") && i + 1 < argc) {
            if (!(table = fopen(argv[++i], "a"))) {
                perror(argv[i]);
                return 1;
            }
        } else ns.push_back(atoi(argv[i]));
    }
    if (ns.empty()) ns = {64};
    const struct {
        int M, K;
        const char *name;
    } shapes[] = {
        {12288, 4096, "qkv"}, {4096, 4096, "o"}, {22016, 4096, "gate_up"}, {4096, 11008, "down"},
        {32000, 4096, "logits"}};
    timing_init();
    cudaStream_t st = g_st;
    cublasLtHandle_t lt;
    LK(cublasLtCreate(&lt));
    const size_t ws = 32u << 20;
    void *work;
    CUDA_CHECK(cudaMalloc(&work, ws));
    if (do_search) {
        for (int n : ns)
            for (const auto &s : shapes) search(lt, s.name, s.M, s.K, n, work, ws, budget_s, narrow, table);
        if (table) fclose(table);
        CUDA_CHECK(cudaFree(work));
        timing_free();
        return 0;
    }
    for (int n : ns)
        for (const auto &s : shapes) {
            const bool residual = s.M == 4096; /* o and down */
            if (parts > 1 && (!residual || s.K % (8 * parts))) continue;
            const int Kp = s.K / parts;
            __half *W, *x;
            float *y;
            CUDA_CHECK(cudaMalloc(&W, (size_t)s.M * s.K * 2));
            CUDA_CHECK(cudaMalloc(&x, (size_t)n * s.K * 2));
            CUDA_CHECK(cudaMalloc(&y, (size_t)parts * n * s.M * 4));
            fill<<<1024, 256, 0, st>>>(W, (size_t)s.M * s.K, 1);
            fill<<<1024, 256, 0, st>>>(x, (size_t)n * s.K, 2);
            gemm_lt_descs d;
            cuda_gemm_lt_descs(false, s.M, Kp, s.K, n, &d);
            const cublasLtMatmulDesc_t op = d.op;
            const cublasLtMatrixLayout_t la = d.la, lb = d.lb, lc = d.lc;
            if (parts > 1) {
                const int32_t count = parts;
                const int64_t off[3] = {Kp, Kp, (int64_t)s.M * n};
                const cublasLtMatrixLayout_t ls[3] = {la, lb, lc};
                for (int j = 0; j < 3; j++) {
                    LK(cublasLtMatrixLayoutSetAttribute(ls[j], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                        &count, sizeof count));
                    LK(cublasLtMatrixLayoutSetAttribute(
                        ls[j], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &off[j], sizeof off[j]));
                }
            }
            cublasLtMatmulPreference_t pref;
            LK(cublasLtMatmulPreferenceCreate(&pref));
            LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof ws));
            cublasLtMatmulHeuristicResult_t heur[32];
            int found = 0;
            LK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 32, heur, &found));
            const double bytes =
                (double)s.M * s.K * 2 + (double)n * s.K * 2 + (double)parts * n * s.M * 4;
            double first = 0;
            for (int i = 0; i < found; i++) {
                const float alpha = 1, beta = 0;
                auto run = [&] {
                    return cublasLtMatmul(lt, op, &alpha, W, la, x, lb, &beta, y, lc, y, lc,
                                          &heur[i].algo, work, ws, st);
                };
                if (run() != CUBLAS_STATUS_SUCCESS) continue;
                const double us = time_median_us([&] { run(); }, 30);
                if (i == 0) first = us;
                const cublasLtMatmulAlgo_t &a = heur[i].algo;
                printf("%-7s M=%-5d K=%-5d n=%-3d parts=%d algo %2d: %8.2f us %5.1f%% of 4.21 TB/s  %.2fx "
                       "first  "
                       "id=%u tile=%u stages=%u splitk=%u red=%u swizzle=%u cluster=%u ws=%zu\n",
                       s.name, s.M, s.K, n, parts, i, us, 100.0 * bytes / us * 1e-3 / 4210.0, first / us,
                       cfg_attr(a, CUBLASLT_ALGO_CONFIG_ID),
                       cfg_attr(a, CUBLASLT_ALGO_CONFIG_TILE_ID),
                       cfg_attr(a, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                       cfg_attr(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                       cfg_attr(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                       cfg_attr(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                       cfg_attr(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID), heur[i].workspaceSize);
            }
            cublasLtMatmulPreferenceDestroy(pref);
            cuda_gemm_lt_descs_free(&d);
            CUDA_CHECK(cudaFree(W));
            CUDA_CHECK(cudaFree(x));
            CUDA_CHECK(cudaFree(y));
        }
    CUDA_CHECK(cudaFree(work));
    timing_free();
    return 0;
}
