/* synth.c — writing synthetic GGUF models (see synth.h).
 *
 * NOTE: streaming. gguf_writer references each tensor's data until gguf_writer_write, which
 * would mean holding a whole 7B model in memory. Instead every tensor is added pointing at one
 * read-only anonymous mapping of zero pages (costing no memory), the writer lays out the header
 * and a zero-filled data section, and the data is then generated a chunk of rows at a time and
 * pwrite()n in place at the offsets the written header gives. The price is writing the data
 * section twice; memory stays at a few chunks whatever the model size.
 *
 * Random numbers: splitmix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
 * generators", OOPSLA 2014) seeded per row from (seed, FNV-1a of the tensor name, row), and the
 * Box-Muller transform for normals. Per-row seeding makes the result independent of the thread
 * count and of which other tensors exist.
 *
 * NOTE: speed. A 7B model is 7e9 normals, so the generator must cost a few ns each: splitmix64
 * is counter-based (output k mixes seed + k * gamma), so a pass of 128 pairs has no serial
 * dependence, and Box-Muller uses float polynomials for ln, sin and cos (absolute error < 1e-6
 * on the N(0, 1) value against libm in double) in branch-free code that the compiler
 * vectorises. Box-Muller rather than a Ziggurat because the Ziggurat's rejection branch does not
 * vectorise. Each thread pwrite()s the rows it generated, overlapping writing with generation. */
#include "model/synth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "model/gguf.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"

/* ---- shapes -------------------------------------------------------------------------------- */

typedef struct synth_shape_def {
    const char *name;
    synth_dims d;
} synth_shape_def;

/* arch, embd, ff, layers, heads, kv heads, vocab, ctx, rope base, rms eps, tied */
static const synth_shape_def SHAPES[] = {
    {"tiny", {"llama", 256, 512, 2, 4, 2, 0, 256, 10000.0f, 1e-5f, false}},
    /* NOTE: tiny-qwen2 ties its embeddings (as Qwen2-0.5B does), so the tied path is tested */
    {"tiny-qwen2", {"qwen2", 256, 512, 2, 4, 2, 0, 256, 1000000.0f, 1e-6f, true}},
    {"smollm2-135m", {"llama", 576, 1536, 30, 9, 3, 49152, 8192, 100000.0f, 1e-5f, true}},
    {"tinyllama-1.1b", {"llama", 2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f, 1e-5f, false}},
    {"llama2-7b", {"llama", 4096, 11008, 32, 32, 32, 32000, 4096, 10000.0f, 1e-5f, false}},
    {"llama3-8b", {"llama", 4096, 14336, 32, 32, 8, 128256, 8192, 500000.0f, 1e-5f, false}},
    {"qwen2-7b", {"qwen2", 3584, 18944, 28, 28, 4, 152064, 32768, 1000000.0f, 1e-6f, false}},
};
#define N_SHAPES (sizeof SHAPES / sizeof SHAPES[0])

const char *const SYNTH_SHAPE_NAMES[] = {"tiny", "tiny-qwen2", "smollm2-135m", "tinyllama-1.1b",
                                         "llama2-7b", "llama3-8b", "qwen2-7b", NULL};

si_status synth_shape(const char *name, synth_dims *out) {
    for (size_t i = 0; name && i < N_SHAPES; i++)
        if (strcmp(SHAPES[i].name, name) == 0) {
            *out = SHAPES[i].d;
            return SI_OK;
        }
    return si_error(SI_ERR_INVALID_ARG, "unknown shape '%s' (known: tiny, tiny-qwen2, "
                    "smollm2-135m, tinyllama-1.1b, llama2-7b, llama3-8b, qwen2-7b)",
                    name ? name : "(null)");
}

si_status synth_params_init(synth_params *p, const char *shape) {
    *p = (synth_params){.type = SI_TYPE_F16};
    return synth_shape(shape, &p->dims);
}

/* ---- random numbers ------------------------------------------------------------------------ */

static uint64_t splitmix64_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* ln(u) for u in (0, 1]: u = m * 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(z) with
 * z = (m - 1) / (m + 1), |z| < 0.172, summed to z^9 (truncation < 2e-9). */
static float ln_unit(float u) {
    const uint32_t b = fp32_to_bits(u), mant = b & 0x007FFFFFu;
    const uint32_t big = mant > 0x3504F3u; /* m > sqrt(2) (by its mantissa bits): use m / 2 */
    const float m = fp32_from_bits(mant | (0x3F800000u - (big << 23)));
    const int32_t e = (int32_t)(b >> 23) - 127 + (int32_t)big;
    const float z = (m - 1.0f) / (m + 1.0f), z2 = z * z;
    const float p = 1.0f + z2 * (1.0f / 3 + z2 * (1.0f / 5 + z2 * (1.0f / 7 + z2 * (1.0f / 9))));
    return (float)e * 0.69314718f + 2.0f * z * p;
}

