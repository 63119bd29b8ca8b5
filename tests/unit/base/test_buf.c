/* test_buf.c — ns_buf: appends of every kind keep one NUL-terminated string of the
 * right length across many growths, and empty appends still give a string. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ns_buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_empty(void **state) {
  (void)state;
  ns_buf b = {0};
  ns_buf_put(&b, "", 0);
  assert_false(b.oom);
  assert_non_null(b.p);
  assert_string_equal(b.p, "");
  assert_int_equal(b.len, 0);
  free(b.p);
}

static void test_growth(void **state) {
  (void)state;
  ns_buf b = {0};
  char *want = malloc(1 << 20);
  size_t n = 0;
  for (int i = 0; i < 20000; i++) {
    char tmp[64];
    int k = snprintf(tmp, sizeof tmp, "%d:%s;", i, i % 3 ? "ab" : "");
    switch (i % 3) {
    case 0: ns_buf_printf(&b, "%d:%s;", i, i % 3 ? "ab" : ""); break;
    case 1: ns_buf_puts(&b, tmp); break;
    default: ns_buf_put(&b, tmp, (size_t)k); break;
    }
    memcpy(want + n, tmp, (size_t)k);
    n += (size_t)k;
  }
  want[n] = '\0';
  assert_false(b.oom);
  assert_int_equal(b.len, n);
  assert_int_equal(strlen(b.p), n);
  assert_string_equal(b.p, want);
  assert_true(b.cap > b.len);
  free(b.p);
  free(want);
}

static void test_oom_sticky(void **state) {
  (void)state;
  ns_buf b = {0};
  ns_buf_puts(&b, "kept");
  b.oom = 1; /* as after a failed realloc: later appends change nothing */
  ns_buf_puts(&b, "lost");
  ns_buf_printf(&b, "%s", "lost");
  assert_int_equal(b.len, 4);
  assert_string_equal(b.p, "kept");
  free(b.p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_growth),
      cmocka_unit_test(test_oom_sticky),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
