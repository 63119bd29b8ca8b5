/* gemm.cu — a batch-invariant bf16 GEMM, y[T, N] = x[T, K] . w[N, K]^T (+ bias), fp32
 * accumulation on the tensor cores (mma.sync m16n8k16, ldmatrix, cp.async pipeline). Every
 * output element is accumulated the same way whatever the tile shape: from zero, one mma per
 * 16 values of k, k ascending, no split of K. So a row's result does not depend on how many
 * rows the call has, and the launch shape may follow T freely. Entry point: k_gemm. */
#include "gemm.h"

#include "k_common.cuh"

#include <stdint.h>

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int bytes) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
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
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[FM][4], bfr[FN][2];
#pragma unroll
      for (int i = 0; i < FM; i++)
        ldsm_x4(af[i], sa + (wm * TM + i * 16 + (lane & 15)) * LDS + kk + (lane >> 4) * 8);
#pragma unroll
      for (int j = 0; j + 1 < FN; j += 2) {
        uint32_t r[4];
        ldsm_x4(r, sb + (wn * TN + j * 8 + (lane & 7) + (lane >> 4) * 8) * LDS + kk +
                       ((lane >> 3) & 1) * 8);
        bfr[j][0] = r[0], bfr[j][1] = r[1], bfr[j + 1][0] = r[2], bfr[j + 1][1] = r[3];
      }
      if (FN & 1)
        ldsm_x2(bfr[FN - 1],
                sb + (wn * TN + (FN - 1) * 8 + (lane & 7)) * LDS + kk + ((lane >> 3) & 1) * 8);
#pragma unroll
      for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
          mma16816(acc[i][j], af[i], bfr[j]);
    }
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
