/* bench_persist.cu — how close a batch-1 decode step written as one persistent kernel could get
 * to the copy bandwidth: a model's layers (q|k|v, o, gate|up and down as matrix-vector products
 * over bf16 weights of the shape's sizes) in one cooperative launch of one block a
 * multiprocessor. Each block owns a contiguous share of every matrix's rows; a producer warp
 * streams its shares, in step order, into a ring of ~16 KB slots (1D bulk copies), never
 * waiting on the activations, while 4, 8 or 12 consumer warps take the slots as they land:
 * dot products on the CUDA cores over slots of whole rows (16 KB of the share, four copies a
 * slot), or m16n8k16 mma on the tensor cores over slots of 8 rows by a k chunk (a copy a
 * row). The CUDA-core cases also run with the producer asking L2 (a bulk prefetch) for the
 * slot 12 or 24 ahead of each it copies, a lookahead past the ring's. What the consumers wait for
 * is the case's "waits": none (the rate of the stream and the products alone), each product's input
 * (a counter of the blocks that finished the one before), or also the small ops of a real step
 * between the products: the residual add + RMSNorm before q|k|v and gate|up (every block computes
 * it from the previous product, in full), the decode attention after q|k|v (a block a q head over
 * ctx keys and values), the SwiGLU before down (every block). So the ring's depth is what the
 * weights can stream ahead across a dependence. Not the engine's arithmetic (no batch invariance,
 * fp32 sums in any order): a measure of the schedule, with a check of its products against a plain
 * kernel on layer 0's inputs. Per case: median of 15 launches after 3, µs a layer, against a
 * device-to-device copy in the same run. Measured on an H100 (bench/RESULTS.md, 2026-12-06):
 * with a step's dependences it is slower than the engine's chain of kernels on every shape.
 *   build/bench_persist [SHAPE ...]   (tinyllama-1.1b, llama3.2-1b, llama3-8b; default all) */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "../kernels/k_mma.cuh"
#include "../kernels/k_tma.cuh"
#include "bench_cuda.h"

typedef __nv_bfloat16 bf16;

enum { CHUNK = 16384, NPH = 4, CW_MAX = 12 };
/* The tensor-core consumers' slots: 8 rows of a k chunk of KC (1024, or 512 where K is not a
 * multiple of 1024) values, each row 16 bytes past the last (a row stride of 2 KC + 16 bytes,
 * so that ldmatrix's eight rows fall in distinct banks), a row a bulk copy; a slot is a share's
 * 8-row group g at k chunk kc, g-major. */
enum { TC_ROWS = 8, TC_SLOT = TC_ROWS * (2 * 1024 + 16) };
__host__ __device__ static inline int tc_kc(int K) {
  return K % 1024 ? 512 : 1024;
}
/* the consumer warps: all of a block's but the last (the producer), 4, 8 or 12 a launch */
#define CW ((int)(blockDim.x >> 5) - 1)

struct shape {
  const char *name;
  int H, Nqkv, I, L, nh, nkv, hd, ctx;
};

/* what the consumers wait for: nothing (the products' inputs are whatever is there: the rate of
 * the stream and the products alone), each product for the one before, or also the small ops
 * between them */
enum { FREE, PRODUCTS, SMALL_OPS };

struct pargs {
  shape s;
  const bf16 *w;   /* per layer: q|k|v [Nqkv][H], o [H][H], gate|up [2I][H], down [H][I] */
  const bf16 *kv;  /* per layer, kv head: ctx keys then ctx values of hd */
  float *y[NPH];   /* each product's output (q|k|v, o, gate|up, down) */
  float *attn;     /* the attention's output [H] */
  const float *h0; /* the residual the step starts from [H] */
  unsigned *cnt;   /* [L][5]: blocks done with q|k|v, attention heads, o, gate|up, down */
  float *xsave;    /* layer 0's product inputs, [NPH][K] (block 0 writes them) */
  int nst, mode, kmax, rmax; /* mode: FREE, PRODUCTS or SMALL_OPS */
  int tc; /* the consumers: dot products on the CUDA cores (0) or mma on the tensor cores (1) */
  int pf; /* CUDA-core slots: the producer asks L2 for the slot pf ahead of each it loads */
};

/* weights streamed once are let go from L2 first (as the decode GEMM's copies) */
__device__ __forceinline__ uint64_t evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ void cbar() { /* the consumer warps' barrier */
  asm volatile("bar.sync 1, %0;" ::"r"(CW * 32) : "memory");
}
__device__ __forceinline__ void bulk_load(void *dst, const void *src, unsigned bytes, uint64_t *bar,
                                          uint64_t pol) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
               " [%0], [%1], %2, [%3], %4;" ::"r"(smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(pol)
               : "memory");
}

