/* mk_weights.c — seeded random weights of a model_cfg streamed into
 * model.safetensors or HF-style shards + index (mk__weights). */
#include "mk_int.h"

#include "ns_err.h"
#include "ns_log.h"
#include "ns_rng.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WBUF_BYTES (4u << 20)
#define QBITS      16 /* normal quantiles are looked up by 16 random bits */
#define QN         (1u << QBITS)
#define INIT_STD   0.02 /* HF initializer_range */
#define NORM_STD   0.05 /* norms: 1.0 plus this much noise, so they are not all ones */

/* ---- random numbers --------------------------------------------------------- */

/* Each tensor has its own stream, from the seed and its name: the values of a
 * tensor do not depend on the order or sharding of the others. */
static void tensor_rng(ns_rng *r, uint64_t seed, const char *name) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (const char *p = name; *p; p++)
    h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
  ns_rng_seed(r, seed ^ h);
}

/* Inverse normal CDF: Acklam's rational approximation, one Halley step. */
static double norm_ppf(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  double x, q, r;
  if (p < 0.02425) {
    q = sqrt(-2 * log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - 0.02425) {
    q = p - 0.5;
    r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    q = sqrt(-2 * log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  double e = 0.5 * erfc(-x / sqrt(2)) - p;
  double u = e * sqrt(2 * M_PI) * exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

/* QN equiprobable normal quantiles of mean + std * N(0,1), encoded in dtype dt. */
typedef struct qtable {
  uint8_t *bytes;
  size_t es;
} qtable;

static int qtable_make(qtable *t, double mean, double std, ns_dtype dt) {
  t->es = ns_dtype_size(dt);
  t->bytes = malloc((size_t)QN * t->es);
  if (!t->bytes) return NS_ENOMEM;
  for (uint32_t i = 0; i < QN; i++) {
    float v = (float)(mean + std * norm_ppf((i + 0.5) / QN));
    uint16_t h = dt == NS_BF16 ? ns_f32_to_bf16(v) : ns_f32_to_f16(v);
    if (dt == NS_F32)
      memcpy(t->bytes + i * 4, &v, 4);
    else
      memcpy(t->bytes + i * 2, &h, 2);
  }
  return 0;
}

/* n (a multiple of 4, or the tensor's last chunk) values into dst. */
static void gen(ns_rng *r, const qtable *t, uint8_t *dst, size_t n) {
  const size_t es = t->es;
  for (size_t i = 0; i < n; i += 4) {
    uint64_t x = ns_rng_next(r);
    size_t k = n - i < 4 ? n - i : 4;
    for (size_t j = 0; j < k; j++, x >>= QBITS) {
      const uint8_t *src = t->bytes + (x & (QN - 1)) * es;
      if (es == 2)
        memcpy(dst + (i + j) * 2, src, 2);
      else
        memcpy(dst + (i + j) * 4, src, 4);
    }
  }
}

/* ---- the tensor list --------------------------------------------------------------- */

typedef struct wspec {
  char name[96];
  int ndim;
  int64_t shape[2];
  int is_norm;
  uint64_t nbytes;
  int shard;
  uint64_t offset; /* within its shard's data section */
} wspec;

static void add(wspec *w, size_t *n, const char *name, int64_t d0, int64_t d1, int is_norm,
                size_t es) {
  wspec *s = &w[(*n)++];
  snprintf(s->name, sizeof s->name, "%s", name);
  s->ndim = d1 > 0 ? 2 : 1;
  s->shape[0] = d0;
  s->shape[1] = d1;
  s->is_norm = is_norm;
  s->nbytes = (uint64_t)d0 * (uint64_t)(d1 > 0 ? d1 : 1) * es;
}

/* HF's state-dict order; w holds 4 + 15 * n_layers entries. */
static size_t build_specs(const model_cfg *c, size_t es, wspec *w) {
  size_t n = 0;
  int64_t h = c->hidden, q = (int64_t)c->n_heads * c->head_dim;
  int64_t kv = (int64_t)c->n_kv_heads * c->head_dim, f = c->intermediate;
  char nm[96];
  add(w, &n, "model.embed_tokens.weight", c->vocab_size, h, 0, es);
  for (int i = 0; i < c->n_layers; i++) {
#define L(suffix, d0, d1, norm)                                                                    \
  do {                                                                                             \
    snprintf(nm, sizeof nm, "model.layers.%d.%s", i, suffix);                                      \
    add(w, &n, nm, d0, d1, norm, es);                                                              \
  } while (0)
    L("self_attn.q_proj.weight", q, h, 0);
    if (c->qkv_bias) L("self_attn.q_proj.bias", q, 0, 0);
    L("self_attn.k_proj.weight", kv, h, 0);
    if (c->qkv_bias) L("self_attn.k_proj.bias", kv, 0, 0);
    L("self_attn.v_proj.weight", kv, h, 0);
    if (c->qkv_bias) L("self_attn.v_proj.bias", kv, 0, 0);
    L("self_attn.o_proj.weight", h, q, 0);
    L("mlp.gate_proj.weight", f, h, 0);
    L("mlp.up_proj.weight", f, h, 0);
    L("mlp.down_proj.weight", h, f, 0);
    L("input_layernorm.weight", h, 0, 1);
    L("post_attention_layernorm.weight", h, 0, 1);
#undef L
  }
  add(w, &n, "model.norm.weight", h, 0, 1, es);
  if (!c->tie_embeddings) add(w, &n, "lm_head.weight", c->vocab_size, h, 0, es);
  return n;
}

/* ---- buffered output ------------------------------------------------------------------- */

typedef struct wfile {
  int fd;
  const char *path;
  uint8_t *buf;
  size_t len;
} wfile;

static int wf_flush(wfile *f, char *err, size_t errlen) {
  size_t off = 0;
  while (off < f->len) {
    ssize_t k = write(f->fd, f->buf + off, f->len - off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      return ns_errf(err, errlen, NS_EIO, "%s: write failed: %s", f->path,
                     k < 0 ? strerror(errno) : "no progress");
    off += (size_t)k;
  }
  f->len = 0;
  return 0;
}

static int wf_put(wfile *f, const void *p, size_t n, char *err, size_t errlen) {
  const uint8_t *s = p;
  while (n) {
    if (f->len == WBUF_BYTES) {
      int rc = wf_flush(f, err, errlen);
      if (rc) return rc;
    }
    size_t k = WBUF_BYTES - f->len < n ? WBUF_BYTES - f->len : n;
    memcpy(f->buf + f->len, s, k);
    f->len += k;
    s += k;
    n -= k;
  }
  return 0;
}

static int write_tensor(wfile *f, const wspec *s, const qtable *tab, uint64_t seed, char *err,
                        size_t errlen) {
  ns_rng r;
  tensor_rng(&r, seed, s->name);
  uint64_t left = s->nbytes / tab->es;
  while (left) {
    if (WBUF_BYTES - f->len < 4 * tab->es) {
      int rc = wf_flush(f, err, errlen);
      if (rc) return rc;
    }
    uint64_t room = ((WBUF_BYTES - f->len) / tab->es) & ~(uint64_t)3;
    size_t k = (size_t)(left < room ? left : room);
    gen(&r, tab, f->buf + f->len, k);
    f->len += k * tab->es;
    left -= k;
  }
  return 0;
}

static const char *st_dtype_name(ns_dtype dt) {
  return dt == NS_BF16 ? "BF16" : dt == NS_F16 ? "F16" : "F32";
}

static int cmp_spec_name(const void *a, const void *b) {
  return strcmp((*(const wspec *const *)a)->name, (*(const wspec *const *)b)->name);
}

/* The JSON header of shard k (keys in name order, as HF writes them), padded
 * with spaces so the data section starts 8-byte aligned. */
static char *shard_header(wspec *w, size_t n, int k, ns_dtype dt, size_t *hlen) {
  wspec **by = malloc(n * sizeof *by);
  cJSON *root = cJSON_CreateObject();
  char *text = NULL, *out = NULL;
  if (!by || !root) goto out;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (w[i].shard == k) by[m++] = &w[i];
  qsort(by, m, sizeof *by, cmp_spec_name);
  cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
  if (!meta || !cJSON_AddStringToObject(meta, "format", "pt")) goto out;
  for (size_t i = 0; i < m; i++) {
    cJSON *e = cJSON_AddObjectToObject(root, by[i]->name);
    if (!e || !cJSON_AddStringToObject(e, "dtype", st_dtype_name(dt))) goto out;
    cJSON *shape = cJSON_AddArrayToObject(e, "shape");
    cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
    if (!shape || !offs) goto out;
    for (int d = 0; d < by[i]->ndim; d++)
      cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)by[i]->shape[d]));
    cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)by[i]->offset));
    cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(by[i]->offset + by[i]->nbytes)));
  }
  text = cJSON_PrintUnformatted(root);
  if (!text) goto out;
  size_t len = strlen(text), padded = (len + 8 + 7) / 8 * 8 - 8;
  out = malloc(padded + 1);
  if (!out) goto out;
  memcpy(out, text, len);
  memset(out + len, ' ', padded - len);
  out[padded] = '\0';
  *hlen = padded;
