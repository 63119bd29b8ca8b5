/* ref_util.h — helpers shared by the kernel reference tests: a seeded xorshift generator
 * and relative-error checks that print the worst element. */
#ifndef TEST_REF_UTIL_H
#define TEST_REF_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

typedef struct rng {
  uint64_t s;
} rng;

static inline uint64_t rng_u64(rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}
/* uniform in [lo, hi) */
static inline float rng_f(rng *r, float lo, float hi) {
  return lo + (hi - lo) * (float)((rng_u64(r) >> 40) * (1.0 / 16777216.0));
}
static inline int rng_int(rng *r, int n) {
  return (int)(rng_u64(r) % (uint64_t)n);
}
static inline void rng_fill(rng *r, float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++)
    x[i] = rng_f(r, lo, hi);
}

/* max |got - want| over n, relative to max(|want|, floor); prints the worst index. */
static inline double max_rel_err(const char *what, const float *got, const double *want, size_t n,
                                 double floor) {
  double scale = floor, worst = 0;
  size_t wi = 0;
  for (size_t i = 0; i < n; i++)
    scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)got[i] - want[i]);
    if (!(e <= worst)) { /* NaN counts as worst */
      worst = e;
      wi = i;
    }
  }
  double rel = worst / scale;
  if (rel > 1e-6)
    printf("%s: worst at %zu: got %.9g want %.9g (rel %.3g)\n", what, wi, got[wi], want[wi], rel);
  return rel;
}

#endif
