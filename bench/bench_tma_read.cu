/* bench_tma_read.cu — how fast one block a multiprocessor streams a weight matrix through TMA
 * in the decode GEMM's pattern: tiles of BR rows, each walked along K in boxes of 64 values
 * (128 bytes a row, 128-byte swizzle), ST stages a block, the producer issuing G adjacent k
 * boxes at once, optionally with the tile's x (128 rows of an L2-resident matrix) in each
 * stage, and the consumer warp holding each stage for D nanoseconds (the tensor work's place).
 * With the weights tile-contiguous instead (each box's rows one after another), the same bytes
 * a box from consecutive addresses. Against it, in the same run: cudaMemcpy device to device (the
 * copy ceiling, bytes read + written) and a plain 16-byte-load read of the same matrix. Median of
 * 15 launches after 3, CUDA events (BENCH_ONCE set: one launch each, for a profiler). Usage:
 * build/bench_tma_read [N K [probe]] (default 28672 4096, llama3-8b's gate|up; probe: the cases
 * that ask what sets one block's rate instead of the shapes' table). */
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <iterator>
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
  int wait;  /* how both sides wait on a stage: 0 mbarrier.try_wait (as gemm_dec.cu), 1 a
              * test_wait spin, 2 try_wait with a 32 ns suspend hint */
  int nopol; /* the weights' boxes without the evict-first L2 policy */
  int nopromo; /* the weights' map without L2 promotion (else 256 bytes) */
  int kper;    /* k boxes a stage (adjacent k tiles of the same rows, one barrier; 0: 1) */
  int alt;     /* a block's first two tiles' stages take turns (else tile after tile) */
  int pfmap;   /* prefetch.tensormap on both maps before the first copy */
  int twomaps; /* stage f's weights through map f % 2 (two maps of the same matrix) */
  int trace;   /* block 0 records when each of its first TRACE stages is issued and lands */
  int divs;    /* ring slots, phases and k tiles from the stage's number by 64-bit division each
                * stage (how this bench ran before 2026-12-03), not stepped */
  int lanes;   /* > 1: that many producer lanes copy consecutive stages in one instruction
                * (weights alone, one box a stage, tile after tile) */
};
enum { TRACE = 24 };

static __device__ __forceinline__ void stage_wait(uint64_t *b, unsigned parity, int how) {
  if (how == 1) {
    asm volatile("{\n.reg .pred p;\nS%=:\n"
                 "mbarrier.test_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra S%=;\n}\n" ::"r"(smem_u32(b)),
                 "r"(parity)
                 : "memory");
  } else if (how == 2) {
    asm volatile("{\n.reg .pred p;\nH%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1, 32;\n"
                 "@!p bra H%=;\n}\n" ::"r"(smem_u32(b)),
                 "r"(parity)
                 : "memory");
  } else {
    mbar_wait(b, parity);
  }
}

