/* openai.c — OpenAI request validation and response JSON (see openai.h).
 *
 * Request fields follow the OpenAI API reference (chat/completions and the legacy completions);
 * ranges are OpenAI's where it states them (temperature 0..2, penalties -2..2, top_logprobs
 * 0..20) and vLLM's for its extensions. A JSON null counts as "not given", as it does for
 * OpenAI. Errors name the field in both `param` and the message. */
#include "server/openai.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat_format.h"
#include "tokenizer/chat_template.h"

#define INVALID "invalid_request_error"

bool oai_fail(oai_error *err, int http_status, const char *type, const char *code,
              const char *param, const char *fmt, ...) {
    err->http_status = http_status;
    err->type = type ? type : INVALID;
    err->code = code;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return false;
}

/* A JSON string from bytes that may not be valid UTF-8 (a byte-level BPE token can be half a
 * character): invalid bytes become U+FFFD, as Python's errors="replace" does. */
static json_t *str_lossy(const char *s, size_t n) {
    json_t *j = json_stringn(s, n);
    if (j) return j;
    char *buf = malloc(n * 3 + 1);
    if (!buf) return json_string("");
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = len > 0 && i + len <= n && c != 0;
        for (size_t k = 1; ok && k < len; k++) ok = ((unsigned char)s[i + k] >> 6) == 2;
        if (ok && len > 1) { /* let jansson judge overlongs and surrogates */
            json_t *probe = json_stringn(s + i, len);
            ok = probe != NULL;
            json_decref(probe);
        }
        if (ok) {
            memcpy(buf + o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    j = json_stringn(buf, o);
    free(buf);
    return j ? j : json_string("");
}

/* ---- field getters: absent or null -> *present false, wrong type or range -> error ---------- */

static json_t *field(json_t *root, const char *key) {
    json_t *v = json_object_get(root, key);
    return json_is_null(v) ? NULL : v;
}

static bool get_bool(json_t *root, const char *key, bool *out, oai_error *err) {
    json_t *v = field(root, key);
    if (!v) return true;
    if (!json_is_boolean(v)) return oai_fail(err, 400, NULL, NULL, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return true;
}

static bool get_num(json_t *root, const char *key, double lo, double hi, double *out,
                    oai_error *err) {
    json_t *v = field(root, key);
    if (!v) return true;
    if (!json_is_number(v))
        return oai_fail(err, 400, NULL, NULL, key, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi))
        return oai_fail(err, 400, NULL, NULL, key, "'%s' is %g; it must be in [%g, %g]", key, d,
                        lo, hi);
    *out = d;
    return true;
}

static bool get_int(json_t *root, const char *key, int64_t lo, int64_t hi, int64_t *out,
                    bool *present, oai_error *err) {
    json_t *v = field(root, key);
    if (!v) return true;
    int64_t x;
    if (json_is_integer(v)) {
        x = (int64_t)json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9e15) {
        x = (int64_t)json_real_value(v);
    } else {
        return oai_fail(err, 400, NULL, NULL, key, "'%s' must be an integer", key);
    }
    if (x < lo || x > hi)
        return oai_fail(err, 400, NULL, NULL, key, "'%s' is %lld; it must be in [%lld, %lld]", key,
                        (long long)x, (long long)lo, (long long)hi);
    *out = x;
    if (present) *present = true;
    return true;
}

/* ---- chat messages ------------------------------------------------------------------------ */

/* Content as one string: a string, null ("") or an array of {"type": "text", "text": ...}. */
static bool flatten_content(json_t *content, int i, char **out, oai_error *err) {
    char param[64];
    snprintf(param, sizeof param, "messages[%d].content", i);
    size_t expect = 0;
    if (!content || json_is_null(content)) {
        *out = strdup("");
    } else if (json_is_string(content)) {
        expect = json_string_length(content);
        *out = strndup(json_string_value(content), expect);
    } else if (json_is_array(content)) {
        size_t total = 0, k;
        json_t *part;
        json_array_foreach(content, k, part) {
            json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
            if (!json_is_object(part) || !json_is_string(type))
                return oai_fail(err, 400, NULL, NULL, param,
                                "'%s[%zu]' must be an object with a 'type'", param, k);
            if (strcmp(json_string_value(type), "text") != 0)
                return oai_fail(err, 400, NULL, NULL, param,
                                "'%s[%zu]': content part type '%s' is not supported (only 'text')",
                                param, k, json_string_value(type));
            if (!json_is_string(text))
                return oai_fail(err, 400, NULL, NULL, param, "'%s[%zu].text' must be a string",
                                param, k);
            total += json_string_length(text);
        }
        char *s = malloc(total + 1);
        if (!s) return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        size_t o = 0;
        json_array_foreach(content, k, part) {
            json_t *text = json_object_get(part, "text");
            memcpy(s + o, json_string_value(text), json_string_length(text));
            o += json_string_length(text);
        }
        s[o] = 0;
        expect = o;
        *out = s;
    } else {
        return oai_fail(err, 400, NULL, NULL, param,
                        "'%s' must be a string, an array of content parts or null", param);
    }
    if (!*out) return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    /* the chat templates and the tokenizer take C strings */
    if (strlen(*out) != expect)
        return oai_fail(err, 400, NULL, NULL, param, "'%s' contains a NUL character", param);
    return true;
}

static bool parse_messages(json_t *root, oai_request *r, oai_error *err) {
    json_t *msgs = field(root, "messages");
    if (!msgs) return oai_fail(err, 400, NULL, NULL, "messages", "'messages' is required");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return oai_fail(err, 400, NULL, NULL, "messages", "'messages' must be a non-empty array");
    size_t n = json_array_size(msgs);
    if (n > 100000) return oai_fail(err, 400, NULL, NULL, "messages", "too many messages (%zu)", n);
    r->roles = calloc(n, sizeof *r->roles);
    r->contents = calloc(n, sizeof *r->contents);
    json_t *norm = json_array();
    if (!r->roles || !r->contents || !norm) {
        json_decref(norm);
        return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) {
            json_decref(norm);
            return oai_fail(err, 400, NULL, NULL, param, "'%s' must be an object", param);
        }
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role) || json_string_length(role) == 0 ||
            strlen(json_string_value(role)) != json_string_length(role)) {
            json_decref(norm);
            snprintf(param, sizeof param, "messages[%zu].role", i);
            return oai_fail(err, 400, NULL, NULL, param, "'%s' must be a non-empty string", param);
        }
        json_t *content = json_object_get(m, "content");
        if ((!content || json_is_null(content)) && strcmp(json_string_value(role), "assistant")) {
            json_decref(norm);
            snprintf(param, sizeof param, "messages[%zu].content", i);
            return oai_fail(err, 400, NULL, NULL, param, "'%s' is required (only assistant "
                            "messages may omit it)", param);
        }
        r->n_messages = (int)i + 1;
        r->roles[i] = strdup(json_string_value(role));
        if (!r->roles[i] || !flatten_content(json_object_get(m, "content"), (int)i,
                                             &r->contents[i], err)) {
            json_decref(norm);
            return r->roles[i] ? false
                               : oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        }
        json_t *copy = json_copy(m); /* shallow: other keys (tool_calls, name) kept as given */
        bool keep_null = !content || json_is_null(content);
        if (!copy ||
            json_object_set_new(copy, "content",
                                keep_null ? json_null() : str_lossy(r->contents[i], strlen(r->contents[i]))) ||
            json_array_append_new(norm, copy)) {
            json_decref(norm);
            return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        }
    }
    r->messages_json = json_dumps(norm, JSON_COMPACT);
    json_decref(norm);
    json_t *tools = field(root, "tools");
    if (tools) {
        if (!json_is_array(tools))
            return oai_fail(err, 400, NULL, NULL, "tools", "'tools' must be an array");
        r->tools_json = json_dumps(tools, JSON_COMPACT);
    }
    if (!r->messages_json || (tools && !r->tools_json))
        return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    return true;
}

