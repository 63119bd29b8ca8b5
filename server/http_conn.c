/* http_conn.c — one client connection: reading, the parse loop with the header-bytes limit,
 * timeouts, keep-alive, in-order pipelining, writes and close. Entry: http__conn_accepted. */
#include "http_int.h"
#include "ns_err.h"
#include "ns_log.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static void on_timer(uv_timer_t *t);
static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf);
static void conn_process(http_conn_t *c);

/* ---- timers and reading ----------------------------------------------------------------- */

static void conn_arm(http_conn_t *c, uint64_t delay_ms) {
  if (c->kill_queued && delay_ms != 0) return; /* the kill comes first */
  if (!c->fake && !c->closing) uv_timer_start(&c->timer, on_timer, delay_ms, 0);
}

/* (Re)arm the timer for what the phase waits for. */
static void conn_arm_phase(http_conn_t *c) {
  if (c->fake || c->closing || c->kill_queued || c->resume_queued) return;
  const http_limits_t *l = &c->srv->lim;
  uint64_t now = uv_now(c->srv->loop);
  uint64_t left = c->deadline_ms > now ? c->deadline_ms - now : 0;
  switch (c->phase) {
  case PH_IDLE: conn_arm(c, c->served == 0 ? l->header_timeout_ms : l->keepalive_timeout_ms); break;
  case PH_HEADERS:
  case PH_BODY:
    /* tick often enough to enforce the receive rate, else sleep to the deadline */
    conn_arm(c, l->min_recv_rate_bps && left > 250 ? 250 : left);
    break;
  case PH_INFLIGHT: conn_arm(c, left); break;
  case PH_LINGER: break; /* armed by the shutdown path */
  }
}

/* One scratch buffer per server: on_read copies what it gets before returning. */
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  http_conn_t *c = h->data;
  *buf = uv_buf_init(c->srv->rbuf, sizeof c->srv->rbuf);
}

/* A client that pipelines requests without reading the answers must not make us queue
 * responses without bound: past the high-water mark the next request waits, as nginx and
 * h11 do, until the peer has taken enough for the queue to fall below it again. */
static bool conn_output_backed_up(const http_conn_t *c) {
  return http__conn_queued_bytes(c) > HTTP_OUTPUT_HIGH_WATER;
}

/* Is parsing on hold (a request in flight, or answers not taken)? */
static bool conn_parse_paused(const http_conn_t *c) {
  return c->phase == PH_INFLIGHT || (c->phase == PH_IDLE && conn_output_backed_up(c));
}

static void conn_update_reading(http_conn_t *c) {
  if (c->fake || c->closing) return;
  /* while parsing is on hold, read ahead only a bounded amount of what follows */
  bool want = !conn_parse_paused(c) || c->in_len - c->in_off < HTTP_INFLIGHT_READAHEAD;
  if (want && !c->reading) {
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read) == 0) c->reading = true;
  } else if (!want && c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
  }
}

/* ---- lifecycle ----------------------------------------------------------------------- */

static http_conn_t *conn_new(http_server_t *s) {
  http_conn_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->srv = s;
  llhttp_init(&c->parser, HTTP_REQUEST, &http__settings);
  c->parser.data = c;
  c->phase = PH_IDLE;
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  s->st.open_connections++;
  s->st.connections_total++;
  return c;
}

static void conn_free(http_conn_t *c) {
  http_server_t *s = c->srv;
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  free(c->in);
  free(c->out);
  free(c);
  http__server_conn_freed(s);
}

static void on_handle_closed(uv_handle_t *h) {
  http_conn_t *c = h->data;
  if (--c->handles_open == 0) conn_free(c);
}

static void peer_name(http_conn_t *c) {
  struct sockaddr_storage ss;
  int len = sizeof ss;
  char ip[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
      port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
      snprintf(c->peer, sizeof c->peer, "[%s]:%d", ip, port);
      return;
    }
    uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
    port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  }
  snprintf(c->peer, sizeof c->peer, "%s:%d", ip, port);
}

