/* engine_step.c — one engine step (plan, forward, sampled tokens) and a request's output:
 * EOS, incremental detokenization, stop strings, max_tokens, events. Entry point: eng__step
 * (engine thread); eng__seq_new builds a request's record on the caller's thread. */
#include "eng_int.h"

#include "ns_err.h"
#include "ns_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a request's record ---------------------------------------------------------------- */

int eng__seq_new(eng_t *e, eng_req *req, eng_seq **out) {
  *out = NULL;
  eng_seq *q = calloc(1, sizeof *q);
  if (!q) return NS_ENOMEM;
  q->req = req;
  q->max_tokens = req->max_tokens;
  q->s.n_prompt = req->n_prompt;
  q->s.max_new = req->max_tokens;
  q->s.sp = req->sp;
  q->s.hist = malloc((size_t)(req->n_prompt + req->max_tokens) * sizeof *q->s.hist);
  q->final = calloc(1, sizeof *q->final);
  int rc = NS_ENOMEM;
  if (!q->s.hist || !q->final) goto fail;
  q->final->ev.stop_idx = -1;
  q->final->ev.stop_id = -1;
  memcpy(q->s.hist, req->prompt, (size_t)req->n_prompt * sizeof *q->s.hist);
  if ((rc = tok_stream_new(e->tok, 1, &q->ts))) goto fail;
  if ((rc = eng_stop_create((const char *const *)req->stop, req->n_stop, &q->stop))) goto fail;
  *out = q;
  return 0;
fail:
  q->req = NULL; /* the caller frees req */
  eng__seq_free(q);
  return rc;
}

void eng__seq_free(eng_seq *q) {
  if (!q) return;
  eng_req_free(q->req);
  tok_stream_free(q->ts);
  eng_stop_destroy(q->stop);
  free(q->s.hist);
  free(q->text);
  free(q->ids);
  free(q->top_ids);
  free(q->lp);
  free(q->top_lp);
  free(q->final);
  free(q);
}

/* ---- output waiting to be sent ------------------------------------------------------------ */

static int text_add(eng_seq *q, const char *t, size_t n) {
  if (n == 0) return 0;
  if (q->text_len + n + 1 > q->text_cap) {
    size_t cap = q->text_cap ? q->text_cap : 64;
    while (cap < q->text_len + n + 1)
      cap *= 2;
    char *p = realloc(q->text, cap);
    if (!p) return NS_ENOMEM;
    q->text = p;
    q->text_cap = cap;
  }
  memcpy(q->text + q->text_len, t, n);
  q->text_len += n;
  return 0;
}

static int grow(void **p, size_t elem, int cap) {
  void *n = realloc(*p, (size_t)cap * elem);
  if (!n) return NS_ENOMEM;
  *p = n;
  return 0;
}

static int id_add(const step_out_t *o, eng_seq *q, int k) {
  int nt = q->s.sp.n_logprobs;
  if (q->n_out == q->cap_out) {
    int cap = q->cap_out ? 2 * q->cap_out : 8;
    if (grow((void **)&q->ids, sizeof *q->ids, cap) || grow((void **)&q->lp, sizeof *q->lp, cap))
      return NS_ENOMEM;
    if (nt > 0 && (grow((void **)&q->top_ids, sizeof *q->top_ids * (size_t)nt, cap) ||
                   grow((void **)&q->top_lp, sizeof *q->top_lp * (size_t)nt, cap)))
      return NS_ENOMEM;
    q->cap_out = cap;
  }
  int i = q->n_out++;
  q->ids[i] = o->ids[k];
  q->lp[i] = o->logprob[k];
  if (nt > 0) {
    memcpy(q->top_ids + (size_t)i * nt, o->top_ids + (size_t)k * o->n_top,
           (size_t)nt * sizeof *q->top_ids);
    memcpy(q->top_lp + (size_t)i * nt, o->top_logprobs + (size_t)k * o->n_top,
           (size_t)nt * sizeof *q->top_lp);
  }
  return 0;
}