/* ---- completions prompts ------------------------------------------------------------------ */

static bool token_array(json_t *arr, const char *param, oai_prompt *p, oai_error *err) {
    size_t n = json_array_size(arr);
    if (n == 0) return oai_fail(err, 400, NULL, NULL, param, "'%s' is an empty token array", param);
    p->tokens = malloc(n * sizeof *p->tokens);
    if (!p->tokens) return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    p->n_tokens = (int32_t)n;
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(arr, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX)
            return oai_fail(err, 400, NULL, NULL, param,
                            "'%s[%zu]' must be a non-negative integer token id", param, i);
        p->tokens[i] = (int32_t)json_integer_value(t);
    }
    return true;
}

static bool parse_prompt(json_t *root, oai_request *r, oai_error *err) {
    json_t *p = field(root, "prompt");
    if (!p) return oai_fail(err, 400, NULL, NULL, "prompt", "'prompt' is required");
    if (json_is_string(p)) {
        r->prompts = calloc(1, sizeof *r->prompts);
        if (!r->prompts) return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        r->n_prompts = 1;
        if (strlen(json_string_value(p)) != json_string_length(p))
            return oai_fail(err, 400, NULL, NULL, "prompt", "'prompt' contains a NUL character");
        r->prompts[0].text = strdup(json_string_value(p));
        return r->prompts[0].text ? true
                                  : oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (!json_is_array(p) || json_array_size(p) == 0)
        return oai_fail(err, 400, NULL, NULL, "prompt",
                        "'prompt' must be a string, an array of strings, an array of token ids or "
                        "an array of token id arrays, and not empty");
    size_t n = json_array_size(p);
    json_t *first = json_array_get(p, 0);
    if (json_is_integer(first)) { /* one prompt of token ids */
        r->prompts = calloc(1, sizeof *r->prompts);
        if (!r->prompts) return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        r->n_prompts = 1;
        return token_array(p, "prompt", &r->prompts[0], err);
    }
    if (n > OAI_MAX_CHOICES)
        return oai_fail(err, 400, NULL, NULL, "prompt", "'prompt' has %zu prompts; at most %d", n,
                        OAI_MAX_CHOICES);
    r->prompts = calloc(n, sizeof *r->prompts);
    if (!r->prompts) return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    r->n_prompts = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(p, i);
        char param[48];
        snprintf(param, sizeof param, "prompt[%zu]", i);
        if (json_is_string(e)) {
            if (strlen(json_string_value(e)) != json_string_length(e))
                return oai_fail(err, 400, NULL, NULL, param, "'%s' contains a NUL character", param);
            r->prompts[i].text = strdup(json_string_value(e));
            if (!r->prompts[i].text)
                return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
        } else if (json_is_array(e)) {
            if (!token_array(e, param, &r->prompts[i], err)) return false;
        } else {
            return oai_fail(err, 400, NULL, NULL, param,
                            "'%s' must be a string or an array of token ids", param);
        }
    }
    return true;
}

