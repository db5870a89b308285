/* jinja_eval.c — executes a parsed template: scopes, statements and expressions.
 *
 * Scoping follows Jinja: a for loop body is its own scope (a `set` inside does not leak out,
 * which is why templates use namespace()), if blocks are not, macros run in a scope whose parent
 * is the one they were defined in. Undefined names give Jinja's default Undefined: printed as
 * "", falsy, iterable as empty; arithmetic on it, or an attribute of it, is an error naming the
 * variable. Every node evaluated counts against a step limit and every nested evaluation against
 * a depth limit, so hostile templates end with an error instead of looping or overflowing. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja.h"

struct jscope {
    jscope *parent;
    const char **names;
    jv *vals;
    int n, cap;
};

_Noreturn void jinja_fail(jinja_ctx *c, si_status st, const char *fmt, ...) {
    jinja_err *e = c->err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->status = st;
    e->line = c->at ? c->at->line : 0;
    e->col = c->at ? c->at->col : 0;
    longjmp(e->jb, 1);
}

jscope *jinja_scope_new(jinja_ctx *c, jscope *parent) {
    jscope *s = jinja_alloc(c->a, sizeof *s);
    s->parent = parent;
    return s;
}

void jinja_scope_set(jinja_ctx *c, jscope *s, const char *name, jv v) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) {
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        const char **nn = jinja_alloc(c->a, (size_t)cap * sizeof *nn);
        jv *nv = jinja_alloc(c->a, (size_t)cap * sizeof *nv);
        if (s->n) {
            memcpy(nn, s->names, (size_t)s->n * sizeof *nn);
            memcpy(nv, s->vals, (size_t)s->n * sizeof *nv);
        }
        s->names = nn;
        s->vals = nv;
        s->cap = cap;
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
}

static jv lookup(jinja_ctx *c, const char *name) {
    for (jscope *s = c->scope; s; s = s->parent)
        for (int i = s->n - 1; i >= 0; i--)
            if (!strcmp(s->names[i], name))
                return s->vals[i];
    return jv_undef(jinja_undef_msg(c, "'%s' is undefined", name));
}

static void enter(jinja_ctx *c, const jnode *n) {
    c->at = n;
    if (++c->steps > c->lim.max_steps)
        jinja_fail(c, SI_ERR_UNSUPPORTED, "template exceeded its step limit (%llu steps)",
                   (unsigned long long)c->lim.max_steps);
    if (++c->depth > c->lim.max_depth)
        jinja_fail(c, SI_ERR_UNSUPPORTED, "template exceeded its recursion limit (depth %d)",
                   c->lim.max_depth);
}

static jv eval(jinja_ctx *c, const jnode *n);
static void exec_body(jinja_ctx *c, jnode *const *body, int n, jbuf *out);

const char *jinja_undef_msg(jinja_ctx *c, const char *fmt, const char *arg) {
    size_t n = strlen(fmt) + strlen(arg) + 1;
    if (n > 300)
        n = 300;
    char *s = jinja_alloc(c->a, n);
    snprintf(s, n, fmt, arg);
    return s;
}

/* Jinja's hint for a missing key or index: "'dict object' has no attribute 'x'". */
static jv missing(jinja_ctx *c, jv obj, jv key) {
    char buf[200];
    jbuf b;
    jbuf_init(&b, c->a, 200);
    if (key.t == JV_STR && key.s.n < 100)
        jv_write_repr(&b, key);
    else if (key.t == JV_INT)
        jv_write_repr(&b, key);
    jv k = jbuf_value(&b);
    if (key.t == JV_STR)
        snprintf(buf, sizeof buf, "'%s object' has no attribute %s", jv_type_name(obj.t), k.s.s);
    else
        snprintf(buf, sizeof buf, "%s object has no element %s", jv_type_name(obj.t), k.s.s);
    return jv_undef(jinja_strdup(c->a, buf, strlen(buf)));
}

