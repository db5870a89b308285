/* chat_template.c — chat_template.h on top of the Jinja interpreter: the variables and globals
 * Hugging Face's apply_chat_template passes, error messages with the template position, and a
 * small JSON reader that turns OpenAI-style messages (tool calls and all) into template values. */
#include "tokenizer/chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja.h"

struct chat_template {
    jinja_template *jt;
};

/* Generous for real conversations (a 1M-token context is ~4 MB of text), small enough that a
 * hostile template stops within about a second. */
static const jinja_limits LIMITS = {
    .max_steps = 10u * 1000 * 1000,
    .max_output = (size_t)64 << 20,
    .max_memory = (size_t)256 << 20,
    .max_depth = 1000,
};

static si_status report(const jinja_err *e, const char *what) {
    if (e->line > 0)
        return si_error(e->status, "chat template: %sline %d, column %d: %s", what, e->line,
                        e->col, e->msg);
    return si_error(e->status, "chat template: %s%s", what, e->msg);
}

si_status chat_template_parse(const char *source, chat_template **out) {
    if (!out)
        return si_error(SI_ERR_INVALID_ARG, "chat_template_parse: out is NULL");
    *out = NULL;
    if (!source)
        return si_error(SI_ERR_INVALID_ARG, "chat_template_parse: source is NULL");
    chat_template *t = calloc(1, sizeof *t);
    if (!t)
        return si_error(SI_ERR_NOMEM, "chat_template_parse: out of memory");
    jinja_err err;
    memset(&err, 0, sizeof err);
    if (jinja_parse(source, strlen(source), &t->jt, &err) != SI_OK) {
        free(t);
        return report(&err, "syntax error at ");
    }
    *out = t;
    return SI_OK;
}

void chat_template_free(chat_template *t) {
    if (!t)
        return;
    jinja_template_free(t->jt);
    free(t);
}

/* ---- JSON to values -------------------------------------------------------------------- */

typedef struct {
    jinja_arena *a;
    const char *s;
    size_t i, n;
    int depth;
} json_reader;

_Noreturn static void json_fail(json_reader *r, const char *what) {
    jinja_raise(r->a->err, SI_ERR_INVALID_ARG, 0, 0, "invalid JSON at byte %zu: %s", r->i, what);
}

static void json_ws(json_reader *r) {
    while (r->i < r->n && strchr(" \t\r\n", r->s[r->i]) && r->s[r->i])
        r->i++;
}

static unsigned json_hex4(json_reader *r) {
    if (r->n - r->i < 4)
        json_fail(r, "truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char ch = r->s[r->i++];
        v = v * 16 + (unsigned)(ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : (json_fail(r, "bad \\u escape"), 0));
    }
    return v;
}

static jv json_string(json_reader *r) {
    r->i++; /* opening quote */
    jbuf b;
    jbuf_init(&b, r->a, (size_t)1 << 40);
    for (;;) {
        if (r->i >= r->n)
            json_fail(r, "unterminated string");
        char ch = r->s[r->i++];
        if (ch == '"')
            break;
        if ((unsigned char)ch < 0x20)
            json_fail(r, "control character in string");
        if (ch != '\\') {
            jbuf_putc(&b, ch);
            continue;
        }
        if (r->i >= r->n)
            json_fail(r, "unterminated string");
        char e = r->s[r->i++];
        const char *map = strchr("\"\\/bfnrt", e);
        if (map && e) {
            jbuf_putc(&b, "\"\\/\b\f\n\r\t"[map - "\"\\/bfnrt"]);
            continue;
        }
        if (e != 'u')
            json_fail(r, "bad escape");
        unsigned cp = json_hex4(r);
        if (cp >= 0xD800 && cp < 0xDC00 && r->n - r->i >= 6 && r->s[r->i] == '\\' && r->s[r->i + 1] == 'u') {
            r->i += 2;
            unsigned lo = json_hex4(r);
            if (lo >= 0xDC00 && lo < 0xE000)
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else
                json_fail(r, "unpaired surrogate");
        } else if (cp >= 0xD800 && cp < 0xE000) {
            json_fail(r, "unpaired surrogate");
        }
        char u[4];
        int k = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (k == 1) {
            u[0] = (char)cp;
        } else {
            for (int j = k - 1; j > 0; j--, cp >>= 6)
                u[j] = (char)(0x80 | (cp & 0x3F));
            u[0] = (char)((k == 2 ? 0xC0 : k == 3 ? 0xE0 : 0xF0) | cp);
        }
        jbuf_put(&b, u, (size_t)k);
    }
    return jbuf_value(&b);
}

