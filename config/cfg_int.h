/* cfg_int.h — internals shared by the config/ files (cfg__ prefix): table lookups, the
 * per-row value check, number formatting and the error-line collector. Not installed. */
#ifndef CFG_INT_H
#define CFG_INT_H

#include "cfg.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Field of row r inside cfg_t *c, as type T. */
#define CFG__FIELD(c, r, T)  ((T *)(void *)((char *)(c) + (r)->offset))
#define CFG__CFIELD(c, r, T) ((const T *)(const void *)((const char *)(c) + (r)->offset))

/* ---- table (cfg_table.c) ---- */
const cfg_row *cfg__find(const char *name, size_t len);
size_t cfg__index(const cfg_row *r);
/* Whether name[0..len) is a proper prefix section of some row ("server", not "serv"). */
int cfg__is_section(const char *name, size_t len);
/* The row or section name closest to name within edit distance 2, into buf; 0 if none. */
int cfg__suggest(const char *name, char *buf, size_t n);
const char *cfg__type_name(cfg_type t);

/* A value of any row type; only the member for the row's type is meaningful. */
typedef struct cfg__val {
  int64_t i; /* BOOL, INT, INT64, ENUM */
  double d;
  const char *s;
} cfg__val;

/* 0 if v is acceptable for r, else -1 with the reason ("70000 is out of range [0, 65535]")
 * in why. */
int cfg__check(const cfg_row *r, const cfg__val *v, char *why, size_t n);
/* r's current value in c, as text: "8080", "0.9", "true", "auto", or the raw string. */
void cfg__fmt_value(const cfg_row *r, const cfg__val *v, char *buf, size_t n);
/* r's bounds: "[0, 65535]", "(0.05, 0.99]", "[8, 256], power of two", "auto, cpu, cuda";
 * "" for a string without limits. */
void cfg__fmt_range(const cfg_row *r, char *buf, size_t n);
/* Shortest text that reads back as the same double. */
void cfg__fmt_double(double d, char *buf, size_t n);
/* Copy s into buf with control characters shown as '?' and at most 80 bytes. */
void cfg__sanitize(const char *s, char *buf, size_t n);
/* The row's default, and c's current value, as cfg__val. */
cfg__val cfg__default(const cfg_row *r);
cfg__val cfg__get(const cfg_t *c, const cfg_row *r);

/* ---- loading (cfg.c) ---- */
/* cfg_load_file; with partial set, a file with errors still applies its valid values
 * (config check uses it so that the cross-field rules see them). */
int cfg__load_file(cfg_t *c, const char *path, char *err, size_t errlen, int partial);

/* ---- error lines ---- */
typedef struct cfg__errs {
  char *buf; /* the caller's err buffer, may be NULL */
  size_t cap, len;
  int count; /* problems reported, including those that did not fit */
  int full;  /* "..." written, nothing more fits */
} cfg__errs;

void cfg__errs_init(cfg__errs *e, char *buf, size_t cap);
/* Append one problem line: "PREFIX: message" (prefix NULL or "" for none). */
void cfg__err_add(cfg__errs *e, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
