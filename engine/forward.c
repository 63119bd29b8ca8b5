/* forward.c — the Llama-family decoder forward over backend ops, one ragged batch per step;
 * the same code drives the CPU and CUDA backends. Entry point: fwd_step. */
#include "forward.h"

#include "kv.h"
#include "ns_err.h"

#include <stdlib.h>
#include <time.h>

enum { WS_X, WS_RES, WS_QKV, WS_ATT, WS_GU, WS_ACT, WS_XO, WS_RO, WS_LOGITS, WS_N };

struct fwd_t {
  backend_t *be;
  int max_tokens, max_out;
  tensor_t ws[WS_N];
};

void fwd_destroy(fwd_t *f) {
  if (!f) return;
  for (int i = 0; i < WS_N; i++)
    f->be->ops->free(f->be, &f->ws[i]);
  free(f);
}

int fwd_create(backend_t *be, int max_tokens, int max_out, fwd_t **out) {
  *out = NULL;
  const model_cfg *g = &be->cfg;
  if (max_tokens < 1 || max_out < 1 || !be->w.layers) return NS_EINVAL;
  fwd_t *f = calloc(1, sizeof *f);
  if (!f) return NS_ENOMEM;
  f->be = be;
  f->max_tokens = max_tokens;
  f->max_out = max_out;
  int64_t T = max_tokens, O = max_out, D = g->head_dim;
  int64_t cols[WS_N] = {
      [WS_X] = g->hidden,
      [WS_RES] = g->hidden,
      [WS_QKV] = (g->n_heads + 2 * g->n_kv_heads) * D,
      [WS_ATT] = g->n_heads * D,
      [WS_GU] = 2 * (int64_t)g->intermediate,
      [WS_ACT] = g->intermediate,
      [WS_XO] = g->hidden,
      [WS_RO] = g->hidden,
      [WS_LOGITS] = g->vocab_size,
  };
  for (int i = 0; i < WS_N; i++) {
    int64_t shape[2] = {i >= WS_XO ? O : T, cols[i]};
    int rc = be->ops->alloc(be, NS_F32, 2, shape, &f->ws[i]);
    if (rc) {
      fwd_destroy(f);
      return rc;
    }
  }
  *out = f;
  return 0;
}

backend_t *fwd_backend(const fwd_t *f) {
  return f->be;
}
int fwd_max_tokens(const fwd_t *f) {
  return f->max_tokens;
}

/* The first n rows of a workspace. */
static tensor_t rows(const tensor_t *t, int n) {
  tensor_t v = *t;
  v.shape[0] = n;
  return v;
}

#define TRY(call)                                                                                  \
  do {                                                                                             \
    if ((rc = (call))) goto end;                                                                   \
  } while (0)

/* The logits rows are the batch's rows, in order. */
static int out_rows_all(const batch_t *b) {
  if (b->n_out != b->n_tokens) return 0;
  for (int i = 0; i < b->n_out; i++)
    if (b->out_rows[i] != i) return 0;
  return 1;
}

/* Every op of a step over b after step_begin, through sample; step_end is the caller's. */
static int run_ops(fwd_t *f, const batch_t *b, step_out_t *out, tensor_t *logits) {
  backend_t *be = f->be;
  const backend_ops *op = be->ops;
  const be_weights *w = &be->w;
  int rc = 0, T = b->n_tokens;
  tensor_t x = rows(&f->ws[WS_X], T), res = rows(&f->ws[WS_RES], T);
  tensor_t qkv = rows(&f->ws[WS_QKV], T), att = rows(&f->ws[WS_ATT], T);
  tensor_t gu = rows(&f->ws[WS_GU], T), act = rows(&f->ws[WS_ACT], T);

  TRY(op->embed(be, b, &x));
  for (int l = 0; l < be->cfg.n_layers; l++) {
    const be_layer *L = &w->layers[l];
    TRY(op->add_rmsnorm(be, &x, &res, &L->attn_norm, l == 0));
    TRY(op->matmul(be, &x, &L->wqkv, &L->bqkv, &qkv));
    TRY(op->rope_kv_write(be, b, &qkv, l));
    TRY(op->attention(be, b, &qkv, &att, l));
    TRY(op->matmul(be, &att, &L->wo, NULL, &x));
    TRY(op->add_rmsnorm(be, &x, &res, &L->mlp_norm, 0));
    TRY(op->matmul(be, &x, &L->w_gate_up, NULL, &gu));
    TRY(op->swiglu(be, &gu, &act));
    TRY(op->matmul(be, &act, &L->w_down, NULL, &x));
  }
  if (b->n_out > 0) {
    /* the final norm and LM head run only for the rows whose logits are wanted: on copies of
     * those rows, or on x and res themselves where they are every row in order (a decode step
     * whose every sequence samples), which saves the copies' kernels at the end of the step */
    tensor_t xo = x, ro = res;
    tensor_t lg = rows(&f->ws[WS_LOGITS], b->n_out);
    if (!out_rows_all(b)) {
      xo = rows(&f->ws[WS_XO], b->n_out), ro = rows(&f->ws[WS_RO], b->n_out);
      TRY(op->gather_rows(be, b, &x, &xo));
      TRY(op->gather_rows(be, b, &res, &ro));
    }
    TRY(op->add_rmsnorm(be, &xo, &ro, &w->final_norm, 0));
    TRY(op->matmul(be, &xo, &w->lm_head, NULL, &lg));
    if (out) TRY(op->sample(be, b, &lg, out));
  }
  if (logits) *logits = rows(&f->ws[WS_LOGITS], b->n_out);
end:
  return rc;
}

