/* test_log.c — ns_err names and the logger: levels, request ids, escaping of
 * control characters, and JSON lines that parse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ns_err.h"
#include "ns_log.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Capture what the logger writes through a pipe. */
static char captured[8192];

static void capture(void (*emit)(void)) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  ns_log_set_fd(p[1]);
  emit();
  close(p[1]);
  ssize_t n = read(p[0], captured, sizeof captured - 1);
  captured[n > 0 ? n : 0] = '\0';
  close(p[0]);
  ns_log_set_fd(2);
}

static void test_strerror_distinct(void **state) {
  (void)state;
  for (int a = NS_OK; a > NS_ERR_MIN_; a--) {
    assert_string_not_equal(ns_strerror(a), "unknown error");
    for (int b = a - 1; b > NS_ERR_MIN_; b--)
      assert_string_not_equal(ns_strerror(a), ns_strerror(b));
  }
  assert_string_equal(ns_strerror(12345), "unknown error");
}

static void test_escape(void **state) {
  (void)state;
  char out[64];
  const char in[] = "a\nb\tc\x01\"\\\x7f";
  ns_log_escape(out, sizeof out, in, sizeof in - 1);
  assert_string_equal(out, "a\\nb\\tc\\u0001\\\"\\\\\\u007f");
  /* bytes that are not UTF-8 (a client's, quoted) become U+FFFD; valid sequences stay */
  const char bad[] = "/\xff\xfe \xc3\xa9 \xed\xa0\x80 \xe2\x82";
  ns_log_escape(out, sizeof out, bad, sizeof bad - 1);
  assert_string_equal(out, "/\\ufffd\\ufffd \xc3\xa9 \\ufffd\\ufffd\\ufffd \\ufffd\\ufffd");
  /* truncation never splits an escape and always terminates */
  ns_log_escape(out, 5, "\n\n\n", 3);
  assert_string_equal(out, "\\n\\n");
}

/* ns_utf8_lossy: the same bytes as U+FFFD, one a byte, valid sequences (and NULs) kept */
static void test_utf8_lossy(void **state) {
  (void)state;
  char out[64];
  const char bad[] = "/\xff\xfe \xc3\xa9 \xed\xa0\x80 \xe2\x82";
  size_t n = ns_utf8_lossy(out, bad, sizeof bad - 1);
  const char want[] = "/\xef\xbf\xbd\xef\xbf\xbd \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
                      "\xef\xbf\xbd\xef\xbf\xbd";
  assert_int_equal(n, sizeof want - 1);
  assert_memory_equal(out, want, sizeof want);
  assert_int_equal(ns_utf8_lossy(out, "a\0b", 3), 3);
  assert_memory_equal(out, "a\0b", 4);
}

static void emit_levels(void) {
  ns_log_configure(NS_LOG_WARN, NS_LOG_TEXT);
  ns_log_info("hidden");
  ns_log_warn("shown %d", 7);
  ns_logr(NS_LOG_ERROR, 0xabcull, "with id");
}

static void test_levels_text(void **state) {
  (void)state;
  capture(emit_levels);
  assert_null(strstr(captured, "hidden"));
  assert_non_null(strstr(captured, "warn  shown 7\n"));
  assert_non_null(strstr(captured, "[0000000000000abc] with id\n"));
}

static void emit_json(void) {
  ns_log_configure(NS_LOG_DEBUG, NS_LOG_JSON);
  ns_logr(NS_LOG_INFO, 42, "line1\nline2 \"quoted\" \x02");
}

static void test_json_line(void **state) {
  (void)state;
  capture(emit_json);
  /* exactly one line */
  char *nl = strchr(captured, '\n');
  assert_non_null(nl);
  assert_int_equal(nl[1], '\0');
  cJSON *j = cJSON_Parse(captured);
  assert_non_null(j);
  assert_string_equal(cJSON_GetObjectItem(j, "level")->valuestring, "info");
  assert_string_equal(cJSON_GetObjectItem(j, "req")->valuestring, "000000000000002a");
  assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring, "line1\nline2 \"quoted\" \x02");
  cJSON_Delete(j);
  ns_log_configure(NS_LOG_INFO, NS_LOG_TEXT);
}

static void test_parse(void **state) {
  (void)state;
  ns_log_level l;
  ns_log_format f;
  assert_int_equal(ns_log_level_parse("debug", &l), 0);
  assert_int_equal(l, NS_LOG_DEBUG);
  assert_int_equal(ns_log_level_parse("loud", &l), NS_EINVAL);
  assert_int_equal(ns_log_format_parse("json", &f), 0);
  assert_int_equal(f, NS_LOG_JSON);
  assert_int_equal(ns_log_format_parse("xml", &f), NS_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strerror_distinct), cmocka_unit_test(test_escape),
      cmocka_unit_test(test_utf8_lossy),        cmocka_unit_test(test_levels_text),
      cmocka_unit_test(test_json_line),         cmocka_unit_test(test_parse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
