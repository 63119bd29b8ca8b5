/* gemm.cu — a batch-invariant bf16 GEMM, y[T, N] = x[T, K] . w[N, K]^T (+ bias), fp32
 * accumulation on the tensor cores (mma.sync m16n8k16, ldmatrix, cp.async pipeline). Every
 * output element is accumulated the same way whatever the tile shape: from zero, one mma per
 * 16 values of k, k ascending, no split of K. So a row's result does not depend on how many
 * rows the call has, and the launch shape may follow T freely. Entry points: k_gemm, and
 * k_gemm_dec for decode rows (K in fixed segments, summed in a fixed order: see its section). */
#include "gemm.h"

#include "k_common.cuh"

#include <stdint.h>

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int bytes) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
/* The same copy with an L2 eviction policy: weights streamed once are let go first, so that
 * what is read again (x rows, partial sums) stays in L2. */
__device__ __forceinline__ void cp_async16_hint(void *smem, const void *gmem, int bytes,
                                                uint64_t policy) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(s),
               "l"(gmem), "r"(bytes), "l"(policy));
}
__device__ __forceinline__ uint64_t l2_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Programmatic dependent launch: wait for the grid before this one in the stream to complete
 * (its writes visible); let the next grid start its blocks (they wait in turn). Without a
 * programmatic launch both are no-ops. */
__device__ __forceinline__ void griddep_wait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}
__device__ __forceinline__ void griddep_launch() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *smem) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldsm_x2(uint32_t r[2], const void *smem) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(s));
}

__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* The B fragments (w rows) of FN n8 blocks by ldmatrix from a shared tile of row pitch LDS (sb:
 * the warp's first w row at the step's first k). */
template <int FN, int LDS>
__device__ __forceinline__ void warp_ldb(uint32_t (&bfr)[FN][2], const bf16 *sb, int lane) {
#pragma unroll
  for (int j = 0; j + 1 < FN; j += 2) {
    uint32_t r[4];
    ldsm_x4(r, sb + (j * 8 + (lane & 7) + (lane >> 4) * 8) * LDS + ((lane >> 3) & 1) * 8);
    bfr[j][0] = r[0], bfr[j][1] = r[1], bfr[j + 1][0] = r[2], bfr[j + 1][1] = r[3];
  }
  if (FN & 1) ldsm_x2(bfr[FN - 1], sb + ((FN - 1) * 8 + (lane & 7)) * LDS + ((lane >> 3) & 1) * 8);
}

template <int FM, int FN>
__device__ __forceinline__ void warp_mma(float (&acc)[FM][FN][4], const uint32_t (&af)[FM][4],
                                         const uint32_t (&bfr)[FN][2]) {
#pragma unroll
  for (int i = 0; i < FM; i++)
#pragma unroll
    for (int j = 0; j < FN; j++)
      mma16816(acc[i][j], af[i], bfr[j]);
}

/* One step of 16 values of k for a warp's FM x FN block of m16n8 tiles: the A fragments
 * (x rows) and B fragments (w rows) by ldmatrix from shared tiles of row pitch LDS (sa: the
 * warp's first x row, sb: its first w row, both at the step's first k), then FM x FN mma.
 * k_gemm and k_gemm_dec both step through these functions, so their per-mma arithmetic is
 * the same. */
template <int FM, int FN, int LDS>
__device__ __forceinline__ void warp_k16(float (&acc)[FM][FN][4], const bf16 *sa, const bf16 *sb,
                                         int lane) {
  uint32_t af[FM][4], bfr[FN][2];
#pragma unroll
  for (int i = 0; i < FM; i++)
    ldsm_x4(af[i], sa + (i * 16 + (lane & 15)) * LDS + (lane >> 4) * 8);
  warp_ldb<FN, LDS>(bfr, sb, lane);
  warp_mma<FM, FN>(acc, af, bfr);
}

/* The same step with the A rows given per lane (ap[i]: the lane's x row of m16 block i at the
 * step's first k, (lane >> 4) * 8 values in), so that rows past T can all read one zero row:
 * the same ldmatrix and mma, the same fragments for the rows that exist. */
template <int FM, int FN, int LDS>
__device__ __forceinline__ void warp_k16_rows(float (&acc)[FM][FN][4], const bf16 *const (&ap)[FM],
                                              int kk, const bf16 *sb, int lane) {
  uint32_t af[FM][4], bfr[FN][2];
#pragma unroll
  for (int i = 0; i < FM; i++)
    ldsm_x4(af[i], ap[i] + kk);
  warp_ldb<FN, LDS>(bfr, sb + kk, lane);
  warp_mma<FM, FN>(acc, af, bfr);
}

/* Block tile BM x BN, BK values of k a stage, ST stages, WM x WN warps (warp tile
 * BM / WM x BN / WN: FM m16 blocks by FN n8 blocks). Shared rows padded by 8 values (16 B):
 * ldmatrix reads of 8 rows hit 8 distinct 16-byte bank groups. */
