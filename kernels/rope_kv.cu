/* rope_kv.cu — RoPE + paged KV write, one thread per rotation pair (8 pairs above
 * ROPE_V8_ROWS rows where head_dim / 2 is a multiple of 8) or per 8 values of v: q and k heads
 * rotated in place, each k pair also stored to the token's cache slot by the thread that rotated
 * it, v copied to the slot with 16-byte stores. A token's work spans as many blocks as it needs
 * (blockIdx.x the token, blockIdx.y the block of its work), so a decode step's few rows do not run
 * as a long loop in one block. Entry point: k_rope_kv_write. */
#include "rope_kv.h"

#include "k_common.cuh"
#include "k_dec_part.cuh"
#include "k_rope.cuh"

#define ROPE_THREADS 128
/* Above ROPE_V8_ROWS rows a thread takes 8 pairs: on an H200 that took the llama3-8b
 * batch-128 step from 9.93 to 9.82 ms (rope_kv 467 -> 345 us a step, reading a lazy qkv's
 * partial sums 8 columns a load), but batch-1 steps 2-4% longer (tinyllama-1.1b 1.21 -> 1.26
 * ms; bench/RESULTS.md), so fewer rows keep a thread a pair. */
#define ROPE_V8_ROWS 64

/* The lanes of this thread's warp whose unit (u) lies in [lo, hi): the threads of one branch,
 * for the barrier before they drop the partials they read. */
__device__ __forceinline__ unsigned rope_lanes(int u, int lo, int hi) {
  const int wb = u - (int)(threadIdx.x & 31);
  const int a = min(max(lo - wb, 0), 32), b = min(max(hi - wb, 0), 32);
  const unsigned below_b = b >= 32 ? 0xffffffffu : (1u << b) - 1u;
  const unsigned below_a = a >= 32 ? 0xffffffffu : (1u << a) - 1u;
  return below_b & ~below_a;
}

/* PART: the row's values from a lazy decode GEMM's partial sums qp (k_dec_part.cuh), v
 * stored to the row as well (the row holds all of q, k and v afterwards, as without). V: the
 * rotation pairs a thread takes (8: dims i .. i + 7 and their partners in 16-byte accesses,
 * where head_dim / 2 is a multiple of 8; else 1). */
template <bool PART, int V>
static __global__ void __launch_bounds__(ROPE_THREADS)
    rope_kv_kernel(bf16 *qkv, int ld, const int32_t *pos, const int32_t *slot,
                   const float *inv_freq, int n_heads, int n_kv, int hd, k_kv_layout kv, int layer,
                   const k_dec_part qp) {
  const int t = blockIdx.x, half = hd / 2, u = blockIdx.y * ROPE_THREADS + threadIdx.x;
  const int hv = half / V;                 /* threads a head */
  const int units = (n_heads + n_kv) * hv; /* k heads follow the q heads in the row */
  const int n8 = n_kv * hd / 8;            /* 16-byte pieces of v */
  if (u >= units + n8) return;
  const int h = u / hv, i = (u - h * hv) * V;
  /* The row's position and slot are step inputs, copied to the device before the step's
   * first kernel, and inv_freq is constant: both are read, and cos and sin taken, before
   * waiting for the kernel before (programmatic dependent launch). */
  const int s = slot[t];
  float cs[V], sn[V];
#pragma unroll
  for (int j = 0; j < V; j++) {
    cs[j] = sn[j] = 0.0f;
    if (u < units) k_rope_cs(pos[t], inv_freq[i + j], cs[j], sn[j]);
  }
  k_pdl_enter((int)gridDim.x);
  bf16 *row = qkv + (size_t)t * ld;
  const int page = s < 0 ? 0 : s / kv.page_tokens, off = s < 0 ? 0 : s - page * kv.page_tokens;
  const size_t at = (size_t)off * n_kv * hd;
  if (u >= units) { /* v to the cache slot */
    const int j = u - units;
    bf16 *vs = row + (size_t)(n_heads + n_kv) * hd;
    if (PART) {
      float f[8];
      const int c = (n_heads + n_kv) * hd + j * 8;
      k_dec_part_get8(qp, t, c, f);
      k_store8(vs + j * 8, f);
      if (qp.drop) { /* a line's 32 columns: four neighbouring lanes of this branch */
        __syncwarp(rope_lanes(u, units, units + n8));
        if (c % 32 == 0) k_dec_part_drop(qp, t, c);
      }
    }
    if (s < 0) return;
    *reinterpret_cast<bf16x8 *>(k_kv_page(kv, layer, 1, page) + at + j * 8) =
        *reinterpret_cast<const bf16x8 *>(vs + j * 8);
    return;
  }
  bf16 *x = row + (size_t)h * hd;
  float a[V], b[V], oa[V], ob[V];
  if (PART && V == 8) {
    /* the pair's partials in flight together, as below: on an H200 a llama3.2-1b batch-128
     * step (context 512) went from 2.605 to 2.56 ms, llama3-8b's unchanged (bench/RESULTS.md) */
    const int cs8[2] = {h * hd + i, h * hd + i + half};
    float ab[2][8];
    k_dec_part_getn<2>(qp, t, cs8, ab);
#pragma unroll
    for (int j = 0; j < 8; j++)
      a[j] = ab[0][j], b[j] = ab[1][j];
  } else if (V == 8) {
    k_load8(a, x + i), k_load8(b, x + i + half);
  } else if (PART) { /* the pair's partials in flight together */
    const int cs[2] = {h * hd + i, h * hd + i + half};
    float ab[2];
    k_dec_part_get1n<2>(qp, t, cs, ab);
    a[0] = ab[0], b[0] = ab[1];
  } else {
    a[0] = __bfloat162float(x[i]), b[0] = __bfloat162float(x[i + half]);
  }
#pragma unroll
  for (int j = 0; j < V; j++)
    k_rope_rot(a[j], b[j], cs[j], sn[j], oa[j], ob[j]);
  bf16 *kd = h < n_heads || s < 0 ? nullptr
                                  : k_kv_page(kv, layer, 0, page) + at + (size_t)(h - n_heads) * hd;
  if (V == 8) {
    k_store8(x + i, oa), k_store8(x + i + half, ob);
    if (kd) k_store8(kd + i, oa), k_store8(kd + i + half, ob);
    /* a line of each half: four neighbouring lanes of the head (half % 32 == 0) */
    if (PART && qp.drop && hd % 64 == 0) {
      __syncwarp(rope_lanes(u, 0, units));
      if ((h * hd + i) % 32 == 0)
        k_dec_part_drop(qp, t, h * hd + i), k_dec_part_drop(qp, t, h * hd + i + half);
    }
  } else {
    x[i] = __float2bfloat16(oa[0]), x[i + half] = __float2bfloat16(ob[0]);
    if (kd) kd[i] = __float2bfloat16(oa[0]), kd[i + half] = __float2bfloat16(ob[0]);
  }
}