/* sqrt(y) for y >= 0 as y * (1 / sqrt(y)): the bit-trick estimate of 1 / sqrt(y) and three Newton
 * steps (relative error 2e-3, 5e-6, then float rounding). Not sqrtf, whose errno path keeps the
 * compiler from vectorising the loop. */
static float sqrt_nonneg(float y) {
    float r = fp32_from_bits(0x5F3759DFu - (fp32_to_bits(y) >> 1));
    r = r * (1.5f - 0.5f * y * r * r);
    r = r * (1.5f - 0.5f * y * r * r);
    r = r * (1.5f - 0.5f * y * r * r);
    return y * r;
}

#define PAIRS_PER_PASS 128

/* n samples of mean + std * N(0, 1) from the stream of (seed, name hash, row): Box-Muller on 64
 * random bits per pair, 24 for the radius and 24 for the angle. Branch-free float code, so the
 * compiler vectorises it. */
static void gen_normal(float *x, int64_t n, uint64_t seed, uint64_t name_hash, int64_t row,
                       float mean, float std) {
    const uint64_t s0 = splitmix64_mix(seed ^ name_hash ^ ((uint64_t)row * 0xD1B54A32D192ED03ull));
    const float two_pi_24 = 6.28318531f / 16777216.0f; /* 2 pi / 2^24 */
    float a[PAIRS_PER_PASS], b[PAIRS_PER_PASS];
    for (int64_t p0 = 0; 2 * p0 < n; p0 += PAIRS_PER_PASS) {
        for (int k = 0; k < PAIRS_PER_PASS; k++) {
            /* splitmix64's k-th output is a mix of the k-th counter value */
            const uint64_t r = splitmix64_mix(s0 + (uint64_t)(p0 + k + 1) * 0x9E3779B97F4A7C15ull);
            /* radius from u in (0, 1]: finite log, tails cut at 5.8 sigma */
            const float u = (float)((int32_t)(r >> 40) + 1) * (1.0f / 16777216.0f);
            const float rad = std * sqrt_nonneg(-2.0f * ln_unit(u) + 0.0f);
            /* angle 2 pi v / 2^24 (v: the low 24 bits) = q quarter turns + ang in [-pi/4, pi/4) */
            const uint32_t t = ((uint32_t)r & 0xFFFFFFu) + (1u << 21);
            const uint32_t q = (t >> 22) & 3u;
            const float ang = (float)((int32_t)(t & 0x3FFFFFu) - (1 << 21)) * two_pi_24;
            const float a2 = ang * ang;
            /* Taylor to x^9 / x^10 on |x| <= pi/4: truncation < 2e-9 */
            const float s = ang * (1.0f + a2 * (-1.0f / 6 + a2 * (1.0f / 120 + a2 * (-1.0f / 5040 +
                                                                 a2 * (1.0f / 362880)))));
            const float c = 1.0f + a2 * (-0.5f + a2 * (1.0f / 24 + a2 * (-1.0f / 720 +
                                         a2 * (1.0f / 40320 + a2 * (-1.0f / 3628800)))));
            /* rotate by q quarter turns: (cos, sin) = (c, s), (-s, c), (-c, -s), (s, -c) */
            /* (integer selects: float ones are not if-converted, so would not vectorise) */
            const uint32_t swap = 0u - (q & 1u), sb = fp32_to_bits(s), cb = fp32_to_bits(c);
            const uint32_t cneg = ((q + 1u) & 2u) << 30, sneg = (q & 2u) << 30;
            a[k] = rad * fp32_from_bits(((sb & swap) | (cb & ~swap)) ^ cneg);
            b[k] = rad * fp32_from_bits(((cb & swap) | (sb & ~swap)) ^ sneg);
        }
        const int64_t m = n - 2 * p0 < 2 * PAIRS_PER_PASS ? n - 2 * p0 : 2 * PAIRS_PER_PASS;
        for (int64_t i = 0; i < m; i++) x[2 * p0 + i] = mean + ((i & 1) ? b[i / 2] : a[i / 2]);
    }
}

/* ---- the tensor plan ----------------------------------------------------------------------- */

typedef enum { T_MATRIX, T_NORM, T_BIAS } tensor_kind;

