/* http_resp.c — writing responses: status line and headers, OpenAI-shaped JSON errors,
 * Server-Sent Events with chunked framing and the slow-client limit. Entry: http_respond. */
#include "http_int.h"
#include "ns_err.h"
#include "ns_log.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- status lines and dates ----------------------------------------------------------- */

const char *http__status_reason(int st) {
  switch (st) {
  case 100: return "Continue";
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 204: return "No Content";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 413: return "Content Too Large";
  case 414: return "URI Too Long";
  case 415: return "Unsupported Media Type";
  case 417: return "Expectation Failed";
  case 422: return "Unprocessable Content";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 502: return "Bad Gateway";
  case 503: return "Service Unavailable";
  case 504: return "Gateway Timeout";
  case 505: return "HTTP Version Not Supported";
  default: return "Unknown";
  }
}

/* IMF-fixdate, formatted at most once a second (and without the locale) */
const char *http__date(http_server_t *s) {
  static const char *const wd[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char *const mo[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  time_t now = time(NULL);
  if ((int64_t)now != s->date_sec) {
    struct tm tm;
    gmtime_r(&now, &tm);
    snprintf(s->date, sizeof s->date, "%s, %02d %s %04d %02d:%02d:%02d GMT", wd[tm.tm_wday % 7],
             tm.tm_mday, mo[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    s->date_sec = (int64_t)now;
  }
  return s->date;
}

/* ---- the response head ---------------------------------------------------------------- */

static bool will_close(const http_req_t *r) {
  return !r->keep_alive || r->close_after || (r->srv && r->srv->draining);
}

/* A write buffer holding the head, with room for body_room more bytes after it.
 * clen < 0: no Content-Length. */
static char *head(http_req_t *r, int status, const char *ctype, long long clen, bool chunked,
                  const char *extra, size_t body_room, size_t *hlen) {
  if (will_close(r)) r->close_after = true;
  size_t cap = 320 + (ctype ? strlen(ctype) : 0) + (extra ? strlen(extra) : 0);
  char *b = http__wbuf_alloc(cap + body_room);
  if (!b) return NULL;
  int n = snprintf(
      b, cap, "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: nanoserve\r\nX-Request-Id: %016llx\r\n",
      status, http__status_reason(status), http__date(r->srv), (unsigned long long)r->id);
  if (ctype) n += snprintf(b + n, cap - (size_t)n, "Content-Type: %s\r\n", ctype);
  if (clen >= 0) n += snprintf(b + n, cap - (size_t)n, "Content-Length: %lld\r\n", clen);
  if (chunked) n += snprintf(b + n, cap - (size_t)n, "Transfer-Encoding: chunked\r\n");
  n += snprintf(b + n, cap - (size_t)n, "Connection: %s\r\n%s\r\n",
                r->close_after ? "close" : "keep-alive", extra ? extra : "");
  *hlen = (size_t)n;
  return b;
}

static int write_full(http_req_t *r, int status, const char *ctype, const void *body, size_t len,
                      const char *extra) {
  size_t hlen;
  char *b = head(r, status, ctype, (long long)len, false, extra, len, &hlen);
  if (!b) {
    r->close_after = true;
    return NS_ENOMEM;
  }
  if (strcmp(r->method, "HEAD") == 0) len = 0; /* the length of what GET would send */
  if (len) memcpy(b + hlen, body, len);
  r->status = status;
  r->resp_started = true;
  r->bytes_out += hlen + len;
  return http__conn_write(r->conn, b, hlen + len);
}

/* ---- SSE framing ----------------------------------------------------------------------- */

/* One write: the event "data: <line>\n" per line of data, then "\n" (data may be NULL for
 * none), then "0\r\n\r\n" when last; chunk-framed on HTTP/1.1. */
static int write_event(http_req_t *r, const char *data, size_t len, bool last) {
  enum { HEX_ROOM = 24 };
  size_t breaks = 0;
  for (size_t i = 0; i < len; i++)
    breaks += data[i] == '\n' || data[i] == '\r';
  size_t cap = data ? 6 + len + 6 * breaks + 2 : 0; /* CRLF pairs make it shorter */
  char *b = http__wbuf_alloc(HEX_ROOM + cap + 2 + 5);
  if (!b) return NS_ENOMEM;
  size_t n = HEX_ROOM, start = HEX_ROOM;
  if (data) {
    memcpy(b + n, "data: ", 6);
    n += 6;
    for (size_t i = 0; i < len; i++) {
      if (data[i] == '\r' || data[i] == '\n') {
        if (data[i] == '\r' && i + 1 < len && data[i + 1] == '\n') i++;
        memcpy(b + n, "\ndata: ", 7);
        n += 7;
      } else {
        b[n++] = data[i];
      }
    }
    b[n++] = '\n';
    b[n++] = '\n';
    if (r->chunked) {
      char hex[HEX_ROOM];
      int hl = snprintf(hex, sizeof hex, "%zx\r\n", n - HEX_ROOM);
      start = HEX_ROOM - (size_t)hl;
      memcpy(b + start, hex, (size_t)hl);
      b[n++] = '\r';
      b[n++] = '\n';
    }
  }
  if (last && r->chunked) {
    memcpy(b + n, "0\r\n\r\n", 5);
    n += 5;
  }
  if (n == start) {
    http__wbuf_free(b);
    return 0;
  }
  memmove(b, b + start, n - start); /* the write starts at the buffer's start */
  r->bytes_out += n - start;
  return http__conn_write(r->conn, b, n - start);
}

static int sse_begin(http_req_t *r) {
  r->chunked = r->http_major == 1 && r->http_minor >= 1;
  if (!r->chunked) r->close_after = true; /* HTTP/1.0: the stream ends at close */
  size_t hlen;
  char *b = head(r, 200, "text/event-stream", -1, r->chunked,
                 "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n", 0, &hlen);
  if (!b) return NS_ENOMEM;
  r->status = 200;
  r->resp_started = r->sse = true;
  r->bytes_out += hlen;
  return http__conn_write(r->conn, b, hlen);
}

/* ---- errors ---------------------------------------------------------------------------- */

static void error_kind(int status, const char **type, const char **code) {
  *code = NULL;
  switch (status) {
  case 401: *type = "authentication_error", *code = "invalid_api_key"; return;
  case 403: *type = "permission_error"; return;
  case 404: *type = "not_found_error", *code = "not_found"; return;
  case 405: *type = "invalid_request_error", *code = "method_not_allowed"; return;
  case 408: *type = "timeout_error", *code = "request_timeout"; return;
  case 413: *type = "invalid_request_error", *code = "request_too_large"; return;
  case 414: *type = "invalid_request_error", *code = "uri_too_long"; return;
  case 417: *type = "invalid_request_error", *code = "expectation_failed"; return;
  case 429: *type = "rate_limit_error", *code = "rate_limit_exceeded"; return;
  case 431: *type = "invalid_request_error", *code = "headers_too_large"; return;
  case 501: *type = "invalid_request_error", *code = "not_implemented"; return;
  case 503: *type = "server_error", *code = "overloaded"; return;
  case 505: *type = "invalid_request_error", *code = "http_version_not_supported"; return;
  default: *type = status >= 500 ? "internal_error" : "invalid_request_error"; return;
  }
}

/* s with each byte that is not well-formed UTF-8 as U+FFFD: a message may quote what a
 * client sent (an Expect header, a URL), and cJSON would copy the bytes into a body that
 * is then no JSON. malloc'd; NULL when out of memory. */
static char *utf8_clean(const char *s) {
  size_t n = strlen(s);
  char *out = malloc(n * 3 + 1);
  if (out) ns_utf8_lossy(out, s, n);
  return out;
}

char *http_error_json(int status, const char *param, const char *code, const char *message) {
  const char *type, *dcode;
  error_kind(status, &type, &dcode);
  if (!code) code = dcode;
  char *msg = utf8_clean(message ? message : "");
  if (!msg) return NULL;
  cJSON *root = cJSON_CreateObject();
  cJSON *e = cJSON_AddObjectToObject(root, "error");
  if (!e || !cJSON_AddStringToObject(e, "message", msg) ||
      !cJSON_AddStringToObject(e, "type", type) ||
      !(param ? cJSON_AddStringToObject(e, "param", param) : cJSON_AddNullToObject(e, "param")) ||
      !(code ? cJSON_AddStringToObject(e, "code", code) : cJSON_AddNullToObject(e, "code"))) {
    cJSON_Delete(root);
    free(msg);
    return NULL;
  }
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  free(msg);
  return s;
}

int http__write_error(http_req_t *r, int status, const char *param, const char *code,
                      const char *extra, const char *msg) {
  if (!r->conn) return NS_ECANCELED;
  if (!msg) msg = http__status_reason(status);
  char *json = http_error_json(status, param, code, msg);
  static const char oom[] = "{\"error\":{\"message\":\"Out of memory\",\"type\":\"internal_error\","
                            "\"param\":null,\"code\":null}}";
  const char *body = json ? json : oom;
  int rc;
  if (r->sse) {
    rc = write_event(r, body, strlen(body), true);
    r->close_after = !r->chunked || r->close_after;
  } else if (r->resp_started) {
    rc = NS_EINVAL; /* a whole response is out already */
  } else {
    char hdrs[512];
    int n = 0;
    if (status == 405 && r->pre_allow[0])
      n += snprintf(hdrs + n, sizeof hdrs - (size_t)n, "Allow: %s\r\n", r->pre_allow);
    if (status == 401)
      n += snprintf(hdrs + n, sizeof hdrs - (size_t)n, "WWW-Authenticate: Bearer\r\n");
    if ((status == 429 || status == 503) && !(extra && strcasestr(extra, "retry-after:")))
      n += snprintf(hdrs + n, sizeof hdrs - (size_t)n, "Retry-After: 1\r\n");
    size_t elen = extra ? strlen(extra) : 0;
    char *all = malloc((size_t)n + elen + 1);
    if (all) {
      memcpy(all, hdrs, (size_t)n);
      memcpy(all + n, extra ? extra : "", elen + 1);
    }
    rc = write_full(r, status, "application/json", body, strlen(body), all ? all : hdrs);
    free(all);
  }
  cJSON_free(json);
  return rc;
}

int http__respond_status(http_req_t *r, int status, const char *msg, const char *extra) {
  int rc = http__write_error(r, status, NULL, NULL, extra, msg);
  http__req_complete(r);
  return rc;
}

/* ---- the public finishing calls -------------------------------------------------------- */

/* The first part of every finishing call: claim the handler's one finish. */
static int claim_finish(http_req_t *r) {
  if (!r || r->finished || !r->handler_owned) return NS_EINVAL;
  r->finished = true;
  if (r->conn) return 0;
  http__req_release(r);
  return NS_ECANCELED;
}

int http_respond(http_req_t *r, int status, const char *content_type, const void *body, size_t len,
                 const char *extra_headers) {
  int rc = claim_finish(r);
  if (rc != 0) return rc;
  if (r->sse) {
    write_event(r, NULL, 0, true);
    rc = NS_EINVAL;
  } else {
    rc = write_full(r, status, content_type, body, len, extra_headers);
  }
  http__req_complete(r);
  http__req_release(r);
  return rc;
}

static int verror(http_req_t *r, int status, const char *param, const char *code, const char *extra,
                  const char *fmt, va_list ap) {
  int rc = claim_finish(r);
  if (rc != 0) return rc;
  char small[512];
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  char *msg = small;
  if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1)) != NULL)
    vsnprintf(msg, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  rc = http__write_error(r, status, param, code, extra, msg ? msg : small);
  if (msg != small) free(msg);
  http__req_complete(r);
  http__req_release(r);
  return rc;
}

int http_error(http_req_t *r, int status, const char *param, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = verror(r, status, param, NULL, NULL, fmt, ap);
  va_end(ap);
  return rc;
}

int http_error_ex(http_req_t *r, int status, const char *param, const char *code,
                  const char *extra_headers, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = verror(r, status, param, code, extra_headers, fmt, ap);
  va_end(ap);
  return rc;
}

int http_sse_begin(http_req_t *r) {
  if (!r || r->finished || !r->handler_owned) return NS_EINVAL;
  if (!r->conn) return NS_ECANCELED;
  if (r->resp_started) return NS_EINVAL;
  return sse_begin(r);
}

int http_sse_send(http_req_t *r, const char *data, size_t len) {
  if (!r || r->finished || !r->sse) return NS_EINVAL;
  if (!r->conn || r->conn->kill_queued) return NS_ECANCELED;
  int rc = write_event(r, data, len, false);
  if (rc != 0) return rc;
  http_conn_t *c = r->conn;
  size_t queued = http__conn_queued_bytes(c);
  if (queued > r->srv->lim.max_sse_buffer_bytes) {
    r->srv->st.slow_client_drops++;
    ns_logr(NS_LOG_WARN, r->id,
            "http: client %s not reading: %zu bytes unsent (server.max_sse_buffer_bytes "
            "%zu); dropping it",
            r->peer, queued, r->srv->lim.max_sse_buffer_bytes);
    http__conn_queue_kill(c);
    return NS_ECANCELED;
  }
  return 0;
}

int http_sse_end(http_req_t *r, int send_done) {
  int rc = claim_finish(r);
  if (rc != 0) return rc;
  if (!r->sse) rc = sse_begin(r);
  if (send_done) {
    static const char done[] = "[DONE]";
    int w = write_event(r, done, sizeof done - 1, true);
    if (rc == 0) rc = w;
  } else {
    int w = write_event(r, NULL, 0, true);
    if (rc == 0) rc = w;
  }
  http__req_complete(r);
  http__req_release(r);
  return rc;
}
