/* gemm.h — a batch-invariant bf16 GEMM on the tensor cores (k_gemm): y[T, N] = x[T, K] .
 * w[N, K]^T (+ bias), fp32 accumulation. Each output element is summed over k in one fixed
 * order (16 values a step, ascending, no split of K) whatever T, N or the tile chosen, so a
 * row's bits never depend on the other rows of the call. k_gemm_dec: the same product for
 * decode rows (small T) at the weights' bandwidth, batch-invariant in its own fixed order.
 * Reference: ref/matmul.h. */
#ifndef K_GEMM_H
#define K_GEMM_H

#include <cuda_runtime.h>
#include <stddef.h>

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

/* ---- k_gemm_dec: decode rows at the weights' bandwidth ------------------------------------
 * The operands of k_gemm, for small T (decode steps, one row a sequence; any T works): w is
 * read at near the memory's bandwidth from T = 1, by cutting K into segments that separate
 * blocks sum. Batch-invariant in an order of its own (not k_gemm's): for each output element,
 * K is cut into segments of S = k_gemm_dec_seg(N, K) values; a segment's sum is an mma chain
 * from zero, 16 values of k a step, ascending (k_gemm's per-step arithmetic); the segment sums
 * are added in segment order onto segment 0's (p0 + p1 + ..., left to right); then
 * + bias[n] (as float); then rounded to bf16 or stored as fp32. A row's bits depend on its x
 * row, w, N and K only: not on T, the launch shape, n_sm or the other rows. */

/* The segment length S: a multiple of 128 and a function of N and K only; K / S segments
 * (rounded up, the last may be shorter): the cut that lets a T = 1 call's (64-column tile,
 * segment) items fill the multiprocessors of a 132-SM part in whole rounds (1 segment when
 * N alone does that best). 0 for N or K <= 0. */
int k_gemm_dec_seg(int N, int K);

/* Workspace bytes a k_gemm_dec call of these sizes needs; 0: none (ws may be NULL). Never
 * more than k_gemm_dec_ws_max() (about 32 MiB), whatever T, N and K. */
size_t k_gemm_dec_ws_bytes(int T, int N, int K);
size_t k_gemm_dec_ws_max(void);

/* on = 0: the wgmma shapes run on their cp.async kernels, the path of a driver without
 * cuTensorMapEncodeTiled (tests compare the two); 1, the default: on the TMA kernels where
 * the driver maps the operands. Same bits either way. Between calls. */
void k_gemm_dec_use_tma(int on);

/* y = x . w^T (+ bias[N]) in the order above; x, w, y, bias, T, N, K, n_sm, st as for k_gemm.
 * ws: ws_bytes >= k_gemm_dec_ws_bytes(T, N, K) of 16-byte aligned device memory, zeroed once
 * before its first use (it holds counters that every call leaves at zero again); one call at
 * a time may use it (calls on one stream, or one graph's nodes in sequence). Capturable in a
 * CUDA graph: no allocation, no synchronisation, the grid a function of T, N, K and n_sm; the
 * first call (any shape) sets the kernels' attributes, so make it outside a capture. Returns
 * 0, NS_EINVAL, NS_ERANGE (ws NULL or smaller than needed) or NS_ECUDA. */
int k_gemm_dec(void *y, int y_f32, int ldy, const void *x, int ldx, const void *w, const void *bias,
               int T, int N, int K, void *ws, size_t ws_bytes, int n_sm, cudaStream_t st);

/* ---- split sums left to the consumer ------------------------------------------------------
 * A split k_gemm_dec call ends with its blocks counting their segments done and the last one
 * summing each tile: a fence, an atomic and a pass over the partial sums on the call's tail.
 * k_gemm_dec_lazy stops before that: the partial sums stay in ws and the kernel that reads y
 * next sums them itself (k_dec_part.cuh: the same order, bias and rounding, so the same bits;
 * the kernel boundary orders the partials before it). k_dec_part describes them: element
 * (r, c), r < T, c < N, is the bf16 rounding of
 *   part[(c / bn) * nseg * bm * bn + 0 * bm * bn + r * bn + c % bn] + ... (s = 0 .. nseg - 1,
 *   in order) + bias[c]. */
typedef struct k_dec_part {
  const float *part; /* NULL: the call wrote y itself (not a split call) */
  const void *bias;  /* bf16 [N] or NULL */
  int T, N, nseg, bm, bn;
  int drop; /* 1: the consumer drops the partials' L2 lines once read (k_dec_part_drops) */
} k_dec_part;