out:
  free(text);
  cJSON_Delete(root);
  free(by);
  return out;
}

static int write_shard(const char *dir, const char *fname, wspec *w, size_t n, int k, ns_dtype dt,
                       const qtable tabs[2], uint64_t seed, char *err, size_t errlen) {
  char *path = mk__path(dir, fname), *tmp = NULL, *hdr = NULL;
  uint8_t *buf = malloc(WBUF_BYTES);
  size_t hlen = 0;
  int rc = NS_ENOMEM;
  wfile f = {-1, NULL, buf, 0};
  if (!path || !buf) goto nomem;
  tmp = malloc(strlen(path) + 5);
  hdr = shard_header(w, n, k, dt, &hlen);
  if (!tmp || !hdr) goto nomem;
  sprintf(tmp, "%s.tmp", path);
  f.path = path;
  f.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f.fd < 0) {
    rc = ns_errf(err, errlen, NS_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    goto out;
  }
  uint8_t len8[8];
  for (int i = 0; i < 8; i++)
    len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  if ((rc = wf_put(&f, len8, 8, err, errlen)) || (rc = wf_put(&f, hdr, hlen, err, errlen)))
    goto out;
  for (size_t i = 0; i < n; i++) {
    if (w[i].shard != k) continue;
    if ((rc = write_tensor(&f, &w[i], &tabs[w[i].is_norm], seed, err, errlen))) goto out;
  }
  if ((rc = wf_flush(&f, err, errlen))) goto out;
  if (close(f.fd) != 0) {
    f.fd = -1;
    rc = ns_errf(err, errlen, NS_EIO, "%s: close failed: %s", tmp, strerror(errno));
    goto out;
  }
  f.fd = -1;
  if (rename(tmp, path) != 0)
    rc = ns_errf(err, errlen, NS_EIO, "%s: rename failed: %s", path, strerror(errno));
  goto out;
nomem:
  rc = ns_errf(err, errlen, NS_ENOMEM, "%s/%s: out of memory", dir, fname);
out:
  if (f.fd >= 0) close(f.fd);
  if (rc && tmp) unlink(tmp);
  free(hdr);
  free(tmp);
  free(path);
  free(buf);
  return rc;
}

