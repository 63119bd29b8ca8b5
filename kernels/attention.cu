/* attention.cu — paged causal GQA attention on the tensor cores, batch-invariant. k_attention
 * (prefill rows, any ragged batch): FlashAttention-2 over 64-key tiles from position 0, a
 * row's bits independent of the other rows of its step and of the prompt's chunking. Entry
 * points: k_attn_plan, k_attention. k_attention_decode (decode rows over fixed slots, lengths
 * read on the device, CUDA-graph friendly) has its own section at the end; its rows are
 * batch-invariant among themselves, not bit-equal to k_attention's. */
#include "attention.h"

#include "k_common.cuh"
#include "k_dec_part.cuh"
#include "k_mma.cuh"
#include "k_rope.cuh"
#include "rope_kv.h"

#include <cooperative_groups.h>
#include <math.h>

#define LOG2E 1.4426950408889634f
#define FULL  0xffffffffu

/* ---- planning (host) ------------------------------------------------------------------- */

extern "C" int k_attn_plan(int n_seqs, const int32_t *n_new, int n_heads, int n_kv_heads,
                           k_pf_item *pf, int max_pf, int *n_pf) {
  int np = 0;
  *n_pf = 0;
  if (n_seqs < 0 || n_kv_heads <= 0 || n_heads % n_kv_heads || n_heads / n_kv_heads > 16)
    return NS_EINVAL;
  const int rpt = k_attn_pf_rows(n_heads / n_kv_heads);
  for (int s = 0; s < n_seqs; s++)
    for (int i0 = 0; i0 < n_new[s]; i0 += rpt) {
      if (np >= max_pf) return NS_ERANGE;
      pf[np++] = (k_pf_item){s, i0};
    }
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

/* The four lanes of an mma row (lanes 4g .. 4g + 3) reduced, the same bits on each. */
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(FULL, v, 1));
  return fmaxf(v, __shfl_xor_sync(FULL, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(FULL, v, 1);
  return v + __shfl_xor_sync(FULL, v, 2);
}

/* o / l with explicit roundings (no contraction choice of the compiler changes it). */
__device__ __forceinline__ float finish(float o, float l) {
  return __fmul_rn(o, __frcp_rn(l));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

/* The prefill kernel: PF_VEC query vectors a block (4 warps of 16, the m side of the mma),
 * keys in tiles of PF_KT (two stages in shared memory). */
#define PF_VEC K_ATTN_PF_VEC
#define PF_KT  64

/* Dynamic shared memory of pf_kernel<DB>: q of the block's vectors, then two stages of k and
 * v tiles, bf16 rows of DB + 8 values (the 16-byte pad keeps ldmatrix conflict-free). */
static constexpr size_t pf_smem(int DB) {
  return (size_t)(PF_VEC + 4 * PF_KT) * (DB + 8) * sizeof(bf16);
}

/* Block (item, kv head), 128 threads: FlashAttention-2 on the tensor cores. A query vector is
 * a (row, head) pair: vector v is row v / G of the item, head v % G of the kv head's group.
 * Warp w owns vectors 16 w .. 16 w + 15. Per tile of PF_KT keys (taken from position 0 in
 * fixed tiles, causal): S = Q K^T (m16n8k16, fp32), scaled into log2 units, masked past each
 * vector's position; the running max m, p = exp2(s - m) rounded to bf16, l += their sum
 * (fixed order); O = O * exp2(m_old - m) + P V. A vector's bits depend on its query, keys
 * and values alone: a tile wholly in its future changes nothing (scale 1, p 0, values
 * finite), so neither the item's other rows nor the chunking of the prompt matter. DB:
 * head_dim rounded up to 64, 128 or 256 (zero-filled past head_dim). */
template <int DB> static __global__ void __launch_bounds__(128) pf_kernel(k_attn_args a) {
  constexpr int LD = DB + 8, NS = PF_KT / 8, NO = DB / 8, CH = DB / 8;
  extern __shared__ __align__(16) bf16 psm[];
  bf16 *q_s = psm, *kv_s = psm + PF_VEC * LD; /* stage st: k at kv_s + 2 st PF_KT LD, v after */
  /* long items first: the grid's tail is short ones */
  const k_pf_item it = a.pf[a.n_pf - 1 - (int)blockIdx.x];
  const int kvh = blockIdx.y, D = a.head_dim, G = a.n_heads / a.n_kv_heads;
  const int s = it.seq, i0 = it.i0, n_new = a.n_new[s], pos0 = a.pos0[s], tok0 = a.tok0[s];
  const int rows = min(PF_VEC / G, n_new - i0);       /* k_attn_pf_rows, G <= 16 */
  const int nvec = rows * G, kend = pos0 + i0 + rows; /* keys 0 .. kend - 1 */
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int32_t *pt = a.pages + a.pt_off[s];
  const int PT = a.kv.page_tokens;
  const size_t tokst = (size_t)a.kv.n_kv_heads * D;

  /* q of the vectors (zero past nvec and head_dim): the first copy group, with tile 0 */
  for (int i = tid; i < PF_VEC * CH; i += 128) {
    const int v = i / CH, c = (i - v * CH) * 8, r = v / G, h = v - r * G;
    const bool ok = v < nvec && c < D;
    const bf16 *src = (const bf16 *)a.q;
    if (ok) src += (size_t)(tok0 + i0 + r) * a.ldq + (size_t)(kvh * G + h) * D + c;
    cp_async16(q_s + v * LD + c, src, ok ? 16 : 0);
  }
  auto load_tile = [&](int st, int k0) {
    bf16 *ks = kv_s + (size_t)st * 2 * PF_KT * LD, *vs = ks + PF_KT * LD;
    for (int i = tid; i < PF_KT * CH; i += 128) {
      const int kk = i / CH, c = (i - kk * CH) * 8, j = k0 + kk;
      const bool ok = j < kend && c < D;
      const bf16 *kp = (const bf16 *)a.q, *vp = kp;
      if (ok) {
        const int page = pt[j / PT];
        const size_t at = (size_t)(j % PT) * tokst + (size_t)kvh * D + c;
        kp = k_kv_page(a.kv, a.layer, 0, page) + at;
        vp = k_kv_page(a.kv, a.layer, 1, page) + at;
      }
      cp_async16(ks + kk * LD + c, kp, ok ? 16 : 0);
      cp_async16(vs + kk * LD + c, vp, ok ? 16 : 0);
    }
  };
  load_tile(0, 0);
  cp_async_commit();

  /* this lane's two vectors (rows g and g + 8 of the warp's m16 tile): their positions */
  int vpos[2], wmax = -1;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int v = warp * 16 + g + 8 * h;
    vpos[h] = v < nvec ? pos0 + i0 + v / G : -1;
  }
  for (int v = warp * 16; v < warp * 16 + 16 && v < nvec; v++)
    wmax = pos0 + i0 + v / G;
  const float qs = a.scale * LOG2E; /* scores in log2 units: exp2f below */
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, o[NO][4];
#pragma unroll
  for (int j = 0; j < NO; j++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      o[j][e] = 0.0f;

  const int ntiles = (kend + PF_KT - 1) / PF_KT;
  for (int kt = 0; kt < ntiles; kt++) {
    cp_async_wait<0>();
    __syncthreads(); /* tile kt landed for every thread; tile kt - 1 is consumed */
    if (kt + 1 < ntiles) load_tile((kt + 1) & 1, (kt + 1) * PF_KT);
    cp_async_commit();
    const int k0 = kt * PF_KT;
    if (wmax < k0) continue; /* the tile is in the future of every vector of this warp */
    const bf16 *ks = kv_s + (size_t)(kt & 1) * 2 * PF_KT * LD, *vs = ks + PF_KT * LD;

    float sc[NS][4];
#pragma unroll
    for (int j = 0; j < NS; j++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        sc[j][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DB; kk += 16) {
      uint32_t af[4];
      ldsm_x4(af, q_s + (warp * 16 + (lane & 15)) * LD + kk + (lane >> 4) * 8);
#pragma unroll
      for (int j = 0; j < NS; j += 2) {
        uint32_t r[4];
        ldsm_x4(r, ks + (j * 8 + (lane & 7) + (lane >> 4) * 8) * LD + kk + ((lane >> 3) & 1) * 8);
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        mma16816(sc[j], af, b0);
        mma16816(sc[j + 1], af, b1);
      }
    }
    /* masked scores, the new max and the rescale of the running state, per vector h */
    float c[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < NS; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
          const int key = k0 + j * 8 + 2 * t + e;
          float &x = sc[j][2 * h + e];
          x = key <= vpos[h] ? x * qs : -INFINITY;
          mx = fmaxf(mx, x);
        }
      const float mn = fmaxf(m[h], quad_max(mx));
      const float base = mn == -INFINITY ? 0.0f : mn; /* a vector with no key (unused) */
      c[h] = exp2f(m[h] - base);
      m[h] = mn;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < NS; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
          float &x = sc[j][2 * h + e];
          x = k_rbf(exp2f(x - base)); /* p as the tensor cores take it */
          sum += x;
        }
      l[h] = l[h] * c[h] + quad_sum(sum);
    }
#pragma unroll
    for (int j = 0; j < NO; j++) {
      o[j][0] *= c[0], o[j][1] *= c[0];
      o[j][2] *= c[1], o[j][3] *= c[1];
    }
    /* O += P V: P's A fragments are the score tiles 2s, 2s + 1 as they lie in the registers */
#pragma unroll
    for (int ks16 = 0; ks16 < PF_KT / 16; ks16++) {
      const uint32_t pa[4] = {pack_bf16(sc[2 * ks16][0], sc[2 * ks16][1]),
                              pack_bf16(sc[2 * ks16][2], sc[2 * ks16][3]),
                              pack_bf16(sc[2 * ks16 + 1][0], sc[2 * ks16 + 1][1]),
                              pack_bf16(sc[2 * ks16 + 1][2], sc[2 * ks16 + 1][3])};
      const bf16 *vrow = vs + (ks16 * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD;
#pragma unroll
      for (int j = 0; j < NO; j += 2) {
        uint32_t r[4];
        ldsm_x4_t(r, vrow + j * 8 + (lane >> 4) * 8);
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        mma16816(o[j], pa, b0);
        mma16816(o[j + 1], pa, b1);
      }
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int v = warp * 16 + g + 8 * h;
    if (v >= nvec) continue;
    const int r = v / G, hd = kvh * G + v % G;
    bf16 *out = (bf16 *)a.out + (size_t)(tok0 + i0 + r) * a.ldo + (size_t)hd * D;
#pragma unroll
    for (int j = 0; j < NO; j++) {
      const int d = j * 8 + 2 * t;
      if (d < D)
        *reinterpret_cast<__nv_bfloat162 *>(out + d) =
            __floats2bfloat162_rn(finish(o[j][2 * h], l[h]), finish(o[j][2 * h + 1], l[h]));
    }
  }
}

/* ---- launcher --------------------------------------------------------------------------- */

/* Raise a kernel's dynamic shared memory limit once, where its static arrays and the dynamic
 * bytes pass the 48 KB a launch may take without opting in. */
template <typename K> static int allow_smem(K kernel, int *done, size_t bytes) {
  if (*done) return 0;
  cudaFuncAttributes fa;
  NS_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
  if (bytes + fa.sharedSizeBytes <= 48 * 1024) return *done = 1, 0;
  NS_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  *done = 1;
  return 0;
}

template <int DB> static int run_pf(const k_attn_args *a, cudaStream_t st) {
  static int done;
  const size_t bytes = pf_smem(DB);
  int rc = allow_smem(pf_kernel<DB>, &done, bytes);
  if (rc) return rc;
  pf_kernel<DB><<<dim3(a->n_pf, a->n_kv_heads), 128, bytes, st>>>(*a);
  K_LAUNCH_CHECK();
  return 0;
}

extern "C" int k_attention(const k_attn_args *a, cudaStream_t st) {
  int D = a->head_dim;
  if (!a->out || !a->q || a->n_heads <= 0 || a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads ||
      a->n_heads / a->n_kv_heads > 16 || D <= 0 || D > 256 || D % 8 || a->ldq % 8 || a->ldo % 2 ||
      a->ldq < (a->n_heads + 2 * a->n_kv_heads) * D || a->ldo < a->n_heads * D || a->n_pf < 0 ||
      a->kv.head_dim != D || a->kv.n_kv_heads != a->n_kv_heads || a->layer < 0 ||
      a->layer >= a->kv.n_layers || a->kv.page_tokens <= 0 || !k_aligned(a->q, 16) ||
      !k_aligned(a->out, 4) || a->n_kv_heads > 65535 || (a->n_pf && !a->pf))
    return NS_EINVAL;
  if (a->n_pf == 0) return 0;
  if (D <= 64) return run_pf<64>(a, st);
  if (D <= 128) return run_pf<128>(a, st);
  return run_pf<256>(a, st);
}

/* ---- decode over fixed slots ---------------------------------------------------------------- */

/* k_attention_decode streams each slot's keys and values once, on the tensor cores. Block
 * (split z, kv head, slot), 4 warps, one chunk of K_ATTN_CHUNK keys at a time (chunks z,
 * z + gridDim.x, ..), a warp 64 keys of it, the warps independent until the chunk's end
 * (FlashAttention-2's register layout): scores S = Q K^T with the G query heads of the kv head
 * as the m side of mma m16n8k16 (bf16 in, fp32 accumulate; rows g and g + 8 of a lane's A
 * fragment, so up to 16 heads) and the keys as 8 n-tiles of 8, straight from 16-byte loads of
 * the cache (a lane's 8 dims of a key feed its B fragment in a dim order that q's A fragment
 * repeats); per head the warp's max m_w and p = exp2(s - m_w) rounded to bf16, l_w their sum
 * (fixed order), with the scores' accumulator layout already P^T's B fragments; O^T = V^T P^T
 * as 4 k-steps (16-byte loads of v rows, byte-permuted into A fragments of V^T). The chunk's
 * state (m, l, O) merges the warps' in warp order and depends on its keys alone: one chunk is
 * the whole row (written as O / l); more are merged, in one arithmetic, over distributed
 * shared memory by the blocks of a cluster (CM, a small launch, up to DEC_CM_MAX chunks), by
 * the block that counts the slot's last state (given counters, up to K_ATTN_FUSE_CHUNKS
 * chunks) or else by dec_combine_kernel. */

#define DEC_THREADS 128
#define DEC_TILE    256 /* chunk states a combine block weighs at once */

/* c += a b on the tensor cores, a 16x16 bf16, b 16x8 bf16, c 16x8 fp32. Lane 4g + t holds
 * a: rows g, g + 8 at k pairs 2t, 2t + 8 (a0 row g k 2t, a1 row g + 8 k 2t, a2 row g k 2t + 8,
 * a3 row g + 8 k 2t + 8; the lower k in the low half); b: column g at k pairs 2t, 2t + 8; c:
 * rows g, g + 8 at columns 2t, 2t + 1 (c0, c1 row g; c2, c3 row g + 8). */
__device__ __forceinline__ void mma16816(float c[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint4 ld16(const bf16 *p) {
  return __ldg(reinterpret_cast<const uint4 *>(p));
}
/* A key's k or v row in a launch of more than one wave (EQ): L2 fetches the row's 256-byte
 * block on a miss and L1 keeps no line of it. On an H200 that took the batch-128 steps (context
 * 512) of llama3.2-1b from 2.446-2.464 to 2.341-2.356 ms and of tinyllama-1.1b from 2.468-2.481
 * to 2.378-2.386, llama3-8b's batch 64 from 7.011-7.021 to 6.920-6.933 (its batch 128 within
 * the noise); with the hints in every form, tinyllama-1.1b's batch-1 step was 0.7% slower
 * (bench/RESULTS.md). */
__device__ __forceinline__ uint4 ld16_kv(const bf16 *p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}
/* The same as a coherent load (not the nc path) that stays before a barrier: the compiler
 * sinks nc loads, which nothing writes, past one to their use */
__device__ __forceinline__ uint4 ld16_now_kv(const bf16 *p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ uint4 ldcg16(const bf16 *p) {
  return __ldcg(reinterpret_cast<const uint4 *>(p));
}

__device__ __forceinline__ uint32_t word(const uint4 &v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* Where dim x of head h's row of a warp's P.V sums sits: bits 1-2 of x swapped by the head's
 * lane group ((h % 8) / 2, the t of the mma lanes that hold it), so that the float2 stores of
 * a half-warp hit 16 bank pairs (4-way conflicts without). */
__device__ __forceinline__ int dec_rd(int h, int x) {
  return x ^ (h & 6);
}
/* Dims d .. d + 7 (d % 8 == 0) of head h's row r (at r + d's 8-dim group) as stored by
 * dec_rd, in dim order. */
__device__ __forceinline__ void dec_rd8(const float *r, int h, float o[8]) {
  float4 a = *reinterpret_cast<const float4 *>(r), b = *reinterpret_cast<const float4 *>(r + 4);
  if (h & 4) {
    const float4 tmp = a;
    a = b, b = tmp;
  }
  if (h & 2) {
    a = make_float4(a.z, a.w, a.x, a.y);
    b = make_float4(b.z, b.w, b.x, b.y);
  }
  o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w, o[4] = b.x, o[5] = b.y, o[6] = b.z, o[7] = b.w;
}

/* Dynamic shared memory of dec_kernel<DB, NT>: the warps' P.V sums, and with cm the chunk's O
 * (CM below; only then: on an H200 the larger size for every launch made llama3-8b's batch-128
 * steps 2% slower). */
static constexpr size_t dec_smem(int DB, int NT, bool cm = false) {
  return ((size_t)4 * 8 * NT * (DB + 4) + (cm ? (size_t)8 * NT * DB : 0)) * sizeof(float);
}

/* CM: a small launch's blocks of a (slot, kv head) in clusters of up to DEC_CM_MAX along x;
 * a slot of 2 .. cluster-size chunks (all in its first cluster, a block a chunk) keeps each
 * chunk's state (m, l, O) in its block's shared memory, and after a cluster barrier the
 * cluster's blocks merge the states over distributed shared memory, each a share of the
 * outputs, in the arithmetic of the global merge (dec_wsum's order): the same bits, without
 * the states' round trips through L2 and the count. On an H200 that took the batch-1 steps at
 * contexts of 257-384 from 4.60 to 4.47 ms (llama3-8b), 1.07 to 0.99 (tinyllama-1.1b) and 1.01
 * to 0.98 (llama3.2-1b), where the second chunk used to cost 3.6-4.5 us a layer
 * (bench/RESULTS.md). */
#define DEC_CM_MAX 8

/* out[idx] of the kv head's G heads for every idx of this block's share of the cluster's:
 * M = max m_c, w_c = exp2(m_c - M), l = sum w_c l_c and o = sum w_c O_c in ascending c, as
 * dec_kernel's merge and dec_combine_kernel do. cm_o: [G][D] of each block, cm_ml: (m, l) of
 * each head; the barriers: every state written before any is read, none freed while read. */
__device__ void dec_cm_merge(const k_attn_dec_args &a, float *cm_o, float2 *cm_ml, int nch,
                             int tok0, int kvh, int G, int D) {
  namespace cg = cooperative_groups;
  cg::cluster_group cl = cg::this_cluster();
  cl.sync();
  const int r = (int)cl.block_rank(), C = (int)cl.num_blocks();
  bf16 *out = (bf16 *)a.out + (size_t)tok0 * a.ldo + (size_t)kvh * G * D;
  for (int idx = r * DEC_THREADS + (int)threadIdx.x; idx < G * D; idx += C * DEC_THREADS) {
    const int h = idx / D;
    float2 ml[DEC_CM_MAX];
    float x[DEC_CM_MAX];
#pragma unroll
    for (int c = 0; c < DEC_CM_MAX; c++)
      if (c < nch) {
        ml[c] = *cl.map_shared_rank(cm_ml + h, c);
        x[c] = *cl.map_shared_rank(cm_o + idx, c);
      }
    float M = -INFINITY, l = 0.0f, o = 0.0f;
#pragma unroll
    for (int c = 0; c < DEC_CM_MAX; c++)
      if (c < nch) M = fmaxf(M, ml[c].x);
#pragma unroll
    for (int c = 0; c < DEC_CM_MAX; c++)
      if (c < nch) {
        const float w = exp2f(ml[c].x - M);
        l = __fmaf_rn(w, ml[c].y, l);
        o = __fmaf_rn(w, x[c], o);
      }
    out[idx] = __float2bfloat16(finish(o, l));
  }
  cl.sync();
}

/* o + sum over c < n of w[c] x[c * stride], one fused multiply-add at a time in ascending c
 * (B loads in flight, read through L2: other blocks of the same kernel may have written x):
 * the chunk merge's order, whichever kernel does it. */
template <int B>
__device__ __forceinline__ float dec_wsum(const float *w, const float *x, size_t stride, int n,
                                          float o) {
  for (int c0 = 0; c0 < n; c0 += B) {
    float v[B];
#pragma unroll
    for (int i = 0; i < B; i++)
      v[i] = c0 + i < n ? __ldcg(x + (size_t)(c0 + i) * stride) : 0.0f;
#pragma unroll
    for (int i = 0; i < B; i++)
      if (c0 + i < n) o = __fmaf_rn(w[c0 + i], v[i], o);
  }
  return o;
}

/* DB: head_dim rounded up to 64, 128 or 256; NT: tiles of 8 query heads (G <= 8 * NT). Four
 * blocks an SM (at most 128 registers a thread) keep enough 16-byte loads in flight to
 * saturate memory; head_dim 256 holds twice the accumulators and runs two blocks an SM.
 * PF (head_dim 128, a launch of at most one wave: run_dec): before waiting for the kernel before,
 * each warp asks L2 for its first chunk's k and v rows but the newest key's (written by earlier
 * steps; the kernel before writes the newest), so that its loads after the wait find them there.
 * RP (k_attn_dec_args.rope, one chunk a block, G <= 8, head_dim <= 128): the blocks make their
 * q heads, and the block of the slot's last chunk the row and the newest key's k and v in the
 * cache, from the q|k|v partial sums as k_rope_kv_write_part does (k_dec_part_get1n, k_rope_cs,
 * k_rope_rot: the same bits); its warps read that key back through L2, not the nc path.
 * EQ (neither, a launch of more than one wave: run_dec): q is copied into shared memory by
 * cp.async while the first chunk's first k loads are in flight, and waited for before the first
 * mma, instead of a round trip and a barrier before those loads; its k and v rows load with
 * ld16_kv's cache hints.
 * CM (a launch in clusters, not with EQ): see DEC_CM_MAX; its own instances, so that the
 * others compile as they did without it (with the cluster code in every instance, llama3-8b's
 * batch-16 and batch-128 steps were 2-3% slower on an H200). */
template <int DB, int NT, bool PF, bool RP = false, bool EQ = false, bool CM = false>
static __global__ void __launch_bounds__(DEC_THREADS, PF || RP || DB > 128 ? 2 : 4)
    dec_kernel(k_attn_dec_args a) {
  constexpr int NV = DB / 32; /* scores: 16-byte k vectors of a key row per lane */
  constexpr int NU = DB / 64; /* P.V: 16-byte v vectors of a key row per lane */
  constexpr int HT = 8 * NT;
  constexpr int DR = DB + 4;  /* row stride of the warps' P.V sums (floats) */
  constexpr int QB = 16 / NV; /* key tiles of 8 loaded at once: 64 registers of k in flight */
  constexpr int VB = 4 / NU;  /* k-steps loaded at once: 64 registers of v in flight */
  extern __shared__ __align__(16) float dsm[];
  float *r_s = dsm;                                  /* [4][HT][DR]: each warp's P.V sums */
  __shared__ const bf16 *pk_s[32];                   /* k of the chunk's pages (at most 256 / 8) */
  __shared__ float m_s[4][HT], l_s[4][HT], lm_s[HT]; /* the warps' states; merged l's */
  __shared__ uint4 q_s[2 * NV * 32];                 /* [heads g, g + 8][NV][lane] */

  /* The slot's fields in one round trip (in bounds for an empty slot too, just unused) and
   * the first chunk's page addresses: step inputs, copied to the device before the step's
   * first kernel, so read before waiting for the kernel before (programmatic dependent
   * launch), which writes q and the newest k, v. */
  const int s = blockIdx.z, pos0 = a.pos0[s], tok0 = a.tok0[s], pt_off = a.pt_off[s];
  const int L = pos0 + 1, nch = pos0 < 0 ? 0 : (L + K_ATTN_CHUNK - 1) / K_ATTN_CHUNK;
  /* CM (launched in clusters): the slot's chunks all in its first cluster, merged there */
  const int csz = CM ? (int)cooperative_groups::this_cluster().num_blocks() : 1;
  const bool cm = CM && nch > 1 && nch <= csz && (int)blockIdx.x < csz && L <= a.max_len;
  if (!cm && ((int)blockIdx.x >= nch || L > a.max_len)) return; /* the whole block: no work */
  const int D = a.head_dim, G = a.n_heads / a.n_kv_heads, kvh = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  float *cm_o = dsm + 4 * HT * DR;      /* CM: the chunk's O, [G][D] */
  __shared__ float2 cm_ml[CM ? HT : 1]; /* CM: the chunk's (m, l) per head */
  if (cm && (int)blockIdx.x >= nch) {   /* a block of the cluster without a chunk: merges */
    k_pdl_enter((int)gridDim.z);
    dec_cm_merge(a, cm_o, cm_ml, nch, tok0, kvh, G, D);
    return;
  }
  const uint4 z4 = make_uint4(0, 0, 0, 0);
  const int PT = a.kv.page_tokens, lpt = __ffs(PT) - 1;
  const int32_t *pt = a.pages + pt_off;
  /* chunk c's page addresses into pk_s (callers put a barrier before and after) */
  auto chunk_pages = [&](int c) {
    const int c0 = c * K_ATTN_CHUNK, n = min(K_ATTN_CHUNK, L - c0), pg0 = c0 >> lpt;
    if (tid <= ((c0 + n - 1) >> lpt) - pg0)
      pk_s[tid] = k_kv_page(a.kv, a.layer, 0, pt[pg0 + tid]) + (size_t)kvh * D;
  };
  chunk_pages(blockIdx.x);
  if constexpr (PF) {
    __syncthreads(); /* pk_s */
    const size_t tokst = (size_t)a.kv.n_kv_heads * D;
    const size_t vofs = (size_t)a.kv.pages_per_slab * PT * tokst;
    const int c0 = blockIdx.x * K_ATTN_CHUNK, n = min(K_ATTN_CHUNK, L - c0), pg0 = c0 >> lpt;
    for (int i = lane; i < 128; i += 32) { /* key i / 2's k (even i) or v row */
      const int kk = warp * 64 + (i >> 1), p = c0 + kk;
      if (kk >= n || p == pos0) continue;
      const bf16 *r = pk_s[(p >> lpt) - pg0] + (size_t)(p & (PT - 1)) * tokst + (i & 1) * vofs;
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(r), "r"(D * 2) : "memory");
    }
  }
  /* RP (one chunk a block, NT 1): the slot's row rotated here. Unit u < (G + 2) D / 2 of the
   * kv head: pair i of q head h < G, of its k head (h = G) or values i, i + D / 2 of its v head
   * (h = G + 1), a thread units tid, tid + DEC_THREADS, ..; cos and sin before the wait */
  constexpr int RU = RP ? (10 * DB / 2 + DEC_THREADS - 1) / DEC_THREADS : 1; /* G <= 8 */
  const int t_row = tok0, half = D / 2;
  float rcs[RU], rsn[RU];
  if constexpr (RP) {
    const int rpos = a.rope_pos[t_row];
#pragma unroll
    for (int k = 0; k < RU; k++) {
      const int u = tid + k * DEC_THREADS, h = u / half;
      rcs[k] = rsn[k] = 0.0f;
      if (h <= G) k_rope_cs(rpos, a.inv_freq[u - h * half], rcs[k], rsn[k]);
    }
  }
  __shared__ __align__(16) bf16 qr_s[RP ? 8 * DB : 8]; /* RP: the rotated q heads, [G][D] */
  /* The next kernel may be scheduled before this one ends: before the wait up to
   * K_PDL_EARLY_ROWS slots, after it above (k_pdl_enter), so that past one wave the next GEMM's
   * blocks take the multiprocessors this launch's last blocks leave and copy their first
   * weights while those finish (without a trigger it was scheduled only once every block had
   * ended). On an H200 that took llama3-8b's batch-64 / batch-128 steps (context 512) from
   * 6.858-6.885 to 6.814-6.815 ms and 9.097-9.103 to 8.970-8.995, llama3.2-1b's batch 128 from
   * 2.357-2.374 to 2.329-2.333 (bench/RESULTS.md). */
  k_pdl_enter((int)gridDim.z);
  if constexpr (RP) {
    /* every unit's two columns from the partial sums in one round trip, then rotated; the
     * block of the slot's last chunk (which holds the newest key) writes the row and the cache
     * as k_rope_kv_write_part does; every block keeps its q heads in qr_s */
    int cols[2 * RU];
    float val[2 * RU];
    const int H = a.n_heads, KV = a.n_kv_heads;
#pragma unroll
    for (int k = 0; k < RU; k++) {
      const int u = tid + k * DEC_THREADS, h = u / half, i = u - h * half;
      const int base = h < G ? (kvh * G + h) * D : h == G ? (H + kvh) * D : (H + KV + kvh) * D;
      cols[2 * k] = h <= G + 1 ? base + i : 0;
      cols[2 * k + 1] = h <= G + 1 ? base + i + half : 0;
    }
    k_dec_part_get1n<2 * RU>(a.rope, t_row, cols, val);
    const bool writer = (int)blockIdx.x == nch - 1;
    const int rs = a.rope_slot[t_row];
    const int page = rs < 0 ? 0 : rs / PT, off = rs < 0 ? 0 : rs - page * PT;
    bf16 *row = (bf16 *)a.q + (size_t)t_row * a.ldq;
#pragma unroll
    for (int k = 0; k < RU; k++) {
      const int u = tid + k * DEC_THREADS, h = u / half, i = u - h * half;
      if (h > G + 1) continue;
      float oa = val[2 * k], ob = val[2 * k + 1];
      if (h <= G) k_rope_rot(val[2 * k], val[2 * k + 1], rcs[k], rsn[k], oa, ob);
      const bf16 ba = __float2bfloat16(oa), bb = __float2bfloat16(ob);
      if (h < G) qr_s[h * D + i] = ba, qr_s[h * D + i + half] = bb;
      if (!writer) continue;
      row[cols[2 * k]] = ba, row[cols[2 * k + 1]] = bb;
      if (h >= G && rs >= 0) {
        bf16 *kd = k_kv_page(a.kv, a.layer, h - G, page) + (size_t)off * KV * D + (size_t)kvh * D;
        kd[i] = ba, kd[i + half] = bb;
      }
    }
    __syncthreads(); /* qr_s, and the newest key's k and v for the warps that read them */
  }
  /* A fragments of q for lane 4g + t: heads g and g + 8 (rows g, g + 8 of the m side), dims
   * (4 v + t) * 8 .. + 7 (bf16 as stored: its products with bf16 keys are exact in fp32; the
   * scale goes on the scores). The same for every warp: kept in shared memory (EQ: copied by
   * cp.async, no registers, waited for before the first mma; else the loop's barrier orders
   * it). */
  for (int idx = tid; idx < 2 * NV * 32; idx += DEC_THREADS) {
    const int l = idx & 31, hv = idx >> 5, hh = (hv / NV) * 8 + (l >> 2);
    const int d = ((hv % NV) * 4 + (l & 3)) * 8;
    const bool ok = hh < G && d < D;
    const bf16 *qp = (const bf16 *)a.q + (size_t)tok0 * a.ldq +
                     (size_t)(kvh * G + (ok ? hh : 0)) * D + (ok ? d : 0);
    if constexpr (RP)
      q_s[idx] = ok ? *reinterpret_cast<const uint4 *>(qr_s + hh * D + d) : z4;
    else if constexpr (EQ)
      cp_async16(q_s + idx, qp, ok ? 16 : 0);
    else
      q_s[idx] = ok ? ld16(qp) : z4;
  }
  if constexpr (EQ) cp_async_commit();
  const size_t tokst = (size_t)a.kv.n_kv_heads * D;             /* between keys of a page */
  const size_t vofs = (size_t)a.kv.pages_per_slab * PT * tokst; /* a page's v after its k */
  const float qs = a.scale * LOG2E; /* scores in log2 units: exp2f below */
  const int nch_max = (a.max_len + K_ATTN_CHUNK - 1) / K_ATTN_CHUNK;
  const size_t base = a.part_off ? (size_t)a.part_off[s] : (size_t)s * nch_max; /* states */
  const int kw = warp * 64; /* this warp's keys of a chunk: kw .. kw + 63 */
  /* fuse: the slot's chunk states are merged here (by the block that counts the last) */
  const bool fuse = !cm && a.cnt && nch > 1 && nch <= K_ATTN_FUSE_CHUNKS;
  bool merge = false;
  __shared__ int s_merge;

  for (int c = blockIdx.x; c < nch; c += gridDim.x) {
    const int c0 = c * K_ATTN_CHUNK, n = min(K_ATTN_CHUNK, L - c0), pg0 = c0 >> lpt;
    if (c != (int)blockIdx.x) { /* the first chunk's pages were read before the wait */
      __syncthreads();          /* the previous chunk is written out */
      chunk_pages(c);
    }
    __syncthreads();
    /* key kk < n of the chunk: its k row (its v row at + vofs) */
    auto key = [&](int kk) {
      const int p = c0 + kk;
      return pk_s[(p >> lpt) - pg0] + (size_t)(p & (PT - 1)) * tokst;
    };

    /* scores S = Q K^T, the warp's 64 keys as 8 n-tiles of 8: lane (g, t) loads key g of a
     * tile, dims (4 v + t) * 8 .. + 7 (words x, y: its B pairs of k-step 2 v, z, w of k-step
     * 2 v + 1, as q's A fragments); sc[j]: heads g (0, 1) and g + 8 (2, 3) at keys 2t, 2t + 1
     * of tile j, in log2 units, -inf past the chunk's end */
    float sc[8][4];
    const bool first = c == (int)blockIdx.x;
#pragma unroll
    for (int j0 = 0; j0 < 8; j0 += QB) {
      uint4 kf[QB][NV];
#pragma unroll
      for (int j = 0; j < QB; j++) {
        const int kk = kw + (j0 + j) * 8 + g;
        const bf16 *kp = kk < n ? key(kk) : nullptr;
        const bool nw = RP && c0 + kk == pos0; /* written by this block: not through the nc path */
#pragma unroll
        for (int v = 0; v < NV; v++) {
          const int d = (v * 4 + t) * 8;
          kf[j][v] = kp && d < D ? (nw              ? ldcg16(kp + d)
                                    : EQ && j0 == 0 ? ld16_now_kv(kp + d)
                                    : EQ            ? ld16_kv(kp + d)
                                                    : ld16(kp + d))
                                 : z4;
        }
      }
      if (EQ && j0 == 0 && first) { /* q landed, for every warp */
        cp_async_wait<0>();
        __syncthreads();
      }
#pragma unroll
      for (int j = 0; j < QB; j++) {
        float *c4 = sc[j0 + j];
        c4[0] = c4[1] = c4[2] = c4[3] = 0.0f;
#pragma unroll
        for (int v = 0; v < NV; v++) {
          const uint4 qa = q_s[v * 32 + lane], qb = q_s[(NV + v) * 32 + lane];
          mma16816(c4, qa.x, qb.x, qa.y, qb.y, kf[j][v].x, kf[j][v].y);
          mma16816(c4, qa.z, qb.z, qa.w, qb.w, kf[j][v].z, kf[j][v].w);
        }
        const int kk = kw + (j0 + j) * 8 + 2 * t;
#pragma unroll
        for (int e = 0; e < 4; e++)
          c4[e] = kk + (e & 1) < n ? c4[e] * qs : -INFINITY;
      }
    }

    /* P.V operands: lane (g, t) loads keys 2t, 2t + 1, 2t + 8, 2t + 9 (j = 0 .. 3) of a
     * k-step, dims 64 u + 8 g .. + 7; word w of vector u holds dims 64 u + 8 g + 2w, + 1, which
     * become rows g and g + 8 of m-tile 4 u + w of V^T (keys past the chunk's end: zeros) */
    uint4 vf[VB][4][NU];
    auto load_v = [&](int i0) {
#pragma unroll
      for (int i = 0; i < VB; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int kk = kw + (i0 + i) * 16 + 2 * t + (j & 1) + 8 * (j >> 1);
          const bf16 *vp = kk < n ? key(kk) + vofs : nullptr;
          const bool nw = RP && c0 + kk == pos0;
#pragma unroll
          for (int u = 0; u < NU; u++) {
            const int d = u * 64 + g * 8;
            vf[i][j][u] = vp && d < D ? (nw   ? ldcg16(vp + d)
                                         : EQ ? ld16_kv(vp + d)
                                              : ld16(vp + d))
                                      : z4;
          }
        }
    };
    load_v(0); /* in flight across the softmax */

    /* the warp's softmax, per head (rows g and g + 8: the quad of lanes 4g .. 4g + 3 holds
     * its 64 keys): exact max m, p = exp2(s - m) rounded to the bf16 the P.V product takes, l
     * their sum in a fixed order; a warp without keys (-inf everywhere) keeps p = 0 */
    float mw[2], lw[2];
    uint32_t pb[4][2][2]; /* B fragments of P^T: k-step i, head half r, keys (2t, 2t + 1) / + 8 */
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 8; j++)
        mx = fmaxf(mx, fmaxf(sc[j][2 * r], sc[j][2 * r + 1]));
      mx = quad_max(mx);
      const float mb = mx == -INFINITY ? 0.0f : mx;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const float p0 = __bfloat162float(__float2bfloat16_rn(exp2f(sc[j][2 * r] - mb)));
        const float p1 = __bfloat162float(__float2bfloat16_rn(exp2f(sc[j][2 * r + 1] - mb)));
        sum += p0;
        sum += p1;
        pb[j >> 1][r][j & 1] = pack_bf16(p0, p1);
      }
      mw[r] = mx, lw[r] = quad_sum(sum);
    }
    if (t == 0)
#pragma unroll
      for (int r = 0; r < 2; r++)
        if (r * 8 + g < HT) m_s[warp][r * 8 + g] = mw[r], l_s[warp][r * 8 + g] = lw[r];

    float acc[NT][4 * NU][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int m = 0; m < 4 * NU; m++)
        acc[nt][m][0] = acc[nt][m][1] = acc[nt][m][2] = acc[nt][m][3] = 0.0f;
#pragma unroll
    for (int i0 = 0; i0 < 4; i0 += VB) {
      if (i0) load_v(i0);
#pragma unroll
      for (int i = 0; i < VB; i++)
#pragma unroll
        for (int u = 0; u < NU; u++)
#pragma unroll
          for (int w = 0; w < 4; w++) {
            const uint32_t k0 = word(vf[i][0][u], w), k1 = word(vf[i][1][u], w);
            const uint32_t k8 = word(vf[i][2][u], w), k9 = word(vf[i][3][u], w);
            const uint32_t a0 = __byte_perm(k0, k1, 0x5410), a1 = __byte_perm(k0, k1, 0x7632);
            const uint32_t a2 = __byte_perm(k8, k9, 0x5410), a3 = __byte_perm(k8, k9, 0x7632);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
              mma16816(acc[nt][u * 4 + w], a0, a1, a2, a3, pb[i0 + i][nt][0], pb[i0 + i][nt][1]);
          }
    }
    float *rw = r_s + warp * HT * DR;
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int u = 0; u < NU; u++)
#pragma unroll
        for (int w = 0; w < 4; w++) {
          const int h0 = nt * 8 + 2 * t, d = dec_rd(h0, u * 64 + g * 8 + 2 * w);
          const float *c4 = acc[nt][u * 4 + w]; /* dims d, d + 1 of heads h0, h0 + 1 */
          *reinterpret_cast<float2 *>(rw + h0 * DR + d) = make_float2(c4[0], c4[2]);
          *reinterpret_cast<float2 *>(rw + (h0 + 1) * DR + d) = make_float2(c4[1], c4[3]);
        }
    __syncthreads();

    /* the chunk's state from the warps': per head M = max m_w (exact), e_w = exp2(m_w - M)
     * (0 for a warp without keys), l = sum e_w l_w and O = sum e_w O_w in warp order; 8 dims of
     * a head a thread */
    const int V8 = D >> 3;
    for (int idx = tid; idx < G * V8; idx += DEC_THREADS) {
      const int h = idx / V8, d = (idx - h * V8) * 8, head = kvh * G + h;
      const float M = fmaxf(fmaxf(m_s[0][h], m_s[1][h]), fmaxf(m_s[2][h], m_s[3][h]));
      float ew[4], o[8], x[8], l = 0.0f;
#pragma unroll
      for (int wq = 0; wq < 4; wq++) {
        ew[wq] = m_s[wq][h] == -INFINITY ? 0.0f : exp2f(m_s[wq][h] - M);
        l = __fmaf_rn(ew[wq], l_s[wq][h], l);
      }
#pragma unroll
      for (int wq = 0; wq < 4; wq++) {
        dec_rd8(r_s + wq * HT * DR + h * DR + d, h, x);
#pragma unroll
        for (int e = 0; e < 8; e++)
          o[e] = wq ? __fmaf_rn(ew[wq], x[e], o[e]) : __fmul_rn(ew[0], x[e]);
      }
      if (nch == 1) {
#pragma unroll
        for (int e = 0; e < 8; e++)
          o[e] = finish(o[e], l);
        k_store8((bf16 *)a.out + (size_t)tok0 * a.ldo + (size_t)head * D + d, o);
      } else if (cm) {
        float4 *co = reinterpret_cast<float4 *>(cm_o + h * D + d);
        co[0] = make_float4(o[0], o[1], o[2], o[3]);
        co[1] = make_float4(o[4], o[5], o[6], o[7]);
        if (d == 0) cm_ml[h] = make_float2(M, l);
      } else {
        const size_t pi = (base + c) * a.n_heads + head;
        float4 *po = reinterpret_cast<float4 *>(a.part_o + pi * D + d);
        po[0] = make_float4(o[0], o[1], o[2], o[3]);
        po[1] = make_float4(o[4], o[5], o[6], o[7]);
        if (d == 0) {
          a.part_ml[pi * 2] = M;
          a.part_ml[pi * 2 + 1] = l;
        }
      }
    }
    /* fuse: count the state; the block that counts the slot's last one merges them. The
     * barrier puts the block's state writes before its count (the fence is cumulative). */
    if (fuse) {
      __syncthreads();
      if (tid == 0) {
        unsigned *cn = a.cnt + (size_t)s * a.n_kv_heads + kvh;
        __threadfence();
        const int last = atomicAdd(cn, 1u) == (unsigned)nch - 1;
        if (last) *cn = 0; /* every chunk counted: zero for the next call */
        s_merge = last;
      }
      __syncthreads();
      merge |= s_merge != 0;
    }
    if constexpr (RP) break; /* the block's one chunk */
  }
  if (cm) { /* the block's one chunk (split >= cluster size >= nch) */
    dec_cm_merge(a, cm_o, cm_ml, nch, tok0, kvh, G, D);
    return;
  }
  if (!merge) return;
  /* dec_combine_kernel's sums for the kv head's G query heads, in the same order: per head
   * M = max m_c, w_c = exp2(m_c - M) (w_s: [G][K_ATTN_FUSE_CHUNKS]) and l = sum w_c l_c; per
   * value sum w_c O_c, ascending chunks. The scores' shared memory is free (barrier above). */
  __threadfence(); /* the other blocks' states, counted before this block's last count */
  float *w_s = dsm;
  const int H = a.n_heads;
  for (int h = tid; h < G; h += DEC_THREADS) {
    const float *ml = a.part_ml + (base * H + kvh * G + h) * 2; /* chunk c at + c * 2 H */
    float M = -INFINITY, l = 0.0f;
    for (int c = 0; c < nch; c++)
      M = fmaxf(M, __ldcg(ml + (size_t)c * 2 * H));
    for (int c = 0; c < nch; c++) {
      const float w = exp2f(__ldcg(ml + (size_t)c * 2 * H) - M);
      w_s[h * K_ATTN_FUSE_CHUNKS + c] = w;
      l = __fmaf_rn(w, __ldcg(ml + (size_t)c * 2 * H + 1), l);
    }
    lm_s[h] = l;
  }
  __syncthreads();
  bf16 *out = (bf16 *)a.out + (size_t)tok0 * a.ldo + (size_t)kvh * G * D;
  for (int idx = tid; idx < G * D; idx += DEC_THREADS) {
    const int h = idx / D;
    const float *po = a.part_o + (base * H + kvh * G) * D + idx; /* chunk c at + c H D */
    const float o = dec_wsum<8>(w_s + h * K_ATTN_FUSE_CHUNKS, po, (size_t)H * D, nch, 0.0f);
    out[idx] = __float2bfloat16(finish(o, lm_s[h]));
  }
}

/* Block (slot, head), 128 threads: merge the chunk states (m_c, l_c, O_c) of a slot of more
 * than one chunk: M = max m_c (exact), w_c = exp2(m_c - M), out = sum w_c O_c / sum w_c l_c,
 * both sums taken in ascending chunk order. The arithmetic depends on the slot's length
 * alone. */
static __global__ void __launch_bounds__(128) dec_combine_kernel(k_attn_dec_args a) {
  __shared__ float w_s[DEC_TILE], l_s[DEC_TILE], x_s[4];
  k_pdl_enter((int)gridDim.x);
  const int s = blockIdx.x, pos0 = a.pos0[s], L = pos0 + 1;
  const int nch = pos0 < 0 ? 0 : (L + K_ATTN_CHUNK - 1) / K_ATTN_CHUNK;
  if (nch <= 1 || L > a.max_len || (a.cnt && nch <= K_ATTN_FUSE_CHUNKS)) return;
  const int h = blockIdx.y, D = a.head_dim, H = a.n_heads, tid = threadIdx.x;
  const int nch_max = (a.max_len + K_ATTN_CHUNK - 1) / K_ATTN_CHUNK;
  const size_t base = a.part_off ? (size_t)a.part_off[s] : (size_t)s * nch_max;
  const size_t first = base * H + h; /* state (s, c, h) at first + c * H */
  const float *ml = a.part_ml + first * 2;
  const float *po = a.part_o + first * D;
  float mx = -INFINITY;
  for (int c = tid; c < nch; c += 128)
    mx = fmaxf(mx, ml[(size_t)c * 2 * H]);
  mx = warp_max(mx);
  if ((tid & 31) == 0) x_s[tid >> 5] = mx;
  __syncthreads();
  const float M = fmaxf(fmaxf(x_s[0], x_s[1]), fmaxf(x_s[2], x_s[3]));
  float o[2] = {0.0f, 0.0f}, l = 0.0f; /* dims tid and tid + 128 */
  for (int c0 = 0; c0 < nch; c0 += DEC_TILE) {
    const int cn = min(DEC_TILE, nch - c0);
    __syncthreads(); /* the previous tile's weights are used */
    for (int c = tid; c < cn; c += 128) {
      const float *e = ml + (size_t)(c0 + c) * 2 * H;
      w_s[c] = exp2f(e[0] - M);
      l_s[c] = e[1];
    }
    __syncthreads();
    for (int c = 0; c < cn; c++)
      l = __fmaf_rn(w_s[c], l_s[c], l);
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const int d = tid + 128 * j;
      if (d >= D) break;
      o[j] = dec_wsum<32>(w_s, po + (size_t)c0 * H * D + d, (size_t)H * D, cn, o[j]);
    }
  }
  bf16 *out = (bf16 *)a.out + (size_t)a.tok0[s] * a.ldo + (size_t)h * D;
#pragma unroll
  for (int j = 0; j < 2; j++) {
    const int d = tid + 128 * j;
    if (d < D) out[d] = __float2bfloat16(finish(o[j], l));
  }
}

/* The blocks of dec_kernel<DB, NT, true> the device holds at once (0 until known; asked at
 * head_dim 128 only, run_dec). */
template <int DB, int NT> static int64_t dec_pf_wave(void) {
  static int64_t wave = -1;
  if (wave < 0) {
    int dev = 0, sms = 0, occ = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, dec_kernel<DB, NT, DB == 128>,
                                                      DEC_THREADS, dec_smem(DB, NT)) != cudaSuccess)
      return 0;
    wave = (int64_t)sms * occ;
  }
  return wave;
}

