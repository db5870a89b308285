/* l2_ahead.h — a decode step's weights asked into the L2 ahead of the GEMVs that read them, from
 * a second stream (l2_ahead.cu).
 *
 * At batch 1 a decode step is a chain of kernels in which only the GEMVs read much from HBM: while
 * attention, SwiGLU or a GEMV's first and last wave run, HBM idles. A weight depends on nothing
 * the step computes, so it can be read early. After each GEMV is enqueued, a prefetch kernel is
 * enqueued on a side stream that waits for that GEMV to complete: it asks the L2 for the next
 * `ahead` bytes of the step's weights (in the order the GEMVs read them) that no earlier
 * prefetch asked for, so that they load while the kernels between the two GEMVs run. Nothing in
 * the main chain waits for a prefetch (an earlier try that put the prefetch kernel in the chain
 * serialised the transfer, bench/RESULTS.md 03:51 section); the side stream joins the main one
 * at the end of the step. Results are unchanged: a prefetch only moves bytes into the L2.
 *
 * SI_CUDA_L2_AHEAD=MiB sets `ahead` (0: off). Needs compute capability 9.0 (the bulk prefetch). */
#ifndef SI_BACKEND_CUDA_L2_AHEAD_H
#define SI_BACKEND_CUDA_L2_AHEAD_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_l2_ahead cuda_l2_ahead;

/* A schedule for prefetching `ahead` bytes ahead (NULL when ahead is 0 or the GPU lacks the bulk
 * prefetch, or on allocation failure: the steps then run without it). */
cuda_l2_ahead *cuda_l2_ahead_create(size_t ahead);

/* Appends a weight of `bytes` at device address p to the schedule, in the order a decode step's
 * GEMVs read them. */
void cuda_l2_ahead_add(cuda_l2_ahead *a, const void *p, size_t bytes);

/* A step starts on `main`: prefetches the first `ahead` bytes of the schedule. */
void cuda_l2_ahead_begin(cuda_l2_ahead *a, cudaStream_t main);

/* The GEMV reading weight p was just enqueued on `main`: once it completes, the bytes up to
 * `ahead` past the start of the next weight of the schedule are asked for. A p not next in the
 * schedule (a step shape that reads weights otherwise) is ignored. */
void cuda_l2_ahead_after(cuda_l2_ahead *a, const void *p, cudaStream_t main);

/* The step's last kernel was enqueued on `main`: the side stream joins it. */
void cuda_l2_ahead_end(cuda_l2_ahead *a, cudaStream_t main);

void cuda_l2_ahead_free(cuda_l2_ahead *a);

#ifdef __cplusplus
}
#endif

#endif
