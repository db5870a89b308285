/* cmd_run.c — `swiftinfer run`: complete a prompt, streaming the text as it is generated; with
 * --parallel or --prompts, many requests at once through the engine (run_engine.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/model_setup.h"
#include "cli/run_engine.h"

static void usage(FILE *f) {
    fprintf(f, "usage: swiftinfer run -m FILE -p PROMPT [options]\n\n"
               "Generates a continuation of PROMPT, streaming it to standard output, then prints\n"
               "prompt and generation speed to standard error.\n\n"
               "prompt:\n"
               "  -p, --prompt TEXT         the prompt (special tokens such as <|im_start|> are\n"
               "                            recognised; BOS is added when the model asks for it)\n"
               "  -f, --file FILE           read the prompt from FILE\n"
               "      --no-special          treat special-token text in the prompt as plain text\n"
               "output:\n"
               "      --print-ids           print generated token ids instead of text\n"
               "      --logits-out FILE     write the prompt's last-token logits (float32, raw)\n"
               "engine (continuous batching):\n"
               "      --parallel N          run N copies of the prompt at once, seeds S..S+N-1,\n"
               "                            and print each result under a label\n"
               "      --prompts FILE        run every line of FILE as a prompt, all at once, and\n"
               "                            print one JSON object per prompt (JSONL)\n"
               "      --max-num-seqs N      sequences per step (default 64)\n"
               "      --max-batched-tokens N  tokens per step (default 512)\n"
               "      --kv-memory MIB       KV cache budget in MiB (default: enough for\n"
               "                            max-num-seqs full contexts, at most 1024)\n"
               "      --gpu-memory-fraction F  CUDA: KV pool = F x free GPU memory - weights - scratch\n"
               CLI_KV_CACHE_DTYPE_HELP
               "      --stream-window W     streaming generation (attention sinks): keep the last\n"
               "                            W tokens in the cache; constant memory, no length limit\n"
               "      --stream-sink S       ... and the first S tokens as sinks (default 4)\n"
               "      --stats-every N       streaming: print tokens and KV blocks used every N\n"
               "                            generated tokens (default 10000; 0 off)\n"
               "%s", CLI_GEN_FLAGS_HELP);
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

int cmd_run(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    const char *prompt = NULL, *prompt_file = NULL, *logits_out = NULL;
    bool parse_special = true, print_ids = false;
    run_engine_opts ro = {0};
    ro.ep = si_engine_default_params();
    ro.stream_sink = 4;
    ro.stats_every = 10000;
    long iv;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = cli_parse_gen_flag(&o, argc, argv, &i);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && i + 1 < argc) {
            prompt = argv[++i];
        } else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && i + 1 < argc) {
            prompt_file = argv[++i];
        } else if (!strcmp(a, "--logits-out") && i + 1 < argc) {
            logits_out = argv[++i];
        } else if (!strcmp(a, "--parallel") && i + 1 < argc) {
            if (!cli_parse_int(a, argv[++i], 1, 4096, &iv)) return 2;
            ro.parallel = (int)iv;
        } else if (!strcmp(a, "--prompts") && i + 1 < argc) {
            ro.prompts_file = argv[++i];
        } else if (!strcmp(a, "--max-num-seqs") && i + 1 < argc) {
            if (!cli_parse_int(a, argv[++i], 1, 4096, &iv)) return 2;
            ro.ep.max_num_seqs = (int32_t)iv;
        } else if (!strcmp(a, "--max-batched-tokens") && i + 1 < argc) {
            if (!cli_parse_int(a, argv[++i], 1, 1 << 20, &iv)) return 2;
            ro.ep.max_batched_tokens = (int32_t)iv;
        } else if (!strcmp(a, "--gpu-memory-fraction") && i + 1 < argc) {
            double fv;
            if (!cli_parse_float(a, argv[++i], 1e-3, 1, &fv)) return 2;
            ro.ep.gpu_memory_fraction = (float)fv;
        } else if (!strcmp(a, "--kv-cache-dtype") && i + 1 < argc) {
            if (!cli_parse_kv_cache_dtype(a, argv[++i], &ro.ep.kv_cache_dtype)) return 2;
        } else if (!strcmp(a, "--kv-memory") && i + 1 < argc) {
            if (!cli_parse_int(a, argv[++i], 1, 1 << 20, &iv)) return 2;
            ro.ep.kv_memory = (size_t)iv << 20;
        } else if (!strcmp(a, "--stream-window") && i + 1 < argc) {
            if (!cli_parse_int(a, argv[++i], 1, 1 << 24, &iv)) return 2;
            ro.stream_window = (int)iv;
        } else if (!strcmp(a, "--stream-sink") && i + 1 < argc) {
            if (!cli_parse_int(a, argv[++i], 0, 1 << 24, &iv)) return 2;
            ro.stream_sink = (int)iv;
        } else if (!strcmp(a, "--stats-every") && i + 1 < argc) {
            if (!cli_parse_int(a, argv[++i], 0, 1 << 30, &iv)) return 2;
            ro.stats_every = (int)iv;
        } else if (!strcmp(a, "--no-special")) {
            parse_special = false;
        } else if (!strcmp(a, "--print-ids")) {
            print_ids = true;
        } else {
            return cli_fail("run: unknown option or missing value '%s' (try --help)", a) + 1;
        }
    }
    if (!o.model) return cli_fail("run: no model given (use -m FILE)") + 1;
    o.kv_dtype = ro.ep.kv_cache_dtype; /* the single-sequence path's session takes it too */
    if (ro.parallel && ro.prompts_file)
        return cli_fail("run: --parallel and --prompts cannot be combined") + 1;
    if (ro.prompts_file && (prompt || prompt_file))
        return cli_fail("run: --prompts reads the prompts from its file; drop -p/-f") + 1;
    if ((ro.parallel || ro.prompts_file) && (print_ids || logits_out))
        return cli_fail("run: --print-ids and --logits-out work without --parallel/--prompts") + 1;
    if (ro.stream_window && !ro.parallel && !ro.prompts_file)
        return cli_fail("run: --stream-window runs through the engine; add --parallel N") + 1;
    if (!prompt && !prompt_file && !ro.prompts_file)
        return cli_fail("run: no prompt given (use -p TEXT or -f FILE)") + 1;
    char *owned = NULL;
    if (prompt_file && !(prompt = owned = read_file(prompt_file)))
        return cli_fail("run: cannot read prompt file '%s'", prompt_file);
    if (ro.parallel || ro.prompts_file) {
        ro.prompt = prompt;
        ro.parse_special = parse_special;
        int rc = run_engine(&o, &ro);
        free(owned);
        return rc;
    }

    cli_setup_t c;
    int rc = cli_setup(&o, &c);
    if (rc) {
        free(owned);
        return rc;
    }
    cli_history h = {0};
    size_t len = strlen(prompt);
    int32_t n = si_tokenize(c.m, prompt, len, true, parse_special, NULL, 0);
    int32_t *toks = n > 0 ? malloc((size_t)n * sizeof *toks) : NULL;
    if (n < 0) rc = cli_fail_status(SI_ERR_INVALID_ARG);
    else if (n == 0) rc = cli_fail("run: the prompt is empty after tokenisation");
    else if (!toks) rc = cli_fail("run: out of memory");
    else if (si_tokenize(c.m, prompt, len, true, parse_special, toks, n) != n)
        rc = cli_fail_status(SI_ERR_INTERNAL);
    else if (n >= si_model_n_ctx(c.m))
        rc = cli_fail("run: the prompt has %d tokens but the context holds %d (use -c to "
                      "enlarge it)", n, si_model_n_ctx(c.m));
    if (!rc) {
        cli_gen_stats stats;
        si_status st = cli_generate(c.m, c.s, c.smp, &o, &h, toks, n, print_ids ? NULL : stdout,
                                    print_ids ? stdout : NULL, &stats);
        if (st) rc = cli_fail_status(st);
        if (!rc && o.show_stats) cli_print_stats(&stats);
    }
    if (!rc && logits_out) {
        /* the logits after the prompt were overwritten by generation: recompute them */
        si_session_truncate(c.s, n - 1);
        si_status st = si_session_eval(c.s, &toks[n - 1], 1);
        FILE *f = st ? NULL : fopen(logits_out, "wb");
        if (st) rc = cli_fail_status(st);
        else if (!f || fwrite(si_session_logits(c.s), sizeof(float), (size_t)si_model_n_vocab(c.m), f) !=
                           (size_t)si_model_n_vocab(c.m))
            rc = cli_fail("run: cannot write '%s'", logits_out);
        if (f && fclose(f) != 0 && !rc) rc = cli_fail("run: cannot write '%s'", logits_out);
    }
    free(toks);
    free(h.ids);
    free(owned);
    cli_teardown(&c);
    return rc;
}
