/* lg_http.c — the load generator's HTTP/1.1 client on the libuv loop: a pool of keep-alive
 * connections, llhttp parsing replies (chunked SSE or JSON), token-chunk timestamps.
 * Entry: lg_http_send; every request ends in exactly one lg_run__done. */
#include "lg.h"
#include "lg_sse.h"

#include "ns_err.h"

#include <cjson/cJSON.h>
#include <llhttp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LG_NONE       ((size_t)-2) /* a connection without a request */
#define LG_MAX_BODY   (64u << 20)  /* a JSON reply larger than this is an error */
#define LG_READ_BYTES 16384

struct lg_conn {
  uv_tcp_t tcp;
  uv_timer_t timer; /* the request's timeout, or a deferred failure */
  uv_connect_t connect_req;
  uv_write_t write_req;
  llhttp_t p;
  lg_run *r;
  lg_conn *prev, *next; /* in r->idle or r->busy */
  size_t idx;           /* the request, LG_PROBE, or LG_NONE */
  int connected, closing, open_handles, served, in_idle;
  /* the request in progress */
  char *out; /* its bytes, kept until it ends: a stale keep-alive connection resends them */
  size_t out_len;
  int writing, got_bytes, complete, deferred, whole;
  int stream_reply; /* 2xx text/event-stream */
  char hname[32];
  size_t hname_len;
  int in_ctype;
  char ctype[128];
  size_t ctype_len;
  char *body;
  size_t body_len, body_cap;
  lg_sse sse;
  int saw_done;
  double *gaps; /* this request's inter-chunk gaps (ns), added to the run on success */
  size_t n_gaps, cap_gaps;
  int64_t now; /* ns since t0 when the current bytes arrived */
  lg_outcome err_outcome;
  char errmsg[512];
  char rbuf[LG_READ_BYTES];
};

static llhttp_settings_t settings;
static int settings_ready;

static lg_rec *rec_of(lg_conn *c) {
  return c->idx < c->r->n_recs ? &c->r->recs[c->idx] : NULL;
}

static int64_t since_t0(const lg_run *r) {
  return (int64_t)(uv_hrtime() - r->t0);
}

/* ---- lists ----------------------------------------------------------------------------------- */

static void unlink_conn(lg_conn *c) {
  lg_run *r = c->r;
  lg_conn **head = c->in_idle ? &r->idle : &r->busy;
  if (c->prev)
    c->prev->next = c->next;
  else if (*head == c)
    *head = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
}

static void link_conn(lg_conn *c, int idle) {
  lg_conn **head = idle ? &c->r->idle : &c->r->busy;
  c->in_idle = idle;
  c->prev = NULL;
  c->next = *head;
  if (*head) (*head)->prev = c;
  *head = c;
}

/* ---- closing --------------------------------------------------------------------------------- */

static void on_closed(uv_handle_t *h) {
  lg_conn *c = h->data;
  if (--c->open_handles > 0) return;
  c->r->n_conns--;
  lg_sse_free(&c->sse);
  free(c->body);
  free(c->gaps);
  free(c->out);
  free(c);
}

static void conn_close(lg_conn *c) {
  if (c->closing) return;
  c->closing = 1;
  unlink_conn(c);
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, on_closed);
  uv_close((uv_handle_t *)&c->tcp, on_closed);
}

/* ---- ending a request ------------------------------------------------------------------------ */

static void reset_request(lg_conn *c) {
  c->got_bytes = c->complete = c->deferred = c->stream_reply = c->saw_done = c->whole = 0;
  c->hname_len = c->ctype_len = 0;
  c->in_ctype = 0;
  c->body_len = 0;
  c->n_gaps = 0;
  c->errmsg[0] = '\0';
  c->err_outcome = LG_PENDING;
  lg_sse_free(&c->sse);
  lg_sse_init(&c->sse);
  llhttp_init(&c->p, HTTP_RESPONSE, &settings);
  c->p.data = c;
}

static void start_on(lg_run *r, lg_conn *c, size_t idx, char *out, size_t out_len);

/* The request on c ends with `oc`. keep: c may serve another request. The connection is
 * settled (idle or closing) before the run hears of the end, so it may send again at once. */
