/* sample.cu — the GPU sampler: plain greedy requests (greedy_kernel) on a cluster of blocks a
 * row, the others on one 1024-thread block per request over a scratch copy of its logits row. Cuts
 * are found without sorting: top-k by an 8-bit radix select on order-preserving keys, top-p by a
 * 4-bit radix descent on probability mass; every sum is a fixed-order block reduction, so results
 * are deterministic. Entry point: k_sample. */
#include "sample.h"

#include "k_common.cuh"

#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <limits.h>
#include <math.h>

#define SB   1024
#define SEEN 0x80000000u
#define FULL 0xffffffffu

extern "C" void k_samp_req_init(k_samp_req *r, int row, const samp_params *p, uint64_t step,
                                int hist_off, int n_hist, int n_prompt, int bias_off) {
  r->row = row;
  r->top_k = p->top_k;
  r->n_logprobs = p->n_logprobs;
  r->temperature = p->temperature;
  r->top_p = p->top_p;
  r->min_p = p->min_p;
  r->rep = p->repetition_penalty;
  r->pres = p->presence_penalty;
  r->freq = p->frequency_penalty;
  r->seed_lo = (uint32_t)p->seed;
  r->seed_hi = (uint32_t)(p->seed >> 32);
  r->step_lo = (uint32_t)step;
  r->step_hi = (uint32_t)(step >> 32);
  r->hist_off = hist_off;
  r->n_hist = n_hist;
  r->n_prompt = n_prompt;
  r->bias_off = bias_off;
  r->n_bias = p->n_bias;
}

/* ---- helpers ------------------------------------------------------------------------------- */

