/* arena_cuda.cu — the CUDA runtime calls that back device and pinned-host pools.
 * Entry points mem__cuda_device_alloc() and mem__cuda_pinned_alloc(); no kernels here. */
#include "arena_cuda.h"

#include "ns_cuda.h"

extern "C" int mem__cuda_device_alloc(uint64_t size, void **out) {
  *out = nullptr;
  NS_CUDA_CHECK(cudaMalloc(out, (size_t)size));
  return 0;
}

extern "C" int mem__cuda_device_free(void *p) {
  NS_CUDA_CHECK(cudaFree(p));
  return 0;
}

extern "C" int mem__cuda_pinned_alloc(uint64_t size, void **out) {
  *out = nullptr;
  /* portable: usable from every device's context, should the engine ever hold two */
  NS_CUDA_CHECK(cudaHostAlloc(out, (size_t)size, cudaHostAllocPortable));
  return 0;
}

extern "C" int mem__cuda_pinned_free(void *p) {
  NS_CUDA_CHECK(cudaFreeHost(p));
  return 0;
}

extern "C" int mem__cuda_mem_info(uint64_t *free_bytes, uint64_t *total_bytes) {
  size_t f = 0, t = 0;
  NS_CUDA_CHECK(cudaMemGetInfo(&f, &t));
  *free_bytes = f;
  *total_bytes = t;
  return 0;
}
