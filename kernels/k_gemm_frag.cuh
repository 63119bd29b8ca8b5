/* k_gemm_frag.cuh — the tensor-core steps k_gemm (gemm.cu) and k_gemm_dec (gemm_dec.cu) share,
 * so that both GEMMs do the same per-mma arithmetic: cp.async with an L2 eviction policy,
 * wgmma (sm_90a) descriptors and k tiles, and the mma.sync k steps from shared tiles. Device
 * code for the kernels/ .cu files. */
#ifndef K_GEMM_FRAG_CUH
#define K_GEMM_FRAG_CUH

#include "k_common.cuh"
#include "k_mma.cuh"

#include <stdint.h>

/* The same copy with an L2 eviction policy: weights streamed once are let go first, so that
 * what is read again (x rows, partial sums) stays in L2. */
__device__ __forceinline__ void cp_async16_hint(void *smem, const void *gmem, int bytes,
                                                uint64_t policy) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(s),
               "l"(gmem), "r"(bytes), "l"(policy));
}
__device__ __forceinline__ uint64_t l2_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}

/* wgmma (sm_90a) for the decode GEMM above DEC_WG_T rows: shared tiles of rows of 64 bf16 (128
 * bytes) in the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8); 8-row groups
 * 1024 bytes apart), both operands k-major. A descriptor: start address, leading offset
 * (unused with this swizzle, 1), stride offset 1024 bytes, swizzle mode 1 (128 bytes). */
__device__ __forceinline__ uint64_t wg_desc(const void *smem) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
  return (uint64_t)((a & 0x3FFFF) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 |
         (uint64_t)1 << 62;
}
__device__ __forceinline__ void wg_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_wait0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
/* keeps the compiler from moving accumulator definitions into a wgmma sequence */
template <int FN> __device__ __forceinline__ void wg_pin(float (&d)[FN][4]) {
#pragma unroll
  for (int j = 0; j < FN; j++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      asm volatile("" : "+f"(d[j][e])::"memory");
}
/* cp.async writes made visible to the async proxy wgmma reads shared memory through */
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* the four accumulators of d[j] as asm outputs */
#define WG_D4(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
/* d += a . b^T for the warpgroup's 64 rows of a and FN * 8 rows of b, 16 values of k, where
 * on (uniform: a predicate, not a branch, so the accumulators stay in place): d[j][e] is row
 * 16 warp + lane / 4 (+ 8 for e >= 2), column 8 j + 2 (lane % 4) + e % 2, the layout mma16816
 * gives a warp's m16 block, so one warp_k16 step and one of these add the same products to
 * the same accumulators. */
template <int FN>
__device__ __forceinline__ void wg_k16(float (&d)[FN][4], uint64_t da, uint64_t db, bool on) {
  static_assert(FN == 8 || FN == 14 || FN == 16, "n64, n112 or n128");
  if constexpr (FN == 8) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "@p wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
                 "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, "
                 "1, 1, 1, 0, 0;\n}\n"
                 : WG_D4(0), WG_D4(1), WG_D4(2), WG_D4(3), WG_D4(4), WG_D4(5), WG_D4(6), WG_D4(7)
                 : "l"(da), "l"(db), "r"((int)on));
  } else if constexpr (FN == 14) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %58, 0;\n"
                 "@p wgmma.mma_async.sync.aligned.m64n112k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
                 "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "
                 "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "
                 "%50, %51, %52, %53, %54, %55}, %56, %57, 1, 1, 1, 0, 0;\n}\n"
                 : WG_D4(0), WG_D4(1), WG_D4(2), WG_D4(3), WG_D4(4), WG_D4(5), WG_D4(6), WG_D4(7),
                   WG_D4(8), WG_D4(9), WG_D4(10), WG_D4(11), WG_D4(12), WG_D4(13)
                 : "l"(da), "l"(db), "r"((int)on));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "@p wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
        "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, "
        "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
        "%55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, 1, 1, 1, 0, 0;\n}\n"
        : WG_D4(0), WG_D4(1), WG_D4(2), WG_D4(3), WG_D4(4), WG_D4(5), WG_D4(6), WG_D4(7), WG_D4(8),
          WG_D4(9), WG_D4(10), WG_D4(11), WG_D4(12), WG_D4(13), WG_D4(14), WG_D4(15)
        : "l"(da), "l"(db), "r"((int)on));
  }
}
#undef WG_D4

/* One k tile of BK values for a warpgroup (sg: its 64 rows of the x tile, sb: the weight
 * tile): the 16-value steps warp_k16 takes, in the same order, none at or past ke; returns
 * once they are done. */
template <int FN, int BK>
__device__ __forceinline__ void wg_tile(float (&d)[FN][4], const bf16 *sg, const bf16 *sb, int k0,
                                        int ke) {
  wg_pin<FN>(d);
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < BK; kk += 16)
    wg_k16<FN>(d, wg_desc(sg + kk), wg_desc(sb + kk), k0 + kk < ke);
  wg_commit();
  wg_wait0();
  wg_pin<FN>(d);
}

/* One step of 16 values of k for a warp's FM x FN block of m16n8 tiles: the A fragments
 * (x rows) and B fragments (w rows) by ldmatrix from shared tiles of row pitch LDS (sa: the
 * warp's first x row, sb: its first w row, both at the step's first k), then FM x FN mma.
 * k_gemm and k_gemm_dec both step through this one function, so their per-mma arithmetic is
 * the same. */
