/* attention.cu — paged causal GQA attention for a ragged batch, batch-invariant: one tiled
 * kernel (FlashAttention-style: 32-key tiles in shared memory, online softmax, CUDA cores)
 * runs both prefill rows and decode rows, so a query row's output is the same bits whichever
 * path, step, chunking or batch computes it. Keys are taken in chunks of K_ATTN_CHUNK from
 * position 0; each chunk's softmax state starts afresh and the chunks are merged in order,
 * inline for prefill items, by a combine kernel for decode items (one block per chunk, the
 * flash-decoding split) — the same merge arithmetic either way. Entry points: k_attn_plan,
 * k_attention. */
#include "attention.h"

#include "k_common.cuh"

#include <math.h>

#define LOG2E 1.4426950408889634f
#define FULL  0xffffffffu

/* ---- planning (host) ------------------------------------------------------------------- */

extern "C" int k_attn_plan(int n_seqs, const int32_t *n_new, const int32_t *pos0, int n_heads,
                           int n_kv_heads, k_dec_item *dec, int max_dec, int *n_dec,
                           k_dec_seq *dseq, int *n_dseq, k_pf_item *pf, int max_pf, int *n_pf) {
  int nd = 0, nds = 0, np = 0;
  *n_dec = *n_dseq = *n_pf = 0;
  if (n_kv_heads <= 0 || n_heads % n_kv_heads) return NS_EINVAL;
  const int rpt = k_attn_pf_rows(n_heads / n_kv_heads);
  for (int s = 0; s < n_seqs; s++) {
    if (n_new[s] == 1) {
      /* one item per chunk of keys: the split depends on this sequence's length alone */
      int L = pos0[s] + 1, ns = (L + K_ATTN_CHUNK - 1) / K_ATTN_CHUNK;
      if (nd + ns > max_dec) return NS_ERANGE;
      dseq[nds++] = (k_dec_seq){s, nd, ns, 0};
      for (int i = 0; i < ns; i++) {
        int k1 = (i + 1) * K_ATTN_CHUNK < L ? (i + 1) * K_ATTN_CHUNK : L;
        dec[nd++] = (k_dec_item){s, i * K_ATTN_CHUNK, k1, ns};
      }
    } else {
      for (int i0 = 0; i0 < n_new[s]; i0 += rpt) {
        if (np >= max_pf) return NS_ERANGE;
        pf[np++] = (k_pf_item){s, i0};
      }
    }
  }
  *n_dec = nd;
  *n_dseq = nds;
  *n_pf = np;
  return 0;
}

/* ---- the kernel --------------------------------------------------------------------------- */

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
  return v;
}

/* A butterfly: every lane ends with the same bits (addition is commutative). */
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(FULL, v, o);
  return v;
}

/* Merge a chunk's softmax state (m2, l2, o2) into the running one (m, l, o), m2 > -inf: the
 * one merge rule of the prefill items (inline) and the combine kernel (explicit roundings, so
 * no contraction choice of the compiler can tell the two apart). */
__device__ __forceinline__ void merge_scale(float &m, float &l, float m2, float l2, float &c1,
                                            float &c2) {
  const float mn = fmaxf(m, m2);
  c1 = exp2f(m - mn);
  c2 = exp2f(m2 - mn);
  l = __fmaf_rn(l, c1, __fmul_rn(l2, c2));
  m = mn;
}
__device__ __forceinline__ float merge_o(float o, float o2, float c1, float c2) {
  return __fmaf_rn(o, c1, __fmul_rn(o2, c2));
}
__device__ __forceinline__ float finish(float o, float l) {
  return __fmul_rn(o, __frcp_rn(l));
}

/* Block (item, kv head, head chunk), 4 warps of 4 query vectors each (a query vector is a
 * (row, head) pair: 16 / G rows of all G heads, or one row of 16 heads). Each 32-key tile
 * of k and v is loaded once into shared memory (fp32, k rows padded for conflict-free
 * 16-byte reads); a lane scores one key against its warp's 4 queries, then every lane
 * accumulates DCH dims (lane + 32 dc) of the 4 outputs. dec 0: a prefill item (rows i0 ..,
 * every key up to the last row, chunks merged inline, outputs written); dec 1: a decode item
 * (one row, keys [k0, k1): one chunk, written as output when it is the only one, else as a
 * partial for combine_kernel). One function for both, so both run the same instructions. */