_Noreturn static void undefined_error(jinja_ctx *c, jv u) {
    jinja_fail(c, SI_ERR_FORMAT, "%s", u.s.s ? u.s.s : "a value is undefined");
}

/* ---- lookups --------------------------------------------------------------------------- */

static bool utf8_cont(char ch) { return ((unsigned char)ch & 0xC0) == 0x80; }

/* Code points of s (Python indexes and slices str by code point). */
static size_t utf8_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += !utf8_cont(s[i]);
    return k;
}

/* Byte offsets of each code point start, plus n at the end. */
size_t *jinja_utf8_offsets(jinja_ctx *c, const char *s, size_t n, size_t *count) {
    size_t k = utf8_len(s, n);
    size_t *off = jinja_alloc(c->a, (k + 1) * sizeof *off);
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (!utf8_cont(s[i]))
            off[j++] = i;
    off[k] = n;
    *count = k;
    return off;
}

jv jinja_getitem(jinja_ctx *c, jv obj, jv key) {
    switch (obj.t) {
    case JV_UNDEF: undefined_error(c, obj);
    case JV_DICT:
    case JV_NS: {
        const jv *v = jv_dict_get(obj.d, key);
        if (v)
            return *v;
        if (key.t == JV_STR && jinja_has_method(obj, key.s.s))
            return jinja_getattr(c, obj, key.s.s);
        return missing(c, obj, key);
    }
    case JV_LIST:
    case JV_STR: {
        if (key.t == JV_STR && jinja_has_method(obj, key.s.s))
            return jinja_getattr(c, obj, key.s.s);
        if (key.t != JV_INT && key.t != JV_BOOL)
            return missing(c, obj, key);
        int64_t i = key.t == JV_INT ? key.i : key.b;
        if (obj.t == JV_LIST) {
            int64_t n = (int64_t)obj.l->n;
            if (i < 0)
                i += n;
            return i >= 0 && i < n ? obj.l->v[i] : missing(c, obj, key);
        }
        size_t cnt;
        size_t *off = jinja_utf8_offsets(c, obj.s.s, obj.s.n, &cnt);
        if (i < 0)
            i += (int64_t)cnt;
        if (i < 0 || i >= (int64_t)cnt)
            return missing(c, obj, key);
        return jv_str(c->a, obj.s.s + off[i], off[i + 1] - off[i]);
    }
    default: return missing(c, obj, key);
    }
}

jv jinja_getattr(jinja_ctx *c, jv obj, const char *name) {
    if (obj.t == JV_UNDEF)
        undefined_error(c, obj);
    if (jinja_has_method(obj, name)) {
        jv *self = jinja_alloc(c->a, sizeof *self);
        *self = obj;
        return (jv){.t = JV_METHOD, .m = {name, self}};
    }
    if (obj.t == JV_DICT || obj.t == JV_NS) {
        const jv *v = jv_dict_gets(obj.d, name);
        if (v)
            return *v;
    }
    return missing(c, obj, jv_cstr(name));
}

/* Python slice semantics on a sequence of length n. */
static void slice_indices(jinja_ctx *c, const jnode *n, int64_t len, int64_t *start, int64_t *stop,
                          int64_t *step) {
    jv v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = n->args[i] ? eval(c, n->args[i]) : jv_none();
        if (v[i].t != JV_NONE && v[i].t != JV_INT && v[i].t != JV_BOOL)
            jinja_fail(c, SI_ERR_FORMAT, "slice indices must be integers or None");
        if (v[i].t == JV_BOOL)
            v[i] = jv_int(v[i].b);
    }
    *step = v[2].t == JV_NONE ? 1 : v[2].i;
    if (*step == 0)
        jinja_fail(c, SI_ERR_FORMAT, "slice step cannot be zero");
    int64_t lo = *step < 0 ? -1 : 0, hi = *step < 0 ? len - 1 : len;
    for (int k = 0; k < 2; k++) {
        int64_t *dst = k ? stop : start;
        if (v[k].t == JV_NONE) {
            *dst = (*step < 0) == (k == 0) ? hi : lo;
            continue;
        }
        int64_t x = v[k].i;
        if (x < 0) {
            x += len;
            if (x < lo)
                x = lo;
        } else if (x > hi) {
            x = hi;
        }
        *dst = x;
    }
}

