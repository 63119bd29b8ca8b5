/* mkmodel.c — the shapes table, config.json / generation_config.json, and the
 * `mkmodel` command line (mkmodel_write, mkmodel_cli_main). */
#include "mkmodel.h"

#include "mk_int.h"
#include "ns_err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- shapes (from the real checkpoints' config.json) -------------------------- */

typedef struct shape {
  const char *name;
  model_arch arch;
  int vocab; /* 0: the tokenizer's size rounded up to a multiple of 8 */
  int hidden, inter, layers, heads, kv_heads;
  int head_dim; /* written to config.json when non-zero */
  double theta, eps;
  int max_pos;
  int llama3_rope;
  double factor, low, high;
  int orig_max_pos;
  int tied, qkv_bias;
  int bos, eos[3], n_eos; /* the real ids, used with a fixed vocab and the built-in tokenizer */
  ns_dtype dtype;
} shape;

static const shape shapes[] = {
    {"tiny", ARCH_LLAMA, 0, 64, 176, 2, 4, 2,  0,   10000.0, 1e-5,  2048,
     0,      0,          0, 0,  0,   0, 0, -1, {0}, 0,       NS_F32},
    {"tiny-qwen2", ARCH_QWEN2, 0,     64, 176, 2, 4, 2, 0, 1000000.0,
     1e-6,         2048,       0,     0,  0,   0, 0, 1, 1, -1,
     {0},          0,          NS_F32},
    {"tinyllama-1.1b",
     ARCH_LLAMA,
     32000,
     2048,
     5632,
     22,
     32,
     4,
     0,
     10000.0,
     1e-5,
     2048,
     0,
     0,
     0,
     0,
     0,
     0,
     0,
     1,
     {2},
     1,
     NS_BF16},
    {"llama3.2-1b",
     ARCH_LLAMA,
     128256,
     2048,
     8192,
     16,
     32,
     8,
     64,
     500000.0,
     1e-5,
     131072,
     1,
     32.0,
     1.0,
     4.0,
     8192,
     1,
     0,
     128000,
     {128001, 128008, 128009},
     3,
     NS_BF16},
    {"llama3-8b", ARCH_LLAMA, 128256, 4096, 14336, 32, 32, 8,      0,        500000.0, 1e-5,   8192,
     0,           0,          0,      0,    0,     0,  0,  128000, {128001}, 1,        NS_BF16},
    {"qwen2.5-0.5b", ARCH_QWEN2, 151936, 896, 4864, 24, 14, 2, 0, 1000000.0,
     1e-6,           32768,      0,      0,   0,    0,  0,  1, 1, 151643,
     {151645},       1,          NS_BF16},
    /* Mistral 7B v0.3 (no sliding window) and Qwen2.5 7B: 8 and 4 KV heads of 128 */
    {"tiny-mistral",
     ARCH_MISTRAL,
     0,
     64,
     176,
     2,
     4,
     2,
     16,
     1000000.0,
     1e-5,
     2048,
     0,
     0,
     0,
     0,
     0,
     0,
     0,
     -1,
     {0},
     0,
     NS_F32},
    {"mistral-7b",
     ARCH_MISTRAL,
     32768,
     4096,
     14336,
     32,
     32,
     8,
     128,
     1000000.0,
     1e-5,
     32768,
     0,
     0,
     0,
     0,
     0,
     0,
     0,
     1,
     {2},
     1,
     NS_BF16},
    {"qwen2.5-7b", ARCH_QWEN2, 152064, 3584, 18944, 28, 28, 4, 0, 1000000.0,
     1e-6,         32768,      0,      0,    0,     0,  0,  0, 1, 151643,
     {151645},     1,          NS_BF16},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

const char *const *mkmodel_shape_names(void) {
  static const char *names[N_SHAPES + 1];
  for (size_t i = 0; i < N_SHAPES; i++)
    names[i] = shapes[i].name;
  names[N_SHAPES] = NULL;
  return names;
}

/* ---- file helpers (mk_int.h) ---------------------------------------------------------- */

char *mk__path(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

int mk__write_file(const char *path, const void *data, size_t len, char *err, size_t errlen) {
  size_t n = strlen(path) + 5;
  char *tmp = malloc(n);
  if (!tmp) return ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", path);
  snprintf(tmp, n, "%s.tmp", path);
  int rc = 0;
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    rc = ns_errf(err, errlen, NS_EIO, "%s: cannot create: %s", tmp, strerror(errno));
  } else {
    size_t put = fwrite(data, 1, len, f);
    int bad = put != len || fflush(f) != 0;
    int e = errno;
    if (fclose(f) != 0 && !bad) {
      bad = 1;
      e = errno;
    }
    if (bad)
      rc = ns_errf(err, errlen, NS_EIO, "%s: write failed: %s", tmp, strerror(e));
    else if (rename(tmp, path) != 0)
      rc = ns_errf(err, errlen, NS_EIO, "%s: rename failed: %s", path, strerror(errno));
    if (rc) unlink(tmp);
  }
  free(tmp);
  return rc;
}

int mk__write_json(const char *dir, const char *name, const cJSON *j, char *err, size_t errlen) {
  char *text = cJSON_Print(j), *path = mk__path(dir, name);
  int rc;
  if (!text || !path) {
    rc = ns_errf(err, errlen, NS_ENOMEM, "%s/%s: out of memory", dir, name);
  } else {
    size_t len = strlen(text);
    text[len] = '\n'; /* end the file with a newline, as HF does */
    rc = mk__write_file(path, text, len + 1, err, errlen);
  }
  free(text);
  free(path);
  return rc;
}

int mk__read_file(const char *path, size_t max, char **out, size_t *len, char *err, size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return ns_errf(err, errlen, NS_EIO, "%s: cannot open: %s", path, strerror(errno));
  char *buf = malloc(max + 1);
  if (!buf) {
    fclose(f);
    return ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", path);
  }
  size_t n = fread(buf, 1, max + 1, f);
  int bad = ferror(f);
  fclose(f);
  if (bad || n > max) {
    free(buf);
    return ns_errf(err, errlen, bad ? NS_EIO : NS_EFORMAT, "%s: %s", path,
                   bad ? "read error" : "file too large");
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
}

/* ---- config.json ------------------------------------------------------------------------ */

/* A float as Python's json writes it: the shortest digits that read back, fixed
 * notation for 1e-4 <= |v| < 1e16 (with ".0" when integral), else 1e-05 style. */
static cJSON *py_float(double v) {
  char buf[48];
  int prec = 1;
  for (; prec < 17; prec++) {
    snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (strtod(buf, NULL) == v) break;
  }
  snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
  int exp = atoi(strchr(buf, 'e') + 1);
  if (v == 0 || (exp >= -4 && exp < 16)) {
    int dec = prec - 1 - exp;
    snprintf(buf, sizeof buf, "%.*f", dec > 0 ? dec : 0, v);
    if (!strchr(buf, '.')) strcat(buf, ".0");
  }
  return cJSON_CreateRaw(buf);
}

static cJSON *id_list(const int *ids, int n) {
  return n == 1 ? cJSON_CreateNumber(ids[0]) : cJSON_CreateIntArray(ids, n);
}

static const char *torch_dtype(ns_dtype dt) {
  return dt == NS_BF16 ? "bfloat16" : dt == NS_F16 ? "float16" : "float32";
}

/* config.json in HF's v4 form, keys in sorted order as transformers writes them. */
static cJSON *config_json(const shape *s, const model_cfg *c, ns_dtype dt, const int *eos,
                          int n_eos) {
  int qwen = s->arch == ARCH_QWEN2, mistral = s->arch == ARCH_MISTRAL, llama = !qwen && !mistral;
  cJSON *r = cJSON_CreateObject();
  const char *arch = qwen      ? "Qwen2ForCausalLM"
                     : mistral ? "MistralForCausalLM"
                               : "LlamaForCausalLM";
  cJSON_AddItemToObject(r, "architectures", cJSON_CreateStringArray(&arch, 1));
  if (llama) cJSON_AddBoolToObject(r, "attention_bias", 0);
  cJSON_AddItemToObject(r, "attention_dropout", py_float(0.0));
  if (c->bos_id >= 0)
    cJSON_AddNumberToObject(r, "bos_token_id", c->bos_id);
  else
    cJSON_AddNullToObject(r, "bos_token_id");
  cJSON_AddItemToObject(r, "eos_token_id", id_list(eos, n_eos));
  if (s->head_dim) cJSON_AddNumberToObject(r, "head_dim", s->head_dim);
  cJSON_AddStringToObject(r, "hidden_act", "silu");
  cJSON_AddNumberToObject(r, "hidden_size", c->hidden);
  cJSON_AddItemToObject(r, "initializer_range", py_float(0.02));
  cJSON_AddNumberToObject(r, "intermediate_size", c->intermediate);
  cJSON_AddNumberToObject(r, "max_position_embeddings", c->max_pos);
  if (qwen) cJSON_AddNumberToObject(r, "max_window_layers", c->n_layers);
  if (llama) cJSON_AddBoolToObject(r, "mlp_bias", 0);
  cJSON_AddStringToObject(r, "model_type", qwen ? "qwen2" : mistral ? "mistral" : "llama");
  cJSON_AddNumberToObject(r, "num_attention_heads", c->n_heads);
  cJSON_AddNumberToObject(r, "num_hidden_layers", c->n_layers);
  cJSON_AddNumberToObject(r, "num_key_value_heads", c->n_kv_heads);
  if (llama) cJSON_AddNumberToObject(r, "pretraining_tp", 1);
  cJSON_AddItemToObject(r, "rms_norm_eps", py_float(s->eps));
  if (s->llama3_rope) {
    cJSON *rs = cJSON_AddObjectToObject(r, "rope_scaling");
    cJSON_AddItemToObject(rs, "factor", py_float(s->factor));
    cJSON_AddItemToObject(rs, "high_freq_factor", py_float(s->high));
    cJSON_AddItemToObject(rs, "low_freq_factor", py_float(s->low));
    cJSON_AddNumberToObject(rs, "original_max_position_embeddings", s->orig_max_pos);
    cJSON_AddStringToObject(rs, "rope_type", "llama3");
  } else if (!mistral) { /* MistralConfig has no rope_scaling */
    cJSON_AddNullToObject(r, "rope_scaling");
  }
  cJSON_AddItemToObject(r, "rope_theta", py_float(s->theta));
  if (qwen) cJSON_AddNumberToObject(r, "sliding_window", c->max_pos);
  if (mistral) cJSON_AddNullToObject(r, "sliding_window"); /* v0.2 on: full attention */
  cJSON_AddBoolToObject(r, "tie_word_embeddings", c->tie_embeddings);
  cJSON_AddStringToObject(r, "torch_dtype", torch_dtype(dt));
  cJSON_AddStringToObject(r, "transformers_version", "4.45.0");
  cJSON_AddBoolToObject(r, "use_cache", 1);
  if (qwen) cJSON_AddBoolToObject(r, "use_sliding_window", 0);
  cJSON_AddNumberToObject(r, "vocab_size", c->vocab_size);
  return r;
}

static cJSON *generation_json(int bos, const int *eos, int n_eos) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddBoolToObject(r, "_from_model_config", 1);
  if (bos >= 0) cJSON_AddNumberToObject(r, "bos_token_id", bos);
  cJSON_AddItemToObject(r, "eos_token_id", id_list(eos, n_eos));
  cJSON_AddStringToObject(r, "transformers_version", "4.45.0");
  return r;
}

/* ---- mkmodel_write ----------------------------------------------------------------------------
 */

static int mkdir_p(const char *dir, char *err, size_t errlen) {
  char *p = strdup(dir);
  if (!p) return ns_errf(err, errlen, NS_ENOMEM, "out of memory");
  int rc = 0;
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s != '\0') continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
      rc = ns_errf(err, errlen, NS_EIO, "%s: cannot create folder: %s", p, strerror(errno));
      break;
    }
    *s = c;
    if (c == '\0') break;
  }
  free(p);
  struct stat sb;
  if (rc == 0 && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
    rc = ns_errf(err, errlen, NS_EIO, "%s: not a folder", dir);
  return rc;
}

