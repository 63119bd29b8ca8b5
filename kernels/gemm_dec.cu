/* gemm_dec.cu — k_gemm_dec, the bf16 GEMM of decode rows: K in fixed segments summed in a
 * fixed order (a row's bits do not depend on the call's T; see the section below), split
 * across persistent blocks, its split sums left to the consumer where it takes them (lazy),
 * with the SwiGLU made inside the down projection at small T (k_gemm_dec_swiglu); mma.sync up
 * to 16 rows, wgmma above (cp.async or TMA fed). Entry points: gemm.h's k_gemm_dec*. */
#include "gemm.h"

#include "k_common.cuh"
#include "k_dec_part.cuh"
#include "k_gemm_frag.cuh"
#include "k_mma.cuh"
#include "k_tma.cuh"

#include <cudaTypedefs.h>
#include <stdint.h>
#ifdef NS_DEC_TRACE
#include <stdio.h>
#include <stdlib.h>
#endif

/* ---- k_gemm_dec: K in fixed segments, for decode rows ----------------------------------------
 * Each output element: K cut into segments of S = k_gemm_dec_seg(N, K) values; a segment is
 * an mma chain from zero, 16 values of k a step, ascending (warp_k16's mma.sync up to
 * DEC_WG_T rows, wg_k16's wgmma above: on an H200 the two give the same bits, which
 * gpu_kernels' row-invariance checks hold them to); the segment sums are
 * added in segment order onto segment 0's; then the bias. Small T splits the segments over
 * blocks (fp32 partial sums in the workspace, summed in order by the last block to finish a
 * tile), larger T lets a block run every segment of its tile itself: the same operations
 * either way. The blocks are persistent: each takes work items (a tile, or a tile and one
 * segment) in turn and its cp.async pipeline runs on across items, so weights keep
 * streaming while a block switches item; a split call's blocks count their items' partial
 * sums done only after their last item, and the last block to count a tile sums it. */

/* Segments (k_gemm_dec_seg): a multiple of 128 from DEC_SEG_MIN, or all of K, whichever gives a
 * T = 1 call the fewest rounds of items over DEC_WAVE blocks weighted by the item's length plus
 * DEC_ITEM_COST values of k (what a block pays per item). A block's items all take the same
 * time, so items / DEC_WAVE rounded up is what the call takes; fewer, longer items measured
 * faster than many short ones at the same round count, and a tie in cost goes to the longer
 * segment (tinyllama-1.1b's down projection, N 2048 K 5632, when segments were powers of two:
 * 1024 rather than 256, 6 segments rather than 22, 1.176 -> 1.137-1.146 ms a batch-1 step on an
 * H200). Any multiple of 128, not only powers of two, lets the round be fuller or the item
 * shorter: tinyllama-1.1b's q|k|v, gate|up and down take 384, 768 and 768 (were 512, 512 and
 * 1024) and llama3-8b's down 3584 (4 equal segments, was 4096 with a last of 2048); on an H200
 * that took tinyllama-1.1b's batch-1 step from 1.014-1.020 to 0.974-0.985 ms, its batch-128 step
 * (ctx 512) from 2.61-2.63 to 2.53-2.54 and llama3-8b's batch-32 step from 6.04-6.06 to
 * 5.84-5.85 (bench/RESULTS.md). DEC_WAVE: the T <= 16 blocks a 132-SM H100 / H200 holds (2 a
 * multiprocessor); a constant so that S depends on N and K alone. DEC_UNITS: the most (tile,
 * segment) items a split call has. DEC_SPLIT_T: the largest T whose segments always go to
 * separate blocks (the partial sums move 4 T / S bytes, written then read, a byte of weights). */
enum { DEC_SEG_MIN = 256, DEC_WAVE = 264, DEC_ITEM_COST = 128, DEC_UNITS = 2048, DEC_SPLIT_T = 64 };
/* Up to DEC_SPLIT_WG_T rows a call splits too where its partial sums fit the workspace: with
 * 64 x 64 tiles, N = 4096 at 128 rows gives a whole call only 128 tiles for 132
 * multiprocessors. */
enum { DEC_SPLIT_WG_T = 128 };
/* ... except calls of at least DEC_WHOLE_NT 128-column tiles, which fill the multiprocessors
 * without the split: tinyllama-1.1b's gate|up (88 tiles), which then takes k_gemm_dec_gu, took
 * its batch-96 / batch-128 steps (context 512) from 2.212-2.229 to 2.161-2.174 ms and 2.508-2.538
 * to 2.476-2.482 on an H200. At 48 (llama3-8b's q|k|v whole too) its batch-128 step was slower,
 * 9.107 -> 9.242 ms; whole tiles for every call there, 9.107 -> 11.234 (bench/RESULTS.md). */
enum { DEC_WHOLE_NT = 64 };
/* Calls of more than DEC_WG_T rows take the wgmma shapes; from DEC_WG2_T to DEC_SPLIT_WG_T
 * rows the two-warpgroup one. On an H200 at 128 rows it took 67 / 31 / 676 us where the
 * one-warpgroup shape took 96 / 38 / 710 (llama3-8b down, o, LM head: S 4096, 1024, all of
 * K); with segments of 512 or 256 (qkv; tinyllama-1.1b's o and down) it was slower (58 against
 * 54 us, llama3-8b qkv) until it ran on TMA: then the 128 x 128 shape for those calls too took
 * a llama3-8b batch-128 step (context 512) from 10.66 to 10.20 ms and a llama3.2-1b batch-128
 * step from 2.32 to 2.21 ms (bench/RESULTS.md). At 256 rows (whole tiles, one block a
 * multiprocessor) the 64 x 64 shape is the faster. */
enum { DEC_WG_T = 16, DEC_WG2_T = 64 };
/* The 64 x 64 shape runs on TMA (where the driver maps the operands) except for split calls
 * of up to DEC_TMA_SPLIT_T rows: on an H200 at 32 rows those took a llama3-8b step from 6.22
 * to 6.62 ms on TMA, while its whole-tile calls at 32 rows (llama3.2-1b's gate_up and LM head:
 * a step 1.69 -> 1.46 ms) and every call of 33-64 rows (llama3-8b batch 64: 7.38 -> 6.45 ms)
 * were faster on TMA (bench/RESULTS.md). */
enum { DEC_TMA_SPLIT_T = 32 };
/* From DEC_TMA_SPLIT_T + 1 to DEC_SPLIT_T rows, calls of at least DEC_WHOLE_MID_NT 64-column
 * tiles (a wave of them) run whole tiles, not split: llama3-8b's gate|up (448 tiles) and
 * tinyllama-1.1b's (176), which then take k_gemm_dec_gu. On an H200 that took llama3-8b's
 * batch-48 / batch-64 steps (context 128) from 5.888 to 5.704-5.740 ms and 6.274-6.285 to
 * 5.958-5.965, batch 64 at context 512 from 7.308-7.316 to 7.042-7.056, tinyllama-1.1b's batch 64
 * from 1.508-1.510 to 1.479-1.494; at 24 and 32 rows (split calls there run on cp.async) the
 * same made llama3-8b 3-9% slower, and at 96 tiles (its q|k|v whole too) it gained less
 * (bench/RESULTS.md). */
enum { DEC_WHOLE_MID_NT = 132 };
/* From DEC_WG_T + 1 to DEC_TMA_SPLIT_T rows the same rule holds for calls of K up to
 * DEC_WHOLE_LOW_K: tinyllama-1.1b's gate|up (176 tiles of K 2048) then runs whole tiles with
 * the SwiGLU in their store, which on an H200 took its batch-32 step (context 128) from
 * 1.455-1.463 to 1.408-1.420 ms; llama3-8b's (K 4096) lost 3-9% so at 24 and 32 rows
 * (bench/RESULTS.md). */
enum { DEC_WHOLE_LOW_K = 2048 };
/* The workspace: DEC_CNT tile counters (uint32, zero between calls), then the partial sums
 * of each (tile, segment) item, BM x BN fp32 row-major, rows < T written. A split call has
 * two or more segments a tile and at most DEC_UNITS x DEC_PART_MAX floats of partial sums
 * (so at most DEC_UNITS items of 64 x 64 and DEC_UNITS / 2 tiles). DEC_COUNT_CHUNK: the
 * items a block counts at once after its last one. */
enum { DEC_CNT = DEC_UNITS / 2, DEC_PART_MAX = 64 * 64, DEC_COUNT_CHUNK = 64 };
/* Calls of up to DEC_PDL_T rows (DEC_PDL_TMA_T on the TMA kernel) are launched with
 * programmatic dependent launch (their first weight tiles are copied while the kernel before
 * finishes); larger ones are not. With the cp.async kernels, PDL above 64 rows took a
 * llama3-8b batch-128 step from 21.0 to 26.2 ms on an H200; with 65-128 rows on the TMA
 * kernel it took that step (context 512) from 10.16 to 9.93 ms, tinyllama-1.1b's from 2.43 to
 * 2.27 and llama3.2-1b's from 2.24 to 2.12 (bench/RESULTS.md). */
enum { DEC_PDL_T = 64, DEC_PDL_TMA_T = 128 };
#define DEC_CNT_BYTES ((size_t)DEC_CNT * sizeof(unsigned))

/* A launch shape: tile BM x BN, BK values of k a stage, WM x WN warps, ST stages, and the
 * blocks a multiprocessor should hold (caps the registers). */
