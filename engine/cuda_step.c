/* cuda_step.c — the CUDA backend's step bracket: step buffers (device + pinned mirror), the
 * batch checked, planned and uploaded in step_begin, sampling on the GPU, results copied
 * back in step_end. Entry points: cu_step_begin, cu_sample, cu_step_end. */
#include "cuda_int.h"

#include "ns_cuda.h"
#include "ns_err.h"
#include "ns_log.h"

#include <stdlib.h>
#include <string.h>

#define SAMP_ROWS 64        /* requests sampled per launch (scratch rows) */
#define HIST_MIN  (1 << 16) /* history ids the buffer holds at first */

void cu_step_bufs_free(cu_be *c) {
  cu_step_bufs *b = &c->sb;
  if (b->dev) mem_pool_free(c->pool, b->dev);
  if (b->host) mem_pool_free(c->pinned, b->host);
  if (b->part_blk) mem_pool_free(c->pool, b->part_blk);
  if (b->samp_blk) mem_pool_free(c->pool, b->samp_blk);
  b->dev = b->host = b->part_blk = b->samp_blk = NULL;
  b->part_o = b->part_ml = b->samp_v = NULL;
  b->attn_cnt = NULL;
  b->samp_cnt = NULL;
  b->samp_rows = 0;
}

static size_t up256(size_t v) {
  return (v + 255) / 256 * 256;
}

/* Capacities at least (tok, pages, hist); buffers are reallocated (contents lost) when they
 * grow. Before load_weights only the wanted capacities are noted. Between steps only. */
int cu_step_bufs_ensure(cu_be *c, int tok, int pages, int hist) {
  cu_step_bufs *b = &c->sb;
  const model_cfg *g = &c->base.cfg;
  int nt = tok > b->cap_tok ? tok : b->cap_tok;
  int np = pages > b->cap_pages ? pages : b->cap_pages;
  int nh = hist > b->cap_hist ? hist : b->cap_hist;
  if (nh < HIST_MIN) nh = HIST_MIN;
  if (nh > b->cap_hist && b->cap_hist && nh < 2 * b->cap_hist) nh = 2 * b->cap_hist;
  if (nt < 1) nt = 1;
  if (np < nt) np = nt;
  /* decode attention chunk states: one per K_ATTN_CHUNK keys of a slot (pages bound the keys) */
  int64_t nd64 = k_attn_max_dec(nt, (int64_t)np * c->base.kv_page_tokens) + 8;
  if (nd64 > (1 << 30)) return NS_ENOMEM;
  int nd = (int)nd64;
  if (b->dev && nt == b->cap_tok && np == b->cap_pages && nh == b->cap_hist && nd == b->cap_dec)
    return 0;
  if (!c->base.w.layers) { /* sized again by load_weights */
    b->cap_tok = nt;
    b->cap_pages = np;
    b->cap_hist = nh;
    return 0;
  }
  cu_step_bufs_free(c);
  cu_graphs_clear(c); /* the graphs hold the old addresses */
  size_t sz[SB_N] = {0};
  for (int i = SB_TOKENS; i <= SB_D_PART; i++)
    sz[i] = (size_t)nt * 4;
  sz[SB_PF] = (size_t)nt * sizeof(k_pf_item);
  sz[SB_SAMP] = (size_t)nt * sizeof(k_samp_req);
  sz[SB_SOUT] = (size_t)nt * sizeof(k_samp_out);
  sz[SB_PAGES] = (size_t)np * 4;
  sz[SB_HIST] = (size_t)nh * 4;
  size_t off = 0;
  for (int i = 0; i < SB_N; i++) {
    b->off[i] = off;
    off += up256(sz[i]);
  }
  /* the compact layout after it: token and slot arrays, requests, then the page list last
   * (a step copies up to its own pages' end) */
  int dr = nt < SB_DEC_ROWS ? nt : SB_DEC_ROWS;
  memcpy(b->off_dec, b->off, sizeof b->off);
  for (int i = SB_TOKENS; i <= SB_D_PART; i++) {
    b->off_dec[i] = off;
    off += up256((size_t)dr * 4);
  }
  b->off_dec[SB_PF] = b->off_dec[SB_SAMP] = off;
  off += up256((size_t)dr * sizeof(k_samp_req));
  b->off_dec[SB_PAGES] = off;
  off += up256(sz[SB_PAGES]);
  b->compact = 0;
  int rows = nt < SAMP_ROWS ? nt : SAMP_ROWS;
  size_t part = (size_t)nd * g->n_heads * (g->head_dim + 2) * sizeof(float);
  size_t cnt = (size_t)nt * g->n_kv_heads * sizeof(unsigned);
  size_t samp = (size_t)rows * g->vocab_size * (sizeof(float) + sizeof(uint32_t));
  int32_t *seqmap = realloc(c->samp_seq, (size_t)nt * sizeof *seqmap);
  if (!seqmap) return NS_ENOMEM;
  c->samp_seq = seqmap;
  int32_t *nn = realloc(c->nnew_pf, (size_t)nt * sizeof *nn);
  if (!nn) return NS_ENOMEM;
  c->nnew_pf = nn;
  int rc;
  if ((rc = mem_pool_alloc(c->pool, off, &b->dev)) ||
      (rc = mem_pool_alloc(c->pinned, off, &b->host)) ||
      (rc = mem_pool_alloc(c->pool, part + cnt, &b->part_blk)) ||
      (rc = mem_pool_alloc(c->pool, samp, &b->samp_blk))) {
    ns_log_error("cuda backend: step buffers for %d tokens do not fit (%s)", nt, ns_strerror(rc));
    cu_step_bufs_free(c);
    return rc;
  }
  b->part_o = b->part_blk;
  b->part_ml = b->part_o + (size_t)nd * g->n_heads * g->head_dim;
  b->attn_cnt = (unsigned *)((char *)b->part_blk + part);
  if (cudaMemsetAsync(b->attn_cnt, 0, cnt, c->st) != cudaSuccess) {
    ns_log_error("cuda backend: step buffers: %s", cudaGetErrorString(cudaGetLastError()));
    cu_step_bufs_free(c);
    return NS_ECUDA;
  }
  b->samp_v = b->samp_blk;
  b->samp_cnt = (uint32_t *)(b->samp_v + (size_t)rows * g->vocab_size);
  b->samp_rows = rows;
  b->cap_tok = nt;
  b->cap_dec = nd;
  b->cap_pages = np;
  b->cap_hist = nh;
  return 0;
}

