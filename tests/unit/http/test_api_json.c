/* test_api_json.c — api_json_check against RFC 8259's grammar (texts Python's json takes and
 * refuses), api_json_last_wins keeping the last of duplicate names at any depth, and 64-bit
 * integers read exactly past a double's 2^53 (api_json_exact_ints, api_json_int64). */
#include "api.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static int check(const char *s, size_t *at) {
  return api_json_check(s, strlen(s), at);
}

static void test_valid(void **state) {
  (void)state;
  static const char *const ok[] = {
      "{}",
      " {\"a\": 1} \r\n",
      "[]",
      "0",
      "-0",
      "0.5",
      "-12.25e+3",
      "1E9",
      "1e-07",
      "\"\"",
      "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\"",
      "true",
      "null",
      ("{\"prompt\": \"hi\", \"max_tokens\": 16, \"stop\": [\"a\", \"b\"], \"x\": {\"y\": [[], "
       "{}]}}"),
      "[1, -2.5, \"x\", true, false, null, {\"a\": [0]}]",
      "{\"\xc3\xa9\": \"\xe2\x82\xac\"}", /* UTF-8 names and strings pass through */
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    size_t at = 99;
    if (check(ok[i], &at)) fail_msg("refused %s at %zu", ok[i], at);
  }
}

static void test_invalid(void **state) {
  (void)state;
  static const struct {
    const char *s;
    size_t at; /* where it stops being JSON */
  } bad[] = {
      {"{\"max_tokens\": 02}", 16}, /* a leading zero: 0, then a 2 */
      {"{\"t\": 1.}", 6},           /* a dot without digits */
      {"{\"t\": 1.e0}", 6},         /* the same before an exponent */
      {"{\"t\": 00.5}", 7},         /* leading zeros */
      {"{\"t\": .5}", 6},           /* no integer part */
      {"{\"t\": +1}", 6},           /* a plus sign */
      {"{\"t\": 1e}", 6},           /* an exponent without digits */
      {"{\"t\": -}", 6},            /* a lone minus */
      {"{\"p\": \"a\tb\"}", 6},     /* a raw tab inside a string */
      {"{\"p\": \"a\nb\"}", 6},     /* a raw newline */
      {"{\"p\": \"\x01\"}", 6},     /* a raw control character */
      {"{\"p\": \"\\x41\"}", 6},    /* an unknown escape */
      {"{\"p\": \"\\u12\"}", 6},    /* a short \u */
      {"{\"p\": \"abc}", 6},        /* no closing quote */
      {"{\"a\": 1,}", 8},           /* a trailing comma */
      {"[1, 2,]", 6},               /* the same in an array */
      {"{\"a\" 1}", 5},             /* no colon */
      {"{a: 1}", 1},                /* an unquoted name */
      {"{\"a\": 1} {}", 9},         /* two texts */
      {"{\"a\": tru}", 6},          /* a cut literal */
      {"{\"a\": True}", 6},         /* Python's spelling */
      {"{\"a\": NaN}", 6},          /* not JSON */
      {"[1 2]", 3},                 /* no comma */
      {"{\"a\": [1}", 8},           /* the wrong close */
      {"", 0},                      /* nothing */
      {"   ", 3},                   /* only whitespace */
      {"{\"a\": 1", 7},             /* unclosed */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t at = 99;
    if (!check(bad[i].s, &at)) fail_msg("accepted %s", bad[i].s);
    if (at != bad[i].at) fail_msg("%s: stopped at %zu, expected %zu", bad[i].s, at, bad[i].at);
  }
}

/* cJSON's nesting limit: 1000 open containers pass, 1001 do not */
static void test_depth(void **state) {
  (void)state;
  char s[2 * 1001 + 1];
  for (int d = 1000; d <= 1001; d++) {
    memset(s, '[', (size_t)d);
    memset(s + d, ']', (size_t)d);
    s[2 * d] = '\0';
    size_t at = 0;
    assert_int_equal(check(s, &at), d <= 1000 ? 0 : -1);
    if (d > 1000) assert_int_equal(at, 1000);
  }
}