__host__ __device__ static inline void ph_dims(const shape &s, int p, int &N, int &K) {
  N = p == 0 ? s.Nqkv : p == 2 ? 2 * s.I : s.H;
  K = p == 3 ? s.I : s.H;
}
/* block b's share of a matrix's N rows among G blocks: rows [r0, r1) */
__host__ __device__ static inline void share_rows(long N, int b, int G, long &r0, long &r1) {
  r0 = N * b / G, r1 = N * (b + 1) / G;
}
__host__ __device__ static inline size_t layer_elems(const shape &s) {
  return (size_t)s.Nqkv * s.H + (size_t)s.H * s.H + (size_t)2 * s.I * s.H + (size_t)s.H * s.I;
}
__host__ __device__ static inline size_t ph_off(const shape &s, int p) {
  size_t o = 0;
  for (int q = 0; q < p; q++) {
    int N, K;
    ph_dims(s, q, N, K);
    o += (size_t)N * K;
  }
  return o;
}

/* A wait that has lasted WAIT_CYCLES (about 2 s) ends the launch (a trap: the host's check of
 * the launch fails), so that a schedule that cannot make progress shows as an error at once
 * instead of holding the device until the call's time limit. */
#define WAIT_CYCLES (4ll << 30)
__device__ __forceinline__ void stuck(long long t0) {
  if (clock64() - t0 > WAIT_CYCLES) __trap();
}

/* thread 0 of the consumers waits for *c >= target (unless mode is FREE), then all of them go
 * on */
__device__ __forceinline__ void wait_count(const unsigned *c, unsigned target, int mode) {
  if (threadIdx.x == 0 && mode != FREE) {
    const long long t0 = clock64();
    while (ld_acquire(c) < target)
      stuck(t0);
  }
  cbar();
}

/* mbar_wait, bounded as above */
__device__ __forceinline__ void bar_wait(uint64_t *b, unsigned parity) {
  const long long t0 = clock64();
  uint32_t ok = 0;
  while (!ok) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok)
                 : "r"(smem_u32(b)), "r"(parity)
                 : "memory");
    if (!ok) stuck(t0);
  }
}

/* a warp's partial sums of one row, added to the row's accumulator by one lane */
__device__ __forceinline__ void flush_row(float *acc, float part, int lane) {
  for (int o = 16; o; o >>= 1)
    part += __shfl_xor_sync(~0u, part, o);
  if (lane == 0) atomicAdd(acc, part);
}

/* A tensor-core slot: acc[n] += w[n] . x for the slot's nr rows (kc values each, at a row
 * stride of 2 kc + 16 bytes), as m16n8k16 mma with x in row 0 of the a operand (lanes 0-3
 * give it, the other lanes zeros) and the weights as b (ldmatrix, eight rows of 16 bytes a
 * matrix, four matrices = 32 k a load); two accumulators for two chains of mma. Row n's sum is
 * in c0 / c1 of lane n / 2. */
__device__ void tc_slot(const unsigned char *slot, const bf16 *x, int kc, float *acc, int nr,
                        int lane) {
  const uint32_t la = smem_u32(slot) + (lane & 7) * (2 * kc + 16) + (lane >> 3) * 16;
  const bf16 *xl = x + 2 * (lane & 3);
  const uint32_t m = lane < 4 ? ~0u : 0u;
  float d0[4] = {0, 0, 0, 0}, d1[4] = {0, 0, 0, 0};
#pragma unroll 4
  for (int k = 0; k < kc; k += 32) {
    uint32_t b[4];
    ldsm_x4_at(b, la + k * 2);
    const uint32_t a0[4] = {*reinterpret_cast<const uint32_t *>(xl + k) & m, 0,
                            *reinterpret_cast<const uint32_t *>(xl + k + 8) & m, 0};
    const uint32_t a1[4] = {*reinterpret_cast<const uint32_t *>(xl + k + 16) & m, 0,
                            *reinterpret_cast<const uint32_t *>(xl + k + 24) & m, 0};
    mma16816(d0, a0, b);
    mma16816(d1, a1, b + 2);
  }
  if (lane < 4) {
    if (2 * lane < nr) atomicAdd(&acc[2 * lane], d0[0] + d1[0]);
    if (2 * lane + 1 < nr) atomicAdd(&acc[2 * lane + 1], d0[1] + d1[1]);
  }
}

/* a reduction over the consumer threads by op (a warp's by butterfly, then the warps' in
 * order), the result in every thread */
