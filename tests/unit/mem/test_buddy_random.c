/* test_buddy_random.c — a million seeded random alloc/free operations against an
 * independent occupancy-bitmap model of the arena. Entry main([seed [ops]]). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "buddy.h"
#include "ns_err.h"
#include "ns_rng.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t g_seed = 20240611;
static uint64_t g_ops = 1000000;

/* ---- PRNG (splitmix64) ------------------------------------------------------ */

static uint64_t rng_state;
static uint64_t rnd(void) {
  return ns_splitmix64(&rng_state);
}
static uint64_t rnd_below(uint64_t n) {
  return rnd() % n;
}

/* ---- the model: one bit per min block, plus the live list ------------------- */

typedef struct live {
  uint64_t off, size, req;
} live;

typedef struct model {
  uint64_t base, total, min, nblocks;
  uint64_t *bits; /* set = inside a live block */
  uint32_t *head; /* live index + 1 at a live block's first min block, else 0 */
  live *lv;
  uint64_t nlive, cap;
  uint64_t allocated, requested, peak, allocs, failed;
} model;

static int range_clear(const model *m, uint64_t i, uint64_t n) {
  if (n < 64) {
    uint64_t mask = ((1ull << n) - 1) << (i & 63);
    return !(m->bits[i >> 6] & mask);
  }
  for (uint64_t w = i >> 6; w < (i + n) >> 6; w++)
    if (m->bits[w]) return 0;
  return 1;
}

static void range_mark(model *m, uint64_t i, uint64_t n, int set) {
  if (n < 64) {
    uint64_t mask = ((1ull << n) - 1) << (i & 63);
    assert_int_equal(m->bits[i >> 6] & mask, set ? 0 : mask); /* no overlap / was live */
    m->bits[i >> 6] ^= mask;
    return;
  }
  for (uint64_t w = i >> 6; w < (i + n) >> 6; w++) {
    assert_int_equal(m->bits[w], set ? 0 : ~0ull);
    m->bits[w] = set ? ~0ull : 0;
  }
}

/* Is some naturally aligned window of n min blocks inside the arena entirely free?
 * With full coalescing, exactly then a block of that size must be allocatable. */
static int model_has_window(const model *m, uint64_t n) {
  for (uint64_t i = 0; i + n <= m->nblocks; i += n) {
    if (n < 64 && (i & 63) == 0 && m->bits[i >> 6] == ~0ull) {
      i += 64 - n; /* whole word busy: skip it */
      continue;
    }
    if (range_clear(m, i, n)) return 1;
  }
  return 0;
}

/* Largest free aligned window, in bytes (= the allocator's largest free block). */
static uint64_t model_largest_free(const model *m) {
  for (int k = 63 - __builtin_clzll(m->nblocks); k >= 0; k--)
    if (model_has_window(m, 1ull << k)) return m->min << k;
  return 0;
}

static uint64_t block_for(const model *m, uint64_t need) {
  uint64_t s = m->min;
  while (s < need)
    s <<= 1;
  return s;
}

static void check_stats(buddy_t *b, const model *m) {
  buddy_stats st;
  buddy_get_stats(b, &st);
  assert_int_equal(st.total, m->total);
  assert_int_equal(st.bytes_allocated, m->allocated);
  assert_int_equal(st.bytes_requested, m->requested);
  assert_int_equal(st.bytes_free, m->total - m->allocated);
  assert_int_equal(st.alloc_count, m->nlive);
  assert_int_equal(st.total_allocs, m->allocs);
  assert_int_equal(st.failed_allocs, m->failed);
  assert_int_equal(st.peak_allocated, m->peak);
}

/* ---- operations ------------------------------------------------------------ */

typedef struct counts {
  uint64_t ops, allocs, frees, enomem, einval;
} counts;

