/* sampler_exp.h — e^x as the samplers weigh tokens: one function, the same float bits on the host
 * (sampler.c) and on a GPU (src/backend/cuda/sample.cu), so that a device's draw is the host's.
 *
 * The C library's expf and CUDA's differ in the last bit for some arguments (both are within an
 * ulp or two of e^x, by different methods); a weight that differs moves a cumulative sum by ~1e-7
 * relative and, when u or top_p falls that close to a boundary, the neighbouring token is drawn
 * (seen in session 61: test_cuda_model's parts_at_boundary). This is Cephes' expf (S. L.
 * Moshier): x = n ln 2 + r with ln 2 in two parts (the first, 0.693359375, has 9 significant bits,
 * so n times it is exact), e^r by a degree-7 polynomial on |r| <= ln 2 / 2, then scaled by 2^n.
 * Every operation is a single IEEE float multiply or add, rounded to nearest: on the device through
 * __fmul_rn / __fadd_rn, which are never contracted into FMAs; on the host as plain operators in
 * files built with -ffp-contract=off (CMakeLists.txt sets it for sampler.c and the tests). Error:
 * within 0.99 ulps of e^x over every float with a normal result (bench/sampler_exp_bench.c
 * --sweep; test_sampler_pick's test_sampler_expf holds it to 2), e^0 = 1; the device's bits are
 * the host's (test_cuda_sample's check_sampler_expf). About 4.5 ns an element on the host
 * against glibc's 3.5 (bench/sampler_exp_bench.c; the CPU sampler's whole-vocabulary draw,
 * which takes one an entry, is as fast as before it); on the device about three times the PTX
 * instructions of CUDA's expf (the GPU sampler's weighted passes ~10 % slower at one row:
 * bench/RESULTS.md 2026-12-08). Arguments below -104 give 0 (e^-104 is under half the least
 * subnormal), NaN stays NaN; the samplers' arguments are <= 0 (a logit less the maximum). With
 * flush-to-zero arithmetic (nvcc -ftz=true; not this build's) results under 2^-126 would be 0 on
 * the device only: weights that small never move a double sum. */
#ifndef SI_ENGINE_SAMPLER_EXP_H
#define SI_ENGINE_SAMPLER_EXP_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SAMPLER_EXP_FN static __host__ __device__ __forceinline__
#else
#define SAMPLER_EXP_FN static inline
#endif

#ifdef __CUDA_ARCH__
#define SAMPLER_EXP_MUL(a, b) __fmul_rn((a), (b))
#define SAMPLER_EXP_ADD(a, b) __fadd_rn((a), (b))
#else
#define SAMPLER_EXP_MUL(a, b) ((a) * (b))
#define SAMPLER_EXP_ADD(a, b) ((a) + (b))
#endif

/* y * 2^k by adding k to y's exponent: exact where y and the result are normal floats */
SAMPLER_EXP_FN float sampler_exp_ldexp(float y, int k) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(__float_as_uint(y) + ((uint32_t)k << 23));
#else
    union {
        float f;
        uint32_t u;
    } v = {y};
    v.u += (uint32_t)k << 23;
    return v.f;
#endif
}

SAMPLER_EXP_FN float sampler_expf(float x) {
    if (!(x > -104.0f)) return x == x ? 0.0f : x; /* -inf and underflow: 0; NaN */
    if (x > 88.8f) return INFINITY;
    /* n = x / ln 2 rounded to nearest (adding and taking away 1.5 x 2^23 rounds |t| < 2^22 to an
     * integer, ties to even), |n| <= 150 */
    const float t = SAMPLER_EXP_MUL(x, 1.44269504088896341f);
    const float n = SAMPLER_EXP_ADD(SAMPLER_EXP_ADD(t, 12582912.0f), -12582912.0f);
    const int k = (int)n;
    float r = SAMPLER_EXP_ADD(x, -SAMPLER_EXP_MUL(n, 0.693359375f));
    r = SAMPLER_EXP_ADD(r, -SAMPLER_EXP_MUL(n, -2.12194440e-4f));
    const float z = SAMPLER_EXP_MUL(r, r);
    float p = 1.9875691500e-4f;
    p = SAMPLER_EXP_ADD(SAMPLER_EXP_MUL(p, r), 1.3981999507e-3f);
    p = SAMPLER_EXP_ADD(SAMPLER_EXP_MUL(p, r), 8.3334519073e-3f);
    p = SAMPLER_EXP_ADD(SAMPLER_EXP_MUL(p, r), 4.1665795894e-2f);
    p = SAMPLER_EXP_ADD(SAMPLER_EXP_MUL(p, r), 1.6666665459e-1f);
    p = SAMPLER_EXP_ADD(SAMPLER_EXP_MUL(p, r), 5.0000001201e-1f);
    const float y = SAMPLER_EXP_ADD(SAMPLER_EXP_ADD(SAMPLER_EXP_MUL(p, z), r), 1.0f);
    /* y * 2^k, y in [0.7, 1.42]: where that is a normal float, k added to y's exponent (exact);
     * else y times 2^(k/2) (exact, normal) times 2^(k - k/2), rounded once (into the subnormals,
     * or to infinity where e^x is there) */
    if (k > -126 && k < 128) return sampler_exp_ldexp(y, k);
    const int k1 = k / 2;
    return SAMPLER_EXP_MUL(SAMPLER_EXP_MUL(y, sampler_exp_ldexp(1.0f, k1)),
                           sampler_exp_ldexp(1.0f, k - k1));
}

#endif
