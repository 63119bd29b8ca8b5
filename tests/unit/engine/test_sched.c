/* test_sched.c — the scheduling policy alone (engine/sched.c over mem/kv, no backend): one
 * decode row per decoding sequence, prefill chunks oldest first in the rows left, FCFS
 * admission blocked by max_batch and pages, preemption of the newest with its history
 * kept, the lone sequence that cannot grow, and a random run checked by sched_is_valid
 * (and for one-token rows that are not decode rows); split mode (a prefill batch in flight
 * next to decode batches): what each batch holds, removal while in flight, no preemption
 * of a sequence in flight; admission under scheduler.admit_growth (fewer preemptions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "eng_sched.h"
#include "ns_err.h"

#include <stdlib.h>
#include <string.h>

enum { PT = 4 };

typedef struct seqbuf {
  sched_seq s;
  int32_t hist[256];
} seqbuf;

static void seq_init(seqbuf *b, int n_prompt) {
  memset(b, 0, sizeof *b);
  for (int i = 0; i < n_prompt; i++)
    b->hist[i] = i + 1;
  b->s.hist = b->hist;
  b->s.n_prompt = n_prompt;
  b->s.sp = samp_params_default();
}

typedef struct plan {
  const batch_t *b;
  sched_seq *const *owner;
  sched_seq *failed[1];
  int n_failed;
} plan;

static void do_plan(sched_t *s, plan *p) {
  assert_int_equal(sched_plan(s, &p->b, &p->owner, p->failed, &p->n_failed), 0);
  assert_true(sched_is_valid(s));
}

/* Pretend the step ran: commit, and give every sampling sequence one more id. */
static void run_step(sched_t *s, plan *p) {
  sched_commit(s);
  for (int k = 0; k < p->b->n_seqs; k++)
    if (p->b->seqs[k].sample) {
      sched_seq *q = p->owner[k];
      q->hist[q->n_prompt + q->n_gen] = 1000 + q->n_gen;
      q->n_gen++;
    }
  assert_true(sched_is_valid(s));
}

static int rows_of(const plan *p, const sched_seq *q) {
  for (int k = 0; k < p->b->n_seqs; k++)
    if (p->owner[k] == q) return p->b->seqs[k].n_new;
  return 0;
}

static void test_decode_then_chunks_then_admission(void **state) {
  (void)state;
  kv_t *kv;
  sched_t *s;
  assert_int_equal(kv_create(64, PT, &kv), 0);
  assert_int_equal(sched_create(kv, 3, 8, &s), 0);
  seqbuf a, b, c, d;
  seq_init(&a, 3), seq_init(&b, 10), seq_init(&c, 2), seq_init(&d, 2);
  sched_enqueue(s, &a.s);
  sched_enqueue(s, &b.s);
  plan p;
  do_plan(s, &p); /* A whole (3 rows, samples), B its first 5 rows */
  assert_int_equal(rows_of(&p, &a.s), 3);
  assert_int_equal(rows_of(&p, &b.s), 5);
  assert_true(p.b->seqs[0].sample && !p.b->seqs[1].sample);
  assert_int_equal(p.b->n_tokens, 8);
  run_step(s, &p);
  assert_int_equal(a.s.state, ENG_DECODING);
  assert_int_equal(b.s.state, ENG_PREFILLING);
  sched_enqueue(s, &c.s);
  sched_enqueue(s, &d.s);
  do_plan(s, &p); /* A decodes first, B's 5 remaining, C admitted with 2: 8 rows */
  assert_int_equal(p.b->seqs[0].n_new, 1);
  assert_ptr_equal(p.owner[0], &a.s);
  assert_int_equal(p.b->seqs[0].pos0, 3);
  assert_int_equal(p.b->seqs[0].step, 1); /* Philox counter: one id sampled before */
  assert_int_equal(rows_of(&p, &b.s), 5);
  assert_int_equal(rows_of(&p, &c.s), 2);
  assert_int_equal(rows_of(&p, &d.s), 0); /* max_batch 3 */
  assert_int_equal(sched_n_queued(s), 1);
  run_step(s, &p);
  sched_remove(s, &a.s); /* A finishes: D gets in */
  do_plan(s, &p);
  assert_int_equal(rows_of(&p, &d.s), 2);
  assert_int_equal(sched_n_running(s), 3);
  sched_destroy(s); /* frees the pages of whatever is linked */
  assert_int_equal(kv_pages_used(kv), 0);
  kv_destroy(kv);
}

