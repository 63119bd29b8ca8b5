/* k_dec_part.cuh — a lazy k_gemm_dec's output read from its partial sums (gemm.h,
 * k_gemm_dec_lazy) by the kernel that consumes it: per element p0 + p1 + ... in segment order,
 * then + bias, rounded to bf16 — what k_gemm_dec's last block stores, so the same bits. The
 * partials are read through L2 (__ldcg), 8 segments in flight. */
#ifndef K_DEC_PART_CUH
#define K_DEC_PART_CUH

#include "gemm.h"
#include "k_common.cuh"

/* Columns c .. c + 7 of row r as the floats of their bf16 values; c % 8 == 0 (the 8 lie in
 * one tile: bn is a multiple of 8). */
__device__ __forceinline__ void k_dec_part_get8(const k_dec_part &p, int r, int c, float o[8]) {
  const size_t tile = (size_t)p.bm * p.bn;
  const float *q = p.part + (size_t)(c / p.bn) * p.nseg * tile + (size_t)r * p.bn + c % p.bn;
  float4 a = __ldcg(reinterpret_cast<const float4 *>(q));
  float4 b = __ldcg(reinterpret_cast<const float4 *>(q + 4));
  for (int s0 = 1; s0 < p.nseg; s0 += 8) {
    float4 ua[8], ub[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (s0 + j < p.nseg) {
        const float *qs = q + (size_t)(s0 + j) * tile;
        ua[j] = __ldcg(reinterpret_cast<const float4 *>(qs));
        ub[j] = __ldcg(reinterpret_cast<const float4 *>(qs + 4));
      }
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (s0 + j < p.nseg) {
        a.x += ua[j].x, a.y += ua[j].y, a.z += ua[j].z, a.w += ua[j].w;
        b.x += ub[j].x, b.y += ub[j].y, b.z += ub[j].z, b.w += ub[j].w;
      }
  }
  const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  const bf16 *bias = (const bf16 *)p.bias;
#pragma unroll
  for (int j = 0; j < 8; j++)
    o[j] = k_rbf(bias ? v[j] + __bfloat162float(bias[c + j]) : v[j]);
}

/* k_dec_part_get8 of columns c0 .. c0 + 7 and c1 .. c1 + 7 of row r at once: every partial
 * of up to 8 segments of both in flight before any is added (the adds in get8's order). */
__device__ __forceinline__ void k_dec_part_get8x2(const k_dec_part &p, int r, int c0, int c1,
                                                  float o0[8], float o1[8]) {
  const size_t tile = (size_t)p.bm * p.bn;
  const float *q[2] = {p.part + (size_t)(c0 / p.bn) * p.nseg * tile + (size_t)r * p.bn + c0 % p.bn,
                       p.part + (size_t)(c1 / p.bn) * p.nseg * tile + (size_t)r * p.bn + c1 % p.bn};
  float4 a[2], b[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    a[h] = __ldcg(reinterpret_cast<const float4 *>(q[h]));
    b[h] = __ldcg(reinterpret_cast<const float4 *>(q[h] + 4));
  }
  for (int s0 = 1; s0 < p.nseg; s0 += 8) {
    float4 ua[2][8], ub[2][8];
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (s0 + j < p.nseg) {
          const float *qs = q[h] + (size_t)(s0 + j) * tile;
          ua[h][j] = __ldcg(reinterpret_cast<const float4 *>(qs));
          ub[h][j] = __ldcg(reinterpret_cast<const float4 *>(qs + 4));
        }
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (s0 + j < p.nseg) {
          a[h].x += ua[h][j].x, a[h].y += ua[h][j].y, a[h].z += ua[h][j].z, a[h].w += ua[h][j].w;
          b[h].x += ub[h][j].x, b[h].y += ub[h][j].y, b[h].z += ub[h][j].z, b[h].w += ub[h][j].w;
        }
  }
  const bf16 *bias = (const bf16 *)p.bias;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const float v[8] = {a[h].x, a[h].y, a[h].z, a[h].w, b[h].x, b[h].y, b[h].z, b[h].w};
    float *o = h ? o1 : o0;
    const int c = h ? c1 : c0;
#pragma unroll
    for (int j = 0; j < 8; j++)
      o[j] = k_rbf(bias ? v[j] + __bfloat162float(bias[c + j]) : v[j]);
  }
}

/* SiLU(g) * u as k_swiglu computes it (silu(g) is a bf16 tensor in bf16 models); k_swiglu
 * and k_gemm_dec_swiglu both call this one function, so they give the same bits. */
__device__ __forceinline__ float k_silu_mul(float g, float u) {
  return k_rbf(g / (1.0f + expf(-g))) * u;
}

/* Column c of row r, likewise (any c). */
__device__ __forceinline__ float k_dec_part_get1(const k_dec_part &p, int r, int c) {
  const size_t tile = (size_t)p.bm * p.bn;
  const float *q = p.part + (size_t)(c / p.bn) * p.nseg * tile + (size_t)r * p.bn + c % p.bn;
  float v = __ldcg(q);
  for (int s0 = 1; s0 < p.nseg; s0 += 8) {
    float u[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (s0 + j < p.nseg) u[j] = __ldcg(q + (size_t)(s0 + j) * tile);
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (s0 + j < p.nseg) v += u[j];
  }
  const bf16 *bias = (const bf16 *)p.bias;
  return k_rbf(bias ? v + __bfloat162float(bias[c]) : v);
}

#endif
