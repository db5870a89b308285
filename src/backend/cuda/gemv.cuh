/* gemv.cuh — decode matmul (y = W x for 1..8 activation rows) over GGUF weight blocks.
 * Declared for the launchers in gemv.cu; the C API is cuda_gemv in cuda_ops.h. */
#ifndef SI_BACKEND_CUDA_GEMV_CUH
#define SI_BACKEND_CUDA_GEMV_CUH

#include "backend/cuda/dequant.cuh"

/* Tuning of one weight type: SEGB blocks per row segment (about 2 KB staged per row). */
template <class T> struct gemv_seg;
template <> struct gemv_seg<tq_f16> { static constexpr int SEGB = 128; };
template <> struct gemv_seg<tq_bf16> { static constexpr int SEGB = 128; };
template <> struct gemv_seg<tq_q8_0> { static constexpr int SEGB = 64; };
template <> struct gemv_seg<tq_q4_0> { static constexpr int SEGB = 128; };
template <> struct gemv_seg<tq_q4_1> { static constexpr int SEGB = 128; };
template <> struct gemv_seg<tq_q5_0> { static constexpr int SEGB = 128; };
template <> struct gemv_seg<tq_q5_1> { static constexpr int SEGB = 64; }; /* 128: > 48 KB a CTA */
template <> struct gemv_seg<tq_q4_k> { static constexpr int SEGB = 16; };
template <> struct gemv_seg<tq_q5_k> { static constexpr int SEGB = 16; };
template <> struct gemv_seg<tq_q6_k> { static constexpr int SEGB = 8; };
template <> struct gemv_seg<tq_q2_k> { static constexpr int SEGB = 16; };
template <> struct gemv_seg<tq_q3_k> { static constexpr int SEGB = 16; };
template <> struct gemv_seg<tq_iq4_nl> { static constexpr int SEGB = 128; };
template <> struct gemv_seg<tq_iq4_xs> { static constexpr int SEGB = 16; };

#define GEMV_WARPS 4 /* warps per CTA */
#define GEMV_ROWS 2  /* weight rows per warp: the activations loaded once serve both */

#endif
