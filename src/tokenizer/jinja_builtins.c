/* jinja_builtins.c — the filters, tests, methods and global functions chat templates use.
 *
 * Filters follow Jinja's built-ins (jinja2/filters.py) except tojson, which is Hugging Face's
 * override: json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=sort_keys). Methods are
 * Python's str and dict methods that ImmutableSandboxedEnvironment allows (no list.append,
 * dict.update: the sandbox forbids mutation). Globals are Jinja's range (with the sandbox's
 * MAX_RANGE of 100000), namespace and dict, and Hugging Face's raise_exception and strftime_now.
 * Case mapping uses utf8proc per code point (Python's multi-character mappings such as
 * "ß".upper() == "SS" are not reproduced). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "tokenizer/jinja.h"

#define SANDBOX_MAX_RANGE 100000

/* ---- arguments ------------------------------------------------------------------------- */

/* The argument at position pos, or the keyword argument called name; NULL if absent. */
static const jv *arg(const jv *args, const char **names, int n, int pos, const char *name) {
    int p = 0;
    for (int i = 0; i < n; i++) {
        if (names && names[i]) {
            if (name && !strcmp(names[i], name))
                return &args[i];
        } else if (p++ == pos) {
            return &args[i];
        }
    }
    return NULL;
}

static const char *want_str(jinja_ctx *c, const jv *v, const char *what) {
    if (!v || v->t != JV_STR)
        jinja_fail(c, SI_ERR_FORMAT, "%s: expected a string argument, got %s", what,
                   v ? jv_type_name(v->t) : "nothing");
    return v->s.s;
}

static bool want_bool(const jv *v, bool dflt) { return v ? jv_truthy(*v) : dflt; }

/* ---- strings --------------------------------------------------------------------------- */

