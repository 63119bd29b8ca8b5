/* backend_cpu.c — the CPU backend: backend_ops over the fp32 references in kernels/ref,
 * weights converted to fp32 and fused at load, matmul and attention split over a
 * persistent thread pool. Entry point: be_cpu_create. */
#include "backend.h"

#include "cpu_pool.h"
#include "ns_err.h"
#include "ns_log.h"
#include "ref/attention.h"
#include "ref/embed.h"
#include "ref/matmul.h"
#include "ref/rmsnorm.h"
#include "ref/rope_kv.h"
#include "ref/sample.h"
#include "ref/swiglu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cpu_be {
  backend_t base;
  struct cpu_be *parent; /* a second lane (lane_create): weights, cache and pool are its */
  be_pool *pool;
  float **wbufs; /* every weight allocation, to free */
  int n_wbufs, cap_wbufs;
  float *inv_freq; /* [head_dim / 2] */
  float *kv;       /* [n_layers][2][n_pages][page_tokens][n_kv_heads][head_dim] */
  void *samp_scratch;
  /* per step, derived from the batch in step_begin */
  const batch_t *cur;
  int32_t *slot;                /* [n_tokens] cache slot of each row */
  int32_t *seqa;                /* [3][cap_seq]: tok0, n_new, pos0 of each sequence */
  int32_t *bt;                  /* [n_seqs][bt_stride] page tables, padded */
  int32_t *tok0, *n_new, *pos0; /* views into seqa */
  int cap_tok, cap_seq, cap_bt, bt_stride;
  backend_stats_t st;
} cpu_be;

static cpu_be *impl(backend_t *be) {
  return (cpu_be *)be;
}

/* ---- weights ----------------------------------------------------------------------- */

static void free_weights(cpu_be *c) {
  for (int i = 0; i < c->n_wbufs; i++)
    free(c->wbufs[i]);
  free(c->wbufs);
  c->wbufs = NULL;
  c->n_wbufs = c->cap_wbufs = 0;
  free(c->base.w.layers);
  memset(&c->base.w, 0, sizeof c->base.w);
  free(c->inv_freq);
  c->inv_freq = NULL;
  free(c->samp_scratch);
  c->samp_scratch = NULL;
  c->st.weight_bytes = 0;
}

static float *wbuf(cpu_be *c, size_t n) {
  if (c->n_wbufs == c->cap_wbufs) {
    int cap = c->cap_wbufs ? 2 * c->cap_wbufs : 64;
    float **p = realloc(c->wbufs, (size_t)cap * sizeof *p);
    if (!p) return NULL;
    c->wbufs = p;
    c->cap_wbufs = cap;
  }
  float *b = malloc(n * sizeof(float));
  if (!b) return NULL;
  c->wbufs[c->n_wbufs++] = b;
  c->st.weight_bytes += n * sizeof(float);
  return b;
}

/* dst = the fp32 concatenation of srcs' rows, each [rows[i], cols]; absent (data NULL)
 * sources are allowed only when all are absent (dst then has data NULL too). */
static int fuse(cpu_be *c, tensor_t *dst, const tensor_t *const *srcs, const int64_t *rows, int n,
                int64_t cols, const char *what) {
  memset(dst, 0, sizeof *dst);
  int64_t total = 0, present = 0;
  for (int i = 0; i < n; i++) {
    total += rows[i];
    present += srcs[i]->data != NULL;
  }
  if (present == 0 && cols == 1) return 0; /* no bias */
  if (present != n) goto bad;
  for (int i = 0; i < n; i++) {
    ns_dtype dt = srcs[i]->dtype;
    if (tensor_numel(srcs[i]) != rows[i] * cols || (dt != NS_F32 && dt != NS_F16 && dt != NS_BF16))
      goto bad;
  }
  float *d = wbuf(c, (size_t)(total * cols));
  if (!d) return NS_ENOMEM;
  float *p = d;
  for (int i = 0; i < n; i++) {
    ns_convert_to_f32(p, srcs[i]->data, srcs[i]->dtype, (size_t)(rows[i] * cols));
    p += rows[i] * cols;
  }
  dst->data = d;
  dst->dtype = NS_F32;
  dst->ndim = cols == 1 ? 1 : 2;
  dst->shape[0] = total;
  dst->shape[1] = cols == 1 ? 0 : cols;
  return 0;
bad:
  ns_log_error("cpu backend: weight %s has an unexpected shape or dtype", what);
  return NS_EINVAL;
}

