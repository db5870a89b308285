/* model.h — a loaded model: hyper-parameters, weight views into the mapped GGUF, tokenizer.
 *
 * The llama family (llama, mistral-as-llama, qwen2) shares one forward pass (forward.c); the
 * architecture table (arch.c) says how each one names its tensors and metadata and which
 * options it uses (RoPE style, QKV bias). */
#ifndef SI_MODEL_MODEL_H
#define SI_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/thread_pool.h"
#include "model/gguf.h"
#include "swiftinfer.h"
#include "tokenizer/tokenizer.h"

/* A weight matrix or vector: a view of n_rows rows of n_cols elements, rows contiguous. */
typedef struct si_tensor {
    const void *data; /* NULL: absent (optional tensors) */
    si_type type;
    int64_t n_cols; /* GGUF ne[0]: the input dimension of a matmul */
    int64_t n_rows; /* GGUF ne[1]: the output dimension */
} si_tensor;

typedef enum rope_style {
    ROPE_NORM, /* pairs (2i, 2i+1): llama GGUFs (the converter permutes Wq/Wk) */
    ROPE_NEOX, /* pairs (i, i + d/2): qwen2 and HF-layout models */
} rope_style;

typedef struct model_hparams {
    int32_t n_vocab;
    int32_t n_embd;     /* model width */
    int32_t n_layer;
    int32_t n_head;     /* query heads */
    int32_t n_head_kv;  /* key/value heads (GQA when < n_head) */
    int32_t head_dim;
    int32_t n_ff;       /* feed-forward width */
    int32_t n_ctx_train;
    int32_t rope_dim;   /* dimensions rotated per head (<= head_dim) */
    float rope_freq_base;
    float rope_freq_scale; /* 1 / linear scaling factor */
    float rms_eps;
    rope_style rope;
} model_hparams;

typedef struct model_layer {
    si_tensor attn_norm; /* (n_embd) f32 */
    si_tensor wq;        /* (n_embd -> n_head * head_dim) */
    si_tensor wk;        /* (n_embd -> n_head_kv * head_dim) */
    si_tensor wv;        /* (n_embd -> n_head_kv * head_dim) */
    si_tensor bq, bk, bv; /* qwen2 biases, f32; data NULL when absent */
    si_tensor wo;        /* (n_head * head_dim -> n_embd) */
    si_tensor ffn_norm;  /* (n_embd) f32 */
    si_tensor w_gate;    /* (n_embd -> n_ff) */
    si_tensor w_up;      /* (n_embd -> n_ff) */
    si_tensor w_down;    /* (n_ff -> n_embd) */
} model_layer;

struct si_model {
    char *path;
    gguf_file *file;
    const char *arch; /* general.architecture, owned by file */
    model_hparams hp;
    si_tensor tok_embd;    /* (n_vocab rows of n_embd) */
    si_tensor output_norm; /* (n_embd) f32 */
    si_tensor output;      /* (n_embd -> n_vocab); tok_embd when tied */
    const float *rope_freqs; /* (rope_dim / 2) frequency divisors (Llama 3.1), or NULL */
    model_layer *layers;   /* [n_layer] */
    tokenizer *tok;
    const char *chat_template; /* tokenizer.chat_template or NULL, owned by file */
    int32_t n_ctx;
    thread_pool *pool;
    si_device device; /* resolved at load: SI_DEVICE_CPU or SI_DEVICE_CUDA (backend/backend.h) */
};

/* Fills m->hp and the tensor views from m->file per the architecture table; errors name the
 * file and the missing key or tensor. */
si_status arch_load(si_model *m);

#endif
