/* ns_cuda.h — the one macro that checks every CUDA runtime call.
 * It logs the statement, file and line and returns NS_ECUDA from the caller. */
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

#endif
