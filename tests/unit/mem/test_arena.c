/* test_arena.c — host memory pools: real pointers inside the arena, writable, freed
 * back, stats; pinned/device pools where the build or machine has none. Entry main(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "arena.h"
#include "ns_err.h"

#include <stdint.h>
#include <string.h>

#define KiB (1ull << 10)
#define MiB (1ull << 20)

static void assert_inside(const mem_pool_t *pool, const void *p, uint64_t bytes) {
  mem_pool_stats_t st;
  mem_pool_stats(pool, &st);
  uintptr_t b = (uintptr_t)st.base, q = (uintptr_t)p;
  assert_true(q >= b && q + bytes <= b + st.size);
}

static void test_host_pool(void **state) {
  (void)state;
  mem_pool_t *pool = NULL;
  assert_int_equal(mem_pool_create_host(32 * MiB + 123, 64 * KiB, 0, &pool), 0);
  mem_pool_stats_t st;
  mem_pool_stats(pool, &st);
  assert_int_equal(st.kind, MEM_HOST);
  assert_string_equal(mem_kind_name(st.kind), "host");
  assert_int_equal(st.size, 32 * MiB);
  assert_int_equal(st.buddy.total, 32 * MiB);
  assert_int_equal((uintptr_t)st.base % (64 * KiB), 0); /* backing aligned to min_block */

  enum { N = 40 };
  void *p[N];
  uint64_t sizes[N];
  for (int i = 0; i < N; i++) {
    sizes[i] = 1 + (uint64_t)(i * 7919 % 500) * KiB;
    assert_int_equal(mem_pool_alloc(pool, sizes[i], &p[i]), 0);
    assert_inside(pool, p[i], sizes[i]);
    uint64_t bs = mem_pool_block_size(pool, p[i]);
    assert_true(bs >= sizes[i]);
    /* aligned to its size from the base, and absolutely up to the base's min_block */
    assert_int_equal(((uintptr_t)p[i] - (uintptr_t)st.base) % bs, 0);
    assert_int_equal((uintptr_t)p[i] % (bs < 64 * KiB ? bs : 64 * KiB), 0);
    memset(p[i], i + 1, sizes[i]);
  }
  /* every block still holds its own pattern: nothing overlapped */
  for (int i = 0; i < N; i++) {
    const unsigned char *q = p[i];
    for (uint64_t j = 0; j < sizes[i]; j += 61)
      assert_int_equal(q[j], i + 1);
    assert_int_equal(q[sizes[i] - 1], i + 1);
  }
  mem_pool_stats(pool, &st);
  uint64_t req = 0;
  for (int i = 0; i < N; i++)
    req += sizes[i];
  assert_int_equal(st.buddy.alloc_count, N);
  assert_int_equal(st.buddy.bytes_requested, req);
  assert_true(st.buddy.bytes_allocated >= req);
  assert_true(mem_pool_is_valid(pool));

  void *a = NULL;
  assert_int_equal(mem_pool_alloc_aligned(pool, 100, 4 * MiB, &a), 0);
  assert_int_equal(((uintptr_t)a - (uintptr_t)st.base) % (4 * MiB), 0);
  assert_int_equal(mem_pool_free(pool, a), 0);

  for (int i = 0; i < N; i += 2)
    assert_int_equal(mem_pool_free(pool, p[i]), 0);
  for (int i = 1; i < N; i += 2)
    assert_int_equal(mem_pool_free(pool, p[i]), 0);
  mem_pool_stats(pool, &st);
  assert_int_equal(st.buddy.alloc_count, 0);
  assert_int_equal(st.buddy.bytes_free, 32 * MiB);
  assert_int_equal(st.buddy.largest_free, 32 * MiB);
  assert_int_equal(st.buddy.total_allocs, N + 1);
  assert_true(mem_pool_is_valid(pool));

  /* the whole pool in one block, written end to end */
  void *all = NULL;
  assert_int_equal(mem_pool_alloc(pool, 32 * MiB, &all), 0);
  assert_ptr_equal(all, st.base);
  memset(all, 0xab, 32 * MiB);
  void *none = (void *)1;
  assert_int_equal(mem_pool_alloc(pool, 1, &none), NS_ENOMEM);
  assert_null(none);
  assert_int_equal(mem_pool_free(pool, all), 0);
  mem_pool_destroy(pool);
}

