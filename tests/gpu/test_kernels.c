/* test_kernels.c — every CUDA kernel (and the GEMMs) against its CPU reference in
 * kernels/ref on fresh random bf16 inputs, outputs poisoned with NaN first; prints a table.
 * Batch invariance: attention rows and GEMM rows must be the same bits whatever else shares
 * the launch (decode or prefill, chunking, batch size, T). `--bench` times each at serving
 * sizes (GB/s against a device copy); `--small` keeps to the shapes the sanitizers run,
 * `--no-gemm` leaves the GEMMs out; `--gemm-dec` runs only the k_gemm_dec checks,
 * `--bench-gemm` those and then times only the decode GEMMs (`--no-checks`: the times
 * alone; `--dec-only`: without cuBLASLt's next to them; `--gemm-shape T,N,K`: that one call
 * alone, no step timings, for a profiler). Entry main(); exit 77 = no GPU. */
#include "ns_err.h"

#include <stdio.h>

#if !defined(NS_HAVE_CUDA_BACKEND)
int main(void) {
  printf("SKIP: built without the CUDA backend (NANOSERVE_CUDA=OFF or no nvcc found)\n");
  return 77;
}
#else
#include "attention.h"
#include "cuda_gemm.h"
#include "gather.h"
#include "gemm.h"
#include "ref/attention.h"
#include "ref/embed.h"
#include "ref/matmul.h"
#include "ref/rmsnorm.h"
#include "ref/rope_kv.h"
#include "ref/sample.h"
#include "ref/swiglu.h"
#include "rmsnorm.h"
#include "rope_kv.h"
#include "sample.h"
#include "swiglu.h"
#include "tensor.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* bf16 outputs: |got - ref| <= atol + RTOL |ref| (bf16 keeps 8 significant bits: one
 * rounding is <= 2^-9 relative, and inputs and outputs are each rounded once) */
#define RTOL 1e-2

static int failures, checks, small_only, no_gemm;

