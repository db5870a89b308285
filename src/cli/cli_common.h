/* cli_common.h — option parsing shared by the subcommands: numbers with range checks, the
 * model and sampling flags, and the streaming generation loop used by run and chat. */
#ifndef SI_CLI_COMMON_H
#define SI_CLI_COMMON_H

#include <stdbool.h>
#include <stdio.h>

#include "swiftinfer.h"

/* Prints "swiftinfer: " + message to stderr; returns exit status 1 (or 2 for usage errors). */
int cli_fail(const char *fmt, ...);
int cli_fail_status(si_status st); /* message from si_last_error() */

/* Strict number parsing: the whole string must be a number in [lo, hi]. On failure prints an
 * error naming the flag and returns false. */
bool cli_parse_int(const char *flag, const char *s, long lo, long hi, long *out);
bool cli_parse_float(const char *flag, const char *s, double lo, double hi, double *out);
/* --kv-cache-dtype: auto or f16 -> SI_KV_F16, fp8 or fp8_e4m3 -> SI_KV_FP8_E4M3 (vLLM's
 * names); anything else prints an error naming the flag and the accepted values. */
bool cli_parse_kv_cache_dtype(const char *flag, const char *s, int32_t *out);
#define CLI_KV_CACHE_DTYPE_HELP                                                                \
    "      --kv-cache-dtype T    KV cache elements: auto|f16 (default) or fp8|fp8_e4m3 (CUDA:\n" \
    "                            half the KV bytes, twice the blocks; E4M3, scale 1)\n"

/* "cuda" or "cpu" (also "auto") for --device; false after printing an error naming flag. */
bool cli_parse_device(const char *flag, const char *s, si_device *out);

/* Options common to commands that load a model and generate. */
typedef struct cli_gen_opts {
    const char *model;
    si_model_params mp;
    si_sampling_params sp;
    si_logit_bias bias[SI_MAX_LOGIT_BIAS]; /* --logit-bias entries (sp.logit_bias points here) */
    int n_predict;   /* -1: until end of generation or context full */
    bool ignore_eos;
    bool show_stats;
    int32_t kv_dtype; /* the session's KV cache (--kv-cache-dtype, parsed by run and chat) */
} cli_gen_opts;

void cli_gen_opts_init(cli_gen_opts *o);

/* Tries argv[*i] as a model/sampling flag. Returns 1 if consumed (advancing *i past its value),
 * 0 if not a generation flag, -1 after printing an error. */
int cli_parse_gen_flag(cli_gen_opts *o, int argc, char **argv, int *i);

/* The help text for the flags cli_parse_gen_flag accepts. */
extern const char CLI_GEN_FLAGS_HELP[];

/* Counters of one generation, for the closing statistics line. */
typedef struct cli_gen_stats {
    int n_prompt, n_gen;
    double prompt_s, gen_s;
} cli_gen_stats;

/* Evaluates new_tokens (appended to history) then samples until an end-of-generation token,
 * n_predict tokens or a full context, streaming text to out (never half a UTF-8 character) and
 * appending generated ids to history. Each eval picks its next token (si_session_eval_sample:
 * on the GPU), so prompt_s includes the first pick. ids_out: when non-NULL, ids are also
 * printed there. Returns SI_OK or the failing status (message set). */
typedef struct cli_history {
    int32_t *ids;
    int n, cap;
} cli_history;
si_status cli_generate(si_model *m, si_session *s, si_sampler *smp, const cli_gen_opts *o,
                       cli_history *h, const int32_t *new_tokens, int n_new, FILE *out,
                       FILE *ids_out, cli_gen_stats *stats);
void cli_print_stats(const cli_gen_stats *st);
bool cli_history_push(cli_history *h, int32_t id);

#endif
