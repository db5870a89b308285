/* l2_ahead.cu — weights asked into the L2 ahead of the decode GEMVs (l2_ahead.h).
 *
 * The schedule is the step's weights laid end to end in the order the GEMVs read them; `cursor`
 * is how far into it prefetches have been asked for this step. A prefetch kernel takes up to
 * L2A_SEGS pieces of weights (a window can span several matrices) and spreads them over its
 * threads in L2A_CHUNK pieces, one cp.async.bulk.prefetch.L2 each: the copy engine of each CTA's
 * multiprocessor issues the line requests, the threads do not wait for data. */
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/l2_ahead.h"

#define L2A_SEGS 4
#define L2A_CHUNK (16 << 10)
#define L2A_MAX_CTAS 64

struct l2a_segs {
    const char *p[L2A_SEGS];
    unsigned long long n[L2A_SEGS]; /* multiples of 16 */
    int k;
};

__global__ void l2_prefetch_kernel(l2a_segs s) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long nt = (long long)gridDim.x * blockDim.x;
    for (int i = 0; i < s.k; i++)
        for (unsigned long long off = t * (unsigned long long)L2A_CHUNK; off < s.n[i];
             off += nt * (unsigned long long)L2A_CHUNK) {
            const unsigned long long left = s.n[i] - off;
            const unsigned sz = left < L2A_CHUNK ? (unsigned)left : L2A_CHUNK;
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(s.p[i] + off), "r"(sz)
                         : "memory");
        }
#endif
}

typedef struct l2a_weight {
    const char *p;
    size_t n, start; /* bytes (a multiple of 16), offset in the schedule */
} l2a_weight;

struct cuda_l2_ahead {
    size_t ahead;
    cudaStream_t side;
    cudaEvent_t ev;
    l2a_weight *w;
    int nw, cap;
    size_t total;
    int next;      /* the schedule entry whose GEMV comes next this step */
    size_t cursor; /* asked for up to here this step */
    bool forked;   /* the side stream has work of this step */
};

extern "C" cuda_l2_ahead *cuda_l2_ahead_create(size_t ahead) {
    int dev, major;
    if (ahead == 0 || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        major < 9)
        return NULL;
    cuda_l2_ahead *a = (cuda_l2_ahead *)calloc(1, sizeof *a);
    if (!a) return NULL;
    a->ahead = ahead;
    CUDA_CHECK(cudaStreamCreateWithFlags(&a->side, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&a->ev, cudaEventDisableTiming));
    return a;
}

extern "C" void cuda_l2_ahead_add(cuda_l2_ahead *a, const void *p, size_t bytes) {
    if (!a) return;
    if (a->nw == a->cap) {
        const int cap = a->cap ? 2 * a->cap : 256;
        l2a_weight *w = (l2a_weight *)realloc(a->w, (size_t)cap * sizeof *w);
        if (!w) return; /* a shorter schedule: later weights are not prefetched */
        a->w = w;
        a->cap = cap;
    }
    const size_t n = bytes & ~(size_t)15;
    a->w[a->nw++] = (l2a_weight){(const char *)p, n, a->total};
    a->total += n;
}

/* Once `main`'s work so far completes, schedule bytes [from, to) are asked for. */
static void prefetch(cuda_l2_ahead *a, size_t from, size_t to, cudaStream_t main) {
    if (to > a->total) to = a->total;
    if (from >= to) return;
    CUDA_CHECK(cudaEventRecord(a->ev, main));
    CUDA_CHECK(cudaStreamWaitEvent(a->side, a->ev, 0));
    a->forked = true;
    l2a_segs s = {};
    size_t chunks = 0;
    for (int i = 0; i < a->nw; i++) {
        const l2a_weight *w = &a->w[i];
        const size_t lo = from > w->start ? from : w->start;
        const size_t hi = to < w->start + w->n ? to : w->start + w->n;
        if (lo >= hi) continue;
        s.p[s.k] = w->p + (lo - w->start);
        s.n[s.k] = hi - lo;
        chunks += (hi - lo + L2A_CHUNK - 1) / L2A_CHUNK;
        if (++s.k == L2A_SEGS || hi == to) {
            const size_t ctas = (chunks + 31) / 32;
            l2_prefetch_kernel<<<ctas < L2A_MAX_CTAS ? (int)ctas : L2A_MAX_CTAS, 32, 0,
                                 a->side>>>(s);
            CUDA_CHECK_LAUNCH();
            s = l2a_segs{};
            chunks = 0;
        }
    }
}

extern "C" void cuda_l2_ahead_begin(cuda_l2_ahead *a, cudaStream_t main) {
    if (!a) return;
    a->next = 0;
    a->cursor = a->ahead;
    a->forked = false;
    prefetch(a, 0, a->ahead, main);
}

extern "C" void cuda_l2_ahead_after(cuda_l2_ahead *a, const void *p, cudaStream_t main) {
    if (!a) return;
    int i = a->next;
    while (i < a->nw && a->w[i].p != (const char *)p) i++;
    if (i >= a->nw) return;
    a->next = i + 1;
    if (a->next == a->nw) return;
    const size_t start = a->w[a->next].start, to = start + a->ahead;
    const size_t from = a->cursor > start ? a->cursor : start;
    if (to > a->cursor) a->cursor = to;
    prefetch(a, from, to, main);
}

extern "C" void cuda_l2_ahead_end(cuda_l2_ahead *a, cudaStream_t main) {
    if (!a || !a->forked) return;
    CUDA_CHECK(cudaEventRecord(a->ev, a->side));
    CUDA_CHECK(cudaStreamWaitEvent(main, a->ev, 0));
    a->forked = false;
}

extern "C" void cuda_l2_ahead_free(cuda_l2_ahead *a) {
    if (!a) return;
    CUDA_CHECK(cudaEventDestroy(a->ev));
    CUDA_CHECK(cudaStreamDestroy(a->side));
    free(a->w);
    free(a);
}
