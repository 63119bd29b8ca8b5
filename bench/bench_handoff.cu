/* bench_handoff.cu — what a kernel boundary costs inside a decode step's CUDA graph: chains
 * of a one-block kernel (a norm: reads 64 KB of partial sums, writes 8 KB) and a 264-block one
 * (a GEMM: reads the 8 KB, writes the next 64 KB), launched with programmatic dependent launch,
 * the consumer released by griddepcontrol.wait (grid completion) or by a flag the one-block
 * producer stores with release semantics; a chain of the one-block kernel alone; and the same
 * pairs as phases of one persistent kernel (264 blocks, co-resident: a cooperative launch),
 * block 0 doing the one-block work, everyone the rest, synchronised through a counter (or a
 * line a block) and a flag — what a whole-step kernel would pay for the same dependencies.
 * Median of 25 graph
 * replays after 5, per pair. Usage: build/bench_handoff [PAIRS] (default 200). */
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#include "bench_cuda.h"

__device__ __forceinline__ void pdl_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__device__ __forceinline__ void st_release(unsigned *p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* The one-block work (256 threads): part[16384] read, a block sum, x[2048] written. */
__device__ __forceinline__ void small_work(const float *part, float *x) {
  __shared__ float red[8];
  const int t = threadIdx.x;
  float v[8], s = 0;
#pragma unroll
  for (int j = 0; j < 8; j++)
    v[j] = __ldcg(part + t * 8 + j * 2048);
#pragma unroll
  for (int j = 0; j < 8; j++)
    s += v[j];
  float w = s;
  for (int o = 16; o; o >>= 1)
    w += __shfl_xor_sync(~0u, w, o);
  if ((t & 31) == 0) red[t >> 5] = w;
  __syncthreads();
  float tot = 0;
  for (int k = 0; k < 8; k++)
    tot += red[k];
  for (int j = 0; j < 8; j++)
    x[t * 8 + j] = s * tot * 1e-9f + j;
}

/* A block's share of the wide work (NT threads: a constant stride, so that every load of x is
 * in flight at once): x read, 64 values of part written. */
template <int NT> __device__ __forceinline__ void big_work(const float *x, float *part) {
  const int t = threadIdx.x;
  float a = 0;
#pragma unroll
  for (int k = t; k < 2048; k += NT)
    a += __ldcg(x + k);
  const int o = blockIdx.x * 64 + (t & 63);
  if (t < 64 && o < 16384) part[o] = a;
}

/* S: the one-block work; mode 1: then releases its flag */
__global__ void __launch_bounds__(256)
    k_small(const float *part, float *x, unsigned *flag, int mode) {
  pdl_trigger();
  pdl_wait();
  small_work(part, x);
  if (mode == 1) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      st_release(flag, 1u);
    }
  }
}

/* G, 264 blocks: the wide work; mode 1: waits for S's flag instead of S's grid (S read part
 * before releasing it, so G may overwrite it) */
__global__ void __launch_bounds__(128)
    k_big(const float *x, float *part, const unsigned *flag, int mode) {
  pdl_trigger();
  if (mode == 1 || mode >= 5) {
    if (threadIdx.x == 0) {
      unsigned ns = 32;
      while (ld_acquire(flag) == 0)
        if (mode == 5) { /* backing off: fewer polls of the line while S runs */
          __nanosleep(ns);
          ns = ns < 256 ? 2 * ns : 256;
        } else if (mode == 6) {
          __nanosleep(100);
        }
    }
    __syncthreads();
  } else {
    pdl_wait();
  }
  big_work<128>(x, part);
}

/* The pairs as phases of one kernel: sync[0] counts the blocks' finished big phases (own: each
 * block stores its count in a 128-byte line of its own, which block 0's threads poll side by
 * side), sync[32] (a line of its own) the small phases done. */
