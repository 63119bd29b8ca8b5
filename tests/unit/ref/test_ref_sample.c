/* test_ref_sample.c — the reference sampler: Philox known answers, greedy = argmax,
 * top-k 1 = greedy, seeded reproducibility, which tokens top-k / top-p / min-p exclude
 * and how often the rest come up (fixed seed, many draws), penalty formulas, the logit bias,
 * logprobs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ns_err.h"
#include "ref/sample.h"
#include "ref_util.h"

#include <stdlib.h>
#include <string.h>

enum { V = 1000 };

static void *scratch;

static int setup(void **state) {
  (void)state;
  scratch = calloc(1, ref_sample_scratch_bytes(V));
  return scratch ? 0 : -1;
}
static int teardown(void **state) {
  (void)state;
  free(scratch);
  return 0;
}

static int32_t draw(const float *logits, int vocab, const samp_params *p, uint64_t step) {
  int32_t id = -1;
  float lp;
  assert_int_equal(ref_sample(logits, vocab, p, NULL, 0, 0, step, scratch, &id, &lp, NULL, NULL),
                   0);
  assert_true(id >= 0 && id < vocab);
  return id;
}

static void test_philox_kat(void **state) {
  (void)state;
  /* Random123 tests/kat_vectors, philox4x32 10 */
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
       0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
       0x94fdcceb, 0x5001e420, 0x24126ea1},
  };
  for (int i = 0; i < 3; i++) {
    uint32_t out[4];
    ref_philox4x32_10(kat[i], kat[i] + 4, out);
    for (int j = 0; j < 4; j++)
      assert_int_equal(out[j], kat[i][6 + j]);
  }
  /* the step's uniform is word 0 of (counter = step, key = seed), 24 bits */
  uint32_t ctr[4] = {5, 0, 0, 0}, key[2] = {42, 0}, out[4];
  ref_philox4x32_10(ctr, key, out);
  assert_true(ref_sample_uniform(42, 5) == (float)(out[0] >> 8) / 16777216.0f);
}

static void test_greedy_is_argmax(void **state) {
  (void)state;
  rng r = {3};
  float l[V];
  samp_params p = samp_params_default();
  p.temperature = 0;
  for (int it = 0; it < 20; it++) {
    rng_fill(&r, l, V, -10, 10);
    int best = 0;
    for (int i = 1; i < V; i++)
      best = l[i] > l[best] ? i : best;
    assert_int_equal(draw(l, V, &p, (uint64_t)it), best);
  }
  /* ties: the lowest id, as torch.argmax */
  for (int i = 0; i < V; i++)
    l[i] = 0;
  l[17] = l[400] = 3;
  assert_int_equal(draw(l, V, &p, 0), 17);
}

static void test_topk1_is_greedy(void **state) {
  (void)state;
  rng r = {4};
  float l[V];
  samp_params p = samp_params_default(), g = samp_params_default();
  p.top_k = 1;
  p.temperature = 1.7f;
  g.temperature = 0;
  for (int it = 0; it < 50; it++) {
    rng_fill(&r, l, V, -3, 3);
    p.seed = rng_u64(&r);
    assert_int_equal(draw(l, V, &p, (uint64_t)it), draw(l, V, &g, 0));
  }
}

static void test_seeded_reproducible(void **state) {
  (void)state;
  rng r = {5};
  float l[V];
  rng_fill(&r, l, V, -2, 2);
  samp_params a = samp_params_default();
  a.seed = 1234;
  a.top_p = 0.9f;
  int32_t first[64], differs = 0;
  for (int s = 0; s < 64; s++)
    first[s] = draw(l, V, &a, (uint64_t)s);
  for (int s = 0; s < 64; s++)
    assert_int_equal(draw(l, V, &a, (uint64_t)s), first[s]);
  a.seed = 1235;
  for (int s = 0; s < 64; s++)
    differs += draw(l, V, &a, (uint64_t)s) != first[s];
  assert_true(differs > 32); /* another seed is another stream */
}

/* Draw n times (steps 0..n-1) and count ids; the logits put the given probabilities on
 * ids 10, 20, 30, ... and almost nothing on the rest. */