static int conv(cpu_be *c, tensor_t *dst, const tensor_t *src, int64_t rows, int64_t cols,
                const char *what) {
  const tensor_t *s[1] = {src};
  if (!src->data) {
    ns_log_error("cpu backend: weight %s is missing", what);
    return NS_EINVAL;
  }
  return fuse(c, dst, s, &rows, 1, cols, what);
}

static int cpu_load_weights(backend_t *be, const model_t *m) {
  cpu_be *c = impl(be);
  const model_cfg *g = &m->cfg;
  if (c->parent) return NS_EINVAL; /* a lane uses its parent's */
  free_weights(c);
  if (g->n_layers <= 0 || g->hidden <= 0 || g->vocab_size <= 0 || g->n_heads <= 0 ||
      g->n_kv_heads <= 0 || g->n_heads % g->n_kv_heads || g->head_dim <= 0 || g->head_dim % 2 ||
      g->head_dim > 1024 || g->intermediate <= 0) {
    ns_log_error("cpu backend: unsupported model dimensions");
    return NS_EUNSUPPORTED;
  }
  be->cfg = *g;
  int64_t H = g->hidden, V = g->vocab_size, I = g->intermediate;
  int64_t qd = (int64_t)g->n_heads * g->head_dim, kvd = (int64_t)g->n_kv_heads * g->head_dim;
  be_weights *w = &be->w;
  int rc = NS_ENOMEM;
  w->layers = calloc((size_t)g->n_layers, sizeof *w->layers);
  c->inv_freq = malloc((size_t)g->head_dim / 2 * sizeof(float));
  c->samp_scratch = calloc(1, ref_sample_scratch_bytes(g->vocab_size));
  if (!w->layers || !c->inv_freq || !c->samp_scratch) goto err;
  if ((rc = conv(c, &w->embed, &m->embed, V, H, "embed_tokens"))) goto err;
  if ((rc = conv(c, &w->final_norm, &m->final_norm, H, 1, "norm"))) goto err;
  if (m->lm_head.data == NULL || m->lm_head.data == m->embed.data)
    w->lm_head = w->embed;
  else if ((rc = conv(c, &w->lm_head, &m->lm_head, V, H, "lm_head")))
    goto err;
  for (int l = 0; l < g->n_layers; l++) {
    const layer_weights *s = &m->layers[l];
    be_layer *d = &w->layers[l];
    const tensor_t *qkv[3] = {&s->wq, &s->wk, &s->wv}, *bqkv[3] = {&s->bq, &s->bk, &s->bv};
    const tensor_t *gu[2] = {&s->w_gate, &s->w_up};
    int64_t qkv_rows[3] = {qd, kvd, kvd}, gu_rows[2] = {I, I};
    if ((rc = conv(c, &d->attn_norm, &s->attn_norm, H, 1, "input_layernorm")) ||
        (rc = fuse(c, &d->wqkv, qkv, qkv_rows, 3, H, "q/k/v_proj")) ||
        (rc = fuse(c, &d->bqkv, bqkv, qkv_rows, 3, 1, "q/k/v_proj.bias")) ||
        (rc = conv(c, &d->wo, &s->wo, H, qd, "o_proj")) ||
        (rc = conv(c, &d->mlp_norm, &s->mlp_norm, H, 1, "post_attention_layernorm")) ||
        (rc = fuse(c, &d->w_gate_up, gu, gu_rows, 2, H, "gate/up_proj")) ||
        (rc = conv(c, &d->w_down, &s->w_down, H, I, "down_proj")))
      goto err;
    if (!d->wqkv.data) { /* the weights are not optional */
      rc = NS_EINVAL;
      goto err;
    }
  }
  ref_rope_inv_freq(c->inv_freq, g->head_dim, g->rope_theta, (int)g->rope, g->rope_factor,
                    g->rope_low_freq_factor, g->rope_high_freq_factor, g->rope_original_max_pos);
  return 0;
err:
  free_weights(c);
  return rc;
}

