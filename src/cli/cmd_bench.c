/* cmd_bench.c — `swiftinfer bench`: prompt-processing and token-generation speed, in the manner
 * of llama.cpp's llama-bench, measured against the memory-bandwidth roofline.
 *
 * For each model and each test, one warm-up run and then -r timed repetitions through the public
 * session API: ppN evaluates N random tokens from an empty context in chunks of -b; tgN evaluates
 * one token, then N more one at a time (every eval computes the last token's logits, as decoding
 * does). t/s is mean ± sample standard deviation over the repetitions.
 *
 * The roofline: decoding one token reads every weight the forward pass uses once (each layer's
 * matrices and norms, the output norm and matrix, one embedding row), so tg t/s × those bytes is
 * the bandwidth achieved; its fraction of the memory bandwidth (--bw, or measured here as in
 * `bench --memory`: the host's DRAM read bandwidth with --device cpu, the GPU's copy bandwidth,
 * bytes read plus written, with --device cuda) says how much headroom is left (DESIGN.md, "what
 * fast means"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "cli/bench_concurrency.h"
#include "cli/bench_memory.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "model/model.h"
#include "quant/quant.h"

#define MAX_MODELS 64
#define MAX_TESTS 16
#define MAX_REPS 1000

typedef struct {
    const char *models[MAX_MODELS];
    int n_models;
    long pp[MAX_TESTS], tg[MAX_TESTS];
    int n_pp, n_tg;
    long threads, reps, batch;
    bool json, memory;
    double bw;     /* GB/s; 0: measure */
    long conc[MAX_TESTS]; /* --concurrency levels */
    int n_conc;
    long mem_mib;  /* buffer for the bandwidth measurement */
    si_device device;
    int32_t kv_dtype; /* --kv-cache-dtype: the session's (pp/tg) or the engine's cache */
} bench_opts;

/* One line of results: a test on a model. */
typedef struct {
    const char *path;
    const char *type;  /* the type holding most matrix bytes */
    long long file_bytes, weight_bytes_per_token, n_params;
    int threads, batch;
    char test[32];
    int n_prompt, n_gen, reps;
    double mean_ts, sd_ts;
    double *samples; /* [reps] tokens/s */
    double gbps;     /* tg only: mean t/s × weight bytes per token; 0 for pp */
} bench_row;

static void usage(FILE *f) {
    fprintf(f,
            "usage: swiftinfer bench -m FILE[,FILE...] [options]\n"
            "       swiftinfer bench --memory [--device D] [-t N] [--memory-mib N] [--json]\n\n"
            "Measures prompt processing (ppN) and token generation (tgN) in tokens/s, like\n"
            "llama-bench, and the fraction of the memory-bandwidth roofline decoding reaches.\n\n"
            "  -m, --model LIST   GGUF files, comma-separated (the flag may repeat)\n"
            "  -p, --n-prompt L   prompt lengths, comma-separated (default 128; 0: none)\n"
            "  -n, --n-gen L      generated token counts, comma-separated (default 64; 0: none)\n"
            "  -t, --threads N    CPU threads (default: all online cores)\n"
            "  -r, --repetitions N  timed runs of each test after one warm-up (default 3)\n"
            "  -b, --batch N      prompt tokens per eval call (default 512)\n"
            "      --device D     cuda or cpu (default: cuda when a GPU is present)\n"
            "      --bw GBPS      memory bandwidth for the roofline (default: measured: the\n"
            "                     GPU's device-to-device copy, bytes read + written, with\n"
            "                     --device cuda; the host's DRAM read bandwidth with cpu)\n"
            "      --memory       only measure that bandwidth (of the device --device names)\n"
            "      --memory-mib N buffer for the bandwidth measurement (default 2048; choose it\n"
            "                     far above the last-level cache; the GPU copies between two)\n"
            "      --json         machine-readable output on stdout\n"
            "  -c, --concurrency L  instead of pp/tg: run c requests at once through the engine\n"
            "                     (continuous batching) for each c in L, each with a random\n"
            "                     prompt of the first -p length and the first -n generated\n"
            "                     tokens; reports aggregate and per-request tokens/s, and\n"
            "                     the rate while all c were decoding (llama-batched-bench's\n"
            "                     S_TG: the window from the last first token to the first\n"
            "                     finish)\n"
            "      --kv-cache-dtype T  KV cache elements auto|f16 (default) or fp8|fp8_e4m3\n"
            "                     (CUDA: half the KV bytes; with --concurrency, twice the\n"
            "                     blocks)\n\n"
            "The warm-up is one prompt of min(N, batch) tokens for ppN and 8 tokens for tgN.\n"
            "Progress goes to stderr. GB/s = tg t/s x weight bytes read per token (all layer\n"
            "matrices and norms, output norm and matrix, one embedding row).\n");
}