static void histogram(const double *probs, int k, const samp_params *p, int n, int *count) {
  float l[V];
  for (int i = 0; i < V; i++)
    l[i] = -1e4f;
  for (int j = 0; j < k; j++)
    l[10 * (j + 1)] = (float)log(probs[j]);
  memset(count, 0, V * sizeof *count);
  for (int s = 0; s < n; s++)
    count[draw(l, V, p, (uint64_t)s)]++;
}

/* counts of the kept ids match want (renormalized) within 4.5 sigma; others never occur */
static void expect_freqs(const int *count, const double *want, int k, int n) {
  double total = 0;
  for (int j = 0; j < k; j++)
    total += want[j];
  int seen = 0;
  for (int j = 0; j < k; j++) {
    double pj = want[j] / total, c = count[10 * (j + 1)];
    double sigma = sqrt(n * pj * (1 - pj)) + 1e-9;
    if (fabs(c - n * pj) > 4.5 * sigma + (pj == 0 ? 0 : 1))
      printf("id %d: %g draws, want %g\n", 10 * (j + 1), c, n * pj);
    assert_true(fabs(c - n * pj) <= 4.5 * sigma + (pj == 0 ? 0 : 1));
    seen += (int)c;
  }
  assert_int_equal(seen, n);
}

static void test_top_p(void **state) {
  (void)state;
  double probs[5] = {0.4, 0.25, 0.2, 0.1, 0.05};
  int count[V], n = 20000;
  samp_params p = samp_params_default();
  p.seed = 7;
  p.top_p = 0.8f; /* mass above: 0, .4, .65 (< .8, kept), .85 and .95 (cut) */
  histogram(probs, 5, &p, n, count);
  expect_freqs(count, (double[]){0.4, 0.25, 0.2, 0, 0}, 5, n);
  p.top_p = 0.6f; /* keeps the first two */
  histogram(probs, 5, &p, n, count);
  expect_freqs(count, (double[]){0.4, 0.25, 0, 0, 0}, 5, n);
  p.top_p = 1.0f; /* off: all five in proportion */
  histogram(probs, 5, &p, n, count);
  expect_freqs(count, probs, 5, n);
}

static void test_min_p(void **state) {
  (void)state;
  double probs[5] = {0.4, 0.25, 0.2, 0.1, 0.05};
  int count[V], n = 20000;
  samp_params p = samp_params_default();
  p.seed = 8;
  p.min_p = 0.3f; /* threshold 0.12: keeps .4 .25 .2 */
  histogram(probs, 5, &p, n, count);
  expect_freqs(count, (double[]){0.4, 0.25, 0.2, 0, 0}, 5, n);
  p.min_p = 0.2f; /* threshold 0.08: keeps .1 too */
  histogram(probs, 5, &p, n, count);
  expect_freqs(count, (double[]){0.4, 0.25, 0.2, 0.1, 0}, 5, n);
}

static void test_top_k_and_temperature(void **state) {
  (void)state;
  double probs[5] = {0.4, 0.25, 0.2, 0.1, 0.05};
  int count[V], n = 20000;
  samp_params p = samp_params_default();
  p.seed = 9;
  p.top_k = 3;
  histogram(probs, 5, &p, n, count);
  expect_freqs(count, (double[]){0.4, 0.25, 0.2, 0, 0}, 5, n);
  /* temperature 0.5 squares the probabilities before renormalizing */
  p.top_k = 0;
  p.temperature = 0.5f;
  histogram(probs, 5, &p, n, count);
  double sq[5];
  for (int j = 0; j < 5; j++)
    sq[j] = probs[j] * probs[j];
  expect_freqs(count, sq, 5, n);
}

