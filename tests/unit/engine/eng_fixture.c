/* eng_fixture.c — the engine tests' harness: the tiny model (mkmodel_write), an engine
 * pumped from the test thread, result bookkeeping, and the eng_gen_run reference.
 * Entry points: fx_start, fx_submit, fx_pump, fx_reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "eng_fixture.h"

#include "backend.h"
#include "forward.h"
#include "gen.h"
#include "kv.h"
#include "mkmodel.h"
#include "model.h"
#include "ns_err.h"
#include "tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *fx_model(const char *name) {
  static char done[256];
  if (strcmp(done, name) == 0) return name;
  char err[512];
  mkmodel_opts o = {.shape = "tiny", .out = name, .seed = 7};
  int rc = mkmodel_write(&o, err, sizeof err);
  if (rc) fail_msg("mkmodel_write(%s): %s", name, err);
  snprintf(done, sizeof done, "%s", name);
  return name;
}

int fx_prefill_stream;

int fx_run_both_schedules(const struct CMUnitTest *tests, size_t n) {
  fx_prefill_stream = 0;
  int failed = _cmocka_run_group_tests("prompt chunks in the decode steps", tests, n, NULL, NULL);
  fx_prefill_stream = 1;
  return failed + _cmocka_run_group_tests("prompt chunks on a prefill lane", tests, n, NULL, NULL);
}

void fx_cfg(cfg_t *c, const char *model_dir) {
  cfg_init(c);
  char err[512];
  char set[600];
  snprintf(set, sizeof set, "engine.model=%s", model_dir);
  const char *sets[] = {set,
                        "engine.backend=cpu",
                        "engine.cpu_threads=1",
                        "engine.max_batch=16",
                        "engine.max_batch_tokens=64",
                        "engine.kv_cache_bytes=16777216",
                        "scheduler.max_queue=256",
                        "log.level=warn"};
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
    if (cfg_set(c, sets[i], err, sizeof err)) fail_msg("cfg_set %s: %s", sets[i], err);
  if (fx_prefill_stream && cfg_set(c, "engine.prefill_stream=true", err, sizeof err))
    fail_msg("cfg_set engine.prefill_stream: %s", err);
  ns_log_configure(c->log.level, c->log.format);
}

/* ---- the engine, pumped from this thread ------------------------------------------------- */

