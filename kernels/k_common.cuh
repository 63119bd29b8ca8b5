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

/* Programmatic dependent launch (sm_90): a kernel launched with k_launch_pdl may be scheduled
 * while the kernel before it in the stream still runs. It must call k_pdl_wait() before it
 * touches any memory another kernel of the step writes or reads (the wait returns once the
 * previous grid has completed and its writes are visible; a no-op without PDL); reading
 * constant data (weights) before it is allowed. k_pdl_trigger() lets the next PDL kernel be
 * scheduled at once instead of when this grid's blocks exit, so that the next GEMM starts
 * streaming its weights while the small kernels before it run (k_pdl_enter places it). */
__device__ __forceinline__ void k_pdl_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
__device__ __forceinline__ void k_pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

/* The wait, with the trigger before it for a launch of at most K_PDL_EARLY_ROWS rows (the
 * next kernel's blocks are scheduled while this one still waits: a small batch's decode step
 * is a chain of short kernels) and after it otherwise (with more rows, blocks scheduled that
 * early slowed llama3-8b steps of batch 64 and 128 by 5% and 4% on an H200; batch 1 gained 1.5-4%
 * on the three model shapes). */
enum { K_PDL_EARLY_ROWS = 16 };
__device__ __forceinline__ void k_pdl_enter(int rows) {
  if (rows <= K_PDL_EARLY_ROWS) k_pdl_trigger();
  k_pdl_wait();
  if (rows > K_PDL_EARLY_ROWS) k_pdl_trigger();
}

/* A launch, with programmatic dependent launch where pdl and, where cluster > 0, the blocks
 * in clusters of that many along x (k_launch: none; k_launch_pdl: PDL, no cluster). */
template <typename... P, typename... A>
static inline cudaError_t k_launch_cl(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                      cudaStream_t st, bool pdl, unsigned cluster, A... args) {
  cudaLaunchAttribute at[2];
  unsigned n = 0;
  if (pdl) {
    at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster) {
    at[n].id = cudaLaunchAttributeClusterDimension;
    at[n].val.clusterDim.x = cluster, at[n].val.clusterDim.y = 1, at[n++].val.clusterDim.z = 1;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cfg.attrs = at;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}
template <typename... P, typename... A>
static inline cudaError_t k_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                   cudaStream_t st, bool pdl, A... args) {
  return k_launch_cl(kernel, grid, block, smem, st, pdl, 0u, args...);
}
template <typename... P, typename... A>
static inline cudaError_t k_launch_pdl(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                       cudaStream_t st, A... args) {
  return k_launch(kernel, grid, block, smem, st, true, args...);
}

/* After a launch: a bad configuration is returned at once (logged), not left sticky. */
#define K_LAUNCH_CHECK() NS_CUDA_CHECK(cudaGetLastError())

#endif
