/* attention.cu — paged causal GQA attention for a ragged batch: a split-K decode kernel
 * (flash-decoding: one block per key range and kv head, online softmax, partials merged by
 * a combine kernel), and a tiled prefill kernel (FlashAttention-style: 32-key tiles in
 * shared memory, no score matrix in memory; CUDA cores for now). Entry points: k_attn_plan,
 * k_attention. */
#include "attention.h"

#include "k_common.cuh"

#include <math.h>

#define LOG2E 1.4426950408889634f
#define FULL  0xffffffffu

/* ---- planning (host) ------------------------------------------------------------------- */

extern "C" int k_attn_plan(int n_seqs, const int32_t *n_new, const int32_t *pos0, int n_heads,
                           int n_kv_heads, int n_sm, k_dec_item *dec, int max_dec, int *n_dec,
                           k_dec_seq *dseq, int *n_dseq, k_pf_item *pf, int max_pf, int *n_pf) {
  int nd = 0, nds = 0, np = 0, dec_seqs = 0;
  *n_dec = *n_dseq = *n_pf = 0;
  if (n_kv_heads <= 0 || n_heads % n_kv_heads) return NS_EINVAL;
  for (int s = 0; s < n_seqs; s++)
    dec_seqs += n_new[s] == 1;
  int want = 1, rpt = k_attn_pf_rows(n_heads / n_kv_heads);
  if (dec_seqs) {
    /* split long contexts until the launch has about two blocks per multiprocessor */
    long base = (long)dec_seqs * n_kv_heads;
    want = (int)((2L * (n_sm > 0 ? n_sm : 1) + base - 1) / base);
  }
  for (int s = 0; s < n_seqs; s++) {
    if (n_new[s] == 1) {
      int L = pos0[s] + 1;
      int ns = (L + 127) / 128 < want ? (L + 127) / 128 : want;
      ns = ns < 1 ? 1 : ns;
      int len = ((L + ns - 1) / ns + 31) / 32 * 32;
      ns = (L + len - 1) / len;
      if (nd + ns > max_dec) return NS_ERANGE;
      dseq[nds++] = (k_dec_seq){s, nd, ns, 0};
      for (int i = 0; i < ns; i++) {
        int k1 = (i + 1) * len < L ? (i + 1) * len : L;
        dec[nd++] = (k_dec_item){s, i * len, k1, ns};
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

/* ---- decode ------------------------------------------------------------------------------ */

/* Block (item, kv head), 128 threads. A key is read by tpk lanes (8 dims each: tpk is the
 * power of two >= head_dim / 8); every lane group keeps its own online-softmax state for
 * the GP >= G query heads of the kv head, merged across groups, then warps, at the end. */
template <int GP> static __global__ void __launch_bounds__(128) decode_kernel(k_attn_args a) {
  extern __shared__ float smem[];
  const k_dec_item it = a.dec[blockIdx.x];
  const int kvh = blockIdx.y, D = a.head_dim, V8 = D >> 3, G = a.n_heads / a.n_kv_heads;
  int tpk = 1;
  while (tpk < V8)
    tpk <<= 1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sub = lane & (tpk - 1), grp = threadIdx.x / tpk, ngrp = blockDim.x / tpk;
  const bool act = sub < V8;
  const int s = it.seq, row = a.tok0[s];
  const float qs = a.scale * LOG2E; /* scores in log2 units: exp2f below */
  const bf16 *qrow = (const bf16 *)a.q + (size_t)row * a.ldq + (size_t)kvh * G * D + sub * 8;
  float q[GP][8], o[GP][8], m[GP], l[GP];
#pragma unroll
  for (int g = 0; g < GP; g++) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; e++)
      q[g][e] = o[g][e] = 0.0f;
    if (g < G && act) {
      k_load8(q[g], qrow + (size_t)g * D);
#pragma unroll
      for (int e = 0; e < 8; e++)
        q[g][e] *= qs;
    }
  }
  const int32_t *pt = a.pages + a.pt_off[s];
  const int PT = a.kv.page_tokens;
  const size_t tok = (size_t)a.kv.n_kv_heads * D, head = (size_t)kvh * D + sub * 8;
  for (int j0 = it.k0; j0 < it.k1; j0 += ngrp) { /* uniform trip count: shuffles inside */
    const int j = j0 + grp;
    const bool valid = j < it.k1;
    float kf[8], vf[8];
    if (valid && act) {
      int page = pt[j / PT], off = j % PT;
      size_t at = (size_t)off * tok + head;
      k_load8(kf, k_kv_page(a.kv, a.layer, 0, page) + at);
      k_load8(vf, k_kv_page(a.kv, a.layer, 1, page) + at);
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++)
        kf[e] = vf[e] = 0.0f;
    }
    float sc[GP];
#pragma unroll
    for (int g = 0; g < GP; g++) {
      float d = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; e++)
        d += q[g][e] * kf[e];
      sc[g] = d;
    }
    for (int w = 1; w < tpk; w <<= 1)
#pragma unroll
      for (int g = 0; g < GP; g++)
        sc[g] += __shfl_xor_sync(FULL, sc[g], w);
    if (valid) {
#pragma unroll
      for (int g = 0; g < GP; g++) {
        if (g >= G) break;
        float mn = fmaxf(m[g], sc[g]);
        float c = exp2f(m[g] - mn), p = exp2f(sc[g] - mn);
        l[g] = l[g] * c + p;
#pragma unroll
        for (int e = 0; e < 8; e++)
          o[g][e] = o[g][e] * c + p * vf[e];
        m[g] = mn;
      }
    }
  }
  /* merge the lane groups of each warp */
  for (int off = tpk; off < 32; off <<= 1) {
#pragma unroll
    for (int g = 0; g < GP; g++) {
      float m2 = __shfl_xor_sync(FULL, m[g], off), l2 = __shfl_xor_sync(FULL, l[g], off);
      float mn = fmaxf(m[g], m2);
      float c1 = mn == -INFINITY ? 0.0f : exp2f(m[g] - mn);
      float c2 = mn == -INFINITY ? 0.0f : exp2f(m2 - mn);
      l[g] = l[g] * c1 + l2 * c2;
#pragma unroll
      for (int e = 0; e < 8; e++) {
        float o2 = __shfl_xor_sync(FULL, o[g][e], off);
        o[g][e] = o[g][e] * c1 + o2 * c2;
      }
      m[g] = mn;
    }
  }
  /* then the warps, through shared memory: os [4][G][D], ms [4][G], ls [4][G] */
  float *os = smem, *ms = os + 4 * G * D, *ls = ms + 4 * G;
  if (lane < tpk) {
#pragma unroll
    for (int g = 0; g < GP; g++) {
      if (g >= G) break;
      if (act)
#pragma unroll
        for (int e = 0; e < 8; e++)
          os[(warp * G + g) * D + sub * 8 + e] = o[g][e];
      if (lane == 0) {
        ms[warp * G + g] = m[g];
        ls[warp * G + g] = l[g];
      }
    }
  }
  __syncthreads();
  const int nw = blockDim.x >> 5;
  for (int idx = threadIdx.x; idx < G * D; idx += blockDim.x) {
    int g = idx / D, d = idx - g * D, h = kvh * G + g;
    float M = -INFINITY, L = 0.0f, O = 0.0f;
    for (int w = 0; w < nw; w++)
      M = fmaxf(M, ms[w * G + g]);
    for (int w = 0; w < nw; w++) {
      float c = ms[w * G + g] == -INFINITY ? 0.0f : exp2f(ms[w * G + g] - M);
      L += ls[w * G + g] * c;
      O += os[(w * G + g) * D + d] * c;
    }
    if (it.nsplit == 1) {
      ((bf16 *)a.out)[(size_t)row * a.ldo + (size_t)h * D + d] = __float2bfloat16(O / L);
    } else {
      size_t pi = (size_t)blockIdx.x * a.n_heads + h;
      a.part_o[pi * D + d] = O;
      if (d == 0) {
        a.part_ml[pi * 2] = M;
        a.part_ml[pi * 2 + 1] = L;
      }
    }
  }
}

