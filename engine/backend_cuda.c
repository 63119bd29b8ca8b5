/* backend_cuda.c — the CUDA backend's lifetime, memory ops and layer ops: each op checks its
 * tensors and enqueues one kernel (kernels/) or GEMM (cuda_gemm.c) on the backend's stream.
 * Entry point: be_cuda_create; weights in cuda_weights.c, the step bracket in cuda_step.c. */
#include "cuda_int.h"

#include "gather.h"
#include "gemm.h"
#include "ns_cuda.h"
#include "ns_err.h"
#include "ns_log.h"
#include "rmsnorm.h"
#include "rope_kv.h"
#include "swiglu.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KV_SLAB   (512ull << 20) /* KV pages come in pool blocks of at most this size */
#define GEMM_WS   (32ull << 20)
#define PINNED_SZ (256ull << 20)

int cu_done(cu_be *c, int rc) {
  if (rc) c->step_failed = 1;
  if (rc != NS_ECUDA || c->dead) return rc;
  /* an asynchronous fault (illegal address, launch failure) is sticky: the stream reports
   * it from now on, and the context cannot run anything again */
  cudaError_t e = cudaStreamQuery(c->st);
  if (e != cudaSuccess && e != cudaErrorNotReady) {
    c->dead = 1;
    ns_log_error("cuda backend: the CUDA context is lost (%s); the backend is dead",
                 cudaGetErrorString(e));
  }
  (void)cudaGetLastError();
  return rc;
}

static int cu_is_dead(backend_t *be) {
  return cu_impl(be)->dead;
}

/* ---- memory ---------------------------------------------------------------------------------- */

static void kv_free(cu_be *c) {
  for (int i = 0; i < c->kvl.n_slabs; i++)
    mem_pool_free(c->pool, c->kv_slab[i]);
  free(c->kv_slab);
  c->kv_slab = NULL;
  if (c->kv_ptrs) mem_pool_free(c->pool, c->kv_ptrs);
  c->kv_ptrs = NULL;
  memset(&c->kvl, 0, sizeof c->kvl);
  c->base.kv_pages = c->base.kv_page_tokens = 0;
  c->stats.kv_bytes = 0;
}

static int kv_init_(cu_be *c, int n_pages, int page_tokens) {
  const model_cfg *g = &c->base.cfg;
  uint64_t per_page = (uint64_t)g->n_layers * 2 * (uint64_t)page_tokens * (uint64_t)g->n_kv_heads *
                      (uint64_t)g->head_dim * 2;
  uint64_t total = per_page * (uint64_t)n_pages, slab = 1;
  while (slab < total && slab < KV_SLAB)
    slab <<= 1;
  while (slab < per_page)
    slab <<= 1;
  uint64_t pps = slab / per_page;
  if (pps > (uint64_t)n_pages) pps = (uint64_t)n_pages;
  int n_slabs = (int)(((uint64_t)n_pages + pps - 1) / pps);
  c->kv_slab = calloc((size_t)n_slabs, sizeof *c->kv_slab);
  if (!c->kv_slab) return NS_ENOMEM;
  int rc;
  for (int i = 0; i < n_slabs; i++) {
    if ((rc = mem_pool_alloc(c->pool, pps * per_page, &c->kv_slab[i]))) {
      ns_log_error("cuda backend: KV cache: slab %d of %d (%llu bytes) does not fit the pool", i,
                   n_slabs, (unsigned long long)(pps * per_page));
      return rc;
    }
    c->kvl.n_slabs = i + 1;
    c->stats.kv_bytes += mem_pool_block_size(c->pool, c->kv_slab[i]);
    NS_CUDA_CHECK(cudaMemsetAsync(c->kv_slab[i], 0, pps * per_page, c->st));
  }
  if ((rc = mem_pool_alloc(c->pool, (uint64_t)n_slabs * sizeof(void *), &c->kv_ptrs))) return rc;
  NS_CUDA_CHECK(cudaMemcpyAsync(c->kv_ptrs, c->kv_slab, (size_t)n_slabs * sizeof(void *),
                                cudaMemcpyHostToDevice, c->st));
  NS_CUDA_CHECK(cudaStreamSynchronize(c->st));
  c->kvl.slabs = (void *const *)c->kv_ptrs;
  c->kvl.pages_per_slab = (int)pps;
  c->kvl.page_tokens = page_tokens;
  c->kvl.n_kv_heads = g->n_kv_heads;
  c->kvl.head_dim = g->head_dim;
  c->kvl.n_layers = g->n_layers;
  c->base.kv_pages = n_pages;
  c->base.kv_page_tokens = page_tokens;
  /* the longest sequence a decode step covers (its attention grid and scratch): the whole
   * cache, at most the model's context or engine.max_seq_len when set */
  int64_t len = (int64_t)n_pages * page_tokens;
  int ctx = c->max_seq_cfg > 0 ? c->max_seq_cfg : g->max_pos;
  if (ctx > 0 && ctx < len) len = ctx;
  c->dec_max_len = (int)len;
  return cu_step_bufs_ensure(c, 0, n_pages + c->sb.cap_tok, 0);
}

