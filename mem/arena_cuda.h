/* arena_cuda.h — internal: the CUDA calls behind device and pinned pools (arena_cuda.cu).
 * Only arena.c includes it, and only when built with NS_HAVE_CUDA. */
#ifndef NS_MEM_ARENA_CUDA_H
#define NS_MEM_ARENA_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Each returns 0 or NS_ECUDA (the failing call is logged by NS_CUDA_CHECK). */
int mem__cuda_device_alloc(uint64_t size, void **out);
int mem__cuda_device_free(void *p);
int mem__cuda_pinned_alloc(uint64_t size, void **out);
int mem__cuda_pinned_free(void *p);
int mem__cuda_mem_info(uint64_t *free_bytes, uint64_t *total_bytes);

#ifdef __cplusplus
}
#endif
#endif