/* Block (decode sequence, head): merge the sequence's split partials. */
static __global__ void combine_kernel(k_attn_args a) {
  const k_dec_seq ds = a.dseq[blockIdx.x];
  if (ds.nsplit <= 1) return;
  const int h = blockIdx.y, D = a.head_dim, H = a.n_heads;
  const int row = a.tok0[ds.seq];
  float M = -INFINITY, L = 0.0f;
  for (int i = 0; i < ds.nsplit; i++)
    M = fmaxf(M, a.part_ml[((size_t)(ds.first + i) * H + h) * 2]);
  for (int i = 0; i < ds.nsplit; i++) {
    const float *ml = a.part_ml + ((size_t)(ds.first + i) * H + h) * 2;
    L += ml[1] * exp2f(ml[0] - M);
  }
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float O = 0.0f;
    for (int i = 0; i < ds.nsplit; i++) {
      size_t pi = (size_t)(ds.first + i) * H + h;
      O += a.part_o[pi * D + d] * exp2f(a.part_ml[pi * 2] - M);
    }
    ((bf16 *)a.out)[(size_t)row * a.ldo + (size_t)h * D + d] = __float2bfloat16(O / L);
  }
}

/* ---- prefill ------------------------------------------------------------------------------ */

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(FULL, v, o);
  return v;
}