static void finish(lg_conn *c, lg_outcome oc, int keep, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void finish(lg_conn *c, lg_outcome oc, int keep, const char *fmt, ...) {
  lg_run *r = c->r;
  size_t idx = c->idx;
  char msg[512] = "";
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
  }
  uv_timer_stop(&c->timer);
  lg_rec *rec = rec_of(c);
  /* a reused keep-alive connection the server had closed: send once more on a fresh one */
  if (rec && oc == LG_ECONN && c->served > 0 && !c->got_bytes && !rec->retried) {
    lg_conn *n = calloc(1, sizeof *n);
    char *out = c->writing ? malloc(c->out_len) : c->out; /* libuv may still read c->out */
    if (n && out) {
      if (c->writing)
        memcpy(out, c->out, c->out_len);
      else
        c->out = NULL;
      rec->retried = 1;
      size_t out_len = c->out_len;
      c->idx = LG_NONE;
      conn_close(c);
      n->r = r;
      start_on(r, n, idx, out, out_len);
      return;
    }
    free(n);
    if (out != c->out) free(out);
  }
  if (!c->writing) { /* else on_write or on_closed frees it */
    free(c->out);
    c->out = NULL;
  }
  c->idx = LG_NONE;
  char *probe_body = NULL;
  int probe_status = c->p.status_code;
  if (idx == LG_PROBE && oc == LG_OK) probe_body = strndup(c->body ? c->body : "", c->body_len);
  if (idx != LG_PROBE) {
    rec = &r->recs[idx];
    rec->end = since_t0(r);
    if (oc == LG_OK && c->whole) rec->first = rec->last = rec->end;
    rec->outcome = (uint8_t)oc;
    if (oc != LG_OK && !rec->err) rec->err = strdup(msg[0] ? msg : lg_outcome_name(oc));
    if (oc == LG_OK && !rec->warmup)
      for (size_t k = 0; k < c->n_gaps; k++)
        lg_run__add_itl(r, c->gaps[k]);
    r->active--;
  }
  if (keep && !c->writing && !c->closing && !r->stopping) {
    c->served++;
    reset_request(c);
    unlink_conn(c);
    link_conn(c, 1);
  } else {
    conn_close(c);
  }
  if (idx != LG_PROBE) {
    lg_run__done(r, idx);
  } else {
    r->probe_pending = 0;
    if (oc == LG_OK && probe_body)
      lg_run__probe_done(r, probe_status, probe_body, strlen(probe_body), NULL);
    else
      lg_run__probe_done(r, 0, NULL, 0, msg[0] ? msg : "out of memory");
    free(probe_body);
  }
}

/* ---- llhttp callbacks (they only record; the request ends after llhttp_execute) --------- */

