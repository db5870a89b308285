/* jinja.h — internal API of the Jinja2-subset interpreter behind chat_template.c.
 *
 * The pipeline is lexer (jinja_lexer.c: template text -> tokens, with Jinja's whitespace control
 * as Hugging Face configures it: trim_blocks=True, lstrip_blocks=True) -> parser (jinja_parser.c:
 * tokens -> AST) -> evaluator (jinja_eval.c: AST + variables -> text), with the value model in
 * jinja_value.c and the filters, tests, methods and global functions in jinja_builtins.c.
 * Semantics follow Jinja 2/3 (jinja.palletsprojects.com, "Template Designer Documentation") with
 * Python's behaviour for the values (str, int, float, list, dict, None).
 *
 * NOTE: every allocation of a parse or a render comes from one arena that is freed as a whole,
 * and every error unwinds with longjmp to the entry point (jinja_parse / jinja_render). A failing
 * render therefore leaks nothing and needs no cleanup paths in the hundreds of places that can
 * fail; the arena has a byte limit, so hostile templates end with an error, not an OOM kill. */
#ifndef SI_TOKENIZER_JINJA_H
#define SI_TOKENIZER_JINJA_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* ---- errors ---------------------------------------------------------------------------- */

typedef struct jinja_err {
    jmp_buf jb;
    si_status status;
    int line, col; /* 1-based position in the template, 0 when unknown */
    char msg[768];
} jinja_err;

/* Records the error (with its template position) in e and unwinds to e->jb. */
_Noreturn void jinja_raise(jinja_err *e, si_status st, int line, int col, const char *fmt, ...)
    SI_PRINTF(5, 6);

/* ---- arena ----------------------------------------------------------------------------- */

typedef struct jinja_chunk jinja_chunk;
typedef struct jinja_arena {
    jinja_chunk *head;
    size_t total, limit; /* bytes taken from malloc so far, and the most allowed */
    jinja_err *err;      /* where an exhausted arena unwinds to */
} jinja_arena;

void jinja_arena_init(jinja_arena *a, size_t limit, jinja_err *err);
void *jinja_alloc(jinja_arena *a, size_t n); /* zeroed; never NULL (raises instead) */
char *jinja_strdup(jinja_arena *a, const char *s, size_t n); /* NUL-terminated copy */
void jinja_arena_free(jinja_arena *a);

/* ---- values ---------------------------------------------------------------------------- */

typedef enum {
    JV_UNDEF,  /* Jinja's Undefined: prints "", falsy, iterates empty; s.s: the error message
                  * using it would give ("'x' is undefined"), or NULL */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,    /* UTF-8, s.s NUL-terminated, s.n bytes */
    JV_LIST,   /* also tuples (l->tuple) */
    JV_DICT,   /* insertion-ordered, as Python's dict */
    JV_NS,     /* namespace(): a dict whose attributes `set ns.x = ...` may assign */
    JV_MACRO,  /* a {% macro %} */
    JV_FUNC,   /* a global function (range, namespace, raise_exception, ...): s.s is its name */
    JV_METHOD, /* a method bound to a value (`s.strip`): m.name, m.self */
} jv_type;

typedef struct jv_list jv_list;
typedef struct jv_dict jv_dict;
typedef struct jnode jnode;

typedef struct jv {
    jv_type t;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *s;
            size_t n;
        } s;
        jv_list *l;
        jv_dict *d;
        struct {
            const jnode *node;
            struct jscope *scope; /* where the macro was defined */
        } mac;
        struct {
            const char *name;
            struct jv *self;
        } m;
    };
} jv;

struct jv_list {
    jv *v;
    size_t n, cap;
    bool tuple;
};

struct jv_dict {
    jv *k, *v;
    size_t n, cap;
};

static inline jv jv_undef(const char *msg) { return (jv){.t = JV_UNDEF, .s = {msg, 0}}; }
static inline jv jv_none(void) { return (jv){.t = JV_NONE}; }
static inline jv jv_bool(bool b) { return (jv){.t = JV_BOOL, .b = b}; }
static inline jv jv_int(int64_t i) { return (jv){.t = JV_INT, .i = i}; }
static inline jv jv_float(double f) { return (jv){.t = JV_FLOAT, .f = f}; }