typedef struct plan_tensor {
    char name[64];
    tensor_kind kind;
    int64_t n_cols, n_rows; /* ne[0], ne[1] (n_rows 1: a vector) */
    si_type type;           /* stored type */
    si_type qtype;          /* the type the values are quantised to (type, or F32's source) */
    size_t row_bytes, nbytes;
    uint64_t offset;        /* absolute file offset of the data, once written */
} plan_tensor;

typedef struct plan {
    plan_tensor *t;
    int n, cap;
} plan;

/* llama.cpp's use_more_bits: the layers of a *_K_M file whose attn_v and ffn_down get Q6_K */
static bool k_m_more_bits(int il, int n_layer) {
    return il < n_layer / 8 || il >= 7 * n_layer / 8 || (il - n_layer / 8) % 3 == 2;
}

/* The type of weight `name` (layer il, -1 outside the layers) with rows of n_cols: p->type, or
 * under p->k_m the mixture synth_params describes. */
static si_type weight_type(const synth_params *p, const char *name, int il, int64_t n_cols) {
    if (!p->k_m) return p->type;
    si_type t = p->type;
    const bool attn_v = il >= 0 && strstr(name, ".attn_v."),
               down = il >= 0 && strstr(name, ".ffn_down.");
    if (!strcmp(name, "output.weight"))
        t = SI_TYPE_Q6_K;
    else if (p->type == SI_TYPE_Q3_K) { /* Q3_K_M */
        if (attn_v)
            t = il < 2 ? SI_TYPE_Q5_K : SI_TYPE_Q4_K;
        else if (down)
            t = il < p->dims.n_layer / 16 ? SI_TYPE_Q5_K : SI_TYPE_Q4_K;
        else if (il >= 0 && strstr(name, ".attn_output."))
            t = SI_TYPE_Q4_K;
    } else if ((attn_v || down) && k_m_more_bits(il, p->dims.n_layer))
        t = SI_TYPE_Q6_K;
    if (n_cols % QK_K == 0) return t;
    switch (t) {
    case SI_TYPE_Q3_K: return SI_TYPE_Q4_0;
    case SI_TYPE_Q4_K: return SI_TYPE_Q5_0;
    case SI_TYPE_Q5_K: return SI_TYPE_Q5_1;
    default: return SI_TYPE_Q8_0;
    }
}

static si_status plan_add(plan *pl, const char *name, tensor_kind kind, int64_t n_cols,
                          int64_t n_rows, int il, const synth_params *p) {
    if (p->omit_tensor && strcmp(name, p->omit_tensor) == 0) return SI_OK;
    if (pl->n == pl->cap) {
        int cap = pl->cap ? 2 * pl->cap : 64;
        plan_tensor *nt = realloc(pl->t, (size_t)cap * sizeof *nt);
        if (!nt) return si_error(SI_ERR_NOMEM, "synth: out of memory");
        pl->t = nt;
        pl->cap = cap;
    }
    plan_tensor *t = &pl->t[pl->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->n_cols = n_cols;
    t->n_rows = n_rows;
    t->qtype = kind == T_MATRIX ? weight_type(p, name, il, n_cols) : SI_TYPE_F32;
    t->type = p->dequantize ? SI_TYPE_F32 : t->qtype;
    if (kind == T_MATRIX) {
        const quant_traits *q = quant_get(t->qtype);
        if (n_cols % q->block_size != 0)
            return si_error(SI_ERR_INVALID_ARG, "synth: tensor '%s' has rows of %lld elements, "
                            "not a multiple of %s's block size %d; pick another type or shape",
                            name, (long long)n_cols, q->name, q->block_size);
    }
    t->row_bytes = quant_row_size(t->type, n_cols);
    t->nbytes = t->row_bytes * (size_t)n_rows;
    return SI_OK;
}

static si_status plan_build(plan *pl, const synth_params *p, int32_t n_vocab) {
    const synth_dims *d = &p->dims;
    const int64_t head_dim = d->n_embd / d->n_head;
    const int64_t q_dim = d->n_head * head_dim, kv_dim = d->n_head_kv * head_dim;
    const bool bias = strcmp(d->arch, "qwen2") == 0;
    si_status st;
    if ((st = plan_add(pl, "token_embd.weight", T_MATRIX, d->n_embd, n_vocab, -1, p)) ||
        (st = plan_add(pl, "output_norm.weight", T_NORM, d->n_embd, 1, -1, p)))
        return st;
    if (!d->tied && (st = plan_add(pl, "output.weight", T_MATRIX, d->n_embd, n_vocab, -1, p)))
        return st;
    for (int il = 0; il < d->n_layer; il++) {
        char n[64];
#define ADD(suffix, kind, cols, rows)                                                          \
    snprintf(n, sizeof n, "blk.%d.%s", il, suffix);                                            \
    if ((st = plan_add(pl, n, kind, cols, rows, il, p))) return st;
        ADD("attn_norm.weight", T_NORM, d->n_embd, 1)
        ADD("attn_q.weight", T_MATRIX, d->n_embd, q_dim)
        ADD("attn_k.weight", T_MATRIX, d->n_embd, kv_dim)
        ADD("attn_v.weight", T_MATRIX, d->n_embd, kv_dim)
        if (bias) {
            ADD("attn_q.bias", T_BIAS, q_dim, 1)
            ADD("attn_k.bias", T_BIAS, kv_dim, 1)
            ADD("attn_v.bias", T_BIAS, kv_dim, 1)
        }
        ADD("attn_output.weight", T_MATRIX, q_dim, d->n_embd)
        ADD("ffn_norm.weight", T_NORM, d->n_embd, 1)
        ADD("ffn_gate.weight", T_MATRIX, d->n_embd, d->n_ff)
        ADD("ffn_up.weight", T_MATRIX, d->n_embd, d->n_ff)
        ADD("ffn_down.weight", T_MATRIX, d->n_ff, d->n_embd)
#undef ADD
    }
    return SI_OK;
}

/* ---- the vocabulary ------------------------------------------------------------------------ */

/* GPT-2's byte-to-unicode map: printable Latin-1 bytes stand for themselves, the other 68
 * bytes for U+0100.. in byte order, so every byte has a visible character (space is 'Ġ'). */
static uint32_t byte_to_codepoint(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
        return (uint32_t)b;
    uint32_t n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) n++;
    return 256 + n;
}