/* tiles of c.br rows of w (N x K), blocks taking tiles blockIdx.x, + gridDim.x, ... */
static __global__ void __launch_bounds__(64)
    tma_read(const __grid_constant__ CUtensorMap mw, const __grid_constant__ CUtensorMap mx, int N,
             int K, cfg c, unsigned *sink, const __grid_constant__ CUtensorMap mw2, long long *tl) {
  extern __shared__ __align__(16) unsigned char raw[];
  __shared__ uint64_t full[MAX_ST], empty[MAX_ST];
  unsigned char *sm = (unsigned char *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
  const int kper = c.kper ? c.kper : 1;
  const size_t wbytes = (size_t)c.br * 128 * kper, stage = wbytes + (c.x ? XROWS * 128 : 0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int tiles = N / c.br, kt = K / 64, kst = kt / kper; /* stages a tile */
  const int per = (tiles + gridDim.x - 1) / gridDim.x;
  const int t0 = c.order ? blockIdx.x * per : blockIdx.x,
            tend = c.order ? min(tiles, t0 + per) : tiles, tstep = c.order ? 1 : gridDim.x;
  const int ntb = t0 < tend ? (tend - t0 + tstep - 1) / tstep : 0; /* the block's tiles */
  const long nst = (long)ntb * kst;                                /* and stages */
  const int kofs = c.stagger ? (int)(blockIdx.x * 7u % (unsigned)kt) : 0;
  /* the block's stage i: tile t, first k tile kk (alt: its first two tiles' stages take turns);
   * with c.divs from i by 64-bit divisions each stage, else stepped (next) from the last */
  auto stage_of = [&](long i, int &t, int &kk) {
    long j, k;
    if (c.alt && ntb >= 2 && i < 2L * kst)
      j = i & 1, k = i >> 1;
    else
      j = i / kst, k = i % kst;
    t = t0 + (int)j * tstep, kk = (int)((k * kper + kofs) % kt);
  };
  int tj = 0, tk = 0; /* the producer's next stage: tile ordinal, stage of the tile */
  /* the stage after (j, k), tile after tile */
  auto step = [&](int &j, int &k) {
    if (++k == kst) k = 0, j++;
  };
  auto next = [&](long i) {
    if (c.alt && ntb >= 2 && i < 2L * kst) {
      if (tj == 0)
        tj = 1;
      else
        tj = 0, tk++;
      if (i + 1 == 2L * kst) tj = 2, tk = 0;
    } else {
      step(tj, tk);
    }
  };
  /* a ring position: slot s, wraps w (the barrier's phase parity); c.divs: from f by division */
  auto adv = [&](int &rs, int &rw) {
    if (++rs == c.st) rs = 0, rw++;
  };
  auto at = [&](long f, int &rs, int &rw) {
    if (c.divs) rs = (int)(f % c.st), rw = (int)(f / c.st);
  };
  const long long c0 = clock64();
  const bool rec = c.trace && blockIdx.x == 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < c.st; s++)
      mbar_init(&full[s], 1), mbar_init(&empty[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 1) { /* producer */
    if (lane >= (c.lanes > 1 ? c.lanes : 1)) return;
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    uint64_t polx;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(polx));
    if (c.pfmap) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&mw) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&mw2) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&mx) : "memory");
    }
    int ws = 0, ww = 0, is = 0, iw = 0; /* the waits' and the issues' ring positions */
    if (c.lanes > 1) { /* lanes i < n copy stages f + i, one instruction for them all */
      for (long f = 0; f < nst; f += c.lanes) {
        const int n = (int)min((long)c.lanes, nst - f);
        for (int j = 0; j < n; j++, adv(ws, ww))
          if (f + j >= c.st) stage_wait(&empty[ws], (unsigned)((ww - 1) & 1), c.wait);
        int ls = is, lw = iw, lj = tj, lk = tk; /* this lane's stage: f + lane */
        for (int i = 0; i < lane; i++)
          adv(ls, lw), step(lj, lk);
        int kk = lk + kofs; /* kper 1 */
        if (kk >= kt) kk -= kt;
        if (lane < n) {
          mbar_expect_tx(&full[ls], (unsigned)stage);
          tma_load(sm + (size_t)ls * stage, &mw, kk * 64, (t0 + lj * tstep) * c.br, &full[ls], pol);
        }
        for (int i = 0; i < n; i++)
          adv(is, iw), step(tj, tk);
      }
      return;
    }
    for (long f = 0; f < nst; f += c.g) {
      const int n = (int)min((long)c.g, nst - f);
      for (int j = 0; j < n; j++, adv(ws, ww)) { /* issue the group once its last stage is free */
        at(f + j, ws, ww);
        if (f + j >= c.st) stage_wait(&empty[ws], (unsigned)((ww - 1) & 1), c.wait);
      }
      for (int i = 0; i < n; i++, adv(is, iw)) {
        at(f + i, is, iw);
        int t, kk;
        if (c.divs) {
          stage_of(f + i, t, kk);
        } else {
          t = t0 + tj * tstep, kk = tk * kper + kofs;
          if (kk >= kt) kk -= kt;
          next(f + i);
        }
        const int kk0 = kk;
        unsigned char *d = sm + (size_t)is * stage;
        mbar_expect_tx(&full[is], (unsigned)stage);
        for (int q = 0; q < kper; q++, kk = kk + 1 == kt ? 0 : kk + 1)
          for (int b = 0; b < c.nb; b++) {
            const int r = b * (c.br / c.nb);
            const int k0 = c.tiled ? 0 : kk * 64, row = c.tiled ? (t * kt + kk) * c.br + r
                                                        : c.far ? b * (N / c.nb) + t * (c.br / c.nb)
                                                                : t * c.br + r;
            unsigned char *dq = d + (size_t)q * c.br * 128 + (size_t)r * 128;
            const CUtensorMap *m = c.twomaps && ((f + i) & 1) ? &mw2 : &mw;
            if (c.nopol)
              tma_load(dq, m, k0, row, &full[is]);
            else
              tma_load(dq, m, k0, row, &full[is], pol);
          }
        if (c.x) tma_load(d + wbytes, &mx, kk0 * 64, 0, &full[is], polx);
        if (rec && f + i < TRACE) tl[f + i] = clock64() - c0;
      }
    }
    return;
  }
  /* consumer: warp 0 */
  unsigned acc = 0;
  int s = 0, w = 0;
  for (long f = 0; f < nst; f++, adv(s, w)) {
    at(f, s, w);
    stage_wait(&full[s], (unsigned)(w & 1), c.wait);
    if (rec && lane == 0 && f < TRACE) tl[TRACE + f] = clock64() - c0;
    acc += *(volatile unsigned *)(sm + (size_t)s * stage + lane * 4);
    if (c.delay_ns) {
      const uint64_t h0 = clock64();
      while (clock64() - h0 < (uint64_t)c.delay_ns * 2 * kper) /* ~2 GHz */
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

static CUtensorMap map2d(const void *base, int rows, int K, int box_rows, bool promo = true) {
  CUtensorMap m;
  cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)rows}, stride[1] = {(cuuint64_t)K * 2};
  cuuint32_t box[2] = {64, (cuuint32_t)box_rows}, es[2] = {1, 1};
  CUresult r =
      encode_fn()(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dim, stride,
                  box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  promo ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_NONE,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    printf("cuTensorMapEncodeTiled: %d\n", (int)r);
    exit(1);
  }
  return m;
}

