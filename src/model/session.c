/* session.c — si_session: the single-sequence generation path, a one-sequence batch through
 * the model's backend (backend/backend.h). All memory is allocated at creation (KV cache for
 * n_ctx tokens, scratch for n_batch tokens). si_session_eval_sample lets the backend pick the
 * next token where it can (forward_sample), as the engine does, with the sampler's own chain
 * and draw (engine/sampler_pick.h), so the choice is si_sampler_sample's either way.
 *
 * The step ahead: where the backend offers sample_begin (CUDA), si_session_eval_sample begins,
 * before it waits for the id it returns, the next step, which feeds that id back on the device
 * at the next position and samples with the draw the sampler would make next (peeked, not
 * made). The GPU then never idles while the host takes the id, streams its text and calls
 * again (about 20 us a token, bench/RESULTS.md). The next call uses that step when it
 * evaluates the same token and its own draw (now made) is the peeked one; anything else (another
 * token, si_session_eval, si_session_truncate, a sampler with other draws) ends it unused: its
 * only effect, the K/V it wrote at position n_past, is written again by whatever comes there.
 * So the ids are the ones without the step ahead (SI_SESSION_AHEAD=0), token for token.
 *
 * A sampler whose penalties read the history gives the device its window's (token, count)
 * pairs (sampler_penalty_pairs); the step ahead is then off, since the next step's window holds
 * the id not yet known. A window of more than BACKEND_PEN_MAX distinct ids, or
 * SI_DEVICE_PENALTIES=0, brings the logits back to si_sampler_sample instead. */
#include "model/session.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/sampler_pick.h"

si_session_params si_session_default_params(void) {
    return (si_session_params){SI_SESSION_DEFAULT_BATCH, SI_KV_F16};
}

si_status si_session_create(si_model *m, si_session **out) {
    return si_session_create_params(m, NULL, out);
}

si_status si_session_create_batch(si_model *m, int32_t n_batch, si_session **out) {
    si_session_params p = si_session_default_params();
    p.n_batch = n_batch;
    return si_session_create_params(m, &p, out);
}

