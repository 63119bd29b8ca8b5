/* k_common.cuh — device helpers shared by the kernel families (internal to the kernels/ .cu
 * 16-byte bf16 vector loads and stores, alignment tests, the launch check. */
#ifndef K_COMMON_CUH
#define K_COMMON_CUH

#include "ns_cuda.h"

#include <cuda_bf16.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

/* Eight bf16 values moved as one 16-byte access. */
struct __align__(16) bf16x8 {
  __nv_bfloat162 h[4];
};

__device__ __forceinline__ void k_load8(float f[8], const bf16 *p) {
  bf16x8 v = *reinterpret_cast<const bf16x8 *>(p);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    float2 t = __bfloat1622float2(v.h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

/* x rounded to bf16 and back: where a bf16 model (Hugging Face transformers' bf16 modules)
 * rounds an intermediate, the kernels round it too, so both make the same errors. */
__device__ __forceinline__ float k_rbf(float x) {
  return __bfloat162float(__float2bfloat16(x));
}

__device__ __forceinline__ void k_store8(bf16 *p, const float f[8]) {
  bf16x8 v;
#pragma unroll
  for (int i = 0; i < 4; i++)
    v.h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<bf16x8 *>(p) = v;
}

static inline bool k_aligned(const void *p, size_t a) {
  return ((uintptr_t)p & (a - 1)) == 0;
}

/* After a launch: a bad configuration is returned at once (logged), not left sticky. */
#define K_LAUNCH_CHECK() NS_CUDA_CHECK(cudaGetLastError())

#endif