static int utf8_put(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6)); /* every code point here is below U+0800 */
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

enum { TOK_NORMAL = 1, TOK_CONTROL = 3, TOK_UNUSED = 5 };
static const char COMMON_LETTERS[] = "etaoinshrdlu";
#define N_SPACE_MERGES 26
#define N_PAIR_MERGES ((int)(sizeof COMMON_LETTERS - 1) * (int)(sizeof COMMON_LETTERS - 1))
#define SYNTH_NATURAL_VOCAB (256 + N_SPACE_MERGES + N_PAIR_MERGES + 2)

/* Sets the tokenizer.* keys of a byte-level BPE vocabulary of n_vocab tokens (0: its natural
 * size): 256 byte tokens, merges "Ġ x" for each letter and "x y" for pairs of common letters,
 * "<s>" (BOS) and "</s>" (EOS) as control tokens, then "<unused_N>" fillers. */
static si_status vocab_synthetic(gguf_writer *w, int32_t *n_vocab) {
    int32_t n = *n_vocab ? *n_vocab : SYNTH_NATURAL_VOCAB;
    if (n < 258)
        return si_error(SI_ERR_INVALID_ARG, "synth: n_vocab %d is too small for the synthetic "
                        "vocabulary (256 bytes + BOS + EOS)", n);
    int n_merges = n - 258 < N_SPACE_MERGES + N_PAIR_MERGES ? n - 258
                                                            : N_SPACE_MERGES + N_PAIR_MERGES;
    char **tok = calloc((size_t)n, sizeof *tok);
    char **mrg = calloc((size_t)n_merges + 1, sizeof *mrg);
    int32_t *type = malloc((size_t)n * sizeof *type);
    si_status st = SI_ERR_NOMEM;
    int32_t id = 0;
    if (!tok || !mrg || !type) goto done;
    for (int b = 0; b < 256; b++, id++) {
        char s[4] = {0};
        utf8_put(s, byte_to_codepoint(b));
        if (!(tok[id] = strdup(s))) goto done;
        type[id] = TOK_NORMAL;
    }
    char sp[4] = {0};
    utf8_put(sp, byte_to_codepoint(' '));
    for (int k = 0; k < n_merges; k++, id++) {
        char l[4] = {0}, r[2] = {0};
        if (k < N_SPACE_MERGES) {
            memcpy(l, sp, sizeof sp);
            r[0] = (char)('a' + k);
        } else {
            const int j = k - N_SPACE_MERGES, nl = (int)sizeof COMMON_LETTERS - 1;
            l[0] = COMMON_LETTERS[j / nl];
            r[0] = COMMON_LETTERS[j % nl];
        }
        char m[16], t[16];
        snprintf(m, sizeof m, "%s %s", l, r);
        snprintf(t, sizeof t, "%s%s", l, r);
        if (!(mrg[k] = strdup(m)) || !(tok[id] = strdup(t))) goto done;
        type[id] = TOK_NORMAL;
    }
    const int32_t bos = id, eos = id + 1;
    if (!(tok[id] = strdup("<s>")) || !(tok[id + 1] = strdup("</s>"))) goto done;
    type[id++] = TOK_CONTROL;
    type[id++] = TOK_CONTROL;
    for (int k = 0; id < n; k++, id++) {
        char f[32];
        snprintf(f, sizeof f, "<unused_%d>", k);
        if (!(tok[id] = strdup(f))) goto done;
        type[id] = TOK_UNUSED;
    }
    if ((st = gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2")) ||
        (st = gguf_writer_set_str(w, "tokenizer.ggml.pre", "default")) ||
        (st = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok,
                                      (uint64_t)n)) ||
        (st = gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, type,
                                  (uint64_t)n)) ||
        (st = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)mrg,
                                      (uint64_t)n_merges)) ||
        (st = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos)) ||
        (st = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos)) ||
        (st = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true)))
        goto done;
    *n_vocab = n;
    st = SI_OK;
