/* units_sass.cu — one unit's load + dot of every q8x weight type at 2 rows sharing x, as the batch-1
 * GEMV's inner loop runs them (gemv_q8x_units.cuh), for counting SASS instructions: sm_90 code is
 * 16 bytes an instruction, so a kernel's .text section size / 16 (units_sass.sh). */
#include "backend/cuda/gemv_q8x_units.cuh"
/* one unit's load + dot, R = 2 rows sharing x, as the kernel's inner loop */
template <class T>
__global__ void k(const uint8_t *seg, const uint32_t *xg, const float *xdg, const int *xsg, float *y) {
    uint32_t xw[8 * T::UB];
    float xd[T::UB];
    int xs[T::UB];
    for (int i = 0; i < 8 * T::UB; i++) xw[i] = xg[i * 32 + threadIdx.x];
    for (int i = 0; i < T::UB; i++) { xd[i] = xdg[i]; xs[i] = xsg[i]; }
    uint32_t w0[T::WORDS], w1[T::WORDS];
    T::load(seg, threadIdx.x & 31, w0);
    T::load(seg + 4096, threadIdx.x & 31, w1);
    y[threadIdx.x] = T::dot(w0, xw, xd, xs);
    y[threadIdx.x + 32] = T::dot(w1, xw, xd, xs);
}
template __global__ void k<tqx_q4_0>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
template __global__ void k<tqx_q8_0>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
template __global__ void k<tqx_q4_1>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
template __global__ void k<tqx_q5_0>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
template __global__ void k<tqx_q5_1>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
template __global__ void k<tqx_q2_k>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
template __global__ void k<tqx_q3_k>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
template __global__ void k<tqx_q4_k>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
template __global__ void k<tqx_q5_k>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
template __global__ void k<tqx_q6_k>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
template __global__ void k<tqx_iq4_nl>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
template __global__ void k<tqx_iq4_xs>(const uint8_t *, const uint32_t *, const float *, const int *, float *);
