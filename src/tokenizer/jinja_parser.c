/* jinja_parser.c — recursive-descent parser from jinja_lex tokens to the AST of jinja.h.
 *
 * Expression precedence is Jinja's (jinja2/parser.py): conditional `a if c else b` < or < and <
 * not < comparisons / in / not in (chainable) < + - < ~ < * / // % < ** < unary - + < postfix
 * (.attr, [index], [a:b:c], call) < filters `|f(...)` and tests `is [not] t`. Statements: for
 * (tuple targets, `if` filter, else), if/elif/else, set (name, tuple, namespace attribute,
 * block), macro, break/continue (Hugging Face enables jinja2.ext.loopcontrols) and
 * generation (Hugging Face's AssistantTracker tag, rendered as its body). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja.h"

#define PARSE_MAX_DEPTH 200

typedef struct {
    jinja_arena *a;
    const jtok *t;
    size_t i, n;
    int depth;
} parser;

static const jtok *cur(const parser *p) { return &p->t[p->i]; }
static const jtok *peek(const parser *p, size_t k) {
    return p->i + k < p->n ? &p->t[p->i + k] : &p->t[p->n - 1];
}

static const char *tok_desc(const jtok *t, char *buf, size_t cap) {
    switch (t->t) {
    case JT_EOF: return "end of template";
    case JT_TEXT: return "template text";
    case JT_VAR_BEGIN: return "'{{'";
    case JT_VAR_END: return "'}}'";
    case JT_BLOCK_BEGIN: return "'{%'";
    case JT_BLOCK_END: return "'%}'";
    case JT_STRING: return "string literal";
    case JT_INT:
    case JT_FLOAT: return "number";
    case JT_NAME:
    case JT_OP: snprintf(buf, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
    }
    return "token";
}

_Noreturn static void parse_fail(parser *p, const jtok *at, const char *fmt, const char *arg) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    jinja_raise(p->a->err, SI_ERR_FORMAT, at->line, at->col, "%s", msg);
}

_Noreturn static void unexpected(parser *p, const char *expected) {
    char buf[64], msg[200];
    snprintf(msg, sizeof msg, "expected %s, found %s", expected, tok_desc(cur(p), buf, sizeof buf));
    parse_fail(p, cur(p), "%s", msg);
}

static bool is_op(const jtok *t, const char *op) {
    return t->t == JT_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0;
}
static bool is_name(const jtok *t, const char *name) {
    return t->t == JT_NAME && strcmp(t->s, name) == 0;
}
static bool accept_op(parser *p, const char *op) {
    if (!is_op(cur(p), op))
        return false;
    p->i++;
    return true;
}
static bool accept_name(parser *p, const char *name) {
    if (!is_name(cur(p), name))
        return false;
    p->i++;
    return true;
}
static void expect_op(parser *p, const char *op) {
    if (!accept_op(p, op)) {
        char e[16];
        snprintf(e, sizeof e, "'%s'", op);
        unexpected(p, e);
    }
}
static const char *expect_ident(parser *p) {
    if (cur(p)->t != JT_NAME)
        unexpected(p, "a name");
    return p->t[p->i++].s;
}
static void expect_type(parser *p, jtok_type t, const char *what) {
    if (cur(p)->t != t)
        unexpected(p, what);
    p->i++;
}

static jnode *node_at(parser *p, jnode_kind k, const jtok *at) {
    jnode *n = jinja_alloc(p->a, sizeof *n);
    n->kind = k;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* A growable array of node pointers (and names) while parsing a list. */
typedef struct {
    jnode **v;
    const char **names;
    int n, cap;
} nodevec;

static void vec_push(parser *p, nodevec *v, jnode *x, const char *name) {
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 8;
        jnode **nv = jinja_alloc(p->a, (size_t)cap * sizeof *nv);
        const char **nn = jinja_alloc(p->a, (size_t)cap * sizeof *nn);
        if (v->n) {
            memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
            memcpy(nn, v->names, (size_t)v->n * sizeof *nn);
        }
        v->v = nv;
        v->names = nn;
        v->cap = cap;
    }
    v->v[v->n] = x;
    v->names[v->n++] = name;
}

static void enter(parser *p) {
    if (++p->depth > PARSE_MAX_DEPTH)
        parse_fail(p, cur(p), "%s", "template nested too deeply");
}

static jnode *parse_expr(parser *p, bool with_cond);
static jnode *parse_unary(parser *p, bool with_filter);
static jnode *parse_or(parser *p);

