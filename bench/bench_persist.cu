/* bench_persist.cu — how close a batch-1 decode step written as one persistent kernel could get
 * to the copy bandwidth: a model's layers (q|k|v, o, gate|up and down as matrix-vector products
 * over bf16 weights of the shape's sizes) in one cooperative launch of one block a
 * multiprocessor. Each block owns a contiguous share of every matrix's rows; a producer warp
 * streams its shares, in step order, into a ring of 16 KB slots (1D bulk copies, four lanes a
 * slot), never waiting on the activations, while four consumer warps wait for each product's
 * input (a counter of the blocks that finished the one before) and take the slots as they
 * land. With "small ops" on, the dependences of a real step sit between the products: the
 * residual add + RMSNorm before q|k|v and gate|up (every block computes it from the previous
 * product, in full), the decode attention after q|k|v (a block a q head over ctx keys and
 * values), the SwiGLU before down (every block). So the ring's depth is what the weights can
 * stream ahead across a dependence. Not the engine's arithmetic (no batch invariance, fp32
 * sums in any order): a measure of the schedule, with a check of its products against a plain
 * kernel on layer 0's inputs. Per case: median of 15 launches after 3, µs a layer, against a
 * device-to-device copy in the same run.
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

#include "../kernels/k_tma.cuh"
#include "bench_cuda.h"

typedef __nv_bfloat16 bf16;

enum { CHUNK = 16384, CW = 4, NTHR = (CW + 1) * 32, NPH = 4 };

struct shape {
  const char *name;
  int H, Nqkv, I, L, nh, nkv, hd, ctx;
};

struct pargs {
  shape s;
  const bf16 *w;   /* per layer: q|k|v [Nqkv][H], o [H][H], gate|up [2I][H], down [H][I] */
  const bf16 *kv;  /* per layer, kv head: ctx keys then ctx values of hd */
  float *y[NPH];   /* each product's output (q|k|v, o, gate|up, down) */
  float *attn;     /* the attention's output [H] */
  const float *h0; /* the residual the step starts from [H] */
  unsigned *cnt;   /* [L][5]: blocks done with q|k|v, attention heads, o, gate|up, down */
  float *xsave;    /* layer 0's product inputs, [NPH][K] (block 0 writes them) */
  int nst, small, kmax, rmax;
};

