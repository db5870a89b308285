/* test_jinja.c — the Jinja subset on its own (src/tokenizer/jinja_*.c through chat_template.h):
 * each construct, whitespace control as Hugging Face configures it (trim_blocks, lstrip_blocks),
 * error messages with line and column, and hostile templates stopped by the limits.
 * tests/python/test_chat_template_vs_jinja2.py checks the same interpreter against jinja2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "tokenizer/chat_template.h"

static const char *MSGS =
    "[{\"role\": \"system\", \"content\": \"Be nice.\"},"
    " {\"role\": \"user\", \"content\": \"  Hi \\u00e9 \\ud83d\\ude42 \"},"
    " {\"role\": \"assistant\", \"content\": \"Hello\", \"n\": 3, \"tags\": [\"a\", \"b\"]}]";

/* Renders tmpl with MSGS (add_generation_prompt true, bos "<s>", eos "</s>"). */
static si_status render(const char *tmpl, char **out) {
    chat_template *t = NULL;
    *out = NULL;
    si_status st = chat_template_parse(tmpl, &t);
    if (st != SI_OK)
        return st;
    st = chat_template_render_json(t, MSGS, NULL, true, "<s>", "</s>", out);
    chat_template_free(t);
    return st;
}

static void expect(const char *tmpl, const char *want) {
    char *out;
    si_status st = render(tmpl, &out);
    if (st != SI_OK)
        fail_msg("%s: %s", tmpl, si_last_error());
    if (strcmp(out, want) != 0)
        fail_msg("%s:\n got  [%s]\n want [%s]", tmpl, out, want);
    free(out);
}

static void expect_error(const char *tmpl, si_status want, const char *fragment) {
    char *out = (char *)1;
    si_status st = render(tmpl, &out);
    if (st != want)
        fail_msg("%s: status %s, want %s (%s)", tmpl, si_status_name(st), si_status_name(want),
                 si_last_error());
    assert_null(out);
    if (!strstr(si_last_error(), fragment))
        fail_msg("%s: message [%s] lacks [%s]", tmpl, si_last_error(), fragment);
}

static void test_output_and_literals(void **state) {
    (void)state;
    expect("plain text", "plain text");
    expect("{{ 'a' }}{{ \"b\" }}{{ 1 }}{{ 2.5 }}{{ true }}{{ none }}{{ [1, 'x'] }}{{ {'k': 1} }}",
           "ab12.5TrueNone[1, 'x']{'k': 1}");
    expect("{{ 'tab\\t' ~ 'nl\\n' ~ '\\u00e9' }}", "tab\tnl\n\xc3\xa9");
    expect("{{ 'a' 'b' }}", "ab");
    expect("{# a comment #}x", "x");
    expect("{% raw %}{{ x }}{% endraw %}", "{{ x }}");
}

static void test_expressions(void **state) {
    (void)state;
    expect("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 8 }} {{ 1 / 4 }}",
           "7 3 -4 2 256 0.25");
    expect("{{ 'a' + 'b' }} {{ 'a' ~ 1 }} {{ 'ab' * 2 }}", "ab a1 abab");
    expect("{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'b' > 'a' }} {{ not 0 }}", "True True True True");
    expect("{{ 'ell' in 'hello' }} {{ 3 not in [1, 2] }} {{ 'role' in messages[0] }}",
           "True True True");
    expect("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ 'a' if false else 'b' }}[{{ 'c' if false }}]",
           "x y b[]");
    expect("{{ messages[0].role }} {{ messages[0]['content'] }} {{ messages[-1].tags[1] }}",
           "system Be nice. b");
    expect("{{ messages[1:]|length }} {{ messages[::-1][0].role }} {{ 'abcde'[1:-1] }}",
           "2 assistant bcd");
    expect("{{ messages[1].content[3] }}", "i"); /* code points, not bytes */
}

