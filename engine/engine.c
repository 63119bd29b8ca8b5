/* engine.c — the engine thread and its public API (engine.h): the inbox of submissions and
 * cancellations (in_mu + in_cv), the event queue (ev_mu), the stats snapshot (st_mu), and
 * the thread's loop around eng__step. Entry points: eng_start, eng_submit, eng_poll. */
#include "eng_int.h"

#include "backend_select.h"
#include "ns_err.h"
#include "ns_log.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double eng_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- engine thread: stats and events ------------------------------------------------------- */

static void publish_stats(eng_t *e) {
  eng_stats_t st;
  pthread_mutex_lock(&e->st_mu);
  st = e->st;
  pthread_mutex_unlock(&e->st_mu);
  st.running = sched_n_running(e->sched);
  st.waiting = sched_n_queued(e->sched);
  st.kv_pages_used = kv_pages_used(e->kv);
  st.kv_pages_total = kv_pages_total(e->kv);
  st.batch_size = e->last_batch;
  st.steps = e->steps;
  st.preemptions = sched_preemptions(e->sched);
  be_pool_figures pf;
  be_pool_stats(e->be, &pf);
  st.pool_bytes_in_use = pf.in_use;
  st.pool_bytes_total = pf.total;
  st.pool_largest_free = pf.largest_free;
  st.pool_fragmentation = pf.fragmentation;
  st.last_progress_s = eng_now();
  pthread_mutex_lock(&e->st_mu);
  e->st = st;
  pthread_mutex_unlock(&e->st_mu);
  pthread_mutex_lock(&e->in_mu);
  e->sched_waiting = st.waiting;
  pthread_mutex_unlock(&e->in_mu);
}

/* Hand this iteration's events to the caller, after the stats that reflect them. */
static void flush_events(eng_t *e) {
  if (!e->out_head) return;
  pthread_mutex_lock(&e->ev_mu);
  if (e->ev_tail)
    e->ev_tail->next = e->out_head;
  else
    e->ev_head = e->out_head;
  e->ev_tail = e->out_tail;
  pthread_mutex_unlock(&e->ev_mu);
  e->out_head = e->out_tail = NULL;
  if (e->notify) e->notify(e->notify_ud);
}

/* ---- engine thread: the loop ---------------------------------------------------------------- */

static void fail_all(eng_t *e, int err, const char *msg) {
  sched_seq *q;
  while ((q = sched_first_queued(e->sched)))
    eng__fail(e, (eng_seq *)q, err, "%s", msg);
  while ((q = sched_first_running(e->sched)))
    eng__fail(e, (eng_seq *)q, err, "%s", msg);
}

static eng_seq *find_seq(eng_t *e, uint64_t id) {
  for (sched_seq *q = sched_first_queued(e->sched); q; q = sched_next(q))
    if (((eng_seq *)q)->req->id == id) return (eng_seq *)q;
  for (sched_seq *q = sched_first_running(e->sched); q; q = sched_next(q))
    if (((eng_seq *)q)->req->id == id) return (eng_seq *)q;
  return NULL;
}

/* Requests whose queue deadline passed. */
static void expire(eng_t *e, double now) {
  for (sched_seq *s = sched_first_queued(e->sched), *nx; s; s = nx) {
    nx = sched_next(s);
    eng_seq *q = (eng_seq *)s;
    if (now >= q->deadline)
      eng__fail(e, q, NS_ETIMEDOUT, "waited %.1f s in the queue without being admitted",
                now - q->t_submit);
  }
}

/* Wait until there is something to do, or a second passed (last_progress_s then shows a
 * live, idle engine). Takes the inbox and the cancellations. Returns 1 when stopping. */
static int take_inbox(eng_t *e, eng_seq **inbox, uint64_t **cancels, int *n_cancels) {
  int busy = sched_n_running(e->sched) + sched_n_queued(e->sched) > 0;
  pthread_mutex_lock(&e->in_mu);
  if (!busy && !e->stopping && !e->in_head && !e->n_cancels) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += 1;
    int rc = 0;
    while (rc != ETIMEDOUT && !e->stopping && !e->in_head && !e->n_cancels)
      rc = pthread_cond_timedwait(&e->in_cv, &e->in_mu, &ts);
  }
  *inbox = e->in_head;
  e->in_head = e->in_tail = NULL;
  e->sched_waiting += e->in_n;
  e->in_n = 0;
  /* swap the cancellation buffers so eng_cancel appends to an empty one */
  uint64_t *mine = *cancels;
  *cancels = e->cancels;
  *n_cancels = e->n_cancels;
  e->cancels = mine;
  int cap = e->cap_cancels;
  e->cap_cancels = e->spare_cap;
  e->spare_cap = cap;
  e->n_cancels = 0;
  int stopping = e->stopping;
  pthread_mutex_unlock(&e->in_mu);
  return stopping;
}