/* ---- the request -------------------------------------------------------------------------- */

static bool parse_stop(json_t *root, oai_request *r, oai_error *err) {
    json_t *s = field(root, "stop");
    if (!s) return true;
    json_t *one[1] = {s};
    json_t **items = one;
    size_t n = 1;
    if (json_is_array(s)) {
        n = json_array_size(s);
        if (n > OAI_MAX_STOP)
            return oai_fail(err, 400, NULL, NULL, "stop", "'stop' has %zu strings; at most %d", n,
                            OAI_MAX_STOP);
        items = NULL;
    } else if (!json_is_string(s)) {
        return oai_fail(err, 400, NULL, NULL, "stop", "'stop' must be a string or an array of strings");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = items ? items[i] : json_array_get(s, i);
        if (!json_is_string(e))
            return oai_fail(err, 400, NULL, NULL, "stop", "'stop[%zu]' must be a string", i);
        size_t len = json_string_length(e);
        if (len == 0) continue; /* an empty stop string matches nothing */
        if (len > SI_MAX_STOP_LEN || strlen(json_string_value(e)) != len)
            return oai_fail(err, 400, NULL, NULL, "stop",
                            "'stop' strings must be 1..%d bytes without NUL (string %zu has %zu)",
                            SI_MAX_STOP_LEN, i, len);
        r->stop[r->n_stop] = strdup(json_string_value(e));
        if (!r->stop[r->n_stop++]) return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    return true;
}

/* "logit_bias": {"token id": bias in [-100, 100], ...} (OpenAI's), at most SI_MAX_LOGIT_BIAS
 * entries. Ids outside the vocabulary are refused at submit (the sampler names them). */
static bool parse_logit_bias(json_t *root, oai_request *r, oai_error *err) {
    json_t *o = field(root, "logit_bias");
    if (!o) return true;
    if (!json_is_object(o))
        return oai_fail(err, 400, NULL, NULL, "logit_bias",
                        "'logit_bias' must be an object of token ids to biases");
    const size_t n = json_object_size(o);
    if (n > SI_MAX_LOGIT_BIAS)
        return oai_fail(err, 400, NULL, NULL, "logit_bias",
                        "'logit_bias' has %zu entries; at "
                        "most %d",
                        n, SI_MAX_LOGIT_BIAS);
    if (n == 0) return true;
    if (!(r->logit_bias = malloc(n * sizeof *r->logit_bias)))
        return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    const char *key;
    json_t *v;
    int k = 0;
    json_object_foreach(o, key, v) {
        char *end;
        errno = 0;
        const long tok = strtol(key, &end, 10);
        if (end == key || *end || errno || tok < 0 || tok > INT32_MAX)
            return oai_fail(err, 400, NULL, NULL, "logit_bias",
                            "'logit_bias' keys must be "
                            "token ids (non-negative integers), got \"%.64s\"",
                            key);
        const double b = json_is_number(v) ? json_number_value(v) : NAN;
        if (!(b >= -100 && b <= 100))
            return oai_fail(err, 400, NULL, NULL, "logit_bias",
                            "'logit_bias' for token %ld must "
                            "be a number in [-100, 100]",
                            tok);
        r->logit_bias[k++] = (si_logit_bias){(int32_t)tok, (float)b};
    }
    r->sampling.logit_bias = r->logit_bias;
    r->sampling.n_logit_bias = k;
    return true;
}

static bool parse_fields(json_t *root, oai_request *r, oai_error *err) {
    json_t *model = field(root, "model");
    if (model) {
        if (!json_is_string(model))
            return oai_fail(err, 400, NULL, NULL, "model", "'model' must be a string");
        if (!(r->model = strdup(json_string_value(model))))
            return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (r->kind == OAI_CHAT ? !parse_messages(root, r, err) : !parse_prompt(root, r, err))
        return false;

    int64_t iv;
    bool present = false;
    if (!get_int(root, "max_tokens", 1, INT32_MAX, &iv, &present, err)) return false;
    if (present) r->max_tokens = (int32_t)iv;
    present = false;
    if (!get_int(root, "max_completion_tokens", 1, INT32_MAX, &iv, &present, err)) return false;
    if (present) r->max_tokens = (int32_t)iv;
    iv = 1;
    if (!get_int(root, "n", 1, OAI_MAX_CHOICES, &iv, NULL, err)) return false;
    r->n = (int)iv;
    int n_prompts = r->kind == OAI_CHAT ? 1 : r->n_prompts;
    if ((int64_t)r->n * n_prompts > OAI_MAX_CHOICES)
        return oai_fail(err, 400, NULL, NULL, "n", "n (%d) x prompts (%d) exceeds %d choices", r->n,
                        n_prompts, OAI_MAX_CHOICES);

    si_sampling_params *sp = &r->sampling;
    double d = 1.0; /* OpenAI's default temperature and top_p */
    if (!get_num(root, "temperature", 0, 2, &d, err)) return false;
    sp->temperature = (float)d;
    d = 1.0;
    if (!get_num(root, "top_p", 0, 1, &d, err)) return false;
    sp->top_p = d > 0 ? (float)d : 1e-9f; /* top_p 0: only the most likely token survives */
    iv = 0;
    if (!get_int(root, "top_k", -1, INT32_MAX, &iv, NULL, err)) return false;
    sp->top_k = iv < 0 ? 0 : (int32_t)iv; /* vLLM: -1 (or 0) disables */
    d = 0;
    if (!get_num(root, "min_p", 0, 1, &d, err)) return false;
    sp->min_p = (float)d;
    d = 0;
    if (!get_num(root, "presence_penalty", -2, 2, &d, err)) return false;
    sp->presence_penalty = (float)d;
    d = 0;
    if (!get_num(root, "frequency_penalty", -2, 2, &d, err)) return false;
    sp->frequency_penalty = (float)d;
    d = 1;
    if (!get_num(root, "repetition_penalty", 1e-6, 10, &d, err)) return false;
    sp->repetition_penalty = (float)d;
    present = false;
    if (!get_int(root, "seed", INT64_MIN, INT64_MAX, &iv, &present, err)) return false;
    if (present) {
        sp->seed = (uint64_t)iv;
        r->seeded = true;
    }

    if (!parse_stop(root, r, err) || !parse_logit_bias(root, r, err)) return false;
    json_t *sti = field(root, "stop_token_ids");
    if (sti) {
        oai_prompt tmp = {0};
        if (!json_is_array(sti))
            return oai_fail(err, 400, NULL, NULL, "stop_token_ids", "'stop_token_ids' must be an array");
        if (json_array_size(sti) > 0) {
            if (!token_array(sti, "stop_token_ids", &tmp, err)) {
                free(tmp.tokens);
                return false;
            }
            r->stop_token_ids = tmp.tokens;
            r->n_stop_token_ids = tmp.n_tokens;
        }
    }
    if (!get_bool(root, "ignore_eos", &r->ignore_eos, err)) return false;
    if (!get_bool(root, "stream", &r->stream, err)) return false;
    json_t *so = field(root, "stream_options");
    if (so) {
        if (!json_is_object(so))
            return oai_fail(err, 400, NULL, NULL, "stream_options", "'stream_options' must be an object");
        if (!get_bool(so, "include_usage", &r->include_usage, err)) {
            snprintf(err->param, sizeof err->param, "stream_options.include_usage");
            return false;
        }
    }

    if (r->kind == OAI_CHAT) {
        if (!get_bool(root, "logprobs", &r->logprobs, err)) return false;
        present = false;
        iv = 0;
        if (!get_int(root, "top_logprobs", 0, SI_MAX_TOP_LOGPROBS, &iv, &present, err)) return false;
        if (present && !r->logprobs && iv > 0)
            return oai_fail(err, 400, NULL, NULL, "top_logprobs",
                            "'top_logprobs' needs 'logprobs' set to true");
        r->top_logprobs = (int)iv;
    } else {
        present = false;
        if (!get_int(root, "logprobs", 0, SI_MAX_TOP_LOGPROBS, &iv, &present, err)) return false;
        if (present) {
            r->logprobs = true;
            r->top_logprobs = (int)iv;
        }
        if (!get_bool(root, "echo", &r->echo, err)) return false;
        if (r->echo)
            return oai_fail(err, 400, NULL, NULL, "echo", "'echo' is not supported by this server");
    }

    json_t *st = field(root, "streaming");
    if (st) {
        if (!json_is_object(st))
            return oai_fail(err, 400, NULL, NULL, "streaming",
                            "'streaming' must be an object {\"sink\": N, \"window\": N}");
        int64_t sink = 4, window = 0;
        bool has_window = false;
        if (!get_int(st, "sink", 0, 1 << 20, &sink, NULL, err) ||
            !get_int(st, "window", 1, 1 << 20, &window, &has_window, err)) {
            bool is_sink = !strcmp(err->param, "sink");
            snprintf(err->param, sizeof err->param, "streaming.%s", is_sink ? "sink" : "window");
            return false;
        }
        if (!has_window)
            return oai_fail(err, 400, NULL, NULL, "streaming.window", "'streaming.window' is required");
        r->stream_sink = (int32_t)sink;
        r->stream_window = (int32_t)window;
    }
    return true;
}

bool oai_parse_request(const char *body, size_t len, oai_kind kind, oai_request *out,
                       oai_error *err) {
    memset(out, 0, sizeof *out);
    memset(err, 0, sizeof *err);
    out->kind = kind;
    out->n = 1;
    out->sampling = si_sampling_default_params();
    json_error_t je;
    /* NOTE: JSON_DECODE_ANY, then our own "must be an object" check: jansson 2.14 leaks the
     * scanned string when a top-level string is rejected (found by fuzz_openai_request) */
    json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!root)
        return oai_fail(err, 400, NULL, NULL, NULL,
                        "invalid JSON in the request body at line %d, column %d: %s", je.line,
                        je.column, je.text);
    bool ok = json_is_object(root)
                  ? parse_fields(root, out, err)
                  : oai_fail(err, 400, NULL, NULL, NULL, "the request body must be a JSON object");
    json_decref(root);
    if (!ok) oai_request_free(out);
    return ok;
}

void oai_request_free(oai_request *r) {
    free(r->model);
    free(r->messages_json);
    free(r->tools_json);
    for (int i = 0; i < r->n_messages; i++) {
        free(r->roles[i]);
        free(r->contents[i]);
    }
    free(r->roles);
    free(r->contents);
    for (int i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].tokens);
    }
    free(r->prompts);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop_token_ids);
    free(r->logit_bias);
    memset(r, 0, sizeof *r);
}

