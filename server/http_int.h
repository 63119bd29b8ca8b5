/* http_int.h — internals shared by the http_*.c files (not part of the contract in http.h).
 * Server, connection and request structures and the http__ functions between files. */
#ifndef HTTP_INT_H
#define HTTP_INT_H

#include "http.h"

#include <llhttp.h>
#include <stdbool.h>

#define HTTP_READ_BUF           65536       /* one read's scratch buffer */
#define HTTP_INFLIGHT_READAHEAD (64 * 1024) /* pipelined bytes buffered while busy */
#define HTTP_OUTPUT_HIGH_WATER  (64 * 1024) /* unsent response bytes that pause parsing */
#define HTTP_LINGER_MS          2000        /* read-and-discard after a closing response */
#define HTTP_SEND_TICK_MS       1000        /* how often a response being sent is checked */
#define HTTP_ACCEPT_BACKOFF_MS  100         /* pause accepting after EMFILE/ENFILE */
#define HTTP_RATE_GRACE_MS      1000        /* min_recv_rate_bps applies after this */
#define HTTP_RATE_MIN_BYTES     (16 * 1024) /* ... to requests of this size or more */

/* copy of the server.* settings, in the units the code uses */
typedef struct http_limits {
  int max_connections;
  size_t max_header_bytes;
  int max_headers;
  size_t max_url_bytes;
  uint64_t max_body_bytes;
  uint64_t header_timeout_ms, body_timeout_ms, keepalive_timeout_ms, request_timeout_ms;
  uint64_t send_timeout_ms;
  uint64_t min_recv_rate_bps;
  size_t max_sse_buffer_bytes;
} http_limits_t;

typedef struct http_route {
  char *method;
  char *path;
  http_handler_fn handler;
  void *ud;
  unsigned flags;
} http_route_t;

struct http_server {
  uv_loop_t *loop;
  http_limits_t lim;
  char *host;
  int port_cfg, port;
  char *keys_file;
  bool public_health;
  /* listening: a plain socket watched by uv_poll, so accepting can pause (EMFILE) */
  int lfd;
  uv_poll_t lpoll;
  uv_timer_t backoff;
  bool listening, lpoll_open, backoff_open, draining, closing;
  int handles_open; /* lpoll + backoff not yet closed */
  void (*done)(void *);
  void *done_arg;
  /* connections */
  http_conn_t *conns; /* doubly linked through prev/next */
  uint64_t last_reject_log_ms, rejects_unlogged;
  uint64_t last_accept_log_ms, accept_errors_unlogged; /* EMFILE warnings: one a second */
  /* routes and keys */
  http_route_t *routes;
  size_t nroutes, routes_cap;
  char **keys;
  size_t nkeys, keys_maxlen;
  http_stats_t st;
  char date[40];
  int64_t date_sec;
  char rbuf[HTTP_READ_BUF];
};

typedef enum conn_phase {
  PH_IDLE,     /* between requests: keep-alive (or new) connection */
  PH_HEADERS,  /* receiving request line and headers */
  PH_BODY,     /* receiving the body */
  PH_INFLIGHT, /* request complete, with a handler (or being answered) */
  PH_LINGER    /* answered for the last time: draining input before close */
} conn_phase;

struct http_conn {
  uv_tcp_t tcp;
  uv_timer_t timer;
  uv_shutdown_t shut;
  http_server_t *srv;
  http_conn_t *prev, *next;
  llhttp_t parser;
  conn_phase phase;
  bool fake;        /* http__test_conn: no socket, no timers, output kept in memory */
  bool closing;     /* uv_close called (or fake closed) */
  bool shutting;    /* graceful close started */
  bool reading;     /* uv_read_start active */
  bool in_process;  /* conn_process on the stack (re-entrancy guard) */
  bool kill_queued; /* slow client: close from the next timer callback */
  bool resume_queued;
  bool eof;     /* the peer closed its side */
  bool reserve; /* accepted past max_connections: one request, probe routes only */
  int handles_open;
  /* unparsed input */
  char *in;
  size_t in_len, in_off, in_cap;
  /* the request being parsed or in flight (attached) */
  http_req_t *req;
  size_t hdr_bytes;       /* bytes of request line + headers parsed so far */
  uint64_t recv_start_ms; /* first byte of this request */
  uint64_t recv_bytes;    /* bytes of this request parsed so far */
  uint64_t deadline_ms;   /* header/body/request deadline of the phase */
  uint64_t last_write_ms; /* last write completion (keep-alive idleness counts from it) */
  uint64_t queued_total;  /* bytes ever handed to uv_write */
  uint64_t sent_mark;     /* of those, bytes the socket had taken at the last check */
  uint64_t last_sent_ms;  /* when the socket last took output (send_timeout counts from it) */
  int err_status;         /* set by parser callbacks before failing (message in req) */
  uint64_t *err_counter;  /* the http_stats_t counter of that failure */
  size_t writes_pending;
  uint64_t served;
  char peer[64];
  /* fake connections: captured output */
  char *out;
  size_t out_len, out_cap;
};