static void test_control_flow(void **state) {
    (void)state;
    expect("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}"
           "{{ loop.last }}{{ loop.length }}{{ loop.revindex }},{% endfor %}",
           "10TrueFalse33,21FalseFalse32,32FalseTrue31,");
    expect("{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }}"
           "{% endfor %}", "1user2assistant");
    expect("{% for x in [] %}x{% else %}empty{% endfor %}", "empty");
    expect("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;");
    expect("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}"
           "{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}", "013");
    expect("{% if false %}a{% elif messages %}b{% else %}c{% endif %}", "b");
    expect("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{% endfor %}{{ x }}", "1");
    expect("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}"
           "{% endfor %}{{ ns.x }}", "4");
    expect("{% set a, b = 1, 2 %}{{ b }}{{ a }}", "21");
    expect("{% set s %}[{{ 1 + 1 }}]{% endset %}{{ s }}{{ s }}", "[2][2]");
    expect("{% macro m(x, y='d') %}<{{ x }}{{ y }}>{% endmacro %}{{ m(1) }}{{ m(2, y='e') }}",
           "<1d><2e>");
}

static void test_filters_tests_methods(void **state) {
    (void)state;
    expect("{{ messages[1].content|trim }}|{{ 'Ab'|upper }}{{ 'Ab'|lower }}|{{ 'hi there'|title }}",
           "Hi \xc3\xa9 \xf0\x9f\x99\x82|ABab|Hi There");
    expect("{{ messages|length }}{{ 'é'|length }}{{ messages|first|tojson }}",
           "31{\"role\": \"system\", \"content\": \"Be nice.\"}");
    expect("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='role')|join(',') }}"
           "|{{ messages|rejectattr('role', 'equalto', 'user')|list|length }}", "user|2");
    expect("{{ x|default('d') }}{{ ''|d('e', true) }}{{ '5'|int + 1 }}{{ 3|string }}", "de63");
    expect("{{ {'a': [1, 'é\"']}|tojson }}|{{ {'a': 1}|tojson(indent=2) }}",
           "{\"a\": [1, \"é\\\"\"]}|{\n  \"a\": 1\n}");
    expect("{{ ' x '.strip() }}{{ 'a,b'.split(',')|last }}{{ 'abc'.startswith('a') }}"
           "{{ 'abc'.replace('b', 'B') }}{{ {'a': 1}.get('z', 0) }}", "xbTrueaBc0");
    expect("{{ x is defined }}{{ none is none }}{{ 1 is not none }}{{ 's' is string }}"
           "{{ {} is mapping }}{{ [] is iterable }}{{ 3 is odd }}", "FalseTrueTrueTrueTrueTrueTrue");
    expect("{{ x }}|{{ x|length }}|{% for i in x %}no{% endfor %}|{{ not x }}", "|0||True");
}

static void test_whitespace_control(void **state) {
    (void)state;
    /* trim_blocks drops the newline after a block tag; lstrip_blocks the indent before it */
    expect("{% if true %}\n  a\n  {% endif %}\nb", "  a\nb");
    expect("x\n    {% if true %}\ny\n    {% endif %}\nz", "x\ny\nz");
    expect("a  {%- if true -%}  b  {%- endif -%}  c", "abc");
    expect("a {{- ' b ' -}} c", "a b c");
    expect("  {%+ if true %}x{% endif %}", "  x");          /* + keeps the indent */
    expect("{% if true +%}\nx{% endif %}", "\nx");           /* +%} keeps the newline */
    expect("  {{ 'v' }}\n", "  v");                          /* no lstrip for {{ }}, trailing \n dropped */
    expect("{# c #}\nx", "x");
}

static void test_syntax_errors_name_position(void **state) {
    (void)state;
    expect_error("line one\n{% for x in y %}\n{{ x }}", SI_ERR_FORMAT, "missing '{% endfor %}'");
    expect_error("ok\n  {% bogus %}", SI_ERR_FORMAT, "line 2, column 6: unknown tag 'bogus'");
    expect_error("{{ 1 + }}", SI_ERR_FORMAT, "line 1, column 8: expected an expression");
    expect_error("{{ 'abc }}", SI_ERR_FORMAT, "unterminated string");
    expect_error("{% endif %}", SI_ERR_FORMAT, "unexpected 'endif'");
    expect_error("{# open", SI_ERR_FORMAT, "missing end of comment");
    expect_error("{{ x", SI_ERR_FORMAT, "missing '}}'");
}

