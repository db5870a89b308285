/* sampler.c — picking the next token from logits (the si_sampler_* API).
 *
 * The chain follows llama.cpp's default order:
 *   logit biases (OpenAI's logit_bias: a bias added to chosen tokens' logits)
 *   -> penalties (repetition, frequency, presence over the last penalty_last_n history tokens)
 *   -> temperature <= 0: greedy argmax (ties: lowest id)
 *   -> otherwise top-k -> top-p -> min-p -> temperature -> softmax -> seeded draw.
 * Repetition penalty is llama.cpp's repeat_penalty (CTRL paper, Keskar et al. 2019, as
 * implemented there: positive logits divided, negative ones multiplied); frequency and
 * presence penalties are OpenAI's (logit -= count * frequency + (count > 0) * presence).
 * As in llama.cpp, top-p and min-p look at the distribution before temperature.
 *
 * The sampler owns a xoshiro256** state (Blackman & Vigna) seeded with splitmix64, so the same
 * seed and the same logits give the same tokens. All scratch is allocated by si_sampler_create:
 * si_sampler_sample does not allocate. The chain after the penalties is sampler_pick
 * (sampler_pick.h), a pure function that device samplers are tested against. */
#include "engine/sampler_exp.h"
#include "engine/sampler_pick.h"

#include "backend/backend.h"
#include "core/error.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct si_sampler {
    si_sampling_params p;
    int32_t n_vocab;
    uint64_t rng[4];     /* xoshiro256** state */
    sampler_cand *cands; /* (n_vocab) working candidates */
    int32_t *counts;     /* (n_vocab) occurrences in the penalty window; all zero between calls */
    int32_t *touched;    /* (n_vocab) distinct ids with counts > 0 during one call */
    int32_t *pen_count;  /* (n_vocab) the counts of apply_penalties' pairs (ids: touched) */
    si_logit_bias *bias; /* (p.n_logit_bias) p.logit_bias's copy; p.logit_bias points here */
};

/* ---- PRNG ---------------------------------------------------------------------------------- */