si_status si_session_create_params(si_model *m, const si_session_params *params,
                                   si_session **out) {
    *out = NULL;
    const si_session_params p = params ? *params : si_session_default_params();
    int32_t n_batch = p.n_batch;
    if (n_batch < 1)
        return si_error(SI_ERR_INVALID_ARG, "session: n_batch must be >= 1 (got %d)", n_batch);
    if (n_batch > m->n_ctx) n_batch = m->n_ctx; /* no pass is longer than the context */
    const si_backend *be = backend_for_model(m);
    si_status st = backend_check_kv_dtype(be, p.kv_cache_dtype, "session");
    if (st) return st;
    const model_hparams *hp = &m->hp;
    const int32_t kv_dim = hp->n_head_kv * hp->head_dim;
    const int32_t n_blocks = (m->n_ctx + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE;
    const size_t elem = p.kv_cache_dtype == SI_KV_FP8_E4M3 ? 1 : 2;
    si_session *s = calloc(1, sizeof *s);
    if (!s) return si_error(SI_ERR_NOMEM, "session: out of memory");
    s->m = m;
    s->be = be;
    s->n_blocks = n_blocks;
    s->n_batch = n_batch;
    const backend_params bp = {n_blocks, n_batch, 1, m->n_ctx, p.kv_cache_dtype};
    st = s->be->create(m, &bp, &s->bs);
    if (st != SI_OK) {
        si_session_free(s);
        if (st != SI_ERR_NOMEM) return st; /* the backend's message says what went wrong */
        const size_t kv = kv_cache_block_bytes(hp->n_layer, kv_dim, KV_BLOCK_SIZE, elem) * n_blocks;
        return si_error(st, "session: out of memory for a %d-token context (%zu MiB of KV "
                        "cache)", m->n_ctx, kv >> 20);
    }
    s->block_table = malloc((size_t)n_blocks * sizeof(int32_t));
    s->pos = malloc((size_t)n_batch * sizeof(int32_t));
    s->seq = calloc((size_t)n_batch, sizeof(int32_t));
    s->logits_owned = !be->logits_buffer;
    s->logits =
        s->logits_owned ? malloc((size_t)hp->n_vocab * sizeof(float)) : be->logits_buffer(s->bs);
    if (s->logits) memset(s->logits, 0, (size_t)hp->n_vocab * sizeof(float));
    if (!s->block_table || !s->pos || !s->seq || !s->logits) {
        si_session_free(s);
        return si_error(SI_ERR_NOMEM, "session: out of memory");
    }
    for (int32_t i = 0; i < n_blocks; i++) s->block_table[i] = i;
    const char *ahead = getenv("SI_SESSION_AHEAD");
    s->ahead_enabled = be->sample_begin && !(ahead && !strcmp(ahead, "0"));
    s->pen_on_device = backend_penalties_on_device(be);
    *out = s;
    return SI_OK;
}

static void ahead_drop(si_session *s);

void si_session_free(si_session *s) {
    if (!s) return;
    ahead_drop(s);
    if (s->bs) s->be->free(s->bs);
    free(s->block_table);
    free(s->pos);
    free(s->seq);
    if (s->logits_owned) free(s->logits);
    free(s);
}

/* What a pass does with its last token's logits */
typedef enum session_out {
    OUT_NONE,     /* nothing (a prompt chunk before the last) */
    OUT_LOGITS,   /* to s->logits */
    OUT_SAMPLE,   /* the token smp picks from them on the device to *id (forward_sample) */
    OUT_BEGIN,    /* the same begun (sample_begin): sample_end gives the id */
    OUT_BEGIN_FED /* the step ahead: OUT_BEGIN on the id the step begun before picks (tokens is
                   * a placeholder), at position n_past, which it does not advance */
} session_out;

/* Runs n <= n_batch tokens at positions n_past.. as a one-sequence batch, ending as out says;
 * the logits stay on the device unless OUT_LOGITS. */
static void session_forward(si_session *s, const int32_t *tokens, int32_t n, session_out out,
                            const backend_sample *smp, int32_t *id) {
    for (int32_t t = 0; t < n; t++) s->pos[t] = s->n_past + t;
    const int32_t seq_len = s->n_past + n;
    const int32_t logits_row = out == OUT_NONE ? -1 : n - 1;
    const uint8_t rope_on_read = 0;
    const si_batch b = {
        .n_tokens = n,
        .token = tokens,
        .pos = s->pos,
        .seq = s->seq,
        .n_seqs = 1,
        .seq_len = &seq_len,
        .max_blocks = s->n_blocks,
        .block_table = s->block_table,
        .rope_on_read = &rope_on_read,
        .logits_row = &logits_row,
    };
    if (out == OUT_SAMPLE)
        s->be->forward_sample(s->bs, &b, smp, id, NULL);
    else if (out == OUT_BEGIN || out == OUT_BEGIN_FED)
        s->be->sample_begin(s->bs, &b, smp, out == OUT_BEGIN_FED);
    else
        s->be->forward(s->bs, &b, s->logits);
    if (out != OUT_BEGIN_FED) s->n_past = seq_len;
}

/* SI_OK when n tokens fit the context and are in the vocabulary; else the error, naming it */
static si_status session_check(const si_session *s, const int32_t *tokens, int32_t n) {
    const si_model *m = s->m;
    if (n <= 0) return si_error(SI_ERR_INVALID_ARG, "eval: no tokens");
    if (n > m->n_ctx - s->n_past)
        return si_error(SI_ERR_CONTEXT_FULL, "%d tokens do not fit the context: %d already used "
                        "of %d", n, s->n_past, m->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->hp.n_vocab)
            return si_error(SI_ERR_INVALID_ARG, "token id %d at index %d is outside the "
                            "vocabulary [0, %d)", tokens[i], i, m->hp.n_vocab);
    return SI_OK;
}

/* session_check's tokens in chunks of n_batch; the last chunk ends as `out` says */
static void session_run(si_session *s, const int32_t *tokens, int32_t n, session_out out,
                        const backend_sample *smp, int32_t *id) {
    for (int32_t done = 0; done < n;) {
        const int32_t chunk = n - done < s->n_batch ? n - done : s->n_batch;
        const bool last = done + chunk == n;
        session_forward(s, tokens + done, chunk, last ? out : OUT_NONE, smp, id);
        done += chunk;
    }
    s->logits_on_device = out != OUT_LOGITS;
}

/* Ends the step ahead, if one runs, unused. */
static void ahead_drop(si_session *s) {
    if (!s->ahead_on) return;
    (void)s->be->sample_end(s->bs);
    s->ahead_on = false;
}

/* After a sampled step was begun (OUT_BEGIN, n_past advanced past it): begins the step ahead
 * with the draw smp would make next, where it fits and smp's penalties leave the next
 * history's logits alone, then waits for the sampled step; returns its id. */
static int32_t ahead_begin_then_end(si_session *s, const si_sampler *smp, int32_t n_history_next) {
    if (s->n_past < s->m->n_ctx && sampler_history_free(smp, n_history_next)) {
        const int32_t placeholder = 0;
        sampler_peek_sample(smp, &s->ahead_q);
        session_forward(s, &placeholder, 1, OUT_BEGIN_FED, &s->ahead_q, NULL);
        s->ahead_on = true;
    }
    s->ahead_token = s->be->sample_end(s->bs);
    return s->ahead_token;
}

static bool same_draw(const backend_sample *a, const backend_sample *b) {
    return a->temperature == b->temperature && a->top_k == b->top_k && a->top_p == b->top_p &&
           a->min_p == b->min_p && a->u == b->u && a->logprobs == b->logprobs;
}

si_status si_session_eval(si_session *s, const int32_t *tokens, int32_t n) {
    ahead_drop(s);
    si_status st = session_check(s, tokens, n);
    if (!st) session_run(s, tokens, n, OUT_LOGITS, NULL, NULL);
    return st;
}

si_status si_session_eval_sample(si_session *s, const int32_t *tokens, int32_t n, si_sampler *smp,
                                 const int32_t *history, int32_t n_history, int32_t *id) {
    if (!smp || !id)
        return si_error(SI_ERR_INVALID_ARG, "eval_sample: no sampler or no id to fill");
    /* penalties that read the history: their pairs go with the step where the device takes
     * them (backend_penalties_on_device), else the logits come back to si_sampler_sample */
    int32_t n_pen = 0;
    if (s->be->forward_sample && !sampler_history_free(smp, n_history))
        n_pen = s->pen_on_device ? sampler_penalty_pairs(smp, history, n_history, BACKEND_PEN_MAX,
                                                         s->pen_tok, s->pen_count)
                                 : -1;
    if (!s->be->forward_sample || n_pen < 0) {
        si_status st = si_session_eval(s, tokens, n);
        if (!st) *id = si_sampler_sample(smp, s->logits, history, n_history);
        return st;
    }
    backend_sample q;
    if (s->ahead_on && n_pen == 0 && n == 1 && tokens[0] == s->ahead_token) {
        sampler_peek_sample(smp, &q);
        if (same_draw(&q, &s->ahead_q)) { /* the step ahead is this call's step */
            sampler_draw_sample(smp, &q);
            s->ahead_on = false;
            s->ahead_used++;
            s->n_past++;
            s->logits_on_device = true;
            *id = ahead_begin_then_end(s, smp, n_history + 1);
            return SI_OK;
        }
    }
    ahead_drop(s);
    si_status st = session_check(s, tokens, n);
    if (st) return st;
    /* the draw si_sampler_sample would make, so that a seed picks the same tokens either way */
    sampler_draw_sample(smp, &q);
    q.n_pen = n_pen;
    q.pen_tok = s->pen_tok;
    q.pen_count = s->pen_count;
    if (!s->ahead_enabled || n_pen > 0) { /* no step ahead: the next one's penalties need this id */
        session_run(s, tokens, n, OUT_SAMPLE, &q, id);
        return SI_OK;
    }
    session_run(s, tokens, n, OUT_BEGIN, &q, NULL);
    *id = ahead_begin_then_end(s, smp, n_history + 1);
    return SI_OK;
}

const float *si_session_logits(const si_session *s) {
    return s->logits_on_device ? NULL : s->logits;
}
int32_t si_session_n_past(const si_session *s) { return s->n_past; }

void si_session_truncate(si_session *s, int32_t n) {
    ahead_drop(s);
    if (n >= 0 && n < s->n_past) s->n_past = n;
}
