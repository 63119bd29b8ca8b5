/* lg_report.c — the figures of a finished run (lg_report_compute) and their three forms:
 * the table on stdout, --json (figures and parameters) and --csv (one row per request). */
#include "lg.h"

#include "ns_err.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NS_PER_MS 1e6

static int counted(const lg_rec *rec) {
  return !rec->warmup && rec->outcome != LG_NOTSENT && rec->outcome != LG_PENDING;
}

int lg_report_compute(const lg_run *r, lg_result *res) {
  const lg_opts *o = r->o;
  memset(res, 0, sizeof *res);
  size_t n = r->n_recs;
  double *ttft = malloc((n + 1) * sizeof *ttft), *tpot = malloc((n + 1) * sizeof *tpot);
  double *e2e = malloc((n + 1) * sizeof *e2e), *queue = malloc((n + 1) * sizeof *queue);
  double *itl = malloc((r->n_itl + 1) * sizeof *itl);
  if (!ttft || !tpot || !e2e || !queue || !itl) {
    free(ttft), free(tpot), free(e2e), free(queue), free(itl);
    return NS_ENOMEM;
  }
  size_t nt = 0, np = 0, ne = 0, nq = 0;
  int64_t t_begin = INT64_MAX, t_end = -1, s_first = INT64_MAX, s_last = -1;
  for (size_t i = 0; i < n; i++) {
    const lg_rec *rec = &r->recs[i];
    if (rec->warmup && rec->outcome != LG_NOTSENT) res->warmup++;
    if (!counted(rec)) continue;
    res->sent++;
    if (rec->sched < t_begin) t_begin = rec->sched;
    if (rec->end > t_end) t_end = rec->end;
    if (rec->start >= 0 && rec->start < s_first) s_first = rec->start;
    if (rec->start > s_last) s_last = rec->start;
    if (rec->outcome != LG_OK && !res->first_error) res->first_error = rec->err;
    switch ((lg_outcome)rec->outcome) {
    case LG_OK: res->ok++; break;
    case LG_TIMEOUT: res->timeouts++; break;
    case LG_ECONN: res->conn_errors++; break;
    case LG_EPROTO: res->proto_errors++; break;
    case LG_ESTREAM: res->stream_errors++; break;
    case LG_EINTR: res->interrupted++; break;
    case LG_EHTTP: {
      res->http_errors++;
      if (rec->status == 429) res->http_429++;
      int k = 0;
      while (k < res->n_status && res->status_codes[k] != rec->status)
        k++;
      if (k == res->n_status && k < 16) {
        res->status_codes[k] = rec->status;
        res->n_status++;
      }
      if (k < 16) res->status_counts[k]++;
      break;
    }
    default: break;
    }
    if (rec->outcome != LG_OK) continue;
    if (rec->prompt_tokens > 0) res->prompt_tokens += rec->prompt_tokens;
    if (rec->output_tokens > 0) res->output_tokens += rec->output_tokens;
    double e = (double)(rec->end - rec->sched) / NS_PER_MS;
    e2e[ne++] = e;
    if (rec->start >= 0) queue[nq++] = (double)(rec->start - rec->sched) / NS_PER_MS;
    int good = 1;
    if (rec->first >= 0) {
      double t = (double)(rec->first - rec->sched) / NS_PER_MS;
      ttft[nt++] = t;
      if (o->slo_ttft_ms > 0 && t > o->slo_ttft_ms) good = 0;
      double tp = o->stream ? lg_tpot(e, t, rec->output_tokens) : -1;
      if (tp >= 0) {
        tpot[np++] = tp;
        if (o->slo_tpot_ms > 0 && tp > o->slo_tpot_ms) good = 0;
      }
    } else if (o->slo_ttft_ms > 0) {
      good = 0; /* no output: no first token to meet the SLO with */
    }
    res->good += good;
  }
  res->errors = res->sent - res->ok - res->timeouts;
  for (size_t k = 0; k < r->n_itl; k++)
    itl[k] = r->itl[k] / NS_PER_MS;
  lg_summarize(ttft, nt, &res->ttft);
  lg_summarize(tpot, np, &res->tpot);
  lg_summarize(itl, r->n_itl, &res->itl);
  lg_summarize(e2e, ne, &res->e2el);
  lg_summarize(queue, nq, &res->queue);
  free(ttft), free(tpot), free(e2e), free(queue), free(itl);
  if (res->sent && t_end > t_begin) {
    double d = (double)(t_end - t_begin) / 1e9;
    res->duration_s = d;
    res->req_throughput = (double)res->ok / d;
    res->out_throughput = (double)res->output_tokens / d;
    res->total_throughput = (double)(res->prompt_tokens + res->output_tokens) / d;
    res->goodput = (double)res->good / d;
  }
  if (res->sent > 1 && s_last > s_first)
    res->send_rate = (double)(res->sent - 1) / ((double)(s_last - s_first) / 1e9);
  return 0;
}

