/* cmd_perplexity.c — `swiftinfer perplexity`: the perplexity of a whole text file, evaluated
 * left to right with a bounded KV cache, to compare dense attention with StreamingLLM's
 * attention sinks (Xiao et al. 2023, "Efficient Streaming Language Models with Attention
 * Sinks") and with window-only attention.
 *
 * The text is tokenised once (BOS prepended when the model asks for it). Three modes:
 *
 * - full (default, --ctx N): llama.cpp's perplexity tool. The tokens are cut into consecutive
 *   windows of N tokens; each window starts from an empty cache (its first token replaced by
 *   BOS when the model uses one) and only the second half is scored: the logits at positions
 *   N/2 .. N-2 predict tokens N/2+1 .. N-1, so every scored token sees at least N/2 tokens of
 *   context. A trailing part shorter than a window is not scored.
 * - sinks (--sink S --window W): one pass over the whole text. The cache keeps the first
 *   ceil(S/16) blocks (the attention sinks) and the last W tokens rounded up to whole blocks,
 *   plus the block being filled; when a chunk does not fit, the oldest non-sink block is
 *   dropped. Keys are stored un-rotated (rope_on_read) and positions are positions inside the
 *   cache, as in the paper, so after a drop the window moves down and is re-positioned exactly.
 *   Every token but the first is scored.
 * - window only (--window W --no-sink): the same without sink blocks.
 *
 * Those are the engine's rules (src/engine/scheduler.c, reserve()), so the numbers say what
 * streaming generation sees. To score every token of a chunk with one forward_batch, each
 * token is its own "sequence" of the batch, all sharing one block table row: attention is
 * causal through pos (slots 0..pos), so this is exact, and every sequence has a logits row.
 * Everything is allocated before the first chunk; the loop does not allocate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "core/error.h"
#include "model/batch.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: swiftinfer perplexity -m FILE -f TEXT_FILE [options]\n\n"
            "Perplexity of the whole text, evaluated left to right with a bounded KV cache.\n\n"
            "  -m, --model FILE     GGUF model\n"
            "  -f, --file FILE      the text (tokenised once; BOS when the model asks)\n"
            "      --ctx N          full-context mode: consecutive windows of N tokens, the\n"
            "                       second half of each scored (llama.cpp's method; default 2048)\n"
            "      --sink S         streaming mode: keep the first S tokens (rounded up to\n"
            "                       blocks of 16) as attention sinks (default 4 with --window)\n"
            "      --window W       streaming mode: keep the last W tokens (rounded up to blocks)\n"
            "      --no-sink        streaming mode without sinks (window-only attention)\n"
            "  -t, --threads N      CPU threads (default: all cores)\n"
            "      --max-tokens N   use only the first N tokens of the text\n"
            "      --chunk N        tokens per forward pass (default 256)\n"
            "      --score-from I   streaming: score only the tokens after token I (to compare\n"
            "                       with full mode on the same tokens: I = ctx/2 over ctx tokens)\n"
            "      --score-like-ctx N  streaming: score exactly the predictions full mode with\n"
            "                       --ctx N scores (the second half of every N-token window)\n"
            "      --json           print the summary as one JSON object\n"
            "  -q, --quiet          no progress on standard error\n");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap);
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Everything one evaluation needs, allocated once. */
typedef struct ppl_ctx {
    si_model *m;
    kv_cache *kv;
    forward_scratch *ws;
    int32_t chunk;      /* most tokens per forward pass */
    int32_t max_blocks; /* block table row length */
    float *logits;      /* [chunk][n_vocab] */
    int32_t *tok, *pos, *seq, *seq_len, *logits_row; /* [chunk] */
    uint8_t *rope_on_read;                            /* [chunk] */
    int32_t *table;                                   /* [chunk][max_blocks] */
    double nll;       /* sum of -log p(next token) */
    int64_t n_scored;
} ppl_ctx;

/* -log softmax(row)[target], in double. */
static double token_nll(const float *row, int32_t n_vocab, int32_t target) {
    float mx = row[0];
    for (int32_t i = 1; i < n_vocab; i++) mx = row[i] > mx ? row[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)row[i] - mx);
    return log(sum) - ((double)row[target] - mx);
}

/* Which predictions count: those of tokens i >= from and, with a period, only those full mode
 * with --ctx period scores (positions period/2 .. period-2 of each window: the last one has no
 * next token inside its window), so that every mode is scored on the same tokens. */
typedef struct score_rule {
    int64_t from, period;
} score_rule;