template <int BM_, int BN_, int BK_, int WM_, int WN_, int ST_, int MINB_, bool WG_ = false>
struct dec_shape {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, ST = ST_, MINB = MINB_;
  static constexpr bool WG = WG_;
  static constexpr int NT = WM * WN * 32, LDS = WG ? BK : BK + 8;
  static constexpr size_t SMEM = (size_t)ST * (BM + BN) * LDS * sizeof(bf16) + (WG ? 1024 : 0);
  /* whole tiles of the m64n128 shape keep the finished segments' sum in shared memory (a
   * thread's 64 values, NT apart) where it fits: in registers beside the accumulators they
   * spilled */
  static constexpr bool TOT_SMEM = WG && BN >= 112 && SMEM + BM * BN * 4 <= 227 * 1024;
  static constexpr size_t SMEM_TILE = SMEM + (TOT_SMEM ? (size_t)BM * BN * sizeof(float) : 0);
};
/* the dynamic shared memory of shape SH's split or whole-tile kernel */
template <class SH, bool SPLIT> static constexpr size_t dec_smem() {
  return SPLIT ? SH::SMEM : SH::SMEM_TILE;
}
/* T <= DEC_WG_T: mma.sync, 87 KB, 2 blocks a multiprocessor, 3 stages of 16 KB of weights in
 * flight each (the mma.sync shapes of 32 and 64 rows this replaced: batch 32 and 64 steps
 * 11% and 29% slower on llama3-8b). A whole-tile call's later items 8 columns narrower, so that
 * the last round of llama3-8b's LM head at one row leaves no block idle, took that step 28 us
 * slower on an H100: a narrower item has as many k tiles as a wide one and takes as long
 * (bench/RESULTS.md). */
typedef dec_shape<16, 64, 128, 1, 4, 4, 2> dec_t16;
/* T > DEC_WG_T: wgmma on 128-byte swizzled tiles, a warpgroup 64 rows of the tile. One
 * warpgroup (m64n64k16), 65 KB, 3 a multiprocessor; or two (m64n128k16) over a 128 x 128
 * tile, 161 KB, 1: weights are read from L2 once for 128 rows, and x once per 128 columns
 * (64 x 64 tiles move 4 bytes from L2 a byte of weights at 128 rows). Both run on
 * gemm_dec_tma_kernel (below) where the driver maps the operands for TMA. */
typedef dec_shape<64, 64, 64, 4, 1, 4, 3, true> dec_twg;
typedef dec_shape<128, 128, 64, 8, 1, 5, 1, true> dec_twg2;
/* The same over 128 x 112 tiles (m64n112k16), for whole-tile calls whose 128-column tiles
 * leave the last wave of blocks (one a multiprocessor) emptier than 112-column ones do:
 * llama3-8b's gate_up at 65-128 rows is 224 tiles of 128 columns for 132 multiprocessors
 * (85% of two waves) or 256 of 112 (97%). */
typedef dec_shape<128, 112, 64, 8, 1, 5, 1, true> dec_twg2n;
/* Four warpgroups over 128 x 224 tiles (2 along M, 2 along N, m64n112k16 each), whole tiles
 * on TMA only, for whole-tile calls of 65-128 rows whose waves are at least as full with them
 * (dec_plan_of): weight boxes of 224 rows, 28 KB a stage, stream nearer the copy rate than
 * 112 or 128 rows a block (bench/bench_tma_read.cu, bench/RESULTS.md). */
typedef dec_shape<128, 224, 64, 8, 2, 4, 1, true> dec_twg4;
/* blocks of the 128-row whole-tile shapes an H100 / H200 holds at once (one a multiprocessor,
 * 132 multiprocessors): a constant, so that the choice depends on N alone */
enum { DEC_WG2_WAVE = 132 };
static_assert(dec_t16::BM * dec_t16::BN <= DEC_PART_MAX &&
                  dec_twg::BM * dec_twg::BN == DEC_PART_MAX && DEC_SPLIT_T <= dec_twg::BM &&
                  DEC_WG_T == dec_t16::BM && DEC_WG2_T == dec_twg::BM,
              "T <= DEC_SPLIT_T: one row of 64 x 64 tiles or smaller");

/* One launch's work, the same for every block. */
struct dec_args {
  void *y;
  const bf16 *x, *w, *bias;
  float *part;   /* split: partial sums [tile][segment][BM][BN] */
  unsigned *cnt; /* split: segments done per tile */
  int y_f32, ldy, ldx, T, N, K;
  int S, nseg;  /* segment length, segments */
  int mtn, ntn; /* tiles over T, over N */
  int items;    /* mtn * ntn (* nseg when split) */
  int gu;       /* k_gemm_dec_gu: I, where w's up rows start (N is I, a tile BN / 2 columns of
                 * the gate's and the same of the up's); else 0 */
#ifdef NS_DEC_TRACE
  unsigned seq; /* the call's number (dec_trace) */
#endif
};

/* k_gemm_dec_swiglu's x: SiLU(gate) * up of the lazy gate|up product gp (gate columns c < K,
 * up columns K + c), or of gu as stored, for gemm_dec_kernel<.., SW> (other launches pass it
 * empty). SW: how the kernel has its x. */
enum { DEC_SW_NONE, DEC_SW_PART, DEC_SW_STORED };
struct dec_sw_args {
  k_dec_part gp;  /* gp.part NULL: gate|up as stored, gu */
  const bf16 *gu; /* [T][2 K] */
  bf16 *x;        /* x's rows [T][K], written by the items of the first column tile */
};
/* T x (an item's k range) values of x a k_gemm_dec_swiglu block makes at once: one vector
 * of 8 a thread, so that every partial sum it reads is in flight at once. On an H200 this took
 * a tinyllama-1.1b batch-1 step (down projection: segments of 1024) from 1.148 to 1.100 ms;
 * with up to 8192 (several vectors a thread, one after another) batches 2, 4 and 8 went from
 * 1.15, 1.18 and 1.22 to 1.16, 1.25 and 1.46 ms and llama3-8b's batch 1 and 2 (segments of
 * 4096) from 4.79 to 4.87 and 5.09 (bench/RESULTS.md). */
enum { DEC_SW_MAX = 1024 };

#ifdef NS_DEC_TRACE
/* A per-block timeline of k_gemm_dec, built with -DNS_DEC_TRACE (cmake
 * -DNANOSERVE_DEC_TRACE=ON) for profiling only: thread 0 of every block stores the global
 * timer at DEC_EV_* points, and the records and the calls' shapes go to the file named by
 * $NS_DEC_TRACE at exit (tests/gpu/dec_trace.py reads it). Fields added to dec_args change
 * the kernels' code (registers), so a traced build's times are close to, not equal to, a
 * plain build's. */
enum { DEC_EV_ENTRY, DEC_EV_ISSUED, DEC_EV_WAITED, DEC_EV_ITEM, DEC_EV_COUNTED, DEC_EV_EXIT };
struct dec_trace_rec {
  unsigned long long ts;
  unsigned seq;
  unsigned short block;
  unsigned char ev, sm;
};
__device__ dec_trace_rec *g_dtr;
__device__ unsigned g_dtr_n, g_dtr_cap;
__device__ __forceinline__ void dec_mark(unsigned seq, int ev) {
  if (threadIdx.x || !g_dtr) return;
  const unsigned i = atomicAdd(&g_dtr_n, 1u);
  if (i >= g_dtr_cap) return;
  unsigned long long t;
  unsigned sm;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  g_dtr[i] = {t, seq, (unsigned short)blockIdx.x, (unsigned char)ev, (unsigned char)sm};
}
#define DEC_MARK(ev) dec_mark(a.seq, ev)
#else
#define DEC_MARK(ev) ((void)0)
#endif

__device__ __forceinline__ void dec_store(const dec_args &a, int gm, int gn, float v) {
  if (a.bias) v += __bfloat162float(a.bias[gn]);
  if (a.y_f32)
    ((float *)a.y)[(size_t)gm * a.ldy + gn] = v;
  else
    ((bf16 *)a.y)[(size_t)gm * a.ldy + gn] = __float2bfloat16(v);
}

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

/* Item it of a call of tile BM x BN: tile t (over T fastest), its origin (m0, n0) and k
 * range [kb, ke) (SPLIT: one segment; else all of K). */
template <int BM, int BN, bool SPLIT>
__device__ __forceinline__ void dec_item(const dec_args &a, int it, int &t, int &m0, int &n0,
                                         int &kb, int &ke) {
  int seg = 0;
  t = it;
  if (SPLIT) t = it / a.nseg, seg = it - t * a.nseg;
  m0 = (t % a.mtn) * BM, n0 = (t / a.mtn) * BN;
  kb = seg * a.S;
  ke = SPLIT ? min(kb + a.S, a.K) : a.K;
}

/* A finished segment folded into the tile's sum (the first segment starts it), acc zeroed
 * for the next; tot(i, j, e) names a sum value (registers or shared memory). */
template <int FM, int FN, class TOT>
__device__ __forceinline__ void dec_fold(float (&acc)[FM][FN][4], bool first, TOT tot) {
#pragma unroll
  for (int i = 0; i < FM; i++)
#pragma unroll
    for (int j = 0; j < FN; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        tot(i, j, e) = first ? acc[i][j][e] : tot(i, j, e) + acc[i][j][e];
        acc[i][j][e] = 0.0f;
      }
}

/* A thread's values of a tile at origin (m0, n0): m16n8 fragment (i, j) at rows r0 + 16 i
 * (c0, c1) and + 8 (c2, c3), columns c0 + 8 j, + 1; into y (whole tiles, val(i, j, e)) or
 * into the tile's partial sums p (BN floats a row). Rows past T, columns past N: nothing. */
template <int FM, int FN, class VAL>
__device__ __forceinline__ void dec_store_tile(const dec_args &a, int m0, int n0, int r0, int c0,
                                               VAL val) {
#pragma unroll
  for (int i = 0; i < FM; i++)
#pragma unroll
    for (int j = 0; j < FN; j++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int gm = m0 + r0 + i * 16 + h * 8, gn = n0 + c0 + j * 8;
        if (gm >= a.T) continue;
#pragma unroll
        for (int e = 0; e < 2; e++)
          if (gn + e < a.N) dec_store(a, gm, gn + e, val(i, j, h * 2 + e));
      }
}
/* k_gemm_dec_gu's store: a thread's value of column c of the tile's gate half and of the same
 * column of its up half (fragments j and j + FN / 2), each as dec_store leaves it (+ bias,
 * bf16), then SiLU(gate) * up as k_swiglu makes it, into y's column n0 + c (< N, which is I). */