/* ---- table ----------------------------------------------------------------------------------- */

static void load_shape(const lg_opts *o, char *b, size_t n) {
  if (o->rate > 0) {
    int k = snprintf(b, n, "open loop, %g req/s, %s", o->rate,
                     o->burstiness == 1 ? "Poisson" : "gamma gaps");
    if (o->burstiness != 1) k += snprintf(b + k, n - (size_t)k, " (burstiness %g)", o->burstiness);
    if (o->max_concurrency)
      snprintf(b + k, n - (size_t)k, ", max concurrency %d", o->max_concurrency);
  } else {
    snprintf(b, n, "closed loop, concurrency %d", o->concurrency);
  }
}

static void row(FILE *f, const char *name, const lg_summary *s) {
  if (!s->n) {
    fprintf(f, "%-6s %10s\n", name, "n/a");
    return;
  }
  fprintf(f, "%-6s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %9zu\n", name, s->mean, s->p50, s->p90,
          s->p95, s->p99, s->max, s->n);
}

void lg_report_table(FILE *f, const lg_run *r, const lg_result *res) {
  const lg_opts *o = r->o;
  char shape[160];
  load_shape(o, shape, sizeof shape);
  fprintf(f, "================ nanoserve-loadgen ================\n");
  fprintf(f, "%-34s %s%s\n", "Target:", o->url, o->endpoint == LG_EP_CHAT ? " (chat)" : "");
  fprintf(f, "%-34s %s%s\n", "Load:", shape, r->interrupted ? "  [interrupted]" : "");
  fprintf(f, "%-34s %ld\n", "Requests sent:", res->sent);
  fprintf(f, "%-34s %ld\n", "Successful:", res->ok);
  fprintf(f, "%-34s %ld\n", "Errors:", res->errors);
  if (res->errors) {
    fprintf(f, "  %-32s %ld\n", "connection:", res->conn_errors);
    fprintf(f, "  %-32s %ld", "HTTP status:", res->http_errors);
    for (int k = 0; k < res->n_status; k++)
      fprintf(f, "%s%d x%d", k ? ", " : " (", res->status_codes[k], res->status_counts[k]);
    fprintf(f, "%s\n", res->n_status ? ")" : "");
    fprintf(f, "  %-32s %ld\n", "of which 429 (queue full):", res->http_429);
    fprintf(f, "  %-32s %ld\n", "bad reply:", res->proto_errors);
    fprintf(f, "  %-32s %ld\n", "error in stream:", res->stream_errors);
    if (res->interrupted) fprintf(f, "  %-32s %ld\n", "interrupted:", res->interrupted);
  }
  fprintf(f, "%-34s %ld\n", "Timeouts:", res->timeouts);
  if (res->warmup) fprintf(f, "%-34s %ld\n", "Warmup requests (not counted):", res->warmup);
  fprintf(f, "%-34s %.3f\n", "Duration (s):", res->duration_s);
  fprintf(f, "%-34s %ld\n", "Prompt tokens:", res->prompt_tokens);
  fprintf(f, "%-34s %ld\n", "Output tokens:", res->output_tokens);
  if (o->rate > 0) fprintf(f, "%-34s %.2f\n", "Send rate achieved (req/s):", res->send_rate);
  fprintf(f, "%-34s %.2f\n", "Request throughput (req/s):", res->req_throughput);
  fprintf(f, "%-34s %.2f\n", "Output token throughput (tok/s):", res->out_throughput);
  fprintf(f, "%-34s %.2f\n", "Total token throughput (tok/s):", res->total_throughput);
  if (o->slo_ttft_ms > 0 || o->slo_tpot_ms > 0)
    fprintf(f, "%-34s %.2f (%ld requests within SLO)\n", "Goodput (req/s):", res->goodput,
            res->good);
  fprintf(f, "---------------------------------------------------------------------------\n");
  fprintf(f, "%-6s %10s %10s %10s %10s %10s %10s %9s\n", "ms", "mean", "p50", "p90", "p95", "p99",
          "max", "n");
  row(f, "TTFT", &res->ttft);
  row(f, "TPOT", &res->tpot);
  row(f, "ITL", &res->itl);
  row(f, "E2E", &res->e2el);
  if (o->max_concurrency) row(f, "Queue", &res->queue);
  fprintf(f, "===========================================================================\n");
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static cJSON *summary_json(const lg_summary *s) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "n", (double)s->n);
  cJSON_AddNumberToObject(o, "mean", s->mean);
  cJSON_AddNumberToObject(o, "std", s->std);
  cJSON_AddNumberToObject(o, "min", s->min);
  cJSON_AddNumberToObject(o, "p50", s->p50);
  cJSON_AddNumberToObject(o, "p90", s->p90);
  cJSON_AddNumberToObject(o, "p95", s->p95);
  cJSON_AddNumberToObject(o, "p99", s->p99);
  cJSON_AddNumberToObject(o, "max", s->max);
  return o;
}

