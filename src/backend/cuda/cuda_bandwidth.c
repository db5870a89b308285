/* cuda_bandwidth.c — the GPU's memory bandwidth as issue 6 and the device notes measure it: one
 * device-to-device copy of a large buffer, counting the bytes read and the bytes written. It is
 * the ceiling `swiftinfer bench --device cuda` measures decoding against (batch-1 decode streams
 * the weights once a token), as bench_memory (src/cli) is for the CPU.
 *
 * NOTE: written in C: only the runtime's copy and events, no kernel of ours. */
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_bandwidth.h"
#include "backend/cuda/cuda_check.h"
#include "core/error.h"

si_status cuda_copy_bandwidth(size_t bytes, int runs, double *best_gbps, double *mean_gbps) {
    void *src = NULL, *dst = NULL;
    if (bytes == 0 || runs < 1)
        return si_error(SI_ERR_INVALID_ARG, "copy bandwidth: %zu bytes, %d runs", bytes, runs);
    if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&dst, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(src);
        return si_error(SI_ERR_NOMEM,
                        "copy bandwidth: no room on the GPU for two buffers of %zu MiB "
                        "(--memory-mib)",
                        bytes >> 20);
    }
    cudaStream_t st;
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    CUDA_CHECK(cudaMemsetAsync(src, 1, bytes, st));
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st)); /* untimed */
    double best = 0.0, sum = 0.0;
    for (int r = 0; r < runs; r++) {
        CUDA_CHECK(cudaEventRecord(e0, st));
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        const double gbps = 2.0 * (double)bytes / (ms * 1e6); /* read + written */
        best = gbps > best ? gbps : best;
        sum += gbps;
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaFree(src));
    CUDA_CHECK(cudaFree(dst));
    *best_gbps = best;
    *mean_gbps = sum / runs;
    return SI_OK;
}