template <int FN, int LDS>
__device__ __forceinline__ void warp_b16(uint32_t (&bfr)[FN][2], const bf16 *sb, int lane) {
#pragma unroll
  for (int j = 0; j + 1 < FN; j += 2) {
    uint32_t r[4];
    ldsm_x4(r, sb + (j * 8 + (lane & 7) + (lane >> 4) * 8) * LDS + ((lane >> 3) & 1) * 8);
    bfr[j][0] = r[0], bfr[j][1] = r[1], bfr[j + 1][0] = r[2], bfr[j + 1][1] = r[3];
  }
  if (FN & 1) ldsm_x2(bfr[FN - 1], sb + ((FN - 1) * 8 + (lane & 7)) * LDS + ((lane >> 3) & 1) * 8);
}
template <int FM, int FN, int LDS>
__device__ __forceinline__ void warp_k16(float (&acc)[FM][FN][4], const bf16 *sa, const bf16 *sb,
                                         int lane) {
  uint32_t af[FM][4], bfr[FN][2];
#pragma unroll
  for (int i = 0; i < FM; i++)
    ldsm_x4(af[i], sa + (i * 16 + (lane & 15)) * LDS + (lane >> 4) * 8);
  warp_b16<FN, LDS>(bfr, sb, lane);
#pragma unroll
  for (int i = 0; i < FM; i++)
#pragma unroll
    for (int j = 0; j < FN; j++)
      mma16816(acc[i][j], af[i], bfr[j]);
}
/* warp_k16 for one m16 block whose x rows lie apart from the tile (k_gemm_dec_swiglu's
 * segment of x, made in shared memory): a is this lane's ldmatrix address (shared window),
 * its row's value at the step's first k plus (lane >> 4) * 8. The same fragments and mma as
 * warp_k16. */
template <int FN, int LDS>
__device__ __forceinline__ void warp_k16_rows(float (&acc)[1][FN][4], uint32_t a, const bf16 *sb,
                                              int lane) {
  uint32_t af[4], bfr[FN][2];
  ldsm_x4_at(af, a);
  warp_b16<FN, LDS>(bfr, sb, lane);
#pragma unroll
  for (int j = 0; j < FN; j++)
    mma16816(acc[0][j], af, bfr[j]);
}

/* A whole k tile of BK values, every step inside the range, for a warp's FM x FN blocks, from
 * shared-window addresses stepped by constants: a, this lane's ldmatrix address of the warp's
 * first x row at the tile's first k (warp_k16's for sa, or warp_k16_rows' a; warp_a_lane),
 * b the same of its first w row (warp_b16's for sb; warp_b_lane). Every fragment of the tile
 * is loaded before the first mma (the ldmatrix latencies overlap instead of each mma waiting
 * on its own), then the mma run in warp_k16's order (k step, i, j): the same products added
 * to the same accumulators in the same order as BK / 16 warp_k16 steps. */
template <int LDS> __device__ __forceinline__ uint32_t warp_a_lane(int lane) {
  return (uint32_t)(((lane & 15) * LDS + (lane >> 4) * 8) * 2);
}
template <int LDS> __device__ __forceinline__ uint32_t warp_b_lane(int lane) {
  return (uint32_t)((((lane & 7) + (lane >> 4) * 8) * LDS + ((lane >> 3) & 1) * 8) * 2);
}
template <int FM, int FN, int LDS, int BK>
__device__ __forceinline__ void warp_tile(float (&acc)[FM][FN][4], uint32_t a, uint32_t b) {
  constexpr int KS = BK / 16;
  uint32_t af[KS][FM][4], bfr[KS][FN][2];
#pragma unroll
  for (int s = 0; s < KS; s++) {
#pragma unroll
    for (int i = 0; i < FM; i++)
      ldsm_x4_at(af[s][i], a + (uint32_t)((i * 16 * LDS + s * 16) * 2));
#pragma unroll
    for (int j = 0; j + 1 < FN; j += 2) {
      uint32_t r[4];
      ldsm_x4_at(r, b + (uint32_t)((j * 8 * LDS + s * 16) * 2));
      bfr[s][j][0] = r[0], bfr[s][j][1] = r[1], bfr[s][j + 1][0] = r[2], bfr[s][j + 1][1] = r[3];
    }
    /* x2 reads lanes 0-15's addresses, which warp_b_lane gives as warp_b16 does */
    if (FN & 1) ldsm_x2_at(bfr[s][FN - 1], b + (uint32_t)(((FN - 1) * 8 * LDS + s * 16) * 2));
  }
#pragma unroll
  for (int s = 0; s < KS; s++)
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
      for (int j = 0; j < FN; j++)
        mma16816(acc[i][j], af[s][i], bfr[s][j]);
}

/* A warp's FM x FN m16n8 accumulators set to zero (each k chain starts from zero). */
template <int FM, int FN> __device__ __forceinline__ void acc_zero(float (&acc)[FM][FN][4]) {
#pragma unroll
  for (int i = 0; i < FM; i++)
#pragma unroll
    for (int j = 0; j < FN; j++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        acc[i][j][e] = 0.0f;
}

#endif