static jv eval_slice(jinja_ctx *c, const jnode *n) {
    jv obj = eval(c, n->a);
    if (obj.t == JV_UNDEF)
        undefined_error(c, obj);
    size_t cnt = 0, *off = NULL;
    if (obj.t == JV_LIST)
        cnt = obj.l->n;
    else if (obj.t == JV_STR)
        off = jinja_utf8_offsets(c, obj.s.s, obj.s.n, &cnt);
    else
        jinja_fail(c, SI_ERR_FORMAT, "'%s' object is not subscriptable", jv_type_name(obj.t));
    int64_t start, stop, step;
    slice_indices(c, n, (int64_t)cnt, &start, &stop, &step);
    c->at = n;
    if (obj.t == JV_LIST) {
        jv r = jv_list_new(c->a, 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            jv_list_push(c->a, r.l, obj.l->v[i]);
        r.l->tuple = obj.l->tuple;
        return r;
    }
    jbuf b;
    jbuf_init(&b, c->a, c->lim.max_output);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        jbuf_put(&b, obj.s.s + off[i], off[i + 1] - off[i]);
    return jbuf_value(&b);
}

/* ---- operators ------------------------------------------------------------------------- */

static bool is_num(jv x) { return x.t == JV_INT || x.t == JV_FLOAT || x.t == JV_BOOL; }
static double num(jv x) { return x.t == JV_FLOAT ? x.f : x.t == JV_INT ? (double)x.i : x.b; }
static int64_t ival(jv x) { return x.t == JV_INT ? x.i : x.b; }

_Noreturn static void type_error(jinja_ctx *c, const char *op, jv a, jv b) {
    if (a.t == JV_UNDEF)
        undefined_error(c, a);
    if (b.t == JV_UNDEF)
        undefined_error(c, b);
    jinja_fail(c, SI_ERR_FORMAT, "unsupported operand type(s) for %s: '%s' and '%s'", op,
               jv_type_name(a.t), jv_type_name(b.t));
}

static bool contains(jinja_ctx *c, jv hay, jv needle) {
    switch (hay.t) {
    case JV_STR:
        if (needle.t != JV_STR)
            jinja_fail(c, SI_ERR_FORMAT, "'in <string>' requires string as left operand, not %s",
                       jv_type_name(needle.t));
        return needle.s.n == 0 || memmem(hay.s.s, hay.s.n, needle.s.s, needle.s.n) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < hay.l->n; i++)
            if (jv_equal(hay.l->v[i], needle))
                return true;
        return false;
    case JV_DICT:
    case JV_NS: return jv_dict_get(hay.d, needle) != NULL;
    case JV_UNDEF: return false;
    default:
        jinja_fail(c, SI_ERR_FORMAT, "argument of type '%s' is not iterable", jv_type_name(hay.t));
    }
}

static jv repeat(jinja_ctx *c, jv s, int64_t k) {
    if (k <= 0)
        return s.t == JV_STR ? jv_cstr("") : jv_list_new(c->a, 0);
    if (s.t == JV_STR) {
        if (s.s.n && (uint64_t)k > c->lim.max_output / s.s.n)
            jinja_fail(c, SI_ERR_UNSUPPORTED, "string repetition exceeds the output limit");
        jbuf b;
        jbuf_init(&b, c->a, c->lim.max_output);
        for (int64_t i = 0; i < k; i++)
            jbuf_put(&b, s.s.s, s.s.n);
        return jbuf_value(&b);
    }
    if (s.l->n && (uint64_t)k > 1000000 / s.l->n)
        jinja_fail(c, SI_ERR_UNSUPPORTED, "list repetition too large");
    jv r = jv_list_new(c->a, s.l->n * (size_t)k);
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < s.l->n; j++)
            jv_list_push(c->a, r.l, s.l->v[j]);
    return r;
}

