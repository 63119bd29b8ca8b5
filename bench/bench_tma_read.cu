/* bench_tma_read.cu — how fast one block a multiprocessor streams a weight matrix through TMA
 * in the decode GEMM's pattern: tiles of BR rows, each walked along K in boxes of 64 values
 * (128 bytes a row, 128-byte swizzle), ST stages a block, the producer issuing G adjacent k
 * boxes at once, optionally with the tile's x (128 rows of an L2-resident matrix) in each
 * stage, and the consumer warp holding each stage for D nanoseconds (the tensor work's place).
 * With the weights tile-contiguous instead (each box's rows one after another), the same bytes
 * a box from consecutive addresses. Against it, in the same run: cudaMemcpy device to device (the
 * copy ceiling, bytes read + written) and a plain 16-byte-load read of the same matrix. Median of
 * 15 launches after 3, CUDA events. Usage: build/bench_tma_read [N K] (default 28672 4096,
 * llama3-8b's gate|up). */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "../kernels/k_tma.cuh"
#include "bench_cuda.h"

enum { MAX_ST = 16, XROWS = 128 };

struct cfg {
  int br, st, g, x, delay_ns;
  int nb;      /* boxes a stage's rows are loaded as (br / nb rows each) */
  int stagger; /* block b starts its tiles' k walk at k tile 7 b (mod K / 64), wrapping */
  int order;   /* 0: tiles b, b + grid, ...; 1: a block's tiles adjacent */
  int far;   /* the boxes of a stage from rows N / nb apart (gate|up's two halves), not adjacent */
  int bps;   /* blocks a multiprocessor */
  int tiled; /* the weights laid out tile by tile: a (tile, k tile) box is its rows' 128 bytes
              * each, one after another (br x 128 contiguous bytes), not rows K values apart */
};

/* tiles of c.br rows of w (N x K), blocks taking tiles blockIdx.x, + gridDim.x, ... */
static __global__ void __launch_bounds__(64)
    tma_read(const __grid_constant__ CUtensorMap mw, const __grid_constant__ CUtensorMap mx, int N,
             int K, cfg c, unsigned *sink) {
  extern __shared__ __align__(16) unsigned char raw[];
  __shared__ uint64_t full[MAX_ST], empty[MAX_ST];
  unsigned char *sm = (unsigned char *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
  const size_t wbytes = (size_t)c.br * 128, stage = wbytes + (c.x ? XROWS * 128 : 0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int tiles = N / c.br, kt = K / 64;
  const int per = (tiles + gridDim.x - 1) / gridDim.x;
  const int t0 = c.order ? blockIdx.x * per : blockIdx.x,
            tend = c.order ? min(tiles, t0 + per) : tiles, tstep = c.order ? 1 : gridDim.x;
  const int kofs = c.stagger ? (int)(blockIdx.x * 7u % (unsigned)kt) : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < c.st; s++)
      mbar_init(&full[s], 1), mbar_init(&empty[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 1) { /* producer */
    if (lane) return;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    uint64_t polx;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(polx));
    long f = 0;
    for (int t = t0; t < tend; t += tstep)
      for (int k = 0; k < kt; k += c.g)
        for (int j = 0; j < c.g && k + j < kt; j++) {
          const long ff = f + j;
          const int s = (int)(ff % c.st);
          if (ff >= c.st) mbar_wait(&empty[s], (unsigned)(((ff / c.st) - 1) & 1));
          if (j == c.g - 1 || k + j == kt - 1) {
            /* issue the group once its last stage is free */
            for (int i = 0; i <= j; i++) {
              const long fi = f + i;
              const int si = (int)(fi % c.st);
              unsigned char *d = sm + (size_t)si * stage;
              mbar_expect_tx(&full[si], (unsigned)stage);
              const int kk = (k + i + kofs) % kt;
              for (int b = 0; b < c.nb; b++) {
                const int r = b * (c.br / c.nb);
                if (c.tiled)
                  tma_load(d + (size_t)r * 128, &mw, 0, (t * kt + kk) * c.br + r, &full[si], pol);
                else
                  tma_load(d + (size_t)r * 128, &mw, kk * 64,
                           c.far ? b * (N / c.nb) + t * (c.br / c.nb) : t * c.br + r, &full[si],
                           pol);
              }
              if (c.x) tma_load(d + wbytes, &mx, kk * 64, 0, &full[si], polx);
            }
            f += j + 1;
          }
        }
    return;
  }
  /* consumer: warp 0 */
  long f = 0;
  unsigned acc = 0;
  for (int t = t0; t < tend; t += tstep)
    for (int k = 0; k < kt; k++, f++) {
      const int s = (int)(f % c.st);
      mbar_wait(&full[s], (unsigned)((f / c.st) & 1));
      acc += *(volatile unsigned *)(sm + (size_t)s * stage + lane * 4);
      if (c.delay_ns) {
        const uint64_t t0 = clock64();
        while (clock64() - t0 < (uint64_t)c.delay_ns * 2) /* ~2 GHz */
          ;
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }
  if (acc == 0x12345678u) sink[0] = acc;
}

static __global__ void plain_read(const uint4 *w, size_t n16, unsigned *sink) {
  uint4 a = make_uint4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16;
       i += (size_t)gridDim.x * blockDim.x) {
    uint4 v = __ldcs(w + i);
    a.x ^= v.x, a.y ^= v.y, a.z ^= v.z, a.w ^= v.w;
  }
  if ((a.x ^ a.y ^ a.z ^ a.w) == 0x12345678u) sink[0] = a.x;
}

static PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  void *f = NULL;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess) {
    printf("no cuTensorMapEncodeTiled\n");
    exit(1);
  }
  return (PFN_cuTensorMapEncodeTiled_v12000)f;
}