static uint64_t random_request(const model *m, int max_order) {
  /* half the time small orders (0..6), else any order; a size inside that order */
  int k = (int)(rnd() & 1 ? rnd_below(7) : rnd_below((uint64_t)max_order + 1));
  if (k > max_order) k = max_order;
  uint64_t hi = m->min << k, lo = k ? hi / 2 : 0;
  return lo + 1 + rnd_below(hi - lo);
}

static void op_alloc(buddy_t *b, model *m, counts *c, int max_order) {
  uint64_t req = random_request(m, max_order), align = 1, off = UINT64_MAX;
  int aligned = rnd_below(10) == 0;
  if (aligned) align = 1ull << rnd_below((uint64_t)__builtin_ctzll(m->min) + 8);
  if (rnd_below(200) == 0) req = m->total + 1 + rnd_below(m->total); /* oversized */
  uint64_t need = req > align ? req : align;
  int rc = aligned ? buddy_alloc_aligned(b, req, align, &off) : buddy_alloc(b, req, &off);
  if (need > m->total) {
    assert_int_equal(rc, NS_EINVAL);
    c->einval++;
    return;
  }
  uint64_t size = block_for(m, need), n = size / m->min;
  if (rc == NS_ENOMEM) {
    assert_false(model_has_window(m, n)); /* it should have found that room */
    m->failed++;
    c->enomem++;
    return;
  }
  assert_int_equal(rc, 0);
  assert_true(off >= m->base && off - m->base <= m->total - size); /* inside the arena */
  uint64_t rel = off - m->base;
  assert_int_equal(rel % size, 0);  /* aligned to its size */
  assert_int_equal(rel % align, 0); /* and to what was asked */
  assert_int_equal(buddy_block_size(b, off), size);
  range_mark(m, rel / m->min, n, 1); /* asserts no overlap with a live block */
  assert_true(m->nlive < m->cap);
  m->lv[m->nlive] = (live){off, size, req};
  m->head[rel / m->min] = (uint32_t)++m->nlive;
  m->allocated += size;
  m->requested += req;
  if (m->allocated > m->peak) m->peak = m->allocated;
  m->allocs++;
  c->allocs++;
}

static void op_free(buddy_t *b, model *m, counts *c, uint64_t *last_freed) {
  uint64_t j = rnd_below(m->nlive);
  live l = m->lv[j];
  assert_int_equal(buddy_free(b, l.off), 0);
  uint64_t i = (l.off - m->base) / m->min;
  range_mark(m, i, l.size / m->min, 0);
  m->head[i] = 0;
  m->lv[j] = m->lv[--m->nlive]; /* swap-remove; fix the moved entry's head index */
  if (j < m->nlive) m->head[(m->lv[j].off - m->base) / m->min] = (uint32_t)(j + 1);
  m->allocated -= l.size;
  m->requested -= l.req;
  *last_freed = l.off;
  c->frees++;
}

/* A free the allocator must refuse: double free, interior, unaligned or outside. */
static void op_bad_free(buddy_t *b, model *m, counts *c, uint64_t last_freed) {
  uint64_t off;
  switch (rnd_below(4)) {
  case 0: off = last_freed; break;
  case 1:
    off = m->nlive ? m->lv[rnd_below(m->nlive)].off : m->base;
    off += 1 + rnd_below(m->min * 4); /* interior or past it */
    break;
  case 2: off = m->base + rnd_below(m->nblocks) * m->min; break;
  default: off = rnd_below(2) ? m->base - 1 - rnd_below(m->min) : m->base + m->total + rnd();
  }
  if (off >= m->base && off - m->base < m->total && (off - m->base) % m->min == 0 &&
      m->head[(off - m->base) / m->min])
    return; /* that one is live: not a bad free after all */
  assert_int_equal(buddy_free(b, off), NS_EINVAL);
  assert_int_equal(buddy_block_size(b, off), 0);
  c->einval++;
}