static int parse_dtype(const char *s, ns_dtype *dt) {
  if (strcmp(s, "bf16") == 0)
    *dt = NS_BF16;
  else if (strcmp(s, "f16") == 0)
    *dt = NS_F16;
  else if (strcmp(s, "f32") == 0)
    *dt = NS_F32;
  else
    return NS_EINVAL;
  return 0;
}

int mkmodel_write(const mkmodel_opts *o, char *err, size_t errlen) {
  const shape *s = NULL;
  for (size_t i = 0; i < N_SHAPES && o->shape; i++)
    if (strcmp(o->shape, shapes[i].name) == 0) s = &shapes[i];
  if (!s) {
    char list[256] = "";
    for (size_t i = 0; i < N_SHAPES; i++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
               shapes[i].name);
    return ns_errf(err, errlen, NS_EINVAL, "unknown shape '%s' (known: %s)",
                   o->shape ? o->shape : "", list);
  }
  if (!o->out || !o->out[0]) return ns_errf(err, errlen, NS_EINVAL, "no output folder given");
  ns_dtype dt = s->dtype;
  if (o->dtype && parse_dtype(o->dtype, &dt))
    return ns_errf(err, errlen, NS_EINVAL, "unknown dtype '%s' (bf16, f16 or f32)", o->dtype);
  int rc = mkdir_p(o->out, err, errlen);
  if (rc) return rc;
  mk__tok_info tok;
  if ((rc = mk__tokenizer(o->out, o->tokenizer, s->max_pos, &tok, err, errlen))) return rc;

  model_cfg c;
  memset(&c, 0, sizeof c);
  c.arch = s->arch;
  c.vocab_size = s->vocab ? s->vocab : (tok.size + 7) / 8 * 8;
  if (tok.size > c.vocab_size)
    return ns_errf(err, errlen, NS_EINVAL,
                   "%s: the tokenizer has %d tokens, more than shape %s's vocab_size %d",
                   o->tokenizer ? o->tokenizer : "tokenizer.json", tok.size, s->name, c.vocab_size);
  c.hidden = s->hidden;
  c.intermediate = s->inter;
  c.n_layers = s->layers;
  c.n_heads = s->heads;
  c.n_kv_heads = s->kv_heads;
  c.head_dim = s->head_dim ? s->head_dim : s->hidden / s->heads;
  c.max_pos = s->max_pos;
  c.tie_embeddings = s->tied;
  c.qkv_bias = s->qkv_bias;
  /* Token ids: the shape's real ones when its vocab is fixed and the tokenizer
   * is the built-in one; otherwise the tokenizer's. */
  int eos[4], n_eos = 0, gen_eos[4], n_gen = 0;
  if (s->vocab && !o->tokenizer) {
    c.bos_id = s->bos;
    for (int i = 0; i < s->n_eos; i++)
      eos[n_eos++] = gen_eos[n_gen++] = s->eos[i];
  } else {
    c.bos_id = tok.bos;
    eos[n_eos++] = gen_eos[n_gen++] = tok.eos;
    if (tok.eos_extra >= 0) gen_eos[n_gen++] = tok.eos_extra;
  }

  cJSON *cj = config_json(s, &c, dt, eos, n_eos), *gj = generation_json(c.bos_id, gen_eos, n_gen);
  rc = (!cj || !gj) ? ns_errf(err, errlen, NS_ENOMEM, "out of memory") : 0;
  if (rc == 0) rc = mk__write_json(o->out, "config.json", cj, err, errlen);
  if (rc == 0) rc = mk__write_json(o->out, "generation_config.json", gj, err, errlen);
  cJSON_Delete(cj);
  cJSON_Delete(gj);
  if (rc) return rc;
  uint64_t shard = o->max_shard_bytes ? o->max_shard_bytes : MKMODEL_DEFAULT_SHARD_BYTES;
  if ((rc = mk__weights(o->out, &c, dt, o->seed, shard, err, errlen))) return rc;
  /* What was written must load: config, every tensor's presence and shape. */
  model_t *m;
  if ((rc = model_load(o->out, &m, err, errlen))) return rc;
  model_free(m);
  return 0;
}