/* ---- prompts on the model ----------------------------------------------------------------- */

static bool tokenize_text(si_model *m, const char *text, const char *param, int32_t **ids,
                          int32_t *n, oai_error *err) {
    size_t len = strlen(text);
    int32_t need = si_tokenize(m, text, len, true, true, NULL, 0);
    if (need < 0)
        return oai_fail(err, 400, NULL, NULL, param, "cannot tokenise '%s': %s", param, si_last_error());
    *ids = malloc((size_t)(need > 0 ? need : 1) * sizeof **ids);
    if (!*ids) return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    if (need > 0 && si_tokenize(m, text, len, true, true, *ids, need) != need)
        return oai_fail(err, 500, "server_error", NULL, param, "tokeniser disagreed with itself");
    /* a template that writes BOS itself (Llama 3) must not get a second one from the tokenizer */
    int32_t bos = si_token_bos(m);
    if (need >= 2 && bos >= 0 && (*ids)[0] == bos && (*ids)[1] == bos) {
        need--;
        memmove(*ids, *ids + 1, (size_t)need * sizeof **ids);
    }
    *n = need;
    return true;
}

static bool render_chat(const oai_request *r, si_model *m, const struct chat_template *tmpl,
                        const char *tmpl_source, const char *bos_text, const char *eos_text,
                        char **text, oai_error *err) {
    si_status st;
    if (tmpl) {
        st = chat_template_render_json(tmpl, r->messages_json, r->tools_json, true, bos_text,
                                       eos_text, text);
        if (st == SI_ERR_INVALID_ARG)
            return oai_fail(err, 400, NULL, NULL, "messages", "the model's chat template rejected "
                            "the messages: %s", si_last_error());
        if (st)
            return oai_fail(err, 500, "server_error", NULL, "messages",
                            "the model's chat template failed: %s", si_last_error());
        return true;
    }
    chat_format f = chat_format_detect(tmpl_source);
    if (f == CHAT_FORMAT_UNKNOWN)
        return oai_fail(err, 400, NULL, "no_chat_template", "messages",
                        "the model has no chat template this server can run (%s); use "
                        "/v1/completions with a formatted prompt",
                        tmpl_source ? "its template failed to parse" : "none in the file");
    chat_message *msgs = calloc((size_t)r->n_messages, sizeof *msgs);
    if (!msgs) return oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    for (int i = 0; i < r->n_messages; i++) msgs[i] = (chat_message){r->roles[i], r->contents[i]};
    st = chat_format_render(f, tmpl_source, msgs, r->n_messages, true, text);
    free(msgs);
    if (st)
        return oai_fail(err, 400, NULL, NULL, "messages", "cannot format the messages: %s",
                        si_last_error());
    return true;
}