#define CK(stmt)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (stmt);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #stmt, cudaGetErrorString(e_));           \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define RC(stmt)                                                                                   \
  do {                                                                                             \
    int r_ = (stmt);                                                                               \
    if (r_) {                                                                                      \
      printf("FAIL %s:%d: %s returned %s\n", __FILE__, __LINE__, #stmt, ns_strerror(r_));          \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* ---- data ------------------------------------------------------------------------------------ */

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return rs;
}
static float uni(float a, float b) {
  return a + (b - a) * (float)((rnd() >> 40) * (1.0 / 16777216.0));
}
static int irand(int n) {
  return (int)(rnd() % (uint64_t)n);
}

/* n random values in [a, b), rounded to bf16: host fp32 copy and device bf16 copy. */
static float *rand_bf16(size_t n, float a, float b, void **dev) {
  float *h = malloc(n * sizeof *h);
  uint16_t *t = malloc(n * 2);
  for (size_t i = 0; i < n; i++) {
    t[i] = ns_f32_to_bf16(uni(a, b));
    h[i] = ns_bf16_to_f32(t[i]);
  }
  CK(cudaMalloc(dev, n * 2 + 16));
  CK(cudaMemcpy(*dev, t, n * 2, cudaMemcpyHostToDevice));
  free(t);
  return h;
}

static void *dev_i32(const int32_t *h, size_t n) {
  void *d;
  CK(cudaMalloc(&d, n * 4 + 16));
  CK(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
  return d;
}

/* Device buffer of n bf16 (or fp32) values poisoned with NaN (all bits set). */
static void *poisoned(size_t bytes) {
  void *d;
  CK(cudaMalloc(&d, bytes + 16));
  CK(cudaMemset(d, 0xff, bytes + 16));
  return d;
}

static float *back_bf16(const void *d, size_t n) {
  uint16_t *t = malloc(n * 2);
  float *h = malloc(n * sizeof *h);
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(t, d, n * 2, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++)
    h[i] = ns_bf16_to_f32(t[i]);
  free(t);
  return h;
}

/* ---- comparison --------------------------------------------------------------------------- */

static int report(const char *kernel, const char *shape, double err, double tol_note, int ok) {
  checks++;
  failures += !ok;
  printf("| %-16s | %-44s | %10.3g | %8.2g | %s |\n", kernel, shape, err, tol_note,
         ok ? "pass" : "FAIL");
  return ok;
}

/* Compare n values (strided: row r col c at [r * ld + c]) with atol + RTOL |ref|; returns
 * max |got - ref| and fails on NaN or a value out of tolerance. */
static int cmp(const char *kernel, const char *shape, const float *got, int ldg, const float *ref,
               int ldr, int rows, int cols, double atol) {
  double worst = 0;
  int ok = 1;
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      double g = got[(size_t)r * ldg + c], f = ref[(size_t)r * ldr + c], d = fabs(g - f);
      if (isnan(g) || d > atol + RTOL * fabs(f)) {
        if (ok) printf("  first bad value at row %d col %d: got %g want %g\n", r, c, g, f);
        ok = 0;
      }
      if (isnan(g)) d = INFINITY;
      worst = d > worst ? d : worst;
    }
  return report(kernel, shape, worst, atol, ok);
}

/* ---- row kernels ------------------------------------------------------------------------------
 */

static void test_embed_gather(int T, int hidden) {
  int vocab = 1001;
  void *dt, *dout, *dids;
  float *tab = rand_bf16((size_t)vocab * hidden, -1, 1, &dt);
  int32_t *ids = malloc((size_t)T * 4);
  for (int t = 0; t < T; t++)
    ids[t] = irand(vocab);
  dids = dev_i32(ids, T);
  dout = poisoned((size_t)T * hidden * 2);
  RC(k_embed(dout, hidden, dt, dids, T, hidden, vocab, 0));
  float *got = back_bf16(dout, (size_t)T * hidden), *ref = malloc((size_t)T * hidden * 4);
  RC(ref_embed(ref, hidden, tab, ids, T, hidden, vocab));
  char shape[96];
  snprintf(shape, sizeof shape, "T=%d hidden=%d vocab=%d", T, hidden, vocab);
  cmp("embed", shape, got, hidden, ref, hidden, T, hidden, 0);
  /* gather: rows of the table picked by ids (out_rows), exact copies */
  int n = T < 97 ? T : 97;
  void *dg = poisoned((size_t)n * hidden * 2);
  RC(k_gather_rows(dg, hidden, dt, hidden, dids, n, hidden, 0));
  float *gg = back_bf16(dg, (size_t)n * hidden);
  snprintf(shape, sizeof shape, "n=%d cols=%d", n, hidden);
  cmp("gather_rows", shape, gg, hidden, ref, hidden, n, hidden, 0);
  free(tab), free(ids), free(got), free(ref), free(gg);
  cudaFree(dt), cudaFree(dout), cudaFree(dids), cudaFree(dg);
}

static size_t ndiff16(const void *a, const void *b, size_t n);
static void *dev_copy(const void *src, size_t bytes);

/* k_embed_rmsnorm against k_embed then k_add_rmsnorm with first = 1, bit for bit (out and
 * residual), ids past the table (-1, vocab) among them; and a row of 203 values (no 16-byte
 * accesses) refused with NS_EUNSUPPORTED. */
static void test_embed_rmsnorm(int T, int hidden) {
  const int vocab = 1001;
  void *dt, *dw, *dids;
  free(rand_bf16((size_t)vocab * hidden, -1, 1, &dt));
  free(rand_bf16(hidden, 0.5f, 1.5f, &dw));
  int32_t *ids = malloc((size_t)T * 4);
  for (int t = 0; t < T; t++)
    ids[t] = t == 1 ? -1 : t == 2 ? vocab : irand(vocab);
  dids = dev_i32(ids, T);
  const size_t bytes = (size_t)T * hidden * 2;
  void *x = poisoned(bytes), *r = poisoned(bytes), *o2 = poisoned(bytes), *r2 = poisoned(bytes);
  RC(k_embed(x, hidden, dt, dids, T, hidden, vocab, 0));
  RC(k_add_rmsnorm(x, r, x, dw, T, hidden, hidden, 1e-5f, 1, 0));
  RC(k_embed_rmsnorm(o2, r2, dt, dids, vocab, dw, T, hidden, hidden, 1e-5f, 0));
  CK(cudaDeviceSynchronize());
  size_t d = ndiff16(x, o2, (size_t)T * hidden) + ndiff16(r, r2, (size_t)T * hidden);
  char shape[96];
  snprintf(shape, sizeof shape, "T=%d hidden=%d vocab=%d: against k_embed + k_add_rmsnorm", T,
           hidden, vocab);
  report("embed_rmsnorm", shape, (double)d, 0, d == 0);
  int rc = k_embed_rmsnorm(o2, r2, dt, dids, vocab, dw, 1, 203, 203, 1e-5f, 0);
  report("embed_rmsnorm", "a row of 203 values: NS_EUNSUPPORTED", rc, NS_EUNSUPPORTED,
         rc == NS_EUNSUPPORTED);
  free(ids);
  cudaFree(dt), cudaFree(dw), cudaFree(dids), cudaFree(x), cudaFree(r), cudaFree(o2), cudaFree(r2);
}

/* Against the reference, and the last row alone against the same row in the batch, bit for
 * bit (a row's sum of squares is taken in the same order at every batch size). */
static void test_rmsnorm(int rows, int dim, int first) {
  void *dx, *dr, *dw;
  float *x = rand_bf16((size_t)rows * dim, -2, 2, &dx);
  float *res = rand_bf16((size_t)rows * dim, -2, 2, &dr);
  float *w = rand_bf16(dim, 0.5f, 1.5f, &dw);
  float eps = 1e-5f;
  const size_t last = (size_t)(rows - 1) * dim * 2;
  void *x1 = dev_copy((char *)dx + last, (size_t)dim * 2),
       *r1 = dev_copy((char *)dr + last, (size_t)dim * 2);
  RC(k_add_rmsnorm(dx, dr, dx, dw, rows, dim, dim, eps, first, 0)); /* in place, as the backend */
  RC(k_add_rmsnorm(x1, r1, x1, dw, 1, dim, dim, eps, first, 0));
  size_t d = ndiff16((char *)dx + last, x1, dim) + ndiff16((char *)dr + last, r1, dim);
  char shape[96];
  snprintf(shape, sizeof shape, "rows=%d dim=%d first=%d: last row alone", rows, dim, first);
  report("add_rmsnorm invariance", shape, (double)d, 0, d == 0);
  cudaFree(x1), cudaFree(r1);
  float *out = back_bf16(dx, (size_t)rows * dim), *r2 = back_bf16(dr, (size_t)rows * dim);
  ref_add_rmsnorm(x, res, x, w, rows, dim, dim, eps, first);
  snprintf(shape, sizeof shape, "rows=%d dim=%d first=%d (out)", rows, dim, first);
  cmp("add_rmsnorm", shape, out, dim, x, dim, rows, dim, 1e-2);
  snprintf(shape, sizeof shape, "rows=%d dim=%d first=%d (residual)", rows, dim, first);
  cmp("add_rmsnorm", shape, r2, dim, res, dim, rows, dim, 1e-2);
  free(x), free(res), free(w), free(out), free(r2);
  cudaFree(dx), cudaFree(dr), cudaFree(dw);
}

static void test_swiglu(int T, int inter) {
  void *dg, *dout;
  float *gu = rand_bf16((size_t)T * 2 * inter, -4, 4, &dg);
  dout = poisoned((size_t)T * inter * 2);
  RC(k_swiglu(dout, inter, dg, 2 * inter, T, inter, 0));
  float *got = back_bf16(dout, (size_t)T * inter), *ref = malloc((size_t)T * inter * 4);
  ref_swiglu(ref, inter, gu, 2 * inter, T, inter);
  char shape[96];
  snprintf(shape, sizeof shape, "T=%d inter=%d", T, inter);
  cmp("swiglu", shape, got, inter, ref, inter, T, inter, 1e-3);
  free(gu), free(got), free(ref);
  cudaFree(dg), cudaFree(dout);
}

/* ---- KV cache in slabs ------------------------------------------------------------------- */

typedef struct cache {
  k_kv_layout l;
  void *slab_ptrs[16];
  void *dptrs;
  int n_pages;
} cache;

static void cache_make(cache *c, int n_layers, int n_kv, int hd, int pt, int pps, int n_slabs,
                       int fill) {
  memset(c, 0, sizeof *c);
  c->l = (k_kv_layout){NULL, n_slabs, pps, pt, n_kv, hd, n_layers};
  size_t bytes = k_kv_slab_bytes(&c->l);
  for (int i = 0; i < n_slabs; i++) {
    if (fill == 1) {
      float *h = rand_bf16(bytes / 2, -1, 1, &c->slab_ptrs[i]);
      free(h);
    } else if (fill == 2) { /* bench: a non-zero pattern, quick to make */
      CK(cudaMalloc(&c->slab_ptrs[i], bytes));
      CK(cudaMemset(c->slab_ptrs[i], 0x3c, bytes));
    } else {
      c->slab_ptrs[i] = poisoned(bytes);
    }
  }
  c->dptrs = dev_i32((const int32_t *)c->slab_ptrs, (size_t)n_slabs * 2);
  c->l.slabs = (void *const *)c->dptrs;
  c->n_pages = pps * n_slabs;
}

/* Layer `layer`'s k (kv 0) or v as fp32 [slots][n_kv][hd] (the reference's layout). */
static float *cache_slots(const cache *c, int layer, int kv) {
  const k_kv_layout *l = &c->l;
  size_t page = (size_t)l->page_tokens * l->n_kv_heads * l->head_dim;
  float *out = malloc((size_t)c->n_pages * page * 4);
  for (int s = 0; s < l->n_slabs; s++) {
    size_t at = ((size_t)(layer * 2 + kv) * l->pages_per_slab) * page;
    float *h = back_bf16((const uint16_t *)c->slab_ptrs[s] + at, page * l->pages_per_slab);
    memcpy(out + (size_t)s * l->pages_per_slab * page, h, page * l->pages_per_slab * 4);
    free(h);
  }
  return out;
}

static void cache_free(cache *c) {
  for (int i = 0; i < c->l.n_slabs; i++)
    cudaFree(c->slab_ptrs[i]);
  cudaFree(c->dptrs);
}

static void shuffle(int32_t *a, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = irand(i + 1), t = a[i];
    a[i] = a[j], a[j] = t;
  }
}

static void test_rope(int T, int H, int KV, int hd, int kind, int pt) {
  const char *kn[] = {"default", "linear", "llama3"};
  int ld = (H + 2 * KV) * hd, layers = 2, layer = 1;
  cache c;
  cache_make(&c, layers, KV, hd, pt, 7 * 16 / pt + 1, 3, 0); /* >= 336 slots at any pt */
  int slots = c.n_pages * pt;
  int32_t *perm = malloc((size_t)slots * 4), *pos = malloc((size_t)T * 4);
  for (int i = 0; i < slots; i++)
    perm[i] = i;
  shuffle(perm, slots);
  for (int t = 0; t < T; t++)
    pos[t] = irand(4000);
  int32_t *slot = perm; /* distinct random slots (T <= slots) */
  void *dq, *dpos = dev_i32(pos, T), *dslot = dev_i32(slot, T), *dinv;
  float *q = rand_bf16((size_t)T * ld, -2, 2, &dq);
  float *inv = malloc((size_t)hd / 2 * 4);
  ref_rope_inv_freq(inv, hd, kind == 2 ? 500000.0f : 10000.0f, kind, kind == 1 ? 2.0f : 8.0f, 1.0f,
                    4.0f, 8192);
  CK(cudaMalloc(&dinv, (size_t)hd * 2));
  CK(cudaMemcpy(dinv, inv, (size_t)hd / 2 * 4, cudaMemcpyHostToDevice));
  RC(k_rope_kv_write(dq, ld, T, dpos, dslot, dinv, H, KV, hd, &c.l, layer, 0));
  float *got = back_bf16(dq, (size_t)T * ld);
  float *kc = calloc((size_t)slots * KV * hd, 4), *vc = calloc((size_t)slots * KV * hd, 4);
  ref_rope_kv_write(q, ld, T, pos, slot, inv, H, KV, hd, kc, vc);
  char shape[96];
  snprintf(shape, sizeof shape, "T=%d H=%d KV=%d hd=%d pt=%d %s (qkv)", T, H, KV, hd, pt, kn[kind]);
  /* the kernel rounds cos, sin and each product to bf16 as bf16 models do (the reference
   * does not): a few half-ulps of the |q| <= 2 inputs */
  cmp("rope_kv_write", shape, got, ld, q, ld, T, ld, 0.016);
  float *gk = cache_slots(&c, layer, 0), *gv = cache_slots(&c, layer, 1);
  int row = KV * hd;
  float *rk = malloc((size_t)T * row * 4), *rv = malloc((size_t)T * row * 4);
  float *ak = malloc((size_t)T * row * 4), *av = malloc((size_t)T * row * 4);
  for (int t = 0; t < T; t++) {
    memcpy(rk + (size_t)t * row, kc + (size_t)slot[t] * row, (size_t)row * 4);
    memcpy(rv + (size_t)t * row, vc + (size_t)slot[t] * row, (size_t)row * 4);
    memcpy(ak + (size_t)t * row, gk + (size_t)slot[t] * row, (size_t)row * 4);
    memcpy(av + (size_t)t * row, gv + (size_t)slot[t] * row, (size_t)row * 4);
  }
  snprintf(shape, sizeof shape, "T=%d H=%d KV=%d hd=%d pt=%d %s (cache)", T, H, KV, hd, pt,
           kn[kind]);
  cmp("rope_kv_write", shape, ak, row, rk, row, T, row, 0.016);
  cmp("rope_kv_write", shape, av, row, rv, row, T, row, 0);
  free(perm), free(pos), free(q), free(inv), free(got), free(kc), free(vc), free(gk), free(gv);
  free(rk), free(rv), free(ak), free(av);
  cudaFree(dq), cudaFree(dpos), cudaFree(dslot), cudaFree(dinv);
  cache_free(&c);
}

/* ---- attention ------------------------------------------------------------------------------ */

static void test_attention(const char *what, int n_seqs, const int *n_new_in, const int *pos0_in,
                           int H, int KV, int hd, int pt) {
  int layers = 2, layer = 1;
  int32_t *n_new = malloc((size_t)n_seqs * 4), *pos0 = malloc((size_t)n_seqs * 4);
  int32_t *tok0 = malloc((size_t)n_seqs * 4), *pt_off = malloc((size_t)n_seqs * 4);
  int T = 0, pages = 0, maxpg = 1;
  for (int s = 0; s < n_seqs; s++) {
    n_new[s] = n_new_in[s];
    pos0[s] = pos0_in[s];
    tok0[s] = T;
    T += n_new[s];
    int np = (pos0[s] + n_new[s] + pt - 1) / pt;
    pt_off[s] = pages;
    pages += np;
    maxpg = np > maxpg ? np : maxpg;
  }
  int n_slabs = 3, pps = (pages + n_slabs - 1) / n_slabs + 1; /* pages span the slabs */
  cache c;
  cache_make(&c, layers, KV, hd, pt, pps, n_slabs, 1);
  int32_t *perm = malloc((size_t)c.n_pages * 4), *bt = calloc((size_t)n_seqs * maxpg, 4);
  for (int i = 0; i < c.n_pages; i++)
    perm[i] = i;
  shuffle(perm, c.n_pages); /* pages[] = perm[0 .. pages) */
  for (int s = 0; s < n_seqs; s++)
    for (int i = 0; i < (pos0[s] + n_new[s] + pt - 1) / pt; i++)
      bt[s * maxpg + i] = perm[pt_off[s] + i];
  int ldq = (H + 2 * KV) * hd, ldo = H * hd;
  void *dq;
  float *q = rand_bf16((size_t)T * ldq, -2, 2, &dq);
  void *dout = poisoned((size_t)T * ldo * 2);
  int n_pf;
  k_pf_item *pf = malloc((size_t)T * sizeof *pf);
  RC(k_attn_plan(n_seqs, n_new, H, KV, pf, T, &n_pf));
  void *d_pf;
  CK(cudaMalloc(&d_pf, (size_t)T * sizeof *pf));
  CK(cudaMemcpy(d_pf, pf, (size_t)n_pf * sizeof *pf, cudaMemcpyHostToDevice));
  k_attn_args a = {
      .out = dout,
      .ldo = ldo,
      .q = dq,
      .ldq = ldq,
      .tok0 = dev_i32(tok0, n_seqs),
      .n_new = dev_i32(n_new, n_seqs),
      .pos0 = dev_i32(pos0, n_seqs),
      .pt_off = dev_i32(pt_off, n_seqs),
      .pages = dev_i32(perm, pages),
      .pf = d_pf,
      .n_pf = n_pf,
      .kv = c.l,
      .layer = layer,
      .n_heads = H,
      .n_kv_heads = KV,
      .head_dim = hd,
      .scale = (float)(1.0 / sqrt((double)hd)),
  };
  RC(k_attention(&a, 0));
  float *got = back_bf16(dout, (size_t)T * ldo), *ref = malloc((size_t)T * ldo * 4);
  float *kc = cache_slots(&c, layer, 0), *vc = cache_slots(&c, layer, 1);
  ref_attention(ref, ldo, q, ldq, n_seqs, tok0, n_new, pos0, bt, maxpg, kc, vc, pt, H, KV, hd,
                a.scale, 0, H);
  char shape[128];
  snprintf(shape, sizeof shape, "%s: %d seqs T=%d H=%d KV=%d hd=%d pt=%d (%d items)", what, n_seqs,
           T, H, KV, hd, pt, n_pf);
  cmp("attention", shape, got, ldo, ref, ldo, T, ldo, 4e-3);
  free(n_new), free(pos0), free(tok0), free(pt_off), free(perm), free(bt), free(q);
  free(pf), free(got), free(ref), free(kc), free(vc);
  cudaFree(dq), cudaFree(dout), cudaFree(d_pf);
  cudaFree((void *)a.tok0), cudaFree((void *)a.n_new), cudaFree((void *)a.pos0);
  cudaFree((void *)a.pt_off), cudaFree((void *)a.pages);
  cache_free(&c);
}

static void attention_cases(void) {
  int nn[97], p0[97];
  /* batch 97 of decodes, odd random lengths (several splits each) */
  for (int i = 0; i < 97; i++)
    nn[i] = 1, p0[i] = 2 * irand(700);
  if (!small_only) test_attention("decode", 97, nn, p0, 32, 8, 128, 16);
  int n1 = 1, l1 = small_only ? 300 : 3001;
  test_attention("decode", 1, &n1, &l1, 8, 1, 64, 16);
  test_attention("decode", 1, &n1, &l1, 32, 8, 128, 16);
  /* ragged prefill and decode rows in one batch */
  int rn[5] = {1, small_only ? 37 : 257, 33, 2, 100}, rp[5] = {0, 0, 70, 5, 301};
  test_attention("mixed", 5, rn, rp, 4, 4, 64, 16);
  test_attention("mixed", 5, rn, rp, 16, 2, 128, 16);
  int gn[3] = {small_only ? 17 : 257, 17, 1}, gp[3] = {3, 200, 999};
  test_attention("mixed", 3, gn, gp, 32, 8, 128, 16);
  test_attention("mixed", 3, gn, gp, 5, 1, 40, 16);  /* the odd golden shape */
  test_attention("mixed", 3, gn, gp, 14, 2, 64, 16); /* qwen2-0.5b: G 7 */
  int hn[2] = {small_only ? 130 : 700, 65}, hp[2] = {0, 1000};
  test_attention("prefill", 2, hn, hp, 16, 1, 64, 16); /* G 16: 4 rows an item */
  test_attention("prefill", 2, hn, hp, 8, 4, 256, 16); /* hd 256 */
  if (!small_only) {
    for (int i = 0; i < 97; i++)
      nn[i] = 1 + irand(40), p0[i] = irand(300);
    test_attention("prefill", 97, nn, p0, 8, 2, 64, 16);
  }
  /* engine.kv_page_tokens takes 8 .. 256: the ragged batches at the largest pages */
  for (int pt = 64; pt <= 256; pt *= 2) {
    test_attention("mixed", 5, rn, rp, 16, 2, 128, pt);
    test_attention("mixed", 3, gn, gp, 32, 8, 128, pt);
  }
}

/* ---- attention: batch invariance ----------------------------------------------------------- */

/* Windows of one sequence of P keys (its pages shared by every window): window i has n_new[i]
 * rows at positions pos0[i] .., q rows taken from qsrc (row p = position p). Returns the
 * output rows of the batch as fp32 (exact copies of the bf16 bits). */
static float *attn_windows(const cache *c, const int32_t *d_pages, const void *qsrc, int n,
                           const int32_t *n_new, const int32_t *pos0, int H, int KV, int hd,
                           int *T_out) {
  int ldq = (H + 2 * KV) * hd, ldo = H * hd, T = 0;
  int32_t *tok0 = malloc((size_t)n * 4), *pt_off = calloc((size_t)n, 4);
  for (int i = 0; i < n; i++)
    tok0[i] = T, T += n_new[i];
  void *dq, *dout = poisoned((size_t)T * ldo * 2);
  CK(cudaMalloc(&dq, (size_t)T * ldq * 2));
  for (int i = 0; i < n; i++)
    CK(cudaMemcpy((char *)dq + (size_t)tok0[i] * ldq * 2,
                  (const char *)qsrc + (size_t)pos0[i] * ldq * 2, (size_t)n_new[i] * ldq * 2,
                  cudaMemcpyDeviceToDevice));
  int n_pf;
  k_pf_item *pf = malloc((size_t)T * sizeof *pf);
  RC(k_attn_plan(n, n_new, H, KV, pf, T, &n_pf));
  void *d_pf = dev_i32((int32_t *)pf, (size_t)n_pf * 2 + 2);
  k_attn_args a = {.out = dout,
                   .ldo = ldo,
                   .q = dq,
                   .ldq = ldq,
                   .tok0 = dev_i32(tok0, n),
                   .n_new = dev_i32(n_new, n),
                   .pos0 = dev_i32(pos0, n),
                   .pt_off = dev_i32(pt_off, n),
                   .pages = d_pages,
                   .pf = d_pf,
                   .n_pf = n_pf,
                   .kv = c->l,
                   .layer = 1,
                   .n_heads = H,
                   .n_kv_heads = KV,
                   .head_dim = hd,
                   .scale = (float)(1.0 / sqrt((double)hd))};
  RC(k_attention(&a, 0));
  float *out = back_bf16(dout, (size_t)T * ldo);
  cudaFree(dq), cudaFree(dout), cudaFree(d_pf), cudaFree((void *)a.tok0);
  cudaFree((void *)a.n_new), cudaFree((void *)a.pos0), cudaFree((void *)a.pt_off);
  free(tok0), free(pt_off), free(pf);
  *T_out = T;
  return out;
}

/* Rows of one sequence computed as one prefill, as decodes alone and batched, in prefill
 * chunks next to decodes: every row the same bits as in the one prefill. */
static void test_attention_invariance(int H, int KV, int hd, int P) {
  int pt = 16, np = (P + pt - 1) / pt, ldq = (H + 2 * KV) * hd, ldo = H * hd, T;
  cache c;
  cache_make(&c, 2, KV, hd, pt, np + 3, 2, 1);
  int32_t *perm = malloc((size_t)c.n_pages * 4);
  for (int i = 0; i < c.n_pages; i++)
    perm[i] = i;
  shuffle(perm, c.n_pages);
  void *d_pages = dev_i32(perm, np), *dq;
  free(rand_bf16((size_t)P * ldq, -2, 2, &dq));
  int32_t one_n = P, one_p = 0;
  float *ref = attn_windows(&c, d_pages, dq, 1, &one_n, &one_p, H, KV, hd, &T);
  int n_cfg = 0, bad_rows = 0, rows = 0;
  int32_t *nn = malloc((size_t)P * 4), *pp = malloc((size_t)P * 4);
  for (int cfg = 0; cfg < 5; cfg++) {
    int n = 0;
    if (cfg == 0) { /* every row a decode, all in one batch */
      for (int p = 0; p < P; p++)
        nn[n] = 1, pp[n++] = p;
    } else if (cfg == 1) { /* chunks of 100 (the last chunk's rows see 7 chunks of keys) */
      for (int p = 0; p < P; p += 100)
        nn[n] = p + 100 <= P ? 100 : P - p, pp[n++] = p;
    } else if (cfg == 2) { /* odd chunks and single rows, reversed order */
      int cuts[] = {0, 1, 2, 33, 255, 256, 257, 258, 511, 513, 600, P - 1, P};
      for (int i = (int)(sizeof cuts / sizeof cuts[0]) - 2; i >= 0; i--)
        if (cuts[i + 1] > cuts[i] && cuts[i + 1] <= P)
          nn[n] = cuts[i + 1] - cuts[i], pp[n++] = cuts[i];
    } else { /* single decode rows alone (cfg 3) and random windows next to decodes (cfg 4) */
      for (int i = 0; i < (cfg == 3 ? 1 : 40); i++) {
        int p = irand(P), w = cfg == 3 ? 1 : 1 + irand(p + 1 < 40 ? p + 1 : 40);
        if (w > P - p) w = P - p;
        nn[n] = w, pp[n++] = p;
      }
    }
    float *got = attn_windows(&c, d_pages, dq, n, nn, pp, H, KV, hd, &T);
    for (int i = 0, t = 0; i < n; i++)
      for (int r = 0; r < nn[i]; r++, t++) {
        rows++;
        bad_rows +=
            memcmp(got + (size_t)t * ldo, ref + (size_t)(pp[i] + r) * ldo, (size_t)ldo * 4) != 0;
      }
    free(got);
    n_cfg++;
  }
  char shape[128];
  snprintf(shape, sizeof shape, "%d keys H=%d KV=%d hd=%d: %d rows of %d batches", P, H, KV, hd,
           rows, n_cfg);
  report("attn invariance", shape, bad_rows, 0, bad_rows == 0);
  if (bad_rows) printf("  %d of %d rows differ from the one-prefill rows\n", bad_rows, rows);
  free(ref), free(nn), free(pp), free(perm);
  cudaFree(d_pages), cudaFree(dq);
  cache_free(&c);
}

/* ---- attention: decode slots ---------------------------------------------------------------- */

/* Sequences for k_attention_decode over one cache: sequence i has len[i] keys (0: an empty
 * slot) in shuffled pages of its own, the keys past its end in its last page poisoned with
 * NaN (never to be read), its query in row i of q and its output in row i of out. */
typedef struct dec_set {
  int n, H, KV, hd, pt, maxpg;
  int32_t *len, *pt_off, *bt; /* host; bt: [n][maxpg] page tables for the reference */
  cache c;
  void *dq, *d_pages;
  float *q; /* host copy of the q rows */
} dec_set;

/* Device address of page `page` of layer `layer`'s k (kv 0) or v. */
static uint16_t *cache_page(const cache *c, int layer, int kv, int page) {
  const k_kv_layout *l = &c->l;
  size_t pe = (size_t)l->page_tokens * l->n_kv_heads * l->head_dim;
  int slab = page / l->pages_per_slab, in = page % l->pages_per_slab;
  return (uint16_t *)c->slab_ptrs[slab] + ((size_t)(layer * 2 + kv) * l->pages_per_slab + in) * pe;
}

static void dec_set_make(dec_set *d, int n, const int *len, int H, int KV, int hd, int pt) {
  memset(d, 0, sizeof *d);
  d->n = n, d->H = H, d->KV = KV, d->hd = hd, d->pt = pt, d->maxpg = 1;
  d->len = malloc((size_t)n * 4), d->pt_off = malloc((size_t)n * 4);
  int pages = 0;
  for (int i = 0; i < n; i++) {
    int np = (len[i] + pt - 1) / pt;
    d->len[i] = len[i], d->pt_off[i] = pages, pages += np;
    d->maxpg = np > d->maxpg ? np : d->maxpg;
  }
  int n_slabs = 3, pps = pages / n_slabs + 2; /* the pages span the slabs */
  cache_make(&d->c, 2, KV, hd, pt, pps, n_slabs, 1);
  int32_t *perm = malloc((size_t)d->c.n_pages * 4);
  for (int i = 0; i < d->c.n_pages; i++)
    perm[i] = i;
  shuffle(perm, d->c.n_pages); /* pages[] = perm[0 .. pages) */
  d->bt = calloc((size_t)n * d->maxpg, 4);
  size_t row = (size_t)KV * hd;
  for (int i = 0; i < n; i++) {
    int np = (len[i] + pt - 1) / pt, used = len[i] % pt;
    for (int j = 0; j < np; j++)
      d->bt[(size_t)i * d->maxpg + j] = perm[d->pt_off[i] + j];
    if (used)
      for (int kv = 0; kv < 2; kv++)
        CK(cudaMemset(cache_page(&d->c, 1, kv, perm[d->pt_off[i] + np - 1]) + used * row, 0xff,
                      (size_t)(pt - used) * row * 2));
  }
  d->d_pages = dev_i32(perm, (size_t)pages + 1);
  d->q = rand_bf16((size_t)n * (H + 2 * KV) * hd, -2, 2, &d->dq);
  free(perm);
}

static void dec_set_free(dec_set *d) {
  free(d->len), free(d->pt_off), free(d->bt), free(d->q);
  cudaFree(d->dq), cudaFree(d->d_pages);
  cache_free(&d->c);
}

/* dec_run passes chunk counters (the decode kernel merges a slot's chunk states) unless
 * dec_no_cnt; dec_cnt_left counts counters a call left non-zero. */
static int dec_no_cnt, dec_cnt_left;

/* k_attention_decode (layer 1) with slot i holding sequence seq[i], the query rows in q (NULL:
 * d's) and, with rope, its rotation fields; returns the n output rows as fp32 (exact copies of
 * the bf16 bits; rows no slot wrote keep the NaN poison). */
static float *dec_run_with(const dec_set *d, int n_slots, const int *seq, int max_len, void *q,
                           const k_attn_dec_args *rope) {
  int ldo = d->H * d->hd;
  int32_t *tok0 = malloc((size_t)n_slots * 4), *pos0 = malloc((size_t)n_slots * 4);
  int32_t *off = malloc((size_t)n_slots * 4);
  for (int i = 0; i < n_slots; i++)
    tok0[i] = seq[i], pos0[i] = d->len[seq[i]] - 1, off[i] = d->pt_off[seq[i]];
  void *dout = poisoned((size_t)d->n * ldo * 2);
  int64_t npo, nml;
  k_attn_dec_scratch(n_slots, max_len, d->H, d->hd, &npo, &nml);
  void *po = npo ? poisoned((size_t)npo * 4) : NULL, *pml = nml ? poisoned((size_t)nml * 4) : NULL;
  const size_t ncnt = (size_t)n_slots * d->KV;
  unsigned *cnt = NULL;
  if (!dec_no_cnt) {
    CK(cudaMalloc((void **)&cnt, ncnt * 4));
    CK(cudaMemset(cnt, 0, ncnt * 4));
  }
  k_attn_dec_args a = {.out = dout,
                       .ldo = ldo,
                       .q = q ? q : d->dq,
                       .ldq = (d->H + 2 * d->KV) * d->hd,
                       .tok0 = dev_i32(tok0, n_slots),
                       .pos0 = dev_i32(pos0, n_slots),
                       .pt_off = dev_i32(off, n_slots),
                       .pages = d->d_pages,
                       .n_slots = n_slots,
                       .max_len = max_len,
                       .part_o = po,
                       .part_ml = pml,
                       .cnt = cnt,
                       .kv = d->c.l,
                       .layer = 1,
                       .n_heads = d->H,
                       .n_kv_heads = d->KV,
                       .head_dim = d->hd,
                       .scale = (float)(1.0 / sqrt((double)d->hd))};
  if (rope) {
    a.rope = rope->rope, a.rope_pos = rope->rope_pos, a.rope_slot = rope->rope_slot;
    a.inv_freq = rope->inv_freq;
  }
  RC(k_attention_decode(&a, 0));
  float *out = back_bf16(dout, (size_t)d->n * ldo);
  if (cnt) {
    unsigned *hc = malloc(ncnt * 4);
    CK(cudaMemcpy(hc, cnt, ncnt * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < ncnt; i++)
      dec_cnt_left += hc[i] != 0;
    free(hc);
  }
  cudaFree(dout), cudaFree(po), cudaFree(pml), cudaFree(cnt);
  cudaFree((void *)a.tok0), cudaFree((void *)a.pos0), cudaFree((void *)a.pt_off);
  free(tok0), free(pos0), free(off);
  return out;
}

static float *dec_run(const dec_set *d, int n_slots, const int *seq, int max_len) {
  return dec_run_with(d, n_slots, seq, max_len, NULL, NULL);
}

/* Sequences of lengths len (0: an empty slot) in shuffled slots against ref_attention; the
 * rows of empty slots must keep their poison. */
static void test_attn_decode(const char *what, int n, const int *len, int H, int KV, int hd, int pt,
                             int max_len) {
  dec_set d;
  dec_set_make(&d, n, len, H, KV, hd, pt);
  int32_t *seq = malloc((size_t)n * 4);
  for (int i = 0; i < n; i++)
    seq[i] = i;
  shuffle(seq, n);
  float *got = dec_run(&d, n, seq, max_len);
  int ldq = (H + 2 * KV) * hd, ldo = H * hd, rows = 0, empty_bad = 0;
  int32_t *nn = malloc((size_t)n * 4), *p0 = malloc((size_t)n * 4), *t0 = malloc((size_t)n * 4);
  for (int i = 0; i < n; i++)
    nn[i] = len[i] > 0, p0[i] = len[i] - 1, t0[i] = i;
  float *ref = malloc((size_t)n * ldo * 4);
  float *kc = cache_slots(&d.c, 1, 0), *vc = cache_slots(&d.c, 1, 1);
  ref_attention(ref, ldo, d.q, ldq, n, t0, nn, p0, d.bt, d.maxpg, kc, vc, pt, H, KV, hd,
                (float)(1.0 / sqrt((double)hd)), 0, H);
  float *g2 = calloc((size_t)n * ldo, 4), *r2 = calloc((size_t)n * ldo, 4);
  for (int i = 0; i < n; i++) {
    if (len[i] > 0) {
      memcpy(g2 + (size_t)rows * ldo, got + (size_t)i * ldo, (size_t)ldo * 4);
      memcpy(r2 + (size_t)rows * ldo, ref + (size_t)i * ldo, (size_t)ldo * 4);
      rows++;
    } else {
      for (int c = 0; c < ldo; c++)
        empty_bad += !isnan(got[(size_t)i * ldo + c]);
    }
  }
  char shape[128];
  snprintf(shape, sizeof shape, "%s: %d slots H=%d KV=%d hd=%d pt=%d max %d", what, n, H, KV, hd,
           pt, max_len);
  cmp("attn_decode", shape, g2, ldo, r2, ldo, rows, ldo, 4e-3);
  if (rows < n) {
    snprintf(shape, sizeof shape, "%s: %d empty slots left unwritten", what, n - rows);
    report("attn_decode", shape, empty_bad, 0, empty_bad == 0);
  }
  free(seq), free(got), free(nn), free(p0), free(t0), free(ref), free(kc), free(vc), free(g2);
  free(r2);
  dec_set_free(&d);
}

static void attn_decode_cases(void) {
  /* one chunk, a chunk and a key, several chunks, empty slots (0) */
  int edge[] = {1, 2, 255, 256, 257, 0, small_only ? 600 : 3001, 512, 513, 0, 100};
  int ne = (int)(sizeof edge / sizeof edge[0]), emax = (small_only ? 600 : 3001) + 200;
  test_attn_decode("edges", ne, edge, 32, 8, 128, 16, emax); /* llama3-8b: G 4 */
  test_attn_decode("edges", ne, edge, 14, 2, 64, 64, emax);  /* qwen2-0.5b: G 7 */
  test_attn_decode("edges", ne, edge, 5, 1, 40, 16, emax);   /* the odd golden shape: G 5 */
  test_attn_decode("edges", ne, edge, 16, 1, 64, 64, emax);  /* G 16: two head tiles */
  test_attn_decode("edges", ne, edge, 24, 2, 128, 16, emax); /* G 12, hd 128 */
  test_attn_decode("edges", ne, edge, 8, 4, 256, 16, emax);  /* hd 256 */
  /* a slot alone, 2 .. 8 chunks: its blocks in a cluster merge the chunk states in shared
   * memory (dec_kernel's CM) under its own max_len and under a graph's (8192: clusters of 8);
   * 12 chunks under 8192: the states through L2 */
  const int alone[] = {257, 700, 1500, 2048};
  for (int i = 0; i < 4; i++) {
    test_attn_decode("alone", 1, alone + i, 32, 8, 128, 16, alone[i]); /* llama3-8b */
    test_attn_decode("alone", 1, alone + i, 32, 4, 64, 16, 8192);      /* tinyllama */
  }
  test_attn_decode("alone", 1, (const int[]){3000}, 32, 8, 128, 16, 8192);
  /* four slots in clusters of two: 2 chunks merged in the cluster, 4 through L2, 1 and none */
  test_attn_decode("small", 4, (const int[]){300, 1000, 0, 1}, 32, 8, 128, 16, 1024);
  test_attn_decode("small", 4, (const int[]){300, 1000, 0, 1}, 32, 4, 64, 64, 1024);
  test_attn_decode("alone", 1, (const int[]){600}, 16, 1, 64, 64, 600); /* G 16: two head tiles */
  test_attn_decode("alone", 1, (const int[]){600}, 8, 4, 256, 16, 600); /* hd 256 */
  int n = small_only ? 17 : 97, len[97];
  for (int i = 0; i < n; i++) /* random lengths, about one slot in ten empty */
    len[i] = irand(10) ? 1 + irand(small_only ? 700 : 2000) : 0;
  test_attn_decode("random", n, len, 32, 4, 64, 16, 4096); /* tinyllama: G 8 */
  test_attn_decode("random", n, len, 4, 4, 128, 64, 2001); /* G 1 */
  test_attn_decode("random", n, len, 12, 4, 96, 8, 2048);  /* hd 96, 8-key pages */
  /* the largest pages engine.kv_page_tokens takes: a page as long as a chunk (256 keys) */
  test_attn_decode("edges", ne, edge, 32, 8, 128, 128, emax);
  test_attn_decode("edges", ne, edge, 32, 4, 64, 256, emax);
  test_attn_decode("random", n, len, 32, 8, 128, 256, 4096);
  test_attn_decode("alone", 1, (const int[]){3000}, 32, 8, 128, 256, 8192);
}

/* Every row the same bits whether its slot runs alone (max_len its own length), among n
 * slots under a max_len whose chunks outnumber a block's split (blocks loop), or in reverse
 * slot order under a larger max_len. At head_dim 128 a slot alone is mostly one wave of
 * blocks, which asks L2 for its keys before the wait (dec_kernel's PF form), the n-slot
 * launches are not: this check also holds the two forms to the same bits. */
static void test_attn_decode_invariance(int H, int KV, int hd, int pt) {
  int n = small_only ? 33 : 97, cap = (K_ATTN_DEC_MAX_BLOCKS + n * KV - 1) / (n * KV);
  int big = (cap + 2) * K_ATTN_CHUNK, len[97], seq[97], ldo = H * hd;
  for (int i = 0; i < n; i++)
    len[i] = 1 + irand(small_only ? 700 : 1500);
  len[0] = 1, len[1] = 256, len[2] = 257, len[3] = big, len[4] = cap * K_ATTN_CHUNK + 1;
  len[5] = 0, len[n / 2] = 0;
  dec_set d;
  dec_set_make(&d, n, len, H, KV, hd, pt);
  for (int i = 0; i < n; i++)
    seq[i] = i;
  float *all = dec_run(&d, n, seq, big);
  for (int i = 0; i < n; i++)
    seq[i] = n - 1 - i;
  float *rev = dec_run(&d, n, seq, big + 3000);
  int bad_rows = 0;
  for (int i = 0; i < n; i++) {
    dec_no_cnt = i % 2; /* merged by the decode kernel or by the combine kernel */
    float *one = dec_run(&d, 1, &i, len[i] > 0 ? len[i] : 1);
    dec_no_cnt = 0;
    size_t at = (size_t)i * ldo;
    bad_rows += memcmp(one + at, all + at, (size_t)ldo * 4) != 0 ||
                memcmp(one + at, rev + at, (size_t)ldo * 4) != 0;
    free(one);
  }
  char shape[128];
  snprintf(shape, sizeof shape,
           "H=%d KV=%d hd=%d pt=%d: %d rows alone (odd: combine kernel)/%d slots/reversed", H, KV,
           hd, pt, n, n);
  report("attn_dec invariance", shape, bad_rows, 0, bad_rows == 0);
  if (bad_rows) printf("  %d of %d rows differ between the launches\n", bad_rows, n);
  free(all), free(rev);
  dec_set_free(&d);
}

/* ---- GEMM ---------------------------------------------------------------------------------- */

static void test_gemm(cu_gemm *g, const char *mode, int T, int N, int K, int bias, int f32) {
  void *dx, *dw, *db = NULL;
  float *x = rand_bf16((size_t)T * K, -1, 1, &dx), *w = rand_bf16((size_t)N * K, -1, 1, &dw);
  float *b = bias ? rand_bf16(N, -1, 1, &db) : NULL;
  void *dy = poisoned((size_t)T * N * (f32 ? 4 : 2));
  RC(cu_gemm_run(g, dy, f32, N, dx, K, dw, db, T, N, K, 0));
  float *got;
  if (f32) {
    got = malloc((size_t)T * N * 4);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(got, dy, (size_t)T * N * 4, cudaMemcpyDeviceToHost));
  } else {
    got = back_bf16(dy, (size_t)T * N);
  }
  float *ref = malloc((size_t)T * N * 4);
  ref_matmul(ref, N, x, K, w, b, T, N, K);
  char shape[96];
  snprintf(shape, sizeof shape, "T=%d N=%d K=%d%s %s", T, N, K, bias ? " +bias" : "",
           f32 ? "f32 out" : "bf16 out");
  char name[48];
  snprintf(name, sizeof name, "gemm (%s)", mode);
  /* fp32 accumulation in another order: |err| ~ sqrt(K) * 2^-24 * |terms|, plus bf16 output */
  cmp(name, shape, got, N, ref, N, T, N, 1e-3 * sqrt((double)K));
  free(x), free(w), free(b), free(got), free(ref);
  cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(dy);
}

/* Rows 0 .. T-1 of x . w^T computed with T rows, for every T of a list up to Tmax: each
 * row the same bits as in the Tmax call. must: count a difference as a failure (the
 * backend's mode); else print it as information. */
static void test_gemm_invariance(cu_gemm *g, const char *mode, int N, int K, int bias, int f32,
                                 int must) {
  static const int Ts[] = {1, 2, 3, 7, 16, 17, 33, 64, 65, 100, 128, 256, 300, 1000};
  const int Tmax = 2500, es = f32 ? 4 : 2;
  void *dx, *dw, *db = NULL;
  free(rand_bf16((size_t)Tmax * K, -1, 1, &dx));
  free(rand_bf16((size_t)N * K, -1, 1, &dw));
  if (bias) free(rand_bf16(N, -1, 1, &db));
  void *dfull = poisoned((size_t)Tmax * N * es), *dy = poisoned((size_t)Tmax * N * es);
  RC(cu_gemm_run(g, dfull, f32, N, dx, K, dw, db, Tmax, N, K, 0));
  char *full = malloc((size_t)Tmax * N * es), *got = malloc((size_t)Tmax * N * es);
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(full, dfull, (size_t)Tmax * N * es, cudaMemcpyDeviceToHost));
  int bad_T = 0, first_bad = 0;
  for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
    int T = Ts[i];
    RC(cu_gemm_run(g, dy, f32, N, dx, K, dw, db, T, N, K, 0));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(got, dy, (size_t)T * N * es, cudaMemcpyDeviceToHost));
    if (memcmp(got, full, (size_t)T * N * es)) {
      if (!bad_T) first_bad = T;
      bad_T++;
    }
  }
  char shape[96];
  snprintf(shape, sizeof shape, "N=%d K=%d%s %s: T 1..1000 vs 2500", N, K, bias ? " +bias" : "",
           f32 ? "f32" : "bf16");
  char name[48];
  snprintf(name, sizeof name, "gemm inv (%s)", mode);
  if (must) {
    report(name, shape, bad_T, 0, bad_T == 0);
  } else {
    printf("| %-16s | %-44s | %10d | %8s | %s |\n", name, shape, bad_T, "info",
           bad_T ? "differs" : "same");
  }
  if (bad_T)
    printf("  %d of %d T values differ (first T=%d)\n", bad_T, (int)(sizeof Ts / sizeof Ts[0]),
           first_bad);
  free(full), free(got);
  cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(dfull), cudaFree(dy);
}

