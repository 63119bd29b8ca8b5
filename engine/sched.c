/* sched.c — the continuous-batching policy over mem/kv pages: decode rows, chunked
 * prefill, FCFS admission and preemption by recompute. Entry point: sched_plan. */
#include "eng_sched.h"

#include "ns_err.h"
#include "ns_log.h"

#include <math.h>
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
  double growth; /* scheduler.admit_growth */
  batch_t b;
  sched_seq **owner; /* [max_batch] */
  /* split mode: the prefill batch, in flight between plan and commit / abort */
  batch_t pb;
  sched_seq **powner; /* [max_batch] */
  int pf_flight;
  kv_seq *deferred; /* [max_batch] pages of removed in-flight sequences */
  int n_deferred;
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
  s->powner = calloc((size_t)max_batch, sizeof *s->powner);
  s->deferred = calloc((size_t)max_batch, sizeof *s->deferred);
  if (!s->owner || !s->powner || !s->deferred) {
    free(s->owner);
    free(s->powner);
    free(s->deferred);
    free(s);
    return NS_ENOMEM;
  }
  s->kv = kv;
  s->max_batch = max_batch;
  s->max_rows = max_batch_tokens;
  be_batch_init(&s->b);
  be_batch_init(&s->pb);
  *out = s;
  return 0;
}

/* The in-flight prefill batch is over (committed or aborted): marks cleared, the pages of
 * sequences removed meanwhile freed. */
static void prefill_done(sched_t *s) {
  for (int k = 0; s->pf_flight && k < s->pb.n_seqs; k++)
    if (s->powner[k]) s->powner[k]->in_flight_ = 0;
  for (int i = 0; i < s->n_deferred; i++)
    kv_seq_free(s->kv, &s->deferred[i]);
  s->n_deferred = 0;
  s->pf_flight = 0;
}

void sched_destroy(sched_t *s) {
  if (!s) return;
  while (s->queue.head)
    sched_remove(s, s->queue.head);
  while (s->run.head)
    sched_remove(s, s->run.head);
  prefill_done(s); /* the caller waited for the step */
  be_batch_free(&s->b);
  be_batch_free(&s->pb);
  free(s->owner);
  free(s->powner);
  free(s->deferred);
  free(s);
}