static int fail_cb(lg_conn *c, lg_outcome oc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_cb(lg_conn *c, lg_outcome oc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
  va_end(ap);
  c->err_outcome = oc;
  return -1;
}

static int on_hfield(llhttp_t *p, const char *at, size_t n) {
  lg_conn *c = p->data;
  size_t k = n < sizeof c->hname - 1 - c->hname_len ? n : sizeof c->hname - 1 - c->hname_len;
  memcpy(c->hname + c->hname_len, at, k);
  c->hname_len += k;
  return 0;
}

static int on_hfield_done(llhttp_t *p) {
  lg_conn *c = p->data;
  c->in_ctype = c->hname_len == 12 && strncasecmp(c->hname, "content-type", 12) == 0;
  c->hname_len = 0;
  if (c->in_ctype) c->ctype_len = 0;
  return 0;
}

static int on_hvalue(llhttp_t *p, const char *at, size_t n) {
  lg_conn *c = p->data;
  if (!c->in_ctype) return 0;
  size_t k = n < sizeof c->ctype - 1 - c->ctype_len ? n : sizeof c->ctype - 1 - c->ctype_len;
  memcpy(c->ctype + c->ctype_len, at, k);
  c->ctype_len += k;
  c->ctype[c->ctype_len] = '\0';
  return 0;
}

static int on_headers_done(llhttp_t *p) {
  lg_conn *c = p->data;
  lg_rec *rec = rec_of(c);
  int st = p->status_code;
  if (rec) rec->status = st;
  c->ctype[c->ctype_len] = '\0';
  if (rec && c->r->o->stream && st >= 200 && st < 300) {
    if (strncasecmp(c->ctype, "text/event-stream", 17) != 0)
      return fail_cb(c, LG_EPROTO,
                     "a stream was asked for but the reply is not SSE (HTTP %d, "
                     "Content-Type '%s')",
                     st, c->ctype);
    c->stream_reply = 1;
  }
  return 0;
}

/* The token counts of a reply's or stream's "usage" object (NULL or not an object: none). */
static void take_usage(lg_rec *rec, const cJSON *u) {
  if (!cJSON_IsObject(u)) return;
  const cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
  const cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
  if (cJSON_IsNumber(pt)) rec->prompt_tokens = (int)pt->valuedouble;
  if (cJSON_IsNumber(ct)) {
    rec->output_tokens = (int)ct->valuedouble;
    rec->got_usage = 1;
  }
}

static int on_event(void *ud, const char *data, size_t len) {
  lg_conn *c = ud;
  lg_rec *rec = rec_of(c);
  if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
    c->saw_done = 1;
    return 0;
  }
  if (c->saw_done) return 0;
  cJSON *j = cJSON_ParseWithLength(data, len);
  if (!j || !cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return fail_cb(c, LG_EPROTO, "an SSE event is not a JSON object: '%.60s'", data);
  }
  cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
  if (e) {
    cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
    int rc = fail_cb(c, LG_ESTREAM, "error event in the stream: %.200s",
                     cJSON_IsString(m) ? m->valuestring : "(no message)");
    cJSON_Delete(j);
    return rc;
  }
  cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
  cJSON *delta = cJSON_GetObjectItemCaseSensitive(ch, "delta");
  cJSON *t = cJSON_GetObjectItemCaseSensitive(ch, "text");
  if (!t) t = cJSON_GetObjectItemCaseSensitive(delta, "content");
  cJSON *fin = cJSON_GetObjectItemCaseSensitive(ch, "finish_reason");
  /* a token: a chunk with text, or an empty-text chunk that is neither the closing one nor a
   * chat role announcement (servers stream one chunk per token even while they hold its
   * text back, as vLLM does) */
  int token = cJSON_IsString(t) &&
              (t->valuestring[0] ||
               ((!fin || cJSON_IsNull(fin)) && !cJSON_GetObjectItemCaseSensitive(delta, "role")));
  if (token) {
    if (rec->first < 0) {
      rec->first = c->now;
    } else {
      if (c->n_gaps == c->cap_gaps) {
        size_t nc = c->cap_gaps ? c->cap_gaps * 2 : 64;
        double *ng = realloc(c->gaps, nc * sizeof *ng);
        if (!ng) {
          cJSON_Delete(j);
          return fail_cb(c, LG_EPROTO, "out of memory");
        }
        c->gaps = ng;
        c->cap_gaps = nc;
      }
      c->gaps[c->n_gaps++] = (double)(c->now - rec->last);
    }
    rec->last = c->now;
    rec->chunks++;
  }
  take_usage(rec, cJSON_GetObjectItemCaseSensitive(j, "usage"));
  cJSON_Delete(j);
  return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n) {
  lg_conn *c = p->data;
  if (c->stream_reply) {
    int rc = lg_sse_feed(&c->sse, at, n, on_event, c);
    if (rc == -1) return -1; /* on_event set the message */
    if (rc) return fail_cb(c, LG_EPROTO, "bad SSE framing: %s", ns_strerror(rc));
    return 0;
  }
  if (c->body_len + n > LG_MAX_BODY)
    return fail_cb(c, LG_EPROTO, "reply body over %u bytes", LG_MAX_BODY);
  if (c->body_len + n + 1 > c->body_cap) {
    size_t nc = c->body_cap ? c->body_cap : 4096;
    while (nc < c->body_len + n + 1)
      nc *= 2;
    char *nb = realloc(c->body, nc);
    if (!nb) return fail_cb(c, LG_EPROTO, "out of memory");
    c->body = nb;
    c->body_cap = nc;
  }
  memcpy(c->body + c->body_len, at, n);
  c->body_len += n;
  c->body[c->body_len] = '\0';
  return 0;
}

static int on_message_done(llhttp_t *p) {
  lg_conn *c = p->data;
  c->complete = 1;
  return HPE_PAUSED; /* stop here: the request ends once llhttp_execute returns */
}

static void settings_init(void) {
  if (settings_ready) return;
  llhttp_settings_init(&settings);
  settings.on_header_field = on_hfield;
  settings.on_header_field_complete = on_hfield_done;
  settings.on_header_value = on_hvalue;
  settings.on_headers_complete = on_headers_done;
  settings.on_body = on_body;
  settings.on_message_complete = on_message_done;
  settings_ready = 1;
}

/* ---- a complete reply ------------------------------------------------------------------------ */

/* The error message of an OpenAI error body, else its first bytes. */
static void error_text(const char *body, size_t len, char *out, size_t outlen) {
  cJSON *j = body ? cJSON_ParseWithLength(body, len) : NULL;
  cJSON *m =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"), "message");
  if (cJSON_IsString(m))
    snprintf(out, outlen, "%s", m->valuestring);
  else
    snprintf(out, outlen, "%.100s", body ? body : "");
  cJSON_Delete(j);
}