/* ---- GEMM for decode rows (k_gemm_dec) ------------------------------------------------------ */

/* k_gemm_dec through cu_gemm_run_dec against the reference, with padded rows (ldx = K + 8,
 * ldy = N + 3) and one row more than T: the pad columns and that row must keep their poison
 * (dec_stray counts the values that do not; main reports it once). */
static size_t dec_stray; /* values written outside y[T][N], over every test_gemm_dec call */

static void test_gemm_dec(cu_gemm *g, int T, int N, int K, int bias, int f32) {
  const int ldx = K + 8, ldy = N + 3, es = f32 ? 4 : 2;
  const size_t ny = (size_t)(T + 1) * ldy;
  void *dx, *dw, *db = NULL;
  float *x = rand_bf16((size_t)T * ldx, -1, 1, &dx), *w = rand_bf16((size_t)N * K, -1, 1, &dw);
  float *b = bias ? rand_bf16(N, -1, 1, &db) : NULL;
  void *dy = poisoned(ny * es);
  RC(cu_gemm_run_dec(g, dy, f32, ldy, dx, ldx, dw, db, T, N, K, 0));
  unsigned char *raw = malloc(ny * es);
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(raw, dy, ny * es, cudaMemcpyDeviceToHost));
  float *got = malloc(ny * sizeof *got), *ref = malloc((size_t)T * N * sizeof *ref);
  size_t stray = 0;
  for (size_t i = 0; i < ny; i++) {
    uint32_t bits = 0;
    memcpy(&bits, raw + i * es, es); /* little-endian: the value's low bytes */
    if ((int)(i / ldy) >= T || (int)(i % ldy) >= N) {
      stray += bits != (f32 ? 0xffffffffu : 0xffffu);
      got[i] = 0;
    } else if (f32) {
      memcpy(&got[i], &bits, 4);
    } else {
      got[i] = ns_bf16_to_f32((uint16_t)bits);
    }
  }
  ref_matmul(ref, N, x, ldx, w, b, T, N, K);
  char shape[96];
  snprintf(shape, sizeof shape, "T=%d N=%d K=%d S=%d%s %s", T, N, K, k_gemm_dec_seg(N, K),
           bias ? " +bias" : "", f32 ? "f32 out" : "bf16 out");
  if (stray) printf("  %zu values outside y[T][N] were written (%s)\n", stray, shape);
  dec_stray += stray;
  /* the tolerance of the other GEMM tests: fp32 sums in another order, bf16 output */
  cmp("gemm dec", shape, got, ldy, ref, N, T, N, 1e-3 * sqrt((double)K));
  free(x), free(w), free(b), free(raw), free(got), free(ref);
  cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(dy);
}