static jv binop(jinja_ctx *c, int op, jv a, jv b) {
    bool ok;
    int64_t r;
    switch (op) {
    case JOP_EQ: return jv_bool(jv_equal(a, b));
    case JOP_NE: return jv_bool(!jv_equal(a, b));
    case JOP_IN: return jv_bool(contains(c, b, a));
    case JOP_NOTIN: return jv_bool(!contains(c, b, a));
    case JOP_LT:
    case JOP_LE:
    case JOP_GT:
    case JOP_GE: {
        int k = jv_compare(a, b, &ok);
        if (!ok)
            type_error(c, op == JOP_LT ? "<" : op == JOP_LE ? "<=" : op == JOP_GT ? ">" : ">=", a, b);
        return jv_bool(op == JOP_LT ? k < 0 : op == JOP_LE ? k <= 0 : op == JOP_GT ? k > 0 : k >= 0);
    }
    case JOP_CONCAT: {
        jbuf buf;
        jbuf_init(&buf, c->a, c->lim.max_output);
        jv_write_str(&buf, a);
        jv_write_str(&buf, b);
        return jbuf_value(&buf);
    }
    case JOP_ADD:
        if (a.t == JV_STR && b.t == JV_STR) {
            jbuf buf;
            jbuf_init(&buf, c->a, c->lim.max_output);
            jbuf_put(&buf, a.s.s, a.s.n);
            jbuf_put(&buf, b.s.s, b.s.n);
            return jbuf_value(&buf);
        }
        if (a.t == JV_LIST && b.t == JV_LIST) {
            jv l = jv_list_new(c->a, a.l->n + b.l->n);
            for (size_t i = 0; i < a.l->n; i++)
                jv_list_push(c->a, l.l, a.l->v[i]);
            for (size_t i = 0; i < b.l->n; i++)
                jv_list_push(c->a, l.l, b.l->v[i]);
            return l;
        }
        if (!is_num(a) || !is_num(b))
            type_error(c, "+", a, b);
        if (a.t != JV_FLOAT && b.t != JV_FLOAT && !__builtin_add_overflow(ival(a), ival(b), &r))
            return jv_int(r);
        return jv_float(num(a) + num(b));
    case JOP_SUB:
        if (!is_num(a) || !is_num(b))
            type_error(c, "-", a, b);
        if (a.t != JV_FLOAT && b.t != JV_FLOAT && !__builtin_sub_overflow(ival(a), ival(b), &r))
            return jv_int(r);
        return jv_float(num(a) - num(b));
    case JOP_MUL:
        if ((a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL))
            return repeat(c, a, ival(b));
        if ((b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL))
            return repeat(c, b, ival(a));
        if (!is_num(a) || !is_num(b))
            type_error(c, "*", a, b);
        if (a.t != JV_FLOAT && b.t != JV_FLOAT && !__builtin_mul_overflow(ival(a), ival(b), &r))
            return jv_int(r);
        return jv_float(num(a) * num(b));
    case JOP_DIV:
        if (!is_num(a) || !is_num(b))
            type_error(c, "/", a, b);
        if (num(b) == 0)
            jinja_fail(c, SI_ERR_FORMAT, "division by zero");
        return jv_float(num(a) / num(b));
    case JOP_FLOORDIV:
    case JOP_MOD:
        if (!is_num(a) || !is_num(b))
            type_error(c, op == JOP_MOD ? "%" : "//", a, b);
        if (num(b) == 0)
            jinja_fail(c, SI_ERR_FORMAT, "integer division or modulo by zero");
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
            int64_t x = ival(a), y = ival(b);
            if (x == INT64_MIN && y == -1)
                return op == JOP_MOD ? jv_int(0) : jv_float(-(double)INT64_MIN);
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) { /* Python floors */
                q--;
                m += y;
            }
            return jv_int(op == JOP_MOD ? m : q);
        } else {
            double x = num(a), y = num(b), m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0)))
                m += y;
            return jv_float(op == JOP_MOD ? m : floor((x - m) / y + 0.5));
        }
    case JOP_POW:
        if (!is_num(a) || !is_num(b))
            type_error(c, "**", a, b);
        if (a.t != JV_FLOAT && b.t != JV_FLOAT && ival(b) >= 0) {
            int64_t base = ival(a), e = ival(b), acc = 1;
            bool over = false;
            for (int64_t i = 0; i < e && !over; i++) {
                over = __builtin_mul_overflow(acc, base, &acc);
                if (base == 0 || base == 1 || (base == -1 && i > 1)) {
                    if (base == -1)
                        acc = (e % 2) ? -1 : 1;
                    break;
                }
            }
            if (!over)
                return jv_int(acc);
        }
        return jv_float(pow(num(a), num(b)));
    }
    jinja_fail(c, SI_ERR_INTERNAL, "unknown operator %d", op);
}

