/* bench_cuda.h — the CUDA benches' check: a failed runtime call prints itself and its error
 * and ends the program. */
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

#endif
