/* buddy.c — the buddy allocator: per-order free lists over a per-min-block metadata
 * array. Entry points buddy_alloc() (find, split) and buddy_free() (validate, merge). */
#include "buddy.h"

#include "ns_err.h"
#include "ns_log.h"

#include <assert.h>
#include <stdlib.h>

/* Debug-only check of an internal invariant (compiled out with NDEBUG); the full
 * check is buddy_is_valid(), which tests call. */
#define BUDDY_DASSERT(c) assert(c)

#define NIL        UINT32_MAX
#define MAX_ORDERS 32 /* block indices are uint32_t, so an order is at most 31 */

enum { ST_NONE = 0, ST_FREE = 1, ST_USED = 2 };

/* One entry per min_block. Only the first entry of a block (its head) is meaningful:
 * state FREE or USED and the block's order; every other entry is ST_NONE. A free head
 * is linked into free_head[order] through prev/next; a used head keeps the requested
 * byte count in prev:next instead, since it is on no list. */
typedef struct bmeta {
  uint32_t prev, next;
  uint8_t order, state;
} bmeta;

struct buddy {
  uint64_t base, total, min_block;
  unsigned shift;     /* log2(min_block) */
  unsigned max_order; /* order of the largest top block */
  uint32_t nblocks;   /* total / min_block */
  uint64_t nonempty;  /* bit k set iff free_head[k] != NIL */
  uint32_t free_head[MAX_ORDERS];
  bmeta *meta;
  uint64_t bytes_requested, bytes_allocated, alloc_count;
  uint64_t total_allocs, failed_allocs, peak_allocated;
};

/* ---- free lists ------------------------------------------------------------ */

static void list_push(buddy_t *b, uint32_t i, unsigned k) {
  bmeta *m = &b->meta[i];
  m->state = ST_FREE;
  m->order = (uint8_t)k;
  m->prev = NIL;
  m->next = b->free_head[k];
  if (m->next != NIL) b->meta[m->next].prev = i;
  b->free_head[k] = i;
  b->nonempty |= 1ull << k;
}

static void list_remove(buddy_t *b, uint32_t i) {
  bmeta *m = &b->meta[i];
  unsigned k = m->order;
  BUDDY_DASSERT(m->state == ST_FREE);
  if (m->prev != NIL)
    b->meta[m->prev].next = m->next;
  else
    b->free_head[k] = m->next;
  if (m->next != NIL) b->meta[m->next].prev = m->prev;
  if (b->free_head[k] == NIL) b->nonempty &= ~(1ull << k);
  m->state = ST_NONE;
}

static uint64_t used_requested(const bmeta *m) {
  return (uint64_t)m->prev << 32 | m->next;
}

static void set_used(bmeta *m, unsigned k, uint64_t requested) {
  m->state = ST_USED;
  m->order = (uint8_t)k;
  m->prev = (uint32_t)(requested >> 32);
  m->next = (uint32_t)requested;
}

/* Does the block of order k+1 holding block i (order k) lie inside the arena? Then
 * i's buddy exists and the two may merge. Any aligned block inside the arena lies in
 * one top block, because the top blocks are the binary decomposition of nblocks. */
static int parent_fits(const buddy_t *b, uint32_t i, unsigned k) {
  uint64_t parent = i & ~((2ull << k) - 1);
  return parent + (2ull << k) <= b->nblocks;
}

/* ---- create / destroy ------------------------------------------------------ */

int buddy_create(uint64_t base, uint64_t size, uint64_t min_block, buddy_t **out) {
  if (!out) return NS_EINVAL;
  *out = NULL;
  if (min_block == 0) min_block = BUDDY_DEFAULT_MIN_BLOCK;
  if (min_block < BUDDY_MIN_MIN_BLOCK || (min_block & (min_block - 1))) return NS_EINVAL;
  unsigned shift = (unsigned)__builtin_ctzll(min_block);
  uint64_t nblocks = size >> shift;
  if (nblocks == 0 || nblocks >= NIL) return NS_EINVAL;
  uint64_t total = nblocks << shift;
  if (total > UINT64_MAX - base) return NS_EINVAL;

  buddy_t *b = calloc(1, sizeof *b);
  if (!b) return NS_ENOMEM;
  b->meta = calloc(nblocks, sizeof *b->meta); /* all ST_NONE */
  if (!b->meta) goto err;
  b->base = base;
  b->total = total;
  b->min_block = min_block;
  b->shift = shift;
  b->nblocks = (uint32_t)nblocks;
  b->max_order = 63u - (unsigned)__builtin_clzll(nblocks);
  for (unsigned k = 0; k < MAX_ORDERS; k++)
    b->free_head[k] = NIL;

  /* top blocks: one per set bit of nblocks, largest first, so each is aligned */
  uint32_t pos = 0;
  for (int k = (int)b->max_order; k >= 0; k--) {
    if (!(nblocks & (1ull << k))) continue;
    list_push(b, pos, (unsigned)k);
    pos += 1u << k;
  }
  BUDDY_DASSERT(pos == b->nblocks);
  *out = b;
  return 0;

err:
  free(b);
  return NS_ENOMEM;
}