template <int FN, class VAL>
__device__ __forceinline__ void dec_store_gu(const dec_args &a, int m0, int n0, int r0, int c0,
                                             VAL val) {
  constexpr int FH = FN / 2;
#pragma unroll
  for (int j = 0; j < FH; j++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int gm = m0 + r0 + h * 8, gn = n0 + c0 + j * 8;
      if (gm >= a.T) continue;
#pragma unroll
      for (int e = 0; e < 2; e++) {
        if (gn + e >= a.N) continue;
        float g = val(0, j, h * 2 + e), u = val(0, j + FH, h * 2 + e);
        if (a.bias)
          g += __bfloat162float(a.bias[gn + e]), u += __bfloat162float(a.bias[a.gu + gn + e]);
        ((bf16 *)a.y)[(size_t)gm * a.ldy + gn + e] =
            __float2bfloat16(k_silu_mul(k_rbf(g), k_rbf(u)));
      }
    }
}

template <int FM, int FN, int BN>
__device__ __forceinline__ void dec_store_part(const dec_args &a, float *p, int m0, int r0, int c0,
                                               const float (&acc)[FM][FN][4]) {
#pragma unroll
  for (int i = 0; i < FM; i++)
#pragma unroll
    for (int j = 0; j < FN; j++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = r0 + i * 16 + h * 8, c = c0 + j * 8;
        if (m0 + r < a.T)
          *reinterpret_cast<float2 *>(p + r * BN + c) =
              make_float2(acc[i][j][h * 2], acc[i][j][h * 2 + 1]);
      }
}

/* k_gemm_dec_swiglu: an item's x, rows < T, k in [kb, ke), into xs (row pitch ldxs; zeros for
 * the 8 values past ke - kb, which a last k step of 8 reads): SiLU(gate) * up as bf16, what
 * k_swiglu_part stores, from the partial sums of gate and up, all in flight at once; and to
 * x in memory (store: the item's tile is the first of its row of tiles, so each value once).
 * STORED: gate|up as stored (sw.gu) instead of its partial sums. */
