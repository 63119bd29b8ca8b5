/* test_cfg.c — unit tests of the settings table, loader, --set, validation and dump.
 * The expected defaults and bounds are written out here from the spec, not read back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "cfg.h"
#include "ns_err.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ---- */

static const cfg_row *row(const char *name) {
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  for (size_t i = 0; i < n; i++)
    if (strcmp(rows[i].name, name) == 0) return &rows[i];
  fail_msg("no row '%s'", name);
  return NULL;
}

static void assert_contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) fail_msg("expected '%s' in:\n%s", needle, hay);
}

static int count_lines(const char *s) {
  int n = *s ? 1 : 0;
  for (; *s; s++)
    n += *s == '\n' && s[1] != '\0'; /* a final newline ends a line */
  return n;
}

/* Load json into a default cfg and expect NS_EINVAL naming every needle; the cfg must be
 * left as it was (loads are all-or-nothing). */
static void expect_load_error(const char *json, const char *needle1, const char *needle2) {
  cfg_t c;
  char err[4096];
  cfg_init(&c);
  char *before = cfg_dump_json(&c);
  int rc = cfg_load_json(&c, json, strlen(json), "t.json", err, sizeof err);
  if (rc != NS_EINVAL) fail_msg("load of %s returned %d, err '%s'", json, rc, err);
  assert_contains(err, needle1);
  if (needle2) assert_contains(err, needle2);
  assert_true(strncmp(err, "t.json", 6) == 0);
  char *after = cfg_dump_json(&c);
  assert_string_equal(before, after);
  free(before);
  free(after);
  cfg_free(&c);
}

static void expect_set_error(const char *assign, const char *needle1, const char *needle2) {
  cfg_t c;
  char err[1024];
  cfg_init(&c);
  char *before = cfg_dump_json(&c);
  int rc = cfg_set(&c, assign, err, sizeof err);
  if (rc != NS_EINVAL) fail_msg("cfg_set(%s) returned %d", assign, rc);
  assert_contains(err, needle1);
  if (needle2) assert_contains(err, needle2);
  char *after = cfg_dump_json(&c);
  assert_string_equal(before, after);
  free(before);
  free(after);
  cfg_free(&c);
}

static void load_ok(cfg_t *c, const char *json) {
  char err[4096];
  int rc = cfg_load_json(c, json, strlen(json), "t.json", err, sizeof err);
  if (rc != 0) fail_msg("load of %s failed (%d): %s", json, rc, err);
}

static void set_ok(cfg_t *c, const char *assign) {
  char err[1024];
  int rc = cfg_set(c, assign, err, sizeof err);
  if (rc != 0) fail_msg("cfg_set(%s) failed (%d): %s", assign, rc, err);
}

/* ---- the table against the spec ---- */

typedef struct spec {
  const char *name;
  cfg_type type;
  const char *def; /* as cfg dump writes it, strings without quotes */
  double lo, hi;   /* numbers only */
} spec;

