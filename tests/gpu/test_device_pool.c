/* test_device_pool.c — device and pinned pools on a real GPU: patterns written and read
 * back through every block, stats, fraction sizing. Entry main(); exit 77 = skipped. */
#include "arena.h"
#include "ns_err.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NS_HAVE_CUDA
int main(void) {
  printf("SKIP: built without CUDA (NANOSERVE_CUDA=OFF or no nvcc found)\n");
  return 77;
}
#else
#include <cuda_runtime.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                                 \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)
#define CHECK_CUDA(stmt)                                                                           \
  do {                                                                                             \
    cudaError_t e_ = (stmt);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #stmt, cudaGetErrorString(e_));  \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static uint8_t pattern(uint64_t block, uint64_t j) {
  return (uint8_t)(j * 131 + block * 71 + (j >> 11) + (j >> 19));
}

static double mib(uint64_t b) {
  return (double)b / (double)MiB;
}

/* first index where buf differs from the pattern of `block` (or from `fill`), or n */
static uint64_t mismatch(const uint8_t *buf, uint64_t n, uint64_t block, int fill) {
  for (uint64_t j = 0; j < n; j++)
    if (buf[j] != (fill >= 0 ? (uint8_t)fill : pattern(block, j))) return j;
  return n;
}

static int test_device_pool(void) {
  size_t free0, total0;
  CHECK_CUDA(cudaFree(0)); /* create the context first so it does not skew the figures */
  CHECK_CUDA(cudaMemGetInfo(&free0, &total0));

  mem_pool_t *pool = NULL;
  CHECK(mem_pool_create_device(GiB, 2 * MiB, &pool) == 0);
  mem_pool_stats_t st;
  mem_pool_stats(pool, &st);
  CHECK(st.kind == MEM_DEVICE && st.size == GiB && st.buddy.total == GiB);
  printf("device pool: %.0f MiB at %p, min block 2 MiB\n", mib(st.size), st.base);

  enum { N = 12 };
  const uint64_t req[N] = {1,         2 * MiB, 3 * MiB,  5 * MiB + 7, 17 * MiB, 64 * MiB,
                           100 * MiB, MiB,     33 * MiB, 200 * MiB,   12345,    48 * MiB};
  void *p[N];
  uint64_t max_req = 0, blocks = 0;
  for (int i = 0; i < N; i++) {
    CHECK(mem_pool_alloc(pool, req[i], &p[i]) == 0);
    uint64_t bs = mem_pool_block_size(pool, p[i]);
    uint64_t off = (uint64_t)((uintptr_t)p[i] - (uintptr_t)st.base);
    CHECK(bs >= req[i] && off % bs == 0 && off + bs <= st.size);
    if (req[i] > max_req) max_req = req[i];
    blocks += bs;
  }
  void *big = NULL;
  CHECK(mem_pool_alloc(pool, 512 * MiB, &big) == NS_ENOMEM); /* 628 MiB of 1 GiB taken */

  uint8_t *buf = malloc(max_req);
  CHECK(buf);
  /* write each block's own pattern, then read all back: no block overlaps another */
  for (int i = 0; i < N; i++) {
    for (uint64_t j = 0; j < req[i]; j++)
      buf[j] = pattern((uint64_t)i, j);
    CHECK_CUDA(cudaMemcpy(p[i], buf, req[i], cudaMemcpyHostToDevice));
  }
  uint64_t bad_copy[N], bad_set[N];
  for (int i = 0; i < N; i++) {
    memset(buf, 0, req[i]);
    CHECK_CUDA(cudaMemcpy(buf, p[i], req[i], cudaMemcpyDeviceToHost));
    bad_copy[i] = mismatch(buf, req[i], (uint64_t)i, -1);
  }
  /* memset the whole block (not only what was asked), again read all back */
  for (int i = 0; i < N; i++)
    CHECK_CUDA(cudaMemset(p[i], 0x40 + i, mem_pool_block_size(pool, p[i])));
  CHECK_CUDA(cudaDeviceSynchronize());
  for (int i = 0; i < N; i++) {
    CHECK_CUDA(cudaMemcpy(buf, p[i], req[i], cudaMemcpyDeviceToHost));
    bad_set[i] = mismatch(buf, req[i], 0, 0x40 + i);
  }
  free(buf);

  printf("%5s %14s %10s %12s %8s %8s\n", "block", "requested B", "block MiB", "offset MiB",
         "memcpy", "memset");
  int fails = 0;
  for (int i = 0; i < N; i++) {
    uint64_t off = (uint64_t)((uintptr_t)p[i] - (uintptr_t)st.base);
    printf("%5d %14" PRIu64 " %10.0f %12.0f %8s %8s\n", i, req[i],
           mib(mem_pool_block_size(pool, p[i])), mib(off), bad_copy[i] == req[i] ? "ok" : "BAD",
           bad_set[i] == req[i] ? "ok" : "BAD");
    fails += (bad_copy[i] != req[i]) + (bad_set[i] != req[i]);
  }
  CHECK(fails == 0);

  mem_pool_stats(pool, &st);
  CHECK(st.buddy.alloc_count == N && st.buddy.bytes_allocated == blocks);
  CHECK(mem_pool_is_valid(pool));
  printf("in use: %.0f MiB in %" PRIu64 " blocks, largest free %.0f MiB, fragmentation %.3f\n",
         mib(st.buddy.bytes_allocated), st.buddy.alloc_count, mib(st.buddy.largest_free),
         st.buddy.fragmentation);

  /* pinned host pool: device -> pinned -> device -> pinned round trip */
  mem_pool_t *pinned = NULL;
  CHECK(mem_pool_create_host(64 * MiB, 2 * MiB, 1, &pinned) == 0);
  uint8_t *h1, *h2;
  CHECK(mem_pool_alloc(pinned, 8 * MiB, (void **)&h1) == 0);
  CHECK(mem_pool_alloc(pinned, 8 * MiB, (void **)&h2) == 0);
  for (uint64_t j = 0; j < 8 * MiB; j++)
    h1[j] = pattern(99, j);
  CHECK_CUDA(cudaMemcpy(p[6], h1, 8 * MiB, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(h2, p[6], 8 * MiB, cudaMemcpyDeviceToHost));
  CHECK(mismatch(h2, 8 * MiB, 99, -1) == 8 * MiB);
  CHECK(mem_pool_free(pinned, h1) == 0 && mem_pool_free(pinned, h2) == 0);
  CHECK(mem_pool_is_valid(pinned));
  mem_pool_destroy(pinned);
  printf("pinned pool: 64 MiB, 8 MiB device round trip ok\n");

  for (int i = N - 1; i >= 0; i -= 2)
    CHECK(mem_pool_free(pool, p[i]) == 0);
  for (int i = N - 2; i >= 0; i -= 2)
    CHECK(mem_pool_free(pool, p[i]) == 0);
  CHECK(mem_pool_free(pool, p[0]) == NS_EINVAL); /* double free refused */
  mem_pool_stats(pool, &st);
  CHECK(mem_pool_is_valid(pool));
  CHECK(st.buddy.alloc_count == 0 && st.buddy.bytes_free == GiB && st.buddy.largest_free == GiB);
  CHECK(st.buddy.fragmentation == 0.0 && st.buddy.peak_allocated == blocks);
  CHECK(st.buddy.total_allocs == N && st.buddy.failed_allocs == 1);
  mem_pool_destroy(pool);

  size_t free1, total1;
  CHECK_CUDA(cudaMemGetInfo(&free1, &total1));
  printf("device memory free: %.0f MiB before the pool, %.0f MiB after destroy\n", mib(free0),
         mib(free1));
  CHECK(free1 + 64 * MiB >= free0); /* the pool's gigabyte came back */

  mem_pool_t *half = NULL;
  CHECK(mem_pool_create_device_fraction(0.5, 2 * MiB, &half) == 0);
  mem_pool_stats(half, &st);
  printf("fraction pool: 0.5 of %.0f MiB free -> %.0f MiB (%.2f GiB), largest block %.0f MiB\n",
         mib(free1), mib(st.size), (double)st.size / (double)GiB, mib(st.buddy.largest_free));
  CHECK(st.size % (2 * MiB) == 0 && st.size <= free1 / 2 && st.size + 64 * MiB >= free1 / 2);
  void *whole;
  CHECK(mem_pool_alloc(half, st.buddy.largest_free, &whole) == 0);
  CHECK_CUDA(cudaMemset(whole, 0, st.buddy.largest_free));
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK(mem_pool_free(half, whole) == 0 && mem_pool_is_valid(half));
  mem_pool_destroy(half);
  return 0;
}

int main(void) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    printf("SKIP: cudaGetDeviceCount: %s\n", cudaGetErrorString(e));
    return 77;
  }
  if (n == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    printf("gpu_device_pool: %s, sm_%d%d, %.1f GiB\n", prop.name, prop.major, prop.minor,
           (double)prop.totalGlobalMem / (double)GiB);
  int rc = test_device_pool();
  printf("gpu_device_pool: %s\n", rc ? "FAILED" : "passed");
  return rc;
}
#endif