template <int BM, int BN, int BK, int WM, int WN, int ST>
static __global__ void __launch_bounds__(WM *WN * 32)
    gemm_kernel(void *y, int y_f32, int ldy, const bf16 *x, int ldx, const bf16 *w,
                const bf16 *bias, int T, int N, int K) {
  constexpr int NT = WM * WN * 32, LDS = BK + 8, TM = BM / WM, TN = BN / WN;
  constexpr int FM = TM / 16, FN = TN / 8, CH = BK / 8;
  static_assert(FM >= 1 && FN >= 1 && BK % 16 == 0, "tile");
  extern __shared__ __align__(16) bf16 gsm[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WN, wn = warp % WN;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int nk = (K + BK - 1) / BK;

  auto load = [&](int stage, int kt) {
    bf16 *sa = gsm + (size_t)stage * (BM + BN) * LDS, *sb = sa + BM * LDS;
    const int k0 = kt * BK;
#pragma unroll 4
    for (int i = tid; i < (BM + BN) * CH; i += NT) {
      int r = i / CH, c = (i - r * CH) * 8, k = k0 + c;
      const bf16 *src = w; /* any valid address when nothing is read (zero fill) */
      bf16 *dst;
      int ok;
      if (r < BM) {
        int gm = m0 + r;
        ok = gm < T && k < K;
        if (ok) src = x + (size_t)gm * ldx + k;
        dst = sa + r * LDS + c;
      } else {
        int gn = n0 + r - BM;
        ok = gn < N && k < K;
        if (ok) src = w + (size_t)gn * K + k;
        dst = sb + (r - BM) * LDS + c;
      }
      cp_async16(dst, src, ok ? 16 : 0);
    }
  };

  float acc[FM][FN][4];
#pragma unroll
  for (int i = 0; i < FM; i++)
#pragma unroll
    for (int j = 0; j < FN; j++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        acc[i][j][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < ST - 1; s++) {
    if (s < nk) load(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < nk; kt++) {
    cp_async_wait<ST - 2>();
    __syncthreads(); /* stage kt landed for every thread; stage kt - 1 is consumed */
    if (kt + ST - 1 < nk) load((kt + ST - 1) % ST, kt + ST - 1);
    cp_async_commit();
    const bf16 *sa = gsm + (size_t)(kt % ST) * (BM + BN) * LDS, *sb = sa + BM * LDS;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16)
      warp_k16<FM, FN, LDS>(acc, sa + wm * TM * LDS + kk, sb + wn * TN * LDS + kk, lane);
  }
  cp_async_wait<0>();

  /* c0, c1: row lane / 4, columns 2 (lane % 4) + 0, 1; c2, c3: eight rows below */
#pragma unroll
  for (int i = 0; i < FM; i++)
#pragma unroll
    for (int j = 0; j < FN; j++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        int gm = m0 + wm * TM + i * 16 + (lane >> 2) + h * 8;
        int gn = n0 + wn * TN + j * 8 + (lane & 3) * 2;
        if (gm >= T) continue;
#pragma unroll
        for (int e = 0; e < 2; e++) {
          if (gn + e >= N) continue;
          float v = acc[i][j][h * 2 + e];
          if (bias) v += __bfloat162float(bias[gn + e]);
          if (y_f32)
            ((float *)y)[(size_t)gm * ldy + gn + e] = v;
          else
            ((bf16 *)y)[(size_t)gm * ldy + gn + e] = __float2bfloat16(v);
        }
      }
}

template <int BM, int BN, int BK, int WM, int WN, int ST>
static int launch(void *y, int y_f32, int ldy, const bf16 *x, int ldx, const bf16 *w,
                  const bf16 *bias, int T, int N, int K, cudaStream_t st) {
  static int done;
  size_t smem = (size_t)ST * (BM + BN) * (BK + 8) * sizeof(bf16);
  if (smem > 48 * 1024 && !done) {
    NS_CUDA_CHECK(cudaFuncSetAttribute(gemm_kernel<BM, BN, BK, WM, WN, ST>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    done = 1;
  }
  dim3 grid((N + BN - 1) / BN, (T + BM - 1) / BM);
  gemm_kernel<BM, BN, BK, WM, WN, ST>
      <<<grid, WM * WN * 32, smem, st>>>(y, y_f32, ldy, x, ldx, w, bias, T, N, K);
  K_LAUNCH_CHECK();
  return 0;
}

extern "C" int k_gemm_supported(const void *x, int ldx, const void *w, int K) {
  return K > 0 && K % 8 == 0 && ldx % 8 == 0 && k_aligned(x, 16) && k_aligned(w, 16);
}

extern "C" int k_gemm(void *y, int y_f32, int ldy, const void *x, int ldx, const void *w,
                      const void *bias, int T, int N, int K, int n_sm, cudaStream_t st) {
  if (!y || !x || !w || T < 0 || N <= 0 || ldx < K || ldy < N || (bias && y_f32) ||
      !k_gemm_supported(x, ldx, w, K) || (unsigned)T > 65535u * 16u)
    return NS_EINVAL;
  if (T == 0) return 0;
  const bf16 *xb = (const bf16 *)x, *wb = (const bf16 *)w, *bb = (const bf16 *)bias;
  /* the tile follows T and N (and the grid the multiprocessors): any shape gives the same
   * bits, so only speed decides */
  const long sm = n_sm > 0 ? n_sm : 132, nb64 = (N + 63) / 64;
  if (T <= 16) {
    if (nb64 >= sm)
      return launch<16, 64, 128, 1, 4, 4>(y, y_f32, ldy, xb, ldx, wb, bb, T, N, K, st);
    return launch<16, 32, 128, 1, 2, 4>(y, y_f32, ldy, xb, ldx, wb, bb, T, N, K, st);
  }
  const long mb64 = (T + 63) / 64;
  if (T > 64 && (long)((T + 127) / 128) * ((N + 127) / 128) >= sm)
    return launch<128, 128, 32, 2, 4, 4>(y, y_f32, ldy, xb, ldx, wb, bb, T, N, K, st);
  if (mb64 * nb64 >= sm)
    return launch<64, 64, 64, 2, 2, 4>(y, y_f32, ldy, xb, ldx, wb, bb, T, N, K, st);
  return launch<64, 32, 64, 2, 2, 4>(y, y_f32, ldy, xb, ldx, wb, bb, T, N, K, st);
}

/* ---- k_gemm_dec: K in fixed segments, for decode rows ----------------------------------------
 * Each output element: K cut into segments of S = k_gemm_dec_seg(N, K) values; a segment is
 * an mma chain from zero, 16 values of k a step, ascending; the segment sums are added in
 * segment order onto segment 0's; then the bias. Two kernels do exactly these operations:
 *   stream (T <= DEC_STREAM_T): a warp owns one (16-column tile, segment) and streams its
 *     weights through a cp.async pipeline of its own, x rows past T read from one zero row;
 *     a block holds every segment of its tile (a warp each) and adds their sums in shared
 *     memory, so nothing goes through device memory but w, x and y. Blocks are persistent
 *     over tiles and the pipelines run on from one tile into the next.
 *   tile (larger T): block tiles of 64 or 128 rows by 128 columns; a block either runs
 *     every segment of its tile itself (the sums folded as they complete) or, with few
 *     tiles, one segment, its sum sent through the workspace to the last block to finish the
 *     tile, which adds them in order.
 * Both are launched as programmatic dependents: the weights of the first stages are requested
 * before griddepcontrol.wait (they never depend on the previous kernel), x, y and the
 * workspace are touched only after it. */

/* DEC_COLS: a stream warp's columns; DEC_SBK: the stream kernel's k a stage (256-byte runs of
 * a weight row: with 128-byte ones the large matrices streamed 10-20% slower on an H200).
 * Segments: as many as give a T = 1 call about DEC_WARPS (tile, segment) warps (8
 * a multiprocessor of a 132-SM H100 / H200), at most DEC_SEG_MAX, each at least 256 values.
 * The tile kernel splits segments over blocks only when the (tile, segment) items are at most
 * DEC_SPLIT_ITEMS (which bounds the workspace). */
enum {
  DEC_COLS = 16,
  DEC_SBK = 128,
  DEC_WARPS = 1024,
  DEC_SEG_MAX = 8,
  DEC_STREAM_T = 16,
  DEC_SPLIT_ITEMS = 512,
  DEC_CNT = DEC_SPLIT_ITEMS / 2, /* a split call has nseg >= 2: at most this many tiles */
  DEC_PART_MAX = 128 * 128       /* the largest tile */
};
#define DEC_CNT_BYTES ((size_t)4096)
static_assert(DEC_CNT * sizeof(unsigned) <= DEC_CNT_BYTES, "counters");

/* One launch's work, the same for every block. */
struct dec_args {
  void *y;
  const bf16 *x, *w, *bias;
  float *part;   /* split: partial sums [tile][segment][BM][BN] */
  unsigned *cnt; /* split: segments done per tile */
  int y_f32, ldy, ldx, T, N, K;
  int S, nseg;  /* segment length, segments */
  int mtn, ntn; /* tile kernel: tiles over T, over N */
  int items;    /* stream: 16-column tiles; tile kernel: mtn * ntn (* nseg when split) */
};

__device__ __forceinline__ void dec_store(const dec_args &a, int gm, int gn, float v) {
  if (a.bias) v += __bfloat162float(a.bias[gn]);
  if (a.y_f32)
    ((float *)a.y)[(size_t)gm * a.ldy + gn] = v;
  else
    ((bf16 *)a.y)[(size_t)gm * a.ldy + gn] = __float2bfloat16(v);
}

/* ---- stream kernel: T <= 16 ---- */

/* Shared memory of a stream block: per warp ST stages of 16 w rows and T x rows (pitch
 * DEC_SBK + 8), DEC_SBK zeros, then the segment sums [2][nseg][T][16] (double-buffered over
 * tiles). */
static constexpr size_t dec_stage_bytes(int T) {
  return (size_t)(DEC_COLS + T) * (DEC_SBK + 8) * sizeof(bf16);
}
static constexpr size_t dec_stream_smem(int st, int T, int nseg) {
  return (size_t)nseg * st * dec_stage_bytes(T) + DEC_SBK * sizeof(bf16) +
         (size_t)2 * nseg * T * DEC_COLS * sizeof(float);
}
/* The stages for T up to t: as many as let a block of DEC_SEG_MAX warps fit the 227 KB a block
 * may have, at most 8. */
static constexpr int dec_stream_st(int t) {
  return (232448 - dec_stream_smem(0, t, DEC_SEG_MAX)) / (DEC_SEG_MAX * dec_stage_bytes(t)) < 8
             ? (int)((232448 - dec_stream_smem(0, t, DEC_SEG_MAX)) /
                     (DEC_SEG_MAX * dec_stage_bytes(t)))
             : 8;
}
/* the stream kernel's T classes: T <= 4, 8, 16 */
static constexpr int DEC_TCLS[3] = {4, 8, 16};

/* Block: nseg warps, warp s on segment s of the block's tiles blockIdx.x, + gridDim.x, ... */
template <int ST>
static __global__ void __launch_bounds__(DEC_SEG_MAX * 32) gemm_dec_stream(const dec_args a) {
  constexpr int BK = DEC_SBK, LDS = BK + 8, CH = BK / 8, FN = DEC_COLS / 8;
  static_assert(ST >= 3 && (DEC_COLS * CH) % 32 == 0 && 128 % BK == 0, "stream shape");
  extern __shared__ __align__(16) bf16 gsm[];
  const int lane = threadIdx.x & 31, seg = threadIdx.x >> 5, nseg = a.nseg, T = a.T;
  const int rows = DEC_COLS + T; /* a stage: the w rows, then the x rows */
  bf16 *wsm = gsm + (size_t)seg * ST * rows * LDS;
  bf16 *zero = gsm + (size_t)nseg * ST * rows * LDS;
  float *red = reinterpret_cast<float *>(zero + BK);
  for (int e = threadIdx.x; e < BK / 8; e += blockDim.x)
    reinterpret_cast<uint4 *>(zero)[e] = make_uint4(0, 0, 0, 0);

  const int kb = seg * a.S, ke = min(kb + a.S, a.K), nk = (ke - kb + BK - 1) / BK;
  const int mine = (a.items - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;
  const int total = mine * nk; /* k tiles this warp streams: flat index j, stage j % ST */
  const uint64_t pol = l2_evict_first();

  /* k tiles past ke (chunks of 8) and columns past N are zero-filled */
  auto load_w = [&](int j) {
    const int i = j / nk, kt = j - i * nk;
    const int n0 = ((int)blockIdx.x + i * (int)gridDim.x) * DEC_COLS, k0 = kb + kt * BK;
    bf16 *s = wsm + (j % ST) * rows * LDS;
#pragma unroll
    for (int q = 0; q < DEC_COLS * CH / 32; q++) {
      const int e = lane + q * 32, r = e / CH, c = (e % CH) * 8, gn = n0 + r;
      const bool ok = gn < a.N && k0 + c < ke;
      cp_async16_hint(s + r * LDS + c, ok ? a.w + (size_t)gn * a.K + k0 + c : a.w, ok ? 16 : 0,
                      pol);
    }
  };
  auto load_x = [&](int j) {
    const int k0 = kb + (j % nk) * BK;
    bf16 *s = wsm + ((j % ST) * rows + DEC_COLS) * LDS;
    for (int e = lane; e < T * CH; e += 32) {
      const int r = e / CH, c = (e % CH) * 8;
      const bool ok = k0 + c < ke;
      cp_async16(s + r * LDS + c, ok ? a.x + (size_t)r * a.ldx + k0 + c : a.x, ok ? 16 : 0);
    }
  };

  /* the weights of the first stages, then (the previous kernel complete) their x rows */
#pragma unroll
  for (int s = 0; s < ST - 1; s++) {
    if (s < total) load_w(s);
    cp_async_commit();
  }
  griddep_wait();
  for (int s = 0; s < ST - 1 && s < total; s++)
    load_x(s);
  cp_async_commit();
  griddep_launch();
  __syncthreads(); /* the zero row */

  float acc[1][FN][4];
#pragma unroll
  for (int j = 0; j < FN; j++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      acc[0][j][e] = 0.0f;
  const int ar = lane & 15, ah = (lane >> 4) * 8;
  int buf = 0;
  for (int j = 0; j < total; j++) {
    if (j == 0)
      cp_async_wait<0>(); /* the prologue's groups: x came last */
    else
      cp_async_wait<ST - 2>();
    __syncwarp(); /* k tile j landed for every lane; k tile j - 1 is consumed */
    if (j + ST - 1 < total) load_w(j + ST - 1), load_x(j + ST - 1);
    cp_async_commit();
    const int i = j / nk, kt = j - i * nk, k0 = kb + kt * BK;
    const bf16 *sw = wsm + (j % ST) * rows * LDS;
    const bf16 *const ap[1] = {ar < T ? sw + (DEC_COLS + ar) * LDS + ah : zero + ah};
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) /* no step past the segment: every shape, same chain */
      if (k0 + kk < ke) warp_k16_rows<1, FN, LDS>(acc, ap, kk, sw, lane);
    if (kt < nk - 1) continue;

    /* the segment is complete: its sum (c0, c1: row lane / 4, columns 2 (lane % 4) + 0, 1;
     * c2, c3: eight rows below) to shared memory; once every warp's is there, the tile's
     * outputs are the sums in segment order */
    float *rs = red + (size_t)(buf * nseg + seg) * T * DEC_COLS;
#pragma unroll
    for (int jn = 0; jn < FN; jn++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = (lane >> 2) + h * 8, c = jn * 8 + (lane & 3) * 2;
        if (r < T)
          *reinterpret_cast<float2 *>(rs + r * DEC_COLS + c) =
              make_float2(acc[0][jn][h * 2], acc[0][jn][h * 2 + 1]);
        acc[0][jn][h * 2] = acc[0][jn][h * 2 + 1] = 0.0f;
      }
    __syncthreads(); /* once a tile: the other buffer's readers are past it too */
    const float *rb = red + (size_t)buf * nseg * T * DEC_COLS;
    const int n0 = ((int)blockIdx.x + i * (int)gridDim.x) * DEC_COLS;
    for (int e = threadIdx.x; e < T * DEC_COLS; e += blockDim.x) {
      const int r = e / DEC_COLS, c = e % DEC_COLS;
      if (n0 + c >= a.N) continue;
      float v = rb[e];
      for (int s = 1; s < nseg; s++)
        v += rb[(size_t)s * T * DEC_COLS + e];
      dec_store(a, r, n0 + c, v);
    }
    buf ^= 1;
  }
  cp_async_wait<0>();
}

/* ---- tile kernel: larger T ---- */

/* A launch shape: tile BM x BN, BK values of k a stage, WM x WN warps, ST stages, and the
 * blocks a multiprocessor should hold (caps the registers). */
template <int BM_, int BN_, int BK_, int WM_, int WN_, int ST_, int MINB_> struct dec_shape {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, ST = ST_, MINB = MINB_;
  static constexpr int NT = WM * WN * 32;
  static constexpr size_t SMEM = (size_t)ST * (BM + BN) * (BK + 8) * sizeof(bf16);
};
/* T <= 64: warp tiles 32 x 32, 83 KB, 2 blocks a multiprocessor */
typedef dec_shape<64, 128, 64, 2, 4, 3, 2> dec_m64;
/* larger T: warp tiles 64 x 32, 147 KB, 1 block a multiprocessor */
typedef dec_shape<128, 128, 64, 2, 4, 4, 1> dec_m128;
static_assert(dec_m64::BM * dec_m64::BN <= DEC_PART_MAX &&
                  dec_m128::BM * dec_m128::BN <= DEC_PART_MAX,
              "partials");

/* The last block to finish a split tile: y = p0 + p1 + ... (segment order) + bias, over the
 * tile's rows < T, 4 columns a thread step and 8 partials in flight. */
template <class SH> __device__ void dec_reduce(const dec_args &a, int t, int m0, int n0) {
  constexpr int BM = SH::BM, BN = SH::BN, C4 = BN / 4;
  const float *pt = a.part + (size_t)t * a.nseg * (BM * BN);
  const int rows = min(BM, a.T - m0);
  for (int e = threadIdx.x; e < rows * C4; e += SH::NT) {
    const int r = e / C4, c = (e - r * C4) * 4;
    const float *q = pt + r * BN + c;
    float4 v = __ldcg(reinterpret_cast<const float4 *>(q));
    for (int s0 = 1; s0 < a.nseg; s0 += 8) {
      float4 u[8];
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (s0 + j < a.nseg)
          u[j] = __ldcg(reinterpret_cast<const float4 *>(q + (size_t)(s0 + j) * (BM * BN)));
#pragma unroll
      for (int j = 0; j < 8; j++)
        if (s0 + j < a.nseg) v.x += u[j].x, v.y += u[j].y, v.z += u[j].z, v.w += u[j].w;
    }
    const float o[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; j++)
      if (n0 + c + j < a.N) dec_store(a, m0 + r, n0 + c + j, o[j]);
  }
}

/* The tile kernel's modes. DEC_SPLIT: an item is (tile, segment), its sum goes to the
 * workspace. DEC_ONE: an item is a tile over all of K, one segment. DEC_FOLD: an item is a
 * tile over all of K, the segment sums folded as they complete into a running sum that each
 * thread keeps in shared memory (its own slots, [value][thread]: registers would not hold it
 * beside the chain's). */
enum { DEC_ONE, DEC_FOLD, DEC_SPLIT };

template <class SH, int MODE> static constexpr size_t dec_tile_smem() {
  return SH::SMEM + (MODE == DEC_FOLD ? (size_t)SH::BM * SH::BN * sizeof(float) : 0);
}

/* Items: segment fastest (a tile's segments run at the same time, its partials are summed
 * while still in L2), then the tile over T (blocks at the same time share w tiles in L2). The
 * blocks are persistent and the cp.async pipeline runs on across items. */
template <class SH, int MODE>
static __global__ void __launch_bounds__(SH::NT, SH::MINB) gemm_dec_tile(const dec_args a) {
  constexpr bool SPLIT = MODE == DEC_SPLIT;
  constexpr int BM = SH::BM, BN = SH::BN, BK = SH::BK, WN = SH::WN, ST = SH::ST, NT = SH::NT;
  constexpr int LDS = BK + 8, TM = BM / SH::WM, TN = BN / WN, FM = TM / 16, FN = TN / 8;
  constexpr int CH = BK / 8;
  static_assert(FM >= 1 && FN >= 1 && BK % 16 == 0 && 128 % BK == 0 && (BM * CH) % NT == 0 &&
                    (BN * CH) % NT == 0 && BN % 4 == 0 && ST >= 3,
                "tile");
  extern __shared__ __align__(16) bf16 gsm[];
  __shared__ int s_last;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WN, wn = warp % WN;

  /* item it: tile origin (m0, n0), k range [kb, ke) */
  auto item = [&](int it, int &m0, int &n0, int &kb, int &ke) {
    int t = it, seg = 0;
    if (SPLIT) t = it / a.nseg, seg = it - t * a.nseg;
    const int mt = t % a.mtn;
    m0 = mt * BM, n0 = (t / a.mtn) * BN;
    kb = seg * a.S;
    ke = SPLIT ? min(kb + a.S, a.K) : a.K;
  };

  /* the loader runs ST - 1 k tiles ahead of the math through this block's items; chunks of 8
   * past ke, rows past T and columns past N are zero-filled */
  int l_it = blockIdx.x, l_kt = 0, l_nk = 0, l_m0 = 0, l_n0 = 0, l_kb = 0, l_ke = 0;
  if (l_it < a.items) item(l_it, l_m0, l_n0, l_kb, l_ke), l_nk = (l_ke - l_kb + BK - 1) / BK;
  const uint64_t pol = l2_evict_first();
  auto load_x = [&](int stage, int m0, int k0, int ke) {
    bf16 *sa = gsm + stage * (BM + BN) * LDS;
#pragma unroll
    for (int q = 0; q < BM * CH / NT; q++) {
      const int i = tid + q * NT, r = i / CH, c = (i % CH) * 8, gm = m0 + r;
      const bool ok = gm < a.T && k0 + c < ke;
      cp_async16(sa + r * LDS + c, ok ? a.x + (size_t)gm * a.ldx + k0 + c : a.x, ok ? 16 : 0);
    }
  };
  auto load_w = [&](int stage, int n0, int k0, int ke) {
    bf16 *sb = gsm + stage * (BM + BN) * LDS + BM * LDS;
#pragma unroll
    for (int q = 0; q < BN * CH / NT; q++) {
      const int i = tid + q * NT, r = i / CH, c = (i % CH) * 8, gn = n0 + r;
      const bool ok = gn < a.N && k0 + c < ke;
      cp_async16_hint(sb + r * LDS + c, ok ? a.w + (size_t)gn * a.K + k0 + c : a.w, ok ? 16 : 0,
                      pol);
    }
  };
  auto advance = [&]() {
    if (++l_kt == l_nk) {
      l_kt = 0;
      l_it += gridDim.x;
      if (l_it < a.items) item(l_it, l_m0, l_n0, l_kb, l_ke), l_nk = (l_ke - l_kb + BK - 1) / BK;
    }
  };

  /* the weights of the first stages, then (the previous kernel complete) their x rows */
  int pm0[ST - 1], pk0[ST - 1], pke[ST - 1];
#pragma unroll
  for (int s = 0; s < ST - 1; s++) {
    pm0[s] = pk0[s] = pke[s] = 0;
    if (l_it < a.items) {
      pm0[s] = l_m0, pk0[s] = l_kb + l_kt * BK, pke[s] = l_ke;
      load_w(s, l_n0, pk0[s], l_ke);
      advance();
    }
    cp_async_commit();
  }
  griddep_wait();
#pragma unroll
  for (int s = 0; s < ST - 1; s++)
    if (pke[s] > 0) load_x(s, pm0[s], pk0[s], pke[s]);
  cp_async_commit();
  griddep_launch();

  float acc[FM][FN][4];
  float *tot = reinterpret_cast<float *>(gsm + ST * (BM + BN) * LDS); /* DEC_FOLD */
  const int tps = a.S / BK;                                           /* k tiles a segment */
  int stage = 0; /* flat k tile j of the block sits in stage j % ST */
  bool first_kt = true;
  for (int it = blockIdx.x; it < a.items; it += gridDim.x) {
    int m0, n0, kb, ke;
    item(it, m0, n0, kb, ke);
    const int nk = (ke - kb + BK - 1) / BK;
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
      for (int j = 0; j < FN; j++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          acc[i][j][e] = 0.0f;
    for (int kt = 0, left = tps; kt < nk; kt++) {
      if (first_kt)
        cp_async_wait<0>(); /* the prologue's groups: x came last */
      else
        cp_async_wait<ST - 2>();
      first_kt = false;
      __syncthreads(); /* this k tile landed for every thread; the previous one is consumed */
      const int ls = stage == 0 ? ST - 1 : stage - 1;
      if (l_it < a.items) {
        const int k0 = l_kb + l_kt * BK;
        load_x(ls, l_m0, k0, l_ke);
        load_w(ls, l_n0, k0, l_ke);
        advance();
      }
      cp_async_commit();
      const bf16 *sa = gsm + stage * (BM + BN) * LDS, *sb = sa + BM * LDS;
      const int k0 = kb + kt * BK;
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16) /* no step past the range: every shape, same chain */
        if (k0 + kk < ke)
          warp_k16<FM, FN, LDS>(acc, sa + wm * TM * LDS + kk, sb + wn * TN * LDS + kk, lane);
      stage = stage == ST - 1 ? 0 : stage + 1;
      if (MODE == DEC_FOLD && (--left == 0 || kt == nk - 1)) { /* a segment is complete */
        const bool first = kt < tps;
#pragma unroll
        for (int i = 0; i < FM; i++)
#pragma unroll
          for (int j = 0; j < FN; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
              float &t = tot[((i * FN + j) * 4 + e) * NT + tid];
              t = first ? acc[i][j][e] : t + acc[i][j][e];
              acc[i][j][e] = 0.0f;
            }
        left = tps;
      }
    }

    /* c0, c1: row lane / 4, columns 2 (lane % 4) + 0, 1; c2, c3: eight rows below */
    if (!SPLIT) {
#pragma unroll
      for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const int gm = m0 + wm * TM + i * 16 + (lane >> 2) + h * 8;
            const int gn = n0 + wn * TN + j * 8 + (lane & 3) * 2;
            if (gm >= a.T) continue;
#pragma unroll
            for (int e = 0; e < 2; e++)
              if (gn + e < a.N)
                dec_store(a, gm, gn + e,
                          MODE == DEC_FOLD ? tot[((i * FN + j) * 4 + h * 2 + e) * NT + tid]
                                           : acc[i][j][h * 2 + e]);
          }
      continue;
    }
    const int t = it / a.nseg, seg = it - t * a.nseg;
    float *p = a.part + ((size_t)t * a.nseg + seg) * (BM * BN);
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
      for (int j = 0; j < FN; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int r = wm * TM + i * 16 + (lane >> 2) + h * 8,
                    c = wn * TN + j * 8 + (lane & 3) * 2;
          if (m0 + r < a.T)
            *reinterpret_cast<float2 *>(p + r * BN + c) =
                make_float2(acc[i][j][h * 2], acc[i][j][h * 2 + 1]);
        }
    /* publish: the block's partials (ordered before thread 0 by the barrier, made visible
     * to the device by its fence) before the count; the last block to count acquires them
     * (fence, barrier) and sums the tile */
    __syncthreads();
    if (tid == 0) {
      __threadfence();
      const int last = atomicAdd(a.cnt + t, 1u) == (unsigned)a.nseg - 1;
      if (last) {
        a.cnt[t] = 0; /* every segment has counted: zero for the next call */
        __threadfence();
      }
      s_last = last;
    }
    __syncthreads();
    if (s_last) dec_reduce<SH>(a, t, m0, n0); /* reads through L2 (__ldcg), not L1 */
  }
  cp_async_wait<0>();
}

/* ---- planning and launch ---- */

/* How a call runs: the segments, the kernel (0 stream, 1 dec_m64, 2 dec_m128), whether the
 * tile kernel may split segments over blocks (then the call needs the workspace). */
struct dec_plan {
  int S, nseg, kind, splittable, bm, bn;
  long mtn, ntn, tiles;
};

static dec_plan dec_plan_of(int T, int N, int K) {
  dec_plan p;
  p.S = k_gemm_dec_seg(N, K);
  p.nseg = (K + p.S - 1) / p.S;
  p.kind = T <= DEC_STREAM_T ? 0 : T <= dec_m64::BM ? 1 : 2;
  p.bm = p.kind == 0 ? T : p.kind == 1 ? dec_m64::BM : dec_m128::BM;
  p.bn = p.kind == 0 ? DEC_COLS : p.kind == 1 ? dec_m64::BN : dec_m128::BN;
  p.mtn = (T + p.bm - 1) / p.bm, p.ntn = (N + p.bn - 1) / p.bn;
  p.tiles = p.mtn * p.ntn;
  p.splittable = p.kind > 0 && p.nseg > 1 && p.tiles * p.nseg <= DEC_SPLIT_ITEMS;
  return p;
}

/* Blocks a multiprocessor holds: the tile kernel per shape and mode, the stream kernel per
 * stage count, T and segments; 0 until dec_init. */
static int dec_occ_tile[2][3];
static int dec_occ_stream[DEC_STREAM_T + 1][DEC_SEG_MAX + 1];

template <class SH, int MODE> static int dec_init_tile(int *occ) {
  auto kern = gemm_dec_tile<SH, MODE>;
  const size_t smem = dec_tile_smem<SH, MODE>();
  NS_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  NS_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     (int)cudaSharedmemCarveoutMaxShared));
  NS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(occ, kern, SH::NT, smem));
  return *occ > 0 ? 0 : NS_EUNSUPPORTED;
}

template <int ST> static int dec_init_stream(int t_lo, int t_hi) {
  int(*occ)[DEC_SEG_MAX + 1] = dec_occ_stream;
  auto kern = gemm_dec_stream<ST>;
  const size_t most = dec_stream_smem(ST, t_hi, DEC_SEG_MAX);
  NS_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)most));
  NS_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     (int)cudaSharedmemCarveoutMaxShared));
  for (int T = t_lo; T <= t_hi; T++)
    for (int s = 1; s <= DEC_SEG_MAX; s++) {
      NS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ[T][s], kern, 32 * s,
                                                                  dec_stream_smem(ST, T, s)));
      if (occ[T][s] < 1) return NS_EUNSUPPORTED;
    }
  return 0;
}

