/* http_parse.c — llhttp callbacks for one request: URL, headers, body, trailers, with the
 * URL, header-count and body limits and the framing checks. Entry: http__settings. */
#include "http_int.h"
#include "ns_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int on_message_begin(llhttp_t *p);
static int on_url(llhttp_t *p, const char *at, size_t n);
static int on_header_field(llhttp_t *p, const char *at, size_t n);
static int on_header_field_complete(llhttp_t *p);
static int on_header_value(llhttp_t *p, const char *at, size_t n);
static int on_header_value_complete(llhttp_t *p);
static int on_headers_complete(llhttp_t *p);
static int on_body(llhttp_t *p, const char *at, size_t n);
static int on_body_extra(llhttp_t *p, const char *at, size_t n);
static int on_chunk_header(llhttp_t *p);
static int on_message_complete(llhttp_t *p);

const llhttp_settings_t http__settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_chunk_extension_name = on_body_extra,
    .on_chunk_extension_value = on_body_extra,
    .on_chunk_header = on_chunk_header,
    .on_message_complete = on_message_complete,
};

/* ---- small helpers ------------------------------------------------------------------- */

int http__buf_grow(char **buf, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 256;
  while (n < need)
    n *= 2;
  char *p = realloc(*buf, n);
  if (!p) return NS_ENOMEM;
  *buf = p;
  *cap = n;
  return 0;
}

int http__buf_append(char **buf, size_t *len, size_t *cap, const char *src, size_t n) {
  if (http__buf_grow(buf, cap, *len + n + 1) != 0) return NS_ENOMEM;
  memcpy(*buf + *len, src, n);
  *len += n;
  (*buf)[*len] = '\0';
  return 0;
}

/* ---- callbacks ------------------------------------------------------------------------ */

/* Record why a callback fails; the parse loop answers once llhttp returns. */
static int cb_fail(http_conn_t *c, int status, uint64_t *counter, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int cb_fail(http_conn_t *c, int status, uint64_t *counter, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->req->msg, sizeof c->req->msg, fmt, ap);
  va_end(ap);
  c->err_status = status;
  c->err_counter = counter;
  return HPE_USER;
}

static http_conn_t *conn_of(llhttp_t *p) {
  return p->data;
}

static int on_message_begin(llhttp_t *p) {
  http_conn_t *c = conn_of(p);
  c->req->hdr_started = true;
  return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n) {
  http_conn_t *c = conn_of(p);
  http_req_t *r = c->req;
  if (r->url_len + n > c->srv->lim.max_url_bytes)
    return cb_fail(c, 414, &c->srv->st.rejected_url, "Request URL longer than %zu bytes",
                   c->srv->lim.max_url_bytes);
  if (http__buf_append(&r->url, &r->url_len, &r->url_cap, at, n) != 0)
    return cb_fail(c, 500, NULL, "Out of memory");
  return 0;
}

static int hbuf_add(http_req_t *r, const char *at, size_t n) {
  return http__buf_append(&r->hbuf, &r->hlen, &r->hcap, at, n);
}

/* Names and values are NUL-terminated strings in hbuf, one after another; llhttp may
 * deliver one in several pieces when it spans reads. */
static int on_header_field(llhttp_t *p, const char *at, size_t n) {
  http_conn_t *c = conn_of(p);
  http_req_t *r = c->req;
  if (r->hdr_done) return on_body_extra(p, at, n); /* a chunked trailer: not kept */
  if (r->last_cb != HREQ_NAME) {
    if (r->nhdr >= (size_t)c->srv->lim.max_headers)
      return cb_fail(c, 431, &c->srv->st.rejected_header_count,
                     "More than %d request header fields", c->srv->lim.max_headers);
    if (r->nhdr == r->hdr_cap) {
      size_t ncap = r->hdr_cap ? r->hdr_cap * 2 : 16;
      void *np = realloc(r->hdr, ncap * sizeof *r->hdr);
      if (!np) return cb_fail(c, 500, NULL, "Out of memory");
      r->hdr = np;
      r->hdr_cap = ncap;
    }
    if (r->nhdr > 0) r->hlen++; /* step over the previous value's NUL */
    r->hdr[r->nhdr][0] = r->hdr[r->nhdr][1] = (uint32_t)r->hlen;
    r->nhdr++;
    r->last_cb = HREQ_NAME;
  }
  if (hbuf_add(r, at, n) != 0) return cb_fail(c, 500, NULL, "Out of memory");
  return 0;
}

