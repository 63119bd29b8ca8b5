/* http_fixture.c — the servers of the socket tests: a loop thread running five servers on
 * port 0 (plus one on ::1) with test routes, and helpers shared by the test files. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "http_fixture.h"

#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the loop thread and its servers ----------------------------------------------------- */

static uv_loop_t g_loop;
static uv_thread_t g_thread;
static uv_async_t g_async;
static uv_mutex_t g_mu;
static uv_cond_t g_cv;
static void (*g_job)(void *);
static void *g_job_arg;
static bool g_job_done, g_stop;

http_server_t *g_main, *g_small, *g_auth, *g_slow, *g_drain, *g_v6;
int p_main, p_small, p_auth, p_slow, p_drain, p_v6;
char g_keys_path[64];
static char g_log_path[64];
static int g_log_fd = -1;

int fx_log_contains(const char *a, const char *b) {
  FILE *f = fopen(g_log_path, "r");
  char line[4096];
  int found = 0;
  while (f && fgets(line, sizeof line, f))
    found += strstr(line, a) && (!b || strstr(line, b));
  if (f) fclose(f);
  return found;
}

atomic_int g_sse_cancels, g_flood_cancels, g_never_cancels, g_slow_cancels;
atomic_int g_finished_after_cancel;

static void on_async(uv_async_t *a) {
  uv_mutex_lock(&g_mu);
  if (g_job) {
    g_job(g_job_arg);
    g_job = NULL;
    g_job_done = true;
    uv_cond_broadcast(&g_cv);
  }
  bool stop = g_stop;
  uv_mutex_unlock(&g_mu);
  if (stop) {
    http_server_t *all[] = {g_main, g_small, g_auth, g_slow, g_drain, g_v6};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
      if (all[i]) http_server_close(all[i], NULL, NULL);
    uv_close((uv_handle_t *)&g_async, NULL);
  }
}

/* Run fn(arg) on the loop thread and wait for it. */
void on_loop(void (*fn)(void *), void *arg) {
  uv_mutex_lock(&g_mu);
  g_job = fn;
  g_job_arg = arg;
  g_job_done = false;
  uv_async_send(&g_async);
  while (!g_job_done)
    uv_cond_wait(&g_cv, &g_mu);
  uv_mutex_unlock(&g_mu);
}

typedef struct stats_job {
  http_server_t *srv;
  http_stats_t st;
} stats_job;
static void stats_fn(void *a) {
  stats_job *j = a;
  http_server_stats(j->srv, &j->st);
}
http_stats_t stats_of(http_server_t *s) {
  stats_job j = {.srv = s};
  on_loop(stats_fn, &j);
  return j.st;
}

static void loop_main(void *arg) {
  uv_run(&g_loop, UV_RUN_DEFAULT);
}

/* ---- test routes (loop thread) ----------------------------------------------------------- */

static int query_int(http_req_t *req, const char *key, int def) {
  const char *q = http_req_query(req);
  size_t kl = strlen(key);
  for (const char *p = q; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL)
    if (strncmp(p, key, kl) == 0 && p[kl] == '=') return atoi(p + kl + 1);
  return def;
}

static void h_echo(http_req_t *req, void *ud) {
  cJSON *o = cJSON_CreateObject();
  size_t blen;
  const char *body = http_req_body(req, &blen);
  cJSON_AddStringToObject(o, "method", http_req_method(req));
  cJSON_AddStringToObject(o, "path", http_req_path(req));
  cJSON_AddStringToObject(o, "query", http_req_query(req));
  cJSON_AddStringToObject(o, "body", body);
  cJSON_AddNumberToObject(o, "body_len", (double)blen);
  cJSON_AddNumberToObject(o, "nul_terminated", body[blen] == '\0');
  cJSON_AddNumberToObject(o, "id", (double)http_req_id(req));
  cJSON_AddStringToObject(o, "peer", http_req_peer(req));
  const char *xt = http_req_header(req, "x-TEST-header");
  if (xt) cJSON_AddStringToObject(o, "x_test", xt);
  cJSON_AddNumberToObject(o, "nheaders", (double)http_req_header_count(req));
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  http_respond(req, 200, "application/json", s, strlen(s), "X-Extra: yes\r\n");
  free(s);
}

