/* engine_load.c — what eng_start builds before the engine thread runs: the model's weights
 * on the backend, the tokenizer, the KV cache (engine.kv_cache_bytes), the forward's
 * workspaces and the scheduler. Entry point: eng__load. */
#include "eng_int.h"

#include "backend_select.h"
#include "ns_err.h"
#include "ns_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The folder's last path component ("models/tiny/" -> "tiny"). */
static void base_name(const char *dir, char *out, size_t outlen) {
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/')
    n--;
  size_t b = n;
  while (b > 0 && dir[b - 1] != '/')
    b--;
  size_t len = n - b < outlen - 1 ? n - b : outlen - 1;
  memcpy(out, dir + b, len);
  out[len] = '\0';
}

/* Pages from engine.kv_cache_bytes (0: auto, see be_kv_auto_bytes). */
static int kv_pages(eng_t *e, const model_cfg *g, char *err, size_t errlen) {
  const cfg_t *c = e->cfg;
  int pt = c->engine.kv_page_tokens;
  int64_t per_page = (int64_t)g->n_layers * 2 * pt * g->n_kv_heads * g->head_dim *
                     (int64_t)be_kv_elem_bytes(e->be);
  int64_t bytes = c->engine.kv_cache_bytes;
  if (bytes == 0) {
    int64_t seq_pages = ((int64_t)e->max_context + pt - 1) / pt;
    bytes = be_kv_auto_bytes(e->be, (int64_t)e->max_batch * seq_pages * per_page);
  }
  int64_t pages = bytes / per_page;
  if (pages > (1 << 30)) pages = 1 << 30;
  if (pages < 1) {
    snprintf(err, errlen,
             "engine.kv_cache_bytes: %lld bytes hold no KV page of model %s (%lld bytes each)",
             (long long)bytes, c->engine.model, (long long)per_page);
    return NS_EINVAL;
  }
  e->pages_total = (int)pages;
  e->page_tokens = pt;
  /* A cache that cannot hold one whole-context sequence serves a shorter context, so that
   * what /v1/models advertises (and chat's default max_tokens, the rest of it) is what a
   * request can have: llama.cpp's server sizes its context from its cache the same way. */
  if (pages * pt < e->max_context) {
    ns_log_warn("engine.kv_cache_bytes: the KV cache holds %lld tokens, fewer than the context "
                "(%d); the served context is %lld tokens",
                (long long)pages * pt, e->max_context, (long long)pages * pt);
    e->max_context = (int)(pages * pt);
  }
  ns_log_info("KV cache: %d pages of %d tokens (%.1f MiB, %lld bytes per page) on %s; "
              "%lld tokens in all, max context %d",
              e->pages_total, pt, (double)pages * (double)per_page / 1048576.0, (long long)per_page,
              e->be_name, (long long)pages * pt, e->max_context);
  return 0;
}

/* A step's host results for up to n sequences. */
static int out_alloc(step_out_t *o, int n) {
  size_t nb = (size_t)n;
  o->n_top = SAMP_MAX_LOGPROBS;
  o->ids = malloc(nb * sizeof *o->ids);
  o->logprob = malloc(nb * sizeof *o->logprob);
  o->top_ids = malloc(nb * SAMP_MAX_LOGPROBS * sizeof *o->top_ids);
  o->top_logprobs = malloc(nb * SAMP_MAX_LOGPROBS * sizeof *o->top_logprobs);
  return o->ids && o->logprob && o->top_ids && o->top_logprobs ? 0 : NS_ENOMEM;
}

static void out_free(step_out_t *o) {
  free(o->ids);
  free(o->logprob);
  free(o->top_ids);
  free(o->top_logprobs);
  memset(o, 0, sizeof *o);
}