static void reply_done(lg_conn *c, int keep) {
  lg_rec *rec = rec_of(c);
  int st = c->p.status_code;
  if (c->idx == LG_PROBE) {
    finish(c, st == 200 ? LG_OK : LG_EHTTP, keep, "HTTP %d", st);
    return;
  }
  if (st < 200 || st >= 300) {
    char m[200];
    error_text(c->body, c->body_len, m, sizeof m);
    finish(c, LG_EHTTP, keep, "HTTP %d: %s", st, m);
    return;
  }
  if (c->stream_reply) {
    if (!c->saw_done) {
      finish(c, LG_EPROTO, 0, "the stream ended without data: [DONE] (%zu bytes unparsed)",
             lg_sse_pending(&c->sse));
      return;
    }
    if (!rec->got_usage) rec->output_tokens = rec->chunks;
    finish(c, LG_OK, keep, NULL);
    return;
  }
  cJSON *j = c->body ? cJSON_ParseWithLength(c->body, c->body_len) : NULL;
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    finish(c, LG_EPROTO, keep, "the reply is not JSON: '%.60s'", c->body ? c->body : "");
    return;
  }
  cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "choices");
  if (!cJSON_IsArray(ch) || cJSON_GetArraySize(ch) < 1) {
    cJSON_Delete(j);
    finish(c, LG_EPROTO, keep, "the reply has no choices: '%.60s'", c->body);
    return;
  }
  take_usage(rec, cJSON_GetObjectItemCaseSensitive(j, "usage"));
  cJSON_Delete(j);
  c->whole = 1; /* the whole output arrives at once: first token = end */
  finish(c, LG_OK, keep, NULL);
}

/* ---- libuv callbacks ------------------------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
  lg_conn *c = h->data;
  *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  lg_conn *c = s->data;
  if (n == 0 || c->closing) return;
  if (c->idx == LG_NONE) { /* idle: the server closed it, or sent bytes nobody asked for */
    conn_close(c);
    return;
  }
  c->now = since_t0(c->r);
  if (n < 0) {
    if (n == UV_EOF) {
      llhttp_finish(&c->p); /* a reply delimited by the close ends here */
      if (c->complete && !c->err_outcome) {
        reply_done(c, 0);
        return;
      }
    }
    if (c->err_outcome) {
      finish(c, c->err_outcome, 0, "%s", c->errmsg);
      return;
    }
    finish(c, LG_ECONN, 0, "%s",
           n == UV_EOF
               ? (c->got_bytes ? "the server closed the connection in the middle of the reply"
                               : "the server closed the connection without replying")
               : uv_strerror((int)n));
    return;
  }
  c->got_bytes = 1;
  llhttp_errno_t e = llhttp_execute(&c->p, buf->base, (size_t)n);
  if (c->err_outcome) {
    finish(c, c->err_outcome, 0, "%s", c->errmsg);
  } else if (c->complete) {
    reply_done(c, llhttp_should_keep_alive(&c->p));
  } else if (e != HPE_OK) {
    finish(c, LG_EPROTO, 0, "malformed HTTP reply: %s (%s)", llhttp_errno_name(e),
           llhttp_get_error_reason(&c->p) ? llhttp_get_error_reason(&c->p) : "");
  }
}

static void on_timer(uv_timer_t *t) {
  lg_conn *c = t->data;
  if (c->idx == LG_NONE) return;
  if (c->deferred) {
    finish(c, c->err_outcome, 0, "%s", c->errmsg);
    return;
  }
  finish(c, LG_TIMEOUT, 0, "no complete reply within %g s", c->r->o->timeout_s);
}

/* Fail the request from the next loop iteration (not inside lg_http_send's caller). */
static void defer_fail(lg_conn *c, lg_outcome oc, const char *what, int uverr) {
  snprintf(c->errmsg, sizeof c->errmsg, "%s %s: %s", what, c->r->o->authority, uv_strerror(uverr));
  c->err_outcome = oc;
  c->deferred = 1;
  uv_timer_start(&c->timer, on_timer, 0, 0);
}

static void on_write(uv_write_t *w, int status) {
  lg_conn *c = w->data;
  c->writing = 0;
  if (c->idx == LG_NONE) { /* the request ended while its bytes were being written */
    free(c->out);
    c->out = NULL;
    return;
  }
  if (status == 0 || c->closing) return;
  c->now = since_t0(c->r);
  finish(c, LG_ECONN, 0, "sending to %s: %s", c->r->o->authority, uv_strerror(status));
}