static void test_penalties(void **state) {
  (void)state;
  rng r = {10};
  float l[V], orig[V];
  uint32_t *counts = calloc(V, sizeof *counts);
  rng_fill(&r, orig, V, -5, 5);
  orig[1] = 2.0f, orig[2] = -2.0f, orig[3] = 1.5f, orig[4] = -1.0f, orig[5] = 0.5f;
  /* prompt: 1 2 1; generated: 3 3 4 2 */
  int32_t hist[7] = {1, 2, 1, 3, 3, 4, 2};
  samp_params p = samp_params_default();
  p.repetition_penalty = 1.25f;
  memcpy(l, orig, sizeof l);
  assert_int_equal(ref_sample_penalize(l, V, &p, hist, 3, 7, counts), 0);
  assert_true(l[1] == 2.0f / 1.25f);  /* positive: divided, once despite repeats */
  assert_true(l[2] == -2.0f * 1.25f); /* negative: multiplied */
  assert_true(l[3] == 1.5f / 1.25f);
  assert_true(l[4] == -1.0f * 1.25f);
  for (int i = 5; i < V; i++)
    assert_true(l[i] == orig[i]);
  p = samp_params_default();
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  memcpy(l, orig, sizeof l);
  assert_int_equal(ref_sample_penalize(l, V, &p, hist, 3, 7, counts), 0);
  assert_true(l[1] == orig[1]);                              /* prompt only: no OpenAI penalty */
  assert_true(fabsf(l[2] - (-2.0f - 0.5f - 0.25f)) < 1e-6f); /* once in generated */
  assert_true(fabsf(l[3] - (1.5f - 2 * 0.5f - 0.25f)) < 1e-6f);
  assert_true(fabsf(l[4] - (-1.0f - 0.5f - 0.25f)) < 1e-6f);
  for (int i = 5; i < V; i++)
    assert_true(l[i] == orig[i]);
  for (int i = 0; i < V; i++)
    assert_int_equal(counts[i], 0); /* scratch left clean */
  int32_t bad[1] = {V};
  assert_int_equal(ref_sample_penalize(l, V, &p, bad, 0, 1, counts), NS_ERANGE);
  /* and the sampler applies them: a penalized argmax loses to the runner-up */
  float m[V];
  for (int i = 0; i < V; i++)
    m[i] = 0;
  m[7] = 3.0f, m[8] = 2.9f;
  samp_params g = samp_params_default();
  g.temperature = 0;
  int32_t h2[1] = {7}, id;
  float lp;
  g.repetition_penalty = 1.1f;
  assert_int_equal(ref_sample(m, V, &g, h2, 1, 1, 0, scratch, &id, &lp, NULL, NULL), 0);
  assert_int_equal(id, 8);
  free(counts);
}

static void test_logit_bias(void **state) {
  (void)state;
  rng r = {11};
  float l[V], orig[V];
  uint32_t *counts = calloc(V, sizeof *counts);
  rng_fill(&r, orig, V, -5, 5);
  orig[7] = 4.0f, orig[9] = 8.0f;
  /* added to the listed logits, before the penalties (3 is in the history, 9 is not) */
  samp_bias b[3] = {{3, 2.5f}, {7, -100.0f}, {9, 0.75f}};
  int32_t hist[2] = {3, 3};
  samp_params p = samp_params_default();
  p.bias = b, p.n_bias = 3, p.repetition_penalty = 2.0f;
  memcpy(l, orig, sizeof l);
  assert_int_equal(ref_sample_penalize(l, V, &p, hist, 0, 2, counts), 0);
  float b3 = orig[3] + 2.5f;
  assert_true(l[3] == (b3 < 0 ? b3 * 2.0f : b3 / 2.0f));
  assert_true(l[7] == 4.0f - 100.0f);
  assert_true(l[9] == 8.75f);
  for (int i = 0; i < V; i++)
    if (i != 3 && i != 7 && i != 9) assert_true(l[i] == orig[i]);
  /* greedy follows the bias; sampling never draws a token banned at -100 */
  samp_params g = samp_params_default();
  g.temperature = 0;
  assert_int_equal(draw(orig, V, &g, 0), 9);
  samp_bias up[1] = {{500, 20.0f}};
  g.bias = up, g.n_bias = 1;
  assert_int_equal(draw(orig, V, &g, 0), 500);
  float flat[V];
  for (int i = 0; i < V; i++)
    flat[i] = i < 4 ? 0.0f : -INFINITY;
  samp_bias ban[2] = {{1, -100.0f}, {2, -100.0f}};
  samp_params t = samp_params_default();
  t.bias = ban, t.n_bias = 2;
  int seen[4] = {0};
  for (int s = 0; s < 400; s++)
    seen[draw(flat, V, &t, (uint64_t)s)]++;
  assert_int_equal(seen[1] + seen[2], 0);
  assert_true(seen[0] > 150 && seen[3] > 150);
  /* an id outside the vocabulary: NS_ERANGE, logits untouched */
  samp_bias bad[1] = {{V, 1.0f}};
  p = samp_params_default();
  p.bias = bad, p.n_bias = 1;
  memcpy(l, orig, sizeof l);
  assert_int_equal(ref_sample_penalize(l, V, &p, NULL, 0, 0, counts), NS_ERANGE);
  assert_memory_equal(l, orig, sizeof l);
  free(counts);
}

