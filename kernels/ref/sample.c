/* sample.c — CPU reference sampler: logit bias, penalties, temperature, top-k / top-p / min-p cuts,
 * a counter-based Philox draw and logprobs. Entry points: ref_sample, ref_sample_penalize. */
#include "sample.h"

#include "ns_err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Philox4x32-10 ------------------------------------------------------------------ */

static inline void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  *lo = (uint32_t)p;
}

void ref_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c0, &hi0, &lo0);
    mulhilo(0xCD9E8D57u, c2, &hi1, &lo1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

float ref_sample_uniform(uint64_t seed, uint64_t step) {
  uint32_t ctr[4] = {(uint32_t)step, (uint32_t)(step >> 32), 0, 0};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t out[4];
  ref_philox4x32_10(ctr, key, out);
  return (float)(out[0] >> 8) * (1.0f / 16777216.0f);
}

/* ---- penalties ---------------------------------------------------------------------- */

#define SEEN_BIT 0x80000000u

int ref_sample_penalize(float *logits, int vocab, const samp_params *p, const int32_t *hist,
                        int n_prompt, int n_hist, uint32_t *counts) {
  for (int i = 0; i < n_hist; i++)
    if (hist[i] < 0 || hist[i] >= vocab) return NS_ERANGE;
  for (int i = 0; i < p->n_bias; i++)
    if (p->bias[i].id < 0 || p->bias[i].id >= vocab) return NS_ERANGE;
  for (int i = 0; i < p->n_bias; i++)
    logits[p->bias[i].id] += p->bias[i].bias;
  int rep = p->repetition_penalty != 1.0f;
  int pres_freq = p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
  if (!rep && !pres_freq) return 0;
  if (n_prompt > n_hist) n_prompt = n_hist;
  for (int i = n_prompt; i < n_hist; i++)
    counts[hist[i]]++;
  for (int i = 0; i < n_hist; i++) {
    uint32_t *c = &counts[hist[i]];
    if (*c & SEEN_BIT) continue;
    float *l = &logits[hist[i]];
    if (rep) *l = *l < 0.0f ? *l * p->repetition_penalty : *l / p->repetition_penalty;
    if (*c) *l -= (float)*c * p->frequency_penalty + p->presence_penalty;
    *c |= SEEN_BIT;
  }
  for (int i = 0; i < n_hist; i++)
    counts[hist[i]] = 0;
  return 0;
}

/* ---- cuts and draw ---------------------------------------------------------------------- */

typedef struct cand {
  float v;
  int32_t i;
} cand;

size_t ref_sample_scratch_bytes(int vocab) {
  /* [vocab] floats (padded to 8 bytes), [vocab] candidates, [vocab] counts */
  return (size_t)(vocab + (vocab & 1)) * sizeof(float) + (size_t)vocab * sizeof(cand) +
         (size_t)vocab * sizeof(uint32_t);
}

/* a ranks before b: larger value first, lower id on ties */
static inline int before(const cand *a, const cand *b) {
  return a->v > b->v || (a->v == b->v && a->i < b->i);
}

static int cand_cmp(const void *pa, const void *pb) {
  const cand *a = pa, *b = pb;
  return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* Reorder c[0..n) so that c[0..k) are the k first in rank order (unsorted). */
static void select_k(cand *c, int n, int k) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    /* median of three to the middle, then Lomuto partition around it */
    if (before(&c[mid], &c[lo])) {
      cand t = c[mid];
      c[mid] = c[lo];
      c[lo] = t;
    }
    if (before(&c[hi], &c[lo])) {
      cand t = c[hi];
      c[hi] = c[lo];
      c[lo] = t;
    }
    if (before(&c[hi], &c[mid])) {
      cand t = c[hi];
      c[hi] = c[mid];
      c[mid] = t;
    }
    cand piv = c[mid];
    c[mid] = c[hi];
    c[hi] = piv;
    int st = lo;
    for (int j = lo; j < hi; j++) {
      if (before(&c[j], &piv)) {
        cand t = c[j];
        c[j] = c[st];
        c[st] = t;
        st++;
      }
    }
    c[hi] = c[st];
    c[st] = piv;
    if (st == k - 1 || st == k) return;
    if (st < k)
      lo = st + 1;
    else
      hi = st - 1;
  }
}