static void test_admission_needs_pages_fcfs(void **state) {
  (void)state;
  kv_t *kv;
  sched_t *s;
  assert_int_equal(kv_create(4, PT, &kv), 0); /* 16 tokens */
  assert_int_equal(sched_create(kv, 8, 64, &s), 0);
  seqbuf a, b, c;
  seq_init(&a, 9), seq_init(&b, 9), seq_init(&c, 2);
  sched_enqueue(s, &a.s);
  sched_enqueue(s, &b.s);
  sched_enqueue(s, &c.s);
  plan p;
  do_plan(s, &p); /* A takes 3 pages; B needs 3 of the 1 left, and C waits behind B */
  assert_int_equal(sched_n_running(s), 1);
  assert_int_equal(sched_n_queued(s), 2);
  assert_int_equal(kv_pages_used(kv), 3);
  sched_remove(s, &b.s); /* B cancelled while queued */
  do_plan(s, &p);
  assert_int_equal(rows_of(&p, &c.s), 2);
  sched_destroy(s);
  kv_destroy(kv);
}

static void test_preempt_newest_keeps_history(void **state) {
  (void)state;
  kv_t *kv;
  sched_t *s;
  assert_int_equal(kv_create(4, PT, &kv), 0);
  assert_int_equal(sched_create(kv, 8, 64, &s), 0);
  seqbuf a, b;
  seq_init(&a, 4), seq_init(&b, 4);
  sched_enqueue(s, &a.s);
  sched_enqueue(s, &b.s);
  plan p;
  do_plan(s, &p);
  run_step(s, &p); /* both hold one full page and one id: 2 pages free */
  for (int i = 0; i < 4; i++) {
    do_plan(s, &p);
    run_step(s, &p);
  }
  /* both at n_done 8 with 2 pages each: the next decodes need a third page each */
  assert_int_equal(kv_pages_free(kv), 0);
  do_plan(s, &p);
  assert_int_equal(sched_preemptions(s), 1);
  assert_int_equal(b.s.state, ENG_QUEUED); /* B, the newest, went back */
  assert_int_equal(b.s.n_done, 0);
  assert_int_equal(b.s.n_gen, 5); /* its ids stay */
  assert_int_equal(b.s.n_preempt, 1);
  assert_ptr_equal(sched_first_queued(s), &b.s);
  assert_int_equal(p.b->n_seqs, 1);
  assert_int_equal(a.s.kv.n_pages, 3);
  run_step(s, &p);
  sched_remove(s, &a.s);
  do_plan(s, &p); /* B recomputes prompt + its 5 ids, and samples its 6th id */
  assert_int_equal(rows_of(&p, &b.s), 9);
  assert_int_equal(p.b->seqs[0].pos0, 0);
  assert_int_equal(p.b->seqs[0].step, 5);
  assert_int_equal(p.b->seqs[0].n_prompt, 4); /* penalties still see the real prompt */
  assert_int_equal(p.b->seqs[0].n_hist, 9);
  assert_true(p.b->seqs[0].sample);
  assert_int_equal(p.b->tokens[8], 1004); /* the last generated id is fed again */
  sched_destroy(s);
  kv_destroy(kv);
}

static void test_lone_sequence_without_page_fails(void **state) {
  (void)state;
  kv_t *kv;
  sched_t *s;
  assert_int_equal(kv_create(2, PT, &kv), 0);
  assert_int_equal(sched_create(kv, 8, 64, &s), 0);
  seqbuf a;
  seq_init(&a, 8);
  sched_enqueue(s, &a.s);
  plan p;
  do_plan(s, &p);
  run_step(s, &p); /* 8 positions, 2 pages, the 9th needs a third */
  do_plan(s, &p);
  assert_int_equal(p.n_failed, 1);
  assert_ptr_equal(p.failed[0], &a.s);
  assert_int_equal(p.b->n_seqs, 0);
  assert_int_equal(kv_pages_used(kv), 0);
  assert_int_equal(sched_n_running(s) + sched_n_queued(s), 0);
  sched_destroy(s);
  kv_destroy(kv);
}