static int cu_kv_init(backend_t *be, int n_pages, int page_tokens) {
  cu_be *c = cu_impl(be);
  if (!be->w.layers || n_pages <= 0 || page_tokens <= 0 || c->cur || c->parent) return NS_EINVAL;
  if (c->dead) return NS_ECUDA;
  NS_CUDA_CHECK(cudaStreamSynchronize(c->st)); /* no step may still read the old pages */
  kv_free(c);
  cu_graphs_clear(c);
  int rc = kv_init_(c, n_pages, page_tokens);
  if (rc) kv_free(c);
  return cu_done(c, rc);
}

static int cu_alloc(backend_t *be, ns_dtype dt, int ndim, const int64_t *shape, tensor_t *out) {
  cu_be *c = cu_impl(be);
  memset(out, 0, sizeof *out);
  if (ndim < 1 || ndim > TENSOR_MAX_DIMS) return NS_EINVAL;
  /* activations are bf16; fp32 stays only for logits rows (see backend_cuda.h) */
  if (dt == NS_F32 && !(be->w.layers && shape[ndim - 1] == be->cfg.vocab_size)) dt = NS_BF16;
  out->dtype = dt;
  out->ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return NS_EINVAL;
    out->shape[i] = shape[i];
  }
  size_t bytes = tensor_nbytes(out);
  int rc = mem_pool_alloc(c->pool, bytes ? bytes : 256, &out->data);
  if (rc) {
    out->data = NULL;
    return rc;
  }
  c->stats.workspace_bytes += mem_pool_block_size(c->pool, out->data);
  if (ndim == 2 && shape[0] < c->ws_rows_min) c->ws_rows_min = (int)shape[0];
  /* step buffers follow the largest batch the caller prepares for */
  if (ndim == 2 && shape[0] > c->sb.cap_tok && shape[0] <= (1 << 24)) {
    rc = cu_step_bufs_ensure(c, (int)shape[0], 0, 0);
    if (rc) {
      c->stats.workspace_bytes -= mem_pool_block_size(c->pool, out->data);
      mem_pool_free(c->pool, out->data);
      out->data = NULL;
    }
  }
  return rc;
}

static void cu_free(backend_t *be, tensor_t *t) {
  cu_be *c = cu_impl(be);
  if (!t->data) return;
  cudaStreamSynchronize(c->st); /* a queued kernel may still use it */
  cu_graphs_clear(c);           /* and a graph may name it */
  c->stats.workspace_bytes -= mem_pool_block_size(c->pool, t->data);
  mem_pool_free(c->pool, t->data);
  t->data = NULL;
}

/* A pending SwiGLU run on its own (k_swiglu_part); 0 or NS_ECUDA. */
static int cu_swiglu_finish(cu_be *c) {
  if (!c->ps.on) return 0;
  c->ps.on = 0;
  const int I = c->ps.inter;
  return c->ps.gp.part ? k_swiglu_part(c->ps.out, I, &c->ps.gp, c->ps.n, I, c->st)
                       : k_swiglu(c->ps.out, I, c->ps.gu, 2 * I, c->ps.n, I, c->st);
}

/* A pending lazy GEMM output written out (k_dec_part_finish); 0 or NS_ECUDA. */
static int cu_lazy_y_finish(cu_be *c) {
  if (!c->lazy_y) return 0;
  void *y = c->lazy_y;
  c->lazy_y = NULL;
  return k_dec_part_finish(&c->lazy, y, c->lazy.N, c->st);
}

/* The longest sequence a decode step's attention grid covers: a captured step's, its context
 * class; an eager step's, its longest sequence. */
static int dec_grid_len(const cu_be *c) {
  const int len = c->mode == CU_CAPTURE ? c->glen : c->dslots_len;
  return len < 1 ? 1 : len;
}

/* Decode steps of at most CU_ROPE_ATTN_MAX rows whose attention has at least
 * CU_ROPE_ATTN_BLOCKS (rows x kv heads) blocks of a chunk, at most CU_ROPE_ATTN_GRID blocks in
 * all (x the chunks of keys its grid covers a slot), at most CU_ROPE_ATTN_SEGS chunks x the
 * q|k|v product's segments and heads of at most CU_ROPE_ATTN_HD dims leave RoPE and the KV
 * write to the decode attention (k_attn_dec_args.rope: the same bits, one kernel fewer a
 * layer). On an H200 at one chunk a slot that took llama3.2-1b's steps of 16 rows from
 * 1.180-1.191 to 1.148-1.155 ms (4 and 8 rows: within 1%); with fewer blocks each takes too
 * much of the rotation's loads (tinyllama-1.1b, 4 kv heads: one row 0.958 -> 0.985 ms, four
 * rows 1.049-1.054 -> 1.065). Each of a slot's blocks sums its q heads' partial sums (a segment
 * each) to rotate them, so those loads repeat a chunk: it paid at 256 blocks of
 * tinyllama-1.1b's 4 chunks x 6 segments (context 768, batch 16: 1.31-1.32 ms against
 * 1.38-1.40 with rope_kv) and of llama3.2-1b's 2 x 4 (context 384, batch 16: 1.19 against
 * 1.26-1.28), and cost at 512 of llama3.2-1b's 4 x 4 (batch 16: 1.43-1.44 against 1.33-1.34).
 * Heads of 128 dims gained when the rule was set (llama3-8b, 2026-12-01: 4 / 8 / 16 rows 4.659
 * / 4.816 / 5.250 -> 4.622 / 4.731 / 5.126 ms) and lost on every such shape when measured again
 * at 6e02d5a (2026-12-02, with the rotation against without): llama3-8b 4 / 8 rows 4.684-4.692
 * / 4.790-4.794 against 4.558-4.590 / 4.711-4.721 ms (16: the same), mistral-7b 4.461-4.463 /
 * 4.599-4.612 against 4.385-4.392 / 4.534-4.547, qwen2.5-7b (4 kv heads) 8 / 16 rows
 * 4.590-4.598 / 4.871-4.878 against 4.492-4.506 / 4.792-4.793 (bench/RESULTS.md). Above 16 rows
 * the blocks do not hold the work in registers. */