/* Order-preserving map of a float (not NaN) to uint32, and back. */
__device__ __forceinline__ uint32_t fkey(float f) {
  uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float fval(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* Philox4x32-10, word 0, as ref_philox4x32_10. */
__device__ float philox_uniform(uint32_t s0, uint32_t s1, uint32_t c0, uint32_t c1) {
  uint32_t c2 = 0, c3 = 0, k0 = s0, k1 = s1;
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  return (float)(c0 >> 8) * (1.0f / 16777216.0f);
}

/* (value, id) ranked as the reference: larger value first, lower id on ties. */
struct vid {
  float v;
  int i;
};
struct vid_better {
  __device__ __forceinline__ vid operator()(const vid &a, const vid &b) const {
    return (a.v > b.v || (a.v == b.v && a.i < b.i)) ? a : b;
  }
};

struct fmax_op {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct imin_op {
  __device__ __forceinline__ int operator()(int a, int b) const { return a < b ? a : b; }
};
struct imax_op {
  __device__ __forceinline__ int operator()(int a, int b) const { return a > b ? a : b; }
};

typedef cub::BlockReduce<float, SB> red_f;
typedef cub::BlockReduce<int, SB> red_i;
typedef cub::BlockReduce<vid, SB> red_v;
typedef cub::BlockScan<float, SB> scan_f;
typedef cub::BlockScan<int, SB> scan_i;

struct smem_t {
  union {
    red_f::TempStorage rf;
    red_i::TempStorage ri;
    red_v::TempStorage rv;
    scan_f::TempStorage sf;
    scan_i::TempStorage si;
  } t;
  int hist[256];
  float wbins[SB / 32][16];
  float bins[16];
  float f0;
  int i0;
  uint32_t u0;
  vid b0;
};

/* Block-wide results broadcast to every thread (each call ends with a barrier): thread 0's r,
 * through the shared slot. */
template <typename T> __device__ T bcast(T r, T &slot) {
  if (threadIdx.x == 0) slot = r;
  __syncthreads();
  r = slot;
  __syncthreads();
  return r;
}
__device__ float bsum(smem_t &s, float x) {
  return bcast(red_f(s.t.rf).Sum(x), s.f0);
}
__device__ float bmax(smem_t &s, float x) {
  return bcast(red_f(s.t.rf).Reduce(x, fmax_op()), s.f0);
}
__device__ int bsumi(smem_t &s, int x) {
  return bcast(red_i(s.t.ri).Sum(x), s.i0);
}
__device__ int bmini(smem_t &s, int x) {
  return bcast(red_i(s.t.ri).Reduce(x, imin_op()), s.i0);
}
__device__ int bmaxi(smem_t &s, int x) {
  return bcast(red_i(s.t.ri).Reduce(x, imax_op()), s.i0);
}
__device__ vid bbest(smem_t &s, vid x) {
  return bcast(red_v(s.t.rv).Reduce(x, vid_better()), s.b0);
}

/* b updated with entry (x, i), ids seen in ascending order: NaN and -inf never rank, ties
 * keep the lower id. */
__device__ __forceinline__ void vid_see(vid &b, float x, int i) {
  if (x > -INFINITY && (x > b.v || b.i == INT_MAX)) b = {x, i};
}

/* The best-ranked finite entry (-inf, INT_MAX when none). */
__device__ vid argmax(smem_t &s, const float *v, int V) {
  vid b = {-INFINITY, INT_MAX};
  for (int i = threadIdx.x; i < V; i += SB)
    vid_see(b, v[i], i);
  return bbest(s, b);
}

/* ---- cuts ---------------------------------------------------------------------------------- */

/* Ties at key T cut in id order: tie number idx (0-based, lowest id first) stays when keep
 * says so. Ids are walked in per-thread contiguous chunks so the order is the vocabulary's. */
template <typename F> __device__ void cut_ties(smem_t &s, float *v, int V, uint32_t T, F keep) {
  int C = (V + SB - 1) / SB, b = threadIdx.x * C, e = min(b + C, V), n = 0;
  for (int i = b; i < e; i++)
    n += v[i] > -INFINITY && fkey(v[i]) == T;
  int before;
  scan_i(s.t.si).ExclusiveSum(n, before);
  __syncthreads();
  for (int i = b; i < e; i++) {
    if (!(v[i] > -INFINITY) || fkey(v[i]) != T) continue;
    if (!keep(before)) v[i] = -INFINITY;
    before++;
  }
  __syncthreads();
}

/* Keep the k best-ranked candidates (0 < k < number of candidates). */
__device__ void top_k(smem_t &s, float *v, int V, int k) {
  uint32_t prefix = 0, pmask = 0;
  int rem = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += SB)
      s.hist[i] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < V; i += SB) {
      float x = v[i];
      if (!(x > -INFINITY)) continue;
      uint32_t key = fkey(x);
      if ((key & pmask) == prefix) atomicAdd(&s.hist[(key >> shift) & 255], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int sel = 0;
      for (int d = 255; d >= 0; d--) {
        if (rem <= s.hist[d]) {
          sel = d;
          break;
        }
        rem -= s.hist[d];
      }
      s.u0 = prefix | ((uint32_t)sel << shift);
      s.i0 = rem;
    }
    __syncthreads();
    prefix = s.u0;
    rem = s.i0;
    pmask |= 255u << shift;
    __syncthreads();
  }
  const uint32_t T = prefix;
  for (int i = threadIdx.x; i < V; i += SB)
    if (v[i] > -INFINITY && fkey(v[i]) < T) v[i] = -INFINITY;
  __syncthreads();
  const int need = rem;
  cut_ties(s, v, V, T, [need](int idx) { return idx < need; });
}

/* Keep the best-ranked candidates while the mass ranked before them is < top_p * total. */
__device__ void top_p(smem_t &s, float *v, int V, float m, float p) {
  float tot = 0.0f;
  for (int i = threadIdx.x; i < V; i += SB)
    if (v[i] > -INFINITY) tot += expf(v[i] - m);
  const float lim = p * bsum(s, tot);
  uint32_t prefix = 0, pmask = 0;
  float above = 0.0f; /* mass of the candidates above the current prefix */
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int shift = 28; shift >= 0; shift -= 4) {
    float acc[16];
#pragma unroll
    for (int d = 0; d < 16; d++)
      acc[d] = 0.0f;
    if (threadIdx.x < 16) s.hist[threadIdx.x] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < V; i += SB) {
      float x = v[i];
      if (!(x > -INFINITY)) continue;
      uint32_t key = fkey(x);
      if ((key & pmask) != prefix) continue;
      int dig = (key >> shift) & 15;
      float e = expf(x - m);
#pragma unroll
      for (int d = 0; d < 16; d++) /* predicated adds: fixed order, no atomics on floats */
        acc[d] += dig == d ? e : 0.0f;
      atomicAdd(&s.hist[dig], 1);
    }
#pragma unroll
    for (int d = 0; d < 16; d++) {
      float a = acc[d];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        a += __shfl_xor_sync(FULL, a, o);
      if (lane == 0) s.wbins[warp][d] = a;
    }
    __syncthreads();
    if (threadIdx.x < 16) {
      float a = 0.0f;
      for (int w = 0; w < SB / 32; w++)
        a += s.wbins[w][threadIdx.x];
      s.bins[threadIdx.x] = a;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int sel = -1, low = 0;
      for (int d = 15; d >= 0; d--) {
        if (!s.hist[d]) continue;
        low = d;
        if (above + s.bins[d] >= lim) {
          sel = d;
          break;
        }
        above += s.bins[d];
      }
      if (sel < 0) { /* rounding: the mass never reached lim; keep everything */
        sel = low;
        above -= s.bins[low];
      }
      s.u0 = prefix | ((uint32_t)sel << shift);
      s.f0 = above;
    }
    __syncthreads();
    prefix = s.u0;
    above = s.f0;
    pmask |= 15u << shift;
    __syncthreads();
  }
  const uint32_t T = prefix, top = fkey(m);
  for (int i = threadIdx.x; i < V; i += SB)
    if (v[i] > -INFINITY && fkey(v[i]) < T) v[i] = -INFINITY;
  __syncthreads();
  const float eT = expf(fval(T) - m);
  cut_ties(s, v, V, T, [=](int idx) {
    return above + (float)idx * eT < lim || (T == top && idx == 0); /* the first always stays */
  });
}