template <class Op> __device__ float creduce(float v, float *red, float init, Op op) {
  for (int o = 16; o; o >>= 1)
    v = op(v, __shfl_xor_sync(~0u, v, o));
  cbar();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  cbar();
  float t = init;
  for (int i = 0; i < CW; i++)
    t = op(t, red[i]);
  return t;
}
__device__ float csum(float v, float *red) {
  return creduce(v, red, 0.0f, [](float x, float y) { return x + y; });
}
__device__ float cmax(float v, float *red) {
  return creduce(v, red, -INFINITY, [](float x, float y) { return fmaxf(x, y); });
}

/* The products' inputs come from L2 (other blocks wrote them): every load a thread makes is
 * issued before any is used, four floats a load, so that building an input is one or a few L2
 * round trips instead of one a value (the first measured version's loops waited on each). */

/* xs[i] = bf16 of src[i], or of silu(src[i]) * src2[i] where src2 is given, for i < n (a
 * multiple of 4) */
__device__ void gather(bf16 *xs, const float *src, const float *src2, int n) {
  const int nt = CW * 32;
  for (int i0 = threadIdx.x * 4; i0 < n; i0 += nt * 16) {
    float4 v[4], u[4];
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const int i = i0 + q * nt * 4;
      if (i < n) v[q] = __ldcg(reinterpret_cast<const float4 *>(src + i));
      if (i < n && src2) u[q] = __ldcg(reinterpret_cast<const float4 *>(src2 + i));
    }
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const int i = i0 + q * nt * 4;
      if (i >= n) break;
      float4 o = v[q];
      if (src2) {
        o.x = o.x / (1.0f + __expf(-o.x)) * u[q].x, o.y = o.y / (1.0f + __expf(-o.y)) * u[q].y;
        o.z = o.z / (1.0f + __expf(-o.z)) * u[q].z, o.w = o.w / (1.0f + __expf(-o.w)) * u[q].w;
      }
      __nv_bfloat162 *d = reinterpret_cast<__nv_bfloat162 *>(xs + i);
      d[0] = __floats2bfloat162_rn(o.x, o.y), d[1] = __floats2bfloat162_rn(o.z, o.w);
    }
  }
}

/* xs = RMSNorm(h0 + y) (unit weights) in bf16, every block in full, the values held in
 * registers between the sum and the scaling (H <= 32 * 4 * the consumer threads) */
__device__ void norm_into(bf16 *xs, const float *y, const float *h0, int H, float *red) {
  const int nt = CW * 32;
  float4 v[8];
  float ss = 0;
#pragma unroll
  for (int q = 0; q < 8; q++) {
    const int i = (threadIdx.x + q * nt) * 4;
    if (i < H) {
      const float4 a = __ldcg(reinterpret_cast<const float4 *>(y + i));
      const float4 b = __ldcg(reinterpret_cast<const float4 *>(h0 + i));
      v[q] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
  }
#pragma unroll
  for (int q = 0; q < 8; q++)
    if ((threadIdx.x + q * nt) * 4 < H)
      ss += v[q].x * v[q].x + v[q].y * v[q].y + v[q].z * v[q].z + v[q].w * v[q].w;
  const float r = rsqrtf(csum(ss, red) / H + 1e-5f);
#pragma unroll
  for (int q = 0; q < 8; q++) {
    const int i = (threadIdx.x + q * nt) * 4;
    if (i < H) {
      __nv_bfloat162 *d = reinterpret_cast<__nv_bfloat162 *>(xs + i);
      d[0] = __floats2bfloat162_rn(v[q].x * r, v[q].y * r);
      d[1] = __floats2bfloat162_rn(v[q].z * r, v[q].w * r);
    }
  }
}

/* a head's keys and values (they do not depend on the step) asked of L2 while its block waits
 * for q */
__device__ void attention_prefetch(const pargs &a, int l, int h) {
  const shape &s = a.s;
  const int kvh = h / (s.nh / s.nkv);
  const char *k =
      reinterpret_cast<const char *>(a.kv + ((size_t)l * s.nkv + kvh) * s.ctx * s.hd * 2);
  for (int o = threadIdx.x * 128; o < s.ctx * s.hd * 4; o += CW * 32 * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(k + o));
}

/* one q head over ctx keys and values: softmax(q k / sqrt(hd)) v into attn; a thread a key for
 * the scores (hd / 8 loads in flight), then a warp a key at a time for the values (a lane a
 * pair of dimensions per 64, eight keys' loads in flight), the warps' sums added in ov
 * (hd <= 128) */
__device__ void attention(const pargs &a, int l, int h, float *qs, float *ps, float *ov,
                          float *red) {
  const shape &s = a.s;
  const int t = threadIdx.x, w = t >> 5, lane = t & 31, kvh = h / (s.nh / s.nkv);
  const bf16 *k = a.kv + ((size_t)l * s.nkv + kvh) * s.ctx * s.hd * 2, *v = k + s.ctx * s.hd;
  for (int d = t; d < s.hd; d += CW * 32)
    qs[d] = __ldcg(a.y[0] + h * s.hd + d);
  cbar();
  float m = -INFINITY;
  for (int j = t; j < s.ctx; j += CW * 32) {
    float d = 0;
    for (int e0 = 0; e0 < s.hd; e0 += 64) {
      uint4 u[8];
#pragma unroll
      for (int e = 0; e < 8; e++)
        u[e] = *reinterpret_cast<const uint4 *>(k + (size_t)j * s.hd + e0 + e * 8);
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const bf16 *b = reinterpret_cast<const bf16 *>(&u[e]);
#pragma unroll
        for (int q = 0; q < 8; q++)
          d += __bfloat162float(b[q]) * qs[e0 + e * 8 + q];
      }
    }
    ps[j] = d * rsqrtf((float)s.hd), m = fmaxf(m, ps[j]);
  }
  m = cmax(m, red);
  float sum = 0;
  for (int j = t; j < s.ctx; j += CW * 32)
    ps[j] = __expf(ps[j] - m), sum += ps[j];
  sum = csum(sum, red);
  for (int d0 = 0; d0 < s.hd; d0 += 64) {
    float2 o = make_float2(0, 0);
#pragma unroll 8
    for (int j = w; j < s.ctx; j += CW) {
      const float2 f = __bfloat1622float2(
          *reinterpret_cast<const __nv_bfloat162 *>(v + (size_t)j * s.hd + d0 + lane * 2));
      o.x += ps[j] * f.x, o.y += ps[j] * f.y;
    }
    ov[w * s.hd + d0 + lane * 2] = o.x, ov[w * s.hd + d0 + lane * 2 + 1] = o.y;
  }
  cbar();
  for (int d = t; d < s.hd; d += CW * 32) {
    float o = 0;
    for (int q = 0; q < CW; q++)
      o += ov[q * s.hd + d];
    a.attn[h * s.hd + d] = o / sum;
  }
}

