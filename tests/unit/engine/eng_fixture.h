/* eng_fixture.h — shared pieces of the engine tests: the tiny checkpoint (mkmodel), an
 * engine driven from the test thread as the daemon's loop thread would (notify signals a
 * condvar, then eng_poll), per-request results, and the independent reference: the
 * synchronous loop of engine/gen.c (eng_gen_run) on a CPU backend of its own. */
#ifndef TESTS_ENG_FIXTURE_H
#define TESTS_ENG_FIXTURE_H

#include "cfg.h"
#include "eng_int.h"
#include "engine.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Write the tiny model into ./name (the test's build folder) once; returns its path. */
const char *fx_model(const char *name);

/* Settings for the tiny model with small, test-friendly limits (with
 * engine.prefill_stream=true while fx_prefill_stream is set: tests run their group in both
 * schedules). */
void fx_cfg(cfg_t *c, const char *model_dir);
extern int fx_prefill_stream;

/* Run a cmocka group in both schedules (prompt chunks in the decode steps, then on a prefill
 * lane); returns the number of failed tests. */
struct CMUnitTest;
int fx_run_both_schedules(const struct CMUnitTest *tests, size_t n);
#define FX_RUN_BOTH_SCHEDULES(tests) fx_run_both_schedules(tests, sizeof(tests) / sizeof(tests[0]))

/* What the test thread saw of one request. */
typedef struct fx_res {
  uint64_t id;
  int32_t *ids; /* every id of every EV_TOKENS */
  int n_ids;
  char *text; /* every text chunk, concatenated */
  size_t text_len;
  int n_tok_events;   /* EV_TOKENS events */
  uint64_t *id_steps; /* the event step of each id */
  int n_final;        /* EV_DONE + EV_ERROR: must end at exactly 1 */
  int after_final;    /* events that came after the final one: must stay 0 */
  eng_ev_kind final_kind;
  eng_fin finish;
  int stop_idx; /* EV_DONE's */
  int stop_id;  /* EV_DONE's */
  int err;
  char msg[256];
  int prompt_tokens, completion_tokens;
  int pages_at_final; /* eng_stats kv_pages_used seen when the final event came */
  uint64_t final_step;
} fx_res;

typedef struct fx_eng {
  eng_t *e;
  cfg_t cfg;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int notified;
  fx_res *res; /* indexed by request id (1 .. cap-1) */
  int cap;
  int n_events;
} fx_eng;

/* Start an engine on c (copied into f); fails the test on error. factory NULL:
 * eng_start's own backend selection. */
void fx_start(fx_eng *f, const cfg_t *c, int max_ids);
void fx_start_with(fx_eng *f, const cfg_t *c, int max_ids, eng_be_factory factory);
/* eng_stop, recording the final events it delivers; then every accepted request must have
 * exactly one final event and nothing after it. Results stay readable until fx_free. */
void fx_halt(fx_eng *f);
void fx_free(fx_eng *f);
/* fx_halt + fx_free. */
void fx_stop(fx_eng *f);

/* A request: prompt ids, max_tokens, sampling. stream 1 by default. */
typedef struct fx_req {
  const int32_t *prompt;
  int n_prompt;
  int max_tokens;
  samp_params sp;
  int ignore_eos, stream;
  const char *stop[4];
  int n_stop;
  int32_t stop_ids[4];
  int n_stop_ids;
} fx_req;

fx_req fx_req_greedy(const int32_t *prompt, int n_prompt, int max_tokens);
/* eng_submit the request as id; returns eng_submit's result; err gets its message. */
int fx_submit(fx_eng *f, uint64_t id, const fx_req *r, char *err, size_t errlen);

/* Wait for a notification (at most timeout_s) and deliver the events. Returns events. */
int fx_pump(fx_eng *f, double timeout_s);
/* Pump until request id has its final event (fails the test after timeout_s). */
void fx_wait_final(fx_eng *f, uint64_t id, double timeout_s);
/* Pump until ids [lo, hi] all have their final events. */
void fx_wait_all(fx_eng *f, uint64_t lo, uint64_t hi, double timeout_s);
/* Pump until id has at least n ids. */
void fx_wait_ids(fx_eng *f, uint64_t id, int n, double timeout_s);

/* The reference: eng_gen_run of one sequence alone. ids malloc'd (free), finish 1 length,
 * 2 stop (EOS). */
typedef struct fx_ref {
  int32_t *ids;
  int n_ids;
  int finish;
} fx_ref;
void fx_reference(const char *model_dir, const fx_req *r, fx_ref *out);
/* tok_decode of ids with special tokens skipped (what the engine's text must be). */
char *fx_decode(const eng_t *e, const int32_t *ids, int n);

/* Random prompt ids in [lo, hi). */
void fx_rand_ids(int32_t *ids, int n, int lo, int hi, uint64_t seed);

#endif