/* ---- the kernel ------------------------------------------------------------------------------ */

/* A request that needs the best id and its logprob only: no temperature (greedy), no bias or
 * penalty in effect, no top logprobs. greedy_kernel takes these; sample_kernel skips them. */
__device__ __forceinline__ bool plain_greedy(const k_samp_req &q) {
  const bool pen = (q.rep != 1.0f || q.pres != 0.0f || q.freq != 0.0f) && q.n_hist > 0;
  return !(q.temperature > 0.0f) && q.n_logprobs <= 0 && !pen && q.n_bias <= 0;
}

/* ---- plain greedy requests: a cluster of GC blocks a row -------------------------------------
 * One block streamed a whole row (a 128k vocabulary: 44 us a batch-1 step on an H200); here
 * block c of the request's cluster takes part c of the row: its best (the reference's rank:
 * finite or +inf values, larger first, lower id on ties), the cluster's best m read by every
 * block from the others' shared memory in rank order, then each block's sum of expf(v - m)
 * over its part (held in registers: GPT values a thread, read again past GC * GB * GPT), and
 * block 0 adds the GC sums in rank order: logprob = m - (m + log(total)), as sample_kernel
 * (the sum in another order: logprobs to rounding). */
#define GC  8
#define GB  512
#define GPT 32
typedef cub::BlockReduce<vid, GB> gred_v;
typedef cub::BlockReduce<float, GB> gred_f;

static __global__ void __cluster_dims__(GC, 1, 1) __launch_bounds__(GB)
    greedy_kernel(const float *logits, int ld, int V, const k_samp_req *reqs, k_samp_out *outs) {
  namespace cg = cooperative_groups;
  __shared__ union {
    gred_v::TempStorage v;
    gred_f::TempStorage f;
  } tmp;
  __shared__ vid best_s; /* this block's best, read by every block of the cluster */
  __shared__ float sum_s;
  /* sample_kernel, launched next, waits for this grid before it reads anything; with few rows
   * its blocks are scheduled now, so that they are there when this one ends */
  k_pdl_enter((int)gridDim.y);
  const k_samp_req q = reqs[blockIdx.y];
  if (!plain_greedy(q)) return; /* the whole cluster: the request is the same */
  cg::cluster_group cl = cg::this_cluster();
  const int c = (int)cl.block_rank(), per = (V + GC - 1) / GC, b = c * per;
  const int e = min(V, b + per), tid = threadIdx.x;
  const float *lg = logits + (size_t)q.row * ld;
  float x[GPT];
  vid bt = {-INFINITY, INT_MAX};
#pragma unroll
  for (int j = 0; j < GPT; j++) {
    const int i = b + tid + j * GB;
    x[j] = i < e ? lg[i] : -INFINITY; /* past the part: adds expf(-inf) = 0 below */
  }
#pragma unroll
  for (int j = 0; j < GPT; j++)
    vid_see(bt, x[j], b + tid + j * GB);
  for (int i = b + tid + GPT * GB; i < e; i += GB)
    vid_see(bt, lg[i], i);
  bt = gred_v(tmp.v).Reduce(bt, vid_better());
  if (tid == 0) best_s = bt;
  cl.sync();
  vid best = *cl.map_shared_rank(&best_s, 0);
  for (int r = 1; r < GC; r++)
    best = vid_better()(best, *cl.map_shared_rank(&best_s, (unsigned)r));
  const float m = best.v;
  float tot = 0.0f;
  if (best.i != INT_MAX) {
#pragma unroll
    for (int j = 0; j < GPT; j++)
      tot += expf(x[j] - m);
    for (int i = b + tid + GPT * GB; i < e; i += GB)
      tot += expf(lg[i] - m);
  }
  __syncthreads(); /* tmp is reused */
  tot = gred_f(tmp.f).Sum(tot);
  if (tid == 0) sum_s = tot;
  cl.sync(); /* every block's sum written; every block done with best_s */
  if (c == 0 && tid == 0) {
    k_samp_out *out = &outs[blockIdx.y];
    out->n_top = 0;
    if (best.i == INT_MAX) { /* no finite logit (vid_see ranks no NaN) */
      out->id = -1;
      out->logprob = NAN;
      out->status = NS_EINVAL;
    } else {
      float total = 0.0f;
      for (int r = 0; r < GC; r++)
        total += *cl.map_shared_rank(&sum_s, (unsigned)r);
      out->id = best.i;
      out->logprob = m - (m + logf(total));
      out->status = 0;
    }
  }
  cl.sync(); /* block 0 has read the others' sums */
}