static jv json_value(json_reader *r) {
    if (++r->depth > 200)
        json_fail(r, "nested too deeply");
    json_ws(r);
    if (r->i >= r->n)
        json_fail(r, "unexpected end");
    char ch = r->s[r->i];
    jv v;
    if (ch == '"') {
        v = json_string(r);
    } else if (ch == '[' || ch == '{') {
        bool obj = ch == '{';
        v = obj ? jv_dict_new(r->a) : jv_list_new(r->a, 0);
        r->i++;
        json_ws(r);
        if (r->i < r->n && r->s[r->i] == (obj ? '}' : ']')) {
            r->i++;
        } else {
            for (;;) {
                if (obj) {
                    json_ws(r);
                    if (r->i >= r->n || r->s[r->i] != '"')
                        json_fail(r, "expected a string key");
                    jv k = json_string(r);
                    json_ws(r);
                    if (r->i >= r->n || r->s[r->i++] != ':')
                        json_fail(r, "expected ':'");
                    jv_dict_set(r->a, v.d, k, json_value(r));
                } else {
                    jv_list_push(r->a, v.l, json_value(r));
                }
                json_ws(r);
                if (r->i < r->n && r->s[r->i] == ',') {
                    r->i++;
                    continue;
                }
                if (r->i < r->n && r->s[r->i] == (obj ? '}' : ']')) {
                    r->i++;
                    break;
                }
                json_fail(r, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            }
        }
    } else if (!strncmp(r->s + r->i, "true", 4)) {
        r->i += 4;
        v = jv_bool(true);
    } else if (!strncmp(r->s + r->i, "false", 5)) {
        r->i += 5;
        v = jv_bool(false);
    } else if (!strncmp(r->s + r->i, "null", 4)) {
        r->i += 4;
        v = jv_none();
    } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
        size_t st = r->i;
        bool is_float = false;
        if (r->s[r->i] == '-')
            r->i++;
        while (r->i < r->n && strchr("0123456789.eE+-", r->s[r->i]) && r->s[r->i]) {
            is_float |= strchr(".eE", r->s[r->i]) != NULL;
            r->i++;
        }
        char buf[64];
        size_t len = r->i - st < sizeof buf - 1 ? r->i - st : sizeof buf - 1;
        memcpy(buf, r->s + st, len);
        buf[len] = 0;
        char *end;
        if (is_float || len > 18) {
            v = jv_float(strtod(buf, &end));
        } else {
            v = jv_int(strtoll(buf, &end, 10));
        }
        if (*end)
            json_fail(r, "bad number");
    } else {
        json_fail(r, "unexpected character");
    }
    r->depth--;
    return v;
}

static jv parse_json(jinja_arena *a, const char *s) {
    json_reader r = {.a = a, .s = s, .n = strlen(s)};
    jv v = json_value(&r);
    json_ws(&r);
    if (r.i != r.n)
        json_fail(&r, "trailing characters");
    return v;
}

/* ---- rendering ------------------------------------------------------------------------- */

typedef struct {
    const chat_message *msgs;
    int n_msgs;
    const char *messages_json, *tools_json;
    bool add_generation_prompt;
    const char *bos, *eos;
} render_args;

static jv make_globals(jinja_arena *a, void *user) {
    const render_args *ra = user;
    jv g = jv_dict_new(a);
    jv msgs;
    if (ra->messages_json) {
        msgs = parse_json(a, ra->messages_json);
        if (msgs.t != JV_LIST)
            jinja_raise(a->err, SI_ERR_INVALID_ARG, 0, 0, "messages must be a JSON array");
    } else {
        msgs = jv_list_new(a, (size_t)ra->n_msgs);
        for (int i = 0; i < ra->n_msgs; i++) {
            jv m = jv_dict_new(a);
            jv_dict_set(a, m.d, jv_cstr("role"), jv_cstr(ra->msgs[i].role));
            jv_dict_set(a, m.d, jv_cstr("content"), jv_cstr(ra->msgs[i].content));
            jv_list_push(a, msgs.l, m);
        }
    }
    jv_dict_set(a, g.d, jv_cstr("messages"), msgs);
    jv_dict_set(a, g.d, jv_cstr("tools"), ra->tools_json ? parse_json(a, ra->tools_json) : jv_none());
    jv_dict_set(a, g.d, jv_cstr("documents"), jv_none());
    jv_dict_set(a, g.d, jv_cstr("add_generation_prompt"), jv_bool(ra->add_generation_prompt));
    jv_dict_set(a, g.d, jv_cstr("bos_token"), jv_cstr(ra->bos ? ra->bos : ""));
    jv_dict_set(a, g.d, jv_cstr("eos_token"), jv_cstr(ra->eos ? ra->eos : ""));
    static const char *const funcs[] = {"raise_exception", "strftime_now", "range", "namespace",
                                        "dict"};
    for (size_t i = 0; i < sizeof funcs / sizeof *funcs; i++)
        jv_dict_set(a, g.d, jv_cstr(funcs[i]), (jv){.t = JV_FUNC, .s = {funcs[i], 0}});
    return g;
}

static si_status render(const chat_template *t, const render_args *ra, char **out) {
    jinja_err err;
    memset(&err, 0, sizeof err);
    if (jinja_render(t->jt, make_globals, (void *)ra, &LIMITS, out, &err) != SI_OK)
        return report(&err, "");
    return SI_OK;
}

si_status chat_template_render(const chat_template *t, const chat_message *msgs, int n_msgs,
                               bool add_generation_prompt, const char *bos_token,
                               const char *eos_token, char **out) {
    if (!out)
        return si_error(SI_ERR_INVALID_ARG, "chat_template_render: out is NULL");
    *out = NULL;
    if (!t || n_msgs < 0 || (n_msgs > 0 && !msgs))
        return si_error(SI_ERR_INVALID_ARG, "chat_template_render: no template or messages");
    for (int i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content)
            return si_error(SI_ERR_INVALID_ARG, "chat_template_render: message %d has a NULL %s", i,
                            msgs[i].role ? "content" : "role");
    render_args ra = {.msgs = msgs, .n_msgs = n_msgs, .add_generation_prompt = add_generation_prompt,
                      .bos = bos_token, .eos = eos_token};
    return render(t, &ra, out);
}

si_status chat_template_render_json(const chat_template *t, const char *messages_json,
                                    const char *tools_json, bool add_generation_prompt,
                                    const char *bos_token, const char *eos_token, char **out) {
    if (!out)
        return si_error(SI_ERR_INVALID_ARG, "chat_template_render_json: out is NULL");
    *out = NULL;
    if (!t || !messages_json)
        return si_error(SI_ERR_INVALID_ARG, "chat_template_render_json: no template or messages");
    render_args ra = {.messages_json = messages_json, .tools_json = tools_json,
                      .add_generation_prompt = add_generation_prompt, .bos = bos_token,
                      .eos = eos_token};
    return render(t, &ra, out);
}