static void mark_dead(eng_t *e, int err) {
  char msg[200];
  snprintf(msg, sizeof msg, "the %s backend failed and cannot continue (%s)", e->be_name,
           ns_strerror(err));
  ns_log_error("engine: %s; failing every request", msg);
  pthread_mutex_lock(&e->in_mu);
  e->dead = 1;
  e->dead_err = err;
  snprintf(e->dead_msg, sizeof e->dead_msg, "%s", msg);
  pthread_mutex_unlock(&e->in_mu);
  pthread_mutex_lock(&e->st_mu);
  e->st.dead = 1;
  pthread_mutex_unlock(&e->st_mu);
  fail_all(e, err, msg);
}

static void *eng_main(void *arg) {
  eng_t *e = arg;
  uint64_t *cancels = NULL;
  int n_cancels = 0, dead = 0;
  for (;;) {
    eng_seq *inbox;
    int stopping = take_inbox(e, &inbox, &cancels, &n_cancels);
    while (inbox) {
      eng_seq *q = inbox;
      inbox = q->in_next;
      sched_enqueue(e->sched, &q->s);
      q->req->state = ENG_QUEUED;
      if (dead) eng__fail(e, q, e->dead_err, "%s", e->dead_msg);
    }
    if (stopping) break;
    for (int i = 0; i < n_cancels; i++) {
      eng_seq *q = find_seq(e, cancels[i]);
      if (q) eng__finish(e, q, ENG_FIN_CANCELLED); /* pages freed here */
    }
    expire(e, eng_now());
    int rc = eng__step(e);
    if (rc < 0) {
      mark_dead(e, rc);
      dead = 1;
    }
    publish_stats(e);
    flush_events(e);
  }
  fail_all(e, NS_ECLOSED, "server shutting down");
  publish_stats(e);
  flush_events(e);
  free(cancels);
  return NULL;
}

/* ---- the caller's thread --------------------------------------------------------------------- */

int eng__start_with(const cfg_t *cfg, eng_be_factory factory, eng_notify_fn notify, void *notify_ud,
                    eng_t **out, char *err, size_t errlen) {
  *out = NULL;
  if (errlen) err[0] = '\0';
  eng_t *e = calloc(1, sizeof *e);
  if (!e) {
    snprintf(err, errlen, "out of host memory");
    return NS_ENOMEM;
  }
  e->cfg = cfg;
  e->notify = notify;
  e->notify_ud = notify_ud;
  int rc = NS_ENOMEM;
  pthread_condattr_t ca;
  if (pthread_condattr_init(&ca)) goto fail_free;
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int bad = pthread_cond_init(&e->in_cv, &ca);
  pthread_condattr_destroy(&ca);
  if (bad) goto fail_free;
  if (pthread_mutex_init(&e->in_mu, NULL)) goto fail_cv;
  if (pthread_mutex_init(&e->ev_mu, NULL)) goto fail_in_mu;
  if (pthread_mutex_init(&e->st_mu, NULL)) goto fail_ev_mu;
  if ((rc = eng__load(e, factory, err, errlen))) goto fail_load;
  snprintf(e->st.model_name, sizeof e->st.model_name, "%s", e->model_name);
  e->st.max_context = e->max_context;
  e->st.vocab_size = e->vocab;
  publish_stats(e);
  if (pthread_create(&e->thread, NULL, eng_main, e)) {
    snprintf(err, errlen, "cannot start the engine thread");
    rc = NS_EIO;
    goto fail_load;
  }
  ns_log_info("engine: model %s on %s, context %d, %d sequences / %d tokens a step", e->model_name,
              e->be_name, e->max_context, e->max_batch, e->max_rows);
  *out = e;
  return 0;
fail_load:
  eng__unload(e);
  pthread_mutex_destroy(&e->st_mu);
fail_ev_mu:
  pthread_mutex_destroy(&e->ev_mu);
fail_in_mu:
  pthread_mutex_destroy(&e->in_mu);
fail_cv:
  pthread_cond_destroy(&e->in_cv);
fail_free:
  if (rc == NS_ENOMEM && errlen && !err[0]) snprintf(err, errlen, "out of host memory");
  free(e);
  return rc;
}

int eng_start(const cfg_t *cfg, eng_notify_fn notify, void *notify_ud, eng_t **out, char *err,
              size_t errlen) {
  return eng__start_with(cfg, be_create_for_cfg, notify, notify_ud, out, err, errlen);
}

