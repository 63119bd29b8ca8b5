/* generate.c — `nanoserve generate`: one prompt through tokenizer, CPU backend, sampler,
 * incremental detokenizer and stop strings, streamed to stdout or printed as JSON.
 * Entry point: eng_generate_cli_main. */
#include "generate.h"

#include "backend.h"
#include "cfg.h"
#include "forward.h"
#include "gen.h"
#include "kv.h"
#include "model.h"
#include "ns_err.h"
#include "ns_num.h"
#include "stop.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_STOPS 16

static void usage(FILE *f) {
  fprintf(f, "usage: nanoserve generate [--model DIR] --prompt TEXT [--max-tokens N]\n"
             "                          [--temperature T] [--top-p P] [--top-k K] [--min-p P]\n"
             "                          [--seed S] [--stop STR]... [--json]\n"
             "                          [--config FILE] [--set key=value]...\n"
             "runs the model on the CPU and streams the continuation of TEXT to stdout;\n"
             "--json prints {prompt_ids, ids, text, finish_reason, timings} instead.\n"
             "defaults: --model engine.model (models/tiny), --max-tokens 64, --temperature 1,\n"
             "no top-k/top-p/min-p cut, a random seed.\n");
}

typedef struct args {
  const char *model, *prompt, *config;
  const char *sets[64];
  int n_sets;
  const char *stops[MAX_STOPS];
  int n_stops;
  int max_tokens, json, have_seed;
  samp_params sp;
} args;

static int parse(int argc, char **argv, args *a) {
  memset(a, 0, sizeof *a);
  a->max_tokens = 64;
  a->sp = samp_params_default();
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (strcmp(o, "--json") == 0) {
      a->json = 1;
      continue;
    }
    if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) return 1;
    if (!v) {
      fprintf(stderr, "generate: %s needs a value\n", o);
      return -1;
    }
    i++;
    if (strcmp(o, "--model") == 0)
      a->model = v;
    else if (strcmp(o, "--prompt") == 0)
      a->prompt = v;
    else if (strcmp(o, "--config") == 0)
      a->config = v;
    else if (strcmp(o, "--set") == 0 && a->n_sets < 64)
      a->sets[a->n_sets++] = v;
    else if (strcmp(o, "--stop") == 0 && a->n_stops < MAX_STOPS)
      a->stops[a->n_stops++] = v;
    else if (strcmp(o, "--max-tokens") == 0)
      bad = ns_parse_int(v, 1, 1 << 20, &a->max_tokens);
    else if (strcmp(o, "--temperature") == 0)
      bad = ns_parse_float(v, 0, 100, &a->sp.temperature);
    else if (strcmp(o, "--top-p") == 0)
      bad = ns_parse_float(v, 1e-6, 1, &a->sp.top_p);
    else if (strcmp(o, "--top-k") == 0)
      bad = ns_parse_int(v, 0, 1 << 30, &a->sp.top_k);
    else if (strcmp(o, "--min-p") == 0)
      bad = ns_parse_float(v, 0, 1, &a->sp.min_p);
    else if (strcmp(o, "--seed") == 0) {
      char *end;
      errno = 0;
      a->sp.seed = strtoull(v, &end, 10);
      bad = errno || end == v || *end || v[0] == '-';
      a->have_seed = 1;
    } else {
      fprintf(stderr, "generate: unknown option %s\n", o);
      return -1;
    }
    if (bad) {
      fprintf(stderr, "generate: bad value for %s: '%s'\n", o, v);
      return -1;
    }
  }
  if (!a->prompt) {
    fprintf(stderr, "generate: --prompt is required\n");
    return -1;
  }
  return 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the run ------------------------------------------------------------------------------- */

typedef struct run {
  const args *a;
  const tok_t *tok;
  tok_stream_t *ts;
  eng_stop_t *stop;
  char *text; /* everything emitted */
  size_t len, cap;
  int stopped; /* a stop string matched */
  int err;
  double t_start, t_prefill;
} run;