/* Random arrivals, finishes and cancellations under page pressure: invariants hold, rows
 * never exceed the budget, every decoding sequence runs every step. */
/* Ten sequences of an 8-token prompt and 24 new tokens (8 pages each when done) over 40
 * pages, all queued at once, run to the end under admit_growth g. Returns the preemptions;
 * *max_run gets the most sequences running at once. */
static uint64_t run_growth(double g, int *max_run) {
  kv_t *kv;
  sched_t *s;
  assert_int_equal(kv_create(40, PT, &kv), 0);
  assert_int_equal(sched_create(kv, 10, 64, &s), 0);
  sched_set_admit_growth(s, g);
  enum { N = 10, NEW = 24 };
  static seqbuf q[N];
  for (int i = 0; i < N; i++) {
    seq_init(&q[i], 8);
    q[i].s.max_new = NEW;
    sched_enqueue(s, &q[i].s);
  }
  int done = 0;
  *max_run = 0;
  for (int step = 0; step < 2000 && done < N; step++) {
    plan p;
    do_plan(s, &p);
    assert_int_equal(p.n_failed, 0);
    if (sched_n_running(s) > *max_run) *max_run = sched_n_running(s);
    run_step(s, &p);
    for (int k = 0; k < p.b->n_seqs; k++)
      if (p.b->seqs[k].sample && p.owner[k]->n_gen >= NEW) {
        sched_remove(s, p.owner[k]);
        done++;
      }
  }
  assert_int_equal(done, N);
  assert_int_equal(kv_pages_used(kv), 0);
  uint64_t n = sched_preemptions(s);
  sched_destroy(s);
  kv_destroy(kv);
  return n;
}

static void test_admit_growth(void **state) {
  (void)state;
  int r0, r5, r1;
  /* 0: all ten admitted on their prompts' 2 pages, preempted as they grow */
  uint64_t p0 = run_growth(0, &r0);
  assert_int_equal(r0, 10);
  assert_true(p0 > 0);
  /* 1: five at a time (8 pages each), none preempted */
  uint64_t p1 = run_growth(1, &r1);
  assert_int_equal(r1, 5);
  assert_int_equal(p1, 0);
  /* half: in between */
  uint64_t p5 = run_growth(0.5, &r5);
  print_message("admit_growth 0 / 0.5 / 1: %d / %d / %d running at most, %llu / %llu / %llu "
                "preemptions\n",
                r0, r5, r1, (unsigned long long)p0, (unsigned long long)p5, (unsigned long long)p1);
  assert_true(r5 > 5 && r5 < 10);
  assert_true(p5 < p0);
}

static void test_random_run_valid(void **state) {
  (void)state;
  kv_t *kv;
  sched_t *s;
  assert_int_equal(kv_create(24, PT, &kv), 0);
  assert_int_equal(sched_create(kv, 6, 12, &s), 0);
  enum { N = 40 };
  static seqbuf q[N];
  int max_tok[N];
  uint64_t x = 12345;
  int next = 0, done = 0;
  for (int step = 0; step < 5000 && done < N; step++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (next < N && x % 3 == 0) {
      seq_init(&q[next], 1 + (int)((x >> 8) % 30));
      max_tok[next] = 1 + (int)((x >> 20) % 40);
      sched_enqueue(s, &q[next].s);
      next++;
    }
    if (x % 17 == 0 && next > 0) { /* cancel someone, in any state */
      seqbuf *v = &q[(x >> 30) % (uint64_t)next];
      if (v->s.linked_ && v->s.n_gen < max_tok[v - q]) {
        sched_remove(s, &v->s);
        max_tok[v - q] = -1;
        done++;
      }
    }
    plan p;
    do_plan(s, &p);
    assert_int_equal(p.n_failed, 0); /* every request fits the cache alone */
    assert_true(p.b->n_tokens <= 12);
    for (sched_seq *r = sched_first_running(s); r; r = sched_next(r))
      if (r->state == ENG_DECODING) assert_int_equal(rows_of(&p, r), 1);
    /* one-token rows are decode rows: never a one-token chunk of a longer history */
    for (int k = 0; k < p.b->n_seqs; k++) {
      const sched_seq *r = p.owner[k];
      if (p.b->seqs[k].n_new == 1)
        assert_true(r->state == ENG_DECODING || r->n_prompt + r->n_gen == 1);
    }
    run_step(s, &p);
    for (int k = 0; k < p.b->n_seqs; k++) {
      seqbuf *v = (seqbuf *)p.owner[k];
      if (p.b->seqs[k].sample && v->s.n_gen >= max_tok[v - q]) {
        sched_remove(s, &v->s);
        done++;
      }
    }
  }
  if (done != N)
    fail_msg("%d of %d finished; %d running, %d queued", done, N, sched_n_running(s),
             sched_n_queued(s));
  assert_int_equal(done, N);
  assert_true(sched_preemptions(s) > 0);
  assert_int_equal(kv_pages_used(kv), 0);
  sched_destroy(s);
  kv_destroy(kv);
}

