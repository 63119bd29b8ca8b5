/* test_buddy.c — unit tests of the buddy allocator: split, coalesce, alignment, OOM,
 * odd arena sizes, bad frees, exact statistics. Entry point main() (cmocka). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "buddy.h"
#include "ns_err.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define KiB (1ull << 10)
#define MiB (1ull << 20)

/* cmocka compares floats only; this prints both doubles in full. */
#define assert_double_eq(a, b)                                                                     \
  do {                                                                                             \
    double a_ = (a), b_ = (b);                                                                     \
    if (fabs(a_ - b_) > 1e-12) {                                                                   \
      print_error("%.17g != %.17g\n", a_, b_);                                                     \
      fail();                                                                                      \
    }                                                                                              \
  } while (0)

static buddy_t *make(uint64_t base, uint64_t size, uint64_t min_block) {
  buddy_t *b = NULL;
  assert_int_equal(buddy_create(base, size, min_block, &b), 0);
  assert_non_null(b);
  assert_true(buddy_is_valid(b));
  return b;
}

static uint64_t alloc_ok(buddy_t *b, uint64_t bytes) {
  uint64_t off = UINT64_MAX;
  assert_int_equal(buddy_alloc(b, bytes, &off), 0);
  assert_true(buddy_is_valid(b));
  return off;
}

static buddy_stats stats(const buddy_t *b) {
  buddy_stats st;
  buddy_get_stats(b, &st);
  return st;
}

static void test_create_args(void **state) {
  (void)state;
  buddy_t *b = (buddy_t *)1;
  assert_int_equal(buddy_create(0, 16 * MiB, 63, &b), NS_EINVAL);
  assert_null(b);
  assert_int_equal(buddy_create(0, 16 * MiB, 32, &b), NS_EINVAL);
  assert_int_equal(buddy_create(0, 16 * MiB, 96, &b), NS_EINVAL);
  assert_int_equal(buddy_create(0, MiB, 2 * MiB, &b), NS_EINVAL); /* less than one block */
  assert_int_equal(buddy_create(0, 0, 64, &b), NS_EINVAL);
  assert_int_equal(buddy_create(UINT64_MAX - MiB, 2 * MiB, 64, &b), NS_EINVAL); /* overflow */
  assert_int_equal(buddy_create(0, 1ull << 40, 64, &b), NS_EINVAL);             /* 2^34 blocks */
  assert_int_equal(buddy_create(0, 16 * MiB, 64, NULL), NS_EINVAL);

  b = make(0, 16 * MiB, 0); /* 0 = default 2 MiB */
  buddy_stats st = stats(b);
  assert_int_equal(st.min_block, BUDDY_DEFAULT_MIN_BLOCK);
  assert_int_equal(st.total, 16 * MiB);
  assert_int_equal(st.bytes_free, 16 * MiB);
  assert_int_equal(st.largest_free, 16 * MiB);
  assert_double_eq(st.fragmentation, 0.0);
  buddy_destroy(b);
  buddy_destroy(NULL);
}

/* One min block from a fresh 16 MiB arena splits 16 -> 8+8 -> 4+4 -> 2+2: the other
 * halves are exactly one free block of 2, 4 and 8 MiB, found where the split put them. */
static void test_split(void **state) {
  (void)state;
  const uint64_t base = 1ull << 30;
  buddy_t *b = make(base, 16 * MiB, 2 * MiB);
  assert_int_equal(alloc_ok(b, 1), base);
  assert_int_equal(buddy_block_size(b, base), 2 * MiB);
  buddy_stats st = stats(b);
  assert_int_equal(st.bytes_requested, 1);
  assert_int_equal(st.bytes_allocated, 2 * MiB);
  assert_int_equal(st.bytes_free, 14 * MiB);
  assert_int_equal(st.largest_free, 8 * MiB);
  assert_double_eq(st.fragmentation, 1.0 - 8.0 / 14.0);

  /* smallest fit first: each request takes exactly one of the split remainders */
  assert_int_equal(alloc_ok(b, 2 * MiB), base + 2 * MiB);
  assert_int_equal(alloc_ok(b, 4 * MiB), base + 4 * MiB);
  assert_int_equal(alloc_ok(b, 8 * MiB), base + 8 * MiB);
  uint64_t off;
  assert_int_equal(buddy_alloc(b, 1, &off), NS_ENOMEM);
  st = stats(b);
  assert_int_equal(st.bytes_free, 0);
  assert_int_equal(st.largest_free, 0);
  assert_double_eq(st.fragmentation, 0.0);
  assert_int_equal(st.alloc_count, 4);
  buddy_destroy(b);
}

