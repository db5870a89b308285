/* cmd_serve.c — `swiftinfer serve`: the OpenAI-compatible HTTP server (src/server/). */
#include <stdio.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "server/server.h"

static void usage(FILE *f) {
    /* clang-format off */
    fprintf(f,
            "usage: swiftinfer serve -m FILE [options]\n\n"
            "Serves the model through an OpenAI-compatible API: POST /v1/chat/completions,\n"
            "POST /v1/completions, GET /v1/models, GET /health, GET /metrics, a chat page at /.\n\n"
            "  -m, --model FILE          GGUF model file (required)\n"
            "  -c, --ctx-size N          context window in tokens (default: the model's, at most 4096)\n"
            "  -t, --threads N           CPU threads (default: all cores)\n"
            "      --host ADDR           address to bind (default 127.0.0.1)\n"
            "      --port N              port (default 8000; 0: any free port)\n"
            "      --api-key KEY         require 'Authorization: Bearer KEY' on /v1/*\n"
            "      --served-model-name NAME  the model's name in the API (default: file name)\n"
            "      --max-queue N         requests waiting for the engine before 429 (default 1024;\n"
            "                            0: unbounded)\n"
            "      --max-body-mib N      request body limit in MiB (default 4)\n"
            "      --shutdown-timeout S  on SIGINT/SIGTERM, seconds in-flight requests may take\n"
            "                            before they are cancelled (default 10)\n"
            "      --max-num-seqs N      sequences per engine step (default 64)\n"
            "      --max-batched-tokens N  tokens per engine step (default 512)\n"
            "      --max-wait-ms N       when idle, wait up to N ms for --min-batch requests (0)\n"
            "      --min-batch N         (default 1)\n"
            "      --kv-memory MIB       KV cache budget in MiB (default: CUDA, see below; CPU,\n"
            "                            max-num-seqs contexts, at most 1024)\n"
            "      --device cuda|cpu     where the model runs (default: cuda when a GPU is present)\n"
            "      --gpu-memory-fraction F  CUDA: KV pool = F x free GPU memory - weights - scratch\n"
            "                            (default 0.9 unless --kv-memory is given)\n"
            CLI_KV_CACHE_DTYPE_HELP);
    /* clang-format on */
}

int cmd_serve(int argc, char **argv) {
    server_config c;
    server_config_init(&c);
    long iv;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
#define IS(s) (!strcmp(a, s))
        if (IS("-h") || IS("--help")) {
            usage(stdout);
            return 0;
        } else if ((IS("-m") || IS("--model")) && has) {
            c.model_path = argv[++i];
        } else if ((IS("-c") || IS("--ctx-size")) && has) {
            if (!cli_parse_int(a, argv[++i], 0, 1 << 24, &iv)) return 2;
            c.mp.n_ctx = (int32_t)iv;
        } else if ((IS("-t") || IS("--threads")) && has) {
            if (!cli_parse_int(a, argv[++i], 0, 4096, &iv)) return 2;
            c.mp.n_threads = (int32_t)iv;
        } else if (IS("--host") && has) {
            c.host = argv[++i];
        } else if (IS("--port") && has) {
            if (!cli_parse_int(a, argv[++i], 0, 65535, &iv)) return 2;
            c.port = (int)iv;
        } else if (IS("--api-key") && has) {
            c.api_key = argv[++i];
        } else if (IS("--served-model-name") && has) {
            c.served_name = argv[++i];
        } else if (IS("--max-queue") && has) {
            if (!cli_parse_int(a, argv[++i], 0, 1 << 24, &iv)) return 2;
            c.max_queue = (int)iv;
        } else if (IS("--max-body-mib") && has) {
            if (!cli_parse_int(a, argv[++i], 1, 4096, &iv)) return 2;
            c.max_body = (size_t)iv << 20;
        } else if (IS("--shutdown-timeout") && has) {
            if (!cli_parse_int(a, argv[++i], 0, 86400, &iv)) return 2;
            c.shutdown_timeout_s = (int)iv;
        } else if (IS("--max-num-seqs") && has) {
            if (!cli_parse_int(a, argv[++i], 1, 4096, &iv)) return 2;
            c.ep.max_num_seqs = (int32_t)iv;
        } else if (IS("--max-batched-tokens") && has) {
            if (!cli_parse_int(a, argv[++i], 1, 1 << 20, &iv)) return 2;
            c.ep.max_batched_tokens = (int32_t)iv;
        } else if (IS("--max-wait-ms") && has) {
            if (!cli_parse_int(a, argv[++i], 0, 60000, &iv)) return 2;
            c.ep.max_wait_ms = (int32_t)iv;
        } else if (IS("--min-batch") && has) {
            if (!cli_parse_int(a, argv[++i], 1, 4096, &iv)) return 2;
            c.ep.min_batch = (int32_t)iv;
        } else if (IS("--device") && has) {
            if (!cli_parse_device(a, argv[++i], &c.mp.device)) return 2;
        } else if (IS("--gpu-memory-fraction") && has) {
            double fv;
            if (!cli_parse_float(a, argv[++i], 1e-3, 1, &fv)) return 2;
            c.ep.gpu_memory_fraction = (float)fv;
        } else if (IS("--kv-cache-dtype") && has) {
            if (!cli_parse_kv_cache_dtype(a, argv[++i], &c.ep.kv_cache_dtype)) return 2;
        } else if (IS("--kv-memory") && has) {
            if (!cli_parse_int(a, argv[++i], 1, 1 << 20, &iv)) return 2;
            c.ep.kv_memory = (size_t)iv << 20;
        } else {
            usage(stderr);
            return cli_fail("serve: unknown option or missing value: %s", a);
        }
#undef IS
    }
    if (!c.model_path) {
        usage(stderr);
        return cli_fail("serve: -m FILE is required");
    }
    return server_run(&c);
}