static int on_header_field_complete(llhttp_t *p) {
  http_conn_t *c = conn_of(p);
  http_req_t *r = c->req;
  if (r->last_cb != HREQ_NAME) return 0;
  /* the line ": value", which llhttp 8.1 takes even in strict mode: RFC 9110 5.1 gives every
   * field a name */
  if (r->hlen == r->hdr[r->nhdr - 1][0])
    return cb_fail(c, 400, &c->srv->st.rejected_parse, "A request header field has no name");
  if (hbuf_add(r, "", 0) != 0) return -1; /* NUL after the name */
  r->hlen++;
  r->hdr[r->nhdr - 1][1] = (uint32_t)r->hlen;
  if (hbuf_add(r, "", 0) != 0) return -1; /* an empty value until one arrives */
  r->last_cb = HREQ_VALUE;
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n) {
  http_conn_t *c = conn_of(p);
  if (c->req->hdr_done) return on_body_extra(p, at, n);
  if (c->req->last_cb != HREQ_VALUE) return 0;
  if (hbuf_add(c->req, at, n) != 0) return cb_fail(c, 500, NULL, "Out of memory");
  return 0;
}

static int on_header_value_complete(llhttp_t *p) {
  http_req_t *r = conn_of(p)->req;
  if (r->last_cb != HREQ_VALUE) return 0;
  /* llhttp drops leading blanks; drop trailing ones */
  size_t start = r->hdr[r->nhdr - 1][1];
  while (r->hlen > start && (r->hbuf[r->hlen - 1] == ' ' || r->hbuf[r->hlen - 1] == '\t'))
    r->hbuf[--r->hlen] = '\0';
  r->last_cb = HREQ_DONE;
  return 0;
}

/* Split the URL into path and query, in place. Absolute-form targets keep their path. */
static void split_url(http_req_t *r) {
  if (!r->url) {
    r->path = "";
    return;
  }
  char *u = r->url;
  if (u[0] != '/' && u[0] != '*') {
    char *scheme = strstr(u, "://");
    if (scheme) {
      char *slash = strchr(scheme + 3, '/');
      u = slash ? slash : (char *)"/";
    }
  }
  char *hash = strchr(u, '#');
  if (hash) *hash = '\0';
  char *q = strchr(u, '?');
  if (q) {
    *q = '\0';
    r->query = q + 1;
  }
  r->path = u;
}

/* Is every Transfer-Encoding field exactly "chunked" (once)? */
static bool te_is_plain_chunked(const http_req_t *r) {
  int seen = 0;
  for (size_t i = 0; i < r->nhdr; i++) {
    const char *name = r->hbuf + r->hdr[i][0], *value = r->hbuf + r->hdr[i][1];
    if (strcasecmp(name, "transfer-encoding") != 0) continue;
    if (strcasecmp(value, "chunked") != 0 || ++seen > 1) return false;
  }
  return seen == 1;
}