static void emit(run *r, const char *s, size_t n) {
  if (n == 0) return;
  if (r->len + n + 1 > r->cap) {
    size_t cap = r->cap ? r->cap : 256;
    while (cap < r->len + n + 1)
      cap *= 2;
    char *t = realloc(r->text, cap);
    if (!t) {
      r->err = NS_ENOMEM;
      return;
    }
    r->text = t;
    r->cap = cap;
  }
  memcpy(r->text + r->len, s, n);
  r->len += n;
  r->text[r->len] = '\0';
  if (!r->a->json) {
    fwrite(s, 1, n, stdout);
    fflush(stdout);
  }
}

/* Text through the stop matcher; returns 1 once a stop string matched. */
static int feed_text(run *r, const char *t, size_t n) {
  const char *e;
  size_t el;
  int matched = 0;
  int rc = eng_stop_feed(r->stop, t, n, &e, &el, &matched, NULL);
  if (rc) {
    r->err = rc;
    return 1;
  }
  emit(r, e, el);
  if (matched) r->stopped = 1;
  return matched;
}

static int on_token(void *ud, int i, int32_t id, float logprob) {
  run *r = ud;
  const char *t;
  size_t n;
  /* ids past the tokenizer's vocabulary (padding rows of the embedding) have no text, as
   * in HF's decode */
  if (id >= tok_vocab_size(r->tok)) return 0;
  int rc = tok_stream_push(r->ts, id, &t, &n);
  if (rc) return rc;
  int stop = feed_text(r, t, n);
  return r->err ? r->err : stop;
}

static void on_prefill(void *ud) {
  ((run *)ud)->t_prefill = now_ms();
}

static void print_json(const args *a, const int32_t *pids, size_t np, const eng_gen_seq *s,
                       const run *r, const char *finish, double load_ms, double t_end) {
  cJSON *o = cJSON_CreateObject(), *p = cJSON_AddArrayToObject(o, "prompt_ids");
  for (size_t i = 0; i < np; i++)
    cJSON_AddItemToArray(p, cJSON_CreateNumber(pids[i]));
  cJSON *ids = cJSON_AddArrayToObject(o, "ids");
  for (int i = 0; i < s->n_ids; i++)
    cJSON_AddItemToArray(ids, cJSON_CreateNumber(s->ids[i]));
  cJSON_AddStringToObject(o, "text", r->text ? r->text : "");
  cJSON_AddStringToObject(o, "finish_reason", finish);
  cJSON *t = cJSON_AddObjectToObject(o, "timings");
  double prefill = r->t_prefill - r->t_start, decode = t_end - r->t_prefill;
  cJSON_AddNumberToObject(t, "load_ms", load_ms);
  cJSON_AddNumberToObject(t, "prefill_ms", prefill);
  cJSON_AddNumberToObject(t, "decode_ms", decode);
  /* the first token comes out of the prefill; the rest are decode steps */
  cJSON_AddNumberToObject(t, "tokens_per_s",
                          s->n_ids > 1 && decode > 0 ? (s->n_ids - 1) / (decode / 1e3) : 0);
  char *out = cJSON_PrintUnformatted(o);
  if (out) printf("%s\n", out);
  free(out);
  cJSON_Delete(o);
  (void)a;
}

static uint64_t random_seed(void) {
  uint64_t s = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  if (!f || fread(&s, sizeof s, 1, f) != 1) s = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
  if (f) fclose(f);
  return s;
}

