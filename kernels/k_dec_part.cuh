/* k_dec_part.cuh — a lazy k_gemm_dec's output read from its partial sums (gemm.h,
 * k_gemm_dec_lazy) by the kernel that consumes it: per element p0 + p1 + ... in segment order,
 * then + bias, rounded to bf16 — what k_gemm_dec's last block stores, so the same bits. The
 * partials are read through L2 (__ldcg), 8 segments in flight. */
#ifndef K_DEC_PART_CUH
#define K_DEC_PART_CUH

#include "gemm.h"
#include "k_common.cuh"

/* H groups of 8 columns of row r, c[h] .. c[h] + 7 (c[h] % 8 == 0: the 8 lie in one tile, bn
 * is a multiple of 8), as the floats of their bf16 values: every group's partials of up to 8
 * segments in flight before any is added. */
template <int H>
__device__ __forceinline__ void k_dec_part_getn(const k_dec_part &p, int r, const int (&c)[H],
                                                float (&o)[H][8]) {
  const size_t tile = (size_t)p.bm * p.bn;
  const float *q[H];
  float4 a[H], b[H];
#pragma unroll
  for (int h = 0; h < H; h++) {
    q[h] = p.part + (size_t)(c[h] / p.bn) * p.nseg * tile + (size_t)r * p.bn + c[h] % p.bn;
    a[h] = __ldcg(reinterpret_cast<const float4 *>(q[h]));
    b[h] = __ldcg(reinterpret_cast<const float4 *>(q[h] + 4));
  }
  for (int s0 = 1; s0 < p.nseg; s0 += 8) {
    float4 ua[H][8], ub[H][8];
#pragma unroll
    for (int h = 0; h < H; h++)
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (s0 + j < p.nseg) {
          const float *qs = q[h] + (size_t)(s0 + j) * tile;
          ua[h][j] = __ldcg(reinterpret_cast<const float4 *>(qs));
          ub[h][j] = __ldcg(reinterpret_cast<const float4 *>(qs + 4));
        }
#pragma unroll
    for (int h = 0; h < H; h++)
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (s0 + j < p.nseg) {
          a[h].x += ua[h][j].x, a[h].y += ua[h][j].y, a[h].z += ua[h][j].z, a[h].w += ua[h][j].w;
          b[h].x += ub[h][j].x, b[h].y += ub[h][j].y, b[h].z += ub[h][j].z, b[h].w += ub[h][j].w;
        }
  }
  const bf16 *bias = (const bf16 *)p.bias;
#pragma unroll
  for (int h = 0; h < H; h++) {
    const float v[8] = {a[h].x, a[h].y, a[h].z, a[h].w, b[h].x, b[h].y, b[h].z, b[h].w};
#pragma unroll
    for (int j = 0; j < 8; j++)
      o[h][j] = k_rbf(bias ? v[j] + __bfloat162float(bias[c[h] + j]) : v[j]);
  }
}

/* The 128-byte lines of columns c .. c + 31 of row r (c % 32 == 0), every segment's, dropped
 * from L2 (discard.global.L2: invalidated, not written back) where p.drop. The caller drops a
 * line only after every thread that reads it has used what it read. */
__device__ __forceinline__ void k_dec_part_drop(const k_dec_part &p, int r, int c) {
  const size_t tile = (size_t)p.bm * p.bn;
  const float *q = p.part + (size_t)(c / p.bn) * p.nseg * tile + (size_t)r * p.bn + c % p.bn;
  if (!p.drop || ((uintptr_t)q & 127) || p.bn % 32) return;
  for (int s = 0; s < p.nseg; s++)
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(q + (size_t)s * tile) : "memory");
}

/* Columns c .. c + 7 of row r (k_dec_part_getn of one group). */
__device__ __forceinline__ void k_dec_part_get8(const k_dec_part &p, int r, int c, float o[8]) {
  const int cs[1] = {c};
  float v[1][8];
  k_dec_part_getn<1>(p, r, cs, v);
#pragma unroll
  for (int j = 0; j < 8; j++)
    o[j] = v[0][j];
}

/* SiLU(g) * u as k_swiglu computes it (silu(g) is a bf16 tensor in bf16 models); k_swiglu
 * and k_gemm_dec_swiglu both call this one function, so they give the same bits. */
__device__ __forceinline__ float k_silu_mul(float g, float u) {
  return k_rbf(g / (1.0f + expf(-g))) * u;
}

/* Columns c[0] .. c[H - 1] of row r, likewise (any columns): every column's partials of up
 * to 8 segments in flight before any is added. */
template <int H>
__device__ __forceinline__ void k_dec_part_get1n(const k_dec_part &p, int r, const int (&c)[H],
                                                 float (&o)[H]) {
  const size_t tile = (size_t)p.bm * p.bn;
  const float *q[H];
  float v[H];
#pragma unroll
  for (int h = 0; h < H; h++) {
    q[h] = p.part + (size_t)(c[h] / p.bn) * p.nseg * tile + (size_t)r * p.bn + c[h] % p.bn;
    v[h] = __ldcg(q[h]);
  }
  for (int s0 = 1; s0 < p.nseg; s0 += 8) {
    float u[H][8];
#pragma unroll
    for (int h = 0; h < H; h++)
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (s0 + j < p.nseg) u[h][j] = __ldcg(q[h] + (size_t)(s0 + j) * tile);
#pragma unroll
    for (int h = 0; h < H; h++)
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (s0 + j < p.nseg) v[h] += u[h][j];
  }
  const bf16 *bias = (const bf16 *)p.bias;
#pragma unroll
  for (int h = 0; h < H; h++)
    o[h] = k_rbf(bias ? v[h] + __bfloat162float(bias[c[h]]) : v[h]);
}

/* Column c of row r, likewise (any c). */
__device__ __forceinline__ float k_dec_part_get1(const k_dec_part &p, int r, int c) {
  const int cs[1] = {c};
  float v[1];
  k_dec_part_get1n<1>(p, r, cs, v);
  return v[0];
}

#endif