static const spec specs[] = {
    {"server.host", CFG_STRING, "127.0.0.1", 0, 0},
    {"server.port", CFG_INT, "8080", 0, 65535},
    {"server.max_connections", CFG_INT, "1024", 1, 1000000},
    {"server.max_header_bytes", CFG_INT, "16384", 1024, 1048576},
    {"server.max_headers", CFG_INT, "64", 8, 1024},
    {"server.max_url_bytes", CFG_INT, "4096", 64, 65536},
    {"server.max_body_bytes", CFG_INT64, "4194304", 1024, 1073741824},
    {"server.header_timeout_s", CFG_DOUBLE, "10", 0.1, 3600},
    {"server.body_timeout_s", CFG_DOUBLE, "30", 0.1, 3600},
    {"server.min_recv_rate_bps", CFG_INT, "1024", 0, 1e9},
    {"server.keepalive_timeout_s", CFG_DOUBLE, "5", 0.1, 3600},
    {"server.send_timeout_s", CFG_DOUBLE, "60", 0.1, 3600},
    {"server.request_timeout_s", CFG_DOUBLE, "600", 1, 86400},
    {"server.max_sse_buffer_bytes", CFG_INT64, "1048576", 4096, 1073741824},
    {"server.drain_timeout_s", CFG_DOUBLE, "30", 0, 3600},
    {"server.api_keys_file", CFG_STRING, "", 0, 0},
    {"server.public_health", CFG_BOOL, "true", 0, 0},
    {"server.model_name", CFG_STRING, "", 0, 0},
    {"server.health_stall_s", CFG_DOUBLE, "30", 1, 86400},
    {"engine.model", CFG_STRING, "models/tiny", 0, 0},
    {"engine.backend", CFG_ENUM, "auto", 0, 0},
    {"engine.gpu_memory_fraction", CFG_DOUBLE, "0.9", 0.05, 0.99},
    {"engine.kv_page_tokens", CFG_INT, "16", 8, 256},
    {"engine.kv_cache_bytes", CFG_INT64, "0", 0, 1125899906842624.0},
    {"engine.cuda_gemm", CFG_ENUM, "pinned", 0, 0},
    {"engine.cuda_graphs", CFG_BOOL, "true", 0, 0},
    {"engine.cuda_graph_max_batch", CFG_INT, "0", 0, 1024},
    {"engine.max_batch", CFG_INT, "128", 1, 1024},
    {"engine.max_batch_tokens", CFG_INT, "4096", 16, 1048576},
    {"engine.prefill_stream", CFG_BOOL, "false", 0, 0},
    {"engine.max_seq_len", CFG_INT, "0", 0, 1048576},
    {"engine.cpu_threads", CFG_INT, "0", 0, 256},
    {"engine.chat_template", CFG_STRING, "", 0, 0},
    {"scheduler.max_queue", CFG_INT, "256", 0, 1000000},
    {"scheduler.queue_timeout_s", CFG_DOUBLE, "60", 0.1, 86400},
    {"scheduler.admit_growth", CFG_DOUBLE, "0", 0, 1},
    {"log.level", CFG_ENUM, "info", 0, 0},
    {"log.format", CFG_ENUM, "text", 0, 0},
};
#define NSPECS (sizeof specs / sizeof specs[0])

static void test_table_matches_spec(void **state) {
  (void)state;
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  assert_int_equal(n, NSPECS);
  for (size_t i = 0; i < NSPECS; i++) {
    const spec *s = &specs[i];
    const cfg_row *r = row(s->name);
    assert_int_equal(r->type, s->type);
    assert_non_null(r->help);
    assert_true(strlen(r->help) > 10);
    char buf[64];
    switch (r->type) {
    case CFG_INT:
    case CFG_INT64:
      snprintf(buf, sizeof buf, "%lld", (long long)r->def_i);
      assert_string_equal(buf, s->def);
      assert_true((double)r->min_i == s->lo && (double)r->max_i == s->hi);
      break;
    case CFG_DOUBLE:
      assert_true(r->def_d == strtod(s->def, NULL));
      assert_true(r->min_d == s->lo && r->max_d == s->hi);
      break;
    case CFG_BOOL: assert_string_equal(r->def_i ? "true" : "false", s->def); break;
    case CFG_STRING: assert_string_equal(r->def_s, s->def); break;
    case CFG_ENUM: {
      const char *name = NULL;
      for (size_t k = 0; r->names[k]; k++)
        if (r->values[k] == r->def_i) name = r->names[k];
      assert_non_null(name);
      assert_string_equal(name, s->def);
      break;
    }
    }
  }
  /* names unique */
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      assert_string_not_equal(rows[i].name, rows[j].name);
  /* specials */
  assert_true(row("engine.gpu_memory_fraction")->flags & CFG_MIN_EXCLUSIVE);
  assert_true(row("engine.kv_page_tokens")->flags & CFG_POW2);
  assert_true(row("server.host")->flags & CFG_NONEMPTY);
  assert_false(row("server.api_keys_file")->flags & CFG_NONEMPTY);
}

