/* test_engine_gen.c — the engine thread's results against an independent path: one request
 * against eng_gen_run; 32 staggered concurrent requests (greedy, and seeded sampling with
 * penalties) each identical to the same request alone; stop strings cut the text (stream
 * and not); ignore_eos runs past EOS; a non-streaming request gets one EV_TOKENS.
 * The group runs twice: prompt chunks in the decode steps, then on a prefill lane
 * (engine.prefill_stream). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "eng_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "tiny_engine_gen"

static const char *model(void) {
  return fx_model(MODEL);
}

static int is_eos(int32_t id) {
  return id == 509 || id == 511; /* the tiny model's generation_config.json */
}

/* The engine's result for request id is the reference's, ids, finish and text. The
 * reference leaves out the EOS that stopped it; the engine counts it and sends its id (as
 * vLLM does), with no text. */
static void check_same(fx_eng *f, uint64_t id, const fx_ref *ref, int n_prompt) {
  fx_res *r = &f->res[id];
  assert_int_equal(r->n_final, 1);
  if (r->final_kind != EV_DONE) fail_msg("request %llu failed: %s", (unsigned long long)id, r->msg);
  int eos = ref->finish == 2;
  if (eos && (r->n_ids != ref->n_ids + 1 || !is_eos(r->ids[ref->n_ids])))
    fail_msg("request %llu: %d ids, not the reference's %d and the EOS that stopped it",
             (unsigned long long)id, r->n_ids, ref->n_ids);
  if (r->n_ids - eos != ref->n_ids || memcmp(r->ids, ref->ids, (size_t)ref->n_ids * 4) != 0) {
    int k = 0;
    while (k < r->n_ids && k < ref->n_ids && r->ids[k] == ref->ids[k])
      k++;
    fail_msg("request %llu: %d ids, reference %d; first difference at %d", (unsigned long long)id,
             r->n_ids, ref->n_ids, k);
  }
  assert_int_equal(r->finish, ref->finish == 1 ? ENG_FIN_LENGTH : ENG_FIN_STOP);
  assert_int_equal(r->stop_idx, -1); /* EOS or length: no stop string */
  assert_int_equal(r->completion_tokens, ref->n_ids + eos);
  assert_int_equal(r->prompt_tokens, n_prompt);
  char *want = fx_decode(f->e, ref->ids, ref->n_ids);
  assert_string_equal(r->text ? r->text : "", want);
  free(want);
}

static void test_single_greedy_matches_gen(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, model());
  int32_t prompt[12];
  fx_rand_ids(prompt, 12, 0, 500, 1);
  fx_req q = fx_req_greedy(prompt, 12, 40);
  fx_ref ref;
  fx_reference(model(), &q, &ref);
  assert_true(ref.n_ids > 0);
  fx_eng f;
  fx_start(&f, &c, 4);
  assert_int_equal(fx_submit(&f, 1, &q, NULL, 0), 0);
  fx_wait_final(&f, 1, 60);
  check_same(&f, 1, &ref, 12);
  /* streaming: one EV_TOKENS per sampled id, each from its own step */
  for (int i = 1; i < f.res[1].n_ids; i++)
    assert_int_equal(f.res[1].id_steps[i], f.res[1].id_steps[i - 1] + 1);
  eng_stats_t st;
  eng_stats(f.e, &st);
  assert_int_equal(st.kv_pages_used, 0);
  assert_int_equal(st.running + st.waiting, 0);
  assert_string_equal(st.model_name, MODEL);
  assert_int_equal(st.max_context, 2048);
  assert_int_equal(st.vocab_size, 512);
  free(ref.ids);
  fx_stop(&f);
  cfg_free(&c);
}

/* ---- many requests at once -------------------------------------------------------------- */

enum { NREQ = 32 };

static void make_reqs(fx_req *q, int32_t (*prompts)[80], int seeded) {
  for (int i = 0; i < NREQ; i++) {
    int np = 1 + (i * 7) % 70;
    fx_rand_ids(prompts[i], np, 0, 508, 100 + (uint64_t)i);
    q[i] = fx_req_greedy(prompts[i], np, 1 + (i * 13) % 48);
    q[i].ignore_eos = i % 4 == 0;
    q[i].stream = i % 5 != 0;
    if (seeded) {
      q[i].sp.temperature = 0.7f + 0.05f * (float)(i % 6);
      q[i].sp.seed = 1000 + (uint64_t)i;
      q[i].sp.top_k = i % 3 == 0 ? 40 : 0;
      q[i].sp.top_p = i % 2 ? 0.95f : 1.0f;
      q[i].sp.min_p = i % 7 == 0 ? 0.02f : 0.0f;
      if (i % 3 == 1) {
        q[i].sp.repetition_penalty = 1.15f;
        q[i].sp.presence_penalty = 0.4f;
        q[i].sp.frequency_penalty = 0.3f;
      }
    }
  }
}

