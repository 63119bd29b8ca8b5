/* bench_buddy.c — buddy allocator throughput: alloc+free pairs per second in a steady
 * mixed workload and for one size (hot and full split/merge). Entry main(); see usage(). */
#include "buddy.h"
#include "ns_err.h"
#include "ns_rng.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct params {
  uint64_t arena, min_block, live, pairs, runs, seed, max_order;
} params;

static uint64_t rng_state;
static uint64_t rnd(void) {
  return ns_splitmix64(&rng_state);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static uint64_t sink; /* keeps the compiler from dropping the work */

/* Steady state: `live` blocks of random sizes (orders 0..max_order, any size inside an
 * order); each pair frees a random live block and allocates a new random size in its
 * place. Sizes and slots are drawn before the clock starts. Returns pairs per second. */
static double run_steady(const params *p, uint64_t run, uint64_t *fails) {
  buddy_t *b;
  if (buddy_create(0, p->arena, p->min_block, &b)) return 0;
  rng_state = p->seed + run;
  uint64_t *off = malloc(p->live * sizeof *off);
  uint64_t *size = malloc(p->pairs * sizeof *size);
  uint32_t *slot = malloc(p->pairs * sizeof *slot);
  if (!off || !size || !slot) exit(1);
  for (uint64_t i = 0; i < p->pairs; i++) {
    uint64_t k = rnd() % (p->max_order + 1), hi = p->min_block << k, lo = k ? hi / 2 : 0;
    size[i] = lo + 1 + rnd() % (hi - lo);
    slot[i] = (uint32_t)(rnd() % p->live);
  }
  for (uint64_t i = 0; i < p->live; i++)
    if (buddy_alloc(b, size[(i * 7919) % p->pairs], &off[i])) off[i] = UINT64_MAX;

  uint64_t f = 0;
  double t0 = now();
  for (uint64_t i = 0; i < p->pairs; i++) {
    uint64_t *o = &off[slot[i]];
    if (*o != UINT64_MAX) buddy_free(b, *o);
    if (buddy_alloc(b, size[i], o)) {
      *o = UINT64_MAX;
      f++;
    }
  }
  double dt = now() - t0;
  *fails = f;
  if (!buddy_is_valid(b)) {
    fprintf(stderr, "bench_buddy: allocator invalid after the steady run\n");
    exit(1);
  }
  free(off);
  free(size);
  free(slot);
  buddy_destroy(b);
  return (double)p->pairs / dt;
}

/* One size, min_block, alloc then free. hot: the block's buddy is held, so the pair
 * neither splits nor merges (the best case). cold: a fresh arena, so every pair splits
 * the top block all the way down and merges it all the way up (the worst case). */
static double run_one_size(const params *p, int hot) {
  buddy_t *b;
  if (buddy_create(0, p->arena, p->min_block, &b)) return 0;
  uint64_t held = 0, o = 0;
  if (hot && buddy_alloc(b, p->min_block, &held)) return 0;
  double t0 = now();
  for (uint64_t i = 0; i < p->pairs; i++) {
    buddy_alloc(b, p->min_block, &o);
    sink += o;
    buddy_free(b, o);
  }
  double dt = now() - t0;
  buddy_destroy(b);
  return (double)p->pairs / dt;
}

static double median(double *v, uint64_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(void) {
  fprintf(stderr, "usage: bench_buddy [--arena BYTES] [--min BYTES] [--live N] [--pairs N]\n"
                  "                   [--runs N] [--seed N] [--max-order K]\n");
}

int main(int argc, char **argv) {
  params p = {.arena = 64ull << 30,
              .min_block = 2ull << 20,
              .live = 512,
              .pairs = 4000000,
              .runs = 7,
              .seed = 1,
              .max_order = 6};
  const struct {
    const char *name;
    uint64_t *field;
  } opts[] = {{"--arena", &p.arena},        {"--min", &p.min_block}, {"--live", &p.live},
              {"--pairs", &p.pairs},        {"--runs", &p.runs},     {"--seed", &p.seed},
              {"--max-order", &p.max_order}};
  for (int i = 1; i < argc; i += 2) {
    size_t o = 0, n = sizeof opts / sizeof opts[0];
    while (o < n && strcmp(argv[i], opts[o].name))
      o++;
    if (o == n || i + 1 >= argc) {
      usage();
      return 2;
    }
    *opts[o].field = strtoull(argv[i + 1], NULL, 0);
  }
  buddy_t *probe;
  if (p.live == 0 || p.pairs == 0 || p.runs == 0 || p.runs > 101 || p.max_order > 30 ||
      buddy_create(0, p.arena, p.min_block, &probe)) {
    fprintf(stderr, "bench_buddy: bad parameters\n");
    return 2;
  }
  buddy_destroy(probe);

  printf("command:");
  for (int i = 0; i < argc; i++)
    printf(" %s", argv[i]);
  printf("\nparams: arena %" PRIu64 " B, min block %" PRIu64 " B, live %" PRIu64
         ", sizes up to min<<%" PRIu64 ", %" PRIu64 " pairs x %" PRIu64 " runs, seed %" PRIu64 "\n",
         p.arena, p.min_block, p.live, p.max_order, p.pairs, p.runs, p.seed);

  double steady[101], hot[101], cold[101];
  uint64_t fails = 0;
  for (uint64_t r = 0; r < p.runs; r++) {
    steady[r] = run_steady(&p, r, &fails);
    hot[r] = run_one_size(&p, 1);
    cold[r] = run_one_size(&p, 0);
  }
  double ms = median(steady, p.runs), mh = median(hot, p.runs), mc = median(cold, p.runs);
  printf("%-44s %12s %10s\n", "workload (median of runs)", "Mpairs/s", "ns/pair");
  printf("%-44s %12.2f %10.1f\n", "steady mixed, random free + random alloc", ms / 1e6, 1e9 / ms);
  printf("%-44s %12.2f %10.1f\n", "one size, hot (no split/merge)", mh / 1e6, 1e9 / mh);
  printf("%-44s %12.2f %10.1f\n", "one size, cold (full split + merge)", mc / 1e6, 1e9 / mc);
  printf("steady: %" PRIu64 " of %" PRIu64 " allocs hit ENOMEM in the last run\n", fails, p.pairs);
  return (int)(sink & 0); /* sink read so the loop stays */
}
