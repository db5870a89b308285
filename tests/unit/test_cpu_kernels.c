/* test_cpu_kernels.c — the SIMD kernel tables (backend/cpu/cpu_kernels.h) against the scalar
 * reference (quant/quant.h), for every type and every ISA level this CPU has.
 *
 * - vec_dot: weight rows from from_float of random data and from random bytes with sane fp16
 *   scales, lengths of 1, 2, 7 and 33 blocks (float types: also odd lengths for the tails).
 *   |simd - ref| <= tol * sum_i |w_i * x_i| (dequantised values), with
 *     tol = 1e-5 for the block types: both sides compute the same exact integer sums and only the
 *           float accumulation order differs (a few float roundings per block);
 *     tol = 1e-4 for F32/F16/BF16: the reference accumulates in double, the kernels in float lanes
 *           (and vdpbf16ps rounds per pair), so the error grows with n (<= 4096 here).
 * - quantize_row: bit-identical to the reference from_float, on random rows, exact ties
 *   (x * id = k + 0.5), 0.49999997, zero blocks, negative maxima and +-equal maxima.
 * - dispatch: SWIFTINFER_ISA=scalar gives the reference functions; levels above the CPU's are
 *   NULL; unsupported types are NULL.
 * - gemm (multi-row): every element bit-identical to the same level's vec_dot (batch
 *   invariance) and within the same tolerances of the reference; 1, 2, 5 weight rows x 1..11,
 *   17 and 40 activation rows, padded rows, strided and poisoned outputs (see check_gemm).
 * Outputs are poisoned (0xA5 bytes, NaN results) before every call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "backend/cpu/cpu_kernels.h"
#include "core/fp16.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"

#define TEST_RAND_SEED 0x2545F4914F6CDD1Dull
#include "test_rand.h"

static const si_type all_types[] = {
    SI_TYPE_F32,  SI_TYPE_F16,  SI_TYPE_BF16, SI_TYPE_Q4_0, SI_TYPE_Q4_1, SI_TYPE_Q5_0,
    SI_TYPE_Q5_1, SI_TYPE_Q8_0, SI_TYPE_Q8_1, SI_TYPE_Q2_K, SI_TYPE_Q3_K, SI_TYPE_Q4_K,
    SI_TYPE_Q5_K, SI_TYPE_Q6_K, SI_TYPE_Q8_K, SI_TYPE_IQ4_NL, SI_TYPE_IQ4_XS,
};
#define N_TYPES (sizeof(all_types) / sizeof(all_types[0]))

static int is_float_type(si_type t) {
    return t == SI_TYPE_F32 || t == SI_TYPE_F16 || t == SI_TYPE_BF16;
}

static uint16_t sane_scale(void) { /* +-[1e-3, 2e-2] */
    float s = 1e-3f + 1.9e-2f * rng_uniform();
    return fp32_to_fp16(rng_u32() & 1 ? s : -s);
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* Random bytes, then every fp16 scale field overwritten with a sane value (so no inf/NaN). */
static void random_blocks(si_type t, uint8_t *w, int64_t nblocks) {
    const quant_traits *q = quant_get(t);
    for (int64_t i = 0; i < nblocks * q->type_size; i++) w[i] = (uint8_t)rng_u32();
    for (int64_t b = 0; b < nblocks; b++) {
        uint8_t *p = w + b * q->type_size;
        switch (t) {
        case SI_TYPE_Q4_0: case SI_TYPE_Q5_0: case SI_TYPE_Q8_0:
        case SI_TYPE_IQ4_NL: case SI_TYPE_IQ4_XS: put16(p, sane_scale()); break;
        case SI_TYPE_Q4_1: case SI_TYPE_Q5_1: case SI_TYPE_Q8_1:
        case SI_TYPE_Q4_K: case SI_TYPE_Q5_K:
            put16(p, sane_scale());
            put16(p + 2, sane_scale());
            break;
        case SI_TYPE_Q2_K:
            put16(p + offsetof(block_q2_K, d), sane_scale());
            put16(p + offsetof(block_q2_K, dmin), sane_scale());
            break;
        case SI_TYPE_Q3_K: put16(p + offsetof(block_q3_K, d), sane_scale()); break;
        case SI_TYPE_Q6_K: put16(p + offsetof(block_q6_K, d), sane_scale()); break;
        case SI_TYPE_Q8_K: {
            float d = fp16_to_fp32(sane_scale());
            memcpy(p, &d, 4);
            /* Q8_K weights are activations in disguise: keep |q| <= 127 as quantisers do */
            for (int j = 0; j < QK_K; j++) if (p[4 + j] == 0x80) p[4 + j] = 0x81;
            break;
        }
        default: break;
        }
    }
}

