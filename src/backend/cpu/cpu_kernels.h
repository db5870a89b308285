/* cpu_kernels.h — SIMD dot-product kernels for the CPU matmul, chosen at run time by CPUID.
 *
 * For each weight type one cpu_kernels entry says which type the activations are quantised to
 * (vec_dot_type), how to quantise an f32 activation row to it (quantize_row), how to dot a
 * weight row with it (vec_dot) and, for the types that have one, a matrix kernel (gemm) that
 * gives vec_dot's exact results for many weight rows x many activation rows. The scalar entries are the reference kernels of quant/quant.h;
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
    /* Matrix product for prefill and batched decode, NULL when the type has none at this level
     * (callers then loop vec_dot; cpu_gemm does): for o in [0, n_w) and r in [0, n_x)
     *     out[r * out_stride + o] = vec_dot(w + o * w_stride bytes, x_r, n)
     * bit-identical, element by element, to vec_dot (batch invariance: a row's result never
     * depends on how many rows share the call or which). x_r is activation row r in
     * vec_dot_type; gemm reads it at xp + r * xp_stride bytes in prep_row's layout, or as it is
     * when prep_row is NULL. Weight blocks are decoded once per group of activation rows and the
     * activation side once per row (prep_row), not once per weight row x activation row. */
    void (*gemm)(const void *w, size_t w_stride, int n_w, const void *xp, size_t xp_stride,
                 int n_x, int64_t n, float *out, size_t out_stride);
    /* x: one activation row of n elements in vec_dot_type -> xp: prep_size(n) bytes (a multiple
     * of 64) in the layout gemm streams; both NULL when gemm reads vec_dot_type rows directly. */
    void (*prep_row)(const void *x, void *xp, int64_t n);
    size_t (*prep_size)(int64_t n);
} cpu_kernels;

/* The same products as k->gemm (which needs xp prepared by k->prep_row when there is one):
 * k->gemm when there is one, else a loop over k->vec_dot reading x (rows of vec_dot_type,
 * x_stride bytes apart). */
void cpu_gemm(const cpu_kernels *k, const void *w, size_t w_stride, int n_w, const void *x,
              size_t x_stride, const void *xp, size_t xp_stride, int n_x, int64_t n, float *out,
              size_t out_stride);

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
