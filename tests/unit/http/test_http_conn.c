/* test_http_conn.c — connections over real sockets: requests, keep-alive, pipelining, limits,
 * timeouts, max_connections, EMFILE backoff, drain and the fd count over 1,000 cycles. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "http_fixture.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- basics ------------------------------------------------------------------------------ */

static void test_get_basic(void **state) {
  resp_t r;
  assert_int_equal(request(p_main, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r), 200);
  assert_string_equal(resp_header(&r, "Server"), "nanoserve");
  assert_non_null(resp_header(&r, "Date"));
  assert_string_equal(resp_header(&r, "X-Extra"), "yes");
  assert_string_equal(resp_header(&r, "Connection"), "keep-alive");
  char rid[32];
  snprintf(rid, sizeof rid, "%s", resp_header(&r, "X-Request-Id"));
  cJSON *j = json_of(&r);
  assert_string_equal(jstr(j, "method", NULL), "GET");
  assert_string_equal(jstr(j, "path", NULL), "/echo");
  assert_string_equal(jstr(j, "body", NULL), "");
  char id[32];
  snprintf(id, sizeof id, "%016llx", (unsigned long long)cJSON_GetObjectItem(j, "id")->valuedouble);
  assert_string_equal(rid, id); /* the header carries the request's id */
  assert_int_equal(strncmp(jstr(j, "peer", NULL), "127.0.0.1:", 10), 0);
  cJSON_Delete(j);
  resp_free(&r);
}

static void test_post_content_length(void **state) {
  resp_t r;
  assert_int_equal(request(p_main,
                           "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n"
                           "Content-Type: text/plain\r\n\r\nhello world",
                           &r),
                   200);
  cJSON *j = json_of(&r);
  assert_string_equal(jstr(j, "method", NULL), "POST");
  assert_string_equal(jstr(j, "body", NULL), "hello world");
  assert_int_equal((int)cJSON_GetObjectItem(j, "body_len")->valuedouble, 11);
  assert_int_equal((int)cJSON_GetObjectItem(j, "nul_terminated")->valuedouble, 1);
  cJSON_Delete(j);
  resp_free(&r);
}