/* Parses "128,512" into out (values in [0, 1<<20]); false after printing an error. */
static bool parse_list(const char *flag, const char *s, long *out, int *n) {
    char buf[256];
    if (strlen(s) >= sizeof buf) {
        cli_fail("%s: list too long", flag);
        return false;
    }
    strcpy(buf, s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_TESTS) {
            cli_fail("%s: at most %d values", flag, MAX_TESTS);
            return false;
        }
        if (!cli_parse_int(flag, tok, 0, 1 << 20, &out[*n])) return false;
        (*n)++;
    }
    if (*n == 0) {
        cli_fail("%s expects a comma-separated list of integers, got '%s'", flag, s);
        return false;
    }
    return true;
}

/* Returns 0 on success, 2 after printing a usage error, -1 when --help was printed. */
static int parse_args(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){.threads = 0, .reps = 3, .batch = 512, .mem_mib = 2048};
    o->pp[0] = 128, o->n_pp = 1;
    o->tg[0] = 64, o->n_tg = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) {
            /* split in place: argv strings are ours to modify */
            for (char *save = NULL, *tok = strtok_r(argv[++i], ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save)) {
                if (o->n_models == MAX_MODELS) return cli_fail("bench: at most %d models", MAX_MODELS) + 1;
                o->models[o->n_models++] = tok;
            }
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) && has_val) {
            if (!parse_list(a, argv[++i], o->pp, &o->n_pp)) return 2;
        } else if ((!strcmp(a, "-n") || !strcmp(a, "--n-gen")) && has_val) {
            if (!parse_list(a, argv[++i], o->tg, &o->n_tg)) return 2;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && has_val) {
            if (!cli_parse_int(a, argv[++i], 1, 1024, &o->threads)) return 2;
        } else if ((!strcmp(a, "-r") || !strcmp(a, "--repetitions")) && has_val) {
            if (!cli_parse_int(a, argv[++i], 1, MAX_REPS, &o->reps)) return 2;
        } else if ((!strcmp(a, "-b") || !strcmp(a, "--batch")) && has_val) {
            if (!cli_parse_int(a, argv[++i], 1, 1 << 20, &o->batch)) return 2;
        } else if (!strcmp(a, "--device") && has_val) {
            if (!cli_parse_device(a, argv[++i], &o->device)) return 2;
        } else if (!strcmp(a, "--bw") && has_val) {
            if (!cli_parse_float(a, argv[++i], 0.001, 1e6, &o->bw)) return 2;
        } else if (!strcmp(a, "--memory-mib") && has_val) {
            if (!cli_parse_int(a, argv[++i], 1, 1 << 20, &o->mem_mib)) return 2;
        } else if ((!strcmp(a, "-c") || !strcmp(a, "--concurrency")) && has_val) {
            if (!parse_list(a, argv[++i], o->conc, &o->n_conc)) return 2;
            for (int k = 0; k < o->n_conc; k++)
                if (o->conc[k] < 1) return cli_fail("%s: levels must be >= 1", a) + 1;
        } else if (!strcmp(a, "--kv-cache-dtype") && has_val) {
            if (!cli_parse_kv_cache_dtype(a, argv[++i], &o->kv_dtype)) return 2;
        } else if (!strcmp(a, "--memory")) {
            o->memory = true;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else {
            return cli_fail("bench: unknown option or missing value '%s' (try --help)", a) + 1;
        }
    }
    if (!o->memory && o->n_models == 0) return cli_fail("bench: no model given (-m FILE)") + 1;
    if (o->threads == 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = n > 0 ? n : 1;
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The CPU's name from /proc/cpuinfo ("?" elsewhere), for the record. */
static void cpu_model_name(char *out, size_t cap) {
    snprintf(out, cap, "?");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(out, cap, "%s", colon + 2);
            out[strcspn(out, "\n")] = 0;
            break;
        }
    }
    fclose(f);
}

/* The 1-minute load average (-1 when unknown): other processes on a small machine take cores
 * from the benchmark, so results are recorded with it. */
