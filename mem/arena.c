/* arena.c — memory pools: take one backing allocation, put a buddy_t over its offsets,
 * hand out base + offset. Entry points mem_pool_create_host/_device, mem_pool_alloc. */
#include "arena.h"

#include "ns_err.h"
#include "ns_log.h"

#include <stdlib.h>

#ifdef NS_HAVE_CUDA
#include "arena_cuda.h"
#endif

struct mem_pool {
  mem_kind kind;
  char *base;
  uint64_t size;
  buddy_t *buddy; /* over offsets [0, size) */
};

/* ---- backing allocations ------------------------------------------------- */

#ifdef NS_HAVE_CUDA
static int backing_alloc(mem_kind kind, uint64_t size, uint64_t align, void **out) {
  switch (kind) {
  case MEM_DEVICE: return mem__cuda_device_alloc(size, out);
  case MEM_HOST_PINNED: return mem__cuda_pinned_alloc(size, out);
  case MEM_HOST: break;
  }
  *out = aligned_alloc(align, size);
  return *out ? 0 : NS_ENOMEM;
}

static void backing_free(mem_kind kind, void *p) {
  switch (kind) {
  case MEM_DEVICE: (void)mem__cuda_device_free(p); return;
  case MEM_HOST_PINNED: (void)mem__cuda_pinned_free(p); return;
  case MEM_HOST: break;
  }
  free(p);
}

static int device_free_bytes(uint64_t *free_bytes) {
  uint64_t total = 0;
  return mem__cuda_mem_info(free_bytes, &total);
}
#else
/* Without CUDA only plain host pools exist. */
static int backing_alloc(mem_kind kind, uint64_t size, uint64_t align, void **out) {
  *out = NULL;
  if (kind != MEM_HOST) return NS_EUNSUPPORTED;
  *out = aligned_alloc(align, size);
  return *out ? 0 : NS_ENOMEM;
}

static void backing_free(mem_kind kind, void *p) {
  if (kind == MEM_HOST) free(p);
}

static int device_free_bytes(uint64_t *free_bytes) {
  *free_bytes = 0;
  return NS_EUNSUPPORTED;
}
#endif

/* ---- create / destroy ------------------------------------------------------ */

/* Resolve min_block (0 = default); NS_EINVAL unless a power of two >= 64. */
static int resolve_min_block(uint64_t *min_block) {
  if (*min_block == 0) *min_block = BUDDY_DEFAULT_MIN_BLOCK;
  uint64_t m = *min_block;
  return m < BUDDY_MIN_MIN_BLOCK || (m & (m - 1)) ? NS_EINVAL : 0;
}

static int pool_create(mem_kind kind, uint64_t size, uint64_t min_block, mem_pool_t **out) {
  if (!out) return NS_EINVAL;
  *out = NULL;
  int rc = resolve_min_block(&min_block);
  if (rc) return rc;
  size &= ~(min_block - 1);
  if (size == 0) return NS_EINVAL;

  mem_pool_t *pool = calloc(1, sizeof *pool);
  if (!pool) return NS_ENOMEM;
  pool->kind = kind;
  pool->size = size;
  void *base = NULL;
  rc = backing_alloc(kind, size, min_block, &base);
  if (rc) goto fail_backing;
  pool->base = base;
  rc = buddy_create(0, size, min_block, &pool->buddy);
  if (rc) goto fail_buddy;
  ns_log_debug("mem: %s pool of %llu bytes at %p, min block %llu", mem_kind_name(kind),
               (unsigned long long)size, base, (unsigned long long)min_block);
  *out = pool;
  return 0;

fail_buddy:
  backing_free(kind, base);
fail_backing:
  free(pool);
  return rc;
}

int mem_pool_create_host(uint64_t size, uint64_t min_block, int pinned, mem_pool_t **out) {
  return pool_create(pinned ? MEM_HOST_PINNED : MEM_HOST, size, min_block, out);
}

