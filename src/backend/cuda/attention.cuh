/* attention.cuh — paged decode attention (attention.cu). */
#ifndef SI_BACKEND_CUDA_ATTENTION_CUH
#define SI_BACKEND_CUDA_ATTENTION_CUH
#include "backend/cuda/cuda_common.cuh"
#define ATTN_WARPS 4
#define ATTN_PART 256  /* keys per CTA: the flash-decoding split */
#define ATTN_MAXG 8    /* query heads per KV head (GQA group) */
#define ATTN_KV_BLOCK 16
#endif