/* weights streamed once are let go from L2 first (as the decode GEMM's copies) */
__device__ __forceinline__ uint64_t evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ void cbar() { /* the consumer warps' barrier */
  asm volatile("bar.sync 1, %0;" ::"n"(CW * 32) : "memory");
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

/* thread 0 of the consumers waits for *c >= target, then all of them go on */
__device__ __forceinline__ void wait_count(const unsigned *c, unsigned target) {
  if (threadIdx.x == 0) {
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

/* a block sum over the consumer threads */
__device__ float csum(float v, float *red) {
  for (int o = 16; o; o >>= 1)
    v += __shfl_xor_sync(~0u, v, o);
  cbar();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  cbar();
  float t = 0;
  for (int i = 0; i < CW; i++)
    t += red[i];
  return t;
}
__device__ float cmax(float v, float *red) {
  for (int o = 16; o; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(~0u, v, o));
  cbar();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  cbar();
  float t = -INFINITY;
  for (int i = 0; i < CW; i++)
    t = fmaxf(t, red[i]);
  return t;
}

/* xs = RMSNorm(h0 + y) (unit weights) in bf16, every block in full (the sum, then the values
 * again from L2) */
__device__ void norm_into(bf16 *xs, const float *y, const float *h0, int H, float *red) {
  float ss = 0;
  for (int i = threadIdx.x; i < H; i += CW * 32) {
    const float v = __ldcg(y + i) + h0[i];
    ss += v * v;
  }
  const float r = rsqrtf(csum(ss, red) / H + 1e-5f);
  for (int i = threadIdx.x; i < H; i += CW * 32)
    xs[i] = __float2bfloat16((__ldcg(y + i) + h0[i]) * r);
}

/* one q head over ctx keys and values: softmax(q k / sqrt(hd)) v into attn */
__device__ void attention(const pargs &a, int l, int h, float *qs, float *ps, float *red) {
  const shape &s = a.s;
  const int t = threadIdx.x, kvh = h / (s.nh / s.nkv);
  const bf16 *k = a.kv + ((size_t)l * s.nkv + kvh) * s.ctx * s.hd * 2, *v = k + s.ctx * s.hd;
  for (int d = t; d < s.hd; d += CW * 32)
    qs[d] = __ldcg(a.y[0] + h * s.hd + d);
  cbar();
  float m = -INFINITY;
  for (int j = t; j < s.ctx; j += CW * 32) {
    float d = 0;
    for (int e = 0; e < s.hd; e += 8) {
      const uint4 u = *reinterpret_cast<const uint4 *>(k + (size_t)j * s.hd + e);
      const bf16 *b = reinterpret_cast<const bf16 *>(&u);
      for (int q = 0; q < 8; q++)
        d += __bfloat162float(b[q]) * qs[e + q];
    }
    ps[j] = d * rsqrtf((float)s.hd), m = fmaxf(m, ps[j]);
  }
  m = cmax(m, red);
  float sum = 0;
  for (int j = t; j < s.ctx; j += CW * 32)
    ps[j] = __expf(ps[j] - m), sum += ps[j];
  sum = csum(sum, red);
  for (int d = t; d < s.hd; d += CW * 32) {
    float o = 0;
    for (int j = 0; j < s.ctx; j++)
      o += ps[j] * __bfloat162float(v[(size_t)j * s.hd + d]);
    a.attn[h * s.hd + d] = o / sum;
  }
}

__global__ void __launch_bounds__(NTHR, 1) persist_kernel(pargs a) {
  extern __shared__ __align__(1024) unsigned char sm[];
  const shape &s = a.s;
  const int G = gridDim.x, b = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  unsigned char *ring = sm;
  /* the product's input in bf16 (as the engine's), then fp32 scratch */
  bf16 *xs = reinterpret_cast<bf16 *>(sm + (size_t)a.nst * CHUNK);
  float *acc = reinterpret_cast<float *>(xs + a.kmax), *ps = acc + a.rmax, *qs = ps + s.ctx,
        *red = qs + s.hd;
  uint64_t *full = reinterpret_cast<uint64_t *>(red + 8), *empty = full + a.nst;
  if (threadIdx.x == 0) {
    for (int i = 0; i < a.nst; i++)
      mbar_init(&full[i], 1), mbar_init(&empty[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  const size_t le = layer_elems(s);

  if (warp == CW) { /* the producer: every share of every matrix, in step order */
    const uint64_t pol = evict_first();
    long seq = 0;
    for (int l = 0; l < s.L; l++)
      for (int p = 0; p < NPH; p++) {
        int N, K;
        ph_dims(s, p, N, K);
        const long r0 = (long)N * b / G, r1 = (long)N * (b + 1) / G;
        const char *src = reinterpret_cast<const char *>(a.w + le * l + ph_off(s, p) + r0 * K);
        const long bytes = (r1 - r0) * K * 2;
        for (long off = 0; off < bytes; off += CHUNK, seq++) {
          const int slot = (int)(seq % a.nst);
          const unsigned n = (unsigned)(bytes - off < CHUNK ? bytes - off : CHUNK);
          if (lane == 0) {
            if (seq >= a.nst) bar_wait(&empty[slot], (unsigned)((seq / a.nst - 1) & 1));
            mbar_expect_tx(&full[slot], n);
          }
          __syncwarp();
          const unsigned piece = CHUNK / 4, p0 = lane * piece;
          if (lane < 4 && p0 < n)
            bulk_load(ring + (size_t)slot * CHUNK + p0, src + off + p0,
                      n - p0 < piece ? n - p0 : piece, &full[slot], pol);
        }
      }
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
        if (l > 0) wait_count(a.cnt + (l - 1) * 5 + 4, G);
        if (a.small)
          norm_into(xs, l > 0 ? a.y[3] : a.h0, a.h0, s.H, red);
        else
          for (int i = threadIdx.x; i < K; i += CW * 32)
            xs[i] = __float2bfloat16(l > 0 ? __ldcg(a.y[3] + i) : a.h0[i]);
      } else if (p == 1) {
        if (a.small) {
          wait_count(cnt + 1, s.nh);
          for (int i = threadIdx.x; i < K; i += CW * 32)
            xs[i] = __float2bfloat16(__ldcg(a.attn + i));
        } else {
          wait_count(cnt + 0, G);
          for (int i = threadIdx.x; i < K; i += CW * 32)
            xs[i] = __float2bfloat16(__ldcg(a.y[0] + i));
        }
      } else if (p == 2) {
        wait_count(cnt + 2, G);
        if (a.small)
          norm_into(xs, a.y[1], a.h0, s.H, red);
        else
          for (int i = threadIdx.x; i < K; i += CW * 32)
            xs[i] = __float2bfloat16(__ldcg(a.y[1] + i));
      } else {
        wait_count(cnt + 3, G);
        for (int i = threadIdx.x; i < K; i += CW * 32) {
          const float g = __ldcg(a.y[2] + i), u = __ldcg(a.y[2] + s.I + i);
          xs[i] = __float2bfloat16(a.small ? g / (1.0f + __expf(-g)) * u : g);
        }
      }
      const long r0 = (long)N * b / G, r1 = (long)N * (b + 1) / G;
      for (int r = threadIdx.x; r < r1 - r0; r += CW * 32)
        acc[r] = 0;
      if (l == 0 && b == 0)
        for (int i = threadIdx.x; i < K; i += CW * 32)
          a.xsave[(size_t)p * a.kmax + i] = __bfloat162float(xs[i]);
      cbar();
      /* the share's slots: slot c to warp c % CW */
      const long bytes = (r1 - r0) * K * 2, nch = (bytes + CHUNK - 1) / CHUNK;
      for (long c = warp; c < nch; c += CW) {
        const long q = seq + c;
        const int slot = (int)(q % a.nst);
        bar_wait(&full[slot], (unsigned)((q / a.nst) & 1));
        /* the slot's elements of the share (row-major rows of K): 8 a lane a step, the row
         * and column stepped, not divided */
        const int e0 = (int)c * (CHUNK / 2);
        const int ne = (int)(bytes / 2 - e0 < CHUNK / 2 ? bytes / 2 - e0 : CHUNK / 2);
        const bf16 *tile = reinterpret_cast<const bf16 *>(ring + (size_t)slot * CHUNK);
        int row = (e0 + lane * 8) / K, k = e0 + lane * 8 - row * K, cur = -1;
        float part = 0;
        for (int i = lane * 8; i < ne; i += 256) {
          if (row != cur) {
            if (cur >= 0) atomicAdd(&acc[cur], part);
            cur = row, part = 0;
          }
          /* 16 bytes of weights and of x a lane: both conflict-free */
          const uint4 u = *reinterpret_cast<const uint4 *>(tile + i);
          const uint4 xu = *reinterpret_cast<const uint4 *>(xs + k);
          const __nv_bfloat162 *w = reinterpret_cast<const __nv_bfloat162 *>(&u);
          const __nv_bfloat162 *x = reinterpret_cast<const __nv_bfloat162 *>(&xu);
#pragma unroll
          for (int j = 0; j < 4; j++) {
            const float2 f = __bfloat1622float2(w[j]), g = __bfloat1622float2(x[j]);
            part += f.x * g.x + f.y * g.y;
          }
          if ((k += 256) >= K) k -= K, row++;
        }
        if (cur >= 0) atomicAdd(&acc[cur], part);
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[slot]);
      }
      seq += nch;
      cbar();
      for (long r = threadIdx.x; r < r1 - r0; r += CW * 32)
        a.y[p][r0 + r] = acc[r];
      __threadfence();
      cbar();
      const int done = p == 0 ? 0 : p == 1 ? 2 : p == 2 ? 3 : 4;
      if (threadIdx.x == 0) atomicAdd(cnt + done, 1u);
      /* the attention of one q head a block, after q|k|v */
      if (p == 0 && a.small && b < s.nh) {
        wait_count(cnt + 0, G);
        attention(a, l, b, qs, ps, red);
        __threadfence();
        cbar();
        if (threadIdx.x == 0) atomicAdd(cnt + 1, 1u);
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

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static const shape shapes[] = {
    {"tinyllama-1.1b", 2048, 2560, 5632, 22, 32, 4, 64, 128},
    {"llama3.2-1b", 2048, 3072, 8192, 16, 32, 8, 64, 128},
    {"llama3-8b", 4096, 6144, 14336, 32, 32, 8, 128, 128},
};

static void run_shape(const shape &s, int n_sm, double copy) {
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
  const size_t fixed = (size_t)a.kmax * 2 + ((size_t)a.rmax + s.ctx + s.hd + 8) * 4;
  int max_smem = 0;
  CK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  const int nst_max = (int)((max_smem - fixed - 2 * 8 * 16 - 1024) / CHUNK);
  CK(cudaFuncSetAttribute(persist_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
  const double wl = (double)le * 2; /* weight bytes a layer */
  printf("\n%s: %d layers, %.1f MB of weights a layer, ideal at the copy rate %.2f us a layer\n",
         s.name, s.L, wl / 1e6, wl / copy / 1e3);
  printf("| ring slots (16 KB) | small ops | us a layer | GB/s | %% of copy | check |\n"
         "|---:|---|---:|---:|---:|---|\n");
  /* whole multiples of the consumer warps: slot c's previous fill (c - nst) was then taken by
   * the same warp, which waited for it, so a slot is never two fills behind the parity a warp
   * waits for (with fewer slots than warps one ran ahead on a stale phase and the producer
   * armed a barrier twice in one phase: the first run's launch failure) */
  const int nsts[] = {CW, 2 * CW, nst_max / CW * CW};
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int si = 0; si < 2; si++)
    for (int ni = 0; ni < 3; ni++) {
      a.small = si;
      a.nst = nsts[ni];
      if (a.nst < CW || a.nst > nst_max || (ni > 0 && a.nst == nsts[ni - 1])) continue;
      const size_t smem = (size_t)a.nst * CHUNK + fixed + 2 * 8 * a.nst + 64;
      void *kargs[] = {&a};
      /* the check: layer 0 alone, each product against the plain kernel on its saved input */
      shape s1 = s;
      s1.L = 1;
      pargs a1 = a;
      a1.s = s1;
      void *kargs1[] = {&a1};
      CK(cudaMemset(a.cnt, 0, (size_t)s.L * 5 * 4));
      CK(cudaLaunchCooperativeKernel((void *)persist_kernel, n_sm, NTHR, kargs1, smem, 0));
      CK(cudaDeviceSynchronize());
      double worst = 0;
      for (int p = 0; p < NPH; p++) {
        int N, K;
        ph_dims(s, p, N, K);
        float *yr;
        CK(cudaMalloc(&yr, (size_t)N * 4));
        ref_gemv<<<(N + 127) / 128, 128>>>(w + ph_off(s, p), a.xsave + (size_t)p * a.kmax, yr, N,
                                           K);
        std::vector<float> g(N), r(N);
        CK(cudaMemcpy(g.data(), a.y[p], (size_t)N * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(r.data(), yr, (size_t)N * 4, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        for (int i = 0; i < N; i++)
          num += (g[i] - r[i]) * (double)(g[i] - r[i]), den += (double)r[i] * r[i];
        worst = std::max(worst, sqrt(num / (den > 0 ? den : 1)));
        cudaFree(yr);
      }
      std::vector<double> t;
      for (int it = 0; it < 18; it++) {
        CK(cudaMemset(a.cnt, 0, (size_t)s.L * 5 * 4));
        CK(cudaEventRecord(e0));
        CK(cudaLaunchCooperativeKernel((void *)persist_kernel, n_sm, NTHR, kargs, smem, 0));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (it >= 3) t.push_back(ms * 1e3 / s.L);
      }
      const double us = median(t);
      printf("| %d | %s | %.2f | %.0f | %.1f | rel err %.1e %s |\n", a.nst, si ? "on" : "off", us,
             wl / us / 1e3, 100.0 * wl / us / 1e3 / copy, worst, worst < 1e-3 ? "ok" : "FAIL");
      fflush(stdout);
    }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
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
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int i = 0; i < 13; i++) {
    CK(cudaEventRecord(e0));
    CK(cudaMemcpyAsync(c1, c0, cb, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 3) t.push_back(ms);
  }
  const double copy = 2.0 * cb / (median(t) * 1e-3) / 1e9;
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
