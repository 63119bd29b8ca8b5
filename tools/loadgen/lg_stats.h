/* lg_stats.h — the load generator's numbers: a seeded RNG, the arrival-gap and length
 * distributions, percentiles and summaries, the TPOT formula. Pure C, no I/O; any thread. */
#ifndef LG_STATS_H
#define LG_STATS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* xoshiro256** seeded through splitmix64: the same seed gives the same draws everywhere. */
typedef struct lg_rng {
  uint64_t s[4]; /* private */
} lg_rng;

void lg_rng_seed(lg_rng *g, uint64_t seed);
uint64_t lg_rng_next(lg_rng *g);
double lg_rng_uniform(lg_rng *g);                           /* in (0, 1), never 0 or 1 */
double lg_rng_normal(lg_rng *g);                            /* standard normal */
double lg_rng_exp(lg_rng *g, double mean);                  /* exponential with that mean */
double lg_rng_gamma(lg_rng *g, double shape, double scale); /* mean shape*scale */

/* Seconds to the next arrival at `rate` requests/s: gamma-distributed with shape
 * `burstiness` and mean 1/rate (burstiness 1 is Poisson: exponential gaps; below 1 is
 * burstier, above 1 steadier; the gaps' coefficient of variation is 1/sqrt(burstiness)). */
double lg_gap_s(lg_rng *g, double rate, double burstiness);

typedef enum lg_len_dist { LG_LEN_FIXED = 0, LG_LEN_UNIFORM, LG_LEN_NORMAL } lg_len_dist;

/* A length around `mean`: fixed; uniform in [mean(1-spread), mean(1+spread)]; normal with
 * standard deviation mean*spread. Rounded, and never below 1. */
int lg_len_draw(lg_rng *g, lg_len_dist d, int mean, double spread);

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