/* ---- memory -------------------------------------------------------------------------- */

static int cpu_kv_init(backend_t *be, int n_pages, int page_tokens) {
  cpu_be *c = impl(be);
  if (!be->w.layers || n_pages <= 0 || page_tokens <= 0 || c->parent) return NS_EINVAL;
  free(c->kv);
  c->kv = NULL;
  be->kv_pages = be->kv_page_tokens = 0;
  size_t n = (size_t)be->cfg.n_layers * 2 * (size_t)n_pages * (size_t)page_tokens *
             (size_t)be->cfg.n_kv_heads * (size_t)be->cfg.head_dim;
  c->kv = calloc(n, sizeof(float));
  if (!c->kv) return NS_ENOMEM;
  be->kv_pages = n_pages;
  be->kv_page_tokens = page_tokens;
  c->st.kv_bytes = n * sizeof(float);
  return 0;
}

static int cpu_alloc(backend_t *be, ns_dtype dt, int ndim, const int64_t *shape, tensor_t *out) {
  memset(out, 0, sizeof *out);
  if (ndim < 1 || ndim > TENSOR_MAX_DIMS) return NS_EINVAL;
  out->dtype = dt;
  out->ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return NS_EINVAL;
    out->shape[i] = shape[i];
  }
  size_t bytes = (tensor_nbytes(out) + 63) / 64 * 64;
  out->data = aligned_alloc(64, bytes ? bytes : 64);
  if (!out->data) return NS_ENOMEM;
  impl(be)->st.workspace_bytes += bytes;
  return 0;
}

static void cpu_free(backend_t *be, tensor_t *t) {
  if (!t->data) return;
  impl(be)->st.workspace_bytes -= (tensor_nbytes(t) + 63) / 64 * 64;
  free(t->data);
  t->data = NULL;
}

static int cpu_to_host(backend_t *be, const tensor_t *src, void *dst, size_t bytes) {
  if (bytes > tensor_nbytes(src)) return NS_EINVAL;
  memcpy(dst, src->data, bytes);
  return 0;
}

/* ---- step ------------------------------------------------------------------------------- */

static int grow_i32(int32_t **p, int *cap, int need) {
  if (need <= *cap) return 0;
  int n = *cap ? *cap : 64;
  while (n < need)
    n *= 2;
  int32_t *q = realloc(*p, (size_t)n * sizeof *q);
  if (!q) return NS_ENOMEM;
  *p = q;
  *cap = n;
  return 0;
}