/* k_attn_dec_args.rope's work as its own kernel (k_rope_kv_write_part), before an attention
 * that does not rotate. */
static int dec_rope_apart(const k_attn_dec_args *a, cudaStream_t st) {
  return k_rope_kv_write_part((void *)a->q, a->ldq, &a->rope, a->rope.T, a->rope_pos, a->rope_slot,
                              a->inv_freq, a->n_heads, a->n_kv_heads, a->head_dim, &a->kv, a->layer,
                              st);
}

/* The dec_kernel instance of the forms chosen (EQ never with CM). */
template <int DB, int NT, bool CM>
static void (*dec_pick(bool rp, bool pf, bool eq))(k_attn_dec_args) {
  constexpr bool PF = DB == 128, RPOK = NT == 1 && DB <= 128;
  if (rp)
    return pf ? dec_kernel<DB, NT, PF, RPOK, false, CM>
              : dec_kernel<DB, NT, false, RPOK, false, CM>;
  if (pf) return dec_kernel<DB, NT, PF, false, false, CM>;
  if constexpr (!CM)
    if (eq) return dec_kernel<DB, NT, false, false, true>;
  return dec_kernel<DB, NT, false, false, false, CM>;
}

/* The L2 requests (PF) at head_dim 128 where every block runs at once (a small batch): on an
 * H200 they took llama3-8b batch-1 steps from 4.793-4.800 to 4.739-4.758 ms (four runs, two
 * calls), while at head_dim 64 (tinyllama-1.1b, llama3.2-1b: rows of 128 bytes, twice the
 * requests a byte) batch-1 steps were 0.2-2% slower (bench/RESULTS.md). Other head_dims
 * instantiate no PF kernel (dec_kernel<DB, NT, DB == 128> is the plain one for them). */
