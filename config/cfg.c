/* cfg.c — filling a cfg_t from the table: defaults, JSON files, `--set key=value` and
 * validation. Entry points cfg_load_file and cfg_set; both work on a copy and commit it whole. */
#include "cfg_int.h"
#include "ns_err.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILE_BYTES (16u << 20) /* a config file is a few KiB; refuse anything huge */
#define NAME_MAX_BYTES 256

/* ---- defaults and string ownership ----
 * String fields point either at the table's static default or at a malloc'd copy; bit i of
 * owned_ says which, for row i. Loaders write into a shallow copy whose owned_ starts at 0,
 * so a failed load frees only what it allocated and the caller's cfg_t stays untouched. */

void cfg_init(cfg_t *c) {
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  memset(c, 0, sizeof *c);
  for (size_t i = 0; i < n; i++) {
    const cfg_row *r = &rows[i];
    switch (r->type) {
    case CFG_BOOL: *CFG__FIELD(c, r, bool) = r->def_i != 0; break;
    case CFG_INT:
    case CFG_ENUM: *CFG__FIELD(c, r, int) = (int)r->def_i; break;
    case CFG_INT64: *CFG__FIELD(c, r, int64_t) = r->def_i; break;
    case CFG_DOUBLE: *CFG__FIELD(c, r, double) = r->def_d; break;
    case CFG_STRING: *CFG__FIELD(c, r, const char *) = r->def_s; break;
    }
  }
}

static void free_owned(cfg_t *c) {
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  for (size_t i = 0; i < n; i++)
    if (c->owned_ & (UINT64_C(1) << i)) free((void *)*CFG__FIELD(c, &rows[i], const char *));
  c->owned_ = 0;
}

void cfg_free(cfg_t *c) {
  if (!c) return;
  free_owned(c);
  cfg_init(c);
}

static void work_begin(const cfg_t *c, cfg_t *work) {
  *work = *c;
  work->owned_ = 0;
}

/* Make work the new c: strings work kept from c keep c's ownership; replaced ones are freed. */
static void work_commit(cfg_t *c, cfg_t *work) {
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  for (size_t i = 0; i < n; i++) {
    if (rows[i].type != CFG_STRING) continue;
    uint64_t bit = UINT64_C(1) << i;
    const char *old = *CFG__FIELD(c, &rows[i], const char *);
    if (old == *CFG__FIELD(work, &rows[i], const char *))
      work->owned_ |= c->owned_ & bit;
    else if (c->owned_ & bit)
      free((void *)old);
  }
  *c = *work;
}

static int set_string(cfg_t *c, const cfg_row *r, const char *s) {
  char *copy = strdup(s);
  if (!copy) return NS_ENOMEM;
  uint64_t bit = UINT64_C(1) << cfg__index(r);
  const char **field = CFG__FIELD(c, r, const char *);
  if (c->owned_ & bit) free((void *)*field);
  *field = copy;
  c->owned_ |= bit;
  return 0;
}

/* Store a checked value into c's field for r. */
static int store(cfg_t *c, const cfg_row *r, const cfg__val *v) {
  switch (r->type) {
  case CFG_BOOL: *CFG__FIELD(c, r, bool) = v->i != 0; break;
  case CFG_INT:
  case CFG_ENUM: *CFG__FIELD(c, r, int) = (int)v->i; break;
  case CFG_INT64: *CFG__FIELD(c, r, int64_t) = v->i; break;
  case CFG_DOUBLE: *CFG__FIELD(c, r, double) = v->d; break;
  case CFG_STRING: return set_string(c, r, v->s);
  }
  return 0;
}

static int enum_lookup(const cfg_row *r, const char *s, int64_t *out) {
  for (size_t k = 0; r->names[k]; k++) {
    if (strcmp(r->names[k], s) == 0) {
      *out = r->values[k];
      return 0;
    }
  }
  return -1;
}

