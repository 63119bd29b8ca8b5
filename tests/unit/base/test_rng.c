/* test_rng.c — ns_rng.h against the published sequences of its two generators: a seed
 * must name the same weights (mkmodel), prompts and arrivals (loadgen) on every machine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "ns_rng.h"

/* splitmix64 from state 1234567: the reference implementation's first outputs */
static void test_splitmix64(void **state) {
  (void)state;
  uint64_t x = 1234567;
  assert_true(ns_splitmix64(&x) == 6457827717110365317ull);
  assert_true(ns_splitmix64(&x) == 3203168211198807973ull);
  assert_true(ns_splitmix64(&x) == 9817491932198370423ull);
}

/* xoshiro256** from the state {1, 2, 3, 4}: the reference implementation's first outputs */
static void test_xoshiro_state(void **state) {
  (void)state;
  ns_rng g = {{1, 2, 3, 4}};
  assert_true(ns_rng_next(&g) == 11520ull);
  assert_true(ns_rng_next(&g) == 0ull);
  assert_true(ns_rng_next(&g) == 1509978240ull);
}

/* seeding: four splitmix64 values of the seed make the state */
static void test_seed(void **state) {
  (void)state;
  ns_rng g;
  ns_rng_seed(&g, 42);
  uint64_t x = 42;
  for (int i = 0; i < 4; i++)
    assert_true(g.s[i] == ns_splitmix64(&x));
  assert_true(ns_rng_next(&g) == 1546998764402558742ull);
  assert_true(ns_rng_next(&g) == 6990951692964543102ull);
  assert_true(ns_rng_next(&g) == 12544586762248559009ull);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_splitmix64),
      cmocka_unit_test(test_xoshiro_state),
      cmocka_unit_test(test_seed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
