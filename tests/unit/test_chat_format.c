/* test_chat_format.c — ChatML / Llama-3 rendering against hand-written expected strings.
 * tests/python/test_chat_format_vs_jinja2.py checks the same renderer against jinja2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tokenizer/chat_format.h"

/* The tokenizer.chat_template of SmolLM2-135M-Instruct (real newlines inside the literals). */
static const char *smollm2_template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

/* Plain ChatML, with Jinja escapes (backslash-n) as most tokenizer_config.json files decode to. */
static const char *chatml_template =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' "
    "}}{% endif %}";

/* Meta-Llama-3-8B-Instruct. */
static const char *llama3_template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif "
    "%}{{ "
    "content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

static void expect_render(chat_format f, const char *tmpl, const chat_message *m, int n, bool gen,
                          const char *want) {
    char *got = NULL;
    si_status st = chat_format_render(f, tmpl, m, n, gen, &got);
    if (st != SI_OK) fail_msg("chat_format_render: %s", si_last_error());
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void test_detect(void **state) {
    (void)state;
    assert_int_equal(chat_format_detect(NULL), CHAT_FORMAT_UNKNOWN);
    assert_int_equal(chat_format_detect(""), CHAT_FORMAT_UNKNOWN);
    assert_int_equal(chat_format_detect("{{ messages }}"), CHAT_FORMAT_UNKNOWN);
    assert_int_equal(chat_format_detect(smollm2_template), CHAT_FORMAT_CHATML);
    assert_int_equal(chat_format_detect(chatml_template), CHAT_FORMAT_CHATML);
    assert_int_equal(chat_format_detect(llama3_template), CHAT_FORMAT_LLAMA3);
}

static void test_chatml(void **state) {
    (void)state;
    const chat_message m[] = {
        {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"}};
    expect_render(CHAT_FORMAT_CHATML, chatml_template, m, 4, true,
                  "<|im_start|>system\nBe brief.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\nHello!<|im_end|>\n"
                  "<|im_start|>user\n2+2?<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render(CHAT_FORMAT_CHATML, NULL, m + 1, 1, false, "<|im_start|>user\nHi<|im_end|>\n");
    expect_render(CHAT_FORMAT_CHATML, NULL, NULL, 0, true, "<|im_start|>assistant\n");
    expect_render(CHAT_FORMAT_CHATML, NULL, NULL, 0, false, "");
    /* no trim filter in ChatML templates: whitespace kept */
    const chat_message ws[] = {{"user", "  spaced \n"}};
    expect_render(CHAT_FORMAT_CHATML, chatml_template, ws, 1, false,
                  "<|im_start|>user\n  spaced \n<|im_end|>\n");
}

static void test_smollm2_default_system(void **state) {
    (void)state;
    const char *sys = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                      "Hugging Face<|im_end|>\n";
    const chat_message u[] = {{"user", "Hi"}, {"assistant", "Hello"}};
    char want[512];
    strcpy(want, sys);
    strcat(want, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    expect_render(CHAT_FORMAT_CHATML, smollm2_template, u, 1, true, want);
    strcpy(want, sys);
    strcat(want, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n");
    expect_render(CHAT_FORMAT_CHATML, smollm2_template, u, 2, false, want);
    /* an explicit system message replaces the default */
    const chat_message s[] = {{"system", "Custom."}, {"user", "Hi"}};
    expect_render(CHAT_FORMAT_CHATML, smollm2_template, s, 2, false,
                  "<|im_start|>system\nCustom.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    /* the default sits inside the loop: nothing for an empty conversation */
    expect_render(CHAT_FORMAT_CHATML, smollm2_template, NULL, 0, true, "<|im_start|>assistant\n");
    /* the same template written with Jinja escapes and double quotes */
    const char *escaped =
        "{% for message in messages %}{% if loop.first and messages[0][\"role\"] != \"system\" "
        "%}{{- \"<|im_start|>system\\nYou are \\\"Bot\\\"<|im_end|>\\n\" -}}{% endif "
        "%}{{'<|im_start|>' "
        "+ message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
    expect_render(
        CHAT_FORMAT_CHATML, escaped, u, 1, false,
        "<|im_start|>system\nYou are \"Bot\"<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

static void test_llama3(void **state) {
    (void)state;
    const chat_message m[] = {{"system", "Be brief."}, {"user", "  Hi\n"}, {"assistant", "Hello!"}};
    expect_render(CHAT_FORMAT_LLAMA3, llama3_template, m, 3, true,
                  "<|begin_of_text|>"
                  "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_render(CHAT_FORMAT_LLAMA3, NULL, m + 1, 1, false,
                  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
    /* bos_token is added with the first message, as in Meta's template */
    expect_render(CHAT_FORMAT_LLAMA3, llama3_template, NULL, 0, true,
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_errors(void **state) {
    (void)state;
    const chat_message m[] = {{"user", "Hi"}};
    const chat_message bad[] = {{"user", NULL}};
    char *out = (char *)1;
    assert_int_equal(chat_format_render(CHAT_FORMAT_UNKNOWN, NULL, m, 1, true, &out),
                     SI_ERR_UNSUPPORTED);
    assert_null(out);
    assert_int_equal(chat_format_render(CHAT_FORMAT_CHATML, NULL, m, 1, true, NULL),
                     SI_ERR_INVALID_ARG);
    assert_int_equal(chat_format_render(CHAT_FORMAT_CHATML, NULL, NULL, 1, true, &out),
                     SI_ERR_INVALID_ARG);
    assert_int_equal(chat_format_render(CHAT_FORMAT_CHATML, NULL, m, -1, true, &out),
                     SI_ERR_INVALID_ARG);
    assert_int_equal(chat_format_render(CHAT_FORMAT_CHATML, NULL, bad, 1, true, &out),
                     SI_ERR_INVALID_ARG);
    assert_non_null(strstr(si_last_error(), "message 0"));
    assert_non_null(strstr(si_last_error(), "content"));
    assert_null(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_chatml),
        cmocka_unit_test(test_smollm2_default_system),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
