/* gemm.cu — prefill / large-batch matmul on tensor cores through cuBLASLt: y = x W^T with f32
 * accumulation and output. F16/BF16 weights are read in place and x is converted to their type;
 * quantised weights are dequantised to f16 into scratch first (the simple end of the
 * "dequantise in tiles or to scratch" choice; its cost is measured by the kernel test).
 * Row-major W[M][K] is column-major K x M, so cuBLAS computes Y^T (M x N) = op_T(W) * X^T. */
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.cuh"
#include "backend/cuda/gemm_rows64.h"
#include "backend/cuda/gemm_table.h"

struct cuda_gemm_ctx {
    cublasLtHandle_t lt;
    void *workspace;
    gemm_table table;    /* configurations chosen ahead (gemm_table_load) */
    cuda_rows64 *rows64; /* NULL: not this GPU */
    bool rows64_on;      /* cuda_gemm_use_rows64; SI_CUDA_ROWS64=1 */
};

/* The matmul configurations to take (gemm_table.h): the file SI_CUDA_GEMM_TABLE names ("none":
 * no table, the heuristic's first choice everywhere), else the table measured on this GPU, if
 * any. Returns -1, saying why, when the file cannot be read or parsed. */
static int gemm_table_load(gemm_table *t) {
    t->e = NULL;
    t->n = 0;
    char err[160];
    const char *path = getenv("SI_CUDA_GEMM_TABLE");
    if (!path || !*path) {
        int dev = 0;
        cudaDeviceProp prop;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
            return 0;
        const int ver = (int)(cublasLtGetVersion() / 10000);
        const char *text = gemm_table_builtin(prop.name, ver);
        if (text && gemm_table_parse(t, text, err, sizeof err) != 0) {
            fprintf(stderr, "cuda: the built-in matmul table of %s: %s\n", prop.name, err);
            return -1;
        }
        return 0;
    }
    if (!strcmp(path, "none")) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "SI_CUDA_GEMM_TABLE=%s: cannot open it\n", path);
        return -1;
    }
    const size_t cap = 1 << 16;
    char *text = (char *)malloc(cap);
    const size_t n = text ? fread(text, 1, cap - 1, f) : 0;
    const bool whole = text && feof(f) && !ferror(f);
    fclose(f);
    int rc = 0;
    if (!whole) {
        fprintf(stderr, "SI_CUDA_GEMM_TABLE=%s: unreadable or larger than %zu bytes\n", path,
                cap - 1);
        rc = -1;
    } else {
        text[n] = '\0';
        if (gemm_table_parse(t, text, err, sizeof err) != 0) {
            fprintf(stderr, "SI_CUDA_GEMM_TABLE=%s: %s\n", path, err);
            rc = -1;
        }
    }
    free(text);
    return rc;
}

extern "C" int cuda_gemm_table_algo(cublasLtHandle_t lt, const gemm_table_entry *e,
                                    cublasLtMatmulAlgo_t *a) {
    const cudaDataType_t ab = e->type == SI_TYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, ab, ab, CUDA_R_32F, CUDA_R_32F,
                               e->id, a) != CUBLAS_STATUS_SUCCESS)
        return -1;
    const struct {
        cublasLtMatmulAlgoConfigAttributes_t at;
        const void *v;
        size_t n;
    } set[] = {{CUBLASLT_ALGO_CONFIG_TILE_ID, &e->tile, sizeof e->tile},
               {CUBLASLT_ALGO_CONFIG_STAGES_ID, &e->stages, sizeof e->stages},
               {CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &e->splitk, sizeof e->splitk},
               {CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &e->red, sizeof e->red},
               {CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &e->swizzle, sizeof e->swizzle},
               {CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &e->custom, sizeof e->custom},
               {CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &e->cluster, sizeof e->cluster}};
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        if (cublasLtMatmulAlgoConfigSetAttribute(a, set[i].at, set[i].v, set[i].n) !=
            CUBLAS_STATUS_SUCCESS)
            return -1;
    return 0;
}

extern "C" int cuda_gemm_create(cuda_gemm_ctx **out) {
    cuda_gemm_ctx *g = (cuda_gemm_ctx *)calloc(1, sizeof *g);
    if (!g) return -1;
    CUBLAS_CHECK(cublasLtCreate(&g->lt));
    CUDA_CHECK(cudaMalloc(&g->workspace, GEMM_WORKSPACE));
    g->rows64 = cuda_rows64_create();
    const char *e = getenv("SI_CUDA_ROWS64");
    g->rows64_on = e && e[0] == '1';
    *out = g;
    return gemm_table_load(&g->table);
}

extern "C" void cuda_gemm_free(cuda_gemm_ctx *g) {
    if (!g) return;
    cublasLtDestroy(g->lt);
    gemm_table_free(&g->table);
    CUDA_CHECK(cudaFree(g->workspace));
    cuda_rows64_free(g->rows64);
    free(g);
}

static bool gemm_native(si_type t) { return t == SI_TYPE_F16 || t == SI_TYPE_BF16; }

/* Also covers cuda_matmul_quant_rows (the caller routes 9..128 quantised rows there with the
 * same scratch): its q8 copy of x is far smaller than a dequantised W, but say so. */
extern "C" size_t cuda_gemm_scratch_bytes(si_type t, int M, int K, int n_rows) {
    size_t b = (((size_t)n_rows * K * 2) + 255) & ~(size_t)255; /* x as f16/bf16 */
    if (!gemm_native(t)) b += (size_t)M * K * 2;               /* W as f16 */
    const size_t q = cuda_matmul_quant_rows_scratch_bytes(t, K, n_rows);
    return q > b ? q : b;
}