static void test_init_defaults(void **state) {
  (void)state;
  cfg_t c;
  memset(&c, 0x5a, sizeof c);
  cfg_init(&c);
  /* the fields themselves, from the spec */
  assert_string_equal(c.server.host, "127.0.0.1");
  assert_int_equal(c.server.port, 8080);
  assert_int_equal(c.server.max_connections, 1024);
  assert_int_equal(c.server.max_header_bytes, 16384);
  assert_int_equal(c.server.max_headers, 64);
  assert_int_equal(c.server.max_url_bytes, 4096);
  assert_int_equal(c.server.max_body_bytes, 4 << 20);
  assert_true(c.server.header_timeout_s == 10);
  assert_true(c.server.body_timeout_s == 30);
  assert_int_equal(c.server.min_recv_rate_bps, 1024);
  assert_true(c.server.keepalive_timeout_s == 5);
  assert_true(c.server.request_timeout_s == 600);
  assert_int_equal(c.server.max_sse_buffer_bytes, 1 << 20);
  assert_true(c.server.drain_timeout_s == 30);
  assert_string_equal(c.server.api_keys_file, "");
  assert_true(c.server.public_health);
  assert_string_equal(c.engine.model, "models/tiny");
  assert_int_equal(c.engine.backend, CFG_BACKEND_AUTO);
  assert_true(c.engine.gpu_memory_fraction == 0.90);
  assert_int_equal(c.engine.kv_page_tokens, 16);
  assert_int_equal(c.engine.max_batch, 128);
  assert_int_equal(c.engine.max_batch_tokens, 4096);
  assert_int_equal(c.engine.max_seq_len, 0);
  assert_int_equal(c.engine.cpu_threads, 0);
  assert_string_equal(c.engine.chat_template, "");
  assert_int_equal(c.scheduler.max_queue, 256);
  assert_true(c.scheduler.queue_timeout_s == 60);
  assert_int_equal(c.log.level, NS_LOG_INFO);
  assert_int_equal(c.log.format, NS_LOG_TEXT);

  /* and every row's field equals the row's default (offsets point where they should) */
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  for (size_t i = 0; i < n; i++) {
    const cfg_row *r = &rows[i];
    const char *p = (const char *)&c + r->offset;
    switch (r->type) {
    case CFG_BOOL: assert_int_equal(*(const bool *)p, r->def_i); break;
    case CFG_INT:
    case CFG_ENUM: assert_int_equal(*(const int *)p, r->def_i); break;
    case CFG_INT64: assert_int_equal(*(const int64_t *)p, r->def_i); break;
    case CFG_DOUBLE: assert_true(*(const double *)p == r->def_d); break;
    case CFG_STRING: assert_string_equal(*(const char *const *)p, r->def_s); break;
    }
  }
  char err[256];
  assert_int_equal(cfg_validate(&c, err, sizeof err), 0);
  cfg_free(&c);
}

static void test_defaults_within_bounds(void **state) {
  (void)state;
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  for (size_t i = 0; i < n; i++) {
    const cfg_row *r = &rows[i];
    switch (r->type) {
    case CFG_INT:
    case CFG_INT64:
      assert_true(r->min_i <= r->def_i && r->def_i <= r->max_i);
      if (r->type == CFG_INT) assert_true(r->min_i >= INT32_MIN && r->max_i <= INT32_MAX);
      if (r->flags & CFG_POW2) assert_true(r->def_i > 0 && (r->def_i & (r->def_i - 1)) == 0);
      break;
    case CFG_DOUBLE:
      assert_true(isfinite(r->def_d) && r->def_d <= r->max_d);
      if (r->flags & CFG_MIN_EXCLUSIVE)
        assert_true(r->def_d > r->min_d);
      else
        assert_true(r->def_d >= r->min_d);
      break;
    case CFG_STRING:
      assert_non_null(r->def_s);
      if (r->flags & CFG_NONEMPTY) assert_true(r->def_s[0] != '\0');
      break;
    case CFG_ENUM: {
      int found = 0;
      for (size_t k = 0; r->names[k]; k++)
        found |= r->values[k] == r->def_i;
      assert_true(found);
      break;
    }
    case CFG_BOOL: assert_true(r->def_i == 0 || r->def_i == 1); break;
    }
  }
}

/* ---- loading ---- */

