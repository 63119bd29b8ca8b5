/* test_http_feed.c — the request parser without sockets (http__test_conn_*): pipelining
 * across arbitrary splits, limits, errors and cancel-on-close, byte-exact framing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "http.h"
#include "ns_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uv_loop_t g_loop;
static http_server_t *g_srv;
static http_req_t *g_held;
static int g_hold_cancels;

static void h_echo(http_req_t *req, void *ud) {
  char out[512];
  size_t blen;
  const char *body = http_req_body(req, &blen);
  int n = snprintf(out, sizeof out, "%s %s ?%s [%s] %zu", http_req_method(req), http_req_path(req),
                   http_req_query(req), body, blen);
  http_respond(req, 200, "text/plain", out, (size_t)n, NULL);
}

static void hold_cancel(http_req_t *req, void *ud) {
  g_hold_cancels++;
  assert_int_equal(http_req_cancelled(req), 1);
  assert_int_equal(http_sse_send(req, "x", 1), NS_EINVAL); /* no stream begun */
  assert_int_equal(http_respond(req, 200, NULL, NULL, 0, NULL), NS_ECANCELED);
  g_held = NULL;
}

static void h_hold(http_req_t *req, void *ud) {
  g_held = req;
  assert_int_equal(http_req_set_cancel(req, hold_cancel, NULL), 0);
}

static void h_sse(http_req_t *req, void *ud) {
  assert_int_equal(http_sse_begin(req), 0);
  assert_int_equal(http_sse_begin(req), NS_EINVAL);
  assert_int_equal(http_sse_send(req, "a\nb", 3), 0);
  assert_int_equal(http_sse_send(req, "c\r\nd", 4), 0);
  assert_int_equal(http_sse_end(req, 1), 0);
}

static int setup(void **state) {
  ns_log_configure(NS_LOG_OFF, NS_LOG_TEXT);
  assert_int_equal(uv_loop_init(&g_loop), 0);
  cfg_t c;
  cfg_init(&c);
  c.server.max_header_bytes = 1024;
  c.server.max_headers = 8;
  c.server.max_url_bytes = 64;
  c.server.max_body_bytes = 1024;
  assert_int_equal(http_server_create(&g_loop, &c, &g_srv), 0);
  assert_int_equal(http_route_add(g_srv, "GET", "/e", h_echo, NULL, 0), 0);
  assert_int_equal(http_route_add(g_srv, "POST", "/e", h_echo, NULL, 0), 0);
  assert_int_equal(http_route_add(g_srv, "GET", "/hold", h_hold, NULL, 0), 0);
  assert_int_equal(http_route_add(g_srv, "GET", "/sse", h_sse, NULL, 0), 0);
  assert_int_equal(http_route_add(g_srv, "get", "e", h_echo, NULL, 0), NS_EINVAL);
  return 0;
}

static int teardown(void **state) {
  http_server_close(g_srv, NULL, NULL);
  uv_run(&g_loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&g_loop), 0);
  return 0;
}

/* Feed s in pieces of `piece` bytes; return the output (static copy) and closed flag. */
static const char *feed(const char *s, size_t piece, int *closed) {
  static char out[16384];
  http_conn_t *c;
  assert_int_equal(http__test_conn_new(g_srv, &c), 0);
  size_t len = strlen(s);
  int cl = 0;
  for (size_t i = 0; i < len; i += piece)
    cl = http__test_conn_feed(c, s + i, len - i < piece ? len - i : piece);
  size_t n;
  const char *o = http__test_conn_output(c, &n);
  assert_true(n < sizeof out);
  memcpy(out, o, n);
  out[n] = '\0';
  http__test_conn_free(c);
  if (closed) *closed = cl;
  return out;
}

/* The bodies of the responses in out, in order, joined by '|'. */
static const char *bodies(const char *out) {
  static char b[4096];
  b[0] = '\0';
  const char *p = out;
  while ((p = strstr(p, "HTTP/1.1 "))) {
    const char *cl = strstr(p, "Content-Length: ");
    const char *e = strstr(p, "\r\n\r\n");
    if (!cl || !e) break;
    size_t n = strtoul(cl + 16, NULL, 10);
    if (b[0]) strcat(b, "|");
    strncat(b, e + 4, n);
    p = e + 4 + n;
  }
  return b;
}

static void test_pipeline_any_split(void **state) {
  const char *in = "GET /e?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"
                   "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                   "POST /e?c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                   "chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n";
  for (size_t piece = 1; piece <= strlen(in); piece++) {
    int closed;
    const char *out = feed(in, piece, &closed);
    assert_string_equal(bodies(out), "GET /e ?x=1 [] 0|POST /e ? [hello] 5|POST /e ?c [abc] 3");
    assert_int_equal(closed, 0);
  }
}