void http__conn_accepted(http_server_t *s, int fd, bool reserve) {
  http_conn_t *c = conn_new(s);
  if (!c) {
    ns_log_error("http: out of memory accepting a connection");
    close(fd);
    return;
  }
  c->reserve = reserve;
  uv_tcp_init(s->loop, &c->tcp);
  uv_timer_init(s->loop, &c->timer);
  c->tcp.data = c;
  c->timer.data = c;
  c->shut.data = c;
  c->handles_open = 2;
  if (uv_tcp_open(&c->tcp, fd) != 0) {
    close(fd);
    http__conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1); /* SSE events go out as written */
  peer_name(c);
  c->last_write_ms = uv_now(s->loop);
  conn_arm_phase(c);
  conn_update_reading(c);
  if (!c->reading) http__conn_close(c);
}

/* Detach the attached request that no handler owns (being parsed) and free it. */
static void drop_unowned_req(http_conn_t *c) {
  http_req_t *r = c->req;
  if (!r || r->handler_owned) return;
  c->req = NULL;
  r->conn = NULL;
  r->srv = NULL;
  http__req_release(r);
}

void http__conn_close(http_conn_t *c) {
  if (c->closing) return;
  c->closing = true;
  http_server_t *s = c->srv;
  s->st.open_connections--;
  if (c->req) {
    if (c->req->handler_owned)
      http__req_cancel(c->req, 499);
    else
      drop_unowned_req(c);
  }
  if (c->fake) return; /* freed by http__test_conn_free */
  uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
  uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_shutdown(uv_shutdown_t *sh, int status) {
  http_conn_t *c = sh->data;
  if (c->closing) return;
  if (status < 0 || c->eof) {
    http__conn_close(c); /* nothing more will come from a peer that closed */
    return;
  }
  /* the peer got everything; read and drop what it still sends for a moment, so closing
   * with unread input does not reset the connection under our last response */
  conn_arm(c, HTTP_LINGER_MS);
}

void http__conn_graceful_close(http_conn_t *c) {
  if (c->closing || c->shutting) return;
  c->shutting = true;
  c->phase = PH_LINGER;
  if (c->req) {
    if (c->req->handler_owned)
      http__req_cancel(c->req, 499);
    else
      drop_unowned_req(c);
  }
  if (c->fake) {
    http__conn_close(c);
    return;
  }
  if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
    http__conn_close(c);
    return;
  }
  /* until the queued writes are out, on_timer watches that the client keeps taking them */
  conn_arm(c, HTTP_SEND_TICK_MS);
  conn_update_reading(c);
}

void http__conn_queue_kill(http_conn_t *c) {
  if (c->closing || c->kill_queued) return;
  c->kill_queued = true;
  conn_arm(c, 0);
}

/* ---- writes ---------------------------------------------------------------------------- */

typedef struct wreq {
  uv_write_t w;
  http_conn_t *c;
  char data[];
} wreq_t;

char *http__wbuf_alloc(size_t len) {
  wreq_t *w = malloc(sizeof *w + len);
  return w ? w->data : NULL;
}

void http__wbuf_free(char *buf) {
  if (buf) free((wreq_t *)(buf - offsetof(wreq_t, data)));
}

static void on_write(uv_write_t *wr, int status) {
  wreq_t *w = (wreq_t *)wr;
  http_conn_t *c = w->c;
  free(w);
  c->writes_pending--;
  c->last_write_ms = uv_now(c->srv->loop);
  if (status < 0) {
    if (!c->closing) http__conn_close(c);
    return;
  }
  /* the peer took some output: pipelined requests held back by it may go on */
  if (c->phase == PH_IDLE && !c->closing && !c->shutting && !conn_output_backed_up(c)) {
    if (c->in_off < c->in_len) conn_process(c);
    if (!c->closing) conn_update_reading(c);
  }
}

