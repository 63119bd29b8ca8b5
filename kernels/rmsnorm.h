/* rmsnorm.h — the fused residual add + RMSNorm on the GPU (k_add_rmsnorm): bf16 rows in and
 * out, fp32 math. Reference with the same arguments: ref/rmsnorm.h (ref_add_rmsnorm). */
#ifndef K_RMSNORM_H
#define K_RMSNORM_H

#include "gemm.h"

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* For each of n_rows rows (x, residual and out rows ld values apart, bf16):
 *   residual = first ? x : residual + x          (stored as bf16)
 *   out = bf16(w * residual * rsqrt(mean(residual^2) + eps))
 * with residual taken as its stored bf16 value (as a bf16 Hugging Face model computes).
 * out may alias x; residual must not alias either. dim <= 65536. Returns 0, NS_EINVAL or
 * NS_ECUDA. */
int k_add_rmsnorm(void *out, void *residual, const void *x, const void *w, int n_rows, int dim,
                  int ld, float eps, int first, cudaStream_t st);

/* k_add_rmsnorm with x read from a lazy decode GEMM's partial sums (gemm.h, k_gemm_dec_lazy):
 * x's values are those k_gemm_dec would have stored, so out and residual get the same bits.
 * xp->T == n_rows, xp->N == dim; dim and ld multiples of 8, out, residual and w 16-byte
 * aligned. Returns 0, NS_EINVAL or NS_ECUDA. */
int k_add_rmsnorm_part(void *out, void *residual, const k_dec_part *xp, const void *w, int n_rows,
                       int dim, int ld, float eps, int first, cudaStream_t st);

/* k_embed (gather.h) then k_add_rmsnorm with first = 1 as one kernel: x's row r is the
 * table's row ids[r] (dim values a row; zeros for an id outside [0, vocab)), so residual = that
 * row and out its norm, the same bits as the two kernels. Rows of 16-byte accesses only (dim
 * and ld multiples of 8; out, residual, table and w 16-byte aligned): NS_EUNSUPPORTED
 * otherwise, before launching anything. Returns 0, NS_EINVAL, NS_EUNSUPPORTED or NS_ECUDA. */
int k_embed_rmsnorm(void *out, void *residual, const void *table, const int32_t *ids, int vocab,
                    const void *w, int n_rows, int dim, int ld, float eps, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
