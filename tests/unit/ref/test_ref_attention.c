/* test_ref_attention.c — ref_attention over a paged cache with shuffled page ids, GQA and a
 * ragged batch, against dense causal attention in double; head-range splits agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ref/attention.h"
#include "ref_util.h"

#include <stdlib.h>
#include <string.h>

enum { H = 6, KV = 2, D = 12, PT = 4, NSEQ = 4, POOL = 64, MAXPG = 16 };

static void run_case(uint64_t seed, int split) {
  rng r = {seed};
  /* per sequence: tokens already cached and new tokens (one prefill from 0, one decode,
   * one chunk after a cached prefix, one single-token sequence) */
  int pos0[NSEQ] = {0, 37, 9, 0}, n_new[NSEQ] = {11, 1, 6, 1};
  int32_t tok0[NSEQ], bt[NSEQ * MAXPG];
  int T = 0;
  for (int s = 0; s < NSEQ; s++)
    tok0[s] = T, T += n_new[s];
  /* page ids: a shuffled pool, so consecutive positions live in scattered pages */
  int32_t perm[POOL];
  for (int i = 0; i < POOL; i++)
    perm[i] = i;
  for (int i = POOL - 1; i > 0; i--) {
    int j = rng_int(&r, i + 1), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int next = 0;
  for (int s = 0; s < NSEQ; s++)
    for (int p = 0; p < MAXPG; p++)
      bt[s * MAXPG + p] = perm[next++ % POOL];
  /* dense per-sequence K, V, filled into the paged cache */
  size_t slots = (size_t)POOL * PT, row = KV * D;
  float *kc = malloc(slots * row * 4), *vc = malloc(slots * row * 4);
  rng_fill(&r, kc, slots * row, -1, 1);
  rng_fill(&r, vc, slots * row, -1, 1);
  int ldq = (H + 2 * KV) * D, ldo = H * D + 1;
  float *q = malloc((size_t)T * ldq * 4), *out = malloc((size_t)T * ldo * 4);
  rng_fill(&r, q, (size_t)T * ldq, -2, 2);
  for (int i = 0; i < T * ldo; i++)
    out[i] = -999.0f;
  float scale = 1.0f / sqrtf((float)D);
  if (split) {
    ref_attention(out, ldo, q, ldq, NSEQ, tok0, n_new, pos0, bt, MAXPG, kc, vc, PT, H, KV, D, scale,
                  0, 1);
    ref_attention(out, ldo, q, ldq, NSEQ, tok0, n_new, pos0, bt, MAXPG, kc, vc, PT, H, KV, D, scale,
                  1, H);
  } else {
    ref_attention(out, ldo, q, ldq, NSEQ, tok0, n_new, pos0, bt, MAXPG, kc, vc, PT, H, KV, D, scale,
                  0, H);
  }
  for (int s = 0; s < NSEQ; s++) {
    for (int i = 0; i < n_new[s]; i++) {
      int t = tok0[s] + i, p = pos0[s] + i;
      for (int h = 0; h < H; h++) {
        int kvh = h / (H / KV);
        double sc[64], m = -1e300, sum = 0, want[D] = {0};
        for (int j = 0; j <= p; j++) {
          size_t sl = (size_t)bt[s * MAXPG + j / PT] * PT + j % PT;
          double acc = 0;
          for (int d = 0; d < D; d++)
            acc += (double)q[t * ldq + h * D + d] * kc[sl * row + kvh * D + d];
          sc[j] = acc / sqrt((double)D);
          m = sc[j] > m ? sc[j] : m;
        }
        for (int j = 0; j <= p; j++)
          sum += exp(sc[j] - m);
        for (int j = 0; j <= p; j++) {
          size_t sl = (size_t)bt[s * MAXPG + j / PT] * PT + j % PT;
          for (int d = 0; d < D; d++)
            want[d] += exp(sc[j] - m) / sum * vc[sl * row + kvh * D + d];
        }
        char what[64];
        snprintf(what, sizeof what, "attention seq %d tok %d head %d", s, i, h);
        assert_true(max_rel_err(what, out + t * ldo + h * D, want, D, 1e-2) < 1e-5);
      }
      assert_true(out[t * ldo + H * D] == -999.0f); /* padding untouched */
    }
  }
  free(kc), free(vc), free(q), free(out);
}

static void test_attention_paged_gqa(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 5; seed++)
    run_case(seed, 0);
}

static void test_attention_head_split(void **state) {
  (void)state;
  run_case(11, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attention_paged_gqa),
      cmocka_unit_test(test_attention_head_split),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
