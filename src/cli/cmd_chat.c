/* cmd_chat.c — `swiftinfer chat`: a conversation formatted with the model's chat template
 * (built-in ChatML and Llama-3 renderers). Each turn re-renders the whole conversation and
 * evaluates only the tokens after the part the session already holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/model_setup.h"
#include "model/model.h"
#include "tokenizer/chat_format.h"

static void usage(FILE *f) {
    fprintf(f, "usage: swiftinfer chat -m FILE [-p MESSAGE] [options]\n\n"
               "Chats with the model using its chat template. With -p, answers one message and\n"
               "exits; otherwise reads one message per line from standard input until end of\n"
               "input or /exit.\n\n"
               "  -p, --prompt TEXT         a single user message to answer\n"
               "      --system TEXT         a system message\n"
               CLI_KV_CACHE_DTYPE_HELP
               "%s", CLI_GEN_FLAGS_HELP);
}

typedef struct conversation {
    chat_message *msgs;
    int n, cap;
} conversation;

static bool conv_add(conversation *c, const char *role, const char *content) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 8;
        chat_message *m = realloc(c->msgs, (size_t)cap * sizeof *m);
        if (!m) return false;
        c->msgs = m;
        c->cap = cap;
    }
    char *r = strdup(role), *t = strdup(content);
    if (!r || !t) {
        free(r);
        free(t);
        return false;
    }
    c->msgs[c->n++] = (chat_message){r, t};
    return true;
}

static void conv_free(conversation *c) {
    for (int i = 0; i < c->n; i++) {
        free((char *)c->msgs[i].role);
        free((char *)c->msgs[i].content);
    }
    free(c->msgs);
}

/* The text of ids[0..n) (for the assistant's turn in the conversation). */
static char *detokenize(si_model *m, const int32_t *ids, int n) {
    size_t cap = 256, len = 0;
    char *s = malloc(cap);
    for (int i = 0; s && i < n; i++) {
        char piece[256];
        int32_t k = si_token_to_piece(m, ids[i], piece, (int32_t)sizeof piece);
        if (k <= 0 || k > (int32_t)sizeof piece) continue;
        if (len + (size_t)k + 1 > cap) {
            char *ns = realloc(s, cap = 2 * (len + (size_t)k + 1));
            if (!ns) free(s);
            s = ns;
            if (!s) break;
        }
        memcpy(s + len, piece, (size_t)k);
        len += (size_t)k;
    }
    if (s) s[len] = '\0';
    return s;
}

/* Renders the conversation, evaluates what the session lacks and streams the answer. */
static int chat_turn(cli_setup_t *c, const cli_gen_opts *o, chat_format fmt, conversation *conv,
                     cli_history *h) {
    char *prompt = NULL;
    si_status st = chat_format_render(fmt, c->m->chat_template, conv->msgs, conv->n, true, &prompt);
    if (st) return cli_fail_status(st);
    size_t len = strlen(prompt);
    int32_t n = si_tokenize(c->m, prompt, len, true, true, NULL, 0);
    int32_t *toks = n > 0 ? malloc((size_t)n * sizeof *toks) : NULL;
    int rc = 0;
    if (n <= 0 || !toks || si_tokenize(c->m, prompt, len, true, true, toks, n) != n) {
        rc = cli_fail("chat: cannot tokenise the conversation: %s", si_last_error());
        goto done;
    }
    if (n >= si_model_n_ctx(c->m)) {
        rc = cli_fail("chat: the conversation has %d tokens but the context holds %d (use -c)", n,
                      si_model_n_ctx(c->m));
        goto done;
    }
    /* a template that writes BOS itself (Llama 3) must not get a second one from the tokenizer */
    if (n >= 2 && toks[0] == toks[1] && toks[0] == si_token_bos(c->m)) {
        n--;
        memmove(toks, toks + 1, (size_t)n * sizeof *toks);
    }
    /* keep the shared prefix; at least one token must be evaluated to get fresh logits */
    int keep = 0;
    while (keep < h->n && keep < n - 1 && h->ids[keep] == toks[keep]) keep++;
    si_session_truncate(c->s, keep);
    h->n = keep;
    cli_gen_stats stats;
    if ((st = cli_generate(c->m, c->s, c->smp, o, h, toks + keep, n - keep, stdout, NULL, &stats))) {
        rc = cli_fail_status(st);
        goto done;
    }
    fputc('\n', stdout);
    if (o->show_stats) cli_print_stats(&stats);
    char *answer = detokenize(c->m, h->ids + n, h->n - n);
    if (!answer || !conv_add(conv, "assistant", answer)) rc = cli_fail("chat: out of memory");
    free(answer);
done:
    free(toks);
    free(prompt);
    return rc;
}

int cmd_chat(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    const char *prompt = NULL, *system = NULL;
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
        } else if (!strcmp(a, "--system") && i + 1 < argc) {
            system = argv[++i];
        } else if (!strcmp(a, "--kv-cache-dtype") && i + 1 < argc) {
            if (!cli_parse_kv_cache_dtype(a, argv[++i], &o.kv_dtype)) return 2;
        } else {
            return cli_fail("chat: unknown option or missing value '%s' (try --help)", a) + 1;
        }
    }
    if (!o.model) return cli_fail("chat: no model given (use -m FILE)") + 1;
    cli_setup_t c;
    int rc = cli_setup(&o, &c);
    if (rc) return rc;
    chat_format fmt = chat_format_detect(c.m->chat_template);
    if (fmt == CHAT_FORMAT_UNKNOWN) {
        cli_teardown(&c);
        return cli_fail("chat: %s has no chat template in a known format (ChatML, Llama-3); "
                        "use `swiftinfer run` for plain completion", o.model);
    }
    conversation conv = {0};
    cli_history h = {0};
    if (system && !conv_add(&conv, "system", system)) rc = cli_fail("chat: out of memory");
    if (!rc && prompt) {
        rc = conv_add(&conv, "user", prompt) ? chat_turn(&c, &o, fmt, &conv, &h)
                                             : cli_fail("chat: out of memory");
    } else if (!rc) {
        bool tty = isatty(STDIN_FILENO);
        char *line = NULL;
        size_t cap = 0;
        for (;;) {
            if (tty) fputs("> ", stdout), fflush(stdout);
            ssize_t k = getline(&line, &cap, stdin);
            if (k < 0) break;
            while (k > 0 && (line[k - 1] == '\n' || line[k - 1] == '\r')) line[--k] = '\0';
            if (!strcmp(line, "/exit")) break;
            if (k == 0) continue;
            if (!conv_add(&conv, "user", line)) {
                rc = cli_fail("chat: out of memory");
                break;
            }
            if ((rc = chat_turn(&c, &o, fmt, &conv, &h))) break;
        }
        free(line);
    }
    conv_free(&conv);
    free(h.ids);
    cli_teardown(&c);
    return rc;
}
