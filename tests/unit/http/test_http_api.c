/* test_http_api.c — what handlers see over real sockets: SSE, cancellation (disconnect,
 * request timeout, slow client), routing errors in OpenAI's shape, API keys, IPv6. */
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
#include <sys/socket.h>
#include <unistd.h>

static void test_request_timeout_cancels(void **state) {
  int before = atomic_load(&g_never_cancels);
  int fin = atomic_load(&g_finished_after_cancel);
  cli_t *c = open4(p_main);
  double t0 = now_ms();
  assert_int_equal(cli_sendstr(c, "GET /never HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 408);
  double ms = now_ms() - t0;
  assert_true(ms >= 900 && ms < 2500);
  expect_error(&r, 408, "timeout_error");
  resp_free(&r);
  wait_for(&g_never_cancels, before + 1, 1000);
  assert_int_equal(atomic_load(&g_finished_after_cancel), fin + 1);
  assert_int_equal(cli_wait_closed(c, TMO), 1);
  cli_close(c);
}

static void test_sse_request_timeout_error_event(void **state) {
  /* a stream longer than request_timeout_s ends with an error event */
  cli_t *c = open4(p_main);
  assert_int_equal(cli_sendstr(c, "GET /sse?n=1000&ms=100 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 200);
  assert_non_null(strstr(r.body, "data: {\"i\":0}\n\n"));
  assert_non_null(strstr(r.body, "data: {\"error\":{\"message\":\"Request timed out\""));
  assert_null(strstr(r.body, "[DONE]"));
  resp_free(&r);
  cli_close(c);
}

/* ---- SSE ---------------------------------------------------------------------------------- */

static void test_sse_events_one_at_a_time(void **state) {
  cli_t *c = open4(p_main);
  assert_int_equal(cli_sendstr(c, "GET /sse?n=4&ms=60 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  resp_t r;
  assert_int_equal(cli_read_head(c, &r, TMO), 200);
  assert_string_equal(resp_header(&r, "Content-Type"), "text/event-stream");
  assert_string_equal(resp_header(&r, "Cache-Control"), "no-cache");
  assert_string_equal(resp_header(&r, "Transfer-Encoding"), "chunked");
  double last = now_ms();
  for (int i = 0; i < 4; i++) {
    char *d;
    size_t n;
    assert_int_equal(cli_read_chunk(c, &d, &n, TMO), 1);
    char want[64];
    snprintf(want, sizeof want, "data: {\"i\":%d}\n\n", i);
    assert_string_equal(d, want);
    free(d);
    /* each event came alone, as it was sent: nothing of the next one yet */
    assert_int_equal(cli_buffered(c), 0);
    double t = now_ms();
    if (i > 0) assert_true(t - last >= 30);
    last = t;
  }
  char *d;
  size_t n;
  assert_int_equal(cli_read_chunk(c, &d, &n, TMO), 1);
  assert_string_equal(d, "data: [DONE]\n\n");
  free(d);
  assert_int_equal(cli_read_chunk(c, &d, &n, TMO), 0);
  /* keep-alive after a stream */
  assert_int_equal(cli_sendstr(c, "GET /echo?after=sse HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  read_echo_query(c, "after=sse");
  cli_close(c);
}

static void test_sse_http10(void **state) {
  cli_t *c = open4(p_main);
  assert_int_equal(cli_sendstr(c, "GET /sse?n=2&ms=10 HTTP/1.0\r\n\r\n"), 0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 200); /* until close: no chunking */
  assert_null(resp_header(&r, "Transfer-Encoding"));
  assert_string_equal(r.body, "data: {\"i\":0}\n\ndata: {\"i\":1}\n\ndata: [DONE]\n\n");
  resp_free(&r);
  cli_close(c);
}

static void test_sse_disconnect_cancels_once(void **state) {
  int before = atomic_load(&g_sse_cancels);
  int fin = atomic_load(&g_finished_after_cancel);
  cli_t *c = open4(p_main);
  assert_int_equal(cli_sendstr(c, "GET /sse?n=100000&ms=5 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  resp_t r;
  assert_int_equal(cli_read_head(c, &r, TMO), 200);
  char *d;
  size_t n;
  assert_int_equal(cli_read_chunk(c, &d, &n, TMO), 1);
  free(d);
  cli_close(c);
  wait_for(&g_sse_cancels, before + 1, TMO);
  usleep(200000); /* no second call */
  assert_int_equal(atomic_load(&g_sse_cancels), before + 1);
  assert_int_equal(atomic_load(&g_finished_after_cancel), fin + 1);
}

static void test_async_disconnect_cancels(void **state) {
  int before = atomic_load(&g_slow_cancels);
  int fin = atomic_load(&g_finished_after_cancel);
  cli_t *c = open4(p_main);
  assert_int_equal(cli_sendstr(c, "GET /slow?ms=300 HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  usleep(50000);
  cli_close(c);
  wait_for(&g_slow_cancels, before + 1, TMO);
  /* the handler's later answer is a no-op that only releases the request */
  wait_for(&g_finished_after_cancel, fin + 1, TMO);
}

static void test_sse_slow_client_dropped(void **state) {
  http_stats_t before = stats_of(g_main);
  int cancels = atomic_load(&g_flood_cancels);
  cli_t *c = cli_open(AF_INET, p_main, 4096);
  assert_non_null(c);
  assert_int_equal(cli_sendstr(c, "GET /flood HTTP/1.1\r\nHost: x\r\n\r\n"), 0);
  /* never read: the server's queue passes max_sse_buffer_bytes and it gives up */
  wait_for(&g_flood_cancels, cancels + 1, 10000);
  assert_int_equal(stats_of(g_main).slow_client_drops, before.slow_client_drops + 1);
  resp_t r; /* and goes on serving others */
  assert_int_equal(request(p_main, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 200);
  resp_free(&r);
  cli_close(c);
}

/* ---- routing, errors, auth ------------------------------------------------------------ */

static void test_not_found_404(void **state) {
  resp_t r;
  assert_int_equal(request(p_main, "GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n", &r), 404);
  const char *msg = expect_error(&r, 404, "not_found_error");
  assert_non_null(strstr(msg, "/v1/nothing"));
  assert_string_equal(resp_header(&r, "Connection"), "keep-alive");
  resp_free(&r);
}

static void test_method_405_allow(void **state) {
  resp_t r;
  assert_int_equal(request(p_main, "DELETE /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r), 405);
  expect_error(&r, 405, "invalid_request_error");
  assert_string_equal(resp_header(&r, "Allow"), "GET, HEAD, POST");
  resp_free(&r);
}

static void test_error_body_then_keepalive(void **state) {
  /* a rejected POST body is read and dropped; the connection stays usable */
  cli_t *c = open4(p_main);
  assert_int_equal(cli_sendstr(c, "POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                                  "GET /echo?i=after HTTP/1.1\r\nHost: x\r\n\r\n"),
                   0);
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 404);
  resp_free(&r);
  read_echo_query(c, "i=after");
  cli_close(c);
}

static void test_429_retry_after(void **state) {
  resp_t r;
  assert_int_equal(request(p_main, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n", &r), 429);
  const char *msg = expect_error(&r, 429, "rate_limit_error");
  assert_string_equal(msg, "Queue is full (7 waiting)");
  assert_string_equal(resp_header(&r, "Retry-After"), "1");
  cJSON *j = json_of(&r);
  assert_string_equal(jstr(j, "error", "param"), "model");
  cJSON_Delete(j);
  resp_free(&r);
}

static void test_auth_missing_401(void **state) {
  resp_t r;
  assert_int_equal(request(p_auth, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r), 401);
  expect_error(&r, 401, "authentication_error");
  assert_string_equal(resp_header(&r, "WWW-Authenticate"), "Bearer");
  resp_free(&r);
}

static void test_auth_wrong_401(void **state) {
  const char *bad[] = {"Bearer sk-test-2", "Bearer sk-test-",     "Bearer sk-test-11",
                       "Basic sk-test-1",  "Bearer sk-commented", "Bearer sk-other-22x"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char raw[256];
    snprintf(raw, sizeof raw, "GET /echo HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n\r\n", bad[i]);
    resp_t r;
    assert_int_equal(request(p_auth, raw, &r), 401);
    const char *msg = expect_error(&r, 401, "authentication_error");
    assert_string_equal(msg, "Incorrect API key provided");
    resp_free(&r);
  }
}

static void test_auth_right_200(void **state) {
  resp_t r;
  assert_int_equal(
      request(p_auth, "GET /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-test-1\r\n\r\n",
              &r),
      200);
  resp_free(&r);
  assert_int_equal(
      request(p_auth,
              "GET /echo HTTP/1.1\r\nHost: x\r\nauthorization: bearer   sk-other-22\r\n\r\n", &r),
      200);
  resp_free(&r);
}

static void test_auth_public_route(void **state) {
  resp_t r;
  assert_int_equal(request(p_auth, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r), 200);
  assert_string_equal(r.body, "ok");
  resp_free(&r);
}

static void test_access_log(void **state) {
  resp_t r;
  assert_int_equal(request(p_main, "GET /echo?access=log HTTP/1.1\r\nHost: x\r\n\r\n", &r), 200);
  char want[64];
  /* "[<request id>] http GET /echo 200 <bytes> bytes <ms> ms 127.0.0.1:<port>" */
  snprintf(want, sizeof want, "[%s] http GET /echo 200 ", resp_header(&r, "X-Request-Id"));
  char bytes[64];
  snprintf(bytes, sizeof bytes, " %zu bytes ", strlen(r.head) + r.body_len);
  resp_free(&r);
  double end = now_ms() + TMO;
  while (!fx_log_contains(want, bytes) && now_ms() < end)
    usleep(2000);
  if (!fx_log_contains(want, bytes)) fail_msg("no access log line '%s' with '%s'", want, bytes);
  assert_true(fx_log_contains(want, " ms 127.0.0.1:"));
}

typedef struct reload_job {
  int rc;
  size_t nkeys;
} reload_job;
static void reload_fn(void *a) {
  reload_job *j = a;
  j->rc = http_auth_reload(g_auth);
  j->nkeys = http_auth_key_count(g_auth);
}

static void write_keys(const char *text) {
  FILE *f = fopen(g_keys_path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_auth_reload(void **state) {
  resp_t r;
  const char *old_key = "GET /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-test-1\r\n\r\n";
  const char *new_key =
      "GET /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-rotated-3\r\n\r\n";
  write_keys("sk-rotated-3\n");
  reload_job j;
  on_loop(reload_fn, &j);
  assert_int_equal(j.rc, 0);
  assert_int_equal(j.nkeys, 1);
  assert_int_equal(request(p_auth, new_key, &r), 200);
  resp_free(&r);
  assert_int_equal(request(p_auth, old_key, &r), 401);
  resp_free(&r);
  /* a failed reload keeps the keys in force */
  unlink(g_keys_path);
  on_loop(reload_fn, &j);
  assert_int_equal(j.rc, NS_ENOENT);
  assert_int_equal(j.nkeys, 1);
  assert_int_equal(request(p_auth, new_key, &r), 200);
  resp_free(&r);
  write_keys("sk-test-1\nsk-other-22\n");
  on_loop(reload_fn, &j);
  assert_int_equal(j.rc, 0);
}

static void test_head_request(void **state) {
  /* HEAD is answered by the GET handler (RFC 9110 9.1): its status and length, no body,
   * and the next response on the connection is intact */
  cli_t *c = open4(p_main);
  assert_int_equal(
      cli_sendstr(
          c, "HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?i=h HTTP/1.1\r\nHost: x\r\n\r\n"),
      0);
  resp_t r;
  assert_int_equal(cli_read_head(c, &r, TMO), 200);
  assert_int_equal(atoi(resp_header(&r, "Content-Length")), 2); /* GET's "ok" */
  read_echo_query(c, "i=h");
  cli_close(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_request_timeout_cancels),
      cmocka_unit_test(test_sse_request_timeout_error_event),
      cmocka_unit_test(test_sse_events_one_at_a_time),
      cmocka_unit_test(test_sse_http10),
      cmocka_unit_test(test_sse_disconnect_cancels_once),
      cmocka_unit_test(test_async_disconnect_cancels),
      cmocka_unit_test(test_sse_slow_client_dropped),
      cmocka_unit_test(test_not_found_404),
      cmocka_unit_test(test_method_405_allow),
      cmocka_unit_test(test_error_body_then_keepalive),
      cmocka_unit_test(test_429_retry_after),
      cmocka_unit_test(test_auth_missing_401),
      cmocka_unit_test(test_auth_wrong_401),
      cmocka_unit_test(test_auth_right_200),
      cmocka_unit_test(test_auth_public_route),
      cmocka_unit_test(test_head_request),
      cmocka_unit_test(test_access_log),
      cmocka_unit_test(test_auth_reload),
  };
  return cmocka_run_group_tests(tests, fx_setup, fx_teardown);
}