static void h_text(http_req_t *req, void *ud) {
  http_respond(req, 200, "text/plain", "ok", 2, NULL);
}

static void h_busy(http_req_t *req, void *ud) {
  http_error(req, 429, "model", "Queue is full (%d waiting)", 7);
}

/* a request answered later from a timer; the context outlives a cancellation */
typedef struct later {
  uv_timer_t t;
  http_req_t *req;
  atomic_int *cancels;
  int n, i, size;
  bool cancelled, finished;
} later;

static void later_closed(uv_handle_t *h) {
  free(h->data);
}

static void later_cancel(http_req_t *req, void *ud) {
  later *l = ud;
  l->cancelled = true;
  atomic_fetch_add(l->cancels, 1);
}

static void slow_fire(uv_timer_t *t) {
  later *l = t->data;
  /* after a cancel this only releases the request (a safe no-op write) */
  int rc = http_respond(l->req, 200, "text/plain", "slow", 4, NULL);
  if (l->cancelled && rc == NS_ECANCELED) atomic_fetch_add(&g_finished_after_cancel, 1);
  uv_close((uv_handle_t *)&l->t, later_closed);
}

static later *later_new(http_req_t *req, atomic_int *cancels) {
  later *l = calloc(1, sizeof *l);
  l->req = req;
  l->cancels = cancels;
  uv_timer_init(&g_loop, &l->t);
  l->t.data = l;
  http_req_set_cancel(req, later_cancel, l);
  return l;
}

static void h_slow(http_req_t *req, void *ud) {
  later *l = later_new(req, &g_slow_cancels);
  uv_timer_start(&l->t, slow_fire, (uint64_t)query_int(req, "ms", 200), 0);
}

/* /sse?n=N&ms=M: N events {"i":k}, one every M ms, then [DONE] */
static void sse_tick(uv_timer_t *t) {
  later *l = t->data;
  if (l->cancelled || l->i == l->n) {
    int rc = http_sse_end(l->req, 1);
    if (l->cancelled && rc == NS_ECANCELED) atomic_fetch_add(&g_finished_after_cancel, 1);
    uv_close((uv_handle_t *)&l->t, later_closed);
    return;
  }
  char ev[64];
  int n = snprintf(ev, sizeof ev, "{\"i\":%d}", l->i++);
  http_sse_send(l->req, ev, (size_t)n);
}

static void h_sse(http_req_t *req, void *ud) {
  later *l = later_new(req, &g_sse_cancels);
  l->n = query_int(req, "n", 3);
  uint64_t ms = (uint64_t)query_int(req, "ms", 20);
  http_sse_begin(req);
  uv_timer_start(&l->t, sse_tick, ms, ms);
}

/* /flood: big events as fast as the loop turns, until the server drops the client */
static void flood_cancel(http_req_t *req, void *ud) {
  later *l = ud;
  atomic_fetch_add(l->cancels, 1);
  http_sse_end(req, 0); /* finishing from inside the hook is allowed */
  l->finished = true;
  uv_close((uv_handle_t *)&l->t, later_closed);
}

static void flood_tick(uv_timer_t *t) {
  later *l = t->data;
  static char big[4096];
  memset(big, 'x', sizeof big);
  for (int k = 0; k < 8; k++)
    if (http_sse_send(l->req, big, sizeof big) == NS_ECANCELED) {
      uv_timer_stop(&l->t); /* stop sending; the hook comes */
      return;
    }
}

static void h_flood(http_req_t *req, void *ud) {
  later *l = calloc(1, sizeof *l);
  l->req = req;
  l->cancels = &g_flood_cancels;
  uv_timer_init(&g_loop, &l->t);
  l->t.data = l;
  http_req_set_cancel(req, flood_cancel, l);
  http_sse_begin(req);
  uv_timer_start(&l->t, flood_tick, 1, 1);
}