/* Set the logits that top-k, top-p and min-p cut to -INFINITY. */
static void apply_cuts(float *v, int vocab, const samp_params *p, cand *c) {
  int n = 0;
  for (int i = 0; i < vocab; i++)
    if (v[i] > -INFINITY) c[n++] = (cand){v[i], i};
  if (p->top_k > 0 && p->top_k < n) {
    select_k(c, n, p->top_k);
    for (int j = p->top_k; j < n; j++)
      v[c[j].i] = -INFINITY;
    n = p->top_k;
  }
  if (p->top_p < 1.0f) {
    qsort(c, (size_t)n, sizeof *c, cand_cmp);
    float m = c[0].v, total = 0.0f;
    for (int j = 0; j < n; j++)
      total += expf(c[j].v - m);
    float cum = 0.0f, lim = p->top_p * total;
    for (int j = 0; j < n; j++) {
      if (j > 0 && cum >= lim) v[c[j].i] = -INFINITY;
      cum += expf(c[j].v - m);
    }
  }
  if (p->min_p > 0.0f) {
    float m = -INFINITY;
    for (int i = 0; i < vocab; i++)
      m = v[i] > m ? v[i] : m;
    for (int i = 0; i < vocab; i++)
      if (v[i] > -INFINITY && expf(v[i] - m) < p->min_p) v[i] = -INFINITY;
  }
}

int ref_sample(const float *logits, int vocab, const samp_params *p, const int32_t *hist,
               int n_prompt, int n_hist, uint64_t step, void *scratch, int32_t *id, float *logprob,
               int32_t *top_ids, float *top_logprobs) {
  float *v = scratch;
  cand *c = (cand *)(v + vocab + (vocab & 1)); /* 8-byte aligned */
  uint32_t *counts = (uint32_t *)(c + vocab);
  memcpy(v, logits, (size_t)vocab * sizeof *v);
  int rc = ref_sample_penalize(v, vocab, p, hist, n_prompt, n_hist, counts);
  if (rc) return rc;

  if (p->temperature > 0.0f) {
    for (int i = 0; i < vocab; i++)
      v[i] = v[i] / p->temperature;
    apply_cuts(v, vocab, p, c);
  }
  int best = -1;
  for (int i = 0; i < vocab; i++)
    if (v[i] > -INFINITY && (best < 0 || v[i] > v[best])) best = i;
  if (best < 0 || isnan(v[best])) return NS_EINVAL;
  float m = v[best], total = 0.0f;
  for (int i = 0; i < vocab; i++)
    total += expf(v[i] - m);

  int pick = best;
  if (p->temperature > 0.0f) {
    float target = ref_sample_uniform(p->seed, step) * total, cum = 0.0f;
    for (int i = 0; i < vocab; i++) {
      if (v[i] == -INFINITY) continue;
      pick = i;
      cum += expf(v[i] - m);
      if (cum > target) break;
    }
  }
  float lse = m + logf(total);
  *id = pick;
  *logprob = v[pick] - lse;

  int n = p->n_logprobs < vocab ? p->n_logprobs : vocab;
  if (n > SAMP_MAX_LOGPROBS) n = SAMP_MAX_LOGPROBS;
  if (n <= 0 || !top_ids || !top_logprobs) return 0;
  cand top[SAMP_MAX_LOGPROBS];
  int have = 0;
  for (int i = 0; i < vocab; i++) {
    cand x = {v[i], i};
    if (have == n && !before(&x, &top[n - 1])) continue;
    int j = have < n ? have++ : n - 1;
    while (j > 0 && before(&x, &top[j - 1])) {
      top[j] = top[j - 1];
      j--;
    }
    top[j] = x;
  }
  for (int j = 0; j < n; j++) {
    top_ids[j] = top[j].i;
    top_logprobs[j] = top[j].v - lse;
  }
  return 0;
}
