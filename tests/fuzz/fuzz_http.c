/* fuzz_http.c — arbitrary bytes into one HTTP connection's parser (no socket): requests,
 * pipelining, limits, errors, routes answering at once, streaming and holding requests. */
#include "http.h"
#include "ns_log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uv_loop_t g_loop;
static http_server_t *g_srv;

static void h_echo(http_req_t *req, void *ud) {
  size_t n;
  const char *b = http_req_body(req, &n);
  if (b[n] != '\0') abort(); /* the body is NUL-terminated */
  http_req_header(req, "content-type");
  http_respond(req, 200, "text/plain", b, n, NULL);
}

static void h_sse(http_req_t *req, void *ud) {
  size_t n;
  const char *b = http_req_body(req, &n);
  http_sse_begin(req);
  http_sse_send(req, b, n);
  http_sse_send(req, http_req_query(req), strlen(http_req_query(req)));
  http_sse_end(req, 1);
}

static void hold_cancel(http_req_t *req, void *ud) {
  http_error(req, 500, NULL, "cancelled %s", http_req_path(req));
}

static void h_hold(http_req_t *req, void *ud) {
  http_req_set_cancel(req, hold_cancel, NULL);
}

static void h_err(http_req_t *req, void *ud) {
  http_error(req, 503, "p", "%s", http_req_query(req));
}

static void init(void) {
  ns_log_configure(NS_LOG_OFF, NS_LOG_TEXT);
  uv_loop_init(&g_loop);
  cfg_t c;
  cfg_init(&c);
  c.server.max_header_bytes = 1024;
  c.server.max_headers = 8;
  c.server.max_url_bytes = 128;
  c.server.max_body_bytes = 2048;
  if (http_server_create(&g_loop, &c, &g_srv) != 0) abort();
  http_route_add(g_srv, "GET", "/", h_echo, NULL, 0);
  http_route_add(g_srv, "POST", "/", h_echo, NULL, 0);
  http_route_add(g_srv, "POST", "/s", h_sse, NULL, 0);
  http_route_add(g_srv, "GET", "/h", h_hold, NULL, 0);
  http_route_add(g_srv, "GET", "/e", h_err, NULL, 0);
}

/* First byte: how to split the rest into reads (1..256 bytes, or all at once). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_srv) init();
  if (size == 0) return 0;
  size_t piece = data[0] ? data[0] : size;
  data++, size--;
  http_conn_t *c;
  if (http__test_conn_new(g_srv, &c) != 0) return 0;
  for (size_t i = 0; i < size; i += piece)
    if (http__test_conn_feed(c, (const char *)data + i, size - i < piece ? size - i : piece)) break;
  size_t n;
  const char *out = http__test_conn_output(c, &n);
  /* whatever came in, what goes out is whole HTTP/1.1 responses */
  if (n && (n < 9 || memcmp(out, "HTTP/1.1 ", 9) != 0)) abort();
  http__test_conn_free(c);
  return 0;
}
