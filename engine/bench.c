/* bench.c — `nanoserve bench`: B sequences prefilled with C random ids, then timed greedy
 * decode steps of B one-token rows straight through fwd_step, reported as ms/step, tok/s and
 * bytes read per step against the measured copy bandwidth. Entry point: eng_bench_cli_main. */
#include "bench.h"

#include "backend.h"
#include "backend_select.h"
#include "cfg.h"
#include "forward.h"
#include "kv.h"
#include "model.h"
#include "ns_err.h"
#include "ns_num.h"
#include "ns_log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LIST 32
#define MAX_SETS 64
#define MAX_N    (1 << 20)

static void usage(FILE *f) {
  fprintf(f, "usage: nanoserve bench [--model DIR] [--config FILE] [--set key=value]...\n"
             "                       [--batch B1,B2,...] [--ctx C1,C2,...] [--steps N]\n"
             "                       [--warmup N] [--json FILE|-] [--no-table]\n"
             "times decode steps of the forward pass on the engine.backend backend, without\n"
             "HTTP or the scheduler: for each batch size B and context C, B sequences are\n"
             "prefilled with C random token ids, then run --warmup and --steps greedy decode\n"
             "steps of B one-token rows. Prints a Markdown table (ms/step p50 and p90, tok/s,\n"
             "MB read per step, GB/s, %% of the copy bandwidth, GPU ms/step, idle gap between\n"
             "steps); --json writes the same figures to FILE (- for stdout, then no table).\n"
             "defaults: --model engine.model, --batch 1, --ctx 128, --steps 64, --warmup 8.\n");
}

/* ---- options ------------------------------------------------------------------------------- */

typedef struct args {
  const char *model, *config, *json;
  const char *sets[MAX_SETS];
  int n_sets;
  int batch[MAX_LIST], n_batch;
  int ctx[MAX_LIST], n_ctx;
  int steps, warmup, no_table;
} args;

/* "1,32,128" into out (each in [1, MAX_N]); -1 on an empty item, a bad number or too many. */
static int num_list(const char *s, int *out, int *n) {
  char item[32];
  *n = 0;
  for (const char *p = s;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == 0 || len >= sizeof item || *n == MAX_LIST) return -1;
    memcpy(item, p, len);
    item[len] = '\0';
    if (ns_parse_int(item, 1, MAX_N, &out[(*n)++])) return -1;
    if (!comma) return 0;
    p = comma + 1;
  }
}

/* The options that take a value; want: what a bad value should have been. */
enum { O_MODEL, O_CONFIG, O_JSON, O_SET, O_BATCH, O_CTX, O_STEPS, O_WARMUP, O_N };
static const struct {
  const char *name, *want;
} valued[O_N] = {
    [O_MODEL] = {"--model", NULL},
    [O_CONFIG] = {"--config", NULL},
    [O_JSON] = {"--json", NULL},
    [O_SET] = {"--set", NULL},
    [O_BATCH] = {"--batch", "a comma-separated list of up to 32 positive integers"},
    [O_CTX] = {"--ctx", "a comma-separated list of up to 32 positive integers"},
    [O_STEPS] = {"--steps", "an integer >= 1"},
    [O_WARMUP] = {"--warmup", "an integer >= 0"},
};

/* 0 ok, 1 help asked, -1 bad usage (message on stderr). */
static int parse(int argc, char **argv, args *a) {
  memset(a, 0, sizeof *a);
  a->batch[0] = 1;
  a->n_batch = 1;
  a->ctx[0] = 128;
  a->n_ctx = 1;
  a->steps = 64;
  a->warmup = 8;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) return 1;
    if (strcmp(o, "--no-table") == 0) {
      a->no_table = 1;
      continue;
    }
    int k = 0;
    while (k < O_N && strcmp(o, valued[k].name) != 0)
      k++;
    if (k == O_N) {
      fprintf(stderr, "bench: unknown option %s\n", o);
      return -1;
    }
    if (!v) {
      fprintf(stderr, "bench: %s needs a value\n", o);
      return -1;
    }
    i++;
    int bad = 0;
    switch (k) {
    case O_MODEL: a->model = v; break;
    case O_CONFIG: a->config = v; break;
    case O_JSON: a->json = v; break;
    case O_SET:
      if (a->n_sets == MAX_SETS) {
        fprintf(stderr, "bench: more than %d --set options\n", MAX_SETS);
        return -1;
      }
      a->sets[a->n_sets++] = v;
      break;
    case O_BATCH: bad = num_list(v, a->batch, &a->n_batch); break;
    case O_CTX: bad = num_list(v, a->ctx, &a->n_ctx); break;
    case O_STEPS: bad = ns_parse_int(v, 1, MAX_N, &a->steps); break;
    default: bad = ns_parse_int(v, 0, MAX_N, &a->warmup); break;
    }
    if (bad) {
      fprintf(stderr, "bench: bad value for %s: '%s' (%s)\n", o, v, valued[k].want);
      return -1;
    }
  }
  return 0;
}

