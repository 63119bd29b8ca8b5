/* lg_stats.h — the load generator's numbers: a seeded RNG, the arrival-gap and length
 * distributions, percentiles and summaries, the TPOT formula. Pure C, no I/O; any thread. */
#ifndef LG_STATS_H
#define LG_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "ns_rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Draws from an ns_rng (ns_rng.h: xoshiro256**, seeded by ns_rng_seed; the same seed gives
 * the same draws everywhere). */
double lg_rng_uniform(ns_rng *g);                           /* in (0, 1), never 0 or 1 */
double lg_rng_normal(ns_rng *g);                            /* standard normal */
double lg_rng_exp(ns_rng *g, double mean);                  /* exponential with that mean */
double lg_rng_gamma(ns_rng *g, double shape, double scale); /* mean shape*scale */

/* Seconds to the next arrival at `rate` requests/s: gamma-distributed with shape
 * `burstiness` and mean 1/rate (burstiness 1 is Poisson: exponential gaps; below 1 is
 * burstier, above 1 steadier; the gaps' coefficient of variation is 1/sqrt(burstiness)). */
double lg_gap_s(ns_rng *g, double rate, double burstiness);

typedef enum lg_len_dist { LG_LEN_FIXED = 0, LG_LEN_UNIFORM, LG_LEN_NORMAL } lg_len_dist;

/* A length around `mean`: fixed; uniform in [mean(1-spread), mean(1+spread)]; normal with
 * standard deviation mean*spread. Rounded, and never below 1. */
int lg_len_draw(ns_rng *g, lg_len_dist d, int mean, double spread);

/* One figure's distribution (values in whatever unit they were given). n == 0: no data,
 * every field 0. Percentiles interpolate linearly between order statistics, as numpy's
 * default (and so vLLM's benchmark) does. */
typedef struct lg_summary {
  size_t n;
  double mean, std, min, p50, p90, p95, p99, max;
} lg_summary;

/* The p-th percentile (0..100) of n sorted values (n > 0). */
double lg_percentile(const double *sorted, size_t n, double p);
/* Sorts v in place and fills *out. */
void lg_summarize(double *v, size_t n, lg_summary *out);

/* Time per output token after the first: (e2e - ttft) / (output_tokens - 1), in the unit of
 * e2e and ttft; -1 when output_tokens < 2 (undefined). */
double lg_tpot(double e2e, double ttft, long output_tokens);

#ifdef __cplusplus
}
#endif
#endif