/* A place in a block's stream of CUDA-core slots (layer, product, byte offset in the share):
 * the producer keeps one for its copies and one for the L2 requests that run ahead of them */
struct spos {
  int l, p;
  long off, bytes;
  const char *src;
};
__device__ void spos_at(spos &c, const pargs &a, size_t le, int l, int p) {
  int N, K;
  ph_dims(a.s, p, N, K);
  long r0, r1;
  share_rows(N, blockIdx.x, gridDim.x, r0, r1);
  c.l = l, c.p = p, c.off = 0, c.bytes = (r1 - r0) * K * 2;
  c.src = reinterpret_cast<const char *>(a.w + le * l + ph_off(a.s, p) + r0 * K);
}
/* the next slot; false past the step's last */
__device__ bool spos_next(spos &c, const pargs &a, size_t le) {
  c.off += CHUNK;
  while (c.off >= c.bytes) {
    if (c.p + 1 < NPH)
      spos_at(c, a, le, c.l, c.p + 1);
    else if (c.l + 1 < a.s.L)
      spos_at(c, a, le, c.l + 1, 0);
    else
      return false;
  }
  return true;
}

/* the producer's fill seq of the ring: once the slot's previous fill has been taken, its
 * barrier armed for n bytes; the slot */
__device__ __forceinline__ int arm_slot(const pargs &a, long seq, uint64_t *full, uint64_t *empty,
                                        unsigned n, int lane) {
  const int slot = (int)(seq % a.nst);
  if (lane == 0) {
    if (seq >= a.nst) bar_wait(&empty[slot], (unsigned)((seq / a.nst - 1) & 1));
    mbar_expect_tx(&full[slot], n);
  }
  __syncwarp();
  return slot;
}

/* CUDA-core slots: 16 KB of a share at a time, four lanes a quarter each; with pf, the slot pf
 * ahead asked of L2 first */