/* Every kernel's attributes at the first call (outside a capture, as for k_gemm). */
static int dec_init(void) {
  static int done;
  if (done) return 0;
  int rc;
  if ((rc = dec_init_tile<dec_m64, DEC_ONE>(&dec_occ_tile[0][DEC_ONE])) ||
      (rc = dec_init_tile<dec_m64, DEC_FOLD>(&dec_occ_tile[0][DEC_FOLD])) ||
      (rc = dec_init_tile<dec_m64, DEC_SPLIT>(&dec_occ_tile[0][DEC_SPLIT])) ||
      (rc = dec_init_tile<dec_m128, DEC_ONE>(&dec_occ_tile[1][DEC_ONE])) ||
      (rc = dec_init_tile<dec_m128, DEC_FOLD>(&dec_occ_tile[1][DEC_FOLD])) ||
      (rc = dec_init_tile<dec_m128, DEC_SPLIT>(&dec_occ_tile[1][DEC_SPLIT])) ||
      (rc = dec_init_stream<dec_stream_st(DEC_TCLS[0])>(1, DEC_TCLS[0])) ||
      (rc = dec_init_stream<dec_stream_st(DEC_TCLS[1])>(DEC_TCLS[0] + 1, DEC_TCLS[1])) ||
      (rc = dec_init_stream<dec_stream_st(DEC_TCLS[2])>(DEC_TCLS[1] + 1, DEC_TCLS[2])))
    return rc;
  done = 1;
  return 0;
}