template <bool STORED>
__device__ __forceinline__ void dec_sw_rows(const dec_args &a, const dec_sw_args &sw, int kb,
                                            int ke, bf16 *xs, int ldxs, bool store) {
  const int n8 = (ke - kb) / 8;
  for (int i = threadIdx.x; i < a.T * n8; i += blockDim.x) {
    const int r = i / n8, c = kb + (i - r * n8) * 8;
    const int cols[2] = {c, a.K + c}; /* gate's, up's */
    float gu[2][8], o[8];
    if constexpr (STORED) {
      const bf16 *row = sw.gu + (size_t)r * 2 * a.K; /* as k_swiglu reads it */
      k_load8(gu[0], row + c), k_load8(gu[1], row + a.K + c);
    } else {
      k_dec_part_getn<2>(sw.gp, r, cols, gu);
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
      o[j] = k_silu_mul(gu[0][j], gu[1][j]);
    k_store8(xs + (size_t)r * ldxs + (c - kb), o);
    if (store) k_store8(sw.x + (size_t)r * a.K + c, o);
  }
  if ((int)threadIdx.x < a.T)
    *reinterpret_cast<uint4 *>(xs + (size_t)threadIdx.x * ldxs + (ke - kb)) =
        make_uint4(0, 0, 0, 0);
}

/* SPLIT: an item is (tile, segment), its sum goes to the workspace; else an item is a tile
 * over all of K, the segment sums folded into tot as they complete. Items: segment fastest
 * (a tile's segments run at the same time, its partials are summed while still in L2), then
 * the tile over T (blocks at the same time share w tiles in L2). SW DEC_SW_PART or
 * DEC_SW_STORED (k_gemm_dec_swiglu from gate|up's split sums or as stored; the T <= 16 shape):
 * x is not copied from memory but made by the block at each item's start, its k range of
 * every row (dec_sw_rows), and read from there. */
template <class SH, bool SPLIT, bool LAZY = false, int SW = DEC_SW_NONE>
static __global__ void __launch_bounds__(SH::NT, SH::MINB)
    gemm_dec_kernel(const dec_args a, const dec_sw_args sw) {
  constexpr int BM = SH::BM, BN = SH::BN, BK = SH::BK, WN = SH::WN, ST = SH::ST, NT = SH::NT;
  constexpr int LDS = SH::LDS, TM = BM / SH::WM, TN = BN / WN, FM = TM / 16, FN = TN / 8;
  constexpr int CH = BK / 8;
  static_assert(FM >= 1 && FN >= 1 && BK % 16 == 0 && 128 % BK == 0 && (BM * CH) % NT == 0 &&
                    BN % 4 == 0,
                "tile");
  /* wgmma: warpgroups of 64 rows, a warp's 16 rows by all BN columns, 128-byte rows */
  static_assert(!SH::WG || (BM == 16 * SH::WM && BM % 64 == 0 &&
                            (BN == 64 || BN == 112 || BN == 128) && BK == 64 && WN == 1),
                "wgmma");
  static_assert(!SW || (!SH::WG && FM == 1 && SH::WM == 1), "swiglu: the T <= 16 shape");
  extern __shared__ __align__(16) bf16 gsm_raw[];
  bf16 *const gsm = SH::WG ? (bf16 *)(((uintptr_t)gsm_raw + 1023) & ~(uintptr_t)1023) : gsm_raw;
  /* where value c (a multiple of 8) of tile row r goes */
  auto at = [&](bf16 *tile, int r, int c) {
    return SH::WG ? tile + r * LDS + (((c >> 3) ^ (r & 7)) << 3) : tile + r * LDS + c;
  };
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WN, wn = warp % WN;

  /* item it: tile origin (m0, n0), k range [kb, ke) */
  auto item = [&](int it, int &m0, int &n0, int &kb, int &ke) {
    int t;
    dec_item<BM, BN, SPLIT>(a, it, t, m0, n0, kb, ke);
  };

  /* LEAN (the mma.sync shape, T <= 16): its blocks are bound by instruction issue, not by
   * memory (ncu on an H200, tinyllama-1.1b batch 1: ~5 cycles a warp between instructions, ~500
   * instructions a warp a k tile, most of them bounds and addresses). So a whole k tile (inside
   * the range, every weight row < N) is copied from pointers the cursor keeps a thread (its
   * first chunk of x and of w, stepped a k tile at a time) with no per-chunk bounds, x's rows
   * >= T are not copied at all (zeroed once below; m0 is 0 where T <= BM), and its math is
   * warp_tile's; other tiles take the bounded steps. The same mma in the same order: a
   * tinyllama-1.1b batch-1 step went from 1.104 to 1.004-1.014 ms, llama3-8b's from 4.75 to
   * 4.44 (bench/RESULTS.md). */
  constexpr bool LEAN = !SH::WG && (BN * CH) % NT == 0 && (BM * CH) % NT == 0;
  constexpr int RS = NT / CH; /* rows between a thread's chunks */
  const int lr = tid / CH, lc = (tid % CH) * 8;
  /* The loader runs ST - 1 k tiles ahead of the math through this block's items (a cursor:
   * item, k tile). Rings: x [ST][BM][LDS], then w [ST][BN][LDS]. (Weights copied further
   * ahead than x were slower on an H200, bench/RESULTS.md.) */
  struct cursor {
    int it, kt, nk, m0, n0, kb, ke;
    bool wfull;          /* LEAN: every weight row of the tile < N */
    const bf16 *wp, *xp; /* LEAN: this thread's first chunk of w, of x, at k tile kt */
  };
  auto cur_at = [&](cursor &c, int it) {
    c.it = it, c.kt = 0, c.nk = 0;
    if (it < a.items) {
      item(it, c.m0, c.n0, c.kb, c.ke), c.nk = (c.ke - c.kb + BK - 1) / BK;
      if constexpr (LEAN) {
        c.wfull = c.n0 + BN <= a.N;
        c.wp = a.w + (size_t)(c.n0 + lr) * a.K + c.kb + lc;
        c.xp = a.x + (size_t)lr * a.ldx + c.kb + lc; /* rows from m0 = 0 (T <= BM) */
      }
    }
  };
  auto cur_next = [&](cursor &c) {
    if (++c.kt == c.nk) {
      cur_at(c, c.it + (int)gridDim.x);
    } else if constexpr (LEAN) {
      c.wp += BK, c.xp += BK;
    }
  };
  /* k tile kt of the cursor's item lies inside its range */
  auto kfull = [&](const cursor &u) { return u.kb + (u.kt + 1) * BK <= u.ke; };
  cursor cw;
  cur_at(cw, blockIdx.x);
  cursor cx = cw; /* the prologue's x copies, after the weights' */
  /* SW: no x ring; after the weights' ring an item's x, [T][ldxs] (dec_sw_rows) */
  bf16 *const xring = gsm, *const wring = gsm + (SW ? 0 : ST * BM * LDS);
  bf16 *const xs = wring + ST * BN * LDS;
  const int ldxs = (SPLIT ? a.S : a.K) + 8;
  const uint64_t pol = l2_evict_first();
  /* the next k tile's x, or its w; chunks of 8 past ke are zero-filled */
  auto load_x = [&](const cursor &u, int stage) {
    if (u.it >= a.items) return;
    bf16 *sa = xring + stage * BM * LDS;
    if constexpr (LEAN) {
      if (a.T <= BM && kfull(u)) {
#pragma unroll
        for (int q = 0; q < BM * CH / NT; q++)
          if (lr + q * RS < a.T)
            cp_async16(sa + (lr + q * RS) * LDS + lc, u.xp + (size_t)q * RS * a.ldx, 16);
        return;
      }
    }
    const int k0 = u.kb + u.kt * BK;
#pragma unroll
    for (int q = 0; q < BM * CH / NT; q++) {
      const int i = tid + q * NT, r = i / CH, c = (i % CH) * 8, gm = u.m0 + r;
      const bool ok = gm < a.T && k0 + c < u.ke;
      cp_async16(at(sa, r, c), ok ? a.x + (size_t)gm * a.ldx + k0 + c : a.x, ok ? 16 : 0);
    }
  };
  auto load_w = [&](const cursor &u, int stage) {
    if (u.it >= a.items) return;
    bf16 *sb = wring + stage * BN * LDS;
    if constexpr (LEAN) {
      if (u.wfull && kfull(u)) {
        const size_t rs = (size_t)RS * a.K;
#pragma unroll
        for (int q = 0; q < BN * CH / NT; q++)
          cp_async16_hint(sb + (lr + q * RS) * LDS + lc, u.wp + q * rs, 16, pol);
        return;
      }
    }
    const int k0 = u.kb + u.kt * BK;
#pragma unroll
    for (int q = 0; q < (BN * CH + NT - 1) / NT; q++) {
      const int i = tid + q * NT, r = i / CH, c = (i % CH) * 8, gn = u.n0 + r;
      if ((BN * CH) % NT && i >= BN * CH) break; /* a last round of fewer chunks than threads */
      const bool ok = gn < a.N && k0 + c < u.ke;
      cp_async16_hint(at(sb, r, c), ok ? a.w + (size_t)gn * a.K + k0 + c : a.w, ok ? 16 : 0, pol);
    }
  };

  constexpr bool TS = !SPLIT && SH::TOT_SMEM;
  float acc[FM][FN][4], tot[TS ? 1 : FM][TS ? 1 : FN][4];
  /* TS: the sum of the finished segments, value (i, j, e) of thread tid at tot_s[.. * NT + tid] */
  float *const tot_s = reinterpret_cast<float *>(wring + ST * BN * LDS);
  auto tot_at = [&](int i, int j, int e) -> float & {
    if constexpr (TS)
      return tot_s[((i * FN + j) * 4 + e) * NT + tid];
    else
      return tot[i][j][e];
  };
  /* LEAN: this lane's ldmatrix addresses in stage 0 (warp_tile): of w, and of x in its ring
   * (a_lane) or, for SW, in xs (a_sw), where rows past T read row T - 1 (their sums are never
   * stored); x's rows >= T zero in every stage */
  const uint32_t b_lane =
      (uint32_t)__cvta_generic_to_shared(wring + wn * TN * LDS) + warp_b_lane<LDS>(lane);
  const uint32_t a_lane =
      SW ? 0u : (uint32_t)__cvta_generic_to_shared(xring + wm * TM * LDS) + warp_a_lane<LDS>(lane);
  const uint32_t a_sw = !SW ? 0u
                            : (uint32_t)__cvta_generic_to_shared(
                                  xs + (size_t)min(lane & 15, a.T - 1) * ldxs + (lane >> 4) * 8);
  if constexpr (LEAN && !SW)
    for (int i = tid; i < ST * BM * (LDS / 8); i += NT) {
      const int st = i / (BM * (LDS / 8)), r = i / (LDS / 8) % BM, c = i % (LDS / 8) * 8;
      if (r >= a.T)
        *reinterpret_cast<uint4 *>(xring + (st * BM + r) * LDS + c) = make_uint4(0, 0, 0, 0);
    }
  /* the first ST - 1 k tiles' weights (constant) before waiting for the kernel before
   * (programmatic dependent launch; a no-op without), their x after; one copy group for them
   * all, then empty ones so that the loop's wait counts stay as one group a k tile */
  DEC_MARK(DEC_EV_ENTRY);
#pragma unroll
  for (int s = 0; s < ST - 1; s++)
    load_w(cw, s), cur_next(cw);
  DEC_MARK(DEC_EV_ISSUED);
  if (a.T <= K_PDL_EARLY_ROWS) k_pdl_trigger();
  k_pdl_wait();
  DEC_MARK(DEC_EV_WAITED);
  if (!SW)
#pragma unroll
    for (int s = 0; s < ST - 1; s++)
      load_x(cx, s), cur_next(cx);
#pragma unroll
  for (int s = 0; s < ST - 1; s++)
    cp_async_commit();
  const int tps = a.S / BK; /* k tiles a segment */
  int stage = 0;            /* flat k tile j of the block sits in stage j % ST */
  for (int it = blockIdx.x; it < a.items; it += gridDim.x) {
    int m0, n0, kb, ke;
    item(it, m0, n0, kb, ke);
    const int nk = (ke - kb + BK - 1) / BK;
    acc_zero(acc);
    if constexpr (SW) {
      __syncthreads(); /* the previous item's x is read */
      dec_sw_rows<SW == DEC_SW_STORED>(a, sw, kb, ke, xs, ldxs,
                                       n0 == 0); /* the first k tile's barrier orders it */
    }
    for (int kt = 0, left = tps; kt < nk; kt++) {
      cp_async_wait<ST - 2>();
      if (SH::WG) fence_proxy_async();
      __syncthreads(); /* this k tile landed for every thread; the previous one is consumed */
      if (!SW) load_x(cw, stage == 0 ? ST - 1 : stage - 1);
      load_w(cw, stage == 0 ? ST - 1 : stage - 1);
      cur_next(cw);
      cp_async_commit();
      const bf16 *sa = xring + stage * BM * LDS, *sb = wring + stage * BN * LDS;
      const int k0 = kb + kt * BK;
      if constexpr (SH::WG) {
        /* the warpgroup's rows; the accumulators are read below, the tile refilled after the
         * next barrier */
        wg_tile<FN, BK>(acc[0], sa + (warp >> 2) * 64 * LDS, sb, k0, ke);
      } else if (LEAN && k0 + BK <= ke) {
        const uint32_t b = b_lane + (uint32_t)(stage * BN * LDS * 2);
        if constexpr (SW)
          warp_tile<FM, FN, LDS, BK>(acc, a_sw + (uint32_t)((k0 - kb) * 2), b);
        else
          warp_tile<FM, FN, LDS, BK>(acc, a_lane + (uint32_t)(stage * BM * LDS * 2), b);
      } else if constexpr (SW) {
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16)
          if (k0 + kk < ke)
            warp_k16_rows<FN, LDS>(acc, a_sw + (uint32_t)((k0 - kb + kk) * 2),
                                   sb + wn * TN * LDS + kk, lane);
      } else {
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) /* no step past the range: every shape, same chain */
          if (k0 + kk < ke)
            warp_k16<FM, FN, LDS>(acc, sa + wm * TM * LDS + kk, sb + wn * TN * LDS + kk, lane);
      }
      stage = stage == ST - 1 ? 0 : stage + 1;
      if (!SPLIT && (--left == 0 || kt == nk - 1)) { /* a segment is complete */
        dec_fold<FM, FN>(acc, kt < tps, tot_at);
        left = tps;
      }
    }

    /* the warp's fragments: rows from wm * TM + lane / 4, columns from wn * TN + 2 (lane % 4) */
    const int r0 = wm * TM + (lane >> 2), c0 = wn * TN + (lane & 3) * 2;
    if (!SPLIT) {
      dec_store_tile<FM, FN>(a, m0, n0, r0, c0, tot_at);
      DEC_MARK(DEC_EV_ITEM);
      continue;
    }
    const int t = it / a.nseg, seg = it - t * a.nseg;
    dec_store_part<FM, FN, BN>(a, a.part + ((size_t)t * a.nseg + seg) * (BM * BN), m0, r0, c0, acc);
    DEC_MARK(DEC_EV_ITEM);
  }
  if (SPLIT && !LAZY) { /* LAZY (k_gemm_dec_lazy): the consumer sums the partials */
    /* every item's partials are written: count them (thread j the block's item j, a chunk at
     * a time; the barrier orders the block's partials before the counts, each counting
     * thread's fence makes them visible to the device first), then sum the tiles whose last
     * segment this block counted (fence after the count, barrier, reads through L2) */
    __shared__ unsigned char s_last[DEC_COUNT_CHUNK];
    const int mine = (a.items - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;
    for (int j0 = 0; j0 < mine; j0 += DEC_COUNT_CHUNK) {
      const int nj = min(DEC_COUNT_CHUNK, mine - j0);
      __syncthreads();
      for (int j = tid; j < nj; j += NT) {
        const int t = ((int)blockIdx.x + (j0 + j) * (int)gridDim.x) / a.nseg;
        __threadfence();
        const int last = atomicAdd(a.cnt + t, 1u) == (unsigned)a.nseg - 1;
        if (last) {
          a.cnt[t] = 0; /* every segment has counted: zero for the next call */
          __threadfence();
        }
        s_last[j] = (unsigned char)last;
      }
      __syncthreads();
      DEC_MARK(DEC_EV_COUNTED);
      for (int j = 0; j < nj; j++)
        if (s_last[j]) {
          const int t = ((int)blockIdx.x + (j0 + j) * (int)gridDim.x) / a.nseg;
          dec_reduce<SH>(a, t, (t % a.mtn) * BM, (t / a.mtn) * BN);
        }
    }
  }
  DEC_MARK(DEC_EV_EXIT);
  if (a.T > K_PDL_EARLY_ROWS)
    k_pdl_trigger(); /* the next kernel may start: it waits for this one */
  cp_async_wait<0>();
}

/* ---- the wgmma shapes fed by TMA ----------------------------------------------------------------
 * The same items, k steps and sums as gemm_dec_kernel<SH>, so the same bits; only the loads
 * differ. A producer warp issues every k tile's copies (cp.async.bulk.tensor, 128-byte
 * swizzle: the layout wg_desc reads) ST tiles ahead, counted on the stage's full barrier;
 * the consumers (one warpgroup, or two for dec_twg2) never wait for one another, only for a
 * stage's barrier, and tell the producer a stage is read through a named barrier.
 * gemm_dec_kernel<SH> (every thread copying its share with cp.async, a barrier each k tile)
 * serves where the driver has no cuTensorMapEncodeTiled (and for dec_twg's split calls of up
 * to DEC_TMA_SPLIT_T rows); on an H200 this kernel took llama3-8b's gate_up at 128 rows from
 * 126 to 87 us (bench/RESULTS.md). */
/* Shape SH's TMA kernel: ST stages (as many as the cp.async kernel's, so as many blocks a
 * multiprocessor), consumers SH::NT threads, then a producer warp. */
