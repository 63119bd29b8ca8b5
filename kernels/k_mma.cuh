/* k_mma.cuh — tensor-core building blocks shared by the kernel families (internal to the
 * kernels/ .cu files): cp.async copies into shared memory, ldmatrix fragment loads, the
 * m16n8k16 bf16 mma with fp32 accumulation. */
#ifndef K_MMA_CUH
#define K_MMA_CUH

#include <stdint.h>

/* 16 bytes global -> shared, bypassing L1; bytes < 16 zero-fills the rest (0: all zero). */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int bytes) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* _at: from a shared-window address (__cvta_generic_to_shared's), for loops that keep one a
 * lane and step it by constants */
__device__ __forceinline__ void ldsm_x4_at(uint32_t r[4], uint32_t s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldsm_x2_at(uint32_t r[2], uint32_t s) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(s));
}
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *smem) {
  ldsm_x4_at(r, (uint32_t)__cvta_generic_to_shared(smem));
}
__device__ __forceinline__ void ldsm_x2(uint32_t r[2], const void *smem) {
  ldsm_x2_at(r, (uint32_t)__cvta_generic_to_shared(smem));
}
/* The four 8x8 matrices transposed: B fragments from a row-major [k][n] tile. */
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void *smem) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

/* c += a b: a 16x16 (4 registers, ldmatrix x4 order), b 16x8 (2), c 16x8 fp32. Lane 4g + t
 * holds c0, c1 at row g, columns 2t, 2t + 1 and c2, c3 eight rows below. */
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#endif