/* k_rope_kv_write and k_rope_kv_write_part (qp != NULL). */
static int rope_run(void *qkv, int ld, int n_tokens, const int32_t *pos, const int32_t *slot,
                    const float *inv_freq, int n_heads, int n_kv_heads, int head_dim,
                    const k_kv_layout *kv, int layer, const k_dec_part *qp, cudaStream_t st) {
  if (n_tokens < 0 || n_heads <= 0 || n_heads > 4096 || n_kv_heads <= 0 || head_dim <= 0 ||
      head_dim > 256 || head_dim % 8 || ld % 8 || ld < (n_heads + 2 * n_kv_heads) * head_dim ||
      !qkv || !pos || !slot || !inv_freq || !kv || layer < 0 || layer >= kv->n_layers ||
      kv->n_kv_heads != n_kv_heads || kv->head_dim != head_dim || kv->page_tokens <= 0 ||
      !k_aligned(qkv, 16))
    return NS_EINVAL;
  if (qp && (!qp->part || qp->T != n_tokens || qp->N != (n_heads + 2 * n_kv_heads) * head_dim))
    return NS_EINVAL;
  if (n_tokens == 0) return 0;
  /* 8 pairs a thread for more than ROPE_V8_ROWS rows where the row's halves split into
   * 16-byte pieces (qkv is 16-byte aligned and ld a multiple of 8) */
  const int v = n_tokens > ROPE_V8_ROWS && head_dim / 2 % 8 == 0 ? 8 : 1;
  const int work = (n_heads + n_kv_heads) * (head_dim / 2 / v) + n_kv_heads * head_dim / 8;
  const dim3 grid((unsigned)n_tokens, (unsigned)((work + ROPE_THREADS - 1) / ROPE_THREADS));
  auto kern = qp ? (v == 8 ? rope_kv_kernel<true, 8> : rope_kv_kernel<true, 1>)
                 : (v == 8 ? rope_kv_kernel<false, 8> : rope_kv_kernel<false, 1>);
  NS_CUDA_CHECK(k_launch_pdl(kern, grid, dim3(ROPE_THREADS), 0, st, (bf16 *)qkv, ld, pos, slot,
                             inv_freq, n_heads, n_kv_heads, head_dim, *kv, layer,
                             qp ? *qp : k_dec_part{}));
  return 0;
}

extern "C" int k_rope_kv_write(void *qkv, int ld, int n_tokens, const int32_t *pos,
                               const int32_t *slot, const float *inv_freq, int n_heads,
                               int n_kv_heads, int head_dim, const k_kv_layout *kv, int layer,
                               cudaStream_t st) {
  return rope_run(qkv, ld, n_tokens, pos, slot, inv_freq, n_heads, n_kv_heads, head_dim, kv, layer,
                  nullptr, st);
}

extern "C" int k_rope_kv_write_part(void *qkv, int ld, const k_dec_part *qp, int n_tokens,
                                    const int32_t *pos, const int32_t *slot, const float *inv_freq,
                                    int n_heads, int n_kv_heads, int head_dim,
                                    const k_kv_layout *kv, int layer, cudaStream_t st) {
  if (!qp) return NS_EINVAL;
  return rope_run(qkv, ld, n_tokens, pos, slot, inv_freq, n_heads, n_kv_heads, head_dim, kv, layer,
                  qp, st);
}
