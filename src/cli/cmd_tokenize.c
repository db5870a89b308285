/* cmd_tokenize.c — `swiftinfer tokenize`: print the token ids of a text. Needs only the
 * tokenizer metadata, so it also works on vocabulary-only GGUF files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "model/gguf.h"
#include "tokenizer/tokenizer.h"

static void usage(FILE *f) {
    fprintf(f, "usage: swiftinfer tokenize -m FILE (-p TEXT | --stdin) [options]\n\n"
               "Prints the token ids of TEXT (or of standard input, byte for byte) on one line.\n\n"
               "  -m, --model FILE   GGUF file with tokenizer metadata\n"
               "  -p, --prompt TEXT  the text\n"
               "      --stdin        read the text from standard input\n"
               "      --no-bos       never add BOS (default: add it when the model asks)\n"
               "      --no-special   treat special-token text as plain text\n"
               "      --pieces       print id and piece, one token per line\n");
}

static char *read_stdin(size_t *len) {
    size_t cap = 4096, n = 0, k;
    char *buf = malloc(cap);
    while (buf && (k = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += k;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    *len = n;
    return buf;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    bool from_stdin = false, add_bos = true, special = true, pieces = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) {
            model = argv[++i];
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && i + 1 < argc) {
            text = argv[++i];
        } else if (!strcmp(a, "--stdin")) {
            from_stdin = true;
        } else if (!strcmp(a, "--no-bos")) {
            add_bos = false;
        } else if (!strcmp(a, "--no-special")) {
            special = false;
        } else if (!strcmp(a, "--pieces")) {
            pieces = true;
        } else {
            return cli_fail("tokenize: unknown option or missing value '%s' (try --help)", a) + 1;
        }
    }
    if (!model) return cli_fail("tokenize: no model given (use -m FILE)") + 1;
    if (!text && !from_stdin) return cli_fail("tokenize: no text given (-p TEXT or --stdin)") + 1;

    gguf_file *f = NULL;
    tokenizer *tok = NULL;
    char *owned = NULL;
    int32_t *ids = NULL;
    int rc = 0;
    size_t len = text ? strlen(text) : 0;
    si_status st;
    if ((st = gguf_open(model, &f)) || (st = tokenizer_load(f, &tok))) {
        rc = cli_fail_status(st);
        goto done;
    }
    if (from_stdin && !(text = owned = read_stdin(&len))) {
        rc = cli_fail("tokenize: out of memory reading standard input");
        goto done;
    }
    int32_t n = tokenizer_encode(tok, text, len, add_bos, special, NULL, 0);
    if (n < 0 || !(ids = malloc(((size_t)n + 1) * sizeof *ids)) ||
        tokenizer_encode(tok, text, len, add_bos, special, ids, n) != n) {
        rc = cli_fail("tokenize: %s", n < 0 ? si_last_error() : "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        if (pieces) {
            char piece[256];
            int32_t k = tokenizer_token_to_piece(tok, ids[i], piece, (int32_t)sizeof piece);
            printf("%d\t'%.*s'\n", ids[i], k > 0 && k <= (int32_t)sizeof piece ? k : 0, piece);
        } else {
            printf(i ? " %d" : "%d", ids[i]);
        }
    }
    if (!pieces) putchar('\n');
done:
    free(ids);
    free(owned);
    tokenizer_free(tok);
    gguf_close(f);
    return rc;
}
