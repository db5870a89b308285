/* jinja_value.c — the value model of the Jinja interpreter: the arena every value lives in,
 * Python-like values (None, bool, int, float, str, list/tuple, ordered dict, namespace), their
 * truthiness, equality and ordering, and their text forms: str() and repr() as Python writes
 * them, and json.dumps(ensure_ascii=False) as Hugging Face's `tojson` filter calls it. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja.h"

_Noreturn void jinja_raise(jinja_err *e, si_status st, int line, int col, const char *fmt, ...) {
    e->status = st;
    e->line = line;
    e->col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    longjmp(e->jb, 1);
}

/* ---- arena ----------------------------------------------------------------------------- */

struct jinja_chunk {
    jinja_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void jinja_arena_init(jinja_arena *a, size_t limit, jinja_err *err) {
    a->head = NULL;
    a->total = 0;
    a->limit = limit;
    a->err = err;
}

void *jinja_alloc(jinja_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    jinja_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 32768 ? n : 32768;
        if (a->total + cap > a->limit || cap > a->limit)
            jinja_raise(a->err, SI_ERR_UNSUPPORTED, 0, 0,
                        "template used more than its memory limit (%zu bytes)", a->limit);
        c = malloc(sizeof *c + cap);
        if (!c)
            jinja_raise(a->err, SI_ERR_NOMEM, 0, 0, "out of memory");
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
        a->total += cap;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *jinja_strdup(jinja_arena *a, const char *s, size_t n) {
    char *p = jinja_alloc(a, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void jinja_arena_free(jinja_arena *a) {
    for (jinja_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
    a->total = 0;
}

/* ---- constructors ---------------------------------------------------------------------- */

jv jv_str(jinja_arena *a, const char *s, size_t n) {
    return (jv){.t = JV_STR, .s = {jinja_strdup(a, s, n), n}};
}

jv jv_cstr(const char *s) { return (jv){.t = JV_STR, .s = {s, strlen(s)}}; }

jv jv_list_new(jinja_arena *a, size_t cap) {
    jv_list *l = jinja_alloc(a, sizeof *l);
    l->cap = cap ? cap : 4;
    l->v = jinja_alloc(a, l->cap * sizeof(jv));
    return (jv){.t = JV_LIST, .l = l};
}

void jv_list_push(jinja_arena *a, jv_list *l, jv x) {
    if (l->n == l->cap) {
        jv *v = jinja_alloc(a, 2 * l->cap * sizeof(jv));
        memcpy(v, l->v, l->n * sizeof(jv));
        l->v = v;
        l->cap *= 2;
    }
    l->v[l->n++] = x;
}

jv jv_dict_new(jinja_arena *a) {
    jv_dict *d = jinja_alloc(a, sizeof *d);
    d->cap = 4;
    d->k = jinja_alloc(a, d->cap * sizeof(jv));
    d->v = jinja_alloc(a, d->cap * sizeof(jv));
    return (jv){.t = JV_DICT, .d = d};
}

const jv *jv_dict_get(const jv_dict *d, jv key) {
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], key))
            return &d->v[i];
    return NULL;
}

const jv *jv_dict_gets(const jv_dict *d, const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].s.n == n && memcmp(d->k[i].s.s, key, n) == 0)
            return &d->v[i];
    return NULL;
}

void jv_dict_set(jinja_arena *a, jv_dict *d, jv key, jv val) {
    const jv *old = jv_dict_get(d, key);
    if (old) {
        d->v[old - d->v] = val;
        return;
    }
    if (d->n == d->cap) {
        jv *k = jinja_alloc(a, 2 * d->cap * sizeof(jv)), *v = jinja_alloc(a, 2 * d->cap * sizeof(jv));
        memcpy(k, d->k, d->n * sizeof(jv));
        memcpy(v, d->v, d->n * sizeof(jv));
        d->k = k;
        d->v = v;
        d->cap *= 2;
    }
    d->k[d->n] = key;
    d->v[d->n++] = val;
}

/* ---- semantics ------------------------------------------------------------------------- */

const char *jv_type_name(jv_type t) {
    switch (t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "function";
    case JV_METHOD: return "method";
    }
    return "object";
}

