/* chat_format.c — ChatML and Llama-3 conversations rendered without a Jinja engine.
 *
 * See chat_format.h for what is recognised in the template source. The renderer runs twice:
 * once to measure, once to write into a single exact-size allocation. */
#include "tokenizer/chat_format.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* How one message is framed: HEAD role MID content TAIL. */
typedef struct {
    const char *name;
    const char *bos; /* once before the first message ("" if none) */
    const char *head;
    const char *mid;
    const char *tail;
} chat_frame;

static const chat_frame frame_chatml = {"ChatML", "", "<|im_start|>", "\n", "<|im_end|>\n"};
static const chat_frame frame_llama3 = {"Llama-3", "<|begin_of_text|>", "<|start_header_id|>",
                                        "<|end_header_id|>\n\n", "<|eot_id|>"};

chat_format chat_format_detect(const char *template_source) {
    if (!template_source) return CHAT_FORMAT_UNKNOWN;
    if (strstr(template_source, "<|im_start|>")) return CHAT_FORMAT_CHATML;
    if (strstr(template_source, "<|start_header_id|>")) return CHAT_FORMAT_LLAMA3;
    return CHAT_FORMAT_UNKNOWN;
}

/* ---- Output buffer: measures when p is NULL ------------------------------------------------ */

typedef struct {
    char *p;
    size_t len;
} chat_out;

