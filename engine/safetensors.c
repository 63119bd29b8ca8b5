/* safetensors.c — the .safetensors header parser and validator (st_open_mem),
 * file mapping (st_open) and sharded checkpoints behind an index (st_set_open). */
#include "safetensors.h"

#include "ns_err.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct st_file {
  char *path;
  const uint8_t *base; /* the whole file */
  size_t len;
  void *map;    /* non-NULL when st_open mapped it */
  st_tensor *t; /* sorted by name */
  size_t n;
};

typedef struct st_entry {
  char *name;
  size_t file;
} st_entry;

struct st_set {
  char *single;     /* model.safetensors path, or NULL */
  char *index_path; /* model.safetensors.index.json path, or NULL */
  st_file **files;
  size_t nfiles;
  st_entry *map; /* sorted by name; empty for a single file */
  size_t nmap;
};

#define MAX_INDEX_BYTES (64u << 20)
#define MAX_EXACT_INT   9007199254740992.0 /* 2^53: larger JSON numbers lose digits */

/* ---- header parsing --------------------------------------------------------- */

/* A JSON number that is a non-negative integer representable exactly. */
static int json_uint(const cJSON *j, uint64_t *out, const char **why) {
  if (!cJSON_IsNumber(j)) {
    *why = "not a number";
    return -1;
  }
  double d = j->valuedouble;
  if (d < 0) {
    *why = "negative";
    return -1;
  }
  if (!(d <= MAX_EXACT_INT)) { /* also catches NaN and inf */
    *why = "too large";
    return -1;
  }
  if (d != floor(d)) {
    *why = "not an integer";
    return -1;
  }
  *out = (uint64_t)d;
  return 0;
}