template <class SH> struct tma_cfg {
  /* shapes of four consumer warpgroups: a producer warpgroup (one warp of it copies), whose
   * registers go to the consumers (setmaxnreg: PREG and CREG a thread) */
  static constexpr bool WIDE = SH::WN > 1;
  static constexpr int PREG = 24, CREG = 112;
  /* and of their finished segments' sum, fragments from TOT_JR on in shared memory */
  static constexpr int TOT_JR = WIDE ? 9 : SH::BN / 8;
  static constexpr int ST = SH::ST, NT = SH::NT + (WIDE ? 128 : 32);
  static constexpr size_t STAGE = (size_t)(SH::BM + SH::BN) * SH::BK * 2;
  static constexpr size_t TOTS = (size_t)(SH::BN / SH::WN / 8 - TOT_JR) * 4 * SH::NT * 4;
  static constexpr size_t SMEM = ST * STAGE + 1024 + TOTS;
};

/* Named barriers: 1 + s, stage s read by every consumer (they arrive, the producer waits: no
 * consumer branches on a thread, which would serialise the wgmma); TMA_BAR_C, the consumers
 * alone. NT: the consumers' threads. */
enum { TMA_BAR_C = 15 };
template <int NT> __device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"((int)TMA_BAR_C), "n"(NT) : "memory");
}
template <int NT> __device__ __forceinline__ void stage_read(int s) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(1 + s), "n"(NT + 32) : "memory");
}
template <int NT> __device__ __forceinline__ void stage_wait_read(int s) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(1 + s), "n"(NT + 32) : "memory");
}

template <class SH, bool SPLIT, bool LAZY>
static __global__ void __launch_bounds__(tma_cfg<SH>::NT, SH::MINB)
    gemm_dec_tma_kernel(const dec_args a, const __grid_constant__ CUtensorMap mx,
                        const __grid_constant__ CUtensorMap mw) {
  constexpr int BM = SH::BM, BN = SH::BN, BK = SH::BK, ST = tma_cfg<SH>::ST;
  /* warpgroups: BM / 64 along M, WN along N, each over BN / WN columns */
  constexpr int WGM = BM / 64, WN = SH::WN, FN = BN / WN / 8;
  constexpr int CN = SH::NT; /* consumer threads */
  static_assert(SH::WG && BK == 64 && BM % 64 == 0 && ST + 1 < TMA_BAR_C, "TMA shape");
  static_assert(SH::WM == 4 * WGM && (WN == 1 || !SPLIT), "warpgroups over N: whole tiles only");
  extern __shared__ __align__(16) bf16 tsm_raw[];
  __shared__ uint64_t full[ST];
  __shared__ int s_last;
  bf16 *const sm = (bf16 *)(((uintptr_t)tsm_raw + 1023) & ~(uintptr_t)1023);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  auto item = [&](int it, int &t, int &m0, int &n0, int &kb, int &ke) {
    dec_item<BM, BN, SPLIT>(a, it, t, m0, n0, kb, ke);
  };
  /* the weight tile of the tile at n0: its BN rows, or (gu) the gate's BN / 2 rows from n0 / 2
   * and the up's from gu + n0 / 2 (boxes of BN / 2 rows), the same bytes */
  auto load_w = [&](bf16 *sb, int k0, int n0, uint64_t *bar, uint64_t pol) {
    if (a.gu) { /* per warpgroup column: its gate rows, then its up rows */
      constexpr int H = BN / WN / 2;
#pragma unroll
      for (int g = 0; g < WN; g++) {
        tma_load(sb + 2 * g * H * BK, &mw, k0, n0 / 2 + g * H, bar, pol);
        tma_load(sb + (2 * g + 1) * H * BK, &mw, k0, a.gu + n0 / 2 + g * H, bar, pol);
      }
    } else {
      tma_load(sb, &mw, k0, n0, bar, pol);
    }
  };

  if (tid == 0) {
    for (int s = 0; s < ST; s++)
      mbar_init(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  /* the producer warp: lane 0 copies every k tile, ST ahead. The warp's number goes through a
   * shuffle so that ptxas knows the branch splits whole warps (else it serialises the
   * consumers' wgmma) */
  if (__shfl_sync(0xffffffffu, warp, 0) >= CN / 32) {
    if constexpr (tma_cfg<SH>::WIDE) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(tma_cfg<SH>::PREG));
      if (__shfl_sync(0xffffffffu, warp, 0) > CN / 32) return;
    }
    const uint64_t pol = l2_evict_first();
    /* the first ST k tiles' weights (constant) before waiting for the kernel before
     * (programmatic dependent launch; a no-op without), x after */
    int it = blockIdx.x, t, m0, n0, kb, ke, k0 = 0;
    if (it < a.items) item(it, t, m0, n0, kb, ke), k0 = kb;
    for (int f = 0, pi = it, pk = k0; f < ST && pi < a.items; f++) {
      if (lane == 0) {
        int pt, pm, pn, pb, pe;
        item(pi, pt, pm, pn, pb, pe);
        bf16 *sb = sm + (size_t)f * (BM + BN) * BK + BM * BK;
        mbar_expect_tx(&full[f], (unsigned)tma_cfg<SH>::STAGE);
        load_w(sb, pk, pn, &full[f], pol);
        if ((pk += BK) >= pe)
          pi += gridDim.x, pk = pi < a.items ? (item(pi, pt, pm, pn, pb, pe), pb) : 0;
      }
    }
    if (lane == 0) {
      if (a.T <= K_PDL_EARLY_ROWS) k_pdl_trigger();
      k_pdl_wait();
    }
    __syncwarp();
    long f = 0; /* k tiles issued */
    for (; it < a.items; it += gridDim.x) {
      item(it, t, m0, n0, kb, ke);
      for (k0 = kb; k0 < ke; k0 += BK, f++) {
        const int s = (int)(f % ST);
        if (f >= ST) stage_wait_read<CN>(s); /* every consumer has read stage s */
        if (lane == 0) {
          bf16 *sa = sm + (size_t)s * (BM + BN) * BK, *sb = sa + BM * BK;
          if (f >= ST) {
            mbar_expect_tx(&full[s], (unsigned)tma_cfg<SH>::STAGE);
            load_w(sb, k0, n0, &full[s], pol);
          }
#pragma unroll
          for (int r = 0; r < BM; r += 64) /* x: 64 rows a box */
            tma_load(sa + r * BK, &mx, k0, m0 + r, &full[s]);
        }
        __syncwarp();
      }
    }
    for (long g = f < ST ? 0 : f - ST; g < f; g++) /* the last tiles' reads: every arrival */
      stage_wait_read<CN>((int)(g % ST));          /* on a stage barrier is waited for */
    return;
  }

  if constexpr (tma_cfg<SH>::WIDE)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(tma_cfg<SH>::CREG));
  float acc[1][FN][4], tot[1][FN][4];
  constexpr int JR = tma_cfg<SH>::TOT_JR;
  float *const stot = (float *)(sm + (size_t)ST * (BM + BN) * BK) + tid;
  auto tot_at = [&](int i, int j, int e) -> float & {
    return j < JR ? tot[i][j][e] : stot[((j - JR) * 4 + e) * CN];
  };
  const int tps = a.S / BK;
  long f = 0; /* k tiles consumed */
  for (int it = blockIdx.x; it < a.items; it += gridDim.x) {
    int t, m0, n0, kb, ke;
    item(it, t, m0, n0, kb, ke);
    const int nk = (ke - kb + BK - 1) / BK;
#pragma unroll
    for (int j = 0; j < FN; j++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        acc[0][j][e] = 0.0f;
    for (int kt = 0, left = tps; kt < nk; kt++, f++) {
      const int s = (int)(f % ST);
      mbar_wait(&full[s], (unsigned)((f / ST) & 1));
      const bf16 *sa = sm + (size_t)s * (BM + BN) * BK, *sb = sa + BM * BK;
      const int k0 = kb + kt * BK;
      /* the warpgroup's rows of x and of the weights */
      wg_tile<FN, BK>(acc[0], sa + (warp >> 2) % WGM * 64 * BK,
                      sb + (warp >> 2) / WGM * (BN / WN) * BK, k0, ke);
      stage_read<CN>(s);
      if (!SPLIT && (--left == 0 || kt == nk - 1)) { /* a segment is complete */
        dec_fold<1, FN>(acc, kt < tps, tot_at);
        left = tps;
      }
    }
    /* the warp's fragments: rows from 16 warp + lane / 4, columns from 2 (lane % 4) */
    const int gn = (warp >> 2) / WGM, r0 = ((warp >> 2) % WGM * 4 + (warp & 3)) * 16 + (lane >> 2),
              c0 = (lane & 3) * 2;
    if (!SPLIT) {
      if (a.gu)
        dec_store_gu<FN>(a, m0, n0 / 2 + gn * (BN / WN / 2), r0, c0, tot_at);
      else
        dec_store_tile<1, FN>(a, m0, n0 + gn * (BN / WN), r0, c0, tot_at);
      continue;
    }
    dec_store_part<1, FN, BN>(a, a.part + ((size_t)t * a.nseg + it % a.nseg) * (BM * BN), m0, r0,
                              c0, acc);
    if (LAZY) continue;   /* the consumer sums the partials */
    consumers_sync<CN>(); /* the block's partials before its count (gemm_dec_kernel's order) */
    if (tid == 0) {
      __threadfence();
      const int last = atomicAdd(a.cnt + t, 1u) == (unsigned)a.nseg - 1;
      if (last) {
        a.cnt[t] = 0;
        __threadfence();
      }
      s_last = last;
    }
    consumers_sync<CN>();
    if (s_last) dec_reduce<SH>(a, t, m0, n0);
  }
  if (a.T > K_PDL_EARLY_ROWS) k_pdl_trigger();
}

/* How a call runs: the segments, the launch shape, split or not, on the shape's TMA kernel
 * or its cp.async one (tma: where the driver maps the operands). */
struct dec_plan {
  int S, nseg, shape, split, bm, bn, tma;
  long mtn, ntn, items;
};

/* dec_tma: k_gemm_dec_use_tma. */
static int dec_tma = 1;
static PFN_cuTensorMapEncodeTiled_v12000 tma_encode_fn(void);

