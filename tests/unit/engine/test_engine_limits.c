/* test_engine_limits.c — what eng_submit refuses and why (context, KV cache, vocabulary,
 * sampling settings, queue full, draining), eng_start's errors, eng_stop failing requests
 * in flight, and failure isolation: a backend error fails only that step's requests, a
 * lost backend marks the engine dead. Every accepted request gets exactly one final. The
 * group runs twice: prompt chunks in the decode steps, then on a prefill lane
 * (engine.prefill_stream), where a failed prompt step fails only its own requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "eng_fixture.h"

#include "backend_select.h"
#include "eng_int.h"
#include "ns_err.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL "tiny_engine_limits"

static const char *model(void) {
  return fx_model(MODEL);
}

static void set(cfg_t *c, const char *kv) {
  char err[256];
  if (cfg_set(c, kv, err, sizeof err)) fail_msg("%s: %s", kv, err);
}

static void assert_has(const char *s, const char *sub) {
  if (!strstr(s, sub)) fail_msg("'%s' does not contain '%s'", s, sub);
}

/* ---- a CPU backend that fails or slows down on request ------------------------------------ */

enum { POISON = 499 };
static const backend_ops *cpu_ops;
static backend_ops poison_ops;
static atomic_int poison_fatal, backend_lost, slow_steps;

/* A step that prefills a prompt starting with POISON fails (NS_EIO), or loses the backend
 * (NS_ECUDA, is_dead) when poison_fatal is set; with slow_steps every step takes 1 ms. */
static int poison_step_begin(backend_t *be, const batch_t *b) {
  if (atomic_load(&slow_steps)) usleep(1000);
  for (int k = 0; k < b->n_seqs; k++)
    if (b->seqs[k].pos0 == 0 && b->tokens[b->seqs[k].tok0] == POISON) {
      if (!atomic_load(&poison_fatal)) return NS_EIO;
      atomic_store(&backend_lost, 1);
      return NS_ECUDA;
    }
  return cpu_ops->step_begin(be, b);
}

static int poison_is_dead(backend_t *be) {
  (void)be;
  return atomic_load(&backend_lost);
}

static int poison_factory(const cfg_t *cfg, const model_t *m, backend_t **be, char *err,
                          size_t errlen) {
  int rc = be_create_for_cfg(cfg, m, be, err, errlen);
  if (rc) return rc;
  cpu_ops = (*be)->ops;
  poison_ops = *cpu_ops;
  poison_ops.step_begin = poison_step_begin;
  poison_ops.is_dead = poison_is_dead;
  (*be)->ops = &poison_ops;
  return 0;
}

