/* lg.h — nanoserve-loadgen's parts and how they meet: options (lg_opts.c), workloads
 * (lg_work.c), the run with its load shapes (lg_run.c), the HTTP/SSE client (lg_http.c) and
 * the report (lg_report.c). One libuv loop on the main thread runs everything. */
#ifndef LG_H
#define LG_H

#include "lg_stats.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <uv.h>

#define LG_EXIT_OK     0
#define LG_EXIT_FAILED 1   /* requests failed (or none was sent); the figures are still written */
#define LG_EXIT_USAGE  2   /* bad option, URL or dataset */
#define LG_EXIT_INT    130 /* SIGINT: figures so far */

/* ---- options (lg_opts.c) ------------------------------------------------------------------ */

typedef enum lg_endpoint { LG_EP_COMPLETIONS = 0, LG_EP_CHAT } lg_endpoint;

typedef struct lg_opts {
  /* target */
  char url[512];  /* as given */
  char host[256]; /* without brackets for IPv6 */
  int port;
  char base[256];              /* path prefix, "" or "/x" (no trailing slash) */
  char authority[300];         /* the Host header */
  const char *api_key, *model; /* NULL: none / the server's id from /v1/models */
  lg_endpoint endpoint;
  int stream, ignore_eos;
  double temperature; /* < 0: not sent */
  /* workload */
  const char *dataset; /* "random" or a JSONL path */
  int input_len, output_len, output_len_set;
  lg_len_dist len_dist;
  double len_spread;
  int vocab_min, vocab_max;
  /* load shape: closed loop when rate == 0 */
  int concurrency;
  double rate, burstiness;
  int max_concurrency; /* 0: unbounded (open loop) */
  long requests;       /* measured requests; 0: unbounded (duration only) */
  double duration_s;   /* 0: unbounded */
  long warmup_requests;
  double warmup_s;
  uint64_t seed;
  double timeout_s;
  double slo_ttft_ms, slo_tpot_ms; /* 0: none */
  /* output */
  const char *json_path, *csv_path;
  int progress; /* -1 auto (stderr is a TTY), 0 off, 1 on */
  int probe;    /* ask /v1/models first */
} lg_opts;

/* Parse argv into *o. Returns 0, 1 when --help/--version was printed (exit 0), or
 * LG_EXIT_USAGE with a message already on stderr. */
int lg_opts_parse(int argc, char **argv, lg_opts *o);
/* Split "http://host[:port][/prefix]" into o->host, port, base, authority. 0 or NS_EINVAL
 * with the reason in err. */
int lg_url_parse(const char *url, lg_opts *o, char *err, size_t errlen);

/* ---- workloads (lg_work.c) ---------------------------------------------------------------- */

typedef struct lg_work lg_work;

/* Random prompts, or the items of a JSONL file ({"prompt": ...} or {"messages": [...]},
 * optional "max_tokens"). 0 or NS_E* with a message in err. */
int lg_work_open(const lg_opts *o, lg_work **out, char *err, size_t errlen);
void lg_work_free(lg_work *w);
size_t lg_work_items(const lg_work *w); /* 0 for random */
/* The JSON body of request `i`, the same for the same (seed, i) whatever the timing;
 * *prompt_tokens is the number of prompt ids sent, or -1 when the prompt is text.
 * model may be NULL (field left out). Returns a malloc'd string or NULL (out of memory). */
char *lg_work_body(lg_work *w, uint64_t i, const char *model, int *prompt_tokens, int *max_tokens);

/* ---- one request's record ----------------------------------------------------------------- */

typedef enum lg_outcome {
  LG_PENDING = 0, /* scheduled, not finished */
  LG_OK,          /* 2xx and a well-formed reply */
  LG_EHTTP,       /* a non-2xx status */
  LG_ECONN,       /* connect failed, reset, or closed before the reply ended */
  LG_EPROTO,      /* malformed HTTP, chunking, SSE or JSON */
  LG_ESTREAM,     /* an error event inside a stream that had started */
  LG_TIMEOUT,     /* --timeout passed */
  LG_EINTR,       /* in flight at SIGINT */
  LG_NOTSENT      /* queued at SIGINT, never sent: not in any count */
} lg_outcome;

const char *lg_outcome_name(lg_outcome o);

