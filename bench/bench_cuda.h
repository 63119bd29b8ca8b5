/* bench_cuda.h — what the CUDA benches share: the check (a failed runtime call prints itself
 * and its error and ends the program) and an acquire load. */
#ifndef BENCH_CUDA_H
#define BENCH_CUDA_H

#include <cstdio>
#include <cstdlib>
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

#endif