/* Rows 0 .. T-1 of a T-row k_gemm_dec call against the same rows of a 512-row call, bit for
 * bit, for T from 1 (segments split over blocks) to 256 (whole tiles), each launch shape and a
 * few random T. */
static void test_gemm_dec_invariance(cu_gemm *g, int N, int K, int bias, int f32) {
  int Ts[16] = {1, 2, 3, 5, 8, 16, 17, 31, 33, 48, 64, 100, 128, 200, 256}, nT = 15;
  const int Tmax = 512, es = f32 ? 4 : 2;
  while (nT < 16)
    Ts[nT++] = 1 + irand(Tmax - 1);
  void *dx, *dw, *db = NULL;
  free(rand_bf16((size_t)Tmax * K, -1, 1, &dx));
  free(rand_bf16((size_t)N * K, -1, 1, &dw));
  if (bias) free(rand_bf16(N, -1, 1, &db));
  void *dfull = poisoned((size_t)Tmax * N * es), *dy = poisoned((size_t)Tmax * N * es);
  RC(cu_gemm_run_dec(g, dfull, f32, N, dx, K, dw, db, Tmax, N, K, 0));
  char *full = malloc((size_t)Tmax * N * es), *got = malloc((size_t)Tmax * N * es);
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(full, dfull, (size_t)Tmax * N * es, cudaMemcpyDeviceToHost));
  int bad_T = 0, first_bad = 0, bad_cp = 0; /* bad_cp: the cp.async kernels (TMA off) */
  for (int i = 0; i < nT; i++) {
    int T = Ts[i];
    for (int tma = 1; tma >= 0; tma--) {
      k_gemm_dec_use_tma(tma);
      RC(cu_gemm_run_dec(g, dy, f32, N, dx, K, dw, db, T, N, K, 0));
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(got, dy, (size_t)T * N * es, cudaMemcpyDeviceToHost));
      if (memcmp(got, full, (size_t)T * N * es)) {
        if (!tma) {
          bad_cp++;
        } else {
          if (!bad_T) first_bad = T;
          bad_T++;
        }
      }
    }
    k_gemm_dec_use_tma(1);
  }
  char shape[96];
  snprintf(shape, sizeof shape, "N=%d K=%d S=%d%s %s: T 1..256 vs 512", N, K, k_gemm_dec_seg(N, K),
           bias ? " +bias" : "", f32 ? "f32" : "bf16");
  report("gemm dec inv", shape, bad_T, 0, bad_T == 0);
  if (bad_T) printf("  %d of %d T values differ (first T=%d)\n", bad_T, nT, first_bad);
  snprintf(shape, sizeof shape, "N=%d K=%d: the same T without TMA (cp.async)", N, K);
  report("gemm dec inv", shape, bad_cp, 0, bad_cp == 0);
  free(full), free(got);
  cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(dfull), cudaFree(dy);
}

/* The workspace contract: k_gemm_dec_ws_bytes within k_gemm_dec_ws_max over a sweep of
 * shapes, segments multiples of 128; without a workspace a split call (T = 1, K in several
 * segments) is refused with NS_ERANGE and a whole-tile one (T = 200: more rows than any
 * split call has) runs. */
static void test_gemm_dec_ws(void) {
  static const int Ns[] = {1,    8,     64,    65,    200,   2048,  4096,
                           5632, 11264, 14336, 32000, 40896, 40960, 128256};
  static const int Ks[] = {8, 40, 256, 264, 1000, 2048, 4096, 5632, 14336, 65536};
  int bad = 0;
  for (size_t i = 0; i < sizeof Ns / sizeof Ns[0]; i++)
    for (size_t j = 0; j < sizeof Ks / sizeof Ks[0]; j++) {
      int S = k_gemm_dec_seg(Ns[i], Ks[j]);
      bad += S <= 0 || S % 128;
      for (int T = 1; T <= 1024; T += T < 140 ? 1 : 61)
        bad += k_gemm_dec_ws_bytes(T, Ns[i], Ks[j]) > k_gemm_dec_ws_max();
    }
  cu_gemm *g;
  RC(cu_gemm_create(NULL, 0, NULL, 0, CU_GEMM_OWN, 132, &g));
  const int N = 200, K = 2048;
  void *dx, *dw, *dy = poisoned((size_t)200 * N * 2);
  free(rand_bf16((size_t)200 * K, -1, 1, &dx));
  free(rand_bf16((size_t)N * K, -1, 1, &dw));
  int r1 = cu_gemm_run_dec(g, dy, 0, N, dx, K, dw, NULL, 1, N, K, 0);
  int r200 = cu_gemm_run_dec(g, dy, 0, N, dx, K, dw, NULL, 200, N, K, 0);
  CK(cudaDeviceSynchronize());
  char shape[96];
  snprintf(shape, sizeof shape, "bound %zu B; no ws: T=1 %s, T=200 %s", k_gemm_dec_ws_max(),
           ns_strerror(r1), ns_strerror(r200));
  report("gemm dec ws", shape, bad, 0, bad == 0 && r1 == NS_ERANGE && r200 == 0);
  cu_gemm_destroy(g);
  cudaFree(dx), cudaFree(dw), cudaFree(dy);
}

/* Calls that depend on each other: a chain of k_gemm_dec calls where each call's x is the
 * previous call's y (and its y the x of the call before: ping-pong buffers), run with a
 * synchronisation after every call (no overlap possible), then back to back, then as a CUDA
 * graph, replayed once and twice in a row: the same bits every time. A call that read its x
 * or wrote its y before the kernel before it completed (an early start, a programmatic
 * dependent launch that waits too little) would differ. */
enum { CHAIN_L = 6, CHAIN_D = 2048 }; /* square: y feeds the next x */

static void chain_run(cu_gemm *g, cudaStream_t st, void *const buf[2], void *const *dw, int T,
                      int reps, int sync) {
  for (int r = 0; r < reps; r++)
    for (int l = 0; l < CHAIN_L; l++) {
      RC(cu_gemm_run_dec(g, buf[(l + 1) & 1], 0, CHAIN_D, buf[l & 1], CHAIN_D, dw[l], NULL, T,
                         CHAIN_D, CHAIN_D, st));
      if (sync) CK(cudaStreamSynchronize(st));
    }
}

/* buf[0] = x0, buf[1] poisoned */
static void chain_reset(void *const buf[2], const void *x0, size_t n) {
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(buf[0], x0, n, cudaMemcpyDeviceToDevice));
  CK(cudaMemset(buf[1], 0xff, n));
  CK(cudaDeviceSynchronize()); /* the chains run on a non-blocking stream */
}

static void test_gemm_dec_chain(cu_gemm *g, int T) {
  void *dw[CHAIN_L], *dx0, *buf[2];
  for (int l = 0; l < CHAIN_L; l++)
    free(rand_bf16((size_t)CHAIN_D * CHAIN_D, -0.03f, 0.03f, &dw[l]));
  free(rand_bf16((size_t)T * CHAIN_D, -1, 1, &dx0));
  const size_t n = (size_t)T * CHAIN_D * 2;
  buf[0] = poisoned(n), buf[1] = poisoned(n);
  unsigned char *want1 = malloc(n), *want2 = malloc(n), *got = malloc(n);
  void *out = buf[CHAIN_L & 1]; /* where a chain of CHAIN_L calls ends */
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int bad = 0;
  chain_reset(buf, dx0, n);
  chain_run(g, st, buf, dw, T, 1, 1);
  CK(cudaMemcpy(want1, out, n, cudaMemcpyDeviceToHost));
  chain_reset(buf, dx0, n);
  chain_run(g, st, buf, dw, T, 2, 1);
  CK(cudaMemcpy(want2, out, n, cudaMemcpyDeviceToHost));

  chain_reset(buf, dx0, n);
  chain_run(g, st, buf, dw, T, 1, 0);
  CK(cudaStreamSynchronize(st));
  CK(cudaMemcpy(got, out, n, cudaMemcpyDeviceToHost));
  bad += memcmp(got, want1, n) != 0;

  cudaGraph_t gr;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  chain_run(g, st, buf, dw, T, 1, 0);
  CK(cudaStreamEndCapture(st, &gr));
  CK(cudaGraphInstantiate(&ge, gr, 0));
  for (int reps = 1; reps <= 2; reps++) {
    chain_reset(buf, dx0, n);
    for (int r = 0; r < reps; r++)
      CK(cudaGraphLaunch(ge, st));
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(got, out, n, cudaMemcpyDeviceToHost));
    bad += memcmp(got, reps == 1 ? want1 : want2, n) != 0;
  }
  char shape[96];
  snprintf(shape, sizeof shape, "T=%d %d calls N=K=%d: synced, back to back, graph x1, x2", T,
           (int)CHAIN_L, (int)CHAIN_D);
  report("gemm dec chain", shape, bad, 0, bad == 0);
  cudaGraphExecDestroy(ge), cudaGraphDestroy(gr);
  cudaStreamDestroy(st);
  free(want1), free(want2), free(got);
  for (int l = 0; l < CHAIN_L; l++)
    cudaFree(dw[l]);
  cudaFree(dx0), cudaFree(buf[0]), cudaFree(buf[1]);
}

/* ---- lazy split sums (k_gemm_dec_lazy and the *_part consumers) ----------------------------- */

static uint16_t *raw16(const void *d, size_t n) {
  uint16_t *h = malloc(n * 2);
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost));
  return h;
}

/* Values of n bf16 that differ, bit for bit, between two device buffers. */
static size_t ndiff16(const void *a, const void *b, size_t n) {
  uint16_t *x = raw16(a, n), *y = raw16(b, n);
  size_t d = 0;
  for (size_t i = 0; i < n; i++)
    d += x[i] != y[i];
  free(x), free(y);
  return d;
}

static void *dev_copy(const void *src, size_t bytes) {
  void *d;
  CK(cudaMalloc(&d, bytes + 16));
  CK(cudaMemcpy(d, src, bytes, cudaMemcpyDeviceToDevice));
  return d;
}

/* A T-row product x[T][K] . w[N][K]^T (+ bias) through k_gemm_dec into *y (new, bf16) and
 * through k_gemm_dec_lazy, whose partials (left in ws) *p describes; 1 when the call split. */
static int lazy_pair(void *ws, int n_sm, int T, int N, int K, int bias, void **y, k_dec_part *p,
                     void **dx, void **dw, void **db) {
  free(rand_bf16((size_t)T * K, -1, 1, dx));
  free(rand_bf16((size_t)N * K, -1, 1, dw));
  *db = NULL;
  if (bias) free(rand_bf16(N, -1, 1, db));
  *y = poisoned((size_t)T * N * 2);
  RC(k_gemm_dec(*y, 0, N, *dx, K, *dw, *db, T, N, K, ws, k_gemm_dec_ws_max(), n_sm, 0));
  void *yl = poisoned((size_t)T * N * 2);
  RC(k_gemm_dec_lazy(yl, N, *dx, K, *dw, *db, T, N, K, ws, k_gemm_dec_ws_max(), n_sm, p, 0));
  int split = p->part != NULL;
  if (!split) { /* written as k_gemm_dec writes it */
    char shape[96];
    snprintf(shape, sizeof shape, "T=%d N=%d K=%d: not split, y written", T, N, K);
    size_t d = ndiff16(*y, yl, (size_t)T * N);
    report("gemm dec lazy", shape, (double)d, 0, d == 0);
  }
  cudaFree(yl);
  return split;
}

/* k_dec_part_finish of p against y (k_gemm_dec's output of the same product), bit for bit. */
static void check_finish(const k_dec_part *p, const void *y, int T, int N, int K,
                         const char *what) {
  char shape[96];
  void *yf = poisoned((size_t)T * N * 2);
  RC(k_dec_part_finish(p, yf, N, 0));
  size_t d = ndiff16(y, yf, (size_t)T * N);
  snprintf(shape, sizeof shape, "T=%d %s N=%d K=%d nseg=%d: finish", T, what, N, K, p->nseg);
  report("gemm dec lazy", shape, (double)d, 0, d == 0);
  cudaFree(yf);
}

/* An o projection (hidden x K) left lazy, then the residual add + norm that reads its partials
 * against the same on its stored output (twice: the first layer's form and the rest). */
static void lazy_norm_check(void *ws, int n_sm, int T, int hidden, int K) {
  char shape[96];
  void *y, *dx, *dw, *db;
  k_dec_part p;
  if (lazy_pair(ws, n_sm, T, hidden, K, 0, &y, &p, &dx, &dw, &db)) {
    void *dn, *res0;
    free(rand_bf16(hidden, 0.5f, 1.5f, &dn));
    free(rand_bf16((size_t)T * hidden, -1, 1, &res0));
    /* the first layer's form, the rest's, then the rest's dropping the partials (last) */
    for (int k = 0; k < 3; k++) {
      const int first = k == 0;
      void *ra = dev_copy(res0, (size_t)T * hidden * 2),
           *rb = dev_copy(res0, (size_t)T * hidden * 2);
      void *ya = dev_copy(y, (size_t)T * hidden * 2), *ob = poisoned((size_t)T * hidden * 2);
      p.drop = k == 2;
      RC(k_add_rmsnorm(ya, ra, ya, dn, T, hidden, hidden, 1e-5f, first, 0));
      RC(k_add_rmsnorm_part(ob, rb, &p, dn, T, hidden, hidden, 1e-5f, first, 0));
      size_t d = ndiff16(ya, ob, (size_t)T * hidden) + ndiff16(ra, rb, (size_t)T * hidden);
      snprintf(shape, sizeof shape, "T=%d dim=%d nseg=%d tile %dx%d first=%d%s", T, hidden, p.nseg,
               p.bm, p.bn, first, p.drop ? " drop" : "");
      report("add_rmsnorm part", shape, (double)d, 0, d == 0);
      cudaFree(ra), cudaFree(rb), cudaFree(ya), cudaFree(ob);
    }
    cudaFree(dn), cudaFree(res0);
  }
  cudaFree(y), cudaFree(dx), cudaFree(dw), cudaFree(db);
}

