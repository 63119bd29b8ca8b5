/* rmsnorm.cu — fused residual add + RMSNorm. Rows of 16-byte accesses: a cluster of up to
 * NORM_CL blocks a row, each holding its slice of the row in registers between the sum of
 * squares and the scaling (one read of x and residual, one write of each), the slices' sums
 * exchanged through distributed shared memory. Other rows: one block a row. Entry point:
 * k_add_rmsnorm. */
#include "rmsnorm.h"

#include "k_common.cuh"
#include "k_dec_part.cuh"

#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>

/* Rows without 16-byte accesses: one block a row, ITEMS values per thread, THREADS per block. */
template <int ITEMS, int THREADS>
static __global__ void __launch_bounds__(THREADS)
    add_rmsnorm_kernel(bf16 *out, bf16 *residual, const bf16 *x, const bf16 *w, int dim, int ld,
                       float eps, int first) {
  typedef cub::BlockReduce<float, THREADS> reduce_t;
  __shared__ typename reduce_t::TempStorage tmp;
  __shared__ float inv_s;
  k_pdl_enter((int)gridDim.x);
  const size_t base = (size_t)blockIdx.x * ld;
  float v[ITEMS];
  float ss = 0.0f;
#pragma unroll
  for (int it = 0; it < ITEMS; it++) {
    const int i = it * THREADS + threadIdx.x;
    if (i >= dim) continue;
    const float a = __bfloat162float(x[base + i]);
    /* the residual stream is bf16: normalise the value as stored */
    v[it] = k_rbf(first ? a : __bfloat162float(residual[base + i]) + a);
    ss += v[it] * v[it];
    residual[base + i] = __float2bfloat16(v[it]);
  }
  const float tot = reduce_t(tmp).Sum(ss);
  if (threadIdx.x == 0) inv_s = rsqrtf(tot / (float)dim + eps);
  __syncthreads();
  const float inv = inv_s;
#pragma unroll
  for (int it = 0; it < ITEMS; it++) {
    const int i = it * THREADS + threadIdx.x;
    if (i < dim) /* bf16 models round x / rms before the weight */
      out[base + i] = __float2bfloat16(__bfloat162float(w[i]) * k_rbf(v[it] * inv));
  }
}

template <int ITEMS, int THREADS>
static void go(int rows, bf16 *out, bf16 *res, const bf16 *x, const bf16 *w, int dim, int ld,
               float eps, int first, cudaStream_t st) {
  (void)k_launch_pdl(add_rmsnorm_kernel<ITEMS, THREADS>, dim3(rows), dim3(THREADS), 0, st, out, res,
                     x, w, dim, ld, eps, first); /* checked by the caller */
}

/* The row's sum of squares in a fixed order whatever the batch: a thread's own values in
 * order, a warp's by xor butterfly (every lane gets the same bits), a block's warps in order,
 * then the cluster's blocks in rank order. At batch 1 a decode step's norm is one row, whose x
 * comes from a lazy GEMM's partial sums (tinyllama-1.1b's down projection: 22 segments, 180 KB
 * at batch 1): one block took 5.6-6.3 us a call on an H200, reading them through one
 * multiprocessor (bench/RESULTS.md). */
enum { NORM_CL = 8 };

/* ITEMS accesses of 8 values per thread, THREADS per block, a row's n = dim / 8 accesses cut
 * into gridDim.x (the cluster) slices of m = ceil(n / gridDim.x); blockIdx.y the row. PART: x
 * from a lazy decode GEMM's partial sums xp (k_dec_part.cuh). */
template <int ITEMS, int THREADS, bool PART>
static __global__ void __launch_bounds__(THREADS)
    add_rmsnorm_cl_kernel(bf16 *out, bf16 *residual, const bf16 *x, const bf16 *w, int dim, int ld,
                          float eps, int first, const k_dec_part xp) {
  __shared__ float warp_ss[THREADS / 32], rank_ss[NORM_CL];
  const int n = dim / 8, m = (n + (int)gridDim.x - 1) / (int)gridDim.x;
  const int rank = (int)blockIdx.x, a0 = rank * m, lane = threadIdx.x % 32;
  /* the accesses this thread takes: a0 + it * THREADS + threadIdx.x, inside the slice */
  auto col = [&](int it) {
    const int k = it * THREADS + (int)threadIdx.x;
    return k < m && a0 + k < n ? (a0 + k) * 8 : -1;
  };
  /* the norm weights are constant: loaded before waiting for the kernel before (programmatic
   * dependent launch), off the path from its end to this kernel's end */
  float wv[ITEMS][8];
#pragma unroll
  for (int it = 0; it < ITEMS; it++)
    if (col(it) >= 0) k_load8(wv[it], w + col(it));
  k_pdl_enter((int)gridDim.y);
  const size_t base = (size_t)blockIdx.y * ld;
  float v[ITEMS][8];
  float ss = 0.0f;
#pragma unroll
  for (int it = 0; it < ITEMS; it++) {
    const int i = col(it);
    if (i < 0) continue;
    float a[8], r[8];
    if (PART)
      k_dec_part_get8(xp, blockIdx.y, i, a);
    else
      k_load8(a, x + base + i);
    if (!first) k_load8(r, residual + base + i);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      /* the residual stream is bf16: normalise the value as stored */
      v[it][j] = __bfloat162float(__float2bfloat16(first ? a[j] : r[j] + a[j]));
      ss += v[it][j] * v[it][j];
    }
    k_store8(residual + base + i, v[it]);
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2)
    ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) warp_ss[threadIdx.x / 32] = ss;
  __syncthreads();
  /* thread r < cluster size: the block's sum into rank r's rank_ss[rank] */
  cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
  if (threadIdx.x < gridDim.x) {
    float bs = warp_ss[0];
#pragma unroll
    for (int k = 1; k < THREADS / 32; k++)
      bs += warp_ss[k];
    cl.map_shared_rank(rank_ss, (int)threadIdx.x)[rank] = bs;
  }
  /* every block's sum is in every block (no block reads another's memory after this, so each
   * may exit when done) */
  cl.sync();
  float tot = rank_ss[0];
  for (int k = 1; k < (int)gridDim.x; k++)
    tot += rank_ss[k];
  const float inv = rsqrtf(tot / (float)dim + eps);