/* Whether a sole consumer of the partials should drop them from L2 once read (discard: the
 * lines are invalidated, never written back to memory; the partials are gone afterwards):
 * 1 where L2 would otherwise write them back — they are large, or their layer's split calls
 * write much in all (layer_bytes: k_dec_layer_part_bytes of the step's rows, 0 where not
 * known). k_rope_kv_write_part and k_add_rmsnorm_part (not on a cluster) honour p->drop;
 * k_gemm_dec_lazy leaves it 0. */
int k_dec_part_drops(const k_dec_part *p, double layer_bytes);

/* The fp32 partial sums a decoder layer's split decode calls write at T rows: q|k|v ([n_qkv,
 * hidden]), o ([hidden, hidden]) and down ([hidden, inter]), each as k_gemm_dec_seg cuts it
 * (gate|up is not counted: its SwiGLU reads it, or it is whole tiles). 0 for sizes <= 0. */
double k_dec_layer_part_bytes(int T, int hidden, int n_qkv, int inter);

/* k_gemm_dec for bf16 y, except that a split call leaves its sums in ws and describes them in
 * *out (out->part != NULL) without writing y; a call that is not split writes y as k_gemm_dec
 * and sets out->part = NULL. ws holds the partials until the next k_gemm_dec or
 * k_gemm_dec_lazy call on it. Returns as k_gemm_dec. */
int k_gemm_dec_lazy(void *y, int ldy, const void *x, int ldx, const void *w, const void *bias,
                    int T, int N, int K, void *ws, size_t ws_bytes, int n_sm, k_dec_part *out,
                    cudaStream_t st);

/* ---- the SwiGLU before a decode GEMM, inside it ----------------------------------------------
 * k_gemm_dec_lazy(y, ldy, x, K, w, bias, T, N, K, ...) on x = k_swiglu_part(gp)'s output
 * (gp: the lazy gate|up product, 2 K columns: gate, then up) or k_swiglu(gu)'s (gp NULL, gu
 * that product as stored, bf16 [T][2 K]), which the call's blocks make themselves, each the k
 * range of its work items, from gp's partial sums or from gu, instead of reading it: the SwiGLU
 * kernel and a kernel boundary go, y gets the bits k_gemm_dec gives on that x. x [T][K] (16-byte
 * aligned) is written too, each value once. k_gemm_dec_swiglu_ok: whether the call takes T rows (T
 * x the call's segment length, or K where it has one segment, <= 1024: a tinyllama-1.1b down
 * projection at one row; gemm_dec.cu says why no more). ws: as for k_gemm_dec_lazy, but not the
 * workspace holding gp's partials (they are read while this call writes its own). Returns 0,
 * NS_EINVAL, NS_EUNSUPPORTED (before launching anything), NS_ERANGE or NS_ECUDA. */
int k_gemm_dec_swiglu_ok(int T, int N, int K);

/* ---- the SwiGLU after a decode GEMM, inside it -----------------------------------------------
 * k_gemm_dec_gu(out, ldo, x, ldx, w, bias, T, I, K): k_swiglu of k_gemm_dec's gate|up product
 * (w [2 I][K]: I gate rows, then I up rows; bias NULL or [2 I]), in one kernel: a tile's blocks
 * copy BN / 2 gate rows and the same up rows as one weight tile, so each thread holds a gate
 * value and its up value and stores SiLU(gate) * up (out [T][I], bf16, ldo >= I): the bits of
 * k_gemm_dec then k_swiglu, with neither the product's store and reload nor the SwiGLU kernel.
 * It runs where that product runs as whole tiles on a wgmma shape's TMA kernel (k_gemm_dec_gu_ok:
 * more than 16 rows, not split over K: llama3-8b's and tinyllama-1.1b's gate|up from 33 rows,
 * llama3.2-1b's from 17; on an H200 llama3-8b's batch-128 step went from 9.58-9.65 to 9.40-9.44
 * ms, bench/RESULTS.md).
 * Returns 0, NS_EINVAL, NS_EUNSUPPORTED (before launching anything: the call does not run this way,
 * or the driver maps no tensor) or NS_ECUDA. */
int k_gemm_dec_gu_ok(int T, int I, int K);
int k_gemm_dec_gu(void *out, int ldo, const void *x, int ldx, const void *w, const void *bias,
                  int T, int I, int K, int n_sm, cudaStream_t st);
int k_gemm_dec_swiglu(void *y, int ldy, void *x, const k_dec_part *gp, const void *gu,
                      const void *w, const void *bias, int T, int N, int K, void *ws,
                      size_t ws_bytes, int n_sm, k_dec_part *out, cudaStream_t st);

/* y[T][N] (bf16, ldy) from the partial sums p describes (for a consumer that cannot read
 * them), programmatic dependent launch. Returns 0, NS_EINVAL or NS_ECUDA. */
int k_dec_part_finish(const k_dec_part *p, void *y, int ldy, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