/* ---- split mode: decode batches next to a prefill batch in flight ---------------------------- */

typedef struct split {
  const batch_t *db, *pb;
  sched_seq *const *downer, *const *powner;
  sched_seq *failed[1];
  int n_failed;
} split;

static int do_split(sched_t *s, split *p, int prefill) {
  int rc =
      sched_plan_split(s, prefill, &p->db, &p->downer, &p->pb, &p->powner, p->failed, &p->n_failed);
  assert_true(sched_is_valid(s));
  return rc;
}

static int split_rows(const batch_t *b, sched_seq *const *owner, const sched_seq *q) {
  for (int k = 0; k < b->n_seqs; k++)
    if (owner[k] == q) return b->seqs[k].n_new;
  return 0;
}

/* Commit one batch and give each sampling sequence its id, as the engine does. */
static void split_done(sched_t *s, const batch_t *b, sched_seq *const *owner, int prefill) {
  if (prefill)
    sched_commit_prefill(s);
  else
    sched_commit(s);
  for (int k = 0; k < b->n_seqs; k++) {
    sched_seq *q = owner[k];
    if (!q || !b->seqs[k].sample) continue;
    q->hist[q->n_prompt + q->n_gen] = 1000 + q->n_gen;
    q->n_gen++;
  }
  assert_true(sched_is_valid(s));
}

