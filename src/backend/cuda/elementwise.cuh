/* elementwise.cuh — SwiGLU, residual add, embedding rows, greedy argmax (elementwise.cu). */
#ifndef SI_BACKEND_CUDA_ELEMENTWISE_CUH
#define SI_BACKEND_CUDA_ELEMENTWISE_CUH
#include "backend/cuda/dequant.cuh"
#define EW_THREADS 256
#define ARGMAX_THREADS 1024
#endif