static void test_submit_checks(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, model());
  set(&c, "engine.max_seq_len=512");
  set(&c, "engine.kv_cache_bytes=2097152"); /* 256 pages of 16 tokens */
  fx_eng f;
  fx_start(&f, &c, 16);
  eng_stats_t st;
  eng_stats(f.e, &st);
  assert_int_equal(st.max_context, 512); /* min(engine.max_seq_len, the model's 2048) */
  assert_int_equal(st.kv_pages_total, 256);
  static int32_t p[600];
  fx_rand_ids(p, 600, 0, 500, 3);
  char err[256];
  fx_req q = fx_req_greedy(p, 400, 200);
  assert_int_equal(fx_submit(&f, 1, &q, err, sizeof err), NS_EINVAL);
  assert_string_equal(err, "prompt (400 tokens) + max_tokens (200) exceeds the context (512)");
  q = fx_req_greedy(p, 0, 10);
  assert_int_equal(fx_submit(&f, 2, &q, err, sizeof err), NS_EINVAL);
  assert_has(err, "prompt is empty");
  q = fx_req_greedy(p, 10, 0);
  assert_int_equal(fx_submit(&f, 3, &q, err, sizeof err), NS_EINVAL);
  assert_has(err, "max_tokens");
  int32_t bad[3] = {5, 512, 7};
  q = fx_req_greedy(bad, 3, 10);
  assert_int_equal(fx_submit(&f, 4, &q, err, sizeof err), NS_EINVAL);
  assert_has(err, "prompt token 1 (id 512) is outside the vocabulary (512 ids)");
  q = fx_req_greedy(p, 10, 10);
  q.sp.n_logprobs = 21;
  assert_int_equal(fx_submit(&f, 5, &q, err, sizeof err), NS_EINVAL);
  assert_has(err, "logprobs (21)");
  q = fx_req_greedy(p, 10, 10);
  q.sp.top_p = 0;
  assert_int_equal(fx_submit(&f, 6, &q, err, sizeof err), NS_EINVAL);
  assert_has(err, "top_p");
  /* the logit bias: ids in the vocabulary, increasing, biases finite */
  samp_bias bias[3] = {{3, 1.0f}, {9, -100.0f}, {512, 2.0f}};
  static const char *const bias_err[3] = {"entry 2 (id 512", "entry 1 (id 3", "entry 0 (id 3"};
  for (int k = 0; k < 3; k++) {
    if (k == 1) bias[1].id = 3, bias[2].id = 20;    /* repeated */
    if (k == 2) bias[0].bias = NAN, bias[1].id = 9; /* NaN */
    q = fx_req_greedy(p, 10, 10);
    q.sp.bias = bias, q.sp.n_bias = 3;
    assert_int_equal(fx_submit(&f, 6, &q, err, sizeof err), NS_EINVAL);
    assert_has(err, bias_err[k]);
  }
  static samp_bias many[SAMP_MAX_BIAS + 1];
  for (int i = 0; i <= SAMP_MAX_BIAS; i++)
    many[i] = (samp_bias){i % 512, 1.0f}; /* the count is what is refused */
  q = fx_req_greedy(p, 10, 10);
  q.sp.bias = many, q.sp.n_bias = SAMP_MAX_BIAS + 1;
  assert_int_equal(fx_submit(&f, 6, &q, err, sizeof err), NS_EINVAL);
  assert_has(err, "at most 1024");
  /* refused requests get no event at all */
  fx_pump(&f, 0.05);
  assert_int_equal(f.n_events, 0);
  /* at the limit: accepted */
  q = fx_req_greedy(p, 500, 12);
  q.ignore_eos = 1;
  assert_int_equal(fx_submit(&f, 7, &q, err, sizeof err), 0);
  fx_wait_final(&f, 7, 60);
  assert_int_equal(f.res[7].finish, ENG_FIN_LENGTH);
  assert_int_equal(f.res[7].n_ids, 12);
  fx_stop(&f);

  /* a KV cache smaller than one whole-context request: the context served is what it holds
   * (what /v1/models reports), and a request past it is refused as past the context */
  set(&c, "engine.kv_cache_bytes=163840"); /* 20 pages: 320 tokens */
  fx_start(&f, &c, 4);
  eng_stats(f.e, &st);
  assert_int_equal(st.max_context, 320);
  q = fx_req_greedy(p, 300, 21);
  assert_int_equal(fx_submit(&f, 1, &q, err, sizeof err), NS_EINVAL);
  assert_has(err, "exceeds the context (320)");
  q = fx_req_greedy(p, 300, 20);
  assert_int_equal(fx_submit(&f, 2, &q, err, sizeof err), 0);
  fx_wait_final(&f, 2, 60);
  assert_int_equal(f.res[2].finish, ENG_FIN_LENGTH);
  assert_int_equal(f.res[2].n_ids, 20);
  fx_stop(&f);
  cfg_free(&c);
}

static void test_start_errors(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, "/nonexistent/model-dir");
  eng_t *e = NULL;
  char err[512];
  assert_true(eng_start(&c, NULL, NULL, &e, err, sizeof err) < 0);
  assert_null(e);
  assert_has(err, "/nonexistent/model-dir");
  cfg_free(&c);

  fx_cfg(&c, model());
  set(&c, "engine.backend=cuda");
  int rc = eng_start(&c, NULL, NULL, &e, err, sizeof err);
#ifndef NS_HAVE_CUDA_BACKEND
  assert_int_equal(rc, NS_EUNSUPPORTED);
  assert_has(err, "built without the CUDA backend");
  set(&c, "engine.backend=auto"); /* falls back to the CPU */
  assert_int_equal(eng_start(&c, NULL, NULL, &e, err, sizeof err), 0);
  eng_stop(e, NULL, NULL);
#else
  if (rc == 0) eng_stop(e, NULL, NULL);
#endif
  set(&c, "engine.backend=cpu");
  set(&c, "engine.kv_cache_bytes=100");
  assert_int_equal(eng_start(&c, NULL, NULL, &e, err, sizeof err), NS_EINVAL);
  assert_has(err, "engine.kv_cache_bytes");
  cfg_free(&c);
}

