/* gather.cu — row gathers: embedding lookup and logits-row selection, one block per row,
 * 16-byte copies when rows allow them. Entry points: k_embed, k_gather_rows. */
#include "gather.h"

#include "k_common.cuh"

/* One block per output row; vec: 8 values per access. */
template <bool VEC>
static __global__ void gather_kernel(bf16 *dst, int ldd, const bf16 *src, int lds,
                                     const int32_t *rows, int cols, int limit) {
  k_pdl_enter((int)gridDim.x);
  int r = blockIdx.x;
  int s = rows[r];
  bf16 *d = dst + (size_t)r * ldd;
  bool ok = s >= 0 && s < limit;
  const bf16 *p = src + (size_t)(ok ? s : 0) * lds;
  if (VEC) {
    for (int i = threadIdx.x * 8; i < cols; i += blockDim.x * 8) {
      bf16x8 v = ok ? *reinterpret_cast<const bf16x8 *>(p + i) : bf16x8{};
      *reinterpret_cast<bf16x8 *>(d + i) = v;
    }
  } else {
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
      d[i] = ok ? p[i] : __float2bfloat16(0.0f);
  }
}

static int launch(void *dst, int ldd, const void *src, int lds, const int32_t *rows, int n,
                  int cols, int limit, cudaStream_t st) {
  if (n < 0 || cols <= 0 || ldd < cols || lds < cols || !dst || !src || !rows) return NS_EINVAL;
  if (n == 0) return 0;
  bool vec =
      cols % 8 == 0 && ldd % 8 == 0 && lds % 8 == 0 && k_aligned(dst, 16) && k_aligned(src, 16);
  int per = vec ? cols / 8 : cols;
  int threads = per >= 256 ? 256 : (per + 31) / 32 * 32;
  NS_CUDA_CHECK(k_launch_pdl(vec ? gather_kernel<true> : gather_kernel<false>, dim3(n),
                             dim3(threads), 0, st, (bf16 *)dst, ldd, (const bf16 *)src, lds, rows,
                             cols, limit));
  K_LAUNCH_CHECK();
  return 0;
}

extern "C" int k_embed(void *out, int ldo, const void *table, const int32_t *ids, int n_tokens,
                       int hidden, int vocab, cudaStream_t st) {
  if (vocab <= 0) return NS_EINVAL;
  return launch(out, ldo, table, hidden, ids, n_tokens, hidden, vocab, st);
}

extern "C" int k_gather_rows(void *dst, int ldd, const void *src, int lds, const int32_t *rows,
                             int n, int cols, cudaStream_t st) {
  return launch(dst, ldd, src, lds, rows, n, cols, 1 << 30, st);
}