bool oai_prepare_prompts(const oai_request *r, si_model *m, const struct chat_template *tmpl,
                         const char *tmpl_source, const char *bos_text, const char *eos_text,
                         int32_t ***ids_out, int32_t **n_out_ids, int *n_out, oai_error *err) {
    int np = r->kind == OAI_CHAT ? 1 : r->n_prompts;
    int32_t **ids = calloc((size_t)np, sizeof *ids);
    int32_t *n_ids = calloc((size_t)np, sizeof *n_ids);
    bool ok = ids && n_ids;
    if (!ok) oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    const char *param = r->kind == OAI_CHAT ? "messages" : "prompt";
    const int32_t n_vocab = si_model_n_vocab(m), n_ctx = si_model_n_ctx(m);
    for (int i = 0; ok && i < np; i++) {
        if (r->kind == OAI_CHAT) {
            char *text = NULL;
            ok = render_chat(r, m, tmpl, tmpl_source, bos_text, eos_text, &text, err) &&
                 tokenize_text(m, text, param, &ids[i], &n_ids[i], err);
            free(text);
        } else if (r->prompts[i].text) {
            ok = tokenize_text(m, r->prompts[i].text, param, &ids[i], &n_ids[i], err);
        } else {
            const oai_prompt *p = &r->prompts[i];
            ids[i] = malloc((size_t)p->n_tokens * sizeof *ids[i]);
            if (!ids[i]) {
                ok = oai_fail(err, 500, "server_error", NULL, NULL, "out of memory");
                break;
            }
            memcpy(ids[i], p->tokens, (size_t)p->n_tokens * sizeof *ids[i]);
            n_ids[i] = p->n_tokens;
            for (int32_t k = 0; ok && k < p->n_tokens; k++)
                if (p->tokens[k] >= n_vocab)
                    ok = oai_fail(err, 400, NULL, NULL, param,
                                  "token id %d (prompt %d, position %d) is out of the vocabulary "
                                  "(size %d)", p->tokens[k], i, k, n_vocab);
        }
        if (!ok) break;
        if (n_ids[i] == 0) {
            ok = oai_fail(err, 400, NULL, NULL, param, "'%s' is empty", param);
            break;
        }
        int64_t want = (int64_t)n_ids[i] + (r->stream_window > 0 ? 0 : r->max_tokens);
        if (want > n_ctx || n_ids[i] >= n_ctx) {
            ok = oai_fail(err, 400, NULL, "context_length_exceeded", param,
                          "This model's maximum context length is %d tokens. However, you "
                          "requested %lld tokens (%d in the %s, %d in the completion). Please "
                          "reduce the length of the %s or completion.",
                          n_ctx, (long long)want, n_ids[i], r->kind == OAI_CHAT ? "messages" : "prompt",
                          r->stream_window > 0 ? 0 : r->max_tokens,
                          r->kind == OAI_CHAT ? "messages" : "prompt");
        }
    }
    if (!ok) {
        oai_prompts_free(ids, n_ids, np);
        return false;
    }
    *ids_out = ids;
    *n_out_ids = n_ids;
    *n_out = np;
    return true;
}