/* A programmatic dependent launch (see the section's note). */
static int dec_launch(void (*kern)(dec_args), long grid, int threads, size_t smem,
                      const dec_args &a, cudaStream_t st) {
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3((unsigned)grid);
  c.blockDim = dim3((unsigned)threads);
  c.dynamicSmemBytes = smem;
  c.stream = st;
  c.attrs = at;
  c.numAttrs = 1;
  NS_CUDA_CHECK(cudaLaunchKernelEx(&c, kern, a));
  return 0;
}

/* Persistent grids: as many blocks as the multiprocessors hold, fewer where that evens out the
 * items a block (each gets q or q - 1). */
static long dec_grid(long items, long cap) {
  if (cap < 1) cap = 1;
  const long q = (items + cap - 1) / cap;
  return (items + q - 1) / q;
}

extern "C" int k_gemm_dec_seg(int N, int K) {
  if (N <= 0 || K <= 0) return 0;
  const long nt = (N + DEC_COLS - 1) / DEC_COLS, kc = (K + 127) / 128;
  long ns = (DEC_WARPS + nt - 1) / nt;
  if (ns > DEC_SEG_MAX) ns = DEC_SEG_MAX;
  if (ns > kc / 2) ns = kc / 2 > 1 ? kc / 2 : 1; /* segments of 256 values or more */
  return (int)((kc + ns - 1) / ns * 128);
}