static bool py_space(int32_t cp) {
    return (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

/* The code point at s[i] (U+FFFD for invalid bytes) and its length. */
static int32_t cp_at(const char *s, size_t n, size_t i, size_t *len) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
    if (k <= 0) {
        *len = 1;
        return 0xFFFD;
    }
    *len = (size_t)k;
    return cp;
}

static void put_cp(jbuf *b, int32_t cp) {
    utf8proc_uint8_t tmp[4];
    utf8proc_ssize_t k = utf8proc_encode_char(cp, tmp);
    jbuf_put(b, (const char *)tmp, (size_t)k);
}

static bool in_chars(int32_t cp, const char *chars) {
    size_t n = strlen(chars), k;
    for (size_t i = 0; i < n; i += k)
        if (cp_at(chars, n, i, &k) == cp)
            return true;
    return false;
}

/* str.strip/lstrip/rstrip: chars NULL strips Python whitespace. */
static jv str_strip(jinja_ctx *c, jv s, const char *chars, bool left, bool right) {
    size_t a = 0, b = s.s.n, k;
    while (left && a < b) {
        int32_t cp = cp_at(s.s.s, s.s.n, a, &k);
        if (chars ? !in_chars(cp, chars) : !py_space(cp))
            break;
        a += k;
    }
    while (right && b > a) {
        size_t st = b - 1;
        while (st > a && ((unsigned char)s.s.s[st] & 0xC0) == 0x80)
            st--;
        int32_t cp = cp_at(s.s.s, s.s.n, st, &k);
        if (chars ? !in_chars(cp, chars) : !py_space(cp))
            break;
        b = st;
    }
    return jv_str(c->a, s.s.s + a, b - a);
}

enum { CASE_UPPER, CASE_LOWER, CASE_CAPITALIZE, CASE_TITLE_JINJA, CASE_TITLE_PY };

static jv str_case(jinja_ctx *c, jv s, int mode) {
    jbuf b;
    jbuf_init(&b, c->a, c->lim.max_output);
    bool word_start = true;
    size_t k;
    for (size_t i = 0; i < s.s.n; i += k) {
        int32_t cp = cp_at(s.s.s, s.s.n, i, &k);
        int32_t out;
        switch (mode) {
        case CASE_UPPER: out = utf8proc_toupper(cp); break;
        case CASE_LOWER: out = utf8proc_tolower(cp); break;
        case CASE_CAPITALIZE: out = i == 0 ? utf8proc_totitle(cp) : utf8proc_tolower(cp); break;
        case CASE_TITLE_JINJA: /* words split at whitespace and -({[< */
            out = word_start ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
            word_start = py_space(cp) || (cp < 128 && strchr("-({[<", (int)cp) && cp);
            break;
        default: { /* Python's str.title: a cased letter after an uncased character starts a word */
            bool cased = utf8proc_toupper(cp) != cp || utf8proc_tolower(cp) != cp;
            out = word_start ? utf8proc_totitle(cp) : utf8proc_tolower(cp);
            word_start = !cased;
        }
        }
        put_cp(&b, out);
    }
    return jbuf_value(&b);
}

static jv str_replace(jinja_ctx *c, jv s, jv old, jv new, int64_t count) {
    if (old.t != JV_STR || new.t != JV_STR)
        jinja_fail(c, SI_ERR_FORMAT, "replace: arguments must be strings");
    jbuf b;
    jbuf_init(&b, c->a, c->lim.max_output);
    size_t i = 0;
    int64_t done = 0;
    if (old.s.n == 0) { /* Python inserts new between every code point */
        size_t k;
        for (; i <= s.s.n; i += k) {
            if (count < 0 || done < count) {
                jbuf_put(&b, new.s.s, new.s.n);
                done++;
            }
            if (i == s.s.n)
                break;
            cp_at(s.s.s, s.s.n, i, &k);
            jbuf_put(&b, s.s.s + i, k);
        }
        return jbuf_value(&b);
    }
    while (i < s.s.n) {
        const char *hit = (count < 0 || done < count)
                              ? memmem(s.s.s + i, s.s.n - i, old.s.s, old.s.n) : NULL;
        if (!hit) {
            jbuf_put(&b, s.s.s + i, s.s.n - i);
            break;
        }
        jbuf_put(&b, s.s.s + i, (size_t)(hit - s.s.s) - i);
        jbuf_put(&b, new.s.s, new.s.n);
        i = (size_t)(hit - s.s.s) + old.s.n;
        done++;
    }
    return jbuf_value(&b);
}

static jv str_split(jinja_ctx *c, jv s, const jv *sep, int64_t maxsplit) {
    jv l = jv_list_new(c->a, 0);
    const char *p = s.s.s, *end = s.s.s + s.s.n;
    if (!sep || sep->t == JV_NONE) { /* runs of whitespace, no empty strings */
        size_t k;
        while (p < end) {
            while (p < end && py_space(cp_at(p, (size_t)(end - p), 0, &k)))
                p += k;
            if (p >= end)
                break;
            const char *w = p;
            if (maxsplit >= 0 && (int64_t)l.l->n >= maxsplit) {
                const char *e = end;
                jv rest = str_strip(c, jv_str(c->a, w, (size_t)(e - w)), NULL, false, true);
                jv_list_push(c->a, l.l, rest);
                return l;
            }
            while (p < end && !py_space(cp_at(p, (size_t)(end - p), 0, &k)))
                p += k;
            jv_list_push(c->a, l.l, jv_str(c->a, w, (size_t)(p - w)));
        }
        return l;
    }
    if (sep->t != JV_STR)
        jinja_fail(c, SI_ERR_FORMAT, "split: separator must be a string");
    if (sep->s.n == 0)
        jinja_fail(c, SI_ERR_FORMAT, "empty separator");
    for (;;) {
        const char *hit = (maxsplit < 0 || (int64_t)l.l->n < maxsplit)
                              ? memmem(p, (size_t)(end - p), sep->s.s, sep->s.n) : NULL;
        if (!hit) {
            jv_list_push(c->a, l.l, jv_str(c->a, p, (size_t)(end - p)));
            return l;
        }
        jv_list_push(c->a, l.l, jv_str(c->a, p, (size_t)(hit - p)));
        p = hit + sep->s.n;
    }
}

static bool affix(jv s, jv x, bool start) {
    if (x.t == JV_LIST) {
        for (size_t i = 0; i < x.l->n; i++)
            if (affix(s, x.l->v[i], start))
                return true;
        return false;
    }
    if (x.t != JV_STR || x.s.n > s.s.n)
        return false;
    return memcmp(start ? s.s.s : s.s.s + s.s.n - x.s.n, x.s.s, x.s.n) == 0;
}

static int64_t cp_count(jv s) {
    int64_t k = 0;
    for (size_t i = 0; i < s.s.n; i++)
        k += ((unsigned char)s.s.s[i] & 0xC0) != 0x80;
    return k;
}

/* ---- methods --------------------------------------------------------------------------- */

static const char *const STR_METHODS[] = {"strip", "lstrip", "rstrip", "split", "startswith",
    "endswith", "upper", "lower", "title", "capitalize", "replace", "find", "count", "join",
    "isdigit", "isalpha", "isspace", "splitlines", NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", NULL};

static bool in_list(const char *const *l, const char *name) {
    for (int i = 0; l[i]; i++)
        if (!strcmp(l[i], name))
            return true;
    return false;
}

bool jinja_has_method(jv self, const char *name) {
    if (self.t == JV_STR)
        return in_list(STR_METHODS, name);
    if (self.t == JV_DICT)
        return in_list(DICT_METHODS, name);
    return false;
}

static jv dict_items(jinja_ctx *c, jv d, int which) {
    jv l = jv_list_new(c->a, d.d->n);
    for (size_t i = 0; i < d.d->n; i++) {
        if (which == 1) {
            jv_list_push(c->a, l.l, d.d->k[i]);
        } else if (which == 2) {
            jv_list_push(c->a, l.l, d.d->v[i]);
        } else {
            jv t = jv_list_new(c->a, 2);
            t.l->tuple = true;
            jv_list_push(c->a, t.l, d.d->k[i]);
            jv_list_push(c->a, t.l, d.d->v[i]);
            jv_list_push(c->a, l.l, t);
        }
    }
    return l;
}

static jv join(jinja_ctx *c, jv items, jv sep, const char *attribute) {
    items = jinja_iter_items(c, items);
    jbuf b;
    jbuf_init(&b, c->a, c->lim.max_output);
    for (size_t i = 0; i < items.l->n; i++) {
        if (i)
            jv_write_str(&b, sep);
        jv x = items.l->v[i];
        jv_write_str(&b, attribute ? jinja_getattr(c, x, attribute) : x);
    }
    return jbuf_value(&b);
}

jv jinja_call_method(jinja_ctx *c, jv self, const char *name, const jv *args, const char **names,
                     int n) {
    const jv *a0 = arg(args, names, n, 0, NULL), *a1 = arg(args, names, n, 1, NULL);
    if (self.t == JV_DICT) {
        if (!strcmp(name, "items"))
            return dict_items(c, self, 0);
        if (!strcmp(name, "keys"))
            return dict_items(c, self, 1);
        if (!strcmp(name, "values"))
            return dict_items(c, self, 2);
        if (!strcmp(name, "get")) {
            if (!a0)
                jinja_fail(c, SI_ERR_FORMAT, "get expected at least 1 argument, got 0");
            const jv *v = jv_dict_get(self.d, *a0);
            return v ? *v : a1 ? *a1 : jv_none();
        }
    } else if (self.t == JV_STR) {
        if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
            const char *chars = a0 && a0->t != JV_NONE ? want_str(c, a0, name) : NULL;
            return str_strip(c, self, chars, name[0] != 'r', name[0] != 'l');
        }
        if (!strcmp(name, "split")) {
            const jv *ms = arg(args, names, n, 1, "maxsplit");
            return str_split(c, self, arg(args, names, n, 0, "sep"), ms && ms->t == JV_INT ? ms->i : -1);
        }
        if (!strcmp(name, "splitlines")) {
            jv l = jv_list_new(c->a, 0);
            size_t st = 0;
            for (size_t i = 0; i < self.s.n; i++) {
                if (self.s.s[i] == '\n' || self.s.s[i] == '\r') {
                    jv_list_push(c->a, l.l, jv_str(c->a, self.s.s + st, i - st));
                    if (self.s.s[i] == '\r' && i + 1 < self.s.n && self.s.s[i + 1] == '\n')
                        i++;
                    st = i + 1;
                }
            }
            if (st < self.s.n)
                jv_list_push(c->a, l.l, jv_str(c->a, self.s.s + st, self.s.n - st));
            return l;
        }
        if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
            if (!a0 || (a0->t != JV_STR && a0->t != JV_LIST))
                jinja_fail(c, SI_ERR_FORMAT, "%s: argument must be str or a tuple of str", name);
            return jv_bool(affix(self, *a0, name[0] == 's'));
        }
        if (!strcmp(name, "upper"))
            return str_case(c, self, CASE_UPPER);
        if (!strcmp(name, "lower"))
            return str_case(c, self, CASE_LOWER);
        if (!strcmp(name, "title"))
            return str_case(c, self, CASE_TITLE_PY);
        if (!strcmp(name, "capitalize"))
            return str_case(c, self, CASE_CAPITALIZE);
        if (!strcmp(name, "replace")) {
            if (!a0 || !a1)
                jinja_fail(c, SI_ERR_FORMAT, "replace expected at least 2 arguments");
            const jv *cnt = arg(args, names, n, 2, "count");
            return str_replace(c, self, *a0, *a1, cnt && cnt->t == JV_INT ? cnt->i : -1);
        }
        if (!strcmp(name, "find") || !strcmp(name, "count")) {
            jv sub = jv_cstr(want_str(c, a0, name));
            if (name[0] == 'f') {
                const char *hit = memmem(self.s.s, self.s.n, sub.s.s, sub.s.n);
                return jv_int(hit ? cp_count(jv_str(c->a, self.s.s, (size_t)(hit - self.s.s))) : -1);
            }
            if (!sub.s.n)
                return jv_int(cp_count(self) + 1);
            int64_t k = 0;
            for (const char *p = self.s.s, *e = self.s.s + self.s.n;
                 (p = memmem(p, (size_t)(e - p), sub.s.s, sub.s.n)); p += sub.s.n)
                k++;
            return jv_int(k);
        }
        if (!strcmp(name, "join")) {
            if (!a0)
                jinja_fail(c, SI_ERR_FORMAT, "join expected 1 argument");
            jv items = jinja_iter_items(c, *a0);
            for (size_t i = 0; i < items.l->n; i++)
                if (items.l->v[i].t != JV_STR)
                    jinja_fail(c, SI_ERR_FORMAT, "sequence item %zu: expected str instance, %s found",
                               i, jv_type_name(items.l->v[i].t));
            return join(c, items, self, NULL);
        }
        if (!strcmp(name, "isdigit") || !strcmp(name, "isalpha") || !strcmp(name, "isspace")) {
            if (!self.s.n)
                return jv_bool(false);
            size_t k;
            for (size_t i = 0; i < self.s.n; i += k) {
                int32_t cp = cp_at(self.s.s, self.s.n, i, &k);
                utf8proc_category_t cat = utf8proc_category(cp);
                bool ok = name[2] == 'd' ? cat == UTF8PROC_CATEGORY_ND
                        : name[2] == 'a' ? (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO)
                        : py_space(cp);
                if (!ok)
                    return jv_bool(false);
            }
            return jv_bool(true);
        }
    }
    jinja_fail(c, SI_ERR_FORMAT, "'%s' object has no method '%s'", jv_type_name(self.t), name);
}

