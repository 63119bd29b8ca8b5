/* test_ref_ops.c — ref_embed, ref_add_rmsnorm, ref_matmul and ref_swiglu against naive
 * double-precision computations on random inputs, at sizes that are not multiples of 8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ns_err.h"
#include "ref/embed.h"
#include "ref/matmul.h"
#include "ref/rmsnorm.h"
#include "ref/swiglu.h"
#include "ref_util.h"

#include <stdlib.h>
#include <string.h>

static const float POISON = 12345.0f;

static void test_embed(void **state) {
  (void)state;
  rng r = {1};
  int V = 11, H = 13, T = 5, ld = 16;
  float table[11 * 13], out[5 * 16];
  rng_fill(&r, table, (size_t)V * H, -1, 1);
  for (int i = 0; i < T * ld; i++)
    out[i] = POISON;
  int32_t ids[5] = {3, 0, 10, 3, 7};
  assert_int_equal(ref_embed(out, ld, table, ids, T, H, V), 0);
  for (int t = 0; t < T; t++) {
    for (int h = 0; h < H; h++)
      assert_true(out[t * ld + h] == table[ids[t] * H + h]);
    for (int h = H; h < ld; h++)
      assert_true(out[t * ld + h] == POISON);
  }
  int32_t bad[2] = {1, 11};
  assert_int_equal(ref_embed(out, ld, table, bad, 2, H, V), NS_ERANGE);
  bad[1] = -1;
  assert_int_equal(ref_embed(out, ld, table, bad, 2, H, V), NS_ERANGE);
}

static void check_rmsnorm(int rows, int dim, int first, int alias) {
  rng r = {(uint64_t)(rows * 1000 + dim * 10 + first + 7)};
  int ld = dim + 3;
  size_t n = (size_t)rows * ld;
  float *x = malloc(n * 4), *res = malloc(n * 4), *out = malloc(n * 4), *w = malloc(dim * 4);
  double *want_out = malloc(n * 8), *want_res = malloc(n * 8);
  rng_fill(&r, x, n, -2, 2);
  rng_fill(&r, res, n, -2, 2);
  rng_fill(&r, w, (size_t)dim, 0.5f, 1.5f);
  float eps = 1e-5f;
  for (int i = 0; i < rows; i++) {
    double ss = 0;
    for (int j = 0; j < dim; j++) {
      double v = (first ? 0.0 : res[i * ld + j]) + x[i * ld + j];
      want_res[i * ld + j] = v;
      ss += v * v;
    }
    double inv = 1.0 / sqrt(ss / dim + eps);
    for (int j = 0; j < dim; j++)
      want_out[i * ld + j] = want_res[i * ld + j] * inv * w[j];
  }
  float *o = alias ? x : out;
  ref_add_rmsnorm(o, res, x, w, rows, dim, ld, eps, first);
  for (int i = 0; i < rows; i++) {
    char what[64];
    snprintf(what, sizeof what, "rmsnorm out row %d", i);
    assert_true(max_rel_err(what, o + i * ld, want_out + i * ld, (size_t)dim, 1e-3) < 1e-5);
    snprintf(what, sizeof what, "rmsnorm residual row %d", i);
    assert_true(max_rel_err(what, res + i * ld, want_res + i * ld, (size_t)dim, 1e-3) < 1e-6);
  }
  free(x), free(res), free(out), free(w), free(want_out), free(want_res);
}

static void test_rmsnorm(void **state) {
  (void)state;
  int dims[] = {1, 7, 64, 129};
  for (int d = 0; d < 4; d++)
    for (int first = 0; first < 2; first++)
      for (int alias = 0; alias < 2; alias++)
        check_rmsnorm(3, dims[d], first, alias);
}

static void check_matmul(int T, int N, int K, int with_bias) {
  rng r = {(uint64_t)(T * 7919 + N * 131 + K + with_bias)};
  int ldx = K + 2, ldy = N + 5;
  float *x = malloc((size_t)T * ldx * 4), *w = malloc((size_t)N * K * 4), *b = malloc(N * 4);
  float *y = malloc((size_t)T * ldy * 4), *y2 = malloc((size_t)T * ldy * 4);
  double *want = malloc((size_t)T * N * 8);
  rng_fill(&r, x, (size_t)T * ldx, -1, 1);
  rng_fill(&r, w, (size_t)N * K, -1, 1);
  rng_fill(&r, b, (size_t)N, -1, 1);
  for (int i = 0; i < T * ldy; i++)
    y[i] = y2[i] = POISON;
  for (int t = 0; t < T; t++)
    for (int n = 0; n < N; n++) {
      double acc = with_bias ? b[n] : 0;
      for (int k = 0; k < K; k++)
        acc += (double)x[t * ldx + k] * w[n * K + k];
      want[t * N + n] = acc;
    }
  ref_matmul(y, ldy, x, ldx, w, with_bias ? b : NULL, T, N, K);
  /* the same product split by output columns, as the CPU backend's threads do */
  int split = N / 2 / 4 * 4;
  ref_matmul(y2, ldy, x, ldx, w, with_bias ? b : NULL, T, split, K);
  ref_matmul(y2 + split, ldy, x, ldx, w + (size_t)split * K, with_bias ? b + split : NULL, T,
             N - split, K);
  for (int t = 0; t < T; t++) {
    char what[80];
    snprintf(what, sizeof what, "matmul T=%d N=%d K=%d row %d", T, N, K, t);
    /* error relative to the sum of |terms| scale: sqrt(K) random terms of size ~1 */
    assert_true(max_rel_err(what, y + t * ldy, want + t * N, (size_t)N, sqrt((double)K)) < 1e-5);
    for (int n = N; n < ldy; n++)
      assert_true(y[t * ldy + n] == POISON);
    assert_memory_equal(y + t * ldy, y2 + t * ldy, (size_t)ldy * 4);
  }
  free(x), free(w), free(b), free(y), free(y2), free(want);
}

static void test_matmul(void **state) {
  (void)state;
  int Ts[] = {1, 3, 9}, Ns[] = {1, 5, 13, 64, 67}, Ks[] = {1, 7, 8, 33, 200};
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 5; b++)
      for (int c = 0; c < 5; c++)
        for (int bias = 0; bias < 2; bias++)
          check_matmul(Ts[a], Ns[b], Ks[c], bias);
}

static void test_swiglu(void **state) {
  (void)state;
  rng r = {99};
  int T = 4, I = 37, ldg = 2 * I + 1, ldo = I + 2;
  float gu[4 * 75], out[4 * 39];
  double want[4 * 37];
  rng_fill(&r, gu, sizeof gu / 4, -6, 6);
  for (int i = 0; i < T * ldo; i++)
    out[i] = POISON;
  for (int t = 0; t < T; t++)
    for (int i = 0; i < I; i++) {
      double g = gu[t * ldg + i], u = gu[t * ldg + I + i];
      want[t * I + i] = g / (1.0 + exp(-g)) * u;
    }
  ref_swiglu(out, ldo, gu, ldg, T, I);
  for (int t = 0; t < T; t++) {
    assert_true(max_rel_err("swiglu", out + t * ldo, want + t * I, (size_t)I, 1e-3) < 1e-6);
    for (int i = I; i < ldo; i++)
      assert_true(out[t * ldo + i] == POISON);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embed),
      cmocka_unit_test(test_rmsnorm),
      cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_swiglu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
