/* cuda_weights.h — a model's weights on the GPU (cuda_weights.c): uploaded once into one device
 * allocation, shared by every CUDA state of the same si_model (an engine and a session do not
 * hold two copies), released with the last. Private to the CUDA backend. */
#ifndef SI_BACKEND_CUDA_WEIGHTS_H
#define SI_BACKEND_CUDA_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model.h"

#define ALIGN_UP(n) (((n) + 255) & ~(size_t)255)
#define MiB(n) ((double)(n) / (1024.0 * 1024.0))

typedef struct dev_mat {
    const void *d; /* GGUF row-major blocks, as in the file */
    si_type type;
    int M, K; /* rows (outputs), columns (inputs) */
} dev_mat;

/* NOTE: Wq, Wk and Wv of one type (the usual case) are uploaded as ONE matrix, their rows one
 * after another (GGUF rows are independent, so the concatenated row bytes are a valid matrix):
 * Q, K and V are then one matmul into rows [q | k | v]. Gate and up likewise, then a row-wise
 * SwiGLU reads the two halves. When only Wv's type differs (llama.cpp's Q4_K_M and Q5_K_M give
 * some layers a Q6_K attn_v), Wq and Wk are one matrix (rows [q | k]) and Wv its own. Other
 * mixes keep separate matmuls. */
typedef struct dev_layer {
    const float *attn_norm, *ffn_norm; /* (n_embd) */
    const float *b_qkv;                /* qwen2: [bq | bk | bv] (q_dim + 2 kv_dim) or NULL */
    bool qkv_fused, qk_fused, gate_up_fused;
    dev_mat wqkv;   /* qkv_fused: (q_dim + 2 kv_dim, n_embd); qk_fused: (q_dim + kv_dim, n_embd) */
    dev_mat wq, wk; /* neither fused */
    dev_mat wv;     /* not qkv_fused */
    dev_mat wo;
    dev_mat w_gate_up;                 /* fused: (2 n_ff, n_embd) */
    dev_mat w_gate, w_up;              /* not fused */
    dev_mat w_down;
} dev_layer;

typedef struct cuda_weights {
    const si_model *m;
    int refs;
    void *buf; /* the one allocation */
    size_t bytes;
    dev_mat tok_embd, output;
    const float *output_norm;
    const float *rope_freqs; /* (rope_dim / 2) or NULL */
    dev_layer *layers;       /* [n_layer] */
    struct cuda_weights *next;
} cuda_weights;

/* The weights of m on the device, uploaded at the first call (with a progress bar and the time it
 * took on stderr), else the copy already there with one more reference. A clear error when they
 * do not fit the GPU's free memory. */
si_status cuda_weights_get(const si_model *m, cuda_weights **out);

/* Drops a reference; the last frees the device allocation. */
void cuda_weights_put(cuda_weights *w);

/* The device bytes an upload of m's weights would take: 0 when they are already there. */
si_status cuda_weights_bytes_to_upload(const si_model *m, size_t *bytes);

/* True when a and b can be uploaded as one matrix: same type, same row length. */
bool cuda_weights_fusable(const si_tensor *a, const si_tensor *b);
/* the rows of a layer's fused Q/K(/V) matrix (dev_layer's NOTE): q_dim + 2 kv_dim (qkv_fused),
 * q_dim + kv_dim (qk_fused) or 0 (none) */
int64_t cuda_weights_qk_rows(const model_layer *L);

/* Monotonic seconds, and when the program started (its static constructors ran): the "start to
 * ready" time the backend reports. */
double cuda_now_s(void);
double cuda_program_start_s(void);
#endif