enum {
  CU_ROPE_ATTN_BLOCKS = 32,
  CU_ROPE_ATTN_MAX = 16,
  CU_ROPE_ATTN_GRID = 256,
  CU_ROPE_ATTN_SEGS = 24,
  CU_ROPE_ATTN_HD = 64
};

/* Whether a decode attention of rows x kv_heads blocks a chunk of heads of head_dim, over a
 * grid of len keys a slot, rotates q itself from a product of nseg segments
 * (CU_ROPE_ATTN_*). */
static int rope_attn_fits(int rows, int kv_heads, int head_dim, int nseg, int len) {
  const int64_t blocks = (int64_t)rows * kv_heads, chunks = (len + K_ATTN_CHUNK - 1) / K_ATTN_CHUNK;
  return rows <= CU_ROPE_ATTN_MAX && head_dim <= CU_ROPE_ATTN_HD && blocks >= CU_ROPE_ATTN_BLOCKS &&
         blocks * chunks <= CU_ROPE_ATTN_GRID && nseg * chunks <= CU_ROPE_ATTN_SEGS;
}

/* the columns of the model's q|k|v product */
static int qkv_dim(const model_cfg *g) {
  return (g->n_heads + 2 * g->n_kv_heads) * g->head_dim;
}

/* RoPE + the KV write of layer's qp.T rows from a lazy q|k|v product's partial sums (the
 * rows written to qkv as well); 0 or an ns_err. */
static int cu_rope_part(cu_be *c, void *qkv, const k_dec_part *qp, int layer) {
  const model_cfg *g = &c->base.cfg;
  return k_rope_kv_write_part(qkv, qkv_dim(g), qp, qp->T, cu_sb(c, SB_POS, 1), cu_sb(c, SB_SLOT, 1),
                              c->inv_freq, g->n_heads, g->n_kv_heads, g->head_dim, &c->kvl, layer,
                              c->st);
}

/* A pending RoPE + KV write (cu_rope_kv_write) run now; 0 or an ns_err. */
static int cu_rope_finish(cu_be *c) {
  if (!c->pr.on) return 0;
  c->pr.on = 0;
  return cu_rope_part(c, c->pr.qkv, &c->pr.qp, c->pr.layer);
}

/* A pending gate|up product (cu_matmul) run now, as k_gemm_dec would have; 0 or an ns_err. */
static int cu_gu_finish(cu_be *c) {
  if (!c->pg.on) return 0;
  c->pg.on = 0;
  return cu_gemm_run_dec(c->gemm, c->pg.y, 0, c->pg.N, c->pg.x, c->pg.K, c->pg.w, c->pg.bias,
                         c->pg.n, c->pg.N, c->pg.K, c->st);
}

/* A pending embedding lookup (cu_embed) run now; 0 or an ns_err. */
static int cu_embed_finish(cu_be *c) {
  if (!c->pe.on) return 0;
  c->pe.on = 0;
  const model_cfg *g = &c->base.cfg;
  return k_embed(c->pe.x, g->hidden, c->base.w.embed.data, cu_sb(c, SB_TOKENS, 1), c->pe.n,
                 g->hidden, g->vocab_size, c->st);
}

/* Whatever an op left pending (an embedding lookup, a gate|up product, a RoPE, a SwiGLU, a lazy
 * output) run now; 0 or an ns_err. */
static int cu_lazy_finish(cu_be *c) {
  int rc = cu_embed_finish(c);
  if (!rc) rc = cu_gu_finish(c);
  if (!rc) rc = cu_rope_finish(c);
  if (!rc) rc = cu_swiglu_finish(c);
  return rc ? rc : cu_lazy_y_finish(c);
}

static int cu_to_host(backend_t *be, const tensor_t *src, void *dst, size_t bytes) {
  cu_be *c = cu_impl(be);
  if (bytes > tensor_nbytes(src) || !src->data) return NS_EINVAL;
  if (c->dead) return NS_ECUDA;
  int rc = c->mode == CU_REPLAY ? 0 : cu_lazy_finish(c); /* src may be a lazy GEMM's y */
  if (rc) return cu_done(c, rc);
  if (cudaMemcpyAsync(dst, src->data, bytes, cudaMemcpyDeviceToHost, c->st) != cudaSuccess ||
      cudaStreamSynchronize(c->st) != cudaSuccess) {
    ns_log_error("cuda backend: to_host: %s", cudaGetErrorString(cudaGetLastError()));
    rc = NS_ECUDA;
  }
  return cu_done(c, rc);
}

static int cu_stats(backend_t *be, backend_stats_t *st) {
  *st = cu_impl(be)->stats;
  return 0;
}