static int cpu_step_begin(backend_t *be, const batch_t *b) {
  cpu_be *c = impl(be);
  c->cur = NULL;
  if (c->parent) { /* a lane: the parent's cache as it is now */
    c->kv = c->parent->kv;
    be->kv_pages = c->parent->base.kv_pages;
    be->kv_page_tokens = c->parent->base.kv_page_tokens;
  }
  if (!c->kv || b->n_tokens < 1 || b->n_seqs < 1) return NS_EINVAL;
  int pt = be->kv_page_tokens, stride = 1;
  for (int s = 0; s < b->n_seqs; s++)
    stride = b->seqs[s].n_pages > stride ? b->seqs[s].n_pages : stride;
  if (grow_i32(&c->slot, &c->cap_tok, b->n_tokens) ||
      grow_i32(&c->bt, &c->cap_bt, b->n_seqs * stride))
    return NS_ENOMEM;
  if (b->n_seqs > c->cap_seq) {
    int32_t *p = realloc(c->seqa, (size_t)b->n_seqs * 3 * sizeof *p);
    if (!p) return NS_ENOMEM;
    c->seqa = p;
    c->cap_seq = b->n_seqs;
  }
  c->tok0 = c->seqa;
  c->n_new = c->seqa + c->cap_seq;
  c->pos0 = c->seqa + 2 * c->cap_seq;
  for (int s = 0; s < b->n_seqs; s++) {
    const batch_seq *q = &b->seqs[s];
    if ((int64_t)q->n_pages * pt < (int64_t)q->pos0 + q->n_new) return NS_ERANGE;
    for (int i = 0; i < stride; i++) {
      int32_t id = i < q->n_pages ? q->pages[i] : 0;
      if (id < 0 || id >= be->kv_pages) return NS_ERANGE;
      c->bt[s * stride + i] = id;
    }
    c->tok0[s] = q->tok0;
    c->n_new[s] = q->n_new;
    c->pos0[s] = q->pos0;
  }
  for (int t = 0; t < b->n_tokens; t++) {
    if (b->tokens[t] < 0 || b->tokens[t] >= be->cfg.vocab_size) return NS_ERANGE;
    const batch_seq *q = &b->seqs[b->seq_of[t]];
    int p = b->pos[t];
    c->slot[t] = q->pages[p / pt] * pt + p % pt;
  }
  c->bt_stride = stride;
  c->cur = b;
  c->st.steps++;
  c->st.tokens += (uint64_t)b->n_tokens;
  return 0;
}

static int cpu_step_end(backend_t *be, step_out_t *out) {
  impl(be)->cur = NULL;
  return 0;
}

static int cpu_stats(backend_t *be, backend_stats_t *st) {
  *st = impl(be)->st;
  return 0;
}

/* ---- layer ops ---------------------------------------------------------------------------- */

static float *f32(const tensor_t *t) {
  return (float *)t->data;
}

static int cpu_embed(backend_t *be, const batch_t *b, tensor_t *x) {
  if (x->shape[0] < b->n_tokens || x->shape[1] != be->cfg.hidden) return NS_EINVAL;
  return ref_embed(f32(x), be->cfg.hidden, f32(&be->w.embed), b->tokens, b->n_tokens,
                   be->cfg.hidden, be->cfg.vocab_size);
}

static int cpu_add_rmsnorm(backend_t *be, tensor_t *x, tensor_t *residual, const tensor_t *w,
                           int first) {
  int rows = (int)x->shape[0], dim = (int)x->shape[1];
  if (residual->shape[0] != rows || residual->shape[1] != dim || w->shape[0] != dim)
    return NS_EINVAL;
  ref_add_rmsnorm(f32(x), f32(residual), f32(x), f32(w), rows, dim, dim, be->cfg.rms_eps, first);
  return 0;
}

typedef struct mm_job {
  const tensor_t *x, *w, *bias;
  tensor_t *y;
  int T, N, K;
} mm_job;

static void mm_part(void *ctx, int i, int n) {
  mm_job *j = ctx;
  /* split output columns in multiples of 4 (the kernel's W row block) */
  int per = ((j->N + n - 1) / n + 3) & ~3;
  int n0 = i * per, n1 = n0 + per > j->N ? j->N : n0 + per;
  if (n0 >= n1) return;
  const float *bias = j->bias && j->bias->data ? f32(j->bias) + n0 : NULL;
  ref_matmul(f32(j->y) + n0, j->N, f32(j->x), j->K, f32(j->w) + (size_t)n0 * j->K, bias, j->T,
             n1 - n0, j->K);
}

