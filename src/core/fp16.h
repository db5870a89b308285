/* fp16.h — IEEE half and bfloat16 conversions (bit-exact, round-to-nearest-even). */
#ifndef SI_CORE_FP16_H
#define SI_CORE_FP16_H

#include <stdint.h>
#include <string.h>

static inline float fp32_from_bits(uint32_t w) { float f; memcpy(&f, &w, 4); return f; }
static inline uint32_t fp32_to_bits(float f) { uint32_t w; memcpy(&w, &f, 4); return w; }

/* Half to float, exact for every input including subnormals, inf and NaN. */
static inline float fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return fp32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0) return fp32_from_bits(sign);
        float f = (float)mant * (1.0f / 16777216.0f); /* mant * 2^-24 */
        return sign ? -f : f;
    }
    return fp32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

/* Float to half, round to nearest even; overflow gives inf, NaN stays NaN. */
static inline uint16_t fp32_to_fp16(float f) {
    uint32_t x = fp32_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) {                                    /* below 2^-14: subnormal half */
        float a = fp32_from_bits(ax);
        /* adding 0.5 forces rounding at the 2^-24 position in float arithmetic (ties even) */
        uint32_t r = fp32_to_bits(a + 0.5f) - 0x3f000000u;
        return (uint16_t)(sign | r);
    }
    uint32_t mant_odd = (ax >> 13) & 1u;
    ax += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round */
    return (uint16_t)(sign | (ax >> 13));
}

static inline float bf16_to_fp32(uint16_t h) { return fp32_from_bits((uint32_t)h << 16); }

static inline uint16_t fp32_to_bf16(float f) {
    uint32_t x = fp32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64u); /* quiet NaN */
    return (uint16_t)((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

#endif