void oai_prompts_free(int32_t **ids, int32_t *n_ids, int n) {
    for (int i = 0; ids && i < n; i++) free(ids[i]);
    free(ids);
    free(n_ids);
}

char *oai_error_json(const oai_error *err) {
    /* NOTE: built field by field with lossy strings: the message may quote client bytes that
     * are not UTF-8, and a failing json_pack would leak the values it had already built */
    json_t *e = json_object(), *in = json_object();
    json_object_set_new(in, "message", str_lossy(err->message, strlen(err->message)));
    json_object_set_new(in, "type", json_string(err->type ? err->type : INVALID));
    json_object_set_new(in, "param",
                        err->param[0] ? str_lossy(err->param, strlen(err->param)) : json_null());
    json_object_set_new(in, "code", err->code ? json_string(err->code) : json_null());
    json_object_set_new(e, "error", in);
    char *s = json_dumps(e, JSON_COMPACT);
    json_decref(e);
    return s;
}

/* ---- responses ---------------------------------------------------------------------------- */

const char *oai_finish_name(si_finish_reason f) {
    switch (f) {
    case SI_FINISH_STOP: return "stop";
    case SI_FINISH_LENGTH: return "length";
    case SI_FINISH_CANCELLED: return "abort"; /* vLLM's name for a request stopped early */
    case SI_FINISH_ERROR: return "error";
    default: return NULL;
    }
}