/* ---- tests ----------------------------------------------------------------------------- */

static const char *const TESTS[] = {"defined", "undefined", "none", "boolean", "false", "true",
    "integer", "float", "number", "string", "mapping", "iterable", "sequence", "callable", "odd",
    "even", "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=",
    "gt", "greaterthan", ">", "ge", ">=", "in", "sameas", "lower", "upper", "escaped", NULL};

bool jinja_test_exists(const char *name) { return in_list(TESTS, name); }

bool jinja_test(jinja_ctx *c, const char *name, jv x, const jv *args, int n) {
    const jv *a0 = n > 0 ? &args[0] : NULL;
    if (!jinja_test_exists(name))
        jinja_fail(c, SI_ERR_FORMAT, "no test named '%s'", name);
    if (!strcmp(name, "defined"))
        return x.t != JV_UNDEF;
    if (!strcmp(name, "undefined"))
        return x.t == JV_UNDEF;
    if (!strcmp(name, "none"))
        return x.t == JV_NONE;
    if (!strcmp(name, "boolean"))
        return x.t == JV_BOOL;
    if (!strcmp(name, "false"))
        return x.t == JV_BOOL && !x.b;
    if (!strcmp(name, "true"))
        return x.t == JV_BOOL && x.b;
    if (!strcmp(name, "integer"))
        return x.t == JV_INT;
    if (!strcmp(name, "float"))
        return x.t == JV_FLOAT;
    if (!strcmp(name, "number"))
        return x.t == JV_INT || x.t == JV_FLOAT || x.t == JV_BOOL;
    if (!strcmp(name, "string"))
        return x.t == JV_STR;
    if (!strcmp(name, "mapping"))
        return x.t == JV_DICT;
    if (!strcmp(name, "iterable") || !strcmp(name, "sequence"))
        return x.t == JV_STR || x.t == JV_LIST || x.t == JV_DICT || x.t == JV_UNDEF;
    if (!strcmp(name, "callable"))
        return x.t == JV_MACRO || x.t == JV_FUNC || x.t == JV_METHOD;
    if (!strcmp(name, "escaped"))
        return false;
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (x.t != JV_STR)
            return false;
        jv y = str_case(c, x, name[0] == 'l' ? CASE_LOWER : CASE_UPPER);
        return jv_equal(x, y);
    }
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        if (x.t != JV_INT && x.t != JV_BOOL)
            jinja_fail(c, SI_ERR_FORMAT, "test '%s' needs an integer, got %s", name, jv_type_name(x.t));
        int64_t v = x.t == JV_INT ? x.i : x.b;
        if (name[0] == 'o')
            return v % 2 != 0;
        if (name[0] == 'e')
            return v % 2 == 0;
        if (!a0 || a0->t != JV_INT || a0->i == 0)
            jinja_fail(c, SI_ERR_FORMAT, "divisibleby needs a non-zero integer");
        return v % a0->i == 0;
    }
    if (!a0)
        jinja_fail(c, SI_ERR_FORMAT, "test '%s' needs an argument", name);
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "=="))
        return jv_equal(x, *a0);
    if (!strcmp(name, "ne") || !strcmp(name, "!="))
        return !jv_equal(x, *a0);
    if (!strcmp(name, "sameas"))
        return x.t == a0->t && (x.t == JV_NONE || x.t == JV_UNDEF || jv_equal(x, *a0));
    if (!strcmp(name, "in")) {
        if (a0->t == JV_STR)
            return x.t == JV_STR && memmem(a0->s.s, a0->s.n, x.s.s, x.s.n) != NULL;
        jv items = jinja_iter_items(c, *a0);
        if (a0->t == JV_DICT)
            return jv_dict_get(a0->d, x) != NULL;
        for (size_t i = 0; i < items.l->n; i++)
            if (jv_equal(items.l->v[i], x))
                return true;
        return false;
    }
    bool ok;
    int k = jv_compare(x, *a0, &ok);
    if (!ok)
        jinja_fail(c, SI_ERR_FORMAT, "test '%s' cannot compare %s and %s", name, jv_type_name(x.t),
                   jv_type_name(a0->t));
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<"))
        return k < 0;
    if (!strcmp(name, "le") || !strcmp(name, "<="))
        return k <= 0;
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">"))
        return k > 0;
    if (!strcmp(name, "ge") || !strcmp(name, ">="))
        return k >= 0;
    jinja_fail(c, SI_ERR_FORMAT, "no test named '%s'", name);
}

