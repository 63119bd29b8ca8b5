/* swiglu.h — SiLU(gate) * up over fused gate|up rows on the GPU (k_swiglu): bf16 in and out,
 * fp32 math. Reference with the same arguments: ref/swiglu.h (ref_swiglu). */
#ifndef K_SWIGLU_H
#define K_SWIGLU_H

#include "gemm.h"

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[t, i] = silu(gu[t, i]) * gu[t, inter + i] for t < n_tokens, i < inter; gate_up rows
 * ldg values apart (>= 2 * inter), out rows ldo apart; out must not alias gate_up.
 * Returns 0, NS_EINVAL or NS_ECUDA. */
int k_swiglu(void *out, int ldo, const void *gate_up, int ldg, int n_tokens, int inter,
             cudaStream_t st);

/* k_swiglu with gate|up read from a lazy decode GEMM's partial sums (gemm.h,
 * k_gemm_dec_lazy): the same bits as k_swiglu on what k_gemm_dec would have stored.
 * gp->T == n_tokens <= 65535, gp->N == 2 * inter; inter and ldo multiples of 8, out 16-byte
 * aligned. Returns 0, NS_EINVAL or NS_ECUDA. */
int k_swiglu_part(void *out, int ldo, const k_dec_part *gp, int n_tokens, int inter,
                  cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