__device__ void produce_rows(const pargs &a, size_t le, unsigned char *ring, uint64_t *full,
                             uint64_t *empty, int lane) {
  const uint64_t pol = evict_first();
  spos cur, ahead;
  spos_at(cur, a, le, 0, 0);
  bool go = cur.bytes > 0 || spos_next(cur, a, le), more = go && a.pf > 0;
  ahead = cur;
  for (int i = 0; i < a.pf && more; i++)
    more = spos_next(ahead, a, le);
  for (long seq = 0; go; seq++, go = spos_next(cur, a, le)) {
    const long left = cur.bytes - cur.off;
    const unsigned n = (unsigned)(left < CHUNK ? left : CHUNK);
    const int slot = arm_slot(a, seq, full, empty, n, lane);
    if (more) {
      if (lane == 0) {
        const long al = ahead.bytes - ahead.off;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ahead.src + ahead.off),
                     "r"((unsigned)(al < CHUNK ? al : CHUNK))
                     : "memory");
      }
      more = spos_next(ahead, a, le);
    }
    const unsigned piece = CHUNK / 4, p0 = lane * piece;
    if (lane < 4 && p0 < n)
      bulk_load(ring + (size_t)slot * CHUNK + p0, cur.src + cur.off + p0,
                n - p0 < piece ? n - p0 : piece, &full[slot], pol);
  }
}

/* tensor-core slots: a share's 8-row groups by k chunks, a row a lane */
__device__ void produce_groups(const pargs &a, size_t le, unsigned char *ring, uint64_t *full,
                               uint64_t *empty, int lane) {
  const uint64_t pol = evict_first();
  const shape &s = a.s;
  long seq = 0;
  for (int l = 0; l < s.L; l++)
    for (int p = 0; p < NPH; p++) {
      int N, K;
      ph_dims(s, p, N, K);
      long r0, r1;
      share_rows(N, blockIdx.x, gridDim.x, r0, r1);
      const char *src = reinterpret_cast<const char *>(a.w + le * l + ph_off(s, p) + r0 * K);
      const int rows = (int)(r1 - r0), kc = tc_kc(K), kcb = kc * 2;
      for (int g = 0; g < rows; g += TC_ROWS)
        for (int c = 0; c < K / kc; c++, seq++) {
          const int nr = min(TC_ROWS, rows - g);
          const int slot = arm_slot(a, seq, full, empty, (unsigned)(nr * kcb), lane);
          if (lane < nr)
            bulk_load(ring + (size_t)slot * TC_SLOT + lane * (kcb + 16),
                      src + ((size_t)(g + lane) * K + (size_t)c * kc) * 2, kcb, &full[slot], pol);
        }
    }
}

