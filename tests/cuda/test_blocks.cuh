/* test_blocks.cuh — random GGUF weight blocks for the kernel tests: random bytes (so every bit
 * pattern of the quants occurs) with valid random fp16 scales. Included by one test file each
 * (static definitions), as test_rand.cuh. */
#ifndef SI_TESTS_CUDA_TEST_BLOCKS_CUH
#define SI_TESTS_CUDA_TEST_BLOCKS_CUH
#include <cmath>
#include <cstring>

#include "test_rand.cuh"
extern "C" {
#include "core/fp16.h"
#include "quant/quant.h"
}

static uint16_t rnd_scale_f16(float mag) {
    return fp32_to_fp16(mag * (0.25f + 0.75f * std::fabs(rnd_f())));
}

/* bytes / type size blocks of type t: random bytes, then valid random fp16 scales */
static void fill_random_blocks(si_type t, uint8_t *p, size_t bytes) {
    for (size_t i = 0; i < bytes; i++)
        p[i] = (uint8_t)rnd_u32();
    const quant_traits *qt = quant_get(t);
    const size_t ts = qt->type_size, nb = bytes / ts;
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = p + b * ts;
        uint16_t h[2];
        switch (t) {
        case SI_TYPE_F16:
        case SI_TYPE_BF16:
            for (size_t j = 0; j < ts / 2; j++) {
                uint16_t v = t == SI_TYPE_F16 ? fp32_to_fp16(rnd_f()) : fp32_to_bf16(rnd_f());
                memcpy(blk + 2 * j, &v, 2);
            }
            break;
        case SI_TYPE_F32:
            for (size_t j = 0; j < ts / 4; j++) {
                float v = rnd_f();
                memcpy(blk + 4 * j, &v, 4);
            }
            break;
        case SI_TYPE_Q8_0:
            h[0] = rnd_scale_f16(0.01f);
            memcpy(blk, h, 2);
            break;
        case SI_TYPE_IQ4_NL:
        case SI_TYPE_IQ4_XS:
            h[0] = rnd_scale_f16(t == SI_TYPE_IQ4_NL ? 0.005f : 0.0002f);
            memcpy(blk, h, 2);
            break;
        case SI_TYPE_Q4_0:
        case SI_TYPE_Q5_0:
            h[0] = rnd_scale_f16(t == SI_TYPE_Q5_0 ? 0.05f : 0.1f);
            memcpy(blk, h, 2);
            break;
        case SI_TYPE_Q4_1:
        case SI_TYPE_Q5_1:
        case SI_TYPE_Q4_K:
        case SI_TYPE_Q5_K: {
            const bool k = t == SI_TYPE_Q4_K || t == SI_TYPE_Q5_K;
            h[0] = rnd_scale_f16(k ? 0.003f : 0.1f);
            h[1] = rnd_scale_f16(k ? 0.003f : 0.5f);
            memcpy(blk, h, 4);
            break;
        }
        case SI_TYPE_Q2_K:
            h[0] = rnd_scale_f16(0.01f);
            h[1] = rnd_scale_f16(0.01f);
            memcpy(blk + 80, h, 4);
            break;
        case SI_TYPE_Q3_K:
            h[0] = rnd_scale_f16(0.002f);
            memcpy(blk + 108, h, 2);
            break;
        case SI_TYPE_Q6_K:
            h[0] = rnd_scale_f16(0.0005f);
            memcpy(blk + 208, h, 2);
            break;
        default: break;
        }
    }
}

#endif