/* The decode attention making RoPE and the KV write itself from the q|k|v partial sums p
 * (k_attn_dec_args.rope) against k_rope_kv_write on the stored product y then the plain
 * attention, bit for bit: the outputs, the cache (the newest key's k and v) and the rows of the
 * slots (empty ones, row 1, are left alone by the fused form). T slots of 1 to 300 keys (one
 * or two chunks) in shuffled pages and shuffled slots (dec_set); at most 16 rows fuse, more
 * run the two kernels. y is the product as stored, before any rotation. */
static void check_rope_attn(const k_dec_part *p, const void *y, int T, int H, int KV, int hd) {
  const int ld = (H + 2 * KV) * hd, pt = 16;
  char shape[96];
  int32_t *len = calloc((size_t)T, 4), *pos = malloc((size_t)T * 4);
  int32_t *slot = malloc((size_t)T * 4), *seq = malloc((size_t)T * 4);
  int max_len = 1;
  for (int t = 0; t < T; t++) {
    len[t] = t == 1 ? 0 : 1 + irand(300), seq[t] = t;
    max_len = len[t] > max_len ? len[t] : max_len;
  }
  shuffle(seq, T);
  dec_set d;
  dec_set_make(&d, T, len, H, KV, hd, pt);
  for (int t = 0; t < T; t++) { /* the newest key of row t's sequence: position len - 1 */
    const int last = len[t] - 1;
    pos[t] = len[t] ? last : 0;
    slot[t] = len[t] ? d.bt[(size_t)t * d.maxpg + last / pt] * pt + last % pt : -1;
  }
  k_attn_dec_args r = {.rope = *p, .rope_pos = dev_i32(pos, T), .rope_slot = dev_i32(slot, T)};
  float *inv = malloc((size_t)hd / 2 * 4);
  ref_rope_inv_freq(inv, hd, 10000.0f, 0, 1.0f, 1.0f, 4.0f, 8192);
  CK(cudaMalloc((void **)&r.inv_freq, (size_t)hd * 2));
  CK(cudaMemcpy((void *)r.inv_freq, inv, (size_t)hd / 2 * 4, cudaMemcpyHostToDevice));
  /* the cache as made, to start the fused form from; then the two forms */
  const size_t slab = k_kv_slab_bytes(&d.c.l);
  void *c0[3], *ca[3];
  for (int i = 0; i < 3; i++) {
    CK(cudaMalloc(&c0[i], slab));
    CK(cudaMalloc(&ca[i], slab));
    CK(cudaMemcpy(c0[i], d.c.slab_ptrs[i], slab, cudaMemcpyDeviceToDevice));
  }
  void *qa, *qb = poisoned((size_t)T * ld * 2);
  CK(cudaMalloc(&qa, (size_t)T * ld * 2));
  CK(cudaMemcpy(qa, y, (size_t)T * ld * 2, cudaMemcpyDeviceToDevice));
  RC(k_rope_kv_write(qa, ld, T, r.rope_pos, r.rope_slot, r.inv_freq, H, KV, hd, &d.c.l, 1, 0));
  float *oa = dec_run_with(&d, T, seq, max_len, qa, NULL);
  for (int i = 0; i < 3; i++) {
    CK(cudaMemcpy(ca[i], d.c.slab_ptrs[i], slab, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(d.c.slab_ptrs[i], c0[i], slab, cudaMemcpyDeviceToDevice));
  }
  float *ob = dec_run_with(&d, T, seq, max_len, qb, &r);
  size_t dout = memcmp(oa, ob, (size_t)T * H * hd * 4) != 0, dc = 0, dr = 0;
  for (int i = 0; i < 3; i++)
    dc += ndiff16(ca[i], d.c.slab_ptrs[i], slab / 2);
  for (int t = 0; t < T; t++)
    if (len[t]) dr += ndiff16((char *)qa + (size_t)t * ld * 2, (char *)qb + (size_t)t * ld * 2, ld);
  snprintf(shape, sizeof shape, "T=%d: out %s, %zu cache, %zu row values", T,
           dout ? "differs" : "same", dc, dr);
  report("attn rope", shape, (double)(dout + dc + dr), 0, dout + dc + dr == 0);
  /* refused: rope fields without their arrays (before any launch) */
  k_attn_dec_args bad = {.out = qb,
                         .ldo = H * hd,
                         .q = qb,
                         .ldq = ld,
                         .tok0 = r.rope_pos,
                         .pos0 = r.rope_pos,
                         .pt_off = r.rope_pos,
                         .pages = d.d_pages,
                         .n_slots = T,
                         .max_len = 1,
                         .kv = d.c.l,
                         .layer = 1,
                         .n_heads = H,
                         .n_kv_heads = KV,
                         .head_dim = hd,
                         .scale = 1.0f,
                         .rope = *p,
                         .rope_slot = r.rope_slot,
                         .inv_freq = r.inv_freq};
  const int rc = k_attention_decode(&bad, 0);
  report("attn rope", "rope without positions refused", (double)rc, 0, rc == NS_EINVAL);
  for (int i = 0; i < 3; i++)
    cudaFree(c0[i]), cudaFree(ca[i]);
  cudaFree(qa), cudaFree(qb), cudaFree((void *)r.rope_pos), cudaFree((void *)r.rope_slot);
  cudaFree((void *)r.inv_freq);
  free(oa), free(ob), free(len), free(pos), free(slot), free(seq), free(inv);
  dec_set_free(&d);
}

/* Each consumer of a lazy decode GEMM against the same kernel on k_gemm_dec's stored output,
 * bit for bit: k_dec_part_finish (y), k_rope_kv_write_part (q|k|v rows and the cache),
 * k_add_rmsnorm_part (out and residual), k_swiglu_part; on tinyllama-1.1b projections (with
 * a q|k|v bias) at T from 1 to 64 (every split launch shape); the rope and the norm also
 * dropping the partials they read (p.drop), their last use. */
static void test_dec_lazy(void *ws, int n_sm, int T) {
  const int H = 32, KV = 4, hd = 64, hidden = 2048, inter = 5632, ld = (H + 2 * KV) * hd;
  char shape[96];
  void *y, *dx, *dw, *db;
  k_dec_part p;
  /* qkv with bias, then RoPE and the KV write */
  int split = lazy_pair(ws, n_sm, T, ld, hidden, 1, &y, &p, &dx, &dw, &db);
  if (split) {
    check_finish(&p, y, T, ld, hidden, "qkv");
    check_rope_attn(&p, y, T, H, KV, hd); /* before y is rotated in place below */
    cache ca; /* 3 slabs of pps pages of 16 slots: room for slots 0 .. 3 (T - 1) */
    const int pps = (3 * T + 3 * 16 - 1) / (3 * 16);
    cache_make(&ca, 2, KV, hd, 16, pps, 3, 0);
    int32_t *pos = malloc((size_t)T * 4), *slot = malloc((size_t)T * 4);
    for (int t = 0; t < T; t++)
      pos[t] = irand(4000), slot[t] = t == 1 ? -1 : 3 * t; /* row 1: no cache slot */
    void *dpos = dev_i32(pos, T), *dslot = dev_i32(slot, T), *dinv;
    float *inv = malloc((size_t)hd / 2 * 4);
    ref_rope_inv_freq(inv, hd, 10000.0f, 0, 1.0f, 1.0f, 4.0f, 8192);
    CK(cudaMalloc(&dinv, (size_t)hd * 2));
    CK(cudaMemcpy(dinv, inv, (size_t)hd / 2 * 4, cudaMemcpyHostToDevice));
    void *qb = poisoned((size_t)T * ld * 2);
    RC(k_rope_kv_write(y, ld, T, dpos, dslot, dinv, H, KV, hd, &ca.l, 1, 0));
    /* from the partials as they are, then again dropping them once read (their last use) */
    for (int drop = 0; drop < 2; drop++) {
      cache cb;
      cache_make(&cb, 2, KV, hd, 16, pps, 3, 0);
      CK(cudaMemset(qb, 0xff, (size_t)T * ld * 2));
      p.drop = drop;
      RC(k_rope_kv_write_part(qb, ld, &p, T, dpos, dslot, dinv, H, KV, hd, &cb.l, 1, 0));
      size_t dq = ndiff16(y, qb, (size_t)T * ld), dc = 0;
      size_t slab = k_kv_slab_bytes(&ca.l) / 2;
      for (int i = 0; i < 3; i++)
        dc += ndiff16(ca.slab_ptrs[i], cb.slab_ptrs[i], slab);
      snprintf(shape, sizeof shape, "T=%d rope%s: %zu row values, %zu cache values", T,
               drop ? " drop" : "", dq, dc);
      report("rope_kv part", shape, (double)(dq + dc), 0, dq + dc == 0);
      cache_free(&cb);
    }
    cache_free(&ca);
    free(pos), free(slot), free(inv);
    cudaFree(dpos), cudaFree(dslot), cudaFree(dinv), cudaFree(qb);
  }
  cudaFree(y), cudaFree(dx), cudaFree(dw), cudaFree(db);
  /* o projection, then the residual add + norm; also llama3-8b's (4096 x 4096, segments of
   * 1024: above 64 rows the two-warpgroup shape, 128 x 128 partial tiles) */
  lazy_norm_check(ws, n_sm, T, hidden, H * hd);
  lazy_norm_check(ws, n_sm, T, 4096, 4096);
  lazy_norm_check(ws, n_sm, T, hidden, inter);
  lazy_norm_check(ws, n_sm, T, 3584, 18944); /* Qwen2-7B's down: 19 segments, 266 KB a row: a
                                                cluster up to 16 rows */
  /* gate|up, then SwiGLU */
  if (lazy_pair(ws, n_sm, T, 2 * inter, hidden, 0, &y, &p, &dx, &dw, &db)) {
    void *oa = poisoned((size_t)T * inter * 2), *ob = poisoned((size_t)T * inter * 2);
    RC(k_swiglu(oa, inter, y, 2 * inter, T, inter, 0));
    RC(k_swiglu_part(ob, inter, &p, T, inter, 0));
    size_t d = ndiff16(oa, ob, (size_t)T * inter);
    snprintf(shape, sizeof shape, "T=%d inter=%d nseg=%d", T, inter, p.nseg);
    report("swiglu part", shape, (double)d, 0, d == 0);
    cudaFree(oa), cudaFree(ob);
  }
  cudaFree(y), cudaFree(dx), cudaFree(dw), cudaFree(db);
  /* down (22 segments: several rounds of 8 partials), through finish */
  if (lazy_pair(ws, n_sm, T, hidden, inter, 0, &y, &p, &dx, &dw, &db))
    check_finish(&p, y, T, hidden, inter, "down");
  cudaFree(y), cudaFree(dx), cudaFree(dw), cudaFree(db);
}

/* k_gemm_dec_swiglu (the SwiGLU made inside the GEMM) against k_swiglu_part then k_gemm_dec
 * on its output, bit for bit: y and x; the SwiGLU reads a lazy gate|up product of Kp columns,
 * the call writes its own partials into sws. Calls whose rows do not fit are refused before
 * anything is launched. */
static void test_dec_swiglu(void *ws, void *sws, int n_sm, int T, int N, int K, int Kp) {
  char shape[128];
  void *y0, *dx, *dw, *db;
  k_dec_part p;
  const size_t wsb = k_gemm_dec_ws_max();
  int split = lazy_pair(ws, n_sm, T, 2 * K, Kp, 0, &y0, &p, &dx, &dw, &db);
  snprintf(shape, sizeof shape, "T=%d K=%d Kp=%d: gate|up is lazy", T, K, Kp);
  report("gemm dec swiglu", shape, 0, 0, split);
  if (split) {
    void *w, *b;
    free(rand_bf16((size_t)N * K, -1, 1, &w));
    free(rand_bf16(N, -1, 1, &b));
    const size_t xn = (size_t)T * K, yn = (size_t)T * N;
    void *xa = poisoned(xn * 2), *xb = poisoned(xn * 2);
    void *ya = poisoned(yn * 2), *yb = poisoned(yn * 2);
    k_dec_part q;
    const int ok = k_gemm_dec_swiglu_ok(T, N, K);
    const int rc = k_gemm_dec_swiglu(ya, N, xa, &p, NULL, w, b, T, N, K, sws, wsb, n_sm, &q, 0);
    if (!ok) {
      snprintf(shape, sizeof shape, "T=%d N=%d K=%d: too many values a block, rc %d", T, N, K, rc);
      report("gemm dec swiglu", shape, 0, 0, rc == NS_EUNSUPPORTED && !q.part);
    } else {
      RC(rc);
      if (q.part) RC(k_dec_part_finish(&q, ya, N, 0));
      RC(k_swiglu_part(xb, K, &p, T, K, 0));
      RC(k_gemm_dec(yb, 0, N, xb, K, w, b, T, N, K, sws, wsb, n_sm, 0));
      const size_t dy = ndiff16(ya, yb, yn), dxo = ndiff16(xa, xb, xn);
      snprintf(shape, sizeof shape, "T=%d N=%d K=%d %s: y %zu, x %zu values differ", T, N, K,
               q.part ? "split" : "whole tiles", dy, dxo);
      report("gemm dec swiglu", shape, (double)(dy + dxo), 0, dy + dxo == 0);
      /* gate|up as stored (k_gemm_dec's output of the same product, y0) against k_swiglu */
      void *xc = poisoned(xn * 2), *yc = poisoned(yn * 2), *xd = poisoned(xn * 2);
      RC(k_gemm_dec_swiglu(yc, N, xc, NULL, y0, w, b, T, N, K, sws, wsb, n_sm, &q, 0));
      if (q.part) RC(k_dec_part_finish(&q, yc, N, 0));
      RC(k_swiglu(xd, K, y0, 2 * K, T, K, 0));
      const size_t ey = ndiff16(yc, yb, yn), ex = ndiff16(xc, xd, xn), e2 = ndiff16(xd, xb, xn);
      snprintf(shape, sizeof shape, "T=%d N=%d K=%d gate|up stored: y %zu, x %zu differ", T, N, K,
               ey, ex + e2);
      report("gemm dec swiglu", shape, (double)(ey + ex + e2), 0, ey + ex + e2 == 0);
      cudaFree(xc), cudaFree(yc), cudaFree(xd);
    }
    cudaFree(w), cudaFree(b), cudaFree(xa), cudaFree(xb), cudaFree(ya), cudaFree(yb);
  }
  cudaFree(y0), cudaFree(dx), cudaFree(dw), cudaFree(db);
}

/* k_gemm_dec_gu (the SwiGLU inside the gate|up GEMM) against k_gemm_dec then k_swiglu, bit for
 * bit over out's whole rows (ldo > I: the columns past I stay as they were), where the call
 * takes T rows as expected (want); elsewhere refused before anything is launched. */
static void test_dec_gu(void *ws, int n_sm, int T, int I, int K, int bias, int want) {
  char shape[128];
  void *x, *w, *b = NULL;
  free(rand_bf16((size_t)T * K, -1, 1, &x));
  free(rand_bf16((size_t)2 * I * K, -0.1f, 0.1f, &w));
  if (bias) free(rand_bf16((size_t)2 * I, -1, 1, &b));
  const int ldo = I + 8, ok = k_gemm_dec_gu_ok(T, I, K);
  const size_t on = (size_t)T * ldo;
  void *out = poisoned(on * 2), *ref = poisoned(on * 2);
  const int rc = k_gemm_dec_gu(out, ldo, x, K, w, b, T, I, K, n_sm, 0);
  CK(cudaDeviceSynchronize());
  if (!ok) {
    const size_t d = ndiff16(out, ref, on);
    snprintf(shape, sizeof shape, "T=%d I=%d K=%d: refused (rc %d), %zu values written", T, I, K,
             rc, d);
    report("gemm dec gu", shape, (double)d, 0, !want && rc == NS_EUNSUPPORTED && d == 0);
  } else {
    void *y = poisoned((size_t)T * 2 * I * 2);
    RC(rc);
    RC(k_gemm_dec(y, 0, 2 * I, x, K, w, b, T, 2 * I, K, ws, k_gemm_dec_ws_max(), n_sm, 0));
    RC(k_swiglu(ref, ldo, y, 2 * I, T, I, 0));
    const size_t d = ndiff16(out, ref, on);
    snprintf(shape, sizeof shape, "T=%d I=%d K=%d%s: %zu values differ", T, I, K,
             bias ? " bias" : "", d);
    report("gemm dec gu", shape, (double)d, 0, want && d == 0);
    cudaFree(y);
  }
  cudaFree(x), cudaFree(w), cudaFree(b), cudaFree(out), cudaFree(ref);
}

/* k_gemm_dec (cu_gemm_run_dec): the workspace contract, the reference at odd N and K (K 1000:
 * a short last segment, a half step of 16) for split T and whole tiles, row invariance over T
 * on the tinyllama-1.1b and llama3-8b shapes, then chains of calls that depend on each other.
 * ws: a 32 MiB cuBLASLt workspace. */
static void gemm_dec_checks(void *ws, int n_sm) {
  test_gemm_dec_ws();
  void *dws;
  CK(cudaMalloc(&dws, k_gemm_dec_ws_max()));
  cu_gemm *g;
  RC(cu_gemm_create(ws, 32 << 20, dws, k_gemm_dec_ws_max(), CU_GEMM_PINNED, n_sm, &g));
  static const int dT[] = {1, 2, 7, 16, 33, 128, 257};
  /* N, K, bias, f32 out, largest T (the reference's time) */
  static const int dsh[][5] = {
      {200, 2048, 1, 0, 257},  {2048, 40, 0, 0, 257},   {5632, 2048, 0, 0, 257},
      {2048, 5632, 1, 0, 257}, {200, 1000, 1, 0, 257},  {600, 1000, 0, 1, 257},
      {32000, 2048, 0, 1, 33}, {3138, 4096, 1, 0, 128}, {14336, 512, 1, 0, 128}};
  static const int dsh_small[][5] = {{200, 1000, 1, 0, 257},  {600, 1000, 0, 1, 257},
                                     {2048, 40, 0, 0, 257},   {520, 2048, 0, 0, 257},
                                     {3138, 4096, 1, 0, 128}, {14336, 512, 1, 0, 128}};
  const int(*ds)[5] = small_only ? dsh_small : dsh;
  int nds = small_only ? (int)(sizeof dsh_small / sizeof dsh_small[0])
                       : (int)(sizeof dsh / sizeof dsh[0]);
  for (int i = 0; i < nds; i++)
    for (size_t j = 0; j < sizeof dT / sizeof dT[0]; j++)
      if (dT[j] <= ds[i][4] && (!small_only || j % 2 == 0 || dT[j] == 128))
        test_gemm_dec(g, dT[j], ds[i][0], ds[i][1], ds[i][2], ds[i][3]);
  report("gemm dec", "writes outside y[T][N], in every call above", (double)dec_stray, 0,
         dec_stray == 0);
  /* tinyllama-1.1b: qkv, o, gate+up, down, lm head; llama3-8b: qkv, o, gate+up, down; then
   * 1024-value segments over 25 tiles of 128 columns, the last partial (the two-warpgroup
   * shape from 65 rows; like 3138 x 4096 in the reference checks above); whole tiles of 112
   * columns from 65 rows (14336 x 512, as in the reference checks); whole tiles of 224 columns
   * from 65 rows (28672 x 4096 above; 29000, the last tile part, with a bias) */
  static const int ish[][4] = {{2048, 2048, 0, 0},  {200, 1000, 1, 0},  {2560, 2048, 0, 0},
                               {11264, 2048, 0, 0}, {2048, 5632, 0, 0}, {32000, 2048, 0, 1},
                               {6144, 4096, 0, 0},  {4096, 4096, 0, 0}, {28672, 4096, 0, 0},
                               {4096, 14336, 0, 0}, {3138, 4096, 1, 0}, {14336, 512, 1, 0},
                               {29000, 4096, 1, 0}};
  for (size_t i = 0; i < (small_only ? 2 : sizeof ish / sizeof ish[0]); i++)
    test_gemm_dec_invariance(g, ish[i][0], ish[i][1], ish[i][2], ish[i][3]);
  static const int cT[] = {1, 16, 40, 100, 300};
  for (size_t i = 0; i < (small_only ? 2 : sizeof cT / sizeof cT[0]); i++)
    test_gemm_dec_chain(g, cT[i]);
  /* the sanitizers' run (small): one row, the most of the mma.sync shape, and 128 rows (the
   * two-warpgroup shape, rope_kv's 8 pairs a thread and their drop) */
  static const int lT[] = {1, 5, 16, 17, 40, 64, 100, 128}, lT_small[] = {1, 16, 128};
  for (size_t i = 0; i < (small_only ? 3 : sizeof lT / sizeof lT[0]); i++)
    test_dec_lazy(dws, n_sm, small_only ? lT_small[i] : lT[i]);
  /* the SwiGLU inside the down projection: T, N, K (inter), gate|up's K (hidden):
   * tinyllama-1.1b at 1 row (2: refused), 4 rows of segments of 256, whole tiles (one
   * segment of 1024 at 1 row, of 128 at 8), llama3-8b's down (segments of 4096: refused), an
   * inter of 1000 (segments of 256, the last 232: a part k tile, the bounded steps) */
  void *sws;
  CK(cudaMalloc(&sws, k_gemm_dec_ws_max()));
  static const int ssh[][4] = {
      {1, 2048, 5632, 2048}, {4, 2048, 2048, 2048},  {2, 2048, 5632, 2048}, {1, 16384, 1024, 1024},
      {8, 4096, 128, 512},   {1, 4096, 14336, 4096}, {1, 2048, 1000, 2048}};
  for (size_t i = 0; i < (small_only ? 3 : sizeof ssh / sizeof ssh[0]); i++)
    test_dec_swiglu(dws, sws, n_sm, ssh[i][0], ssh[i][1], ssh[i][2], ssh[i][3]);
  cudaFree(sws);
  /* the SwiGLU inside gate|up: T, I, K, bias, taken: llama3-8b from 33 rows (whole 64 x 64
   * tiles to 64 rows, 128 x 112 to 128; at 32 its segments split), llama3.2-1b from 17 (one
   * segment: whole 64 x 64 tiles to 64 rows, then 128-row tiles), tinyllama-1.1b from 17 (K
   * 2048: DEC_WHOLE_LOW_K; with a bias at 17, 33 and 65; split at 16), a last part tile of each
   * width with a bias, a K of a part k tile, 16 rows (refused), and past 128 rows (whole 64 x 64
   * tiles, several over T); llama3-8b's 65-128 rows and an I of 14500 (100 rows, a bias) take
   * 128 x 224 tiles, the last of 14500 part (the fourth, of K 256, among the small ones: the
   * sanitizers' run); the first four small */
  static const int gsh[][5] = {
      {100, 1000, 256, 1, 1},  {40, 1000, 256, 1, 1},    {16, 8192, 2048, 0, 0},
      {100, 14500, 256, 1, 1}, {70, 520, 200, 0, 1},     {128, 14336, 4096, 0, 1},
      {65, 14336, 4096, 0, 1}, {64, 14336, 4096, 0, 1},  {17, 8192, 2048, 0, 1},
      {64, 8192, 2048, 0, 1},  {96, 8192, 2048, 0, 1},   {128, 5632, 2048, 0, 1},
      {200, 8192, 2048, 0, 1}, {256, 14336, 4096, 0, 1}, {65, 5632, 2048, 1, 1},
      {64, 5632, 2048, 0, 1},  {33, 5632, 2048, 1, 1},   {32, 5632, 2048, 0, 1},
      {33, 14336, 4096, 0, 1}, {32, 14336, 4096, 0, 0},  {17, 5632, 2048, 1, 1},
      {16, 5632, 2048, 0, 0},  {100, 14500, 4096, 1, 1}};
  for (size_t i = 0; i < (small_only ? 4 : sizeof gsh / sizeof gsh[0]); i++)
    test_dec_gu(dws, n_sm, gsh[i][0], gsh[i][1], gsh[i][2], gsh[i][3], gsh[i][4]);
  cu_gemm_destroy(g);
  cudaFree(dws);
}

/* ---- sampling ------------------------------------------------------------------------------- */

static samp_params params_for(int i, int V) {
  samp_params p = samp_params_default();
  p.seed = rnd();
  p.n_logprobs = i % 3 == 0 ? 5 : 0;
  switch (i % 9) {
  case 0: /* half of them plain greedy (no logprobs, no penalty): greedy_kernel's */
    p.temperature = 0;
    if (i / 9 % 2) p.n_logprobs = 0;
    break;
  case 1: p.temperature = 0.7f; break;
  case 2: p.temperature = 1.0f, p.top_k = 1 + irand(64); break;
  case 3: p.temperature = 0.9f, p.top_p = 0.9f; break;
  case 4: p.temperature = 1.3f, p.min_p = 0.05f; break;
  case 5: p.temperature = 0.8f, p.top_k = 40, p.top_p = 0.95f, p.min_p = 0.02f; break;
  case 6: p.temperature = 0, p.repetition_penalty = 1.3f, p.frequency_penalty = 0.5f; break;
  case 7:
    p.temperature = 1.0f, p.presence_penalty = 1.5f, p.repetition_penalty = 0.8f;
    p.top_k = V / 3;
    break;
  default: p.temperature = 2.0f, p.top_p = 0.5f, p.frequency_penalty = -1.0f; break;
  }
  return p;
}

/* The reference sums the top-p mass sequentially in float: with ~10^4 kept tokens its
 * cumulative sum carries a relative error near the size of one token's share, so the last
 * kept token (and with it the draw) can move. A GPU id that the reference itself returns
 * with top_p nudged by at most 3e-4 is that rounding, not a wrong cut. */
static int top_p_boundary(const float *lg, int V, const samp_params *p, const int32_t *hist, int hn,
                          uint64_t step, int32_t want) {
  static const float nudge[] = {1e-4f, -1e-4f, 3e-4f, -3e-4f};
  void *scratch = calloc(1, ref_sample_scratch_bytes(V));
  int hit = 0;
  for (int i = 0; i < 4 && !hit; i++) {
    samp_params q = *p;
    q.top_p = p->top_p * (1.0f + nudge[i]);
    int32_t id;
    float lp;
    hit = ref_sample(lg, V, &q, hist, 100, hn, step, scratch, &id, &lp, NULL, NULL) == 0 &&
          id == want;
  }
  free(scratch);
  return hit;
}

/* Without cuts, the draw is the first id whose cumulative probability exceeds u * total: the
 * reference sums in order in float, the kernel in per-thread chunks and a block scan, so where
 * u * total falls within their rounding (~1e-5 of the total with 32000 ids) of an id's edge
 * the two may pick neighbours. A GPU id whose exact (double) interval lies within 1e-4 of the
 * total of the draw is that rounding, not a wrong pick; the margin is printed. */
static int cdf_boundary(const float *lg, int V, const samp_params *p, const int32_t *hist, int hn,
                        uint64_t step, int32_t want) {
  if (p->temperature <= 0 || (p->top_k > 0 && p->top_k < V) || p->top_p < 1.0f || p->min_p > 0.0f ||
      want < 0 || want >= V)
    return 0;
  float *v = malloc((size_t)V * 4);
  uint32_t *counts = calloc((size_t)V, 4);
  memcpy(v, lg, (size_t)V * 4);
  int ok = ref_sample_penalize(v, V, p, hist, 100, hn, counts) == 0;
  double m = -INFINITY, total = 0, before = 0;
  for (int i = 0; ok && i < V; i++)
    m = fmax(m, (double)(v[i] / p->temperature));
  for (int i = 0; ok && i < V; i++) {
    double e = exp((double)(v[i] / p->temperature) - m);
    total += e;
    if (i < want) before += e;
  }
  if (ok) {
    const double through = before + exp((double)(v[want] / p->temperature) - m);
    const double target = (double)ref_sample_uniform(p->seed, step) * total;
    const double off = target < before ? before - target : target > through ? target - through : 0;
    printf("  the draw lies %.3g of the total outside id %d's interval\n", off / total, want);
    ok = off <= 1e-4 * total;
  }
  free(v), free(counts);
  return ok;
}

static void test_sample(int n, int V) {
  float *lg = malloc((size_t)n * V * 4);
  for (size_t i = 0; i < (size_t)n * V; i++)
    lg[i] = uni(-6, 6);
  for (int r = 0; r < n; r++) /* exact ties at the top, which the tie rules must break */
    if (r % 4 == 1) lg[(size_t)r * V + irand(V)] = lg[(size_t)r * V + irand(V)] = 9.5f;
  /* a row's part of hist: its history, then its logit bias as (id, float bits) pairs */
  enum { NB = 64 };
  int hn = 300, hs = hn + 2 * NB;
  int32_t *hist = malloc((size_t)n * hs * 4);
  k_samp_req *req = malloc((size_t)n * sizeof *req);
  samp_params *ps = malloc((size_t)n * sizeof *ps);
  samp_bias *bias = malloc((size_t)n * NB * sizeof *bias);
  for (int r = 0; r < n; r++) {
    for (int i = 0; i < hn; i++)
      hist[r * hs + i] = irand(i % 2 ? 50 : V); /* repeats, so counts > 1 */
    ps[r] = params_for(r, V);
    /* every case's rows 9..17 of each 27 biased: a few ids pushed up by 30 (a greedy row's
     * answer moves: greedy_kernel must leave it), one banned at -100, the rest within +-3 */
    samp_bias *bs = bias + (size_t)r * NB;
    int nb = r / 9 % 3 == 1 ? 1 + irand(NB) : 0, id = -1;
    for (int j = 0; j < nb && id < V - 1; j++) {
      id += 1 + irand(V / NB > 1 ? V / NB : 1);
      if (id >= V) break;
      bs[j] = (samp_bias){id, j % 7 == 0 ? 30.0f : j % 7 == 3 ? -100.0f : uni(-3, 3)};
      ps[r].n_bias = j + 1;
      hist[r * hs + hn + 2 * j] = id;
      memcpy(&hist[r * hs + hn + 2 * j + 1], &bs[j].bias, 4);
    }
    ps[r].bias = ps[r].n_bias ? bs : NULL;
    k_samp_req_init(&req[r], r, &ps[r], 3 + r, r * hs, hn, 100, r * hs + hn);
  }
  void *dlg, *dreq, *dhist = dev_i32(hist, (size_t)n * hs), *dv, *dc, *dout;
  CK(cudaMalloc(&dlg, (size_t)n * V * 4));
  CK(cudaMemcpy(dlg, lg, (size_t)n * V * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&dreq, (size_t)n * sizeof *req));
  CK(cudaMemcpy(dreq, req, (size_t)n * sizeof *req, cudaMemcpyHostToDevice));
  int rows = 16;
  dv = poisoned((size_t)rows * V * 4);
  dc = poisoned((size_t)rows * V * 4);
  dout = poisoned((size_t)n * sizeof(k_samp_out));
  RC(k_sample(dlg, V, V, dreq, n, dhist, dv, dc, rows, dout, 0));
  k_samp_out *o = malloc((size_t)n * sizeof *o);
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(o, dout, (size_t)n * sizeof *o, cudaMemcpyDeviceToHost));
  void *scratch = calloc(1, ref_sample_scratch_bytes(V));
  int same = 0, top_ok = 1, boundary = 0;
  double lp_err = 0;
  for (int r = 0; r < n; r++) {
    int32_t id, tid[SAMP_MAX_LOGPROBS];
    float lp, tlp[SAMP_MAX_LOGPROBS];
    RC(ref_sample(lg + (size_t)r * V, V, &ps[r], hist + r * hs, 100, hn, 3 + r, scratch, &id, &lp,
                  tid, tlp));
    if (o[r].status == 0 && o[r].id == id) {
      same++;
      lp_err = fmax(lp_err, fabs(o[r].logprob - lp));
    } else if (o[r].status == 0 && ps[r].top_p < 1.0f &&
               top_p_boundary(&lg[(size_t)r * V], V, &ps[r], hist + r * hs, hn, 3 + r, o[r].id)) {
      boundary++;
      printf("  row %d (case %d): gpu id %d, cpu id %d: top-p boundary (see top_p_boundary)\n", r,
             r % 9, o[r].id, id);
    } else if (o[r].status == 0 &&
               cdf_boundary(&lg[(size_t)r * V], V, &ps[r], hist + r * hs, hn, 3 + r, o[r].id)) {
      boundary++;
      printf("  row %d (case %d): gpu id %d, cpu id %d: draw at an id's edge (see cdf_boundary)\n",
             r, r % 9, o[r].id, id);
    } else {
      printf("  row %d (case %d): gpu id %d status %d, cpu id %d\n", r, r % 9, o[r].id, o[r].status,
             id);
    }
    for (int j = 0; j < ps[r].n_logprobs; j++)
      if (o[r].top_ids[j] != tid[j] || (isfinite(tlp[j]) && fabs(o[r].top_lp[j] - tlp[j]) > 1e-3) ||
          (!isfinite(tlp[j]) && isfinite(o[r].top_lp[j])))
        top_ok = 0;
  }
  char shape[128];
  int biased = 0;
  for (int r = 0; r < n; r++)
    biased += ps[r].n_bias > 0;
  snprintf(shape, sizeof shape,
           "%d reqs (%d biased) V=%d: ids %d/%d equal (+%d at an edge), top-n %s", n, biased, V,
           same, n, boundary, top_ok ? "equal" : "DIFFER");
  report("sample", shape, lp_err, 1e-3, same + boundary == n && top_ok && lp_err <= 1e-3);
  free(lg), free(hist), free(req), free(ps), free(bias), free(o), free(scratch);
  cudaFree(dlg), cudaFree(dreq), cudaFree(dhist), cudaFree(dv), cudaFree(dc), cudaFree(dout);
}