int http__conn_write(http_conn_t *c, char *buf, size_t len) {
  wreq_t *w = (wreq_t *)(buf - offsetof(wreq_t, data));
  if (c->closing || c->shutting || c->kill_queued) {
    free(w);
    return NS_ECANCELED;
  }
  if (c->fake) {
    int rc = http__buf_append(&c->out, &c->out_len, &c->out_cap, buf, len);
    free(w);
    return rc;
  }
  w->c = c;
  uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
  if (uv_write(&w->w, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
    free(w);
    http__conn_queue_kill(c); /* not from here: the caller may be a handler */
    return NS_EIO;
  }
  if (c->writes_pending++ == 0) { /* the send clock starts with the first unsent byte */
    c->sent_mark = c->queued_total;
    c->last_sent_ms = uv_now(c->srv->loop);
  }
  c->queued_total += len;
  return 0;
}

size_t http__conn_queued_bytes(const http_conn_t *c) {
  return c->fake ? 0 : uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
}

/* ---- parsing ------------------------------------------------------------------------- */

static int req_new(http_conn_t *c) {
  http_req_t *r = calloc(1, sizeof *r);
  if (!r) return NS_ENOMEM;
  r->srv = c->srv;
  r->conn = c;
  r->refs = 1;
  r->id = http__next_req_id();
  r->start_ms = uv_now(c->srv->loop);
  r->start_ns = uv_hrtime();
  r->last_cb = -1;
  r->path = "";
  r->query = "";
  memcpy(r->peer, c->peer, sizeof r->peer);
  c->req = r;
  return 0;
}

/* The first byte of a request arrived: start its header clock. */
static int begin_request(http_conn_t *c) {
  if (req_new(c) != 0) return NS_ENOMEM;
  uint64_t now = uv_now(c->srv->loop);
  c->phase = PH_HEADERS;
  c->hdr_bytes = 0;
  c->recv_bytes = 0;
  c->recv_start_ms = now;
  c->deadline_ms = now + c->srv->lim.header_timeout_ms;
  c->err_status = 0;
  return 0;
}

/* Answer the request being received with an error and close the connection. */
static void conn_fail(http_conn_t *c, int status, uint64_t *counter, const char *msg) {
  if (counter) (*counter)++;
  if (!c->req && req_new(c) != 0) {
    http__conn_close(c);
    return;
  }
  http_req_t *r = c->req;
  r->keep_alive = false;
  r->close_after = true;
  c->phase = PH_INFLIGHT;
  http__respond_status(r, status, msg, NULL);
}

/* Status and message for an llhttp error that no callback of ours explained. */
static int map_parse_error(llhttp_errno_t e, const char **msg) {
  switch (e) {
  case HPE_INVALID_TRANSFER_ENCODING: *msg = "Transfer-Encoding must end with chunked"; return 400;
  case HPE_PAUSED_H2_UPGRADE: *msg = "HTTP/2 is not supported"; return 505;
  default: *msg = NULL; return 400;
  }
}

/* Hand a complete request to its handler (or answer a decided error). */
static void dispatch(http_conn_t *c) {
  http_server_t *s = c->srv;
  http_req_t *r = c->req;
  c->phase = PH_INFLIGHT;
  c->deadline_ms = r->start_ms + s->lim.request_timeout_ms;
  if (r->pre_status) {
    http__respond_status(r, r->pre_status, r->msg, NULL);
    return;
  }
  r->handler_owned = true;
  r->refs++;
  s->st.inflight_requests++;
  r->handler(r, r->handler_ud);
}

/* Parse buffered input: request by request, each dispatched before the next is parsed. */
static void conn_process(http_conn_t *c) {
  if (c->in_process) return;
  http_server_t *s = c->srv;
  c->in_process = true;
  while (!c->closing && !c->shutting && !conn_parse_paused(c) && c->in_off < c->in_len) {
    if (c->phase == PH_IDLE && begin_request(c) != 0) {
      http__conn_close(c);
      break;
    }
    bool in_headers = c->phase == PH_HEADERS;
    const char *p = c->in + c->in_off;
    size_t feed = c->in_len - c->in_off;
    if (in_headers && feed > s->lim.max_header_bytes - c->hdr_bytes)
      feed = s->lim.max_header_bytes - c->hdr_bytes; /* never parse past the header limit */
    llhttp_errno_t e = llhttp_execute(&c->parser, p, feed);
    size_t used = feed;
    if (e != HPE_OK) {
      const char *ep = llhttp_get_error_pos(&c->parser);
      used = ep && ep >= p && ep <= p + feed ? (size_t)(ep - p) : feed;
    }
    c->in_off += used;
    c->recv_bytes += used;
    if (in_headers) c->hdr_bytes += used;
    if (e == HPE_OK) {
      if (c->phase == PH_HEADERS && c->hdr_bytes >= s->lim.max_header_bytes) {
        char msg[96];
        snprintf(msg, sizeof msg, "Request line and headers exceed %zu bytes",
                 s->lim.max_header_bytes);
        conn_fail(c, 431, &s->st.rejected_header_bytes, msg);
      }
      continue;
    }
    if (e == HPE_PAUSED && c->req->msg_done) {
      dispatch(c);
      continue;
    }
    if (c->err_status) {
      conn_fail(c, c->err_status, c->err_counter, c->req->msg[0] ? c->req->msg : NULL);
    } else {
      const char *msg;
      int st = map_parse_error(e, &msg);
      char buf[200];
      if (!msg) {
        snprintf(buf, sizeof buf, "Malformed request: %s", llhttp_get_error_reason(&c->parser));
        msg = buf;
      }
      conn_fail(c, st, &s->st.rejected_parse, msg);
    }
    break;
  }
  if (c->in_off == c->in_len) {
    c->in_off = c->in_len = 0;
    if (c->in_cap > 16384) { /* a large request passed: idle connections stay small */
      free(c->in);
      c->in = NULL;
      c->in_cap = 0;
    }
  } else if (c->in_off > 0 && c->phase != PH_INFLIGHT) {
    memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
    c->in_len -= c->in_off;
    c->in_off = 0;
  }
  c->in_process = false;
  if (!c->closing) {
    conn_arm_phase(c);
    conn_update_reading(c);
  }
}

/* The attached request finished (its last bytes are queued): next one or close. */
void http__conn_response_done(http_conn_t *c, bool keep_alive) {
  c->served++;
  if (c->closing || c->shutting) return;
  if (!keep_alive || c->srv->draining) {
    http__conn_graceful_close(c);
    return;
  }
  c->phase = PH_IDLE;
  llhttp_resume(&c->parser);
  if (c->in_process) return; /* conn_process's loop goes on with the next request */
  if (c->in_off < c->in_len) {
    /* parse the next pipelined request from a callback, not inside the handler's call */
    c->resume_queued = true;
    conn_arm(c, 0);
  } else {
    conn_arm_phase(c);
  }
  conn_update_reading(c);
}

/* ---- reading and timers --------------------------------------------------------------- */

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
  http_conn_t *c = st->data;
  if (n == 0 || c->closing) return;
  if (n < 0) {
    c->eof = true;
    /* EOF while a request is in flight: the client went away; cancel it. An idle
     * connection still gets the response bytes already queued. */
    if (n == UV_EOF && c->phase == PH_IDLE && c->in_off == c->in_len)
      http__conn_graceful_close(c);
    else
      http__conn_close(c);
    return;
  }
  if (c->shutting) return; /* lingering: drop input */
  if (http__buf_append(&c->in, &c->in_len, &c->in_cap, buf->base, (size_t)n) != 0) {
    http__conn_close(c);
    return;
  }
  if (conn_parse_paused(c))
    conn_update_reading(c);
  else
    conn_process(c);
}