static void test_runtime_errors(void **state) {
    (void)state;
    expect_error("a\n{{ raise_exception('Roles must alternate') }}", SI_ERR_INVALID_ARG,
                 "line 2, column 4: Roles must alternate");
    expect_error("{{ nope() }}", SI_ERR_FORMAT, "'nope' is undefined");
    expect_error("{{ x.y }}", SI_ERR_FORMAT, "'x' is undefined");
    expect_error("{{ 1 + 'a' }}", SI_ERR_FORMAT, "unsupported operand type(s) for +: 'int' and 'str'");
    expect_error("{{ 1 // 0 }}", SI_ERR_FORMAT, "by zero");
    expect_error("{{ 1|nofilter }}", SI_ERR_FORMAT, "no filter named 'nofilter'");
    expect_error("{{ 1 is nosuchtest }}", SI_ERR_FORMAT, "no test named 'nosuchtest'");
    expect_error("{% set x = 1 %}{% set x.y = 2 %}", SI_ERR_FORMAT, "non-namespace");
}

static void test_hostile_templates_stop(void **state) {
    (void)state;
    clock_t t0 = clock();
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", SI_ERR_UNSUPPORTED,
                 "recursion limit");
    expect_error("{% for i in range(1000000000) %}x{% endfor %}", SI_ERR_UNSUPPORTED,
                 "Range too big");
    expect_error("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
                 SI_ERR_UNSUPPORTED, "limit");
    expect_error("{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}",
                 SI_ERR_UNSUPPORTED, "limit");
    expect_error("{{ 'x' * 1000000000000 }}", SI_ERR_UNSUPPORTED, "limit");
    expect_error("{% set ns = namespace(s='ab') %}{% for i in range(100) %}"
                 "{% set ns.s = ns.s ~ ns.s %}{% endfor %}", SI_ERR_UNSUPPORTED, "limit");
    char deep[20000];
    size_t n = 0;
    n += (size_t)sprintf(deep, "{{ ");
    for (int i = 0; i < 5000; i++)
        deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 5000; i++)
        deep[n++] = ')';
    strcpy(deep + n, " }}");
    expect_error(deep, SI_ERR_FORMAT, "nested too deeply");
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (secs > 20)
        fail_msg("hostile templates took %.1f s to stop", secs);
}

static void test_api_contract(void **state) {
    (void)state;
    chat_template *t = NULL;
    assert_int_equal(chat_template_parse(NULL, &t), SI_ERR_INVALID_ARG);
    assert_int_equal(chat_template_parse("{{ x }}", NULL), SI_ERR_INVALID_ARG);
    assert_int_equal(chat_template_parse("{% for m in messages %}[{{ m.role }}:{{ m.content }}]"
                                         "{% endfor %}{{ add_generation_prompt }}{{ bos_token }}"
                                         "{{ eos_token }}{{ tools }}", &t), SI_OK);
    chat_message m[2] = {{"user", "hi"}, {"assistant", "yo"}};
    char *out = NULL;
    assert_int_equal(chat_template_render(t, m, 2, false, NULL, "E", &out), SI_OK);
    assert_string_equal(out, "[user:hi][assistant:yo]FalseENone");
    free(out);
    assert_int_equal(chat_template_render(t, NULL, 0, true, "B", NULL, &out), SI_OK);
    assert_string_equal(out, "TrueBNone");
    free(out);
    chat_message bad = {"user", NULL};
    assert_int_equal(chat_template_render(t, &bad, 1, true, "", "", &out), SI_ERR_INVALID_ARG);
    assert_null(out);
    assert_int_equal(chat_template_render_json(t, "[{\"role\": 1", NULL, true, "", "", &out),
                     SI_ERR_INVALID_ARG);
    assert_non_null(strstr(si_last_error(), "invalid JSON"));
    assert_int_equal(chat_template_render_json(t, "[]", "[{\"type\": \"function\"}]", true, "", "",
                                               &out), SI_OK);
    assert_string_equal(out, "True[{'type': 'function'}]");
    free(out);
    chat_template_free(t);
    chat_template_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_and_literals),
        cmocka_unit_test(test_expressions),
        cmocka_unit_test(test_control_flow),
        cmocka_unit_test(test_filters_tests_methods),
        cmocka_unit_test(test_whitespace_control),
        cmocka_unit_test(test_syntax_errors_name_position),
        cmocka_unit_test(test_runtime_errors),
        cmocka_unit_test(test_hostile_templates_stop),
        cmocka_unit_test(test_api_contract),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