bool jv_truthy(jv x) {
    switch (x.t) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return x.b;
    case JV_INT: return x.i != 0;
    case JV_FLOAT: return x.f != 0.0;
    case JV_STR: return x.s.n != 0;
    case JV_LIST: return x.l->n != 0;
    case JV_DICT: return x.d->n != 0;
    default: return true;
    }
}

static bool jv_is_num(jv x) { return x.t == JV_BOOL || x.t == JV_INT || x.t == JV_FLOAT; }
static double jv_num(jv x) { return x.t == JV_FLOAT ? x.f : x.t == JV_INT ? (double)x.i : x.b; }

static bool jv_equal_d(jv a, jv b, int depth) {
    if (depth > 100)
        return false;
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT)
            return (a.t == JV_INT ? a.i : a.b) == (b.t == JV_INT ? b.i : b.b);
        return jv_num(a) == jv_num(b);
    }
    if (a.t != b.t)
        return false;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a.s.n == b.s.n && memcmp(a.s.s, b.s.s, a.s.n) == 0;
    case JV_LIST:
        if (a.l->n != b.l->n)
            return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!jv_equal_d(a.l->v[i], b.l->v[i], depth + 1))
                return false;
        return true;
    case JV_DICT:
        if (a.d->n != b.d->n)
            return false;
        for (size_t i = 0; i < a.d->n; i++) {
            const jv *o = jv_dict_get(b.d, a.d->k[i]);
            if (!o || !jv_equal_d(a.d->v[i], *o, depth + 1))
                return false;
        }
        return true;
    case JV_NS: return a.d == b.d;
    case JV_MACRO: return a.mac.node == b.mac.node;
    case JV_FUNC: return strcmp(a.s.s, b.s.s) == 0;
    default: return false;
    }
}

bool jv_equal(jv a, jv b) { return jv_equal_d(a, b, 0); }

int jv_compare(jv a, jv b, bool *ok) {
    *ok = true;
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t == JV_INT && b.t == JV_INT)
            return (a.i > b.i) - (a.i < b.i);
        double x = jv_num(a), y = jv_num(b);
        return (x > y) - (x < y);
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        /* bytewise UTF-8 order is code point order, as Python compares str */
        size_t n = a.s.n < b.s.n ? a.s.n : b.s.n;
        int r = memcmp(a.s.s, b.s.s, n);
        if (r)
            return r;
        return (a.s.n > b.s.n) - (a.s.n < b.s.n);
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (jv_equal(a.l->v[i], b.l->v[i]))
                continue;
            return jv_compare(a.l->v[i], b.l->v[i], ok);
        }
        return (a.l->n > b.l->n) - (a.l->n < b.l->n);
    }
    *ok = false;
    return 0;
}

/* ---- buffers --------------------------------------------------------------------------- */

void jbuf_init(jbuf *b, jinja_arena *a, size_t limit) {
    b->a = a;
    b->p = NULL;
    b->n = b->cap = 0;
    b->limit = limit;
}

void jbuf_put(jbuf *b, const char *s, size_t n) {
    if (n > b->cap - b->n) {
        if (n > b->limit || b->n + n > b->limit)
            jinja_raise(b->a->err, SI_ERR_UNSUPPORTED, 0, 0,
                        "template output exceeds its size limit (%zu bytes)", b->limit);
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = jinja_alloc(b->a, cap);
        if (b->n)
            memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap - 1; /* room for the NUL of jbuf_value */
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
}

void jbuf_puts(jbuf *b, const char *s) { jbuf_put(b, s, strlen(s)); }
void jbuf_putc(jbuf *b, char c) { jbuf_put(b, &c, 1); }

jv jbuf_value(jbuf *b) {
    if (!b->p)
        return (jv){.t = JV_STR, .s = {"", 0}};
    b->p[b->n] = 0;
    return (jv){.t = JV_STR, .s = {b->p, b->n}};
}

/* ---- text forms ------------------------------------------------------------------------ */

void jv_write_float(jbuf *b, double f) {
    char tmp[64];
    if (isnan(f)) {
        jbuf_puts(b, "nan");
        return;
    }
    if (isinf(f)) {
        jbuf_puts(b, f < 0 ? "-inf" : "inf");
        return;
    }
    /* Python's repr: the shortest digits that round-trip, fixed notation for 1e-4 <= |f| < 1e16 */
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f)
            break;
    }
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
    char digits[32];
    int nd = 0;
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    if (neg)
        jbuf_putc(b, '-');
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            jbuf_puts(b, "0.");
            for (int i = 0; i < -exp - 1; i++)
                jbuf_putc(b, '0');
            jbuf_put(b, digits, (size_t)nd);
        } else {
            for (int i = 0; i <= exp; i++)
                jbuf_putc(b, i < nd ? digits[i] : '0');
            jbuf_putc(b, '.');
            if (nd > exp + 1)
                jbuf_put(b, digits + exp + 1, (size_t)(nd - exp - 1));
            else
                jbuf_putc(b, '0');
        }
    } else {
        jbuf_putc(b, digits[0]);
        if (nd > 1) {
            jbuf_putc(b, '.');
            jbuf_put(b, digits + 1, (size_t)(nd - 1));
        }
        snprintf(tmp, sizeof tmp, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        jbuf_puts(b, tmp);
    }
}