__global__ void __launch_bounds__(256)
    k_persist(float *part, float *x, unsigned *sync, int np, int own) {
  unsigned *arr = sync, *go = sync + 32, *mine = sync + 64; /* own: block b's line at mine + 32 b */
  const int t = threadIdx.x;
  for (int i = 0; i < np; i++) {
    if (blockIdx.x == 0) {
      if (own) {
        for (int b = t; b < (int)gridDim.x; b += blockDim.x)
          while (ld_acquire(mine + 32 * b) < (unsigned)i) {
          }
      } else if (t == 0) {
        while (ld_acquire(arr) < gridDim.x * (unsigned)i) {
        }
      }
      __syncthreads();
      small_work(part, x);
      __syncthreads();
      if (t == 0) {
        __threadfence();
        st_release(go, (unsigned)i + 1);
      }
    }
    if (t == 0)
      while (ld_acquire(go) < (unsigned)i + 1) {
      }
    __syncthreads();
    big_work<256>(x, part);
    __syncthreads();
    if (t == 0) {
      __threadfence();
      if (own)
        st_release(mine + 32 * blockIdx.x, (unsigned)i + 1);
      else
        atomicAdd(arr, 1u);
    }
  }
}

int main(int argc, char **argv) {
  const int NP = argc > 1 ? atoi(argv[1]) : 200;
  if (NP < 1 || NP > 100000) {
    printf("usage: bench_handoff [PAIRS (1..100000)]\n");
    return 2;
  }
  float *part, *x;
  unsigned *flags, *sync;
  CK(cudaMalloc(&part, 16384 * 4));
  CK(cudaMalloc(&sync, (64 + 32 * 264) * 4));
  CK(cudaMalloc(&x, 2048 * 4));
  CK(cudaMalloc(&flags, NP * 4));
  CK(cudaMemset(part, 0, 16384 * 4));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  for (int mode = 0; mode < 7; mode++) {
    /* mode 0: PDL wait everywhere; 1: G polls S's flag; 2: S alone (a one-block chain); 3: one
     * persistent kernel, arrivals counted; 4: the same, arrivals in lines of their own; 5: as
     * 1, each poll after a sleep of 32 ns doubling to 256; 6: as 1, 100 ns between polls */
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    CK(cudaMemsetAsync(flags, 0, NP * 4, st));
    CK(cudaMemsetAsync(sync, 0, (64 + 32 * 264) * 4, st));
    if (mode == 3 || mode == 4) {
      cudaLaunchAttribute co[1];
      co[0].id = cudaLaunchAttributeCooperative;
      co[0].val.cooperative = 1;
      cudaLaunchConfig_t c = {};
      c.stream = st, c.attrs = co, c.numAttrs = 1;
      c.gridDim = dim3(264), c.blockDim = dim3(256);
      CK(cudaLaunchKernelEx(&c, k_persist, part, x, sync, NP, mode == 4 ? 1 : 0));
    }
    for (int i = 0; i < NP && (mode < 3 || mode >= 5); i++) {
      cudaLaunchConfig_t c = {};
      c.stream = st, c.attrs = at, c.numAttrs = 1;
      c.gridDim = dim3(1), c.blockDim = dim3(256);
      CK(cudaLaunchKernelEx(&c, k_small, (const float *)part, x, flags + i,
                            mode == 1 || mode >= 5 ? 1 : 0));
      if (mode == 2) continue;
      c.gridDim = dim3(264), c.blockDim = dim3(128);
      CK(cudaLaunchKernelEx(&c, k_big, (const float *)x, part, (const unsigned *)(flags + i),
                            mode));
    }
    CK(cudaStreamEndCapture(st, &g));
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int r = 0; r < 30; r++) {
      CK(cudaEventRecord(e0, st));
      CK(cudaGraphLaunch(ge, st));
      CK(cudaEventRecord(e1, st));
      CK(cudaStreamSynchronize(st));
      float m;
      CK(cudaEventElapsedTime(&m, e0, e1));
      if (r >= 5) ms.push_back(m);
    }
    std::sort(ms.begin(), ms.end());
    const char *nm[7] = {"small->big, PDL wait",
                         "small->big, big polls small's flag",
                         "small->small, PDL wait",
                         "small->big, phases of one kernel",
                         "small->big, phases, own arrival lines",
                         "small->big, flag polled with backoff",
                         "small->big, flag polled every 100 ns"};
    printf("%-40s %d pairs: median %.3f ms, %.2f us a pair\n", nm[mode], NP, ms[ms.size() / 2],
           ms[ms.size() / 2] * 1000.0 / NP);
    CK(cudaEventDestroy(e1));
    CK(cudaEventDestroy(e0));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  }
  CK(cudaStreamDestroy(st));
  CK(cudaFree(sync));
  CK(cudaFree(flags));
  CK(cudaFree(x));
  CK(cudaFree(part));
  return 0;
}