static cJSON *params_json(const lg_run *r) {
  const lg_opts *o = r->o;
  static const char *const dists[] = {"fixed", "uniform", "normal"};
  cJSON *p = cJSON_CreateObject();
  cJSON_AddStringToObject(p, "url", o->url);
  cJSON_AddStringToObject(p, "endpoint", o->endpoint == LG_EP_CHAT ? "chat" : "completions");
  if (r->model[0])
    cJSON_AddStringToObject(p, "model", r->model);
  else
    cJSON_AddNullToObject(p, "model");
  cJSON_AddBoolToObject(p, "stream", o->stream);
  cJSON_AddBoolToObject(p, "ignore_eos", o->ignore_eos);
  if (o->temperature >= 0)
    cJSON_AddNumberToObject(p, "temperature", o->temperature);
  else
    cJSON_AddNullToObject(p, "temperature");
  cJSON_AddBoolToObject(p, "api_key", o->api_key != NULL); /* whether one was sent, not it */
  cJSON_AddStringToObject(p, "dataset", o->dataset);
  cJSON_AddNumberToObject(p, "input_len", o->input_len);
  cJSON_AddNumberToObject(p, "output_len", o->output_len);
  cJSON_AddStringToObject(p, "len_dist", dists[o->len_dist]);
  cJSON_AddNumberToObject(p, "len_spread", o->len_spread);
  cJSON_AddNumberToObject(p, "vocab_min", o->vocab_min);
  cJSON_AddNumberToObject(p, "vocab_max", o->vocab_max);
  cJSON_AddStringToObject(p, "load", o->rate > 0 ? "open" : "closed");
  cJSON_AddNumberToObject(p, "concurrency", o->concurrency);
  cJSON_AddNumberToObject(p, "rate", o->rate);
  cJSON_AddNumberToObject(p, "burstiness", o->burstiness);
  cJSON_AddNumberToObject(p, "max_concurrency", o->max_concurrency);
  cJSON_AddNumberToObject(p, "requests", (double)o->requests);
  cJSON_AddNumberToObject(p, "duration_s", o->duration_s);
  cJSON_AddNumberToObject(p, "warmup_requests", (double)o->warmup_requests);
  cJSON_AddNumberToObject(p, "warmup_s", o->warmup_s);
  cJSON_AddNumberToObject(p, "seed", (double)o->seed);
  cJSON_AddNumberToObject(p, "timeout_s", o->timeout_s);
  cJSON_AddNumberToObject(p, "slo_ttft_ms", o->slo_ttft_ms);
  cJSON_AddNumberToObject(p, "slo_tpot_ms", o->slo_tpot_ms);
  cJSON_AddNumberToObject(p, "max_model_len", (double)r->max_model_len);
  return p;
}