static int penalized(const samp_params *p) {
  return p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f ||
         p->frequency_penalty != 0.0f;
}

/* Copy the first n bytes of step array i to the device. */
static int up(cu_be *c, int i, size_t n) {
  if (n == 0) return 0;
  NS_CUDA_CHECK(cudaMemcpyAsync(cu_sb(c, i, 1), cu_sb(c, i, 0), n, cudaMemcpyHostToDevice, c->st));
  return 0;
}

/* The full layout's uploads: the per-token and per-sequence arrays, cap_tok entries apart,
 * in one pitched copy of the first `rows` entries of each (no array of the step has more),
 * then the sampling requests and the page list. */
static int up_full(cu_be *c, int rows, int n_pg) {
  size_t pitch = c->sb.off[SB_POS] - c->sb.off[SB_TOKENS];
  NS_CUDA_CHECK(cudaMemcpy2DAsync(cu_sb(c, SB_TOKENS, 1), pitch, cu_sb(c, SB_TOKENS, 0), pitch,
                                  (size_t)rows * 4, SB_D_PART - SB_TOKENS + 1,
                                  cudaMemcpyHostToDevice, c->st));
  int rc = up(c, SB_SAMP, (size_t)c->n_samp * sizeof(k_samp_req));
  return rc ? rc : up(c, SB_PAGES, (size_t)n_pg * 4);
}

/* Runs of rows of one class (decode: a one-token sequence's row) over n rows; cls(i) the
 * class of row i. */
static int make_runs(cu_run *runs, int n, const batch_t *b, const int32_t *rows_of) {
  int nr = 0;
  for (int i = 0; i < n; i++) {
    int r = rows_of ? rows_of[i] : i;
    int d = b->seqs[b->seq_of[r]].n_new == 1;
    if (nr && runs[nr - 1].decode == d)
      runs[nr - 1].n++;
    else
      runs[nr++] = (cu_run){i, 1, d};
  }
  return nr;
}

