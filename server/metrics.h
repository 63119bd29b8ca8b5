/* metrics.h — the daemon's Prometheus metrics: latency histograms and request counters
 * kept by the API, rendered with the engine's and the HTTP layer's gauges as text format
 * 0.0.4. Entry points: srv_metrics_new, srv_metrics_request, srv_metrics_render.
 *
 * Threads: loop thread only (no locks): the API records from its handlers and event
 * callback, /metrics renders there. */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include "engine.h"
#include "http.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct srv_metrics srv_metrics_t;

int srv_metrics_new(srv_metrics_t **out); /* 0 or NS_ENOMEM */
void srv_metrics_free(srv_metrics_t *m);

/* One finished API request (any endpoint that reached the API handlers). finish is
 * "stop", "length", "cancelled", "error" or NULL (not a generation). Seconds < 0 are not
 * observed (unknown). */
typedef struct srv_req_record {
  const char *endpoint; /* "completions", "chat", "tokenize", ... */
  int status;           /* HTTP status sent (0: the client went away) */
  const char *finish;
  int prompt_tokens, completion_tokens;
  double ttft_s, e2e_s, queue_s;
} srv_req_record_t;
void srv_metrics_request(srv_metrics_t *m, const srv_req_record_t *r);
/* Inter-token latency: n tokens arrived seconds_each apart (observed n times). */
void srv_metrics_itl(srv_metrics_t *m, double seconds_each, int n);

/* Render everything; es / hs may be NULL (their metrics are then left out). malloc'd
 * text (the caller frees) of *len bytes; NULL when out of memory. */
char *srv_metrics_render(const srv_metrics_t *m, const eng_stats_t *es, const http_stats_t *hs,
                         size_t *len);

#ifdef __cplusplus
}
#endif
#endif