static int on_headers_complete(llhttp_t *p) {
  http_conn_t *c = conn_of(p);
  http_server_t *s = c->srv;
  http_req_t *r = c->req;
  r->hdr_done = true;
  r->http_major = p->http_major;
  r->http_minor = p->http_minor;
  snprintf(r->method, sizeof r->method, "%s", llhttp_method_name(p->method));
  split_url(r);
  if (r->http_major != 1)
    return cb_fail(c, 505, &s->st.rejected_parse, "HTTP/%d.%d is not supported", r->http_major,
                   r->http_minor);
  /* RFC 9112 3.2: an HTTP/1.1 request carries exactly one Host, and none carries two; a
   * server answers 400 otherwise (nginx, h11 under uvicorn) — two would let a proxy and this
   * server read different hosts */
  size_t hosts = 0;
  for (size_t i = 0; i < r->nhdr; i++)
    hosts += strcasecmp(r->hbuf + r->hdr[i][0], "Host") == 0;
  if (hosts > 1 || (hosts == 0 && r->http_minor >= 1))
    return cb_fail(c, 400, &s->st.rejected_parse, "%s Host header",
                   hosts ? "More than one" : "An HTTP/1.1 request needs a");
  r->keep_alive = llhttp_should_keep_alive(p);
  r->upgrade = p->upgrade;
  if (p->flags & F_TRANSFER_ENCODING) {
    if (p->flags & F_CONTENT_LENGTH) /* llhttp refuses this too: request smuggling */
      return cb_fail(c, 400, &s->st.rejected_parse,
                     "Both Content-Length and Transfer-Encoding are present");
    if (!(p->flags & F_CHUNKED)) /* the body length is unknowable (RFC 9112 6.3) */
      return cb_fail(c, 400, &s->st.rejected_parse, "Transfer-Encoding must end with chunked");
    if (!te_is_plain_chunked(r))
      return cb_fail(c, 501, &s->st.rejected_parse, "Only Transfer-Encoding: chunked is supported");
  }
  if ((p->flags & F_CONTENT_LENGTH) && p->content_length > s->lim.max_body_bytes)
    return cb_fail(
        c, 413, &s->st.rejected_body, "Request body of %llu bytes exceeds the limit of %llu bytes",
        (unsigned long long)p->content_length, (unsigned long long)s->lim.max_body_bytes);
  http__route_resolve(r);
  bool has_body = (p->flags & F_CHUNKED) || p->content_length > 0;
  const char *expect = http_req_header(r, "expect");
  if (expect && r->http_minor >= 1) {
    if (strcasecmp(expect, "100-continue") != 0)
      return cb_fail(c, 417, &s->st.rejected_parse, "Unsupported Expect: %.64s", expect);
    if (r->pre_status) {
      /* refuse before the client sends a body we would throw away */
      c->err_status = r->pre_status;
      c->err_counter = NULL;
      return -1;
    }
    if (has_body) {
      static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
      char *b = http__wbuf_alloc(sizeof cont - 1);
      if (!b) return cb_fail(c, 500, NULL, "Out of memory");
      memcpy(b, cont, sizeof cont - 1);
      http__conn_write(c, b, sizeof cont - 1);
    }
  }
  if ((p->flags & F_CONTENT_LENGTH) && !r->pre_status && p->content_length > 0) {
    if (http__buf_grow(&r->body, &r->body_cap, (size_t)p->content_length + 1) != 0)
      return cb_fail(c, 500, NULL, "Out of memory");
  }
  c->phase = PH_BODY;
  c->deadline_ms = uv_now(s->loop) + s->lim.body_timeout_ms;
  return 0;
}

static int body_too_large(http_conn_t *c) {
  return cb_fail(c, 413, &c->srv->st.rejected_body, "Request body exceeds the limit of %llu bytes",
                 (unsigned long long)c->srv->lim.max_body_bytes);
}

/* Bytes after the headers that are not body (chunk extensions, trailers) count against
 * server.max_body_bytes too, so no part of a request is unbounded. */
static int on_body_extra(llhttp_t *p, const char *at, size_t n) {
  http_conn_t *c = conn_of(p);
  http_req_t *r = c->req;
  r->body_total += n;
  if (r->body_total > c->srv->lim.max_body_bytes) return body_too_large(c);
  return 0;
}

/* A chunk's declared size past the limit is refused as it is read, as a Content-Length
 * is, not after the bytes trickled in (or a receive timeout). */
static int on_chunk_header(llhttp_t *p) {
  http_conn_t *c = conn_of(p);
  uint64_t max = c->srv->lim.max_body_bytes, total = c->req->body_total;
  if (p->content_length > max || total + p->content_length > max) return body_too_large(c);
  return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n) {
  http_conn_t *c = conn_of(p);
  http_req_t *r = c->req;
  int rc = on_body_extra(p, at, n);
  if (rc != 0) return rc;
  if (r->pre_status) return 0; /* answered with an error: the body is read and dropped */
  if (http__buf_append(&r->body, &r->body_len, &r->body_cap, at, n) != 0)
    return cb_fail(c, 500, NULL, "Out of memory");
  return 0;
}

static int on_message_complete(llhttp_t *p) {
  http_conn_t *c = conn_of(p);
  http_req_t *r = c->req;
  r->msg_done = true;
  r->keep_alive = llhttp_should_keep_alive(p) && !r->upgrade;
  if (!r->body && http__buf_append(&r->body, &r->body_len, &r->body_cap, "", 0) != 0) {
    r->body = NULL; /* http_req_body answers "" */
  }
  /* one request at a time: the parser waits here until the response is finished */
  return HPE_PAUSED;
}
