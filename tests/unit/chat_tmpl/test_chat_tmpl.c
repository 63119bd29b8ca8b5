/* test_chat_tmpl.c — chat templates: the published Jinja templates of each family are
 * recognised, unsupported variants are refused, and each renderer's output equals the text
 * transformers' apply_chat_template(add_generation_prompt=True) produces (hand-written). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "chat_tmpl.h"
#include "ns_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the templates as the models' tokenizer_config.json ship them (JSON-decoded) ---- */

static const char llama2_jinja[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% "
    "set system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
    "(message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation "
    "roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 "
    "and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% "
    "endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' "
    "[/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + "
    "eos_token }}{% endif %}{% endfor %}";

static const char llama3_jinja[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% "
    "endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

static const char llama31_jinja[] =
    "{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul "
    "2024\" %}\n{%- endif %}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{{- "
    "\"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"<|eot_id|>\" }}";

static const char qwen2_jinja[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif "
    "%}{{'<|im_start|>' "
    "+ message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
    "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static const char chatml_jinja[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";

static const char qwen3_jinja[] =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' }}{%- if "
    "reasoning_content %}{{- '<think>\\n' + reasoning_content + '\\n</think>' }}{%- endif "
    "%}{{- '<|im_end|>\\n' }}{%- endfor %}";

static const char mistral01_jinja[] =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
    "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
    "message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}";

static const char mistral02_jinja[] =
    "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = "
    "messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    "
    "{%- set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in "
    "loop_messages %}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n     "
    "   {{- raise_exception('After the optional system message, conversation roles must "
    "alternate user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if "
    "message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined "
    "%}\n            {{- '[INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' "
    "}}\n        {%- else %}\n            {{- '[INST] ' + message['content'] + ' [/INST]' }}\n "
    "       {%- endif %}\n    {%- elif message['role'] == 'assistant' %}\n        {{- "
    "message['content'] + eos_token}}\n    {%- else %}\n        {{- raise_exception('Only user "
    "and assistant roles are supported, with the exception of an initial optional system "
    "message!') }}\n    {%- endif %}\n{%- endfor %}\n";

static const char zephyr_jinja[] =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ "
    "'<|system|>\\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
    "'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif %}\n{% "
    "if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";

/* ---- helpers ------------------------------------------------------------------------------ */

static const chat_msg_t conv[] = {
    {"system", "You are terse."},
    {"user", "  Hi there \n"},
    {"assistant", " Hello. "},
    {"user", "What is 2+2?"},
};

static void expect_render(const chat_tmpl_t *t, const chat_msg_t *m, int n, const char *bos,
                          const char *eos, const char *want) {
  char *out = NULL, err[256];
  size_t len = 0;
  int rc = chat_tmpl_render(t, m, n, bos, eos, &out, &len, err, sizeof err);
  if (rc != 0) fprintf(stderr, "render failed: %d %s\n", rc, err);
  assert_int_equal(rc, 0);
  if (strcmp(out, want) != 0) fprintf(stderr, "got:  [%s]\nwant: [%s]\n", out, want);
  assert_string_equal(out, want);
  assert_int_equal(len, strlen(want));
  free(out);
}

static chat_tmpl_t detect_ok(const char *jinja, chat_family want) {
  chat_tmpl_t t;
  char why[200] = "";
  int rc = chat_tmpl_detect(jinja, &t, why, sizeof why);
  if (rc) fprintf(stderr, "detect: %s\n", why);
  assert_int_equal(rc, 0);
  assert_int_equal(t.family, want);
  return t;
}

/* ---- the families ------------------------------------------------------------------------ */

static void test_llama2(void **st) {
  (void)st;
  chat_tmpl_t t = detect_ok(llama2_jinja, CHAT_LLAMA2);
  expect_render(&t, conv, 4, "<s>", "</s>",
                "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\n  Hi there [/INST] Hello. "
                "</s><s>[INST] What is 2+2? [/INST]");
  /* no system: content.strip() of the user text alone */
  expect_render(&t, conv + 1, 1, "<s>", "</s>", "<s>[INST] Hi there [/INST]");
  /* two users in a row: the template raises */
  chat_msg_t bad[] = {{"user", "a"}, {"user", "b"}};
  char *out, err[200];
  size_t len;
  assert_int_equal(chat_tmpl_render(&t, bad, 2, "<s>", "</s>", &out, &len, err, sizeof err),
                   NS_EINVAL);
  assert_non_null(strstr(err, "alternate"));
}

static void test_llama3(void **st) {
  (void)st;
  chat_tmpl_t t = detect_ok(llama3_jinja, CHAT_LLAMA3);
  expect_render(&t, conv, 4, "<|begin_of_text|>", "<|end_of_text|>",
                "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are "
                "terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi "
                "there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello."
                "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is "
                "2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  /* Llama 3.1's dated system header is not reproduced: refused, not approximated */
  chat_tmpl_t u;
  char why[200];
  assert_int_equal(chat_tmpl_detect(llama31_jinja, &u, why, sizeof why), NS_EUNSUPPORTED);
  assert_int_equal(u.family, CHAT_NONE);
}

static void test_chatml(void **st) {
  (void)st;
  chat_tmpl_t t = detect_ok(chatml_jinja, CHAT_CHATML);
  assert_string_equal(t.default_system, "");
  expect_render(
      &t, conv, 4, "<s>", "</s>",
      "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n  Hi there "
      "\n<|im_end|>\n<|im_start|>assistant\n Hello. <|im_end|>\n<|im_start|>user\nWhat is "
      "2+2?<|im_end|>\n<|im_start|>assistant\n");
  /* Qwen2: the default system message when the first message is not a system one */
  chat_tmpl_t q = detect_ok(qwen2_jinja, CHAT_CHATML);
  assert_string_equal(q.default_system, "You are a helpful assistant.");
  expect_render(&q, conv + 3, 1, "", "<|endoftext|>",
                "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                "What is 2+2?<|im_end|>\n<|im_start|>assistant\n");
  expect_render(&q, conv, 1, "", "<|endoftext|>",
                "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>assistant\n");
  chat_tmpl_t u;
  char why[200];
  assert_int_equal(chat_tmpl_detect(qwen3_jinja, &u, why, sizeof why), NS_EUNSUPPORTED);
}

static void test_mistral(void **st) {
  (void)st;
  chat_tmpl_t t = detect_ok(mistral02_jinja, CHAT_MISTRAL);
  assert_int_equal(t.system_ok, 1);
  assert_int_equal(t.system_last, 0);
  expect_render(&t, conv, 4, "<s>", "</s>",
                "<s>[INST] You are terse.\n\n  Hi there \n [/INST] Hello. </s>[INST] What is "
                "2+2? [/INST]");
  chat_tmpl_t v1 = detect_ok(mistral01_jinja, CHAT_MISTRAL);
  assert_int_equal(v1.system_ok, 0);
  expect_render(&v1, conv + 1, 3, "<s>", "</s>",
                "<s>[INST]   Hi there \n [/INST] Hello. </s>[INST] What is 2+2? [/INST]");
  char *out, err[200];
  size_t len;
  assert_int_equal(chat_tmpl_render(&v1, conv, 4, "<s>", "</s>", &out, &len, err, sizeof err),
                   NS_EINVAL);
  assert_non_null(strstr(err, "Only user and assistant"));
}

static void test_zephyr(void **st) {
  (void)st;
  chat_tmpl_t t = detect_ok(zephyr_jinja, CHAT_ZEPHYR);
  expect_render(&t, conv, 4, "<s>", "</s>",
                "<|system|>\nYou are terse.</s>\n<|user|>\n  Hi there \n</s>\n<|assistant|>\n "
                "Hello. </s>\n<|user|>\nWhat is 2+2?</s>\n<|assistant|>\n");
  /* the same template squeezed onto one line would print no line breaks: refused */
  chat_tmpl_t u;
  char why[200];
  assert_int_equal(chat_tmpl_detect("{{ '<|user|>\\n' + message['content'] + eos_token }}{{ "
                                    "'<|assistant|>' }}",
                                    &u, why, sizeof why),
                   NS_EUNSUPPORTED);
}

static void test_names_and_unknown(void **st) {
  (void)st;
  chat_tmpl_t t;
  assert_int_equal(chat_tmpl_from_name("zephyr", &t), 0);
  assert_int_equal(t.family, CHAT_ZEPHYR);
  assert_string_equal(chat_tmpl_family_name(CHAT_LLAMA3), "llama3");
  assert_int_equal(chat_tmpl_from_name("vicuna", &t), NS_EINVAL);
  char why[200];
  assert_int_equal(chat_tmpl_detect("{{ messages[0]['content'] }}", &t, why, sizeof why),
                   NS_EUNSUPPORTED);
  assert_int_equal(chat_tmpl_detect("", &t, why, sizeof why), NS_EUNSUPPORTED);
  /* an unsupported family renders nothing */
  char *out, err[200];
  size_t len;
  assert_int_equal(chat_tmpl_render(&t, conv, 1, "", "", &out, &len, err, sizeof err), NS_EINVAL);
  assert_non_null(strstr(err, "engine.chat_template"));
}

static void test_unicode_strip(void **st) {
  (void)st;
  /* Jinja's trim is Python's str.strip(): U+00A0 and U+3000 are whitespace, U+200B is not */
  chat_tmpl_t t = detect_ok(llama3_jinja, CHAT_LLAMA3);
  chat_msg_t m[] = {{"user", "\xc2\xa0\xe3\x80\x80x y\xe3\x80\x80\t"}, {"user", "\xe2\x80\x8bz"}};
  expect_render(&t, m, 2, "<B>", "<E>",
                "<B><|start_header_id|>user<|end_header_id|>\n\nx y<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\n\xe2\x80\x8bz<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama2),        cmocka_unit_test(test_llama3),
      cmocka_unit_test(test_chatml),        cmocka_unit_test(test_mistral),
      cmocka_unit_test(test_zephyr),        cmocka_unit_test(test_names_and_unknown),
      cmocka_unit_test(test_unicode_strip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
