/* test_engine_sched.c — continuous batching seen from outside the engine: chunked prefill
 * keeps a running stream at one token a step; cancellation while queued, mid-prefill and
 * mid-decode frees pages within the step and leaves the others alone; 1,000
 * submit+cancel cycles leak nothing; preemption when the KV cache is too small for four
 * long requests still gives each its result alone.
 * The group runs twice: prompt chunks in the decode steps, then on a prefill lane
 * (engine.prefill_stream). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "eng_fixture.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "tiny_engine_sched"

static const char *model(void) {
  return fx_model(MODEL);
}

static void set(cfg_t *c, const char *kv) {
  char err[256];
  if (cfg_set(c, kv, err, sizeof err)) fail_msg("%s: %s", kv, err);
}

static void check_ref(fx_eng *f, uint64_t id, const fx_req *q) {
  fx_ref ref;
  fx_reference(model(), q, &ref);
  fx_res *r = &f->res[id];
  assert_int_equal(r->n_final, 1);
  if (r->final_kind != EV_DONE) fail_msg("request %llu failed: %s", (unsigned long long)id, r->msg);
  assert_int_equal(r->n_ids, ref.n_ids);
  assert_memory_equal(r->ids, ref.ids, (size_t)ref.n_ids * 4);
  assert_int_equal(r->finish, ref.finish == 1 ? ENG_FIN_LENGTH : ENG_FIN_STOP);
  free(ref.ids);
}

static void wait_pages_zero(fx_eng *f) {
  eng_stats_t st;
  eng_stats(f->e, &st);
  assert_int_equal(st.kv_pages_used, 0);
  assert_int_equal(st.running, 0);
  assert_int_equal(st.waiting, 0);
}

/* ---- chunked prefill ---------------------------------------------------------------------- */

static void test_chunked_prefill_keeps_streams_going(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, model());
  set(&c, "engine.max_batch_tokens=16");
  fx_eng f;
  fx_start(&f, &c, 4);
  int32_t pa[5], pb[100];
  fx_rand_ids(pa, 5, 0, 500, 11);
  fx_rand_ids(pb, 100, 0, 500, 12);
  fx_req a = fx_req_greedy(pa, 5, 2000), b = fx_req_greedy(pb, 100, 5);
  a.ignore_eos = b.ignore_eos = 1;
  assert_int_equal(fx_submit(&f, 1, &a, NULL, 0), 0);
  fx_wait_ids(&f, 1, 1, 60); /* A decodes */
  assert_int_equal(fx_submit(&f, 2, &b, NULL, 0), 0);
  fx_wait_final(&f, 2, 60);
  eng_cancel(f.e, 1); /* A has done its part */
  fx_wait_final(&f, 1, 60);
  fx_res *ra = &f.res[1], *rb = &f.res[2];
  assert_int_equal(ra->finish, ENG_FIN_CANCELLED);
  assert_int_equal(rb->n_ids, 5);
  /* A got exactly one token at every step from its first to its last */
  for (int i = 1; i < ra->n_ids; i++)
    assert_int_equal(ra->id_steps[i], ra->id_steps[i - 1] + 1);
  /* B's 100 prompt tokens needed at least 7 steps of 15 free rows, all while A ran */
  uint64_t b_first = rb->id_steps[0];
  assert_true(ra->id_steps[ra->n_ids - 1] >= b_first);
  assert_true(b_first >= ra->id_steps[0] + 7);
  a.max_tokens = ra->n_ids; /* A's ids so far are its result alone */
  fx_ref ref;
  fx_reference(model(), &a, &ref);
  assert_memory_equal(ra->ids, ref.ids, (size_t)ra->n_ids * 4);
  free(ref.ids);
  check_ref(&f, 2, &b);
  wait_pages_zero(&f);
  fx_stop(&f);
  cfg_free(&c);
}

/* ---- cancellation ------------------------------------------------------------------------- */