static int cpu_matmul(backend_t *be, const tensor_t *x, const tensor_t *w, const tensor_t *bias,
                      tensor_t *y) {
  mm_job j = {x, w, bias, y, (int)x->shape[0], (int)w->shape[0], (int)w->shape[1]};
  if (x->shape[1] != j.K || y->shape[0] != j.T || y->shape[1] != j.N) return NS_EINVAL;
  if (bias && bias->data && bias->shape[0] != j.N) return NS_EINVAL;
  /* below ~64k multiply-adds a wake-up costs more than it saves */
  int n = (double)j.T * j.N * j.K < 65536.0 ? 1 : 0;
  be_pool_run(impl(be)->pool, mm_part, &j, n);
  return 0;
}

static void layer_cache(cpu_be *c, int layer, float **k, float **v) {
  const model_cfg *g = &c->base.cfg;
  size_t per = (size_t)c->base.kv_pages * c->base.kv_page_tokens * g->n_kv_heads * g->head_dim;
  *k = c->kv + (size_t)layer * 2 * per;
  *v = *k + per;
}

static int cpu_rope_kv_write(backend_t *be, const batch_t *b, tensor_t *qkv, int layer) {
  cpu_be *c = impl(be);
  const model_cfg *g = &be->cfg;
  int ld = (g->n_heads + 2 * g->n_kv_heads) * g->head_dim;
  if (c->cur != b || layer < 0 || layer >= g->n_layers || qkv->shape[1] != ld ||
      qkv->shape[0] < b->n_tokens)
    return NS_EINVAL;
  float *k, *v;
  layer_cache(c, layer, &k, &v);
  ref_rope_kv_write(f32(qkv), ld, b->n_tokens, b->pos, c->slot, c->inv_freq, g->n_heads,
                    g->n_kv_heads, g->head_dim, k, v);
  return 0;
}

typedef struct att_job {
  cpu_be *c;
  const batch_t *b;
  const tensor_t *qkv;
  tensor_t *out;
  int layer;
} att_job;

static void att_part(void *ctx, int i, int n) {
  att_job *j = ctx;
  cpu_be *c = j->c;
  const model_cfg *g = &c->base.cfg;
  int h0 = (int)((int64_t)g->n_heads * i / n), h1 = (int)((int64_t)g->n_heads * (i + 1) / n);
  float *k, *v;
  layer_cache(c, j->layer, &k, &v);
  int ldq = (g->n_heads + 2 * g->n_kv_heads) * g->head_dim;
  float scale = (float)(1.0 / sqrt((double)g->head_dim));
  ref_attention(f32(j->out), g->n_heads * g->head_dim, f32(j->qkv), ldq, j->b->n_seqs, c->tok0,
                c->n_new, c->pos0, c->bt, c->bt_stride, k, v, c->base.kv_page_tokens, g->n_heads,
                g->n_kv_heads, g->head_dim, scale, h0, h1);
}

static int cpu_attention(backend_t *be, const batch_t *b, const tensor_t *qkv, tensor_t *out,
                         int layer) {
  cpu_be *c = impl(be);
  const model_cfg *g = &be->cfg;
  if (c->cur != b || layer < 0 || layer >= g->n_layers || out->shape[0] < b->n_tokens ||
      out->shape[1] != g->n_heads * g->head_dim)
    return NS_EINVAL;
  att_job j = {c, b, qkv, out, layer};
  be_pool_run(c->pool, att_part, &j, g->n_heads);
  return 0;
}

static int cpu_swiglu(backend_t *be, const tensor_t *gate_up, tensor_t *out) {
  int I = (int)out->shape[1];
  if (gate_up->shape[1] != 2 * I || gate_up->shape[0] != out->shape[0]) return NS_EINVAL;
  ref_swiglu(f32(out), I, f32(gate_up), 2 * I, (int)out->shape[0], I);
  return 0;
}