static void unknown_key(cfg__errs *e, const char *origin, const char *name, const char *note) {
  char shown[100], hint[64];
  cfg__sanitize(name, shown, sizeof shown);
  if (cfg__suggest(name, hint, sizeof hint))
    cfg__err_add(e, origin, "unknown setting '%s' (did you mean '%s'?)%s", shown, hint, note);
  else
    cfg__err_add(e, origin, "unknown setting '%s'%s", shown, note);
}

/* ---- JSON ---- */

typedef struct loader {
  cfg_t *c;
  cfg__errs *e;
  const char *origin;
  int oom;
} loader;

/* "a string \"8080\"", "an object", ... for type errors. */
static void describe_json(const cJSON *it, char *buf, size_t n) {
  char tmp[100];
  if (cJSON_IsString(it)) {
    cfg__sanitize(it->valuestring, tmp, sizeof tmp);
    snprintf(buf, n, "a string \"%s\"", tmp);
  } else if (cJSON_IsNumber(it)) {
    cfg__fmt_double(it->valuedouble, tmp, sizeof tmp);
    snprintf(buf, n, "a number %s", tmp);
  } else if (cJSON_IsBool(it)) {
    snprintf(buf, n, "a boolean %s", cJSON_IsTrue(it) ? "true" : "false");
  } else if (cJSON_IsNull(it)) {
    snprintf(buf, n, "null");
  } else if (cJSON_IsArray(it)) {
    snprintf(buf, n, "an array");
  } else if (cJSON_IsObject(it)) {
    snprintf(buf, n, "an object");
  } else {
    snprintf(buf, n, "an unknown value");
  }
}

static const char *expected_json(const cfg_row *r) {
  switch (r->type) {
  case CFG_BOOL: return "a boolean";
  case CFG_INT:
  case CFG_INT64: return "an integer";
  case CFG_DOUBLE: return "a number";
  case CFG_STRING: return "a string";
  case CFG_ENUM: return "a string";
  }
  return "?";
}

static void apply_json(loader *L, const cfg_row *r, const cJSON *it) {
  cfg__val v = {0, 0, ""};
  char why[400], num[64], got[160], range[160];
  int type_ok = 0;
  switch (r->type) {
  case CFG_BOOL: type_ok = cJSON_IsBool(it); break;
  case CFG_INT:
  case CFG_INT64:
  case CFG_DOUBLE: type_ok = cJSON_IsNumber(it); break;
  case CFG_STRING:
  case CFG_ENUM: type_ok = cJSON_IsString(it) && it->valuestring; break;
  }
  if (!type_ok) {
    describe_json(it, got, sizeof got);
    if (r->type == CFG_ENUM) {
      cfg__fmt_range(r, range, sizeof range);
      cfg__err_add(L->e, L->origin, "%s: expected a string (one of: %s), got %s", r->name, range,
                   got);
    } else {
      cfg__err_add(L->e, L->origin, "%s: expected %s, got %s", r->name, expected_json(r), got);
    }
    return;
  }
  switch (r->type) {
  case CFG_BOOL: v.i = cJSON_IsTrue(it); break;
  case CFG_INT:
  case CFG_INT64:
    cfg__fmt_double(it->valuedouble, num, sizeof num);
    if (isfinite(it->valuedouble) && it->valuedouble != floor(it->valuedouble)) {
      cfg__err_add(L->e, L->origin, "%s: %s is not an integer", r->name, num);
      return;
    }
    /* outside [min, max] as a double: report before converting, which would overflow */
    if (!(it->valuedouble >= (double)r->min_i && it->valuedouble <= (double)r->max_i)) {
      cfg__fmt_range(r, range, sizeof range);
      cfg__err_add(L->e, L->origin, "%s: %s is out of range %s", r->name, num, range);
      return;
    }
    v.i = (int64_t)it->valuedouble;
    break;
  case CFG_DOUBLE:
    v.d = it->valuedouble;
    if (!isfinite(v.d)) {
      cfg__fmt_double(v.d, num, sizeof num);
      cfg__err_add(L->e, L->origin, "%s: %s is not a finite number", r->name, num);
      return;
    }
    break;
  case CFG_STRING: v.s = it->valuestring; break;
  case CFG_ENUM:
    if (enum_lookup(r, it->valuestring, &v.i) != 0) {
      cfg__sanitize(it->valuestring, got, sizeof got);
      cfg__fmt_range(r, range, sizeof range);
      cfg__err_add(L->e, L->origin, "%s: '%s' is not one of: %s", r->name, got, range);
      return;
    }
    break;
  }
  if (cfg__check(r, &v, why, sizeof why) != 0) {
    cfg__err_add(L->e, L->origin, "%s: %s", r->name, why);
    return;
  }
  if (store(L->c, r, &v) != 0) L->oom = 1;
}

