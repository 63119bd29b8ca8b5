/* fuzz_buddy.c — libFuzzer harness for the buddy allocator: the input picks an arena and
 * a sequence of allocs and (also invalid) frees, checked against a model. LLVMFuzzerTestOneInput.
 */
#include "buddy.h"
#include "ns_err.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A violation aborts: that is how a fuzz harness reports a finding. */
#define FUZZ_CHECK(c)                                                                              \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "fuzz_buddy: check failed at line %d: %s\n", __LINE__, #c);                  \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

enum { MAX_BLOCKS = 2048, MAX_OPS = 1500 };

typedef struct input {
  const uint8_t *p;
  size_t n;
} input;

static uint8_t take(input *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}
static uint32_t take32(input *in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v = v << 8 | take(in);
  return v;
}

/* ---- the model ------------------------------------------------------------- */

typedef struct model {
  uint64_t base, total, min, nblocks;
  uint8_t busy[MAX_BLOCKS];  /* min block inside a live block */
  uint16_t head[MAX_BLOCKS]; /* live index + 1 at a live block's first min block */
  uint64_t off[MAX_BLOCKS], size[MAX_BLOCKS], req[MAX_BLOCKS];
  uint64_t nlive, allocated, requested, failed, allocs;
} model;

static model g_m; /* large: kept off the stack */

static int window_free(const model *m, uint64_t i, uint64_t n) {
  for (uint64_t j = i; j < i + n; j++)
    if (m->busy[j]) return 0;
  return 1;
}

static int has_window(const model *m, uint64_t n) {
  for (uint64_t i = 0; i + n <= m->nblocks; i += n)
    if (window_free(m, i, n)) return 1;
  return 0;
}

static uint64_t largest_window(const model *m) {
  for (int k = 63 - __builtin_clzll(m->nblocks); k >= 0; k--)
    if (has_window(m, 1ull << k)) return m->min << k;
  return 0;
}

static void check_stats(const buddy_t *b, const model *m, int deep) {
  buddy_stats st;
  buddy_get_stats(b, &st);
  FUZZ_CHECK(st.total == m->total);
  FUZZ_CHECK(st.bytes_allocated == m->allocated);
  FUZZ_CHECK(st.bytes_requested == m->requested);
  FUZZ_CHECK(st.bytes_free == m->total - m->allocated);
  FUZZ_CHECK(st.alloc_count == m->nlive);
  FUZZ_CHECK(st.failed_allocs == m->failed);
  FUZZ_CHECK(st.total_allocs == m->allocs);
  if (deep) {
    FUZZ_CHECK(buddy_is_valid(b));
    FUZZ_CHECK(st.largest_free == largest_window(m));
  }
}

/* ---- operations ------------------------------------------------------------ */

static void do_alloc(buddy_t *b, model *m, uint64_t req, uint64_t align, int aligned) {
  uint64_t off = 0;
  int rc = aligned ? buddy_alloc_aligned(b, req, align, &off) : buddy_alloc(b, req, &off);
  uint64_t need = req > align ? req : align;
  if (req == 0 || need > m->total) {
    FUZZ_CHECK(rc == NS_EINVAL);
    return;
  }
  uint64_t size = m->min;
  while (size < need)
    size <<= 1;
  uint64_t n = size / m->min;
  if (rc == NS_ENOMEM) {
    FUZZ_CHECK(!has_window(m, n)); /* room existed: coalescing or search is broken */
    m->failed++;
    return;
  }
  FUZZ_CHECK(rc == 0);
  FUZZ_CHECK(off >= m->base && off - m->base <= m->total - size);
  uint64_t rel = off - m->base, i = rel / m->min;
  FUZZ_CHECK(rel % size == 0 && rel % align == 0);
  FUZZ_CHECK(buddy_block_size(b, off) == size);
  FUZZ_CHECK(window_free(m, i, n)); /* no overlap with a live block */
  memset(&m->busy[i], 1, n);
  m->off[m->nlive] = off;
  m->size[m->nlive] = size;
  m->req[m->nlive] = req;
  m->head[i] = (uint16_t)++m->nlive;
  m->allocated += size;
  m->requested += req;
  m->allocs++;
}

static uint64_t do_free(buddy_t *b, model *m, uint64_t j) {
  uint64_t off = m->off[j], size = m->size[j], i = (off - m->base) / m->min;
  FUZZ_CHECK(buddy_free(b, off) == 0);
  FUZZ_CHECK(buddy_block_size(b, off) == 0);
  memset(&m->busy[i], 0, size / m->min);
  m->head[i] = 0;
  m->allocated -= size;
  m->requested -= m->req[j];
  m->nlive--;
  if (j < m->nlive) { /* move the last live entry into slot j */
    m->off[j] = m->off[m->nlive];
    m->size[j] = m->size[m->nlive];
    m->req[j] = m->req[m->nlive];
    m->head[(m->off[j] - m->base) / m->min] = (uint16_t)(j + 1);
  }
  return off;
}