template <int DB, int NT> static int run_dec(const k_attn_dec_args *a, cudaStream_t st) {
  static int done[9];
  const int nch = (a->max_len + K_ATTN_CHUNK - 1) / K_ATTN_CHUNK;
  const int64_t per = (int64_t)a->n_slots * a->n_kv_heads;
  const int64_t cap = (K_ATTN_DEC_MAX_BLOCKS + per - 1) / per;
  int split = nch < cap ? nch : (int)cap;
  /* CM: clusters of csz blocks (2 to DEC_CM_MAX, up to the launch's longest slot) where the
   * launch is small and counters say which kernel merges (the combine kernel never touches a
   * slot of at most K_ATTN_FUSE_CHUNKS chunks given counters). Pairs where the clusters'
   * blocks fill at most half a wave, 4 or 8 only where they fill a quarter: on an H200, with
   * more, the clusters waited for room (llama3-8b batch 8 at context 384: 5.02 ms a step
   * without CM, 4.86 in pairs, 5.28 in fours; bench/RESULTS.md) */
  const int64_t wave = dec_pf_wave<DB, NT>();
  int csz = a->cnt && nch > 1 && per * 4 <= wave ? 2 : 0;
  while (csz && csz < nch && csz < DEC_CM_MAX && per * csz * 8 <= wave)
    csz *= 2;
  const bool cm = csz > 0;
  if (cm) split = (split < csz ? csz : split + csz - 1) / csz * csz;
  const size_t bytes = dec_smem(DB, NT, cm);
  constexpr bool PF = DB == 128, RPOK = NT == 1 && DB <= 128;
  const bool pf = PF && (int64_t)split * per <= wave;
  /* the rotation here: a block a chunk (so that one block writes the newest key before its
   * warps read it), at most 16 rows (a launch of few slots: the units' loads are a thread's
   * registers at two blocks an SM), else k_rope_kv_write_part first */
  const bool rp = a->rope.part && RPOK && split >= nch && a->rope.T <= 16;
  if (a->rope.part && !rp) {
    const int rc = dec_rope_apart(a, st);
    if (rc) return rc;
  }
  /* EQ (q's copy under the first k loads) where the launch is past one wave: on an H200 that
   * took llama3-8b's batch-128 step (context 512) from 9.268-9.361 to 9.161-9.205 ms, batch 32
   * at context 2048 from 8.209-8.220 to 8.146-8.154, llama3.2-1b's batch 128 from 2.557-2.591
   * to 2.529-2.557; for every launch, batch-1 steps of the 1B shapes were 1-2% slower
   * (bench/RESULTS.md) */
  const bool eq = !pf && !rp && !cm && (int64_t)split * per > wave;
  auto kern = cm ? dec_pick<DB, NT, true>(rp, pf, eq) : dec_pick<DB, NT, false>(rp, pf, eq);
  int rc = allow_smem(kern, &done[eq ? 8 : (cm ? 4 : 0) + (rp ? 2 : 0) + pf], bytes);
  if (rc) return rc;
  NS_CUDA_CHECK(k_launch_cl(kern, dim3(split, a->n_kv_heads, a->n_slots), dim3(DEC_THREADS), bytes,
                            st, true, cm ? (unsigned)csz : 0u, *a));
  if (nch > 1 && (!a->cnt || nch > K_ATTN_FUSE_CHUNKS)) /* slots the kernel does not merge */
    NS_CUDA_CHECK(
        k_launch_pdl(dec_combine_kernel, dim3(a->n_slots, a->n_heads), dim3(128), 0, st, *a));
  return 0;
}