/* Block (item, kv head, head chunk), 4 warps of 4 query vectors each (a query vector is a
 * (row, head) pair: 16 / G rows of all G heads, or one row of 16 heads). Each 32-key tile
 * of k and v is loaded once into shared memory (fp32, k rows padded for conflict-free
 * 16-byte reads); a lane scores one key against its warp's 4 queries, then every lane
 * accumulates DCH dims (lane + 32 dc) of the 4 outputs. */
template <int DCH> static __global__ void __launch_bounds__(128) prefill_kernel(k_attn_args a) {
  extern __shared__ __align__(16) float sm[];
  const int D = a.head_dim, DS = D + 4, V8 = D >> 3, G = a.n_heads / a.n_kv_heads;
  float *q_s = sm, *k_s = q_s + 16 * D, *v_s = k_s + 32 * DS;
  const k_pf_item it = a.pf[blockIdx.x];
  const int kvh = blockIdx.y, s = it.seq;
  const int n_new = a.n_new[s], pos0 = a.pos0[s], tok0 = a.tok0[s];
  const int rpt = G >= 16 ? 1 : 16 / G, g0 = blockIdx.z * 16;
  const int gn = G - g0 < 16 ? G - g0 : 16;
  const int rows = n_new - it.i0 < rpt ? n_new - it.i0 : rpt, nqv = rows * gn;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float qs = a.scale * LOG2E;
  for (int idx = tid; idx < 16 * V8; idx += blockDim.x) {
    int v = idx / V8, c = idx - v * V8;
    float f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (v < nqv) {
      int r = v / gn, g = g0 + v % gn;
      k_load8(f, (const bf16 *)a.q + (size_t)(tok0 + it.i0 + r) * a.ldq +
                     (size_t)(kvh * G + g) * D + c * 8);
    }
#pragma unroll
    for (int e = 0; e < 8; e++)
      q_s[v * D + c * 8 + e] = f[e] * qs;
  }
  int myp[4], wmax = -1;
#pragma unroll
  for (int qi = 0; qi < 4; qi++) {
    int v = warp * 4 + qi;
    myp[qi] = v < nqv ? pos0 + it.i0 + v / gn : -1;
    wmax = max(wmax, myp[qi]);
  }
  const int n_keys = pos0 + it.i0 + rows;
  float m[4], l[4], acc[4][DCH];
#pragma unroll
  for (int qi = 0; qi < 4; qi++) {
    m[qi] = -INFINITY;
    l[qi] = 0.0f;
#pragma unroll
    for (int dc = 0; dc < DCH; dc++)
      acc[qi][dc] = 0.0f;
  }
  const int32_t *pt = a.pages + a.pt_off[s];
  const int PT = a.kv.page_tokens;
  const size_t tok = (size_t)a.kv.n_kv_heads * D;
  for (int kt = 0; kt < n_keys; kt += 32) {
    __syncthreads(); /* the previous tile is consumed (and q_s written, the first time) */
    for (int idx = tid; idx < 32 * V8; idx += blockDim.x) {
      int key = idx / V8, c = idx - key * V8, j = kt + key;
      float kf[8] = {0, 0, 0, 0, 0, 0, 0, 0}, vf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (j < n_keys) {
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
    if (wmax < kt) continue; /* every key of the tile is in this warp's future */
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
#pragma unroll
  for (int qi = 0; qi < 4; qi++) {
    int v = warp * 4 + qi;
    if (v >= nqv) continue;
    int r = v / gn, h = kvh * G + g0 + v % gn;
    bf16 *o = (bf16 *)a.out + (size_t)(tok0 + it.i0 + r) * a.ldo + (size_t)h * D;
    float inv = 1.0f / l[qi];
#pragma unroll
    for (int dc = 0; dc < DCH; dc++) {
      int d = lane + 32 * dc;
      if (d < D) o[d] = __float2bfloat16(acc[qi][dc] * inv);
    }
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

template <int GP> static int run_decode(const k_attn_args *a, cudaStream_t st) {
  static int done;
  int G = a->n_heads / a->n_kv_heads, D = a->head_dim;
  size_t bytes = (size_t)(4 * G * D + 8 * G) * sizeof(float);
  int rc = allow_smem(decode_kernel<GP>, &done, (size_t)(4 * GP * 256 + 8 * GP) * sizeof(float));
  if (rc) return rc;
  decode_kernel<GP><<<dim3(a->n_dec, a->n_kv_heads), 128, bytes, st>>>(*a);
  K_LAUNCH_CHECK();
  return 0;
}

template <int DCH> static int run_prefill(const k_attn_args *a, cudaStream_t st) {
  static int done;
  int G = a->n_heads / a->n_kv_heads, D = a->head_dim;
  size_t bytes = (size_t)(16 * D + 32 * (D + 4) + 32 * D) * sizeof(float);
  int dmax = 32 * DCH;
  int rc = allow_smem(prefill_kernel<DCH>, &done,
                      (size_t)(16 * dmax + 32 * (dmax + 4) + 32 * dmax) * sizeof(float));
  if (rc) return rc;
  dim3 grid(a->n_pf, a->n_kv_heads, G >= 16 ? (G + 15) / 16 : 1);
  prefill_kernel<DCH><<<grid, 128, bytes, st>>>(*a);
  K_LAUNCH_CHECK();
  return 0;
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
  int rc = 0, G = a->n_heads / a->n_kv_heads;
  if (a->n_dec > 0) {
    if (G <= 1)
      rc = run_decode<1>(a, st);
    else if (G <= 2)
      rc = run_decode<2>(a, st);
    else if (G <= 4)
      rc = run_decode<4>(a, st);
    else if (G <= 8)
      rc = run_decode<8>(a, st);
    else
      rc = run_decode<16>(a, st);
    if (rc) return rc;
    if (a->n_dec > a->n_dseq) {
      combine_kernel<<<dim3(a->n_dseq, a->n_heads), 128, 0, st>>>(*a);
      K_LAUNCH_CHECK();
    }
  }
  if (a->n_pf > 0) {
    if (D <= 32)
      rc = run_prefill<1>(a, st);
    else if (D <= 64)
      rc = run_prefill<2>(a, st);
    else if (D <= 128)
      rc = run_prefill<4>(a, st);
    else
      rc = run_prefill<8>(a, st);
  }
  return rc;
}