int mem_pool_create_device(uint64_t size, uint64_t min_block, mem_pool_t **out) {
  return pool_create(MEM_DEVICE, size, min_block, out);
}

int mem_pool_create_device_fraction(double fraction, uint64_t min_block, mem_pool_t **out) {
  if (!out) return NS_EINVAL;
  *out = NULL;
  if (!(fraction > 0.0 && fraction <= 1.0)) return NS_EINVAL; /* NaN too */
  int rc = resolve_min_block(&min_block);
  if (rc) return rc;
  uint64_t free_bytes = 0;
  rc = device_free_bytes(&free_bytes);
  if (rc) return rc;
  uint64_t size = (uint64_t)((double)free_bytes * fraction) & ~(min_block - 1);
  if (size == 0) return NS_ENOMEM; /* less than one block is free */
  return pool_create(MEM_DEVICE, size, min_block, out);
}

void mem_pool_destroy(mem_pool_t *pool) {
  if (!pool) return;
  buddy_stats st;
  buddy_get_stats(pool->buddy, &st);
  if (st.alloc_count)
    ns_log_warn("mem: destroying %s pool with %llu live blocks (%llu bytes)",
                mem_kind_name(pool->kind), (unsigned long long)st.alloc_count,
                (unsigned long long)st.bytes_allocated);
  buddy_destroy(pool->buddy);
  backing_free(pool->kind, pool->base);
  free(pool);
}

/* ---- alloc / free -------------------------------------------------------- */

int mem_pool_alloc(mem_pool_t *pool, uint64_t bytes, void **ptr_out) {
  if (!pool || !ptr_out) return NS_EINVAL;
  uint64_t off;
  int rc = buddy_alloc(pool->buddy, bytes, &off);
  *ptr_out = rc ? NULL : pool->base + off;
  return rc;
}

int mem_pool_alloc_aligned(mem_pool_t *pool, uint64_t bytes, uint64_t align, void **ptr_out) {
  if (!pool || !ptr_out) return NS_EINVAL;
  uint64_t off;
  int rc = buddy_alloc_aligned(pool->buddy, bytes, align, &off);
  *ptr_out = rc ? NULL : pool->base + off;
  return rc;
}

/* Offset of ptr in the pool, or UINT64_MAX when ptr is outside it. Compared as
 * integers: the pointer may belong to another allocation entirely. */
static uint64_t pool_offset(const mem_pool_t *pool, const void *ptr) {
  uintptr_t p = (uintptr_t)ptr, b = (uintptr_t)pool->base;
  if (!ptr || p < b || p - b >= pool->size) return UINT64_MAX;
  return (uint64_t)(p - b);
}

int mem_pool_free(mem_pool_t *pool, void *ptr) {
  if (!pool) return NS_EINVAL;
  uint64_t off = pool_offset(pool, ptr);
  if (off == UINT64_MAX) return NS_EINVAL;
  return buddy_free(pool->buddy, off);
}

uint64_t mem_pool_block_size(const mem_pool_t *pool, const void *ptr) {
  if (!pool) return 0;
  uint64_t off = pool_offset(pool, ptr);
  return off == UINT64_MAX ? 0 : buddy_block_size(pool->buddy, off);
}

void mem_pool_stats(const mem_pool_t *pool, mem_pool_stats_t *st) {
  if (!st) return;
  *st = (mem_pool_stats_t){0};
  if (!pool) return;
  st->kind = pool->kind;
  st->base = pool->base;
  st->size = pool->size;
  buddy_get_stats(pool->buddy, &st->buddy);
}

int mem_pool_is_valid(const mem_pool_t *pool) {
  if (!pool || !pool->base || !buddy_is_valid(pool->buddy)) return 0;
  buddy_stats st;
  buddy_get_stats(pool->buddy, &st);
  return st.total == pool->size;
}

const char *mem_kind_name(mem_kind kind) {
  switch (kind) {
  case MEM_HOST: return "host";
  case MEM_HOST_PINNED: return "pinned";
  case MEM_DEVICE: return "device";
  }
  return "unknown";
}