static void run_many(int seeded) {
  cfg_t c;
  fx_cfg(&c, model());
  char err[256];
  assert_int_equal(cfg_set(&c, "engine.max_batch=8", err, sizeof err), 0);
  assert_int_equal(cfg_set(&c, "engine.max_batch_tokens=32", err, sizeof err), 0);
  static int32_t prompts[NREQ][80];
  fx_req q[NREQ];
  fx_ref ref[NREQ];
  make_reqs(q, prompts, seeded);
  for (int i = 0; i < NREQ; i++)
    fx_reference(model(), &q[i], &ref[i]);
  fx_eng f;
  fx_start(&f, &c, NREQ);
  int max_batch_seen = 0;
  /* four waves of eight: each wave lands while the earlier ones decode */
  for (int w = 0; w < 4; w++) {
    for (int i = w * 8; i < w * 8 + 8; i++)
      assert_int_equal(fx_submit(&f, (uint64_t)i + 1, &q[i], NULL, 0), 0);
    fx_wait_ids(&f, (uint64_t)w * 8 + 2, 2, 60);
    eng_stats_t st;
    eng_stats(f.e, &st);
    if (st.batch_size > max_batch_seen) max_batch_seen = st.batch_size;
  }
  for (int i = 1; i <= NREQ; i++) {
    fx_wait_final(&f, (uint64_t)i, 60);
    eng_stats_t st;
    eng_stats(f.e, &st);
    if (st.batch_size > max_batch_seen) max_batch_seen = st.batch_size;
  }
  for (int i = 0; i < NREQ; i++) {
    check_same(&f, (uint64_t)i + 1, &ref[i], q[i].n_prompt);
    if (!q[i].stream) assert_int_equal(f.res[i + 1].n_tok_events, 1);
    free(ref[i].ids);
  }
  assert_true(max_batch_seen > 1); /* they really shared steps */
  eng_stats_t st;
  eng_stats(f.e, &st);
  assert_int_equal(st.kv_pages_used, 0);
  fx_stop(&f);
  cfg_free(&c);
}

static void test_32_concurrent_greedy(void **state) {
  (void)state;
  run_many(0);
}

static void test_32_concurrent_seeded(void **state) {
  (void)state;
  run_many(1);
}

/* ---- stop strings, EOS, non-streaming ------------------------------------------------------- */

/* A stop string taken from the middle of the reference text cuts the text at its first
 * occurrence and finishes STOP, streamed or not. */
static void test_stop_strings(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, model());
  int32_t prompt[9];
  fx_rand_ids(prompt, 9, 0, 500, 77);
  fx_req q = fx_req_greedy(prompt, 9, 60);
  q.ignore_eos = 1;
  fx_ref ref;
  fx_reference(model(), &q, &ref);
  fx_eng f;
  fx_start(&f, &c, 8);
  char *full = fx_decode(f.e, ref.ids, ref.n_ids);
  size_t n = strlen(full), p = n / 2;
  while (p + 3 < n && ((full[p] & 0xC0) == 0x80 || full[p] < 0x20 || full[p + 1] < 0x20 ||
                       full[p + 2] < 0x20 || (full[p + 1] & 0x80) || (full[p + 2] & 0x80)))
    p++;
  assert_true(p + 3 < n);
  char stop[4] = {full[p], full[p + 1], full[p + 2], 0};
  size_t cut = (size_t)(strstr(full, stop) - full);
  q.stop[0] = "\x01never";
  q.stop[1] = stop;
  q.n_stop = 2;
  assert_int_equal(fx_submit(&f, 1, &q, NULL, 0), 0);
  q.stream = 0;
  assert_int_equal(fx_submit(&f, 2, &q, NULL, 0), 0);
  fx_wait_all(&f, 1, 2, 60);
  for (uint64_t id = 1; id <= 2; id++) {
    fx_res *r = &f.res[id];
    assert_int_equal(r->final_kind, EV_DONE);
    assert_int_equal(r->finish, ENG_FIN_STOP);
    assert_int_equal(r->stop_idx, 1); /* the caller's index of the stop string */
    assert_int_equal(r->text_len, cut);
    assert_memory_equal(r->text ? r->text : "", full, cut);
    assert_true(r->n_ids < ref.n_ids); /* generation stopped there */
    assert_memory_equal(r->ids, ref.ids, (size_t)r->n_ids * 4);
  }
  assert_int_equal(f.res[2].n_tok_events, 1);
  /* stop_token_ids: the request ends at the first of them it samples (counted, no text) */
  int at = 0;
  while (ref.ids[at] != ref.ids[ref.n_ids / 2]) /* that id's first place */
    at++;
  q.n_stop = 0;
  q.stop_ids[0] = ref.ids[at];
  q.n_stop_ids = 1;
  assert_int_equal(fx_submit(&f, 3, &q, NULL, 0), 0);
  fx_wait_all(&f, 3, 3, 60);
  fx_res *r = &f.res[3];
  assert_int_equal(r->final_kind, EV_DONE);
  assert_int_equal(r->finish, ENG_FIN_STOP);
  assert_int_equal(r->stop_id, ref.ids[at]);
  assert_int_equal(r->stop_idx, -1);
  assert_int_equal(r->n_ids, at + 1);
  assert_int_equal(r->completion_tokens, at + 1);
  assert_memory_equal(r->ids, ref.ids, (size_t)(at + 1) * 4);
  char *before = fx_decode(f.e, ref.ids, at);
  assert_string_equal(r->text ? r->text : "", before);
  free(before);
  free(full);
  free(ref.ids);
  fx_stop(&f);
  cfg_free(&c);
}