static void test_load_good(void **state) {
  (void)state;
  cfg_t c;
  cfg_init(&c);
  load_ok(&c, "{\"server\": {\"host\": \"0.0.0.0\", \"port\": 0, \"max_body_bytes\": 1073741824,"
              " \"header_timeout_s\": 0.1, \"public_health\": false, \"api_keys_file\": \"k\"},"
              " \"engine\": {\"backend\": \"cuda\", \"gpu_memory_fraction\": 0.99,"
              " \"kv_page_tokens\": 256, \"chat_template\": \"chatml\", \"model\": \"m\"},"
              " \"scheduler\": {\"max_queue\": 0, \"queue_timeout_s\": 86400},"
              " \"log\": {\"level\": \"warn\", \"format\": \"json\"}}");
  assert_string_equal(c.server.host, "0.0.0.0");
  assert_int_equal(c.server.port, 0);
  assert_int_equal(c.server.max_body_bytes, 1073741824);
  assert_true(c.server.header_timeout_s == 0.1);
  assert_false(c.server.public_health);
  assert_string_equal(c.server.api_keys_file, "k");
  assert_int_equal(c.engine.backend, CFG_BACKEND_CUDA);
  assert_true(c.engine.gpu_memory_fraction == 0.99);
  assert_int_equal(c.engine.kv_page_tokens, 256);
  assert_string_equal(c.engine.chat_template, "chatml");
  assert_string_equal(c.engine.model, "m");
  assert_int_equal(c.scheduler.max_queue, 0);
  assert_true(c.scheduler.queue_timeout_s == 86400);
  assert_int_equal(c.log.level, NS_LOG_WARN);
  assert_int_equal(c.log.format, NS_LOG_JSON);
  /* untouched settings keep their defaults; a second file layers on top */
  assert_int_equal(c.server.max_connections, 1024);
  load_ok(&c, "{\"server\": {\"host\": \"::1\"}, \"engine\": {\"chat_template\": \"\"}}");
  assert_string_equal(c.server.host, "::1");
  assert_string_equal(c.engine.chat_template, "");
  assert_int_equal(c.server.port, 0);
  load_ok(&c, "{}");
  load_ok(&c, " {\"server\": {}} \n");
  assert_string_equal(c.server.host, "::1");
  cfg_free(&c);
  assert_string_equal(c.server.host, "127.0.0.1"); /* cfg_free leaves defaults */
}

static void test_unknown_keys(void **state) {
  (void)state;
  expect_load_error("{\"bogus\": 1}", "unknown setting 'bogus'", NULL);
  expect_load_error("{\"sever\": {\"port\": 1}}", "'sever'", "did you mean 'server'?");
  expect_load_error("{\"server\": {\"prot\": 1}}", "unknown setting 'server.prot'",
                    "did you mean 'server.port'?");
  expect_load_error("{\"engine\": {\"xyzzy_plugh\": 1}}", "unknown setting 'engine.xyzzy_plugh'",
                    NULL);
  expect_load_error("{\"server\": {\"port\": {\"x\": 1}}}", "server.port", "expected an integer");
  expect_load_error("{\"server.port\": 1}", "'server.port'", "nested");
  /* no hint when nothing is close */
  cfg_t c;
  char err[512];
  cfg_init(&c);
  const char *j = "{\"engine\": {\"xyzzy_plugh\": 1}}";
  assert_int_equal(cfg_load_json(&c, j, strlen(j), NULL, err, sizeof err), NS_EINVAL);
  assert_null(strstr(err, "did you mean"));
  cfg_free(&c);
}

static void test_wrong_types(void **state) {
  (void)state;
  expect_load_error("{\"server\": {\"public_health\": \"yes\"}}", "server.public_health",
                    "expected a boolean, got a string \"yes\"");
  expect_load_error("{\"server\": {\"public_health\": 1}}", "server.public_health",
                    "expected a boolean, got a number 1");
  expect_load_error("{\"server\": {\"port\": \"8080\"}}", "server.port",
                    "expected an integer, got a string \"8080\"");
  expect_load_error("{\"server\": {\"max_body_bytes\": true}}", "server.max_body_bytes",
                    "expected an integer, got a boolean true");
  expect_load_error("{\"server\": {\"header_timeout_s\": \"10\"}}", "server.header_timeout_s",
                    "expected a number");
  expect_load_error("{\"server\": {\"host\": 5}}", "server.host",
                    "expected a string, got a number");
  expect_load_error("{\"server\": {\"host\": null}}", "server.host", "got null");
  expect_load_error("{\"engine\": {\"backend\": 1}}", "engine.backend", "expected a string");
  expect_load_error("{\"server\": 1}", "server", "expected an object, got a number");
  expect_load_error("{\"log\": []}", "log", "expected an object, got an array");
  expect_load_error("[1, 2]", "top level", "got an array");
}

