/* rope.cuh — RoPE (Su et al. 2021) fused with the paged KV-cache write (rope.cu). */
#ifndef SI_BACKEND_CUDA_ROPE_CUH
#define SI_BACKEND_CUDA_ROPE_CUH
#include "backend/cuda/cuda_common.cuh"
#define ROPE_THREADS 256
#define ROPE_KV_BLOCK 16 /* KV_BLOCK_SIZE of model/kv_cache.h */
#endif
