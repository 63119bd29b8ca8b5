/* rmsnorm.cu — fused residual add + RMSNorm: one block per row, the row held in registers
 * between the sum of squares and the scaling (one read of x and residual, one write of
 * each). Entry point: k_add_rmsnorm. */
#include "rmsnorm.h"

#include "k_common.cuh"
#include "k_dec_part.cuh"

#include <cub/block/block_reduce.cuh>

/* VEC values per access (8: 16-byte, or 1), ITEMS accesses per thread, THREADS per block;
 * PART: x from a lazy decode GEMM's partial sums xp (k_dec_part.cuh; VEC 8 only). */
template <int VEC, int ITEMS, int THREADS, bool PART = false>
static __global__ void __launch_bounds__(THREADS)
    add_rmsnorm_kernel(bf16 *out, bf16 *residual, const bf16 *x, const bf16 *w, int dim, int ld,
                       float eps, int first, const k_dec_part xp) {
  typedef cub::BlockReduce<float, THREADS> reduce_t;
  __shared__ typename reduce_t::TempStorage tmp;
  __shared__ float inv_s;
  /* the norm weights are constant: loaded before waiting for the kernel before (programmatic
   * dependent launch), off the path from its end to this kernel's end; blocks for rows of
   * more than 8192 have no registers for them and load them at the end */
  constexpr bool PRE = VEC * ITEMS * THREADS <= 8192;
  auto load_w = [&](int i, float *dst) {
    if (VEC == 8)
      k_load8(dst, w + i);
    else
      dst[0] = __bfloat162float(w[i]);
  };
  float wv[PRE ? ITEMS : 1][VEC];
#pragma unroll
  for (int it = 0; it < ITEMS; it++) {
    int i = (it * THREADS + threadIdx.x) * VEC;
    if (PRE && i < dim) load_w(i, wv[PRE ? it : 0]);
  }
  k_pdl_enter((int)gridDim.x);
  size_t base = (size_t)blockIdx.x * ld;
  float v[ITEMS][VEC];
  float ss = 0.0f;
#pragma unroll
  for (int it = 0; it < ITEMS; it++) {
    int i = (it * THREADS + threadIdx.x) * VEC;
    if (i >= dim) continue;
    float a[VEC], r[VEC];
    if (VEC == 8) {
      if (PART)
        k_dec_part_get8(xp, blockIdx.x, i, a);
      else
        k_load8(a, x + base + i);
      if (!first) k_load8(r, residual + base + i);
    } else {
      a[0] = __bfloat162float(x[base + i]);
      if (!first) r[0] = __bfloat162float(residual[base + i]);
    }
#pragma unroll
    for (int j = 0; j < VEC; j++) {
      /* the residual stream is bf16: normalise the value as stored */
      v[it][j] = __bfloat162float(__float2bfloat16(first ? a[j] : r[j] + a[j]));
      ss += v[it][j] * v[it][j];
    }
    if (VEC == 8)
      k_store8(residual + base + i, v[it]);
    else
      residual[base + i] = __float2bfloat16(v[it][0]);
  }
  float tot = reduce_t(tmp).Sum(ss);
  if (threadIdx.x == 0) inv_s = rsqrtf(tot / (float)dim + eps);
  __syncthreads();
  float inv = inv_s;
#pragma unroll
  for (int it = 0; it < ITEMS; it++) {
    int i = (it * THREADS + threadIdx.x) * VEC;
    if (i >= dim) continue;
    float o[VEC], *wi = wv[PRE ? it : 0];
    if (!PRE) load_w(i, wi);
#pragma unroll
    for (int j = 0; j < VEC; j++)
      o[j] = wi[j] * k_rbf(v[it][j] * inv); /* bf16 models round x / rms before the weight */
    if (VEC == 8)
      k_store8(out + base + i, o);
    else
      out[base + i] = __float2bfloat16(o[0]);
  }
}