/* ---- bench -------------------------------------------------------------------------------------
 */

typedef struct timer {
  cudaEvent_t a, b;
} timer;

/* Median of reps timed runs of fn(ctx) after warm-ups, in microseconds. */
static double time_us(void (*fn)(void *), void *ctx, int reps) {
  timer t;
  CK(cudaEventCreate(&t.a));
  CK(cudaEventCreate(&t.b));
  for (int i = 0; i < 3; i++)
    fn(ctx);
  double v[64];
  reps = reps > 64 ? 64 : reps;
  for (int i = 0; i < reps; i++) {
    CK(cudaEventRecord(t.a, 0));
    fn(ctx);
    CK(cudaEventRecord(t.b, 0));
    CK(cudaEventSynchronize(t.b));
    float ms;
    CK(cudaEventElapsedTime(&ms, t.a, t.b));
    v[i] = ms * 1e3;
  }
  for (int i = 1; i < reps; i++) /* insertion sort for the median */
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double x = v[j];
      v[j] = v[j - 1], v[j - 1] = x;
    }
  cudaEventDestroy(t.a), cudaEventDestroy(t.b);
  return v[reps / 2];
}

typedef struct bctx {
  void *a, *b, *c, *d, *e;
  size_t bytes;
  int T, N, K, H, KV, hd;
  k_attn_args att;
  k_attn_dec_args adec;
  cu_gemm *g;
  int f32, dec;  /* GEMM: fp32 output; through cu_gemm_run_dec */
  int nrot, rot; /* GEMM: weights taken in turn from nrot copies wstep bytes apart in b */
  size_t wstep;
  cache kv;
} bctx;