static void test_last_wins(void **state) {
  (void)state;
  cJSON *o = cJSON_Parse("{\"prompt\": \"ab\", \"n\": 1, \"prompt\": \"cd\", \"x\": {\"k\": 1, "
                         "\"k\": [{\"z\": 1, \"z\": 2, \"z\": 3}]}, \"n\": 2}");
  assert_non_null(o);
  assert_int_equal(api_json_last_wins(o), 0);
  char *s = cJSON_PrintUnformatted(o);
  assert_string_equal(s, "{\"prompt\":\"cd\",\"x\":{\"k\":[{\"z\":3}]},\"n\":2}");
  free(s);
  cJSON_Delete(o);
}

/* text parsed as cJSON does in the server, with the long numbers' text kept */
static cJSON *parse_exact(const char *s) {
  cJSON *o = cJSON_Parse(s);
  assert_non_null(o);
  assert_int_equal(api_json_exact_ints(o, s, strlen(s)), 0);
  return o;
}

static void test_exact_ints(void **state) {
  (void)state;
  static const struct {
    const char *text;
    int rc;
    uint64_t bits;
  } cases[] = {
      {"9007199254740993", 0, 9007199254740993ull}, /* 2^53 + 1: a double says 2^53 */
      {"9007199254740992", 0, 9007199254740992ull},
      {"18446744073709551615", 0, UINT64_MAX},
      {"18446744073709551616", -1, 0},
      {"99999999999999999999999", -1, 0},
      {"-9223372036854775808", 0, (uint64_t)INT64_MIN},
      {"-9223372036854775809", -1, 0},
      {"-9007199254740993", 0, (uint64_t)-9007199254740993ll},
      {"12345", 0, 12345},
      {"-1", 0, UINT64_MAX},
      {"-0", 0, 0},
      {"1e3", 0, 1000},
      {"2.0", 0, 2},
      {"1.5", -1, 0},
      {"1e17", -1, 0},               /* past 2^53 through an exponent: not trusted */
      {"1234567890123456.5", -1, 0}, /* long, with a fraction */
      {"\"7\"", -1, 0},
      {"true", -1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cJSON *o = parse_exact(cases[i].text);
    uint64_t bits = 42;
    int rc = api_json_int64(o, INT64_MIN, UINT64_MAX, &bits);
    if (rc != cases[i].rc) fail_msg("%s: rc %d", cases[i].text, rc);
    if (rc == 0 && bits != cases[i].bits)
      fail_msg("%s: %llu, expected %llu", cases[i].text, (unsigned long long)bits,
               (unsigned long long)cases[i].bits);
    cJSON_Delete(o);
  }
  /* the range asked for */
  cJSON *o = parse_exact("[9007199254740993, -5, 7]");
  uint64_t bits;
  assert_int_equal(api_json_int64(o->child, 0, 9007199254740992ull, &bits), -1);
  assert_int_equal(api_json_int64(o->child, 0, 9007199254740993ull, &bits), 0);
  assert_int_equal(api_json_int64(o->child->next, 0, 100, &bits), -1);
  assert_int_equal(api_json_int64(o->child->next->next, 0, 6, &bits), -1);
  /* short numbers keep no text (a long prompt of token ids allocates nothing) */
  assert_null(o->child->next->valuestring);
  assert_non_null(o->child->valuestring);
  cJSON_Delete(o);
  /* at any depth, in objects and arrays, past strings holding digits and brackets, and the
   * last of duplicate names keeps its own text */
  const char *t = "{\"s\": \"[1, {\\\"seed\\\": 2}]\", \"a\": [[], {}, [1, {\"seed\": "
                  "12345678901234567}]], \"seed\": 1, \"x\": null, \"seed\" : "
                  "18446744073709551557 }";
  o = parse_exact(t);
  assert_int_equal(api_json_last_wins(o), 0);
  assert_int_equal(api_json_int64(cJSON_GetObjectItem(o, "seed"), INT64_MIN, UINT64_MAX, &bits), 0);
  assert_true(bits == 18446744073709551557ull);
  const cJSON *in = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "a"), 2);
  assert_int_equal(
      api_json_int64(cJSON_GetObjectItem(cJSON_GetArrayItem(in, 1), "seed"), 0, UINT64_MAX, &bits),
      0);
  assert_true(bits == 12345678901234567ull);
  cJSON_Delete(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid),      cmocka_unit_test(test_invalid),
      cmocka_unit_test(test_depth),      cmocka_unit_test(test_last_wins),
      cmocka_unit_test(test_exact_ints),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
