/* metrics.c — Prometheus text exposition (format 0.0.4) of the API's histograms and
 * counters plus engine and HTTP gauges. Entry point: srv_metrics_render. */
#include "metrics.h"

#include "ns_buf.h"
#include "ns_err.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BUCKETS 24
#define N_ENDPOINTS 8
#define N_FINISH    4

typedef struct hist {
  const double *le; /* upper bounds, ascending; +Inf implied */
  int n;
  uint64_t count[MAX_BUCKETS + 1]; /* per bucket (not cumulative); [n]: above the last */
  uint64_t total;
  double sum;
} hist_t;

/* vLLM's bucket choices, so dashboards built for it read these the same way */
static const double ttft_le[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                 0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
static const double itl_le[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
static const double e2e_le[] = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
static const double queue_le[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1,  0.25,  0.5,  1.0,
                                  2.5,   5.0,   10.0, 20.0,  30.0, 60.0, 120.0, 300.0};

static const char *const finish_names[N_FINISH] = {"stop", "length", "cancelled", "error"};

struct srv_metrics {
  hist_t ttft, itl, e2e, queue;
  /* requests by endpoint and status code; endpoints are interned on first use */
  const char *endpoints[N_ENDPOINTS];
  uint64_t by_status[N_ENDPOINTS][600];
  uint64_t by_finish[N_FINISH];
  uint64_t prompt_tokens, generation_tokens;
};

static void hist_init(hist_t *h, const double *le, int n) {
  memset(h, 0, sizeof *h);
  h->le = le;
  h->n = n;
}

static void hist_observe(hist_t *h, double v, uint64_t n) {
  if (!(v >= 0) || n == 0) return;
  int i = 0;
  while (i < h->n && v > h->le[i])
    i++;
  h->count[i] += n;
  h->total += n;
  h->sum += v * (double)n;
}

int srv_metrics_new(srv_metrics_t **out) {
  srv_metrics_t *m = calloc(1, sizeof *m);
  if (!m) return NS_ENOMEM;
#define N(a) ((int)(sizeof a / sizeof a[0]))
  hist_init(&m->ttft, ttft_le, N(ttft_le));
  hist_init(&m->itl, itl_le, N(itl_le));
  hist_init(&m->e2e, e2e_le, N(e2e_le));
  hist_init(&m->queue, queue_le, N(queue_le));
#undef N
  *out = m;
  return 0;
}

void srv_metrics_free(srv_metrics_t *m) {
  free(m);
}

void srv_metrics_request(srv_metrics_t *m, const srv_req_record_t *r) {
  int e = 0;
  while (e < N_ENDPOINTS - 1 && m->endpoints[e] && strcmp(m->endpoints[e], r->endpoint) != 0)
    e++;
  if (!m->endpoints[e]) m->endpoints[e] = r->endpoint; /* static strings */
  if (r->status >= 0 && r->status < 600) m->by_status[e][r->status]++;
  if (r->finish)
    for (int i = 0; i < N_FINISH; i++)
      if (strcmp(r->finish, finish_names[i]) == 0) m->by_finish[i]++;
  if (r->prompt_tokens > 0) m->prompt_tokens += (uint64_t)r->prompt_tokens;
  if (r->completion_tokens > 0) m->generation_tokens += (uint64_t)r->completion_tokens;
  if (r->ttft_s >= 0) hist_observe(&m->ttft, r->ttft_s, 1);
  if (r->e2e_s >= 0) hist_observe(&m->e2e, r->e2e_s, 1);
  if (r->queue_s >= 0) hist_observe(&m->queue, r->queue_s, 1);
}

void srv_metrics_itl(srv_metrics_t *m, double seconds_each, int n) {
  if (n > 0) hist_observe(&m->itl, seconds_each, (uint64_t)n);
}

/* ---- rendering ------------------------------------------------------------------------- */

static void head(ns_buf *o, const char *name, const char *type, const char *help) {
  ns_buf_printf(o, "# HELP nanoserve_%s %s\n# TYPE nanoserve_%s %s\n", name, help, name, type);
}

static void gauge(ns_buf *o, const char *name, const char *help, double v) {
  head(o, name, "gauge", help);
  ns_buf_printf(o, "nanoserve_%s %.17g\n", name, v);
}

static void counter(ns_buf *o, const char *name, const char *help, double v) {
  head(o, name, "counter", help);
  ns_buf_printf(o, "nanoserve_%s %.17g\n", name, v);
}

static void hist(ns_buf *o, const char *name, const char *help, const hist_t *h) {
  head(o, name, "histogram", help);
  uint64_t cum = 0;
  for (int i = 0; i < h->n; i++) {
    cum += h->count[i];
    ns_buf_printf(o, "nanoserve_%s_bucket{le=\"%g\"} %llu\n", name, h->le[i],
                  (unsigned long long)cum);
  }
  ns_buf_printf(o, "nanoserve_%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->total);
  ns_buf_printf(o, "nanoserve_%s_sum %.17g\n", name, h->sum);
  ns_buf_printf(o, "nanoserve_%s_count %llu\n", name, (unsigned long long)h->total);
}

static void render_api(ns_buf *o, const srv_metrics_t *m) {
  head(o, "requests_total", "counter",
       "API requests finished, by endpoint and HTTP status "
       "(0: the client went away first).");
  for (int e = 0; e < N_ENDPOINTS && m->endpoints[e]; e++)
    for (int s = 0; s < 600; s++)
      if (m->by_status[e][s])
        ns_buf_printf(o, "nanoserve_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
                      m->endpoints[e], s, (unsigned long long)m->by_status[e][s]);
  head(o, "request_finish_total", "counter", "Generation requests finished, by finish reason.");
  for (int i = 0; i < N_FINISH; i++)
    ns_buf_printf(o, "nanoserve_request_finish_total{reason=\"%s\"} %llu\n", finish_names[i],
                  (unsigned long long)m->by_finish[i]);
  counter(o, "prompt_tokens_total", "Prompt tokens of finished generation requests.",
          (double)m->prompt_tokens);
  counter(o, "generation_tokens_total", "Tokens generated by finished requests.",
          (double)m->generation_tokens);
  hist(o, "time_to_first_token_seconds", "Request received to first token sampled.", &m->ttft);
  hist(o, "inter_token_latency_seconds", "Time between consecutive tokens of a request.", &m->itl);
  hist(o, "e2e_request_latency_seconds", "Request received to its final event.", &m->e2e);
  hist(o, "request_queue_time_seconds", "Submitted to admitted by the scheduler.", &m->queue);
}

static void render_engine(ns_buf *o, const eng_stats_t *s) {
  gauge(o, "num_requests_running", "Requests prefilling or decoding.", s->running);
  gauge(o, "num_requests_waiting", "Requests queued for admission.", s->waiting);
  gauge(o, "kv_cache_pages_used", "KV cache pages held by sequences.", s->kv_pages_used);
  gauge(o, "kv_cache_pages_total", "KV cache pages in all.", s->kv_pages_total);
  gauge(o, "kv_cache_usage_ratio", "Share of KV cache pages in use.",
        s->kv_pages_total ? (double)s->kv_pages_used / s->kv_pages_total : 0.0);
  gauge(o, "batch_size", "Sequences in the engine's last step.", s->batch_size);
  counter(o, "engine_steps_total", "Engine steps run.", (double)s->steps);
  counter(o, "preemptions_total", "Sequences preempted when KV pages ran out.",
          (double)s->preemptions);
  gauge(o, "memory_pool_bytes_in_use", "Bytes of the memory pool allocated.",
        (double)s->pool_bytes_in_use);
  gauge(o, "memory_pool_bytes_total", "Bytes of the memory pool.", (double)s->pool_bytes_total);
  gauge(o, "memory_pool_largest_free_bytes", "Largest free block of the memory pool.",
        (double)s->pool_largest_free);
  gauge(o, "memory_pool_fragmentation_ratio",
        "1 - largest free block / free bytes of the memory pool.", s->pool_fragmentation);
  gauge(o, "engine_dead", "1 when the backend failed for good.", s->dead);
}

static void render_http(ns_buf *o, const http_stats_t *h) {
  gauge(o, "http_open_connections", "Client connections open.", (double)h->open_connections);
  gauge(o, "http_inflight_requests", "HTTP requests being handled.", (double)h->inflight_requests);
  counter(o, "http_connections_total", "Connections accepted.", (double)h->connections_total);
  counter(o, "http_rejected_connections_total",
          "Connections closed at accept, or answered 503 past server.max_connections "
          "(where only probes are served).",
          (double)h->rejected_connections);
  head(o, "http_responses_total", "counter",
       "HTTP responses by status class, transport errors included (0xx: cancelled).");
  for (int c = 0; c < 6; c++)
    ns_buf_printf(o, "nanoserve_http_responses_total{class=\"%dxx\"} %llu\n", c,
                  (unsigned long long)h->responses_by_class[c]);
  counter(o, "http_request_timeouts_total", "Requests past server.request_timeout_s.",
          (double)h->request_timeouts);
  counter(o, "http_slow_client_drops_total", "Streams dropped: client not reading.",
          (double)h->slow_client_drops);
}

char *srv_metrics_render(const srv_metrics_t *m, const eng_stats_t *es, const http_stats_t *hs,
                         size_t *len) {
  ns_buf o = {malloc(16384), 0, 16384, 0};
  if (!o.p) return NULL;
  render_api(&o, m);
  if (es) render_engine(&o, es);
  if (hs) render_http(&o, hs);
  if (o.oom) {
    free(o.p);
    return NULL;
  }
  *len = o.len;
  return o.p;
}