/* How full a whole-tile call's waves of DEC_WG2_WAVE blocks are with tiles bn columns wide. */
static double dec_wave_fill(int N, int bn) {
  const long tiles = (N + bn - 1) / bn, waves = (tiles + DEC_WG2_WAVE - 1) / DEC_WG2_WAVE;
  return (double)tiles / (double)(waves * DEC_WG2_WAVE);
}

/* The plan of a call. 128 x 224 tiles (TMA only) only where the driver has the tensor-map
 * encoder: k_gemm_supported's alignment is all TMA asks of the operands beyond it. */
static dec_plan dec_plan_of(int T, int N, int K) {
  dec_plan p;
  p.S = k_gemm_dec_seg(N, K);
  p.nseg = (K + p.S - 1) / p.S;
  p.shape = T <= DEC_WG_T ? 0 : T > DEC_WG2_T && T <= DEC_SPLIT_WG_T ? 2 : 1;
  static const int bm[4] = {dec_t16::BM, dec_twg::BM, dec_twg2::BM, dec_twg2n::BM};
  static const int bn[4] = {dec_t16::BN, dec_twg::BN, dec_twg2::BN, dec_twg2n::BN};
  p.bm = bm[p.shape], p.bn = bn[p.shape];
  p.mtn = (T + p.bm - 1) / p.bm, p.ntn = (N + p.bn - 1) / p.bn;
  /* whole tiles where there are enough of them (DEC_WHOLE_MID_NT, DEC_WHOLE_NT), below
   * DEC_TMA_SPLIT_T rows only for a short K (DEC_WHOLE_LOW_K) */
  const bool fill = T > DEC_SPLIT_T ? p.ntn >= DEC_WHOLE_NT
                                    : T > DEC_WG_T && p.ntn >= DEC_WHOLE_MID_NT &&
                                          (T > DEC_TMA_SPLIT_T || K <= DEC_WHOLE_LOW_K);
  p.split = p.nseg > 1 && !fill &&
            (T <= DEC_SPLIT_T || (T <= DEC_SPLIT_WG_T && p.mtn * p.ntn * p.nseg * p.bm * p.bn <=
                                                             (long)DEC_UNITS * DEC_PART_MAX));
  if (p.shape == 2 && !p.split && dec_wave_fill(N, dec_twg2n::BN) > dec_wave_fill(N, dec_twg2::BN))
    p.shape = 3, p.bn = dec_twg2n::BN, p.ntn = (N + p.bn - 1) / p.bn;
  if (p.shape >= 2 && !p.split && dec_tma && tma_encode_fn() &&
      dec_wave_fill(N, dec_twg4::BN) >= dec_wave_fill(N, p.bn))
    p.shape = 4, p.bn = dec_twg4::BN, p.ntn = (N + p.bn - 1) / p.bn;
  p.items = p.mtn * p.ntn * (p.split ? p.nseg : 1);
  p.tma = p.shape >= 2 || (p.shape == 1 && (!p.split || T > DEC_TMA_SPLIT_T));
  return p;
}

/* Blocks a multiprocessor holds, per launch shape and mode; 0 until dec_init. */
static int dec_occ[4][2];

/* A cp.async kernel's attributes (smem bytes of shared memory at most, all of it carved out
 * as shared memory), and (occ != NULL) the blocks of nt threads a multiprocessor holds. */
template <class KERN> static int dec_attr(KERN kern, size_t smem, int nt, int *occ) {
  NS_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  NS_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     (int)cudaSharedmemCarveoutMaxShared));
  if (!occ) return 0;
  NS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(occ, kern, nt, smem));
  return *occ > 0 ? 0 : NS_EUNSUPPORTED;
}

template <class SH, bool SPLIT, bool LAZY> static int dec_init_one(int *occ) {
  return dec_attr(gemm_dec_kernel<SH, SPLIT, LAZY, DEC_SW_NONE>, dec_smem<SH, SPLIT>(), SH::NT,
                  occ);
}

/* A shape's three kernels: whole tiles (occ[0]), split (occ[1]) and split LAZY, which runs
 * as its counting twin does (the same occupancy). */
template <class SH> static int dec_init_shape(int occ[2]) {
  int rc;
  if ((rc = dec_init_one<SH, false, false>(&occ[0])) ||
      (rc = dec_init_one<SH, true, false>(&occ[1])))
    return rc;
  return dec_init_one<SH, true, true>(nullptr);
}

/* Blocks a multiprocessor holds of shape SH's TMA kernels (whole tiles, split); 0 until
 * tma_init<SH>, which sets their shared memory. */
template <class SH> static int tma_occ[2];
template <class SH> static int tma_init(void) {
  int *occ = tma_occ<SH>;
  constexpr size_t SM = tma_cfg<SH>::SMEM;
  NS_CUDA_CHECK(cudaFuncSetAttribute(gemm_dec_tma_kernel<SH, false, false>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SM));
  NS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &occ[0], gemm_dec_tma_kernel<SH, false, false>, tma_cfg<SH>::NT, SM));
  if constexpr (SH::WN > 1) { /* whole tiles only */
    occ[1] = 0;
    return occ[0] > 0 ? 0 : NS_EUNSUPPORTED;
  } else {
    NS_CUDA_CHECK(cudaFuncSetAttribute(gemm_dec_tma_kernel<SH, true, false>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SM));
    NS_CUDA_CHECK(cudaFuncSetAttribute(gemm_dec_tma_kernel<SH, true, true>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SM));
    NS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &occ[1], gemm_dec_tma_kernel<SH, true, false>, tma_cfg<SH>::NT, SM));
    return occ[0] > 0 && occ[1] > 0 ? 0 : NS_EUNSUPPORTED;
  }
}

/* cuTensorMapEncodeTiled from the driver, or NULL where it has none. */
static PFN_cuTensorMapEncodeTiled_v12000 tma_encode_fn(void) {
  static PFN_cuTensorMapEncodeTiled_v12000 fn;
  static int tried;
  if (!tried) {
    tried = 1;
    void *f = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = (PFN_cuTensorMapEncodeTiled_v12000)f;
  }
  return fn;
}

/* A map of a bf16 matrix of `rows` rows of K values (row pitch ld values): boxes of 64 values
 * by box_rows rows, 128-byte swizzle, zeros outside. 0 or NS_EUNSUPPORTED. */
static int tma_map(CUtensorMap *m, const void *base, int rows, int K, int ld, int box_rows) {
  PFN_cuTensorMapEncodeTiled_v12000 fn = tma_encode_fn();
  if (!fn) return NS_EUNSUPPORTED;
  cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)rows}, stride[1] = {(cuuint64_t)ld * 2};
  cuuint32_t box[2] = {64, (cuuint32_t)box_rows}, es[2] = {1, 1};
  CUresult r = fn(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dim, stride,
                  box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : NS_EUNSUPPORTED;
}

extern "C" void k_gemm_dec_use_tma(int on) {
  dec_tma = on != 0;
}

/* k_gemm_dec_swiglu's shared memory: the T <= 16 shape's weight ring, then x's rows of an
 * item (dec_sw_rows); DEC_SW_SMEM the most any call takes. */
static size_t dec_sw_smem(int T, int len) {
  return (size_t)dec_t16::ST * dec_t16::BN * dec_t16::LDS * sizeof(bf16) +
         (size_t)T * (len + 8) * sizeof(bf16);
}
static const size_t DEC_SW_SMEM = dec_sw_smem(DEC_WG_T, DEC_SW_MAX / DEC_WG_T);
/* Blocks a multiprocessor holds of k_gemm_dec_swiglu's kernels (whole tiles, split lazy). */
static int dec_occ_sw[2][2]; /* [form: split sums, stored][whole tiles, split lazy] */

/* Every launch shape's attributes at the first call (outside a capture, as for k_gemm). */
static int dec_init(void) {
  static int done;
  if (done) return 0;
  int rc;
  if ((rc = dec_attr(gemm_dec_kernel<dec_t16, false, false, DEC_SW_PART>, DEC_SW_SMEM, dec_t16::NT,
                     &dec_occ_sw[0][0])) ||
      (rc = dec_attr(gemm_dec_kernel<dec_t16, true, true, DEC_SW_PART>, DEC_SW_SMEM, dec_t16::NT,
                     &dec_occ_sw[0][1])) ||
      (rc = dec_attr(gemm_dec_kernel<dec_t16, false, false, DEC_SW_STORED>, DEC_SW_SMEM,
                     dec_t16::NT, &dec_occ_sw[1][0])) ||
      (rc = dec_attr(gemm_dec_kernel<dec_t16, true, true, DEC_SW_STORED>, DEC_SW_SMEM, dec_t16::NT,
                     &dec_occ_sw[1][1])))
    return rc;
  if ((rc = dec_init_shape<dec_t16>(dec_occ[0])) || (rc = dec_init_shape<dec_twg>(dec_occ[1])) ||
      (rc = dec_init_shape<dec_twg2>(dec_occ[2])) || (rc = dec_init_shape<dec_twg2n>(dec_occ[3])) ||
      (rc = tma_init<dec_twg>()) || (rc = tma_init<dec_twg2>()) || (rc = tma_init<dec_twg2n>()) ||
      (rc = tma_init<dec_twg4>()))
    return rc;
  done = 1;
  return 0;
}

/* A call's blocks: one per item, at most as many as the device holds at once. */
static long dec_grid(const dec_args &a, int occ, int n_sm) {
  return a.items < (long)occ * n_sm ? a.items : (long)occ * n_sm;
}

/* Shape SH's cp.async kernel for the call, at most as many blocks as the device holds; calls
 * of up to DEC_PDL_T rows with programmatic dependent launch. */
template <class SH, bool SPLIT, bool LAZY = false>
static int dec_launch(const dec_args &a, int occ, int n_sm, cudaStream_t st) {
  NS_CUDA_CHECK(k_launch(gemm_dec_kernel<SH, SPLIT, LAZY, DEC_SW_NONE>,
                         dim3((unsigned)dec_grid(a, occ, n_sm)), dim3(SH::NT),
                         dec_smem<SH, SPLIT>(), st, a.T <= DEC_PDL_T, a, dec_sw_args{}));
  return 0;
}