/* sum |w_i x_i| from the dequantised rows: the scale of the tolerance */
static double abs_dot(si_type wt, const void *w, si_type xt, const void *xq, int64_t n, float *tw, float *tx) {
    quant_get(wt)->to_float(w, tw, n);
    quant_get(xt)->to_float(xq, tx, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)tw[i] * tx[i]);
    return s;
}

#define MAX_N (33 * QK_K + 64)

static void check_dot(si_type t, cpu_isa isa, int64_t n, int random_bytes) {
    const quant_traits *q = quant_get(t);
    const cpu_kernels *k = cpu_kernels_get_isa(t, isa);
    const cpu_kernels *ref = cpu_kernels_get_isa(t, CPU_ISA_SCALAR);
    assert_non_null(k);
    assert_int_equal(k->vec_dot_type, q->vec_dot_type);
    static float x[MAX_N], tw[MAX_N], tx[MAX_N];
    static uint8_t w[MAX_N * 4 + 64], xq[MAX_N * 4 + 64], xq_ref[MAX_N * 4 + 64];
    const size_t xbytes = quant_row_size(k->vec_dot_type, n);
    if (random_bytes) {
        random_blocks(t, w, n / q->block_size);
    } else {
        fill_random(x, n, 0.05f);
        q->from_float(x, w, n);
    }
    fill_random(x, n, 1.0f);
    memset(xq_ref, 0xA5, xbytes);
    memset(xq, 0xA5, xbytes);
    ref->quantize_row(x, xq_ref, n);
    k->quantize_row(x, xq, n);
    assert_memory_equal(xq, xq_ref, xbytes);
    float r = NAN, rr = NAN;
    rr = ref->vec_dot(w, xq_ref, n);
    /* exact-size heap copies: AddressSanitizer sees any read past the row */
    const size_t wbytes = quant_row_size(t, n);
    uint8_t *wh = malloc(wbytes), *xh = malloc(xbytes);
    assert_non_null(wh);
    assert_non_null(xh);
    memcpy(wh, w, wbytes);
    memcpy(xh, xq, xbytes);
    r = k->vec_dot(wh, xh, n);
    free(wh);
    free(xh);
    const double tol = is_float_type(t) ? 1e-4 : 1e-5;
    const double scale = abs_dot(t, w, k->vec_dot_type, xq, n, tw, tx);
    const double err = fabs((double)r - (double)rr);
    if (!(err <= tol * scale + 1e-30)) {
        fail_msg("%s %s n=%lld %s: simd %.9g ref %.9g err %.3g > %.3g * %.6g", q->name,
                 cpu_isa_level_name(isa), (long long)n, random_bytes ? "random bytes" : "from_float",
                 r, rr, err, tol, scale);
    }
}