void be_cuda_pool_stats(backend_t *be, mem_pool_stats_t *st) {
  mem_pool_stats(cu_impl(be)->pool, st);
}

/* ---- layer ops ------------------------------------------------------------------------------- */

static int is_bf16(const tensor_t *t) {
  return t->dtype == NS_BF16 && t->data && t->ndim >= 1;
}

/* Rows an op runs on a tensor of n rows: a padded decode step runs its bucket's rows on
 * the step's (token and logits rows are the same there). */
static int op_rows(const cu_be *c, int64_t n) {
  return c->cur && c->decode && n == c->cur->n_tokens ? c->rows : (int)n;
}

/* The step's ops are in a graph being replayed: nothing to launch. */
static int replaying(const cu_be *c) {
  return c->mode == CU_REPLAY;
}

/* 16-byte aligned (what the *_part kernels' 16-byte accesses need) */
static int a16(const void *p) {
  return ((uintptr_t)p & 15) == 0;
}

/* The pending partial sums of y for its consumer, which reads them when ok (its kernel can:
 * shapes, alignment) and rows match; NULL otherwise, after any pending output is written
 * out (*rc: that launch's result). The consumer is their only reader, so large ones are
 * marked to be dropped from L2 once read (k_dec_part_drops; rope_kv and the norm honour it,
 * the decode attention's RoPE does not). */
static const k_dec_part *lazy_take(cu_be *c, const void *y, int rows, int ok, int *rc) {
  if ((*rc = cu_swiglu_finish(c))) return NULL;
  if (c->lazy_y && c->lazy_y == y && ok && c->lazy.T == rows) {
    c->lazy_y = NULL;
    if (c->drop_rows != rows) {
      const model_cfg *g = &c->base.cfg;
      c->drop_rows = rows;
      c->drop_layer_bytes = k_dec_layer_part_bytes(rows, g->hidden, qkv_dim(g), g->intermediate);
    }
    c->lazy.drop = k_dec_part_drops(&c->lazy, c->drop_layer_bytes);
    return &c->lazy;
  }
  *rc = cu_lazy_finish(c);
  return NULL;
}

static int cu_embed(backend_t *be, const batch_t *b, tensor_t *x) {
  cu_be *c = cu_impl(be);
  if (c->cur != b || !is_bf16(x) || x->shape[0] < b->n_tokens || x->shape[1] != be->cfg.hidden)
    return NS_EINVAL;
  /* the step's first op: the forward's workspaces are known from here on */
  int rc = c->decode ? cu_graph_enter(c, x->data) : 0;
  if (rc || replaying(c)) return cu_done(c, rc);
  /* left for the first layer norm (cu_add_rmsnorm), which reads the table's rows itself */
  if ((rc = cu_lazy_finish(c))) return cu_done(c, rc);
  c->pe.on = 1, c->pe.n = op_rows(c, b->n_tokens), c->pe.x = x->data;
  return cu_done(c, 0);
}

static int cu_add_rmsnorm(backend_t *be, tensor_t *x, tensor_t *residual, const tensor_t *w,
                          int first) {
  cu_be *c = cu_impl(be);
  int rows = (int)x->shape[0], dim = (int)x->shape[1];
  if (!is_bf16(x) || !is_bf16(residual) || !is_bf16(w) || residual->shape[0] != rows ||
      residual->shape[1] != dim || w->shape[0] != dim)
    return NS_EINVAL;
  if (c->dead) return NS_ECUDA;
  if (replaying(c)) return 0;
  const int n = op_rows(c, rows);
  int rc;
  if (c->pe.on && first && c->pe.x == x->data && c->pe.n == n) {
    /* the step's embedding lookup, pending for this norm: one kernel for both */
    rc = k_embed_rmsnorm(x->data, residual->data, be->w.embed.data, cu_sb(c, SB_TOKENS, 1),
                         be->cfg.vocab_size, w->data, n, dim, dim, be->cfg.rms_eps, c->st);
    if (rc != NS_EUNSUPPORTED) {
      c->pe.on = 0;
      return cu_done(c, rc);
    }
  }
  const k_dec_part *xp = lazy_take(
      c, x->data, n, dim % 8 == 0 && a16(x->data) && a16(residual->data) && a16(w->data), &rc);
  if (!rc)
    rc = xp ? k_add_rmsnorm_part(x->data, residual->data, xp, w->data, n, dim, dim, be->cfg.rms_eps,
                                 first, c->st)
            : k_add_rmsnorm(x->data, residual->data, x->data, w->data, n, dim, dim, be->cfg.rms_eps,
                            first, c->st);
  return cu_done(c, rc);
}

