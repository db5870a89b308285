/* run_engine.h — `swiftinfer run` through the engine: --parallel N and --prompts FILE. */
#ifndef SI_CLI_RUN_ENGINE_H
#define SI_CLI_RUN_ENGINE_H

#include <stdbool.h>

#include "cli/cli_common.h"

typedef struct run_engine_opts {
    const char *prompt;       /* --parallel: the prompt */
    int parallel;             /* copies of prompt, seeds seed, seed+1, ... (0: off) */
    const char *prompts_file; /* one prompt per line, JSONL out (NULL: off) */
    bool parse_special;       /* special-token text in prompts becomes special tokens */
    si_engine_params ep;
    /* streaming generation (StreamingLLM attention sinks): stream_window > 0 turns it on; the
     * text is then written as it comes (request 0's only) instead of being kept, and every
     * stats_every generated tokens a line "stream: tokens N, kv blocks used B/T, rss R KiB"
     * goes to standard error (0: none) */
    int stream_sink, stream_window, stats_every;
} run_engine_opts;

/* Loads o->model, runs the prompts through one engine and prints the results: labelled text
 * blocks for --parallel, one JSON object per line for --prompts. Returns the exit status. */
int run_engine(const cli_gen_opts *o, const run_engine_opts *r);

#endif
