/* synth.h — synthetic models: GGUF files with random weights in the shape of a real model.
 *
 * Used to test the loader and forward pass at every weight type without downloading weights,
 * and to benchmark real model shapes (SmolLM2, TinyLlama, Llama 2/3, Qwen2). Weights come from a
 * seeded PRNG (splitmix64 + Box-Muller) and are scaled like a trained model's (matrices
 * N(0, 0.02), norm weights 1 + N(0, 0.02)) so activations stay finite and logits vary. The
 * values of a tensor depend only on the seed and the tensor's name, never on the type or on the
 * other tensors, so the same seed in two types gives two quantisations of the same weights. */
#ifndef SI_MODEL_SYNTH_H
#define SI_MODEL_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "swiftinfer.h"

/* The shape of a synthetic model. */
typedef struct synth_dims {
    const char *arch;  /* "llama" or "qwen2" (qwen2 adds attn_{q,k,v}.bias and NEOX RoPE) */
    int32_t n_embd;
    int32_t n_ff;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t n_vocab;   /* 0: the synthetic vocabulary's own size (ignored with vocab_from) */
    int32_t n_ctx;     /* {arch}.context_length */
    float rope_base;   /* {arch}.rope.freq_base */
    float rms_eps;     /* {arch}.attention.layer_norm_rms_epsilon */
    bool tied;         /* no output.weight: the output projection reuses token_embd */
} synth_dims;

typedef struct synth_params {
    synth_dims dims;
    si_type type;           /* every 2-D weight, token_embd and output included (but see k_m) */
    /* llama.cpp's *_K_M mixture around type (Q3_K, Q4_K or Q5_K; llama_tensor_get_type): output
     * is Q6_K; around Q4_K/Q5_K, in the layers it gives more bits (the first and last eighth,
     * every third between), attn_v and ffn_down are Q6_K; around Q3_K (Q3_K_M), attn_v is Q5_K in
     * layers 0-1 and Q4_K after, ffn_down Q5_K in the first sixteenth of the layers and Q4_K
     * after, attn_output Q4_K. A weight whose rows are no multiple of 256 takes llama.cpp's
     * fallback (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; Q3_K -> Q4_0, as llama.cpp chose
     * before its IQ4_NL, a type SwiftInfer does not have). */
    bool k_m;
    uint64_t seed;
    const char *vocab_from; /* copy the tokenizer.* keys of this GGUF; NULL: synthetic BPE */
    /* Quantise the weights to `type`, then store them dequantised as f32: a model whose f32
     * weights equal the quantised model's exactly, for comparing forward passes. */
    bool dequantize;
    bool progress;          /* print a percentage to stderr for large models */
    /* For testing loaders: leave out this tensor (NULL: none), and write this
     * general.architecture instead of dims.arch (NULL: dims.arch). */
    const char *omit_tensor;
    const char *arch_override;
} synth_params;

/* Fills *out with the dims of a named shape: tiny, tiny-qwen2, smollm2-135m, tinyllama-1.1b,
 * llama2-7b, llama3-8b, qwen2-7b. SI_ERR_INVALID_ARG (message listing the names) if unknown. */
si_status synth_shape(const char *name, synth_dims *out);

/* The names of the shapes, NULL-terminated, for help texts. */
extern const char *const SYNTH_SHAPE_NAMES[];

/* Parameters for a named shape with type f16, seed 0, synthetic vocabulary. */
si_status synth_params_init(synth_params *p, const char *shape);

/* Writes the model to path (atomically: to a temporary file renamed into place on success).
 * Generation streams: only a bounded chunk of rows is in memory at a time, whatever the size.
 * Errors: SI_ERR_INVALID_ARG for inconsistent dims or a weight row length that is not a
 * multiple of the type's block size (naming the tensor and type), SI_ERR_UNSUPPORTED for a
 * type without a quantiser, SI_ERR_IO / SI_ERR_FORMAT for vocab_from and the output file. */
si_status synth_write(const synth_params *p, const char *path);

#endif