static uint64_t splitmix64_next(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

/* Uniform double in [0, 1) from the top 53 bits. */
static double rng_uniform(si_sampler *s) {
    return (double)(xoshiro_next(s->rng) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- Parameters ---------------------------------------------------------------------------- */

si_sampling_params si_sampling_default_params(void) {
    si_sampling_params p = {
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repetition_penalty = 1.0f,
        .frequency_penalty = 0.0f,
        .presence_penalty = 0.0f,
        .penalty_last_n = 64,
        /* NOTE: llama.cpp's default seed value, but here it is a fixed seed, not "random":
         * runs are reproducible unless the caller picks a seed. */
        .seed = 0xFFFFFFFFu,
    };
    return p;
}

static si_status check_params(const si_sampling_params *p, int32_t n_vocab) {
    if (n_vocab <= 0)
        return si_error(SI_ERR_INVALID_ARG, "sampler: n_vocab must be > 0 (got %d)", (int)n_vocab);
    if (!(p->temperature >= 0.0f) || isinf(p->temperature))
        return si_error(SI_ERR_INVALID_ARG, "sampler: temperature must be finite and >= 0 (got %g)",
                        (double)p->temperature);
    if (p->top_k < 0)
        return si_error(SI_ERR_INVALID_ARG, "sampler: top_k must be >= 0, 0 meaning off (got %d)",
                        (int)p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return si_error(SI_ERR_INVALID_ARG, "sampler: top_p must be in (0, 1] (got %g)",
                        (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return si_error(SI_ERR_INVALID_ARG, "sampler: min_p must be in [0, 1] (got %g)",
                        (double)p->min_p);
    if (!(p->repetition_penalty > 0.0f) || isinf(p->repetition_penalty))
        return si_error(SI_ERR_INVALID_ARG,
                        "sampler: repetition_penalty must be finite and > 0 (got %g)",
                        (double)p->repetition_penalty);
    if (!isfinite(p->frequency_penalty))
        return si_error(SI_ERR_INVALID_ARG, "sampler: frequency_penalty must be finite (got %g)",
                        (double)p->frequency_penalty);
    if (!isfinite(p->presence_penalty))
        return si_error(SI_ERR_INVALID_ARG, "sampler: presence_penalty must be finite (got %g)",
                        (double)p->presence_penalty);
    if (p->penalty_last_n < -1)
        return si_error(SI_ERR_INVALID_ARG,
                        "sampler: penalty_last_n must be >= -1, -1 meaning all (got %d)",
                        (int)p->penalty_last_n);
    if (p->n_logit_bias < 0 || p->n_logit_bias > SI_MAX_LOGIT_BIAS ||
        (p->n_logit_bias > 0 && !p->logit_bias))
        return si_error(SI_ERR_INVALID_ARG, "sampler: n_logit_bias must be 0..%d, the entries "
                        "given (got %d%s)", SI_MAX_LOGIT_BIAS, (int)p->n_logit_bias,
                        p->logit_bias ? "" : ", logit_bias NULL");
    for (int32_t i = 0; i < p->n_logit_bias; i++) {
        const si_logit_bias *b = &p->logit_bias[i];
        if (b->token < 0 || b->token >= n_vocab)
            return si_error(SI_ERR_INVALID_ARG, "sampler: logit_bias token %d is outside the "
                            "vocabulary [0, %d)", (int)b->token, (int)n_vocab);
        if (!isfinite(b->bias))
            return si_error(SI_ERR_INVALID_ARG, "sampler: logit_bias for token %d must be "
                            "finite (got %g)", (int)b->token, (double)b->bias);
        for (int32_t j = 0; j < i; j++)
            if (p->logit_bias[j].token == b->token)
                return si_error(SI_ERR_INVALID_ARG, "sampler: logit_bias lists token %d twice",
                                (int)b->token);
    }
    return SI_OK;
}

si_status si_sampler_create(const si_sampling_params *p, int32_t n_vocab, si_sampler **out) {
    if (!out) return si_error(SI_ERR_INVALID_ARG, "sampler: out is NULL");
    *out = NULL;
    if (!p) return si_error(SI_ERR_INVALID_ARG, "sampler: params is NULL");
    si_status st = check_params(p, n_vocab);
    if (st != SI_OK) return st;

    si_sampler *s = calloc(1, sizeof *s);
    if (!s) return si_error(SI_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->touched = malloc((size_t)n_vocab * sizeof *s->touched);
    s->pen_count = malloc((size_t)n_vocab * sizeof *s->pen_count);
    s->bias = malloc((size_t)(p->n_logit_bias > 0 ? p->n_logit_bias : 1) * sizeof *s->bias);
    if (!s->cands || !s->counts || !s->touched || !s->pen_count || !s->bias) {
        si_sampler_free(s);
        return si_error(SI_ERR_NOMEM, "sampler: out of memory for n_vocab=%d scratch",
                        (int)n_vocab);
    }
    if (p->n_logit_bias > 0)
        memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->bias);
    s->p.logit_bias = s->bias;
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64_next(&x);
    *out = s;
    return SI_OK;
}

void si_sampler_free(si_sampler *s) {
    if (!s) return;
    free(s->cands);
    free(s->counts);
    free(s->touched);
    free(s->pen_count);
    free(s->bias);
    free(s);
}

/* ---- Chain steps --------------------------------------------------------------------------- */

int32_t sampler_logit_bias(const si_sampler *s, const si_logit_bias **bias) {
    *bias = s->bias;
    return s->p.n_logit_bias;
}

bool sampler_history_free(const si_sampler *s, int32_t n_history) {
    const si_sampling_params *p = &s->p;
    return n_history <= 0 || p->penalty_last_n == 0 ||
           (p->repetition_penalty == 1.0f && p->frequency_penalty == 0.0f &&
            p->presence_penalty == 0.0f);
}

int32_t sampler_penalty_pairs(si_sampler *s, const int32_t *history, int32_t n_history, int32_t cap,
                              int32_t *tok, int32_t *count) {
    const si_sampling_params *p = &s->p;
    if (!history || sampler_history_free(s, n_history)) return 0;
    int32_t start = 0;
    if (p->penalty_last_n > 0 && n_history > p->penalty_last_n)
        start = n_history - p->penalty_last_n;

    int32_t n_touched = 0;
    for (int32_t i = start; i < n_history; i++) {
        int32_t t = history[i];
        if (t < 0 || t >= s->n_vocab)
            continue; /* NOTE: ids outside the vocabulary cannot be penalised; ignore them */
        if (s->counts[t]++ == 0) s->touched[n_touched++] = t;
    }
    for (int32_t j = 0; j < n_touched; j++) {
        const int32_t t = s->touched[j];
        if (n_touched <= cap) {
            tok[j] = t;
            count[j] = s->counts[t];
        }
        s->counts[t] = 0;
    }
    return n_touched <= cap ? n_touched : -1;
}

float sampler_penalise(float logit, int32_t count, float repetition, float frequency,
                       float presence) {
    float l = logit;
    if (l > 0.0f)
        l /= repetition;
    else
        l *= repetition;
    return l - ((float)count * frequency + presence);
}

/* Penalises cands (still indexed by id) for tokens in the window of history. The pairs' ids go
 * to touched, which holds them already (sampler_penalty_pairs writes tok[j] = touched[j]). */
static void apply_penalties(si_sampler *s, const int32_t *history, int32_t n_history) {
    const si_sampling_params *p = &s->p;
    const int32_t n =
        sampler_penalty_pairs(s, history, n_history, s->n_vocab, s->touched, s->pen_count);
    for (int32_t j = 0; j < n; j++) {
        sampler_cand *c = &s->cands[s->touched[j]];
        c->logit = sampler_penalise(c->logit, s->pen_count[j], p->repetition_penalty,
                                    p->frequency_penalty, p->presence_penalty);
    }
}

/* Total order: higher logit first, then lower id, so selection and sorting are deterministic. */
static int cand_before(const sampler_cand *a, const sampler_cand *b) {
    if (a->logit != b->logit) return a->logit > b->logit;
    return a->id < b->id;
}

static int cand_cmp(const void *pa, const void *pb) {
    const sampler_cand *a = pa, *b = pb;
    if (cand_before(a, b)) return -1;
    if (cand_before(b, a)) return 1;
    return 0;
}

static void cand_swap(sampler_cand *a, sampler_cand *b) {
    sampler_cand t = *a;
    *a = *b;
    *b = t;
}

/* Moves the k best candidates of c[0..n) to c[0..k) (unordered): Hoare-style quickselect with
 * a median-of-three pivot. */
static void select_top_k(sampler_cand *c, int32_t n, int32_t k) {
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (cand_before(&c[hi], &c[lo])) cand_swap(&c[hi], &c[lo]);
        if (cand_before(&c[mid], &c[lo])) cand_swap(&c[mid], &c[lo]);
        if (cand_before(&c[hi], &c[mid])) cand_swap(&c[hi], &c[mid]);
        sampler_cand pivot = c[mid];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (cand_before(&c[i], &pivot))
                i++;
            while (cand_before(&pivot, &c[j]))
                j--;
            if (i <= j) {
                cand_swap(&c[i], &c[j]);
                i++;
                j--;
            }
        }
        /* now c[lo..j] before-or-equal pivot, c[i..hi] after-or-equal pivot */
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
}

static int cand_cmp_id(const void *pa, const void *pb) {
    const sampler_cand *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

/* Keeps the candidates of c[0..n) whose logit is >= floor, in their order; returns how many. */
static int32_t keep_at_least(sampler_cand *c, int32_t n, float floor) {
    int32_t kept = 0;
    for (int32_t i = 0; i < n; i++)
        if (c[i].logit >= floor) c[kept++] = c[i];
    return kept;
}

void sampler_draw(si_sampler *s, sampler_chain *chain, double *u) {
    const si_sampling_params *p = &s->p;
    *chain = (sampler_chain){p->temperature, p->top_k, p->top_p, p->min_p};
    *u = p->temperature > 0.0f ? rng_uniform(s) : 0.0;
}

void sampler_draw_sample(si_sampler *s, backend_sample *q) {
    sampler_chain ch;
    double u;
    sampler_draw(s, &ch, &u);
    *q = (backend_sample){.temperature = ch.temperature,
                          .top_k = ch.top_k,
                          .top_p = ch.top_p,
                          .min_p = ch.min_p,
                          .u = u,
                          .logprobs = -1,
                          .repetition = s->p.repetition_penalty,
                          .frequency = s->p.frequency_penalty,
                          .presence = s->p.presence_penalty,
                          .n_bias = s->p.n_logit_bias,
                          .bias = s->bias};
}

void sampler_peek_sample(const si_sampler *s, backend_sample *q) {
    si_sampler copy = *s; /* the draw touches only the RNG state, which the copy owns */
    sampler_draw_sample(&copy, q);
}

/* The first candidate in the order (every one when called on all). */
static int32_t first_in_order(const sampler_cand *c, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (cand_before(&c[i], &c[best])) best = i;
    return c[best].id;
}

int32_t sampler_pick(sampler_cand *c, int32_t n, const sampler_chain *p, double u) {
    if (p->temperature <= 0.0f) return first_in_order(c, n);

    bool by_id = true; /* c[0..n) in id order (as the caller filled it) */
    if (p->top_k > 0 && p->top_k < n) {
        select_top_k(c, n, p->top_k);
        n = p->top_k;
        by_id = false;
    }
    float max = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (c[i].logit > max) max = c[i].logit;
    if (max == -INFINITY) return first_in_order(c, n); /* every token is impossible */
    /* NOTE: sorting the whole vocabulary for every token would dominate a step when top-k is
     * off (the OpenAI default). Only top-p needs the order; tokens it must drop anyway are
     * removed first, by an exact bound, so only the survivors are sorted. The best token
     * survives every filter: each bound is <= max. */
    if (p->top_p < 1.0f) {
        double total = 0.0; /* softmax denominator over the top-k candidates: top-p's alone */
        for (int32_t i = 0; i < n; i++)
            total += sampler_expf(c[i].logit - max);
        /* tokens below (1 - top_p) / n together hold < 1 - top_p of the mass */
        n = keep_at_least(c, n, max + logf((float)(total * (1.0 - p->top_p) / n)));
        qsort(c, (size_t)n, sizeof *c, cand_cmp);
        by_id = false;
        /* top-p (nucleus, Holtzman et al. 2019): the shortest prefix whose mass reaches top_p */
        double cum = 0.0;
        for (int32_t i = 0; i < n; i++) {
            cum += (float)(sampler_expf(c[i].logit - max) / total);
            if (cum >= p->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    /* min-p: keep tokens with p >= min_p * p_max, i.e. logit >= max_logit + log(min_p) */
    if (p->min_p > 0.0f) n = keep_at_least(c, n, max + logf(p->min_p));

    /* temperature, softmax and the draw, over the kept tokens in id order: the order of the
     * walk does not change the distribution, and id order needs no sort of the vocabulary */
    if (!by_id) qsort(c, (size_t)n, sizeof *c, cand_cmp_id);
    const float mt = max / p->temperature;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        c[i].p = sampler_expf(c[i].logit / p->temperature - mt);
        sum += c[i].p;
    }
    double cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cum += (float)(c[i].p / sum);
        if (u < cum) return c[i].id;
    }
    return c[n - 1].id; /* rounding left u just above the total */
}

int32_t si_sampler_sample(si_sampler *s, const float *logits, const int32_t *history,
                          int32_t n_history) {
    SI_ASSERT(s && logits);
    if (s->p.temperature <= 0.0f && !s->p.n_logit_bias && sampler_history_free(s, n_history)) {
        /* greedy without penalties: the argmax (ties: the lowest id), as sampler_pick would
         * choose, without copying the vocabulary into candidates first */
        int32_t best = 0;
        for (int32_t i = 1; i < s->n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        return best;
    }
    sampler_cand *c = s->cands;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        c[i].id = i;
        c[i].logit = logits[i];
        c[i].p = 0.0f;
    }
    for (int32_t j = 0; j < s->p.n_logit_bias; j++)
        c[s->bias[j].token].logit += s->bias[j].bias;
    apply_penalties(s, history, n_history);
    sampler_chain chain;
    double u;
    sampler_draw(s, &chain, &u);
    return sampler_pick(c, s->n_vocab, &chain, u);
}

int32_t sampler_logprobs(const float *logits, int32_t n_vocab, int32_t tok, int32_t k,
                         float *logprob, si_token_logprob *top) {
    float mx = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += exp((double)logits[i] - mx);
    const float lse = mx + (float)log(sum);
    *logprob = logits[tok] - lse;
    /* top-k by insertion into a short sorted list: k <= 20, one pass over the vocabulary */
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab && k > 0; i++) {
        if (n == k && logits[i] <= top[n - 1].logprob) continue;
        int32_t j = n < k ? n++ : n - 1;
        while (j > 0 && top[j - 1].logprob < logits[i]) {
            top[j] = top[j - 1];
            j--;
        }
        top[j].token = i;
        top[j].logprob = logits[i];
    }
    for (int32_t i = 0; i < n; i++)
        top[i].logprob -= lse;
    return n;
}