/* ---- command line -----------------------------------------------------------------------------
 */

static void usage(FILE *f) {
  fprintf(f, "usage: nanoserve mkmodel --shape NAME --out DIR [--seed N] [--dtype bf16|f16|f32]\n"
             "                         [--tokenizer tokenizer.json]\n"
             "       nanoserve mkmodel --list\n"
             "writes a Hugging Face checkpoint folder of a real model's shape with seeded\n"
             "random weights. shapes:");
  for (size_t i = 0; i < N_SHAPES; i++)
    fprintf(f, " %s", shapes[i].name);
  fprintf(f, "\n");
}

static int64_t tensor_params(const tensor_t *t) {
  return t->data ? tensor_numel(t) : 0;
}

/* --check DIR: load a folder and print what it holds. */
static int check(const char *dir) {
  char err[512];
  model_t *m;
  int rc = model_load(dir, &m, err, sizeof err);
  if (rc) {
    fprintf(stderr, "mkmodel: %s\n", err);
    return 1;
  }
  const model_cfg *c = &m->cfg;
  static const char *const archs[] = {"llama", "mistral", "qwen2"};
  static const char *const ropes[] = {"default", "linear", "llama3"};
  int64_t n = tensor_params(&m->embed) + tensor_params(&m->final_norm);
  if (!c->tie_embeddings) n += tensor_params(&m->lm_head);
  int tensors = 2 + !c->tie_embeddings;
  for (int i = 0; i < c->n_layers; i++) {
    const tensor_t *ts[] = {&m->layers[i].attn_norm, &m->layers[i].wq,   &m->layers[i].wk,
                            &m->layers[i].wv,        &m->layers[i].bq,   &m->layers[i].bk,
                            &m->layers[i].bv,        &m->layers[i].wo,   &m->layers[i].mlp_norm,
                            &m->layers[i].w_gate,    &m->layers[i].w_up, &m->layers[i].w_down};
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
      n += tensor_params(ts[k]);
      tensors += ts[k]->data != NULL;
    }
  }
  printf("ok %s\n", dir);
  printf("arch %s vocab %d hidden %d intermediate %d layers %d heads %d kv_heads %d head_dim %d\n",
         archs[c->arch], c->vocab_size, c->hidden, c->intermediate, c->n_layers, c->n_heads,
         c->n_kv_heads, c->head_dim);
  printf("rope %s theta %g", ropes[c->rope], c->rope_theta);
  if (c->rope != ROPE_DEFAULT) printf(" factor %g", c->rope_factor);
  if (c->rope == ROPE_LLAMA3)
    printf(" low %g high %g original_max_pos %d", c->rope_low_freq_factor, c->rope_high_freq_factor,
           c->rope_original_max_pos);
  printf(" rms_eps %g max_pos %d\n", c->rms_eps, c->max_pos);
  printf("tied %d qkv_bias %d dtype %s bos %d eos", c->tie_embeddings, c->qkv_bias,
         ns_dtype_name(c->dtype), c->bos_id);
  for (int i = 0; i < c->n_eos; i++)
    printf("%s%d", i ? "," : " ", c->eos_ids[i]);
  printf("\ntensors %d params %lld embed_dtype %s\n", tensors, (long long)n,
         ns_dtype_name(m->embed.dtype));
  model_free(m);
  return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || *end) return -1;
  *out = v;
  return 0;
}