static void do_bad_free(buddy_t *b, const model *m, uint64_t off) {
  if (off >= m->base && off - m->base < m->total && (off - m->base) % m->min == 0 &&
      m->head[(off - m->base) / m->min])
    return; /* live after all */
  FUZZ_CHECK(buddy_free(b, off) == NS_EINVAL);
  FUZZ_CHECK(buddy_block_size(b, off) == 0);
}

/* Requests the allocator must refuse to be created with. */
static void bad_create(input *in) {
  buddy_t *b = (buddy_t *)&g_m;
  uint8_t v = take(in);
  uint64_t min = 64 + 2 * (uint64_t)v + 1; /* odd: never a power of two */
  FUZZ_CHECK(buddy_create(0, 1 << 20, min, &b) == NS_EINVAL && b == NULL);
  FUZZ_CHECK(buddy_create(0, 1 << 20, 1ull << (v % 6), &b) == NS_EINVAL);   /* below 64 */
  FUZZ_CHECK(buddy_create(0, v % 64, 64, &b) == NS_EINVAL);                 /* no block */
  FUZZ_CHECK(buddy_create(UINT64_MAX - v % 128, 128, 64, &b) == NS_EINVAL); /* overflow */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input in = {data, size};
  uint8_t h = take(&in);
  if (h >= 0xf0) {
    bad_create(&in);
    return 0;
  }
  model *m = &g_m;
  memset(m, 0, sizeof *m);
  m->min = 1ull << (6 + h % 15); /* 64 B .. 1 MiB */
  m->nblocks = 1 + (((uint64_t)take(&in) << 8 | take(&in)) % MAX_BLOCKS);
  uint64_t extra = ((uint64_t)take(&in) * 2654435761u) % m->min; /* rounded away */
  uint32_t b32 = take32(&in);
  m->base = (uint64_t)b32 << (take(&in) % 32);
  m->total = m->nblocks * m->min;

  buddy_t *b = NULL;
  FUZZ_CHECK(buddy_create(m->base, m->total + extra, m->min, &b) == 0);
  check_stats(b, m, 1);
  const uint64_t fresh_largest = largest_window(m);
  const unsigned max_order = 63u - (unsigned)__builtin_clzll(m->nblocks);

  uint64_t last_freed = m->base + m->total; /* never live */
  for (int op = 0; op < MAX_OPS && in.n; op++) {
    uint8_t c = take(&in);
    switch (c % 8) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4: { /* alloc (4: aligned) */
      uint8_t s = take(&in), f = take(&in);
      unsigned k = s % (max_order + 3); /* a little past the arena too */
      uint64_t hi = m->min << k, lo = k ? hi / 2 : 0;
      uint64_t req = lo + 1 + (hi - lo - 1) * f / 255;
      if (s == 0xff) req = 0;
      uint64_t align = 1;
      if (c % 8 == 4) align = 1ull << (take(&in) % 40);
      if (m->nlive < MAX_BLOCKS) do_alloc(b, m, req, align, c % 8 == 4);
      break;
    }
    case 5:
    case 6: /* free by index */
      if (m->nlive) last_freed = do_free(b, m, take(&in) % m->nlive);
      break;
    default: { /* invalid free */
      uint8_t v = take(&in);
      uint64_t off;
      switch (v % 4) {
      case 0: off = last_freed; break;
      case 1:
        off = (m->nlive ? m->off[v % m->nlive] : m->base) + 1 + take(&in) * m->min / 64;
        break;
      case 2: off = m->base + (take(&in) % m->nblocks) * m->min; break;
      default: off = v & 4 ? m->base - 1 - take(&in) : m->base + m->total + take(&in); break;
      }
      do_bad_free(b, m, off);
    }
    }
    check_stats(b, m, m->nblocks <= 256 || op % 8 == 0);
  }
  check_stats(b, m, 1);

  while (m->nlive)
    do_free(b, m, m->nlive - 1);
  check_stats(b, m, 1);
  buddy_stats st;
  buddy_get_stats(b, &st);
  FUZZ_CHECK(st.bytes_free == m->total && st.largest_free == fresh_largest);
  FUZZ_CHECK((m->nblocks & (m->nblocks - 1)) ? st.fragmentation > 0.0 : st.fragmentation == 0.0);
  buddy_destroy(b);
  return 0;
}