/* step_begin and every op; after a failed op the step is ended here. */
static int submit(fwd_t *f, const batch_t *b, step_out_t *out, tensor_t *logits) {
  const backend_ops *op = f->be->ops;
  if (b->n_tokens > f->max_tokens || b->n_out > f->max_out) return NS_ERANGE;
  int rc = op->step_begin(f->be, b);
  if (rc) return rc;
  if ((rc = run_ops(f, b, out, logits))) op->step_end(f->be, out);
  return rc;
}

int fwd_step(fwd_t *f, const batch_t *b, step_out_t *out, tensor_t *logits) {
  int rc = submit(f, b, out, logits);
  return rc ? rc : f->be->ops->step_end(f->be, out);
}

int fwd_submit(fwd_t *f, const batch_t *b, step_out_t *out) {
  return submit(f, b, out, NULL);
}

int fwd_wait(fwd_t *f, step_out_t *out) {
  return f->be->ops->step_end(f->be, out);
}

int fwd_prepare_graphs(fwd_t *f, kv_t *kv, int *n, double *ms) {
  backend_t *be = f->be;
  int sizes[64], ns = be->ops->graph_sizes ? be->ops->graph_sizes(be, sizes, 64) : 0;
  int lens[8] = {0}, nl = be->ops->graph_lens ? be->ops->graph_lens(be, lens, 8) : 0;
  *n = 0;
  *ms = 0;
  if (ns <= 0) return 0;
  if (nl <= 0) nl = 1;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  batch_t b;
  be_batch_init(&b);
  int32_t *ids = calloc((size_t)f->max_out, sizeof *ids);
  int32_t *got = calloc((size_t)f->max_out, sizeof *got);
  int rc = !ids || !got ? NS_ENOMEM : 0;
  samp_params greedy = samp_params_default();
  greedy.temperature = 0.0f;
  /* each context class: sequences one token past the class before (its shortest), all on
   * the same pages (their keys are whatever the cache holds: only the launches matter) */
  for (int l = 0; l < nl && !rc; l++) {
    const int pos0 = l > 0 ? lens[l - 1] : 0;
    kv_seq page;
    kv_seq_init(&page);
    rc = kv_seq_reserve(kv, &page, pos0 + 1);
    for (int i = 0; i < ns && !rc; i++) {
      if (sizes[i] > f->max_out || sizes[i] > f->max_tokens) break;
      be_batch_reset(&b, 0);
      for (int s = 0; s < sizes[i] && !rc; s++) {
        batch_seq q = {.n_new = 1,
                       .pos0 = pos0,
                       .pages = page.pages,
                       .n_pages = page.n_pages,
                       .sample = 1,
                       .sp = greedy};
        rc = be_batch_add(&b, &q, &ids[s]);
      }
      step_out_t out = {.ids = got};
      for (int rep = 0; rep < 2 && !rc; rep++) /* eager, then captured */
        rc = fwd_step(f, &b, &out, NULL);
      if (!rc) (*n)++;
    }
    kv_seq_free(kv, &page);
  }
  be_batch_free(&b);
  free(ids);
  free(got);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  return rc;
}