static void write_request(lg_conn *c) {
  uv_buf_t b = uv_buf_init(c->out, (unsigned)c->out_len);
  c->write_req.data = c;
  c->writing = 1;
  int rc = uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
  if (rc) {
    c->writing = 0;
    defer_fail(c, LG_ECONN, "sending to", rc);
  }
}

static void on_connect(uv_connect_t *req, int status) {
  lg_conn *c = req->data;
  if (c->closing || c->idx == LG_NONE) return;
  if (status) {
    c->now = since_t0(c->r);
    finish(c, LG_ECONN, 0, "connect to %s: %s", c->r->o->authority, uv_strerror(status));
    return;
  }
  c->connected = 1;
  uv_tcp_nodelay(&c->tcp, 1);
  int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
  if (rc) {
    defer_fail(c, LG_ECONN, "reading from", rc);
    return;
  }
  write_request(c);
}

/* ---- sending ----------------------------------------------------------------------------------
 */

/* c: an idle connection, or a zeroed one (with c->r set) to open. Takes out. */
static void start_on(lg_run *r, lg_conn *c, size_t idx, char *out, size_t out_len) {
  int fresh = c->open_handles == 0;
  if (fresh) {
    uv_tcp_init(r->loop, &c->tcp);
    uv_timer_init(r->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    r->n_conns++;
    link_conn(c, 0);
  } else {
    unlink_conn(c);
    link_conn(c, 0);
  }
  reset_request(c);
  c->idx = idx;
  c->out = out;
  c->out_len = out_len;
  double ms = r->o->timeout_s * 1000;
  if (idx == LG_PROBE && ms > 10000) ms = 10000;
  uv_timer_start(&c->timer, on_timer, (uint64_t)(ms + 0.5), 0);
  if (!fresh) {
    write_request(c);
    return;
  }
  c->connect_req.data = c;
  int rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&r->addr, on_connect);
  if (rc) defer_fail(c, LG_ECONN, "connect to", rc);
}

void lg_http_send(lg_run *r, size_t idx, const char *path, char *body, size_t body_len) {
  settings_init();
  const lg_opts *o = r->o;
  int get = idx == LG_PROBE;
  char head[1024];
  int n = snprintf(
      head, sizeof head, "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: nanoserve-loadgen\r\n%s%s%s",
      get ? "GET" : "POST", o->base, path, o->authority, o->api_key ? "Authorization: Bearer " : "",
      o->api_key ? o->api_key : "", o->api_key ? "\r\n" : "");
  if (!get && n > 0 && (size_t)n < sizeof head)
    n += snprintf(head + n, sizeof head - (size_t)n,
                  "Content-Type: application/json\r\nAccept: %s\r\nContent-Length: %zu\r\n",
                  o->stream ? "text/event-stream" : "application/json", body_len);
  if (n > 0 && (size_t)n < sizeof head) n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
  size_t hl = n > 0 && (size_t)n < sizeof head ? (size_t)n : 0;
  char *out = hl ? malloc(hl + body_len) : NULL;
  lg_conn *c = r->idle;
  if (!c) {
    c = calloc(1, sizeof *c);
    if (c) c->r = r;
  }
  if (!out || !c) {
    if (c && c->open_handles == 0) free(c);
    free(out);
    free(body);
    if (idx == LG_PROBE) {
      lg_run__probe_done(r, 0, NULL, 0, "out of memory (or headers too long)");
      return;
    }
    lg_rec *rec = &r->recs[idx];
    rec->end = since_t0(r);
    rec->outcome = LG_EPROTO;
    rec->err = strdup("out of memory (or headers too long)");
    r->active--;
    lg_run__done(r, idx);
    return;
  }
  memcpy(out, head, hl);
  if (body_len) memcpy(out + hl, body, body_len);
  free(body);
  if (idx == LG_PROBE) r->probe_pending = 1;
  start_on(r, c, idx, out, hl + body_len);
}

void lg_http_close_all(lg_run *r, int abort) {
  while (r->idle)
    conn_close(r->idle);
  if (!abort) return;
  while (r->busy) {
    lg_conn *c = r->busy;
    if (c->idx == LG_NONE) {
      conn_close(c);
      continue;
    }
    c->now = since_t0(r);
    finish(c, LG_EINTR, 0, "interrupted (SIGINT) while in flight");
  }
}