/* /never: no answer; the request timeout cancels it and the hook finishes it */
static void never_cancel(http_req_t *req, void *ud) {
  atomic_fetch_add(&g_never_cancels, 1);
  if (http_respond(req, 200, NULL, NULL, 0, NULL) == NS_ECANCELED)
    atomic_fetch_add(&g_finished_after_cancel, 1);
}

static void h_never(http_req_t *req, void *ud) {
  http_req_set_cancel(req, never_cancel, NULL);
}

static void add_routes(http_server_t *s, unsigned echo_flags) {
  assert_int_equal(http_route_add(s, "GET", "/echo", h_echo, NULL, echo_flags), 0);
  assert_int_equal(http_route_add(s, "POST", "/echo", h_echo, NULL, echo_flags), 0);
  assert_int_equal(
      http_route_add(s, "GET", "/health", h_text, NULL, HTTP_ROUTE_PUBLIC | HTTP_ROUTE_PROBE), 0);
  assert_int_equal(http_route_add(s, "GET", "/slow", h_slow, NULL, 0), 0);
  assert_int_equal(http_route_add(s, "GET", "/sse", h_sse, NULL, 0), 0);
  assert_int_equal(http_route_add(s, "GET", "/flood", h_flood, NULL, 0), 0);
  assert_int_equal(http_route_add(s, "GET", "/never", h_never, NULL, 0), 0);
  assert_int_equal(http_route_add(s, "GET", "/busy", h_busy, NULL, 0), 0);
  assert_int_equal(http_route_add(s, "GET", "/echo", h_echo, NULL, 0), NS_EINVAL); /* dup */
}

static void base_cfg(cfg_t *c) {
  cfg_init(c);
  c->server.host = "127.0.0.1";
  c->server.port = 0;
  c->server.max_connections = 64;
  c->server.max_header_bytes = 2048;
  c->server.max_headers = 16;
  c->server.max_url_bytes = 256;
  c->server.max_body_bytes = 4096;
  c->server.header_timeout_s = 5;
  c->server.body_timeout_s = 5;
  c->server.min_recv_rate_bps = 200;
  c->server.keepalive_timeout_s = 1;
  c->server.request_timeout_s = 1;
  c->server.max_sse_buffer_bytes = 16384;
}

static http_server_t *start(cfg_t *c, int *port, unsigned echo_flags) {
  http_server_t *s;
  assert_int_equal(http_server_create(&g_loop, c, &s), 0);
  add_routes(s, echo_flags);
  if (http_server_listen(s) != 0) {
    *port = 0;
    http_server_close(s, NULL, NULL);
    return NULL;
  }
  *port = http_server_port(s);
  assert_true(*port > 0);
  return s;
}

int fx_setup(void **state) {
  /* log lines (access log included) go to a file the tests can read */
  strcpy(g_log_path, "/tmp/ns_http_logXXXXXX");
  g_log_fd = mkstemp(g_log_path);
  assert_true(g_log_fd >= 0);
  ns_log_set_fd(g_log_fd);
  ns_log_configure(NS_LOG_INFO, NS_LOG_TEXT);
  strcpy(g_keys_path, "/tmp/ns_http_keysXXXXXX");
  int kfd = mkstemp(g_keys_path);
  assert_true(kfd >= 0);
  const char *keys = "# test keys\n\n  sk-test-1  \nsk-other-22\n#sk-commented\n";
  assert_int_equal(write(kfd, keys, strlen(keys)), (ssize_t)strlen(keys));
  close(kfd);

  assert_int_equal(uv_loop_init(&g_loop), 0);
  uv_async_init(&g_loop, &g_async, on_async);
  uv_mutex_init(&g_mu);
  uv_cond_init(&g_cv);
  cfg_t c;
  base_cfg(&c);
  g_main = start(&c, &p_main, HTTP_ROUTE_PUBLIC);
  base_cfg(&c);
  c.server.max_connections = 3;
  g_small = start(&c, &p_small, HTTP_ROUTE_PUBLIC);
  base_cfg(&c);
  c.server.api_keys_file = g_keys_path;
  g_auth = start(&c, &p_auth, 0);
  assert_int_equal(http_auth_key_count(g_auth), 2);
  base_cfg(&c); /* timeouts alone: no receive-rate rule */
  c.server.min_recv_rate_bps = 0;
  c.server.header_timeout_s = 1;
  c.server.body_timeout_s = 1;
  g_slow = start(&c, &p_slow, HTTP_ROUTE_PUBLIC);
  base_cfg(&c);
  g_drain = start(&c, &p_drain, HTTP_ROUTE_PUBLIC);
  base_cfg(&c);
  c.server.host = "::1";
  g_v6 = start(&c, &p_v6, HTTP_ROUTE_PUBLIC);
  assert_non_null(g_main);
  assert_int_equal(uv_thread_create(&g_thread, loop_main, NULL), 0);
  return 0;
}

