/* test_stop.c — the stop-string matcher: matches split across chunks, overlapping
 * prefixes, several stop strings, held-back text released at the end, UTF-8 kept whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "stop.h"

#include <stdlib.h>
#include <string.h>

/* Feed chunks; collect what is emitted (flushing at the end when nothing matched). */
static int run(const char *const *stops, int n_stops, const char *const *chunks, int n_chunks,
               char *got, int *which) {
  eng_stop_t *s;
  assert_int_equal(eng_stop_create(stops, n_stops, &s), 0);
  size_t len = 0;
  int matched = 0;
  *which = -1;
  for (int i = 0; i < n_chunks; i++) {
    const char *e;
    size_t el;
    assert_int_equal(eng_stop_feed(s, chunks[i], strlen(chunks[i]), &e, &el, &matched, which), 0);
    memcpy(got + len, e, el);
    len += el;
  }
  if (!matched) {
    const char *e;
    size_t el;
    eng_stop_flush(s, &e, &el);
    memcpy(got + len, e, el);
    len += el;
  }
  got[len] = '\0';
  eng_stop_destroy(s);
  return matched;
}

static void test_no_stops(void **state) {
  (void)state;
  char got[256];
  int w;
  const char *chunks[] = {"hello", " ", "world"};
  assert_int_equal(run(NULL, 0, chunks, 3, got, &w), 0);
  assert_string_equal(got, "hello world");
}

static void test_split_across_chunks(void **state) {
  (void)state;
  char got[256];
  int w;
  const char *stops[] = {"STOP"};
  const char *chunks[] = {"abc S", "T", "O", "Pxyz", "more"};
  assert_int_equal(run(stops, 1, chunks, 5, got, &w), 1);
  assert_string_equal(got, "abc ");
  assert_int_equal(w, 0);
  /* a prefix that turns out not to be a stop is released, in order */
  const char *c2[] = {"ab ST", "OX", "end"};
  assert_int_equal(run(stops, 1, c2, 3, got, &w), 0);
  assert_string_equal(got, "ab STOXend");
}

static void test_holds_back_only_prefixes(void **state) {
  (void)state;
  eng_stop_t *s;
  const char *stops[] = {"\n\nUser:"};
  assert_int_equal(eng_stop_create(stops, 1, &s), 0);
  const char *e;
  size_t el;
  int m, w;
  assert_int_equal(eng_stop_feed(s, "Hi\n", 3, &e, &el, &m, &w), 0);
  assert_int_equal(el, 2); /* "\n" could start the stop string */
  assert_memory_equal(e, "Hi", 2);
  assert_int_equal(eng_stop_feed(s, "\nUs", 3, &e, &el, &m, &w), 0);
  assert_int_equal(el, 0);
  assert_int_equal(eng_stop_feed(s, "a", 1, &e, &el, &m, &w), 0);
  assert_int_equal(m, 0);
  assert_int_equal(el, 5); /* "\n\nUsa" is no stop: all of it goes */
  assert_memory_equal(e, "\n\nUsa", 5);
  eng_stop_destroy(s);
}

static void test_overlapping_prefixes(void **state) {
  (void)state;
  char got[256];
  int w;
  /* "aab" inside "aaab": the matcher must not lose the restart of the pattern */
  const char *stops[] = {"aab"};
  const char *chunks[] = {"xa", "a", "a", "b!"};
  assert_int_equal(run(stops, 1, chunks, 4, got, &w), 1);
  assert_string_equal(got, "xa");
  /* several stops: the earliest match in the text wins, whichever was listed first */
  const char *stops2[] = {"world", "o w", "lo"};
  const char *c2[] = {"hel", "lo w", "orld"};
  assert_int_equal(run(stops2, 3, c2, 3, got, &w), 1);
  assert_string_equal(got, "hel");
  assert_int_equal(w, 2);
  /* a stop that is a prefix of another */
  const char *stops3[] = {"abcd", "ab"};
  const char *c3[] = {"xxa", "bcd"};
  assert_int_equal(run(stops3, 2, c3, 2, got, &w), 1);
  assert_string_equal(got, "xx");
}

