/* swiglu.cu — SiLU·mul over fused gate|up rows: a 2-D grid (row, column chunk), 16-byte
 * accesses when the rows allow them. Entry point: k_swiglu. */
#include "swiglu.h"

#include "k_common.cuh"
#include "k_dec_part.cuh"

/* PART: gate|up from a lazy decode GEMM's partial sums gp (k_dec_part.cuh; VEC only). */
template <bool VEC, bool PART = false>
static __global__ void swiglu_kernel(bf16 *out, int ldo, const bf16 *gu, int ldg, int inter,
                                     const k_dec_part gp) {
  k_pdl_enter((int)gridDim.y);
  const bf16 *g = gu + (size_t)blockIdx.y * ldg, *u = g + inter;
  bf16 *o = out + (size_t)blockIdx.y * ldo;
  int step = VEC ? 8 : 1;
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * step;
  if (i >= inter) return;
  if (VEC) {
    float a[8], b[8], r[8];
    if (PART) {
      k_dec_part_get8(gp, blockIdx.y, i, a);
      k_dec_part_get8(gp, blockIdx.y, inter + i, b);
    } else {
      k_load8(a, g + i);
      k_load8(b, u + i);
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
      r[j] = k_silu_mul(a[j], b[j]);
    k_store8(o + i, r);
  } else {
    o[i] = __float2bfloat16(k_silu_mul(__bfloat162float(g[i]), __bfloat162float(u[i])));
  }
}

extern "C" int k_swiglu(void *out, int ldo, const void *gate_up, int ldg, int n_tokens, int inter,
                        cudaStream_t st) {
  if (n_tokens < 0 || inter <= 0 || ldg < 2 * inter || ldo < inter || !out || !gate_up ||
      n_tokens > 65535 * 16)
    return NS_EINVAL;
  if (n_tokens == 0) return 0;
  bool vec = inter % 8 == 0 && ldg % 8 == 0 && ldo % 8 == 0 && k_aligned(out, 16) &&
             k_aligned(gate_up, 16);
  int per = vec ? inter / 8 : inter, threads = 256;
  /* grid.y is limited to 65535 rows per launch */
  for (int r0 = 0; r0 < n_tokens; r0 += 65535) {
    int rows = n_tokens - r0 < 65535 ? n_tokens - r0 : 65535;
    dim3 grid((per + threads - 1) / threads, rows);
    bf16 *o = (bf16 *)out + (size_t)r0 * ldo;
    const bf16 *g = (const bf16 *)gate_up + (size_t)r0 * ldg;
    NS_CUDA_CHECK(k_launch_pdl(vec ? swiglu_kernel<true> : swiglu_kernel<false>, grid,
                               dim3(threads), 0, st, o, ldo, g, ldg, inter, k_dec_part{}));
  }
  return 0;
}

extern "C" int k_swiglu_part(void *out, int ldo, const k_dec_part *gp, int n_tokens, int inter,
                             cudaStream_t st) {
  if (n_tokens < 0 || inter <= 0 || ldo < inter || !out || !gp || !gp->part || gp->T != n_tokens ||
      gp->N != 2 * inter || inter % 8 || ldo % 8 || !k_aligned(out, 16) || n_tokens > 65535)
    return NS_EINVAL;
  if (n_tokens == 0) return 0;
  const int per = inter / 8, threads = 256;
  const dim3 grid((per + threads - 1) / threads, n_tokens);
  NS_CUDA_CHECK(k_launch_pdl(swiglu_kernel<true, true>, grid, dim3(threads), 0, st, (bf16 *)out,
                             ldo, (const bf16 *)nullptr, 0, inter, *gp));
  return 0;
}