/* Freed buddies merge back, in any order, to the one top block. */
static void test_coalesce(void **state) {
  (void)state;
  buddy_t *b = make(0, 16 * MiB, 2 * MiB);
  uint64_t off[8];
  for (int i = 0; i < 8; i++)
    assert_int_equal(off[i] = alloc_ok(b, 2 * MiB), i * 2 * MiB);

  /* freeing 0 and 1 (the others used) leaves exactly one free 4 MiB block */
  assert_int_equal(buddy_free(b, off[1]), 0);
  assert_int_equal(buddy_free(b, off[0]), 0);
  assert_true(buddy_is_valid(b));
  buddy_stats st = stats(b);
  assert_int_equal(st.largest_free, 4 * MiB);
  assert_int_equal(st.bytes_free, 4 * MiB);
  assert_int_equal(alloc_ok(b, 4 * MiB), 0);
  assert_int_equal(buddy_free(b, 0), 0);

  const int order[] = {5, 2, 7, 3, 6, 4};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(buddy_free(b, off[order[i]]), 0);
    assert_true(buddy_is_valid(b));
  }
  st = stats(b);
  assert_int_equal(st.largest_free, 16 * MiB);
  assert_int_equal(st.bytes_free, 16 * MiB);
  assert_int_equal(st.alloc_count, 0);
  assert_int_equal(st.bytes_requested, 0);
  assert_double_eq(st.fragmentation, 0.0);
  assert_int_equal(alloc_ok(b, 16 * MiB), 0); /* the whole arena again */
  buddy_destroy(b);

  /* deep: 512 min blocks (orders 0..9) freed in a scattered order merge to one */
  enum { M = 512 };
  static uint64_t offs[M];
  b = make(0, M * 64, 64);
  for (int i = 0; i < M; i++)
    assert_int_equal(buddy_alloc(b, 64, &offs[i]), 0);
  assert_int_equal(stats(b).bytes_free, 0);
  for (int i = 0; i < M; i++) {
    assert_int_equal(buddy_free(b, offs[(i * 197) % M]), 0); /* 197 odd: a permutation */
    if (i % 64 == 0) assert_true(buddy_is_valid(b));
  }
  assert_true(buddy_is_valid(b));
  assert_int_equal(stats(b).largest_free, M * 64);
  assert_int_equal(alloc_ok(b, M * 64), 0);
  buddy_destroy(b);
}

static void test_alignment(void **state) {
  (void)state;
  const uint64_t base = 12345; /* alignment is relative to base */
  buddy_t *b = make(base, 64 * MiB, 64 * KiB);
  const uint64_t sizes[] = {1, 64 * KiB, 65 * KiB, 200 * KiB, MiB, 3 * MiB, 100, 8 * MiB, 5000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    uint64_t off = alloc_ok(b, sizes[i]);
    uint64_t bs = buddy_block_size(b, off);
    assert_true(bs >= sizes[i] && bs >= 64 * KiB && bs < 2 * sizes[i] + 64 * KiB);
    assert_int_equal((off - base) % bs, 0);
  }
  buddy_stats before = stats(b);

  /* align above the block size rounds the block up to align */
  uint64_t off;
  assert_int_equal(buddy_alloc_aligned(b, 64 * KiB, 4 * MiB, &off), 0);
  assert_int_equal((off - base) % (4 * MiB), 0);
  assert_int_equal(buddy_block_size(b, off), 4 * MiB);
  buddy_stats st = stats(b);
  assert_int_equal(st.bytes_requested, before.bytes_requested + 64 * KiB);
  assert_int_equal(st.bytes_allocated, before.bytes_allocated + 4 * MiB);
  /* align at or below the block size changes nothing */
  assert_int_equal(buddy_alloc_aligned(b, MiB, 256 * KiB, &off), 0);
  assert_int_equal(buddy_block_size(b, off), MiB);
  assert_int_equal((off - base) % MiB, 0);
  assert_int_equal(buddy_alloc_aligned(b, 100, 1, &off), 0);
  assert_int_equal(buddy_block_size(b, off), 64 * KiB);
  assert_true(buddy_is_valid(b));

  assert_int_equal(buddy_alloc_aligned(b, 100, 0, &off), NS_EINVAL);
  assert_int_equal(buddy_alloc_aligned(b, 100, 3 * KiB, &off), NS_EINVAL);
  assert_int_equal(buddy_alloc_aligned(b, 100, 128 * MiB, &off), NS_EINVAL); /* > arena */
  assert_int_equal(buddy_alloc_aligned(b, 0, 64, &off), NS_EINVAL);
  buddy_destroy(b);
}