static bool is_scored(const score_rule *r, int64_t i) {
    if (i < r->from) return false;
    return r->period == 0 || (i % r->period >= r->period / 2 && i % r->period < r->period - 1);
}

/* Runs n tokens at cache positions pos0 .. pos0+n-1 through the blocks of row (n_row ids).
 * tokens[0] is token g0 of the text (or of the window); token t is scored against next[t] when
 * the rule says so and next[t] >= 0. */
static void ppl_eval(ppl_ctx *c, const int32_t *tokens, const int32_t *next, int32_t n,
                     int32_t pos0, const int32_t *row, int32_t n_row, uint8_t rope_on_read,
                     int64_t g0, const score_rule *rule) {
    int32_t n_out = 0;
    for (int32_t t = 0; t < n; t++) {
        c->tok[t] = tokens[t];
        c->pos[t] = pos0 + t;
        c->seq[t] = t; /* one sequence per token, all with the same blocks */
        c->seq_len[t] = pos0 + t + 1;
        c->rope_on_read[t] = rope_on_read;
        c->logits_row[t] = is_scored(rule, g0 + t) && next[t] >= 0 ? t : -1;
        n_out += c->logits_row[t] >= 0;
        memcpy(c->table + (size_t)t * c->max_blocks, row, (size_t)n_row * sizeof *row);
    }
    const si_batch b = {.n_tokens = n,
                        .token = c->tok,
                        .pos = c->pos,
                        .seq = c->seq,
                        .n_seqs = n,
                        .seq_len = c->seq_len,
                        .max_blocks = c->max_blocks,
                        .block_table = c->table,
                        .rope_on_read = c->rope_on_read,
                        .logits_row = c->logits_row};
    forward_batch(c->m, c->kv, &b, c->ws, c->logits);
    if (n_out == 0) return;
    const int32_t nv = c->m->hp.n_vocab;
    for (int32_t t = 0; t < n; t++) {
        if (c->logits_row[t] < 0) continue;
        c->nll += token_nll(c->logits + (size_t)t * nv, nv, next[t]);
        c->n_scored++;
    }
}

static void progress(const ppl_ctx *c, int64_t done, int64_t total, double t0, bool quiet) {
    if (quiet) return;
    const double dt = now_s() - t0;
    fprintf(stderr, "perplexity: %lld/%lld tokens, %lld scored, ppl %.4f, %.1f tokens/s\n",
            (long long)done, (long long)total, (long long)c->n_scored,
            c->n_scored ? exp(c->nll / (double)c->n_scored) : 0.0, dt > 0 ? done / dt : 0.0);
}

