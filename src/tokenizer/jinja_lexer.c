/* jinja_lexer.c — splits a Jinja template into text and tag tokens, and the insides of
 * {{ }} / {% %} into expression tokens.
 *
 * Whitespace control follows Jinja's lexer with Hugging Face's settings (trim_blocks=True,
 * lstrip_blocks=True): "{%-"/"{{-"/"{#-" strip all whitespace before the tag, "-%}"/"-}}"/"-#}"
 * all whitespace after it; a block or comment tag drops the one newline that follows it
 * (trim_blocks) unless it ends with "+%}"; spaces and tabs between the start of a line and a
 * block or comment tag are dropped (lstrip_blocks) unless it opens with "{%+". String literals
 * take Python's escapes, as Jinja decodes them with "unicode-escape". {% raw %} is handled here. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja.h"

typedef struct {
    jinja_arena *a;
    const char *src;
    size_t len, pos;
    int line, col; /* of pos */
    jtok *toks;
    size_t n, cap;
} lexer;

static void advance(lexer *L, size_t k) {
    for (size_t i = 0; i < k && L->pos < L->len; i++, L->pos++) {
        if (L->src[L->pos] == '\n') {
            L->line++;
            L->col = 1;
        } else {
            L->col++;
        }
    }
}

_Noreturn static void lex_fail(lexer *L, const char *msg) {
    jinja_raise(L->a->err, SI_ERR_FORMAT, L->line, L->col, "%s", msg);
}

static jtok *emit(lexer *L, jtok_type t, int line, int col) {
    if (L->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        jtok *p = jinja_alloc(L->a, cap * sizeof *p);
        if (L->n)
            memcpy(p, L->toks, L->n * sizeof *p);
        L->toks = p;
        L->cap = cap;
    }
    jtok *t0 = &L->toks[L->n++];
    memset(t0, 0, sizeof *t0);
    t0->t = t;
    t0->line = line;
    t0->col = col;
    return t0;
}

static void emit_text(lexer *L, const char *s, size_t n, int line, int col) {
    if (!n)
        return;
    jtok *t = emit(L, JT_TEXT, line, col);
    t->s = s;
    t->n = n;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static void skip_ws(lexer *L) {
    while (L->pos < L->len && is_ws(L->src[L->pos]))
        advance(L, 1);
}

static void put_utf8(char *out, size_t *n, uint32_t cp) {
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A quoted string at L->pos; escapes decoded as Python's "unicode-escape" does. */
static void lex_string(lexer *L) {
    int line = L->line, col = L->col;
    char q = L->src[L->pos];
    size_t start = L->pos + 1, end = start;
    while (end < L->len && L->src[end] != q) {
        if (L->src[end] == '\\' && end + 1 < L->len)
            end++;
        end++;
    }
    if (end >= L->len)
        lex_fail(L, "unterminated string literal");
    const char *s = L->src + start;
    size_t n = end - start, o = 0;
    char *out = jinja_alloc(L->a, n + 1); /* decoding never grows the text */
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\r') { /* Jinja normalises newlines in literals */
            out[o++] = '\n';
            if (i + 1 < n && s[i + 1] == '\n')
                i++;
            continue;
        }
        if (c != '\\' || i + 1 >= n) {
            out[o++] = c;
            continue;
        }
        char e = s[++i];
        switch (e) {
        case 'n': out[o++] = '\n'; break;
        case 't': out[o++] = '\t'; break;
        case 'r': out[o++] = '\r'; break;
        case 'a': out[o++] = '\a'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'v': out[o++] = '\v'; break;
        case '\\': out[o++] = '\\'; break;
        case '\'': out[o++] = '\''; break;
        case '"': out[o++] = '"'; break;
        case '\n': break; /* line continuation */
        case 'x':
        case 'u':
        case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            if (i + (size_t)digits >= n)
                lex_fail(L, "truncated \\x/\\u escape in string literal");
            for (int k = 1; k <= digits; k++) {
                int h = hexval(s[i + (size_t)k]);
                if (h < 0)
                    lex_fail(L, "invalid \\x/\\u escape in string literal");
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                lex_fail(L, "escape is not a Unicode scalar value");
            i += (size_t)digits;
            put_utf8(out, &o, cp);
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(s[++i] - '0');
                put_utf8(out, &o, cp);
            } else { /* unknown escapes stay as they are */
                out[o++] = '\\';
                out[o++] = e;
            }
        }
    }
    out[o] = 0;
    jtok *t = emit(L, JT_STRING, line, col);
    t->s = out;
    t->n = o;
    advance(L, n + 2);
}

/* Appends c to a number's text; false once the literal is too long to be a sane number. */
static bool num_push(char *buf, size_t cap, size_t *bn, char c) {
    if (*bn + 1 >= cap) return false;
    buf[(*bn)++] = c;
    return true;
}

