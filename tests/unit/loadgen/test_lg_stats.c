/* test_lg_stats.c — nanoserve-loadgen's numbers and parsers without a network: percentiles
 * against numpy's values, the arrival-gap distributions' moments over 100k seeded draws,
 * the TPOT formula, length draws, the SSE framing, --url parsing and request bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lg.h"
#include "lg_sse.h"
#include "lg_stats.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NEAR(a, b, tol)                                                                            \
  do {                                                                                             \
    double a_ = (a), b_ = (b);                                                                     \
    if (fabs(a_ - b_) > (tol))                                                                     \
      fail_msg("%s = %.9g, expected %.9g (+-%g)", #a, a_, b_, (double)(tol));                      \
  } while (0)

/* ---- percentiles: expected values are numpy.percentile's (linear interpolation) ------------ */

static void test_percentiles(void **state) {
  (void)state;
  double v[100];
  for (int i = 0; i < 100; i++)
    v[i] = (double)((i * 37) % 100 + 1); /* 1..100, shuffled */
  lg_summary s;
  lg_summarize(v, 100, &s);
  assert_int_equal(s.n, 100);
  NEAR(s.min, 1, 0);
  NEAR(s.max, 100, 0);
  NEAR(s.mean, 50.5, 1e-12);
  NEAR(s.p50, 50.5, 1e-12);
  NEAR(s.p90, 90.1, 1e-9);
  NEAR(s.p95, 95.05, 1e-9);
  NEAR(s.p99, 99.01, 1e-9);
  NEAR(s.std, sqrt((100.0 * 100 - 1) / 12), 1e-9); /* population std of 1..n */

  double two[] = {10, 0};
  lg_summarize(two, 2, &s);
  NEAR(s.p50, 5, 0);
  NEAR(s.p90, 9, 1e-12);
  NEAR(s.p99, 9.9, 1e-12);

  double one[] = {7};
  lg_summarize(one, 1, &s);
  NEAR(s.p50, 7, 0);
  NEAR(s.p99, 7, 0);
  NEAR(s.std, 0, 0);

  double skew[] = {1, 2, 3, 4, 1000};
  lg_summarize(skew, 5, &s);
  NEAR(s.p50, 3, 0);
  NEAR(s.p90, 601.6, 1e-9); /* 4 + 0.6 * 996 */
  NEAR(s.mean, 202, 1e-12);

  lg_summarize(NULL, 0, &s);
  assert_int_equal(s.n, 0);
  NEAR(s.p99, 0, 0);
}

/* ---- arrival gaps ------------------------------------------------------------------------ */

#define DRAWS 100000

static void moments(double rate, double burst, uint64_t seed, double *mean, double *cv2) {
  ns_rng g;
  ns_rng_seed(&g, seed);
  double sum = 0, sq = 0;
  for (int i = 0; i < DRAWS; i++) {
    double x = lg_gap_s(&g, rate, burst);
    assert_true(x >= 0);
    sum += x;
    sq += x * x;
  }
  *mean = sum / DRAWS;
  double var = sq / DRAWS - *mean * *mean;
  *cv2 = var / (*mean * *mean);
}

static void test_poisson_gaps(void **state) {
  (void)state;
  double mean, cv2;
  moments(50, 1, 42, &mean, &cv2);
  /* exponential: mean 1/rate, variance mean^2. The sample mean's sd is 0.3% at 100k draws */
  NEAR(mean, 0.02, 0.02 * 0.01);
  NEAR(cv2, 1, 0.03);
  /* memorylessness: P(gap > 1/rate) = e^-1 */
  ns_rng g;
  ns_rng_seed(&g, 7);
  int over = 0;
  for (int i = 0; i < DRAWS; i++)
    over += lg_gap_s(&g, 50, 1) > 0.02;
  NEAR((double)over / DRAWS, exp(-1), 0.005);
}

