/* lg_run.c — the load shapes on one libuv loop: the /v1/models probe, then a closed loop
 * (N always in flight) or open-loop arrivals (gamma/Poisson gaps, optional cap, waiting
 * arrivals keep their due time), warmup, limits, SIGINT and the progress line.
 * Entry: lg_run_exec. */
#include "lg.h"

#include "ns_err.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *lg_outcome_name(lg_outcome o) {
  switch (o) {
  case LG_PENDING: return "pending";
  case LG_OK: return "ok";
  case LG_EHTTP: return "http_error";
  case LG_ECONN: return "connection_error";
  case LG_EPROTO: return "bad_reply";
  case LG_ESTREAM: return "stream_error";
  case LG_TIMEOUT: return "timeout";
  case LG_EINTR: return "interrupted";
  case LG_NOTSENT: return "not_sent";
  }
  return "?";
}

static int64_t since_t0(const lg_run *r) {
  return (int64_t)(uv_hrtime() - r->t0);
}

static const char *api_path(const lg_opts *o) {
  return o->endpoint == LG_EP_CHAT ? "/v1/chat/completions" : "/v1/completions";
}

int lg_run__add_itl(lg_run *r, double gap_ns) {
  if (r->n_itl == r->cap_itl) {
    size_t nc = r->cap_itl ? r->cap_itl * 2 : 4096;
    double *n = realloc(r->itl, nc * sizeof *n);
    if (!n) return NS_ENOMEM;
    r->itl = n;
    r->cap_itl = nc;
  }
  r->itl[r->n_itl++] = gap_ns;
  return 0;
}

/* ---- records and admission ------------------------------------------------------------------- */

/* 0: no more requests; 1: a warmup request; 2: a measured one. sched: its due time. */
static int admit(lg_run *r, int64_t sched) {
  const lg_opts *o = r->o;
  if (r->stopping) return 0;
  if (r->issued_warmup < o->warmup_requests) return 1;
  if (o->warmup_s > 0 && sched < (int64_t)(o->warmup_s * 1e9)) return 1;
  if (o->requests && r->issued_counted >= o->requests) return 0;
  if (o->duration_s > 0 && r->measure_start >= 0 &&
      sched >= r->measure_start + (int64_t)(o->duration_s * 1e9))
    return 0;
  return 2;
}

/* A new record due at sched; SIZE_MAX when out of memory. */
static size_t new_rec(lg_run *r, int64_t sched, int warmup) {
  if (r->n_recs == r->cap_recs) {
    size_t nc = r->cap_recs ? r->cap_recs * 2 : 1024;
    lg_rec *n = realloc(r->recs, nc * sizeof *n);
    if (!n) return SIZE_MAX;
    r->recs = n;
    r->cap_recs = nc;
  }
  lg_rec *rec = &r->recs[r->n_recs];
  memset(rec, 0, sizeof *rec);
  rec->sched = sched;
  rec->start = rec->first = rec->last = rec->end = -1;
  rec->prompt_tokens = rec->output_tokens = -1;
  rec->warmup = (uint8_t)warmup;
  if (warmup) {
    r->issued_warmup++;
  } else {
    if (r->measure_start < 0) r->measure_start = sched;
    r->issued_counted++;
  }
  return r->n_recs++;
}

/* Send request idx now. */
static void start(lg_run *r, size_t idx) {
  int pt = -1, mt = 0;
  char *body = lg_work_body(r->work, idx, r->model[0] ? r->model : NULL, &pt, &mt);
  lg_rec *rec = &r->recs[idx];
  rec->prompt_tokens = pt;
  rec->max_tokens = mt;
  rec->start = since_t0(r);
  r->active++;
  if (!body) {
    rec->end = rec->start;
    rec->outcome = LG_EPROTO;
    rec->err = strdup("out of memory building the request");
    r->active--;
    lg_run__done(r, idx);
    return;
  }
  lg_http_send(r, idx, api_path(r->o), body, strlen(body));
}

static int enqueue(lg_run *r, size_t idx) {
  if (r->wq_len == r->wq_cap) {
    size_t nc = r->wq_cap ? r->wq_cap * 2 : 256;
    size_t *n = malloc(nc * sizeof *n);
    if (!n) return NS_ENOMEM;
    for (size_t k = 0; k < r->wq_len; k++)
      n[k] = r->waitq[(r->wq_head + k) % r->wq_cap];
    free(r->waitq);
    r->waitq = n;
    r->wq_cap = nc;
    r->wq_head = 0;
  }
  r->waitq[(r->wq_head + r->wq_len++) % r->wq_cap] = idx;
  return 0;
}