static void b_copy(void *p) {
  bctx *c = p;
  CK(cudaMemcpyAsync(c->b, c->a, c->bytes, cudaMemcpyDeviceToDevice, 0));
}
static void b_embed(void *p) {
  bctx *c = p;
  RC(k_embed(c->b, c->N, c->a, c->c, c->T, c->N, c->K, 0));
}
static void b_norm(void *p) {
  bctx *c = p;
  RC(k_add_rmsnorm(c->a, c->b, c->a, c->c, c->T, c->N, c->N, 1e-5f, 0, 0));
}
static void b_swiglu(void *p) {
  bctx *c = p;
  RC(k_swiglu(c->b, c->N, c->a, 2 * c->N, c->T, c->N, 0));
}
static void b_rope(void *p) {
  bctx *c = p;
  RC(k_rope_kv_write(c->a, (c->H + 2 * c->KV) * c->hd, c->T, c->b, c->c, c->d, c->H, c->KV, c->hd,
                     &c->kv.l, 0, 0));
}
static void b_att(void *p) {
  RC(k_attention(&((bctx *)p)->att, 0));
}
static void b_dec(void *p) {
  RC(k_attention_decode(&((bctx *)p)->adec, 0));
}
static void b_gemm(void *p) {
  bctx *c = p;
  const void *w = c->nrot > 1 ? (char *)c->b + (size_t)(c->rot++ % c->nrot) * c->wstep : c->b;
  if (c->dec)
    RC(cu_gemm_run_dec(c->g, c->c, c->f32, c->N, c->a, c->K, w, NULL, c->T, c->N, c->K, 0));
  else
    RC(cu_gemm_run(c->g, c->c, c->f32, c->N, c->a, c->K, w, NULL, c->T, c->N, c->K, 0));
}
static void b_sample(void *p) {
  bctx *c = p;
  k_samp_out *out = (k_samp_out *)((char *)c->b + (size_t)c->T * sizeof(k_samp_req));
  RC(k_sample(c->a, c->N, c->N, c->b, c->T, c->c, c->d, c->e, 64, out, 0));
}

static void row(const char *k, const char *shape, double us, double bytes, double flops,
                double copy_gbs) {
  double gbs = bytes / us / 1e3;
  printf("| %-14s | %-40s | %9.1f | %8.0f | %5.0f%% | %8.1f |\n", k, shape, us, gbs,
         100 * gbs / copy_gbs, flops / us / 1e6);
}

/* Decode GEMMs: k_gemm_dec next to cuBLASLt's heuristic pick (fastest, not batch-invariant)
 * at the llama3-8b and tinyllama-1.1b projections and lm heads, one call at a time; the
 * weights come in turn from copies of >= 256 MiB together, so that L2 does not keep them from
 * one run to the next. Then a decode step's projections as the engine replays them: every
 * layer's four, each with weights of its own, and the lm head, captured into one CUDA graph
 * (back to back: no norms or attention between them). */
static void bench_step(cu_gemm *g, int dec, const char *model, const int (*sh)[2], int layers,
                       int T, char *wbase, size_t wspace, void *x, void *y, double copy);

static int dec_only;               /* --dec-only: k_gemm_dec's times alone */
static int only_T, only_N, only_K; /* --gemm-shape T,N,K: that call alone */

static void bench_gemm_dec(double copy) {
  int n_sm = 132;
  CK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0));
  const size_t wspace = (size_t)3 << 30, xb = (size_t)256 * 14336 * 2,
               yb = (size_t)256 * 128256 * 4;
  void *ws, *dws, *dx, *dy, *dwt;
  CK(cudaMalloc(&ws, 32 << 20));
  CK(cudaMalloc(&dws, k_gemm_dec_ws_max()));
  CK(cudaMalloc(&dx, xb));
  CK(cudaMalloc(&dy, yb));
  CK(cudaMalloc(&dwt, wspace));
  CK(cudaMemset(dx, 0x3c, xb)); /* bf16 1.0-ish patterns: not zeros */
  CK(cudaMemset(dwt, 0x3c, wspace));
  CK(cudaDeviceSynchronize()); /* the steps run on non-blocking streams */
  bctx g = {.a = dx, .b = dwt, .c = dy};
  RC(cu_gemm_create(ws, 32 << 20, dws, k_gemm_dec_ws_max(), CU_GEMM_HEURISTIC, n_sm, &g.g));
  static const int dsh[][3] = {
      {6144, 4096, 0}, {4096, 4096, 0},  {28672, 4096, 0}, {4096, 14336, 0}, {128256, 4096, 1},
      {2560, 2048, 0}, {2048, 2048, 0},  {11264, 2048, 0}, {2048, 5632, 0},  {32000, 2048, 1},
      {3072, 2048, 0}, {16384, 2048, 0}, {2048, 8192, 0},  {128256, 2048, 1}};
  /* llama3-8b, tinyllama-1.1b, then llama3.2-1b's own (its o is tinyllama's) */
  static const int dT[] = {1, 4, 16, 32, 64, 128, 256};
  char s[96];
  for (size_t i = 0; i < sizeof dsh / sizeof dsh[0]; i++) {
    g.N = dsh[i][0], g.K = dsh[i][1], g.f32 = dsh[i][2];
    if (only_T && (g.N != only_N || g.K != only_K)) continue;
    g.wstep = ((size_t)g.N * g.K * 2 + 255) & ~(size_t)255;
    g.nrot = (int)(((256u << 20) + g.wstep - 1) / g.wstep);
    if ((size_t)g.nrot * g.wstep > wspace) g.nrot = (int)(wspace / g.wstep);
    for (size_t j = 0; j < sizeof dT / sizeof dT[0]; j++) {
      g.T = only_T ? only_T : dT[j];
      if (only_T && j > 0) break;
      double by = 2.0 * ((double)g.T * g.K + (double)g.N * g.K) + (g.f32 ? 4.0 : 2.0) * g.T * g.N;
      snprintf(s, sizeof s, "T=%d N=%d K=%d %s S=%d", g.T, g.N, g.K, g.f32 ? "f32" : "bf16",
               k_gemm_dec_seg(g.N, g.K));
      g.dec = 1;
      row("gemm dec", s, time_us(b_gemm, &g, 20), by, 2.0 * g.T * g.N * g.K, copy);
      g.dec = 0;
      if (!dec_only)
        row("gemm heuristic", s, time_us(b_gemm, &g, 20), by, 2.0 * g.T * g.N * g.K, copy);
    }
  }
  /* qkv, o, gate+up, down, then the lm head (f32 out) */
  static const int tl[5][2] = {
      {2560, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}, {32000, 2048}};
  static const int l8[5][2] = {
      {6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {128256, 4096}};
  static const int sT[] = {1, 16, 64, 128, 256};
  for (size_t j = 0; j < sizeof sT / sizeof sT[0] && !only_T; j++)
    for (int dec = 1; dec >= dec_only; dec--) {
      bench_step(g.g, dec, "tinyllama-1.1b", tl, 22, sT[j], dwt, wspace, dx, dy, copy);
      bench_step(g.g, dec, "llama3-8b", l8, 4, sT[j], dwt, wspace, dx, dy, copy);
    }
  cu_gemm_destroy(g.g);
  cudaFree(ws), cudaFree(dws), cudaFree(dx), cudaFree(dy), cudaFree(dwt);
}

static void step_enqueue(cu_gemm *g, int dec, const int (*sh)[2], int layers, int T, char *wbase,
                         void *x, void *y, cudaStream_t st) {
  size_t off = 0;
  for (int l = 0; l <= layers; l++)
    for (int i = l < layers ? 0 : 4; i < (l < layers ? 4 : 5); i++) {
      const int N = sh[i][0], K = sh[i][1], f32 = i == 4;
      if (dec)
        RC(cu_gemm_run_dec(g, y, f32, N, x, K, wbase + off, NULL, T, N, K, st));
      else
        RC(cu_gemm_run(g, y, f32, N, x, K, wbase + off, NULL, T, N, K, st));
      off += ((size_t)N * K * 2 + 255) & ~(size_t)255;
    }
}

static void bench_step(cu_gemm *g, int dec, const char *model, const int (*sh)[2], int layers,
                       int T, char *wbase, size_t wspace, void *x, void *y, double copy) {
  double wb = 0, fl = 0;
  for (int i = 0; i < 5; i++) {
    const double nk = (double)sh[i][0] * sh[i][1] * (i < 4 ? layers : 1);
    wb += 2 * nk, fl += 2.0 * T * nk;
  }
  if (wb > (double)wspace) {
    printf("  (%s: %.0f MB of weights do not fit the bench's %zu MiB)\n", model, wb / 1e6,
           wspace >> 20);
    return;
  }
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  step_enqueue(g, dec, sh, layers, T, wbase, x, y, st); /* attributes, algorithm picks */
  CK(cudaStreamSynchronize(st));
  cudaGraph_t gr;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  step_enqueue(g, dec, sh, layers, T, wbase, x, y, st);
  CK(cudaStreamEndCapture(st, &gr));
  CK(cudaGraphInstantiate(&ge, gr, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  double v[11];
  for (int r = -2; r < 11; r++) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= 0) v[r] = ms * 1e3;
  }
  for (int i = 1; i < 11; i++) /* insertion sort for the median */
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double t = v[j];
      v[j] = v[j - 1], v[j - 1] = t;
    }
  char s[96];
  snprintf(s, sizeof s, "%s %d layers + lm head T=%d", model, layers, T);
  row(dec ? "step dec" : "step heuristic", s, v[5], wb, fl, copy);
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  cudaGraphExecDestroy(ge), cudaGraphDestroy(gr);
  cudaStreamDestroy(st);
}