static void assert_same_except_failed(buddy_stats a, buddy_stats b) {
  assert_int_equal(a.failed_allocs + 1, b.failed_allocs);
  b.failed_allocs = a.failed_allocs;
  assert_memory_equal(&a, &b, sizeof a);
}

static void test_out_of_memory(void **state) {
  (void)state;
  buddy_t *b = make(0, 16 * MiB, 2 * MiB);
  uint64_t off[8];
  for (int i = 0; i < 8; i++)
    off[i] = alloc_ok(b, 2 * MiB);
  for (int i = 0; i < 8; i += 2)
    assert_int_equal(buddy_free(b, off[i]), 0);
  /* 8 MiB free in four separate 2 MiB blocks: a 4 MiB request cannot fit */
  buddy_stats before = stats(b);
  assert_int_equal(before.bytes_free, 8 * MiB);
  assert_int_equal(before.largest_free, 2 * MiB);
  assert_double_eq(before.fragmentation, 0.75);
  uint64_t o = 77;
  assert_int_equal(buddy_alloc(b, 4 * MiB, &o), NS_ENOMEM);
  assert_int_equal(o, 77);
  assert_true(buddy_is_valid(b));
  assert_same_except_failed(before, stats(b));

  before = stats(b);
  assert_int_equal(buddy_alloc_aligned(b, 2 * MiB, 8 * MiB, &o), NS_ENOMEM);
  assert_true(buddy_is_valid(b));
  assert_same_except_failed(before, stats(b));

  /* a 2 MiB request still fits in one of the holes */
  o = alloc_ok(b, 2 * MiB);
  assert_int_equal(o % (4 * MiB), 0);
  buddy_destroy(b);
}

/* 26 MiB + 100 bytes with 2 MiB blocks: total 26 MiB = top blocks 16 + 8 + 2 MiB. */
static void test_non_power_of_two(void **state) {
  (void)state;
  const uint64_t base = 4096;
  buddy_t *b = make(base, 26 * MiB + 100, 2 * MiB);
  buddy_stats fresh = stats(b);
  assert_int_equal(fresh.total, 26 * MiB);
  assert_int_equal(fresh.bytes_free, 26 * MiB);
  assert_int_equal(fresh.largest_free, 16 * MiB);
  assert_double_eq(fresh.fragmentation, 1.0 - 16.0 / 26.0);

  uint64_t off;
  assert_int_equal(buddy_alloc(b, 27 * MiB, &off), NS_EINVAL); /* more than the arena */
  assert_int_equal(buddy_alloc(b, 20 * MiB, &off), NS_ENOMEM); /* 32 MiB: no such block */
  for (int round = 0; round < 2; round++) {
    uint64_t a = alloc_ok(b, 16 * MiB), c = alloc_ok(b, 8 * MiB), d = alloc_ok(b, 2 * MiB);
    assert_int_equal(a, base);
    assert_int_equal(c, base + 16 * MiB);
    assert_int_equal(d, base + 24 * MiB);
    assert_int_equal(buddy_alloc(b, 1, &off), NS_ENOMEM);
    assert_int_equal(buddy_free(b, c), 0);
    assert_int_equal(buddy_free(b, d), 0);
    assert_int_equal(buddy_free(b, a), 0);
    assert_true(buddy_is_valid(b));
    buddy_stats st = stats(b);
    assert_int_equal(st.bytes_free, fresh.bytes_free); /* top blocks never merge */
    assert_int_equal(st.largest_free, fresh.largest_free);
  }

  /* the 2 MiB top block has no buddy: smallest fit takes it, and it frees alone */
  assert_int_equal(alloc_ok(b, MiB), base + 24 * MiB);
  uint64_t x = alloc_ok(b, MiB);
  assert_int_equal(x, base + 16 * MiB); /* split of the 8 MiB top block */
  assert_int_equal(buddy_free(b, base + 24 * MiB), 0);
  assert_int_equal(buddy_free(b, x), 0);
  assert_true(buddy_is_valid(b));
  assert_int_equal(stats(b).largest_free, 16 * MiB);
  buddy_destroy(b);

  /* three min blocks: tops of 2 and 1 blocks */
  b = make(0, 3 * 64, 64);
  assert_int_equal(alloc_ok(b, 64), 128);
  assert_int_equal(alloc_ok(b, 64), 0);
  assert_int_equal(alloc_ok(b, 64), 64);
  assert_int_equal(buddy_free(b, 128), 0);
  assert_int_equal(buddy_free(b, 0), 0);
  assert_int_equal(buddy_free(b, 64), 0);
  assert_true(buddy_is_valid(b));
  assert_int_equal(stats(b).largest_free, 128);
  buddy_destroy(b);
}