/* (args) after '(' has been consumed; keyword arguments carry their name. */
static void parse_call_args(parser *p, jnode *n) {
    nodevec v = {0};
    while (!is_op(cur(p), ")")) {
        if (v.n)
            expect_op(p, ",");
        if (is_op(cur(p), ")"))
            break; /* trailing comma */
        const char *name = NULL;
        if (cur(p)->t == JT_NAME && is_op(peek(p, 1), "=")) {
            name = cur(p)->s;
            p->i += 2;
        } else if (is_op(cur(p), "*") || is_op(cur(p), "**")) {
            parse_fail(p, cur(p), "%s", "*args and **kwargs in calls are not supported");
        }
        vec_push(p, &v, parse_expr(p, true), name);
    }
    expect_op(p, ")");
    n->args = v.v;
    n->argnames = v.names;
    n->n_args = v.n;
}

static jnode *parse_primary(parser *p) {
    const jtok *t = cur(p);
    jnode *n;
    switch (t->t) {
    case JT_NAME:
        p->i++;
        n = node_at(p, JN_LIT, t);
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            n->lit = jv_bool(true);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            n->lit = jv_bool(false);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            n->lit = jv_none();
        else {
            n->kind = JN_NAME;
            n->name = t->s;
        }
        return n;
    case JT_STRING: {
        /* adjacent literals concatenate, as in Python */
        size_t total = 0, k = p->i;
        while (p->t[k].t == JT_STRING)
            total += p->t[k++].n;
        char *s = jinja_alloc(p->a, total + 1);
        size_t o = 0;
        for (; p->i < k; p->i++) {
            memcpy(s + o, p->t[p->i].s, p->t[p->i].n);
            o += p->t[p->i].n;
        }
        n = node_at(p, JN_LIT, t);
        n->lit = (jv){.t = JV_STR, .s = {s, total}};
        return n;
    }
    case JT_INT:
        p->i++;
        n = node_at(p, JN_LIT, t);
        n->lit = jv_int(t->i);
        return n;
    case JT_FLOAT:
        p->i++;
        n = node_at(p, JN_LIT, t);
        n->lit = jv_float(t->f);
        return n;
    case JT_OP:
        if (accept_op(p, "(")) {
            if (accept_op(p, ")"))
                return node_at(p, JN_TUPLE, t);
            jnode *e = parse_expr(p, true);
            if (!is_op(cur(p), ","))
                return expect_op(p, ")"), e;
            nodevec v = {0};
            vec_push(p, &v, e, NULL);
            while (accept_op(p, ",") && !is_op(cur(p), ")"))
                vec_push(p, &v, parse_expr(p, true), NULL);
            expect_op(p, ")");
            n = node_at(p, JN_TUPLE, t);
            n->args = v.v;
            n->n_args = v.n;
            return n;
        }
        if (accept_op(p, "[")) {
            nodevec v = {0};
            while (!is_op(cur(p), "]")) {
                if (v.n)
                    expect_op(p, ",");
                if (is_op(cur(p), "]"))
                    break;
                vec_push(p, &v, parse_expr(p, true), NULL);
            }
            expect_op(p, "]");
            n = node_at(p, JN_LIST, t);
            n->args = v.v;
            n->n_args = v.n;
            return n;
        }
        if (accept_op(p, "{")) {
            nodevec v = {0};
            while (!is_op(cur(p), "}")) {
                if (v.n)
                    expect_op(p, ",");
                if (is_op(cur(p), "}"))
                    break;
                vec_push(p, &v, parse_expr(p, true), NULL);
                expect_op(p, ":");
                vec_push(p, &v, parse_expr(p, true), NULL);
            }
            expect_op(p, "}");
            n = node_at(p, JN_DICT, t);
            n->args = v.v;
            n->n_args = v.n;
            return n;
        }
        break;
    default: break;
    }
    unexpected(p, "an expression");
}

