/* weight_units.cuh — the decoders each weight type has on the GPU, in one table that the
 * kernels' dispatch reads (gemv.cu, elementwise.cu, gemm_q8x_mma.cu), so that a type is added
 * in one line. A type's weight_units<F, X, M>:
 *   F  the float unit (dequant.cuh): the general GEMV, embeddings, dequantisation to f16;
 *   X  the q8x unit (gemv_q8x_units.cuh): the 1-8-row integer GEMVs; void for F16/BF16, which
 *      have GEMVs of their own (gemv_fast.cuh, gemv_h16_mma.cuh);
 *   M  the int8 tensor-core fragments (gemv_mma_units.cuh): the 9-128-row matmul and the opt-in
 *      tensor-core GEMV; void where there are none (F16/BF16: cuBLASLt).
 * F32 is not a weight type here (embeddings only: elementwise.cu's own case). test_cuda_decoders
 * runs every entry's units against the CPU's dequantisers, so a wrong entry fails it. */
#ifndef SI_BACKEND_CUDA_WEIGHT_UNITS_CUH
#define SI_BACKEND_CUDA_WEIGHT_UNITS_CUH

#include <type_traits>

#include "backend/cuda/cuda_ops.h" /* si_type */
#include "backend/cuda/gemv_mma_units.cuh"
#include "backend/cuda/gemv_q8x_units.cuh"

template <class F, class X, class M> struct weight_units {
    using tq = F;
    using tqx = X;
    using tmma = M;
};

/* f(weight_units<...>{}) for weight type t; dflt for a type the GPU does not hold */
template <class R, class Fn> static inline R with_weight_units(si_type t, R dflt, Fn &&f) {
    switch (t) {
    case SI_TYPE_F16: return f(weight_units<tq_f16, void, void>{});
    case SI_TYPE_BF16: return f(weight_units<tq_bf16, void, void>{});
    case SI_TYPE_Q8_0: return f(weight_units<tq_q8_0, tqx_q8_0, tmma_q8_0>{});
    case SI_TYPE_Q4_0: return f(weight_units<tq_q4_0, tqx_q4_0, tmma_q4_0>{});
    case SI_TYPE_Q4_1: return f(weight_units<tq_q4_1, tqx_q4_1, tmma_q4_1>{});
    case SI_TYPE_Q5_0: return f(weight_units<tq_q5_0, tqx_q5_0, tmma_q5_0>{});
    case SI_TYPE_Q5_1: return f(weight_units<tq_q5_1, tqx_q5_1, tmma_q5_1>{});
    case SI_TYPE_Q2_K: return f(weight_units<tq_q2_k, tqx_q2_k, tmma_q2_k>{});
    case SI_TYPE_Q3_K: return f(weight_units<tq_q3_k, tqx_q3_k, tmma_q3_k>{});
    case SI_TYPE_Q4_K: return f(weight_units<tq_q4_k, tqx_q4_k, tmma_q4_k>{});
    case SI_TYPE_Q5_K: return f(weight_units<tq_q5_k, tqx_q5_k, tmma_q5_k>{});
    case SI_TYPE_Q6_K: return f(weight_units<tq_q6_k, tqx_q6_k, tmma_q6_k>{});
    case SI_TYPE_IQ4_NL: return f(weight_units<tq_iq4_nl, tqx_iq4_nl, tmma_iq4_nl>{});
    case SI_TYPE_IQ4_XS: return f(weight_units<tq_iq4_xs, tqx_iq4_xs, tmma_iq4_xs>{});
    default: return dflt;
    }
}

/* f(X{}) for the q8x unit X of weight type t; dflt for a type without one */
template <class R, class Fn> static inline R with_q8x_unit(si_type t, R dflt, Fn &&f) {
    return with_weight_units(t, dflt, [&](auto u) -> R {
        using X = typename decltype(u)::tqx;
        if constexpr (std::is_void<X>::value)
            return dflt;
        else
            return f(X{});
    });
}

/* f(M{}) for the tensor-core fragments M of weight type t; dflt for a type without them */
template <class R, class Fn> static inline R with_mma_frags(si_type t, R dflt, Fn &&f) {
    return with_weight_units(t, dflt, [&](auto u) -> R {
        using M = typename decltype(u)::tmma;
        if constexpr (std::is_void<M>::value)
            return dflt;
        else
            return f(M{});
    });
}

#endif