done:
    if (st == SI_ERR_NOMEM) si_error(st, "synth: out of memory building the vocabulary");
    for (int32_t i = 0; tok && i < n; i++) free(tok[i]);
    for (int k = 0; mrg && k < n_merges; k++) free(mrg[k]);
    free(tok);
    free(mrg);
    free(type);
    return st;
}

/* Copies every tokenizer.* key of another GGUF; n_vocab becomes its token count. */
static si_status vocab_copy(gguf_writer *w, const char *from, int32_t *n_vocab) {
    gguf_file *f = NULL;
    const gguf_value *toks = NULL;
    si_status st = gguf_open(from, &f);
    if (st) return si_error_wrap(st, "synth: --vocab-from: ");
    if ((st = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks))) {
        st = st == SI_ERR_NOT_FOUND
                 ? si_error(st, "%s: no tokenizer.ggml.tokens to copy a vocabulary from", from)
                 : si_error_wrap(st, "%s: ", from);
        goto done;
    }
    if (toks->arr.n == 0 || toks->arr.n > INT32_MAX) {
        st = si_error(SI_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries", from,
                      (unsigned long long)toks->arr.n);
        goto done;
    }
    *n_vocab = (int32_t)toks->arr.n;
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (strncmp(f->kv[i].key.s, "tokenizer.", 10) == 0 &&
            (st = gguf_writer_set(w, f->kv[i].key.s, &f->kv[i].value)))
            goto done;
done:
    gguf_close(f);
    return st;
}

/* ---- generating the data ------------------------------------------------------------------- */

/* ---- a fast Q4_K encoder -------------------------------------------------------------------- */

/* NOTE: quant/'s Q4_K quantiser (ggml's make_qkx2_quants: a 20-step search for each sub-block's
 * scale and min) costs ~100 ns an element, a minute of 16 cores for a 7B model. Random weights
 * need a valid Q4_K encoding, not the best one, so synth encodes Q4_K in one pass: each
 * sub-block of 32 takes scale (max - min) / 15 and min -min(0, min) (the search's starting
 * point), both rounded to 6 bits against the super-block's largest, and the quants are rounded
 * against those rounded values (as the reference does). Its error is about 20% above the
 * searched encoding's; a model and its --dequantize twin both use it, so they stay exact twins. */
static int round_clamp(float v, int hi) {
    const int i = (int)(v + 0.5f); /* v >= -0.5 in practice; clamping covers the rest */
    return i < 0 ? 0 : i > hi ? hi : i;
}