static size_t dequeue(lg_run *r) {
  size_t idx = r->waitq[r->wq_head];
  r->wq_head = (r->wq_head + 1) % r->wq_cap;
  r->wq_len--;
  return idx;
}

/* ---- the end --------------------------------------------------------------------------------- */

static void progress_line(lg_run *r, int final) {
  const lg_opts *o = r->o;
  double t = (double)since_t0(r) / 1e9;
  double span = r->measure_start >= 0 ? t - (double)r->measure_start / 1e9 : 0;
  char total[32] = "";
  if (o->requests) snprintf(total, sizeof total, "/%ld", o->requests);
  fprintf(stderr, "\r[%7.1f s] %ld%s done, %ld ok, %ld failed, %.2f req/s, %d in flight%s\033[K%s",
          t, r->done_counted, total, r->ok_counted, r->failed_counted,
          span > 0 ? (double)r->done_counted / span : 0.0, r->active,
          r->issued_warmup && r->measure_start < 0 ? " (warmup)" : "", final ? "\n" : "");
  fflush(stderr);
}

static void on_progress(uv_timer_t *t) {
  progress_line(t->data, 0);
}

static void maybe_end(lg_run *r) {
  if (r->finished || r->probe_pending || r->active > 0 || r->wq_len > 0) return;
  if (!r->arrivals_done && !r->stopping) return;
  r->finished = 1;
  uv_timer_stop(&r->arrival_timer);
  uv_timer_stop(&r->progress_timer);
  uv_signal_stop(&r->sigint); /* a second SIGINT now kills at once */
  if (r->progress_on) progress_line(r, 1);
  lg_http_close_all(r, 0);
}

static void on_sigint(uv_signal_t *s, int signum) {
  lg_run *r = s->data;
  uv_signal_stop(&r->sigint);
  r->interrupted = r->stopping = r->arrivals_done = 1;
  uv_timer_stop(&r->arrival_timer);
  while (r->wq_len)
    r->recs[dequeue(r)].outcome = LG_NOTSENT;
  lg_http_close_all(r, 1); /* in-flight requests end as LG_EINTR */
  maybe_end(r);
}

/* ---- closed loop ----------------------------------------------------------------------------- */

static void fill_closed(lg_run *r) {
  while (!r->arrivals_done && r->active < r->limit) {
    int64_t now = since_t0(r);
    int kind = admit(r, now);
    size_t idx = kind ? new_rec(r, now, kind == 1) : SIZE_MAX;
    if (idx == SIZE_MAX) {
      r->arrivals_done = 1;
      break;
    }
    start(r, idx);
  }
}

/* ---- open loop ------------------------------------------------------------------------------- */

static void on_arrival(uv_timer_t *t) {
  lg_run *r = t->data;
  int64_t now = since_t0(r);
  while (!r->arrivals_done && r->next_arrival <= now) {
    int kind = admit(r, r->next_arrival);
    size_t idx = kind ? new_rec(r, r->next_arrival, kind == 1) : SIZE_MAX;
    if (idx == SIZE_MAX) {
      r->arrivals_done = 1;
      break;
    }
    if (r->active < r->limit)
      start(r, idx);
    else if (enqueue(r, idx) != 0) {
      r->recs[idx].outcome = LG_NOTSENT;
      r->arrivals_done = 1;
    }
    r->next_arrival += (int64_t)(lg_gap_s(&r->arrival_rng, r->o->rate, r->o->burstiness) * 1e9);
  }
  if (!r->arrivals_done) {
    /* libuv timers count whole ms from the loop's clock: wake at or just before the due
     * time (a 0 ms timer runs on the next iteration), so sends are late by < 1 ms */
    uv_update_time(r->loop);
    now = since_t0(r);
    int64_t wait = r->next_arrival > now ? (r->next_arrival - now) / 1000000 : 0;
    uv_timer_start(&r->arrival_timer, on_arrival, (uint64_t)wait, 0);
  }
  maybe_end(r);
}

/* ---- the run --------------------------------------------------------------------------------- */

static void begin(lg_run *r) {
  r->t0 = uv_hrtime();
  if (r->progress_on) uv_timer_start(&r->progress_timer, on_progress, 250, 250);
  if (r->o->rate > 0) {
    r->next_arrival = 0;
    uv_timer_start(&r->arrival_timer, on_arrival, 0, 0);
  } else {
    fill_closed(r);
    maybe_end(r);
  }
}