extern "C" size_t k_gemm_dec_ws_bytes(int T, int N, int K) {
  if (T <= 0 || N <= 0 || K <= 0) return 0;
  const dec_plan p = dec_plan_of(T, N, K);
  return p.splittable ? DEC_CNT_BYTES + (size_t)p.tiles * p.nseg * p.bm * p.bn * sizeof(float) : 0;
}

extern "C" size_t k_gemm_dec_ws_max(void) {
  return DEC_CNT_BYTES + (size_t)DEC_SPLIT_ITEMS * DEC_PART_MAX * sizeof(float);
}

extern "C" int k_gemm_dec(void *y, int y_f32, int ldy, const void *x, int ldx, const void *w,
                          const void *bias, int T, int N, int K, void *ws, size_t ws_bytes,
                          int n_sm, cudaStream_t st) {
  if (!y || !x || !w || T < 0 || N <= 0 || ldx < K || ldy < N || (bias && y_f32) ||
      !k_gemm_supported(x, ldx, w, K) || T > (1 << 24))
    return NS_EINVAL;
  if (T == 0) return 0;
  const dec_plan p = dec_plan_of(T, N, K);
  if (p.tiles * p.nseg > 0x7fffffffL) return NS_EINVAL;
  dec_args a = {y,
                (const bf16 *)x,
                (const bf16 *)w,
                (const bf16 *)bias,
                nullptr,
                nullptr,
                y_f32,
                ldy,
                ldx,
                T,
                N,
                K,
                p.S,
                p.nseg,
                (int)p.mtn,
                (int)p.ntn,
                (int)p.tiles};
  if (p.splittable) {
    if (!ws || ws_bytes < k_gemm_dec_ws_bytes(T, N, K)) return NS_ERANGE;
    if (!k_aligned(ws, 16) || p.tiles > DEC_CNT) return NS_EINVAL;
    a.cnt = (unsigned *)ws;
    a.part = (float *)((char *)ws + DEC_CNT_BYTES);
  }
  int rc = dec_init();
  if (rc) return rc;
  const long sm = n_sm > 0 ? n_sm : 132;
  if (p.kind == 0) {
    constexpr int s0 = dec_stream_st(DEC_TCLS[0]), s1 = dec_stream_st(DEC_TCLS[1]),
                  s2 = dec_stream_st(DEC_TCLS[2]);
    const int c = T <= DEC_TCLS[0]   ? 0
                  : T <= DEC_TCLS[1] ? 1
                                     : 2,
              stn = c == 0   ? s0
                    : c == 1 ? s1
                             : s2;
    const long g = dec_grid(p.tiles, (long)dec_occ_stream[T][p.nseg] * sm);
    return dec_launch(c == 0   ? gemm_dec_stream<s0>
                      : c == 1 ? gemm_dec_stream<s1>
                               : gemm_dec_stream<s2>,
                      g, 32 * p.nseg, dec_stream_smem(stn, T, p.nseg), a, st);
  }
  /* split unless that takes more rounds of segment-long items over the multiprocessors */
  const int sh = p.kind - 1;
  int mode = p.nseg > 1 ? DEC_FOLD : DEC_ONE;
  if (p.splittable) {
    const long cw = (long)dec_occ_tile[sh][mode] * sm, cs = (long)dec_occ_tile[sh][DEC_SPLIT] * sm;
    if ((p.tiles * p.nseg + cs - 1) / cs <= (p.tiles + cw - 1) / cw * p.nseg) mode = DEC_SPLIT;
  }
  if (mode == DEC_SPLIT) a.items = (int)(p.tiles * p.nseg);
  const long g = dec_grid(a.items, (long)dec_occ_tile[sh][mode] * sm);
  if (sh == 0)
    return dec_launch(mode == DEC_SPLIT  ? gemm_dec_tile<dec_m64, DEC_SPLIT>
                      : mode == DEC_FOLD ? gemm_dec_tile<dec_m64, DEC_FOLD>
                                         : gemm_dec_tile<dec_m64, DEC_ONE>,
                      g, dec_m64::NT,
                      mode == DEC_FOLD ? dec_tile_smem<dec_m64, DEC_FOLD>() : dec_m64::SMEM, a, st);
  return dec_launch(mode == DEC_SPLIT  ? gemm_dec_tile<dec_m128, DEC_SPLIT>
                    : mode == DEC_FOLD ? gemm_dec_tile<dec_m128, DEC_FOLD>
                                       : gemm_dec_tile<dec_m128, DEC_ONE>,
                    g, dec_m128::NT,
                    mode == DEC_FOLD ? dec_tile_smem<dec_m128, DEC_FOLD>() : dec_m128::SMEM, a, st);
}