static int bad_params(const samp_params *p, char *err, size_t errlen) {
  const char *what = NULL;
  if (!(p->temperature >= 0))
    what = "temperature must be >= 0";
  else if (p->top_k < 0)
    what = "top_k must be >= 0";
  else if (!(p->top_p > 0 && p->top_p <= 1))
    what = "top_p must be in (0, 1]";
  else if (!(p->min_p >= 0 && p->min_p <= 1))
    what = "min_p must be in [0, 1]";
  else if (!(p->repetition_penalty > 0))
    what = "repetition_penalty must be > 0";
  else if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2))
    what = "presence_penalty must be in [-2, 2]";
  else if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
    what = "frequency_penalty must be in [-2, 2]";
  else if (p->n_logprobs < 0 || p->n_logprobs > SAMP_MAX_LOGPROBS)
    what = "n_logprobs is out of range";
  if (what && p->n_logprobs > SAMP_MAX_LOGPROBS)
    snprintf(err, errlen, "logprobs (%d) must be in [0, %d]", p->n_logprobs, SAMP_MAX_LOGPROBS);
  else if (what)
    snprintf(err, errlen, "%s", what);
  return what ? NS_EINVAL : 0;
}

/* Index of the first of ids[0 .. n) outside [0, vocab), or -1. */
static int outside_vocab(const int32_t *ids, int n, int vocab) {
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab) return i;
  return -1;
}

/* What eng_submit can tell without the engine thread: limits fixed at start. */
static int check_req(const eng_t *e, const eng_req *r, char *err, size_t errlen) {
  if (r->n_prompt < 1 || !r->prompt) {
    snprintf(err, errlen, "the prompt is empty");
    return NS_EINVAL;
  }
  if (r->max_tokens < 1) {
    snprintf(err, errlen, "max_tokens (%d) must be at least 1", r->max_tokens);
    return NS_EINVAL;
  }
  int bad = outside_vocab(r->prompt, r->n_prompt, e->vocab);
  if (bad >= 0) {
    snprintf(err, errlen, "prompt token %d (id %d) is outside the vocabulary (%d ids)", bad,
             r->prompt[bad], e->vocab);
    return NS_EINVAL;
  }
  int64_t total = (int64_t)r->n_prompt + r->max_tokens;
  if (total > e->max_context) {
    snprintf(err, errlen, "prompt (%d tokens) + max_tokens (%d) exceeds the context (%d)",
             r->n_prompt, r->max_tokens, e->max_context);
    return NS_EINVAL;
  }
  int64_t pages = (total + e->page_tokens - 1) / e->page_tokens;
  if (pages > e->pages_total) {
    snprintf(err, errlen,
             "prompt (%d tokens) + max_tokens (%d) exceed the KV cache (%d tokens; "
             "engine.kv_cache_bytes)",
             r->n_prompt, r->max_tokens, e->pages_total * e->page_tokens);
    return NS_EINVAL;
  }
  if (r->n_stop < 0 || r->n_stop > ENG_MAX_STOP) {
    snprintf(err, errlen, "%d stop strings; at most %d", r->n_stop, ENG_MAX_STOP);
    return NS_EINVAL;
  }
  for (int i = 0; i < r->n_stop; i++)
    if (!r->stop[i]) {
      snprintf(err, errlen, "stop string %d is missing", i);
      return NS_EINVAL;
    }
  if (r->n_stop_ids < 0 || r->n_stop_ids > ENG_MAX_STOP_IDS || (r->n_stop_ids && !r->stop_ids)) {
    snprintf(err, errlen, "%d stop token ids; at most %d", r->n_stop_ids, ENG_MAX_STOP_IDS);
    return NS_EINVAL;
  }
  if ((bad = outside_vocab(r->stop_ids, r->n_stop_ids, e->vocab)) >= 0) {
    snprintf(err, errlen, "stop token id %d (%d) is outside the vocabulary (%d ids)", bad,
             r->stop_ids[bad], e->vocab);
    return NS_EINVAL;
  }
  const samp_params *p = &r->sp;
  if (p->n_bias < 0 || p->n_bias > SAMP_MAX_BIAS || (p->n_bias && !p->bias)) {
    snprintf(err, errlen, "%d logit bias entries; at most %d", p->n_bias, SAMP_MAX_BIAS);
    return NS_EINVAL;
  }
  for (int i = 0; i < p->n_bias; i++) {
    const samp_bias *b = &p->bias[i];
    if (b->id < 0 || b->id >= e->vocab || (i > 0 && b->id <= p->bias[i - 1].id) ||
        !isfinite(b->bias)) {
      snprintf(err, errlen,
               "logit bias entry %d (id %d, bias %g): ids must be in [0, %d) and increasing, "
               "biases finite",
               i, b->id, (double)b->bias, e->vocab);
      return NS_EINVAL;
    }
  }
  return bad_params(p, err, errlen);
}