template <int DCH>
static __global__ void __launch_bounds__(128) attn_kernel(k_attn_args a, int dec) {
  extern __shared__ __align__(16) float sm[];
  const int D = a.head_dim, DS = D + 4, V8 = D >> 3, G = a.n_heads / a.n_kv_heads;
  float *q_s = sm, *k_s = q_s + 16 * D, *v_s = k_s + 32 * DS;
  const int kvh = blockIdx.y;
  int s, i0, kbeg, kend, nsplit = 1;
  if (dec) {
    const k_dec_item it = a.dec[blockIdx.x];
    s = it.seq, i0 = 0, kbeg = it.k0, kend = it.k1, nsplit = it.nsplit;
  } else {
    const k_pf_item it = a.pf[blockIdx.x];
    s = it.seq, i0 = it.i0, kbeg = 0, kend = -1;
  }
  const int n_new = a.n_new[s], pos0 = a.pos0[s], tok0 = a.tok0[s];
  const int rpt = G >= 16 ? 1 : 16 / G, g0 = blockIdx.z * 16;
  const int gn = G - g0 < 16 ? G - g0 : 16;
  const int rows = dec ? 1 : (n_new - i0 < rpt ? n_new - i0 : rpt), nqv = rows * gn;
  if (!dec) kend = pos0 + i0 + rows;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float qs = a.scale * LOG2E; /* scores in log2 units: exp2f below */
  for (int idx = tid; idx < 16 * V8; idx += blockDim.x) {
    int v = idx / V8, c = idx - v * V8;
    float f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (v < nqv) {
      int r = v / gn, g = g0 + v % gn;
      k_load8(f, (const bf16 *)a.q + (size_t)(tok0 + i0 + r) * a.ldq + (size_t)(kvh * G + g) * D +
                     c * 8);
    }
#pragma unroll
    for (int e = 0; e < 8; e++)
      q_s[v * D + c * 8 + e] = f[e] * qs;
  }
  int myp[4], wmax = -1;
#pragma unroll
  for (int qi = 0; qi < 4; qi++) {
    int v = warp * 4 + qi;
    myp[qi] = v < nqv ? pos0 + i0 + v / gn : -1;
    wmax = max(wmax, myp[qi]);
  }
  /* the running state over merged chunks (M -inf: nothing yet), and the chunk's own */
  float M[4], L[4], O[4][DCH], m[4], l[4], acc[4][DCH];
#pragma unroll
  for (int qi = 0; qi < 4; qi++) {
    M[qi] = -INFINITY;
    L[qi] = 0.0f;
#pragma unroll
    for (int dc = 0; dc < DCH; dc++)
      O[qi][dc] = 0.0f;
  }
  const int32_t *pt = a.pages + a.pt_off[s];
  const int PT = a.kv.page_tokens;
  const size_t tok = (size_t)a.kv.n_kv_heads * D;
  for (int c0 = kbeg; c0 < kend; c0 += K_ATTN_CHUNK) {
    const int c1 = c0 + K_ATTN_CHUNK < kend ? c0 + K_ATTN_CHUNK : kend;
#pragma unroll
    for (int qi = 0; qi < 4; qi++) {
      m[qi] = -INFINITY;
      l[qi] = 0.0f;
#pragma unroll
      for (int dc = 0; dc < DCH; dc++)
        acc[qi][dc] = 0.0f;
    }
    for (int kt = c0; kt < c1; kt += 32) {
      __syncthreads(); /* the previous tile is consumed (and q_s written, the first time) */
      for (int idx = tid; idx < 32 * V8; idx += blockDim.x) {
        int key = idx / V8, c = idx - key * V8, j = kt + key;
        float kf[8] = {0, 0, 0, 0, 0, 0, 0, 0}, vf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (j < c1) {
          int page = pt[j / PT], off = j % PT;
          size_t at = (size_t)off * tok + (size_t)kvh * D + c * 8;
          k_load8(kf, k_kv_page(a.kv, a.layer, 0, page) + at);
          k_load8(vf, k_kv_page(a.kv, a.layer, 1, page) + at);
        }
        float4 *kd = reinterpret_cast<float4 *>(k_s + key * DS + c * 8);
        float4 *vd = reinterpret_cast<float4 *>(v_s + key * D + c * 8);
        kd[0] = make_float4(kf[0], kf[1], kf[2], kf[3]);
        kd[1] = make_float4(kf[4], kf[5], kf[6], kf[7]);
        vd[0] = make_float4(vf[0], vf[1], vf[2], vf[3]);
        vd[1] = make_float4(vf[4], vf[5], vf[6], vf[7]);
      }
      __syncthreads();
      /* every key of the tile is in this warp's future: for each of its queries the tile
       * would change nothing (scale 1, weight 0), so skipping it changes no bit */
      if (wmax < kt) continue;
      const int j = kt + lane;
      float sc[4] = {0, 0, 0, 0};
      for (int d = 0; d < D; d += 4) {
        float4 kk = *reinterpret_cast<const float4 *>(k_s + lane * DS + d);
#pragma unroll
        for (int qi = 0; qi < 4; qi++) {
          float4 qq = *reinterpret_cast<const float4 *>(q_s + (warp * 4 + qi) * D + d);
          sc[qi] += qq.x * kk.x + qq.y * kk.y + qq.z * kk.z + qq.w * kk.w;
        }
      }
      float p[4];
#pragma unroll
      for (int qi = 0; qi < 4; qi++) {
        if (j > myp[qi]) sc[qi] = -INFINITY; /* causal mask; also invalid queries (myp -1) */
        float mn = fmaxf(m[qi], warp_max(sc[qi]));
        if (mn == -INFINITY) { /* warp-uniform: nothing visible yet */
          p[qi] = 0.0f;
          continue;
        }
        float c = exp2f(m[qi] - mn);
        p[qi] = exp2f(sc[qi] - mn);
        l[qi] = l[qi] * c + warp_sum(p[qi]);
#pragma unroll
        for (int dc = 0; dc < DCH; dc++)
          acc[qi][dc] *= c;
        m[qi] = mn;
      }
      for (int jj = 0; jj < 32; jj++) {
        float pj[4];
#pragma unroll
        for (int qi = 0; qi < 4; qi++)
          pj[qi] = __shfl_sync(FULL, p[qi], jj);
#pragma unroll
        for (int dc = 0; dc < DCH; dc++) {
          int d = lane + 32 * dc;
          if (d < D) {
            float vv = v_s[jj * D + d];
#pragma unroll
            for (int qi = 0; qi < 4; qi++)
              acc[qi][dc] += pj[qi] * vv;
          }
        }
      }
    }
    /* merge the chunk (warp-uniform branches: m, l and M are the same on every lane) */
#pragma unroll
    for (int qi = 0; qi < 4; qi++) {
      if (m[qi] == -INFINITY) continue; /* the chunk is all in this query's future */
      if (M[qi] == -INFINITY) {
        M[qi] = m[qi];
        L[qi] = l[qi];
#pragma unroll
        for (int dc = 0; dc < DCH; dc++)
          O[qi][dc] = acc[qi][dc];
        continue;
      }
      float k1, k2;
      merge_scale(M[qi], L[qi], m[qi], l[qi], k1, k2);
#pragma unroll
      for (int dc = 0; dc < DCH; dc++)
        O[qi][dc] = merge_o(O[qi][dc], acc[qi][dc], k1, k2);
    }
  }
#pragma unroll
  for (int qi = 0; qi < 4; qi++) {
    int v = warp * 4 + qi;
    if (v >= nqv) continue;
    int r = v / gn, h = kvh * G + g0 + v % gn;
    if (nsplit > 1) { /* a decode chunk: its state, merged by combine_kernel */
      size_t pi = (size_t)blockIdx.x * a.n_heads + h;
#pragma unroll
      for (int dc = 0; dc < DCH; dc++) {
        int d = lane + 32 * dc;
        if (d < D) a.part_o[pi * D + d] = O[qi][dc];
      }
      if (lane == 0) {
        a.part_ml[pi * 2] = M[qi];
        a.part_ml[pi * 2 + 1] = L[qi];
      }
      continue;
    }
    bf16 *o = (bf16 *)a.out + (size_t)(tok0 + i0 + r) * a.ldo + (size_t)h * D;
#pragma unroll
    for (int dc = 0; dc < DCH; dc++) {
      int d = lane + 32 * dc;
      if (d < D) o[d] = __float2bfloat16(finish(O[qi][dc], L[qi]));
    }
  }
}