static void test_out_of_range(void **state) {
  (void)state;
  expect_load_error("{\"server\": {\"port\": -1}}", "server.port", "-1 is out of range [0, 65535]");
  expect_load_error("{\"server\": {\"port\": 65536}}", "server.port", "65536 is out of range");
  expect_load_error("{\"server\": {\"port\": 1e300}}", "server.port", "out of range");
  expect_load_error("{\"server\": {\"max_body_bytes\": 1023}}", "server.max_body_bytes",
                    "1023 is out of range [1024, 1073741824]");
  expect_load_error("{\"server\": {\"max_body_bytes\": 1073741825}}", "server.max_body_bytes",
                    "out of range");
  expect_load_error("{\"server\": {\"header_timeout_s\": 0.05}}", "server.header_timeout_s",
                    "0.05 is out of range [0.1, 3600]");
  expect_load_error("{\"server\": {\"header_timeout_s\": 3600.5}}", "server.header_timeout_s",
                    "out of range");
  expect_load_error("{\"engine\": {\"gpu_memory_fraction\": 0.05}}", "engine.gpu_memory_fraction",
                    "(0.05, 0.99]");
  expect_load_error("{\"engine\": {\"gpu_memory_fraction\": 1}}", "engine.gpu_memory_fraction",
                    "out of range");
  expect_load_error("{\"server\": {\"header_timeout_s\": 1e999}}", "server.header_timeout_s",
                    "not a finite number");
  /* the bounds themselves are accepted */
  cfg_t c;
  cfg_init(&c);
  load_ok(&c, "{\"server\": {\"port\": 65535, \"max_url_bytes\": 64, \"drain_timeout_s\": 0},"
              " \"engine\": {\"gpu_memory_fraction\": 0.050001, \"kv_page_tokens\": 8}}");
  assert_int_equal(c.server.port, 65535);
  cfg_free(&c);
}

static void test_value_errors(void **state) {
  (void)state;
  expect_load_error("{\"server\": {\"port\": 8080.5}}", "server.port", "8080.5 is not an integer");
  expect_load_error("{\"server\": {\"max_body_bytes\": 4096.25}}", "server.max_body_bytes",
                    "not an integer");
  expect_load_error("{\"engine\": {\"backend\": \"gpu\"}}", "engine.backend",
                    "'gpu' is not one of: auto, cpu, cuda");
  expect_load_error("{\"log\": {\"level\": \"INFO\"}}", "log.level", "debug, info, warn, error");
  expect_load_error("{\"server\": {\"host\": \"\"}}", "server.host", "must not be empty");
  expect_load_error("{\"engine\": {\"model\": \"\"}}", "engine.model", "must not be empty");
  expect_load_error("{\"engine\": {\"kv_page_tokens\": 24}}", "engine.kv_page_tokens",
                    "24 is not a power of two");
  expect_load_error("{\"engine\": {\"kv_page_tokens\": 512}}", "engine.kv_page_tokens",
                    "out of range");
  expect_load_error("{\"engine\": {\"chat_template\": \"vicuna\"}}", "engine.chat_template",
                    "llama2, llama3, chatml, mistral, zephyr");
  expect_load_error("{\"server\": {\"port\": 1, \"port\": 2}}", "server.port", "duplicate key");
  expect_load_error("{\"server\": {\"port\": 1}, \"server\": {\"host\": \"h\"}}", "server",
                    "duplicate key");
}

static void test_malformed(void **state) {
  (void)state;
  expect_load_error("{\"server\": {\"port\": 80,}}", "t.json:1:", "malformed JSON");
  expect_load_error("{\n  \"server\": {\n    \"port\": 80,\n  }\n}", "t.json:4:", "malformed");
  expect_load_error("{\"server\": {\"port\": 80}", "t.json:1:", "end of input");
  expect_load_error("", "t.json:1:1", "malformed");
  expect_load_error("{} {}", "t.json:1:", "malformed"); /* trailing garbage */
  expect_load_error("{\"server\": {\"port\": 80}} x", "malformed", NULL);
  /* an embedded NUL byte is not silently treated as the end */
  cfg_t c;
  char err[256];
  cfg_init(&c);
  assert_int_equal(cfg_load_json(&c, "{}\0{\"x\":1}", 10, "n.json", err, sizeof err), NS_EINVAL);
  assert_contains(err, "n.json");
  cfg_free(&c);
}