static double load_avg(void) {
    double l = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1.0;
        fclose(f);
    }
    return l;
}

static long long tensor_bytes(const si_tensor *t) {
    if (!t->data) return 0;
    return (long long)quant_row_size(t->type, t->n_cols) * t->n_rows;
}

/* Weight bytes one decoded token reads, the parameter count, and the dominant matrix type. */
static void model_weights(const si_model *m, long long *per_token, long long *params,
                          const char **type) {
    long long by_type[SI_TYPE_COUNT] = {0};
    long long bytes = 0, n = 0;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const model_layer *L = &m->layers[l];
        const si_tensor *ts[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->bq, &L->bk,
                                 &L->bv, &L->wo, &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
            bytes += tensor_bytes(ts[i]);
            if (ts[i]->data) n += ts[i]->n_cols * ts[i]->n_rows;
            if (ts[i]->data && ts[i]->n_rows > 1 && ts[i]->type < SI_TYPE_COUNT)
                by_type[ts[i]->type] += tensor_bytes(ts[i]);
        }
    }
    bytes += tensor_bytes(&m->output_norm) + tensor_bytes(&m->output);
    bytes += (long long)quant_row_size(m->tok_embd.type, m->tok_embd.n_cols); /* one row */
    if (m->rope_freqs) bytes += (long long)sizeof(float) * (m->hp.rope_dim / 2);
    n += m->output_norm.n_cols + m->tok_embd.n_cols * m->tok_embd.n_rows;
    if (m->output.data != m->tok_embd.data) n += m->output.n_cols * m->output.n_rows;
    int best = 0;
    for (int t = 0; t < (int)SI_TYPE_COUNT; t++)
        if (by_type[t] > by_type[best]) best = t;
    *per_token = bytes;
    *params = n;
    *type = si_type_name((si_type)best) ? si_type_name((si_type)best) : "?";
}

static uint64_t rng = 0x853C49E6748FEA9Bull;
static int32_t random_token(int32_t n_vocab) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (int32_t)(rng % (uint64_t)n_vocab);
}

/* ppN: N tokens from an empty context in chunks of batch; returns seconds or -1 (error set). */
static double time_pp(si_session *s, const int32_t *toks, int n, int batch) {
    si_session_truncate(s, 0);
    const double t0 = now_s();
    for (int i = 0; i < n; i += batch)
        if (si_session_eval(s, toks + i, n - i < batch ? n - i : batch)) return -1.0;
    return now_s() - t0;
}

/* tgN: one untimed token, then N single-token evals. */
static double time_tg(si_session *s, const int32_t *toks, int n) {
    si_session_truncate(s, 0);
    if (si_session_eval(s, toks, 1)) return -1.0;
    const double t0 = now_s();
    for (int i = 0; i < n; i++)
        if (si_session_eval(s, toks + 1 + i, 1)) return -1.0;
    return now_s() - t0;
}

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static void print_header(double bw) {
    printf("| model | type | size MiB | params M | weights/token MiB | threads | test | t/s "
           "| GB/s | of %.1f GB/s |\n",
           bw);
    printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    fflush(stdout);
}

static void print_row(const bench_row *r, double bw) {
    printf("| %s | %s | %.2f | %.2f | %.2f | %d | %s | %.2f ± %.2f |", base_name(r->path),
           r->type, r->file_bytes / 1048576.0, r->n_params / 1e6,
           r->weight_bytes_per_token / 1048576.0, r->threads, r->test, r->mean_ts, r->sd_ts);
    if (r->gbps > 0)
        printf(" %.2f | %.1f%% |\n", r->gbps, 100.0 * r->gbps / bw);
    else
        printf(" - | - |\n");
    fflush(stdout);
}

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

/* --kv-cache-dtype's value as the output names it */
static const char *kv_name(int32_t kv_dtype) {
    return kv_dtype == SI_KV_FP8_E4M3 ? "fp8_e4m3" : "f16";
}

/* The roofline of the device the models run on: the GPU's copy bandwidth where the backend
 * measures one (si_backend.copy_bandwidth), else the host's DRAM read bandwidth */