/* xp: x from a lazy GEMM's partial sums (VEC 8), or NULL: x as stored. */
template <int VEC, int ITEMS, int THREADS>
static void go(int rows, bf16 *out, bf16 *res, const bf16 *x, const k_dec_part *xp, const bf16 *w,
               int dim, int ld, float eps, int first, cudaStream_t st) {
  (void)k_launch_pdl(xp ? add_rmsnorm_kernel<VEC, ITEMS, THREADS, VEC == 8>
                        : add_rmsnorm_kernel<VEC, ITEMS, THREADS>,
                     dim3(rows), dim3(THREADS), 0, st, out, res, x, w, dim, ld, eps, first,
                     xp ? *xp : k_dec_part{}); /* checked by the caller */
}

/* 16-byte accesses: n = dim / 8 per row, one a thread up to rows of 8192 (a row's loads all
 * in flight at once: the decode steps wait on this kernel; at 4 a thread of 256, a llama3-8b
 * row took 5.4 us a call at batch 1 on an H200 against 2 us for tinyllama-1.1b's one a thread,
 * bench/RESULTS.md). */
static void go_vec(int n, int rows, bf16 *o, bf16 *r, const bf16 *x, const k_dec_part *xp,
                   const bf16 *w, int dim, int ld, float eps, int first, cudaStream_t st) {
  if (n <= 128)
    go<8, 1, 128>(rows, o, r, x, xp, w, dim, ld, eps, first, st);
  else if (n <= 256)
    go<8, 1, 256>(rows, o, r, x, xp, w, dim, ld, eps, first, st);
  else if (n <= 512)
    go<8, 1, 512>(rows, o, r, x, xp, w, dim, ld, eps, first, st);
  else if (n <= 1024)
    go<8, 1, 1024>(rows, o, r, x, xp, w, dim, ld, eps, first, st);
  else
    go<8, 8, 1024>(rows, o, r, x, xp, w, dim, ld, eps, first, st);
}

extern "C" int k_add_rmsnorm_part(void *out, void *residual, const k_dec_part *xp, const void *w,
                                  int n_rows, int dim, int ld, float eps, int first,
                                  cudaStream_t st) {
  if (n_rows < 0 || dim <= 0 || dim > 65536 || ld < dim || !out || !residual || !xp || !xp->part ||
      xp->T != n_rows || xp->N != dim || !w || dim % 8 || ld % 8 || !k_aligned(out, 16) ||
      !k_aligned(residual, 16) || !k_aligned(w, 16))
    return NS_EINVAL;
  if (n_rows == 0) return 0;
  go_vec(dim / 8, n_rows, (bf16 *)out, (bf16 *)residual, nullptr, xp, (const bf16 *)w, dim, ld, eps,
         first, st);
  K_LAUNCH_CHECK();
  return 0;
}

extern "C" int k_add_rmsnorm(void *out, void *residual, const void *x, const void *w, int n_rows,
                             int dim, int ld, float eps, int first, cudaStream_t st) {
  if (n_rows < 0 || dim <= 0 || dim > 65536 || ld < dim || !out || !residual || !x || !w)
    return NS_EINVAL;
  if (n_rows == 0) return 0;
  bf16 *o = (bf16 *)out, *r = (bf16 *)residual;
  const bf16 *xx = (const bf16 *)x, *ww = (const bf16 *)w;
  bool vec = dim % 8 == 0 && ld % 8 == 0 && k_aligned(out, 16) && k_aligned(residual, 16) &&
             k_aligned(x, 16) && k_aligned(w, 16);
  int n = vec ? dim / 8 : dim; /* accesses per row */
  if (vec) {
    go_vec(n, n_rows, o, r, xx, nullptr, ww, dim, ld, eps, first, st);
  } else {
    if (n <= 256)
      go<1, 1, 256>(n_rows, o, r, xx, nullptr, ww, dim, ld, eps, first, st);
    else if (n <= 4096)
      go<1, 16, 256>(n_rows, o, r, xx, nullptr, ww, dim, ld, eps, first, st);
    else
      go<1, 64, 1024>(n_rows, o, r, xx, nullptr, ww, dim, ld, eps, first, st);
  }
  K_LAUNCH_CHECK();
  return 0;
}
