/* rope_kv.cu — RoPE + paged KV write: one block per token; cos/sin computed once per token
 * into shared memory, q and k heads rotated in place, then k and v copied to the token's
 * cache slot with 16-byte stores. Entry point: k_rope_kv_write. */
#include "rope_kv.h"

#include "k_common.cuh"

static __global__ void __launch_bounds__(128)
    rope_kv_kernel(bf16 *qkv, int ld, const int32_t *pos, const int32_t *slot,
                   const float *inv_freq, int n_heads, int n_kv, int hd, k_kv_layout kv,
                   int layer) {
  __shared__ float cs[128], sn[128];
  k_pdl_enter((int)gridDim.x);
  int t = blockIdx.x, half = hd / 2;
  bf16 *row = qkv + (size_t)t * ld;
  float p = (float)pos[t];
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    /* HF: the angle is an fp32 product, cos and sin are cast to the model's dtype (bf16);
     * the reference takes cos/sin of the angle in double */
    double s, c;
    sincos((double)(p * inv_freq[i]), &s, &c);
    cs[i] = k_rbf((float)c);
    sn[i] = k_rbf((float)s);
  }
  __syncthreads();
  int pairs = (n_heads + n_kv) * half; /* k heads follow the q heads in the row */
  for (int idx = threadIdx.x; idx < pairs; idx += blockDim.x) {
    int h = idx / half, i = idx - h * half;
    bf16 *x = row + (size_t)h * hd;
    float a = __bfloat162float(x[i]), b = __bfloat162float(x[i + half]);
    /* q * cos + rotate_half(q) * sin on bf16 tensors: each product rounded, then the sum */
    x[i] = __float2bfloat16(__fsub_rn(k_rbf(__fmul_rn(a, cs[i])), k_rbf(__fmul_rn(b, sn[i]))));
    x[i + half] =
        __float2bfloat16(__fadd_rn(k_rbf(__fmul_rn(b, cs[i])), k_rbf(__fmul_rn(a, sn[i]))));
  }
  int s = slot[t];
  if (s < 0) return;
  __syncthreads(); /* the rotated k is read back below by other threads */
  int page = s / kv.page_tokens, off = s - page * kv.page_tokens;
  size_t at = (size_t)off * n_kv * hd;
  bf16 *kd = k_kv_page(kv, layer, 0, page) + at, *vd = k_kv_page(kv, layer, 1, page) + at;
  const bf16 *ks = row + (size_t)n_heads * hd, *vs = ks + (size_t)n_kv * hd;
  int n8 = n_kv * hd / 8;
  for (int i = threadIdx.x; i < 2 * n8; i += blockDim.x) {
    int j = i < n8 ? i : i - n8;
    bf16 *d = i < n8 ? kd : vd;
    const bf16 *src = i < n8 ? ks : vs;
    *reinterpret_cast<bf16x8 *>(d + j * 8) = *reinterpret_cast<const bf16x8 *>(src + j * 8);
  }
}

extern "C" int k_rope_kv_write(void *qkv, int ld, int n_tokens, const int32_t *pos,
                               const int32_t *slot, const float *inv_freq, int n_heads,
                               int n_kv_heads, int head_dim, const k_kv_layout *kv, int layer,
                               cudaStream_t st) {
  if (n_tokens < 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 || head_dim > 256 ||
      head_dim % 8 || ld % 8 || ld < (n_heads + 2 * n_kv_heads) * head_dim || !qkv || !pos ||
      !slot || !inv_freq || !kv || layer < 0 || layer >= kv->n_layers ||
      kv->n_kv_heads != n_kv_heads || kv->head_dim != head_dim || kv->page_tokens <= 0 ||
      !k_aligned(qkv, 16))
    return NS_EINVAL;
  if (n_tokens == 0) return 0;
  NS_CUDA_CHECK(k_launch_pdl(rope_kv_kernel, dim3(n_tokens), dim3(128), 0, st, (bf16 *)qkv, ld, pos,
                             slot, inv_freq, n_heads, n_kv_heads, head_dim, *kv, layer));
  return 0;
}