static void run(uint64_t base, uint64_t size, uint64_t min, uint64_t ops, uint64_t seed) {
  rng_state = seed;
  buddy_t *b = NULL;
  assert_int_equal(buddy_create(base, size, min, &b), 0);
  model m = {.base = base, .min = min, .nblocks = size / min, .cap = 1u << 16};
  m.total = m.nblocks * min;
  m.bits = calloc((m.nblocks + 63) / 64 + 1, sizeof *m.bits);
  m.head = calloc(m.nblocks, sizeof *m.head);
  m.lv = calloc(m.cap, sizeof *m.lv);
  assert_non_null(m.bits);
  assert_non_null(m.head);
  assert_non_null(m.lv);
  /* bits past the arena stay "busy" so no window reaches them */
  for (uint64_t i = m.nblocks; i < ((m.nblocks + 63) / 64) * 64; i++)
    m.bits[i >> 6] |= 1ull << (i & 63);
  const uint64_t fresh_largest = model_largest_free(&m);
  const int max_order = 63 - __builtin_clzll(m.nblocks);

  counts c = {0};
  uint64_t last_freed = base - 1, p_alloc = 50;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (uint64_t op = 0; op < ops; op++) {
    if (op % 50000 == 0) p_alloc = 30 + rnd_below(5) * 10; /* fill and drain phases */
    uint64_t r = rnd_below(100);
    if (r < 4)
      op_bad_free(b, &m, &c, last_freed);
    else if (m.nlive < m.cap && (m.nlive == 0 || r < 4 + p_alloc))
      op_alloc(b, &m, &c, max_order);
    else
      op_free(b, &m, &c, &last_freed);
    check_stats(b, &m);
    if (op % 4096 == 0) {
      assert_true(buddy_is_valid(b));
      buddy_stats st;
      buddy_get_stats(b, &st);
      assert_int_equal(st.largest_free, model_largest_free(&m));
    }
  }
  c.ops = ops;

  /* free everything: back to the top blocks */
  while (m.nlive)
    op_free(b, &m, &c, &last_freed);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  assert_true(buddy_is_valid(b));
  check_stats(b, &m);
  buddy_stats st;
  buddy_get_stats(b, &st);
  assert_int_equal(st.bytes_free, m.total);
  assert_int_equal(st.largest_free, fresh_largest);
  if ((m.nblocks & (m.nblocks - 1)) == 0) {
    assert_int_equal(st.largest_free, m.total);
    assert_true(st.fragmentation == 0.0);
  } else {
    assert_true(st.largest_free < m.total);
  }
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  printf("buddy_random: seed %" PRIu64 ", arena %" PRIu64 " B / min %" PRIu64 " B: %" PRIu64
         " ops (%" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " ENOMEM, %" PRIu64
         " EINVAL) in %.2f s, peak %.1f%%\n",
         seed, m.total, min, c.ops, c.allocs, c.frees, c.enomem, c.einval, secs,
         100.0 * (double)m.peak / (double)m.total);
  assert_true(c.allocs > ops / 5 && c.frees > ops / 5 && c.enomem > 0 && c.einval > 0);
  free(m.bits);
  free(m.head);
  free(m.lv);
  buddy_destroy(b);
}

/* 1 GiB, 4 KiB blocks: 19 orders. */
static void test_random_pow2(void **state) {
  (void)state;
  run(3ull << 40, 1ull << 30, 4096, g_ops, g_seed);
}

/* A non-power-of-two arena (several top blocks), an odd base and 64-byte blocks. */
static void test_random_odd(void **state) {
  (void)state;
  run(1000003, (100000 + 4096 + 37) * 64 + 11, 64, g_ops / 4, g_seed ^ 0x5555);
}

int main(int argc, char **argv) {
  if (argc > 1) g_seed = strtoull(argv[1], NULL, 0);
  if (argc > 2) g_ops = strtoull(argv[2], NULL, 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_pow2),
      cmocka_unit_test(test_random_odd),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