/* 0 and *dt for the supported dtypes, 1 for a known but unsupported one, -1 otherwise. */
static int parse_dtype(const char *s, ns_dtype *dt) {
  static const char *const other[] = {"F64",     "I8",  "I16",     "I32",     "I64",     "U8",
                                      "U16",     "U32", "U64",     "BOOL",    "F8_E4M3", "F8_E5M2",
                                      "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};
  if (strcmp(s, "BF16") == 0)
    *dt = NS_BF16;
  else if (strcmp(s, "F16") == 0)
    *dt = NS_F16;
  else if (strcmp(s, "F32") == 0)
    *dt = NS_F32;
  else {
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
      if (strcmp(s, other[i]) == 0) return 1;
    return -1;
  }
  return 0;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static int cmp_offset(const void *a, const void *b) {
  const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Validate one header entry into t (name already set). */
static int parse_entry(const char *file, const cJSON *e, const uint8_t *data, uint64_t datalen,
                       st_tensor *t, char *err, size_t errlen) {
  const char *nm = t->name, *why = "";
  if (!cJSON_IsObject(e))
    return ns_errf(err, errlen, NS_EFORMAT, "%s: tensor '%.200s': entry is not a JSON object", file,
                   nm);
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  if (!dt || !sh || !off)
    return ns_errf(err, errlen, NS_EFORMAT, "%s: tensor '%.200s': missing field '%s'", file, nm,
                   !dt   ? "dtype"
                   : !sh ? "shape"
                         : "data_offsets");
  if (!cJSON_IsString(dt))
    return ns_errf(err, errlen, NS_EFORMAT, "%s: tensor '%.200s': dtype is not a string", file, nm);
  int r = parse_dtype(dt->valuestring, &t->dtype);
  if (r > 0)
    return ns_errf(err, errlen, NS_EUNSUPPORTED,
                   "%s: tensor '%.200s': dtype %s is not supported (BF16, F16 or F32 only)", file,
                   nm, dt->valuestring);
  if (r < 0)
    return ns_errf(err, errlen, NS_EFORMAT, "%s: tensor '%.200s': unknown dtype '%.40s'", file, nm,
                   dt->valuestring);
  if (!cJSON_IsArray(sh))
    return ns_errf(err, errlen, NS_EFORMAT, "%s: tensor '%.200s': shape is not an array", file, nm);
  int nd = cJSON_GetArraySize(sh);
  if (nd > ST_MAX_DIMS)
    return ns_errf(err, errlen, NS_EFORMAT, "%s: tensor '%.200s': shape has %d dimensions (max %d)",
                   file, nm, nd, ST_MAX_DIMS);
  t->ndim = nd;
  uint64_t numel = 1;
  int overflow = 0, k = 0;
  const cJSON *d;
  cJSON_ArrayForEach(d, sh) {
    uint64_t v;
    if (json_uint(d, &v, &why))
      return ns_errf(err, errlen, NS_EFORMAT, "%s: tensor '%.200s': shape[%d] is %s", file, nm, k,
                     why);
    t->shape[k++] = (int64_t)v;
    if (__builtin_mul_overflow(numel, v, &numel)) overflow = 1;
  }
  uint64_t nbytes;
  if (overflow || __builtin_mul_overflow(numel, (uint64_t)ns_dtype_size(t->dtype), &nbytes) ||
      nbytes > SIZE_MAX)
    return ns_errf(err, errlen, NS_EFORMAT, "%s: tensor '%.200s': element count overflows", file,
                   nm);
  if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
    return ns_errf(err, errlen, NS_EFORMAT,
                   "%s: tensor '%.200s': data_offsets is not an array of two integers", file, nm);
  uint64_t b, en;
  if (json_uint(off->child, &b, &why) || json_uint(off->child->next, &en, &why))
    return ns_errf(err, errlen, NS_EFORMAT, "%s: tensor '%.200s': data_offsets value is %s", file,
                   nm, why);
  if (b > en)
    return ns_errf(err, errlen, NS_EFORMAT,
                   "%s: tensor '%.200s': data_offsets begin %llu > end %llu", file, nm,
                   (unsigned long long)b, (unsigned long long)en);
  if (en > datalen)
    return ns_errf(
        err, errlen, NS_EFORMAT,
        "%s: tensor '%.200s': data_offsets end %llu is past the data section (%llu bytes)", file,
        nm, (unsigned long long)en, (unsigned long long)datalen);
  if (en - b != nbytes)
    return ns_errf(err, errlen, NS_EFORMAT,
                   "%s: tensor '%.200s': %llu data bytes, but shape and dtype need %llu", file, nm,
                   (unsigned long long)(en - b), (unsigned long long)nbytes);
  t->offset = b;
  t->nbytes = (size_t)nbytes;
  t->data = data + b;
  return 0;
}

static int check_layout(st_file *st, char *err, size_t errlen) {
  if (st->n == 0) return 0;
  qsort(st->t, st->n, sizeof *st->t, cmp_name);
  for (size_t i = 1; i < st->n; i++)
    if (strcmp(st->t[i - 1].name, st->t[i].name) == 0)
      return ns_errf(err, errlen, NS_EFORMAT, "%s: tensor '%.200s': duplicate name", st->path,
                     st->t[i].name);
  const st_tensor **by = malloc(st->n * sizeof *by);
  if (!by) return ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", st->path);
  for (size_t i = 0; i < st->n; i++)
    by[i] = &st->t[i];
  qsort(by, st->n, sizeof *by, cmp_offset);
  /* Empty tensors own no bytes, so they cannot overlap anything. */
  const st_tensor *prev = NULL;
  int rc = 0;
  for (size_t i = 0; i < st->n && rc == 0; i++) {
    if (by[i]->nbytes == 0) continue;
    if (prev && by[i]->offset < prev->offset + prev->nbytes)
      rc = ns_errf(err, errlen, NS_EFORMAT, "%s: tensor '%.200s': data overlaps tensor '%.200s'",
                   st->path, by[i]->name, prev->name);
    prev = by[i];
  }
  free(by);
  return rc;
}

static int parse_header(st_file *st, char *err, size_t errlen) {
  const char *file = st->path;
  if (st->len < 8)
    return ns_errf(err, errlen, NS_EFORMAT,
                   "%s: file is %zu bytes, shorter than the 8-byte header length", file, st->len);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--)
    hlen = (hlen << 8) | st->base[i];
  if (hlen > ST_MAX_HEADER_BYTES)
    return ns_errf(err, errlen, NS_EFORMAT, "%s: header length %llu is absurd (limit %u bytes)",
                   file, (unsigned long long)hlen, ST_MAX_HEADER_BYTES);
  if (hlen > st->len - 8)
    return ns_errf(err, errlen, NS_EFORMAT,
                   "%s: header length %llu runs past the end of the file (%zu bytes)", file,
                   (unsigned long long)hlen, st->len);
  if (hlen < 2) return ns_errf(err, errlen, NS_EFORMAT, "%s: header is not a JSON object", file);
  /* A NUL-terminated copy: cJSON then never reads past the buffer. */
  char *text = malloc(hlen + 1);
  if (!text) return ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory for the header", file);
  memcpy(text, st->base + 8, hlen);
  text[hlen] = '\0';
  int rc = 0;
  cJSON *root = NULL;
  const char *end = NULL;
  if (memchr(text, '\0', hlen)) {
    rc = ns_errf(err, errlen, NS_EFORMAT, "%s: header contains a NUL byte", file);
    goto out;
  }
  root = cJSON_ParseWithLengthOpts(text, hlen + 1, &end, 0);
  if (!root) {
    /* cJSON's error pointer is global: use it only when it points into our text */
    uintptr_t e = (uintptr_t)cJSON_GetErrorPtr(), t0 = (uintptr_t)text;
    size_t at = e >= t0 && e <= t0 + hlen ? (size_t)(e - t0) : 0;
    rc = ns_errf(err, errlen, NS_EFORMAT, "%s: header is not valid JSON (near byte %zu)", file, at);
    goto out;
  }
  for (; end && *end; end++)
    if (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\r') {
      rc = ns_errf(err, errlen, NS_EFORMAT, "%s: trailing bytes after the JSON header", file);
      goto out;
    }
  if (!cJSON_IsObject(root)) {
    rc = ns_errf(err, errlen, NS_EFORMAT, "%s: header is not a JSON object", file);
    goto out;
  }
  size_t n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, root) n++;
  st->t = calloc(n ? n : 1, sizeof *st->t);
  if (!st->t) {
    rc = ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", file);
    goto out;
  }
  const uint8_t *data = st->base + 8 + hlen;
  uint64_t datalen = st->len - 8 - hlen;
  cJSON_ArrayForEach(e, root) {
    if (!e->string || !e->string[0]) {
      rc = ns_errf(err, errlen, NS_EFORMAT, "%s: header has an empty tensor name", file);
      goto out;
    }
    if (strcmp(e->string, "__metadata__") == 0) {
      if (!cJSON_IsObject(e)) {
        rc = ns_errf(err, errlen, NS_EFORMAT, "%s: __metadata__ is not a JSON object", file);
        goto out;
      }
      continue;
    }
    st_tensor *t = &st->t[st->n];
    t->name = strdup(e->string);
    if (!t->name) {
      rc = ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", file);
      goto out;
    }
    st->n++;
    rc = parse_entry(file, e, data, datalen, t, err, errlen);
    if (rc) goto out;
  }
  rc = check_layout(st, err, errlen);
out:
  cJSON_Delete(root);
  free(text);
  return rc;
}

/* ---- st_file ------------------------------------------------------------------ */

static int open_common(st_file *st, const char *name, char *err, size_t errlen) {
  st->path = strdup(name ? name : "(buffer)");
  if (!st->path) return ns_errf(err, errlen, NS_ENOMEM, "out of memory");
  return parse_header(st, err, errlen);
}

int st_open_mem(const void *buf, size_t len, const char *name, st_file **out, char *err,
                size_t errlen) {
  *out = NULL;
  st_file *st = calloc(1, sizeof *st);
  if (!st) return ns_errf(err, errlen, NS_ENOMEM, "out of memory");
  st->base = buf;
  st->len = buf ? len : 0;
  int rc = open_common(st, name, err, errlen);
  if (rc) {
    st_close(st);
    return rc;
  }
  *out = st;
  return 0;
}

int st_open(const char *path, st_file **out, char *err, size_t errlen) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ns_errf(err, errlen, errno == ENOENT ? NS_ENOENT : NS_EIO, "%s: cannot open: %s", path,
                   strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return ns_errf(err, errlen, NS_EIO, "%s: not a regular file", path);
  }
  st_file *st = calloc(1, sizeof *st);
  if (!st) {
    close(fd);
    return ns_errf(err, errlen, NS_ENOMEM, "out of memory");
  }
  st->len = (size_t)sb.st_size;
  if (st->len > 0) {
    void *p = mmap(NULL, st->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      close(fd);
      free(st);
      return ns_errf(err, errlen, NS_EIO, "%s: cannot map %zu bytes: %s", path, (size_t)sb.st_size,
                     strerror(e));
    }
    st->map = p;
    st->base = p;
  }
  close(fd);
  int rc = open_common(st, path, err, errlen);
  if (rc) {
    st_close(st);
    return rc;
  }
  *out = st;
  return 0;
}