static void lex_number(lexer *L) {
    int line = L->line, col = L->col;
    size_t p = L->pos;
    char buf[128];
    size_t bn = 0;
    bool is_float = false, fits = true;
    while (p < L->len && (isdigit((unsigned char)L->src[p]) || L->src[p] == '_')) {
        if (L->src[p] != '_') fits &= num_push(buf, sizeof buf, &bn, L->src[p]);
        p++;
    }
    if (p + 1 < L->len && L->src[p] == '.' && isdigit((unsigned char)L->src[p + 1])) {
        is_float = true;
        fits &= num_push(buf, sizeof buf, &bn, '.');
        p++;
        while (p < L->len && (isdigit((unsigned char)L->src[p]) || L->src[p] == '_')) {
            if (L->src[p] != '_') fits &= num_push(buf, sizeof buf, &bn, L->src[p]);
            p++;
        }
    }
    if (p < L->len && (L->src[p] == 'e' || L->src[p] == 'E')) {
        size_t q = p + 1;
        if (q < L->len && (L->src[q] == '+' || L->src[q] == '-'))
            q++;
        if (q < L->len && isdigit((unsigned char)L->src[q])) {
            is_float = true;
            while (p < q)
                fits &= num_push(buf, sizeof buf, &bn, L->src[p++]);
            while (p < L->len && isdigit((unsigned char)L->src[p]))
                fits &= num_push(buf, sizeof buf, &bn, L->src[p++]);
        }
    }
    buf[bn] = 0;
    jtok *t = emit(L, is_float ? JT_FLOAT : JT_INT, line, col);
    if (!fits)
        lex_fail(L, "number literal too long");
    if (is_float) {
        t->f = strtod(buf, NULL);
    } else {
        if (bn > 18)
            lex_fail(L, "integer literal too large");
        t->i = strtoll(buf, NULL, 10);
    }
    advance(L, p - L->pos);
}

static const char *const OPS2[] = {"//", "**", "==", "!=", "<=", ">="};
static const char OPS1[] = "+-*/%~<>=()[]{},.:|";

/* Expression tokens up to the closing delimiter ("}}" or "%}"); returns whether the closer had
 * a '-' (strip following whitespace) and sets *plus for "+%}". */
static bool lex_tag_body(lexer *L, bool block, bool *plus) {
    int depth = 0;
    *plus = false;
    for (;;) {
        while (L->pos < L->len && is_ws(L->src[L->pos]))
            advance(L, 1);
        if (L->pos >= L->len)
            lex_fail(L, block ? "unexpected end of template: missing '%}'"
                              : "unexpected end of template: missing '}}'");
        const char *p = L->src + L->pos;
        size_t left = L->len - L->pos;
        const char *close = block ? "%}" : "}}";
        if (depth == 0) {
            if (left >= 3 && (p[0] == '-' || (block && p[0] == '+')) && memcmp(p + 1, close, 2) == 0) {
                *plus = p[0] == '+';
                emit(L, block ? JT_BLOCK_END : JT_VAR_END, L->line, L->col);
                advance(L, 3);
                return p[0] == '-';
            }
            if (left >= 2 && memcmp(p, close, 2) == 0) {
                emit(L, block ? JT_BLOCK_END : JT_VAR_END, L->line, L->col);
                advance(L, 2);
                return false;
            }
        }
        char c = *p;
        if (c == '\'' || c == '"') {
            lex_string(L);
        } else if (isdigit((unsigned char)c)) {
            lex_number(L);
        } else if (isalpha((unsigned char)c) || c == '_' || (unsigned char)c >= 0x80) {
            size_t k = 0;
            while (k < left && (isalnum((unsigned char)p[k]) || p[k] == '_' || (unsigned char)p[k] >= 0x80))
                k++;
            jtok *t = emit(L, JT_NAME, L->line, L->col);
            t->s = jinja_strdup(L->a, p, k);
            t->n = k;
            advance(L, k);
        } else {
            size_t k = 0;
            for (size_t i = 0; i < sizeof OPS2 / sizeof *OPS2; i++)
                if (left >= 2 && memcmp(p, OPS2[i], 2) == 0)
                    k = 2;
            if (!k && strchr(OPS1, c) && c)
                k = 1;
            if (!k)
                lex_fail(L, "unexpected character in expression");
            if (c == '(' || c == '[' || c == '{')
                depth++;
            else if ((c == ')' || c == ']' || c == '}') && depth > 0)
                depth--;
            jtok *t = emit(L, JT_OP, L->line, L->col);
            t->s = p;
            t->n = k;
            advance(L, k);
        }
    }
}

/* Finds the next "{{", "{%" or "{#" at or after from; returns its offset or len. */
static size_t find_open(const lexer *L, size_t from) {
    for (size_t i = from; i + 1 < L->len; i++)
        if (L->src[i] == '{' && (L->src[i + 1] == '{' || L->src[i + 1] == '%' || L->src[i + 1] == '#'))
            return i;
    return L->len;
}

