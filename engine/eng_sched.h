/* eng_sched.h — the continuous-batching policy (sched.c; not named sched.h, which would
 * shadow <sched.h>): which sequences run in the next step and with how many rows (decodes
 * first, then chunked prefill, then FCFS admission), KV pages for each, and preemption by
 * recompute when pages run out. Entry point: sched_plan.
 *
 * Threads: engine thread only; a sched_t and its sequences are not thread-safe.
 * Memory: the caller owns every sched_seq (usually embedded in its own per-request record)
 * and its hist array; the scheduler links them into its queue and running list, and owns
 * their page tables (kv_seq) from admission until preemption or sched_remove. */
#ifndef ENG_ENG_SCHED_H
#define ENG_ENG_SCHED_H

#include "backend.h"
#include "kv.h"
#include "request.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sched_seq {
  /* set by the caller before sched_enqueue, then read-only to it except as noted */
  int32_t *hist; /* prompt ids, then generated ids; room for n_prompt + max_tokens */
  int n_prompt;  /* the request's prompt length (penalties see it as the prompt) */
  int n_gen;     /* generated ids in hist; the caller appends after each sampled token */
  int max_new;   /* the request's max_tokens (the admission's growth estimate; 0: none) */
  samp_params sp;
  /* scheduler state: read-only to the caller */
  eng_req_state state; /* ENG_QUEUED, ENG_PREFILLING or ENG_DECODING while linked */
  int n_done;          /* positions in the KV cache */
  kv_seq kv;
  uint64_t admit_no; /* order of the last admission: the newest running has the largest */
  int n_preempt;     /* times preempted */
  struct sched_seq *prev_, *next_; /* private */
  int linked_;                     /* private: 0 none, 1 queue, 2 running */
  int in_flight_;                  /* private: in the prefill batch of a running step */
} sched_seq;

typedef struct sched_t sched_t;

/* A scheduler handing out kv's pages to at most max_batch running sequences and
 * max_batch_tokens rows a step (max_batch <= max_batch_tokens). kv must outlive it.
 * Returns 0, NS_EINVAL or NS_ENOMEM. */
int sched_create(kv_t *kv, int max_batch, int max_batch_tokens, sched_t **out);
/* Admission keeps free, besides each admitted sequence's history, the pages for a share g in
 * [0, 1] of every running sequence's remaining max_new tokens (scheduler.admit_growth): 0
 * (the default) admits on history pages alone and preempts as sequences grow; 1 admits only
 * what can run to max_new together, so nothing is preempted. */
void sched_set_admit_growth(sched_t *s, double g);
/* Frees the scheduler; sequences still linked are unlinked and their pages freed. */
void sched_destroy(sched_t *s);

/* Append q (state ENG_QUEUED, n_done 0) to the tail of the queue. */
void sched_enqueue(sched_t *s, sched_seq *q);
/* Unlink q from the queue or the running list and free its pages (finish, cancel,
 * failure): at once, or, while q is in the prefill batch of a step in flight, when that
 * step is committed or aborted (its owner slot becomes NULL). No-op when q is not linked. */
void sched_remove(sched_t *s, sched_seq *q);

int sched_n_queued(const sched_t *s);
int sched_n_running(const sched_t *s);
/* First queued / running sequence (oldest first) and the next one; NULL at the end. */
sched_seq *sched_first_queued(const sched_t *s);
sched_seq *sched_first_running(const sched_t *s);
sched_seq *sched_next(const sched_seq *q);

/* The next step. Every decoding sequence gets one row (adding a page when it crosses a
 * page boundary; when none is free the newest running sequence is preempted: pages freed,
 * back to the head of the queue to be recomputed, its generated ids kept), prefilling
 * sequences get prompt chunks with the rows left, oldest first, then queued sequences
 * are admitted FCFS while rows, max_batch and pages for their whole pending history
 * allow. The batch is s's (read-only, valid until the next call); owner[k] is batch
 * sequence k's sched_seq. A sequence that cannot get a page even alone (cannot happen
 * when every request fits the whole cache) is unlinked and returned in failed[0 ..
 * *n_failed) (at most one per call). Returns 0 or NS_ENOMEM (host memory for the batch:
 * nothing was changed then except possible preemptions). */
int sched_plan(sched_t *s, const batch_t **batch, sched_seq *const **owner, sched_seq **failed,
               int *n_failed);
/* After a successful step (in split mode: of the decode batch): advance each batch
 * sequence's n_done; a sequence that sampled becomes ENG_DECODING. The caller then appends the
 * sampled ids (n_gen++) or removes the finished sequences. */
void sched_commit(sched_t *s);

/* Split mode (engine.prefill_stream): decode rows and prompt chunks as two batches for two
 * lanes whose steps overlap. *dec: one row for every decoding sequence (pages and
 * preemption as sched_plan; sequences in flight are never preempted). *pf, only when
 * `prefill` (no prefill step in flight; else it is left empty): prompt chunks of up to
 * max_batch_tokens rows and admissions as sched_plan's, its sequences marked in flight
 * until sched_commit_prefill or sched_abort_prefill. The batches and owner arrays stay
 * valid until the next call (the prefill one until the next call with `prefill`). failed,
 * n_failed and the result as sched_plan's. */
int sched_plan_split(sched_t *s, int prefill, const batch_t **dec, sched_seq *const **dec_owner,
                     const batch_t **pf, sched_seq *const **pf_owner, sched_seq **failed,
                     int *n_failed);
/* After the prefill batch's step: advance its sequences (as sched_commit; NULL owners, removed
 * meanwhile, are skipped), clear the in-flight marks, free the pages of removed ones. */
void sched_commit_prefill(sched_t *s);
/* The prefill step failed: the marks cleared and deferred pages freed, nothing advanced. */
void sched_abort_prefill(sched_t *s);
/* 1 while a prefill batch is in flight (planned and not yet committed or aborted). */
int sched_prefill_in_flight(const sched_t *s);
/* The last prefill batch sched_plan_split made and its owners (NULL: removed in flight). */
const batch_t *sched_prefill_batch(const sched_t *s, sched_seq *const **owner);

uint64_t sched_preemptions(const sched_t *s);

/* Consistency: lists well linked and counted, states match lists, running sequences'
 * pages cover their n_done and the kv manager is consistent. 1 when so. Tests. */
int sched_is_valid(const sched_t *s);

#ifdef __cplusplus
}
#endif
#endif