static json_t *token_json(si_model *m, int32_t token, float logprob, bool with_bytes) {
    char piece[256];
    int32_t n = si_token_to_piece(m, token, piece, (int32_t)sizeof piece);
    if (n < 0) n = 0;
    if (n > (int32_t)sizeof piece) n = (int32_t)sizeof piece;
    json_t *o = json_object();
    json_object_set_new(o, "token", str_lossy(piece, (size_t)n));
    json_object_set_new(o, "logprob", json_real(isfinite(logprob) ? logprob : -9999.0));
    if (with_bytes) {
        json_t *b = json_array();
        for (int32_t i = 0; i < n; i++) json_array_append_new(b, json_integer((unsigned char)piece[i]));
        json_object_set_new(o, "bytes", b);
    }
    return o;
}

void oai_logprobs_add(json_t **acc, const oai_request *r, si_model *m, const si_event *ev,
                      size_t *text_offset) {
    if (r->kind == OAI_CHAT) {
        if (!*acc) *acc = json_array();
        json_t *e = token_json(m, ev->token, ev->logprob, true);
        json_t *top = json_array();
        for (int32_t i = 0; i < ev->n_top; i++)
            json_array_append_new(top, token_json(m, ev->top[i].token, ev->top[i].logprob, true));
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(*acc, e);
        return;
    }
    if (!*acc)
        *acc = json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs",
                         "text_offset");
    json_t *t = token_json(m, ev->token, ev->logprob, false);
    json_t *piece = json_object_get(t, "token");
    json_array_append(json_object_get(*acc, "tokens"), piece);
    json_array_append_new(json_object_get(*acc, "token_logprobs"),
                          json_real(isfinite(ev->logprob) ? ev->logprob : -9999.0));
    json_t *top = json_object();
    for (int32_t i = 0; i < ev->n_top; i++) {
        json_t *ti = token_json(m, ev->top[i].token, ev->top[i].logprob, false);
        json_object_set(top, json_string_value(json_object_get(ti, "token")),
                        json_object_get(ti, "logprob"));
        json_decref(ti);
    }
    json_array_append_new(json_object_get(*acc, "top_logprobs"), top);
    json_array_append_new(json_object_get(*acc, "text_offset"), json_integer((json_int_t)*text_offset));
    *text_offset += json_string_length(piece);
    json_decref(t);
}

bool oai_choice_add_event(oai_choice *c, const oai_request *r, si_model *m, const si_event *ev) {
    if (ev->text_len > 0) {
        if (c->text_len + ev->text_len + 1 > c->text_cap) {
            size_t cap = c->text_cap ? c->text_cap * 2 : 256;
            while (cap < c->text_len + ev->text_len + 1) cap *= 2;
            char *t = realloc(c->text, cap);
            if (!t) return false;
            c->text = t;
            c->text_cap = cap;
        }
        memcpy(c->text + c->text_len, ev->text, ev->text_len);
        c->text_len += ev->text_len;
        c->text[c->text_len] = 0;
    }
    if (ev->type == SI_EVENT_TOKEN && r->logprobs)
        oai_logprobs_add(&c->logprobs, r, m, ev, &c->text_offset);
    if (ev->type == SI_EVENT_FINISH || ev->type == SI_EVENT_ERROR) {
        c->finish = ev->finish_reason;
        c->usage = ev->usage;
    }
    return true;
}

