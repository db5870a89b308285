/* quant_float.c — F32, F16 and BF16 as quant types (GGUF tensor types 0, 1 and 30).
 *
 * Conversions are ggml's: fp16 and bf16 round to nearest even (core/fp16.h). The dot products
 * use the same type for activations, multiply in float and accumulate in double, as ggml's scalar
 * ggml_vec_dot_f32/_f16/_bf16 do (their ggml_float accumulator is a double). */
#include <string.h>

#include "core/fp16.h"
#include "quant/quant.h"

static void f32_to_float(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void f32_from_float(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static float f32_vec_dot(const void *w, const void *x, int64_t n) {
    const float *a = w, *b = x;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(a[i] * b[i]);
    return (float)sum;
}

static void f16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_fp32(s[i]);
}

static void f16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = fp32_to_fp16(src[i]);
}

static float f16_vec_dot(const void *w, const void *x, int64_t n) {
    const uint16_t *a = w, *b = x;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(fp16_to_fp32(a[i]) * fp16_to_fp32(b[i]));
    return (float)sum;
}

static void bf16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_fp32(s[i]);
}

static void bf16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = fp32_to_bf16(src[i]);
}

static float bf16_vec_dot(const void *w, const void *x, int64_t n) {
    const uint16_t *a = w, *b = x;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(bf16_to_fp32(a[i]) * bf16_to_fp32(b[i]));
    return (float)sum;
}

const quant_traits quant_traits_f32 = {
    .name = "f32", .block_size = 1, .type_size = 4, .vec_dot_type = SI_TYPE_F32,
    .to_float = f32_to_float, .from_float = f32_from_float, .vec_dot = f32_vec_dot,
};

const quant_traits quant_traits_f16 = {
    .name = "f16", .block_size = 1, .type_size = 2, .vec_dot_type = SI_TYPE_F16,
    .to_float = f16_to_float, .from_float = f16_from_float, .vec_dot = f16_vec_dot,
};

const quant_traits quant_traits_bf16 = {
    .name = "bf16", .block_size = 1, .type_size = 2, .vec_dot_type = SI_TYPE_BF16,
    .to_float = bf16_to_float, .from_float = bf16_from_float, .vec_dot = bf16_vec_dot,
};