static CUtensorMap map2d(const void *base, int rows, int K, int box_rows) {
  CUtensorMap m;
  cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)rows}, stride[1] = {(cuuint64_t)K * 2};
  cuuint32_t box[2] = {64, (cuuint32_t)box_rows}, es[2] = {1, 1};
  CUresult r =
      encode_fn()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dim, stride,
                  box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    printf("cuTensorMapEncodeTiled: %d\n", (int)r);
    exit(1);
  }
  return m;
}

template <class F> static double median_ms(F launch) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> v;
  for (int i = 0; i < 18; i++) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 3) v.push_back(ms);
  }
  std::sort(v.begin(), v.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return v[v.size() / 2];
}

int main(int argc, char **argv) {
  const int N = argc > 2 ? atoi(argv[1]) : 28672, K = argc > 2 ? atoi(argv[2]) : 4096;
  int nsm;
  CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
  const size_t bytes = (size_t)N * K * 2;
  void *w, *w2, *x;
  unsigned *sink;
  CK(cudaMalloc(&w, bytes));
  CK(cudaMalloc(&w2, bytes));
  CK(cudaMalloc(&x, (size_t)XROWS * K * 2));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(w, 1, bytes));
  CK(cudaMemset(x, 1, (size_t)XROWS * K * 2));
  const double cp = median_ms([&] { CK(cudaMemcpyAsync(w2, w, bytes, cudaMemcpyDeviceToDevice)); });
  printf("N %d K %d (%.1f MB), %d SMs\n", N, K, bytes / 1e6, nsm);
  printf("cudaMemcpy D2D: %.1f us, %.0f GB/s (read + write)\n", cp * 1e3, 2 * bytes / cp / 1e6);
  const double pr =
      median_ms([&] { plain_read<<<nsm * 4, 512>>>((const uint4 *)w, bytes / 16, sink); });
  printf("plain 16-byte read: %.1f us, %.0f GB/s\n", pr * 1e3, bytes / pr / 1e6);
  const CUtensorMap mx = map2d(x, XROWS, K, XROWS);
  CK(cudaFuncSetAttribute(tma_read, cudaFuncAttributeMaxDynamicSharedMemorySize, 226 * 1024));
  const cfg cases[] = {
      {112, 5, 1, 1, 0, 1, 0, 0, 0, 1},
      {112, 5, 1, 1, 280, 1, 0, 0, 0, 1},
      {224, 4, 1, 1, 560, 2, 0, 0, 0, 1},
      {224, 4, 1, 1, 560, 2, 0, 0, 1, 1},
      {224, 3, 1, 1, 560, 2, 0, 0, 1, 1},
      {256, 4, 1, 1, 640, 4, 0, 0, 0, 1},
      {256, 4, 1, 1, 640, 4, 0, 0, 1, 1},
      {128, 3, 1, 1, 280, 1, 0, 0, 0, 2},
      {112, 3, 1, 1, 280, 1, 0, 0, 0, 2},
      {64, 4, 1, 1, 140, 1, 0, 0, 0, 3},
      {224, 2, 1, 1, 560, 2, 0, 0, 1, 1},
      {224, 2, 1, 0, 560, 2, 0, 0, 1, 1},
      {112, 5, 1, 1, 280, 2, 0, 0, 1, 1},
      /* the same bytes a box, tile-contiguous */
      {112, 5, 1, 1, 280, 1, 0, 0, 0, 1, 1},
      {112, 5, 1, 0, 280, 1, 0, 0, 0, 1, 1},
      {128, 5, 1, 1, 280, 1, 0, 0, 0, 1, 1},
      {64, 6, 1, 1, 140, 1, 0, 0, 0, 1, 1},
      {32, 8, 1, 1, 70, 1, 0, 0, 0, 1, 1},
      {224, 4, 1, 1, 560, 2, 0, 0, 0, 1, 1},
  };
  printf(
      "| rows a tile | boxes | boxes apart | blocks an SM | stages | k tiles issued together | "
      "x in each stage | hold ns | k staggered | tiles adjacent | tiled layout | us | GB/s | "
      "%% of plain read |\n|---:|---:|---|---:|---:|---:|---|---:|---|---|---|---:|---:|---:|\n");
  for (const cfg &c : cases) {
    if (N % c.br) continue;
    const size_t stage = (size_t)c.br * 128 + (c.x ? XROWS * 128 : 0);
    const size_t smem = c.st * stage + 1024;
    if (smem * c.bps > 226 * 1024 || c.st > MAX_ST) continue;
    const CUtensorMap mw =
        c.tiled ? map2d(w, (int)(bytes / 128), 64, c.br / c.nb) : map2d(w, N, K, c.br / c.nb);
    const double ms =
        median_ms([&] { tma_read<<<nsm * c.bps, 64, smem>>>(mw, mx, N, K, c, sink); });
    CK(cudaGetLastError());
    printf("| %d | %d | %s | %d | %d | %d | %s | %d | %s | %s | %s | %.1f | %.0f | %.1f |\n", c.br,
           c.nb, c.far ? "yes" : "no", c.bps, c.st, c.g, c.x ? "yes" : "no", c.delay_ns,
           c.stagger ? "yes" : "no", c.order ? "yes" : "no", c.tiled ? "yes" : "no", ms * 1e3,
           bytes / ms / 1e6, 100.0 * pr / ms);
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