static int cu_matmul(backend_t *be, const tensor_t *x, const tensor_t *w, const tensor_t *bias,
                     tensor_t *y) {
  cu_be *c = cu_impl(be);
  int T = (int)x->shape[0], N = (int)w->shape[0], K = (int)w->shape[1];
  if (!is_bf16(x) || !is_bf16(w) || !y->data || (y->dtype != NS_BF16 && y->dtype != NS_F32) ||
      x->shape[1] != K || y->shape[0] != T || y->shape[1] != N)
    return NS_EINVAL;
  const void *bp = bias && bias->data ? bias->data : NULL;
  if (bp && (bias->dtype != NS_BF16 || bias->shape[0] != N)) return NS_EINVAL;
  if (c->dead) return NS_ECUDA;
  if (replaying(c)) return 0;
  /* rows of one class at a time: decode rows on the decode GEMM, prefill rows on cuBLASLt */
  const cu_run one = {0, T, 0}, *runs = &one;
  int n_runs = 1, f32 = y->dtype == NS_F32, es = f32 ? 4 : 2, rc;
  if (!k_gemm_supported(x->data, K, w->data, K)) {
    /* shapes the decode GEMM does not take run every row on cuBLASLt (a matter of K alone,
     * so still one path per row class) */
  } else if (c->cur && T == c->cur->n_tokens) {
    runs = c->runs_tok, n_runs = c->n_runs_tok;
  } else if (c->cur && T == c->cur->n_out) {
    runs = c->runs_out, n_runs = c->n_runs_out;
  }
  const int dec = n_runs == 1 && runs[0].decode && !f32;
  if (dec && c->ps.on && c->ps.out == x->data && c->ps.n == runs[0].n && c->ps.inter == K &&
      k_gemm_dec_swiglu_ok(runs[0].n, N, K)) {
    /* the pending SwiGLU inside this GEMM; gate|up's partial sums stay in the decode
     * workspace while this call writes its own to sw_ws */
    const k_dec_part gp = c->ps.gp;
    c->ps.on = 0;
    if ((rc = cu_lazy_y_finish(c))) return cu_done(c, rc);
    rc = cu_gemm_run_dec_swiglu(c->gemm, y->data, N, x->data, gp.part ? &gp : NULL,
                                gp.part ? NULL : c->ps.gu, w->data, bp, runs[0].n, N, K, c->sw_ws,
                                k_gemm_dec_ws_max(), &c->lazy, c->st);
    if (!rc && c->lazy.part) c->lazy_y = y->data;
    return cu_done(c, rc);
  }
  rc = cu_lazy_finish(c); /* the decode GEMMs share one workspace */
  if (rc) return cu_done(c, rc);
  if (dec && N == 2 * be->cfg.intermediate && K == be->cfg.hidden &&
      k_gemm_dec_gu_ok(runs[0].n, N / 2, K)) {
    /* a gate|up product at a size k_gemm_dec_gu takes: left for the SwiGLU that reads it */
    c->pg.on = 1, c->pg.n = runs[0].n, c->pg.N = N, c->pg.K = K;
    c->pg.y = y->data, c->pg.x = x->data, c->pg.w = w->data, c->pg.bias = bp;
    return cu_done(c, 0);
  }
  if (dec) {
    /* a decode step: split sums left to the op that reads y (lazy_take) */
    rc = cu_gemm_run_dec_lazy(c->gemm, y->data, N, x->data, K, w->data, bp, runs[0].n, N, K,
                              &c->lazy, c->st);
    if (!rc && c->lazy.part) c->lazy_y = y->data;
    return cu_done(c, rc);
  }
  for (int i = 0; i < n_runs && !rc; i++) {
    const cu_run *r = &runs[i];
    const char *xr = (const char *)x->data + (size_t)r->row0 * K * 2;
    char *yr = (char *)y->data + (size_t)r->row0 * N * es;
    rc = r->decode ? cu_gemm_run_dec(c->gemm, yr, f32, N, xr, K, w->data, bp, r->n, N, K, c->st)
                   : cu_gemm_run(c->gemm, yr, f32, N, xr, K, w->data, bp, r->n, N, K, c->st);
  }
  return cu_done(c, rc);
}

static int cu_rope_kv_write(backend_t *be, const batch_t *b, tensor_t *qkv, int layer) {
  cu_be *c = cu_impl(be);
  const model_cfg *g = &be->cfg;
  int ld = qkv_dim(g);
  if (c->cur != b || !is_bf16(qkv) || layer < 0 || layer >= g->n_layers || qkv->shape[1] != ld ||
      qkv->shape[0] < b->n_tokens)
    return NS_EINVAL;
  if (replaying(c)) return 0;
  const int n = op_rows(c, b->n_tokens);
  int rc;
  const k_dec_part *qp = lazy_take(c, qkv->data, n, 1, &rc);
  if (!rc && qp && c->decode && c->n_dslots > 0 &&
      rope_attn_fits(n, g->n_kv_heads, g->head_dim, qp->nseg, dec_grid_len(c))) {
    /* a decode step: left for the attention (cu_attention), which rotates its slots' rows */
    c->pr.on = 1, c->pr.layer = layer, c->pr.qp = *qp, c->pr.qkv = qkv->data;
    return cu_done(c, 0);
  }
  if (!rc)
    rc = qp ? cu_rope_part(c, qkv->data, qp, layer)
            : k_rope_kv_write(qkv->data, ld, n, cu_sb(c, SB_POS, 1), cu_sb(c, SB_SLOT, 1),
                              c->inv_freq, g->n_heads, g->n_kv_heads, g->head_dim, &c->kvl, layer,
                              c->st);
  return cu_done(c, rc);
}