/* Block (decode sequence, head): merge the sequence's chunk states in order, as the prefill
 * items do inline. */
static __global__ void combine_kernel(k_attn_args a) {
  const k_dec_seq ds = a.dseq[blockIdx.x];
  if (ds.nsplit <= 1) return;
  const int h = blockIdx.y, D = a.head_dim, H = a.n_heads;
  const int row = a.tok0[ds.seq];
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    size_t pi = (size_t)ds.first * H + h;
    float M = a.part_ml[pi * 2], L = a.part_ml[pi * 2 + 1], O = a.part_o[pi * D + d];
    for (int i = 1; i < ds.nsplit; i++) {
      pi = (size_t)(ds.first + i) * H + h;
      float c1, c2;
      merge_scale(M, L, a.part_ml[pi * 2], a.part_ml[pi * 2 + 1], c1, c2);
      O = merge_o(O, a.part_o[pi * D + d], c1, c2);
    }
    ((bf16 *)a.out)[(size_t)row * a.ldo + (size_t)h * D + d] = __float2bfloat16(finish(O, L));
  }
}

/* ---- launcher --------------------------------------------------------------------------- */

/* Raise a kernel's dynamic shared memory limit once, to what its largest head_dim needs. */
template <typename K> static int allow_smem(K kernel, int *done, size_t bytes) {
  if (bytes <= 48 * 1024 || *done) return 0;
  NS_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  *done = 1;
  return 0;
}