void buddy_destroy(buddy_t *b) {
  if (!b) return;
  free(b->meta);
  free(b);
}

/* ---- alloc / free -------------------------------------------------------- */

/* Smallest order whose block holds `bytes` (bytes >= 1). */
static unsigned order_for(const buddy_t *b, uint64_t bytes) {
  uint64_t blocks = ((bytes - 1) >> b->shift) + 1;
  return blocks == 1 ? 0 : 64u - (unsigned)__builtin_clzll(blocks - 1);
}

/* Allocate a block able to hold `need` bytes; record `requested` as its use. */
static int alloc_block(buddy_t *b, uint64_t need, uint64_t requested, uint64_t *offset_out) {
  unsigned k = order_for(b, need);
  uint64_t avail = k > b->max_order ? 0 : b->nonempty & ~((1ull << k) - 1);
  if (!avail) {
    b->failed_allocs++;
    return NS_ENOMEM;
  }
  unsigned j = (unsigned)__builtin_ctzll(avail);
  uint32_t i = b->free_head[j];
  list_remove(b, i);
  while (j > k) { /* split: keep the lower half, free the upper half */
    j--;
    list_push(b, i + (1u << j), j);
  }
  set_used(&b->meta[i], k, requested);

  b->bytes_requested += requested;
  b->bytes_allocated += b->min_block << k;
  if (b->bytes_allocated > b->peak_allocated) b->peak_allocated = b->bytes_allocated;
  b->alloc_count++;
  b->total_allocs++;
  *offset_out = b->base + ((uint64_t)i << b->shift);
  return 0;
}

int buddy_alloc(buddy_t *b, uint64_t bytes, uint64_t *offset_out) {
  if (!b || !offset_out || bytes == 0 || bytes > b->total) return NS_EINVAL;
  return alloc_block(b, bytes, bytes, offset_out);
}

int buddy_alloc_aligned(buddy_t *b, uint64_t bytes, uint64_t align, uint64_t *offset_out) {
  if (!b || !offset_out || bytes == 0 || align == 0 || (align & (align - 1))) return NS_EINVAL;
  /* a block of 2^k bytes is aligned to 2^k, so a block of >= align bytes will do */
  uint64_t need = bytes < align ? align : bytes;
  if (need > b->total) return NS_EINVAL;
  return alloc_block(b, need, bytes, offset_out);
}

/* Index of the live block starting at offset, or NIL. */
static uint32_t live_index(const buddy_t *b, uint64_t offset) {
  if (offset < b->base || offset - b->base >= b->total) return NIL;
  uint64_t rel = offset - b->base;
  if (rel & (b->min_block - 1)) return NIL;
  uint32_t i = (uint32_t)(rel >> b->shift);
  return b->meta[i].state == ST_USED ? i : NIL;
}

int buddy_free(buddy_t *b, uint64_t offset) {
  if (!b) return NS_EINVAL;
  uint32_t i = live_index(b, offset);
  if (i == NIL) return NS_EINVAL;
  bmeta *m = &b->meta[i];
  unsigned k = m->order;
  uint64_t requested = used_requested(m);
  if (b->bytes_allocated < (b->min_block << k) || b->bytes_requested < requested ||
      b->alloc_count == 0)
    return NS_EINTERNAL; /* cheap always-on check: counters and metadata disagree */
  b->bytes_allocated -= b->min_block << k;
  b->bytes_requested -= requested;
  b->alloc_count--;

  m->state = ST_NONE;
  while (parent_fits(b, i, k)) {
    uint32_t bud = i ^ (1u << k);
    if (b->meta[bud].state != ST_FREE || b->meta[bud].order != k) break;
    list_remove(b, bud); /* leaves bud's head ST_NONE: it is now interior */
    i &= ~(1u << k);
    k++;
  }
  list_push(b, i, k);
  return 0;
}

uint64_t buddy_block_size(const buddy_t *b, uint64_t offset) {
  if (!b) return 0;
  uint32_t i = live_index(b, offset);
  return i == NIL ? 0 : b->min_block << b->meta[i].order;
}