/* Walk one object whose dotted path is prefix ("" at the top); keep going after errors so
 * that every problem in the file is reported. */
static void walk(loader *L, const cJSON *obj, const char *prefix) {
  for (const cJSON *it = obj->child; it; it = it->next) {
    const char *key = it->string ? it->string : "";
    char name[NAME_MAX_BYTES];
    int w = snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", key);
    int dup = 0;
    for (const cJSON *prev = obj->child; prev != it; prev = prev->next)
      if (prev->string && strcmp(prev->string, key) == 0) dup = 1;
    if (dup) {
      char shown[100];
      cfg__sanitize(name, shown, sizeof shown);
      cfg__err_add(L->e, L->origin, "%s: duplicate key", shown);
      continue;
    }
    if (w < 0 || (size_t)w >= sizeof name) {
      unknown_key(L->e, L->origin, name, "");
      continue;
    }
    if (strchr(key, '.')) {
      unknown_key(L->e, L->origin, name, " (write nested objects, not dotted keys)");
      continue;
    }
    const cfg_row *r = cfg__find(name, (size_t)w);
    if (r) {
      apply_json(L, r, it);
    } else if (cfg__is_section(name, (size_t)w)) {
      if (cJSON_IsObject(it)) {
        walk(L, it, name);
      } else {
        char got[160];
        describe_json(it, got, sizeof got);
        cfg__err_add(L->e, L->origin, "%s: expected an object, got %s", name, got);
      }
    } else {
      unknown_key(L->e, L->origin, name, "");
    }
  }
}

/* Report malformed JSON as ORIGIN:LINE:COL, from cJSON's error position. */
static void syntax_error(cfg__errs *e, const char *origin, const char *text, size_t len,
                         size_t pos) {
  size_t line = 1, col = 1;
  if (pos > len) pos = len;
  for (size_t i = 0; i < pos; i++) {
    if (text[i] == '\n')
      line++, col = 1;
    else
      col++;
  }
  char near[32], where[300];
  size_t nl = 0;
  while (pos + nl < len && nl < 20 && text[pos + nl] != '\n' && text[pos + nl] != '\r')
    nl++;
  memcpy(near, text + pos, nl);
  near[nl] = '\0';
  char shown[40];
  cfg__sanitize(near, shown, sizeof shown);
  snprintf(where, sizeof where, "%s:%zu:%zu", origin ? origin : "<json>", line, col);
  if (pos >= len)
    cfg__err_add(e, where, "malformed JSON: unexpected end of input");
  else if (nl == 0)
    cfg__err_add(e, where, "malformed JSON at the end of the line");
  else
    cfg__err_add(e, where, "malformed JSON near '%s'", shown);
}

/* partial: commit the valid values even when others failed (config check, so that the
 * cross-field rules still see the file's values). */