static int cu_attention(backend_t *be, const batch_t *b, const tensor_t *qkv, tensor_t *out,
                        int layer) {
  cu_be *c = cu_impl(be);
  const model_cfg *g = &be->cfg;
  if (c->cur != b || !is_bf16(qkv) || !is_bf16(out) || layer < 0 || layer >= g->n_layers ||
      out->shape[0] < b->n_tokens || out->shape[1] != g->n_heads * g->head_dim ||
      qkv->shape[1] != qkv_dim(g))
    return NS_EINVAL;
  k_attn_args a = {
      .out = out->data,
      .ldo = (int)out->shape[1],
      .q = qkv->data,
      .ldq = (int)qkv->shape[1],
      .tok0 = cu_sb(c, SB_TOK0, 1),
      .n_new = cu_sb(c, SB_N_NEW, 1),
      .pos0 = cu_sb(c, SB_POS0, 1),
      .pt_off = cu_sb(c, SB_PT_OFF, 1),
      .pages = cu_sb(c, SB_PAGES, 1),
      .pf = cu_sb(c, SB_PF, 1),
      .n_pf = c->n_pf,
      .kv = c->kvl,
      .layer = layer,
      .n_heads = g->n_heads,
      .n_kv_heads = g->n_kv_heads,
      .head_dim = g->head_dim,
      .scale = (float)(1.0 / sqrt((double)g->head_dim)),
  };
  if (replaying(c)) return 0;
  /* a RoPE left by cu_rope_kv_write for this layer's rows goes into the decode attention */
  const int rope = c->pr.on && c->pr.layer == layer && c->pr.qkv == qkv->data && c->n_dslots > 0;
  k_dec_part rqp = c->pr.qp;
  if (rope) c->pr.on = 0;
  int rc = cu_lazy_finish(c);
  if (rc) return cu_done(c, rc);
  if (c->n_dslots > 0) {
    /* decode rows: fixed slots, lengths read on the device; a graph's grid covers every
     * length of its context class, an eager step's the lengths it has */
    k_attn_dec_args d = {
        .out = out->data,
        .ldo = (int)out->shape[1],
        .q = qkv->data,
        .ldq = (int)qkv->shape[1],
        .tok0 = cu_sb(c, SB_D_TOK0, 1),
        .pos0 = cu_sb(c, SB_D_POS0, 1),
        .pt_off = cu_sb(c, SB_D_PT_OFF, 1),
        .pages = cu_sb(c, SB_PAGES, 1),
        .n_slots = c->n_dslots,
        .max_len = dec_grid_len(c),
        .part_o = c->sb.part_o,
        .part_ml = c->sb.part_ml,
        .part_off = cu_sb(c, SB_D_PART, 1),
        .cnt = c->sb.attn_cnt,
        .kv = c->kvl,
        .layer = layer,
        .n_heads = g->n_heads,
        .n_kv_heads = g->n_kv_heads,
        .head_dim = g->head_dim,
        .scale = a.scale,
    };
    if (rope) {
      d.rope = rqp;
      d.rope_pos = cu_sb(c, SB_POS, 1);
      d.rope_slot = cu_sb(c, SB_SLOT, 1);
      d.inv_freq = c->inv_freq;
    }
    rc = k_attention_decode(&d, c->st);
  }
  if (!rc && c->n_pf > 0) rc = k_attention(&a, c->st);
  return cu_done(c, rc);
}

static int cu_swiglu(backend_t *be, const tensor_t *gate_up, tensor_t *out) {
  cu_be *c = cu_impl(be);
  int I = (int)out->shape[1];
  if (!is_bf16(gate_up) || !is_bf16(out) || gate_up->shape[1] != 2 * I ||
      gate_up->shape[0] != out->shape[0])
    return NS_EINVAL;
  if (c->dead) return NS_ECUDA;
  if (replaying(c)) return 0;
  const int n = op_rows(c, out->shape[0]);
  int rc;
  if (c->pg.on && c->pg.y == gate_up->data && c->pg.n == n && c->pg.N == 2 * I) {
    /* the pending gate|up product and this SwiGLU as one kernel, or where the driver maps no
     * tensor (NS_EUNSUPPORTED, nothing launched) the two */
    rc = cu_gemm_run_dec_gu(c->gemm, out->data, I, c->pg.x, c->pg.K, c->pg.w, c->pg.bias, n, I,
                            c->pg.K, c->st);
    if (rc != NS_EUNSUPPORTED) {
      c->pg.on = 0;
      return cu_done(c, rc);
    }
    if ((rc = cu_gu_finish(c))) return cu_done(c, rc);
  }
  const k_dec_part *gp =
      lazy_take(c, gate_up->data, n, I % 8 == 0 && n <= 65535 && a16(out->data), &rc);
  const char *sws = (const char *)c->sw_ws;
  const int stored_ok = I % 8 == 0 && a16(gate_up->data) && a16(out->data);
  if (!rc && c->decode && sws && n <= 16 &&
      (gp ? (const char *)gp->part < sws || (const char *)gp->part >= sws + k_gemm_dec_ws_max()
          : stored_ok)) {
    /* left for the decode GEMM that reads out (cu_matmul), whose blocks each make their part */
    c->ps.on = 1, c->ps.n = n, c->ps.inter = I, c->ps.out = out->data, c->ps.gu = gate_up->data;
    c->ps.gp = gp ? *gp : (k_dec_part){0};
    return cu_done(c, 0);
  }
  if (!rc)
    rc = gp ? k_swiglu_part(out->data, I, gp, n, I, c->st)
            : k_swiglu(out->data, I, gate_up->data, 2 * I, n, I, c->st);
  return cu_done(c, rc);
}

