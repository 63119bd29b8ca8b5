/* arena.h — memory pools: one large host, pinned-host or device allocation taken once,
 * carved by a buddy allocator. Entry points mem_pool_create_*() and mem_pool_alloc/free. */
#ifndef NS_MEM_ARENA_H
#define NS_MEM_ARENA_H

#include "buddy.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A pool owns its backing allocation from create to destroy and hands out pieces of
 * it; it never returns memory to the system in between. Pointers from mem_pool_alloc
 * belong to the caller until mem_pool_free; they die with the pool.
 *
 * Alignment. A block of 2^k bytes is aligned to min(2^k, A), where A is the backing
 * allocation's alignment: min_block for host pools, cudaMalloc's (>= 256 bytes, in
 * practice 2 MiB for large allocations) for device pools, page size for pinned pools.
 *
 * Threads. A pool has one owner thread (the engine thread for device and pinned pools)
 * and is not thread-safe. Device and pinned pools use the CUDA device current on the
 * calling thread at create time; destroy must run where that device is current. */
typedef struct mem_pool mem_pool_t;

typedef enum mem_kind {
  MEM_HOST = 0,        /* malloc'd (aligned_alloc) host memory */
  MEM_HOST_PINNED = 1, /* page-locked host memory (cudaHostAlloc) */
  MEM_DEVICE = 2       /* device memory (cudaMalloc); not dereferenceable on the host */
} mem_kind;

typedef struct mem_pool_stats {
  mem_kind kind;
  void *base;        /* first byte of the backing allocation */
  uint64_t size;     /* bytes of the backing allocation (== buddy.total) */
  buddy_stats buddy; /* usage and fragmentation */
} mem_pool_stats_t;

/* Host pool of `size` bytes (rounded down to min_block; min_block 0 = 2 MiB).
 * pinned != 0 takes page-locked memory with cudaHostAlloc: NS_EUNSUPPORTED in a build
 * without CUDA, NS_ECUDA when CUDA fails (no device). NS_EINVAL for bad sizes,
 * NS_ENOMEM when the backing allocation fails. */
int mem_pool_create_host(uint64_t size, uint64_t min_block, int pinned, mem_pool_t **out);

/* Device pool: one cudaMalloc of `size` bytes (rounded down to min_block).
 * NS_EUNSUPPORTED without CUDA, NS_ECUDA when cudaMalloc fails (logged). */
int mem_pool_create_device(uint64_t size, uint64_t min_block, mem_pool_t **out);

/* Device pool sized as fraction (0 < fraction <= 1) of the device's free memory
 * (cudaMemGetInfo), rounded down to min_block. NS_EINVAL for a bad fraction, NS_ENOMEM
 * when that leaves less than one min_block. */
int mem_pool_create_device_fraction(double fraction, uint64_t min_block, mem_pool_t **out);

/* Free the backing allocation (live blocks die with it; a warning names how many
 * were still live). NULL is a no-op. */
void mem_pool_destroy(mem_pool_t *pool);

/* Take a block of at least `bytes`. Errors as buddy_alloc: NS_EINVAL for 0 or more
 * than the pool, NS_ENOMEM when no free block is large enough. */
int mem_pool_alloc(mem_pool_t *pool, uint64_t bytes, void **ptr_out);

/* As mem_pool_alloc, aligned to `align` (a power of two) relative to the pool base. */
int mem_pool_alloc_aligned(mem_pool_t *pool, uint64_t bytes, uint64_t align, void **ptr_out);

/* Give back a block from mem_pool_alloc. NS_EINVAL, changing nothing, for a pointer
 * that is not a live block of this pool (NULL, double free, interior pointer). */
int mem_pool_free(mem_pool_t *pool, void *ptr);

/* Usable size of the live block at ptr, or 0 when ptr is not one. */
uint64_t mem_pool_block_size(const mem_pool_t *pool, const void *ptr);

/* Fill *st. O(1). */
void mem_pool_stats(const mem_pool_t *pool, mem_pool_stats_t *st);

/* 1 when the pool's allocator passes buddy_is_valid(), else 0. O(blocks). */
int mem_pool_is_valid(const mem_pool_t *pool);

/* "host", "pinned" or "device". */
const char *mem_kind_name(mem_kind kind);

#ifdef __cplusplus
}
#endif
#endif