/* Text through the stop matcher; a match sets q->stopped and cuts the text there. */
static int feed_text(eng_seq *q, const char *t, size_t n) {
  const char *emit;
  size_t len;
  int matched = 0, idx = -1;
  int rc = eng_stop_feed(q->stop, t, n, &emit, &len, &matched, &idx);
  if (rc) return rc;
  if ((rc = text_add(q, emit, len))) return rc;
  if (matched) q->stopped = 1, q->final->ev.stop_idx = idx;
  return 0;
}

/* End of the sequence: what the detokenizer and the matcher held back. */
static int flush_text(eng_seq *q) {
  if (q->stopped) return 0;
  const char *t;
  size_t n;
  int rc = tok_stream_flush(q->ts, &t, &n);
  if (rc || (rc = feed_text(q, t, n))) return rc;
  if (q->stopped) return 0;
  eng_stop_flush(q->stop, &t, &n);
  return text_add(q, t, n);
}

/* ---- events ---------------------------------------------------------------------------------- */

void eng__emit(eng_t *e, eng_evrec *r) {
  r->next = NULL;
  r->ev.step = e->steps;
  if (e->out_tail)
    e->out_tail->next = r;
  else
    e->out_head = r;
  e->out_tail = r;
}

/* EV_TOKENS with everything waiting in q's output (one allocation: record, arrays, text). */
static int emit_tokens(eng_t *e, eng_seq *q) {
  int n = q->n_out, nt = q->s.sp.n_logprobs > 0 ? q->s.sp.n_logprobs : 0;
  size_t a = (size_t)n * 4, at = (size_t)n * (size_t)nt * 4;
  eng_evrec *r = malloc(sizeof *r + 2 * a + 2 * at + q->text_len + 1);
  if (!r) return NS_ENOMEM;
  memset(r, 0, sizeof *r);
  char *p = (char *)(r + 1);
  eng_event *ev = &r->ev;
  ev->kind = EV_TOKENS;
  ev->req_id = q->req->id;
  ev->n_ids = n;
  ev->n_top = nt;
  if (n > 0) { /* no ids yet (EOS first): q->ids may still be NULL */
    memcpy(p, q->ids, a);
    memcpy(p + a, q->lp, a);
  }
  ev->ids = (const int32_t *)p;
  ev->logprobs = (const float *)(p + a);
  p += 2 * a;
  if (nt > 0) {
    memcpy(p, q->top_ids, at);
    ev->top_ids = (const int32_t *)p;
    memcpy(p + at, q->top_lp, at);
    ev->top_logprobs = (const float *)(p + at);
  }
  p += 2 * at;
  if (q->text_len) memcpy(p, q->text, q->text_len);
  p[q->text_len] = '\0';
  ev->text = p;
  ev->text_len = q->text_len;
  eng__emit(e, r);
  q->n_out = 0;
  q->text_len = 0;
  return 0;
}

static void final_event(eng_t *e, eng_seq *q, eng_ev_kind kind) {
  eng_evrec *r = q->final;
  q->final = NULL;
  r->ev.kind = kind;
  r->ev.req_id = q->req->id;
  r->ev.prompt_tokens = q->s.n_prompt;
  r->ev.completion_tokens = q->s.n_gen;
  double now = eng_now();
  r->ev.queue_s = (q->t_admit > 0 ? q->t_admit : now) - q->t_submit;
  r->ev.ttft_s = q->t_first > 0 ? q->t_first - q->t_submit : 0;
  eng__emit(e, r);
  sched_remove(e->sched, &q->s);
  eng__seq_free(q);
}

void eng__fail(eng_t *e, eng_seq *q, int err, const char *fmt, ...) {
  eng_evrec *r = q->final;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
  r->ev.err = err;
  r->ev.msg = r->msg;
  q->req->state = ENG_FAILED;
  ns_logr(NS_LOG_DEBUG, q->req->id, "request failed: %s (%s)", r->msg, ns_strerror(err));
  final_event(e, q, EV_ERROR);
}