static void test_invalid_free(void **state) {
  (void)state;
  const uint64_t base = 64 * MiB;
  buddy_t *b = make(base, 16 * MiB, 2 * MiB);
  uint64_t a = alloc_ok(b, 8 * MiB);
  assert_int_equal(a, base);
  buddy_stats before = stats(b);
  const uint64_t bad[] = {base + 2 * MiB,  base + 4 * MiB, base + 1, base + MiB, base - 1, 0,
                          base + 8 * MiB, /* head of a free block */
                          base + 16 * MiB, UINT64_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(buddy_free(b, bad[i]), NS_EINVAL);
    assert_int_equal(buddy_block_size(b, bad[i]), 0);
    assert_true(buddy_is_valid(b));
    buddy_stats st = stats(b);
    assert_memory_equal(&st, &before, sizeof st);
  }
  assert_int_equal(buddy_block_size(b, a), 8 * MiB);
  assert_int_equal(buddy_free(b, a), 0);
  assert_int_equal(buddy_free(b, a), NS_EINVAL); /* double free */
  assert_int_equal(buddy_block_size(b, a), 0);
  assert_true(buddy_is_valid(b));
  assert_int_equal(stats(b).largest_free, 16 * MiB);

  /* double free after the block's buddy was reallocated: the head is interior now */
  uint64_t x = alloc_ok(b, 2 * MiB), y = alloc_ok(b, 2 * MiB);
  assert_int_equal(buddy_free(b, x), 0);
  assert_int_equal(buddy_free(b, y), 0);
  uint64_t z = alloc_ok(b, 4 * MiB);
  assert_int_equal(z, x);
  assert_int_equal(buddy_free(b, y), NS_EINVAL);
  assert_int_equal(buddy_free(b, z), 0);
  assert_true(buddy_is_valid(b));
  assert_int_equal(buddy_free(NULL, 0), NS_EINVAL);
  buddy_destroy(b);
}

static void test_zero_and_oversized(void **state) {
  (void)state;
  buddy_t *b = make(0, 16 * MiB, 2 * MiB);
  uint64_t off = 5;
  assert_int_equal(buddy_alloc(b, 0, &off), NS_EINVAL);
  assert_int_equal(buddy_alloc(b, 16 * MiB + 1, &off), NS_EINVAL);
  assert_int_equal(buddy_alloc(b, UINT64_MAX, &off), NS_EINVAL);
  assert_int_equal(buddy_alloc(b, 1, NULL), NS_EINVAL);
  assert_int_equal(buddy_alloc(NULL, 1, &off), NS_EINVAL);
  assert_int_equal(off, 5);
  buddy_stats st = stats(b);
  assert_int_equal(st.failed_allocs, 0); /* bad arguments are not out-of-memory */
  assert_int_equal(st.total_allocs, 0);
  assert_int_equal(alloc_ok(b, 16 * MiB), 0); /* exactly the arena is fine */
  assert_int_equal(buddy_free(b, 0), 0);
  buddy_destroy(b);
}