void buddy_get_stats(const buddy_t *b, buddy_stats *st) {
  if (!st) return;
  *st = (buddy_stats){0};
  if (!b) return;
  st->total = b->total;
  st->min_block = b->min_block;
  st->bytes_requested = b->bytes_requested;
  st->bytes_allocated = b->bytes_allocated;
  st->bytes_free = b->total - b->bytes_allocated;
  st->largest_free =
      b->nonempty ? b->min_block << (63u - (unsigned)__builtin_clzll(b->nonempty)) : 0;
  st->fragmentation =
      st->bytes_free ? 1.0 - (double)st->largest_free / (double)st->bytes_free : 0.0;
  st->alloc_count = b->alloc_count;
  st->total_allocs = b->total_allocs;
  st->failed_allocs = b->failed_allocs;
  st->peak_allocated = b->peak_allocated;
}

/* ---- validation ---------------------------------------------------------- */

#define INVALID(...)                                                                               \
  do {                                                                                             \
    ns_log_debug("buddy_is_valid: " __VA_ARGS__);                                                  \
    return 0;                                                                                      \
  } while (0)

int buddy_is_valid(const buddy_t *b) {
  if (!b || !b->meta) INVALID("no allocator");
  if (b->nblocks == 0 || ((uint64_t)b->nblocks << b->shift) != b->total ||
      b->min_block != 1ull << b->shift || b->max_order >= MAX_ORDERS ||
      (1ull << b->max_order) > b->nblocks || (2ull << b->max_order) <= b->nblocks)
    INVALID("bad geometry");
  if (b->nonempty >> (b->max_order + 1)) INVALID("mask has orders above max_order");

  /* 1. the heads tile [0, nblocks) with aligned blocks; tally them */
  uint64_t free_count[MAX_ORDERS] = {0};
  uint64_t free_bytes = 0, used_bytes = 0, requested = 0, live = 0;
  for (uint64_t i = 0; i < b->nblocks;) {
    const bmeta *m = &b->meta[i];
    unsigned k = m->order;
    if (m->state != ST_FREE && m->state != ST_USED)
      INVALID("no block head at %llu", (unsigned long long)i);
    if (k > b->max_order) INVALID("order %u above max at %llu", k, (unsigned long long)i);
    uint64_t n = 1ull << k;
    if (i & (n - 1)) INVALID("block %llu not aligned to order %u", (unsigned long long)i, k);
    if (i + n > b->nblocks) INVALID("block %llu runs past the arena", (unsigned long long)i);
    for (uint64_t j = i + 1; j < i + n; j++)
      if (b->meta[j].state != ST_NONE) INVALID("head %llu inside a block", (unsigned long long)j);
    if (m->state == ST_FREE) {
      free_count[k]++;
      free_bytes += b->min_block << k;
      uint32_t bud = (uint32_t)i ^ (1u << k);
      if (parent_fits(b, (uint32_t)i, k) && b->meta[bud].state == ST_FREE &&
          b->meta[bud].order == k)
        INVALID("free buddies %llu and %u at order %u", (unsigned long long)i, bud, k);
    } else {
      uint64_t r = used_requested(m);
      if (r == 0 || r > b->min_block << k)
        INVALID("used block %llu asks %llu", (unsigned long long)i, (unsigned long long)r);
      used_bytes += b->min_block << k;
      requested += r;
      live++;
    }
    i += n;
  }

  /* 2. each list holds exactly the free heads of its order, links consistent */
  for (unsigned k = 0; k < MAX_ORDERS; k++) {
    uint64_t count = 0;
    uint32_t prev = NIL;
    for (uint32_t x = b->free_head[k]; x != NIL; x = b->meta[x].next) {
      if (x >= b->nblocks) INVALID("list %u links outside the arena", k);
      const bmeta *m = &b->meta[x];
      if (m->state != ST_FREE || m->order != k) INVALID("list %u holds non-free %u", k, x);
      if (m->prev != prev) INVALID("list %u: bad prev link at %u", k, x);
      if (++count > free_count[k]) INVALID("list %u longer than its free blocks", k);
      prev = x;
    }
    if (count != free_count[k]) INVALID("list %u misses free blocks", k);
    if (!!(b->nonempty & (1ull << k)) != (b->free_head[k] != NIL)) INVALID("mask bit %u", k);
  }

  /* 3. counters */
  if (free_bytes + used_bytes != b->total) INVALID("bytes do not add up to total");
  if (used_bytes != b->bytes_allocated) INVALID("bytes_allocated counter");
  if (requested != b->bytes_requested) INVALID("bytes_requested counter");
  if (live != b->alloc_count) INVALID("alloc_count counter");
  if (b->peak_allocated < b->bytes_allocated || b->total_allocs < live)
    INVALID("peak/total counters");
  return 1;
}