#pragma unroll
  for (int it = 0; it < ITEMS; it++) {
    const int i = col(it);
    if (i < 0) continue;
    float o[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
      o[j] = wv[it][j] * k_rbf(v[it][j] * inv); /* bf16 models round x / rms before the weight */
    k_store8(out + base + i, o);
  }
}

/* Rows of dim % 8 == 0, 16-byte aligned: a cluster of min(NORM_CL, dim / 8) blocks a row, each
 * thread up to 8 accesses (dim <= 65536: a slice of at most 1024 accesses). xp: x from a lazy
 * GEMM's partial sums, or NULL: x as stored. */
template <int ITEMS, int THREADS>
static cudaError_t go_cl(int cs, int rows, bf16 *o, bf16 *r, const bf16 *x, const k_dec_part *xp,
                         const bf16 *w, int dim, int ld, float eps, int first, cudaStream_t st) {
  cudaLaunchAttribute at[2];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  at[1].id = cudaLaunchAttributeClusterDimension;
  at[1].val.clusterDim.x = (unsigned)cs, at[1].val.clusterDim.y = 1, at[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)cs, (unsigned)rows);
  cfg.blockDim = dim3(THREADS);
  cfg.stream = st;
  cfg.attrs = at;
  cfg.numAttrs = 2;
  return xp ? cudaLaunchKernelEx(&cfg, add_rmsnorm_cl_kernel<ITEMS, THREADS, true>, o, r, x, w, dim,
                                 ld, eps, first, *xp)
            : cudaLaunchKernelEx(&cfg, add_rmsnorm_cl_kernel<ITEMS, THREADS, false>, o, r, x, w,
                                 dim, ld, eps, first, k_dec_part{});
}

static int go_vec(int rows, bf16 *o, bf16 *r, const bf16 *x, const k_dec_part *xp, const bf16 *w,
                  int dim, int ld, float eps, int first, cudaStream_t st) {
  const int n = dim / 8, cs = n < NORM_CL ? n : NORM_CL, m = (n + cs - 1) / cs;
  /* grid.y: at most 65535 rows a launch (a lazy GEMM's partials: 128 rows at most) */
  for (int r0 = 0; r0 < rows; r0 += 65535) {
    const int k = rows - r0 < 65535 ? rows - r0 : 65535;
    const size_t at = (size_t)r0 * ld;
    const k_dec_part *q = xp;
    bf16 *oo = o + at, *rr = r + at;
    const bf16 *xx = x ? x + at : nullptr;
    cudaError_t e;
    if (m <= 32)
      e = go_cl<1, 32>(cs, k, oo, rr, xx, q, w, dim, ld, eps, first, st);
    else if (m <= 64)
      e = go_cl<1, 64>(cs, k, oo, rr, xx, q, w, dim, ld, eps, first, st);
    else if (m <= 128)
      e = go_cl<1, 128>(cs, k, oo, rr, xx, q, w, dim, ld, eps, first, st);
    else if (m <= 256)
      e = go_cl<2, 128>(cs, k, oo, rr, xx, q, w, dim, ld, eps, first, st);
    else if (m <= 512)
      e = go_cl<4, 128>(cs, k, oo, rr, xx, q, w, dim, ld, eps, first, st);
    else
      e = go_cl<8, 128>(cs, k, oo, rr, xx, q, w, dim, ld, eps, first, st);
    NS_CUDA_CHECK(e);
  }
  return 0;
}

extern "C" int k_add_rmsnorm_part(void *out, void *residual, const k_dec_part *xp, const void *w,
                                  int n_rows, int dim, int ld, float eps, int first,
                                  cudaStream_t st) {
  if (n_rows < 0 || n_rows > 65535 || dim <= 0 || dim > 65536 || ld < dim || !out || !residual ||
      !xp || !xp->part || xp->T != n_rows || xp->N != dim || !w || dim % 8 || ld % 8 ||
      !k_aligned(out, 16) || !k_aligned(residual, 16) || !k_aligned(w, 16))
    return NS_EINVAL;
  if (n_rows == 0) return 0;
  return go_vec(n_rows, (bf16 *)out, (bf16 *)residual, nullptr, xp, (const bf16 *)w, dim, ld, eps,
                first, st);
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
  if (vec) return go_vec(n_rows, o, r, xx, nullptr, ww, dim, ld, eps, first, st);
  if (dim <= 256)
    go<1, 256>(n_rows, o, r, xx, ww, dim, ld, eps, first, st);
  else if (dim <= 4096)
    go<16, 256>(n_rows, o, r, xx, ww, dim, ld, eps, first, st);
  else
    go<64, 1024>(n_rows, o, r, xx, ww, dim, ld, eps, first, st);
  K_LAUNCH_CHECK();
  return 0;
}