static jnode *parse_subscript(parser *p, jnode *obj) {
    const jtok *t = cur(p);
    if (accept_op(p, ".")) {
        if (cur(p)->t == JT_INT) { /* x.0 is x[0] */
            jnode *n = node_at(p, JN_INDEX, t);
            n->a = obj;
            n->b = node_at(p, JN_LIT, cur(p));
            n->b->lit = jv_int(cur(p)->i);
            p->i++;
            return n;
        }
        jnode *n = node_at(p, JN_ATTR, t);
        n->a = obj;
        n->name = expect_ident(p);
        return n;
    }
    expect_op(p, "[");
    jnode *parts[3] = {NULL, NULL, NULL};
    int k = 0;
    bool slice = false;
    for (;;) {
        if (is_op(cur(p), ":")) {
            p->i++;
            slice = true;
            if (++k > 2)
                unexpected(p, "']'");
            continue;
        }
        if (is_op(cur(p), "]"))
            break;
        if (parts[k])
            unexpected(p, "':' or ']'");
        parts[k] = parse_expr(p, true);
    }
    expect_op(p, "]");
    if (!slice) {
        if (!parts[0])
            unexpected(p, "an index");
        jnode *n = node_at(p, JN_INDEX, t);
        n->a = obj;
        n->b = parts[0];
        return n;
    }
    jnode *n = node_at(p, JN_SLICE, t);
    n->a = obj;
    n->args = jinja_alloc(p->a, 3 * sizeof *n->args);
    memcpy(n->args, parts, sizeof parts);
    n->n_args = 3;
    return n;
}

static jnode *parse_postfix(parser *p, jnode *n) {
    for (;;) {
        if (is_op(cur(p), ".") || is_op(cur(p), "[")) {
            n = parse_subscript(p, n);
        } else if (is_op(cur(p), "(")) {
            jnode *c = node_at(p, JN_CALL, cur(p));
            p->i++;
            c->a = n;
            c->line = n->line; /* errors point at the callee, not at its '(' */
            c->col = n->col;
            parse_call_args(p, c);
            n = c;
        } else {
            return n;
        }
    }
}

static const char *parse_dotted_name(parser *p) {
    const char *name = expect_ident(p);
    while (is_op(cur(p), ".") && peek(p, 1)->t == JT_NAME) {
        p->i++;
        const char *part = expect_ident(p);
        size_t n1 = strlen(name), n2 = strlen(part);
        char *s = jinja_alloc(p->a, n1 + n2 + 2);
        memcpy(s, name, n1);
        s[n1] = '.';
        memcpy(s + n1 + 1, part, n2 + 1);
        name = s;
    }
    return name;
}

static jnode *parse_filter_expr(parser *p, jnode *n) {
    for (;;) {
        const jtok *t = cur(p);
        if (accept_op(p, "|")) {
            jnode *f = node_at(p, JN_FILTER, t);
            f->a = n;
            f->name = parse_dotted_name(p);
            if (accept_op(p, "("))
                parse_call_args(p, f);
            n = f;
        } else if (accept_name(p, "is")) {
            jnode *f = node_at(p, JN_TEST, t);
            f->a = n;
            f->op = accept_name(p, "not");
            f->name = parse_dotted_name(p);
            const jtok *c = cur(p);
            if (accept_op(p, "(")) {
                parse_call_args(p, f);
            } else if ((c->t == JT_NAME || c->t == JT_STRING || c->t == JT_INT || c->t == JT_FLOAT ||
                        is_op(c, "[") || is_op(c, "{")) &&
                       !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and") &&
                       !is_name(c, "if") && !is_name(c, "in") && !is_name(c, "not")) {
                if (is_name(c, "is"))
                    parse_fail(p, c, "%s", "You cannot chain multiple tests with is");
                f->args = jinja_alloc(p->a, sizeof *f->args);
                f->argnames = jinja_alloc(p->a, sizeof *f->argnames);
                f->args[0] = parse_postfix(p, parse_primary(p));
                f->n_args = 1;
            }
            n = f;
        } else if (is_op(cur(p), "(")) {
            jnode *c2 = node_at(p, JN_CALL, t);
            p->i++;
            c2->a = n;
            parse_call_args(p, c2);
            n = c2;
        } else {
            return n;
        }
    }
}