static si_status measure_memory(const bench_opts *o, bench_memory_result *mem) {
    si_device dev = SI_DEVICE_CPU;
    si_status st = backend_resolve(o->device, &dev);
    if (st) return st;
    const si_backend *b = dev == SI_DEVICE_CUDA ? backend_cuda() : NULL;
    if (b && b->copy_bandwidth) {
        fprintf(stderr, "bench: measuring the GPU's copy bandwidth (2 x %ld MiB)\n", o->mem_mib);
        *mem = (bench_memory_result){.bytes = (size_t)o->mem_mib << 20, .runs = 5, .gpu = true};
        return b->copy_bandwidth(mem->bytes, mem->runs, &mem->best_gbps, &mem->mean_gbps);
    }
    fprintf(stderr, "bench: measuring DRAM read bandwidth (%ld MiB, %ld threads)\n", o->mem_mib,
            o->threads);
    return bench_memory((size_t)o->mem_mib << 20, (int)o->threads, 5, mem);
}

static const char *memory_what(const bench_memory_result *mem) {
    return mem->gpu ? "gpu copy" : "dram read";
}

static void print_json(const bench_row *rows, int n_rows, const bench_memory_result *mem,
                       double bw, bool measured, double load0, double load1, int32_t kv_dtype) {
    char cpu[256];
    cpu_model_name(cpu, sizeof cpu);
    printf("{\n  \"cpu\": ");
    json_string(cpu);
    printf(",\n  \"isa\": \"%s\",\n  \"loadavg_start\": %.2f,\n  \"loadavg_end\": %.2f,\n",
           cpu_isa_name(), load0, load1);
    printf("  \"bw_gbps\": %.3f,\n  \"bw_source\": \"%s\",\n  \"kv_cache_dtype\": \"%s\",\n", bw,
           measured ? "measured" : "--bw", kv_name(kv_dtype));
    if (measured)
        printf("  \"memory\": {\"what\": \"%s\", \"best_gbps\": %.3f, \"mean_gbps\": %.3f, "
               "\"bytes\": %zu, \"threads\": %d, \"runs\": %d},\n",
               memory_what(mem), mem->best_gbps, mem->mean_gbps, mem->bytes, mem->n_threads,
               mem->runs);
    printf("  \"results\": [");
    for (int i = 0; i < n_rows; i++) {
        const bench_row *r = &rows[i];
        printf("%s\n    {\"model\": ", i ? "," : "");
        json_string(r->path);
        printf(", \"type\": \"%s\", \"model_bytes\": %lld, \"n_params\": %lld, "
               "\"weight_bytes_per_token\": %lld, \"n_threads\": %d, \"n_batch\": %d, "
               "\"test\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"avg_ts\": %.4f, "
               "\"stddev_ts\": %.4f, \"samples_ts\": [",
               r->type, r->file_bytes, r->n_params, r->weight_bytes_per_token, r->threads,
               r->batch, r->test, r->n_prompt, r->n_gen, r->mean_ts, r->sd_ts);
        for (int k = 0; k < r->reps; k++) printf("%s%.4f", k ? ", " : "", r->samples[k]);
        printf("]");
        if (r->gbps > 0) printf(", \"gbps\": %.4f, \"roofline_frac\": %.4f", r->gbps, r->gbps / bw);
        printf("}");
    }
    printf("\n  ]\n}\n");
}

/* Runs one test (pp when n_prompt > 0, else tg) -r times after a warm-up; fills row. */
static si_status run_test(si_session *s, const int32_t *toks, const bench_opts *o, int n_prompt,
                          int n_gen, bench_row *row) {
    snprintf(row->test, sizeof row->test, "%s%d", n_prompt ? "pp" : "tg", n_prompt ? n_prompt : n_gen);
    row->n_prompt = n_prompt, row->n_gen = n_gen, row->reps = (int)o->reps;
    const int batch = (int)o->batch;
    fprintf(stderr, "bench: %s %s warm-up\n", base_name(row->path), row->test);
    double t = n_prompt ? time_pp(s, toks, n_prompt < batch ? n_prompt : batch, batch)
                        : time_tg(s, toks, n_gen < 8 ? n_gen : 8);
    if (t < 0) return SI_ERR_INTERNAL;
    double sum = 0.0;
    for (int k = 0; k < row->reps; k++) {
        fprintf(stderr, "bench: %s %s rep %d/%d\n", base_name(row->path), row->test, k + 1,
                row->reps);
        t = n_prompt ? time_pp(s, toks, n_prompt, batch) : time_tg(s, toks, n_gen);
        if (t < 0) return SI_ERR_INTERNAL;
        row->samples[k] = (n_prompt ? n_prompt : n_gen) / t;
        sum += row->samples[k];
    }
    row->mean_ts = sum / row->reps;
    double var = 0.0;
    for (int k = 0; k < row->reps; k++)
        var += (row->samples[k] - row->mean_ts) * (row->samples[k] - row->mean_ts);
    row->sd_ts = row->reps > 1 ? sqrt(var / (row->reps - 1)) : 0.0;
    row->gbps = n_prompt ? 0.0 : row->mean_ts * (double)row->weight_bytes_per_token / 1e9;
    return SI_OK;
}