static int cu_gather_rows(backend_t *be, const batch_t *b, const tensor_t *src, tensor_t *dst) {
  cu_be *c = cu_impl(be);
  int dim = (int)src->shape[1];
  if (c->cur != b || !is_bf16(src) || !is_bf16(dst) || dst->shape[1] != dim ||
      dst->shape[0] < b->n_out)
    return NS_EINVAL;
  if (replaying(c)) return 0;
  int rc = cu_lazy_finish(c);
  if (!rc)
    rc = k_gather_rows(dst->data, dim, src->data, dim, cu_sb(c, SB_OUT_ROWS, 1),
                       op_rows(c, b->n_out), dim, c->st);
  return cu_done(c, rc);
}

/* ---- lifetime ----------------------------------------------------------------------------------
 */

static void cu_destroy(backend_t *be) {
  cu_be *c = cu_impl(be);
  if (!c) return;
  if (c->st) cudaStreamSynchronize(c->st);
  cu_graphs_free(c);
  cu_timing_free(c);
  free(c->runs_tok);
  free(c->runs_out);
  free(c->nnew_pf);
  cu_gemm_destroy(c->gemm);
  cu_step_bufs_free(c);
  if (!c->parent) { /* a lane's cache, weights and pools are its parent's */
    kv_free(c);
    cu_free_weights(c);
  }
  if (c->gemm_ws) mem_pool_free(c->pool, c->gemm_ws);
  if (c->gemm_dec_ws) mem_pool_free(c->pool, c->gemm_dec_ws);
  if (c->sw_ws) mem_pool_free(c->pool, c->sw_ws);
  if (!c->parent) {
    mem_pool_destroy(c->pool);
    mem_pool_destroy(c->pinned);
  }
  if (c->st) cudaStreamDestroy(c->st);
  free(c->samp_seq);
  free(c);
}

/* The GEMM state of one lane: cuBLASLt and decode-GEMM workspaces of its own (two lanes'
 * GEMMs may run at once). */
static int gemm_setup(cu_be *c, const char **what) {
  int rc;
  *what = "cuBLASLt workspace";
  if ((rc = mem_pool_alloc(c->pool, GEMM_WS, &c->gemm_ws))) return rc;
  /* k_gemm_dec's workspace: k_gemm_dec_ws_max() covers every T and shape */
  *what = "decode GEMM workspace";
  if ((rc = mem_pool_alloc(c->pool, k_gemm_dec_ws_max(), &c->gemm_dec_ws))) return rc;
  *what = "decode GEMM SwiGLU workspace"; /* k_gemm_dec_swiglu's: lazy sums only, no counters */
  if ((rc = mem_pool_alloc(c->pool, k_gemm_dec_ws_max(), &c->sw_ws))) return rc;
  *what = "GEMM";
  return cu_gemm_create(c->gemm_ws, GEMM_WS, c->gemm_dec_ws, k_gemm_dec_ws_max(), c->gemm_mode,
                        c->n_sm, &c->gemm);
}

/* ---- a second lane ------------------------------------------------------------------------- */

static int cu_lane_create(backend_t *be, backend_t **out) {
  cu_be *p = cu_impl(be);
  *out = NULL;
  if (p->parent || !be->w.layers || !p->kvl.slabs) return NS_EINVAL;
  if (p->dead) return NS_ECUDA;
  cu_be *c = calloc(1, sizeof *c);
  if (!c) return NS_ENOMEM;
  c->base = p->base; /* ops, cfg, weight views, cache size */
  c->parent = p;
  c->dev = p->dev;
  c->n_sm = p->n_sm;
  c->pool = p->pool;
  c->pinned = p->pinned;
  c->inv_freq = p->inv_freq;
  c->kvl = p->kvl;
  c->dec_max_len = p->dec_max_len;
  c->max_seq_cfg = p->max_seq_cfg;
  c->init_tok = p->init_tok;
  c->gemm_mode = p->gemm_mode;
  c->ws_rows_min = INT_MAX; /* no graphs: graphs_on 0 */
  const char *what = "stream";
  int lo = 0, hi = 0, rc = NS_ECUDA;
  if (cudaDeviceGetStreamPriorityRange(&lo, &hi) != cudaSuccess ||
      cudaStreamCreateWithPriority(&c->st, cudaStreamNonBlocking, lo) != cudaSuccess)
    goto err;
  what = "events";
  if (cu_timing_init(c)) goto err;
  if ((rc = gemm_setup(c, &what))) goto err;
  what = "step buffers";
  if ((rc = cu_step_bufs_ensure(c, c->init_tok, c->base.kv_pages + c->init_tok, 0))) goto err;
  *out = &c->base;
  return 0;
err:
  ns_log_error("cuda backend: second lane: %s setup failed: %s", what, ns_strerror(rc));
  (void)cudaGetLastError();
  cu_destroy(&c->base);
  return rc;
}

static int cu_step_poll(backend_t *be) {
  cu_be *c = cu_impl(be);
  if (c->dead) return NS_ECUDA;
  cudaError_t e = cudaStreamQuery(c->st);
  if (e == cudaSuccess) return 1;
  if (e == cudaErrorNotReady) return 0;
  ns_log_error("cuda backend: step failed: %s", cudaGetErrorString(e));
  return cu_done(c, NS_ECUDA);
}

