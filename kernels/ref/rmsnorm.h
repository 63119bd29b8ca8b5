/* rmsnorm.h — CPU reference of the fused residual add + RMSNorm (ref_add_rmsnorm).
 * fp32 throughout: the CPU backend converts bf16/f16 weights to fp32 at load. */
#ifndef K_REF_RMSNORM_H
#define K_REF_RMSNORM_H

#ifdef __cplusplus
extern "C" {
#endif

/* For each of n_rows rows (x, residual and out rows are ld floats apart):
 *   residual = first ? x : residual + x
 *   out = residual * rsqrt(mean(residual^2) + eps) * w       (HF LlamaRMSNorm in fp32)
 * out may alias x (each row of x is read before it is written); residual must not alias
 * either. Any thread; no allocation. */
void ref_add_rmsnorm(float *out, float *residual, const float *x, const float *w, int n_rows,
                     int dim, int ld, float eps, int first);

#ifdef __cplusplus
}
#endif
#endif
