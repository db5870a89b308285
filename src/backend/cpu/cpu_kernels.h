/* cpu_kernels.h — SIMD dot-product kernels for the CPU matmul, chosen at run time by CPUID.
 *
 * For each weight type one cpu_kernels entry says which type the activations are quantised to
 * (vec_dot_type), how to quantise an f32 activation row to it (quantize_row) and how to dot a
 * weight row with it (vec_dot). The scalar entries are the reference kernels of quant/quant.h;
 * the AVX2 and AVX-512 entries compute the same integer sums and differ from the reference only
 * in the order of the float accumulation (tests/unit/test_cpu_kernels.c checks that, type by
 * type). Every quantize_row is bit-identical to the reference from_float, so the quantised
 * activations never depend on the ISA.
 *
 * The level is picked once, on the first call, from CPUID and XGETBV (the OS must save the
 * AVX / AVX-512 register state). SWIFTINFER_ISA=scalar|avx2|avx512 caps it to a lower level
 * (benchmarking, debugging); it never raises it above what the CPU has. */
#ifndef SI_CPU_KERNELS_H
#define SI_CPU_KERNELS_H

#include <stdint.h>

#include "swiftinfer.h"

typedef enum {
    CPU_ISA_SCALAR = 0,
    CPU_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    CPU_ISA_AVX512 = 2, /* AVX-512 F/BW/VL/DQ + VNNI (+ BF16 kernel when the CPU has it) */
    CPU_ISA_COUNT
} cpu_isa;

typedef struct cpu_kernels {
    si_type vec_dot_type; /* activations are quantised to this type */
    /* x: n floats -> y: a row of vec_dot_type; n a multiple of that type's block size */
    void (*quantize_row)(const float *x, void *y, int64_t n);
    /* sum over n elements of w[i] * x[i]; w a row of the weight type, x of vec_dot_type;
     * n a multiple of the weight type's block size; no alignment needed */
    float (*vec_dot)(const void *w, const void *x, int64_t n);
    /* Multi-row dot: out[r * out_stride] = vec_dot(w, x + r * x_stride bytes, n) for r in
     * [0, n_rows), n_rows >= 1 (any count: the kernel works in groups of up to
     * CPU_KERNELS_MAX_ROWS). Each weight block is decoded once into registers and reused for
     * every activation row, each row accumulates in its own registers and is reduced once at the
     * end, so the results equal vec_dot's up to the float accumulation order. NULL when the type
     * has no such kernel at this level: callers then loop vec_dot (cpu_vec_dot_rows does). */
    void (*vec_dot_rows)(const void *w, const void *x, size_t x_stride, int n_rows, int64_t n,
                         float *out, size_t out_stride);
} cpu_kernels;

/* The largest activation-row group a vec_dot_rows kernel keeps in registers at once. */
#define CPU_KERNELS_MAX_ROWS 8

/* k->vec_dot_rows when there is one, else the same results by looping k->vec_dot. */
void cpu_vec_dot_rows(const cpu_kernels *k, const void *w, const void *x, size_t x_stride,
                      int n_rows, int64_t n, float *out, size_t out_stride);

/* The best kernels for weights of type t on this CPU (after SWIFTINFER_ISA), falling back per
 * type to a lower level and finally to the reference; NULL only when quant_get(t) is NULL.
 * The entry is static: the caller never frees it. Thread-safe. */
const cpu_kernels *cpu_kernels_get(si_type t);

/* The kernels of exactly level isa (types without a kernel at that level fall back to a lower
 * level, as above), ignoring SWIFTINFER_ISA; NULL when the CPU lacks isa or t is unsupported.
 * For tests and benchmarks. */
const cpu_kernels *cpu_kernels_get_isa(si_type t, cpu_isa isa);

/* The highest level this CPU and OS support (SWIFTINFER_ISA ignored). */
cpu_isa cpu_isa_detected(void);

/* The level cpu_kernels_get uses: cpu_isa_detected() capped by SWIFTINFER_ISA. */
cpu_isa cpu_isa_active(void);

/* "scalar", "avx2" or "avx512-vnni" for isa; "?" when out of range. */
const char *cpu_isa_level_name(cpu_isa isa);

/* cpu_isa_level_name(cpu_isa_active()). */
const char *cpu_isa_name(void);

#endif