/* A seeded request that samples EOS stops there; with ignore_eos it runs on to max_tokens
 * with EOS among its ids, and both match the reference. */
static void test_ignore_eos(void **state) {
  (void)state;
  int32_t prompt[6];
  fx_rand_ids(prompt, 6, 0, 500, 5);
  fx_req q = fx_req_greedy(prompt, 6, 150);
  q.sp.temperature = 1.5f;
  fx_ref ref = {0};
  int found = 0;
  for (uint64_t seed = 1; seed < 400 && !found; seed++) {
    q.sp.seed = seed;
    fx_reference(model(), &q, &ref);
    found = ref.finish == 2 && ref.n_ids < 140;
    if (!found) free(ref.ids);
  }
  assert_true(found);
  cfg_t c;
  fx_cfg(&c, model());
  fx_eng f;
  fx_start(&f, &c, 4);
  assert_int_equal(fx_submit(&f, 1, &q, NULL, 0), 0);
  fx_req qi = q;
  qi.ignore_eos = 1;
  qi.max_tokens = ref.n_ids + 10;
  fx_ref refi;
  fx_reference(model(), &qi, &refi);
  assert_int_equal(fx_submit(&f, 2, &qi, NULL, 0), 0);
  fx_wait_all(&f, 1, 2, 60);
  check_same(&f, 1, &ref, 6);
  assert_int_equal(f.res[1].finish, ENG_FIN_STOP);
  check_same(&f, 2, &refi, 6);
  assert_int_equal(f.res[2].finish, ENG_FIN_LENGTH);
  assert_int_equal(f.res[2].n_ids, ref.n_ids + 10);
  assert_memory_equal(f.res[2].ids, ref.ids, (size_t)ref.n_ids * 4);
  assert_true(is_eos(f.res[2].ids[ref.n_ids]));
  free(ref.ids);
  free(refi.ids);
  fx_stop(&f);
  cfg_free(&c);
}

static void test_non_stream_one_tokens_event(void **state) {
  (void)state;
  cfg_t c;
  fx_cfg(&c, model());
  int32_t prompt[20];
  fx_rand_ids(prompt, 20, 0, 500, 9);
  fx_req q = fx_req_greedy(prompt, 20, 30);
  q.stream = 0;
  q.ignore_eos = 1;
  fx_ref ref;
  fx_reference(model(), &q, &ref);
  fx_eng f;
  fx_start(&f, &c, 4);
  assert_int_equal(fx_submit(&f, 1, &q, NULL, 0), 0);
  fx_wait_final(&f, 1, 60);
  check_same(&f, 1, &ref, 20);
  assert_int_equal(f.res[1].n_tok_events, 1);
  assert_int_equal(f.res[1].n_ids, 30);
  assert_int_equal(f.res[1].final_step, f.res[1].id_steps[0]); /* sent together at the end */
  free(ref.ids);
  fx_stop(&f);
  cfg_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single_greedy_matches_gen),
      cmocka_unit_test(test_32_concurrent_greedy),
      cmocka_unit_test(test_32_concurrent_seeded),
      cmocka_unit_test(test_stop_strings),
      cmocka_unit_test(test_ignore_eos),
      cmocka_unit_test(test_non_stream_one_tokens_event),
  };
  return FX_RUN_BOTH_SCHEDULES(tests);
}
