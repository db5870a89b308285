/* gemm_table.c — the tables of cuBLASLt configurations chosen ahead (gemm_table.h): parsing,
 * lookup, and the tables measured here. Plain C, no CUDA: the unit test and the fuzz target
 * build it alone; gemm.cu turns an entry into a cuBLASLt algorithm. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/gemm_table.h"

/* The next whitespace-separated decimal integer of *s in [lo, hi] into *v, *s moved past it */
static int next_int(const char **s, long long lo, long long hi, long long *v) {
    const char *p = *s + strspn(*s, " \t\r");
    if (!isdigit((unsigned char)*p) && !(*p == '-' && isdigit((unsigned char)p[1]))) return -1;
    char *end;
    errno = 0;
    const long long x = strtoll(p, &end, 10);
    if (errno == ERANGE || x < lo || x > hi || (*end && !strchr(" \t\r", *end))) return -1;
    *v = x;
    *s = end;
    return 0;
}

/* One table line (comment already cut) into *e: 0, or -1 with the reason in why. */
static int parse_line(const char *s, gemm_table_entry *e, const char **why) {
    s += strspn(s, " \t\r");
    const size_t tl = strcspn(s, " \t\r");
    if (tl == 3 && !strncmp(s, "f16", 3))
        e->type = SI_TYPE_F16;
    else if (tl == 4 && !strncmp(s, "bf16", 4))
        e->type = SI_TYPE_BF16;
    else {
        *why = "TYPE must be f16 or bf16";
        return -1;
    }
    s += tl;
    /* M K N id tile stages splitk red swizzle custom cluster, each within its field's range */
    static const long long lo[11] = {1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0};
    static const long long hi[11] = {INT32_MAX,  INT32_MAX,  INT32_MAX, INT32_MAX,
                                     UINT32_MAX, UINT32_MAX, INT32_MAX, UINT32_MAX,
                                     UINT32_MAX, UINT32_MAX, UINT16_MAX};
    long long v[11];
    for (int i = 0; i < 11; i++)
        if (next_int(&s, lo[i], hi[i], &v[i]) != 0) {
            *why = "expected TYPE and 11 integers M K N id tile stages splitk red swizzle custom "
                   "cluster (M, K, N, splitk >= 1; cluster < 65536)";
            return -1;
        }
    if (s[strspn(s, " \t\r")] != '\0') {
        *why = "unexpected text after the 12 fields";
        return -1;
    }
    e->M = (int)v[0];
    e->K = (int)v[1];
    e->n = (int)v[2];
    e->id = (int)v[3];
    e->tile = (uint32_t)v[4];
    e->stages = (uint32_t)v[5];
    e->splitk = (int32_t)v[6];
    e->red = (uint32_t)v[7];
    e->swizzle = (uint32_t)v[8];
    e->custom = (uint32_t)v[9];
    e->cluster = (uint16_t)v[10];
    return 0;
}

int gemm_table_parse(gemm_table *t, const char *text, char *err, size_t err_len) {
    t->e = NULL;
    t->n = 0;
    int cap = 0, line_no = 0;
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        line_no++;
        char line[256];
        if (len >= sizeof line) {
            snprintf(err, err_len, "line %d: longer than %zu characters", line_no, sizeof line - 1);
            gemm_table_free(t);
            return -1;
        }
        memcpy(line, p, len);
        line[len] = '\0';
        p += len + (end != NULL);
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        if (strspn(line, " \t\r") == strlen(line)) continue; /* blank or comment only */
        gemm_table_entry e;
        const char *why = NULL;
        if (parse_line(line, &e, &why) != 0) {
            snprintf(err, err_len, "line %d: %s", line_no, why);
            gemm_table_free(t);
            return -1;
        }
        if (t->n == cap) {
            cap = cap ? 2 * cap : 16;
            gemm_table_entry *ne = (gemm_table_entry *)realloc(t->e, cap * sizeof *ne);
            if (!ne) {
                snprintf(err, err_len, "out of memory");
                gemm_table_free(t);
                return -1;
            }
            t->e = ne;
        }
        t->e[t->n++] = e;
    }
    return 0;
}

void gemm_table_free(gemm_table *t) {
    free(t->e);
    t->e = NULL;
    t->n = 0;
}

const gemm_table_entry *gemm_table_find(const gemm_table *t, si_type type, int M, int K, int n) {
    for (int i = 0; i < t->n; i++) {
        const gemm_table_entry *e = &t->e[i];
        if (e->type == type && e->M == M && e->K == K && e->n == n) return e;
    }
    return NULL;
}

/* Measured tables. NVIDIA H200 with cuBLASLt 13.1: the Llama-2-7B decode step's F16 matmuls at
 * 64 rows (gemm_algos --search --narrow; the heuristic's first choice, then this, back to back
 * in a graph; bench/RESULTS.md 2026-12-01 14:53 UTC, call 2). */
static const struct {
    const char *device;
    int cublaslt_major;
    const char *table;
} k_builtin[] = {
    {"NVIDIA H200", 13,
     "f16 12288 4096 64 66 27 35 1 0 0 2 2   # QKV       28.61 -> 27.40 us\n"
     "f16 4096 4096 64 66 15 35 1 0 0 0 4    # out proj  11.98 -> 11.83 us\n"
     "f16 22016 4096 64 66 492 35 1 0 0 7 4  # gate/up   48.74 -> 46.84 us\n"
     "f16 4096 11008 64 66 13 35 1 0 0 1 5   # down      28.96 -> 25.36 us\n"
     "f16 32000 4096 64 66 21 35 1 0 0 2 2   # logits    68.67 -> 66.74 us\n"},
};

const char *gemm_table_builtin(const char *device_name, int cublaslt_major) {
    for (size_t i = 0; i < sizeof k_builtin / sizeof k_builtin[0]; i++)
        if (!strcmp(device_name, k_builtin[i].device) &&
            cublaslt_major == k_builtin[i].cublaslt_major)
            return k_builtin[i].table;
    return NULL;
}