static void test_logprobs(void **state) {
  (void)state;
  rng r = {12};
  float l[V];
  rng_fill(&r, l, V, -4, 4);
  samp_params p = samp_params_default();
  p.temperature = 0;
  p.n_logprobs = 5;
  int32_t id, top[5];
  float lp, tlp[5];
  assert_int_equal(ref_sample(l, V, &p, NULL, 0, 0, 0, scratch, &id, &lp, top, tlp), 0);
  double m = -1e300, s = 0;
  for (int i = 0; i < V; i++)
    m = l[i] > m ? l[i] : m;
  for (int i = 0; i < V; i++)
    s += exp(l[i] - m);
  double lse = m + log(s);
  assert_true(fabs(lp - (l[id] - lse)) < 1e-5);
  assert_int_equal(top[0], id);
  for (int j = 0; j < 5; j++) {
    assert_true(fabs(tlp[j] - (l[top[j]] - lse)) < 1e-5);
    if (j) assert_true(tlp[j] <= tlp[j - 1]);
    int above = 0; /* exactly j ids rank above the j-th */
    for (int i = 0; i < V; i++)
      above += l[i] > l[top[j]];
    assert_int_equal(above, j);
  }
  /* processed distribution: temperature 2 and top-k 10, renormalized over the 10 */
  p.temperature = 2.0f;
  p.top_k = 10;
  p.seed = 3;
  assert_int_equal(ref_sample(l, V, &p, NULL, 0, 0, 0, scratch, &id, &lp, top, tlp), 0);
  double sk = 0;
  /* the 10 largest logits, by sorting a copy */
  float c[V];
  memcpy(c, l, sizeof c);
  for (int j = 0; j < 10; j++) {
    int b = j;
    for (int i = j + 1; i < V; i++)
      b = c[i] > c[b] ? i : b;
    float t = c[j];
    c[j] = c[b], c[b] = t;
    sk += exp((c[j] - c[0]) / 2.0);
  }
  double lse2 = c[0] / 2.0 + log(sk);
  assert_true(l[id] >= c[9]);
  assert_true(fabs(lp - (l[id] / 2.0 - lse2)) < 1e-5);
  assert_true(fabs(tlp[0] - (c[0] / 2.0 - lse2)) < 1e-5);
}

static void test_bad_input(void **state) {
  (void)state;
  float l[V];
  for (int i = 0; i < V; i++)
    l[i] = -INFINITY;
  samp_params p = samp_params_default();
  int32_t id;
  float lp;
  assert_int_equal(ref_sample(l, V, &p, NULL, 0, 0, 0, scratch, &id, &lp, NULL, NULL), NS_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_philox_kat),
      cmocka_unit_test(test_greedy_is_argmax),
      cmocka_unit_test(test_topk1_is_greedy),
      cmocka_unit_test(test_seeded_reproducible),
      cmocka_unit_test(test_top_p),
      cmocka_unit_test(test_min_p),
      cmocka_unit_test(test_top_k_and_temperature),
      cmocka_unit_test(test_penalties),
      cmocka_unit_test(test_logit_bias),
      cmocka_unit_test(test_logprobs),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
