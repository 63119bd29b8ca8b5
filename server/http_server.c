/* http_server.c — the HTTP server object: settings, the listening socket and accept loop
 * (max_connections, EMFILE backoff), drain and close. Entry: http_server_create/_listen. */
#include "http_int.h"
#include "ns_err.h"
#include "ns_log.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static _Atomic uint64_t g_next_req_id = 1;

uint64_t http__next_req_id(void) {
  return atomic_fetch_add(&g_next_req_id, 1);
}

static uint64_t secs_to_ms(double s) {
  return s <= 0 ? 0 : (uint64_t)(s * 1000.0 + 0.5);
}

/* ---- create / stats ---------------------------------------------------------------- */

int http_server_create(uv_loop_t *loop, const cfg_t *cfg, http_server_t **out) {
  if (!loop || !cfg || !out) return NS_EINVAL;
  *out = NULL;
  http_server_t *s = calloc(1, sizeof *s);
  if (!s) return NS_ENOMEM;
  s->loop = loop;
  s->lfd = -1;
  s->date_sec = -1;
  s->port_cfg = cfg->server.port;
  s->public_health = cfg->server.public_health;
  http_limits_t *l = &s->lim;
  l->max_connections = cfg->server.max_connections;
  l->max_header_bytes = (size_t)cfg->server.max_header_bytes;
  l->max_headers = cfg->server.max_headers;
  l->max_url_bytes = (size_t)cfg->server.max_url_bytes;
  l->max_body_bytes = (uint64_t)cfg->server.max_body_bytes;
  l->header_timeout_ms = secs_to_ms(cfg->server.header_timeout_s);
  l->body_timeout_ms = secs_to_ms(cfg->server.body_timeout_s);
  l->keepalive_timeout_ms = secs_to_ms(cfg->server.keepalive_timeout_s);
  l->send_timeout_ms = secs_to_ms(cfg->server.send_timeout_s);
  l->request_timeout_ms = secs_to_ms(cfg->server.request_timeout_s);
  l->min_recv_rate_bps =
      (uint64_t)(cfg->server.min_recv_rate_bps > 0 ? cfg->server.min_recv_rate_bps : 0);
  l->max_sse_buffer_bytes = (size_t)cfg->server.max_sse_buffer_bytes;
  int rc = NS_ENOMEM;
  s->host = strdup(cfg->server.host ? cfg->server.host : "127.0.0.1");
  s->keys_file = strdup(cfg->server.api_keys_file ? cfg->server.api_keys_file : "");
  if (!s->host || !s->keys_file) goto err;
  rc = http__auth_load(s);
  if (rc != 0) goto err;
  *out = s;
  return 0;
err:
  http__auth_free(s);
  free(s->host);
  free(s->keys_file);
  free(s);
  return rc;
}

int http_server_port(const http_server_t *srv) {
  return srv ? srv->port : 0;
}

void http_server_stats(const http_server_t *srv, http_stats_t *out) {
  *out = srv->st;
}

/* ---- listening --------------------------------------------------------------------- */

static void on_backoff(uv_timer_t *t);

static void on_listen_ready(uv_poll_t *p, int status, int events) {
  http_server_t *s = p->data;
  if (status < 0) {
    ns_log_error("http: listening socket error: %s", uv_strerror(status));
    return;
  }
  /* a bounded batch per wakeup keeps one busy listener from starving the connections */
  for (int i = 0; i < 64 && s->listening; i++) {
    int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      if (e == EAGAIN || e == EWOULDBLOCK) return;
      if (e == EINTR || e == ECONNABORTED || e == EPROTO) continue;
      s->st.accept_errors++;
      if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        /* the pending connection stays in the backlog; waiting beats spinning on it */
        uint64_t now = uv_now(s->loop);
        s->accept_errors_unlogged++;
        if (s->last_accept_log_ms == 0 || now - s->last_accept_log_ms >= 1000) {
          ns_log_warn("http: accept: %s; pausing accepts for %d ms (%llu time(s) since the "
                      "last warning)",
                      strerror(e), HTTP_ACCEPT_BACKOFF_MS,
                      (unsigned long long)s->accept_errors_unlogged);
          s->accept_errors_unlogged = 0;
          s->last_accept_log_ms = now;
        }
        uv_poll_stop(&s->lpoll);
        uv_timer_start(&s->backoff, on_backoff, HTTP_ACCEPT_BACKOFF_MS, 0);
      } else {
        ns_log_error("http: accept: %s", strerror(e));
      }
      return;
    }
    const uint64_t max = (uint64_t)s->lim.max_connections;
    if (s->st.open_connections >= max + HTTP_PROBE_RESERVE) {
      close(fd);
      s->st.rejected_connections++;
      s->rejects_unlogged++;
      uint64_t now = uv_now(s->loop);
      if (s->last_reject_log_ms == 0 || now - s->last_reject_log_ms >= 1000) {
        ns_log_warn("http: server.max_connections (%d) reached: closed %llu connection(s)",
                    s->lim.max_connections, (unsigned long long)s->rejects_unlogged);
        s->rejects_unlogged = 0;
        s->last_reject_log_ms = now;
      }
      continue;
    }
    http__conn_accepted(s, fd, s->st.open_connections >= max);
  }
}

