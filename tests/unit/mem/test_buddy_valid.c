/* test_buddy_valid.c — white-box test that buddy_is_valid() catches each kind of
 * corruption: it compiles mem/buddy.c in and breaks the state by hand. Entry main(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../../mem/buddy.c"

#define MiB (1ull << 20)

static buddy_t *fresh(void) {
  buddy_t *b = NULL;
  assert_int_equal(buddy_create(0, 16 * MiB, 2 * MiB, &b), 0); /* 8 blocks, one top */
  assert_true(buddy_is_valid(b));
  return b;
}

/* An allocator with blocks 0 and 1 used (order 0) and 2, 4 free (orders 1, 2). */
static buddy_t *two_used(void) {
  buddy_t *b = fresh();
  uint64_t off;
  assert_int_equal(buddy_alloc(b, 1, &off), 0);
  assert_int_equal(buddy_alloc(b, 1, &off), 0);
  assert_true(buddy_is_valid(b));
  return b;
}

static void test_broken_links(void **state) {
  (void)state;
  buddy_t *b = two_used();
  b->meta[4].prev = 2; /* head of list 2 claims a predecessor */
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);

  b = two_used();
  list_push(b, 2, 1); /* block 2 twice on list 1: a cycle, and must terminate */
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);

  b = two_used();
  b->free_head[1] = 40; /* outside the arena */
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);
}

static void test_mask(void **state) {
  (void)state;
  buddy_t *b = two_used();
  b->nonempty ^= 1ull << 2;
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);

  b = fresh();
  b->nonempty |= 1ull << 0; /* claims a free min block that no list holds */
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);
}

/* Two free buddies of one order that were never merged. */
static void test_uncoalesced(void **state) {
  (void)state;
  buddy_t *b = two_used();
  list_push(b, 0, 0);
  list_push(b, 1, 0);
  b->bytes_allocated = 0;
  b->bytes_requested = 0;
  b->alloc_count = 0;
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);
}

static void test_tiling(void **state) {
  (void)state;
  buddy_t *b = fresh();
  b->meta[3].state = ST_USED; /* a head inside the free top block */
  set_used(&b->meta[3], 0, 1);
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);

  b = two_used();
  b->meta[1].order = 1; /* block 1 claims order 1: misaligned */
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);

  b = two_used();
  b->meta[0].order = 4; /* above max_order */
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);

  b = two_used();
  b->meta[1].state = ST_NONE; /* a hole: no head at 1 */
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);
}

static void test_counters(void **state) {
  (void)state;
  buddy_t *b = two_used();
  b->bytes_allocated += 2 * MiB;
  b->peak_allocated += 2 * MiB;
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);

  b = two_used();
  b->bytes_requested++;
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);

  b = two_used();
  b->alloc_count = 1;
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);

  b = two_used();
  set_used(&b->meta[0], 0, 0); /* a live block that asked for nothing */
  assert_false(buddy_is_valid(b));
  buddy_destroy(b);

  /* free()'s cheap always-on check refuses, rather than wrapping the counters */
  b = two_used();
  b->bytes_allocated = 0;
  assert_int_equal(buddy_free(b, 0), NS_EINTERNAL);
  buddy_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_broken_links), cmocka_unit_test(test_mask),
      cmocka_unit_test(test_uncoalesced),  cmocka_unit_test(test_tiling),
      cmocka_unit_test(test_counters),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
