/* cfg_table.c — the settings table: one row per setting (redis config.c style), plus the
 * lookups and text formatting of values and bounds that the loader, dump and doc share. */
#include "cfg_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The loader writes enum fields through an int pointer. */
_Static_assert(sizeof(cfg_backend) == sizeof(int), "cfg_backend must be int-sized");
_Static_assert(sizeof(cfg_cuda_gemm) == sizeof(int), "cfg_cuda_gemm must be int-sized");
_Static_assert(sizeof(ns_log_level) == sizeof(int), "ns_log_level must be int-sized");
_Static_assert(sizeof(ns_log_format) == sizeof(int), "ns_log_format must be int-sized");

#define OFF(field) offsetof(cfg_t, field)

#define ROW_BOOL(nm, fld, def, hlp)                                                                \
  { .name = nm, .type = CFG_BOOL, .offset = OFF(fld), .def_i = (def), .help = hlp }
#define ROW_INT(nm, fld, def, lo, hi, fl, hlp)                                                     \
  {                                                                                                \
    .name = nm, .type = CFG_INT, .offset = OFF(fld), .flags = fl, .def_i = (def), .min_i = (lo),   \
    .max_i = (hi), .help = hlp                                                                     \
  }
#define ROW_INT64(nm, fld, def, lo, hi, hlp)                                                       \
  {                                                                                                \
    .name = nm, .type = CFG_INT64, .offset = OFF(fld), .def_i = (def), .min_i = (lo),              \
    .max_i = (hi), .help = hlp                                                                     \
  }
#define ROW_DOUBLE(nm, fld, def, lo, hi, fl, hlp)                                                  \
  {                                                                                                \
    .name = nm, .type = CFG_DOUBLE, .offset = OFF(fld), .flags = fl, .def_d = (def),               \
    .min_d = (lo), .max_d = (hi), .help = hlp                                                      \
  }
#define ROW_STRING(nm, fld, def, fl, allowed, hlp)                                                 \
  {                                                                                                \
    .name = nm, .type = CFG_STRING, .offset = OFF(fld), .flags = fl, .def_s = (def),               \
    .names = (allowed), .help = hlp                                                                \
  }
#define ROW_ENUM(nm, fld, def, nms, vals, hlp)                                                     \
  {                                                                                                \
    .name = nm, .type = CFG_ENUM, .offset = OFF(fld), .def_i = (def), .names = (nms),              \
    .values = (vals), .help = hlp                                                                  \
  }

static const char *const backend_names[] = {"auto", "cpu", "cuda", NULL};
static const int backend_values[] = {CFG_BACKEND_AUTO, CFG_BACKEND_CPU, CFG_BACKEND_CUDA};
static const char *const gemm_names[] = {"pinned", "own", "nosplit", "heuristic", NULL};
static const int gemm_values[] = {CFG_GEMM_PINNED, CFG_GEMM_OWN, CFG_GEMM_NOSPLIT,
                                  CFG_GEMM_HEURISTIC};
static const char *const level_names[] = {"debug", "info", "warn", "error", NULL};
static const int level_values[] = {NS_LOG_DEBUG, NS_LOG_INFO, NS_LOG_WARN, NS_LOG_ERROR};
static const char *const format_names[] = {"text", "json", NULL};
static const int format_values[] = {NS_LOG_TEXT, NS_LOG_JSON};
static const char *const template_names[] = {"llama2",  "llama3", "chatml",
                                             "mistral", "zephyr", NULL};