/* The --concurrency output's opening (the table header, or JSON's "["), printed with the first
 * row so that a run that fails before any result prints only its error. */
static void conc_open(const bench_opts *o, bool *opened) {
    if (*opened) return;
    *opened = true;
    if (!o->json)
        printf("| model | threads | concurrency | prompt | gen | aggregate t/s | per-request t/s "
               "| all-decoding t/s | mean TTFT s | wall s |\n| --- | ---: | ---: | ---: | ---: "
               "| ---: | ---: | ---: | ---: | ---: |\n");
    else
        printf("[");
}

/* --concurrency: one table row per model and level. */
static int run_concurrency(const bench_opts *o) {
    const int n_prompt = (int)o->pp[0], n_gen = o->tg[0] > 1 ? (int)o->tg[0] : 2;
    bool opened = false, first = true;
    for (int mi = 0; mi < o->n_models; mi++) {
        si_model_params mp = si_model_default_params();
        mp.n_threads = (int32_t)o->threads;
        mp.device = o->device;
        mp.n_ctx = n_prompt + n_gen + 16;
        si_model *m = NULL;
        bench_conc_result res[MAX_TESTS];
        si_status st = si_model_load(o->models[mi], &mp, &m);
        if (!st) st = bench_concurrency(m, o->conc, o->n_conc, n_prompt, n_gen, o->kv_dtype, res);
        const int threads = m ? pool_size(m->pool) : 0;
        si_model_free(m);
        if (st) {
            if (opened && o->json) printf("]\n"); /* what was printed stays valid JSON */
            return cli_fail("bench: %s: %s", o->models[mi], si_last_error());
        }
        conc_open(o, &opened);
        for (int i = 0; i < o->n_conc; i++) {
            const bench_conc_result *r = &res[i];
            if (o->json)
                printf("%s{\"model\": \"%s\", \"threads\": %d, \"concurrency\": %d, "
                       "\"n_prompt\": %d, \"n_gen\": %d, \"aggregate_tps\": %.3f, "
                       "\"per_request_tps\": %.3f, \"all_decoding_tps\": %.3f, "
                       "\"ttft_mean_s\": %.4f, \"wall_s\": %.3f}",
                       first ? "" : ", ", base_name(o->models[mi]), threads, r->concurrency,
                       r->n_prompt, r->n_gen, r->aggregate_tps, r->per_request_tps,
                       r->all_decoding_tps, r->ttft_mean_s, r->wall_s);
            else
                printf("| %s | %d | %d | %d | %d | %.2f | %.2f | %.2f | %.3f | %.2f |\n",
                       base_name(o->models[mi]), threads, r->concurrency, r->n_prompt, r->n_gen,
                       r->aggregate_tps, r->per_request_tps, r->all_decoding_tps, r->ttft_mean_s,
                       r->wall_s);
            first = false;
        }
    }
    if (o->json) printf("]\n");
    return 0;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o;
    const int pr = parse_args(argc, argv, &o);
    if (pr) return pr < 0 ? 0 : pr;
    if (o.n_conc) return run_concurrency(&o);

    const double load0 = load_avg();
    bench_memory_result mem = {0};
    const bool measure = o.memory || o.bw <= 0.0;
    if (measure) {
        si_status st = measure_memory(&o, &mem);
        if (st) return cli_fail_status(st);
        if (!o.bw) o.bw = mem.best_gbps;
    }
    if (o.memory) {
        if (o.json)
            printf("{\"what\": \"%s\", \"best_gbps\": %.3f, \"mean_gbps\": %.3f, \"bytes\": %zu, "
                   "\"threads\": %d, \"runs\": %d, \"loadavg_start\": %.2f}\n",
                   memory_what(&mem), mem.best_gbps, mem.mean_gbps, mem.bytes, mem.n_threads,
                   mem.runs, load0);
        else
            printf("| test | threads | buffer MiB | best GB/s | mean GB/s |\n"
                   "| --- | ---: | ---: | ---: | ---: |\n"
                   "| %s | %d | %zu | %.2f | %.2f |\n",
                   mem.gpu ? "gpu copy (read + written)" : "memory read", mem.n_threads,
                   mem.bytes >> 20, mem.best_gbps, mem.mean_gbps);
        return 0;
    }

    const int max_rows = o.n_models * (o.n_pp + o.n_tg);
    bench_row *rows = calloc((size_t)max_rows, sizeof *rows);
    double *samples = calloc((size_t)max_rows * (size_t)o.reps, sizeof *samples);
    long max_tok = 1;
    for (int i = 0; i < o.n_pp; i++) max_tok = o.pp[i] > max_tok ? o.pp[i] : max_tok;
    for (int i = 0; i < o.n_tg; i++) max_tok = o.tg[i] + 1 > max_tok ? o.tg[i] + 1 : max_tok;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)max_tok);
    if (!rows || !samples || !toks) {
        free(rows), free(samples), free(toks);
        return cli_fail("bench: out of memory");
    }
    if (!o.json) {
        char cpu[256];
        cpu_model_name(cpu, sizeof cpu);
        printf("CPU: %s, kernels: %s, load average %.2f\n", cpu, cpu_isa_name(), load0);
        if (measure && mem.gpu)
            printf("GPU copy bandwidth: %.2f GB/s (measured: device-to-device copies of %zu MiB, "
                   "bytes read + written, best of %d)\n\n",
                   mem.best_gbps, mem.bytes >> 20, mem.runs);
        else if (measure)
            printf("DRAM read bandwidth: %.2f GB/s (measured: %zu MiB buffer, %d threads, best "
                   "of %d)\n\n",
                   mem.best_gbps, mem.bytes >> 20, mem.n_threads, mem.runs);
        else
            printf("Memory bandwidth: %.2f GB/s (--bw)\n\n", o.bw);
        if (o.kv_dtype != SI_KV_F16) printf("KV cache: %s\n\n", kv_name(o.kv_dtype));
        print_header(o.bw);
    }

    int n_rows = 0, rc = 0;
    for (int mi = 0; mi < o.n_models && !rc; mi++) {
        const char *path = o.models[mi];
        si_model_params mp = si_model_default_params();
        mp.n_threads = (int32_t)o.threads;
        mp.device = o.device;
        mp.n_ctx = (int32_t)(max_tok < 16 ? 16 : max_tok);
        si_model *m = NULL;
        si_session *s = NULL;
        fprintf(stderr, "bench: loading %s\n", path);
        const si_session_params sp = {(int32_t)o.batch, o.kv_dtype};
        if (si_model_load(path, &mp, &m) || si_session_create_params(m, &sp, &s)) {
            rc = cli_fail_status(SI_ERR_INTERNAL);
            si_model_free(m);
            break;
        }
        bench_row base = {.path = path, .threads = pool_size(m->pool), .batch = (int)o.batch};
        struct stat sb;
        base.file_bytes = stat(path, &sb) == 0 ? (long long)sb.st_size : 0;
        model_weights(m, &base.weight_bytes_per_token, &base.n_params, &base.type);
        for (long i = 0; i < max_tok; i++) toks[i] = random_token(si_model_n_vocab(m));

        for (int ti = 0; ti < o.n_pp + o.n_tg && !rc; ti++) {
            const int n_prompt = ti < o.n_pp ? (int)o.pp[ti] : 0;
            const int n_gen = ti < o.n_pp ? 0 : (int)o.tg[ti - o.n_pp];
            if (n_prompt == 0 && n_gen == 0) continue;
            bench_row *row = &rows[n_rows];
            *row = base;
            row->samples = samples + (size_t)n_rows * (size_t)o.reps;
            if (run_test(s, toks, &o, n_prompt, n_gen, row)) {
                rc = cli_fail("bench: %s %s: %s", path, row->test, si_last_error());
                break;
            }
            if (!o.json) print_row(row, o.bw);
            n_rows++;
        }
        si_session_free(s);
        si_model_free(m);
    }
    if (o.json && !rc)
        print_json(rows, n_rows, &mem, o.bw, measure, load0, load_avg(), o.kv_dtype);
    else if (!rc) printf("\nload average at the end: %.2f\n", load_avg());
    free(rows), free(samples), free(toks);
    return rc;
}