static void test_match_in_one_chunk_and_after(void **state) {
  (void)state;
  eng_stop_t *s;
  const char *stops[] = {"END", ""};
  assert_int_equal(eng_stop_create(stops, 2, &s), 0); /* "" is ignored */
  assert_int_equal(eng_stop_max_len(s), 3);
  const char *e;
  size_t el;
  int m, w;
  assert_int_equal(eng_stop_feed(s, "one END two", 11, &e, &el, &m, &w), 0);
  assert_int_equal(m, 1);
  assert_int_equal(el, 4);
  assert_memory_equal(e, "one ", 4);
  assert_int_equal(eng_stop_feed(s, "more", 4, &e, &el, &m, &w), 0);
  assert_int_equal(m, 1);
  assert_int_equal(el, 0);
  eng_stop_flush(s, &e, &el);
  assert_int_equal(el, 0);
  eng_stop_destroy(s);
}

/* matched_idx: the caller's index (empty stops take theirs too), the first of the list to
 * start at the earliest match */
static void test_matched_index(void **state) {
  (void)state;
  eng_stop_t *s;
  const char *stops[] = {"", "ab", "END", "b"};
  assert_int_equal(eng_stop_create(stops, 4, &s), 0);
  const char *e;
  size_t el;
  int m, w = -1;
  assert_int_equal(eng_stop_feed(s, "xEN", 3, &e, &el, &m, &w), 0);
  assert_int_equal(m, 0);
  assert_int_equal(el, 1); /* "EN" held back */
  assert_int_equal(eng_stop_feed(s, "Dab", 3, &e, &el, &m, &w), 0);
  assert_int_equal(m, 1);
  assert_int_equal(w, 2);
  assert_int_equal(el, 0);
  eng_stop_destroy(s);

  const char *tie[] = {"", "abc", "ab"};
  assert_int_equal(eng_stop_create(tie, 3, &s), 0);
  assert_int_equal(eng_stop_feed(s, "zabc", 4, &e, &el, &m, &w), 0);
  assert_int_equal(m, 1);
  assert_int_equal(w, 1);
  assert_int_equal(el, 1);
  eng_stop_destroy(s);
}

static int utf8_valid(const char *t, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)t[i];
    size_t k = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (!k || i + k > n) return 0;
    for (size_t j = 1; j < k; j++)
      if (((unsigned char)t[i + j] & 0xC0) != 0x80) return 0;
    i += k;
  }
  return 1;
}

static void test_utf8(void **state) {
  (void)state;
  /* "héllo wörld €" fed one byte at a time: every emitted piece is whole UTF-8 */
  const char *text = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x82\xac \xf0\x9f\x98\x80!";
  const char *stops[] = {"\xc3\xb6rld \xe2\x82\xac \xf0\x9f"};
  eng_stop_t *s;
  assert_int_equal(eng_stop_create(stops, 1, &s), 0);
  char got[64];
  size_t len = 0;
  int m = 0, w;
  for (size_t i = 0; i < strlen(text) && !m; i++) {
    const char *e;
    size_t el;
    assert_int_equal(eng_stop_feed(s, text + i, 1, &e, &el, &m, &w), 0);
    assert_true(utf8_valid(e, el));
    memcpy(got + len, e, el);
    len += el;
  }
  got[len] = '\0';
  assert_int_equal(m, 1);
  assert_string_equal(got, "h\xc3\xa9llo w");
  eng_stop_destroy(s);
  /* without a stop string, split multi-byte characters are still held until whole */
  assert_int_equal(eng_stop_create(NULL, 0, &s), 0);
  len = 0;
  for (size_t i = 0; i < strlen(text); i++) {
    const char *e;
    size_t el;
    assert_int_equal(eng_stop_feed(s, text + i, 1, &e, &el, &m, &w), 0);
    assert_true(utf8_valid(e, el));
    memcpy(got + len, e, el);
    len += el;
  }
  got[len] = '\0';
  assert_string_equal(got, text);
  eng_stop_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_stops),
      cmocka_unit_test(test_split_across_chunks),
      cmocka_unit_test(test_holds_back_only_prefixes),
      cmocka_unit_test(test_overlapping_prefixes),
      cmocka_unit_test(test_match_in_one_chunk_and_after),
      cmocka_unit_test(test_matched_index),
      cmocka_unit_test(test_utf8),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