static void test_env_override_scalar(void **state) {
    (void)state;
    /* NOTE: first test on purpose: the tables are built on the first call */
    setenv("SWIFTINFER_ISA", "scalar", 1);
    assert_int_equal(cpu_isa_active(), CPU_ISA_SCALAR);
    assert_string_equal(cpu_isa_name(), "scalar");
    for (size_t i = 0; i < N_TYPES; i++) {
        const quant_traits *q = quant_get(all_types[i]);
        const cpu_kernels *k = cpu_kernels_get(all_types[i]);
        assert_non_null(k);
        assert_ptr_equal(k->vec_dot, q->vec_dot);
        assert_ptr_equal(k->quantize_row, quant_get(q->vec_dot_type)->from_float);
        assert_int_equal(k->vec_dot_type, q->vec_dot_type);
    }
    /* explicit levels still reach what the CPU has */
    assert_non_null(cpu_kernels_get_isa(SI_TYPE_Q4_0, cpu_isa_detected()));
    print_message("detected ISA: %s\n", cpu_isa_level_name(cpu_isa_detected()));
}

static void test_dispatch_edges(void **state) {
    (void)state;
    assert_null(cpu_kernels_get((si_type)4)); /* id 4 (old Q4_2) is not a type */
    assert_null(cpu_kernels_get((si_type)-1));
    assert_null(cpu_kernels_get((si_type)SI_TYPE_COUNT));
    for (int l = (int)cpu_isa_detected() + 1; l < (int)CPU_ISA_COUNT; l++)
        assert_null(cpu_kernels_get_isa(SI_TYPE_Q4_0, (cpu_isa)l));
    assert_null(cpu_kernels_get_isa(SI_TYPE_Q4_0, (cpu_isa)CPU_ISA_COUNT));
    assert_string_equal(cpu_isa_level_name(CPU_ISA_AVX512), "avx512-vnni");
}

static void test_vec_dot_all(void **state) {
    (void)state;
    const int64_t nblocks[] = {1, 2, 7, 33};
    const int64_t nfloat[] = {1, 2, 7, 33, 255, 1061, 4096};
    int checked = 0;
    for (int isa = 0; isa <= (int)cpu_isa_detected(); isa++) {
        for (size_t ti = 0; ti < N_TYPES; ti++) {
            const si_type t = all_types[ti];
            const quant_traits *q = quant_get(t);
            if (is_float_type(t)) {
                for (size_t j = 0; j < sizeof(nfloat) / sizeof(nfloat[0]); j++, checked++)
                    check_dot(t, (cpu_isa)isa, nfloat[j], 0);
                continue;
            }
            for (size_t j = 0; j < sizeof(nblocks) / sizeof(nblocks[0]); j++) {
                for (int rep = 0; rep < 3; rep++, checked += 2) {
                    check_dot(t, (cpu_isa)isa, nblocks[j] * q->block_size, 0);
                    check_dot(t, (cpu_isa)isa, nblocks[j] * q->block_size, 1);
                }
            }
        }
    }
    print_message("%d dot products checked over %d ISA levels\n", checked, (int)cpu_isa_detected() + 1);
}

/* gemm (multi-row) against the same level's single-row vec_dot (itself checked against the
 * reference above) and against the scalar reference: n_w weight rows x n_x activation rows
 * (n_x 1..11, 17, 40: tile groups, their remainders, several tiles; n_w 1, 2, 5: pairs of weight
 * rows and a single one), activation rows with padding between them (x_stride > row bytes), prepared rows
 * likewise, an output row stride of n_w + 2 with the slots in between poisoned and checked
 * untouched. Every element must be bit-identical to vec_dot of its own weight and activation
 * row: that is batch invariance (a row's result never depends on what else is in the call). */
