/* gemv_trace.cuh — a per-CTA timeline of the quantised decode GEMVs (gemv_q8x.cuh), for
 * bench/kernels/persist_chain's "trace" output: where a chain of GEMVs loses time between one
 * matrix and the next (the previous grid's tail, the PDL wait, x's preparation). Built only with
 * -DGEMV_Q8X_TRACE; otherwise every hook is empty and the kernels are unchanged.
 *
 * Thread 0 of each CTA notes %globaltimer when the CTA starts, when its PDL wait returns, when
 * x is ready in shared memory and when its last warp is done, with its SM. A record's place is
 * the launch's number in the chain, which the last CTA of each grid advances (the next grid
 * reads it after its PDL wait, so it sees the advance), and the CTA's index. */
#ifndef SI_BACKEND_CUDA_GEMV_TRACE_CUH
#define SI_BACKEND_CUDA_GEMV_TRACE_CUH

#define Q8X_TRACE_MAX_CTAS 512

struct q8x_trace_rec {
    unsigned long long start, waited, x_ready, end;
    unsigned long long loaded, scaled; /* Q8X_NORM only: its row loaded, its scale known */
    unsigned smid, grid;
};

#ifdef GEMV_Q8X_TRACE
__device__ q8x_trace_rec *q8x_trace_buf;
__device__ unsigned q8x_trace_launches, q8x_trace_seq, q8x_trace_done;

__device__ __forceinline__ unsigned long long q8x_gtimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

struct q8x_trace {
    q8x_trace_rec r;
    unsigned seq;
    __device__ void start() {
        if (threadIdx.x == 0) {
            r.start = q8x_gtimer();
            r.loaded = r.scaled = 0;
        }
    }
    __device__ void waited() {
        if (threadIdx.x == 0) {
            r.waited = q8x_gtimer();
            seq = *(volatile unsigned *)&q8x_trace_seq;
        }
    }
    __device__ void x_ready() {
        if (threadIdx.x == 0) r.x_ready = q8x_gtimer();
    }
    /* v: a value computed from the loads, so that the time is taken after they arrived */
    __device__ void loaded(float v) {
        if (threadIdx.x == 0) {
            asm volatile("" ::"f"(v));
            r.loaded = q8x_gtimer();
        }
    }
    __device__ void scaled() {
        if (threadIdx.x == 0) r.scaled = q8x_gtimer();
    }
    /* every thread of the CTA calls it, once its warp is done */
    __device__ void end() {
        __syncthreads();
        if (threadIdx.x != 0) return;
        r.end = q8x_gtimer();
        asm volatile("mov.u32 %0, %%smid;" : "=r"(r.smid));
        r.grid = gridDim.x;
        if (seq < q8x_trace_launches && blockIdx.x < Q8X_TRACE_MAX_CTAS)
            q8x_trace_buf[(size_t)seq * Q8X_TRACE_MAX_CTAS + blockIdx.x] = r;
        __threadfence();
        if (atomicAdd(&q8x_trace_done, 1) == gridDim.x - 1) {
            q8x_trace_done = 0;
            q8x_trace_seq = seq + 1;
        }
    }
};
#else
struct q8x_trace {
    __device__ void start() {}
    __device__ void waited() {}
    __device__ void x_ready() {}
    __device__ void loaded(float) {}
    __device__ void scaled() {}
    __device__ void end() {}
};
#endif
#endif