static __global__ void __launch_bounds__(SB)
    sample_kernel(const float *logits, int ld, int V, const k_samp_req *reqs, const int32_t *hist,
                  float *scratch_v, uint32_t *scratch_cnt, k_samp_out *outs) {
  __shared__ smem_t s;
  k_pdl_wait();
  const k_samp_req q = reqs[blockIdx.x];
  if (plain_greedy(q)) return; /* greedy_kernel's */
  k_samp_out *out = &outs[blockIdx.x];
  float *v = scratch_v + (size_t)blockIdx.x * V;
  const float *lg = logits + (size_t)q.row * ld;
  for (int i = threadIdx.x; i < V; i += SB)
    v[i] = lg[i];
  __syncthreads();

  /* the logit bias, then the penalties, exactly as ref_sample_penalize (no fused multiply-add);
   * a request's bias ids are distinct, so no two threads add to one logit */
  if (q.n_bias > 0) {
    const int32_t *bb = hist + q.bias_off;
    for (int i = threadIdx.x; i < q.n_bias; i += SB)
      v[bb[2 * i]] = __fadd_rn(v[bb[2 * i]], __int_as_float(bb[2 * i + 1]));
    __syncthreads();
  }

  const bool rep = q.rep != 1.0f, pf = q.pres != 0.0f || q.freq != 0.0f;
  if ((rep || pf) && q.n_hist > 0) {
    uint32_t *cnt = scratch_cnt + (size_t)blockIdx.x * V;
    const int32_t *h = hist + q.hist_off;
    int np = q.n_prompt < q.n_hist ? q.n_prompt : q.n_hist;
    for (int i = threadIdx.x; i < q.n_hist; i += SB)
      cnt[h[i]] = 0;
    __syncthreads();
    for (int i = np + threadIdx.x; i < q.n_hist; i += SB)
      atomicAdd(&cnt[h[i]], 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < q.n_hist; i += SB) {
      uint32_t c = atomicOr(&cnt[h[i]], SEEN);
      if (c & SEEN) continue; /* another thread owns this id */
      float l = v[h[i]];
      if (rep) l = l < 0.0f ? __fmul_rn(l, q.rep) : __fdiv_rn(l, q.rep);
      if (c) l = __fsub_rn(l, __fadd_rn(__fmul_rn((float)c, q.freq), q.pres));
      v[h[i]] = l;
    }
    __syncthreads();
  }

  if (q.temperature > 0.0f) {
    for (int i = threadIdx.x; i < V; i += SB)
      v[i] = __fdiv_rn(v[i], q.temperature);
    __syncthreads();
    int n = 0;
    for (int i = threadIdx.x; i < V; i += SB)
      n += v[i] > -INFINITY;
    n = bsumi(s, n);
    if (q.top_k > 0 && q.top_k < n) top_k(s, v, V, q.top_k);
    if (q.top_p < 1.0f && n > 0) top_p(s, v, V, argmax(s, v, V).v, q.top_p);
    if (q.min_p > 0.0f && n > 0) {
      float m = argmax(s, v, V).v;
      for (int i = threadIdx.x; i < V; i += SB)
        if (v[i] > -INFINITY && expf(v[i] - m) < q.min_p) v[i] = -INFINITY;
      __syncthreads();
    }
  }
  const vid best = argmax(s, v, V);
  if (best.i == INT_MAX || isnan(best.v)) {
    if (threadIdx.x == 0) {
      out->id = -1;
      out->logprob = NAN;
      out->status = NS_EINVAL;
      out->n_top = 0;
    }
    return;
  }
  const float m = best.v;
  float tot = 0.0f;
  for (int i = threadIdx.x; i < V; i += SB)
    tot += expf(v[i] - m);
  const float total = bsum(s, tot);

  int pick = best.i;
  if (q.temperature > 0.0f) {
    /* inverse CDF in vocabulary order: per-thread contiguous chunks, one block scan */
    const float target = philox_uniform(q.seed_lo, q.seed_hi, q.step_lo, q.step_hi) * total;
    int C = (V + SB - 1) / SB, b = threadIdx.x * C, e = min(b + C, V), last = -1;
    float mine = 0.0f;
    for (int i = b; i < e; i++)
      if (v[i] != -INFINITY) mine += expf(v[i] - m);
    float cum;
    scan_f(s.t.sf).ExclusiveSum(mine, cum);
    __syncthreads();
    int hit = INT_MAX;
    for (int i = b; i < e; i++) {
      if (v[i] == -INFINITY) continue;
      last = i;
      cum += expf(v[i] - m);
      if (cum > target) {
        hit = i;
        break;
      }
    }
    hit = bmini(s, hit);
    pick = hit != INT_MAX ? hit : bmaxi(s, last);
  }
  const float lse = m + logf(total);
  int n_top = min(min(q.n_logprobs, V), SAMP_MAX_LOGPROBS);
  if (threadIdx.x == 0) {
    out->id = pick;
    out->logprob = v[pick] - lse;
    out->status = 0;
    out->n_top = n_top > 0 ? n_top : 0;
  }
  /* top n by rank (-inf entries included, as the reference), one pass each */
  vid prev = {INFINITY, -1};
  for (int j = 0; j < n_top; j++) {
    vid b = {-INFINITY, INT_MAX};
    bool have = false;
    for (int i = threadIdx.x; i < V; i += SB) {
      float x = v[i];
      if (isnan(x)) continue;
      bool after = x < prev.v || (x == prev.v && i > prev.i);
      if (!after) continue;
      if (!have || x > b.v || (x == b.v && i < b.i)) b = {x, i};
      have = true;
    }
    prev = bbest(s, b);
    if (threadIdx.x == 0) {
      out->top_ids[j] = prev.i;
      out->top_lp[j] = prev.v - lse;
    }
  }
}