/* ---- the figures --------------------------------------------------------------------------- */

typedef struct result {
  int batch, ctx;
  double prefill_ms;
  double ms_p50, ms_p90, tok_s, gbps;
  double pct_copy, gpu_ms_p50, gap_ms_p50; /* NAN: not measured */
  uint64_t weight_bytes, kv_bytes;         /* read by one decode step */
} result;

typedef struct bench {
  const args *a;
  const cfg_t *cfg;
  backend_t *be;
  kv_t *kv;
  fwd_t *f;
  int max_ctx;
  double copy_gbps;      /* NAN: the backend does not measure it */
  int warm;              /* a prefill ran (untimed) before the first timed one */
  int graphs;            /* decode step graphs captured before the runs */
  double graph_ms;       /* time the capture took */
  uint64_t graph_bytes;  /* device memory the graphs hold */
  uint64_t weight_total; /* every weight in backend memory */
  uint64_t weight_step;  /* what a decode step reads of them, embedding rows aside */
  uint64_t embed_row;    /* bytes of one embedding row when it is read per token, else 0 */
  uint64_t kv_token;     /* KV bytes of one cached token over all layers */
  /* a run's buffers, sized for the largest batch */
  batch_t b;
  step_out_t out;
  kv_seq *seqs;
  int32_t *next;
  int *pos;
  double *ms, *gpu, *gap;
} bench;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* The q-quantile of n values (sorted in place), interpolated as numpy's default does. */
static double quantile(double *v, int n, double q) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double r = q * (n - 1);
  int lo = (int)r;
  return lo + 1 < n ? v[lo] + (r - lo) * (v[lo + 1] - v[lo]) : v[lo];
}

static uint64_t tbytes(const tensor_t *t) {
  return t->data ? (uint64_t)tensor_nbytes(t) : 0;
}

/* Bytes of weights a decode step reads: every matrix and norm of every layer once, the final
 * norm and the LM head. The embedding table is read a row per token, except when it is the
 * LM head (tied), which reads it whole anyway. */
static void weight_figures(bench *s) {
  const be_weights *w = &s->be->w;
  uint64_t sum = 0;
  for (int l = 0; l < s->be->cfg.n_layers; l++) {
    const be_layer *L = &w->layers[l];
    sum += tbytes(&L->attn_norm) + tbytes(&L->wqkv) + tbytes(&L->bqkv) + tbytes(&L->wo) +
           tbytes(&L->mlp_norm) + tbytes(&L->w_gate_up) + tbytes(&L->w_down);
  }
  sum += tbytes(&w->final_norm) + tbytes(&w->lm_head);
  int tied = w->lm_head.data == w->embed.data;
  s->weight_step = sum;
  s->embed_row =
      tied || w->embed.shape[0] <= 0 ? 0 : tbytes(&w->embed) / (uint64_t)w->embed.shape[0];
  s->weight_total = sum + (tied ? 0 : tbytes(&w->embed));
  const model_cfg *g = &s->be->cfg;
  s->kv_token = (uint64_t)g->n_layers * 2 * (uint64_t)g->n_kv_heads * (uint64_t)g->head_dim *
                be_kv_elem_bytes(s->be);
}

/* ---- one run ------------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *x) { /* xorshift64* */
  *x ^= *x >> 12;
  *x ^= *x << 25;
  *x ^= *x >> 27;
  return *x * 0x2545F4914F6CDD1Dull;
}

/* Prefill every sequence with its C prompt ids, several sequences or chunks of one per step,
 * at most fwd_max_tokens rows; the last chunk of a sequence samples its first decode id. */