/* ---- filters --------------------------------------------------------------------------- */

static int64_t length_of(jinja_ctx *c, jv x) {
    switch (x.t) {
    case JV_STR: return cp_count(x);
    case JV_LIST: return (int64_t)x.l->n;
    case JV_DICT:
    case JV_NS: return (int64_t)x.d->n;
    case JV_UNDEF: return 0;
    default: jinja_fail(c, SI_ERR_FORMAT, "object of type '%s' has no len()", jv_type_name(x.t));
    }
}

/* select/reject/selectattr/rejectattr: keep items whose test (or truthiness) is want. */
static jv select_items(jinja_ctx *c, jv seq, const char *attribute, const jv *args, int n, bool want) {
    jv items = jinja_iter_items(c, seq);
    jv out = jv_list_new(c->a, items.l->n);
    const char *test = n > 0 ? want_str(c, &args[0], "select test") : NULL;
    if (test && !jinja_test_exists(test))
        jinja_fail(c, SI_ERR_FORMAT, "no test named '%s'", test);
    for (size_t i = 0; i < items.l->n; i++) {
        jv x = items.l->v[i];
        jv v = attribute ? jinja_getattr(c, x, attribute) : x;
        bool r = test ? jinja_test(c, test, v, args + 1, n - 1) : jv_truthy(v);
        if (r == want)
            jv_list_push(c->a, out.l, x);
    }
    return out;
}

