/* cuda_gemm.h — the projection GEMMs of the CUDA backend through cuBLASLt (cu_gemm_run):
 * y[T, N] = x[T, K] . w[N, K]^T (+ bias) on row-major bf16, fp32 accumulation. */
#ifndef ENG_CUDA_GEMM_H
#define ENG_CUDA_GEMM_H

#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A cuBLASLt handle, a workspace (device memory the caller owns, >= 32 MiB advised) and a
 * cache of matmul descriptors and heuristic picks per shape. One thread (the engine's). */
typedef struct cu_gemm cu_gemm;

int cu_gemm_create(void *workspace, size_t ws_bytes, cu_gemm **out);
void cu_gemm_destroy(cu_gemm *g); /* NULL is fine */

/* y = x . w^T (+ bias[N]): x [T][ldx] bf16, w [N][K] bf16 dense, y [T][ldy] bf16 (y_f32 0)
 * or fp32 (y_f32 1), bias bf16 [N] or NULL (bf16 output only). Enqueued on st. Returns 0,
 * NS_EINVAL, NS_EUNSUPPORTED (no algorithm for the shape) or NS_ECUDA. */
int cu_gemm_run(cu_gemm *g, void *y, int y_f32, int ldy, const void *x, int ldx, const void *w,
                const void *bias, int T, int N, int K, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
