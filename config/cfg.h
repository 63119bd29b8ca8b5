/* cfg.h — nanoserve's settings: one table row per setting drives the JSON file loader,
 * `--set key=value` overrides, validation, `config dump` and the Markdown doc.
 *
 * Threads: the main thread fills a cfg_t at startup (cfg_init, cfg_load_file, cfg_set,
 * cfg_validate); afterwards every thread may read it, nobody writes it.
 *
 * Errors: fallible functions return 0 or a negative ns_err (ns_err.h). When err is not
 * NULL they write one problem per line into it ('\n'-separated, no trailing newline,
 * NUL-terminated, truncated with "..." when errlen is too small), each naming the dotted
 * key, the value and why. Content problems are NS_EINVAL. */
#ifndef CFG_H
#define CFG_H

#include "ns_log.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GEMM algorithm policy of the CUDA backend (engine/cuda_gemm.h). */
typedef enum cfg_cuda_gemm {
  CFG_GEMM_PINNED = 0,   /* cuBLASLt, one algorithm per shape for every batch: batch-invariant */
  CFG_GEMM_OWN = 1,      /* kernels/gemm.cu: batch-invariant by construction, slower */
  CFG_GEMM_NOSPLIT = 2,  /* cuBLASLt's pick per batch size among those not splitting K */
  CFG_GEMM_HEURISTIC = 3 /* cuBLASLt's pick per batch size: fastest, not batch-invariant */
} cfg_cuda_gemm;

typedef enum cfg_backend {
  CFG_BACKEND_AUTO = 0, /* cuda when a GPU is usable, else cpu */
  CFG_BACKEND_CPU = 1,
  CFG_BACKEND_CUDA = 2
} cfg_backend;

/* Field names follow the dotted setting names: server.port is c->server.port.
 * Strings are never NULL; they belong to the cfg_t (read-only for callers). */
typedef struct cfg_t {
  struct {
    const char *host;
    int port; /* 0: pick a free port */
    int max_connections;
    int max_header_bytes;
    int max_headers;
    int max_url_bytes;
    int64_t max_body_bytes;
    double header_timeout_s;
    double body_timeout_s;
    int min_recv_rate_bps; /* 0: no minimum */
    double keepalive_timeout_s;
    double send_timeout_s;
    double request_timeout_s;
    int64_t max_sse_buffer_bytes;
    double drain_timeout_s;
    const char *api_keys_file; /* "": no auth */
    bool public_health;
    const char *model_name; /* "": the model folder's name */
    double health_stall_s;
  } server;
  struct {
    const char *model;
    cfg_backend backend;
    double gpu_memory_fraction;
    int kv_page_tokens;     /* power of two */
    int64_t kv_cache_bytes; /* 0: sized by the engine (engine/backend_select.h) */
    cfg_cuda_gemm cuda_gemm;
    bool cuda_graphs;
    int cuda_graph_max_batch; /* 0: max_batch */
    int max_batch;
    int max_batch_tokens;
    bool prefill_stream;       /* false: prefill chunks ride in the decode steps */
    int max_seq_len;           /* 0: the model's max_position_embeddings */
    int cpu_threads;           /* 0: all cores */
    const char *chat_template; /* "": from tokenizer_config.json, else a family name */
  } engine;
  struct {
    int max_queue;
    double queue_timeout_s;
    double admit_growth; /* 0: admit on the prompt's pages alone */
  } scheduler;
  struct {
    ns_log_level level; /* pass straight to ns_log_configure */
    ns_log_format format;
  } log;
  uint64_t owned_; /* private: bit i set when row i's string was malloc'd */
} cfg_t;

/* Fill every field with its default. Cannot fail (defaults are static strings). */
void cfg_init(cfg_t *c);
/* Free the strings c owns and leave c holding the defaults again. */
void cfg_free(cfg_t *c);

/* Apply a JSON file of nested objects ({"server": {"port": 8080}}) on top of c.
 * All-or-nothing: on error c is unchanged and err lists every problem in the file, each
 * line prefixed "PATH: " (malformed JSON: "PATH:LINE:COL: "). Returns 0, NS_ENOENT (no
 * such file), NS_EIO, NS_ENOMEM or NS_EINVAL (bad content). */
int cfg_load_file(cfg_t *c, const char *path, char *err, size_t errlen);
/* The same for len bytes of JSON text; origin names it in messages (may be NULL). */
int cfg_load_json(cfg_t *c, const char *json, size_t len, const char *origin, char *err,
                  size_t errlen);
/* Apply one "key=value" override, the value parsed by the setting's type (bool:
 * true/false/1/0/yes/no; strings as-is, empty where the setting allows it). On error c is
 * unchanged. Returns 0, NS_EINVAL or NS_ENOMEM. */
int cfg_set(cfg_t *c, const char *assignment, char *err, size_t errlen);
/* Check every field against its row and the cross-field rules; report all problems. */
int cfg_validate(const cfg_t *c, char *err, size_t errlen);
/* Print each '\n'-separated problem of err (as the calls above fill it) to stderr as its
 * own line, after prefix ("" for none). */
void cfg_print_errors(const char *prefix, const char *err);

/* Effective configuration as pretty JSON (nested objects by dotted name), loadable by
 * cfg_load_json. malloc'd, the caller frees; NULL when out of memory. */
char *cfg_dump_json(const cfg_t *c);
/* Markdown table of every setting (name, type, default, range/values, help), stable
 * output for the README. malloc'd, the caller frees; NULL when out of memory. */
char *cfg_doc_markdown(void);

typedef enum cfg_type { CFG_BOOL, CFG_INT, CFG_INT64, CFG_DOUBLE, CFG_STRING, CFG_ENUM } cfg_type;

enum {
  CFG_MIN_EXCLUSIVE = 1u << 0, /* DOUBLE: value must be > min_d */
  CFG_POW2 = 1u << 1,          /* INT: value must be a power of two */
  CFG_NONEMPTY = 1u << 2       /* STRING: "" is not allowed */
};

/* One setting. The table is static and immutable; any thread may read it. */
typedef struct cfg_row {
  const char *name; /* dotted path, e.g. "server.port" */
  cfg_type type;
  size_t offset;            /* offsetof(cfg_t, ...) of the field: bool, int, int64_t, double,
                               const char * or a C enum (int-sized) */
  unsigned flags;           /* CFG_MIN_EXCLUSIVE, CFG_POW2, CFG_NONEMPTY */
  int64_t def_i;            /* default of BOOL (0/1), INT, INT64 and ENUM (the C value) */
  double def_d;             /* default of DOUBLE */
  const char *def_s;        /* default of STRING */
  int64_t min_i, max_i;     /* bounds of INT and INT64, inclusive */
  double min_d, max_d;      /* bounds of DOUBLE (max inclusive) */
  const char *const *names; /* ENUM: value names; STRING: allowed values or NULL for any;
                               NULL-terminated */
  const int *values;        /* ENUM: the C value of each name */
  const char *help;
} cfg_row;

/* The table, in documentation order; *count gets the number of rows. */
const cfg_row *cfg_rows(size_t *count);

/* `nanoserve config ...` with argv[0] == "config": dump, check, doc. Returns the exit
 * code: 0 ok, 1 invalid configuration, 2 bad usage. Main thread. */
int cfg_cli_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