static int cpu_gather_rows(backend_t *be, const batch_t *b, const tensor_t *src, tensor_t *dst) {
  int64_t dim = src->shape[1];
  if (dst->shape[1] != dim || dst->shape[0] < b->n_out) return NS_EINVAL;
  for (int i = 0; i < b->n_out; i++)
    memmove(f32(dst) + i * dim, f32(src) + b->out_rows[i] * dim, (size_t)dim * sizeof(float));
  return 0;
}

static int cpu_sample(backend_t *be, const batch_t *b, const tensor_t *logits, step_out_t *out) {
  cpu_be *c = impl(be);
  int V = be->cfg.vocab_size;
  if (logits->shape[1] != V || logits->shape[0] < b->n_out) return NS_EINVAL;
  for (int s = 0; s < b->n_seqs; s++) {
    const batch_seq *q = &b->seqs[s];
    if (!q->sample) continue;
    if (q->sp.n_logprobs > 0 && out->top_ids && q->sp.n_logprobs > out->n_top) return NS_EINVAL;
    float lp;
    int32_t *ti = out->top_ids ? out->top_ids + (size_t)s * out->n_top : NULL;
    float *tl = out->top_logprobs ? out->top_logprobs + (size_t)s * out->n_top : NULL;
    int rc = ref_sample(f32(logits) + (size_t)q->out_row * V, V, &q->sp, q->hist, q->n_prompt,
                        q->n_hist, q->step, c->samp_scratch, &out->ids[s], &lp, ti, tl);
    if (rc) return rc;
    if (out->logprob) out->logprob[s] = lp;
  }
  return 0;
}

/* ---- lifetime ------------------------------------------------------------------------------- */

static void cpu_destroy(backend_t *be) {
  cpu_be *c = impl(be);
  if (!c->parent) {
    free_weights(c);
    be_pool_destroy(c->pool);
    free(c->kv);
  }
  free(c->slot);
  free(c->bt);
  free(c->seqa);
  free(c);
}

/* A second lane: the same weights, cache, workers and sampling scratch (the CPU runs one
 * op at a time on the engine thread, so the lanes never run at once: a lane's step is done
 * when fwd_submit returns); its own per-step arrays. */
static int cpu_lane_create(backend_t *be, backend_t **out) {
  cpu_be *p = impl(be);
  *out = NULL;
  if (p->parent || !be->w.layers || !p->kv) return NS_EINVAL;
  cpu_be *c = calloc(1, sizeof *c);
  if (!c) return NS_ENOMEM;
  c->base = p->base;
  c->parent = p;
  c->pool = p->pool;
  c->inv_freq = p->inv_freq;
  c->samp_scratch = p->samp_scratch;
  c->kv = p->kv;
  *out = &c->base;
  return 0;
}

static int cpu_step_poll(backend_t *be) {
  (void)be;
  return 1;
}

static const backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .load_weights = cpu_load_weights,
    .kv_init = cpu_kv_init,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .to_host = cpu_to_host,
    .step_begin = cpu_step_begin,
    .embed = cpu_embed,
    .add_rmsnorm = cpu_add_rmsnorm,
    .matmul = cpu_matmul,
    .rope_kv_write = cpu_rope_kv_write,
    .attention = cpu_attention,
    .swiglu = cpu_swiglu,
    .gather_rows = cpu_gather_rows,
    .sample = cpu_sample,
    .step_end = cpu_step_end,
    .stats = cpu_stats,
    .lane_create = cpu_lane_create,
    .step_poll = cpu_step_poll,
};

int be_cpu_create(int n_threads, backend_t **out) {
  *out = NULL;
  cpu_be *c = calloc(1, sizeof *c);
  if (!c) return NS_ENOMEM;
  int rc = be_pool_create(n_threads, &c->pool);
  if (rc) {
    free(c);
    return rc;
  }
  c->base.ops = &cpu_ops;
  *out = &c->base;
  return 0;
}