/* clang-format off */
static const cfg_row rows[] = {
  /* ---- server: sockets, HTTP limits and timeouts ---- */
  ROW_STRING("server.host", server.host, "127.0.0.1", CFG_NONEMPTY, NULL,
             "Address to listen on (IPv4 or IPv6 literal, or a host name)."),
  ROW_INT("server.port", server.port, 8080, 0, 65535, 0,
          "TCP port to listen on; 0 picks a free port (for tests)."),
  ROW_INT("server.max_connections", server.max_connections, 1024, 1, 1000000, 0,
          "Open client connections at most. Past it, 16 more are accepted for one request "
          "each, answered on `/health`, `/ready` and `/metrics` (a 503 elsewhere) so that "
          "probes still reach a saturated server; further ones are closed at accept."),
  ROW_INT("server.max_header_bytes", server.max_header_bytes, 16384, 1024, 1048576, 0,
          "Request line plus headers, in bytes, at most (431 beyond)."),
  ROW_INT("server.max_headers", server.max_headers, 64, 8, 1024, 0,
          "Header fields per request at most (431 beyond)."),
  ROW_INT("server.max_url_bytes", server.max_url_bytes, 4096, 64, 65536, 0,
          "Request target (URL) length in bytes at most (414 beyond)."),
  ROW_INT64("server.max_body_bytes", server.max_body_bytes, 4194304, 1024, 1073741824,
            "Request body size in bytes at most (413 beyond)."),
  ROW_DOUBLE("server.header_timeout_s", server.header_timeout_s, 10, 0.1, 3600, 0,
             "Seconds to receive the request line and headers (408 beyond)."),
  ROW_DOUBLE("server.body_timeout_s", server.body_timeout_s, 30, 0.1, 3600, 0,
             "Seconds to receive the request body (408 beyond)."),
  ROW_INT("server.min_recv_rate_bps", server.min_recv_rate_bps, 1024, 0, 1000000000, 0,
          "Minimum bytes per second while receiving a request of 16 KiB or more (sent or "
          "declared); smaller ones have the header and body timeouts. 0 disables the check."),
  ROW_DOUBLE("server.keepalive_timeout_s", server.keepalive_timeout_s, 5, 0.1, 3600, 0,
             "Seconds an idle keep-alive connection stays open."),
  ROW_DOUBLE("server.send_timeout_s", server.send_timeout_s, 60, 0.1, 3600, 0,
             "Seconds a response may wait for the client to take any of its bytes; beyond, the "
             "connection is closed (nginx's send_timeout)."),
  ROW_DOUBLE("server.request_timeout_s", server.request_timeout_s, 600, 1, 86400, 0,
             "Wall-clock seconds one request may take, queueing and generation included."),
  ROW_INT64("server.max_sse_buffer_bytes", server.max_sse_buffer_bytes, 1048576, 4096,
            1073741824,
            "Unsent streaming bytes buffered per slow client at most; beyond, it is dropped."),
  ROW_DOUBLE("server.drain_timeout_s", server.drain_timeout_s, 30, 0, 3600, 0,
             "Seconds to let in-flight requests finish on shutdown before failing them."),
  ROW_STRING("server.api_keys_file", server.api_keys_file, "", 0, NULL,
             "File of accepted API keys, one per line; empty disables authentication."),
  ROW_BOOL("server.public_health", server.public_health, 1,
           "Serve /health, /ready and /metrics without an API key."),
  ROW_STRING("server.model_name", server.model_name, "", 0, NULL,
             "Model id the API serves and accepts in 'model'; empty uses the model folder's name."),
  ROW_DOUBLE("server.health_stall_s", server.health_stall_s, 30, 1, 86400, 0,
             "Seconds without engine progress after which /health fails and the systemd watchdog "
             "stops being fed."),

  /* ---- engine: model, backend, batching, KV cache ---- */
  ROW_STRING("engine.model", engine.model, "models/tiny", CFG_NONEMPTY, NULL,
             "Hugging Face checkpoint folder (config.json, *.safetensors, tokenizer.json)."),
  ROW_ENUM("engine.backend", engine.backend, CFG_BACKEND_AUTO, backend_names, backend_values,
           "Compute backend; auto uses CUDA when a GPU is usable, else the CPU."),
  ROW_DOUBLE("engine.gpu_memory_fraction", engine.gpu_memory_fraction, 0.90, 0.05, 0.99,
             CFG_MIN_EXCLUSIVE,
             "Share of GPU memory the engine takes as its pool (weights, workspaces, KV)."),
  ROW_INT("engine.kv_page_tokens", engine.kv_page_tokens, 16, 8, 256, CFG_POW2,
          "Tokens per KV cache page, the unit a sequence's cache grows by (its last page may "
          "leave up to this many less one slots unused); 16, 32 and 64 decode within 1% of "
          "each other."),
  ROW_INT64("engine.kv_cache_bytes", engine.kv_cache_bytes, 0, 0, INT64_C(1) << 50,
            "Bytes of KV cache page memory; 0 sizes it: engine.max_batch sequences of the "
            "whole context, on the CPU at most 2 GiB and half the available RAM. A cache that "
            "holds fewer tokens than the context shortens the context served to what it holds."),
  ROW_ENUM("engine.cuda_gemm", engine.cuda_gemm, CFG_GEMM_PINNED, gemm_names, gemm_values,
           "GEMM policy of the CUDA backend for prefill rows (decode rows always run the "
           "batch-invariant decode GEMM): pinned and own keep a sequence's numbers independent "
           "of its batch (concurrent requests give what they give alone); heuristic is faster "
           "and not batch-invariant."),
  ROW_BOOL("engine.cuda_graphs", engine.cuda_graphs, 1,
           "Replay each decode step of the CUDA backend as one CUDA graph per batch bucket "
           "and context class (captured at start-up); false launches every kernel each step."),
  ROW_INT("engine.cuda_graph_max_batch", engine.cuda_graph_max_batch, 0, 0, 1024, 0,
          "Largest decode batch with a CUDA graph (buckets 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, "
          "128, then steps of 64); 0 uses engine.max_batch. Larger batches run without one."),
  ROW_INT("engine.max_batch", engine.max_batch, 128, 1, 1024, 0,
          "Sequences decoded together in one step at most."),
  ROW_INT("engine.max_batch_tokens", engine.max_batch_tokens, 4096, 16, 1048576, 0,
          "Tokens processed in one step at most (prefill chunks plus decodes)."),
  ROW_BOOL("engine.prefill_stream", engine.prefill_stream, 0,
           "Run prompt chunks (prefill) as their own steps on a low-priority CUDA stream, "
           "concurrently with the decode steps on a high-priority one; a sequence joins the "
           "decode batch once its prefill completes. false: prompt chunks share the decode "
           "steps (chunked prefill, engine.max_batch_tokens rows a step). Backends without a "
           "second stream (cpu) run the same schedule one step after the other."),
  ROW_INT("engine.max_seq_len", engine.max_seq_len, 0, 0, 1048576, 0,
          "Prompt plus generated tokens per sequence at most; 0 uses the model's "
          "max_position_embeddings."),
  ROW_INT("engine.cpu_threads", engine.cpu_threads, 0, 0, 256, 0,
          "Threads of the CPU backend; 0 uses all cores."),
  ROW_STRING("engine.chat_template", engine.chat_template, "", 0, template_names,
             "Chat prompt format; empty takes it from tokenizer_config.json."),

  /* ---- scheduler: admission queue ---- */
  ROW_INT("scheduler.max_queue", scheduler.max_queue, 256, 0, 1000000, 0,
          "Requests waiting for admission at most; beyond, new ones get 429."),
  ROW_DOUBLE("scheduler.queue_timeout_s", scheduler.queue_timeout_s, 60, 0.1, 86400, 0,
             "Seconds a request may wait for admission before it fails with 503."),
  ROW_DOUBLE("scheduler.admit_growth", scheduler.admit_growth, 0, 0, 1, 0,
             "Share of each running request's remaining max_tokens whose KV pages admission "
             "keeps free; 0 admits on the prompt's pages alone and preempts when pages run "
             "out, 1 never preempts."),

  /* ---- log ---- */
  ROW_ENUM("log.level", log.level, NS_LOG_INFO, level_names, level_values,
           "Least severe log level written."),
  ROW_ENUM("log.format", log.format, NS_LOG_TEXT, format_names, format_values,
           "Log line format on stderr: text, or one JSON object per line."),
};
/* clang-format on */