static void test_cancel_queued_prefill_decode(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, model());
  set(&c, "engine.max_batch=2");
  set(&c, "engine.max_batch_tokens=16");
  fx_eng f;
  fx_start(&f, &c, 8);
  static int32_t pl[1900];
  int32_t ps[8];
  fx_rand_ids(pl, 1900, 0, 500, 21);
  fx_rand_ids(ps, 8, 0, 500, 22);
  /* C: an unrelated request that must come out as if alone */
  fx_req qc = fx_req_greedy(ps, 8, 300); /* <= 20 pages; outlives L's prefill */
  qc.ignore_eos = 1;
  assert_int_equal(fx_submit(&f, 3, &qc, NULL, 0), 0);
  fx_wait_ids(&f, 3, 1, 60);

  /* mid-prefill: a 1,900-token prompt takes ~130 steps of 15 rows */
  fx_req ql = fx_req_greedy(pl, 1900, 10);
  assert_int_equal(fx_submit(&f, 1, &ql, NULL, 0), 0);
  eng_stats_t st;
  double end = eng_now() + 60;
  do /* L admitted: its prompt's pages are reserved */
    eng_stats(f.e, &st);
  while (st.kv_pages_used < 1900 / 16 && eng_now() < end);
  assert_true(st.kv_pages_used >= 1900 / 16);
  assert_int_equal(st.running, 2);
  /* queued: max_batch 2 is full */
  assert_int_equal(fx_submit(&f, 2, &qc, NULL, 0), 0);
  eng_cancel(f.e, 2);
  eng_cancel(f.e, 1);
  eng_cancel(f.e, 1);   /* idempotent */
  eng_cancel(f.e, 999); /* unknown */
  fx_wait_all(&f, 1, 2, 60);
  for (uint64_t id = 1; id <= 2; id++) {
    fx_res *r = &f.res[id];
    assert_int_equal(r->final_kind, EV_DONE);
    assert_int_equal(r->finish, ENG_FIN_CANCELLED);
    assert_int_equal(r->n_ids, 0);
    assert_int_equal(r->completion_tokens, 0);
  }
  assert_int_equal(f.res[1].prompt_tokens, 1900);
  /* pages back within the step: only C's are left (<= 20 pages; L alone held 119). The
   * engine takes the cancellations it has at the top of a step, so request 2's may come a
   * step before L's (eng_cancel(2) taken before eng_cancel(1) was made): its final then saw
   * L's pages still held, and no more than C's and L's */
  assert_true(f.res[1].pages_at_final <= 20);
  if (f.res[2].final_step == f.res[1].final_step)
    assert_true(f.res[2].pages_at_final <= 20);
  else
    assert_true(f.res[2].final_step < f.res[1].final_step &&
                f.res[2].pages_at_final <= 20 + (1900 + 15) / 16);

  /* mid-decode */
  fx_req qd = fx_req_greedy(ps, 8, 1000);
  qd.ignore_eos = 1;
  assert_int_equal(fx_submit(&f, 4, &qd, NULL, 0), 0);
  fx_wait_ids(&f, 4, 3, 60);
  eng_cancel(f.e, 4);
  fx_wait_final(&f, 4, 60);
  assert_int_equal(f.res[4].finish, ENG_FIN_CANCELLED);
  assert_true(f.res[4].n_ids >= 3 && f.res[4].n_ids < 1000);
  assert_int_equal(f.res[4].completion_tokens, f.res[4].n_ids);
  assert_true(f.res[4].pages_at_final <= 20);
  fx_wait_final(&f, 3, 60);
  check_ref(&f, 3, &qc);
  wait_pages_zero(&f);
  eng_cancel(f.e, 3); /* finished: ignored */
  fx_pump(&f, 0.05);
  fx_stop(&f);
  cfg_free(&c);
}

static size_t heap_in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks;
}

