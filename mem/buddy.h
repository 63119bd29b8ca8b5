/* buddy.h — power-of-two buddy allocator over an abstract range of offsets.
 * Entry points: buddy_create(), then buddy_alloc() / buddy_free(); pure C, no CUDA. */
#ifndef NS_BUDDY_H
#define NS_BUDDY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The allocator hands out offsets in [base, base + total), never memory: the caller
 * maps an offset to whatever the range stands for (mem/arena.h maps it to a pointer).
 *
 * Blocks. Every block is min_block << k bytes for some order k >= 0. total is the
 * arena size rounded down to a multiple of min_block; it is covered by the
 * maximal naturally aligned power-of-two "top blocks" (its binary decomposition,
 * largest first from base), so an arena need not be a power of two in size.
 *
 * Alignment. A block of 2^k bytes starts at base + a multiple of 2^k. Its absolute
 * alignment is therefore min(2^k, alignment of base): pass an aligned base (or 0)
 * if absolute alignment matters.
 *
 * Cost. alloc and free are O(number of orders) <= 64 steps: per-order doubly linked
 * free lists, a bitmask of non-empty lists, and one metadata entry per min_block
 * (about 12 bytes each) so that free(offset) finds its block in O(1).
 *
 * Threads. A buddy_t has one owner thread (for the device arena, the engine thread).
 * It takes no locks and is not thread-safe; calls on one buddy_t must not overlap.
 * Distinct buddy_t objects are independent. */
typedef struct buddy buddy_t;

#define BUDDY_DEFAULT_MIN_BLOCK (2ull << 20) /* 2 MiB */
#define BUDDY_MIN_MIN_BLOCK     64ull        /* smallest min_block accepted */

typedef struct buddy_stats {
  uint64_t total;           /* arena bytes managed (size rounded down to min_block) */
  uint64_t min_block;       /* smallest block size */
  uint64_t bytes_requested; /* sum of the sizes asked for by live allocations */
  uint64_t bytes_allocated; /* sum of the block sizes of live allocations */
  uint64_t bytes_free;      /* total - bytes_allocated */
  uint64_t largest_free;    /* largest free block (largest request that would succeed) */
  double fragmentation;     /* 1 - largest_free / bytes_free; 0 when nothing is free */
  uint64_t alloc_count;     /* live allocations */
  uint64_t total_allocs;    /* successful allocations since create */
  uint64_t failed_allocs;   /* allocations that failed with NS_ENOMEM */
  uint64_t peak_allocated;  /* high-water mark of bytes_allocated */
} buddy_stats;

/* Create an allocator over [base, base + size). min_block: a power of two >= 64, or 0
 * for BUDDY_DEFAULT_MIN_BLOCK. size is rounded down to a multiple of min_block and must
 * leave at least one block; base + size must not overflow; size / min_block must be
 * below 2^32 - 1. The allocator's own metadata comes from malloc and belongs to it.
 * Returns 0 and *out, NS_EINVAL for bad arguments, NS_ENOMEM when malloc fails. */
int buddy_create(uint64_t base, uint64_t size, uint64_t min_block, buddy_t **out);

/* Free the allocator and its metadata (live blocks are simply forgotten). NULL is a no-op. */
void buddy_destroy(buddy_t *b);

/* Allocate a block of at least `bytes` (rounded up to min_block << k) and return its
 * first offset. NS_EINVAL when bytes is 0 or larger than total; NS_ENOMEM (and
 * failed_allocs++) when no free block is large enough — the allocator is then unchanged.
 * The block belongs to the caller until buddy_free(). */
int buddy_alloc(buddy_t *b, uint64_t bytes, uint64_t *offset_out);

/* As buddy_alloc, and the offset is a multiple of `align` relative to base. align must
 * be a power of two (NS_EINVAL otherwise). align <= the block size is met by
 * construction; a larger align rounds the request up to align bytes. */
int buddy_alloc_aligned(buddy_t *b, uint64_t bytes, uint64_t align, uint64_t *offset_out);

/* Free the live block starting at `offset` and merge it with free buddies. Returns
 * NS_EINVAL, changing nothing, when offset is not the start of a live block
 * (double free, interior offset, outside the arena). */
int buddy_free(buddy_t *b, uint64_t offset);

/* Size of the live block starting at offset, or 0 when there is none. */
uint64_t buddy_block_size(const buddy_t *b, uint64_t offset);

/* Fill *st. O(1). */
void buddy_get_stats(const buddy_t *b, buddy_stats *st);

/* Check every invariant: each free list is a consistent doubly linked list of free
 * blocks of its order; the metadata tiles the arena with aligned blocks inside it;
 * no two buddies are free at the same order (full coalescing); the non-empty-list
 * mask, the byte counters and the live count match. O(total / min_block).
 * Returns 1 when valid, 0 otherwise (the first violation is logged at debug level). */
int buddy_is_valid(const buddy_t *b);

#ifdef __cplusplus
}
#endif
#endif
