/* test_kv.c — the paged KV cache manager: reserve / free, a failed reservation leaves
 * everything unchanged, and random operation sequences keep kv_is_valid and page ownership
 * consistent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kv.h"
#include "ns_err.h"

#include <stdlib.h>
#include <string.h>

static void test_create_args(void **state) {
  (void)state;
  kv_t *kv = (kv_t *)1;
  assert_int_equal(kv_create(0, 16, &kv), NS_EINVAL);
  assert_null(kv);
  assert_int_equal(kv_create(8, 12, &kv), NS_EINVAL); /* not a power of two */
  assert_int_equal(kv_create(8, 0, &kv), NS_EINVAL);
  assert_int_equal(kv_create(8, 16, &kv), 0);
  assert_int_equal(kv_pages_total(kv), 8);
  assert_int_equal(kv_pages_used(kv), 0);
  assert_int_equal(kv_page_tokens(kv), 16);
  assert_int_equal(kv_pages_for(kv, 0), 0);
  assert_int_equal(kv_pages_for(kv, 16), 1);
  assert_int_equal(kv_pages_for(kv, 17), 2);
  assert_true(kv_is_valid(kv));
  kv_destroy(kv);
}

static void test_reserve_free(void **state) {
  (void)state;
  kv_t *kv;
  assert_int_equal(kv_create(8, 16, &kv), 0);
  kv_seq a, b;
  kv_seq_init(&a);
  kv_seq_init(&b);
  assert_int_equal(kv_seq_reserve(kv, &a, 1), 0);
  assert_int_equal(a.n_pages, 1);
  assert_int_equal(kv_seq_reserve(kv, &a, 16), 0); /* still one page */
  assert_int_equal(a.n_pages, 1);
  assert_int_equal(kv_seq_reserve(kv, &a, 17), 0);
  assert_int_equal(a.n_pages, 2);
  assert_int_equal(kv_seq_reserve(kv, &a, 5), 0); /* never shrinks */
  assert_int_equal(a.n_pages, 2);
  assert_int_equal(kv_seq_reserve(kv, &b, 97), NS_ENOMEM); /* 7 pages, 6 free */
  assert_int_equal(b.n_pages, 0);
  assert_int_equal(kv_seq_reserve(kv, &b, 96), 0); /* 6 pages: all the rest */
  assert_int_equal(kv_pages_free(kv), 0);
  kv_seq_free(kv, &b);
  kv_seq_free(kv, &a);
  assert_int_equal(kv_pages_used(kv), 0);
  assert_null(a.pages);
  assert_int_equal(a.n_pages, 0);
  assert_true(kv_is_valid(kv));
  kv_destroy(kv);
}

static void test_failure_leaves_state(void **state) {
  (void)state;
  kv_t *kv;
  assert_int_equal(kv_create(8, 16, &kv), 0);
  kv_seq a, b;
  kv_seq_init(&a);
  kv_seq_init(&b);
  assert_int_equal(kv_seq_reserve(kv, &a, 50), 0); /* 4 pages */
  assert_int_equal(kv_seq_reserve(kv, &b, 20), 0); /* 2 pages */
  int32_t before[4];
  memcpy(before, a.pages, sizeof before);
  assert_int_equal(kv_seq_reserve(kv, &a, 16 * 7), NS_ENOMEM); /* needs 3 more, 2 free */
  assert_int_equal(a.n_pages, 4);
  assert_memory_equal(a.pages, before, sizeof before);
  assert_int_equal(kv_pages_used(kv), 6);
  assert_int_equal(kv_pages_free(kv), 2);
  assert_true(kv_is_valid(kv));
  assert_int_equal(kv_seq_reserve(kv, &a, -1), NS_EINVAL);
  assert_int_equal(kv_seq_reserve(kv, &a, 16 * 6), 0); /* exactly the 2 left */
  assert_int_equal(kv_pages_free(kv), 0);
  assert_true(kv_seq_is_valid(kv, &a) && kv_seq_is_valid(kv, &b));
  for (int i = 0; i < a.n_pages; i++)
    for (int j = 0; j < b.n_pages; j++)
      assert_int_not_equal(a.pages[i], b.pages[j]);
  kv_seq_free(kv, &a);
  kv_seq_free(kv, &b);
  assert_true(kv_is_valid(kv));
  kv_destroy(kv);
}

static void test_is_valid_detects(void **state) {
  (void)state;
  kv_t *kv;
  assert_int_equal(kv_create(4, 8, &kv), 0);
  kv_seq a;
  kv_seq_init(&a);
  assert_int_equal(kv_seq_reserve(kv, &a, 17), 0);
  assert_true(kv_seq_is_valid(kv, &a));
  int32_t keep = a.pages[1];
  a.pages[1] = a.pages[0]; /* a duplicate page in one table */
  assert_false(kv_seq_is_valid(kv, &a));
  a.pages[1] = 3; /* a page still on the free list */
  assert_false(kv_seq_is_valid(kv, &a));
  a.pages[1] = keep;
  assert_true(kv_seq_is_valid(kv, &a));
  kv_seq_free(kv, &a);
  kv_destroy(kv);
}

enum { NSEQ = 6, PAGES = 40, PT = 8 };

static void test_random(void **state) {
  (void)state;
  kv_t *kv;
  assert_int_equal(kv_create(PAGES, PT, &kv), 0);
  kv_seq s[NSEQ];
  int tokens[NSEQ] = {0};
  for (int i = 0; i < NSEQ; i++)
    kv_seq_init(&s[i]);
  uint64_t x = 88172645463325252ull;
  int fails = 0;
  for (int it = 0; it < 20000; it++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int i = (int)(x % NSEQ), op = (int)((x >> 8) % 10);
    if (op == 0) {
      kv_seq_free(kv, &s[i]);
      tokens[i] = 0;
    } else {
      int want = tokens[i] + (int)((x >> 16) % 40);
      int free_before = kv_pages_free(kv), had = s[i].n_pages;
      int rc = kv_seq_reserve(kv, &s[i], want);
      int need = (want + PT - 1) / PT;
      if (need - had > free_before) {
        assert_int_equal(rc, NS_ENOMEM);
        assert_int_equal(s[i].n_pages, had);
        assert_int_equal(kv_pages_free(kv), free_before);
        fails++;
      } else {
        assert_int_equal(rc, 0);
        assert_int_equal(s[i].n_pages, need > had ? need : had);
        tokens[i] = want;
      }
    }
    assert_true(kv_is_valid(kv));
    /* every page is owned by exactly one table or free */
    int owner[PAGES], used = 0;
    for (int p = 0; p < PAGES; p++)
      owner[p] = -1;
    for (int k = 0; k < NSEQ; k++) {
      assert_true(kv_seq_is_valid(kv, &s[k]));
      assert_true(s[k].n_pages * PT >= tokens[k]);
      for (int p = 0; p < s[k].n_pages; p++) {
        assert_int_equal(owner[s[k].pages[p]], -1);
        owner[s[k].pages[p]] = k;
      }
      used += s[k].n_pages;
    }
    assert_int_equal(used, kv_pages_used(kv));
  }
  assert_true(fails > 100); /* the pool did run out, often */
  for (int i = 0; i < NSEQ; i++)
    kv_seq_free(kv, &s[i]);
  assert_int_equal(kv_pages_used(kv), 0);
  kv_destroy(kv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_args),
      cmocka_unit_test(test_reserve_free),
      cmocka_unit_test(test_failure_leaves_state),
      cmocka_unit_test(test_is_valid_detects),
      cmocka_unit_test(test_random),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