static void test_errors_close(void **state) {
  struct {
    const char *in;
    const char *status;
  } cases[] = {
      {"BLAH\r\n\r\n", "HTTP/1.1 400 "},
      {"GET /e HTTP/2.0\r\n\r\n", "HTTP/1.1 505 "},
      {"GET /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", "HTTP/1.1 400 "},
      {"GET /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
       "HTTP/1.1 501 "},
      {"GET /e HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n\r\n", "HTTP/1.1 417 "},
      {"GET /eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
       " HTTP/1.1\r\nHost: x\r\n\r\n",
       "HTTP/1.1 414 "},
      {"POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 1025\r\n\r\n", "HTTP/1.1 413 "},
      {"GET /e HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\nG: 1\r\nH: "
       "1\r\nI: 1\r\n"
       "\r\n",
       "HTTP/1.1 431 "},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    for (size_t piece = 1; piece <= 64; piece *= 4) {
      int closed;
      const char *out = feed(cases[i].in, piece, &closed);
      if (strncmp(out, cases[i].status, strlen(cases[i].status)) != 0)
        fail_msg("case %zu piece %zu: got %.40s", i, piece, out);
      assert_non_null(strstr(out, "Connection: close\r\n"));
      assert_non_null(strstr(out, "{\"error\":{\"message\":"));
      assert_int_equal(closed, 1);
    }
  }
}

static void test_trailers_and_extensions_bounded(void **state) {
  const char *ok = "POST /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "2;name=val\r\nab\r\n0\r\nX-Trailer: t\r\n\r\n";
  assert_string_equal(bodies(feed(ok, 7, NULL)), "POST /e ? [ab] 2");
  /* a trailer or an extension bigger than the body limit is refused like a body */
  static char big[4096];
  int n = snprintf(big, sizeof big,
                   "POST /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "1\r\na\r\n0\r\nX-T: ");
  memset(big + n, 't', 1100);
  snprintf(big + n + 1100, sizeof big - (size_t)n - 1100, "\r\n\r\n");
  assert_int_equal(strncmp(feed(big, 512, NULL), "HTTP/1.1 413 ", 13), 0);
  n = snprintf(big, sizeof big,
               "POST /e HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;e=");
  memset(big + n, 'e', 1100);
  snprintf(big + n + 1100, sizeof big - (size_t)n - 1100, "\r\na\r\n0\r\n\r\n");
  assert_int_equal(strncmp(feed(big, 512, NULL), "HTTP/1.1 413 ", 13), 0);
}

static void test_header_bytes_exact(void **state) {
  char in[2048];
  int n = snprintf(in, sizeof in, "GET /e HTTP/1.1\r\nHost: x\r\nX: ");
  int fill = 1024 - n - 4;
  memset(in + n, 'v', (size_t)fill);
  snprintf(in + n + fill, sizeof in - (size_t)(n + fill), "\r\n\r\n");
  assert_int_equal(strlen(in), 1024);
  assert_int_equal(strncmp(feed(in, 100, NULL), "HTTP/1.1 200 ", 13), 0);
  snprintf(in + n, sizeof in - (size_t)n, "%0*d\r\n\r\n", fill + 1, 0); /* one more byte */
  assert_int_equal(strncmp(feed(in, 100, NULL), "HTTP/1.1 431 ", 13), 0);
}

static void test_cancel_on_close(void **state) {
  g_hold_cancels = 0;
  http_conn_t *c;
  assert_int_equal(http__test_conn_new(g_srv, &c), 0);
  const char *in = "GET /hold HTTP/1.1\r\nHost: x\r\n\r\nGET /e HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_int_equal(http__test_conn_feed(c, in, strlen(in)), 0);
  assert_non_null(g_held);
  size_t n;
  http__test_conn_output(c, &n);
  assert_int_equal(n, 0); /* the second request waits behind the first */
  http__test_conn_free(c);
  assert_int_equal(g_hold_cancels, 1);
  assert_null(g_held);
}

static void test_sse_framing(void **state) {
  const char *out = feed("GET /sse HTTP/1.1\r\nHost: x\r\n\r\n", 1000, NULL);
  const char *body = strstr(out, "\r\n\r\n");
  assert_non_null(strstr(out, "Transfer-Encoding: chunked\r\n"));
  assert_string_equal(body + 4, "11\r\ndata: a\ndata: b\n\n\r\n"
                                "11\r\ndata: c\ndata: d\n\n\r\n"
                                "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n");
}

static void test_error_json(void **state) {
  char *j = http_error_json(400, "messages", NULL, "bad \"quote\"");
  assert_string_equal(j, "{\"error\":{\"message\":\"bad \\\"quote\\\"\",\"type\":"
                         "\"invalid_request_error\",\"param\":\"messages\",\"code\":null}}");
  free(j);
  j = http_error_json(500, NULL, "boom", "x");
  assert_string_equal(j, "{\"error\":{\"message\":\"x\",\"type\":\"internal_error\",\"param\":null,"
                         "\"code\":\"boom\"}}");
  free(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pipeline_any_split),
      cmocka_unit_test(test_errors_close),
      cmocka_unit_test(test_header_bytes_exact),
      cmocka_unit_test(test_cancel_on_close),
      cmocka_unit_test(test_trailers_and_extensions_bounded),
      cmocka_unit_test(test_sse_framing),
      cmocka_unit_test(test_error_json),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