jv jv_str(jinja_arena *a, const char *s, size_t n); /* copies */
jv jv_cstr(const char *s);                          /* borrows a NUL-terminated string */
jv jv_list_new(jinja_arena *a, size_t cap);
void jv_list_push(jinja_arena *a, jv_list *l, jv x);
jv jv_dict_new(jinja_arena *a);
void jv_dict_set(jinja_arena *a, jv_dict *d, jv key, jv val); /* replaces an equal key */
const jv *jv_dict_get(const jv_dict *d, jv key);              /* NULL when absent */
const jv *jv_dict_gets(const jv_dict *d, const char *key);

const char *jv_type_name(jv_type t); /* Python's name: "str", "int", "NoneType", ... */
bool jv_truthy(jv x);
bool jv_equal(jv a, jv b);
/* <0, 0, >0 for comparable values (numbers, strings, lists); *ok=false otherwise. */
int jv_compare(jv a, jv b, bool *ok);

/* A growable byte buffer in the arena, bounded by limit bytes. */
typedef struct jbuf {
    jinja_arena *a;
    char *p;
    size_t n, cap, limit;
} jbuf;

void jbuf_init(jbuf *b, jinja_arena *a, size_t limit);
void jbuf_put(jbuf *b, const char *s, size_t n);
void jbuf_puts(jbuf *b, const char *s);
void jbuf_putc(jbuf *b, char c);
jv jbuf_value(jbuf *b); /* the contents as a JV_STR (NUL-terminated) */

/* str(x) as Python/Jinja print it: None, True, 1.5, ['a', 1], {'k': 'v'}; Undefined -> "". */
void jv_write_str(jbuf *b, jv x);
/* repr(x): strings quoted the way Python quotes them. */
void jv_write_repr(jbuf *b, jv x);
/* json.dumps(x, ensure_ascii=False, indent=indent (<0: none), sort_keys=sort_keys).
 * Raises for values JSON cannot hold (Undefined, macros). */
void jv_write_json(jbuf *b, jv x, int indent, bool sort_keys, jinja_err *err);
jv jv_to_str(jinja_arena *a, jv x); /* str(x) as a JV_STR (x itself when it is one) */
void jv_write_float(jbuf *b, double f); /* Python's repr(float) */

/* ---- lexer ----------------------------------------------------------------------------- */

typedef enum {
    JT_EOF,
    JT_TEXT,        /* literal template text (s, n), whitespace control applied */
    JT_VAR_BEGIN,   /* {{ */
    JT_VAR_END,     /* }} */
    JT_BLOCK_BEGIN, /* {% */
    JT_BLOCK_END,   /* %} */
    JT_NAME,
    JT_STRING,      /* value in s, n (escapes processed) */
    JT_INT,
    JT_FLOAT,
    JT_OP,          /* s, n: one of + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : | */
} jtok_type;

typedef struct jtok {
    jtok_type t;
    int line, col;
    const char *s;
    size_t n;
    int64_t i;
    double f;
} jtok;

/* Splits a template into tokens (arena-allocated array ending with JT_EOF). Raises on errors. */
jtok *jinja_lex(jinja_arena *a, const char *src, size_t len, size_t *n_out);

/* ---- AST ------------------------------------------------------------------------------- */

typedef enum {
    /* statements */
    JN_TEXT,   /* lit */
    JN_OUTPUT, /* {{ a }} */
    JN_IF,     /* if a: body else orelse (elif = an JN_IF alone in orelse) */
    JN_FOR,    /* for targets in a [if c]: body else orelse */
    JN_SET,    /* targets = b, or (a.name = b) when a != NULL (namespace attribute) */
    JN_SET_BLOCK, /* {% set name %}body{% endset %} */
    JN_MACRO,  /* name(argnames = args defaults): body */
    JN_BREAK,
    JN_CONTINUE,
    JN_BLOCK,  /* a body run as is ({% generation %}) */
    /* expressions */
    JN_LIT,    /* lit */
    JN_NAME,   /* name */
    JN_ATTR,   /* a.name */
    JN_INDEX,  /* a[b] */
    JN_SLICE,  /* a[args[0]:args[1]:args[2]] (NULL entries: omitted) */
    JN_CALL,   /* a(args), argnames[i] != NULL for keyword arguments */
    JN_FILTER, /* a | name(args) */
    JN_TEST,   /* a is [not] name(args); op = 1 for "not" */
    JN_UNARY,  /* op: 'n' not, '-' neg, '+' pos; operand a */
    JN_BINARY, /* a op b; op from enum jinja_binop */
    JN_AND,
    JN_OR,
    JN_COND,   /* b if a else c (c may be NULL) */
    JN_LIST,   /* args */
    JN_TUPLE,  /* args */
    JN_DICT,   /* args: key, value, key, value ... */
} jnode_kind;

