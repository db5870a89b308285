/* main.c — `swiftinfer COMMAND [options]`: dispatch to src/cli/cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} COMMANDS[] = {
    {"run", cmd_run, "generate text from a prompt, streaming it"},
    {"chat", cmd_chat, "chat with a model using its chat template"},
    {"info", cmd_info, "print a GGUF file's metadata and tensor table"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"synth", cmd_synth, "write a GGUF model with random weights of a real shape"},
    {"serve", cmd_serve, "serve the model through an OpenAI-compatible HTTP API"},
    {"perplexity", cmd_perplexity, "perplexity of a text file, full context or streaming"},
    {"bench", cmd_bench, "measure prompt and generation speed and the memory roofline"},
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f) {
    fprintf(f, "usage: swiftinfer COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fprintf(f, "\n`swiftinfer COMMAND --help` describes a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("swiftinfer 0.1.0\n");
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "swiftinfer: unknown command '%s' (try --help)\n", argv[1]);
    return 2;
}
