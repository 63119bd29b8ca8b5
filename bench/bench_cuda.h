/* bench_cuda.h — what the CUDA benches share: the check (a failed runtime call prints itself
 * and its error and ends the program), an acquire load and the median of timed launches. */
#ifndef BENCH_CUDA_H
#define BENCH_CUDA_H

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e != cudaSuccess) {                                                                        \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                                               \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* a load with acquire semantics at device scope: a flag or counter another block released */
__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/* The median ms of launch() over runs launches after skip more, each timed alone with CUDA
 * events on the default stream; prep() runs before each launch, outside its time. */
template <class F, class P> static double median_ms(F launch, int runs, int skip, P prep) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> v;
  for (int i = 0; i < skip + runs; i++) {
    prep();
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= skip) v.push_back(ms);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
template <class F> static double median_ms(F launch, int runs, int skip) {
  return median_ms(launch, runs, skip, [] {});
}

#endif