static int step_begin_(cu_be *c, const batch_t *b) {
  backend_t *be = &c->base;
  if (c->parent) { /* a lane: the parent's cache as it is now (kv_init may have moved it) */
    c->kvl = c->parent->kvl;
    be->kv_pages = c->parent->base.kv_pages;
    be->kv_page_tokens = c->parent->base.kv_page_tokens;
    c->dec_max_len = c->parent->dec_max_len;
  }
  if (!c->kvl.slabs || b->n_tokens < 1 || b->n_seqs < 1) return NS_EINVAL;
  const int pt = be->kv_page_tokens;
  /* a decode step: every sequence one new token, and samples it (so the logits rows are the
   * batch's rows, in order, and the forward's final norm runs on them in place: forward.c);
   * padded to its bucket when it has a graph. A step where some one-token sequence does not
   * sample (a prefill chunk of one token) runs as any other batch. */
  int decode = !b->all_logits && b->n_tokens == b->n_seqs && b->n_out == b->n_tokens;
  int bucket = decode ? cu_graph_bucket(c, b->n_seqs) : 0;
  if (bucket > c->ws_rows_min) bucket = 0; /* a workspace too small for the padding */
  int rows = bucket > b->n_tokens ? bucket : b->n_tokens;
  int need_pages = 0, need_hist = 0;
  for (int s = 0; s < b->n_seqs; s++) {
    const batch_seq *q = &b->seqs[s];
    if ((int64_t)q->n_pages * pt < (int64_t)q->pos0 + q->n_new) return NS_ERANGE;
    need_pages += (q->pos0 + q->n_new + pt - 1) / pt;
    if (q->sample && q->hist && penalized(&q->sp)) need_hist += q->n_hist;
    if (q->sample) need_hist += 2 * q->sp.n_bias;
  }
  int rc = cu_step_bufs_ensure(c, rows, need_pages, need_hist);
  if (rc) return rc;
  /* a decode step's rows, sequences, slots and requests are all `rows`: the compact layout
   * where they fit (a function of the bucket alone, so a graph replays on the layout it was
   * captured with) */
  c->sb.compact = decode && rows <= SB_DEC_ROWS; /* rows <= cap_tok: the layout holds them */
  if (b->n_tokens > c->cap_runs) {
    cu_run *rt = realloc(c->runs_tok, (size_t)b->n_tokens * sizeof *rt);
    if (rt) c->runs_tok = rt;
    cu_run *ro = realloc(c->runs_out, (size_t)b->n_tokens * sizeof *ro);
    if (ro) c->runs_out = ro;
    if (!rt || !ro) return NS_ENOMEM;
    c->cap_runs = b->n_tokens;
  }
  int32_t *tok = cu_sb(c, SB_TOKENS, 0), *pos = cu_sb(c, SB_POS, 0), *slot = cu_sb(c, SB_SLOT, 0);
  int32_t *tok0 = cu_sb(c, SB_TOK0, 0), *n_new = cu_sb(c, SB_N_NEW, 0);
  int32_t *pos0 = cu_sb(c, SB_POS0, 0), *pt_off = cu_sb(c, SB_PT_OFF, 0);
  int32_t *pages = cu_sb(c, SB_PAGES, 0), *hist = cu_sb(c, SB_HIST, 0);
  int32_t *out_rows = cu_sb(c, SB_OUT_ROWS, 0);
  k_samp_req *req = cu_sb(c, SB_SAMP, 0);
  int32_t *d_tok0 = cu_sb(c, SB_D_TOK0, 0), *d_pos0 = cu_sb(c, SB_D_POS0, 0);
  int32_t *d_pt_off = cu_sb(c, SB_D_PT_OFF, 0), *d_part = cu_sb(c, SB_D_PART, 0);
  int n_pg = 0, n_hist = 0, nds = 0, n_part = 0, dlen = 0;
  c->n_samp = 0;
  for (int s = 0; s < b->n_seqs; s++) {
    const batch_seq *q = &b->seqs[s];
    int np = (q->pos0 + q->n_new + pt - 1) / pt;
    for (int i = 0; i < np; i++) {
      if (q->pages[i] < 0 || q->pages[i] >= be->kv_pages) return NS_ERANGE;
      pages[n_pg + i] = q->pages[i];
    }
    tok0[s] = q->tok0;
    n_new[s] = q->n_new;
    pos0[s] = q->pos0;
    pt_off[s] = n_pg;
    c->nnew_pf[s] = q->n_new == 1 ? 0 : q->n_new; /* decode rows: k_attention_decode */
    if (q->n_new == 1) {
      d_tok0[nds] = q->tok0;
      d_pos0[nds] = q->pos0;
      d_pt_off[nds] = n_pg;
      d_part[nds] = n_part;
      n_part += (q->pos0 + K_ATTN_CHUNK) / K_ATTN_CHUNK;
      if (q->pos0 + 1 > dlen) dlen = q->pos0 + 1;
      nds++;
    }
    n_pg += np;
    if (!q->sample) continue;
    int h0 = n_hist, nh = 0;
    if (q->hist && penalized(&q->sp)) {
      for (int i = 0; i < q->n_hist; i++) {
        if (q->hist[i] < 0 || q->hist[i] >= be->cfg.vocab_size) return NS_ERANGE;
        hist[n_hist + i] = q->hist[i];
      }
      nh = q->n_hist;
      n_hist += nh;
    }
    int b0 = n_hist; /* the logit bias: (id, float bits) pairs after the history */
    for (int i = 0; i < q->sp.n_bias; i++) {
      const samp_bias *e = &q->sp.bias[i];
      if (e->id < 0 || e->id >= be->cfg.vocab_size) return NS_ERANGE;
      hist[n_hist++] = e->id;
      memcpy(&hist[n_hist++], &e->bias, 4);
    }
    c->samp_seq[c->n_samp] = s;
    k_samp_req_init(&req[c->n_samp++], q->out_row, &q->sp, q->step, h0, nh, q->n_prompt, b0);
  }
  for (int t = 0; t < b->n_tokens; t++) {
    if (b->tokens[t] < 0 || b->tokens[t] >= be->cfg.vocab_size) return NS_ERANGE;
    const batch_seq *q = &b->seqs[b->seq_of[t]];
    int p = b->pos[t];
    tok[t] = b->tokens[t];
    pos[t] = p;
    slot[t] = q->pages[p / pt] * pt + p % pt;
  }
  memcpy(out_rows, b->out_rows, (size_t)b->n_out * 4);
  if (rows > b->n_tokens) {
    /* padding rows: token 0 at position 0, no cache slot, an empty attention slot, a greedy
     * draw from their own logits row that nobody reads */
    samp_params greedy = samp_params_default();
    greedy.temperature = 0.0f;
    for (int t = b->n_tokens; t < rows; t++) {
      tok[t] = pos[t] = 0;
      slot[t] = -1;
      tok0[t] = d_tok0[t] = t;
      n_new[t] = 1;
      pos0[t] = d_pos0[t] = -1;
      pt_off[t] = d_pt_off[t] = d_part[t] = 0;
      out_rows[t] = t;
      c->samp_seq[c->n_samp] = -1;
      k_samp_req_init(&req[c->n_samp++], t, &greedy, 0, 0, 0, 0, 0);
    }
  }
  if (dlen > c->dec_max_len) return NS_ERANGE; /* longer than the backend covers */
  c->gcls = bucket ? cu_graph_class(c, dlen, &c->glen) : 0;
  c->n_dslots = rows > b->n_tokens ? rows : nds;
  c->dslots_len = dlen;
  c->decode = decode;
  c->rows = rows;
  c->bucket = bucket;
  c->n_runs_tok = make_runs(c->runs_tok, b->n_tokens, b, NULL);
  c->n_runs_out = make_runs(c->runs_out, b->n_out, b, b->out_rows);
  if (rows > b->n_tokens) c->runs_tok[0].n = c->runs_out[0].n = rows; /* one decode run */
  c->n_pf = 0;
  if (!decode) { /* the prefill rows' work items */
    rc = k_attn_plan(b->n_seqs, c->nnew_pf, be->cfg.n_heads, be->cfg.n_kv_heads, cu_sb(c, SB_PF, 0),
                     c->sb.cap_tok, &c->n_pf);
    if (rc) return rc;
  }
  if ((rc = cu_timing_start(c))) return rc;
  if (c->sb.compact) /* one copy: arrays, requests and pages end to end */
    rc = up(c, SB_TOKENS, c->sb.off_dec[SB_PAGES] + (size_t)n_pg * 4 - c->sb.off_dec[SB_TOKENS]);
  else
    rc = up_full(c, rows, n_pg);
  if (rc || (rc = up(c, SB_HIST, (size_t)n_hist * 4))) return rc;
  if (!decode && (rc = up(c, SB_PF, (size_t)c->n_pf * sizeof(k_pf_item)))) return rc;
  return 0;
}