void sched_set_admit_growth(sched_t *s, double g) {
  s->growth = g > 0 ? (g < 1 ? g : 1) : 0;
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
  if (q->in_flight_) { /* the step still writes its pages: free them when it is over */
    for (int k = 0; k < s->pb.n_seqs; k++)
      if (s->powner[k] == q) s->powner[k] = NULL;
    s->deferred[s->n_deferred++] = q->kv; /* at most one per batch sequence */
    kv_seq_init(&q->kv);
    q->in_flight_ = 0;
    return;
  }
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

/* The newest running sequence that is not in flight (q itself at worst). */
static sched_seq *newest_idle(const sched_t *s) {
  sched_seq *v = s->run.tail;
  while (v && v->in_flight_)
    v = v->prev_;
  return v;
}

/* Pages for q's decode row, preempting the newest running sequences (never one in flight)
 * while none is free. Returns 0 (q has its page), 1 (q itself was preempted) or NS_ENOMEM
 * (q runs alone and still has no page). */
static int decode_page(sched_t *s, sched_seq *q) {
  for (;;) {
    int rc = kv_seq_reserve(s->kv, &q->kv, q->n_done + 1);
    if (rc == 0) return 0;
    sched_seq *victim = newest_idle(s);
    if (victim == q && s->run.n == 1) return NS_ENOMEM;
    ns_logr(NS_LOG_DEBUG, 0, "sched: KV pages ran out, preempting a sequence of %d tokens",
            victim->n_done);
    preempt(s, victim);
    if (victim == q) return 1;
  }
}

static int add_rows_to(batch_t *b, sched_seq **owner, sched_seq *q, int take) {
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
  owner[b->n_seqs] = q;
  return be_batch_add(b, &bs, q->hist + q->n_done);
}

static int add_rows(sched_t *s, sched_seq *q, int take) {
  return add_rows_to(&s->b, s->owner, q, take);
}

/* Decode pages for every decoding sequence, oldest first: preemption takes from the
 * newest. A sequence that cannot have a page even alone goes to failed. */
static void decode_pages(sched_t *s, sched_seq **failed, int *n_failed) {
  for (sched_seq *q = s->run.head; q; q = q->next_) {
    if (q->state != ENG_DECODING) continue;
    int rc = decode_page(s, q); /* may preempt sequences after q, never before */
    if (rc < 0) {
      sched_remove(s, q);
      failed[(*n_failed)++] = q;
      break; /* q was the only running sequence */
    }
    if (rc == 1) break; /* q was the newest idle one: no decoding sequence after it */
  }
}

/* Pages q may still take beyond `held` under admit_growth: its history plus the share
 * s->growth of its remaining max_new tokens. */
static int64_t growth_pages(const sched_t *s, const sched_seq *q, int held) {
  int rem = q->max_new - q->n_gen;
  if (s->growth <= 0 || rem <= 0) return 0;
  int64_t pt = kv_page_tokens(s->kv);
  int64_t want = (int64_t)q->n_prompt + q->n_gen + (int64_t)ceil(s->growth * rem);
  int64_t more = (want + pt - 1) / pt - held;
  return more > 0 ? more : 0;
}

/* Prompt chunks (oldest first; their pages were reserved at admission), then admission,
 * first come first served (the head waits until it fits, its growth and the running
 * sequences' under admit_growth included), into b with at most rows rows. Sequences in
 * flight are skipped. */
static int prefill_rows(sched_t *s, batch_t *b, sched_seq **owner, int rows) {
  for (sched_seq *q = s->run.head; q && rows > 0; q = q->next_) {
    if (q->state != ENG_PREFILLING || q->in_flight_) continue;
    int take = chunk_rows(pending(q), rows);
    if (take == 0) continue;
    if (add_rows_to(b, owner, q, take)) return NS_ENOMEM;
    rows -= take;
  }
  int64_t grow = 0; /* the running sequences' growth, kept free */
  for (const sched_seq *r = s->growth > 0 ? s->run.head : NULL; r; r = r->next_)
    grow += growth_pages(s, r, r->kv.n_pages);
  while (rows > 0 && s->queue.head && s->run.n < s->max_batch) {
    sched_seq *q = s->queue.head;
    int take = chunk_rows(pending(q), rows);
    if (take == 0) break;
    if (s->growth > 0) {
      int hp = kv_pages_for(s->kv, q->n_prompt + q->n_gen);
      int64_t g = growth_pages(s, q, hp);
      /* the head alone on an idle scheduler is admitted whatever its growth (it fits the
       * cache at admission, so it can run) */
      if (s->run.n > 0 && kv_pages_free(s->kv) - hp < grow + g) break;
      grow += g;
    }
    if (kv_seq_reserve(s->kv, &q->kv, q->n_prompt + q->n_gen)) break;
    list_unlink(&s->queue, q);
    q->state = ENG_PREFILLING;
    q->n_done = 0;
    q->admit_no = ++s->admit_no;
    q->linked_ = LINK_RUN;
    list_push_tail(&s->run, q);
    if (add_rows_to(b, owner, q, take)) return NS_ENOMEM;
    rows -= take;
  }
  return 0;
}

int sched_plan(sched_t *s, const batch_t **batch, sched_seq *const **owner, sched_seq **failed,
               int *n_failed) {
  *n_failed = 0;
  be_batch_reset(&s->b, 0);
  *batch = &s->b;
  *owner = s->owner;
  decode_pages(s, failed, n_failed);
  int rows = s->max_rows;
  for (sched_seq *q = s->run.head; q; q = q->next_) {
    if (q->state != ENG_DECODING) continue;
    if (add_rows(s, q, 1)) return NS_ENOMEM;
    rows--;
  }
  return prefill_rows(s, &s->b, s->owner, rows);
}

int sched_plan_split(sched_t *s, int prefill, const batch_t **dec, sched_seq *const **dec_owner,
                     const batch_t **pf, sched_seq *const **pf_owner, sched_seq **failed,
                     int *n_failed) {
  *n_failed = 0;
  be_batch_reset(&s->b, 0);
  *dec = &s->b;
  *dec_owner = s->owner;
  *pf = &s->pb;
  *pf_owner = s->powner;
  if (prefill && s->pf_flight) return NS_EINVAL; /* the caller's bookkeeping is wrong */
  if (prefill) be_batch_reset(&s->pb, 0);
  decode_pages(s, failed, n_failed);
  for (sched_seq *q = s->run.head; q; q = q->next_)
    if (q->state == ENG_DECODING && add_rows(s, q, 1)) return NS_ENOMEM;
  if (!prefill) return 0;
  int rc = prefill_rows(s, &s->pb, s->powner, s->max_rows);
  if (rc) {
    be_batch_reset(&s->pb, 0); /* admitted sequences stay running, to be planned again */
    return rc;
  }
  for (int k = 0; k < s->pb.n_seqs; k++)
    s->powner[k]->in_flight_ = 1;
  s->pf_flight = s->pb.n_seqs > 0;
  return 0;
}

static void commit(const batch_t *b, sched_seq *const *owner) {
  for (int k = 0; k < b->n_seqs; k++) {
    sched_seq *q = owner[k];
    if (!q) continue; /* removed while in flight */
    q->n_done += b->seqs[k].n_new;
    if (b->seqs[k].sample) q->state = ENG_DECODING;
  }
}

void sched_commit(sched_t *s) {
  commit(&s->b, s->owner);
}

void sched_commit_prefill(sched_t *s) {
  commit(&s->pb, s->powner);
  prefill_done(s);
}

void sched_abort_prefill(sched_t *s) {
  prefill_done(s);
}

int sched_prefill_in_flight(const sched_t *s) {
  return s->pf_flight;
}

const batch_t *sched_prefill_batch(const sched_t *s, sched_seq *const **owner) {
  *owner = s->powner;
  return &s->pb;
}

/* ---- checks ------------------------------------------------------------------------------ */

static int list_is_valid(const sched_t *s, const list *l, int link) {
  int n = 0;
  const sched_seq *prev = NULL;
  for (const sched_seq *q = l->head; q; prev = q, q = q->next_) {
    if (q->prev_ != prev || q->linked_ != link) return 0;
    if (link == LINK_QUEUE && (q->state != ENG_QUEUED || q->kv.n_pages != 0)) return 0;
    if (q->in_flight_ && (link != LINK_RUN || q->state != ENG_PREFILLING || !s->pf_flight))
      return 0;
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
