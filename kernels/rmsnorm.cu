/* rmsnorm.cu — fused residual add + RMSNorm, each thread holding its part of the row in
 * registers between the sum of squares and the scaling (one read of x and residual, one write
 * of each). Rows of 16-byte accesses: in slices, one block a row, or a cluster of blocks a row
 * where a decode step's few rows read large lazy partial sums; other rows: one block a row.
 * Entry points: k_add_rmsnorm, k_add_rmsnorm_part, k_embed_rmsnorm. */
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

/* Rows of 16-byte accesses: a row's n = dim / 8 accesses cut into cs = min(NORM_CL, n) slices
 * of m = ceil(n / cs), a slice THREADS threads of up to ITEMS accesses each, and the row's sum
 * of squares taken in one order (a thread's values in order, a warp's by xor butterfly, which
 * leaves every lane the same bits, a slice's warps in order, then the slices in order), so a
 * row gets the same bits however its slices are spread: one block a row with the slices its
 * thread groups, or a cluster of cs blocks a row, a block a slice, adding the slices' sums
 * through distributed shared memory. The cluster serves a decode step's few rows (at most
 * NORM_CL_ROWS) whose x comes from a lazy GEMM's partial sums of more than NORM_CL_BYTES a row
 * (Qwen2-7B's down projection: 19 segments, 266 KB), which one block reads through one
 * multiprocessor. On an H200 the cluster took a tinyllama-1.1b batch-1 step from 1.200-1.212
 * to 1.176-1.197 ms when that model's down projection had 22 segments (180 KB; 6 since
 * gemm_dec.cu's segment rule takes the longer segment on a tie); a cluster for every norm of up
 * to 16 rows slowed llama3.2-1b and llama3-8b batch-1 steps by 3% and 0.8%, and one for every
 * row count a llama3-8b batch-128 step by 1.5% (bench/RESULTS.md). */
enum { NORM_CL = 8, NORM_CL_ROWS = 16, NORM_CL_BYTES = 128 << 10 };

/* Where x comes from: as stored; a lazy decode GEMM's partial sums (k_dec_part.cuh); or rows
 * of an embedding table, row r the table's row ids[r] (zeros for an id outside [0, vocab), as
 * k_embed stores them). */
enum { NORM_X_STORED, NORM_X_PART, NORM_X_EMBED };
struct norm_embed {
  const int32_t *ids;
  int vocab;
};

/* CL: blockIdx.x the slice (gridDim.x = cs, a cluster), else threadIdx.x / THREADS (cs
 * slices a block); blockIdx.y the row. XS: where x comes from (NORM_X_*; x the table for
 * NORM_X_EMBED, its rows dim values apart). */