static void on_notify(void *ud) {
  fx_eng *f = ud;
  pthread_mutex_lock(&f->mu);
  f->notified = 1;
  pthread_cond_signal(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

static void on_event(void *ud, const eng_event *ev) {
  fx_eng *f = ud;
  f->n_events++;
  if (ev->req_id == 0 || ev->req_id >= (uint64_t)f->cap) fail_msg("event for unknown id");
  fx_res *r = &f->res[ev->req_id];
  if (r->n_final) {
    r->after_final++;
    return;
  }
  if (ev->kind == EV_TOKENS) {
    r->n_tok_events++;
    r->ids = realloc(r->ids, (size_t)(r->n_ids + ev->n_ids + 1) * sizeof *r->ids);
    r->id_steps = realloc(r->id_steps, (size_t)(r->n_ids + ev->n_ids + 1) * sizeof *r->id_steps);
    for (int i = 0; i < ev->n_ids; i++) {
      r->ids[r->n_ids] = ev->ids[i];
      r->id_steps[r->n_ids++] = ev->step;
    }
    r->text = realloc(r->text, r->text_len + ev->text_len + 1);
    memcpy(r->text + r->text_len, ev->text, ev->text_len);
    r->text_len += ev->text_len;
    r->text[r->text_len] = '\0';
    return;
  }
  r->n_final++;
  r->final_kind = ev->kind;
  r->final_step = ev->step;
  if (ev->kind == EV_DONE) {
    r->finish = ev->finish;
    r->stop_idx = ev->stop_idx;
    r->stop_id = ev->stop_id;
    r->prompt_tokens = ev->prompt_tokens;
    r->completion_tokens = ev->completion_tokens;
  } else {
    r->err = ev->err;
    snprintf(r->msg, sizeof r->msg, "%s", ev->msg ? ev->msg : "");
  }
  if (f->e) {
    eng_stats_t st;
    eng_stats(f->e, &st);
    r->pages_at_final = st.kv_pages_used;
  }
}

void fx_start_with(fx_eng *f, const cfg_t *c, int max_ids, eng_be_factory factory) {
  memset(f, 0, sizeof *f);
  f->cfg = *c;
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  f->cap = max_ids + 1;
  f->res = calloc((size_t)f->cap, sizeof *f->res);
  char err[512];
  int rc = factory ? eng__start_with(&f->cfg, factory, on_notify, f, &f->e, err, sizeof err)
                   : eng_start(&f->cfg, on_notify, f, &f->e, err, sizeof err);
  if (rc) fail_msg("eng_start: %s (%s)", err, ns_strerror(rc));
}

void fx_start(fx_eng *f, const cfg_t *c, int max_ids) {
  fx_start_with(f, c, max_ids, NULL);
}

void fx_halt(fx_eng *f) {
  eng_t *e = f->e;
  f->e = NULL; /* no eng_stats from the callback while stopping */
  eng_stop(e, on_event, f);
  for (int i = 0; i < f->cap; i++) {
    fx_res *r = &f->res[i];
    if (r->id && r->n_final != 1)
      fail_msg("request %d: %d final events, want exactly 1", i, r->n_final);
    assert_int_equal(r->after_final, 0);
  }
}

void fx_free(fx_eng *f) {
  for (int i = 0; i < f->cap; i++) {
    fx_res *r = &f->res[i];
    free(r->ids);
    free(r->id_steps);
    free(r->text);
  }
  free(f->res);
  pthread_mutex_destroy(&f->mu);
  pthread_cond_destroy(&f->cv);
}

void fx_stop(fx_eng *f) {
  fx_halt(f);
  fx_free(f);
}

fx_req fx_req_greedy(const int32_t *prompt, int n_prompt, int max_tokens) {
  fx_req r;
  memset(&r, 0, sizeof r);
  r.prompt = prompt;
  r.n_prompt = n_prompt;
  r.max_tokens = max_tokens;
  r.sp = samp_params_default();
  r.sp.temperature = 0;
  r.stream = 1;
  return r;
}

int fx_submit(fx_eng *f, uint64_t id, const fx_req *r, char *err, size_t errlen) {
  assert_true(id > 0 && id < (uint64_t)f->cap);
  eng_req *q = eng_req_new();
  assert_non_null(q);
  q->id = id;
  q->prompt = malloc((size_t)(r->n_prompt > 0 ? r->n_prompt : 1) * sizeof *q->prompt);
  if (r->n_prompt > 0) memcpy(q->prompt, r->prompt, (size_t)r->n_prompt * sizeof *q->prompt);
  q->n_prompt = r->n_prompt;
  q->max_tokens = r->max_tokens;
  q->sp = r->sp;
  if (r->sp.n_bias > 0) { /* the request owns its copy */
    q->sp.bias = malloc((size_t)r->sp.n_bias * sizeof *q->sp.bias);
    assert_non_null(q->sp.bias);
    memcpy(q->sp.bias, r->sp.bias, (size_t)r->sp.n_bias * sizeof *q->sp.bias);
  }
  q->ignore_eos = r->ignore_eos;
  q->stream = r->stream;
  for (int i = 0; i < r->n_stop; i++)
    q->stop[i] = strdup(r->stop[i]);
  q->n_stop = r->n_stop;
  if (r->n_stop_ids > 0) {
    q->stop_ids = malloc(sizeof r->stop_ids);
    assert_non_null(q->stop_ids);
    memcpy(q->stop_ids, r->stop_ids, sizeof r->stop_ids);
  }
  q->n_stop_ids = r->n_stop_ids;
  f->res[id].id = id;
  char dummy[256];
  int rc = eng_submit(f->e, q, err ? err : dummy, err ? errlen : sizeof dummy);
  if (rc) f->res[id].id = 0; /* refused: no event may come */
  return rc;
}

int fx_pump(fx_eng *f, double timeout_s) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double t = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + timeout_s;
  ts.tv_sec = (time_t)t;
  ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
  pthread_mutex_lock(&f->mu);
  while (!f->notified)
    if (pthread_cond_timedwait(&f->cv, &f->mu, &ts) == ETIMEDOUT) break;
  f->notified = 0;
  pthread_mutex_unlock(&f->mu);
  return eng_poll(f->e, on_event, f);
}

static double mono(void) {
  return eng_now();
}

void fx_wait_final(fx_eng *f, uint64_t id, double timeout_s) {
  double end = mono() + timeout_s;
  while (!f->res[id].n_final) {
    if (mono() > end)
      fail_msg("request %llu: no final event in %.0f s", (unsigned long long)id, timeout_s);
    fx_pump(f, 0.2);
  }
}

void fx_wait_all(fx_eng *f, uint64_t lo, uint64_t hi, double timeout_s) {
  for (uint64_t id = lo; id <= hi; id++)
    fx_wait_final(f, id, timeout_s);
}

void fx_wait_ids(fx_eng *f, uint64_t id, int n, double timeout_s) {
  double end = mono() + timeout_s;
  while (f->res[id].n_ids < n && !f->res[id].n_final) {
    if (mono() > end)
      fail_msg("request %llu: fewer than %d ids in %.0f s", (unsigned long long)id, n, timeout_s);
    fx_pump(f, 0.2);
  }
}

/* ---- the reference ------------------------------------------------------------------------- */

void fx_reference(const char *model_dir, const fx_req *r, fx_ref *out) {
  char err[512];
  model_t *m;
  backend_t *be;
  kv_t *kv;
  fwd_t *fw;
  if (model_load(model_dir, &m, err, sizeof err)) fail_msg("model_load: %s", err);
  assert_int_equal(be_cpu_create(1, &be), 0);
  assert_int_equal(be->ops->load_weights(be, m), 0);
  model_free(m);
  int pages = (r->n_prompt + r->max_tokens + 15) / 16;
  assert_int_equal(be->ops->kv_init(be, pages, 16), 0);
  assert_int_equal(kv_create(pages, 16, &kv), 0);
  assert_int_equal(fwd_create(be, 64, 1, &fw), 0);
  eng_gen_seq s;
  memset(&s, 0, sizeof s);
  s.prompt = r->prompt;
  s.n_prompt = r->n_prompt;
  s.sp = r->sp;
  s.max_tokens = r->max_tokens;
  s.ignore_eos = r->ignore_eos;
  assert_int_equal(eng_gen_run(fw, kv, &s, 1, 64, NULL, NULL, NULL), 0);
  out->ids = s.ids;
  out->n_ids = s.n_ids;
  out->finish = s.finish;
  free(s.logprobs);
  fwd_destroy(fw);
  kv_destroy(kv);
  be_destroy(be);
}

char *fx_decode(const eng_t *e, const int32_t *ids, int n) {
  const tok_t *tok = eng_tokenizer(e);
  int32_t *keep = malloc((size_t)(n + 1) * sizeof *keep);
  int k = 0;
  for (int i = 0; i < n; i++) /* ids past the tokenizer have no text (as in the engine) */
    if (ids[i] < tok_vocab_size(tok)) keep[k++] = ids[i];
  char *text;
  size_t len;
  assert_int_equal(tok_decode(tok, keep, (size_t)k, 1, &text, &len), 0);
  free(keep);
  return text;
}

void fx_rand_ids(int32_t *ids, int n, int lo, int hi, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ids[i] = lo + (int32_t)(x % (uint64_t)(hi - lo));
  }
}
