/* gemm_algos.cu — which cuBLASLt algorithm is fastest for the F16 matmuls of a batched decode
 * step (y[n][M] = x[n][K] W^T, the layout cuda_gemm uses: W col-major K x M transposed, x K x n,
 * y M x n), against the heuristic's first choice, which cuda_gemm takes. For each Llama-2-7B
 * weight shape and n rows: up to 32 heuristic candidates, each timed alone (median of 30, L2
 * flushed before each), printed with its tile, stages, split-K, swizzle and cluster shape.
 * Timing only (random f16 data, nothing checked). With --parts P (2 or 4), the shapes whose
 * output is added to the residual (o, down) as the engine could split them: K in P slices, one
 * strided-batched matmul writing P partial outputs (cuda_gemm_pre_parts' layout).
 *
 *   gemm_algos [--parts P] [n ...]   (default n = 64) */
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

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

int main(int argc, char **argv) {
    std::vector<int> ns;
    int parts = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--parts") && i + 1 < argc) parts = atoi(argv[++i]);
        else ns.push_back(atoi(argv[i]));
    }
    if (ns.empty()) ns = {64};
    const struct {
        int M, K;
        const char *name;
    } shapes[] = {
        {12288, 4096, "qkv"}, {4096, 4096, "o"}, {22016, 4096, "gate_up"}, {4096, 11008, "down"}};
    timing_init();
    cudaStream_t st = g_st;
    cublasLtHandle_t lt;
    LK(cublasLtCreate(&lt));
    const size_t ws = 32u << 20;
    void *work;
    CUDA_CHECK(cudaMalloc(&work, ws));
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
            cublasLtMatmulDesc_t op;
            cublasLtMatrixLayout_t la, lb, lc;
            LK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
            const cublasOperation_t tr = CUBLAS_OP_T, nt = CUBLAS_OP_N;
            LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof tr));
            LK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof nt));
            LK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, Kp, s.M, s.K));
            LK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, Kp, n, s.K));
            LK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, s.M, n, s.M));
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
            cublasLtMatrixLayoutDestroy(la);
            cublasLtMatrixLayoutDestroy(lb);
            cublasLtMatrixLayoutDestroy(lc);
            cublasLtMatmulDescDestroy(op);
            CUDA_CHECK(cudaFree(W));
            CUDA_CHECK(cudaFree(x));
            CUDA_CHECK(cudaFree(y));
        }
    CUDA_CHECK(cudaFree(work));
    timing_free();
    return 0;
}