static void test_split_batches(void **state) {
  (void)state;
  kv_t *kv;
  sched_t *s;
  assert_int_equal(kv_create(64, PT, &kv), 0);
  assert_int_equal(sched_create(kv, 4, 8, &s), 0);
  seqbuf a, b, c;
  seq_init(&a, 3), seq_init(&b, 10), seq_init(&c, 6);
  sched_enqueue(s, &a.s);
  sched_enqueue(s, &b.s);
  split p;
  assert_int_equal(do_split(s, &p, 1), 0); /* nothing decodes; A whole, B 5 rows */
  assert_int_equal(p.db->n_seqs, 0);
  assert_int_equal(split_rows(p.pb, p.powner, &a.s), 3);
  assert_int_equal(split_rows(p.pb, p.powner, &b.s), 5);
  assert_true(sched_prefill_in_flight(s) && a.s.in_flight_ && b.s.in_flight_);
  const batch_t *pb = p.pb;
  /* while it runs: no second prefill batch, and the first one stays as it was */
  assert_int_equal(do_split(s, &p, 1), NS_EINVAL);
  assert_int_equal(do_split(s, &p, 0), 0);
  assert_int_equal(p.db->n_seqs, 0);
  assert_ptr_equal(p.pb, pb);
  assert_int_equal(p.pb->n_seqs, 2);
  split_done(s, p.pb, p.powner, 1);
  assert_false(sched_prefill_in_flight(s) || a.s.in_flight_ || b.s.in_flight_);
  assert_int_equal(a.s.state, ENG_DECODING);
  assert_int_equal(b.s.n_done, 5);
  /* A decodes in its own batch, B's last 5 rows (and C's whole prompt) are the prefill */
  sched_enqueue(s, &c.s);
  assert_int_equal(do_split(s, &p, 1), 0);
  assert_int_equal(p.db->n_seqs, 1);
  assert_ptr_equal(p.downer[0], &a.s);
  assert_int_equal(p.db->seqs[0].n_new, 1);
  assert_int_equal(split_rows(p.pb, p.powner, &b.s), 5);
  assert_int_equal(split_rows(p.pb, p.powner, &c.s), 3); /* the 3 rows left: a chunk of C */
  split_done(s, p.db, p.downer, 0);
  /* B removed (cancelled) in flight: its pages stay taken until the step is over */
  int used = kv_pages_used(kv), b_pages = b.s.kv.n_pages;
  sched_remove(s, &b.s);
  assert_true(sched_is_valid(s));
  assert_int_equal(kv_pages_used(kv), used);
  assert_null(p.powner[0]);
  assert_int_equal(do_split(s, &p, 0), 0); /* A decodes on */
  assert_int_equal(p.db->n_seqs, 1);
  split_done(s, p.db, p.downer, 0);
  used = kv_pages_used(kv);
  split_done(s, p.pb, p.powner, 1);
  assert_int_equal(kv_pages_used(kv), used - b_pages);
  assert_int_equal(b.s.n_done, 5); /* not advanced: it was gone */
  assert_int_equal(c.s.n_done, 3);
  assert_int_equal(do_split(s, &p, 1), 0); /* the rest of C */
  assert_int_equal(split_rows(p.pb, p.powner, &c.s), 3);
  sched_abort_prefill(s); /* a failed step: nothing advanced, marks cleared */
  assert_int_equal(c.s.n_done, 3);
  assert_false(c.s.in_flight_ || sched_prefill_in_flight(s));
  assert_true(sched_is_valid(s));
  sched_destroy(s);
  assert_int_equal(kv_pages_used(kv), 0);
  kv_destroy(kv);
}

static void test_split_never_preempts_in_flight(void **state) {
  (void)state;
  kv_t *kv;
  sched_t *s;
  assert_int_equal(kv_create(5, PT, &kv), 0); /* 20 tokens */
  assert_int_equal(sched_create(kv, 4, 16, &s), 0);
  seqbuf a, b;
  seq_init(&a, 3), seq_init(&b, 16);
  sched_enqueue(s, &a.s);
  split p;
  assert_int_equal(do_split(s, &p, 1), 0);
  split_done(s, p.pb, p.powner, 1); /* A decodes: 4 tokens in its one page */
  sched_enqueue(s, &b.s);
  assert_int_equal(do_split(s, &p, 1), 0); /* A's row 4 fits its page; B takes the other 4 */
  assert_int_equal(p.db->n_seqs, 1);
  assert_int_equal(split_rows(p.pb, p.powner, &b.s), 16);
  assert_int_equal(kv_pages_free(kv), 0);
  split_done(s, p.db, p.downer, 0);
  /* A needs a fifth page while B (newer) is in flight: A is preempted, never B */
  assert_int_equal(do_split(s, &p, 0), 0);
  assert_int_equal(p.db->n_seqs, 0);
  assert_int_equal(a.s.state, ENG_QUEUED);
  assert_int_equal(a.s.n_preempt, 1);
  assert_int_equal(b.s.state, ENG_PREFILLING);
  assert_true(b.s.in_flight_);
  assert_int_equal(p.n_failed, 0);
  split_done(s, p.pb, p.powner, 1);
  assert_int_equal(b.s.state, ENG_DECODING);
  sched_destroy(s);
  kv_destroy(kv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_then_chunks_then_admission),
      cmocka_unit_test(test_admission_needs_pages_fcfs),
      cmocka_unit_test(test_preempt_newest_keeps_history),
      cmocka_unit_test(test_lone_sequence_without_page_fails),
      cmocka_unit_test(test_random_run_valid),
      cmocka_unit_test(test_admit_growth),
      cmocka_unit_test(test_split_batches),
      cmocka_unit_test(test_split_never_preempts_in_flight),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