static int write_index(const char *dir, const wspec *w, size_t n, int nshards, char *err,
                       size_t errlen) {
  cJSON *root = cJSON_CreateObject();
  cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
  cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
  const wspec **by = malloc(n * sizeof *by);
  int rc = NS_ENOMEM;
  if (!root || !meta || !map || !by) goto out;
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    by[i] = &w[i];
    total += w[i].nbytes;
  }
  qsort(by, n, sizeof *by, cmp_spec_name);
  if (!cJSON_AddNumberToObject(meta, "total_size", (double)total)) goto out;
  for (size_t i = 0; i < n; i++) {
    char fname[64];
    snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", by[i]->shard + 1, nshards);
    if (!cJSON_AddStringToObject(map, by[i]->name, fname)) goto out;
  }
  rc = mk__write_json(dir, "model.safetensors.index.json", root, err, errlen);
out:
  if (rc == NS_ENOMEM) ns_errf(err, errlen, rc, "%s: out of memory", dir);
  free(by);
  cJSON_Delete(root);
  return rc;
}

/* A folder keeps one layout: drop what an earlier run with the other layout left. */
static void remove_stale(const char *dir, int sharded) {
  char *p = mk__path(dir, sharded ? "model.safetensors" : "model.safetensors.index.json");
  if (p) unlink(p);
  free(p);
}

int mk__weights(const char *dir, const model_cfg *cfg, ns_dtype dt, uint64_t seed,
                uint64_t max_shard, char *err, size_t errlen) {
  size_t es = ns_dtype_size(dt);
  wspec *w = calloc(4 + 15 * (size_t)cfg->n_layers, sizeof *w);
  qtable tabs[2] = {{NULL, 0}, {NULL, 0}};
  int rc = NS_ENOMEM;
  if (!w || qtable_make(&tabs[0], 0.0, INIT_STD, dt) || qtable_make(&tabs[1], 1.0, NORM_STD, dt))
    goto nomem;
  size_t n = build_specs(cfg, es, w);
  /* HF's sharding: tensors in order, a new shard when the next would not fit. */
  int shard = 0;
  uint64_t cur = 0;
  for (size_t i = 0; i < n; i++) {
    if (cur > 0 && cur + w[i].nbytes > max_shard) {
      shard++;
      cur = 0;
    }
    w[i].shard = shard;
    w[i].offset = cur;
    cur += w[i].nbytes;
  }
  int nshards = shard + 1;
  remove_stale(dir, nshards > 1);
  for (int k = 0; k < nshards; k++) {
    char fname[64];
    if (nshards == 1)
      snprintf(fname, sizeof fname, "model.safetensors");
    else
      snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", k + 1, nshards);
    if ((rc = write_shard(dir, fname, w, n, k, dt, tabs, seed, err, errlen))) goto out;
    ns_log_info("mkmodel: wrote %s/%s", dir, fname);
  }
  rc = nshards > 1 ? write_index(dir, w, n, nshards, err, errlen) : 0;
  goto out;
nomem:
  rc = ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", dir);
out:
  free(tabs[0].bytes);
  free(tabs[1].bytes);
  free(w);
  return rc;
}
