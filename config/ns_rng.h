/* ns_rng.h — the project's seeded pseudo-random numbers: splitmix64 (a seed into a stream,
 * or a stream of its own) and xoshiro256** seeded through it. Deterministic for a seed on
 * every machine, so a seed names the same weights, prompts or draws everywhere. Not for
 * secrets. A state belongs to one thread. */
#ifndef NS_RNG_H
#define NS_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The next value of the splitmix64 stream whose state is *x (advances it). */
static inline uint64_t ns_splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

typedef struct ns_rng {
  uint64_t s[4]; /* private */
} ns_rng;

/* xoshiro256**'s state from four splitmix64 values of seed */
static inline void ns_rng_seed(ns_rng *g, uint64_t seed) {
  for (int i = 0; i < 4; i++)
    g->s[i] = ns_splitmix64(&seed);
}

static inline uint64_t ns_rng_rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

/* The next xoshiro256** value. */
static inline uint64_t ns_rng_next(ns_rng *g) {
  uint64_t *s = g->s, r = ns_rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = ns_rng_rotl(s[3], 45);
  return r;
}

#ifdef __cplusplus
}
#endif
#endif
