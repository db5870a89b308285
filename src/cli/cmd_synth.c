/* cmd_synth.c — `swiftinfer synth`: write a GGUF model with random weights in a named shape or
 * custom dimensions, for tests and benchmarks without downloading weights (see model/synth.h). */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "model/synth.h"

static void usage(FILE *f) {
    fprintf(f, "usage: swiftinfer synth -o FILE [options]\n\n"
               "Writes a GGUF model with seeded random weights (matrices N(0, 0.02), norms\n"
               "1 + N(0, 0.02)) in the shape of a real model.\n\n"
               "  -o, --output FILE    the GGUF file to write\n"
               "      --shape NAME     tiny (default), tiny-qwen2, smollm2-135m, tinyllama-1.1b,\n"
               "                       llama2-7b, llama3-8b, qwen2-7b\n"
               "      --type TYPE      type of the weight matrices (default f16): f32, f16, bf16,\n"
               "                       q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k,\n"
               "                       iq4_nl, iq4_xs;\n"
               "                       q3_k_m, q4_k_m, q5_k_m: llama.cpp's mixtures (output\n"
               "                       q6_k; some layers' attn_v/ffn_down q6_k, or in q3_k_m\n"
               "                       q4_k/q5_k with attn_output q4_k; rows not a multiple of\n"
               "                       256 fall back to q4_0/q5_0/q5_1/q8_0)\n"
               "      --seed N         random seed (default 0)\n"
               "      --vocab-from F   copy the tokenizer of GGUF file F (default: a synthetic\n"
               "                       byte-level BPE vocabulary)\n"
               "      --dequantize     quantise to TYPE, store the dequantised weights as f32\n"
               "  Overriding the shape's dimensions:\n"
               "      --arch llama|qwen2 --n-embd N --n-ff N --n-layer N --n-head N\n"
               "      --n-head-kv N --n-vocab N --n-ctx N --rope-base X\n");
}

/* The type whose si_type_name is name (case-insensitive), or -1. */
static int parse_type(const char *name) {
    for (int t = 0; t < (int)SI_TYPE_COUNT; t++) {
        const char *n = si_type_name((si_type)t);
        if (n && strcasecmp(n, name) == 0) return t;
    }
    return -1;
}

int cmd_synth(int argc, char **argv) {
    const char *out = NULL, *shape = "tiny", *type = "f16";
    synth_params p;
    /* dimension overrides, applied after the shape: -1 means "keep the shape's" */
    long dims[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    static const char *const DIM_FLAGS[8] = {"--n-embd", "--n-ff", "--n-layer", "--n-head",
                                             "--n-head-kv", "--n-vocab", "--n-ctx", NULL};
    const char *arch = NULL;
    double rope_base = -1.0;
    long seed = 0;
    bool dequantize = false;
    const char *vocab_from = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has_val = i + 1 < argc;
        int d = -1;
        for (int k = 0; DIM_FLAGS[k]; k++)
            if (!strcmp(a, DIM_FLAGS[k])) d = k;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && has_val) {
            out = argv[++i];
        } else if (!strcmp(a, "--shape") && has_val) {
            shape = argv[++i];
        } else if (!strcmp(a, "--type") && has_val) {
            type = argv[++i];
        } else if (!strcmp(a, "--seed") && has_val) {
            if (!cli_parse_int(a, argv[++i], 0, LONG_MAX, &seed)) return 2;
        } else if (!strcmp(a, "--vocab-from") && has_val) {
            vocab_from = argv[++i];
        } else if (!strcmp(a, "--dequantize")) {
            dequantize = true;
        } else if (!strcmp(a, "--arch") && has_val) {
            arch = argv[++i];
        } else if (!strcmp(a, "--rope-base") && has_val) {
            if (!cli_parse_float(a, argv[++i], 1.0, 1e12, &rope_base)) return 2;
        } else if (d >= 0 && has_val) {
            if (!cli_parse_int(a, argv[++i], d == 5 ? 0 : 1, 1 << 30, &dims[d])) return 2;
        } else {
            return cli_fail("synth: unknown option or missing value '%s' (try --help)", a) + 1;
        }
    }
    if (!out) return cli_fail("synth: no output file given (use -o FILE)") + 1;
    si_status st = synth_params_init(&p, shape);
    if (st) return cli_fail_status(st) + 1;
    char base[16];
    const size_t tl = strlen(type);
    p.k_m = tl > 2 && tl < sizeof base && strcasecmp(type + tl - 2, "_m") == 0;
    snprintf(base, sizeof base, "%.*s", p.k_m ? (int)(tl - 2) : (int)sizeof base - 1, type);
    const int t = parse_type(base);
    if (t < 0 || (p.k_m && t != SI_TYPE_Q3_K && t != SI_TYPE_Q4_K && t != SI_TYPE_Q5_K))
        return cli_fail("synth: unknown type '%s' (try --help)", type) + 1;
    p.type = (si_type)t;
    p.seed = (uint64_t)seed;
    p.vocab_from = vocab_from;
    p.dequantize = dequantize;
    p.progress = true;
    if (arch) p.dims.arch = arch;
    if (rope_base > 0.0) p.dims.rope_base = (float)rope_base;
    int32_t *const fields[7] = {&p.dims.n_embd, &p.dims.n_ff,      &p.dims.n_layer,
                                &p.dims.n_head, &p.dims.n_head_kv, &p.dims.n_vocab,
                                &p.dims.n_ctx};
    for (int k = 0; k < 7; k++)
        if (dims[k] >= 0) *fields[k] = (int32_t)dims[k];
    /* heads given without kv heads: keep the shape's grouping only if it still divides */
    if (dims[3] >= 0 && dims[4] < 0 && p.dims.n_head % p.dims.n_head_kv)
        p.dims.n_head_kv = p.dims.n_head;

    st = synth_write(&p, out);
    if (st) return cli_fail_status(st);
    fprintf(stderr, "synth: wrote %s (%s, %s%s, seed %lu)\n", out, shape, si_type_name(p.type),
            p.k_m ? "_m" : "", (unsigned long)seed);
    return 0;
}