int eng_generate_cli_main(int argc, char **argv) {
  args a;
  int pr = parse(argc, argv, &a);
  if (pr) {
    usage(pr > 0 ? stdout : stderr);
    return pr > 0 ? 0 : 2;
  }
  if (!a.have_seed) a.sp.seed = random_seed();

  cfg_t cfg;
  cfg_init(&cfg);
  char err[4096];
  int rc = 0, status = 1;
  if (a.config && (rc = cfg_load_file(&cfg, a.config, err, sizeof err))) goto cfg_fail;
  for (int i = 0; i < a.n_sets; i++)
    if ((rc = cfg_set(&cfg, a.sets[i], err, sizeof err))) goto cfg_fail;
  if ((rc = cfg_validate(&cfg, err, sizeof err))) goto cfg_fail;
  if (cfg.engine.backend == CFG_BACKEND_CUDA) {
    fprintf(stderr, "generate: engine.backend cuda is not available here; use cpu\n");
    cfg_free(&cfg);
    return 1;
  }

  const char *dir = a.model ? a.model : cfg.engine.model;
  double t0 = now_ms();
  model_t *m = NULL;
  tok_t *tok = NULL;
  backend_t *be = NULL;
  kv_t *kv = NULL;
  fwd_t *f = NULL;
  int32_t *pids = NULL;
  size_t np = 0;
  run r = {.a = &a};
  eng_gen_seq s;
  memset(&s, 0, sizeof s);

  if ((rc = model_load(dir, &m, err, sizeof err))) {
    fprintf(stderr, "generate: %s\n", err);
    goto end;
  }
  if ((rc = tok_load_dir(dir, &tok, err, sizeof err))) {
    fprintf(stderr, "generate: %s\n", err);
    goto end;
  }
  const char *what = "cpu backend";
  if ((rc = be_cpu_create(cfg.engine.cpu_threads, &be)) || (rc = be->ops->load_weights(be, m)))
    goto fail;
  model_free(m); /* the backend holds its own fp32 copy */
  m = NULL;
  double load_ms = now_ms() - t0;

  what = "tokenize the prompt";
  if ((rc = tok_encode(tok, a.prompt, strlen(a.prompt), 1, &pids, &np))) goto fail;
  int max_len = cfg.engine.max_seq_len ? cfg.engine.max_seq_len : be->cfg.max_pos;
  if (np == 0 || (int64_t)np >= max_len) {
    fprintf(stderr, "generate: the prompt has %zu tokens; 1 to %d fit\n", np, max_len - 1);
    goto end;
  }
  if ((int64_t)np + a.max_tokens > max_len) a.max_tokens = max_len - (int)np;
  int pt = cfg.engine.kv_page_tokens;
  int pages = (int)((np + (size_t)a.max_tokens + (size_t)pt - 1) / (size_t)pt);
  int step_rows = (int)np < cfg.engine.max_batch_tokens ? (int)np : cfg.engine.max_batch_tokens;
  what = "workspaces";
  if ((rc = be->ops->kv_init(be, pages, pt)) || (rc = kv_create(pages, pt, &kv)) ||
      (rc = fwd_create(be, step_rows, 1, &f)))
    goto fail;
  r.tok = tok;
  if ((rc = tok_stream_new(tok, 1, &r.ts)) || (rc = eng_stop_create(a.stops, a.n_stops, &r.stop)))
    goto fail;

  s.prompt = pids;
  s.n_prompt = (int)np;
  s.sp = a.sp;
  s.max_tokens = a.max_tokens;
  what = "generation";
  r.t_start = r.t_prefill = now_ms();
  rc = eng_gen_run(f, kv, &s, 1, step_rows, on_token, on_prefill, &r);
  if (rc) goto fail;
  double t_end = now_ms();
  if (!r.stopped) { /* release what the detokenizer and the matcher held back */
    const char *t;
    size_t n;
    what = "detokenize";
    if ((rc = tok_stream_flush(r.ts, &t, &n))) goto fail;
    if (!feed_text(&r, t, n)) {
      eng_stop_flush(r.stop, &t, &n);
      emit(&r, t, n);
    }
  }
  if ((rc = r.err)) goto fail;
  const char *finish = r.stopped ? "stop" : eng_finish_name(s.finish);
  if (a.json)
    print_json(&a, pids, np, &s, &r, finish, load_ms, t_end);
  else if (isatty(STDOUT_FILENO))
    printf("\n");
  status = 0;
  goto end;
fail:
  fprintf(stderr, "generate: %s: %s\n", what, ns_strerror(rc));
end:
  free(s.ids);
  free(s.logprobs);
  free(r.text);
  eng_stop_destroy(r.stop);
  tok_stream_free(r.ts);
  free(pids);
  fwd_destroy(f);
  kv_destroy(kv);
  be_destroy(be);
  tok_free(tok);
  model_free(m);
  cfg_free(&cfg);
  return status;
cfg_fail:
  fprintf(stderr, "generate: %s\n", err);
  cfg_free(&cfg);
  return rc == NS_EINVAL ? 2 : 1;
}
