/* pdl.cuh — programmatic dependent launch (Hopper, sm_90): a kernel launched with
 * si_launch_pdl may start while the kernel before it in the stream is still running, so that its
 * launch, and whatever it does that depends on no earlier kernel, overlaps that kernel's tail.
 * A decode step is a chain of ~12 short kernels a layer; at batch 1 each used to pay its launch
 * and the previous one's drain (a few us) with HBM idle, and the GEMVs could not start reading
 * weights until the norm before them had finished.
 *
 * The contract, for every kernel launched through si_launch_pdl:
 *   - before it reads anything an earlier kernel wrote, or writes anything, each thread that
 *     does so calls si_pdl_wait() (griddepcontrol.wait: returns once every earlier kernel of the
 *     stream has completed and its writes are visible);
 *   - work before the wait touches only data no kernel of the step writes: weights, the step's
 *     inputs the host copied in before it, KV-cache entries of earlier steps (decode attention
 *     reads those before the wait; the step's RoPE kernel writes only its own tokens' entries);
 *   - si_pdl_trigger() (griddepcontrol.launch_dependents) lets the next PDL kernel launch early;
 *     a CTA that never calls it triggers when it exits.
 * Because each kernel waits for the one before it to complete, completion is transitive down the
 * chain. Kernels launched the usual way (<<<>>>) keep full stream order; si_pdl_wait and
 * si_pdl_trigger are no-ops in them. SI_CUDA_PDL=0 turns the attribute off (every launch then
 * has full stream order) so both can be timed; results are identical either way. */
#ifndef SI_BACKEND_CUDA_PDL_CUH
#define SI_BACKEND_CUDA_PDL_CUH
#include <utility>

#include "backend/cuda/cuda_common.cuh"

__device__ __forceinline__ void si_pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void si_pdl_trigger(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Whether launches carry the PDL attribute: compute capability >= 9 and SI_CUDA_PDL not "0"
 * (decided on first use; pdl.cu). */
extern "C" int cuda_pdl_on(void);

template <typename... P, typename... A>
static inline void si_launch_pdl(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                 cudaStream_t stream, A &&...args) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = cuda_pdl_on() ? 1 : 0;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...));
}
#endif