void eng__finish(eng_t *e, eng_seq *q, eng_fin fin) {
  if (fin != ENG_FIN_CANCELLED) {
    int rc = flush_text(q);
    if (q->stopped) fin = ENG_FIN_STOP; /* a stop string completed by the held-back text */
    if (rc == 0 && (!q->req->stream || q->n_out > 0 || q->text_len > 0) &&
        (rc = emit_tokens(e, q)) == 0) /* not streaming: the one EV_TOKENS */
      e->out_tail->ev.last = 1;
    if (rc) {
      eng__fail(e, q, rc, "out of host memory for the output");
      return;
    }
  }
  q->final->ev.finish = fin;
  if (fin != ENG_FIN_STOP) q->final->ev.stop_idx = q->final->ev.stop_id = -1;
  q->req->state = fin == ENG_FIN_CANCELLED ? ENG_CANCELLED : ENG_FINISHED;
  final_event(e, q, EV_DONE);
}

/* ---- a sampled token ---------------------------------------------------------------------- */

static int is_eos(const eng_t *e, int32_t id) {
  for (int i = 0; i < e->n_eos; i++)
    if (e->eos[i] == id) return 1;
  return 0;
}

static int is_stop_id(const eng_req *r, int32_t id) {
  for (int i = 0; i < r->n_stop_ids; i++)
    if (r->stop_ids[i] == id) return 1;
  return 0;
}

/* Batch sequence k of a step sampled o->ids[k] for q. */
static void on_token(eng_t *e, const step_out_t *o, eng_seq *q, int k, double now) {
  int32_t id = o->ids[k];
  if (q->t_first == 0) q->t_first = now;
  q->s.hist[q->s.n_prompt + q->s.n_gen++] = id;
  int rc = id_add(o, q, k);
  int stop_id = is_stop_id(q->req, id);
  if (stop_id || (!q->req->ignore_eos && is_eos(e, id))) {
    /* counted and given its logprob, with no text, as vLLM and OpenAI do */
    if (rc) {
      eng__fail(e, q, rc, "out of host memory for the output");
    } else {
      if (stop_id) q->final->ev.stop_id = id;
      eng__finish(e, q, ENG_FIN_STOP);
    }
    return;
  }
  /* ids past the tokenizer's vocabulary (padding rows of the embedding) have no text,
   * as in HF's decode */
  if (rc == 0 && !q->stopped && id < e->tok_vocab) {
    const char *t;
    size_t n;
    if ((rc = tok_stream_push(q->ts, id, &t, &n)) == 0) rc = feed_text(q, t, n);
  }
  if (rc) {
    eng__fail(e, q, rc, "detokenizing token %d: %s", id, ns_strerror(rc));
    return;
  }
  if (q->stopped)
    eng__finish(e, q, ENG_FIN_STOP);
  else if (q->s.n_gen == q->max_tokens)
    eng__finish(e, q, ENG_FIN_LENGTH);
  else if (q->req->stream && (rc = emit_tokens(e, q)))
    eng__fail(e, q, rc, "out of host memory for the output");
}

/* ---- the step -------------------------------------------------------------------------------- */

/* The step of batch b (owner[k]: its sequences; NULL for one removed meanwhile) failed
 * with rc: fail its requests. Returns rc when the backend is lost, else 1. */
static int step_failed(eng_t *e, backend_t *be, const batch_t *b, sched_seq *const *owner, int rc) {
  int dead = be->ops->is_dead && be->ops->is_dead(be);
  ns_log_error("engine step %llu (%d sequences, %d tokens) failed on backend %s: %s%s",
               (unsigned long long)e->steps, b->n_seqs, b->n_tokens, e->be_name, ns_strerror(rc),
               dead ? "; the backend is lost" : "");
  for (int k = 0; k < b->n_seqs; k++)
    if (owner[k])
      eng__fail(e, (eng_seq *)owner[k], rc, "backend %s: step failed: %s", e->be_name,
                ns_strerror(rc));
  return dead ? rc : 1;
}

/* The plan's failures (a sequence the cache cannot hold) and its result: 0 to go on, 1 when
 * host memory for the batch ran out (every running request failed). */
static int plan_result(eng_t *e, int rc, sched_seq **failed, int n_failed) {
  for (int i = 0; i < n_failed; i++)
    eng__fail(e, (eng_seq *)failed[i], NS_ENOMEM,
              "the KV cache (%d pages) cannot hold the sequence", e->pages_total);
  if (!rc) return 0;
  sched_seq *q, *nx;
  for (q = sched_first_running(e->sched); q; q = nx) {
    nx = sched_next(q);
    eng__fail(e, (eng_seq *)q, rc, "out of host memory for the step's batch");
  }
  return 1;
}

