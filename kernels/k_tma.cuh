/* k_tma.cuh — shared-memory barriers (mbarrier) and TMA tile copies, as the decode GEMM's
 * producer and its consumers use them (gemm_dec.cu; bench/bench_tma_read.cu times the same
 * copies alone). */
#ifndef K_TMA_CUH
#define K_TMA_CUH

#include <cudaTypedefs.h>
#include <stdint.h>

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void mbar_init(uint64_t *b, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, unsigned parity) {
  asm volatile("{\n.reg .pred p;\nW%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra W%=;\n}\n" ::"r"(smem_u32(b)),
               "r"(parity)
               : "memory");
}
/* box (k0, row) of map into this block's smem, its bytes counted on bar (with an L2 policy,
 * or without) */
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, int k0, int row,
                                         uint64_t *bar, uint64_t policy) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_u32(dst)),
               "l"(map), "r"(k0), "r"(row), "r"(smem_u32(bar)), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, int k0, int row,
                                         uint64_t *bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_u32(dst)),
               "l"(map), "r"(k0), "r"(row), "r"(smem_u32(bar))
               : "memory");
}

#endif