#define NROWS (sizeof rows / sizeof rows[0])
_Static_assert(NROWS <= 64, "cfg_t.owned_ has one bit per row");

const cfg_row *cfg_rows(size_t *count) {
  if (count) *count = NROWS;
  return rows;
}

size_t cfg__index(const cfg_row *r) {
  return (size_t)(r - rows);
}

const cfg_row *cfg__find(const char *name, size_t len) {
  for (size_t i = 0; i < NROWS; i++)
    if (strlen(rows[i].name) == len && memcmp(rows[i].name, name, len) == 0) return &rows[i];
  return NULL;
}

int cfg__is_section(const char *name, size_t len) {
  for (size_t i = 0; i < NROWS; i++)
    if (strlen(rows[i].name) > len && memcmp(rows[i].name, name, len) == 0 &&
        rows[i].name[len] == '.')
      return 1;
  return 0;
}

/* Optimal string alignment distance (a transposition counts one), capped at 3. */
static int edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 64 || m > 64) return 3;
  if ((n > m ? n - m : m - n) > 2) return 3;
  int d[65][65];
  for (size_t i = 0; i <= n; i++)
    d[i][0] = (int)i;
  for (size_t j = 0; j <= m; j++)
    d[0][j] = (int)j;
  for (size_t i = 1; i <= n; i++) {
    for (size_t j = 1; j <= m; j++) {
      int cost = a[i - 1] != b[j - 1];
      int v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  }
  return d[n][m];
}