/* Times are ns since the run's start (uv_hrtime at t0); -1: not reached. */
typedef struct lg_rec {
  int64_t sched; /* when it was due: the arrival (open loop) or issue (closed loop) time */
  int64_t start; /* when its connect or write began */
  int64_t first; /* the first token chunk (lg_http.c on_event) */
  int64_t last;  /* the latest such chunk */
  int64_t end;   /* the reply's end, or the failure */
  int status;    /* HTTP status, 0 for none */
  int prompt_tokens, output_tokens; /* usage when the server sent it, else what was sent /
                                       the token chunks counted; -1 unknown */
  int chunks;                       /* chunks that carried output */
  int max_tokens;
  uint8_t outcome, warmup, retried, got_usage;
  char *err; /* malloc'd message, or NULL */
} lg_rec;

/* ---- the run (lg_run.c) and its client (lg_http.c) ------------------------------------- */

typedef struct lg_conn lg_conn;

typedef struct lg_run {
  const lg_opts *o;
  lg_work *work;
  uv_loop_t *loop;
  struct sockaddr_storage addr;
  char model[256];    /* the model field to send; "" for none */
  long max_model_len; /* from /v1/models, 0 unknown */
  uint64_t t0;        /* uv_hrtime at the start */
  /* records, in issue order; warmup ones are flagged */
  lg_rec *recs;
  size_t n_recs, cap_recs;
  double *itl; /* every inter-chunk gap of counted successful requests, ns */
  size_t n_itl, cap_itl;
  /* scheduling */
  int limit;     /* max requests in flight (INT32_MAX: unbounded) */
  int active;    /* in flight (connecting, writing or reading) */
  size_t *waitq; /* arrivals waiting for a slot (open loop with --max-concurrency) */
  size_t wq_head, wq_len, wq_cap;
  long issued_counted, issued_warmup;
  int64_t measure_start; /* -1 until the first counted request is due */
  int64_t next_arrival;
  int arrivals_done, stopping, interrupted, finished;
  ns_rng arrival_rng;
  uv_timer_t arrival_timer, progress_timer;
  uv_signal_t sigint;
  int progress_on;
  long done_counted, ok_counted, failed_counted;
  /* connections (lg_http.c) */
  lg_conn *idle; /* keep-alive connections, doubly linked */
  lg_conn *busy; /* connections with a request */
  int n_conns;
  int probe_pending; /* the /v1/models request */
} lg_run;

#define LG_PROBE ((size_t)-1) /* the request index of the /v1/models probe */

/* Run the whole load (probe, warmup, measured requests) on a fresh loop; returns 0 or
 * NS_E* with a message in err. The records stay in *r for the report; lg_run_free after. */
int lg_run_exec(lg_run *r, const lg_opts *o, lg_work *w, char *err, size_t errlen);
void lg_run_free(lg_run *r);
/* From lg_http.c: request idx finished (its record has outcome and end set). */
void lg_run__done(lg_run *r, size_t idx);
/* From lg_http.c: the probe's reply (status 0 and err set when it failed). */
void lg_run__probe_done(lg_run *r, int status, const char *body, size_t len, const char *err);
/* Append a gap (ns) to r->itl; NS_ENOMEM on failure. */
int lg_run__add_itl(lg_run *r, double gap_ns);

/* Start request idx now: take an idle keep-alive connection or open one, send `body` (taken
 * over; freed here) as the request for `path`. Any failure is reported through
 * lg_run__done. idx == LG_PROBE sends GET path without a body. */
void lg_http_send(lg_run *r, size_t idx, const char *path, char *body, size_t body_len);
/* Close idle connections; with `abort`, also fail in-flight requests as LG_EINTR. */
void lg_http_close_all(lg_run *r, int abort);

/* ---- the report (lg_report.c) ---------------------------------------------------------- */

typedef struct lg_result {
  long sent, ok, errors, timeouts, conn_errors, proto_errors, stream_errors, http_errors, http_429,
      interrupted, warmup;
  int status_codes[16], status_counts[16], n_status; /* non-2xx statuses seen */
  double duration_s; /* first counted request due .. last counted reply ended */
  double send_rate;  /* achieved: (sent - 1) / (last start - first start) */
  double req_throughput, out_throughput, total_throughput, goodput;
  long good;
  long prompt_tokens, output_tokens;
  lg_summary ttft, tpot, itl, e2el, queue; /* ms; queue = start - sched */
  const char *first_error;
} lg_result;

/* Compute the figures from r's counted records. Sorts copies; r is unchanged. */
int lg_report_compute(const lg_run *r, lg_result *res);
void lg_report_table(FILE *f, const lg_run *r, const lg_result *res);
/* 0 or NS_EIO / NS_ENOMEM with a message in err. */
int lg_report_json(const char *path, const lg_run *r, const lg_result *res, char *err,
                   size_t errlen);
int lg_report_csv(const char *path, const lg_run *r, char *err, size_t errlen);

#endif