/* After "{%" [-+] at p, is the tag "raw"? Returns the offset just past its "%}" or 0. */
static size_t raw_tag_end(const lexer *L, size_t p, const char *word, bool *strip_after) {
    while (p < L->len && is_ws(L->src[p]))
        p++;
    size_t wn = strlen(word);
    if (L->len - p < wn || memcmp(L->src + p, word, wn) != 0)
        return 0;
    p += wn;
    while (p < L->len && is_ws(L->src[p]))
        p++;
    *strip_after = false;
    if (p < L->len && (L->src[p] == '-' || L->src[p] == '+')) {
        *strip_after = L->src[p] == '-';
        p++;
    }
    if (L->len - p < 2 || memcmp(L->src + p, "%}", 2) != 0)
        return 0;
    return p + 2;
}

jtok *jinja_lex(jinja_arena *a, const char *src, size_t len, size_t *n_out) {
    lexer L = {.a = a, .src = src, .len = len, .line = 1, .col = 1};
    bool line_starting = true; /* the previous tag ended a line (Jinja's lstrip rule) */
    bool strip_next = false;   /* the previous tag ended with '-' */
    while (L.pos < L.len) {
        if (strip_next) {
            skip_ws(&L);
            strip_next = false;
            if (L.pos >= L.len)
                break;
        }
        size_t open = find_open(&L, L.pos);
        const char *text = src + L.pos;
        size_t tn = open - L.pos;
        int tline = L.line, tcol = L.col;
        if (open >= L.len) {
            emit_text(&L, text, tn, tline, tcol);
            advance(&L, tn);
            break;
        }
        char kind = src[open + 1];
        char sign = open + 2 < len ? src[open + 2] : 0;
        if (sign == '-') {
            while (tn > 0 && is_ws(text[tn - 1]))
                tn--;
        } else if (sign != '+' && kind != '{') {
            /* lstrip_blocks: only whitespace between the line start and the tag goes */
            size_t l = tn;
            while (l > 0 && text[l - 1] != '\n')
                l--;
            if (l > 0 || line_starting) {
                size_t k = l;
                while (k < tn && is_ws(text[k]))
                    k++;
                if (k == tn)
                    tn = l;
            }
        }
        emit_text(&L, text, tn, tline, tcol);
        advance(&L, open - L.pos);
        int oline = L.line, ocol = L.col;
        advance(&L, (sign == '-' || sign == '+') ? 3 : 2);
        if (kind == '#') {
            const char *end = NULL;
            for (size_t i = L.pos; i + 1 < L.len; i++)
                if (src[i] == '#' && src[i + 1] == '}') {
                    end = src + i;
                    break;
                }
            if (!end) {
                L.line = oline;
                L.col = ocol;
                lex_fail(&L, "missing end of comment tag '#}'");
            }
            size_t endpos = (size_t)(end - src);
            bool minus = endpos > L.pos && src[endpos - 1] == '-';
            bool plus = endpos > L.pos && src[endpos - 1] == '+';
            advance(&L, endpos + 2 - L.pos);
            if (minus)
                strip_next = true;
            else if (!plus && L.pos < L.len && src[L.pos] == '\n')
                advance(&L, 1);
            line_starting = L.pos > 0 && src[L.pos - 1] == '\n';
            continue;
        }
        if (kind == '%') {
            bool sa;
            size_t after = raw_tag_end(&L, L.pos, "raw", &sa);
            if (after) {
                advance(&L, after - L.pos);
                if (sa)
                    skip_ws(&L);
                else if (L.pos < L.len && src[L.pos] == '\n')
                    advance(&L, 1);
                /* the body runs to the next {% endraw %} */
                for (size_t i = L.pos; i + 1 < L.len; i++) {
                    if (src[i] != '{' || src[i + 1] != '%')
                        continue;
                    size_t q = i + 2;
                    char s2 = q < L.len ? src[q] : 0;
                    if (s2 == '-' || s2 == '+')
                        q++;
                    bool sa2;
                    size_t after2 = raw_tag_end(&L, q, "endraw", &sa2);
                    if (!after2)
                        continue;
                    size_t bn = i - L.pos;
                    if (s2 == '-')
                        while (bn > 0 && is_ws(src[L.pos + bn - 1]))
                            bn--;
                    emit_text(&L, src + L.pos, bn, L.line, L.col);
                    advance(&L, after2 - L.pos);
                    if (sa2)
                        strip_next = true;
                    else if (L.pos < L.len && src[L.pos] == '\n')
                        advance(&L, 1);
                    after = 0;
                    break;
                }
                if (after)
                    lex_fail(&L, "missing {% endraw %}");
                line_starting = L.pos > 0 && src[L.pos - 1] == '\n';
                continue;
            }
        }
        bool block = kind == '%';
        emit(&L, block ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, oline, ocol);
        bool plus;
        strip_next = lex_tag_body(&L, block, &plus);
        if (!strip_next && block && !plus && L.pos < L.len && src[L.pos] == '\n')
            advance(&L, 1); /* trim_blocks */
        line_starting = strip_next || (L.pos > 0 && src[L.pos - 1] == '\n');
    }
    emit(&L, JT_EOF, L.line, L.col);
    *n_out = L.n;
    return L.toks;
}