int mkmodel_cli_main(int argc, char **argv) {
  mkmodel_opts o;
  memset(&o, 0, sizeof o);
  const char *check_dir = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (strcmp(a, "--list") == 0) {
      for (size_t k = 0; k < N_SHAPES; k++)
        printf("%s\n", shapes[k].name);
      return 0;
    }
    static const char *const with_value[] = {"--shape",     "--out",   "--seed",          "--dtype",
                                             "--tokenizer", "--check", "--max-shard-size"};
    size_t k = 0, nk = sizeof with_value / sizeof with_value[0];
    for (; k < nk; k++) {
      size_t l = strlen(with_value[k]);
      if (strcmp(a, with_value[k]) == 0) {
        if (i + 1 >= argc) {
          fprintf(stderr, "mkmodel: %s needs a value\n", a);
          return 1;
        }
        v = argv[++i];
        break;
      }
      if (strncmp(a, with_value[k], l) == 0 && a[l] == '=') {
        v = a + l + 1;
        break;
      }
    }
    if (k == nk) {
      fprintf(stderr, "mkmodel: unknown option '%s'\n", a);
      usage(stderr);
      return 1;
    }
    switch (k) {
    case 0: o.shape = v; break;
    case 1: o.out = v; break;
    case 2:
      if (parse_u64(v, &o.seed)) {
        fprintf(stderr, "mkmodel: --seed: '%s' is not a non-negative integer\n", v);
        return 1;
      }
      break;
    case 3: o.dtype = v; break;
    case 4: o.tokenizer = v; break;
    case 5: check_dir = v; break;
    case 6: /* hidden: small shards for tests */
      if (parse_u64(v, &o.max_shard_bytes) || o.max_shard_bytes == 0) {
        fprintf(stderr, "mkmodel: --max-shard-size: '%s' is not a positive integer\n", v);
        return 1;
      }
      break;
    }
  }
  if (check_dir) return check(check_dir);
  if (!o.shape || !o.out) {
    fprintf(stderr, "mkmodel: --shape and --out are required\n");
    usage(stderr);
    return 1;
  }
  char err[512];
  if (mkmodel_write(&o, err, sizeof err) != 0) {
    fprintf(stderr, "mkmodel: %s\n", err);
    return 1;
  }
  printf("mkmodel: wrote %s (shape %s, seed %llu)\n", o.out, o.shape, (unsigned long long)o.seed);
  return 0;
}