static void on_request_timeout(http_conn_t *c) {
  http_server_t *s = c->srv;
  http_req_t *r = c->req;
  s->st.request_timeouts++;
  r->keep_alive = false;
  http__write_error(r, 408, NULL, "request_timeout", NULL, "Request timed out");
  http__req_cancel(r, 408);
  http__conn_graceful_close(c);
}

/* A response is being sent: the client has server.send_timeout_s to take some of it.
 * Progress is bytes leaving the queue, not finished writes: one large response finishes
 * only at its end, however steadily a slow reader takes it. */
static void check_send_progress(http_conn_t *c, uint64_t now) {
  const http_limits_t *l = &c->srv->lim;
  uint64_t sent = c->queued_total - http__conn_queued_bytes(c);
  if (sent != c->sent_mark) {
    c->sent_mark = sent;
    c->last_sent_ms = now;
  } else if (now - c->last_sent_ms >= l->send_timeout_ms) {
    ns_log_warn("http: client %s took no response bytes for %.1f s (server.send_timeout_s); "
                "closing with %zu bytes unsent",
                c->peer, (double)(now - c->last_sent_ms) / 1e3, http__conn_queued_bytes(c));
    http__conn_close(c);
    return;
  }
  uint64_t left = l->send_timeout_ms - (now - c->last_sent_ms);
  conn_arm(c, left < HTTP_SEND_TICK_MS ? left : HTTP_SEND_TICK_MS);
}