static void write_repr_str(jbuf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jbuf_putc(b, q);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char tmp[8];
        if (ch == (unsigned char)q || ch == '\\') {
            jbuf_putc(b, '\\');
            jbuf_putc(b, (char)ch);
        } else if (ch == '\n') {
            jbuf_puts(b, "\\n");
        } else if (ch == '\r') {
            jbuf_puts(b, "\\r");
        } else if (ch == '\t') {
            jbuf_puts(b, "\\t");
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(tmp, sizeof tmp, "\\x%02x", ch);
            jbuf_puts(b, tmp);
        } else {
            jbuf_putc(b, (char)ch);
        }
    }
    jbuf_putc(b, q);
}

static void write_py(jbuf *b, jv x, bool repr, int depth) {
    if (depth > 100)
        jinja_raise(b->a->err, SI_ERR_UNSUPPORTED, 0, 0, "value nested too deeply to print");
    switch (x.t) {
    case JV_UNDEF: break;
    case JV_NONE: jbuf_puts(b, "None"); break;
    case JV_BOOL: jbuf_puts(b, x.b ? "True" : "False"); break;
    case JV_INT: {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "%lld", (long long)x.i);
        jbuf_puts(b, tmp);
        break;
    }
    case JV_FLOAT: jv_write_float(b, x.f); break;
    case JV_STR:
        if (repr)
            write_repr_str(b, x.s.s, x.s.n);
        else
            jbuf_put(b, x.s.s, x.s.n);
        break;
    case JV_LIST:
        jbuf_putc(b, x.l->tuple ? '(' : '[');
        for (size_t i = 0; i < x.l->n; i++) {
            if (i)
                jbuf_puts(b, ", ");
            write_py(b, x.l->v[i], true, depth + 1);
        }
        if (x.l->tuple && x.l->n == 1)
            jbuf_putc(b, ',');
        jbuf_putc(b, x.l->tuple ? ')' : ']');
        break;
    case JV_NS:
    case JV_DICT:
        if (x.t == JV_NS)
            jbuf_puts(b, "<Namespace ");
        jbuf_putc(b, '{');
        for (size_t i = 0; i < x.d->n; i++) {
            if (i)
                jbuf_puts(b, ", ");
            write_py(b, x.d->k[i], true, depth + 1);
            jbuf_puts(b, ": ");
            write_py(b, x.d->v[i], true, depth + 1);
        }
        jbuf_putc(b, '}');
        if (x.t == JV_NS)
            jbuf_putc(b, '>');
        break;
    case JV_MACRO: jbuf_puts(b, "<Macro>"); break;
    case JV_FUNC: jbuf_puts(b, "<function>"); break;
    case JV_METHOD: jbuf_puts(b, "<method>"); break;
    }
}

void jv_write_str(jbuf *b, jv x) { write_py(b, x, false, 0); }
void jv_write_repr(jbuf *b, jv x) { write_py(b, x, true, 0); }

jv jv_to_str(jinja_arena *a, jv x) {
    if (x.t == JV_STR)
        return x;
    jbuf b;
    jbuf_init(&b, a, (size_t)1 << 40);
    jv_write_str(&b, x);
    return jbuf_value(&b);
}

