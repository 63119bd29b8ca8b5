/* eng_int.h — the engine's private parts shared by engine.c (thread, queues, API),
 * engine_load.c (model, backend, KV sizing) and engine_step.c (steps and output).
 * Not for use outside engine/ (tests may use eng__start_with). */
#ifndef ENG_ENG_INT_H
#define ENG_ENG_INT_H

#include "backend.h"
#include "engine.h"
#include "forward.h"
#include "kv.h"
#include "eng_sched.h"
#include "stop.h"
#include "tokenizer.h"

#include <pthread.h>

/* One event waiting for eng_poll; ev's pointers point into the record itself. */
typedef struct eng_evrec {
  struct eng_evrec *next;
  eng_event ev;
  char msg[256]; /* EV_ERROR */
} eng_evrec;

/* The engine's record of one accepted request. Built by eng_submit on the caller's thread,
 * owned by the engine thread from the moment it is in the inbox. */
typedef struct eng_seq {
  sched_seq s; /* the scheduler's view (hist, counters, pages) */
  eng_req *req;
  int max_tokens;
  tok_stream_t *ts;
  eng_stop_t *stop;
  int stopped; /* a stop string matched: no more text (final->ev.stop_idx says which) */
  double t_submit, t_admit, t_first, deadline;
  /* output not sent yet */
  char *text;
  size_t text_len, text_cap;
  int32_t *ids, *top_ids;
  float *lp, *top_lp;
  int n_out, cap_out;
  eng_evrec *final; /* preallocated, so every request gets its final event */
  struct eng_seq *in_next;
} eng_seq;

/* Creates a backend without weights (be_create_for_cfg, or a test's wrapper). */
typedef int (*eng_be_factory)(const cfg_t *cfg, const model_t *m, backend_t **be, char *err,
                              size_t errlen);

struct eng_t {
  const cfg_t *cfg;
  eng_notify_fn notify;
  void *notify_ud;
  /* set by eng__load, read-only afterwards (any thread) */
  tok_t *tok;
  int max_context, vocab, tok_vocab, page_tokens, pages_total, max_batch, max_rows;
  int eos[MODEL_MAX_EOS], n_eos;
  char model_name[128];
  char be_name[32];
  /* engine thread only (eng__load builds them before the thread starts) */
  backend_t *be;
  kv_t *kv;
  fwd_t *fwd; /* every step; with a prefill lane, decode steps only */
  sched_t *sched;
  step_out_t out;
  /* engine.prefill_stream: prompt chunks on a second lane of the backend (lower priority),
   * one step of it in flight at a time (sched_prefill_in_flight) while decode steps run on be */
  backend_t *lane;
  fwd_t *pf_fwd;
  step_out_t pf_out;
  eng_evrec *out_head, *out_tail; /* events of the current iteration */
  uint64_t steps;
  int last_batch;
  /* the inbox: in_mu */
  pthread_mutex_t in_mu;
  pthread_cond_t in_cv;
  eng_seq *in_head, *in_tail;
  int in_n;
  uint64_t *cancels;
  int n_cancels, cap_cancels;
  int spare_cap;     /* capacity of the engine thread's swapped-out cancellation buffer */
  int sched_waiting; /* the engine's queue length, as last published */
  int draining, stopping, dead, dead_err;
  char dead_msg[200];
  /* events for the caller: ev_mu */
  pthread_mutex_t ev_mu;
  eng_evrec *ev_head, *ev_tail;
  /* the stats snapshot: st_mu */
  pthread_mutex_t st_mu;
  eng_stats_t st;
  pthread_t thread;
};

/* engine_load.c: model, tokenizer, backend, KV cache, forward and scheduler into e
 * (e->cfg set). Returns 0 or an ns_err with err naming what failed; eng__unload frees
 * whatever was built (also after a failure). */
int eng__load(eng_t *e, eng_be_factory factory, char *err, size_t errlen);
void eng__unload(eng_t *e);

/* eng_start with a given backend factory (tests inject failing backends). */
int eng__start_with(const cfg_t *cfg, eng_be_factory factory, eng_notify_fn notify, void *notify_ud,
                    eng_t **out, char *err, size_t errlen);

/* engine_step.c, engine thread: one scheduling step (plan, forward, sampled tokens,
 * events). Returns 1 when a step ran, 0 when there was nothing to run. */
int eng__step(eng_t *e);
/* Final events: EV_DONE with fin, or EV_ERROR with err and a message; then the sequence
 * is unlinked from the scheduler and freed. */
void eng__finish(eng_t *e, eng_seq *q, eng_fin fin);
void eng__fail(eng_t *e, eng_seq *q, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Queue an event record for the caller (delivered after the iteration's stats). */
void eng__emit(eng_t *e, eng_evrec *r);

/* engine_step.c, caller thread: the record for an accepted request (tokenizer stream, stop
 * matcher, history, final event). Returns 0 or NS_ENOMEM. */
int eng__seq_new(eng_t *e, eng_req *req, eng_seq **out);
void eng__seq_free(eng_seq *q);

#endif