int cmd_perplexity(int argc, char **argv) {
    const char *model = NULL, *text_file = NULL;
    long ctx = 2048, sink = -1, window = 0, max_tokens = 0, chunk = 256, score_from = 0, iv;
    long score_period = 0;
    bool no_sink = false, json = false, quiet = false, ctx_given = false;
    si_model_params mp = si_model_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const bool has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has) {
            model = argv[++i];
        } else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && has) {
            text_file = argv[++i];
        } else if (!strcmp(a, "--ctx") && has) {
            if (!cli_parse_int(a, argv[++i], 16, 1 << 20, &ctx)) return 2;
            ctx_given = true;
        } else if (!strcmp(a, "--sink") && has) {
            if (!cli_parse_int(a, argv[++i], 0, 1 << 20, &sink)) return 2;
        } else if (!strcmp(a, "--window") && has) {
            if (!cli_parse_int(a, argv[++i], 1, 1 << 20, &window)) return 2;
        } else if (!strcmp(a, "--no-sink")) {
            no_sink = true;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && has) {
            if (!cli_parse_int(a, argv[++i], 1, 1024, &iv)) return 2;
            mp.n_threads = (int32_t)iv;
        } else if (!strcmp(a, "--max-tokens") && has) {
            if (!cli_parse_int(a, argv[++i], 2, 1L << 30, &max_tokens)) return 2;
        } else if (!strcmp(a, "--chunk") && has) {
            if (!cli_parse_int(a, argv[++i], 1, 1 << 16, &chunk)) return 2;
        } else if (!strcmp(a, "--score-from") && has) {
            if (!cli_parse_int(a, argv[++i], 0, 1L << 30, &score_from)) return 2;
        } else if (!strcmp(a, "--score-like-ctx") && has) {
            if (!cli_parse_int(a, argv[++i], 16, 1 << 20, &score_period)) return 2;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else {
            return cli_fail("perplexity: unknown option or missing value '%s' (try --help)", a) +
                   1;
        }
    }
    if (!model) return cli_fail("perplexity: no model given (use -m FILE)") + 1;
    if (!text_file) return cli_fail("perplexity: no text given (use -f TEXT_FILE)") + 1;
    const bool streaming = window > 0;
    if (!streaming && (sink >= 0 || no_sink))
        return cli_fail("perplexity: --sink and --no-sink need --window W") + 1;
    if (streaming && ctx_given)
        return cli_fail("perplexity: --ctx is the full-context mode; drop it with --window") + 1;
    if (!streaming && (score_from || score_period))
        return cli_fail("perplexity: --score-from and --score-like-ctx are for streaming mode "
                        "(--window W)") + 1;
    if (no_sink && sink > 0) return cli_fail("perplexity: --sink and --no-sink conflict") + 1;
    if (streaming && (no_sink || sink < 0)) sink = no_sink ? 0 : 4;

    const int32_t bs = KV_BLOCK_SIZE;
    const int32_t sink_blocks = streaming ? (int32_t)((sink + bs - 1) / bs) : 0;
    const int32_t window_blocks = streaming ? (int32_t)((window + bs - 1) / bs) : 0;
    /* the cache's blocks: full mode one window; streaming sinks + window + the one filling */
    const int32_t max_blocks =
        streaming ? sink_blocks + window_blocks + 1 : (int32_t)((ctx + bs - 1) / bs);
    const int32_t max_kv = streaming ? max_blocks * bs : (int32_t)ctx;
    /* a streaming chunk must fit the window so that a drop only removes full blocks */
    if (streaming && chunk > window_blocks * bs) chunk = window_blocks * bs;
    if (!streaming && chunk > ctx) chunk = ctx;

    size_t text_len = 0;
    char *text = read_all(text_file, &text_len);
    if (!text) return cli_fail("perplexity: cannot read text file '%s'", text_file);
    ppl_ctx c = {0};
    int32_t *ids = NULL, *next = NULL, *row = NULL, *free_ids = NULL;
    int rc = 0;
    si_status st = si_model_load(model, &mp, &c.m);
    if (st) {
        rc = cli_fail_status(st);
        goto done;
    }
    int32_t n = si_tokenize(c.m, text, text_len, true, false, NULL, 0);
    if (n < 0) {
        rc = cli_fail_status(SI_ERR_INVALID_ARG);
        goto done;
    }
    if (!(ids = malloc(((size_t)n + 1) * sizeof *ids)) ||
        si_tokenize(c.m, text, text_len, true, false, ids, n) != n) {
        rc = cli_fail("perplexity: out of memory tokenising '%s'", text_file);
        goto done;
    }
    const int32_t n_text = n;
    if (max_tokens > 0 && n > max_tokens) n = (int32_t)max_tokens;
    if (n < 2 || (!streaming && n < ctx)) {
        rc = cli_fail("perplexity: '%s' has %d tokens%s; need at least %ld", text_file, n,
                      n < n_text ? " (--max-tokens)" : "", streaming ? 2L : ctx);
        goto done;
    }

    c.chunk = (int32_t)chunk;
    c.max_blocks = max_blocks;
    const size_t nv = (size_t)c.m->hp.n_vocab;
    if ((st = kv_cache_create(c.m->hp.n_layer, c.m->hp.n_head_kv * c.m->hp.head_dim, max_blocks,
                              bs, &c.kv)) ||
        (st = forward_scratch_create(c.m, c.chunk, c.chunk, max_kv, &c.ws))) {
        rc = cli_fail_status(st);
        goto done;
    }
    c.logits = malloc((size_t)c.chunk * nv * sizeof *c.logits);
    c.tok = malloc((size_t)c.chunk * sizeof *c.tok);
    c.pos = malloc((size_t)c.chunk * sizeof *c.pos);
    c.seq = malloc((size_t)c.chunk * sizeof *c.seq);
    c.seq_len = malloc((size_t)c.chunk * sizeof *c.seq_len);
    c.logits_row = malloc((size_t)c.chunk * sizeof *c.logits_row);
    c.rope_on_read = malloc((size_t)c.chunk);
    c.table = calloc((size_t)c.chunk * max_blocks, sizeof *c.table);
    next = malloc((size_t)(streaming ? n : ctx) * sizeof *next);
    row = malloc((size_t)max_blocks * sizeof *row);
    free_ids = malloc((size_t)max_blocks * sizeof *free_ids);
    if (!c.logits || !c.tok || !c.pos || !c.seq || !c.seq_len || !c.logits_row ||
        !c.rope_on_read || !c.table || !next || !row || !free_ids) {
        rc = cli_fail("perplexity: out of memory (%d-token chunks of %zu logits)", c.chunk, nv);
        goto done;
    }

    const double t0 = now_s();
    const int32_t bos = si_token_bos(c.m);
    const bool add_bos = bos >= 0 && ids[0] == bos;
    int64_t total = 0;
    if (!streaming) {
        /* llama.cpp: windows of ctx tokens from an empty cache, the second half scored */
        const int32_t n_win = n / (int32_t)ctx;
        const score_rule rule = {ctx / 2, 0}; /* window-relative */
        total = (int64_t)n_win * ctx;
        for (int32_t i = 0; i < max_blocks; i++) row[i] = i;
        for (int32_t w = 0; w < n_win; w++) {
            int32_t *win = ids + (size_t)w * ctx;
            const int32_t saved = win[0];
            if (add_bos) win[0] = bos;
            for (int32_t i = 0; i < ctx; i++) next[i] = i + 1 < ctx ? win[i + 1] : -1;
            for (int32_t p = 0; p < ctx; p += c.chunk) {
                const int32_t k = ctx - p < c.chunk ? (int32_t)ctx - p : c.chunk;
                ppl_eval(&c, win + p, next + p, k, p, row, (p + k + bs - 1) / bs, 0, p, &rule);
            }
            win[0] = saved;
            progress(&c, (int64_t)(w + 1) * ctx, total, t0, quiet);
        }
    } else {
        /* one pass; the cache keeps the sink blocks and a sliding window of blocks */
        const score_rule rule = {score_from, score_period};
        total = n;
        for (int32_t i = 0; i < n; i++) next[i] = i + 1 < n ? ids[i + 1] : -1;
        int32_t n_free = 0, n_row = 0, kv_len = 0;
        for (int32_t i = max_blocks - 1; i >= 0; i--) free_ids[n_free++] = i;
        int64_t last_report = 0;
        for (int32_t g = 0; g < n;) {
            const int32_t k = n - g < c.chunk ? n - g : c.chunk;
            while (kv_len + k > max_blocks * bs) {
                /* drop the oldest non-sink block; it is full since k <= window_blocks * 16 */
                SI_ASSERT(n_row > sink_blocks + 1);
                free_ids[n_free++] = row[sink_blocks];
                memmove(row + sink_blocks, row + sink_blocks + 1,
                        (size_t)(n_row - sink_blocks - 1) * sizeof *row);
                n_row--;
                kv_len -= bs;
            }
            while (n_row * bs < kv_len + k) row[n_row++] = free_ids[--n_free];
            ppl_eval(&c, ids + g, next + g, k, kv_len, row, n_row, 1, g, &rule);
            kv_len += k;
            g += k;
            if (g - last_report >= 2048 || g == n) {
                progress(&c, g, total, t0, quiet);
                last_report = g;
            }
        }
    }
    const double dt = now_s() - t0;
    const double ppl = exp(c.nll / (double)c.n_scored);
    const char *mode = !streaming ? "full" : sink > 0 ? "sinks" : "window";
    if (json) {
        printf("{\"mode\": \"%s\", \"ppl\": %.6f, \"nll\": %.6f, \"n_scored\": %lld, "
               "\"n_tokens\": %d, \"n_text_tokens\": %d, \"ctx\": %ld, \"sink\": %ld, "
               "\"window\": %ld, \"cache_tokens\": %d, \"seconds\": %.2f}\n",
               mode, ppl, c.nll / (double)c.n_scored, (long long)c.n_scored, n, n_text,
               streaming ? 0L : ctx, streaming ? sink : 0L, streaming ? window : 0L, max_kv, dt);
    } else {
        if (streaming)
            printf("perplexity: %s (sink %ld, window %ld, cache %d tokens): ", mode, sink, window,
                   max_kv);
        else
            printf("perplexity: full (ctx %ld, second half of each window scored): ", ctx);
        printf("ppl %.4f over %lld scored tokens of %d (text %d), %.1f s\n", ppl,
               (long long)c.n_scored, n, n_text, dt);
    }
done:
    free(free_ids);
    free(row);
    free(next);
    free(c.table);
    free(c.rope_on_read);
    free(c.logits_row);
    free(c.seq_len);
    free(c.seq);
    free(c.pos);
    free(c.tok);
    free(c.logits);
    forward_scratch_free(c.ws);
    kv_cache_free(c.kv);
    free(ids);
    si_model_free(c.m);
    free(text);
    return rc;
}