static double to_float(jv x, double dflt) {
    switch (x.t) {
    case JV_INT: return (double)x.i;
    case JV_FLOAT: return x.f;
    case JV_BOOL: return x.b;
    case JV_STR: {
        char *end;
        double v = strtod(x.s.s, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        return end != x.s.s && !*end ? v : dflt;
    }
    default: return dflt;
    }
}

static jv html_escape(jinja_ctx *c, jv s) {
    jbuf b;
    jbuf_init(&b, c->a, c->lim.max_output);
    for (size_t i = 0; i < s.s.n; i++) {
        switch (s.s.s[i]) {
        case '&': jbuf_puts(&b, "&amp;"); break;
        case '<': jbuf_puts(&b, "&lt;"); break;
        case '>': jbuf_puts(&b, "&gt;"); break;
        case '"': jbuf_puts(&b, "&#34;"); break;
        case '\'': jbuf_puts(&b, "&#39;"); break;
        default: jbuf_putc(&b, s.s.s[i]);
        }
    }
    return jbuf_value(&b);
}

static jv sort_items(jinja_ctx *c, jv x, bool reverse, const char *attribute) {
    jv items = jinja_iter_items(c, x);
    jv out = jv_list_new(c->a, items.l->n);
    for (size_t i = 0; i < items.l->n; i++) {
        jv v = items.l->v[i];
        size_t j = out.l->n;
        jv_list_push(c->a, out.l, v);
        jv kv = attribute ? jinja_getattr(c, v, attribute) : v;
        for (; j > 0; j--) { /* stable insertion sort */
            jv prev = out.l->v[j - 1];
            jv kp = attribute ? jinja_getattr(c, prev, attribute) : prev;
            bool ok;
            int k = jv_compare(kp, kv, &ok);
            if (!ok)
                jinja_fail(c, SI_ERR_FORMAT, "sort: cannot compare %s and %s",
                           jv_type_name(kp.t), jv_type_name(kv.t));
            if (reverse ? k >= 0 : k <= 0)
                break;
            out.l->v[j] = prev;
        }
        out.l->v[j] = v;
    }
    return out;
}

jv jinja_filter(jinja_ctx *c, const char *name, jv x, const jv *args, const char **names, int n) {
    const jv *a0 = arg(args, names, n, 0, NULL);
    if (!strcmp(name, "safe"))
        return x;
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        const jv *dv = arg(args, names, n, 0, "default_value");
        bool boolean = want_bool(arg(args, names, n, 1, "boolean"), false);
        if (x.t == JV_UNDEF || (boolean && !jv_truthy(x)))
            return dv ? *dv : jv_cstr("");
        return x;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count"))
        return jv_int(length_of(c, x));
    if (!strcmp(name, "tojson")) {
        const jv *ind = arg(args, names, n, 0, "indent");
        const jv *sk = arg(args, names, n, 99, "sort_keys");
        jbuf b;
        jbuf_init(&b, c->a, c->lim.max_output);
        int indent = ind && ind->t == JV_INT ? (int)(ind->i < 0 ? 0 : ind->i > 64 ? 64 : ind->i) : -1;
        jv_write_json(&b, x, indent, want_bool(sk, false), c->err);
        return jbuf_value(&b);
    }
    if (!strcmp(name, "items")) {
        if (x.t == JV_UNDEF)
            return jv_list_new(c->a, 0);
        if (x.t != JV_DICT)
            jinja_fail(c, SI_ERR_FORMAT, "items: can only get item pairs from a mapping");
        return dict_items(c, x, 0);
    }
    if (!strcmp(name, "list"))
        return jinja_iter_items(c, x);
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr")) {
        const char *attribute = want_str(c, a0, name);
        return select_items(c, x, attribute, args + 1, n - 1, name[0] == 's');
    }
    if (!strcmp(name, "select") || !strcmp(name, "reject"))
        return select_items(c, x, NULL, args, n, name[0] == 's');
    if (!strcmp(name, "map")) {
        jv items = jinja_iter_items(c, x);
        jv out = jv_list_new(c->a, items.l->n);
        const jv *attr = arg(args, names, n, 99, "attribute");
        const jv *dflt = arg(args, names, n, 99, "default");
        for (size_t i = 0; i < items.l->n; i++) {
            jv v;
            if (attr) {
                v = jinja_getattr(c, items.l->v[i], want_str(c, attr, "map"));
                if (v.t == JV_UNDEF && dflt)
                    v = *dflt;
            } else {
                const char *f = want_str(c, a0, "map");
                v = jinja_filter(c, f, items.l->v[i], args + 1, names ? names + 1 : NULL, n - 1);
            }
            jv_list_push(c->a, out.l, v);
        }
        return out;
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        jv items = jinja_iter_items(c, x);
        if (!items.l->n)
            return jv_undef(NULL);
        return items.l->v[name[0] == 'f' ? 0 : items.l->n - 1];
    }
    if (!strcmp(name, "reverse")) {
        jv items = jinja_iter_items(c, x);
        jv out = jv_list_new(c->a, items.l->n);
        for (size_t i = items.l->n; i-- > 0;)
            jv_list_push(c->a, out.l, items.l->v[i]);
        if (x.t != JV_STR)
            return out;
        return join(c, out, jv_cstr(""), NULL);
    }
    if (!strcmp(name, "sort"))
        return sort_items(c, x, want_bool(arg(args, names, n, 0, "reverse"), false),
                          arg(args, names, n, 2, "attribute")
                              ? want_str(c, arg(args, names, n, 2, "attribute"), "sort") : NULL);
    if (!strcmp(name, "unique")) {
        jv items = jinja_iter_items(c, x);
        jv out = jv_list_new(c->a, items.l->n);
        for (size_t i = 0; i < items.l->n; i++) {
            bool seen = false;
            for (size_t j = 0; j < out.l->n && !seen; j++)
                seen = jv_equal(out.l->v[j], items.l->v[i]);
            if (!seen)
                jv_list_push(c->a, out.l, items.l->v[i]);
        }
        return out;
    }
    if (!strcmp(name, "join")) {
        const jv *sep = arg(args, names, n, 0, "d");
        const jv *attr = arg(args, names, n, 1, "attribute");
        return join(c, x, sep ? *sep : jv_cstr(""), attr ? want_str(c, attr, "join") : NULL);
    }
    if (!strcmp(name, "int")) {
        const jv *dv = arg(args, names, n, 0, "default");
        jv dflt = dv ? *dv : jv_int(0);
        if (x.t == JV_INT)
            return x;
        if (x.t == JV_BOOL)
            return jv_int(x.b);
        if (x.t == JV_STR) {
            char *end;
            long long v = strtoll(x.s.s, &end, 10);
            while (*end == ' ' || *end == '\t' || *end == '\n')
                end++;
            if (end != x.s.s && !*end)
                return jv_int(v);
        }
        double f = to_float(x, NAN);
        if (isnan(f) || f >= 9.2e18 || f <= -9.2e18)
            return dflt;
        return jv_int((int64_t)f);
    }
    if (!strcmp(name, "float")) {
        const jv *dv = arg(args, names, n, 0, "default");
        double f = to_float(x, NAN);
        if (isnan(f) && !(x.t == JV_FLOAT))
            return dv ? *dv : jv_float(0.0);
        return jv_float(f);
    }
    if (!strcmp(name, "abs")) {
        if (x.t == JV_INT)
            return x.i == INT64_MIN ? jv_float(-(double)x.i) : jv_int(x.i < 0 ? -x.i : x.i);
        if (x.t == JV_BOOL)
            return jv_int(x.b);
        if (x.t == JV_FLOAT)
            return jv_float(fabs(x.f));
        jinja_fail(c, SI_ERR_FORMAT, "bad operand type for abs(): '%s'", jv_type_name(x.t));
    }
    if (!strcmp(name, "round")) {
        const jv *pv = arg(args, names, n, 0, "precision");
        const jv *mv = arg(args, names, n, 1, "method");
        int64_t prec = pv && pv->t == JV_INT ? pv->i : 0;
        const char *method = mv ? want_str(c, mv, "round") : "common";
        if (x.t != JV_INT && x.t != JV_FLOAT && x.t != JV_BOOL)
            jinja_fail(c, SI_ERR_FORMAT, "round: expected a number, got %s", jv_type_name(x.t));
        if (prec < -300 || prec > 300)
            jinja_fail(c, SI_ERR_FORMAT, "round: precision out of range");
        double v = x.t == JV_FLOAT ? x.f : x.t == JV_INT ? (double)x.i : x.b, m = pow(10.0, (double)prec);
        if (!strcmp(method, "common")) {
            if (x.t != JV_FLOAT)
                return x.t == JV_BOOL ? jv_int(x.b) : x;
            return jv_float(nearbyint(v * m) / m); /* Python rounds half to even */
        }
        if (!strcmp(method, "ceil"))
            return jv_float(ceil(v * m) / m);
        if (!strcmp(method, "floor"))
            return jv_float(floor(v * m) / m);
        jinja_fail(c, SI_ERR_FORMAT, "method must be common, ceil or floor");
    }
    if (!strcmp(name, "sum")) {
        jv items = jinja_iter_items(c, x);
        const jv *attr = arg(args, names, n, 0, "attribute");
        const jv *start = arg(args, names, n, 1, "start");
        jv acc = start ? *start : jv_int(0);
        for (size_t i = 0; i < items.l->n; i++) {
            jv v = attr ? jinja_getattr(c, items.l->v[i], want_str(c, attr, "sum")) : items.l->v[i];
            if (acc.t == JV_INT && v.t == JV_INT && !__builtin_add_overflow(acc.i, v.i, &acc.i))
                continue;
            if ((acc.t != JV_INT && acc.t != JV_FLOAT) || (v.t != JV_INT && v.t != JV_FLOAT))
                jinja_fail(c, SI_ERR_FORMAT, "sum: unsupported operand types");
            acc = jv_float(to_float(acc, 0) + to_float(v, 0));
        }
        return acc;
    }
    if (!strcmp(name, "min") || !strcmp(name, "max")) {
        jv items = jinja_iter_items(c, x);
        if (!items.l->n)
            return jv_undef(NULL);
        jv best = items.l->v[0];
        for (size_t i = 1; i < items.l->n; i++) {
            bool ok;
            int k = jv_compare(items.l->v[i], best, &ok);
            if (!ok)
                jinja_fail(c, SI_ERR_FORMAT, "%s: values are not comparable", name);
            if (name[1] == 'i' ? k < 0 : k > 0)
                best = items.l->v[i];
        }
        return best;
    }
    /* the rest work on str(x) */
    jv s = jv_to_str(c->a, x);
    if (!strcmp(name, "string"))
        return s;
    if (!strcmp(name, "trim")) {
        const jv *chars = arg(args, names, n, 0, "chars");
        return str_strip(c, s, chars && chars->t != JV_NONE ? want_str(c, chars, "trim") : NULL,
                         true, true);
    }
    if (!strcmp(name, "upper"))
        return str_case(c, s, CASE_UPPER);
    if (!strcmp(name, "lower"))
        return str_case(c, s, CASE_LOWER);
    if (!strcmp(name, "capitalize"))
        return str_case(c, s, CASE_CAPITALIZE);
    if (!strcmp(name, "title"))
        return str_case(c, s, CASE_TITLE_JINJA);
    if (!strcmp(name, "replace")) {
        const jv *a1 = arg(args, names, n, 1, "new"), *cnt = arg(args, names, n, 2, "count");
        const jv *old = arg(args, names, n, 0, "old");
        if (!old || !a1)
            jinja_fail(c, SI_ERR_FORMAT, "replace needs the old and new strings");
        return str_replace(c, s, *old, *a1, cnt && cnt->t == JV_INT ? cnt->i : -1);
    }
    if (!strcmp(name, "escape") || !strcmp(name, "e"))
        return html_escape(c, s);
    if (!strcmp(name, "wordcount"))
        return jv_int((int64_t)str_split(c, s, NULL, -1).l->n);
    if (!strcmp(name, "indent")) {
        const jv *w = arg(args, names, n, 0, "width");
        bool first = want_bool(arg(args, names, n, 1, "first"), false);
        bool blank = want_bool(arg(args, names, n, 2, "blank"), false);
        int64_t width = w && w->t == JV_INT ? w->i : 4;
        if (width < 0 || width > 1000)
            jinja_fail(c, SI_ERR_FORMAT, "indent: width out of range");
        jbuf b;
        jbuf_init(&b, c->a, c->lim.max_output);
        bool line_start = first;
        for (size_t i = 0; i <= s.s.n; i++) {
            if (line_start && i < s.s.n && (blank || s.s.s[i] != '\n'))
                for (int64_t k = 0; k < width; k++)
                    jbuf_putc(&b, ' ');
            line_start = false;
            if (i == s.s.n)
                break;
            jbuf_putc(&b, s.s.s[i]);
            line_start = s.s.s[i] == '\n';
        }
        return jbuf_value(&b);
    }
    jinja_fail(c, SI_ERR_FORMAT, "no filter named '%s'", name);
}

