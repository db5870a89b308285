/* timing.cuh — the CUDA kernel tests' timing (llm.c's dev/cuda habit): one launch after an L2
 * flush, median of many, and back to back over copies of the operand that beat the L2. Included
 * by one test file each (static definitions); timing_init() before the first timing. */
#ifndef SI_TESTS_CUDA_TIMING_CUH
#define SI_TESTS_CUDA_TIMING_CUH
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_common.cuh"

static cudaStream_t g_st;
static void *g_flush;
static const size_t k_flush_bytes = 256u << 20; /* > 4x the 60 MB L2 */

/* The L2 flush reads (never writes) a buffer 4x the L2: a memset would leave ~60 MB of dirty
 * lines whose write-back the timed kernel would pay for (seen: 4096x4096 GEMVs ran 2-3x slow). */
__global__ void flush_read_kernel(const float4 *p, size_t n, float *sink) {
    float a = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float4 v = p[i];
        a += v.x + v.y + v.z + v.w;
    }
    if (a == 1234.5678f) *sink = a; /* keeps the loads; practically never true */
}
static float *g_sink;
static void l2_flush() {
    flush_read_kernel<<<132 * 8, 512, 0, g_st>>>((const float4 *)g_flush, k_flush_bytes / 16, g_sink);
    CUDA_CHECK_LAUNCH();
}

template <class F> static double time_median_us(F fn, int iters) {
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    std::vector<float> t;
    fn(); /* warm-up */
    for (int i = 0; i < iters; i++) {
        l2_flush();
        CUDA_CHECK(cudaEventRecord(a, g_st));
        fn();
        CUDA_CHECK(cudaEventRecord(b, g_st));
        CUDA_CHECK(cudaEventSynchronize(b));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.0f);
    }
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/* Back to back over n copies of the operand that together exceed the L2 (fn(i) uses copy i), no
 * flush or event between launches: each launch reads its bytes from HBM as in a decode step,
 * where other weights come between two uses, and its launch overlaps the one before as in a CUDA
 * graph with PDL. The mean per launch, over 4 rounds of the copies after one warm-up round. */
template <class F> static double time_stream_us(F fn, int n) {
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < n; i++) fn(i);
    CUDA_CHECK(cudaEventRecord(a, g_st));
    for (int i = 0; i < 4 * n; i++) fn(i % n);
    CUDA_CHECK(cudaEventRecord(b, g_st));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    return ms * 1000.0 / (4 * n);
}

/* Copies of dev[0 .. bytes) until they hold at least 4x the L2 (copy 0 is dev itself). */
static std::vector<void *> l2_beating_copies(void *dev, size_t bytes) {
    const size_t n = std::min<size_t>(64, std::max<size_t>(2, (k_flush_bytes + bytes - 1) / bytes));
    std::vector<void *> c{dev};
    for (size_t i = 1; i < n; i++) {
        void *p;
        CUDA_CHECK(cudaMalloc(&p, bytes));
        CUDA_CHECK(cudaMemcpy(p, dev, bytes, cudaMemcpyDeviceToDevice));
        c.push_back(p);
    }
    return c;
}
static void free_copies(std::vector<void *> &c) {
    for (size_t i = 1; i < c.size(); i++) CUDA_CHECK(cudaFree(c[i]));
}

/* launch(m) for each m of mats captured on g_st into an instantiated CUDA graph (the caller
 * destroys it) */
template <class L> static cudaGraphExec_t graph_of(const std::vector<int> &mats, L launch) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_CHECK(cudaStreamBeginCapture(g_st, cudaStreamCaptureModeGlobal));
    for (int m : mats)
        launch(m);
    CUDA_CHECK(cudaStreamEndCapture(g_st, &g));
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    CUDA_CHECK(cudaGraphDestroy(g));
    return ge;
}

/* Launches launch(m) for each m of mats once (kernel attributes, first-use costs), then captures
 * them in a CUDA graph and times the graph back to back (time_stream_us, reps launches): a decode
 * step's chain of kernels, PDL edges included. */
template <class L> static double graph_us(int reps, const std::vector<int> &mats, L launch) {
    cudaStream_t st = g_st;
    for (int m : mats) /* first launches outside the capture (kernel attributes) */
        launch(m);
    CUDA_CHECK(cudaStreamSynchronize(st));
    cudaGraphExec_t ge = graph_of(mats, launch);
    const double us = time_stream_us([&](int) { CUDA_CHECK(cudaGraphLaunch(ge, st)); }, reps);
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    return us;
}


/* the stream the timings run on, the flush buffer */
static void timing_init(void) {
    CUDA_CHECK(cudaStreamCreate(&g_st));
    CUDA_CHECK(cudaMalloc(&g_flush, k_flush_bytes));
    CUDA_CHECK(cudaMemset(g_flush, 0x11, k_flush_bytes));
    CUDA_CHECK(cudaMalloc(&g_sink, sizeof(float)));
}
static void timing_free(void) {
    CUDA_CHECK(cudaFree(g_flush));
    CUDA_CHECK(cudaFree(g_sink));
    CUDA_CHECK(cudaStreamDestroy(g_st));
}
#endif
