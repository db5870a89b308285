/* pdl.cu — whether kernels are launched with programmatic dependent launch (pdl.cuh). */
#include "backend/cuda/pdl.cuh"

static int g_pdl = -1; /* -1: not decided yet */

extern "C" int cuda_pdl_on(void) {
    if (g_pdl < 0) {
        const char *e = getenv("SI_CUDA_PDL");
        int dev = 0, major = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        g_pdl = major >= 9 && !(e && e[0] == '0');
    }
    return g_pdl;
}