static void check_gemm(si_type t, cpu_isa isa, int64_t n, int n_w, int n_x, int random_bytes) {
    const quant_traits *q = quant_get(t);
    const cpu_kernels *k = cpu_kernels_get_isa(t, isa);
    const cpu_kernels *ref = cpu_kernels_get_isa(t, CPU_ISA_SCALAR);
    assert_non_null(k);
    static float x[MAX_N], tw[MAX_N], tx[MAX_N];
    const size_t wbytes = quant_row_size(t, n), ws = wbytes + 24;
    const size_t xbytes = quant_row_size(k->vec_dot_type, n), xs = xbytes + 40;
    const size_t ps = k->prep_row ? k->prep_size(n) + 64 : 0;
    const size_t os = (size_t)n_w + 2;
    uint8_t *w = malloc(ws * (size_t)n_w), *xq = malloc(xs * (size_t)n_x);
    uint8_t *xp = ps ? malloc(ps * (size_t)n_x) : NULL;
    float *out = malloc(sizeof(float) * os * (size_t)n_x);
    assert_non_null(w);
    assert_non_null(xq);
    assert_non_null(out);
    assert_true(!ps || xp != NULL);
    if (ps) assert_int_equal(k->prep_size(n) % 64, 0);
    memset(w, 0xA5, ws * (size_t)n_w);
    for (int o = 0; o < n_w; o++) {
        if (random_bytes) {
            random_blocks(t, w + (size_t)o * ws, n / q->block_size);
        } else {
            fill_random(x, n, 0.05f);
            q->from_float(x, w + (size_t)o * ws, n);
        }
    }
    memset(xq, 0xA5, xs * (size_t)n_x);
    if (xp) memset(xp, 0xA5, ps * (size_t)n_x);
    for (int r = 0; r < n_x; r++) {
        fill_random(x, n, 1.0f);
        k->quantize_row(x, xq + (size_t)r * xs, n);
        if (xp) k->prep_row(xq + (size_t)r * xs, xp + (size_t)r * ps, n);
    }
    for (size_t i = 0; i < os * (size_t)n_x; i++) out[i] = NAN;
    cpu_gemm(k, w, ws, n_w, xq, xs, xp, ps, n_x, n, out, os);
    const double tol = is_float_type(t) ? 1e-4 : 1e-5;
    for (int r = 0; r < n_x; r++) {
        const uint8_t *xr = xq + (size_t)r * xs;
        for (int o = 0; o < n_w; o++) {
            const uint8_t *wr = w + (size_t)o * ws;
            const float got = out[(size_t)r * os + (size_t)o];
            const float single = k->vec_dot(wr, xr, n), rr = ref->vec_dot(wr, xr, n);
            if (memcmp(&got, &single, sizeof single) != 0)
                fail_msg("%s %s n=%lld gemm %dx%d element (w %d, x %d): %.9g is not bit-identical to "
                         "vec_dot's %.9g (results would depend on the batch)", q->name,
                         cpu_isa_level_name(isa), (long long)n, n_w, n_x, o, r, got, single);
            const double scale = abs_dot(t, wr, k->vec_dot_type, xr, n, tw, tx);
            const double err = fabs((double)got - rr);
            if (!(err <= tol * scale + 1e-30))
                fail_msg("%s %s n=%lld gemm %dx%d element (w %d, x %d): %.9g ref %.9g err %.3g > %.3g * %.6g",
                         q->name, cpu_isa_level_name(isa), (long long)n, n_w, n_x, o, r, got, rr, err, tol,
                         scale);
        }
        for (size_t g = (size_t)n_w; g < os; g++) /* the slots between output rows stay poisoned */
            assert_true(isnan(out[(size_t)r * os + g]));
    }
    free(w);
    free(xq);
    free(xp);
    free(out);
}