enum jinja_binop {
    JOP_ADD = 1, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN,
};

struct jnode {
    jnode_kind kind;
    int op;
    int line, col;
    const char *name;
    jv lit;
    jnode *a, *b, *c;
    jnode **args;
    const char **argnames;
    int n_args;
    jnode **body;
    int n_body;
    jnode **orelse;
    int n_orelse;
    const char **targets;
    int n_targets;
};

/* The parsed template: its top-level statements. */
typedef struct jinja_template {
    jinja_arena arena;
    jnode **body;
    int n_body;
} jinja_template;

/* Parses src into *out (malloc'd; free with jinja_template_free). On failure returns the
 * status and fills *err (position and message). */
si_status jinja_parse(const char *src, size_t len, jinja_template **out, jinja_err *err);
void jinja_template_free(jinja_template *t);


/* ---- evaluation ------------------------------------------------------------------------ */

typedef struct jinja_limits {
    uint64_t max_steps;  /* nodes evaluated */
    size_t max_output;   /* bytes of output (and of any one string) */
    size_t max_memory;   /* bytes of arena */
    int max_depth;       /* nested evaluation (recursion) depth */
} jinja_limits;

typedef struct jscope jscope;

typedef struct jinja_ctx {
    jinja_arena *a;
    jinja_err *err;
    jinja_limits lim;
    jscope *globals;
    jscope *scope;
    uint64_t steps;
    int depth;
    int loop_ctl; /* 0, or 'b' / 'c' after break / continue */
    const jnode *at; /* the node being evaluated, for error positions */
} jinja_ctx;

_Noreturn void jinja_fail(jinja_ctx *c, si_status st, const char *fmt, ...) SI_PRINTF(3, 4);
void jinja_scope_set(jinja_ctx *c, jscope *s, const char *name, jv v);
jscope *jinja_scope_new(jinja_ctx *c, jscope *parent);

/* Renders t with the variables of globals (a JV_DICT) into *out (malloc'd, NUL-terminated).
 * Returns SI_OK or the failure status with *err filled. */
si_status jinja_render(const jinja_template *t, jv (*make_globals)(jinja_arena *a, void *user),
                       void *user, const jinja_limits *lim, char **out, jinja_err *err);

/* An Undefined's message ("'x' is undefined"), fmt with one %s. */
const char *jinja_undef_msg(jinja_ctx *c, const char *fmt, const char *arg);
/* The items a for loop walks: a list as is, dict keys, string characters, Undefined -> none. */
jv jinja_iter_items(jinja_ctx *c, jv x);
/* Byte offsets of the code points of s, plus n at [*count]: Python indexes str by code point. */
size_t *jinja_utf8_offsets(jinja_ctx *c, const char *s, size_t n, size_t *count);

/* Builtins (jinja_builtins.c); args/names as in a call: names[i] != NULL for keywords. */
jv jinja_filter(jinja_ctx *c, const char *name, jv x, const jv *args, const char **names, int n);
bool jinja_test(jinja_ctx *c, const char *name, jv x, const jv *args, int n);
bool jinja_test_exists(const char *name);
jv jinja_call_func(jinja_ctx *c, const char *name, const jv *args, const char **names, int n);
jv jinja_call_method(jinja_ctx *c, jv self, const char *name, const jv *args, const char **names,
                     int n);
bool jinja_has_method(jv self, const char *name);
/* Calls a callable value (macro, function, bound method). */
jv jinja_call_value(jinja_ctx *c, jv f, const jv *args, const char **names, int n);
/* obj.name / obj[key] with Jinja's lookup order; Undefined when absent. */
jv jinja_getattr(jinja_ctx *c, jv obj, const char *name);
jv jinja_getitem(jinja_ctx *c, jv obj, jv key);

#endif