static void q4_k_encode(const float *x, void *dst, int64_t n) {
    block_q4_K *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float scale[QK_K / 32], min[QK_K / 32], max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < QK_K / 32; j++) {
            float lo = 0.0f, hi = x[32 * j];
            for (int l = 0; l < 32; l++) {
                lo = x[32 * j + l] < lo ? x[32 * j + l] : lo;
                hi = x[32 * j + l] > hi ? x[32 * j + l] : hi;
            }
            scale[j] = (hi - lo) / 15.0f;
            min[j] = -lo;
            max_scale = scale[j] > max_scale ? scale[j] : max_scale;
            max_min = min[j] > max_min ? min[j] : max_min;
        }
        y[b].d = fp32_to_fp16(max_scale / 63.0f);
        y[b].dmin = fp32_to_fp16(max_min / 63.0f);
        const float d = fp16_to_fp32(y[b].d), dmin = fp16_to_fp32(y[b].dmin);
        uint8_t *sc6 = y[b].scales;
        uint8_t L[QK_K];
        memset(sc6, 0, K_SCALE_SIZE);
        for (int j = 0; j < QK_K / 32; j++) {
            const int ls = d > 0.0f ? round_clamp(scale[j] / d, 63) : 0;
            const int lm = dmin > 0.0f ? round_clamp(min[j] / dmin, 63) : 0;
            /* the packing get_scale_min_k4 reads: 6 bits each, high bits of 4..7 in 0..7 */
            if (j < 4) {
                sc6[j] |= (uint8_t)ls;
                sc6[j + 4] |= (uint8_t)lm;
            } else {
                sc6[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
                sc6[j - 4] |= (uint8_t)((ls >> 4) << 6);
                sc6[j] |= (uint8_t)((lm >> 4) << 6);
            }
            const float ds = d * (float)ls, inv = ds > 0.0f ? 1.0f / ds : 0.0f;
            const float m = dmin * (float)lm;
            for (int l = 0; l < 32; l++)
                L[32 * j + l] = (uint8_t)round_clamp((x[32 * j + l] + m) * inv, 15);
        }
        for (int j = 0; j < QK_K; j += 64)
            for (int l = 0; l < 32; l++)
                y[b].qs[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

typedef void (*encode_fn)(const float *x, void *dst, int64_t n);

/* The from_float synth uses for type: the fast encoder for Q4_K, quant/'s otherwise. */
static encode_fn synth_encoder(si_type type) {
    return type == SI_TYPE_Q4_K ? q4_k_encode : quant_get(type)->from_float;
}

/* Writes n bytes at off; on failure returns the errno (EIO for a short write), else 0. */
static int pwrite_all(int fd, const void *buf, size_t n, uint64_t off) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = pwrite(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k < 0 ? errno : EIO;
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

/* One chunk of rows of one tensor. Each thread generates its slice of the rows and pwrite()s it
 * itself, so one thread's write overlaps the others' generation. */
typedef struct fill_job {
    const plan_tensor *t;
    uint64_t seed, name_hash;
    int64_t row0, n_rows;
    int fd;
    uint8_t *out;     /* n_rows * t->row_bytes */
    float *xs;        /* [nth][max_cols] */
    uint8_t *qs;      /* [nth][max_qrow] */
    int64_t max_cols;
    size_t max_qrow;
    /* per thread: the errno of a failed write (0: none) and its file offset; error messages
     * are thread-local, so the calling thread reports them */
    int *err;
    uint64_t *err_off;
} fill_job;

static void fill_worker(void *ctx, int ith, int nth) {
    const fill_job *j = ctx;
    const plan_tensor *t = j->t;
    float *x = j->xs + (size_t)ith * j->max_cols;
    uint8_t *qrow = j->qs + (size_t)ith * j->max_qrow;
    int64_t begin, end;
    pool_split(j->n_rows, ith, nth, &begin, &end);
    for (int64_t r = begin; r < end; r++) {
        uint8_t *dst = j->out + (size_t)r * t->row_bytes;
        const int64_t row = j->row0 + r;
        switch (t->kind) {
        case T_NORM: gen_normal(x, t->n_cols, j->seed, j->name_hash, row, 1.0f, 0.02f); break;
        case T_BIAS: gen_normal(x, t->n_cols, j->seed, j->name_hash, row, 0.0f, 0.1f); break;
        case T_MATRIX: gen_normal(x, t->n_cols, j->seed, j->name_hash, row, 0.0f, 0.02f); break;
        }
        if (t->type != t->qtype) { /* dequantize: the quantised values, stored as f32 */
            synth_encoder(t->qtype)(x, qrow, t->n_cols);
            quant_get(t->qtype)->to_float(qrow, (float *)dst, t->n_cols);
        } else {
            synth_encoder(t->type)(x, dst, t->n_cols);
        }
    }
    if (end > begin && !j->err[ith]) {
        const uint64_t off = t->offset + (uint64_t)(j->row0 + begin) * t->row_bytes;
        j->err[ith] = pwrite_all(j->fd, j->out + (size_t)begin * t->row_bytes,
                                 (size_t)(end - begin) * t->row_bytes, off);
        j->err_off[ith] = off;
    }
}

/* NOTE: 64 MiB chunks give each of 16 threads 4 MiB per pool_run: long enough that the
 * pool's start and end barriers cost nothing, short enough to keep memory small. */
#define CHUNK_BYTES ((size_t)64 << 20)

static si_status fill_data(const plan *pl, const synth_params *p, const char *path) {
    int64_t max_cols = 1;
    size_t total = 0, written = 0, max_chunk = 0, max_qrow = 0;
    for (int i = 0; i < pl->n; i++) {
        const plan_tensor *t = &pl->t[i];
        if (t->n_cols > max_cols) max_cols = t->n_cols;
        const size_t qrow = quant_row_size(t->qtype, t->n_cols) + 64;
        if (qrow > max_qrow) max_qrow = qrow;
        total += t->nbytes;
        size_t rows = CHUNK_BYTES / t->row_bytes ? CHUNK_BYTES / t->row_bytes : 1;
        size_t c = (rows < (size_t)t->n_rows ? rows : (size_t)t->n_rows) * t->row_bytes;
        if (c > max_chunk) max_chunk = c;
    }
    thread_pool *pool = NULL;
    si_status st = pool_create(0, &pool);
    if (st) return st;
    const int nth = pool_size(pool);
    fill_job job = {.seed = p->seed, .max_cols = max_cols, .max_qrow = max_qrow};
    job.xs = malloc((size_t)nth * (size_t)max_cols * sizeof(float));
    job.qs = malloc((size_t)nth * max_qrow);
    job.out = malloc(max_chunk);
    job.err = calloc((size_t)nth, sizeof *job.err);
    job.err_off = calloc((size_t)nth, sizeof *job.err_off);
    job.fd = open(path, O_WRONLY);
    const bool show = p->progress && total > ((size_t)64 << 20);
    int last_pct = -1;
    if (!job.xs || !job.qs || !job.out || !job.err || !job.err_off) {
        st = si_error(SI_ERR_NOMEM, "synth: out of memory");
        goto done;
    }
    if (job.fd < 0) {
        st = si_error(SI_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
        goto done;
    }
    for (int i = 0; i < pl->n && !st; i++) {
        const plan_tensor *t = &pl->t[i];
        const int64_t rows_per = (int64_t)(max_chunk / t->row_bytes);
        job.t = t;
        job.name_hash = fnv1a(t->name);
        for (int64_t r0 = 0; r0 < t->n_rows && !st; r0 += rows_per) {
            job.row0 = r0;
            job.n_rows = t->n_rows - r0 < rows_per ? t->n_rows - r0 : rows_per;
            pool_run(pool, fill_worker, &job);
            for (int k = 0; k < nth && !st; k++)
                if (job.err[k])
                    st = si_error(SI_ERR_IO, "%s: write failed at byte %llu: %s", path,
                                  (unsigned long long)job.err_off[k], strerror(job.err[k]));
            written += (size_t)job.n_rows * t->row_bytes;
            const int pct = (int)(100.0 * (double)written / (double)total);
            if (show && pct != last_pct) {
                fprintf(stderr, "\rsynth: writing weights %3d%%", pct);
                last_pct = pct;
            }
        }
    }
    if (show) fprintf(stderr, "\n");
    if (close(job.fd) != 0 && !st)
        st = si_error(SI_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    job.fd = -1;
done:
    if (job.fd >= 0) close(job.fd);
    free(job.xs);
    free(job.qs);
    free(job.out);
    free(job.err);
    free(job.err_off);
    pool_free(pool);
    return st;
}

/* ---- writing --------------------------------------------------------------------------------- */

static si_status check_params(const synth_params *p) {
    const synth_dims *d = &p->dims;
    const quant_traits *q = quant_get(p->type);
    if (!d->arch || (strcmp(d->arch, "llama") != 0 && strcmp(d->arch, "qwen2") != 0))
        return si_error(SI_ERR_INVALID_ARG, "synth: architecture '%s' is not one synth can write "
                        "(llama, qwen2)", d->arch ? d->arch : "(null)");
    if (!q || !q->from_float || !q->to_float || !q->vec_dot)
        return si_error(SI_ERR_UNSUPPORTED, "synth: type %s (%d) cannot be used for weights",
                        si_type_name(p->type) ? si_type_name(p->type) : "?", (int)p->type);
    if (p->k_m && p->type != SI_TYPE_Q3_K && p->type != SI_TYPE_Q4_K && p->type != SI_TYPE_Q5_K)
        return si_error(SI_ERR_INVALID_ARG,
                        "synth: the _k_m mixture is built around q3_k, q4_k or q5_k, not %s",
                        q->name);
    if (d->n_embd < 1 || d->n_ff < 1 || d->n_layer < 1 || d->n_head < 1 || d->n_head_kv < 1 ||
        d->n_ctx < 1 || d->n_vocab < 0 || !(d->rope_base > 0.0f) || !(d->rms_eps > 0.0f))
        return si_error(SI_ERR_INVALID_ARG, "synth: n_embd, n_ff, n_layer, n_head, n_head_kv, "
                        "n_ctx, rope base and rms eps must be positive");
    if (d->n_embd % d->n_head || (d->n_embd / d->n_head) % 2 || d->n_head % d->n_head_kv)
        return si_error(SI_ERR_INVALID_ARG, "synth: n_embd %d must split into %d heads of an even "
                        "size, and n_head into n_head_kv %d groups", d->n_embd, d->n_head,
                        d->n_head_kv);
    return SI_OK;
}

static si_status set_metadata(gguf_writer *w, const synth_params *p) {
    const synth_dims *d = &p->dims;
    const char *arch = p->arch_override ? p->arch_override : d->arch;
    char k[128];
    si_status st;
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", arch, suffix), k)
    if ((st = gguf_writer_set_str(w, "general.architecture", arch)) ||
        (st = gguf_writer_set_str(w, "general.name", "SwiftInfer synthetic model")) ||
        (st = gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)d->n_layer)) ||
        (st = gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)d->n_ctx)) ||
        (st = gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)d->n_embd)) ||
        (st = gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)d->n_ff)) ||
        (st = gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)d->n_head)) ||
        (st = gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)d->n_head_kv)) ||
        (st = gguf_writer_set_u32(w, KEY("rope.dimension_count"),
                                  (uint32_t)(d->n_embd / d->n_head))) ||
        (st = gguf_writer_set_f32(w, KEY("rope.freq_base"), d->rope_base)) ||
        (st = gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), d->rms_eps)))
        return st;