/* Shape SH's kernel for the call: split or whole tiles, split sums counted or left (lz). */
template <class SH>
static int dec_go(const dec_args &a, bool split, bool lz, int occ, int n_sm, cudaStream_t st) {
  return lz      ? dec_launch<SH, true, true>(a, occ, n_sm, st)
         : split ? dec_launch<SH, true>(a, occ, n_sm, st)
                 : dec_launch<SH, false>(a, occ, n_sm, st);
}

/* Shape SH's TMA kernel for the call (as dec_go), at most as many blocks as the device holds;
 * calls of up to DEC_PDL_TMA_T rows with programmatic dependent launch. */
template <class SH, bool SPLIT, bool LAZY>
static int tma_launch(const dec_args &a, const CUtensorMap &mx, const CUtensorMap &mw, int occ,
                      int n_sm, cudaStream_t st) {
  NS_CUDA_CHECK(k_launch(gemm_dec_tma_kernel<SH, SPLIT, LAZY>,
                         dim3((unsigned)dec_grid(a, occ, n_sm)), dim3(tma_cfg<SH>::NT),
                         tma_cfg<SH>::SMEM, st, a.T <= DEC_PDL_TMA_T, a, mx, mw));
  return 0;
}

/* Shape SH through TMA where the driver maps x and w: 0 or an error after launching, or
 * NS_EUNSUPPORTED before launching anything (the cp.async kernel then runs the call). */
template <class SH>
static int tma_go(const dec_args &a, const void *x, int ldx, const void *w, bool split, bool lz,
                  int n_sm, cudaStream_t st) {
  CUtensorMap mx, mw;
  /* a gate|up call (a.gu): 2 gu rows of w in boxes of BN / 2 (gemm_dec_tma_kernel's load_w) */
  if (tma_map(&mx, x, a.T, a.K, ldx, 64) ||
      tma_map(&mw, w, a.gu ? 2 * a.gu : a.N, a.K, a.K, a.gu ? SH::BN / SH::WN / 2 : SH::BN))
    return NS_EUNSUPPORTED;
  const int occ = tma_occ<SH>[split];
  if constexpr (SH::WN > 1) /* whole tiles only */
    return split || lz ? NS_EINVAL : tma_launch<SH, false, false>(a, mx, mw, occ, n_sm, st);
  else
    return lz      ? tma_launch<SH, true, true>(a, mx, mw, occ, n_sm, st)
           : split ? tma_launch<SH, true, false>(a, mx, mw, occ, n_sm, st)
                   : tma_launch<SH, false, false>(a, mx, mw, occ, n_sm, st);
}

/* A wgmma shape's call: through TMA where the plan says so and the driver maps x and w, else
 * on the cp.async kernel. */
template <class SH>
static int shape_go(const dec_args &a, const dec_plan &p, const void *x, int ldx, const void *w,
                    bool lz, int occ, int n_sm, cudaStream_t st) {
  if (p.tma && dec_tma) {
    const int rc = tma_go<SH>(a, x, ldx, w, p.split, lz, n_sm, st);
    if (rc != NS_EUNSUPPORTED) return rc;
  }
  return dec_go<SH>(a, p.split, lz, occ, n_sm, st);
}

extern "C" int k_gemm_dec_seg(int N, int K) {
  if (N <= 0 || K <= 0) return 0;
  const long nt = (N + 63) / 64; /* T = 1 tiles (dec_t16) */
  const long all = (K + 127) / 128 * 128;
  long best = all, cost = (nt + DEC_WAVE - 1) / DEC_WAVE * (all + DEC_ITEM_COST);
  for (long S = DEC_SEG_MIN; S < K; S += 128) {
    const long units = nt * ((K + S - 1) / S);
    const long c = (units + DEC_WAVE - 1) / DEC_WAVE * (S + DEC_ITEM_COST);
    if (units <= DEC_UNITS && c <= cost) best = S, cost = c; /* ties: the fewer, longer items */
  }
  return (int)best;
}

extern "C" size_t k_gemm_dec_ws_bytes(int T, int N, int K) {
  if (T <= 0 || N <= 0 || K <= 0) return 0;
  const dec_plan p = dec_plan_of(T, N, K);
  return p.split ? DEC_CNT_BYTES + (size_t)p.items * p.bm * p.bn * sizeof(float) : 0;
}

extern "C" size_t k_gemm_dec_ws_max(void) {
  return DEC_CNT_BYTES + (size_t)DEC_UNITS * DEC_PART_MAX * sizeof(float);
}

#ifdef NS_DEC_TRACE
/* The traced calls' shapes, by number, and the device buffer of records. File layout: "NSDT",
 * u32 calls, u32 records, then per call u32 seq, i32 T N K S nseg items grid split (36 bytes), then
 * the records (16 bytes each, dec_trace_rec). */
struct dec_trace_call {
  unsigned seq;
  int T, N, K, S, nseg, items, grid, split;
};
static dec_trace_call *dec_tc;
static unsigned dec_tc_n, dec_tc_cap, dec_seq;
static dec_trace_rec *dec_tr_buf;
static unsigned dec_tr_cap;

static void dec_trace_dump(void) {
  const char *path = getenv("NS_DEC_TRACE");
  unsigned n = 0;
  if (!path || !dec_tr_buf || cudaDeviceSynchronize() != cudaSuccess ||
      cudaMemcpyFromSymbol(&n, g_dtr_n, sizeof n) != cudaSuccess)
    return;
  if (n > dec_tr_cap) n = dec_tr_cap;
  dec_trace_rec *r = (dec_trace_rec *)malloc((size_t)n * sizeof *r + 1);
  FILE *f = fopen(path, "wb");
  if (r && f &&
      cudaMemcpy(r, dec_tr_buf, (size_t)n * sizeof *r, cudaMemcpyDeviceToHost) == cudaSuccess) {
    fwrite("NSDT", 1, 4, f);
    fwrite(&dec_tc_n, 4, 1, f);
    fwrite(&n, 4, 1, f);
    fwrite(dec_tc, sizeof *dec_tc, dec_tc_n, f);
    fwrite(r, sizeof *r, n, f);
    fprintf(stderr, "k_gemm_dec trace: %u calls, %u records to %s\n", dec_tc_n, n, path);
  }
  if (f) fclose(f);
  free(r);
}

/* At the first call (outside a capture): the record buffer when $NS_DEC_TRACE names a file. */
static void dec_trace_init(void) {
  static int done;
  if (done) return;
  done = 1;
  if (!getenv("NS_DEC_TRACE")) return;
  dec_tr_cap = 16u << 20;
  dec_tc_cap = 1u << 20;
  dec_tc = (dec_trace_call *)calloc(dec_tc_cap, sizeof *dec_tc);
  if (!dec_tc || cudaMalloc(&dec_tr_buf, (size_t)dec_tr_cap * sizeof(dec_trace_rec)) != cudaSuccess)
    return;
  cudaMemcpyToSymbol(g_dtr, &dec_tr_buf, sizeof dec_tr_buf);
  cudaMemcpyToSymbol(g_dtr_cap, &dec_tr_cap, sizeof dec_tr_cap);
  atexit(dec_trace_dump); /* after CUDA's own exit handler was registered: runs before it */
}

static void dec_trace_call_add(const dec_args &a, const dec_plan &p, int occ, int n_sm) {
  if (!dec_tc || dec_tc_n >= dec_tc_cap) return;
  const long g = dec_grid(a, occ, n_sm);
  dec_tc[dec_tc_n++] = {a.seq, a.T, a.N, a.K, a.S, a.nseg, a.items, (int)g, p.split};
}
#endif

/* A call about to launch: numbered and recorded where the build traces (NS_DEC_TRACE). */
static void dec_trace_call(dec_args &a, const dec_plan &p, int occ, int n_sm) {
#ifdef NS_DEC_TRACE
  dec_trace_init();
  a.seq = dec_seq++;
  dec_trace_call_add(a, p, occ, n_sm);
#else
  (void)a, (void)p, (void)occ, (void)n_sm;
#endif
}

/* A call's arguments under plan p, its workspace checked where the call is split: 0,
 * NS_ERANGE or NS_EINVAL. */
static int dec_args_of(dec_args *a, const dec_plan &p, void *y, int y_f32, int ldy, const void *x,
                       int ldx, const void *w, const void *bias, int T, int N, int K, void *ws,
                       size_t ws_bytes) {
  *a = {y,
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
        (int)p.items};
  if (p.split) {
    if (!ws || ws_bytes < k_gemm_dec_ws_bytes(T, N, K)) return NS_ERANGE;
    if (!k_aligned(ws, 16) || p.mtn * p.ntn > DEC_CNT) return NS_EINVAL;
    a->cnt = (unsigned *)ws;
    a->part = (float *)((char *)ws + DEC_CNT_BYTES);
  }
  return 0;
}

/* k_gemm_dec, or with lazy != NULL k_gemm_dec_lazy (y bf16). */
static int dec_run(void *y, int y_f32, int ldy, const void *x, int ldx, const void *w,
                   const void *bias, int T, int N, int K, void *ws, size_t ws_bytes, int n_sm,
                   k_dec_part *lazy, cudaStream_t st) {
  if (!y || !x || !w || T < 0 || N <= 0 || ldx < K || ldy < N || (bias && y_f32) ||
      !k_gemm_supported(x, ldx, w, K) || T > (1 << 24))
    return NS_EINVAL;
  if (T == 0) return 0;
  const dec_plan p = dec_plan_of(T, N, K);
  if (p.items > 0x7fffffffL) return NS_EINVAL;
  dec_args a;
  int rc = dec_args_of(&a, p, y, y_f32, ldy, x, ldx, w, bias, T, N, K, ws, ws_bytes);
  if (rc || (rc = dec_init())) return rc;
  const int sm = n_sm > 0 ? n_sm : 132,
            occ = p.shape == 4 ? tma_occ<dec_twg4>[0] : dec_occ[p.shape][p.split];
  dec_trace_call(a, p, occ, sm);
  if (lazy) lazy->part = NULL;
  const bool lz = lazy && p.split && p.mtn == 1; /* the consumers read one row of tiles */
  if (lz) *lazy = {a.part, bias, T, N, p.nseg, p.bm, p.bn};
  switch (p.shape) {
  case 0: return dec_go<dec_t16>(a, p.split, lz, occ, sm, st);
  case 1: return shape_go<dec_twg>(a, p, x, ldx, w, lz, occ, sm, st);
  case 2: return shape_go<dec_twg2>(a, p, x, ldx, w, lz, occ, sm, st);
  case 4: return tma_go<dec_twg4>(a, x, ldx, w, false, false, sm, st); /* whole, TMA only */
  default: return shape_go<dec_twg2n>(a, p, x, ldx, w, lz, occ, sm, st);
  }
}