/* ---- calls ----------------------------------------------------------------------------- */

static jv call_macro(jinja_ctx *c, jv m, const jv *args, const char **names, int n) {
    const jnode *def = m.mac.node;
    jscope *saved = c->scope;
    jscope *s = jinja_scope_new(c, m.mac.scope);
    int pos = 0;
    for (int i = 0; i < n; i++) {
        if (names && names[i]) {
            int k = 0;
            while (k < def->n_args && strcmp(def->argnames[k], names[i]))
                k++;
            if (k == def->n_args)
                jinja_fail(c, SI_ERR_FORMAT, "macro '%s' takes no keyword argument '%s'",
                           def->name, names[i]);
            jinja_scope_set(c, s, names[i], args[i]);
        } else {
            if (pos >= def->n_args)
                jinja_fail(c, SI_ERR_FORMAT, "macro '%s' takes not more than %d argument(s)",
                           def->name, def->n_args);
            jinja_scope_set(c, s, def->argnames[pos++], args[i]);
        }
    }
    /* defaults for the parameters not given, evaluated in the macro's scope */
    c->scope = s;
    for (int k = 0; k < def->n_args; k++) {
        bool given = false;
        for (int i = 0; i < s->n; i++)
            given |= !strcmp(s->names[i], def->argnames[k]);
        if (!given)
            jinja_scope_set(c, s, def->argnames[k],
                            def->args[k] ? eval(c, def->args[k])
                                         : jv_undef(jinja_undef_msg(c, "'%s' is undefined", def->argnames[k])));
    }
    jbuf out;
    jbuf_init(&out, c->a, c->lim.max_output);
    int saved_ctl = c->loop_ctl;
    exec_body(c, def->body, def->n_body, &out);
    c->loop_ctl = saved_ctl;
    c->scope = saved;
    return jbuf_value(&out);
}

jv jinja_call_value(jinja_ctx *c, jv f, const jv *args, const char **names, int n) {
    switch (f.t) {
    case JV_MACRO: return call_macro(c, f, args, names, n);
    case JV_FUNC: return jinja_call_func(c, f.s.s, args, names, n);
    case JV_METHOD: return jinja_call_method(c, *f.m.self, f.m.name, args, names, n);
    case JV_UNDEF: undefined_error(c, f);
    default: jinja_fail(c, SI_ERR_FORMAT, "'%s' object is not callable", jv_type_name(f.t));
    }
}

static jv *eval_args(jinja_ctx *c, const jnode *n) {
    jv *args = jinja_alloc(c->a, (size_t)(n->n_args + 1) * sizeof *args);
    for (int i = 0; i < n->n_args; i++)
        args[i] = eval(c, n->args[i]);
    c->at = n;
    return args;
}