static void bench(void) {
  bctx c;
  memset(&c, 0, sizeof c);
  c.bytes = 2ull << 30;
  CK(cudaMalloc(&c.a, c.bytes));
  CK(cudaMalloc(&c.b, c.bytes));
  CK(cudaMemset(c.a, 0x3c, c.bytes)); /* bf16 1.0-ish patterns: not zeros */
  double copy_us = time_us(b_copy, &c, 10), copy = 2.0 * c.bytes / copy_us / 1e3;
  printf("\ndevice-to-device copy: %.0f GB/s (bytes read + written, %zu MiB)\n\n", copy,
         c.bytes >> 20);
  printf("| kernel         | shape                                    | time (us) |     GB/s |"
         " of copy | TFLOP/s |\n|---|---|---:|---:|---:|---:|\n");
  char s[96];
  void *dt, *dw;
  /* embed: 4096 tokens of hidden 4096 from a 128256-row table */
  CK(cudaMalloc(&dt, (size_t)128256 * 4096 * 2));
  CK(cudaMemset(dt, 0x3c, (size_t)128256 * 4096 * 2));
  int32_t *ids = malloc(4096 * 4);
  for (int i = 0; i < 4096; i++)
    ids[i] = irand(128256);
  bctx e = {.a = dt, .b = c.b, .c = dev_i32(ids, 4096), .T = 4096, .N = 4096, .K = 128256};
  row("embed", "T=4096 hidden=4096", time_us(b_embed, &e, 20), 2.0 * 4096 * 4096 * 2, 0, copy);
  /* add_rmsnorm */
  free(rand_bf16(4096, 0.5f, 1.5f, &dw));
  bctx n = {.a = c.a, .b = (char *)c.a + (256 << 20), .c = dw, .T = 4096, .N = 4096};
  row("add_rmsnorm", "T=4096 dim=4096", time_us(b_norm, &n, 20), 4.0 * 4096 * 4096 * 2, 0, copy);
  bctx w = {.a = c.a, .b = c.b, .T = 4096, .N = 14336};
  row("swiglu", "T=4096 inter=14336", time_us(b_swiglu, &w, 20), 3.0 * 4096 * 14336 * 2, 0, copy);
  /* rope + kv write: llama3-8b heads */
  bctx r = {.a = c.a, .T = 4096, .H = 32, .KV = 8, .hd = 128};
  int32_t *pos = malloc(4096 * 4), *slot = malloc(4096 * 4);
  for (int i = 0; i < 4096; i++)
    pos[i] = i, slot[i] = i;
  r.b = dev_i32(pos, 4096);
  r.c = dev_i32(slot, 4096);
  float inv[64];
  ref_rope_inv_freq(inv, 128, 500000.0f, 0, 1, 1, 1, 1);
  CK(cudaMalloc(&r.d, sizeof inv));
  CK(cudaMemcpy(r.d, inv, sizeof inv, cudaMemcpyHostToDevice));
  cache_make(&r.kv, 1, 8, 128, 16, 256, 1, 2);
  double rb = 4096.0 * ((32 + 8) * 128 * 2 * 2 + 8 * 128 * 2 * 3 + 8 * 128 * 2 * 2);
  row("rope_kv_write", "T=4096 H=32 KV=8 hd=128", time_us(b_rope, &r, 20), rb, 0, copy);
  cache_free(&r.kv);
  /* prefill attention (llama3-8b heads): a 2048- and a 4096-token prompt at once, and the
   * last 512-token chunk of a 4096-token prompt */
  const int pf_shape[3][2] = {{2048, 2048}, {4096, 4096}, {4096, 512}}; /* keys, new rows */
  for (int pass = 0; pass < 3; pass++) {
    int ns = 1, L = pf_shape[pass][0], nnew = pf_shape[pass][1];
    int pt = 16, pages = ns * ((L + pt - 1) / pt);
    bctx a;
    memset(&a, 0, sizeof a);
    cache_make(&a.kv, 1, 8, 128, pt, pages, 1, 2);
    int32_t *n_new = malloc((size_t)ns * 4), *p0 = malloc((size_t)ns * 4);
    int32_t *t0 = malloc((size_t)ns * 4), *po = malloc((size_t)ns * 4);
    int32_t *pg = malloc((size_t)pages * 4);
    for (int i = 0; i < pages; i++)
      pg[i] = i;
    shuffle(pg, pages);
    for (int i = 0; i < ns; i++)
      n_new[i] = nnew, p0[i] = L - nnew, t0[i] = i * nnew, po[i] = i * (pages / ns);
    int np, T = ns * nnew;
    k_pf_item *pf = malloc((size_t)T * sizeof *pf);
    RC(k_attn_plan(ns, n_new, 32, 8, pf, T, &np));
    void *q;
    free(rand_bf16((size_t)T * 48 * 128, -2, 2, &q));
    a.att = (k_attn_args){.out = c.b,
                          .ldo = 32 * 128,
                          .q = q,
                          .ldq = 48 * 128,
                          .tok0 = dev_i32(t0, ns),
                          .n_new = dev_i32(n_new, ns),
                          .pos0 = dev_i32(p0, ns),
                          .pt_off = dev_i32(po, ns),
                          .pages = dev_i32(pg, pages),
                          .pf = dev_i32((int32_t *)pf, (size_t)np * 2),
                          .n_pf = np,
                          .kv = a.kv.l,
                          .n_heads = 32,
                          .n_kv_heads = 8,
                          .head_dim = 128,
                          .scale = 0.088f};
    double us = time_us(b_att, &a, 20);
    double kvb = (double)ns * L * 8 * 128 * 2 * 2;
    /* row i (position L - nnew + i) scores and weighs L - nnew + i + 1 keys */
    double keys = (double)nnew * (L - nnew) + (double)nnew * (nnew + 1) / 2;
    double fl = 4.0 * 32 * 128 * keys;
    snprintf(s, sizeof s, "prefill %d rows at %d..%d H=32 KV=8 hd=128", nnew, L - nnew, L - 1);
    row("attention", s, us, kvb, fl, copy);
    cudaFree(q), cache_free(&a.kv);
    free(n_new), free(p0), free(t0), free(po), free(pg), free(pf);
  }
  /* decode over fixed slots (k_attention_decode, the graph-friendly path): tinyllama and
   * llama3-8b heads, max_len = the slots' length */
  int ds[][5] = {{64, 4096, 32, 4, 64},
                 {64, 4096, 32, 8, 128},
                 {128, 512, 32, 8, 128},
                 {1, 32768, 32, 8, 128}};
  for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
    int ns = ds[i][0], L = ds[i][1], H = ds[i][2], KV = ds[i][3], hd = ds[i][4];
    int pt = 16, pages = ns * ((L + pt - 1) / pt);
    bctx a;
    memset(&a, 0, sizeof a);
    cache_make(&a.kv, 1, KV, hd, pt, pages, 1, 2);
    int32_t *p0 = malloc((size_t)ns * 4), *t0 = malloc((size_t)ns * 4);
    int32_t *po = malloc((size_t)ns * 4), *pg = malloc((size_t)pages * 4);
    for (int j = 0; j < pages; j++)
      pg[j] = j;
    shuffle(pg, pages);
    for (int j = 0; j < ns; j++)
      p0[j] = L - 1, t0[j] = j, po[j] = j * (pages / ns);
    void *q;
    free(rand_bf16((size_t)ns * (H + 2 * KV) * hd, -2, 2, &q));
    a.adec = (k_attn_dec_args){.out = c.b,
                               .ldo = H * hd,
                               .q = q,
                               .ldq = (H + 2 * KV) * hd,
                               .tok0 = dev_i32(t0, ns),
                               .pos0 = dev_i32(p0, ns),
                               .pt_off = dev_i32(po, ns),
                               .pages = dev_i32(pg, pages),
                               .n_slots = ns,
                               .max_len = L,
                               .part_o = (float *)c.a,
                               .part_ml = (float *)((char *)c.a + (512 << 20)),
                               .kv = a.kv.l,
                               .n_heads = H,
                               .n_kv_heads = KV,
                               .head_dim = hd,
                               .scale = (float)(1.0 / sqrt((double)hd))};
    double us = time_us(b_dec, &a, 20);
    snprintf(s, sizeof s, "%d slots x %d keys H=%d KV=%d hd=%d", ns, L, H, KV, hd);
    row("attn_decode", s, us, (double)ns * L * KV * hd * 2 * 2, 4.0 * ns * L * H * hd, copy);
    cudaFree(q), cudaFree((void *)a.adec.tok0), cudaFree((void *)a.adec.pos0);
    cudaFree((void *)a.adec.pt_off), cudaFree((void *)a.adec.pages), cache_free(&a.kv);
    free(p0), free(t0), free(po), free(pg);
  }
  /* GEMM through cuBLASLt */
  void *ws;
  CK(cudaMalloc(&ws, 32 << 20));
  bctx g = {.a = c.a, .b = (char *)c.a + (512 << 20), .c = c.b};
  int shapes[][3] = {{4096, 4096, 4096}, {64, 4096, 4096},  {1, 14336, 4096},
                     {1, 2048, 2048},    {64, 2560, 2048},  {64, 11264, 2048},
                     {64, 2048, 5632},   {512, 2560, 2048}, {2048, 11264, 2048}};
  for (int mode = CU_GEMM_OWN; mode <= CU_GEMM_HEURISTIC; mode++) {
    if (mode == CU_GEMM_NOSPLIT) continue;
    RC(cu_gemm_create(ws, 32 << 20, NULL, 0, mode, 132, &g.g));
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      g.T = shapes[i][0], g.N = shapes[i][1], g.K = shapes[i][2];
      double by = 2.0 * ((double)g.T * g.K + (double)g.N * g.K + (double)g.T * g.N);
      snprintf(s, sizeof s, "T=%d N=%d K=%d bf16", g.T, g.N, g.K);
      char k[32];
      snprintf(k, sizeof k, "gemm %s", cu_gemm_mode_name(mode));
      row(k, s, time_us(b_gemm, &g, 20), by, 2.0 * g.T * g.N * g.K, copy);
    }
    cu_gemm_destroy(g.g);
  }
  bench_gemm_dec(copy);
  /* sampling: 64 rows of a 128256 vocabulary, top-p and top-k */
  int V = 128256, R = 64;
  float *lg = malloc((size_t)R * V * 4);
  for (size_t i = 0; i < (size_t)R * V; i++)
    lg[i] = uni(-8, 8);
  k_samp_req *req = malloc((size_t)R * sizeof *req);
  for (int i = 0; i < R; i++) {
    samp_params p = samp_params_default();
    p.temperature = 0.8f, p.top_p = 0.9f, p.top_k = 50, p.seed = (uint64_t)i;
    k_samp_req_init(&req[i], i, &p, 0, 0, 0, 0, 0);
  }
  bctx sm = {.N = V, .T = R};
  CK(cudaMalloc(&sm.a, (size_t)R * V * 4));
  CK(cudaMemcpy(sm.a, lg, (size_t)R * V * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&sm.b, (size_t)R * (sizeof *req + sizeof(k_samp_out))));
  CK(cudaMemcpy(sm.b, req, (size_t)R * sizeof *req, cudaMemcpyHostToDevice));
  sm.c = c.b;
  CK(cudaMalloc(&sm.d, (size_t)R * V * 4));
  CK(cudaMalloc(&sm.e, (size_t)R * V * 4));
  /* the output array sits after the requests in sm.b (b_sample) */
  row("sample", "64 rows V=128256 T=0.8 top-k 50 top-p 0.9", time_us(b_sample, &sm, 10),
      (double)R * V * 4 * 3, 0, copy);
  free(lg), free(req), free(ids), free(pos), free(slot);
}

int main(int argc, char **argv) {
  int do_bench = 0, gemm_dec = 0, bench_gemm = 0, no_checks = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--bench")) do_bench = 1;
    if (!strcmp(argv[i], "--gemm-dec")) gemm_dec = 1;
    if (!strcmp(argv[i], "--bench-gemm")) gemm_dec = bench_gemm = 1;
    if (!strcmp(argv[i], "--no-checks")) no_checks = 1;
    if (!strcmp(argv[i], "--dec-only")) dec_only = 1;
    if (!strcmp(argv[i], "--small")) small_only = 1;
    if (!strcmp(argv[i], "--no-gemm")) no_gemm = 1;
    if (!strcmp(argv[i], "--gemm-shape") &&
        (i + 1 >= argc || sscanf(argv[++i], "%d,%d,%d", &only_T, &only_N, &only_K) != 3 ||
         only_T < 1 || only_T > 256)) {
      fprintf(stderr, "gpu_kernels: --gemm-shape T,N,K (T 1..256, N and K a table shape)\n");
      return 2;
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  struct cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  if (p.major != 9) {
    printf("SKIP: %s is not a Hopper GPU (the kernels are built for sm_90a)\n", p.name);
    return 77;
  }
  printf("gpu_kernels on %s (%d SMs); tolerance atol + %.0e * |ref| (bf16), NaN never passes\n\n",
         p.name, p.multiProcessorCount, RTOL);
  printf("| %-16s | %-44s | %10s | %8s | %s |\n|---|---|---:|---:|---|\n", "kernel", "shape",
         "max err", "atol", "ok");
  if (gemm_dec) { /* k_gemm_dec alone: its checks, then its timings */
    void *ws;
    CK(cudaMalloc(&ws, 32 << 20));
    if (!no_checks) gemm_dec_checks(ws, p.multiProcessorCount);
    cudaFree(ws);
    printf("\ngpu_kernels --gemm-dec: %d of %d checks passed\n", checks - failures, checks);
    if (!bench_gemm) return failures ? 1 : 0;
    bctx c = {.bytes = 1ull << 30};
    CK(cudaMalloc(&c.a, c.bytes));
    CK(cudaMalloc(&c.b, c.bytes));
    CK(cudaMemset(c.a, 0x3c, c.bytes));
    double copy_us = time_us(b_copy, &c, 10), copy = 2.0 * c.bytes / copy_us / 1e3;
    cudaFree(c.a), cudaFree(c.b);
    printf("\ndevice-to-device copy: %.0f GB/s (bytes read + written, %zu MiB)\n\n", copy,
           c.bytes >> 20);
    printf("| kernel         | shape                                    | time (us) |     GB/s |"
           " of copy | TFLOP/s |\n|---|---|---:|---:|---:|---:|\n");
    bench_gemm_dec(copy);
    return failures ? 1 : 0;
  }
  int hid[2] = {2048, 200}, Ts[3] = {1, 257, 97};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < (small_only ? 2 : 3); j++)
      test_embed_gather(Ts[j], hid[i]);
  test_embed_rmsnorm(3, 2048);
  test_embed_rmsnorm(130, 4096);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < (small_only ? 2 : 3); j++)
      for (int f = 0; f < 2; f++)
        test_rmsnorm(Ts[j], hid[i], f);
  test_rmsnorm(3, 8192, 0);
  test_rmsnorm(5, 40, 0);    /* 5 accesses a row: 5 slices of one */
  test_rmsnorm(4, 203, 1);   /* odd: one block a row */
  test_rmsnorm(2, 65536, 0); /* the longest row: 8 accesses a thread */
  test_swiglu(1, 5632);
  test_swiglu(small_only ? 17 : 257, 200);
  test_swiglu(97, 14336);
  test_swiglu(5, 121); /* odd: the scalar path */
  int heads[3][2] = {{8, 8}, {16, 4}, {32, 4}};
  for (int h = 0; h < 3; h++)
    for (int d = 0; d < 2; d++)
      test_rope(small_only ? 17 : 257, heads[h][0], heads[h][1], d ? 128 : 64, (h + d) % 3, 16);
  test_rope(1, 32, 8, 128, 2, 16);
  test_rope(3, 5, 1, 40, 1, 16);
  for (int pt = 8; pt <= 256; pt *= 2) /* every engine.kv_page_tokens */
    test_rope(small_only ? 17 : 257, 32, 8, 128, 2, pt);
  attention_cases();
  attn_decode_cases();
  void *ws = NULL;
  if (!no_gemm) { /* --no-gemm: racecheck, which misreads cuBLASLt's own kernels */
    cu_gemm *g;
    CK(cudaMalloc(&ws, 32 << 20));
    RC(cu_gemm_create(ws, 32 << 20, NULL, 0, CU_GEMM_PINNED, p.multiProcessorCount, &g));
    test_gemm(g, "pinned", 1, 2048, 2048, 0, 0);
    test_gemm(g, "pinned", 97, 200, 2048, 1, 0);
    test_gemm(g, "pinned", 257, 2048, 200, 0, 0);
    test_gemm(g, "pinned", 3, 120, 40, 1, 0);
    test_gemm(g, "pinned", 97, 32000, small_only ? 64 : 1024, 0, 1);
    cu_gemm_destroy(g);
  }
  test_sample(small_only ? 18 : 97, 32000);
  test_sample(small_only ? 9 : 45, 1001);
  /* batch invariance (after the checks above, which keep their random inputs) */
  test_attention_invariance(32, 4, 64, small_only ? 300 : 700); /* tinyllama */
  test_attention_invariance(5, 1, 40, 300);                     /* the odd golden shape */
  test_attention_invariance(16, 1, 64, 300);                    /* G 16 */
  if (!small_only) test_attention_invariance(32, 8, 128, 600);
  test_attn_decode_invariance(32, 8, 128, 16);  /* llama3-8b */
  test_attn_decode_invariance(32, 4, 64, 64);   /* tinyllama */
  test_attn_decode_invariance(32, 8, 128, 256); /* the largest pages */
  report("attn_dec counters", "left non-zero after a call, over every call above", dec_cnt_left, 0,
         dec_cnt_left == 0);
  if (!no_gemm) {
    for (int mode = CU_GEMM_OWN; mode <= CU_GEMM_HEURISTIC; mode++) {
      if (small_only && mode != CU_GEMM_PINNED) continue;
      cu_gemm *g;
      const char *mn = cu_gemm_mode_name(mode);
      RC(cu_gemm_create(ws, 32 << 20, NULL, 0, mode, p.multiProcessorCount, &g));
      if (mode == CU_GEMM_OWN) {
        test_gemm(g, mn, 1, 2048, 2048, 0, 0);
        test_gemm(g, mn, 97, 200, 2048, 1, 0);
        test_gemm(g, mn, 257, 2048, 200, 0, 0);
        test_gemm(g, mn, 3, 120, 40, 1, 0);
        test_gemm(g, mn, 97, 32000, small_only ? 64 : 1024, 0, 1);
      }
      if (mode <= CU_GEMM_PINNED) {
        test_gemm(g, mn, 1000, 2560, 2048, 0, 0);
        test_gemm(g, mn, 5, 11264, 2048, 0, 0);
        test_gemm(g, mn, 40, 130, 200, 1, 0);
      }
      /* the tinyllama-1.1b projections, lm head and a small biased one: rows must keep
       * their bits for every T in the batch-invariant modes, own and pinned */
      int sh[][4] = {{2560, 2048, 0, 0}, {2048, 2048, 0, 0},  {11264, 2048, 0, 0},
                     {2048, 5632, 0, 0}, {32000, 2048, 0, 1}, {200, 2048, 1, 0}};
      for (int i = 0; i < (small_only ? 1 : 6); i++)
        test_gemm_invariance(g, mn, sh[i][0], sh[i][1], sh[i][2], sh[i][3], mode <= CU_GEMM_PINNED);
      cu_gemm_destroy(g);
    }
    gemm_dec_checks(ws, p.multiProcessorCount);
    cudaFree(ws);
  }
  printf("\ngpu_kernels: %d of %d checks passed\n", checks - failures, checks);
  if (do_bench) bench();
  return failures ? 1 : 0;
}
#endif