static int load_json(cfg_t *c, const char *json, size_t len, const char *origin, char *err,
                     size_t errlen, int partial) {
  cfg__errs e;
  cfg__errs_init(&e, err, errlen);
  if (!json) len = 0;
  const char *nul = len ? memchr(json, '\0', len) : NULL;
  if (nul) {
    cfg__err_add(&e, origin, "malformed JSON: NUL byte at offset %zu", (size_t)(nul - json));
    return NS_EINVAL;
  }
  char *text = malloc(len + 1);
  if (!text) {
    cfg__err_add(&e, origin, "out of memory");
    return NS_ENOMEM;
  }
  if (len) memcpy(text, json, len);
  text[len] = '\0';
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
  if (!root) {
    syntax_error(&e, origin, text, len, end ? (size_t)(end - text) : 0);
    free(text);
    return NS_EINVAL;
  }
  free(text);

  int rc = 0;
  if (!cJSON_IsObject(root)) {
    char got[160];
    describe_json(root, got, sizeof got);
    cfg__err_add(&e, origin, "expected a JSON object at the top level, got %s", got);
    rc = NS_EINVAL;
    goto out;
  }
  cfg_t work;
  work_begin(c, &work);
  loader L = {.c = &work, .e = &e, .origin = origin, .oom = 0};
  walk(&L, root, "");
  if (L.oom || e.count) {
    if (L.oom) cfg__err_add(&e, origin, "out of memory");
    rc = L.oom ? NS_ENOMEM : NS_EINVAL;
    if (!partial || L.oom) {
      free_owned(&work);
      goto out;
    }
  }
  work_commit(c, &work);
out:
  cJSON_Delete(root);
  return rc;
}

int cfg_load_json(cfg_t *c, const char *json, size_t len, const char *origin, char *err,
                  size_t errlen) {
  return load_json(c, json, len, origin, err, errlen, 0);
}

int cfg__load_file(cfg_t *c, const char *path, char *err, size_t errlen, int partial) {
  cfg__errs e;
  cfg__errs_init(&e, err, errlen);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int rc = errno == ENOENT ? NS_ENOENT : NS_EIO;
    cfg__err_add(&e, path, "cannot open: %s", strerror(errno));
    return rc;
  }
  int rc = 0;
  char *buf = NULL;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    cfg__err_add(&e, path, "cannot stat: %s", strerror(errno));
    rc = NS_EIO;
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    cfg__err_add(&e, path, "not a regular file");
    rc = NS_EIO;
    goto out;
  }
  if (st.st_size > (off_t)MAX_FILE_BYTES) {
    cfg__err_add(&e, path, "file too large (%lld bytes, limit %u)", (long long)st.st_size,
                 MAX_FILE_BYTES);
    rc = NS_EINVAL;
    goto out;
  }
  size_t cap = (size_t)st.st_size + 1, len = 0;
  buf = malloc(cap);
  if (!buf) {
    cfg__err_add(&e, path, "out of memory");
    rc = NS_ENOMEM;
    goto out;
  }
  for (;;) { /* read to EOF: the file may have grown since fstat, up to cap */
    ssize_t r = read(fd, buf + len, cap - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      cfg__err_add(&e, path, "cannot read: %s", strerror(errno));
      rc = NS_EIO;
      goto out;
    }
    if (r == 0) break;
    len += (size_t)r;
    if (len == cap) {
      cfg__err_add(&e, path, "file changed while being read");
      rc = NS_EIO;
      goto out;
    }
  }
  rc = load_json(c, buf, len, path, err, errlen, partial);
out:
  free(buf);
  close(fd);
  return rc;
}

int cfg_load_file(cfg_t *c, const char *path, char *err, size_t errlen) {
  return cfg__load_file(c, path, err, errlen, 0);
}

/* ---- --set key=value ---- */