static void test_queue_full(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, model());
  set(&c, "engine.max_batch=1");
  set(&c, "scheduler.max_queue=2");
  fx_eng f;
  fx_start(&f, &c, 16);
  int32_t p[8];
  fx_rand_ids(p, 8, 0, 500, 4);
  fx_req q = fx_req_greedy(p, 8, 1500);
  q.ignore_eos = 1;
  char err[256];
  int accepted = 0, busy = 0;
  for (int i = 1; i <= 6; i++) {
    int rc = fx_submit(&f, (uint64_t)i, &q, err, sizeof err);
    if (rc == 0) accepted++;
    if (rc == NS_EBUSY) {
      busy++;
      assert_has(err, "scheduler.max_queue");
    }
    assert_true(rc == 0 || rc == NS_EBUSY);
  }
  /* one may run, two may wait */
  assert_true(busy >= 3);
  assert_true(accepted >= 2 && accepted <= 3);
  for (int i = 1; i <= 6; i++)
    eng_cancel(f.e, (uint64_t)i);
  for (int i = 1; i <= 6; i++)
    if (f.res[i].id) fx_wait_final(&f, (uint64_t)i, 60);
  fx_stop(&f); /* checks: every accepted one got exactly one final event */
  cfg_free(&c);
}

static void test_drain_then_stop(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, model());
  set(&c, "engine.max_batch=2");
  fx_eng f;
  fx_start(&f, &c, 16);
  int32_t p[8];
  fx_rand_ids(p, 8, 0, 500, 5);
  fx_req shortq = fx_req_greedy(p, 8, 20), longq = fx_req_greedy(p, 8, 2000);
  shortq.ignore_eos = longq.ignore_eos = 1;
  char err[256];
  for (int i = 1; i <= 3; i++)
    assert_int_equal(fx_submit(&f, (uint64_t)i, &shortq, err, sizeof err), 0);
  eng_drain(f.e);
  assert_int_equal(fx_submit(&f, 4, &shortq, err, sizeof err), NS_ECLOSED);
  assert_has(err, "shutting down");
  /* accepted ones (the queued third too) finish normally */
  fx_wait_all(&f, 1, 3, 60);
  for (int i = 1; i <= 3; i++) {
    assert_int_equal(f.res[i].final_kind, EV_DONE);
    assert_int_equal(f.res[i].finish, ENG_FIN_LENGTH);
    assert_int_equal(f.res[i].n_ids, 20);
  }
  fx_stop(&f);

  /* stop with requests running and queued: each gets EV_ERROR NS_ECLOSED from eng_stop */
  atomic_store(&slow_steps, 1); /* none of them can finish first */
  fx_start_with(&f, &c, 16, poison_factory);
  for (int i = 1; i <= 5; i++)
    assert_int_equal(fx_submit(&f, (uint64_t)i, &longq, err, sizeof err), 0);
  fx_wait_ids(&f, 1, 2, 60);
  fx_halt(&f);
  for (int i = 1; i <= 5; i++) {
    assert_int_equal(f.res[i].final_kind, EV_ERROR);
    assert_int_equal(f.res[i].err, NS_ECLOSED);
    assert_string_equal(f.res[i].msg, "server shutting down");
  }
  atomic_store(&slow_steps, 0);
  fx_free(&f);
  cfg_free(&c);
}

/* A request still queued at its deadline fails with NS_ETIMEDOUT; one without a deadline
 * of its own gets scheduler.queue_timeout_s. */
static void test_queue_deadline(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, model());
  set(&c, "engine.max_batch=1");
  set(&c, "scheduler.queue_timeout_s=0.2");
  fx_eng f;
  atomic_store(&poison_fatal, 0);
  atomic_store(&backend_lost, 0);
  atomic_store(&slow_steps, 1); /* 1 ms a step: request 1 runs for seconds */
  fx_start_with(&f, &c, 8, poison_factory);
  int32_t p[8];
  fx_rand_ids(p, 8, 0, 500, 8);
  fx_req longq = fx_req_greedy(p, 8, 2000), q = fx_req_greedy(p, 8, 5);
  longq.ignore_eos = 1;
  assert_int_equal(fx_submit(&f, 1, &longq, NULL, 0), 0);
  fx_wait_ids(&f, 1, 1, 60);
  double t0 = eng_now();
  assert_int_equal(fx_submit(&f, 2, &q, NULL, 0), 0); /* default: 0.2 s */
  fx_wait_final(&f, 2, 60);
  assert_int_equal(f.res[2].final_kind, EV_ERROR);
  assert_int_equal(f.res[2].err, NS_ETIMEDOUT);
  assert_has(f.res[2].msg, "in the queue");
  assert_true(eng_now() - t0 >= 0.2);
  assert_int_equal(f.res[1].n_final, 0); /* the running one goes on */
  eng_cancel(f.e, 1);
  fx_wait_final(&f, 1, 60);
  fx_stop(&f);
  atomic_store(&slow_steps, 0);
  cfg_free(&c);
}