static void test_gamma_gaps(void **state) {
  (void)state;
  const double shapes[] = {0.25, 0.5, 2, 4, 10};
  for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
    double mean, cv2;
    moments(10, shapes[k], 1000 + k, &mean, &cv2);
    /* mean 1/rate whatever the burstiness; squared CV 1/burstiness */
    NEAR(mean, 0.1, 0.1 * 0.015);
    NEAR(cv2, 1 / shapes[k], 0.06 / shapes[k]);
  }
  /* the same seed, the same draws */
  ns_rng a, b;
  ns_rng_seed(&a, 99);
  ns_rng_seed(&b, 99);
  for (int i = 0; i < 1000; i++)
    assert_true(lg_gap_s(&a, 3, 0.7) == lg_gap_s(&b, 3, 0.7));
}

static void test_len_draw(void **state) {
  (void)state;
  ns_rng g;
  ns_rng_seed(&g, 3);
  for (int i = 0; i < 100; i++)
    assert_int_equal(lg_len_draw(&g, LG_LEN_FIXED, 128, 0.5), 128);
  double sum = 0, sq = 0;
  int lo = 1 << 30, hi = 0;
  for (int i = 0; i < DRAWS; i++) {
    int x = lg_len_draw(&g, LG_LEN_UNIFORM, 200, 0.25);
    lo = x < lo ? x : lo;
    hi = x > hi ? x : hi;
    sum += x;
  }
  assert_int_equal(lo, 150);
  assert_int_equal(hi, 250);
  NEAR(sum / DRAWS, 200, 0.5);
  sum = 0;
  for (int i = 0; i < DRAWS; i++) {
    int x = lg_len_draw(&g, LG_LEN_NORMAL, 1000, 0.1);
    sum += x;
    sq += (double)x * x;
  }
  double m = sum / DRAWS;
  NEAR(m, 1000, 1.5);
  NEAR(sqrt(sq / DRAWS - m * m), 100, 2);
  for (int i = 0; i < 1000; i++)
    assert_true(lg_len_draw(&g, LG_LEN_NORMAL, 2, 1) >= 1);
}

static void test_tpot(void **state) {
  (void)state;
  /* 20 tokens: the first at 50 ms, then 19 more 10 ms apart: e2e 240 ms */
  NEAR(lg_tpot(240, 50, 20), 10, 1e-12);
  NEAR(lg_tpot(1050, 50, 101), 10, 1e-12);
  NEAR(lg_tpot(100, 50, 2), 50, 1e-12);
  NEAR(lg_tpot(100, 50, 1), -1, 0); /* undefined below two tokens */
  NEAR(lg_tpot(100, 50, 0), -1, 0);
}

/* ---- SSE framing ------------------------------------------------------------------------- */

typedef struct {
  char ev[8][64];
  int n;
} events;

static int collect(void *ud, const char *data, size_t len) {
  events *e = ud;
  assert_true(e->n < 8);
  assert_int_equal(strlen(data), len);
  snprintf(e->ev[e->n++], 64, "%s", data);
  return 0;
}

static void test_sse(void **state) {
  (void)state;
  const char text[] = ": comment\r\ndata: {\"a\":1}\r\n\r\ndata:x\ndata: y\nid: 3\n\n"
                      "event: e\n\ndata: [DONE]\r\r";
  /* every split point: events are the same whatever the read boundaries */
  for (size_t cut = 0; cut <= sizeof text - 1; cut++) {
    lg_sse s;
    events e = {.n = 0};
    lg_sse_init(&s);
    assert_int_equal(lg_sse_feed(&s, text, cut, collect, &e), 0);
    assert_int_equal(lg_sse_feed(&s, text + cut, sizeof text - 1 - cut, collect, &e), 0);
    assert_int_equal(e.n, 3);
    assert_string_equal(e.ev[0], "{\"a\":1}");
    assert_string_equal(e.ev[1], "x\ny");
    assert_string_equal(e.ev[2], "[DONE]");
    assert_int_equal(lg_sse_pending(&s), 0);
    lg_sse_free(&s);
  }
  /* an event without its blank line is pending, not dispatched */
  lg_sse s;
  events e = {.n = 0};
  lg_sse_init(&s);
  assert_int_equal(lg_sse_feed(&s, "data: half\n", 11, collect, &e), 0);
  assert_int_equal(e.n, 0);
  assert_true(lg_sse_pending(&s) > 0);
  lg_sse_free(&s);
}