extern "C" int k_sample(const float *logits, int ld, int vocab, const k_samp_req *reqs, int n_reqs,
                        const int32_t *hist, float *scratch_v, uint32_t *scratch_cnt,
                        int scratch_rows, k_samp_out *out, cudaStream_t st) {
  if (!logits || vocab <= 0 || ld < vocab || n_reqs < 0 || !reqs || !scratch_v || !scratch_cnt ||
      scratch_rows <= 0 || !out)
    return NS_EINVAL;
  for (int r0 = 0; r0 < n_reqs; r0 += 65535) { /* the grid's y limit */
    const int n = n_reqs - r0 < 65535 ? n_reqs - r0 : 65535;
    NS_CUDA_CHECK(k_launch_pdl(greedy_kernel, dim3(GC, (unsigned)n), dim3(GB), 0, st, logits, ld,
                               vocab, reqs + r0, out + r0));
  }
  for (int r0 = 0; r0 < n_reqs; r0 += scratch_rows) {
    int n = n_reqs - r0 < scratch_rows ? n_reqs - r0 : scratch_rows;
    NS_CUDA_CHECK(k_launch_pdl(sample_kernel, dim3(n), dim3(SB), 0, st, logits, ld, vocab,
                               reqs + r0, hist, scratch_v, scratch_cnt, out + r0));
  }
  return 0;
}