/* ---- expressions ----------------------------------------------------------------------- */

static jv eval_inner(jinja_ctx *c, const jnode *n) {
    switch (n->kind) {
    case JN_LIT: return n->lit;
    case JN_NAME: return lookup(c, n->name);
    case JN_ATTR: {
        jv obj = eval(c, n->a);
        c->at = n;
        return jinja_getattr(c, obj, n->name);
    }
    case JN_INDEX: {
        jv obj = eval(c, n->a), key = eval(c, n->b);
        c->at = n;
        return jinja_getitem(c, obj, key);
    }
    case JN_SLICE: return eval_slice(c, n);
    case JN_CALL: {
        jv f = eval(c, n->a);
        jv *args = eval_args(c, n);
        return jinja_call_value(c, f, args, n->argnames, n->n_args);
    }
    case JN_FILTER: {
        jv x = eval(c, n->a);
        jv *args = eval_args(c, n);
        return jinja_filter(c, n->name, x, args, n->argnames, n->n_args);
    }
    case JN_TEST: {
        jv x = eval(c, n->a);
        jv *args = eval_args(c, n);
        bool r = jinja_test(c, n->name, x, args, n->n_args);
        return jv_bool(n->op ? !r : r);
    }
    case JN_UNARY: {
        jv x = eval(c, n->a);
        c->at = n;
        if (n->op == 'n')
            return jv_bool(!jv_truthy(x));
        if (x.t == JV_UNDEF)
            undefined_error(c, x);
        if (x.t == JV_FLOAT)
            return jv_float(n->op == '-' ? -x.f : x.f);
        if (x.t == JV_INT || x.t == JV_BOOL) {
            int64_t v = ival(x);
            if (n->op == '-' && v == INT64_MIN)
                return jv_float(-(double)v);
            return jv_int(n->op == '-' ? -v : v);
        }
        jinja_fail(c, SI_ERR_FORMAT, "bad operand type for unary %c: '%s'", n->op, jv_type_name(x.t));
    }
    case JN_BINARY: {
        jv a = eval(c, n->a), b = eval(c, n->b);
        c->at = n;
        return binop(c, n->op, a, b);
    }
    case JN_AND: {
        jv a = eval(c, n->a);
        return jv_truthy(a) ? eval(c, n->b) : a;
    }
    case JN_OR: {
        jv a = eval(c, n->a);
        return jv_truthy(a) ? a : eval(c, n->b);
    }
    case JN_COND:
        if (jv_truthy(eval(c, n->a)))
            return eval(c, n->b);
        return n->c ? eval(c, n->c) : jv_undef(NULL);
    case JN_LIST:
    case JN_TUPLE: {
        jv l = jv_list_new(c->a, (size_t)n->n_args);
        for (int i = 0; i < n->n_args; i++)
            jv_list_push(c->a, l.l, eval(c, n->args[i]));
        l.l->tuple = n->kind == JN_TUPLE;
        return l;
    }
    case JN_DICT: {
        jv d = jv_dict_new(c->a);
        for (int i = 0; i + 1 < n->n_args; i += 2) {
            jv k = eval(c, n->args[i]);
            jv_dict_set(c->a, d.d, k, eval(c, n->args[i + 1]));
        }
        return d;
    }
    default: jinja_fail(c, SI_ERR_INTERNAL, "statement node %d used as an expression", n->kind);
    }
}

static jv eval(jinja_ctx *c, const jnode *n) {
    enter(c, n);
    jv v = eval_inner(c, n);
    c->depth--;
    return v;
}

/* ---- statements ------------------------------------------------------------------------ */