static int prefill(bench *s, int B, int C, const int32_t *prompt) {
  samp_params sp = samp_params_default();
  sp.temperature = 0;
  int T = fwd_max_tokens(s->f), i = 0, done = 0, rc = 0;
  while (i < B) {
    be_batch_reset(&s->b, 0);
    int rows = 0, first = i;
    while (i < B && rows < T) {
      int take = C - done < T - rows ? C - done : T - rows;
      batch_seq bs = {.n_new = take,
                      .pos0 = done,
                      .pages = s->seqs[i].pages,
                      .n_pages = s->seqs[i].n_pages,
                      .sample = done + take == C,
                      .sp = sp};
      if ((rc = be_batch_add(&s->b, &bs, prompt + (size_t)i * C + done))) return rc;
      rows += take;
      done += take;
      if (done == C) {
        i++;
        done = 0;
      }
    }
    if ((rc = fwd_step(s->f, &s->b, &s->out, NULL))) return rc;
    for (int k = 0; k < s->b.n_seqs; k++)
      if (s->b.seqs[k].sample) s->next[first + k] = s->out.ids[k];
  }
  return 0;
}

static int run_one(bench *s, int B, int C, result *r) {
  const args *a = s->a;
  const backend_ops *op = s->be->ops;
  int total = C + a->warmup + a->steps, rc = 0, n_gpu = 0, n_gap = 0;
  memset(r, 0, sizeof *r);
  r->batch = B;
  r->ctx = C;
  int32_t *prompt = malloc((size_t)B * (size_t)C * sizeof *prompt);
  if (!prompt) return NS_ENOMEM;
  uint64_t x = 0x9E3779B97F4A7C15ull ^ ((uint64_t)B << 32 | (uint64_t)C);
  for (size_t k = 0; k < (size_t)B * (size_t)C; k++)
    prompt[k] = (int32_t)(rng_next(&x) % (uint64_t)s->be->cfg.vocab_size);
  for (int i = 0; i < B; i++) {
    kv_seq_init(&s->seqs[i]);
    s->pos[i] = C;
  }
  /* every page up front: the timed steps allocate nothing */
  for (int i = 0; i < B && !rc; i++)
    rc = kv_seq_reserve(s->kv, &s->seqs[i], total);
  /* the first prefill of the run once untimed: it pays for first-call setup (kernel
   * attributes, GEMM plans) that serving pays once at start-up */
  if (!rc && !s->warm) {
    rc = prefill(s, B, C, prompt);
    s->warm = 1;
  }
  double t0 = now_ms();
  if (!rc) rc = prefill(s, B, C, prompt);
  r->prefill_ms = now_ms() - t0;

  samp_params sp = samp_params_default();
  sp.temperature = 0;
  for (int k = 0; k < a->warmup + a->steps && !rc; k++) {
    be_batch_reset(&s->b, 0);
    for (int i = 0; i < B && !rc; i++) {
      batch_seq bs = {.n_new = 1,
                      .pos0 = s->pos[i],
                      .pages = s->seqs[i].pages,
                      .n_pages = s->seqs[i].n_pages,
                      .sample = 1,
                      .sp = sp};
      rc = be_batch_add(&s->b, &bs, &s->next[i]);
    }
    if (rc) break;
    double t = now_ms();
    rc = fwd_step(s->f, &s->b, &s->out, NULL); /* returns with the ids on the host */
    t = now_ms() - t;
    if (rc) break;
    if (k >= a->warmup) {
      s->ms[k - a->warmup] = t;
      double gpu, gap;
      if (op->step_timing && op->step_timing(s->be, &gpu, &gap) == 0) {
        s->gpu[n_gpu++] = gpu;
        if (gap >= 0) s->gap[n_gap++] = gap;
      }
    }
    for (int i = 0; i < B; i++) {
      s->next[i] = s->out.ids[i];
      s->pos[i]++;
    }
  }
  for (int i = 0; i < B; i++)
    kv_seq_free(s->kv, &s->seqs[i]);
  free(prompt);
  if (rc) return rc;

  r->ms_p90 = quantile(s->ms, a->steps, 0.9);
  r->ms_p50 = quantile(s->ms, a->steps, 0.5);
  r->gpu_ms_p50 = n_gpu ? quantile(s->gpu, n_gpu, 0.5) : NAN;
  r->gap_ms_p50 = n_gap ? quantile(s->gap, n_gap, 0.5) : NAN;
  r->tok_s = B * 1e3 / r->ms_p50;
  /* attention reads each sequence's cache; its length at mid-run is the pos0 of the middle
   * timed step */
  uint64_t mid = (uint64_t)C + (uint64_t)a->warmup + (uint64_t)a->steps / 2;
  r->weight_bytes = s->weight_step + (uint64_t)B * s->embed_row;
  r->kv_bytes = (uint64_t)B * mid * s->kv_token;
  r->gbps = (double)(r->weight_bytes + r->kv_bytes) / (r->ms_p50 * 1e-3) / 1e9;
  r->pct_copy = isnan(s->copy_gbps) ? NAN : 100.0 * r->gbps / s->copy_gbps;
  return 0;
}