__global__ void __launch_bounds__((CW_MAX + 1) * 32, 1) persist_kernel(pargs a) {
  extern __shared__ __align__(1024) unsigned char sm[];
  const shape &s = a.s;
  const int G = gridDim.x, b = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  unsigned char *ring = sm;
  /* the product's input in bf16 (as the engine's), then fp32 scratch */
  const int slot_bytes = a.tc ? (int)TC_SLOT : (int)CHUNK;
  bf16 *xs = reinterpret_cast<bf16 *>(sm + (size_t)a.nst * slot_bytes);
  float *acc = reinterpret_cast<float *>(xs + a.kmax), *ps = acc + a.rmax, *qs = ps + s.ctx,
        *ov = qs + s.hd, *red = ov + CW_MAX * s.hd;
  uint64_t *full = reinterpret_cast<uint64_t *>(red + 16), *empty = full + a.nst;
  if (threadIdx.x == 0) {
    for (int i = 0; i < a.nst; i++)
      mbar_init(&full[i], 1), mbar_init(&empty[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  const size_t le = layer_elems(s);

  if (warp == CW) { /* the producer: every share of every matrix, in step order */
    if (a.tc)
      produce_groups(a, le, ring, full, empty, lane);
    else
      produce_rows(a, le, ring, full, empty, lane);
    return;
  }

  /* the consumers */
  long seq = 0;
  for (int l = 0; l < s.L; l++) {
    unsigned *cnt = a.cnt + l * 5;
    for (int p = 0; p < NPH; p++) {
      int N, K;
      ph_dims(s, p, N, K);
      /* the product's input */
      if (p == 0) {
        if (l > 0) wait_count(a.cnt + (l - 1) * 5 + 4, G, a.mode);
        if (a.mode == SMALL_OPS)
          norm_into(xs, l > 0 ? a.y[3] : a.h0, a.h0, s.H, red);
        else
          gather(xs, l > 0 ? a.y[3] : a.h0, nullptr, K);
      } else if (p == 1) {
        if (a.mode == SMALL_OPS) {
          wait_count(cnt + 1, s.nh, a.mode);
          gather(xs, a.attn, nullptr, K);
        } else {
          wait_count(cnt + 0, G, a.mode);
          gather(xs, a.y[0], nullptr, K);
        }
      } else if (p == 2) {
        wait_count(cnt + 2, G, a.mode);
        if (a.mode == SMALL_OPS)
          norm_into(xs, a.y[1], a.h0, s.H, red);
        else
          gather(xs, a.y[1], nullptr, K);
      } else {
        wait_count(cnt + 3, G, a.mode);
        gather(xs, a.y[2], a.mode == SMALL_OPS ? a.y[2] + s.I : nullptr, K);
      }
      long r0, r1;
      share_rows(N, b, G, r0, r1);
      for (int r = threadIdx.x; r < r1 - r0; r += CW * 32)
        acc[r] = 0;
      cbar();
      /* the check's copy of the input, read after the barrier (the values are other threads'
       * writes: read before it, the copy raced the gather, and the 12-warp cases' checks failed
       * now and then with right products) */
      if (l == 0 && b == 0)
        for (int i = threadIdx.x; i < K; i += CW * 32)
          a.xsave[(size_t)p * a.kmax + i] = __bfloat162float(xs[i]);
      /* the share's slots: slot c to warp c % CW */
      const int rows = (int)(r1 - r0), kc_n = K / tc_kc(K);
      const long bytes = (r1 - r0) * K * 2, nch = a.tc ? (long)(rows + TC_ROWS - 1) / TC_ROWS * kc_n
                                                       : (bytes + CHUNK - 1) / CHUNK;
      for (long c = warp; c < nch; c += CW) {
        const long q = seq + c;
        const int slot = (int)(q % a.nst);
        bar_wait(&full[slot], (unsigned)((q / a.nst) & 1));
        if (a.tc) {
          tc_slot(ring + (size_t)slot * TC_SLOT, xs + (c % kc_n) * tc_kc(K), tc_kc(K),
                  acc + (c / kc_n) * TC_ROWS, min(TC_ROWS, rows - (int)(c / kc_n) * TC_ROWS), lane);
          __syncwarp();
          if (lane == 0) mbar_arrive(&empty[slot]);
          continue;
        }
        /* the slot's elements of the share (row-major rows of K), a row's piece at a time: K
         * and the slot's element count are multiples of 256 (checked on the host), so a warp's
         * 256 elements of a step lie in one row and the rows change for all lanes at once; a
         * row's sum is reduced across the warp and added once (a lane an add was a 32-way
         * conflict on one word: the first run's bottleneck), and the steps of a piece are
         * unrolled so that several shared loads are in flight */
        const int e0 = (int)c * (CHUNK / 2);
        const int end = e0 + (int)(bytes / 2 - e0 < CHUNK / 2 ? bytes / 2 - e0 : CHUNK / 2);
        const bf16 *tile = reinterpret_cast<const bf16 *>(ring + (size_t)slot * CHUNK) - e0;
        for (int pos = e0; pos < end;) {
          const int row = pos / K, seg = min(end, (row + 1) * K) - pos;
          const bf16 *wt = tile + pos + lane * 8, *xt = xs + (pos - row * K) + lane * 8;
          float part = 0, part2 = 0; /* two chains of adds */
#pragma unroll 4
          for (int j = 0; j < seg; j += 256) {
            /* 16 bytes of weights and of x a lane: both conflict-free */
            const uint4 u = *reinterpret_cast<const uint4 *>(wt + j);
            const uint4 xu = *reinterpret_cast<const uint4 *>(xt + j);
            const __nv_bfloat162 *w = reinterpret_cast<const __nv_bfloat162 *>(&u);
            const __nv_bfloat162 *x = reinterpret_cast<const __nv_bfloat162 *>(&xu);
#pragma unroll
            for (int q = 0; q < 4; q += 2) {
              const float2 f = __bfloat1622float2(w[q]), g = __bfloat1622float2(x[q]);
              const float2 f2 = __bfloat1622float2(w[q + 1]), g2 = __bfloat1622float2(x[q + 1]);
              part = fmaf(f.x, g.x, fmaf(f.y, g.y, part));
              part2 = fmaf(f2.x, g2.x, fmaf(f2.y, g2.y, part2));
            }
          }
          flush_row(&acc[row], part + part2, lane);
          pos += seg;
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[slot]);
      }
      seq += nch;
      cbar();
      for (long r = threadIdx.x; r < r1 - r0; r += CW * 32)
        a.y[p][r0 + r] = acc[r];
      /* the block's outputs, then one fence and the count (as a grid barrier: the consumers'
       * barrier orders their stores before thread 0's fence) */
      cbar();
      const int done = p == 0 ? 0 : p == 1 ? 2 : p == 2 ? 3 : 4;
      if (threadIdx.x == 0) __threadfence(), atomicAdd(cnt + done, 1u);
      /* the attention of one q head a block, after q|k|v */
      if (p == 0 && a.mode == SMALL_OPS && b < s.nh) {
        attention_prefetch(a, l, b);
        wait_count(cnt + 0, G, a.mode);
        attention(a, l, b, qs, ps, ov, red);
        cbar();
        if (threadIdx.x == 0) __threadfence(), atomicAdd(cnt + 1, 1u);
      }
    }
  }
}

/* y = W x in fp32, a thread a row: the check */
__global__ void ref_gemv(const bf16 *w, const float *x, float *y, int N, int K) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= N) return;
  float s = 0;
  for (int k = 0; k < K; k++)
    s += __bfloat162float(w[(size_t)r * K + k]) * x[k];
  y[r] = s;
}

/* n (a multiple of 8) pseudo-random values in [-scale / 2, scale / 2], 8 a store */
__global__ void fill(bf16 *p, size_t n, unsigned seed, float scale) {
  for (size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 8; i < n;
       i += (size_t)gridDim.x * blockDim.x * 8) {
    __align__(16) bf16 v[8];
    for (int j = 0; j < 8; j++) {
      unsigned h = (unsigned)(i + j) * 2654435761u ^ seed;
      h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
      v[j] = __float2bfloat16(((h & 0xffff) / 65535.0f - 0.5f) * scale);
    }
    *reinterpret_cast<uint4 *>(p + i) = *reinterpret_cast<const uint4 *>(v);
  }
}

static const shape shapes[] = {
    {"tinyllama-1.1b", 2048, 2560, 5632, 22, 32, 4, 64, 128},
    {"llama3.2-1b", 2048, 3072, 8192, 16, 32, 8, 64, 128},
    {"llama3-8b", 4096, 6144, 14336, 32, 32, 8, 128, 128},
};

/* One case: the check (layer 0 alone, each product against the plain kernel on its saved
 * input; the worst relative error into *worst, unless worst is null), then µs a layer, the
 * median of 15 launches after 3. */
static double run_case(pargs &a, const bf16 *w, int n_sm, int nthr, size_t smem, double *worst) {
  const shape &s = a.s;
  if (worst) {
    pargs a1 = a;
    a1.s.L = 1;
    void *kargs1[] = {&a1};
    CK(cudaMemset(a.cnt, 0, (size_t)s.L * 5 * 4));
    CK(cudaLaunchCooperativeKernel((void *)persist_kernel, n_sm, nthr, kargs1, smem, 0));
    CK(cudaDeviceSynchronize());
    for (int p = 0; p < NPH; p++) {
      int N, K;
      ph_dims(s, p, N, K);
      float *yr;
      CK(cudaMalloc(&yr, (size_t)N * 4));
      ref_gemv<<<(N + 127) / 128, 128>>>(w + ph_off(s, p), a.xsave + (size_t)p * a.kmax, yr, N, K);
      std::vector<float> g(N), r(N);
      CK(cudaMemcpy(g.data(), a.y[p], (size_t)N * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(r.data(), yr, (size_t)N * 4, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (int i = 0; i < N; i++)
        num += (g[i] - r[i]) * (double)(g[i] - r[i]), den += (double)r[i] * r[i];
      *worst = std::max(*worst, sqrt(num / (den > 0 ? den : 1)));
      cudaFree(yr);
    }
  }
  void *kargs[] = {&a};
  const double ms = median_ms(
      [&] { CK(cudaLaunchCooperativeKernel((void *)persist_kernel, n_sm, nthr, kargs, smem, 0)); },
      15, 3, [&] { CK(cudaMemset(a.cnt, 0, (size_t)s.L * 5 * 4)); });
  return ms * 1e3 / s.L;
}

static void run_shape(const shape &s, int n_sm, double copy) {
  if (s.H % 512 || s.I % 512 || s.H > 4096 || s.hd % 64 || s.hd > 128) {
    fprintf(stderr, "%s: K a multiple of 512, H <= 4096 and hd 64 or 128 only\n", s.name);
    exit(1);
  }
  const size_t le = layer_elems(s), wbytes = le * 2 * s.L;
  bf16 *w, *kv;
  CK(cudaMalloc(&w, wbytes));
  const size_t kve = (size_t)s.L * s.nkv * s.ctx * s.hd * 2;
  CK(cudaMalloc(&kv, kve * 2));
  fill<<<1024, 256>>>(w, le * s.L, 1u, 0.05f);
  fill<<<1024, 256>>>(kv, kve, 2u, 1.0f);
  pargs a;
  memset(&a, 0, sizeof a);
  a.s = s, a.w = w, a.kv = kv;
  a.kmax = std::max(s.H, s.I);
  a.rmax = ((2 * s.I + n_sm - 1) / n_sm + 4) / 4 * 4;
  for (int p = 0; p < NPH; p++) {
    int N, K;
    ph_dims(s, p, N, K);
    CK(cudaMalloc(&a.y[p], (size_t)N * 4));
  }
  float *h0;
  std::vector<float> hh(s.H);
  for (int i = 0; i < s.H; i++)
    hh[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  CK(cudaMalloc(&h0, (size_t)s.H * 4));
  CK(cudaMemcpy(h0, hh.data(), (size_t)s.H * 4, cudaMemcpyHostToDevice));
  a.h0 = h0;
  CK(cudaMalloc(&a.attn, (size_t)s.H * 4));
  CK(cudaMalloc(&a.cnt, (size_t)s.L * 5 * 4));
  CK(cudaMalloc(&a.xsave, (size_t)NPH * a.kmax * 4));
  const size_t fixed = (size_t)a.kmax * 2 + ((size_t)a.rmax + s.ctx + (CW_MAX + 1) * s.hd + 16) * 4;
  int max_smem = 0;
  CK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CK(cudaFuncSetAttribute(persist_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
  const double wl = (double)le * 2; /* weight bytes a layer */
  printf("\n%s: %d layers, %.1f MB of weights a layer, ideal at the copy rate %.2f us a layer\n",
         s.name, s.L, wl / 1e6, wl / copy / 1e3);
  printf("| consumers | warps | ring slots | L2 ahead | waits | us a layer | GB/s | %% of copy | "
         "check |\n"
         "|---|---:|---:|---:|---|---:|---:|---:|---|\n");
  static const char *const mode_name[] = {"none", "products", "products + small ops"};
  for (int mode = FREE; mode <= SMALL_OPS; mode++)
    for (int tc = 0; tc < 2; tc++)
      for (int cw = 4; cw <= CW_MAX; cw += 4)
        for (int pi = 0; pi < (tc ? 1 : 3); pi++) {
          a.mode = mode, a.tc = tc;
          a.pf = pi * 12; /* L2 requests 0, 12 or 24 slots ahead (CUDA-core slots only) */
          const int slot_bytes = tc ? (int)TC_SLOT : (int)CHUNK;
          const int nst_max = (int)((max_smem - fixed - 2 * 8 * 16 - 1024) / slot_bytes);
          /* the most slots that fit, a whole multiple of the consumer warps: slot c's previous
           * fill (c - nst) was then taken by the same warp, which waited for it, so a slot is
           * never two fills behind the parity a warp waits for (with fewer slots than warps one
           * ran ahead on a stale phase and the producer armed a barrier twice in one phase: the
           * first run's launch failure) */
          a.nst = nst_max / cw * cw;
          if (a.nst < cw) continue;
          double worst = 0;
          const double us = run_case(a, w, n_sm, (cw + 1) * 32,
                                     (size_t)a.nst * slot_bytes + fixed + 2 * 8 * a.nst + 64,
                                     mode == FREE ? nullptr : &worst);
          char check[64];
          /* with no waits a block's inputs are whatever it read when it read them, so only block
           * 0's rows match the saved input: no check */
          snprintf(check, sizeof check, mode == FREE ? "n/a (no waits)" : "rel err %.1e %s", worst,
                   worst < 1e-3 ? "ok" : "FAIL");
          printf("| %s | %d | %d | %d | %s | %.2f | %.0f | %.1f | %s |\n",
                 tc ? "mma" : "CUDA cores", cw, a.nst, a.pf, mode_name[mode], us, wl / us / 1e3,
                 100.0 * wl / us / 1e3 / copy, check);
          fflush(stdout);
        }
  for (int p = 0; p < NPH; p++)
    cudaFree(a.y[p]);
  cudaFree(w), cudaFree(kv), cudaFree(h0), cudaFree(a.attn), cudaFree(a.cnt), cudaFree(a.xsave);
}

int main(int argc, char **argv) {
  int n_sm = 0;
  CK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0));
  /* the copy ceiling: 1 GiB device to device, bytes read + written */
  const size_t cb = 1ull << 30;
  void *c0, *c1;
  CK(cudaMalloc(&c0, cb));
  CK(cudaMalloc(&c1, cb));
  CK(cudaMemset(c0, 1, cb));
  const double ms =
      median_ms([&] { CK(cudaMemcpyAsync(c1, c0, cb, cudaMemcpyDeviceToDevice)); }, 10, 3);
  const double copy = 2.0 * cb / (ms * 1e-3) / 1e9;
  cudaFree(c0), cudaFree(c1);
  printf("bench_persist: %d SMs, device-to-device copy %.0f GB/s\n", n_sm, copy);
  for (const shape &s : shapes) {
    bool want = argc < 2;
    for (int i = 1; i < argc; i++)
      want |= !strcmp(argv[i], s.name);
    if (want) run_shape(s, n_sm, copy);
  }
  return 0;
}