static void test_submit_cancel_cycles(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, model());
  fx_eng f;
  fx_start(&f, &c, 1000);
  int32_t p[40];
  fx_rand_ids(p, 40, 0, 500, 31);
  size_t heap0 = 0;
  for (int i = 1; i <= 1000; i++) {
    fx_req q = fx_req_greedy(p, 10 + i % 30, 500);
    q.ignore_eos = 1;
    q.stream = i % 2;
    q.sp.n_logprobs = i % 4;
    eng_stats_t st0, st;
    eng_stats(f.e, &st0);
    assert_int_equal(fx_submit(&f, (uint64_t)i, &q, NULL, 0), 0);
    if (i % 3 == 1) { /* some mid-decode: a step or two past admission */
      double end = eng_now() + 60;
      do
        eng_stats(f.e, &st);
      while ((st.kv_pages_used == 0 || st.steps < st0.steps + 2) && eng_now() < end);
    }
    eng_cancel(f.e, (uint64_t)i);
    fx_wait_final(&f, (uint64_t)i, 60);
    fx_res *r = &f.res[i];
    assert_int_equal(r->final_kind, EV_DONE);
    assert_int_equal(r->finish, ENG_FIN_CANCELLED);
    assert_int_equal(r->pages_at_final, 0);
    if (i % 3 == 1) assert_true(r->completion_tokens >= 1);
    free(r->ids), free(r->id_steps), free(r->text);
    r->ids = NULL, r->id_steps = NULL, r->text = NULL;
    if (i == 100) heap0 = heap_in_use();
  }
  wait_pages_zero(&f);
  /* no growth after the first 100 (0 under ASan, which keeps its own books) */
  size_t heap1 = heap_in_use();
  if (heap1 > heap0 + 256 * 1024)
    fail_msg("heap grew from %zu to %zu bytes over 900 cycles", heap0, heap1);
  fx_stop(&f);
  cfg_free(&c);
}

/* ---- preemption ------------------------------------------------------------------------------ */

/* Four requests of 30 + 200 tokens, two greedy and two seeded with penalties, through a KV
 * cache of 20 pages (one request fits, four at once do not), under scheduler.admit_growth
 * growth: preempted (growth 0: admitted on their prompts' pages) or not (1: one at a time),
 * the results are the reference's. */
static void four_requests(const char *growth, int preempted) {
  cfg_t c;
  fx_cfg(&c, model());
  set(&c, "engine.kv_cache_bytes=163840"); /* 20 pages of 16 tokens (8 KiB each) */
  set(&c, "engine.max_batch_tokens=32");
  set(&c, growth);
  fx_eng f;
  fx_start(&f, &c, 8);
  eng_stats_t st;
  eng_stats(f.e, &st);
  assert_int_equal(st.kv_pages_total, 20);
  static int32_t p[4][30];
  fx_req q[4];
  for (int i = 0; i < 4; i++) {
    fx_rand_ids(p[i], 30, 0, 500, 40 + (uint64_t)i);
    q[i] = fx_req_greedy(p[i], 30, 200);
    q[i].ignore_eos = 1;
    q[i].stream = i % 2;
    if (i >= 2) { /* seeded: the Philox counter and the penalties' history must survive */
      q[i].sp.temperature = 0.9f;
      q[i].sp.seed = 5 + (uint64_t)i;
      q[i].sp.repetition_penalty = 1.2f;
      q[i].sp.frequency_penalty = 0.5f;
    }
    assert_int_equal(fx_submit(&f, (uint64_t)i + 1, &q[i], NULL, 0), 0);
  }
  fx_wait_all(&f, 1, 4, 120);
  eng_stats(f.e, &st);
  if (preempted)
    assert_true(st.preemptions > 0);
  else
    assert_int_equal(st.preemptions, 0);
  for (int i = 0; i < 4; i++) {
    check_ref(&f, (uint64_t)i + 1, &q[i]);
    /* nothing emitted twice: the text is exactly the decoded ids */
    char *want = fx_decode(f.e, f.res[i + 1].ids, f.res[i + 1].n_ids);
    assert_string_equal(f.res[i + 1].text ? f.res[i + 1].text : "", want);
    free(want);
  }
  wait_pages_zero(&f);
  fx_stop(&f);
  cfg_free(&c);
}

static void test_preemption_results_unchanged(void **state) {
  (void)state;
  four_requests("scheduler.admit_growth=0", 1);
}

static void test_admit_growth_no_preemption(void **state) {
  (void)state;
  four_requests("scheduler.admit_growth=1", 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chunked_prefill_keeps_streams_going),
      cmocka_unit_test(test_cancel_queued_prefill_decode),
      cmocka_unit_test(test_submit_cancel_cycles),
      cmocka_unit_test(test_preemption_results_unchanged),
      cmocka_unit_test(test_admit_growth_no_preemption),
  };
  return FX_RUN_BOTH_SCHEDULES(tests);
}