int lg_report_json(const char *path, const lg_run *r, const lg_result *res, char *err,
                   size_t errlen) {
  cJSON *j = cJSON_CreateObject();
  char date[32];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  cJSON_AddStringToObject(j, "tool", "nanoserve-loadgen");
  cJSON_AddStringToObject(j, "date", date);
  cJSON_AddItemToObject(j, "parameters", params_json(r));
  cJSON_AddBoolToObject(j, "interrupted", r->interrupted);
  cJSON *c = cJSON_AddObjectToObject(j, "counts");
  cJSON_AddNumberToObject(c, "sent", (double)res->sent);
  cJSON_AddNumberToObject(c, "ok", (double)res->ok);
  cJSON_AddNumberToObject(c, "errors", (double)res->errors);
  cJSON_AddNumberToObject(c, "timeouts", (double)res->timeouts);
  cJSON_AddNumberToObject(c, "connection_errors", (double)res->conn_errors);
  cJSON_AddNumberToObject(c, "http_errors", (double)res->http_errors);
  cJSON_AddNumberToObject(c, "http_429", (double)res->http_429);
  cJSON_AddNumberToObject(c, "bad_replies", (double)res->proto_errors);
  cJSON_AddNumberToObject(c, "stream_errors", (double)res->stream_errors);
  cJSON_AddNumberToObject(c, "interrupted", (double)res->interrupted);
  cJSON_AddNumberToObject(c, "warmup", (double)res->warmup);
  cJSON *bs = cJSON_AddObjectToObject(c, "by_status");
  for (int k = 0; k < res->n_status; k++) {
    char code[16];
    snprintf(code, sizeof code, "%d", res->status_codes[k]);
    cJSON_AddNumberToObject(bs, code, res->status_counts[k]);
  }
  cJSON_AddNumberToObject(j, "duration_s", res->duration_s);
  cJSON_AddNumberToObject(j, "send_rate", res->send_rate);
  cJSON_AddNumberToObject(j, "request_throughput", res->req_throughput);
  cJSON_AddNumberToObject(j, "output_throughput", res->out_throughput);
  cJSON_AddNumberToObject(j, "total_token_throughput", res->total_throughput);
  cJSON_AddNumberToObject(j, "goodput", res->goodput);
  cJSON_AddNumberToObject(j, "good_requests", (double)res->good);
  cJSON_AddNumberToObject(j, "total_input_tokens", (double)res->prompt_tokens);
  cJSON_AddNumberToObject(j, "total_output_tokens", (double)res->output_tokens);
  cJSON_AddItemToObject(j, "ttft_ms", summary_json(&res->ttft));
  cJSON_AddItemToObject(j, "tpot_ms", summary_json(&res->tpot));
  cJSON_AddItemToObject(j, "itl_ms", summary_json(&res->itl));
  cJSON_AddItemToObject(j, "e2el_ms", summary_json(&res->e2el));
  cJSON_AddItemToObject(j, "queue_ms", summary_json(&res->queue));
  if (res->first_error)
    cJSON_AddStringToObject(j, "first_error", res->first_error);
  else
    cJSON_AddNullToObject(j, "first_error");
  char *s = cJSON_Print(j);
  cJSON_Delete(j);
  if (!s) return ns_errf(err, errlen, NS_ENOMEM, "out of memory writing --json");
  FILE *f = fopen(path, "w");
  int rc = 0;
  if (!f || fputs(s, f) < 0 || fputc('\n', f) < 0)
    rc = ns_errf(err, errlen, NS_EIO, "--json %s: %s", path, strerror(errno));
  if (f && fclose(f) != 0 && rc == 0)
    rc = ns_errf(err, errlen, NS_EIO, "--json %s: %s", path, strerror(errno));
  free(s);
  return rc;
}

/* ---- CSV ------------------------------------------------------------------------------------- */

static void csv_time(FILE *f, int64_t t) {
  if (t >= 0) fprintf(f, "%.3f", (double)t / NS_PER_MS);
  fputc(',', f);
}

int lg_report_csv(const char *path, const lg_run *r, char *err, size_t errlen) {
  FILE *f = fopen(path, "w");
  if (!f) return ns_errf(err, errlen, NS_EIO, "--csv %s: %s", path, strerror(errno));
  fprintf(f, "id,warmup,scheduled_ms,start_ms,first_token_ms,end_ms,status,outcome,"
             "prompt_tokens,output_tokens,chunks,error\n");
  for (size_t i = 0; i < r->n_recs; i++) {
    const lg_rec *rec = &r->recs[i];
    if (rec->outcome == LG_NOTSENT || rec->outcome == LG_PENDING) continue;
    fprintf(f, "%zu,%d,", i, rec->warmup);
    csv_time(f, rec->sched);
    csv_time(f, rec->start);
    csv_time(f, rec->first);
    csv_time(f, rec->end);
    fprintf(f, "%d,%s,", rec->status, lg_outcome_name((lg_outcome)rec->outcome));
    if (rec->prompt_tokens >= 0) fprintf(f, "%d", rec->prompt_tokens);
    fputc(',', f);
    if (rec->output_tokens >= 0) fprintf(f, "%d", rec->output_tokens);
    fprintf(f, ",%d,", rec->chunks);
    if (rec->err) { /* quoted, quotes doubled; newlines flattened */
      fputc('"', f);
      for (const char *p = rec->err; *p; p++) {
        if (*p == '"') fputc('"', f);
        fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
      }
      fputc('"', f);
    }
    fputc('\n', f);
  }
  if (ferror(f) | (fclose(f) != 0))
    return ns_errf(err, errlen, NS_EIO, "--csv %s: write failed", path);
  return 0;
}