static void out_put(chat_out *o, const char *s, size_t n) {
    if (o->p) memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void out_str(chat_out *o, const char *s) { out_put(o, s, strlen(s)); }

/* ---- Template inspection ------------------------------------------------------------------- */

/* Python's str.isspace() for ASCII, which is what Jinja's trim filter strips. NOTE: non-ASCII
 * Unicode spaces (U+00A0, U+2000...) are not stripped. */
static bool is_py_space(char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

/* True when the template applies Jinja's trim filter ("| trim", "|trim") anywhere. */
static bool template_trims(const char *src) {
    for (const char *t = strstr(src, "trim"); t; t = strstr(t + 1, "trim")) {
        const char *b = t;
        while (b > src && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (b > src && b[-1] == '|') return true;
    }
    return false;
}

/* Parses the Jinja string literal at s (opening quote ' or ") into o (escapes \n \t \r \\ \' \"
 * resolved) and returns the position after the closing quote, or NULL if unterminated. */
static const char *parse_literal(const char *s, const char *end, chat_out *o) {
    char q = *s++;
    while (s < end && *s != q) {
        if (*s == '\\' && s + 1 < end) {
            char c = s[1], r;
            switch (c) {
            case 'n': r = '\n'; break;
            case 't': r = '\t'; break;
            case 'r': r = '\r'; break;
            default: r = c; break; /* \\ \' \" and anything else: the character itself */
            }
            out_put(o, &r, 1);
            s += 2;
        } else {
            out_put(o, s, 1);
            s++;
        }
    }
    return s < end ? s + 1 : NULL;
}

/* Finds a default system prompt: the single string literal printed by `{{ '...' }}` inside the
 * `{% if ... messages[0]['role'] != 'system' %} ... {% endif %}` block. Returns the position of
 * its opening quote (NULL if none) and sets *end to the end of the block; the caller unescapes it
 * with parse_literal and checks that it starts with the format's system header. */
static const char *find_default_system(const char *src, const char **end) {
    static const char *conds[] = {"messages[0]['role'] != 'system'",
                                  "messages[0][\"role\"] != \"system\""};
    const char *cond = NULL;
    for (size_t i = 0; i < sizeof conds / sizeof conds[0] && !cond; i++)
        cond = strstr(src, conds[i]);
    if (!cond) return NULL;
    const char *block_end = strstr(cond, "endif");
    if (!block_end) return NULL;
    const char *e = strstr(cond, "{{");
    if (!e || e >= block_end) return NULL;
    e += 2;
    while (e < block_end && (is_py_space(*e) || *e == '-'))
        e++;
    if (e >= block_end || (*e != '\'' && *e != '"')) return NULL;
    chat_out m = {NULL, 0};
    const char *after = parse_literal(e, block_end, &m);
    if (!after) return NULL;
    while (after < block_end && (is_py_space(*after) || *after == '-'))
        after++;
    if (strncmp(after, "}}", 2) != 0)
        return NULL; /* an expression, not a lone literal: not understood */
    *end = block_end;
    return e;
}

/* ---- Rendering ----------------------------------------------------------------------------- */

static void render(const chat_frame *fr, const char *sys_default, size_t sys_len, bool trim,
                   const chat_message *msgs, int n, bool add_generation_prompt, chat_out *o) {
    for (int i = 0; i < n; i++) {
        if (i == 0) {
            out_str(o, fr->bos);
            if (sys_default && strcmp(msgs[0].role, "system") != 0)
                out_put(o, sys_default, sys_len);
        }
        const char *c = msgs[i].content;
        size_t cl = strlen(c);
        if (trim) {
            while (cl > 0 && is_py_space(*c))
                c++, cl--;
            while (cl > 0 && is_py_space(c[cl - 1]))
                cl--;
        }
        out_str(o, fr->head);
        out_str(o, msgs[i].role);
        out_str(o, fr->mid);
        out_put(o, c, cl);
        out_str(o, fr->tail);
    }
    if (add_generation_prompt) {
        out_str(o, fr->head);
        out_str(o, "assistant");
        out_str(o, fr->mid);
    }
}

si_status chat_format_render(chat_format f, const char *template_source, const chat_message *msgs,
                             int n, bool add_generation_prompt, char **out) {
    if (!out) return si_error(SI_ERR_INVALID_ARG, "chat_format_render: out is NULL");
    *out = NULL;
    const chat_frame *fr;
    switch (f) {
    case CHAT_FORMAT_CHATML: fr = &frame_chatml; break;
    case CHAT_FORMAT_LLAMA3: fr = &frame_llama3; break;
    default:
        return si_error(SI_ERR_UNSUPPORTED, "chat_format_render: unknown chat format %d", (int)f);
    }
    if (n < 0 || (n > 0 && !msgs))
        return si_error(SI_ERR_INVALID_ARG, "chat_format_render: bad message list (n=%d)", n);
    for (int i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return si_error(SI_ERR_INVALID_ARG, "chat_format_render: message %d has a NULL %s", i,
                            msgs[i].role ? "content" : "role");
    }

    /* NOTE: with no template text, Meta's Llama-3 template is assumed (it trims) and ChatML's
     * plainest form (no trim, no default system prompt). */
    bool trim = template_source ? template_trims(template_source) : f == CHAT_FORMAT_LLAMA3;
    char *sys = NULL;
    size_t sys_len = 0;
    const char *lit_end = NULL;
    const char *lit = template_source ? find_default_system(template_source, &lit_end) : NULL;
    if (lit) {
        chat_out m = {NULL, 0};
        parse_literal(lit, lit_end, &m);
        sys = malloc(m.len + 1);
        if (!sys) return si_error(SI_ERR_NOMEM, "chat_format_render: out of memory");
        chat_out w = {sys, 0};
        parse_literal(lit, lit_end, &w);
        sys_len = w.len;
        sys[sys_len] = '\0';
        size_t hl = strlen(fr->head);
        if (strncmp(sys, fr->head, hl) != 0 || strncmp(sys + hl, "system", 6) != 0) {
            free(sys); /* prints something else: not a default system prompt we understand */
            sys = NULL;
            sys_len = 0;
        }
    }

    chat_out m = {NULL, 0};
    render(fr, sys, sys_len, trim, msgs, n, add_generation_prompt, &m);
    char *buf = malloc(m.len + 1);
    if (!buf) {
        free(sys);
        return si_error(SI_ERR_NOMEM, "chat_format_render: out of memory for %zu bytes of %s",
                        m.len + 1, fr->name);
    }
    chat_out w = {buf, 0};
    render(fr, sys, sys_len, trim, msgs, n, add_generation_prompt, &w);
    SI_ASSERT(w.len == m.len);
    buf[w.len] = '\0';
    free(sys);
    *out = buf;
    return SI_OK;
}
