/* test_ref_rope.c — ref_rope_inv_freq (default, linear, llama3) against the formulas in
 * double, and ref_rope_kv_write against a direct rotate-half rotation and cache write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ref/rope_kv.h"
#include "ref_util.h"

#include <stdlib.h>
#include <string.h>

static const double PI = 3.14159265358979323846;

/* The formulas as papers and HF's docs state them, in double. */
static double want_inv_freq(int i, int d, double theta, int kind, double factor, double lo,
                            double hi, double orig) {
  double inv = pow(theta, -2.0 * i / d);
  if (kind == REF_ROPE_LINEAR) return inv / factor;
  if (kind == REF_ROPE_LLAMA3) {
    double wavelen = 2 * PI / inv;
    if (wavelen < orig / hi) return inv;          /* high frequency: unchanged */
    if (wavelen > orig / lo) return inv / factor; /* low frequency: scaled */
    double smooth = (orig / wavelen - lo) / (hi - lo);
    return (1 - smooth) * inv / factor + smooth * inv;
  }
  return inv;
}

static void check_inv_freq(int d, float theta, int kind, float factor, float lo, float hi, int orig,
                           int *n_low, int *n_mid, int *n_high) {
  float inv[512];
  ref_rope_inv_freq(inv, d, theta, kind, factor, lo, hi, orig);
  for (int i = 0; i < d / 2; i++) {
    double w = want_inv_freq(i, d, theta, kind, factor, lo, hi, orig);
    if (fabs(inv[i] - w) > 2e-6 * w) printf("inv_freq[%d] = %.9g, want %.9g\n", i, inv[i], w);
    assert_true(fabs(inv[i] - w) <= 2e-6 * w);
    if (kind == REF_ROPE_LLAMA3) {
      double wl = 2 * PI / pow(theta, -2.0 * i / d);
      *n_high += wl < orig / hi;
      *n_low += wl > orig / lo;
      *n_mid += !(wl < orig / hi) && !(wl > orig / lo);
    }
  }
}

static void test_inv_freq(void **state) {
  (void)state;
  int a = 0, b = 0, c = 0;
  check_inv_freq(64, 10000.0f, REF_ROPE_DEFAULT, 1, 1, 1, 0, &a, &b, &c);
  check_inv_freq(128, 1000000.0f, REF_ROPE_DEFAULT, 1, 1, 1, 0, &a, &b, &c);
  check_inv_freq(64, 10000.0f, REF_ROPE_LINEAR, 4.0f, 1, 1, 0, &a, &b, &c);
  /* Llama 3.1's settings; the check also makes sure all three bands are exercised */
  check_inv_freq(128, 500000.0f, REF_ROPE_LLAMA3, 8.0f, 1.0f, 4.0f, 8192, &a, &b, &c);
  assert_true(a > 0 && b > 0 && c > 0);
  a = b = c = 0;
  check_inv_freq(64, 500000.0f, REF_ROPE_LLAMA3, 32.0f, 1.0f, 4.0f, 8192, &a, &b, &c);
  assert_true(a > 0 && b > 0 && c > 0);
}

static void check_rope(int kind) {
  rng r = {(uint64_t)(77 + kind)};
  enum { H = 3, KV = 2, D = 10, T = 6, PT = 4, PAGES = 5 };
  int ld = (H + 2 * KV) * D + 3;
  float qkv[T * ((H + 2 * KV) * D + 3)], orig[T * ((H + 2 * KV) * D + 3)];
  float kc[PAGES * PT * KV * D], vc[PAGES * PT * KV * D], inv[D / 2];
  rng_fill(&r, qkv, sizeof qkv / 4, -1, 1);
  memcpy(orig, qkv, sizeof qkv);
  for (size_t i = 0; i < sizeof kc / 4; i++)
    kc[i] = vc[i] = 777.0f;
  int32_t pos[T] = {0, 1, 5, 17, 100, 2047};
  int32_t slot[T] = {3, 7, -1, 12, 0, 19};
  ref_rope_inv_freq(inv, D, 10000.0f, kind, 2.0f, 1.0f, 4.0f, 64);
  ref_rope_kv_write(qkv, ld, T, pos, slot, inv, H, KV, D, kc, vc);
  for (int t = 0; t < T; t++) {
    const float *o = orig + t * ld, *g = qkv + t * ld;
    for (int h = 0; h < H + KV; h++) { /* q heads then k heads rotate; v stays */
      for (int i = 0; i < D / 2; i++) {
        double w = want_inv_freq(i, D, 10000.0, kind, 2.0, 1.0, 4.0, 64);
        double ang = pos[t] * w, a = o[h * D + i], b = o[h * D + i + D / 2];
        double w0 = a * cos(ang) - b * sin(ang), w1 = b * cos(ang) + a * sin(ang);
        assert_true(fabs(g[h * D + i] - w0) < 2e-3);
        assert_true(fabs(g[h * D + i + D / 2] - w1) < 2e-3);
      }
    }
    for (int j = (H + KV) * D; j < ld; j++)
      assert_true(g[j] == o[j]); /* v and padding */
    if (slot[t] < 0) continue;
    assert_memory_equal(kc + slot[t] * KV * D, g + H * D, KV * D * 4);
    assert_memory_equal(vc + slot[t] * KV * D, g + (H + KV) * D, KV * D * 4);
  }
  /* slots not named stay untouched */
  int used[PAGES * PT] = {0};
  for (int t = 0; t < T; t++)
    if (slot[t] >= 0) used[slot[t]] = 1;
  for (int s = 0; s < PAGES * PT; s++)
    if (!used[s])
      for (int j = 0; j < KV * D; j++)
        assert_true(kc[s * KV * D + j] == 777.0f);
}

static void test_rope_default(void **state) {
  (void)state, check_rope(REF_ROPE_DEFAULT);
}
static void test_rope_linear(void **state) {
  (void)state, check_rope(REF_ROPE_LINEAR);
}
static void test_rope_llama3(void **state) {
  (void)state, check_rope(REF_ROPE_LLAMA3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_inv_freq),
      cmocka_unit_test(test_rope_default),
      cmocka_unit_test(test_rope_linear),
      cmocka_unit_test(test_rope_llama3),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