static const backend_ops cu_ops = {
    .name = "cuda",
    .destroy = cu_destroy,
    .load_weights = cu_load_weights,
    .kv_init = cu_kv_init,
    .alloc = cu_alloc,
    .free = cu_free,
    .to_host = cu_to_host,
    .step_begin = cu_step_begin,
    .embed = cu_embed,
    .add_rmsnorm = cu_add_rmsnorm,
    .matmul = cu_matmul,
    .rope_kv_write = cu_rope_kv_write,
    .attention = cu_attention,
    .swiglu = cu_swiglu,
    .gather_rows = cu_gather_rows,
    .sample = cu_sample,
    .step_end = cu_step_end,
    .stats = cu_stats,
    .is_dead = cu_is_dead,
    .step_timing = cu_step_timing,
    .copy_bandwidth = cu_copy_bandwidth,
    .graph_sizes = cu_graph_sizes,
    .graph_lens = cu_graph_lens,
    .lane_create = cu_lane_create,
    .step_poll = cu_step_poll,
};

int be_cuda_create(const cfg_t *cfg, backend_t **out, char *err, size_t errlen) {
  *out = NULL;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < 1) {
    (void)cudaGetLastError();
    snprintf(err, errlen, "backend cuda: no usable CUDA device (%s)",
             e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return NS_EUNSUPPORTED;
  }
  struct cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || cudaSetDevice(0) != cudaSuccess) {
    snprintf(err, errlen, "backend cuda: device 0: %s", cudaGetErrorString(cudaGetLastError()));
    return NS_ECUDA;
  }
  if (p.major != 9 || p.minor != 0) {
    snprintf(err, errlen,
             "backend cuda: %s has compute capability %d.%d; the kernels are built for sm_90a "
             "(Hopper)",
             p.name, p.major, p.minor);
    return NS_EUNSUPPORTED;
  }
  cu_be *c = calloc(1, sizeof *c);
  if (!c) return NS_ENOMEM;
  c->base.ops = &cu_ops;
  c->n_sm = p.multiProcessorCount;
  c->init_tok = cfg->engine.max_batch_tokens > 0 ? cfg->engine.max_batch_tokens : 256;
  c->ws_rows_min = INT_MAX;
  c->graph_safe = 1; /* every decode op reads its lengths on the device */
  c->graphs_on = cfg->engine.cuda_graphs;
  /* graphs up to engine.cuda_graph_max_batch, never past the batch the engine runs */
  int gmax = cfg->engine.max_batch < cfg->engine.max_batch_tokens ? cfg->engine.max_batch
                                                                  : cfg->engine.max_batch_tokens;
  c->graph_max = cfg->engine.cuda_graph_max_batch > 0 && cfg->engine.cuda_graph_max_batch < gmax
                     ? cfg->engine.cuda_graph_max_batch
                     : gmax;
  c->seen = calloc(((size_t)c->graph_max + 1) * CU_GRAPH_CLASSES, sizeof *c->seen);
  c->max_seq_cfg = cfg->engine.max_seq_len;
  int rc = NS_ECUDA;
  const char *what = "stream";
  int lo = 0, hi = 0; /* decode steps on the highest priority; a lane's prefill on the lowest */
  if (cudaDeviceGetStreamPriorityRange(&lo, &hi) != cudaSuccess ||
      cudaStreamCreateWithPriority(&c->st, cudaStreamNonBlocking, hi) != cudaSuccess)
    goto err;
  what = "events";
  if (!c->seen || cu_timing_init(c)) goto err;
  what = "device pool";
  if ((rc = mem_pool_create_device_fraction(cfg->engine.gpu_memory_fraction, 0, &c->pool)))
    goto err;
  what = "pinned pool";
  if ((rc = mem_pool_create_host(PINNED_SZ, 64 << 10, 1, &c->pinned))) goto err;
  c->gemm_mode = CU_GEMM_PINNED; /* engine.cuda_gemm; pinned is batch-invariant (cuda_gemm.h) */
  switch (cfg->engine.cuda_gemm) {
  case CFG_GEMM_PINNED: c->gemm_mode = CU_GEMM_PINNED; break;
  case CFG_GEMM_OWN: c->gemm_mode = CU_GEMM_OWN; break;
  case CFG_GEMM_NOSPLIT: c->gemm_mode = CU_GEMM_NOSPLIT; break;
  case CFG_GEMM_HEURISTIC: c->gemm_mode = CU_GEMM_HEURISTIC; break;
  }
  if ((rc = gemm_setup(c, &what))) goto err;
  mem_pool_stats_t ps;
  mem_pool_stats(c->pool, &ps);
  ns_log_info("cuda backend: %s, %d SMs, pool %.1f GiB (%.2f of free memory), GEMMs %s", p.name,
              c->n_sm, (double)ps.size / (1u << 30), cfg->engine.gpu_memory_fraction,
              cu_gemm_mode_name(c->gemm_mode));
  *out = &c->base;
  return 0;
err:
  snprintf(err, errlen, "backend cuda: %s setup failed: %s", what, ns_strerror(rc));
  cu_destroy(&c->base);
  return rc;
}
