/* cli_common.c — option parsing and the streaming generation loop shared by run and chat. */
#include "cli/cli_common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/detok.h"

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("swiftinfer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_fail_status(si_status st) {
    (void)st;
    return cli_fail("%s", si_last_error());
}

bool cli_parse_int(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        cli_fail("%s expects an integer in [%ld, %ld], got '%s'", flag, lo, hi, s ? s : "");
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_float(const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v) || v < lo || v > hi) {
        cli_fail("%s expects a number in [%g, %g], got '%s'", flag, lo, hi, s ? s : "");
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_kv_cache_dtype(const char *flag, const char *s, int32_t *out) {
    if (s && (!strcmp(s, "auto") || !strcmp(s, "f16"))) *out = SI_KV_F16;
    else if (s && (!strcmp(s, "fp8") || !strcmp(s, "fp8_e4m3"))) *out = SI_KV_FP8_E4M3;
    else {
        cli_fail("%s expects auto, f16, fp8 or fp8_e4m3, got '%s'", flag, s ? s : "");
        return false;
    }
    return true;
}

bool cli_parse_device(const char *flag, const char *s, si_device *out) {
    if (s && !strcmp(s, "cuda")) *out = SI_DEVICE_CUDA;
    else if (s && !strcmp(s, "cpu")) *out = SI_DEVICE_CPU;
    else if (s && !strcmp(s, "auto")) *out = SI_DEVICE_AUTO;
    else {
        cli_fail("%s expects cuda, cpu or auto, got '%s'", flag, s ? s : "");
        return false;
    }
    return true;
}

void cli_gen_opts_init(cli_gen_opts *o) {
    memset(o, 0, sizeof *o);
    o->mp = si_model_default_params();
    o->sp = si_sampling_default_params();
    o->n_predict = -1;
    o->show_stats = true;
    o->kv_dtype = SI_KV_F16;
}

const char CLI_GEN_FLAGS_HELP[] =
    "model:\n"
    "  -m, --model FILE          GGUF model file (required)\n"
    "  -c, --ctx-size N          context window in tokens (default: the model's, at most 4096)\n"
    "  -t, --threads N           CPU threads (default: all cores)\n"
    "      --device cuda|cpu     where the model runs (default: cuda when a GPU is present)\n"
    "generation:\n"
    "  -n, --n-predict N         tokens to generate (default -1: until end of generation)\n"
    "      --ignore-eos          keep generating past end-of-generation tokens\n"
    "      --no-stats            do not print the speed summary\n"
    "sampling:\n"
    "      --temp T              temperature; 0 is greedy (default 0.8)\n"
    "      --greedy              same as --temp 0\n"
    "      --top-k K             keep the K most likely tokens; 0 off (default 40)\n"
    "      --top-p P             nucleus sampling; 1 off (default 0.95)\n"
    "      --min-p P             drop tokens below P x the top probability; 0 off (default 0.05)\n"
    "      --repeat-penalty R    penalise recent tokens; 1 off (default 1)\n"
    "      --repeat-last-n N     how many recent tokens the penalties see; -1 all (default 64)\n"
    "      --frequency-penalty F OpenAI frequency penalty (default 0)\n"
    "      --presence-penalty P  OpenAI presence penalty (default 0)\n"
    "  -l, --logit-bias T(+|-)B  add B to token id T's logit, first in the chain (llama.cpp's\n"
    "                            format: 15043+1, 15043-1.5; -100 bans a token); repeatable\n"
    "  -s, --seed S              random seed; same seed, same output\n";

/* The value after a flag, or NULL after printing an error. */
static const char *flag_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_fail("%s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

/* One --logit-bias value, TOKEN followed by a signed bias (llama.cpp's "15043+1"), into o. */
static bool parse_logit_bias(cli_gen_opts *o, const char *flag, const char *v) {
    char *end;
    errno = 0;
    const long tok = strtol(v, &end, 10);
    const char *sign = end;
    double bias = 0;
    if (end == v || *v == '-' || *v == '+' || errno || tok > INT32_MAX ||
        (*sign != '+' && *sign != '-') ||
        ((bias = strtod(sign, &end)), *end || errno || !isfinite(bias) || end == sign + 1)) {
        cli_fail("%s expects TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15043+1, 15043-100), got '%s'",
                 flag, v);
        return false;
    }
    if (bias < -100 || bias > 100) {
        cli_fail("%s: the bias %g is outside [-100, 100] (-100 bans a token)", flag, bias);
        return false;
    }
    for (int32_t k = 0; k < o->sp.n_logit_bias; k++)
        if (o->bias[k].token == (int32_t)tok) {
            cli_fail("%s: token %ld is given twice", flag, tok);
            return false;
        }
    if (o->sp.n_logit_bias == SI_MAX_LOGIT_BIAS) {
        cli_fail("%s: at most %d tokens", flag, SI_MAX_LOGIT_BIAS);
        return false;
    }
    o->bias[o->sp.n_logit_bias++] = (si_logit_bias){(int32_t)tok, (float)bias};
    o->sp.logit_bias = o->bias;
    return true;
}

int cli_parse_gen_flag(cli_gen_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    long iv;
    double fv;
#define IS(s) (!strcmp(a, s))
#define VALUE()                                                                                \
    const char *v = flag_value(argc, argv, i);                                                 \
    if (!v) return -1;
    if (IS("-m") || IS("--model")) {
        VALUE();
        o->model = v;
    } else if (IS("-c") || IS("--ctx-size")) {
        VALUE();
        if (!cli_parse_int(a, v, 1, 1 << 20, &iv)) return -1;
        o->mp.n_ctx = (int32_t)iv;
    } else if (IS("-t") || IS("--threads")) {
        VALUE();
        if (!cli_parse_int(a, v, 1, 1024, &iv)) return -1;
        o->mp.n_threads = (int32_t)iv;
    } else if (IS("--device")) {
        VALUE();
        if (!cli_parse_device(a, v, &o->mp.device)) return -1;
    } else if (IS("-n") || IS("--n-predict")) {
        VALUE();
        if (!cli_parse_int(a, v, -1, 1 << 30, &iv)) return -1;
        o->n_predict = (int)iv;
    } else if (IS("--ignore-eos")) {
        o->ignore_eos = true;
    } else if (IS("--no-stats")) {
        o->show_stats = false;
    } else if (IS("--temp")) {
        VALUE();
        if (!cli_parse_float(a, v, 0, 100, &fv)) return -1;
        o->sp.temperature = (float)fv;
    } else if (IS("--greedy")) {
        o->sp.temperature = 0.0f;
    } else if (IS("--top-k")) {
        VALUE();
        if (!cli_parse_int(a, v, 0, 1 << 30, &iv)) return -1;
        o->sp.top_k = (int32_t)iv;
    } else if (IS("--top-p")) {
        VALUE();
        if (!cli_parse_float(a, v, 1e-9, 1, &fv)) return -1;
        o->sp.top_p = (float)fv;
    } else if (IS("--min-p")) {
        VALUE();
        if (!cli_parse_float(a, v, 0, 1, &fv)) return -1;
        o->sp.min_p = (float)fv;
    } else if (IS("--repeat-penalty")) {
        VALUE();
        if (!cli_parse_float(a, v, 1e-3, 100, &fv)) return -1;
        o->sp.repetition_penalty = (float)fv;
    } else if (IS("--repeat-last-n")) {
        VALUE();
        if (!cli_parse_int(a, v, -1, 1 << 30, &iv)) return -1;
        o->sp.penalty_last_n = (int32_t)iv;
    } else if (IS("--frequency-penalty")) {
        VALUE();
        if (!cli_parse_float(a, v, -2, 2, &fv)) return -1;
        o->sp.frequency_penalty = (float)fv;
    } else if (IS("--presence-penalty")) {
        VALUE();
        if (!cli_parse_float(a, v, -2, 2, &fv)) return -1;
        o->sp.presence_penalty = (float)fv;
    } else if (IS("-l") || IS("--logit-bias")) {
        VALUE();
        if (!parse_logit_bias(o, a, v)) return -1;
    } else if (IS("-s") || IS("--seed")) {
        VALUE();
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (!*v || *end || errno || *v == '-') {
            cli_fail("%s expects a non-negative integer, got '%s'", a, v);
            return -1;
        }
        o->sp.seed = s;
    } else {
        return 0;
    }
#undef IS
#undef VALUE
    return 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool cli_history_push(cli_history *h, int32_t id) {
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 256;
        int32_t *ids = realloc(h->ids, (size_t)cap * sizeof *ids);
        if (!ids) return false;
        h->ids = ids;
        h->cap = cap;
    }
    h->ids[h->n++] = id;
    return true;
}

si_status cli_generate(si_model *m, si_session *s, si_sampler *smp, const cli_gen_opts *o,
                       cli_history *h, const int32_t *new_tokens, int n_new, FILE *out,
                       FILE *ids_out, cli_gen_stats *stats) {
    memset(stats, 0, sizeof *stats);
    for (int i = 0; i < n_new; i++)
        if (!cli_history_push(h, new_tokens[i])) return SI_ERR_NOMEM;
    /* each eval picks the next token with it (on a GPU only the id comes back); none is
     * picked when none is wanted, so the sampler's RNG draws as often as tokens are generated */
    double t0 = now_s();
    int32_t id = -1;
    si_status st = o->n_predict == 0
                       ? si_session_eval(s, new_tokens, n_new)
                       : si_session_eval_sample(s, new_tokens, n_new, smp, h->ids, h->n, &id);
    if (st) {
        h->n -= n_new; /* the history stays the session's */
        return st;
    }
    stats->n_prompt = n_new;
    stats->prompt_s = now_s() - t0;

    detok dt;
    detok_init(&dt);
    char piece[256], text[DETOK_MAX_OUT(256)];
    t0 = now_s();
    const int n_ctx = si_model_n_ctx(m);
    for (int i = 0; o->n_predict < 0 || i < o->n_predict; i++) {
        if (!o->ignore_eos && si_token_is_eog(m, id)) break;
        if (!cli_history_push(h, id)) return SI_ERR_NOMEM;
        stats->n_gen++;
        if (ids_out) fprintf(ids_out, "%s%d", stats->n_gen > 1 ? " " : "", id);
        int32_t n = si_token_to_piece(m, id, piece, (int32_t)sizeof piece);
        if (n > (int32_t)sizeof piece) n = 0; /* no token is this long in practice */
        if (out && n > 0) {
            size_t k = detok_push(&dt, piece, (size_t)n, text);
            fwrite(text, 1, k, out);
            fflush(out);
        }
        if (si_session_n_past(s) >= n_ctx) break; /* context full: stop like llama.cpp */
        if (o->n_predict >= 0 && i + 1 >= o->n_predict) break;
        const int32_t last = id;
        if ((st = si_session_eval_sample(s, &last, 1, smp, h->ids, h->n, &id))) return st;
    }
    if (out) {
        size_t k = detok_flush(&dt, text);
        fwrite(text, 1, k, out);
        fflush(out);
    }
    if (ids_out) fputc('\n', ids_out);
    stats->gen_s = now_s() - t0;
    return SI_OK;
}

void cli_print_stats(const cli_gen_stats *st) {
    fprintf(stderr, "\nprompt: %d tokens in %.3f s (%.1f tokens/s); generation: %d tokens in "
            "%.3f s (%.1f tokens/s)\n", st->n_prompt, st->prompt_s,
            st->prompt_s > 0 ? st->n_prompt / st->prompt_s : 0.0, st->n_gen, st->gen_s,
            st->gen_s > 0 ? st->n_gen / st->gen_s : 0.0);
}
