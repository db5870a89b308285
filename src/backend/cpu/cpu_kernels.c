/* cpu_kernels.c — CPU feature detection and the per-ISA kernel tables (see cpu_kernels.h).
 *
 * Detection reads CPUID leaves 1 and 7 (Intel SDM vol. 2A, "CPUID") and XGETBV(0): a feature is
 * usable only if the CPU has it *and* the OS saves its register state (XCR0 bits 1-2 for AVX,
 * 5-7 for the AVX-512 opmask and upper registers). The tables are built once (pthread_once):
 * level L takes the kernel of L for each type when there is one, else the entry of L - 1; level
 * scalar is the reference quant_traits. */
#include "backend/cpu/cpu_kernels.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#define SI_X86 1
#include <cpuid.h>
/* NOTE: declared here rather than in a header: only this table should reach them. Each returns
 * NULL for a type that has no kernel of its own at that level. */
const cpu_kernels *cpu_kernels_avx2_entry(si_type t);
const cpu_kernels *cpu_kernels_avx512_entry(si_type t, int has_bf16);
#else
#define SI_X86 0
#endif

static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;
static cpu_isa isa_detected = CPU_ISA_SCALAR, isa_active = CPU_ISA_SCALAR;
static cpu_kernels tables[CPU_ISA_COUNT][SI_TYPE_COUNT];
static int have_type[SI_TYPE_COUNT];

#if SI_X86
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    /* xgetbv by its opcode bytes: assemblers without AVX support still accept them */
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static cpu_isa detect_isa(int *has_bf16) {
    uint32_t a, b, c, d;
    *has_bf16 = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return CPU_ISA_SCALAR;
    const int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    const int f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return CPU_ISA_SCALAR;
    const uint64_t xcr0 = read_xcr0();
    if ((xcr0 & 0x6) != 0x6) return CPU_ISA_SCALAR; /* XMM and YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return CPU_ISA_SCALAR;
    const int avx2 = (b >> 5) & 1;
    const int avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1;
    const int avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
    const int vnni = (c >> 11) & 1;
    const uint32_t max_sub = a;
    if (!(avx2 && fma && f16c)) return CPU_ISA_SCALAR;
    if (!(avx512f && avx512dq && avx512bw && avx512vl && vnni) || (xcr0 & 0xe0) != 0xe0)
        return CPU_ISA_AVX2;
    if (max_sub >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) *has_bf16 = (a >> 5) & 1;
    return CPU_ISA_AVX512;
}
#endif

static void kernels_init(void) {
    int has_bf16 = 0;
    (void)has_bf16; /* unused off x86 */
#if SI_X86
    isa_detected = detect_isa(&has_bf16);
#endif
    for (int t = 0; t < SI_TYPE_COUNT; t++) {
        const quant_traits *q = quant_get((si_type)t);
        if (!q) continue;
        const quant_traits *xq = quant_get(q->vec_dot_type);
        if (!xq) continue;
        have_type[t] = 1;
        tables[CPU_ISA_SCALAR][t] = (cpu_kernels){
            .vec_dot_type = q->vec_dot_type, .quantize_row = xq->from_float, .vec_dot = q->vec_dot};
        for (int l = CPU_ISA_AVX2; l < CPU_ISA_COUNT; l++) {
            const cpu_kernels *k = NULL;
#if SI_X86
            if (l <= (int)isa_detected) {
                k = l == CPU_ISA_AVX2 ? cpu_kernels_avx2_entry((si_type)t)
                                      : cpu_kernels_avx512_entry((si_type)t, has_bf16);
            }
#endif
            tables[l][t] = k ? *k : tables[l - 1][t];
        }
    }
    isa_active = isa_detected;
    const char *env = getenv("SWIFTINFER_ISA");
    if (env) {
        cpu_isa want = isa_active;
        if (!strcmp(env, "scalar")) want = CPU_ISA_SCALAR;
        else if (!strcmp(env, "avx2")) want = CPU_ISA_AVX2;
        else if (!strcmp(env, "avx512") || !strcmp(env, "avx512-vnni")) want = CPU_ISA_AVX512;
        if (want < isa_active) isa_active = want;
    }
}

const cpu_kernels *cpu_kernels_get_isa(si_type t, cpu_isa isa) {
    pthread_once(&kernels_once, kernels_init);
    const int i = (int)t, l = (int)isa;
    if (i < 0 || i >= (int)SI_TYPE_COUNT || !have_type[i]) return NULL;
    if (l < 0 || l > (int)isa_detected) return NULL;
    return &tables[l][i];
}

const cpu_kernels *cpu_kernels_get(si_type t) {
    pthread_once(&kernels_once, kernels_init);
    return cpu_kernels_get_isa(t, isa_active);
}

cpu_isa cpu_isa_detected(void) {
    pthread_once(&kernels_once, kernels_init);
    return isa_detected;
}

cpu_isa cpu_isa_active(void) {
    pthread_once(&kernels_once, kernels_init);
    return isa_active;
}

const char *cpu_isa_level_name(cpu_isa isa) {
    static const char *const names[CPU_ISA_COUNT] = {"scalar", "avx2", "avx512-vnni"};
    const int l = (int)isa;
    return l >= 0 && l < (int)CPU_ISA_COUNT ? names[l] : "?";
}

void cpu_gemm(const cpu_kernels *k, const void *w, size_t w_stride, int n_w, const void *x,
              size_t x_stride, const void *xp, size_t xp_stride, int n_x, int64_t n, float *out,
              size_t out_stride) {
    if (k->gemm) {
        k->gemm(w, w_stride, n_w, k->prep_row ? xp : x, k->prep_row ? xp_stride : x_stride, n_x, n,
                out, out_stride);
        return;
    }
    for (int r = 0; r < n_x; r++)
        for (int o = 0; o < n_w; o++)
            out[(size_t)r * out_stride + (size_t)o] =
                k->vec_dot((const uint8_t *)w + (size_t)o * w_stride,
                           (const uint8_t *)x + (size_t)r * x_stride, n);
}

const char *cpu_isa_name(void) { return cpu_isa_level_name(cpu_isa_active()); }
