/* cuda_gemm.h — the projection GEMMs of the CUDA backend (cu_gemm_run, and cu_gemm_run_dec for
 * decode steps): y[T, N] = x[T, K] . w[N, K]^T (+ bias) on row-major bf16, fp32 accumulation;
 * batch-invariant by default (a row's bits do not depend on T), through kernels/gemm.cu or
 * cuBLASLt. */
#ifndef ENG_CUDA_GEMM_H
#define ENG_CUDA_GEMM_H

#include "gemm.h"

#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How the GEMMs run:
 *   CU_GEMM_PINNED (the backend's default): cuBLASLt, one algorithm per (N, K, layout,
 *     alignment) for every T, the first the heuristic proposes for T = 128 among those that
 *     do not split K and that runs T = 1 .. 16384; a shape with none runs on k_gemm.
 *     Batch-invariant as far as that algorithm's order per element does not depend on T:
 *     gpu_kernels and gpu_model check it bitwise on the H200 (tinyllama and golden shapes).
 *   CU_GEMM_OWN: kernels/gemm.cu (k_gemm), batch-invariant by construction (slower: no
 *     wgmma, no split of K for small T); operands it does not take (K or ldx not a multiple
 *     of 8, misaligned) go as CU_GEMM_PINNED.
 *   CU_GEMM_NOSPLIT: cuBLASLt, the heuristic's pick per T among those that do not split K.
 *   CU_GEMM_HEURISTIC: cuBLASLt, the heuristic's pick per T (fastest; not batch-invariant).
 * The setting engine.cuda_gemm ("pinned", "own", "nosplit", "heuristic") chooses the mode. */
enum { CU_GEMM_OWN, CU_GEMM_PINNED, CU_GEMM_NOSPLIT, CU_GEMM_HEURISTIC };

int cu_gemm_mode_parse(const char *s); /* a mode, or -1 */
const char *cu_gemm_mode_name(int mode);

/* A cuBLASLt handle, a workspace (device memory the caller owns, >= 32 MiB advised) and a
 * cache of matmul descriptors and algorithm picks per shape; n_sm: the device's
 * multiprocessors. dec_ws: a second workspace, for cu_gemm_run_dec (k_gemm_dec's), of
 * dec_ws_bytes: k_gemm_dec_ws_max() (kernels/gemm.h, about 32 MiB) takes every shape and T;
 * less (or NULL, 0) makes cu_gemm_run_dec refuse the calls that need more. cu_gemm_create
 * zeroes it (synchronously: it holds counters that start at zero); the caller owns the memory,
 * which must outlive the cu_gemm and serve nothing else. One thread (the engine's). */
typedef struct cu_gemm cu_gemm;

int cu_gemm_create(void *workspace, size_t ws_bytes, void *dec_ws, size_t dec_ws_bytes, int mode,
                   int n_sm, cu_gemm **out);
void cu_gemm_destroy(cu_gemm *g); /* NULL is fine */

/* y = x . w^T (+ bias[N]): x [T][ldx] bf16, w [N][K] bf16 dense, y [T][ldy] bf16 (y_f32 0)
 * or fp32 (y_f32 1), bias bf16 [N] or NULL (bf16 output only). Enqueued on st. Returns 0,
 * NS_EINVAL, NS_EUNSUPPORTED (no algorithm for the shape) or NS_ECUDA. */
int cu_gemm_run(cu_gemm *g, void *y, int y_f32, int ldy, const void *x, int ldx, const void *w,
                const void *bias, int T, int N, int K, cudaStream_t st);

/* The same product through k_gemm_dec, whatever the mode: for decode steps (small T), w read
 * at near the memory's bandwidth; batch-invariant in k_gemm_dec's own order (K in segments of
 * k_gemm_dec_seg(N, K) values), so its bits differ from cu_gemm_run's. Capturable in a CUDA
 * graph once a first call has run outside a capture. Calls share the dec workspace: issue
 * them on one stream (or in sequence in one graph). Returns 0, NS_EINVAL, NS_EUNSUPPORTED
 * (operands k_gemm_dec does not take: see k_gemm_supported), NS_ERANGE (the dec workspace is
 * smaller than k_gemm_dec_ws_bytes(T, N, K)) or NS_ECUDA. */
int cu_gemm_run_dec(cu_gemm *g, void *y, int y_f32, int ldy, const void *x, int ldx, const void *w,
                    const void *bias, int T, int N, int K, cudaStream_t st);

/* cu_gemm_run_dec for bf16 y through k_gemm_dec_lazy: a split call leaves its sums in the dec
 * workspace, described in *out (out->part != NULL), for the next op to read; otherwise y is
 * written and out->part is NULL. Returns as cu_gemm_run_dec. */
int cu_gemm_run_dec_lazy(cu_gemm *g, void *y, int ldy, const void *x, int ldx, const void *w,
                         const void *bias, int T, int N, int K, k_dec_part *out, cudaStream_t st);

/* k_gemm_dec_swiglu (kernels/gemm.h): cu_gemm_run_dec_lazy on x = SiLU(gate) * up of the lazy
 * gate|up product gp (or of gu, as stored), made inside the GEMM's blocks (and written to x),
 * with a workspace of the caller's (ws: not the dec workspace, whose partial sums gp reads).
 * Returns as k_gemm_dec_swiglu. */
int cu_gemm_run_dec_swiglu(cu_gemm *g, void *y, int ldy, void *x, const k_dec_part *gp,
                           const void *gu, const void *w, const void *bias, int T, int N, int K,
                           void *ws, size_t ws_bytes, k_dec_part *out, cudaStream_t st);

/* k_gemm_dec_gu (kernels/gemm.h): out = SiLU(gate) * up of the gate|up product x w^T (+ bias),
 * I = its half width, in the GEMM's blocks; the bits of cu_gemm_run_dec then k_swiglu.
 * Returns as k_gemm_dec_gu (NS_EUNSUPPORTED: run those two instead). */
int cu_gemm_run_dec_gu(cu_gemm *g, void *out, int ldo, const void *x, int ldx, const void *w,
                       const void *bias, int T, int I, int K, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