int cfg__suggest(const char *name, char *buf, size_t n) {
  int best_d = 3;
  for (size_t i = 0; i < NROWS; i++) {
    /* the row's name and its section name, so a misspelt "sever" finds "server" */
    const char *dot = strchr(rows[i].name, '.');
    size_t cand_len[2] = {strlen(rows[i].name), dot ? (size_t)(dot - rows[i].name) : 0};
    for (int k = 0; k < 2; k++) {
      char cand[64];
      if (cand_len[k] == 0 || cand_len[k] >= sizeof cand) continue;
      memcpy(cand, rows[i].name, cand_len[k]);
      cand[cand_len[k]] = '\0';
      int d = edit_distance(name, cand);
      if (d < best_d) {
        best_d = d;
        snprintf(buf, n, "%s", cand);
      }
    }
  }
  return best_d <= 2;
}

const char *cfg__type_name(cfg_type t) {
  switch (t) {
  case CFG_BOOL: return "bool";
  case CFG_INT: return "int";
  case CFG_INT64: return "int64";
  case CFG_DOUBLE: return "double";
  case CFG_STRING: return "string";
  case CFG_ENUM: return "enum";
  }
  return "?";
}

/* ---- values ---- */

cfg__val cfg__default(const cfg_row *r) {
  cfg__val v = {.i = r->def_i, .d = r->def_d, .s = r->def_s ? r->def_s : ""};
  return v;
}

cfg__val cfg__get(const cfg_t *c, const cfg_row *r) {
  cfg__val v = {0, 0, ""};
  switch (r->type) {
  case CFG_BOOL: v.i = *CFG__CFIELD(c, r, bool); break;
  case CFG_INT:
  case CFG_ENUM: v.i = *CFG__CFIELD(c, r, int); break;
  case CFG_INT64: v.i = *CFG__CFIELD(c, r, int64_t); break;
  case CFG_DOUBLE: v.d = *CFG__CFIELD(c, r, double); break;
  case CFG_STRING: v.s = *CFG__CFIELD(c, r, const char *); break;
  }
  if (!v.s) v.s = "";
  return v;
}

void cfg__fmt_double(double d, char *buf, size_t n) {
  if (d == floor(d) && fabs(d) < 1e15) { /* "3600", not "3.6e+03" */
    snprintf(buf, n, "%.0f", d);
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, n, "%.*g", prec, d);
    if (strtod(buf, NULL) == d) return;
  }
}

static const char *enum_name(const cfg_row *r, int64_t v) {
  for (size_t k = 0; r->names[k]; k++)
    if (r->values[k] == v) return r->names[k];
  return NULL;
}

void cfg__fmt_value(const cfg_row *r, const cfg__val *v, char *buf, size_t n) {
  const char *name;
  switch (r->type) {
  case CFG_BOOL: snprintf(buf, n, "%s", v->i ? "true" : "false"); break;
  case CFG_INT:
  case CFG_INT64: snprintf(buf, n, "%lld", (long long)v->i); break;
  case CFG_DOUBLE: cfg__fmt_double(v->d, buf, n); break;
  case CFG_STRING: snprintf(buf, n, "%s", v->s); break;
  case CFG_ENUM:
    name = enum_name(r, v->i);
    if (name)
      snprintf(buf, n, "%s", name);
    else
      snprintf(buf, n, "%lld", (long long)v->i);
    break;
  }
}

static void join_names(const char *const *names, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = '\0';
  for (size_t k = 0; names[k] && o < n; k++) {
    int w = snprintf(buf + o, n - o, "%s%s", k ? ", " : "", names[k]);
    if (w < 0) return;
    o += (size_t)w;
  }
}

void cfg__fmt_range(const cfg_row *r, char *buf, size_t n) {
  char lo[40], hi[40];
  buf[0] = '\0';
  switch (r->type) {
  case CFG_BOOL: snprintf(buf, n, "true, false"); break;
  case CFG_INT:
  case CFG_INT64:
    snprintf(buf, n, "[%lld, %lld]%s", (long long)r->min_i, (long long)r->max_i,
             r->flags & CFG_POW2 ? ", power of two" : "");
    break;
  case CFG_DOUBLE:
    cfg__fmt_double(r->min_d, lo, sizeof lo);
    cfg__fmt_double(r->max_d, hi, sizeof hi);
    snprintf(buf, n, "%c%s, %s]", r->flags & CFG_MIN_EXCLUSIVE ? '(' : '[', lo, hi);
    break;
  case CFG_STRING:
    if (r->names) join_names(r->names, buf, n);
    break;
  case CFG_ENUM: join_names(r->names, buf, n); break;
  }
}