int cu_step_begin(backend_t *be, const batch_t *b) {
  cu_be *c = cu_impl(be);
  c->cur = NULL;
  c->sampled = 0;
  c->step_failed = 0;
  c->mode = CU_EAGER;
  c->decode = c->bucket = c->gcls = c->glen = 0;
  c->lazy_y = NULL; /* a step's lazy GEMM outputs are its own */
  c->ps.on = 0;
  c->pr.on = 0;
  c->pe.on = 0;
  c->pg.on = 0;
  if (c->dead) return NS_ECUDA;
  int rc = step_begin_(c, b);
  if (rc) return cu_done(c, rc);
  c->cur = b;
  c->stats.steps++;
  c->stats.tokens += (uint64_t)b->n_tokens;
  return 0;
}

int cu_sample(backend_t *be, const batch_t *b, const tensor_t *logits, step_out_t *out) {
  cu_be *c = cu_impl(be);
  int V = be->cfg.vocab_size;
  if (c->cur != b || logits->dtype != NS_F32 || !logits->data || logits->shape[1] != V ||
      logits->shape[0] < b->n_out)
    return NS_EINVAL;
  for (int s = 0; s < b->n_seqs; s++) {
    const batch_seq *q = &b->seqs[s];
    if (q->sample && q->sp.n_logprobs > 0 && out->top_ids && q->sp.n_logprobs > out->n_top)
      return NS_EINVAL;
  }
  if (c->n_samp == 0) return 0;
  if (c->mode == CU_REPLAY) { /* in the graph */
    c->sampled = 1;
    return 0;
  }
  k_samp_out *od = cu_sb(c, SB_SOUT, 1);
  int rc = k_sample(logits->data, V, V, cu_sb(c, SB_SAMP, 1), c->n_samp, cu_sb(c, SB_HIST, 1),
                    c->sb.samp_v, c->sb.samp_cnt, c->sb.samp_rows, od, c->st);
  if (rc) return cu_done(c, rc);
  if (cudaMemcpyAsync(cu_sb(c, SB_SOUT, 0), od, (size_t)c->n_samp * sizeof(k_samp_out),
                      cudaMemcpyDeviceToHost, c->st) != cudaSuccess) {
    (void)cudaGetLastError();
    return cu_done(c, NS_ECUDA);
  }
  c->sampled = 1;
  return 0;
}