/* The items a for loop walks: a list as is, dict keys, string characters, Undefined -> none. */
jv jinja_iter_items(jinja_ctx *c, jv x) {
    switch (x.t) {
    case JV_LIST: return x;
    case JV_UNDEF: return jv_list_new(c->a, 0);
    case JV_DICT:
    case JV_NS: {
        jv l = jv_list_new(c->a, x.d->n);
        for (size_t i = 0; i < x.d->n; i++)
            jv_list_push(c->a, l.l, x.d->k[i]);
        return l;
    }
    case JV_STR: {
        size_t cnt;
        size_t *off = jinja_utf8_offsets(c, x.s.s, x.s.n, &cnt);
        jv l = jv_list_new(c->a, cnt);
        for (size_t i = 0; i < cnt; i++)
            jv_list_push(c->a, l.l, jv_str(c->a, x.s.s + off[i], off[i + 1] - off[i]));
        return l;
    }
    default: jinja_fail(c, SI_ERR_FORMAT, "'%s' object is not iterable", jv_type_name(x.t));
    }
}

static void assign_targets(jinja_ctx *c, jscope *s, const jnode *n, jv v) {
    if (n->n_targets == 1) {
        jinja_scope_set(c, s, n->targets[0], v);
        return;
    }
    jv items = jinja_iter_items(c, v);
    if ((int)items.l->n != n->n_targets)
        jinja_fail(c, SI_ERR_FORMAT, "cannot unpack %zu values into %d names", items.l->n,
                   n->n_targets);
    for (int i = 0; i < n->n_targets; i++)
        jinja_scope_set(c, s, n->targets[i], items.l->v[i]);
}

static void exec_for(jinja_ctx *c, const jnode *n, jbuf *out) {
    jv items = jinja_iter_items(c, eval(c, n->a));
    c->at = n;
    jscope *saved = c->scope;
    if (n->c) { /* `for x in xs if cond`: filter first, so loop.length counts what remains */
        jv kept = jv_list_new(c->a, items.l->n);
        for (size_t i = 0; i < items.l->n; i++) {
            c->scope = jinja_scope_new(c, saved);
            assign_targets(c, c->scope, n, items.l->v[i]);
            if (jv_truthy(eval(c, n->c)))
                jv_list_push(c->a, kept.l, items.l->v[i]);
        }
        items = kept;
    }
    size_t len = items.l->n;
    for (size_t i = 0; i < len; i++) {
        c->scope = jinja_scope_new(c, saved);
        jv loop = jv_dict_new(c->a);
        jv_dict *d = loop.d;
        jv_dict_set(c->a, d, jv_cstr("index"), jv_int((int64_t)i + 1));
        jv_dict_set(c->a, d, jv_cstr("index0"), jv_int((int64_t)i));
        jv_dict_set(c->a, d, jv_cstr("revindex"), jv_int((int64_t)(len - i)));
        jv_dict_set(c->a, d, jv_cstr("revindex0"), jv_int((int64_t)(len - i - 1)));
        jv_dict_set(c->a, d, jv_cstr("first"), jv_bool(i == 0));
        jv_dict_set(c->a, d, jv_cstr("last"), jv_bool(i + 1 == len));
        jv_dict_set(c->a, d, jv_cstr("length"), jv_int((int64_t)len));
        jv_dict_set(c->a, d, jv_cstr("depth"), jv_int(1));
        jv_dict_set(c->a, d, jv_cstr("depth0"), jv_int(0));
        jv_dict_set(c->a, d, jv_cstr("previtem"), i ? items.l->v[i - 1] : jv_undef(NULL));
        jv_dict_set(c->a, d, jv_cstr("nextitem"), i + 1 < len ? items.l->v[i + 1] : jv_undef(NULL));
        jinja_scope_set(c, c->scope, "loop", loop);
        assign_targets(c, c->scope, n, items.l->v[i]);
        exec_body(c, n->body, n->n_body, out);
        if (c->loop_ctl == 'b') {
            c->loop_ctl = 0;
            break;
        }
        c->loop_ctl = 0;
    }
    c->scope = saved;
    if (len == 0 && n->n_orelse)
        exec_body(c, n->orelse, n->n_orelse, out);
}