static void test_multiple_errors(void **state) {
  (void)state;
  const char *j = "{\"server\": {\"port\": 70000, \"prot\": 1, \"host\": \"\"},"
                  " \"engine\": {\"backend\": \"gpu\", \"kv_page_tokens\": 24},"
                  " \"log\": {\"format\": 3}, \"extra\": true}";
  cfg_t c;
  char err[4096];
  cfg_init(&c);
  assert_int_equal(cfg_load_json(&c, j, strlen(j), "m.json", err, sizeof err), NS_EINVAL);
  const char *keys[] = {"server.port",           "server.prot", "server.host", "engine.backend",
                        "engine.kv_page_tokens", "log.format",  "'extra'"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    assert_contains(err, keys[i]);
  assert_int_equal(count_lines(err), 7);
  /* every line names the origin */
  for (const char *p = err; p; p = strchr(p, '\n')) {
    if (*p == '\n') p++;
    assert_true(strncmp(p, "m.json: ", 8) == 0);
  }
  /* nothing applied */
  assert_int_equal(c.server.port, 8080);
  assert_int_equal(c.engine.kv_page_tokens, 16);

  /* a small buffer: NUL-terminated, cut at a line, marked */
  char small[60];
  memset(small, 'x', sizeof small);
  assert_int_equal(cfg_load_json(&c, j, strlen(j), "m.json", small, sizeof small), NS_EINVAL);
  assert_true(strlen(small) < sizeof small);
  assert_non_null(strstr(small, "..."));
  /* NULL err is allowed */
  assert_int_equal(cfg_load_json(&c, j, strlen(j), "m.json", NULL, 0), NS_EINVAL);
  cfg_free(&c);
}

static void test_load_file(void **state) {
  (void)state;
  cfg_t c;
  char err[1024];
  cfg_init(&c);
  assert_int_equal(cfg_load_file(&c, "/nonexistent/nanoserve.json", err, sizeof err), NS_ENOENT);
  assert_contains(err, "/nonexistent/nanoserve.json");
  assert_int_not_equal(cfg_load_file(&c, "/", err, sizeof err), 0);

  char path[] = "/tmp/cfg_unit_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *good = "{\"server\": {\"port\": 1234}}";
  assert_int_equal(write(fd, good, strlen(good)), (ssize_t)strlen(good));
  close(fd);
  assert_int_equal(cfg_load_file(&c, path, err, sizeof err), 0);
  assert_int_equal(c.server.port, 1234);

  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\n  \"server\": {\"port\": 1,}\n}\n", f);
  fclose(f);
  assert_int_equal(cfg_load_file(&c, path, err, sizeof err), NS_EINVAL);
  char want[64];
  snprintf(want, sizeof want, "%s:2:", path);
  assert_contains(err, want);
  unlink(path);
  cfg_free(&c);
}

/* ---- --set ---- */

static void test_set_each_type(void **state) {
  (void)state;
  cfg_t c;
  cfg_init(&c);
  const char *falses[] = {"false", "0", "no", "FALSE"}, *trues[] = {"true", "1", "yes"};
  for (size_t i = 0; i < 4; i++) {
    char a[64];
    snprintf(a, sizeof a, "server.public_health=%s", falses[i]);
    set_ok(&c, a);
    assert_false(c.server.public_health);
    if (i < 3) {
      snprintf(a, sizeof a, "server.public_health=%s", trues[i]);
      set_ok(&c, a);
      assert_true(c.server.public_health);
    }
  }
  set_ok(&c, "server.port=9000");
  assert_int_equal(c.server.port, 9000);
  set_ok(&c, "server.max_body_bytes=1073741824");
  assert_int_equal(c.server.max_body_bytes, 1073741824);
  set_ok(&c, "server.header_timeout_s=2.5");
  assert_true(c.server.header_timeout_s == 2.5);
  set_ok(&c, "server.request_timeout_s=1e3");
  assert_true(c.server.request_timeout_s == 1000);
  set_ok(&c, "server.host=example.org");
  assert_string_equal(c.server.host, "example.org");
  set_ok(&c, "server.host=::1");
  assert_string_equal(c.server.host, "::1");
  set_ok(&c, "engine.model=/a=b/c"); /* only the first '=' splits */
  assert_string_equal(c.engine.model, "/a=b/c");
  set_ok(&c, "server.api_keys_file=/etc/keys");
  set_ok(&c, "server.api_keys_file=");
  assert_string_equal(c.server.api_keys_file, "");
  set_ok(&c, "engine.chat_template=llama3");
  assert_string_equal(c.engine.chat_template, "llama3");
  set_ok(&c, "engine.chat_template=");
  assert_string_equal(c.engine.chat_template, "");
  set_ok(&c, "engine.backend=cpu");
  assert_int_equal(c.engine.backend, CFG_BACKEND_CPU);
  set_ok(&c, "log.level=debug");
  assert_int_equal(c.log.level, NS_LOG_DEBUG);
  set_ok(&c, "log.format=json");
  assert_int_equal(c.log.format, NS_LOG_JSON);
  set_ok(&c, "engine.kv_page_tokens=64");
  assert_int_equal(c.engine.kv_page_tokens, 64);
  cfg_free(&c);
}

static void test_set_errors(void **state) {
  (void)state;
  expect_set_error("server.port", "expected key=value", NULL);
  expect_set_error("=1", "expected key=value", NULL);
  expect_set_error("server.prot=1", "unknown setting 'server.prot'", "did you mean 'server.port'");
  expect_set_error("server=1", "unknown setting 'server'", NULL);
  expect_set_error("server.port=abc", "server.port", "expected an integer, got 'abc'");
  expect_set_error("server.port=", "server.port", "expected an integer");
  expect_set_error("server.port= 80", "server.port", "expected an integer");
  expect_set_error("server.port=80.5", "server.port", "80.5 is not an integer");
  expect_set_error("server.port=70000", "server.port", "70000 is out of range [0, 65535]");
  expect_set_error("server.port=-1", "server.port", "out of range");
  expect_set_error("server.max_body_bytes=99999999999999999999", "server.max_body_bytes",
                   "out of range");
  expect_set_error("server.header_timeout_s=fast", "server.header_timeout_s", "expected a number");
  expect_set_error("server.header_timeout_s=inf", "server.header_timeout_s", "not a finite");
  expect_set_error("server.header_timeout_s=nan", "server.header_timeout_s", "not a finite");
  expect_set_error("server.header_timeout_s=0", "server.header_timeout_s", "out of range");
  expect_set_error("server.public_health=maybe", "server.public_health", "expected a boolean");
  expect_set_error("engine.backend=gpu", "engine.backend", "auto, cpu, cuda");
  expect_set_error("server.host=", "server.host", "must not be empty");
  expect_set_error("engine.kv_page_tokens=48", "engine.kv_page_tokens", "not a power of two");
  expect_set_error("engine.gpu_memory_fraction=0.05", "engine.gpu_memory_fraction", "out of range");
  expect_set_error("engine.chat_template=alpaca", "engine.chat_template", "not one of");
}

/* ---- validation ---- */

static void test_validate(void **state) {
  (void)state;
  cfg_t c;
  char err[1024];
  cfg_init(&c);
  set_ok(&c, "engine.kv_page_tokens=32");
  set_ok(&c, "engine.max_batch_tokens=32");
  assert_int_equal(cfg_validate(&c, err, sizeof err), 0);
  set_ok(&c, "engine.max_batch_tokens=16");
  assert_int_equal(cfg_validate(&c, err, sizeof err), NS_EINVAL);
  assert_contains(err, "engine.max_batch_tokens");
  assert_contains(err, "engine.kv_page_tokens");
  cfg_free(&c);

  /* fields written directly are still checked against their rows, all of them */
  cfg_init(&c);
  c.server.port = 70000;
  c.engine.kv_page_tokens = 24;
  c.engine.backend = (cfg_backend)7;
  c.server.host = "";
  c.scheduler.queue_timeout_s = NAN;
  assert_int_equal(cfg_validate(&c, err, sizeof err), NS_EINVAL);
  assert_contains(err, "server.port: 70000 is out of range [0, 65535]");
  assert_contains(err, "engine.kv_page_tokens");
  assert_contains(err, "engine.backend");
  assert_contains(err, "server.host");
  assert_contains(err, "scheduler.queue_timeout_s");
  assert_int_equal(count_lines(err), 5);
  cfg_free(&c);
}

/* ---- dump ---- */

static void test_dump_roundtrip(void **state) {
  (void)state;
  cfg_t a, b;
  cfg_init(&a);
  cfg_init(&b);
  set_ok(&a, "server.host=10.0.0.1");
  set_ok(&a, "server.port=0");
  set_ok(&a, "server.max_body_bytes=123456789");
  set_ok(&a, "server.keepalive_timeout_s=0.3");
  set_ok(&a, "server.public_health=no");
  set_ok(&a, "engine.backend=cuda");
  set_ok(&a, "engine.gpu_memory_fraction=0.123456789012345");
  set_ok(&a, "engine.chat_template=zephyr");
  set_ok(&a, "engine.model=weird \"quoted\"\\path\ttab");
  set_ok(&a, "log.level=error");
  char *d1 = cfg_dump_json(&a);
  assert_non_null(d1);
  load_ok(&b, d1);
  char *d2 = cfg_dump_json(&b);
  assert_string_equal(d1, d2);
  assert_string_equal(b.engine.model, "weird \"quoted\"\\path\ttab");
  assert_true(b.engine.gpu_memory_fraction == 0.123456789012345);
  assert_int_equal(b.server.max_body_bytes, 123456789);
  assert_int_equal(b.log.level, NS_LOG_ERROR);

  /* the dump parses and is nested by dotted name, with every row in it */
  cJSON *root = cJSON_Parse(d1);
  assert_non_null(root);
  cJSON *server = cJSON_GetObjectItemCaseSensitive(root, "server");
  assert_true(cJSON_IsObject(server));
  cJSON *port = cJSON_GetObjectItemCaseSensitive(server, "port");
  assert_true(cJSON_IsNumber(port) && port->valuedouble == 0);
  cJSON *backend =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "engine"), "backend");
  assert_true(cJSON_IsString(backend));
  assert_string_equal(backend->valuestring, "cuda");
  assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(server, "public_health")));
  size_t n, leaves = 0;
  cfg_rows(&n);
  for (cJSON *sec = root->child; sec; sec = sec->next)
    for (cJSON *it = sec->child; it; it = it->next)
      leaves++;
  assert_int_equal(leaves, n);
  cJSON_Delete(root);
  free(d1);
  free(d2);
  cfg_free(&a);
  cfg_free(&b);
}