static int g_runs = 18, g_skip = 3; /* BENCH_ONCE: one launch each (for a profiler) */
template <class F> static double median_ms(F launch) {
  return median_ms(launch, g_runs - g_skip, g_skip);
}

int main(int argc, char **argv) {
  const int N = argc > 2 ? atoi(argv[1]) : 28672, K = argc > 2 ? atoi(argv[2]) : 4096;
  const bool probe = argc > 3 && !strcmp(argv[3], "probe");
  if (getenv("BENCH_ONCE")) g_runs = 1, g_skip = 0;
  int nsm;
  CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
  const size_t bytes = (size_t)N * K * 2;
  void *w, *w2, *x;
  unsigned *sink;
  CK(cudaMalloc(&w, bytes));
  CK(cudaMalloc(&w2, bytes));
  CK(cudaMalloc(&x, (size_t)XROWS * K * 2));
  CK(cudaMalloc(&sink, 4));
  long long *tl;
  CK(cudaMalloc(&tl, 2 * TRACE * sizeof(long long)));
  int khz;
  CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  if (khz <= 0) khz = 1980000; /* the H200's boost clock where the driver does not say */
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
  /* "probe": what sets one block's rate. Weights alone (no x) unless said. divs: the index
   * arithmetic this bench had before (64-bit divisions each stage in both threads) against
   * the ring stepped; stages in flight, k boxes under one barrier, two blocks an SM, 224 rows;
   * the decode GEMM's stages (x in each, a hold for the tensor work); the tensor maps
   * prefetched, two maps taking turns; block 0's first stages traced (issued, landed) */
  const cfg probes[] = {
      /* br st g x ns nb stg ord far bps til wait nopol nopromo kper alt pf two trace divs */
      {112, 5, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
      {112, 5, 1, 0, 0, 1, 0, 0, 0, 1},
      {112, 12, 1, 0, 0, 1, 0, 0, 0, 1},
      {112, 3, 1, 0, 0, 1, 0, 0, 0, 1},
      {112, 4, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 2},
      {56, 8, 1, 0, 0, 1, 0, 0, 0, 1},
      {224, 4, 1, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
      {224, 4, 1, 0, 0, 2, 0, 0, 0, 1},
      {112, 3, 1, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
      {112, 3, 1, 0, 0, 1, 0, 0, 0, 2},
      {112, 5, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1},
      {112, 5, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1},
      {112, 5, 1, 1, 280, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
      {112, 5, 1, 1, 280, 1, 0, 0, 0, 1},
      {128, 5, 1, 1, 280, 1, 0, 0, 0, 1},
      {128, 3, 1, 1, 280, 1, 0, 0, 0, 1},
      {224, 4, 1, 1, 560, 2, 0, 0, 0, 1},
      {64, 4, 1, 1, 140, 1, 0, 0, 0, 3},
      {112, 6, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2},
      {112, 8, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4},
      {112, 5, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
      {112, 5, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1},
  };

  printf(
      "| rows a tile | boxes | boxes apart | blocks an SM | stages | k tiles issued together | "
      "x in each stage | hold ns | k staggered | tiles adjacent | tiled layout | wait | L2 "
      "policy | promotion | k boxes a barrier | tiles take turns | maps prefetched | two maps | "
      "index arithmetic | producer lanes | "
      "us | GB/s | %% of plain read "
      "|\n|---:|---:|---|---:|---:|---:|---|---:|---|---|---|---|---|---|---:|---|---|---|---|---:|"
      "---:|---:|---:|\n");
  static const char *waits[] = {"try_wait", "test_wait spin", "try_wait 32 ns"};
  const std::vector<cfg> run = probe ? std::vector<cfg>(std::begin(probes), std::end(probes))
                                     : std::vector<cfg>(std::begin(cases), std::end(cases));
  for (const cfg &c : run) {
    const size_t stage = (size_t)c.br * 128 * (c.kper ? c.kper : 1) + (c.x ? XROWS * 128 : 0);
    const size_t smem = c.st * stage + 1024;
    if (N % c.br || smem * c.bps > 226 * 1024 || c.st > MAX_ST) {
      printf("| %d rows, %d stages, %d blocks an SM: not run (N %% rows, or shared memory) |\n",
             c.br, c.st, c.bps);
      continue;
    }
    const CUtensorMap mw = c.tiled ? map2d(w, (int)(bytes / 128), 64, c.br / c.nb, !c.nopromo)
                                   : map2d(w, N, K, c.br / c.nb, !c.nopromo);
    const CUtensorMap mw2 = mw; /* the same map at another address */
    const double ms =
        median_ms([&] { tma_read<<<nsm * c.bps, 64, smem>>>(mw, mx, N, K, c, sink, mw2, tl); });
    CK(cudaGetLastError());
    printf("| %d | %d | %s | %d | %d | %d | %s | %d | %s | %s | %s | %s | %s | %s | %d | %s | %s | "
           "%s | %s | %d | %.1f | %.0f | %.1f |\n",
           c.br, c.nb, c.far ? "yes" : "no", c.bps, c.st, c.g, c.x ? "yes" : "no", c.delay_ns,
           c.stagger ? "yes" : "no", c.order ? "yes" : "no", c.tiled ? "yes" : "no", waits[c.wait],
           c.nopol ? "none" : "evict_first", c.nopromo ? "none" : "256 B", c.kper ? c.kper : 1,
           c.alt ? "yes" : "no", c.pfmap ? "yes" : "no", c.twomaps ? "yes" : "no",
           c.divs ? "divisions" : "stepped", c.lanes > 1 ? c.lanes : 1, ms * 1e3, bytes / ms / 1e6,
           100.0 * pr / ms);
    if (c.trace) { /* the last launch's block 0, µs from its start at the reported clock */
      long long h[2 * TRACE];
      CK(cudaMemcpy(h, tl, sizeof h, cudaMemcpyDeviceToHost));
      for (int r = 0; r < 2; r++) {
        printf("|   block 0, stages %s (us):", r ? "landed" : "issued");
        for (int i = 0; i < TRACE; i++)
          printf(" %.2f", h[r * TRACE + i] / (khz * 1e-3));
        printf(" |\n");
      }
    }
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