int eng_submit(eng_t *e, eng_req *req, char *err, size_t errlen) {
  char dummy[1];
  if (!err || !errlen) err = dummy, errlen = sizeof dummy;
  err[0] = '\0';
  if (!req) return NS_EINVAL;
  int rc = check_req(e, req, err, errlen);
  eng_seq *q = NULL;
  if (rc == 0 && (rc = eng__seq_new(e, req, &q))) snprintf(err, errlen, "out of host memory");
  if (rc) {
    eng_req_free(req);
    return rc;
  }
  q->t_submit = eng_now();
  q->deadline = req->queue_deadline_s > 0 ? req->queue_deadline_s
                                          : q->t_submit + e->cfg->scheduler.queue_timeout_s;
  pthread_mutex_lock(&e->in_mu);
  if (e->dead) {
    rc = e->dead_err;
    snprintf(err, errlen, "%s", e->dead_msg);
  } else if (e->draining || e->stopping) {
    rc = NS_ECLOSED;
    snprintf(err, errlen, "the server is shutting down");
  } else if (e->in_n + e->sched_waiting >= e->cfg->scheduler.max_queue) {
    rc = NS_EBUSY;
    snprintf(err, errlen, "the queue is full (%d requests waiting; scheduler.max_queue)",
             e->in_n + e->sched_waiting);
  } else {
    q->in_next = NULL;
    if (e->in_tail)
      e->in_tail->in_next = q;
    else
      e->in_head = q;
    e->in_tail = q;
    e->in_n++;
    pthread_cond_signal(&e->in_cv);
  }
  pthread_mutex_unlock(&e->in_mu);
  if (rc) eng__seq_free(q); /* frees req too */
  return rc;
}

void eng_cancel(eng_t *e, uint64_t req_id) {
  pthread_mutex_lock(&e->in_mu);
  if (e->n_cancels == e->cap_cancels) {
    int cap = e->cap_cancels ? 2 * e->cap_cancels : 16;
    uint64_t *p = realloc(e->cancels, (size_t)cap * sizeof *p);
    if (!p) { /* the request runs on to its end; its final event still comes */
      pthread_mutex_unlock(&e->in_mu);
      ns_logr(NS_LOG_WARN, req_id, "engine: out of memory recording a cancellation");
      return;
    }
    e->cancels = p;
    e->cap_cancels = cap;
  }
  e->cancels[e->n_cancels++] = req_id;
  pthread_cond_signal(&e->in_cv);
  pthread_mutex_unlock(&e->in_mu);
}

int eng_poll(eng_t *e, eng_event_fn cb, void *ud) {
  pthread_mutex_lock(&e->ev_mu);
  eng_evrec *r = e->ev_head;
  e->ev_head = e->ev_tail = NULL;
  pthread_mutex_unlock(&e->ev_mu);
  int n = 0;
  while (r) {
    eng_evrec *nx = r->next;
    if (cb) cb(ud, &r->ev);
    free(r);
    r = nx;
    n++;
  }
  return n;
}

void eng_drain(eng_t *e) {
  pthread_mutex_lock(&e->in_mu);
  e->draining = 1;
  pthread_mutex_unlock(&e->in_mu);
}

void eng_stop(eng_t *e, eng_event_fn cb, void *ud) {
  if (!e) return;
  pthread_mutex_lock(&e->in_mu);
  e->stopping = 1;
  pthread_cond_signal(&e->in_cv);
  pthread_mutex_unlock(&e->in_mu);
  pthread_join(e->thread, NULL);
  eng_poll(e, cb, ud);
  eng__unload(e);
  free(e->cancels);
  pthread_mutex_destroy(&e->st_mu);
  pthread_mutex_destroy(&e->ev_mu);
  pthread_mutex_destroy(&e->in_mu);
  pthread_cond_destroy(&e->in_cv);
  free(e);
}

void eng_stats(eng_t *e, eng_stats_t *out) {
  pthread_mutex_lock(&e->st_mu);
  *out = e->st;
  pthread_mutex_unlock(&e->st_mu);
  pthread_mutex_lock(&e->in_mu);
  out->waiting += e->in_n;
  pthread_mutex_unlock(&e->in_mu);
}

const struct tok *eng_tokenizer(const eng_t *e) {
  return e->tok;
}