/* ---- failure isolation ------------------------------------------------------------------- */

static void test_backend_error_fails_only_its_step(void **state) {
  (void)state;
  atomic_store(&poison_fatal, 0);
  atomic_store(&backend_lost, 0);
  cfg_t c;
  fx_cfg(&c, model());
  fx_eng f;
  fx_start_with(&f, &c, 16, poison_factory);
  int32_t p[8], pp[8];
  fx_rand_ids(p, 8, 0, 498, 6);
  memcpy(pp, p, sizeof pp);
  pp[0] = POISON;
  fx_req a = fx_req_greedy(p, 8, 1500), bad = fx_req_greedy(pp, 8, 10);
  a.ignore_eos = 1;
  assert_int_equal(fx_submit(&f, 1, &a, NULL, 0), 0);
  fx_wait_ids(&f, 1, 2, 60);
  assert_int_equal(fx_submit(&f, 2, &bad, NULL, 0), 0);
  if (fx_prefill_stream) { /* the prompt's step on the prefill lane fails, not A's decode */
    fx_wait_final(&f, 2, 60);
    int n = f.res[1].n_ids;
    fx_wait_ids(&f, 1, n + 2, 60);
    assert_int_equal(f.res[1].n_final, 0);
    eng_cancel(f.e, 1);
    fx_wait_final(&f, 1, 60);
    assert_int_equal(f.res[1].final_kind, EV_DONE);
    assert_int_equal(f.res[1].finish, ENG_FIN_CANCELLED);
  } else {
    fx_wait_all(&f, 1, 2, 60);
  }
  for (int i = fx_prefill_stream ? 2 : 1; i <= 2; i++) { /* in the failed step */
    assert_int_equal(f.res[i].final_kind, EV_ERROR);
    assert_int_equal(f.res[i].err, NS_EIO);
    assert_has(f.res[i].msg, "backend cpu");
  }
  /* the engine goes on: a later request runs as if alone */
  fx_req c3 = fx_req_greedy(p, 8, 30);
  assert_int_equal(fx_submit(&f, 3, &c3, NULL, 0), 0);
  fx_wait_final(&f, 3, 60);
  fx_ref ref;
  fx_reference(model(), &c3, &ref);
  assert_int_equal(f.res[3].final_kind, EV_DONE);
  assert_int_equal(f.res[3].n_ids, ref.n_ids);
  assert_memory_equal(f.res[3].ids, ref.ids, (size_t)ref.n_ids * 4);
  free(ref.ids);
  eng_stats_t st;
  eng_stats(f.e, &st);
  assert_int_equal(st.dead, 0);
  assert_int_equal(st.kv_pages_used, 0);

  /* a lost backend: everything fails, the engine is dead, submissions are refused */
  atomic_store(&poison_fatal, 1);
  assert_int_equal(fx_submit(&f, 4, &a, NULL, 0), 0);
  fx_wait_ids(&f, 4, 2, 60);
  assert_int_equal(fx_submit(&f, 5, &bad, NULL, 0), 0);
  fx_wait_all(&f, 4, 5, 60);
  for (int i = 4; i <= 5; i++) {
    assert_int_equal(f.res[i].final_kind, EV_ERROR);
    assert_int_equal(f.res[i].err, NS_ECUDA);
  }
  eng_stats(f.e, &st);
  assert_int_equal(st.dead, 1);
  char err[256];
  assert_int_equal(fx_submit(&f, 6, &c3, err, sizeof err), NS_ECUDA);
  assert_has(err, "cannot continue");
  fx_stop(&f);
  cfg_free(&c);
}

/* last_progress_s moves while the engine idles (it wakes every second) */
static void test_idle_progress(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, model());
  fx_eng f;
  fx_start(&f, &c, 2);
  eng_stats_t a, b;
  eng_stats(f.e, &a);
  double end = eng_now() + 5;
  do {
    fx_pump(&f, 0.1);
    eng_stats(f.e, &b);
  } while (b.last_progress_s <= a.last_progress_s + 0.5 && eng_now() < end);
  assert_true(b.last_progress_s > a.last_progress_s + 0.5);
  assert_int_equal(b.steps, 0);
  fx_stop(&f);
  cfg_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_submit_checks),
      cmocka_unit_test(test_start_errors),
      cmocka_unit_test(test_queue_full),
      cmocka_unit_test(test_drain_then_stop),
      cmocka_unit_test(test_queue_deadline),
      cmocka_unit_test(test_backend_error_fails_only_its_step),
      cmocka_unit_test(test_idle_progress),
  };
  return FX_RUN_BOTH_SCHEDULES(tests);
}
