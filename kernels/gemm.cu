/* gemm.cu — a batch-invariant bf16 GEMM, y[T, N] = x[T, K] . w[N, K]^T (+ bias), fp32
 * accumulation on the tensor cores (mma.sync m16n8k16, ldmatrix, cp.async pipeline). Every
 * output element is accumulated the same way whatever the tile shape: from zero, one mma per
 * 16 values of k, k ascending, no split of K. So a row's result does not depend on how many
 * rows the call has, and the launch shape may follow T freely. Entry points: k_gemm,
 * k_gemm_supported; the decode rows' GEMM (K in fixed segments) is gemm_dec.cu. */
#include "gemm.h"

#include "k_common.cuh"
#include "k_gemm_frag.cuh"
#include "k_mma.cuh"

#include <stdint.h>

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
  acc_zero(acc);

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
