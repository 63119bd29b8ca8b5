/* gemm.h — a batch-invariant bf16 GEMM on the tensor cores (k_gemm): y[T, N] = x[T, K] .
 * w[N, K]^T (+ bias), fp32 accumulation. Each output element is summed over k in one fixed
 * order (16 values a step, ascending, no split of K) whatever T, N or the tile chosen, so a
 * row's bits never depend on the other rows of the call. Reference: ref/matmul.h. */
#ifndef K_GEMM_H
#define K_GEMM_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether k_gemm takes these operands: K and ldx multiples of 8, x and w 16-byte aligned. */
int k_gemm_supported(const void *x, int ldx, const void *w, int K);

/* y = x . w^T (+ bias[N]): x [T][ldx] bf16, w [N][K] bf16 dense, y [T][ldy] bf16 (y_f32 0)
 * or fp32 (y_f32 1), bias bf16 [N] or NULL (bf16 output only). n_sm: the device's
 * multiprocessors (sizes the tiles; any value gives the same results). Enqueued on st.
 * Returns 0, NS_EINVAL or NS_ECUDA. */
int k_gemm(void *y, int y_f32, int ldy, const void *x, int ldx, const void *w, const void *bias,
           int T, int N, int K, int n_sm, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
