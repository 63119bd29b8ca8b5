/* ns_cuda.h — the macros that check every CUDA runtime (NS_CUDA_CHECK) and cuBLAS / cuBLASLt
 * (NS_CUBLAS_CHECK) call: they log the statement, file and line and return NS_ECUDA. */
#ifndef NS_CUDA_H
#define NS_CUDA_H

#include "ns_err.h"
#include "ns_log.h"

#include <cuda_runtime.h>

/* NS_CUDA_CHECK(stmt): run stmt; on failure log it and `return NS_ECUDA`.
 * The sticky error is cleared with cudaGetLastError so one failed request does
 * not poison the next call (a real context fault stays and is seen again). */
#define NS_CUDA_CHECK(stmt)                                                                        \
  do {                                                                                             \
    cudaError_t ns_cuda_err_ = (stmt);                                                             \
    if (ns_cuda_err_ != cudaSuccess) {                                                             \
      (void)cudaGetLastError();                                                                    \
      ns_log_error("CUDA: %s failed: %s (%s:%d)", #stmt, cudaGetErrorString(ns_cuda_err_),         \
                   __FILE__, __LINE__);                                                            \
      return NS_ECUDA;                                                                             \
    }                                                                                              \
  } while (0)

/* NS_CUBLAS_CHECK(stmt): the same for a cublasStatus_t (0 is CUBLAS_STATUS_SUCCESS; the
 * status is logged by number so that this header needs no cuBLAS include). */
#define NS_CUBLAS_CHECK(stmt)                                                                      \
  do {                                                                                             \
    int ns_cublas_st_ = (int)(stmt);                                                               \
    if (ns_cublas_st_ != 0) {                                                                      \
      ns_log_error("cuBLAS: %s failed: status %d (%s:%d)", #stmt, ns_cublas_st_, __FILE__,         \
                   __LINE__);                                                                      \
      return NS_ECUDA;                                                                             \
    }                                                                                              \
  } while (0)

#endif
