/* k_rope.cuh — one rotary-embedding pair as every kernel that rotates q or k computes it
 * (rope_kv.cu, and decode attention where it rotates its own slot's token), so that they give
 * the same bits by construction. */
#ifndef K_ROPE_CUH
#define K_ROPE_CUH

#include "k_common.cuh"

/* cos and sin of position pos at inverse frequency f. HF: the angle is an fp32 product, cos
 * and sin are cast to the model's dtype (bf16); the reference takes cos/sin of the angle in
 * double. */
__device__ __forceinline__ void k_rope_cs(int pos, float f, float &cs, float &sn) {
  double sd, cd;
  sincos((double)((float)pos * f), &sd, &cd);
  cs = k_rbf((float)cd), sn = k_rbf((float)sd);
}

/* (a, b) rotated: q * cos + rotate_half(q) * sin on bf16 tensors, each product rounded, then
 * the sum (oa, ob: bf16 values as floats) */
__device__ __forceinline__ void k_rope_rot(float a, float b, float cs, float sn, float &oa,
                                           float &ob) {
  oa = k_rbf(__fsub_rn(k_rbf(__fmul_rn(a, cs)), k_rbf(__fmul_rn(b, sn))));
  ob = k_rbf(__fadd_rn(k_rbf(__fmul_rn(b, cs)), k_rbf(__fmul_rn(a, sn))));
}

#endif