#undef KEY
    return SI_OK;
}

si_status synth_write(const synth_params *p, const char *path) {
    if (!p || !path) return si_error(SI_ERR_INVALID_ARG, "synth_write: NULL argument");
    si_status st = check_params(p);
    if (st) return st;

    gguf_writer *w = gguf_writer_new();
    plan pl = {0};
    gguf_file *f = NULL;
    void *zeros = MAP_FAILED;
    size_t zeros_size = 0;
    const size_t plen = strlen(path);
    char *partial = malloc(plen + 9);
    bool wrote = false;
    if (!w || !partial) {
        st = si_error(SI_ERR_NOMEM, "synth: out of memory");
        goto done;
    }
    memcpy(partial, path, plen);
    memcpy(partial + plen, ".partial", 9);

    int32_t n_vocab = p->dims.n_vocab;
    if ((st = set_metadata(w, p)) ||
        (st = p->vocab_from ? vocab_copy(w, p->vocab_from, &n_vocab)
                            : vocab_synthetic(w, &n_vocab)) ||
        (st = plan_build(&pl, p, n_vocab)))
        goto done;

    /* Header and zero-filled data section first; see the NOTE at the top. */
    for (int i = 0; i < pl.n; i++)
        if (pl.t[i].nbytes > zeros_size) zeros_size = pl.t[i].nbytes;
    zeros = mmap(NULL, zeros_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (zeros == MAP_FAILED) {
        st = si_error(SI_ERR_NOMEM, "synth: cannot map %zu bytes: %s", zeros_size,
                      strerror(errno));
        goto done;
    }
    for (int i = 0; i < pl.n; i++) {
        const plan_tensor *t = &pl.t[i];
        const int64_t ne[2] = {t->n_cols, t->n_rows};
        if ((st = gguf_writer_add_tensor(w, t->name, t->type, t->n_rows > 1 ? 2 : 1, ne, zeros)))
            goto done;
    }
    if ((st = gguf_writer_write(w, partial))) goto done;
    wrote = true;
    /* The offsets, as the written header has them. */
    if ((st = gguf_open(partial, &f))) goto done;
    for (int i = 0; i < pl.n; i++) {
        const gguf_tensor *gt = gguf_find_tensor(f, pl.t[i].name);
        if (!gt || gt->nbytes != pl.t[i].nbytes) {
            st = si_error(SI_ERR_INTERNAL, "synth: tensor '%s' not laid out as planned",
                          pl.t[i].name);
            goto done;
        }
        pl.t[i].offset = f->data_offset + gt->offset;
    }
    gguf_close(f);
    f = NULL;
    if ((st = fill_data(&pl, p, partial))) goto done;
    if (rename(partial, path) != 0) {
        st = si_error(SI_ERR_IO, "%s: cannot rename %s into place: %s", path, partial,
                      strerror(errno));
        goto done;
    }
    wrote = false;
done:
    if (wrote) unlink(partial);
    gguf_close(f);
    if (zeros != MAP_FAILED) munmap(zeros, zeros_size);
    free(pl.t);
    free(partial);
    gguf_writer_free(w);
    return st;
}