template <int DCH> static int run_attn(const k_attn_args *a, int dec, cudaStream_t st) {
  static int done;
  int G = a->n_heads / a->n_kv_heads, D = a->head_dim;
  size_t bytes = (size_t)(16 * D + 32 * (D + 4) + 32 * D) * sizeof(float);
  int dmax = 32 * DCH;
  int rc = allow_smem(attn_kernel<DCH>, &done,
                      (size_t)(16 * dmax + 32 * (dmax + 4) + 32 * dmax) * sizeof(float));
  if (rc) return rc;
  dim3 grid(dec ? a->n_dec : a->n_pf, a->n_kv_heads, G >= 16 ? (G + 15) / 16 : 1);
  attn_kernel<DCH><<<grid, 128, bytes, st>>>(*a, dec);
  K_LAUNCH_CHECK();
  return 0;
}

static int run_items(const k_attn_args *a, int dec, cudaStream_t st) {
  int D = a->head_dim;
  if (D <= 32) return run_attn<1>(a, dec, st);
  if (D <= 64) return run_attn<2>(a, dec, st);
  if (D <= 128) return run_attn<4>(a, dec, st);
  return run_attn<8>(a, dec, st);
}

extern "C" int k_attention(const k_attn_args *a, cudaStream_t st) {
  int D = a->head_dim;
  if (!a->out || !a->q || a->n_heads <= 0 || a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads ||
      a->n_heads / a->n_kv_heads > 16 || D <= 0 || D > 256 || D % 8 || a->ldq % 8 ||
      a->ldq < (a->n_heads + 2 * a->n_kv_heads) * D || a->ldo < a->n_heads * D || a->n_dec < 0 ||
      a->n_pf < 0 || a->n_dseq < 0 || a->n_dseq > a->n_dec || a->kv.head_dim != D ||
      a->kv.n_kv_heads != a->n_kv_heads || a->layer < 0 || a->layer >= a->kv.n_layers ||
      a->kv.page_tokens <= 0 || !k_aligned(a->q, 16) || a->n_kv_heads > 65535)
    return NS_EINVAL;
  if ((a->n_dec && (!a->dec || !a->dseq)) || (a->n_pf && !a->pf) ||
      (a->n_dec > a->n_dseq && (!a->part_o || !a->part_ml)))
    return NS_EINVAL;
  int rc = 0;
  if (a->n_dec > 0) {
    if ((rc = run_items(a, 1, st))) return rc;
    if (a->n_dec > a->n_dseq) {
      combine_kernel<<<dim3(a->n_dseq, a->n_heads), 128, 0, st>>>(*a);
      K_LAUNCH_CHECK();
    }
  }
  if (a->n_pf > 0) rc = run_items(a, 0, st);
  return rc;
}