template <int ITEMS, int THREADS, int XS, bool CL>
static __global__ void __launch_bounds__(CL ? THREADS : NORM_CL *THREADS)
    add_rmsnorm_vec_kernel(bf16 *out, bf16 *residual, const bf16 *x, const bf16 *w, int dim, int ld,
                           int cs, float eps, int first, const k_dec_part xp,
                           const norm_embed emb) {
  constexpr bool PART = XS == NORM_X_PART;
  constexpr int W = THREADS / 32; /* warps a slice */
  __shared__ float warp_ss[CL ? W : NORM_CL * W], slice_ss[NORM_CL];
  const int n = dim / 8, m = (n + cs - 1) / cs, lane = threadIdx.x % 32;
  const int slice = CL ? (int)blockIdx.x : (int)threadIdx.x / THREADS;
  const int tid = CL ? (int)threadIdx.x : (int)threadIdx.x % THREADS, a0 = slice * m;
  /* the accesses this thread takes: a0 + it * THREADS + tid, inside the slice */
  auto col = [&](int it) {
    const int k = it * THREADS + tid;
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
  /* the row's x where it is read from memory (NORM_X_EMBED: NULL for an id outside the table) */
  const bf16 *xr = nullptr;
  if (XS == NORM_X_STORED) {
    xr = x + base;
  } else if (XS == NORM_X_EMBED) {
    const int id = emb.ids[blockIdx.y];
    if (id >= 0 && id < emb.vocab) xr = x + (size_t)id * dim;
  }
  float v[ITEMS][8];
  float ss = 0.0f;
#pragma unroll
  for (int it = 0; it < ITEMS; it++) {
    const int i = col(it);
    if (i < 0) continue;
    float a[8], r[8];
    if (PART)
      k_dec_part_get8(xp, blockIdx.y, i, a);
    else if (xr)
      k_load8(a, xr + i);
    else
#pragma unroll
      for (int j = 0; j < 8; j++)
        a[j] = 0.0f;
    if (!first) k_load8(r, residual + base + i);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      /* the residual stream is bf16: normalise the value as stored */
      v[it][j] = k_rbf(first ? a[j] : r[j] + a[j]);
      ss += v[it][j] * v[it][j];
    }
    k_store8(residual + base + i, v[it]);
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2)
    ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) warp_ss[threadIdx.x / 32] = ss;
  __syncthreads();
  /* every thread of the block has used the partials it read; a line's 32 columns are four
   * neighbouring threads' (on a cluster a line may span two blocks: not dropped there) */
  if (PART && !CL && xp.drop)
#pragma unroll
    for (int it = 0; it < ITEMS; it++)
      if (col(it) >= 0 && col(it) % 32 == 0) k_dec_part_drop(xp, blockIdx.y, col(it));
  /* a slice's sum: its warps' in order */
  auto slice_sum = [&](int s) {
    float bs = warp_ss[s * W];
#pragma unroll
    for (int k = 1; k < W; k++)
      bs += warp_ss[s * W + k];
    return bs;
  };
  cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
  float tot;
  if (CL) {
    /* the block's sum in its own memory; after the barrier every block reads every block's
     * (the documented order: no block's shared memory is touched before the barrier tells
     * that all have started) */
    if (threadIdx.x == 0) slice_ss[0] = slice_sum(0);
    cl.sync();
    tot = *cl.map_shared_rank(slice_ss, 0);
    for (int k = 1; k < cs; k++)
      tot += *cl.map_shared_rank(slice_ss, k);
  } else {
    if ((int)threadIdx.x < cs) slice_ss[threadIdx.x] = slice_sum((int)threadIdx.x);
    __syncthreads();
    tot = slice_ss[0];
    for (int k = 1; k < cs; k++)
      tot += slice_ss[k];
  }
  /* done reading the others' sums: the arrival now, the wait before exiting (no block's
   * memory goes while another may still read it), the stores in between */
  if (CL) cl.barrier_arrive();
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
  if (CL) cl.barrier_wait();
}

/* One launch of up to 65535 rows. xp: x from a lazy GEMM's partial sums; else emb (ids not
 * NULL): x the embedding table x's rows; else x as stored. */
template <int ITEMS, int THREADS>
static cudaError_t go_vec1(int cs, int rows, bf16 *o, bf16 *r, const bf16 *x, const k_dec_part *xp,
                           const norm_embed &emb, const bf16 *w, int dim, int ld, float eps,
                           int first, cudaStream_t st) {
  const bool cl = rows <= NORM_CL_ROWS && xp && (size_t)xp->nseg * dim * 4 > NORM_CL_BYTES;
  auto kern = xp        ? (cl ? add_rmsnorm_vec_kernel<ITEMS, THREADS, NORM_X_PART, true>
                              : add_rmsnorm_vec_kernel<ITEMS, THREADS, NORM_X_PART, false>)
              : emb.ids ? add_rmsnorm_vec_kernel<ITEMS, THREADS, NORM_X_EMBED, false>
                        : add_rmsnorm_vec_kernel<ITEMS, THREADS, NORM_X_STORED, false>;
  return k_launch_cl(kern, dim3(cl ? (unsigned)cs : 1u, (unsigned)rows),
                     dim3(cl ? THREADS : cs * THREADS), 0, st, true, cl ? (unsigned)cs : 0u, o, r,
                     x, w, dim, ld, cs, eps, first, xp ? *xp : k_dec_part{}, emb);
}