static jnode *parse_unary(parser *p, bool with_filter) {
    enter(p);
    const jtok *t = cur(p);
    jnode *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        p->i++;
        n = node_at(p, JN_UNARY, t);
        n->op = t->s[0];
        n->a = parse_unary(p, false);
    } else {
        n = parse_postfix(p, parse_primary(p));
    }
    if (with_filter)
        n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static jnode *binary(parser *p, const jtok *at, int op, jnode *a, jnode *b) {
    jnode *n = node_at(p, JN_BINARY, at);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(parser *p) {
    jnode *n = parse_unary(p, true);
    while (is_op(cur(p), "**")) {
        const jtok *t = &p->t[p->i++];
        n = binary(p, t, JOP_POW, n, parse_unary(p, true));
    }
    return n;
}

static jnode *parse_math2(parser *p) {
    jnode *n = parse_pow(p);
    for (;;) {
        const jtok *t = cur(p);
        int op = is_op(t, "*") ? JOP_MUL : is_op(t, "/") ? JOP_DIV : is_op(t, "//") ? JOP_FLOORDIV
               : is_op(t, "%") ? JOP_MOD : 0;
        if (!op)
            return n;
        p->i++;
        n = binary(p, t, op, n, parse_pow(p));
    }
}

static jnode *parse_concat(parser *p) {
    jnode *n = parse_math2(p);
    while (is_op(cur(p), "~")) {
        const jtok *t = &p->t[p->i++];
        n = binary(p, t, JOP_CONCAT, n, parse_math2(p));
    }
    return n;
}

static jnode *parse_math1(parser *p) {
    jnode *n = parse_concat(p);
    for (;;) {
        const jtok *t = cur(p);
        int op = is_op(t, "+") ? JOP_ADD : is_op(t, "-") ? JOP_SUB : 0;
        if (!op)
            return n;
        p->i++;
        n = binary(p, t, op, n, parse_concat(p));
    }
}

static jnode *parse_compare(parser *p) {
    jnode *left = parse_math1(p), *result = NULL;
    for (;;) {
        const jtok *t = cur(p);
        int op = is_op(t, "==") ? JOP_EQ : is_op(t, "!=") ? JOP_NE : is_op(t, "<") ? JOP_LT
               : is_op(t, "<=") ? JOP_LE : is_op(t, ">") ? JOP_GT : is_op(t, ">=") ? JOP_GE
               : is_name(t, "in") ? JOP_IN : 0;
        if (!op && is_name(t, "not") && is_name(peek(p, 1), "in")) {
            op = JOP_NOTIN;
            p->i++;
        }
        if (!op)
            return result ? result : left;
        p->i++;
        jnode *right = parse_math1(p);
        jnode *cmp = binary(p, t, op, left, right);
        if (result) { /* a < b < c is (a < b) and (b < c) */
            jnode *and = node_at(p, JN_AND, t);
            and->a = result;
            and->b = cmp;
            result = and;
        } else {
            result = cmp;
        }
        left = right;
    }
}

static jnode *parse_not(parser *p) {
    const jtok *t = cur(p);
    if (accept_name(p, "not")) {
        enter(p);
        jnode *n = node_at(p, JN_UNARY, t);
        n->op = 'n';
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static jnode *parse_and(parser *p) {
    jnode *n = parse_not(p);
    while (is_name(cur(p), "and")) {
        jnode *x = node_at(p, JN_AND, &p->t[p->i++]);
        x->a = n;
        x->b = parse_not(p);
        n = x;
    }
    return n;
}

static jnode *parse_or(parser *p) {
    jnode *n = parse_and(p);
    while (is_name(cur(p), "or")) {
        jnode *x = node_at(p, JN_OR, &p->t[p->i++]);
        x->a = n;
        x->b = parse_and(p);
        n = x;
    }
    return n;
}

static jnode *parse_expr(parser *p, bool with_cond) {
    enter(p);
    jnode *n = parse_or(p);
    while (with_cond && is_name(cur(p), "if")) {
        jnode *c = node_at(p, JN_COND, &p->t[p->i++]);
        c->b = n;
        c->a = parse_or(p);
        if (accept_name(p, "else"))
            c->c = parse_expr(p, true);
        n = c;
    }
    p->depth--;
    return n;
}

/* An expression or a bare tuple `a, b` (set values). */
static jnode *parse_tuple_expr(parser *p) {
    const jtok *t = cur(p);
    jnode *e = parse_expr(p, true);
    if (!is_op(cur(p), ","))
        return e;
    nodevec v = {0};
    vec_push(p, &v, e, NULL);
    while (accept_op(p, ",")) {
        if (cur(p)->t == JT_BLOCK_END)
            break;
        vec_push(p, &v, parse_expr(p, true), NULL);
    }
    jnode *n = node_at(p, JN_TUPLE, t);
    n->args = v.v;
    n->n_args = v.n;
    return n;
}

/* ---- statements ------------------------------------------------------------------------ */

/* Parses template content until a {% tag %} whose name is in stops (left unconsumed, p->i at
 * its '{%'), or to the end of the template when stops is NULL. */
static void parse_body(parser *p, const char *const *stops, jnode ***out, int *n_out);

static void end_tag(parser *p) { expect_type(p, JT_BLOCK_END, "'%}'"); }

/* After parse_body stopped: consumes "{% name" and returns name. */
static const char *take_stop(parser *p) {
    p->i++; /* '{%' */
    return p->t[p->i++].s;
}

static void parse_targets(parser *p, jnode *n) {
    nodevec v = {0};
    bool paren = accept_op(p, "(");
    do {
        vec_push(p, &v, NULL, expect_ident(p));
    } while (accept_op(p, ","));
    if (paren)
        expect_op(p, ")");
    n->targets = v.names;
    n->n_targets = v.n;
}

static jnode *parse_for(parser *p, const jtok *at) {
    jnode *n = node_at(p, JN_FOR, at);
    parse_targets(p, n);
    if (!accept_name(p, "in"))
        unexpected(p, "'in'");
    n->a = parse_expr(p, false);
    if (accept_name(p, "if"))
        n->c = parse_expr(p, false);
    if (is_name(cur(p), "recursive"))
        parse_fail(p, cur(p), "%s", "recursive for loops are not supported");
    end_tag(p);
    static const char *const stops[] = {"else", "endfor", NULL};
    parse_body(p, stops, &n->body, &n->n_body);
    if (!strcmp(take_stop(p), "else")) {
        end_tag(p);
        static const char *const stops2[] = {"endfor", NULL};
        parse_body(p, stops2, &n->orelse, &n->n_orelse);
        take_stop(p);
    }
    end_tag(p);
    return n;
}

static jnode *parse_if(parser *p, const jtok *at) {
    jnode *n = node_at(p, JN_IF, at);
    n->a = parse_expr(p, true);
    end_tag(p);
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    parse_body(p, stops, &n->body, &n->n_body);
    const jtok *st = peek(p, 1);
    const char *stop = take_stop(p);
    if (!strcmp(stop, "elif")) {
        n->orelse = jinja_alloc(p->a, sizeof *n->orelse);
        n->orelse[0] = parse_if(p, st); /* consumes through endif */
        n->n_orelse = 1;
        return n;
    }
    if (!strcmp(stop, "else")) {
        end_tag(p);
        static const char *const stops2[] = {"endif", NULL};
        parse_body(p, stops2, &n->orelse, &n->n_orelse);
        take_stop(p);
    }
    end_tag(p);
    return n;
}

static jnode *parse_set(parser *p, const jtok *at) {
    jnode *n = node_at(p, JN_SET, at);
    if (cur(p)->t == JT_NAME && is_op(peek(p, 1), ".")) {
        jnode *ns = node_at(p, JN_NAME, cur(p));
        ns->name = expect_ident(p);
        p->i++;
        n->a = ns;
        n->name = expect_ident(p);
    } else {
        parse_targets(p, n);
    }
    if (cur(p)->t == JT_BLOCK_END && !n->a && n->n_targets == 1) {
        p->i++;
        n->kind = JN_SET_BLOCK;
        n->name = n->targets[0];
        static const char *const stops[] = {"endset", NULL};
        parse_body(p, stops, &n->body, &n->n_body);
        take_stop(p);
        end_tag(p);
        return n;
    }
    expect_op(p, "=");
    n->b = parse_tuple_expr(p);
    end_tag(p);
    return n;
}

static jnode *parse_macro(parser *p, const jtok *at) {
    jnode *n = node_at(p, JN_MACRO, at);
    n->name = expect_ident(p);
    expect_op(p, "(");
    nodevec v = {0};
    while (!is_op(cur(p), ")")) {
        if (v.n)
            expect_op(p, ",");
        const char *name = expect_ident(p);
        jnode *def = NULL;
        if (accept_op(p, "="))
            def = parse_expr(p, true);
        vec_push(p, &v, def, name);
    }
    expect_op(p, ")");
    n->args = v.v;
    n->argnames = v.names;
    n->n_args = v.n;
    end_tag(p);
    static const char *const stops[] = {"endmacro", NULL};
    parse_body(p, stops, &n->body, &n->n_body);
    take_stop(p);
    if (cur(p)->t == JT_NAME && !strcmp(cur(p)->s, n->name))
        p->i++;
    end_tag(p);
    return n;
}

static jnode *parse_statement(parser *p) {
    const jtok *begin = cur(p);
    p->i++;
    const jtok *t = cur(p);
    if (t->t != JT_NAME)
        unexpected(p, "a tag name");
    p->i++;
    enter(p);
    jnode *n;
    if (!strcmp(t->s, "for")) {
        n = parse_for(p, begin);
    } else if (!strcmp(t->s, "if")) {
        n = parse_if(p, begin);
    } else if (!strcmp(t->s, "set")) {
        n = parse_set(p, begin);
    } else if (!strcmp(t->s, "macro")) {
        n = parse_macro(p, begin);
    } else if (!strcmp(t->s, "break") || !strcmp(t->s, "continue")) {
        n = node_at(p, t->s[0] == 'b' ? JN_BREAK : JN_CONTINUE, begin);
        end_tag(p);
    } else if (!strcmp(t->s, "generation")) {
        end_tag(p);
        n = node_at(p, JN_BLOCK, begin);
        static const char *const stops[] = {"endgeneration", NULL};
        parse_body(p, stops, &n->body, &n->n_body);
        take_stop(p);
        end_tag(p);
    } else {
        static const char *const ends[] = {"endfor", "endif", "elif", "else", "endset",
                                           "endmacro", "endgeneration", "endraw", NULL};
        for (int i = 0; ends[i]; i++)
            if (!strcmp(t->s, ends[i]))
                parse_fail(p, t, "unexpected '%s': no open block it could close", t->s);
        parse_fail(p, t, "unknown tag '%s'", t->s);
    }
    p->depth--;
    return n;
}

static void parse_body(parser *p, const char *const *stops, jnode ***out, int *n_out) {
    nodevec v = {0};
    for (;;) {
        const jtok *t = cur(p);
        if (t->t == JT_EOF) {
            if (stops) {
                char msg[64];
                snprintf(msg, sizeof msg, "'{%% %s %%}'", stops[0] ? stops[0] : "end");
                /* name the innermost expected closing tag */
                for (int i = 0; stops[i]; i++)
                    if (!strncmp(stops[i], "end", 3))
                        snprintf(msg, sizeof msg, "'{%% %s %%}'", stops[i]);
                parse_fail(p, t, "unexpected end of template: missing %s", msg);
            }
            break;
        }
        if (t->t == JT_TEXT) {
            jnode *n = node_at(p, JN_TEXT, t);
            n->lit = (jv){.t = JV_STR, .s = {jinja_strdup(p->a, t->s, t->n), t->n}};
            vec_push(p, &v, n, NULL);
            p->i++;
        } else if (t->t == JT_VAR_BEGIN) {
            p->i++;
            jnode *n = node_at(p, JN_OUTPUT, t);
            n->a = parse_expr(p, true);
            expect_type(p, JT_VAR_END, "'}}'");
            vec_push(p, &v, n, NULL);
        } else if (t->t == JT_BLOCK_BEGIN) {
            const jtok *name = peek(p, 1);
            if (stops && name->t == JT_NAME) {
                bool stop = false;
                for (int i = 0; stops[i]; i++)
                    stop |= !strcmp(name->s, stops[i]);
                if (stop)
                    break;
            }
            vec_push(p, &v, parse_statement(p), NULL);
        } else {
            unexpected(p, "template text or a tag");
        }
    }
    *out = v.v;
    *n_out = v.n;
}

si_status jinja_parse(const char *src, size_t len, jinja_template **out, jinja_err *err) {
    *out = NULL;
    jinja_template *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return err->status = SI_ERR_NOMEM;
    }
    jinja_arena_init(&t->arena, (size_t)256 << 20, err);
    if (setjmp(err->jb)) {
        jinja_arena_free(&t->arena);
        free(t);
        return err->status;
    }
    /* As Jinja's lexer: newlines normalised to "\n", and one trailing newline dropped
     * (keep_trailing_newline=False, which Hugging Face leaves as is). */
    char *norm = jinja_alloc(&t->arena, len + 1);
    size_t m = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            norm[m++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            norm[m++] = src[i];
        }
    }
    if (m > 0 && norm[m - 1] == '\n')
        m--;
    size_t n;
    jtok *toks = jinja_lex(&t->arena, norm, m, &n);
    parser p = {.a = &t->arena, .t = toks, .n = n};
    parse_body(&p, NULL, &t->body, &t->n_body);
    t->arena.err = NULL;
    *out = t;
    return SI_OK;
}

void jinja_template_free(jinja_template *t) {
    if (!t)
        return;
    jinja_arena_free(&t->arena);
    free(t);
}
