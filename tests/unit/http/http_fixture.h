/* http_fixture.h — shared by the socket test files: servers on a loop thread (fx_setup /
 * fx_teardown as the cmocka group fixture), their routes, counters and client helpers.
 *
 * Servers (all on port 0; limits: headers 2048 bytes / 16 fields, URL 256, body 4096,
 * keep-alive 1 s, request timeout 1 s, SSE buffer 16 KiB):
 *   g_main  header/body timeout 5 s, min_recv_rate_bps 200
 *   g_small max_connections 3
 *   g_auth  API keys sk-test-1 and sk-other-22 (/health public)
 *   g_slow  header/body timeout 1 s, no receive-rate rule
 *   g_drain for the drain test
 *   g_v6    on ::1 (NULL when the host has no IPv6 loopback)
 * Routes: GET/POST /echo (JSON of the request), GET /health (public, a probe route, "ok"),
 *   /slow?ms= (answers from a timer), /sse?n=&ms= (events {"i":k} then [DONE]),
 *   /flood (4 KiB events until dropped), /never (no answer), /busy (429). */
#ifndef HTTP_FIXTURE_H
#define HTTP_FIXTURE_H

#include "http.h"
#include "http_cli.h"
#include "ns_err.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>

#define TMO 3000 /* ms: the longest any single wait in the tests may take */

extern http_server_t *g_main, *g_small, *g_auth, *g_slow, *g_drain, *g_v6;
extern int p_main, p_small, p_auth, p_slow, p_drain, p_v6;
/* cancel hooks run, per route; finishing calls that came after a cancel (NS_ECANCELED) */
extern atomic_int g_sse_cancels, g_flood_cancels, g_never_cancels, g_slow_cancels;
extern atomic_int g_finished_after_cancel;

int fx_setup(void **state);
int fx_teardown(void **state);
/* Run fn(arg) on the loop thread and wait for it. */
void on_loop(void (*fn)(void *), void *arg);
http_stats_t stats_of(http_server_t *s);

cli_t *open4(int port);
/* One request on a fresh connection; returns the status, r holds the response. */
int request(int port, const char *raw, resp_t *r);
cJSON *json_of(const resp_t *r);
const char *jstr(cJSON *o, const char *a, const char *b);
/* The body is OpenAI's error shape with this type; returns the message (static copy). */
const char *expect_error(const resp_t *r, int status, const char *type);
/* Read a /echo response and check its query. */
void read_echo_query(cli_t *c, const char *want_query);
void wait_for(atomic_int *v, int want, int timeout_ms);
int count_fds(void);
/* How many lines of the server log hold a (and b, unless NULL). */
int fx_log_contains(const char *a, const char *b);
extern char g_keys_path[64]; /* g_auth's keys file */

#endif
