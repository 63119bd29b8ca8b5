/* matmul.h — CPU reference of the projection GEMM in HF layout (ref_matmul):
 * y[T, N] = x[T, K] . W[N, K]^T (+ bias). fp32: the CPU backend converts bf16/f16
 * weights to fp32 at load. */
#ifndef K_REF_MATMUL_H
#define K_REF_MATMUL_H

#ifdef __cplusplus
extern "C" {
#endif

/* y[t, n] = sum_k x[t, k] * w[n, k] + (bias ? bias[n] : 0), for t < T, n < N.
 * x rows are ldx floats apart, y rows ldy apart; w is dense [N, K]. A caller splits the
 * work over threads by output columns: pass y + n0, w + n0 * K, bias + n0 and N = n1 - n0
 * with the same ldy. y must not alias x or w. Accumulates in fp32 with 8 partial sums
 * per dot product (contiguous K, vectorizable). Any thread; no allocation. */
void ref_matmul(float *y, int ldy, const float *x, int ldx, const float *w, const float *bias,
                int T, int N, int K);

#ifdef __cplusplus
}
#endif
#endif