void lg_run__done(lg_run *r, size_t idx) {
  lg_rec *rec = &r->recs[idx];
  if (!rec->warmup) {
    r->done_counted++;
    if (rec->outcome == LG_OK)
      r->ok_counted++;
    else
      r->failed_counted++;
  }
  if (!r->stopping) {
    if (r->o->rate > 0) {
      while (r->active < r->limit && r->wq_len)
        start(r, dequeue(r));
    } else {
      fill_closed(r);
    }
  }
  maybe_end(r);
}

void lg_run__probe_done(lg_run *r, int status, const char *body, size_t len, const char *err) {
  const lg_opts *o = r->o;
  if (r->stopping) {
    maybe_end(r);
    return;
  }
  if (err || status != 200) {
    fprintf(stderr, "nanoserve-loadgen: warning: GET %s/v1/models: %s; going on\n", o->url,
            err ? err : "not 200");
  } else {
    cJSON *j = cJSON_ParseWithLength(body, len);
    cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "data"), 0);
    cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
    cJSON *ml = cJSON_GetObjectItemCaseSensitive(m, "max_model_len");
    if (!m) fprintf(stderr, "nanoserve-loadgen: warning: /v1/models lists no model; going on\n");
    if (cJSON_IsString(id) && !o->model) snprintf(r->model, sizeof r->model, "%s", id->valuestring);
    if (cJSON_IsNumber(ml)) r->max_model_len = (long)ml->valuedouble;
    cJSON_Delete(j);
    long need = (long)o->input_len + o->output_len;
    if (r->max_model_len > 0 && lg_work_items(r->work) == 0 && need > r->max_model_len)
      fprintf(stderr,
              "nanoserve-loadgen: warning: --input-len + --output-len = %ld is over the server's "
              "max_model_len %ld: requests will be refused\n",
              need, r->max_model_len);
  }
  begin(r);
}

int lg_run_exec(lg_run *r, const lg_opts *o, lg_work *w, char *err, size_t errlen) {
  memset(r, 0, sizeof *r);
  r->o = o;
  r->work = w;
  r->measure_start = -1;
  if (o->model) snprintf(r->model, sizeof r->model, "%s", o->model);
  ns_rng_seed(&r->arrival_rng, o->seed ^ 0xa11e7a15u);
  r->limit = o->rate > 0 ? (o->max_concurrency ? o->max_concurrency : INT32_MAX) : o->concurrency;
  r->loop = malloc(sizeof *r->loop);
  if (!r->loop || uv_loop_init(r->loop) != 0) {
    free(r->loop);
    r->loop = NULL;
    return ns_errf(err, errlen, NS_ENOMEM, "cannot start the event loop");
  }
  /* resolve once, before the clock starts */
  uv_getaddrinfo_t gai;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  char port[16];
  snprintf(port, sizeof port, "%d", o->port);
  int rc = uv_getaddrinfo(r->loop, &gai, NULL, o->host, port, &hints);
  if (rc != 0 || !gai.addrinfo)
    return ns_errf(err, errlen, NS_ENOENT, "cannot resolve '%s': %s", o->host,
                   rc ? uv_strerror(rc) : "no address");
  memcpy(&r->addr, gai.addrinfo->ai_addr, gai.addrinfo->ai_addrlen);
  uv_freeaddrinfo(gai.addrinfo);

  uv_timer_init(r->loop, &r->arrival_timer);
  uv_timer_init(r->loop, &r->progress_timer);
  uv_signal_init(r->loop, &r->sigint);
  r->arrival_timer.data = r->progress_timer.data = r->sigint.data = r;
  uv_signal_start(&r->sigint, on_sigint, SIGINT);
  r->progress_on = o->progress < 0 ? isatty(2) : o->progress;
  r->t0 = uv_hrtime();
  if (o->probe)
    lg_http_send(r, LG_PROBE, "/v1/models", NULL, 0);
  else
    begin(r);
  uv_run(r->loop, UV_RUN_DEFAULT);
  return 0;
}

static void close_any(uv_handle_t *h, void *arg) {
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

void lg_run_free(lg_run *r) {
  if (r->loop) {
    uv_walk(r->loop, close_any, NULL);
    uv_run(r->loop, UV_RUN_DEFAULT);
    uv_loop_close(r->loop);
    free(r->loop);
  }
  for (size_t i = 0; i < r->n_recs; i++)
    free(r->recs[i].err);
  free(r->recs);
  free(r->itl);
  free(r->waitq);
  memset(r, 0, sizeof *r);
}