static void write_json_str(jbuf *b, const char *s, size_t n) {
    jbuf_putc(b, '"');
    size_t run = 0; /* bytes copied as they are, flushed at each escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[8];
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (ch < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", ch);
                esc = tmp;
            }
        }
        if (esc) {
            jbuf_put(b, s + i - run, run);
            run = 0;
            jbuf_puts(b, esc);
        } else {
            run++;
        }
    }
    jbuf_put(b, s + n - run, run);
    jbuf_putc(b, '"');
}

static void json_newline(jbuf *b, int indent, int level) {
    jbuf_putc(b, '\n');
    for (int i = 0; i < indent * level; i++)
        jbuf_putc(b, ' ');
}

static void write_json(jbuf *b, jv x, int indent, bool sort_keys, jinja_err *err, int level) {
    if (level > 100)
        jinja_raise(err, SI_ERR_UNSUPPORTED, 0, 0, "value nested too deeply for tojson");
    switch (x.t) {
    case JV_NONE: jbuf_puts(b, "null"); return;
    case JV_BOOL: jbuf_puts(b, x.b ? "true" : "false"); return;
    case JV_INT: write_py(b, x, false, 0); return;
    case JV_FLOAT:
        if (isnan(x.f))
            jbuf_puts(b, "NaN");
        else if (isinf(x.f))
            jbuf_puts(b, x.f < 0 ? "-Infinity" : "Infinity");
        else
            jv_write_float(b, x.f);
        return;
    case JV_STR: write_json_str(b, x.s.s, x.s.n); return;
    case JV_LIST:
        if (!x.l->n) {
            jbuf_puts(b, "[]");
            return;
        }
        jbuf_putc(b, '[');
        for (size_t i = 0; i < x.l->n; i++) {
            if (i)
                jbuf_puts(b, indent >= 0 ? "," : ", ");
            if (indent >= 0)
                json_newline(b, indent, level + 1);
            write_json(b, x.l->v[i], indent, sort_keys, err, level + 1);
        }
        if (indent >= 0)
            json_newline(b, indent, level);
        jbuf_putc(b, ']');
        return;
    case JV_DICT: {
        if (!x.d->n) {
            jbuf_puts(b, "{}");
            return;
        }
        size_t n = x.d->n;
        size_t *order = jinja_alloc(b->a, n * sizeof *order);
        for (size_t i = 0; i < n; i++)
            order[i] = i;
        if (sort_keys) /* insertion sort: stable, and dicts in templates are small */
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0; j--) {
                    bool ok;
                    if (jv_compare(x.d->k[order[j - 1]], x.d->k[order[j]], &ok) <= 0)
                        break;
                    size_t t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        jbuf_putc(b, '{');
        for (size_t i = 0; i < n; i++) {
            jv k = x.d->k[order[i]];
            if (i)
                jbuf_puts(b, indent >= 0 ? "," : ", ");
            if (indent >= 0)
                json_newline(b, indent, level + 1);
            if (k.t == JV_STR) {
                write_json_str(b, k.s.s, k.s.n);
            } else if (k.t == JV_INT || k.t == JV_FLOAT || k.t == JV_BOOL || k.t == JV_NONE) {
                jbuf_putc(b, '"');
                write_json(b, k, -1, false, err, level + 1);
                jbuf_putc(b, '"');
            } else {
                jinja_raise(err, SI_ERR_FORMAT, 0, 0, "tojson: keys must be str, int, float, bool "
                            "or None, not %s", jv_type_name(k.t));
            }
            jbuf_puts(b, ": ");
            write_json(b, x.d->v[order[i]], indent, sort_keys, err, level + 1);
        }
        if (indent >= 0)
            json_newline(b, indent, level);
        jbuf_putc(b, '}');
        return;
    }
    default:
        jinja_raise(err, SI_ERR_FORMAT, 0, 0, "tojson: Object of type %s is not JSON serializable",
                    jv_type_name(x.t));
    }
}

void jv_write_json(jbuf *b, jv x, int indent, bool sort_keys, jinja_err *err) {
    write_json(b, x, indent, sort_keys, err, 0);
}