static void test_gemm_all(void **state) {
    (void)state;
    const int64_t nblocks[] = {1, 2, 3, 7, 18};
    /* 2100: f16 tiles of 2 weight rows; 2900: bf16 ones */
    const int64_t nfloat[] = {1, 7, 33, 255, 576, 1061, 2100, 2900};
    const int n_ws[] = {1, 2, 5};
    int checked = 0, fast = 0;
    for (int isa = 0; isa <= (int)cpu_isa_detected(); isa++) {
        for (size_t ti = 0; ti < N_TYPES; ti++) {
            const si_type t = all_types[ti];
            const quant_traits *q = quant_get(t);
            fast += cpu_kernels_get_isa(t, (cpu_isa)isa)->gemm != NULL;
            for (size_t wi = 0; wi < sizeof(n_ws) / sizeof(n_ws[0]); wi++) {
                /* 1..16: within one tile of activation rows (q4_1 pairs them in zmm from 12,
                 * an odd last row alone); 17, 40: several tiles (q4_0 / q8_0 / q4_1 then decode
                 * each weight row once for all of them) */
                static const int n_xs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 40};
                for (size_t xi = 0; xi < sizeof(n_xs) / sizeof(n_xs[0]); xi++) {
                    const int rows = n_xs[xi];
                    if (is_float_type(t)) {
                        for (size_t j = 0; j < sizeof(nfloat) / sizeof(nfloat[0]); j++, checked++)
                            check_gemm(t, (cpu_isa)isa, nfloat[j], n_ws[wi], rows, 0);
                        continue;
                    }
                    for (size_t j = 0; j < sizeof(nblocks) / sizeof(nblocks[0]); j++, checked += 2) {
                        check_gemm(t, (cpu_isa)isa, nblocks[j] * q->block_size, n_ws[wi], rows, 0);
                        check_gemm(t, (cpu_isa)isa, nblocks[j] * q->block_size, n_ws[wi], rows, 1);
                    }
                }
            }
        }
    }
    /* q4_0 / q8_0 decode weight rows in blocks that fit 32 KiB (22 rows of 33 blocks): more
     * weight rows than one block, several tiles of activation rows */
    if (cpu_isa_detected() >= CPU_ISA_AVX512) {
        for (int rb = 0; rb < 2; rb++) {
            check_gemm(SI_TYPE_Q4_0, CPU_ISA_AVX512, 33 * QK4_0, 25, 40, rb);
            check_gemm(SI_TYPE_Q8_0, CPU_ISA_AVX512, 33 * QK8_0, 25, 40, rb);
            check_gemm(SI_TYPE_Q4_1, CPU_ISA_AVX512, 33 * QK4_1, 25, 40, rb);
            check_gemm(SI_TYPE_Q6_K, CPU_ISA_AVX512, 5 * QK_K, 25, 40, rb);
            check_gemm(SI_TYPE_Q5_K, CPU_ISA_AVX512, 5 * QK_K, 25, 40, rb);
            /* q4_1 rows too long for a tile's row pairs on the stack: the ymm path */
            check_gemm(SI_TYPE_Q4_1, CPU_ISA_AVX512, 81 * QK4_1, 3, 13, rb);
            check_gemm(SI_TYPE_Q4_1, CPU_ISA_AVX512, 81 * QK4_1, 3, 17, rb);
        }
    }
    /* the benchmarked types have matrix kernels on AVX-512 */
    if (cpu_isa_detected() >= CPU_ISA_AVX512) {
        const si_type with_gemm[] = {SI_TYPE_Q4_0, SI_TYPE_Q4_1, SI_TYPE_Q8_0, SI_TYPE_F16,
                                     SI_TYPE_Q4_K, SI_TYPE_Q5_K, SI_TYPE_Q6_K, SI_TYPE_IQ4_XS};
        for (size_t i = 0; i < sizeof(with_gemm) / sizeof(with_gemm[0]); i++)
            assert_non_null(cpu_kernels_get_isa(with_gemm[i], CPU_ISA_AVX512)->gemm);
    }
    print_message("%d gemm calls checked element by element (%d type x level entries with a gemm kernel)\n",
                  checked, fast);
}