int fx_teardown(void **state) {
  uv_mutex_lock(&g_mu);
  g_stop = true;
  uv_mutex_unlock(&g_mu);
  uv_async_send(&g_async);
  uv_thread_join(&g_thread);
  assert_int_equal(uv_loop_close(&g_loop), 0); /* every handle closed */
  uv_mutex_destroy(&g_mu);
  uv_cond_destroy(&g_cv);
  unlink(g_keys_path);
  ns_log_set_fd(2);
  close(g_log_fd);
  unlink(g_log_path);
  return 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */

cli_t *open4(int port) {
  cli_t *c = cli_open(AF_INET, port, 0);
  assert_non_null(c);
  return c;
}

/* One request on a fresh connection; returns the status, r holds the response. */
int request(int port, const char *raw, resp_t *r) {
  cli_t *c = open4(port);
  assert_int_equal(cli_sendstr(c, raw), 0);
  int st = cli_read_response(c, r, TMO);
  cli_close(c);
  return st;
}

cJSON *json_of(const resp_t *r) {
  cJSON *j = cJSON_ParseWithLength(r->body, r->body_len);
  if (!j) fail_msg("not JSON: %s", r->body);
  return j;
}

const char *jstr(cJSON *o, const char *a, const char *b) {
  cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
  if (b) x = cJSON_GetObjectItemCaseSensitive(x, b);
  if (!cJSON_IsString(x)) fail_msg("no string %s.%s", a, b ? b : "");
  return x->valuestring;
}

/* The error body is OpenAI's shape with this type; returns the message (static copy). */
const char *expect_error(const resp_t *r, int status, const char *type) {
  static char msg[512];
  assert_int_equal(r->status, status);
  const char *ct = resp_header(r, "Content-Type");
  assert_non_null(ct);
  assert_string_equal(ct, "application/json");
  cJSON *j = json_of(r);
  cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
  assert_non_null(e);
  assert_string_equal(jstr(j, "error", "type"), type);
  snprintf(msg, sizeof msg, "%s", jstr(j, "error", "message"));
  assert_non_null(cJSON_GetObjectItemCaseSensitive(e, "param"));
  assert_non_null(cJSON_GetObjectItemCaseSensitive(e, "code"));
  cJSON_Delete(j);
  return msg;
}

void wait_for(atomic_int *v, int want, int timeout_ms) {
  double end = now_ms() + timeout_ms;
  while (atomic_load(v) < want && now_ms() < end)
    usleep(2000);
  assert_int_equal(atomic_load(v), want);
}

int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the DIR's own fd */
}

void read_echo_query(cli_t *c, const char *want_query) {
  resp_t r;
  assert_int_equal(cli_read_response(c, &r, TMO), 200);
  cJSON *j = json_of(&r);
  assert_string_equal(jstr(j, "query", NULL), want_query);
  cJSON_Delete(j);
  resp_free(&r);
}