void cfg__sanitize(const char *s, char *buf, size_t n) {
  size_t o = 0, limit = n - 1 < 80 ? n - 1 : 80;
  for (; *s && o < limit; s++) {
    unsigned char ch = (unsigned char)*s;
    buf[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
  }
  if (*s && o >= 3) memcpy(buf + o - 3, "...", 3);
  buf[o] = '\0';
}

int cfg__check(const cfg_row *r, const cfg__val *v, char *why, size_t n) {
  char val[100], range[160];
  switch (r->type) {
  case CFG_BOOL: return 0;
  case CFG_INT:
  case CFG_INT64:
    if (v->i < r->min_i || v->i > r->max_i) {
      cfg__fmt_range(r, range, sizeof range);
      snprintf(why, n, "%lld is out of range %s", (long long)v->i, range);
      return -1;
    }
    if ((r->flags & CFG_POW2) && (v->i <= 0 || (v->i & (v->i - 1)) != 0)) {
      snprintf(why, n, "%lld is not a power of two", (long long)v->i);
      return -1;
    }
    return 0;
  case CFG_DOUBLE:
    if (!isfinite(v->d) || v->d > r->max_d || v->d < r->min_d ||
        ((r->flags & CFG_MIN_EXCLUSIVE) && v->d == r->min_d)) {
      cfg__fmt_double(v->d, val, sizeof val);
      cfg__fmt_range(r, range, sizeof range);
      snprintf(why, n, "%s is out of range %s", val, range);
      return -1;
    }
    return 0;
  case CFG_STRING:
    if (v->s[0] == '\0') {
      if (r->flags & CFG_NONEMPTY) {
        snprintf(why, n, "must not be empty");
        return -1;
      }
      return 0;
    }
    if (r->names) {
      for (size_t k = 0; r->names[k]; k++)
        if (strcmp(r->names[k], v->s) == 0) return 0;
      cfg__sanitize(v->s, val, sizeof val);
      cfg__fmt_range(r, range, sizeof range);
      snprintf(why, n, "'%s' is not one of: %s (or empty)", val, range);
      return -1;
    }
    return 0;
  case CFG_ENUM:
    if (enum_name(r, v->i)) return 0;
    cfg__fmt_range(r, range, sizeof range);
    snprintf(why, n, "value %lld is not one of: %s", (long long)v->i, range);
    return -1;
  }
  return -1;
}

/* ---- error lines ---- */

void cfg__errs_init(cfg__errs *e, char *buf, size_t cap) {
  e->buf = cap ? buf : NULL;
  e->cap = buf ? cap : 0;
  e->len = 0;
  e->count = 0;
  e->full = 0;
  if (e->buf) e->buf[0] = '\0';
}

void cfg__err_add(cfg__errs *e, const char *prefix, const char *fmt, ...) {
  e->count++;
  if (!e->buf || e->full) return;
  char line[1024];
  int p = snprintf(line, sizeof line, "%s%s", prefix && *prefix ? prefix : "",
                   prefix && *prefix ? ": " : "");
  if (p < 0) p = 0;
  if ((size_t)p >= sizeof line) p = (int)sizeof line - 1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + p, sizeof line - (size_t)p, fmt, ap);
  va_end(ap);
  size_t need = strlen(line) + (e->len ? 1 : 0);
  if (e->len + need < e->cap) {
    if (e->len) e->buf[e->len++] = '\n';
    memcpy(e->buf + e->len, line, strlen(line) + 1);
    e->len += strlen(line);
    return;
  }
  /* does not fit: end with "..." (over the tail if need be) and take no more lines */
  e->full = 1;
  const char *more = e->len ? "\n..." : "...";
  if (e->len + strlen(more) >= e->cap) more = "...";
  size_t ml = strlen(more);
  if (e->cap <= ml) return;
  if (e->len + ml >= e->cap) e->len = e->cap - 1 - ml;
  memcpy(e->buf + e->len, more, ml + 1);
  e->len += ml;
}