/* One row of 8 blocks of 32 / 1 super-block of 256 with the awkward cases. */
static void make_edge_row(float *x, int64_t n, int variant) {
    fill_random(x, n, 1.0f);
    for (int64_t b = 0; b < n; b += 32) {
        float *v = x + b;
        const float s = ldexpf(1.0f, (int)(rng_u32() % 9) - 4); /* power of two: exact id */
        switch ((b / 32 + variant) % 8) {
        case 0: /* ties: amax 127 s -> d = s, id = 1/s exact; others k + 0.5 */
            for (int j = 0; j < 32; j++) v[j] = s * ((float)((int)(rng_u32() % 253) - 126) + 0.5f);
            v[rng_u32() % 32] = 127 * s;
            break;
        case 1: /* negative maximum, ties */
            for (int j = 0; j < 32; j++) v[j] = s * ((float)((int)(rng_u32() % 253) - 126) + 0.5f);
            v[rng_u32() % 32] = -127 * s;
            break;
        case 2: memset(v, 0, 32 * sizeof(float)); break;
        case 3: /* just below one half */
            for (int j = 0; j < 32; j++) v[j] = (rng_u32() & 1 ? 1 : -1) * 0.49999997f;
            v[0] = 127;
            break;
        case 4: /* +- equal maxima: the first one's sign wins (q8_K) */
            v[5] = -100 * s;
            v[20] = 100 * s;
            for (int j = 0; j < 32; j++) if (j != 5 && j != 20) v[j] = fminf(fmaxf(v[j], -99 * s), 99 * s);
            break;
        case 5: /* tiny values */
            for (int j = 0; j < 32; j++) v[j] *= 1e-30f;
            break;
        default: break;
        }
    }
}

static void test_quantize_bit_identical(void **state) {
    (void)state;
    const si_type vt[] = {SI_TYPE_Q8_0, SI_TYPE_Q8_1, SI_TYPE_Q8_K, SI_TYPE_F16, SI_TYPE_BF16, SI_TYPE_F32};
    /* weight type whose kernel entry quantises to vt[i] */
    const si_type wt[] = {SI_TYPE_Q4_0, SI_TYPE_Q4_1, SI_TYPE_Q4_K, SI_TYPE_F16, SI_TYPE_BF16, SI_TYPE_F32};
    static float x[8 * QK_K + 16];
    static uint8_t a[8 * QK_K * 4 + 64], b[8 * QK_K * 4 + 64];
    for (int isa = 1; isa <= (int)cpu_isa_detected(); isa++) {
        for (size_t i = 0; i < sizeof(vt) / sizeof(vt[0]); i++) {
            const cpu_kernels *k = cpu_kernels_get_isa(wt[i], (cpu_isa)isa);
            assert_int_equal(k->vec_dot_type, vt[i]);
            for (int rep = 0; rep < 64; rep++) {
                const int64_t n = rep % 2 ? 8 * QK_K : 4 * QK_K;
                make_edge_row(x, n, rep);
                const size_t bytes = quant_row_size(vt[i], n);
                memset(a, 0xA5, bytes);
                memset(b, 0x5A, bytes);
                quant_get(vt[i])->from_float(x, a, n);
                float *xh = malloc((size_t)n * sizeof(float));
                uint8_t *bh = malloc(bytes);
                assert_non_null(xh);
                assert_non_null(bh);
                memcpy(xh, x, (size_t)n * sizeof(float));
                memset(bh, 0x5A, bytes);
                k->quantize_row(xh, bh, n);
                memcpy(b, bh, bytes);
                free(xh);
                free(bh);
                if (memcmp(a, b, bytes) != 0) {
                    size_t off = 0;
                    while (a[off] == b[off]) off++;
                    fail_msg("%s quantize_row at %s differs from the reference at byte %zu (rep %d)",
                             quant_get(vt[i])->name, cpu_isa_level_name((cpu_isa)isa), off, rep);
                }
            }
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_override_scalar),
        cmocka_unit_test(test_dispatch_edges),
        cmocka_unit_test(test_vec_dot_all),
        cmocka_unit_test(test_gemm_all),
        cmocka_unit_test(test_quantize_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