/* ---- global functions ------------------------------------------------------------------ */

jv jinja_call_func(jinja_ctx *c, const char *name, const jv *args, const char **names, int n) {
    if (!strcmp(name, "raise_exception")) {
        jv msg = n > 0 ? jv_to_str(c->a, args[0]) : jv_cstr("");
        jinja_fail(c, SI_ERR_INVALID_ARG, "%s", msg.s.s);
    }
    if (!strcmp(name, "range")) {
        int64_t v[3] = {0, 0, 1};
        int npos = 0;
        for (int i = 0; i < n; i++) {
            if ((names && names[i]) || npos >= 3 || (args[i].t != JV_INT && args[i].t != JV_BOOL))
                jinja_fail(c, SI_ERR_FORMAT, "range() takes 1 to 3 integer arguments");
            v[npos++] = args[i].t == JV_INT ? args[i].i : args[i].b;
        }
        if (npos == 0)
            jinja_fail(c, SI_ERR_FORMAT, "range expected at least 1 argument, got 0");
        if (npos == 1) {
            v[1] = v[0];
            v[0] = 0;
        }
        if (v[2] == 0)
            jinja_fail(c, SI_ERR_FORMAT, "range() arg 3 must not be zero");
        double count = ceil(((double)v[1] - (double)v[0]) / (double)v[2]);
        if (count > SANDBOX_MAX_RANGE)
            jinja_fail(c, SI_ERR_UNSUPPORTED, "Range too big. The sandbox blocks ranges larger than "
                       "MAX_RANGE (%d).", SANDBOX_MAX_RANGE);
        jv l = jv_list_new(c->a, count > 0 ? (size_t)count : 0);
        for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2])
            jv_list_push(c->a, l.l, jv_int(i));
        return l;
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        jv d = jv_dict_new(c->a);
        for (int i = 0; i < n; i++) {
            if (names && names[i]) {
                jv_dict_set(c->a, d.d, jv_cstr(names[i]), args[i]);
            } else if (args[i].t == JV_DICT || args[i].t == JV_NS) {
                for (size_t k = 0; k < args[i].d->n; k++)
                    jv_dict_set(c->a, d.d, args[i].d->k[k], args[i].d->v[k]);
            } else {
                jinja_fail(c, SI_ERR_FORMAT, "%s() positional arguments must be mappings", name);
            }
        }
        if (name[0] == 'n')
            d.t = JV_NS;
        return d;
    }
    if (!strcmp(name, "strftime_now")) {
        const char *fmt = n > 0 ? want_str(c, &args[0], "strftime_now") : "";
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char buf[512];
        if (strlen(fmt) > 200)
            jinja_fail(c, SI_ERR_FORMAT, "strftime_now: format too long");
        size_t k = strftime(buf, sizeof buf, fmt, &tm);
        return jv_str(c->a, buf, k);
    }
    jinja_fail(c, SI_ERR_FORMAT, "'%s' is not callable", name);
}