/* ---- --url ------------------------------------------------------------------------------- */

static void test_url(void **state) {
  (void)state;
  lg_opts o;
  char err[128];
  memset(&o, 0, sizeof o);
  assert_int_equal(lg_url_parse("http://127.0.0.1:8080", &o, err, sizeof err), 0);
  assert_string_equal(o.host, "127.0.0.1");
  assert_int_equal(o.port, 8080);
  assert_string_equal(o.base, "");
  assert_string_equal(o.authority, "127.0.0.1:8080");
  assert_int_equal(lg_url_parse("http://[::1]:9/v1/", &o, err, sizeof err), 0);
  assert_string_equal(o.host, "::1");
  assert_string_equal(o.authority, "[::1]:9");
  assert_string_equal(o.base, "");
  assert_int_equal(lg_url_parse("http://example.com/api/", &o, err, sizeof err), 0);
  assert_int_equal(o.port, 80);
  assert_string_equal(o.base, "/api");
  const char *badv[] = {"",           "127.0.0.1:8080", "https://h",   "http://",    "http://:80",
                        "http://h:0", "http://h:65536", "http://h:8x", "http://h x", "ftp://h",
                        "http://h?q", "http://u@h",     "http://[::1", "http://h:"};
  for (size_t k = 0; k < sizeof badv / sizeof *badv; k++) {
    err[0] = '\0';
    if (lg_url_parse(badv[k], &o, err, sizeof err) == 0) fail_msg("accepted '%s'", badv[k]);
    assert_true(err[0] != '\0');
  }
}

/* ---- bodies ------------------------------------------------------------------------------ */

static void test_bodies(void **state) {
  (void)state;
  lg_opts o;
  char *argv[] = {"lg",           "--input-len", "50", "--output-len", "7",
                  "--ignore-eos", "--seed",      "5",  "--vocab-min",  "300",
                  "--vocab-max",  "310",         NULL};
  assert_int_equal(lg_opts_parse(12, argv, &o), 0);
  lg_work *w;
  char err[128];
  assert_int_equal(lg_work_open(&o, &w, err, sizeof err), 0);
  int pt, mt, pt2, mt2;
  char *a = lg_work_body(w, 3, "m", &pt, &mt), *b = lg_work_body(w, 3, "m", &pt2, &mt2);
  char *c = lg_work_body(w, 4, "m", &pt2, &mt2);
  assert_string_equal(a, b); /* deterministic in (seed, i) */
  assert_string_not_equal(a, c);
  assert_int_equal(pt, 50);
  assert_int_equal(mt, 7);
  cJSON *j = cJSON_Parse(a);
  cJSON *p = cJSON_GetObjectItem(j, "prompt");
  assert_int_equal(cJSON_GetArraySize(p), 50);
  cJSON *id;
  cJSON_ArrayForEach(id, p) assert_true(id->valueint >= 300 && id->valueint < 310);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "ignore_eos")));
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "stream")));
  assert_true(
      cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "stream_options"), "include_usage")));
  assert_int_equal(cJSON_GetObjectItem(j, "max_tokens")->valueint, 7);
  assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "m");
  cJSON_Delete(j);
  free(a), free(b), free(c);
  lg_work_free(w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_percentiles), cmocka_unit_test(test_poisson_gaps),
      cmocka_unit_test(test_gamma_gaps),  cmocka_unit_test(test_len_draw),
      cmocka_unit_test(test_tpot),        cmocka_unit_test(test_sse),
      cmocka_unit_test(test_url),         cmocka_unit_test(test_bodies),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
