/* quant_round.h — the rounding the k-quant and IQ quantisers share (ggml-quants.c's helpers),
 * static inline for quant_k.c and quant_iq.c. */
#ifndef SI_QUANT_ROUND_H
#define SI_QUANT_ROUND_H

#include <math.h>
#include <string.h>

/* groups whose largest magnitude is below this quantise to zero (ggml's GROUP_MAX_EPS) */
#define GROUP_MAX_EPS 1e-15f

/* Round to nearest, ties to even, via the 1.5 * 2^23 trick (ggml's nearest_int), exact for
 * |f| < 2^22. NOTE: ggml only assert()s the range (compiled out in release builds, giving
 * garbage); we saturate instead, and map NaN to 0, so bad activations cannot abort or misbehave. */
static inline int nearest_int(float fval) {
    if (!(fabsf(fval) <= 4194303.f)) fval = fval > 0 ? 4194303.f : fval < 0 ? -4194303.f : 0.f;
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

#endif
