/* http_req.c — the request object: accessors, the reference count, completion, cancel
 * hooks and the access log. Entry: http__req_complete / http__req_cancel. */
#include "http_int.h"
#include "ns_err.h"
#include "ns_log.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- accessors ------------------------------------------------------------------------ */

const char *http_req_method(const http_req_t *r) {
  return r->method[0] ? r->method : "-";
}

const char *http_req_path(const http_req_t *r) {
  return r->path;
}

const char *http_req_query(const http_req_t *r) {
  return r->query;
}

const char *http_req_header(const http_req_t *r, const char *name) {
  for (size_t i = 0; i < r->nhdr; i++)
    if (strcasecmp(r->hbuf + r->hdr[i][0], name) == 0) return r->hbuf + r->hdr[i][1];
  return NULL;
}

size_t http_req_header_count(const http_req_t *r) {
  return r->nhdr;
}

int http_req_header_at(const http_req_t *r, size_t i, const char **name, const char **value) {
  if (i >= r->nhdr) return NS_ERANGE;
  *name = r->hbuf + r->hdr[i][0];
  *value = r->hbuf + r->hdr[i][1];
  return 0;
}

const char *http_req_body(const http_req_t *r, size_t *len) {
  if (len) *len = r->body ? r->body_len : 0;
  return r->body ? r->body : "";
}

uint64_t http_req_id(const http_req_t *r) {
  return r->id;
}

uint64_t http_req_start_ms(const http_req_t *r) {
  return r->start_ms;
}

const char *http_req_peer(const http_req_t *r) {
  return r->peer;
}

int http_req_set_cancel(http_req_t *r, http_cancel_fn fn, void *ud) {
  if (r->cancelled || !r->conn) return NS_ECANCELED;
  r->cancel_fn = fn;
  r->cancel_ud = ud;
  return 0;
}

int http_req_cancelled(const http_req_t *r) {
  return r->cancelled || !r->conn || r->conn->kill_queued;
}

/* ---- lifetime ------------------------------------------------------------------------ */

static void req_free(http_req_t *r) {
  free(r->url);
  free(r->hbuf);
  free(r->hdr);
  free(r->body);
  free(r);
}

void http__req_release(http_req_t *r) {
  if (--r->refs == 0) req_free(r);
}

static void access_log(const http_req_t *r, int status, const char *note) {
  if (!ns_log_enabled(NS_LOG_INFO)) return;
  double ms = (double)(uv_hrtime() - r->start_ns) / 1e6;
  ns_logr(NS_LOG_INFO, r->id, "http %s %.200s %d %llu bytes %.1f ms %s%s", http_req_method(r),
          r->path[0] ? r->path : "-", status, (unsigned long long)r->bytes_out, ms, r->peer, note);
}

static void count(http_server_t *s, int status) {
  s->st.requests_total++;
  int cls = status / 100;
  s->st.responses_by_class[cls >= 1 && cls <= 5 ? cls : 0]++;
}

/* Break the request <-> connection link and drop the connection's reference holder. */
static http_conn_t *detach(http_req_t *r) {
  http_conn_t *c = r->conn;
  if (r->handler_owned) r->srv->st.inflight_requests--;
  c->req = NULL;
  r->conn = NULL;
  r->srv = NULL;
  return c;
}

void http__req_complete(http_req_t *r) {
  if (!r->conn) return;
  count(r->srv, r->status);
  access_log(r, r->status, "");
  bool keep_alive = r->keep_alive && !r->close_after;
  http_conn_t *c = detach(r);
  http__conn_response_done(c, keep_alive);
  http__req_release(r);
}

void http__req_cancel(http_req_t *r, int log_status) {
  if (r->cancelled || !r->conn) return;
  r->cancelled = true;
  http_server_t *s = r->srv;
  int status = r->resp_started ? r->status : log_status;
  count(s, r->resp_started || log_status == 408 ? status : 0);
  access_log(r, status, " cancelled");
  detach(r);
  if (r->cancel_fn && !r->finished) {
    http_cancel_fn fn = r->cancel_fn;
    r->cancel_fn = NULL;
    s->st.cancelled++;
    fn(r, r->cancel_ud); /* the hook may finish r: our reference keeps it alive */
  }
  http__req_release(r);
}
