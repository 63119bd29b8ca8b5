/* sched.c — the continuous-batching policy over mem/kv pages: decode rows, chunked
 * prefill, FCFS admission and preemption by recompute. Entry point: sched_plan. */
#include "eng_sched.h"

#include "ns_err.h"
#include "ns_log.h"

#include <stdlib.h>
#include <string.h>

enum { LINK_NONE = 0, LINK_QUEUE = 1, LINK_RUN = 2 };

typedef struct list {
  sched_seq *head, *tail;
  int n;
} list;

struct sched_t {
  kv_t *kv;
  int max_batch, max_rows;
  list queue, run; /* run is in admission order: oldest first */
  uint64_t admit_no, preemptions;
  batch_t b;
  sched_seq **owner; /* [max_batch] */
};

/* ---- lists ------------------------------------------------------------------------------ */

static void list_unlink(list *l, sched_seq *q) {
  if (q->prev_)
    q->prev_->next_ = q->next_;
  else
    l->head = q->next_;
  if (q->next_)
    q->next_->prev_ = q->prev_;
  else
    l->tail = q->prev_;
  q->prev_ = q->next_ = NULL;
  l->n--;
}

static void list_push_tail(list *l, sched_seq *q) {
  q->next_ = NULL;
  q->prev_ = l->tail;
  if (l->tail)
    l->tail->next_ = q;
  else
    l->head = q;
  l->tail = q;
  l->n++;
}

static void list_push_head(list *l, sched_seq *q) {
  q->prev_ = NULL;
  q->next_ = l->head;
  if (l->head)
    l->head->prev_ = q;
  else
    l->tail = q;
  l->head = q;
  l->n++;
}

/* ---- lifetime ------------------------------------------------------------------------- */

int sched_create(kv_t *kv, int max_batch, int max_batch_tokens, sched_t **out) {
  *out = NULL;
  if (!kv || max_batch < 1 || max_batch_tokens < max_batch) return NS_EINVAL;
  sched_t *s = calloc(1, sizeof *s);
  if (!s) return NS_ENOMEM;
  s->owner = calloc((size_t)max_batch, sizeof *s->owner);
  if (!s->owner) {
    free(s);
    return NS_ENOMEM;
  }
  s->kv = kv;
  s->max_batch = max_batch;
  s->max_rows = max_batch_tokens;
  be_batch_init(&s->b);
  *out = s;
  return 0;
}

void sched_destroy(sched_t *s) {
  if (!s) return;
  while (s->queue.head)
    sched_remove(s, s->queue.head);
  while (s->run.head)
    sched_remove(s, s->run.head);
  be_batch_free(&s->b);
  free(s->owner);
  free(s);
}

void sched_enqueue(sched_t *s, sched_seq *q) {
  q->state = ENG_QUEUED;
  q->n_done = 0;
  kv_seq_init(&q->kv);
  q->linked_ = LINK_QUEUE;
  list_push_tail(&s->queue, q);
}

void sched_remove(sched_t *s, sched_seq *q) {
  if (q->linked_ == LINK_QUEUE) list_unlink(&s->queue, q);
  if (q->linked_ == LINK_RUN) list_unlink(&s->run, q);
  q->linked_ = LINK_NONE;
  kv_seq_free(s->kv, &q->kv);
}

int sched_n_queued(const sched_t *s) {
  return s->queue.n;
}
int sched_n_running(const sched_t *s) {
  return s->run.n;
}
sched_seq *sched_first_queued(const sched_t *s) {
  return s->queue.head;
}
sched_seq *sched_first_running(const sched_t *s) {
  return s->run.head;
}
sched_seq *sched_next(const sched_seq *q) {
  return q->next_;
}
uint64_t sched_preemptions(const sched_t *s) {
  return s->preemptions;
}

/* ---- the plan ----------------------------------------------------------------------------- */

static int pending(const sched_seq *q) {
  return q->n_prompt + q->n_gen - q->n_done;
}

/* Rows for a prefilling sequence with p pending tokens when rows are left: all of them, or
 * a chunk that leaves at least two, never a one-token chunk of a longer history. One-token
 * rows are decode rows, which the CUDA backend computes on its decode kernels: a prompt
 * token must take the prefill path whatever the batch around it, so that a sequence's
 * numbers do not depend on the load (batch invariance). 0: wait for a step with more rows. */
static int chunk_rows(int p, int rows) {
  if (p <= rows) return p;
  int take = rows < p - 2 ? rows : p - 2;
  return take >= 2 ? take : 0;
}

/* Back to the head of the queue: pages freed, the whole history recomputed on
 * re-admission (generated ids stay: they are not sampled again). */
static void preempt(sched_t *s, sched_seq *q) {
  list_unlink(&s->run, q);
  kv_seq_free(s->kv, &q->kv);
  q->state = ENG_QUEUED;
  q->n_done = 0;
  q->n_preempt++;
  q->linked_ = LINK_QUEUE;
  list_push_head(&s->queue, q);
  s->preemptions++;
}