/* ---- the report ---------------------------------------------------------------------------- */

typedef struct meta {
  const char *model, *backend, *dtype;
  char date[32];
  cJSON *engine; /* engine.* settings as config dump prints them */
} meta;

static const char *setting_text(const meta *m, const char *key, char *buf, size_t len) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(m->engine, key);
  if (cJSON_IsString(v)) return v->valuestring;
  if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "true" : "false";
  if (cJSON_IsNumber(v)) {
    snprintf(buf, len, "%g", v->valuedouble);
    return buf;
  }
  return "?";
}

static void fmt_opt(char *buf, size_t len, const char *fmt, double v) {
  if (isnan(v))
    snprintf(buf, len, "n/a");
  else
    snprintf(buf, len, fmt, v);
}

static void table_head(const bench *s, const meta *m) {
  char copy[32], b1[32], b2[32];
  fmt_opt(copy, sizeof copy, "%.1f GB/s", s->copy_gbps);
  printf("nanoserve bench: model %s, backend %s, weights %s (%llu bytes), copy bandwidth %s, "
         "engine.cuda_graphs %s (%d captured in %.0f ms, %.1f MiB), engine.cuda_gemm %s, %d "
         "warm-up + %d timed steps, %s\n\n",
         m->model, m->backend, m->dtype, (unsigned long long)s->weight_total, copy,
         setting_text(m, "cuda_graphs", b1, sizeof b1), s->graphs, s->graph_ms,
         (double)s->graph_bytes / 1048576.0, setting_text(m, "cuda_gemm", b2, sizeof b2),
         s->a->warmup, s->a->steps, m->date);
  printf("| batch | ctx | ms/step p50 | p90 | tok/s | MB/step | GB/s | %% of copy | GPU ms/step "
         "| idle gap ms |\n"
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  fflush(stdout);
}

static void table_row(const result *r) {
  char pct[32], gpu[32], gap[32];
  fmt_opt(pct, sizeof pct, "%.1f", r->pct_copy);
  fmt_opt(gpu, sizeof gpu, "%.3f", r->gpu_ms_p50);
  fmt_opt(gap, sizeof gap, "%.3f", r->gap_ms_p50);
  printf("| %d | %d | %.3f | %.3f | %.1f | %.2f | %.1f | %s | %s | %s |\n", r->batch, r->ctx,
         r->ms_p50, r->ms_p90, r->tok_s, (double)(r->weight_bytes + r->kv_bytes) / 1e6, r->gbps,
         pct, gpu, gap);
  fflush(stdout);
}

static void add_num(cJSON *o, const char *k, double v) {
  if (isnan(v))
    cJSON_AddNullToObject(o, k);
  else
    cJSON_AddNumberToObject(o, k, v);
}

static int write_json(const bench *s, meta *m, const result *res, int n, FILE *f) {
  const args *a = s->a;
  cJSON *o = cJSON_CreateObject();
  if (!o) return NS_ENOMEM;
  cJSON_AddStringToObject(o, "model", m->model);
  cJSON_AddStringToObject(o, "backend", m->backend);
  cJSON_AddStringToObject(o, "dtype", m->dtype);
  cJSON_AddNumberToObject(o, "weight_bytes", (double)s->weight_total);
  cJSON_AddNumberToObject(o, "kv_elem_bytes", (double)be_kv_elem_bytes(s->be));
  add_num(o, "copy_gbps", s->copy_gbps);
  cJSON_AddNumberToObject(o, "graphs", s->graphs);
  cJSON_AddNumberToObject(o, "graph_capture_ms", s->graph_ms);
  cJSON_AddNumberToObject(o, "graph_bytes", (double)s->graph_bytes);
  cJSON_AddStringToObject(o, "date", m->date);
  cJSON *set = cJSON_AddObjectToObject(o, "settings");
  if (set && m->engine) {
    cJSON_AddItemToObject(set, "engine", m->engine);
    m->engine = NULL; /* o owns it now */
  }
  cJSON *runs = cJSON_AddArrayToObject(o, "runs");
  for (int i = 0; i < n && runs; i++) {
    const result *r = &res[i];
    cJSON *j = cJSON_CreateObject();
    if (!j) break;
    cJSON_AddItemToArray(runs, j);
    cJSON_AddNumberToObject(j, "batch", r->batch);
    cJSON_AddNumberToObject(j, "ctx", r->ctx);
    cJSON_AddNumberToObject(j, "steps", a->steps);
    cJSON_AddNumberToObject(j, "warmup", a->warmup);
    cJSON_AddNumberToObject(j, "prefill_ms", r->prefill_ms);
    cJSON_AddNumberToObject(j, "ms_p50", r->ms_p50);
    cJSON_AddNumberToObject(j, "ms_p90", r->ms_p90);
    cJSON_AddNumberToObject(j, "tok_s", r->tok_s);
    cJSON_AddNumberToObject(j, "bytes_per_step", (double)(r->weight_bytes + r->kv_bytes));
    cJSON_AddNumberToObject(j, "weight_bytes_per_step", (double)r->weight_bytes);
    cJSON_AddNumberToObject(j, "kv_bytes_per_step", (double)r->kv_bytes);
    cJSON_AddNumberToObject(j, "gbps", r->gbps);
    add_num(j, "pct_copy", r->pct_copy);
    add_num(j, "gpu_ms_p50", r->gpu_ms_p50);
    add_num(j, "gap_ms_p50", r->gap_ms_p50);
  }
  char *text = cJSON_Print(o);
  cJSON_Delete(o);
  if (!text) return NS_ENOMEM;
  int rc = fprintf(f, "%s\n", text) < 0 || fflush(f) ? NS_EIO : 0;
  if (rc) fprintf(stderr, "bench: writing %s failed: %s\n", a->json, strerror(errno));
  free(text);
  return rc;
}

/* ---- set-up and checks ----------------------------------------------------------------------- */

static int max_of(const int *v, int n) {
  int m = 0;
  for (int i = 0; i < n; i++)
    m = v[i] > m ? v[i] : m;
  return m;
}

/* Batch sizes the settings allow (no model needed): -1 after a message when one does not. */
static int check_batches(const args *a, const cfg_t *c) {
  for (int i = 0; i < a->n_batch; i++) {
    int B = a->batch[i];
    if (B > c->engine.max_batch) {
      fprintf(stderr, "bench: batch %d exceeds engine.max_batch (%d)\n", B, c->engine.max_batch);
      return -1;
    }
    if (B > c->engine.max_batch_tokens) {
      fprintf(stderr,
              "bench: batch %d exceeds engine.max_batch_tokens (%d): a decode step "
              "needs a row per sequence\n",
              B, c->engine.max_batch_tokens);
      return -1;
    }
  }
  return 0;
}

/* Contexts the model allows and the KV pages to take; -1 after a message when the plan does
 * not fit. */
static int plan_kv(bench *s, int *pages_out) {
  const args *a = s->a;
  const cfg_t *c = s->cfg;
  int extra = a->warmup + a->steps;
  for (int i = 0; i < a->n_ctx; i++)
    if ((int64_t)a->ctx[i] + extra > s->max_ctx) {
      fprintf(stderr,
              "bench: context %d + %d warm-up + %d timed steps = %lld tokens exceeds the "
              "context length %d (model max_position_embeddings %d, engine.max_seq_len %d)\n",
              a->ctx[i], a->warmup, a->steps, (long long)a->ctx[i] + extra, s->max_ctx,
              s->be->cfg.max_pos, c->engine.max_seq_len);
      return -1;
    }
  int pt = c->engine.kv_page_tokens;
  int64_t per_page = (int64_t)s->kv_token * pt;
  int64_t seq_pages = ((int64_t)max_of(a->ctx, a->n_ctx) + extra + pt - 1) / pt;
  int64_t need = (int64_t)max_of(a->batch, a->n_batch) * seq_pages;
  /* engine.kv_cache_bytes as the daemon reads it; 0 takes what the largest run needs, within
   * the daemon's automatic limit */
  int64_t bytes = c->engine.kv_cache_bytes ? c->engine.kv_cache_bytes
                                           : be_kv_auto_bytes(s->be, need * per_page);
  int64_t have = bytes / per_page;
  if (have < need) {
    fprintf(stderr,
            "bench: batch %d x (%d + %d warm-up + %d steps) tokens needs %lld KV pages of %d "
            "tokens; engine.kv_cache_bytes (%lld%s) holds %lld\n",
            max_of(a->batch, a->n_batch), max_of(a->ctx, a->n_ctx), a->warmup, a->steps,
            (long long)need, pt, (long long)c->engine.kv_cache_bytes,
            c->engine.kv_cache_bytes ? "" : ": auto", (long long)have);
    return -1;
  }
  *pages_out = (int)need;
  return 0;
}

static int alloc_run_buffers(bench *s) {
  size_t B = (size_t)max_of(s->a->batch, s->a->n_batch), N = (size_t)s->a->steps;
  be_batch_init(&s->b);
  s->out.ids = calloc(B, sizeof *s->out.ids);
  s->seqs = calloc(B, sizeof *s->seqs);
  s->next = calloc(B, sizeof *s->next);
  s->pos = calloc(B, sizeof *s->pos);
  s->ms = calloc(N, sizeof *s->ms);
  s->gpu = calloc(N, sizeof *s->gpu);
  s->gap = calloc(N, sizeof *s->gap);
  return s->out.ids && s->seqs && s->next && s->pos && s->ms && s->gpu && s->gap ? 0 : NS_ENOMEM;
}

static void bench_free(bench *s) {
  be_batch_free(&s->b);
  free(s->out.ids);
  free(s->seqs);
  free(s->next);
  free(s->pos);
  free(s->ms);
  free(s->gpu);
  free(s->gap);
  fwd_destroy(s->f);
  kv_destroy(s->kv);
  be_destroy(s->be);
}

/* Settings from --config and --set (and --model); returns 0 or the exit status. */
static int load_settings(const args *a, cfg_t *cfg) {
  char err[4096];
  int rc = 0;
  cfg_init(cfg);
  if (a->config && (rc = cfg_load_file(cfg, a->config, err, sizeof err))) goto fail;
  for (int i = 0; i < a->n_sets; i++)
    if ((rc = cfg_set(cfg, a->sets[i], err, sizeof err))) goto fail;
  if (a->model) {
    size_t n = strlen(a->model) + sizeof "engine.model=";
    char *set = malloc(n);
    if (!set) return 1;
    snprintf(set, n, "engine.model=%s", a->model);
    rc = cfg_set(cfg, set, err, sizeof err);
    free(set);
    if (rc) goto fail;
  }
  if ((rc = cfg_validate(cfg, err, sizeof err))) goto fail;
  return 0;
fail:
  fprintf(stderr, "bench: %s\n", err);
  return rc == NS_EINVAL ? 2 : 1;
}

static void fill_meta(const bench *s, const cfg_t *cfg, meta *m) {
  m->model = cfg->engine.model;
  m->backend = s->be->ops->name;
  m->dtype = ns_dtype_name(s->be->w.layers[0].wqkv.dtype);
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  char *dump = cfg_dump_json(cfg);
  cJSON *all = dump ? cJSON_Parse(dump) : NULL;
  free(dump);
  m->engine = all ? cJSON_DetachItemFromObjectCaseSensitive(all, "engine") : NULL;
  cJSON_Delete(all);
}

/* The backend with the model's weights, and the context the model allows. */
static int load_backend(bench *s, const cfg_t *cfg) {
  const char *dir = cfg->engine.model;
  char err[512];
  model_t *m = NULL;
  int rc = model_load(dir, &m, err, sizeof err);
  if (rc) {
    fprintf(stderr, "bench: model %s: %s\n", dir, err);
    return rc;
  }
  if ((rc = be_create_for_cfg(cfg, m, &s->be, err, sizeof err)))
    fprintf(stderr, "bench: %s\n", err);
  else if ((rc = s->be->ops->load_weights(s->be, m)))
    fprintf(stderr, "bench: backend %s: loading the weights of %s: %s\n", s->be->ops->name, dir,
            ns_strerror(rc));
  model_free(m);
  if (rc) return rc;
  const model_cfg *g = &s->be->cfg;
  s->max_ctx = g->max_pos;
  if (cfg->engine.max_seq_len > 0 && (s->max_ctx <= 0 || cfg->engine.max_seq_len < s->max_ctx))
    s->max_ctx = cfg->engine.max_seq_len;
  return 0;
}

int eng_bench_cli_main(int argc, char **argv) {
  args a;
  int pr = parse(argc, argv, &a);
  if (pr) {
    usage(pr > 0 ? stdout : stderr);
    return pr > 0 ? 0 : 2;
  }
  cfg_t cfg;
  int status = load_settings(&a, &cfg);
  if (status) {
    cfg_free(&cfg);
    return status;
  }
  ns_log_configure(cfg.log.level, cfg.log.format);
  if (check_batches(&a, &cfg)) {
    cfg_free(&cfg);
    return 2;
  }

  /* open the JSON file first: a bad path fails before minutes of loading and running */
  FILE *jf = NULL;
  if (a.json) {
    jf = strcmp(a.json, "-") == 0 ? stdout : fopen(a.json, "w");
    if (!jf) {
      fprintf(stderr, "bench: --json %s: %s\n", a.json, strerror(errno));
      cfg_free(&cfg);
      return 1;
    }
  }

  bench s;
  memset(&s, 0, sizeof s);
  s.a = &a;
  s.cfg = &cfg;
  s.copy_gbps = NAN;
  meta m = {0};
  result *res = calloc((size_t)a.n_batch * (size_t)a.n_ctx, sizeof *res);
  int n_res = 0, rc = 0, pages = 0;
  const char *what = "";
  status = 1;
  if (!res || (rc = alloc_run_buffers(&s))) {
    fprintf(stderr, "bench: out of host memory\n");
    goto end;
  }
  if (load_backend(&s, &cfg)) goto end;
  weight_figures(&s);
  if (plan_kv(&s, &pages)) {
    status = 2;
    goto end;
  }
  int T = cfg.engine.max_batch_tokens, B_max = max_of(a.batch, a.n_batch);
  int64_t prefill_rows = (int64_t)B_max * max_of(a.ctx, a.n_ctx);
  if (prefill_rows < T) T = (int)prefill_rows; /* no larger workspaces than a step needs */
  what = "KV cache and workspaces";
  if ((rc = s.be->ops->kv_init(s.be, pages, cfg.engine.kv_page_tokens)) ||
      (rc = kv_create(pages, cfg.engine.kv_page_tokens, &s.kv)) ||
      (rc = fwd_create(s.be, T, B_max, &s.f)))
    goto fail;
  what = "decode step graphs";
  if ((rc = fwd_prepare_graphs(s.f, s.kv, &s.graphs, &s.graph_ms))) goto fail;
  backend_stats_t bst = {0};
  if (s.be->ops->stats(s.be, &bst) == 0) s.graph_bytes = bst.graph_bytes;
  if (s.be->ops->copy_bandwidth) {
    double g;
    if ((rc = s.be->ops->copy_bandwidth(s.be, &g)) == 0)
      s.copy_gbps = g;
    else
      ns_log_warn("bench: copy bandwidth not measured: %s", ns_strerror(rc));
  }
  fill_meta(&s, &cfg, &m);
  int table = !a.no_table && !(a.json && strcmp(a.json, "-") == 0);
  if (table) table_head(&s, &m);
  for (int i = 0; i < a.n_batch; i++)
    for (int j = 0; j < a.n_ctx; j++) {
      what = "run";
      ns_log_info("bench: batch %d, context %d", a.batch[i], a.ctx[j]);
      if ((rc = run_one(&s, a.batch[i], a.ctx[j], &res[n_res]))) {
        fprintf(stderr, "bench: batch %d, context %d: %s\n", a.batch[i], a.ctx[j], ns_strerror(rc));
        goto end;
      }
      if (table) table_row(&res[n_res]);
      n_res++;
    }
  if (jf && write_json(&s, &m, res, n_res, jf)) goto end;
  status = 0;
  goto end;
fail:
  fprintf(stderr, "bench: %s: %s\n", what, ns_strerror(rc));
end:
  if (jf && jf != stdout && fclose(jf) && status == 0) {
    fprintf(stderr, "bench: writing %s failed: %s\n", a.json, strerror(errno));
    status = 1;
  }
  cJSON_Delete(m.engine);
  free(res);
  bench_free(&s);
  cfg_free(&cfg);
  return status;
}