static void admitted(const batch_t *b, sched_seq *const *owner, double now) {
  for (int k = 0; k < b->n_seqs; k++) {
    eng_seq *q = (eng_seq *)owner[k];
    q->req->state = owner[k]->state;
    if (q->t_admit == 0) q->t_admit = now;
  }
}

/* One step of batch b (owner[k]: its sequences) on fwd, its tokens taken. Returns 1, or
 * rc < 0 when the backend is lost. */
static int run_batch(eng_t *e, fwd_t *fwd, const batch_t *b, sched_seq *const *owner) {
  admitted(b, owner, eng_now());
  int rc = fwd_step(fwd, b, &e->out, NULL);
  e->last_batch = b->n_seqs;
  if (rc) return step_failed(e, fwd_backend(fwd), b, owner, rc);
  sched_commit(e->sched);
  double now = eng_now();
  for (int k = 0; k < b->n_seqs; k++)
    if (b->seqs[k].sample) on_token(e, &e->out, (eng_seq *)owner[k], k, now);
  return 1;
}

/* Wait for the prefill lane's step and take its tokens. Returns 1, or rc < 0 when the
 * backend is lost. */
static int prefill_end(eng_t *e) {
  sched_seq *const *powner;
  const batch_t *pb = sched_prefill_batch(e->sched, &powner);
  int rc = fwd_wait(e->pf_fwd, &e->pf_out);
  if (rc) {
    int r = step_failed(e, e->lane, pb, powner, rc);
    sched_abort_prefill(e->sched);
    return r;
  }
  sched_commit_prefill(e->sched);
  double now = eng_now();
  for (int k = 0; k < pb->n_seqs; k++)
    if (powner[k] && pb->seqs[k].sample) on_token(e, &e->pf_out, (eng_seq *)powner[k], k, now);
  return 1;
}

/* engine.prefill_stream: decode steps here, prompt chunks on the lane, overlapping. One call
 * counts as one engine step (events carry it): a finished prefill step's tokens and the
 * decode step's come out in the same one. */
static int step_split(eng_t *e) {
  int did = 0, rc;
  uint64_t step0 = e->steps;
  e->steps++;
  if (sched_prefill_in_flight(e->sched) && (rc = e->lane->ops->step_poll(e->lane)) != 0) {
    if ((rc = prefill_end(e)) < 0) return rc;
    did = 1;
  }
  const batch_t *db, *pb;
  sched_seq *const *downer, *const *powner;
  sched_seq *failed[1];
  int n_failed, prefill = !sched_prefill_in_flight(e->sched);
  rc = sched_plan_split(e->sched, prefill, &db, &downer, &pb, &powner, failed, &n_failed);
  if (plan_result(e, rc, failed, n_failed)) {
    if (!did) e->steps = step0;
    return did;
  }
  if (prefill && pb->n_seqs > 0) {
    admitted(pb, powner, eng_now());
    if ((rc = fwd_submit(e->pf_fwd, pb, &e->pf_out))) {
      int r = step_failed(e, e->lane, pb, powner, rc);
      sched_abort_prefill(e->sched);
      if (r < 0) return r;
    }
    did = 1;
  }
  if (db->n_seqs > 0) return run_batch(e, e->fwd, db, downer);
  if (sched_prefill_in_flight(e->sched)) return prefill_end(e); /* nothing to decode meanwhile */
  if (!did) e->steps = step0;                                   /* nothing ran */
  return did;
}

int eng__step(eng_t *e) {
  if (e->lane) return step_split(e);
  const batch_t *b;
  sched_seq *const *owner;
  sched_seq *failed[1];
  int n_failed;
  int rc = sched_plan(e->sched, &b, &owner, failed, &n_failed);
  if (plan_result(e, rc, failed, n_failed)) return 0;
  if (b->n_seqs == 0) return 0;
  e->steps++;
  return run_batch(e, e->fwd, b, owner);
}