/* Rows of dim % 8 == 0, 16-byte aligned (dim <= 65536: a slice of at most 1024 accesses). */
static int go_vec(int rows, bf16 *o, bf16 *r, const bf16 *x, const k_dec_part *xp, norm_embed emb,
                  const bf16 *w, int dim, int ld, float eps, int first, cudaStream_t st) {
  const int n = dim / 8, cs = n < NORM_CL ? n : NORM_CL, m = (n + cs - 1) / cs;
  /* grid.y: at most 65535 rows a launch (a lazy GEMM's partials: 128 rows at most) */
  for (int r0 = 0; r0 < rows; r0 += 65535) {
    const int k = rows - r0 < 65535 ? rows - r0 : 65535;
    const size_t at = (size_t)r0 * ld;
    bf16 *oo = o + at, *rr = r + at;
    const bf16 *xx = x && !emb.ids ? x + at : x; /* the table's rows are picked by id */
    const norm_embed em = {emb.ids ? emb.ids + r0 : nullptr, emb.vocab};
    cudaError_t e;
    if (m <= 32)
      e = go_vec1<1, 32>(cs, k, oo, rr, xx, xp, em, w, dim, ld, eps, first, st);
    else if (m <= 64)
      e = go_vec1<1, 64>(cs, k, oo, rr, xx, xp, em, w, dim, ld, eps, first, st);
    else if (m <= 128)
      e = go_vec1<1, 128>(cs, k, oo, rr, xx, xp, em, w, dim, ld, eps, first, st);
    else if (m <= 256)
      e = go_vec1<2, 128>(cs, k, oo, rr, xx, xp, em, w, dim, ld, eps, first, st);
    else if (m <= 512)
      e = go_vec1<4, 128>(cs, k, oo, rr, xx, xp, em, w, dim, ld, eps, first, st);
    else
      e = go_vec1<8, 128>(cs, k, oo, rr, xx, xp, em, w, dim, ld, eps, first, st);
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
  return go_vec(n_rows, (bf16 *)out, (bf16 *)residual, nullptr, xp, norm_embed{}, (const bf16 *)w,
                dim, ld, eps, first, st);
}

extern "C" int k_embed_rmsnorm(void *out, void *residual, const void *table, const int32_t *ids,
                               int vocab, const void *w, int n_rows, int dim, int ld, float eps,
                               cudaStream_t st) {
  if (n_rows < 0 || dim <= 0 || dim > 65536 || ld < dim || vocab <= 0 || !out || !residual ||
      !table || !ids || !w)
    return NS_EINVAL;
  if (dim % 8 || ld % 8 || !k_aligned(out, 16) || !k_aligned(residual, 16) ||
      !k_aligned(table, 16) || !k_aligned(w, 16))
    return NS_EUNSUPPORTED;
  if (n_rows == 0) return 0;
  return go_vec(n_rows, (bf16 *)out, (bf16 *)residual, (const bf16 *)table, nullptr,
                norm_embed{ids, vocab}, (const bf16 *)w, dim, ld, eps, 1, st);
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
  if (vec) return go_vec(n_rows, o, r, xx, nullptr, norm_embed{}, ww, dim, ld, eps, first, st);
  if (dim <= 256)
    go<1, 256>(n_rows, o, r, xx, ww, dim, ld, eps, first, st);
  else if (dim <= 4096)
    go<16, 256>(n_rows, o, r, xx, ww, dim, ld, eps, first, st);
  else
    go<64, 1024>(n_rows, o, r, xx, ww, dim, ld, eps, first, st);
  K_LAUNCH_CHECK();
  return 0;
}