static int parse_set_value(const cfg_row *r, const char *s, cfg__val *v, cfg__errs *e) {
  char shown[100], range[160];
  char *end;
  long long ll;
  cfg__sanitize(s, shown, sizeof shown);
  switch (r->type) {
  case CFG_BOOL:
    if (!strcasecmp(s, "true") || !strcmp(s, "1") || !strcasecmp(s, "yes"))
      v->i = 1;
    else if (!strcasecmp(s, "false") || !strcmp(s, "0") || !strcasecmp(s, "no"))
      v->i = 0;
    else {
      cfg__err_add(e, NULL, "%s: expected a boolean (true/false/1/0/yes/no), got '%s'", r->name,
                   shown);
      return -1;
    }
    return 0;
  case CFG_INT:
  case CFG_INT64:
    if (*s == '\0' || isspace((unsigned char)*s)) goto not_int;
    errno = 0;
    ll = strtoll(s, &end, 10);
    if (*end != '\0') {
      double d = strtod(s, &end);
      if (*end == '\0' && isfinite(d)) {
        cfg__err_add(e, NULL, "%s: %s is not an integer", r->name, shown);
        return -1;
      }
      goto not_int;
    }
    if (errno == ERANGE) {
      cfg__fmt_range(r, range, sizeof range);
      cfg__err_add(e, NULL, "%s: %s is out of range %s", r->name, shown, range);
      return -1;
    }
    v->i = ll;
    return 0;
  not_int:
    cfg__err_add(e, NULL, "%s: expected an integer, got '%s'", r->name, shown);
    return -1;
  case CFG_DOUBLE:
    if (*s == '\0' || isspace((unsigned char)*s)) goto not_num;
    v->d = strtod(s, &end);
    if (*end != '\0') goto not_num;
    if (!isfinite(v->d)) {
      cfg__err_add(e, NULL, "%s: %s is not a finite number", r->name, shown);
      return -1;
    }
    return 0;
  not_num:
    cfg__err_add(e, NULL, "%s: expected a number, got '%s'", r->name, shown);
    return -1;
  case CFG_STRING: v->s = s; return 0;
  case CFG_ENUM:
    if (enum_lookup(r, s, &v->i) == 0) return 0;
    cfg__fmt_range(r, range, sizeof range);
    cfg__err_add(e, NULL, "%s: '%s' is not one of: %s", r->name, shown, range);
    return -1;
  }
  return -1;
}

int cfg_set(cfg_t *c, const char *assignment, char *err, size_t errlen) {
  cfg__errs e;
  cfg__errs_init(&e, err, errlen);
  const char *eq = assignment ? strchr(assignment, '=') : NULL;
  if (!eq || eq == assignment) {
    char shown[100];
    cfg__sanitize(assignment ? assignment : "", shown, sizeof shown);
    cfg__err_add(&e, NULL, "expected key=value, got '%s'", shown);
    return NS_EINVAL;
  }
  size_t klen = (size_t)(eq - assignment);
  const cfg_row *r = cfg__find(assignment, klen);
  if (!r) {
    char name[NAME_MAX_BYTES];
    snprintf(name, sizeof name, "%.*s", (int)(klen < sizeof name ? klen : sizeof name - 1),
             assignment);
    unknown_key(&e, NULL, name, "");
    return NS_EINVAL;
  }
  cfg__val v = {0, 0, ""};
  char why[400];
  if (parse_set_value(r, eq + 1, &v, &e) != 0) return NS_EINVAL;
  if (cfg__check(r, &v, why, sizeof why) != 0) {
    cfg__err_add(&e, NULL, "%s: %s", r->name, why);
    return NS_EINVAL;
  }
  cfg_t work;
  work_begin(c, &work);
  if (store(&work, r, &v) != 0) {
    cfg__err_add(&e, NULL, "out of memory");
    return NS_ENOMEM;
  }
  work_commit(c, &work);
  return 0;
}

/* ---- validation ---- */

int cfg_validate(const cfg_t *c, char *err, size_t errlen) {
  cfg__errs e;
  cfg__errs_init(&e, err, errlen);
  size_t n;
  const cfg_row *rows = cfg_rows(&n);
  char why[400];
  for (size_t i = 0; i < n; i++) {
    cfg__val v = cfg__get(c, &rows[i]);
    if (cfg__check(&rows[i], &v, why, sizeof why) != 0)
      cfg__err_add(&e, NULL, "%s: %s", rows[i].name, why);
  }
  /* a step must be able to hold at least one whole KV page of prefill */
  if (c->engine.max_batch_tokens < c->engine.kv_page_tokens)
    cfg__err_add(&e, NULL,
                 "engine.max_batch_tokens (%d) must be at least engine.kv_page_tokens (%d)",
                 c->engine.max_batch_tokens, c->engine.kv_page_tokens);
  return e.count ? NS_EINVAL : 0;
}