void st_close(st_file *st) {
  if (!st) return;
  for (size_t i = 0; i < st->n; i++)
    free((char *)st->t[i].name);
  free(st->t);
  if (st->map) munmap(st->map, st->len);
  free(st->path);
  free(st);
}

size_t st_count(const st_file *st) {
  return st->n;
}

const st_tensor *st_at(const st_file *st, size_t i) {
  return i < st->n ? &st->t[i] : NULL;
}

const char *st_path(const st_file *st) {
  return st->path;
}

const st_tensor *st_find(const st_file *st, const char *name) {
  size_t lo = 0, hi = st->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(st->t[mid].name, name);
    if (c == 0) return &st->t[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* ---- sharded checkpoints ----------------------------------------------------------- */

static char *join(const char *dir, const char *file) {
  size_t n = strlen(dir) + strlen(file) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, file);
  return p;
}

static int read_text(const char *path, char **out, char *err, size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return ns_errf(err, errlen, NS_EIO, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  int rc = 0;
  while (buf) {
    if (len + 1 >= cap) {
      if (cap >= MAX_INDEX_BYTES) {
        rc = ns_errf(err, errlen, NS_EFORMAT, "%s: larger than %u bytes", path, MAX_INDEX_BYTES);
        break;
      }
      char *nb = realloc(buf, cap * 2);
      if (!nb) break;
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + len, 1, cap - 1 - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) rc = ns_errf(err, errlen, NS_EIO, "%s: read error", path);
      break;
    }
  }
  fclose(f);
  if (!buf) return ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", path);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[len] = '\0';
  *out = buf;
  return 0;
}

static int cmp_entry(const void *a, const void *b) {
  return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int valid_shard_name(const char *s) {
  return s[0] && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Parse the index into set->map (file fields index into the sorted shard list). */
static int open_index(st_set *set, const char *dir, char *err, size_t errlen) {
  const char *ip = set->index_path;
  char *text;
  int rc = read_text(ip, &text, err, errlen);
  if (rc) return rc;
  cJSON *root = cJSON_Parse(text);
  free(text);
  char **names = NULL;
  if (!cJSON_IsObject(root)) {
    rc = ns_errf(err, errlen, NS_EFORMAT, "%s: not a JSON object", ip);
    goto out;
  }
  const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
  if (!cJSON_IsObject(wm) || !wm->child) {
    rc = ns_errf(err, errlen, NS_EFORMAT, "%s: weight_map: %s", ip,
                 wm ? "not a non-empty JSON object" : "missing");
    goto out;
  }
  size_t n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, wm) n++;
  set->map = calloc(n, sizeof *set->map);
  names = calloc(n, sizeof *names);
  if (!set->map || !names) {
    rc = ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", ip);
    goto out;
  }
  cJSON_ArrayForEach(e, wm) {
    if (!cJSON_IsString(e) || !valid_shard_name(e->valuestring)) {
      rc = ns_errf(err, errlen, NS_EFORMAT,
                   "%s: weight_map: tensor '%.200s': shard is not a file name in the folder", ip,
                   e->string);
      goto out;
    }
    names[set->nmap] = e->valuestring;
    set->map[set->nmap].name = strdup(e->string);
    if (!set->map[set->nmap++].name) {
      rc = ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", ip);
      goto out;
    }
  }
  qsort(set->map, n, sizeof *set->map, cmp_entry);
  for (size_t i = 1; i < n; i++)
    if (strcmp(set->map[i - 1].name, set->map[i].name) == 0) {
      rc = ns_errf(err, errlen, NS_EFORMAT, "%s: weight_map: tensor '%.200s': listed twice", ip,
                   set->map[i].name);
      goto out;
    }
  /* Shard files, each once, in name order. */
  qsort(names, n, sizeof *names, cmp_str);
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (u == 0 || strcmp(names[u - 1], names[i]) != 0) names[u++] = names[i];
  set->files = calloc(u, sizeof *set->files);
  if (!set->files) {
    rc = ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", ip);
    goto out;
  }
  for (size_t i = 0; i < u; i++) {
    char *p = join(dir, names[i]);
    if (!p) {
      rc = ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", ip);
      goto out;
    }
    rc = st_open(p, &set->files[i], err, errlen);
    free(p);
    if (rc) goto out;
    set->nfiles++;
  }
  /* Resolve each entry to its shard and check the tensor is there. */
  cJSON_ArrayForEach(e, wm) {
    const char **hit = bsearch(&e->valuestring, names, u, sizeof *names, cmp_str);
    size_t f = (size_t)((char **)hit - names);
    st_entry key = {e->string, 0};
    st_entry *ent = bsearch(&key, set->map, n, sizeof *set->map, cmp_entry);
    ent->file = f;
    if (!st_find(set->files[f], e->string)) {
      rc = ns_errf(err, errlen, NS_EFORMAT, "%s: weight_map: tensor '%.200s': not found in %s", ip,
                   e->string, st_path(set->files[f]));
      goto out;
    }
  }
out:
  free(names);
  cJSON_Delete(root);
  return rc;
}

int st_set_open(const char *dir, st_set **out, char *err, size_t errlen) {
  *out = NULL;
  st_set *set = calloc(1, sizeof *set);
  if (!set) return ns_errf(err, errlen, NS_ENOMEM, "out of memory");
  int rc = NS_ENOMEM;
  set->single = join(dir, "model.safetensors");
  set->index_path = join(dir, "model.safetensors.index.json");
  if (!set->single || !set->index_path) goto err;
  if (access(set->single, F_OK) == 0) {
    free(set->index_path);
    set->index_path = NULL;
    set->files = calloc(1, sizeof *set->files);
    if (!set->files) goto err;
    rc = st_open(set->single, &set->files[0], err, errlen);
    if (rc) goto err_msg;
    set->nfiles = 1;
  } else if (access(set->index_path, F_OK) == 0) {
    free(set->single);
    set->single = NULL;
    rc = open_index(set, dir, err, errlen);
    if (rc) goto err_msg;
  } else {
    rc = ns_errf(err, errlen, NS_ENOENT,
                 "%s: no model.safetensors or model.safetensors.index.json in the folder", dir);
    goto err_msg;
  }
  *out = set;
  return 0;
err:
  ns_errf(err, errlen, rc, "%s: out of memory", dir);
err_msg:
  st_set_close(set);
  return rc;
}

void st_set_close(st_set *set) {
  if (!set) return;
  for (size_t i = 0; i < set->nfiles; i++)
    st_close(set->files[i]);
  free(set->files);
  for (size_t i = 0; i < set->nmap; i++)
    free(set->map[i].name);
  free(set->map);
  free(set->single);
  free(set->index_path);
  free(set);
}

const st_tensor *st_set_find(const st_set *set, const char *name, const char **file) {
  if (set->single) {
    if (file) *file = set->single;
    return st_find(set->files[0], name);
  }
  if (file) *file = set->index_path;
  st_entry key = {(char *)name, 0};
  const st_entry *e = bsearch(&key, set->map, set->nmap, sizeof *set->map, cmp_entry);
  if (!e) return NULL;
  if (file) *file = st_path(set->files[e->file]);
  return st_find(set->files[e->file], name);
}

size_t st_set_nfiles(const st_set *set) {
  return set->nfiles;
}

const st_file *st_set_file(const st_set *set, size_t i) {
  return i < set->nfiles ? set->files[i] : NULL;
}