static void test_doc(void **state) {
  (void)state;
  char *d1 = cfg_doc_markdown(), *d2 = cfg_doc_markdown();
  assert_non_null(d1);
  assert_string_equal(d1, d2); /* stable */
  assert_true(strncmp(d1, "| Setting | Type | Default |", 27) == 0);
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  for (size_t i = 0; i < n; i++) {
    char cell[80];
    snprintf(cell, sizeof cell, "| `%s` |", rows[i].name);
    assert_contains(d1, cell);
  }
  assert_int_equal(count_lines(d1), (int)n + 2);
  assert_contains(d1, "| `server.port` | int | `8080` | `[0, 65535]` |");
  assert_contains(d1, "`auto`, `cpu`, `cuda`");
  assert_contains(d1, "`(0.05, 0.99]`");
  free(d1);
  free(d2);
}

/* Strings the cfg owns are freed when replaced and on cfg_free; a failed load keeps
 * the strings it did not replace (ASan reports leaks and use-after-free). */
static void test_string_ownership(void **state) {
  (void)state;
  cfg_t c;
  char err[512];
  cfg_init(&c);
  set_ok(&c, "server.host=a");
  set_ok(&c, "server.host=b");
  load_ok(&c, "{\"server\": {\"host\": \"c\"}, \"engine\": {\"model\": \"m1\"}}");
  const char *bad =
      "{\"server\": {\"host\": \"d\", \"port\": -5}, \"engine\": {\"model\": \"m2\"}}";
  assert_int_equal(cfg_load_json(&c, bad, strlen(bad), "x", err, sizeof err), NS_EINVAL);
  assert_string_equal(c.server.host, "c");
  assert_string_equal(c.engine.model, "m1");
  load_ok(&c, "{\"server\": {\"port\": 1}}");
  assert_string_equal(c.server.host, "c");
  cfg_t copy = c; /* read-only copies are fine while c lives */
  assert_string_equal(copy.engine.model, "m1");
  cfg_free(&c);
  cfg_free(&c); /* twice is harmless */
  assert_string_equal(c.engine.model, "models/tiny");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_matches_spec),
      cmocka_unit_test(test_init_defaults),
      cmocka_unit_test(test_defaults_within_bounds),
      cmocka_unit_test(test_load_good),
      cmocka_unit_test(test_unknown_keys),
      cmocka_unit_test(test_wrong_types),
      cmocka_unit_test(test_out_of_range),
      cmocka_unit_test(test_value_errors),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_multiple_errors),
      cmocka_unit_test(test_load_file),
      cmocka_unit_test(test_set_each_type),
      cmocka_unit_test(test_set_errors),
      cmocka_unit_test(test_validate),
      cmocka_unit_test(test_dump_roundtrip),
      cmocka_unit_test(test_doc),
      cmocka_unit_test(test_string_ownership),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