enum { HREQ_NAME = 0, HREQ_VALUE = 1, HREQ_DONE = 2 };

struct http_req {
  http_server_t *srv; /* NULL once detached */
  http_conn_t *conn;  /* NULL once detached (finished or cancelled) */
  int refs;           /* the connection's + the handler's */
  uint64_t id, start_ms, start_ns;
  char method[24];
  int http_major, http_minor;
  bool keep_alive, upgrade, hdr_started, hdr_done, msg_done, expect_continue;
  bool handler_owned, finished, cancelled, resp_started, sse, chunked, close_after;
  int status;         /* sent (or to log) */
  uint64_t bytes_out; /* response bytes queued */
  /* URL (path NUL-terminated in place at dispatch; query points after '?') */
  char *url;
  size_t url_len, url_cap;
  const char *path, *query;
  /* headers: NUL-terminated names and values in hbuf, offsets in hdr[] */
  char *hbuf;
  size_t hlen, hcap;
  uint32_t (*hdr)[2];
  size_t nhdr, hdr_cap;
  int last_cb; /* HREQ_NAME / HREQ_VALUE: which span continues */
  /* body */
  char *body;
  size_t body_len, body_cap;
  uint64_t body_total; /* body bytes received, kept or not */
  /* routing decision made at end of headers */
  http_handler_fn handler;
  void *handler_ud;
  int pre_status; /* 401/404/405 decided before the body, answered after it */
  char pre_allow[128];
  char msg[256]; /* the error message of pre_status or of a parse failure */
  http_cancel_fn cancel_fn;
  void *cancel_ud;
  char peer[64];
};

/* http_parse.c */
extern const llhttp_settings_t http__settings; /* the callbacks, parser->data = the conn */
int http__buf_grow(char **buf, size_t *cap, size_t need);
/* Append n bytes and keep the buffer NUL-terminated after *len. */
int http__buf_append(char **buf, size_t *len, size_t *cap, const char *src, size_t n);
/* http_conn.c */
void http__conn_accepted(http_server_t *srv, int fd, bool reserve);
char *http__wbuf_alloc(size_t len); /* a write buffer that http__conn_write frees */
void http__wbuf_free(char *buf);
void http__conn_close(http_conn_t *c);          /* abrupt: cancels an attached request */
void http__conn_graceful_close(http_conn_t *c); /* after the queued writes: shutdown+linger */
int http__conn_write(http_conn_t *c, char *buf, size_t len);    /* takes a http__wbuf_alloc buf */
void http__conn_response_done(http_conn_t *c, bool keep_alive); /* request finished */
void http__conn_queue_kill(http_conn_t *c); /* slow client: close from a callback */
size_t http__conn_queued_bytes(const http_conn_t *c);
/* http_resp.c */
/* Queue an error (a JSON response, or a final event once streaming) without finishing. */
int http__write_error(http_req_t *req, int status, const char *param, const char *code,
                      const char *extra, const char *msg);
/* Answer a request no handler owns with an error and complete it. */
int http__respond_status(http_req_t *req, int status, const char *msg, const char *extra);
const char *http__status_reason(int status);
const char *http__date(http_server_t *srv);
/* http_req.c */
void http__req_complete(http_req_t *req); /* response queued: log, detach, next request */
void http__req_cancel(http_req_t *req, int log_status); /* log, detach, hook once */
void http__req_release(http_req_t *req);
/* http_route.c */
void http__route_resolve(http_req_t *req); /* sets route or pre_status */
void http__routes_free(http_server_t *srv);
/* http_auth.c */
int http__auth_load(http_server_t *srv);
/* 0: allowed; 1: no key sent; 2: wrong key */
int http__auth_check(const http_server_t *srv, const http_req_t *req);
void http__auth_free(http_server_t *srv);
/* http_server.c */
uint64_t http__next_req_id(void);
void http__server_conn_freed(http_server_t *srv); /* frees a closing server at the last */

#endif