int eng__load(eng_t *e, eng_be_factory factory, char *err, size_t errlen) {
  const cfg_t *c = e->cfg;
  const char *dir = c->engine.model;
  char why[512];
  model_t *m = NULL;
  int rc = model_load(dir, &m, why, sizeof why);
  if (rc) {
    snprintf(err, errlen, "model %s: %s", dir, why);
    return rc;
  }
  if ((rc = tok_load_dir(dir, &e->tok, why, sizeof why))) {
    snprintf(err, errlen, "model %s: tokenizer: %s", dir, why);
    goto out;
  }
  if ((rc = factory(c, m, &e->be, err, errlen))) goto out;
  snprintf(e->be_name, sizeof e->be_name, "%s", e->be->ops->name);
  if ((rc = e->be->ops->load_weights(e->be, m))) {
    snprintf(err, errlen, "backend %s: loading the weights of %s: %s", e->be_name, dir,
             ns_strerror(rc));
    goto out;
  }
  model_free(m); /* the backend holds its own copy */
  m = NULL;

  const model_cfg *g = &e->be->cfg;
  int ctx = g->max_pos;
  if (c->engine.max_seq_len > 0 && (ctx <= 0 || c->engine.max_seq_len < ctx))
    ctx = c->engine.max_seq_len;
  if (ctx < 2) {
    snprintf(err, errlen,
             "model %s: no usable context length (max_position_embeddings %d, "
             "engine.max_seq_len %d)",
             dir, g->max_pos, c->engine.max_seq_len);
    rc = NS_EINVAL;
    goto out;
  }
  e->max_context = ctx;
  e->vocab = g->vocab_size;
  e->tok_vocab = tok_vocab_size(e->tok);
  e->n_eos = g->n_eos;
  memcpy(e->eos, g->eos_ids, sizeof e->eos);
  base_name(dir, e->model_name, sizeof e->model_name);
  /* every running sequence needs a row each step */
  e->max_rows = c->engine.max_batch_tokens;
  e->max_batch = c->engine.max_batch < e->max_rows ? c->engine.max_batch : e->max_rows;
  if (e->max_batch < c->engine.max_batch)
    ns_log_info("engine.max_batch %d exceeds engine.max_batch_tokens: %d sequences run at most",
                c->engine.max_batch, e->max_batch);

  if ((rc = kv_pages(e, g, err, errlen))) goto out;
  if ((rc = e->be->ops->kv_init(e->be, e->pages_total, e->page_tokens))) {
    snprintf(err, errlen, "backend %s: KV cache of %d pages: %s", e->be_name, e->pages_total,
             ns_strerror(rc));
    goto out;
  }
  if ((rc = kv_create(e->pages_total, e->page_tokens, &e->kv))) {
    snprintf(err, errlen, "KV cache manager: %s", ns_strerror(rc));
    goto out;
  }
  const backend_ops *op = e->be->ops;
  int split = c->engine.prefill_stream && op->lane_create && op->step_poll;
  if (c->engine.prefill_stream && !split)
    ns_log_info("engine.prefill_stream: backend %s has one lane; prompt chunks share the "
                "decode steps",
                e->be_name);
  /* split: decode steps of at most max_batch rows here, prompt chunks on the lane */
  int dec_rows = split ? e->max_batch : e->max_rows;
  if ((rc = fwd_create(e->be, dec_rows, e->max_batch, &e->fwd))) {
    snprintf(err, errlen, "backend %s: workspaces for %d-token steps: %s", e->be_name, dec_rows,
             ns_strerror(rc));
    goto out;
  }
  if (split) {
    if ((rc = op->lane_create(e->be, &e->lane)) ||
        (rc = fwd_create(e->lane, e->max_rows, e->max_batch, &e->pf_fwd))) {
      snprintf(err, errlen, "backend %s: a prefill lane with %d-token steps: %s", e->be_name,
               e->max_rows, ns_strerror(rc));
      goto out;
    }
    ns_log_info("engine: prompt chunks of up to %d tokens on a second, low-priority lane",
                e->max_rows);
  }
  int n_graphs;
  double graph_ms;
  if ((rc = fwd_prepare_graphs(e->fwd, e->kv, &n_graphs, &graph_ms))) {
    snprintf(err, errlen, "backend %s: capturing the decode step graphs: %s", e->be_name,
             ns_strerror(rc));
    goto out;
  }
  if (n_graphs > 0) {
    backend_stats_t bs = {0};
    e->be->ops->stats(e->be, &bs);
    ns_log_info("decode step graphs: %d (batch sizes by context classes) captured in %.0f ms, "
                "%.1f MiB of device memory",
                n_graphs, graph_ms, (double)bs.graph_bytes / 1048576.0);
  }
  if ((rc = sched_create(e->kv, e->max_batch, e->max_rows, &e->sched))) {
    snprintf(err, errlen, "scheduler: %s", ns_strerror(rc));
    goto out;
  }
  sched_set_admit_growth(e->sched, e->cfg->scheduler.admit_growth);
  if ((rc = out_alloc(&e->out, e->max_batch)) ||
      (e->lane && (rc = out_alloc(&e->pf_out, e->max_batch))))
    snprintf(err, errlen, "out of host memory");
out:
  model_free(m);
  return rc;
}

void eng__unload(eng_t *e) {
  /* a prefill step in flight: its pages go back to the cache once the lane is done */
  if (e->lane && e->sched && sched_prefill_in_flight(e->sched)) fwd_wait(e->pf_fwd, &e->pf_out);
  sched_destroy(e->sched);
  fwd_destroy(e->pf_fwd);
  be_destroy(e->lane);
  fwd_destroy(e->fwd);
  kv_destroy(e->kv);
  be_destroy(e->be);
  tok_free(e->tok);
  out_free(&e->out);
  out_free(&e->pf_out);
  e->sched = NULL;
  e->pf_fwd = NULL;
  e->lane = NULL;
  e->fwd = NULL;
  e->kv = NULL;
  e->be = NULL;
  e->tok = NULL;
}