template <bool BF>
__global__ void to_half_kernel(const float *x, void *out, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        if (BF) ((__nv_bfloat16 *)out)[i] = __float2bfloat16_rn(x[i]);
        else ((__half *)out)[i] = __float2half_rn(x[i]);
    }
}

extern "C" int cuda_gemm_use_rows64(cuda_gemm_ctx *g, int on) {
    g->rows64_on = on != 0;
    return g->rows64 != NULL;
}

/* y = xs Wh^T through cuBLASLt, xs [n_rows][K] and Wh of type bf16 (bf) or f16 */
static int gemm_lt(cuda_gemm_ctx *g, bool bf, const void *Wh, int M, int K, const void *xs,
                   int n_rows, float *y, cudaStream_t stream);
static int gemm_half(cuda_gemm_ctx *g, bool bf, const void *Wh, int M, int K, const void *xs,
                     int n_rows, float *y, cudaStream_t stream);

extern "C" int cuda_gemm(cuda_gemm_ctx *g, si_type t, const void *W, int M, int K, const float *x,
                         int n_rows, float *y, void *scratch, cudaStream_t stream) {
    if (M < 1 || K < 1 || n_rows < 1) return -1;
    const bool bf = t == SI_TYPE_BF16;
    uint8_t *xs = (uint8_t *)scratch;
    const void *Wh = W;
    if (!gemm_native(t)) {
        void *wd = xs + ((((size_t)n_rows * K * 2) + 255) & ~(size_t)255);
        if (cuda_dequantize_f16(t, W, (int64_t)M * K, wd, stream) != 0) return -1;
        Wh = wd;
    }
    const int64_t nx = (int64_t)n_rows * K;
    const int grid = (int)((nx + 255) / 256 < 4096 ? (nx + 255) / 256 : 4096);
    if (bf) to_half_kernel<true><<<grid, 256, 0, stream>>>(x, xs, nx);
    else to_half_kernel<false><<<grid, 256, 0, stream>>>(x, xs, nx);
    CUDA_CHECK_LAUNCH();
    return gemm_half(g, bf, Wh, M, K, xs, n_rows, y, stream);
}

extern "C" int cuda_gemm_pre(cuda_gemm_ctx *g, si_type t, const void *W, int M, int K,
                             int n_rows, float *y, const void *scratch, cudaStream_t stream) {
    if (M < 1 || K < 1 || n_rows < 1 || !gemm_native(t)) return -1;
    return gemm_half(g, t == SI_TYPE_BF16, W, M, K, scratch, n_rows, y, stream);
}

/* cuBLASLt, or for up to 64 rows the TMA + wgmma kernel where it is on and takes the shape
 * (gemm_rows64.h) */
static int gemm_half(cuda_gemm_ctx *g, bool bf, const void *Wh, int M, int K, const void *xs,
                     int n_rows, float *y, cudaStream_t stream) {
    const si_type t = bf ? SI_TYPE_BF16 : SI_TYPE_F16;
    if (g->rows64_on && cuda_rows64_ok(g->rows64, t, M, K, n_rows))
        return cuda_rows64_matmul(g->rows64, t, Wh, M, K, xs, n_rows, y, stream);
    return gemm_lt(g, bf, Wh, M, K, xs, n_rows, y, stream);
}

extern "C" void cuda_gemm_lt_descs(bool bf, int M, int K, int ld, int n, gemm_lt_descs *d) {
    const cudaDataType_t ab = bf ? CUDA_R_16BF : CUDA_R_16F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&d->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t tr = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof tr));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof nt));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d->la, ab, K, M, ld));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d->lb, ab, K, n, ld));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d->lc, CUDA_R_32F, M, n, M));
}

extern "C" void cuda_gemm_lt_descs_free(gemm_lt_descs *d) {
    cublasLtMatrixLayoutDestroy(d->la);
    cublasLtMatrixLayoutDestroy(d->lb);
    cublasLtMatrixLayoutDestroy(d->lc);
    cublasLtMatmulDescDestroy(d->op);
}

static int gemm_lt(cuda_gemm_ctx *g, bool bf, const void *Wh, int M, int K, const void *xs,
                   int n_rows, float *y, cudaStream_t stream) {
    gemm_lt_descs d;
    cuda_gemm_lt_descs(bf, M, K, K, n_rows, &d);
    const cublasLtMatmulDesc_t op = d.op;
    const cublasLtMatrixLayout_t la = d.la, lb = d.lb, lc = d.lc;
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = GEMM_WORKSPACE;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    /* the table's configuration where it has one for this shape and cuBLASLt takes it */
    const gemm_table_entry *te =
        gemm_table_find(&g->table, bf ? SI_TYPE_BF16 : SI_TYPE_F16, M, K, n_rows);
    if (te && cuda_gemm_table_algo(g->lt, te, &heur.algo) == 0 &&
        cublasLtMatmulAlgoCheck(g->lt, op, la, lb, lc, lc, &heur.algo, &heur) ==
            CUBLAS_STATUS_SUCCESS &&
        heur.workspaceSize <= ws)
        found = 1;
    else
        CUBLAS_CHECK(
            cublasLtMatmulAlgoGetHeuristic(g->lt, op, la, lb, lc, lc, pref, 1, &heur, &found));
    int rc = -1;
    if (found > 0) {
        const float alpha = 1.0f, beta = 0.0f;
        CUBLAS_CHECK(cublasLtMatmul(g->lt, op, &alpha, Wh, la, xs, lb, &beta, y, lc, y, lc,
                                    &heur.algo, g->workspace, ws, stream));
        rc = 0;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cuda_gemm_lt_descs_free(&d);
    return rc;
}