int cu_step_end(backend_t *be, step_out_t *out) {
  cu_be *c = cu_impl(be);
  const batch_t *b = c->cur;
  c->cur = NULL;
  if (c->dead) return NS_ECUDA;
  int rc = 0;
  if (b) {
    /* a failed op left a capture open: close it; else launch the captured or kept graph */
    if (c->step_failed) {
      cu_graph_abort(c);
      c->mode = CU_EAGER;
    }
    if ((rc = cu_graph_finish(c)) || (rc = cu_timing_end(c))) {
      c->mode = CU_EAGER;
      cudaStreamSynchronize(c->st);
      return cu_done(c, rc);
    }
  }
  cudaError_t e = cudaStreamSynchronize(c->st);
  if (e != cudaSuccess) {
    ns_log_error("cuda backend: step failed: %s", cudaGetErrorString(e));
    return cu_done(c, NS_ECUDA);
  }
  if (b) cu_timing_done(c);
  if (!c->sampled || !out || !b) return 0;
  c->sampled = 0;
  const k_samp_out *r = cu_sb(c, SB_SOUT, 0);
  for (int i = 0; i < c->n_samp; i++) {
    int s = c->samp_seq[i];
    if (s < 0) continue; /* a padding row */
    if (r[i].status) {
      rc = rc ? rc : r[i].status;
      continue;
    }
    out->ids[s] = r[i].id;
    if (out->logprob) out->logprob[s] = r[i].logprob;
    if (out->top_ids && out->top_logprobs && r[i].n_top > 0) {
      memcpy(out->top_ids + (size_t)s * out->n_top, r[i].top_ids, (size_t)r[i].n_top * 4);
      memcpy(out->top_logprobs + (size_t)s * out->n_top, r[i].top_lp, (size_t)r[i].n_top * 4);
    }
  }
  return rc;
}
