/* lg_stats.c — RNG, arrival gaps, length draws and percentile summaries for the load
 * generator (lg_stats.h). Deterministic for a seed: runs are reproducible. */
#include "lg_stats.h"

#include <math.h>
#include <stdlib.h>

/* ---- RNG --------------------------------------------------------------------------------- */

double lg_rng_uniform(ns_rng *g) {
  /* 53 random bits, centred in their cell: never exactly 0 (log) or 1 */
  return ((double)(ns_rng_next(g) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double lg_rng_normal(ns_rng *g) {
  /* Marsaglia's polar method; the second value is dropped to keep the stream simple */
  for (;;) {
    double u = 2 * lg_rng_uniform(g) - 1, v = 2 * lg_rng_uniform(g) - 1, s = u * u + v * v;
    if (s > 0 && s < 1) return u * sqrt(-2 * log(s) / s);
  }
}

double lg_rng_exp(ns_rng *g, double mean) {
  return -log(lg_rng_uniform(g)) * mean;
}

double lg_rng_gamma(ns_rng *g, double shape, double scale) {
  if (shape <= 0 || scale <= 0) return 0;
  if (shape < 1) /* boost: Gamma(a) = Gamma(a+1) * U^(1/a) */
    return lg_rng_gamma(g, shape + 1, scale) * pow(lg_rng_uniform(g), 1 / shape);
  /* Marsaglia & Tsang (2000) */
  double d = shape - 1.0 / 3, c = 1 / sqrt(9 * d);
  for (;;) {
    double x = lg_rng_normal(g), v = 1 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = lg_rng_uniform(g);
    if (u < 1 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1 - v + log(v)))
      return d * v * scale;
  }
}

double lg_gap_s(ns_rng *g, double rate, double burstiness) {
  if (rate <= 0) return 0;
  if (burstiness == 1) return lg_rng_exp(g, 1 / rate);
  return lg_rng_gamma(g, burstiness, 1 / (rate * burstiness));
}

int lg_len_draw(ns_rng *g, lg_len_dist d, int mean, double spread) {
  double x = mean;
  if (d == LG_LEN_UNIFORM)
    x = mean * (1 - spread) + lg_rng_uniform(g) * (2 * spread * mean);
  else if (d == LG_LEN_NORMAL)
    x = mean + lg_rng_normal(g) * spread * mean;
  x = floor(x + 0.5);
  return x < 1 ? 1 : x > 1e9 ? 1000000000 : (int)x;
}

/* ---- summaries --------------------------------------------------------------------------- */

double lg_percentile(const double *v, size_t n, double p) {
  if (n == 0) return 0;
  if (p <= 0) return v[0];
  if (p >= 100) return v[n - 1];
  double rank = p / 100 * (double)(n - 1);
  size_t lo = (size_t)rank;
  if (lo + 1 >= n) return v[n - 1];
  return v[lo] + (rank - (double)lo) * (v[lo + 1] - v[lo]);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void lg_summarize(double *v, size_t n, lg_summary *out) {
  *out = (lg_summary){.n = n};
  if (n == 0) return;
  qsort(v, n, sizeof *v, cmp_double);
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += v[i];
  double mean = sum / (double)n, ss = 0;
  for (size_t i = 0; i < n; i++)
    ss += (v[i] - mean) * (v[i] - mean);
  out->mean = mean;
  out->std = sqrt(ss / (double)n); /* population, as numpy's std */
  out->min = v[0];
  out->max = v[n - 1];
  out->p50 = lg_percentile(v, n, 50);
  out->p90 = lg_percentile(v, n, 90);
  out->p95 = lg_percentile(v, n, 95);
  out->p99 = lg_percentile(v, n, 99);
}

double lg_tpot(double e2e, double ttft, long output_tokens) {
  return output_tokens < 2 ? -1 : (e2e - ttft) / (double)(output_tokens - 1);
}