static void test_bad_calls(void **state) {
  (void)state;
  mem_pool_t *pool = NULL;
  assert_int_equal(mem_pool_create_host(MiB, 3000, 0, &pool), NS_EINVAL);
  assert_int_equal(mem_pool_create_host(MiB, 2 * MiB, 0, &pool), NS_EINVAL);
  assert_int_equal(mem_pool_create_host(MiB, 0, 0, NULL), NS_EINVAL);
  assert_null(pool);
  assert_int_equal(mem_pool_create_host(4 * MiB, 0, 0, &pool), 0); /* default 2 MiB blocks */
  mem_pool_stats_t st;
  mem_pool_stats(pool, &st);
  assert_int_equal(st.buddy.min_block, 2 * MiB);

  void *p = NULL;
  assert_int_equal(mem_pool_alloc(pool, 0, &p), NS_EINVAL);
  assert_int_equal(mem_pool_alloc(pool, 4 * MiB + 1, &p), NS_EINVAL);
  assert_int_equal(mem_pool_alloc(pool, 1, &p), 0);
  char outside[16];
  assert_int_equal(mem_pool_free(pool, outside), NS_EINVAL);
  assert_int_equal(mem_pool_free(pool, NULL), NS_EINVAL);
  assert_int_equal(mem_pool_free(pool, (char *)p + 64), NS_EINVAL); /* interior */
  assert_int_equal(mem_pool_block_size(pool, outside), 0);
  assert_int_equal(mem_pool_free(pool, p), 0);
  assert_int_equal(mem_pool_free(pool, p), NS_EINVAL); /* double free */
  assert_true(mem_pool_is_valid(pool));
  mem_pool_destroy(pool);
  mem_pool_destroy(NULL);
  assert_false(mem_pool_is_valid(NULL));
}

/* Pinned and device pools: unsupported without CUDA; with CUDA they work on a GPU
 * machine (tests/gpu covers that) and fail cleanly with NS_ECUDA on one without. */
static void test_cuda_pools(void **state) {
  (void)state;
  mem_pool_t *pool = NULL;
  assert_int_equal(mem_pool_create_device_fraction(0.0, 0, &pool), NS_EINVAL);
  assert_int_equal(mem_pool_create_device_fraction(1.5, 0, &pool), NS_EINVAL);
  assert_int_equal(mem_pool_create_device_fraction(0.5, 100, &pool), NS_EINVAL);
#ifdef NS_HAVE_CUDA
  int rc = mem_pool_create_host(4 * MiB, 0, 1, &pool);
  assert_true(rc == 0 || rc == NS_ECUDA);
  if (rc == 0) {
    void *p;
    assert_int_equal(mem_pool_alloc(pool, 4096, &p), 0);
    memset(p, 1, 4096);
    assert_int_equal(mem_pool_free(pool, p), 0);
    mem_pool_destroy(pool);
  }
  rc = mem_pool_create_device(4 * MiB, 0, &pool);
  assert_true(rc == 0 || rc == NS_ECUDA);
  mem_pool_destroy(pool);
#else
  assert_int_equal(mem_pool_create_host(4 * MiB, 0, 1, &pool), NS_EUNSUPPORTED);
  assert_int_equal(mem_pool_create_device(4 * MiB, 0, &pool), NS_EUNSUPPORTED);
  assert_int_equal(mem_pool_create_device_fraction(0.5, 0, &pool), NS_EUNSUPPORTED);
  assert_null(pool);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_pool),
      cmocka_unit_test(test_bad_calls),
      cmocka_unit_test(test_cuda_pools),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