void oai_choice_free(oai_choice *c) {
    free(c->text);
    json_decref(c->logprobs);
    memset(c, 0, sizeof *c);
}

json_t *oai_usage_json(const oai_choice *choices, int n_choices, int n_per_prompt) {
    int64_t prompt = 0, completion = 0, cached = 0;
    for (int i = 0; i < n_choices; i++) {
        if (n_per_prompt <= 0 || i % n_per_prompt == 0) {
            prompt += choices[i].usage.prompt_tokens;
            cached += choices[i].usage.cached_tokens;
        }
        completion += choices[i].usage.completion_tokens;
    }
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)prompt,
                     "completion_tokens", (json_int_t)completion, "total_tokens",
                     (json_int_t)(prompt + completion), "prompt_tokens_details", "cached_tokens",
                     (json_int_t)cached);
}

static json_t *envelope(const oai_request *r, const char *id, int64_t created, const char *model,
                        const char *object) {
    return json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", id, "object", object, "created",
                     (json_int_t)created, "model", model, "system_fingerprint", "swiftinfer-0.1.0");
}

static json_t *finish_json(si_finish_reason f) {
    const char *s = oai_finish_name(f);
    return s ? json_string(s) : json_null();
}

char *oai_response_json(const oai_request *r, const char *id, int64_t created, const char *model,
                        const oai_choice *choices, int n_choices) {
    bool chat = r->kind == OAI_CHAT;
    json_t *root = envelope(r, id, created, model, chat ? "chat.completion" : "text_completion");
    json_t *arr = json_array();
    for (int i = 0; i < n_choices; i++) {
        const oai_choice *c = &choices[i];
        json_t *ch = json_object();
        json_object_set_new(ch, "index", json_integer(c->index));
        json_t *text = str_lossy(c->text ? c->text : "", c->text_len);
        if (chat)
            json_object_set_new(ch, "message", json_pack("{s:s, s:o}", "role", "assistant",
                                                         "content", text));
        else
            json_object_set_new(ch, "text", text);
        json_t *lp = json_null();
        if (r->logprobs && chat)
            lp = json_pack("{s:o}", "content", c->logprobs ? json_incref(c->logprobs) : json_array());
        else if (r->logprobs && c->logprobs)
            lp = json_incref(c->logprobs);
        json_object_set_new(ch, "logprobs", lp ? lp : json_null());
        json_object_set_new(ch, "finish_reason", finish_json(c->finish));
        json_array_append_new(arr, ch);
    }
    json_object_set_new(root, "choices", arr);
    json_object_set_new(root, "usage", oai_usage_json(choices, n_choices, r->n));
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

static char *sse(json_t *root) {
    char *body = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!body) return NULL;
    size_t n = strlen(body);
    char *out = malloc(n + 9);
    if (out) {
        memcpy(out, "data: ", 6);
        memcpy(out + 6, body, n);
        memcpy(out + 6 + n, "\n\n", 3);
    }
    free(body);
    return out;
}

char *oai_chunk(const oai_request *r, const char *id, int64_t created, const char *model,
                int index, const char *text, size_t text_len, bool role, si_finish_reason finish,
                json_t *logprobs) {
    bool chat = r->kind == OAI_CHAT;
    json_t *root = envelope(r, id, created, model, chat ? "chat.completion.chunk" : "text_completion");
    json_t *ch = json_object();
    json_object_set_new(ch, "index", json_integer(index));
    if (chat) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string("assistant"));
        if (role || text_len > 0) json_object_set_new(delta, "content", str_lossy(text, text_len));
        json_object_set_new(ch, "delta", delta);
        json_object_set_new(ch, "logprobs", logprobs ? json_pack("{s:o}", "content", logprobs)
                                                     : json_null());
    } else {
        json_object_set_new(ch, "text", str_lossy(text, text_len));
        json_object_set_new(ch, "logprobs", logprobs ? logprobs : json_null());
    }
    json_object_set_new(ch, "finish_reason", finish_json(finish));
    json_object_set_new(root, "choices", json_pack("[o]", ch));
    if (r->include_usage) json_object_set_new(root, "usage", json_null());
    return sse(root);
}

char *oai_usage_chunk(const oai_request *r, const char *id, int64_t created, const char *model,
                      const oai_choice *choices, int n_choices) {
    json_t *root = envelope(r, id, created, model,
                            r->kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object_set_new(root, "choices", json_array());
    json_object_set_new(root, "usage", oai_usage_json(choices, n_choices, r->n));
    return sse(root);
}