/* 16 MiB arena, 2 MiB blocks, worked by hand. */
static void test_stats_hand_worked(void **state) {
  (void)state;
  buddy_t *b = make(0, 16 * MiB, 2 * MiB);
  /* 3 MiB -> a 4 MiB block at 0; free: 4 MiB @4, 8 MiB @8 */
  uint64_t a = alloc_ok(b, 3 * MiB);
  assert_int_equal(a, 0);
  buddy_stats st = stats(b);
  assert_int_equal(st.total, 16 * MiB);
  assert_int_equal(st.bytes_requested, 3 * MiB);
  assert_int_equal(st.bytes_allocated, 4 * MiB);
  assert_int_equal(st.bytes_free, 12 * MiB);
  assert_int_equal(st.largest_free, 8 * MiB);
  assert_double_eq(st.fragmentation, 1.0 / 3.0); /* 1 - 8/12 */
  assert_int_equal(st.alloc_count, 1);
  assert_int_equal(st.total_allocs, 1);
  assert_int_equal(st.failed_allocs, 0);
  assert_int_equal(st.peak_allocated, 4 * MiB);

  /* 5 MiB -> the 8 MiB block @8; only 4 MiB @4 stays free: one block, no fragmentation */
  uint64_t c = alloc_ok(b, 5 * MiB);
  assert_int_equal(c, 8 * MiB);
  st = stats(b);
  assert_int_equal(st.bytes_requested, 8 * MiB);
  assert_int_equal(st.bytes_allocated, 12 * MiB);
  assert_int_equal(st.largest_free, 4 * MiB);
  assert_double_eq(st.fragmentation, 0.0);

  /* 1 MiB -> 2 MiB @4 (splitting 4 @4); free: 2 MiB @6 */
  uint64_t d = alloc_ok(b, MiB);
  assert_int_equal(d, 4 * MiB);
  st = stats(b);
  assert_int_equal(st.bytes_requested, 9 * MiB);
  assert_int_equal(st.bytes_allocated, 14 * MiB);
  assert_int_equal(st.bytes_free, 2 * MiB);
  assert_int_equal(st.peak_allocated, 14 * MiB);

  /* free the 8 MiB block: free 2 @6 + 8 @8 = 10 MiB, largest 8: 1 - 8/10 = 0.2 */
  assert_int_equal(buddy_free(b, c), 0);
  st = stats(b);
  assert_int_equal(st.bytes_requested, 4 * MiB);
  assert_int_equal(st.bytes_allocated, 6 * MiB);
  assert_int_equal(st.bytes_free, 10 * MiB);
  assert_int_equal(st.largest_free, 8 * MiB);
  assert_double_eq(st.fragmentation, 0.2);
  assert_int_equal(st.alloc_count, 2);

  /* 10 MiB rounds to 16 MiB: out of memory, counted */
  uint64_t off;
  assert_int_equal(buddy_alloc(b, 10 * MiB, &off), NS_ENOMEM);
  assert_int_equal(buddy_free(b, a), 0);
  assert_int_equal(buddy_free(b, d), 0);
  st = stats(b);
  assert_int_equal(st.bytes_requested, 0);
  assert_int_equal(st.bytes_allocated, 0);
  assert_int_equal(st.bytes_free, 16 * MiB);
  assert_int_equal(st.largest_free, 16 * MiB);
  assert_double_eq(st.fragmentation, 0.0);
  assert_int_equal(st.alloc_count, 0);
  assert_int_equal(st.total_allocs, 3);
  assert_int_equal(st.failed_allocs, 1);
  assert_int_equal(st.peak_allocated, 14 * MiB);
  assert_true(buddy_is_valid(b));
  buddy_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_args),       cmocka_unit_test(test_split),
      cmocka_unit_test(test_coalesce),          cmocka_unit_test(test_alignment),
      cmocka_unit_test(test_out_of_memory),     cmocka_unit_test(test_non_power_of_two),
      cmocka_unit_test(test_invalid_free),      cmocka_unit_test(test_zero_and_oversized),
      cmocka_unit_test(test_stats_hand_worked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
