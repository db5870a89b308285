/* bulk_copy.cuh — Hopper's (sm_90) asynchronous bulk copy from global to shared memory and the
 * shared-memory barriers (mbarrier) it completes on (PTX ISA: cp.async.bulk, mbarrier).
 *
 * A stage of a pipeline is filled by a producer thread: si_mbar_expect_tx (arrive, and expect
 * this many bytes) first, then si_bulk_copy's of those bytes; the barrier's phase completes when
 * the arrivals and the bytes are in. Consumers wait on the phase's parity (si_mbar_wait). */
#ifndef SI_BACKEND_CUDA_BULK_COPY_CUH
#define SI_BACKEND_CUDA_BULK_COPY_CUH

#include "backend/cuda/cuda_common.cuh"

__device__ __forceinline__ uint32_t si_smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* by one thread, then a CTA barrier before any use */
__device__ __forceinline__ void si_mbar_init(uint64_t *bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(si_smem_addr(bar)), "r"(count));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void si_mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(si_smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void si_mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(si_smem_addr(bar)) : "memory");
}
/* until the phase of this parity has completed */
__device__ __forceinline__ void si_mbar_wait(uint64_t *bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n"
                     " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(si_smem_addr(bar)), "r"(parity)
                     : "memory");
}

/* bytes (a multiple of 16; both addresses 16-aligned) from global to shared memory, completing
 * on bar */
__device__ __forceinline__ void si_bulk_copy(void *dst, const void *src, uint32_t bytes,
                                             uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                 "%2, [%3];" ::"r"(si_smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(si_smem_addr(bar))
                 : "memory");
}

#endif
