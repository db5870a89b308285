/* gemm_table.h — cuBLASLt configurations chosen ahead, by measurement, for given matmul shapes
 * (bench/kernels/gemm_algos --search, scripts/gpu_gemm_table.sh), which cuda_gemm takes in place
 * of the heuristic's first choice (as vLLM ships kernel configurations tuned per GPU). A table
 * is lines of "TYPE M K N id tile stages splitk red swizzle custom cluster": TYPE f16 or bf16,
 * y[N][M] = x[N][K] W^T, then cuBLASLt's CUBLASLT_ALGO_CONFIG_* values; '#' starts a comment.
 * Plain C (gemm_table.c), no CUDA. */
#ifndef SI_BACKEND_CUDA_GEMM_TABLE_H
#define SI_BACKEND_CUDA_GEMM_TABLE_H
#include <stddef.h>
#include <stdint.h>

#include "swiftinfer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gemm_table_entry {
    si_type type; /* SI_TYPE_F16 or SI_TYPE_BF16 */
    int M, K, n;
    int id;
    uint32_t tile, stages, red, swizzle, custom;
    int32_t splitk;
    uint16_t cluster;
} gemm_table_entry;

typedef struct gemm_table {
    gemm_table_entry *e;
    int n;
} gemm_table;

/* Parses text (NUL-terminated) into *t; on a malformed line returns -1, leaves *t empty and
 * writes "line N: what is wrong" into err. */
int gemm_table_parse(gemm_table *t, const char *text, char *err, size_t err_len);
void gemm_table_free(gemm_table *t);
/* the entry for this matmul, NULL when the table has none */
const gemm_table_entry *gemm_table_find(const gemm_table *t, si_type type, int M, int K, int n);
/* The table measured on the GPU called device_name (cudaDeviceProp.name) with cuBLASLt of major
 * version cublaslt_major, NULL when there is none. */
const char *gemm_table_builtin(const char *device_name, int cublaslt_major);

#ifdef __cplusplus
}
#endif
#endif
