/* http.h — nanoserve's HTTP/1.1 transport: listening socket, connections, limits, timeouts,
 * routing, API keys, responses and Server-Sent Events. Entry: http_server_create + _listen.
 *
 * Threads: every function here runs on the loop thread of the uv_loop_t given to
 * http_server_create (handlers and hooks are called there too). Other threads reach a
 * request by posting to that loop (uv_async_send) and answering from its callback.
 *
 * Request lifecycle and ownership (the rule that makes use-after-free impossible):
 *   1. The server parses one request at a time per connection and calls the route's
 *      handler with an http_req_t. From that call the handler OWNS ONE REFERENCE to the
 *      request and must give it back exactly once by a FINISHING call:
 *        http_respond, http_error, http_error_ex (a whole response), or
 *        http_sse_end (after http_sse_begin / http_sse_send).
 *      It may finish inside the handler or later (from a timer or an async callback).
 *      Until it finishes, the pointer stays valid whatever happens to the connection.
 *      After the finishing call returns, the handler must not touch the pointer again.
 *   2. If the client disconnects, the request times out (server.request_timeout_s), the
 *      client stops reading a stream (server.max_sse_buffer_bytes) or the server closes
 *      all connections before the handler finished, the request is CANCELLED: its hook
 *      (http_req_set_cancel) runs exactly once, from a libuv callback or from
 *      http_server_close_all/_close, never from inside an http_* call the handler makes.
 *      The request is still valid in the hook and afterwards; every write becomes a no-op
 *      returning NS_ECANCELED, and the handler still makes its one finishing call (which
 *      then only releases the request; calling it from inside the hook is allowed).
 *   3. Responses on one connection go out strictly in request order: the server reads
 *      ahead but parses the next pipelined request only after the current one finished.
 *   A cancelled request no longer refers to its server: finishing it after
 *   http_server_close is safe.
 *
 * Errors: fallible functions return 0 or a negative ns_err (ns_err.h). */
#ifndef HTTP_H
#define HTTP_H

#include "cfg.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct http_server http_server_t;
typedef struct http_req http_req_t;

/* A route handler: owns one reference to req until its finishing call (see above). */
typedef void (*http_handler_fn)(http_req_t *req, void *ud);
/* A cancel hook: runs at most once per request; req stays valid (see above). */
typedef void (*http_cancel_fn)(http_req_t *req, void *ud);

/* ---- server ------------------------------------------------------------------------ */

/* Create a server on loop with the server.* settings of cfg (copied: cfg need not outlive
 * it). Loads server.api_keys_file when set (NS_ENOENT / NS_EIO / NS_ENOMEM on failure).
 * Nothing listens yet. */
int http_server_create(uv_loop_t *loop, const cfg_t *cfg, http_server_t **out);
/* Bind server.host:server.port (IPv4 or IPv6 literal, or a name resolved once, here,
 * synchronously) with SO_REUSEADDR and start accepting. Port 0 lets the OS pick; read it
 * back with http_server_port. Returns NS_EIO when the address cannot be bound, NS_EINVAL
 * when the host does not resolve or it listens already, NS_ECLOSED after
 * http_server_stop_listening (a drained server does not listen again). */
int http_server_listen(http_server_t *srv);
/* The bound TCP port, or 0 before a successful http_server_listen. */
int http_server_port(const http_server_t *srv);
/* Drain: close the listening socket (the port is released), close idle keep-alive
 * connections, and let requests in progress finish; their connections close afterwards
 * (responses carry Connection: close). Idempotent. */
void http_server_stop_listening(http_server_t *srv);
/* Close every client connection now, cancelling requests in progress. Keeps listening. */
void http_server_close_all(http_server_t *srv);
/* Stop listening, close everything, and free srv once libuv has closed its handles (the
 * loop must keep running until then); done(arg) runs after the free (done may be NULL). */
void http_server_close(http_server_t *srv, void (*done)(void *arg), void *arg);

/* Counters for /metrics, since creation. */
typedef struct http_stats {
  uint64_t open_connections;      /* now */
  uint64_t inflight_requests;     /* now: dispatched to a handler, not finished */
  uint64_t connections_total;     /* accepted and served */
  uint64_t rejected_connections;  /* past server.max_connections: closed, or a 503 */
  uint64_t accept_errors;         /* EMFILE/ENFILE and other accept failures */
  uint64_t requests_total;        /* finished requests (responses and cancellations) */
  uint64_t responses_by_class[6]; /* [1]..[5]: 1xx..5xx; [0]: cancelled, no status sent */
  uint64_t rejected_header_bytes; /* 431: server.max_header_bytes */
  uint64_t rejected_header_count; /* 431: server.max_headers */
  uint64_t rejected_url;          /* 414: server.max_url_bytes */
  uint64_t rejected_body;         /* 413: server.max_body_bytes */
  uint64_t rejected_timeout;      /* 408: header/body timeouts and server.min_recv_rate_bps */
  uint64_t rejected_parse;        /* 400/501/505: malformed or unsupported framing */
  uint64_t request_timeouts;      /* server.request_timeout_s reached */
  uint64_t cancelled;             /* cancel hooks run */
  uint64_t slow_client_drops;     /* server.max_sse_buffer_bytes exceeded */
} http_stats_t;
void http_server_stats(const http_server_t *srv, http_stats_t *out);

/* ---- routing (http_route.c) ----------------------------------------------------------- */

enum {
  HTTP_ROUTE_PUBLIC = 1u << 0, /* served without an API key */
  HTTP_ROUTE_PROBE = 1u << 1   /* served on the probe reserve too (below) */
};