extern "C" int k_attention_decode(const k_attn_dec_args *a, cudaStream_t st) {
  const int D = a->head_dim, H = a->n_heads, KV = a->n_kv_heads, PT = a->kv.page_tokens;
  if (!a->out || !a->q || !a->tok0 || !a->pos0 || !a->pt_off || !a->pages || H <= 0 || KV <= 0 ||
      H % KV || H / KV > 16 || H > 65535 || D <= 0 || D > 256 || D % 8 || a->ldq % 8 ||
      a->ldo % 8 || a->ldq < (H + 2 * KV) * D || a->ldo < H * D || a->n_slots < 0 ||
      a->n_slots > 65535 || a->max_len < 1 || a->kv.head_dim != D || a->kv.n_kv_heads != KV ||
      a->layer < 0 || a->layer >= a->kv.n_layers || PT < 8 || (PT & (PT - 1)) ||
      !k_aligned(a->q, 16) || !k_aligned(a->out, 16))
    return NS_EINVAL;
  if (a->rope.part && (!a->rope_pos || !a->rope_slot || !a->inv_freq || a->rope.T < 1 ||
                       a->rope.N != (H + 2 * KV) * D || a->rope.nseg < 1 || a->rope.bn % 8))
    return NS_EINVAL;
  if (a->max_len > K_ATTN_CHUNK &&
      (!a->part_o || !a->part_ml || !k_aligned(a->part_o, 16) || !k_aligned(a->part_ml, 8)))
    return NS_EINVAL;
  if (a->n_slots == 0) /* no slot to attend for: the rotation and the KV write still happen */
    return a->rope.part ? dec_rope_apart(a, st) : 0;
  const int two = H / KV > 8; /* two tiles of 8 query heads */
  if (D <= 64) return two ? run_dec<64, 2>(a, st) : run_dec<64, 1>(a, st);
  if (D <= 128) return two ? run_dec<128, 2>(a, st) : run_dec<128, 1>(a, st);
  return two ? run_dec<256, 2>(a, st) : run_dec<256, 1>(a, st);
}