static void on_backoff(uv_timer_t *t) {
  http_server_t *s = t->data;
  if (s->listening) uv_poll_start(&s->lpoll, UV_READABLE, on_listen_ready);
}

static int resolve(const http_server_t *s, struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof *ss);
  if (strchr(s->host, ':')) {
    if (uv_ip6_addr(s->host, s->port_cfg, (struct sockaddr_in6 *)ss) == 0) return 0;
  } else if (uv_ip4_addr(s->host, s->port_cfg, (struct sockaddr_in *)ss) == 0) {
    return 0;
  }
  /* a host name: resolved once at start (synchronous uv_getaddrinfo, before serving) */
  uv_getaddrinfo_t gai;
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
  if (uv_getaddrinfo(s->loop, &gai, NULL, s->host, NULL, &hints) != 0) return NS_EINVAL;
  int rc = NS_EINVAL;
  for (struct addrinfo *ai = gai.addrinfo; ai; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    if (ai->ai_family == AF_INET)
      ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)s->port_cfg);
    else
      ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)s->port_cfg);
    rc = 0;
    break;
  }
  uv_freeaddrinfo(gai.addrinfo);
  return rc;
}

int http_server_listen(http_server_t *s) {
  if (!s || s->listening || s->lpoll_open) return NS_EINVAL;
  if (s->draining || s->closing) return NS_ECLOSED;
  struct sockaddr_storage ss;
  int rc = resolve(s, &ss);
  if (rc != 0) {
    ns_log_error("http: cannot resolve server.host '%s'", s->host);
    return rc;
  }
  socklen_t slen =
      ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) goto fail_errno;
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) goto fail_fd;
  if (bind(fd, (struct sockaddr *)&ss, slen) != 0) goto fail_fd;
  if (listen(fd, 511) != 0) goto fail_fd;
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  if (getsockname(fd, (struct sockaddr *)&bound, &blen) != 0) goto fail_fd;
  s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                              : ((struct sockaddr_in *)&bound)->sin_port);
  if (uv_poll_init(s->loop, &s->lpoll, fd) != 0) goto fail_fd;
  s->lpoll.data = s;
  s->lpoll_open = true;
  s->handles_open++;
  if (!s->backoff_open) {
    uv_timer_init(s->loop, &s->backoff);
    s->backoff.data = s;
    s->backoff_open = true;
    s->handles_open++;
  }
  s->lfd = fd;
  s->listening = true;
  uv_poll_start(&s->lpoll, UV_READABLE, on_listen_ready);
  ns_log_info("http: listening on %s%s%s:%d", ss.ss_family == AF_INET6 ? "[" : "", s->host,
              ss.ss_family == AF_INET6 ? "]" : "", s->port);
  return 0;
fail_fd:;
  int e = errno;
  close(fd);
  errno = e;
fail_errno:
  ns_log_error("http: cannot listen on %s:%d: %s", s->host, s->port_cfg, strerror(errno));
  return NS_EIO;
}

/* ---- drain and close ------------------------------------------------------------------ */

static void maybe_free(http_server_t *s) {
  if (!s->closing || s->handles_open > 0 || s->conns) return;
  void (*done)(void *) = s->done;
  void *arg = s->done_arg;
  http__routes_free(s);
  http__auth_free(s);
  free(s->host);
  free(s->keys_file);
  free(s);
  if (done) done(arg);
}

static void on_server_handle_closed(uv_handle_t *h) {
  http_server_t *s = h->data;
  if (h == (uv_handle_t *)&s->lpoll) {
    close(s->lfd);
    s->lfd = -1;
  }
  s->handles_open--;
  maybe_free(s);
}

void http_server_stop_listening(http_server_t *s) {
  if (!s) return;
  s->draining = true;
  if (s->listening) {
    s->listening = false;
    uv_poll_stop(&s->lpoll);
    uv_timer_stop(&s->backoff);
    s->lpoll_open = false;
    uv_close((uv_handle_t *)&s->lpoll, on_server_handle_closed);
  }
  /* idle keep-alive connections go now; busy ones after their response */
  http_conn_t *next;
  for (http_conn_t *c = s->conns; c; c = next) {
    next = c->next;
    if (c->phase == PH_IDLE && c->in_len == c->in_off) http__conn_close(c);
  }
}

void http_server_close_all(http_server_t *s) {
  if (!s) return;
  http_conn_t *next;
  for (http_conn_t *c = s->conns; c; c = next) {
    next = c->next;
    http__conn_close(c);
  }
}

void http_server_close(http_server_t *s, void (*done)(void *), void *arg) {
  if (!s || s->closing) return;
  http_server_stop_listening(s);
  s->closing = true;
  s->done = done;
  s->done_arg = arg;
  if (s->backoff_open) {
    s->backoff_open = false;
    uv_close((uv_handle_t *)&s->backoff, on_server_handle_closed);
  }
  http_server_close_all(s);
  maybe_free(s);
}

void http__server_conn_freed(http_server_t *s) {
  maybe_free(s);
}