/* Pages for q's decode row, preempting the newest running sequences while none is free.
 * Returns 0 (q has its page), 1 (q itself was preempted) or NS_ENOMEM (q runs alone and
 * still has no page). */
static int decode_page(sched_t *s, sched_seq *q) {
  for (;;) {
    int rc = kv_seq_reserve(s->kv, &q->kv, q->n_done + 1);
    if (rc == 0) return 0;
    sched_seq *victim = s->run.tail;
    if (victim == q && s->run.n == 1) return NS_ENOMEM;
    ns_logr(NS_LOG_DEBUG, 0, "sched: KV pages ran out, preempting a sequence of %d tokens",
            victim->n_done);
    preempt(s, victim);
    if (victim == q) return 1;
  }
}

static int add_rows(sched_t *s, sched_seq *q, int take) {
  int p = pending(q);
  batch_seq bs = {.n_new = take,
                  .pos0 = q->n_done,
                  .pages = q->kv.pages,
                  .n_pages = q->kv.n_pages,
                  .sample = take == p,
                  .sp = q->sp,
                  .hist = q->hist,
                  .n_prompt = q->n_prompt,
                  .n_hist = q->n_prompt + q->n_gen,
                  .step = (uint64_t)q->n_gen};
  s->owner[s->b.n_seqs] = q;
  return be_batch_add(&s->b, &bs, q->hist + q->n_done);
}

int sched_plan(sched_t *s, const batch_t **batch, sched_seq *const **owner, sched_seq **failed,
               int *n_failed) {
  *n_failed = 0;
  be_batch_reset(&s->b, 0);
  *batch = &s->b;
  *owner = s->owner;
  /* decode pages first, oldest first: preemption takes from the newest */
  for (sched_seq *q = s->run.head; q; q = q->next_) {
    if (q->state != ENG_DECODING) continue;
    int rc = decode_page(s, q); /* may preempt sequences after q, never before */
    if (rc < 0) {
      sched_remove(s, q);
      failed[(*n_failed)++] = q;
      break; /* q was the only running sequence */
    }
    if (rc == 1) break; /* q was the newest: nothing runs after it */
  }
  int rows = s->max_rows;
  for (sched_seq *q = s->run.head; q; q = q->next_) {
    if (q->state != ENG_DECODING) continue;
    if (add_rows(s, q, 1)) return NS_ENOMEM;
    rows--;
  }
  /* prefill chunks, oldest first; their pages were reserved at admission */
  for (sched_seq *q = s->run.head; q && rows > 0; q = q->next_) {
    if (q->state != ENG_PREFILLING) continue;
    int take = chunk_rows(pending(q), rows);
    if (take == 0) continue;
    if (add_rows(s, q, take)) return NS_ENOMEM;
    rows -= take;
  }
  /* admission, first come first served: the head waits until it fits */
  while (rows > 0 && s->queue.head && s->run.n < s->max_batch) {
    sched_seq *q = s->queue.head;
    int take = chunk_rows(pending(q), rows);
    if (take == 0 || kv_seq_reserve(s->kv, &q->kv, q->n_prompt + q->n_gen)) break;
    list_unlink(&s->queue, q);
    q->state = ENG_PREFILLING;
    q->n_done = 0;
    q->admit_no = ++s->admit_no;
    q->linked_ = LINK_RUN;
    list_push_tail(&s->run, q);
    if (add_rows(s, q, take)) return NS_ENOMEM;
    rows -= take;
  }
  return 0;
}

void sched_commit(sched_t *s) {
  for (int k = 0; k < s->b.n_seqs; k++) {
    sched_seq *q = s->owner[k];
    q->n_done += s->b.seqs[k].n_new;
    if (s->b.seqs[k].sample) q->state = ENG_DECODING;
  }
}

/* ---- checks ------------------------------------------------------------------------------ */

static int list_is_valid(const sched_t *s, const list *l, int link) {
  int n = 0;
  const sched_seq *prev = NULL;
  for (const sched_seq *q = l->head; q; prev = q, q = q->next_) {
    if (q->prev_ != prev || q->linked_ != link) return 0;
    if (link == LINK_QUEUE && (q->state != ENG_QUEUED || q->kv.n_pages != 0)) return 0;
    if (link == LINK_RUN) {
      if (q->state != ENG_PREFILLING && q->state != ENG_DECODING) return 0;
      if (!kv_seq_is_valid(s->kv, &q->kv)) return 0;
      if ((int64_t)q->kv.n_pages * kv_page_tokens(s->kv) < q->n_done) return 0;
      if (pending(q) < 1) return 0;
      if (prev && prev->admit_no >= q->admit_no) return 0;
    }
    n++;
  }
  return l->tail == prev && l->n == n;
}

int sched_is_valid(const sched_t *s) {
  return list_is_valid(s, &s->queue, LINK_QUEUE) && list_is_valid(s, &s->run, LINK_RUN) &&
         s->run.n <= s->max_batch && kv_is_valid(s->kv);
}