extern "C" int k_gemm_dec(void *y, int y_f32, int ldy, const void *x, int ldx, const void *w,
                          const void *bias, int T, int N, int K, void *ws, size_t ws_bytes,
                          int n_sm, cudaStream_t st) {
  return dec_run(y, y_f32, ldy, x, ldx, w, bias, T, N, K, ws, ws_bytes, n_sm, nullptr, st);
}

extern "C" int k_gemm_dec_lazy(void *y, int ldy, const void *x, int ldx, const void *w,
                               const void *bias, int T, int N, int K, void *ws, size_t ws_bytes,
                               int n_sm, k_dec_part *out, cudaStream_t st) {
  if (!out) return NS_EINVAL;
  out->part = NULL;
  return dec_run(y, 0, ldy, x, ldx, w, bias, T, N, K, ws, ws_bytes, n_sm, out, st);
}

/* k_gemm_dec_gu: the plan of the gate|up product (T, 2 I, K), which it runs as whole tiles on
 * a wgmma shape's TMA kernel. */
static bool dec_gu_plan(int T, int I, int K, dec_plan *p) {
  if (T <= DEC_WG_T || I <= 0 || I > (1 << 29) || K <= 0 || T > (1 << 24)) return false;
  *p = dec_plan_of(T, 2 * I, K);
  return !p->split && p->tma && p->shape >= 1 && dec_tma;
}

extern "C" int k_gemm_dec_gu_ok(int T, int I, int K) {
  dec_plan p;
  return dec_gu_plan(T, I, K, &p);
}

extern "C" int k_gemm_dec_gu(void *out, int ldo, const void *x, int ldx, const void *w,
                             const void *bias, int T, int I, int K, int n_sm, cudaStream_t st) {
  if (!out || !x || !w || T < 0 || I <= 0 || ldo < I || ldx < K || !k_gemm_supported(x, ldx, w, K))
    return NS_EINVAL;
  if (T == 0) return 0;
  dec_plan p;
  if (!dec_gu_plan(T, I, K, &p)) return NS_EUNSUPPORTED;
  dec_args a;
  int rc = dec_args_of(&a, p, out, 0, ldo, x, ldx, w, bias, T, I, K, nullptr, 0);
  if (rc || (rc = dec_init())) return rc;
  const int h = p.bn / 2; /* the tiles: h columns of I each */
  a.gu = I, a.ntn = (I + h - 1) / h, a.items = a.mtn * a.ntn;
  const int sm = n_sm > 0 ? n_sm : 132;
  switch (p.shape) {
  case 1: return tma_go<dec_twg>(a, x, ldx, w, false, false, sm, st);
  case 2: return tma_go<dec_twg2>(a, x, ldx, w, false, false, sm, st);
  case 4: return tma_go<dec_twg4>(a, x, ldx, w, false, false, sm, st);
  default: return tma_go<dec_twg2n>(a, x, ldx, w, false, false, sm, st);
  }
}

extern "C" int k_gemm_dec_swiglu_ok(int T, int N, int K) {
  if (T < 1 || T > DEC_WG_T || N <= 0 || K < 8 || K % 8) return 0;
  const dec_plan p = dec_plan_of(T, N, K);
  return (long)T * (p.split ? p.S : K) <= DEC_SW_MAX;
}

extern "C" int k_gemm_dec_swiglu(void *y, int ldy, void *x, const k_dec_part *gp, const void *gu,
                                 const void *w, const void *bias, int T, int N, int K, void *ws,
                                 size_t ws_bytes, int n_sm, k_dec_part *out, cudaStream_t st) {
  if (out) out->part = NULL;
  if (!out || !gp == !gu) return NS_EINVAL; /* one of the two */
  if (gp && (!gp->part || gp->T != T || gp->N != 2 * K || gp->bn % 8 || gp->nseg < 1))
    return NS_EINVAL;
  if (!y || !x || !w || T < 0 || N <= 0 || K <= 0 || ldy < N || K % 8 || !k_aligned(w, 16) ||
      !k_aligned(x, 16) || (gu && !k_aligned(gu, 16)))
    return NS_EINVAL;
  if (T == 0) return 0;
  if (!k_gemm_dec_swiglu_ok(T, N, K)) return NS_EUNSUPPORTED;
  const dec_plan p = dec_plan_of(T, N, K); /* T <= 16: the dec_t16 shape, one row of tiles */
  dec_args a;
  int rc = dec_args_of(&a, p, y, 0, ldy, x, K, w, bias, T, N, K, ws, ws_bytes);
  if (rc || (rc = dec_init())) return rc;
  const int sm = n_sm > 0 ? n_sm : 132, occ = dec_occ_sw[gu != NULL][p.split];
  dec_trace_call(a, p, occ, sm);
  if (p.split) *out = {a.part, bias, T, N, p.nseg, p.bm, p.bn};
  auto kern = gu ? (p.split ? gemm_dec_kernel<dec_t16, true, true, DEC_SW_STORED>
                            : gemm_dec_kernel<dec_t16, false, false, DEC_SW_STORED>)
                 : (p.split ? gemm_dec_kernel<dec_t16, true, true, DEC_SW_PART>
                            : gemm_dec_kernel<dec_t16, false, false, DEC_SW_PART>);
  NS_CUDA_CHECK(k_launch(kern, dim3((unsigned)dec_grid(a, occ, sm)), dim3(dec_t16::NT),
                         dec_sw_smem(T, p.split ? p.S : K), st, true, a,
                         dec_sw_args{gp ? *gp : k_dec_part{}, (const bf16 *)gu, (bf16 *)x}));
  return 0;
}

/* k_dec_part_finish: a thread 8 columns of a row (or 1 where N or ldy is not a multiple of 8). */
template <bool VEC>
static __global__ void __launch_bounds__(256)
    dec_finish_kernel(const k_dec_part p, bf16 *y, int ldy) {
  k_pdl_enter(p.T);
  const int per = VEC ? p.N / 8 : p.N;
  const long e = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= (long)p.T * per) return;
  const int r = (int)(e / per), c = (int)(e - (long)r * per) * (VEC ? 8 : 1);
  bf16 *row = y + (size_t)r * ldy;
  if (VEC) {
    float o[8];
    k_dec_part_get8(p, r, c, o);
    k_store8(row + c, o);
  } else {
    row[c] = __float2bfloat16(k_dec_part_get1(p, r, c));
  }
}

/* Partial sums of at least DEC_DROP_BYTES (as written: T rows of N columns, nseg segments) are
 * dropped by their consumer, and every split call's of a layer whose split calls write at least
 * DEC_DROP_LAYER_BYTES in all (k_dec_layer_part_bytes). Weights stream through L2 marked
 * evict-first, so dirty partials outlive them until other traffic (the attention's keys and
 * values) pushes them out; where a layer writes more than an L2 partition's 25 MB of them they
 * are written back, elsewhere they are overwritten in L2 and a discard only costs the consumer
 * its instructions. On an H200 (bench/RESULTS.md), llama3-8b's batch-128 steps (context 512)
 * went from 9.201-9.211 to 8.938-8.944 ms with the partials of every call of more than 64 rows
 * dropped, and from 9.397-9.419 to 9.171-9.184 with the 16 MiB rule alone (its q|k|v, 25 MB a
 * layer); adding its o and down (8 MiB each, 40 MiB a layer) took 8.737-8.794 to 8.646-8.728;
 * dropping tinyllama-1.1b's o and down too (8 MiB each, 23.5 MiB a layer) made its batch 128
 * 1.0-1.3% slower, llama3.2-1b's (22 MiB a layer) unchanged. */
#define DEC_DROP_BYTES       (16.0 * 1048576.0)
#define DEC_DROP_LAYER_BYTES (32.0 * 1048576.0)

/* the fp32 partials a decode call of T rows writes (0 where it is not split) */
static double dec_split_bytes(int T, int N, int K) {
  const dec_plan p = dec_plan_of(T, N, K);
  return p.split ? (double)T * N * p.nseg * sizeof(float) : 0.0;
}

extern "C" double k_dec_layer_part_bytes(int T, int hidden, int n_qkv, int inter) {
  if (T <= 0 || hidden <= 0 || n_qkv <= 0 || inter <= 0) return 0.0;
  return dec_split_bytes(T, n_qkv, hidden) + dec_split_bytes(T, hidden, hidden) +
         dec_split_bytes(T, hidden, inter);
}

extern "C" int k_dec_part_drops(const k_dec_part *p, double layer_bytes) {
  return p && p->part &&
         ((double)p->T * p->N * p->nseg * sizeof(float) >= DEC_DROP_BYTES ||
          layer_bytes >= DEC_DROP_LAYER_BYTES);
}

extern "C" int k_dec_part_finish(const k_dec_part *p, void *y, int ldy, cudaStream_t st) {
  if (!p || !p->part || !y || p->T <= 0 || p->N <= 0 || ldy < p->N || p->nseg < 1 || p->bn % 8 ||
      p->T > p->bm)
    return NS_EINVAL;
  const bool vec = p->N % 8 == 0 && ldy % 8 == 0 && k_aligned(y, 16);
  const long n = (long)p->T * (vec ? p->N / 8 : p->N);
  const dim3 grid((unsigned)((n + 255) / 256));
  NS_CUDA_CHECK(k_launch_pdl(vec ? dec_finish_kernel<true> : dec_finish_kernel<false>, grid,
                             dim3(256), 0, st, *p, (bf16 *)y, ldy));
  return 0;
}