static void test_post_chunked(void **state) {
  cli_t *c = open4(p_main);
  assert_int_equal(
      cli_sendstr(c, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5\r\nhello\r\n"),
      0);
  usleep(50000); /* the rest in a later read */
  assert_int_equal(cli_sendstr(c, "6;ext=1\r\n world\r\n0\r\n\r\n"), 0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 200);
  cJSON *j = json_of(&r);
  assert_string_equal(jstr(j, "body", NULL), "hello world");
  cJSON_Delete(j);
  resp_free(&r);
  cli_close(c);
}

static void test_headers_and_query(void **state) {
  resp_t r;
  assert_int_equal(
      request(p_main,
              "GET /echo?a=1&b=two HTTP/1.1\r\nHost: x\r\nX-Test-Header:   spaced value  \r\n"
              "Accept: */*\r\n\r\n",
              &r),
      200);
  cJSON *j = json_of(&r);
  assert_string_equal(jstr(j, "path", NULL), "/echo");
  assert_string_equal(jstr(j, "query", NULL), "a=1&b=two");
  assert_string_equal(jstr(j, "x_test", NULL), "spaced value");
  assert_int_equal((int)cJSON_GetObjectItem(j, "nheaders")->valuedouble, 3);
  cJSON_Delete(j);
  resp_free(&r);
}

static void test_keepalive_reuse(void **state) {
  cli_t *c = open4(p_main);
  char ids[3][32];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(cli_sendstr(c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    resp_t r;
    assert_int_equal(cli_read_response(c, &r, TMO), 200);
    snprintf(ids[i], sizeof ids[i], "%s", resp_header(&r, "X-Request-Id"));
    resp_free(&r);
  }
  assert_string_not_equal(ids[0], ids[1]);
  assert_string_not_equal(ids[1], ids[2]);
  cli_close(c);
}

static void test_pipelined_two(void **state) {
  cli_t *c = open4(p_main);
  assert_int_equal(
      cli_sendstr(c, "GET /echo?i=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                     "POST /echo?i=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"),
      0);
  read_echo_query(c, "i=1");
  read_echo_query(c, "i=2");
  cli_close(c);
}

static void test_pipelined_three_slow_first(void **state) {
  cli_t *c = open4(p_main);
  double t0 = now_ms();
  assert_int_equal(cli_sendstr(c, "GET /slow?ms=200 HTTP/1.1\r\nHost: x\r\n\r\n"
                                  "GET /echo?i=2 HTTP/1.1\r\nHost: x\r\n\r\n"
                                  "GET /echo?i=3 HTTP/1.1\r\nHost: x\r\n\r\n"),
                   0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 200);
  assert_string_equal(r.body, "slow"); /* the slow one first, though the others were ready */
  assert_true(now_ms() - t0 >= 190);
  resp_free(&r);
  read_echo_query(c, "i=2");
  read_echo_query(c, "i=3");
  cli_close(c);
}

static void test_pipelined_after_sse(void **state) {
  cli_t *c = open4(p_main);
  assert_int_equal(cli_sendstr(c, "GET /sse?n=3&ms=20 HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?i=9 "
                                  "HTTP/1.1\r\nHost: x\r\n\r\n"),
                   0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 200);
  assert_string_equal(r.body, "data: {\"i\":0}\n\ndata: {\"i\":1}\n\ndata: {\"i\":2}\n\n"
                              "data: [DONE]\n\n");
  resp_free(&r);
  read_echo_query(c, "i=9");
  cli_close(c);
}

static void test_http10_closes(void **state) {
  cli_t *c = open4(p_main);
  assert_int_equal(cli_sendstr(c, "GET /echo HTTP/1.0\r\n\r\n"), 0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 200);
  assert_string_equal(resp_header(&r, "Connection"), "close");
  resp_free(&r);
  assert_int_equal(cli_wait_closed(c, TMO), 1);
  cli_close(c);
  /* HTTP/1.0 asking for keep-alive keeps it */
  c = open4(p_main);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(cli_sendstr(c, "GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"), 0);
    assert_int_equal(cli_read_response(c, &r, TMO), 200);
    assert_string_equal(resp_header(&r, "Connection"), "keep-alive");
    resp_free(&r);
  }
  cli_close(c);
}

static void test_connection_close_header(void **state) {
  cli_t *c = open4(p_main);
  assert_int_equal(cli_sendstr(c, "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                                  "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"),
                   0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 200);
  assert_string_equal(resp_header(&r, "Connection"), "close");
  resp_free(&r);
  assert_int_equal(cli_wait_closed(c, TMO), 1); /* the second request is not answered */
  cli_close(c);
}

/* ---- limits ---------------------------------------------------------------------------- */

/* Send raw, expect an error status with OpenAI's body, then the close. */
static void expect_reject(int port, const char *raw, size_t len, int status) {
  cli_t *c = open4(port);
  assert_int_equal(cli_send(c, raw, len), 0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), status);
  expect_error(&r, status, status >= 500 ? "invalid_request_error" : "invalid_request_error");
  assert_string_equal(resp_header(&r, "Connection"), "close");
  resp_free(&r);
  assert_int_equal(cli_wait_closed(c, TMO), 1);
  cli_close(c);
}

/* RFC 9112 3.2: an HTTP/1.1 request without Host, or any with two, is a 400 (HTTP/1.0
 * without one is served: test_http10_closes); so is a header field without a name */
static void test_host_rules_400(void **state) {
  static const char *const bad[] = {
      "GET /echo HTTP/1.1\r\n\r\n", "GET /echo HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n",
      "GET /echo HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n",
      "GET /echo HTTP/1.1\r\nHost: a\r\n: no name\r\n\r\n", /* a field without a name */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    expect_reject(p_main, bad[i], strlen(bad[i]), 400);
  resp_t r;
  assert_int_equal(request(p_main, "GET /echo HTTP/1.1\r\nHOST: a\r\n\r\n", &r), 200);
  resp_free(&r);
}

static void test_limit_header_bytes_431(void **state) {
  http_stats_t before = stats_of(g_main);
  char raw[4096];
  int n = snprintf(raw, sizeof raw, "GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: ");
  memset(raw + n, 'a', 2100);
  n += 2100;
  n += snprintf(raw + n, sizeof raw - (size_t)n, "\r\n\r\n");
  expect_reject(p_main, raw, (size_t)n, 431);
  assert_int_equal(stats_of(g_main).rejected_header_bytes, before.rejected_header_bytes + 1);
  /* just under the limit is fine: 2048 bytes in all */
  n = snprintf(raw, sizeof raw, "GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: ");
  int fill = 2048 - n - 4;
  memset(raw + n, 'a', (size_t)fill);
  n += fill;
  n += snprintf(raw + n, sizeof raw - (size_t)n, "\r\n\r\n");
  assert_int_equal(n, 2048);
  resp_t r;
  assert_int_equal(request(p_main, raw, &r), 200);
  resp_free(&r);
}

static void test_limit_header_count_431(void **state) {
  http_stats_t before = stats_of(g_main);
  char raw[2048];
  int n = snprintf(raw, sizeof raw, "GET /echo HTTP/1.1\r\nHost: x\r\n");
  for (int i = 0; i < 16; i++) /* with Host, 17 */
    n += snprintf(raw + n, sizeof raw - (size_t)n, "H%d: v\r\n", i);
  n += snprintf(raw + n, sizeof raw - (size_t)n, "\r\n");
  expect_reject(p_main, raw, (size_t)n, 431);
  assert_int_equal(stats_of(g_main).rejected_header_count, before.rejected_header_count + 1);
  /* 16 is allowed */
  n = snprintf(raw, sizeof raw, "GET /echo HTTP/1.1\r\nHost: x\r\n");
  for (int i = 0; i < 15; i++)
    n += snprintf(raw + n, sizeof raw - (size_t)n, "H%d: v\r\n", i);
  n += snprintf(raw + n, sizeof raw - (size_t)n, "\r\n");
  resp_t r;
  assert_int_equal(request(p_main, raw, &r), 200);
  resp_free(&r);
}

static void test_limit_url_414(void **state) {
  char raw[1024];
  int n = snprintf(raw, sizeof raw, "GET /echo?q=");
  memset(raw + n, 'u', 300);
  n += 300;
  n += snprintf(raw + n, sizeof raw - (size_t)n, " HTTP/1.1\r\nHost: x\r\n\r\n");
  expect_reject(p_main, raw, (size_t)n, 414);
}

static void test_limit_body_cl_413_before_body(void **state) {
  cli_t *c = open4(p_main);
  double t0 = now_ms();
  /* headers only: the answer must not wait for the body */
  assert_int_equal(
      cli_sendstr(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"), 0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, 1000), 413);
  assert_true(now_ms() - t0 < 1000);
  expect_error(&r, 413, "invalid_request_error");
  resp_free(&r);
  assert_int_equal(cli_wait_closed(c, TMO), 1);
  cli_close(c);
}

static void test_limit_body_chunked_413(void **state) {
  char raw[8192];
  int n = snprintf(raw, sizeof raw,
                   "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  for (int i = 0; i < 5; i++) {
    n += snprintf(raw + n, sizeof raw - (size_t)n, "3e8\r\n");
    memset(raw + n, 'b', 1000);
    n += 1000;
    n += snprintf(raw + n, sizeof raw - (size_t)n, "\r\n");
  }
  n += snprintf(raw + n, sizeof raw - (size_t)n, "0\r\n\r\n");
  expect_reject(p_main, raw, (size_t)n, 413);
}

static void test_chunk_size_past_limit_413(void **state) {
  /* a declared chunk past the 4096-byte limit is refused when it is read, as a
   * Content-Length is, not at a receive timeout */
  double t0 = now_ms();
  const char *raw =
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2000\r\nabc";
  expect_reject(p_main, raw, strlen(raw), 413);
  assert_true(now_ms() - t0 < 900);
}

static void test_cl_and_te_400(void **state) {
  const char *raw =
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\n\r\n";
  expect_reject(p_main, raw, strlen(raw), 400);
}

static void test_duplicate_cl_400(void **state) {
  const char *raw =
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd";
  expect_reject(p_main, raw, strlen(raw), 400);
}

static void test_garbage_request_line_400(void **state) {
  const char *raw = "HELLO THERE\r\n\r\n";
  expect_reject(p_main, raw, strlen(raw), 400);
}

static void test_bad_chunk_size_400(void **state) {
  const char *raw =
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n";
  expect_reject(p_main, raw, strlen(raw), 400);
}

static void test_chunk_data_without_crlf_400(void **state) {
  /* any two bytes used to pass for the CRLF after chunk data: a desync behind a proxy
   * that frames the body otherwise (RFC 9112 7.1) */
  const char *raw =
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n";
  expect_reject(p_main, raw, strlen(raw), 400);
  raw = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n";
  expect_reject(p_main, raw, strlen(raw), 400);
}

static void test_space_before_colon_400(void **state) {
  const char *raw =
      "GET /echo HTTP/1.1\r\nHost: x\r\nHost : x\r\n\r\n"; /* RFC 9112 5.1: MUST reject */
  expect_reject(p_main, raw, strlen(raw), 400);
}

static void test_unsupported_te_501(void **state) {
  const char *raw =
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n";
  expect_reject(p_main, raw, strlen(raw), 501);
}

static void test_expect_100_continue(void **state) {
  cli_t *c = open4(p_main);
  assert_int_equal(
      cli_sendstr(
          c, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"),
      0);
  resp_t r;
  assert_int_equal(cli_read_head(c, &r, TMO), 100); /* before the body is sent */
  assert_int_equal(cli_sendstr(c, "body"), 0);
  assert_int_equal(cli_read_response(c, &r, TMO), 200);
  cJSON *j = json_of(&r);
  assert_string_equal(jstr(j, "body", NULL), "body");
  cJSON_Delete(j);
  resp_free(&r);
  cli_close(c);
  /* an unknown path is refused at once, without 100 */
  c = open4(p_main);
  assert_int_equal(
      cli_sendstr(
          c, "POST /nope HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"),
      0);
  assert_int_equal(cli_read_response(c, &r, TMO), 404);
  resp_free(&r);
  cli_close(c);
}

/* ---- timeouts ------------------------------------------------------------------------- */

/* Send s one byte every gap_ms until the server answers; returns ms until the answer. */
static double trickle(cli_t *c, const char *s, int gap_ms, resp_t *r) {
  double t0 = now_ms();
  for (size_t i = 0; s[i]; i++) {
    if (cli_send(c, s + i, 1) != 0) break; /* the server may have closed already */
    if (cli_read_head(c, r, gap_ms) > 0) return now_ms() - t0;
  }
  assert_true(cli_read_head(c, r, TMO) > 0);
  return now_ms() - t0;
}

static void test_slowloris_header_timeout_408(void **state) {
  /* g_main: header timeout 5 s; a trickle of small headers is too small for the rate rule */
  cli_t *c = open4(p_main);
  resp_t r;
  double ms = trickle(
      c, "GET /echo HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n", 1000, &r);
  assert_int_equal(r.status, 408);
  assert_true(ms >= 4500 && ms < 6500);
  assert_int_equal(cli_read_body(c, &r, TMO), 0);
  assert_non_null(strstr(r.body, "Timed out receiving the request headers"));
  resp_free(&r);
  assert_int_equal(cli_wait_closed(c, TMO), 1);
  cli_close(c);
}

static void test_small_request_pause_served(void **state) {
  /* g_main: 200 B/s at least, 5 s timeouts: a 1.5 s pause in a small request is no attack */
  cli_t *c = open4(p_main);
  assert_int_equal(cli_sendstr(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"),
                   0);
  usleep(1500000);
  assert_int_equal(cli_sendstr(c, "0123456789"), 0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 200);
  resp_free(&r);
  cli_close(c);
}

static void test_header_timeout_408(void **state) {
  /* g_slow: no rate rule, 1 s for the headers; 20 bytes per second would go on for 3 s */
  cli_t *c = open4(p_slow);
  resp_t r;
  double ms = trickle(
      c, "GET /echo HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
      50, &r);
  assert_int_equal(r.status, 408);
  assert_true(ms >= 900 && ms < 2000);
  assert_int_equal(cli_read_body(c, &r, TMO), 0);
  assert_non_null(strstr(r.body, "Timed out receiving the request headers"));
  resp_free(&r);
  assert_int_equal(cli_wait_closed(c, TMO), 1);
  cli_close(c);
}

static void test_body_timeout_408(void **state) {
  cli_t *c = open4(p_slow);
  double t0 = now_ms();
  assert_int_equal(
      cli_sendstr(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"), 0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 408);
  double ms = now_ms() - t0;
  assert_true(ms >= 900 && ms < 2000);
  expect_error(&r, 408, "timeout_error");
  resp_free(&r);
  cli_close(c);
}

static void test_idle_keepalive_closed(void **state) {
  cli_t *c = open4(p_main);
  assert_int_equal(cli_sendstr(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 200);
  resp_free(&r);
  double t0 = now_ms();
  assert_int_equal(cli_wait_closed(c, TMO), 1); /* closed, with no bytes sent */
  double ms = now_ms() - t0;
  assert_true(ms >= 800 && ms < 2000); /* keepalive_timeout_s = 1 */
  cli_close(c);
}

/* ---- connections ------------------------------------------------------------------------- */

static void test_max_connections(void **state) {
  http_stats_t before = stats_of(g_small);
  cli_t *k[3], *res[HTTP_PROBE_RESERVE];
  resp_t r;
  for (int i = 0; i < 3; i++) {
    k[i] = open4(p_small);
    assert_int_equal(cli_sendstr(k[i], "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    assert_int_equal(cli_read_response(k[i], &r, TMO), 200);
    resp_free(&r);
  }
  /* past the limit: a probe is answered, once (the connection then closes) */
  cli_t *probe = open4(p_small);
  assert_int_equal(cli_sendstr(probe, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  assert_int_equal(cli_read_response(probe, &r, TMO), 200);
  assert_string_equal(resp_header(&r, "Connection"), "close");
  resp_free(&r);
  assert_int_equal(cli_wait_closed(probe, TMO), 1);
  cli_close(probe);
  /* anything else there is a 503 that names the setting */
  cli_t *other = open4(p_small);
  assert_int_equal(cli_sendstr(other, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  assert_int_equal(cli_read_response(other, &r, TMO), 503);
  assert_string_equal(resp_header(&r, "Connection"), "close");
  assert_non_null(strstr(expect_error(&r, 503, "server_error"), "server.max_connections (3)"));
  assert_non_null(resp_header(&r, "Retry-After"));
  resp_free(&r);
  assert_int_equal(cli_wait_closed(other, TMO), 1);
  cli_close(other);
  /* wait until the server saw both closes, then fill the reserve: the next is closed at once */
  double end = now_ms() + TMO;
  while (stats_of(g_small).open_connections > 3 && now_ms() < end)
    usleep(5000);
  assert_int_equal(stats_of(g_small).open_connections, 3);
  for (int i = 0; i < HTTP_PROBE_RESERVE; i++)
    res[i] = open4(p_small);
  end = now_ms() + TMO;
  while (stats_of(g_small).open_connections < 3 + HTTP_PROBE_RESERVE && now_ms() < end)
    usleep(5000);
  cli_t *extra = open4(p_small); /* the kernel accepts; the server closes it at once */
  double t0 = now_ms();
  assert_int_equal(cli_wait_closed(extra, 1000), 1);
  assert_true(now_ms() - t0 < 1000);
  cli_close(extra);
  for (int i = 0; i < HTTP_PROBE_RESERVE; i++)
    cli_close(res[i]);
  for (int i = 0; i < 3; i++) { /* the three still work */
    assert_int_equal(cli_sendstr(k[i], "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
    assert_int_equal(cli_read_response(k[i], &r, TMO), 200);
    resp_free(&r);
    cli_close(k[i]);
  }
  http_stats_t after = stats_of(g_small);
  assert_int_equal(after.rejected_connections, before.rejected_connections + 2);
  /* slots free again once the server saw the closes */
  end = now_ms() + TMO;
  while (stats_of(g_small).open_connections > 0 && now_ms() < end)
    usleep(5000);
  assert_int_equal(stats_of(g_small).open_connections, 0);
  assert_int_equal(request(p_small, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 200);
  resp_free(&r);
}

static void test_fd_count_stable_1000(void **state) {
  resp_t r;
  /* warm up: anything lazily opened is opened now */
  assert_int_equal(request(p_main, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 200);
  resp_free(&r);
  double end = now_ms() + TMO;
  while (stats_of(g_main).open_connections > 0 && now_ms() < end)
    usleep(5000);
  int before = count_fds();
  for (int i = 0; i < 1000; i++) {
    cli_t *c = open4(p_main);
    bool server_closes = i % 2 == 0;
    assert_int_equal(
        cli_sendstr(c, server_closes
                           ? "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                           : "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"),
        0);
    assert_int_equal(cli_read_response(c, &r, TMO), 200);
    resp_free(&r);
    if (server_closes) assert_int_equal(cli_wait_closed(c, TMO), 1);
    cli_close(c);
  }
  end = now_ms() + 5000;
  while (count_fds() != before && now_ms() < end)
    usleep(5000);
  assert_int_equal(count_fds(), before);
  assert_int_equal(stats_of(g_main).open_connections, 0);
}

static void test_ipv6_loopback(void **state) {
  if (!g_v6) {
    print_message("skipped: cannot listen on ::1 (no IPv6 loopback here)\n");
    skip();
  }
  cli_t *c = cli_open(AF_INET6, p_v6, 0);
  assert_non_null(c);
  assert_int_equal(cli_sendstr(c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 200);
  cJSON *j = json_of(&r);
  assert_int_equal(strncmp(jstr(j, "peer", NULL), "[::1]:", 6), 0);
  cJSON_Delete(j);
  resp_free(&r);
  cli_close(c);
}

static void stop_drain(void *a) {
  http_server_stop_listening(g_drain);
}

static void test_stop_listening_drains(void **state) {
  cli_t *idle = open4(p_drain), *busy = open4(p_drain);
  resp_t r;
  assert_int_equal(cli_sendstr(idle, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  assert_int_equal(cli_read_response(idle, &r, TMO), 200);
  resp_free(&r);
  assert_int_equal(cli_sendstr(busy, "GET /slow?ms=300 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  usleep(50000);
  on_loop(stop_drain, NULL);
  assert_int_equal(cli_wait_closed(idle, TMO), 1);         /* idle keep-alive: closed now */
  assert_int_equal(cli_read_response(busy, &r, TMO), 200); /* in flight: finished */
  assert_string_equal(r.body, "slow");
  assert_string_equal(resp_header(&r, "Connection"), "close");
  resp_free(&r);
  assert_int_equal(cli_wait_closed(busy, TMO), 1);
  assert_null(cli_open(AF_INET, p_drain, 0)); /* nobody listens */
  cli_close(idle);
  cli_close(busy);
}

static void stats_noop(void *a) {}

static void test_emfile_backoff(void **state) {
  http_stats_t before = stats_of(g_main);
  int logged = fx_log_contains("pausing accepts", NULL);
  struct rlimit old;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  int n = dup(0); /* the lowest free descriptor number: a limit there leaves none */
  assert_true(n > 0);
  close(n);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) { /* the client, with its own descriptor table */
    usleep(100000);
    cli_t *c = open4(p_main);
    resp_t r;
    int ok = cli_sendstr(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n") == 0 &&
             cli_read_response(c, &r, 5000) == 200;
    _exit(ok ? 0 : 1);
  }
  /* no descriptor left in the server's process: accept fails with EMFILE */
  struct rlimit low = {.rlim_cur = (rlim_t)n, .rlim_max = old.rlim_max};
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  usleep(600000);
  getrusage(RUSAGE_SELF, &ru1);
  on_loop(stats_noop, NULL);
  http_stats_t mid = stats_of(g_main);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
  double cpu_ms = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1e3 +
                  (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e3 +
                  (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e3 +
                  (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e3;
  /* it backed off (a few tries, not a spin) and serves the client once it can */
  assert_true(mid.accept_errors > before.accept_errors);
  assert_true(mid.accept_errors - before.accept_errors < 20);
  if (cpu_ms > 300) fail_msg("%.0f ms of CPU in 600 ms: accept is spinning", cpu_ms);
  /* one warning a second at most, not one per 100 ms try */
  assert_int_equal(fx_log_contains("pausing accepts", NULL) - logged, 1);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_get_basic),
      cmocka_unit_test(test_post_content_length),
      cmocka_unit_test(test_post_chunked),
      cmocka_unit_test(test_headers_and_query),
      cmocka_unit_test(test_host_rules_400),
      cmocka_unit_test(test_keepalive_reuse),
      cmocka_unit_test(test_pipelined_two),
      cmocka_unit_test(test_pipelined_three_slow_first),
      cmocka_unit_test(test_pipelined_after_sse),
      cmocka_unit_test(test_http10_closes),
      cmocka_unit_test(test_connection_close_header),
      cmocka_unit_test(test_limit_header_bytes_431),
      cmocka_unit_test(test_limit_header_count_431),
      cmocka_unit_test(test_limit_url_414),
      cmocka_unit_test(test_limit_body_cl_413_before_body),
      cmocka_unit_test(test_limit_body_chunked_413),
      cmocka_unit_test(test_chunk_size_past_limit_413),
      cmocka_unit_test(test_cl_and_te_400),
      cmocka_unit_test(test_duplicate_cl_400),
      cmocka_unit_test(test_garbage_request_line_400),
      cmocka_unit_test(test_bad_chunk_size_400),
      cmocka_unit_test(test_chunk_data_without_crlf_400),
      cmocka_unit_test(test_space_before_colon_400),
      cmocka_unit_test(test_unsupported_te_501),
      cmocka_unit_test(test_expect_100_continue),
      cmocka_unit_test(test_slowloris_header_timeout_408),
      cmocka_unit_test(test_small_request_pause_served),
      cmocka_unit_test(test_header_timeout_408),
      cmocka_unit_test(test_body_timeout_408),
      cmocka_unit_test(test_idle_keepalive_closed),
      cmocka_unit_test(test_max_connections),
      cmocka_unit_test(test_ipv6_loopback),
      cmocka_unit_test(test_stop_listening_drains),
      cmocka_unit_test(test_emfile_backoff),
      cmocka_unit_test(test_fd_count_stable_1000),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
