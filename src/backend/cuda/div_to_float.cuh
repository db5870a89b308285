/* div_to_float.cuh — (float)(x / d) in double, as the CPU's sampler rounds a probability (the
 * quotient rounded to double, then to float), from one multiplication by r = 1 / d (rounded)
 * instead of a double division, which is a ~20-instruction sequence on the GPU.
 *
 * x * r is within 3 double ulps of x / d rounded to double (r and the product each round once, by
 * half an ulp), so both round to the same float unless they lie that close to a midpoint between
 * two floats: the 29 bits a float drops are then within a few units of 2^28. Those (about 1 in
 * 2^25 quotients), and quotients outside float's normal range (where fewer bits are kept), take
 * the division. */
#ifndef SI_BACKEND_CUDA_DIV_TO_FLOAT_CUH
#define SI_BACKEND_CUDA_DIV_TO_FLOAT_CUH

#define DIV_TO_FLOAT_MARGIN 16 /* units of the dropped bits around the midpoint: > 3 ulps */

__device__ __forceinline__ float div_to_float(double x, double d, double r) {
    const double q = x * r;
    const long long low = __double_as_longlong(q) & ((1ll << 29) - 1);
    const long long off = low - (1ll << 28);
    const double aq = fabs(q);
    if (aq >= 0x1p-126 && aq < 0x1p127 && (off > DIV_TO_FLOAT_MARGIN || off < -DIV_TO_FLOAT_MARGIN))
        return (float)q;
    return (float)(x / d);
}
#endif