static void exec_stmt(jinja_ctx *c, const jnode *n, jbuf *out) {
    switch (n->kind) {
    case JN_TEXT: jbuf_put(out, n->lit.s.s, n->lit.s.n); return;
    case JN_OUTPUT: {
        jv v = eval(c, n->a);
        c->at = n;
        jv_write_str(out, v);
        return;
    }
    case JN_IF:
        if (jv_truthy(eval(c, n->a)))
            exec_body(c, n->body, n->n_body, out);
        else
            exec_body(c, n->orelse, n->n_orelse, out);
        return;
    case JN_FOR: exec_for(c, n, out); return;
    case JN_SET: {
        jv v = eval(c, n->b);
        c->at = n;
        if (n->a) {
            jv ns = eval(c, n->a);
            c->at = n;
            if (ns.t != JV_NS)
                jinja_fail(c, SI_ERR_FORMAT, "cannot assign attribute on non-namespace object");
            jv_dict_set(c->a, ns.d, jv_cstr(n->name), v);
        } else {
            assign_targets(c, c->scope, n, v);
        }
        return;
    }
    case JN_SET_BLOCK: {
        jbuf b;
        jbuf_init(&b, c->a, c->lim.max_output);
        exec_body(c, n->body, n->n_body, &b);
        jinja_scope_set(c, c->scope, n->name, jbuf_value(&b));
        return;
    }
    case JN_MACRO:
        jinja_scope_set(c, c->scope, n->name,
                        (jv){.t = JV_MACRO, .mac = {.node = n, .scope = c->scope}});
        return;
    case JN_BREAK: c->loop_ctl = 'b'; return;
    case JN_CONTINUE: c->loop_ctl = 'c'; return;
    case JN_BLOCK: exec_body(c, n->body, n->n_body, out); return;
    default: jinja_fail(c, SI_ERR_INTERNAL, "expression node %d used as a statement", n->kind);
    }
}

static void exec_body(jinja_ctx *c, jnode *const *body, int n, jbuf *out) {
    for (int i = 0; i < n && !c->loop_ctl; i++) {
        enter(c, body[i]);
        exec_stmt(c, body[i], out);
        c->depth--;
    }
}

si_status jinja_render(const jinja_template *t, jv (*make_globals)(jinja_arena *a, void *user),
                       void *user, const jinja_limits *lim, char **out, jinja_err *err) {
    *out = NULL;
    /* NOTE: the state lives on the heap so that nothing setjmp's caller reads after a longjmp
     * is a local changed since setjmp. */
    struct state {
        jinja_arena arena;
        jinja_ctx c;
    } *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return err->status = SI_ERR_NOMEM;
    }
    jinja_arena_init(&st->arena, lim->max_memory, err);
    st->c = (jinja_ctx){.a = &st->arena, .err = err, .lim = *lim};
    if (setjmp(err->jb)) {
        if (err->line == 0 && st->c.at) { /* raised below the evaluator (arena, buffers) */
            err->line = st->c.at->line;
            err->col = st->c.at->col;
        }
        jinja_arena_free(&st->arena);
        free(st);
        return err->status;
    }
    jinja_ctx *c = &st->c;
    c->globals = jinja_scope_new(c, NULL);
    jv g = make_globals(&st->arena, user);
    for (size_t i = 0; i < g.d->n; i++)
        jinja_scope_set(c, c->globals, g.d->k[i].s.s, g.d->v[i]);
    c->scope = jinja_scope_new(c, c->globals);
    jbuf b;
    jbuf_init(&b, &st->arena, lim->max_output);
    exec_body(c, t->body, t->n_body, &b);
    char *s = malloc(b.n + 1);
    if (!s)
        jinja_raise(err, SI_ERR_NOMEM, 0, 0, "out of memory");
    if (b.n)
        memcpy(s, b.p, b.n);
    s[b.n] = 0;
    jinja_arena_free(&st->arena);
    free(st);
    *out = s;
    return SI_OK;
}