/* Past server.max_connections the server still accepts HTTP_PROBE_RESERVE connections more,
 * one request each (then closed), answered only on HTTP_ROUTE_PROBE routes (health,
 * readiness, metrics) and with a 503 elsewhere: a saturated server still answers its probes
 * (an orchestrator would restart it otherwise). Past those, connections are closed at accept. */
#define HTTP_PROBE_RESERVE 16

/* Serve method (e.g. "GET", "POST"; upper case, as sent) on path (exact match, no query)
 * with handler(req, ud). Unknown paths answer 404, known paths with another method 405
 * with an Allow header. NS_EINVAL for a bad argument or a duplicate, NS_ENOMEM. */
int http_route_add(http_server_t *srv, const char *method, const char *path,
                   http_handler_fn handler, void *ud, unsigned flags);

/* ---- API keys (http_auth.c) --------------------------------------------------------- */

/* Re-read server.api_keys_file (one key per line; '#' comments, blank lines and
 * surrounding blanks ignored). On error the old keys stay in force. Blocking file read:
 * call it for SIGHUP, not per request. No-op returning 0 when the setting is "". */
int http_auth_reload(http_server_t *srv);
/* Number of keys in force; authentication is required when the setting is non-empty. */
size_t http_auth_key_count(const http_server_t *srv);

/* ---- the request (valid from the handler call until its finishing call) --------------- */

const char *http_req_method(const http_req_t *req); /* "GET" */
const char *http_req_path(const http_req_t *req);   /* "/v1/models", without the query */
const char *http_req_query(const http_req_t *req);  /* after '?', "" when none */
/* First header named name (case-insensitive), value without surrounding blanks; NULL when
 * absent. */
const char *http_req_header(const http_req_t *req, const char *name);
/* The i-th header (0-based) for i < http_req_header_count; 0 or NS_ERANGE. */
size_t http_req_header_count(const http_req_t *req);
int http_req_header_at(const http_req_t *req, size_t i, const char **name, const char **value);
/* The complete body, NUL-terminated (len excludes the NUL); "" when there is none. */
const char *http_req_body(const http_req_t *req, size_t *len);
/* Unique in the process; sent as "X-Request-Id: %016llx", the form the log lines use. */
uint64_t http_req_id(const http_req_t *req);
uint64_t http_req_start_ms(const http_req_t *req); /* uv_now() when its first byte parsed */
const char *http_req_peer(const http_req_t *req);  /* "127.0.0.1:54321", "[::1]:54321" */
/* Set the cancel hook (replacing any earlier one). NS_ECANCELED when the request is
 * already cancelled (the hook is then not stored and will not run). */
int http_req_set_cancel(http_req_t *req, http_cancel_fn fn, void *ud);
/* 1 once cancelled (or its connection is gone), else 0. */
int http_req_cancelled(const http_req_t *req);

/* ---- responses (http_resp.c); each is a no-op returning NS_ECANCELED once cancelled ---- */

/* FINISHING. Send status with body (len bytes, copied) and Content-Length, Date, Server,
 * X-Request-Id, Connection; content_type may be NULL (no Content-Type); extra_headers is
 * NULL or complete "Name: value\r\n" lines. After http_sse_begin it ends the stream and
 * returns NS_EINVAL. */
int http_respond(http_req_t *req, int status, const char *content_type, const void *body,
                 size_t len, const char *extra_headers);
/* FINISHING. An error in OpenAI's shape {"error":{"message","type","param","code"}}: type
 * and code follow status (400 invalid_request_error, 401 authentication_error, 404
 * not_found_error, 408 timeout_error, 429 rate_limit_error, 500 internal_error, 503
 * server_error, ...); param may be NULL (JSON null). 429 and 503 carry Retry-After: 1.
 * After http_sse_begin it sends the error as a final event instead and ends the stream. */
int http_error(http_req_t *req, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* FINISHING. The same with an explicit code (NULL: the status's default) and headers. */
int http_error_ex(http_req_t *req, int status, const char *param, const char *code,
                  const char *extra_headers, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* The JSON text http_error sends (malloc'd, the caller frees; NULL when out of memory). */
char *http_error_json(int status, const char *param, const char *code, const char *message);

/* Start a 200 text/event-stream response (Cache-Control: no-cache, chunked on HTTP/1.1 so
 * the connection stays reusable; HTTP/1.0 gets Connection: close). Not finishing.
 * NS_EINVAL when a response was already started. */
int http_sse_begin(http_req_t *req);
/* Send one event "data: <data>\n\n" now (a data line per line of data), in one write.
 * When the connection's unsent output then exceeds server.max_sse_buffer_bytes the
 * client is dropped: NS_ECANCELED, and the cancel hook runs from a later callback. */
int http_sse_send(http_req_t *req, const char *data, size_t len);
/* FINISHING. End the stream, first sending "data: [DONE]\n\n" when send_done. */
int http_sse_end(http_req_t *req, int send_done);

/* ---- for tests and the fuzzer: one connection without a socket ---------------------- */

typedef struct http_conn http_conn_t;
/* A connection of srv fed by hand; its output is kept in memory. No timers run. */
int http__test_conn_new(http_server_t *srv, http_conn_t **out);
/* Parse len bytes as if received; handlers run as usual. 1 when the connection is
 * closed (or closing) afterwards, else 0. */
int http__test_conn_feed(http_conn_t *c, const char *data, size_t len);
/* All bytes the server wrote so far (not NUL-terminated). */
const char *http__test_conn_output(const http_conn_t *c, size_t *len);
/* Close it (cancelling a request in progress) and free it. */
void http__test_conn_free(http_conn_t *c);

#ifdef __cplusplus
}
#endif
#endif