/* Between requests: close once idle for the keep-alive time (the header timeout before the
 * first request), counted from when the client took the last response. */
static void check_idle(http_conn_t *c, uint64_t now) {
  const http_limits_t *l = &c->srv->lim;
  if (c->writes_pending) {
    check_send_progress(c, now);
    return;
  }
  uint64_t idle = c->served == 0 ? l->header_timeout_ms : l->keepalive_timeout_ms;
  uint64_t since = now - c->last_write_ms;
  if (since < idle)
    conn_arm(c, idle - since);
  else
    http__conn_close(c);
}

/* server.min_recv_rate_bps is for large requests dragged out to hold a connection (a slow
 * POST). A small one is judged by header_timeout_s and body_timeout_s alone, as nginx judges
 * every request, since at the minimum rate one pause (a TCP retransmission, a client that
 * writes its headers and its body apart) of just over the grace would fail it. A request is
 * large once what it has sent plus what it declares still to come (the Content-Length or
 * chunk size left) reaches HTTP_RATE_MIN_BYTES. */
static bool recv_too_slow(const http_conn_t *c, uint64_t now) {
  uint64_t rate = c->srv->lim.min_recv_rate_bps, el = now - c->recv_start_ms;
  uint64_t declared = c->phase == PH_BODY ? c->parser.content_length : 0;
  if (!rate || el < HTTP_RATE_GRACE_MS || c->recv_bytes + declared < HTTP_RATE_MIN_BYTES)
    return false;
  return c->recv_bytes * 1000 < rate * el;
}

static void on_timer(uv_timer_t *t) {
  http_conn_t *c = t->data;
  http_server_t *s = c->srv;
  if (c->closing) return;
  if (c->kill_queued) {
    http__conn_close(c);
    return;
  }
  if (c->resume_queued) {
    c->resume_queued = false;
    conn_process(c);
    return;
  }
  uint64_t now = uv_now(s->loop);
  switch (c->phase) {
  case PH_IDLE: check_idle(c, now); return;
  case PH_HEADERS:
  case PH_BODY: {
    if (c->phase == PH_HEADERS && !c->req->hdr_started) {
      /* only blank lines since the last request (old clients end bodies with CRLF) */
      if (now >= c->deadline_ms)
        http__conn_close(c);
      else
        conn_arm(c, c->deadline_ms - now);
      return;
    }
    if (now >= c->deadline_ms) {
      conn_fail(c, 408, &s->st.rejected_timeout,
                c->phase == PH_HEADERS ? "Timed out receiving the request headers"
                                       : "Timed out receiving the request body");
      return;
    }
    if (recv_too_slow(c, now)) {
      conn_fail(c, 408, &s->st.rejected_timeout, "Request sent too slowly");
      return;
    }
    conn_arm_phase(c);
    return;
  }
  case PH_INFLIGHT:
    if (c->req && now >= c->deadline_ms) {
      on_request_timeout(c);
      return;
    }
    conn_arm_phase(c);
    return;
  case PH_LINGER:
    /* the last response is still going out (else the linger after shutdown is over) */
    if (c->writes_pending)
      check_send_progress(c, now);
    else
      http__conn_close(c);
    return;
  }
}

/* ---- connections without a socket (tests, fuzzing) ------------------------------------ */

int http__test_conn_new(http_server_t *s, http_conn_t **out) {
  http_conn_t *c = conn_new(s);
  if (!c) return NS_ENOMEM;
  c->fake = true;
  snprintf(c->peer, sizeof c->peer, "test");
  *out = c;
  return 0;
}

int http__test_conn_feed(http_conn_t *c, const char *data, size_t len) {
  if (!c->closing && !c->shutting) {
    if (http__buf_append(&c->in, &c->in_len, &c->in_cap, data, len) != 0) return NS_ENOMEM;
    c->resume_queued = false;
    conn_process(c);
  }
  if (c->kill_queued) http__conn_close(c);
  return c->closing || c->shutting;
}

const char *http__test_conn_output(const http_conn_t *c, size_t *len) {
  *len = c->out_len;
  return c->out ? c->out : "";
}

void http__test_conn_free(http_conn_t *c) {
  if (!c) return;
  http__conn_close(c);
  conn_free(c);
}
