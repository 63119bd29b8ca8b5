/* model_config.c — config.json (+ generation_config.json) of a Hugging Face
 * Llama / Mistral / Qwen2 checkpoint parsed into model_cfg (model_cfg_load). */
#include "model.h"

#include "ns_err.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CONFIG_BYTES (16u << 20)

/* Where messages go: "<file>: <prefix><field>: ...". */
typedef struct jctx {
  const char *file;
  const char *prefix; /* "" or "rope_scaling." */
  char *err;
  size_t errlen;
} jctx;

static int failf(const jctx *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int failf(const jctx *c, int code, const char *fmt, ...) {
  if (c->err && c->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

#define FAIL(c, code, key, fmt, ...)                                                               \
  failf((c), (code), "%s: %s%s: " fmt, (c)->file, (c)->prefix, (key), __VA_ARGS__)

static int read_json(const char *path, cJSON **out, char *err, size_t errlen) {
  jctx c = {path, "", err, errlen};
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return failf(&c, errno == ENOENT ? NS_ENOENT : NS_EIO, "%s: cannot open: %s", path,
                 strerror(errno));
  char *buf = malloc(MAX_CONFIG_BYTES + 1);
  if (!buf) {
    fclose(f);
    return failf(&c, NS_ENOMEM, "%s: out of memory", path);
  }
  size_t len = fread(buf, 1, MAX_CONFIG_BYTES + 1, f);
  int bad = ferror(f);
  fclose(f);
  int rc = 0;
  if (bad)
    rc = failf(&c, NS_EIO, "%s: read error", path);
  else if (len > MAX_CONFIG_BYTES)
    rc = failf(&c, NS_EFORMAT, "%s: larger than %u bytes", path, MAX_CONFIG_BYTES);
  if (rc == 0) {
    buf[len] = '\0';
    *out = cJSON_ParseWithLength(buf, len + 1);
    if (!cJSON_IsObject(*out)) {
      cJSON_Delete(*out);
      *out = NULL;
      rc = failf(&c, NS_EFORMAT, "%s: not a JSON object", path);
    }
  }
  free(buf);
  return rc;
}

/* ---- typed getters: missing or null takes the default, or fails when required ---- */

static int get_int(const jctx *c, const cJSON *o, const char *key, int required, long dflt, long lo,
                   long hi, int *out) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!j || cJSON_IsNull(j)) {
    if (required) return FAIL(c, NS_EFORMAT, key, "%s", "required field is missing");
    *out = (int)dflt;
    return 0;
  }
  if (!cJSON_IsNumber(j)) return FAIL(c, NS_EFORMAT, key, "%s", "expected an integer");
  double d = j->valuedouble;
  if (d != floor(d) || !isfinite(d)) return FAIL(c, NS_EFORMAT, key, "%g is not an integer", d);
  if (d < (double)lo || d > (double)hi)
    return FAIL(c, NS_ERANGE, key, "%.0f is out of range [%ld, %ld]", d, lo, hi);
  *out = (int)d;
  return 0;
}

static int get_num(const jctx *c, const cJSON *o, const char *key, int required, double dflt,
                   double *out) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!j || cJSON_IsNull(j)) {
    if (required) return FAIL(c, NS_EFORMAT, key, "%s", "required field is missing");
    *out = dflt;
    return 0;
  }
  if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
    return FAIL(c, NS_EFORMAT, key, "%s", "expected a finite number");
  *out = j->valuedouble;
  return 0;
}

static int get_bool(const jctx *c, const cJSON *o, const char *key, int dflt, int *out) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!j || cJSON_IsNull(j)) {
    *out = dflt;
    return 0;
  }
  if (!cJSON_IsBool(j)) return FAIL(c, NS_EFORMAT, key, "%s", "expected true or false");
  *out = cJSON_IsTrue(j);
  return 0;
}

/* NULL when missing or null; fails when present with another type. */
static int get_str(const jctx *c, const cJSON *o, const char *key, const char **out) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  *out = NULL;
  if (!j || cJSON_IsNull(j)) return 0;
  if (!cJSON_IsString(j)) return FAIL(c, NS_EFORMAT, key, "%s", "expected a string");
  *out = j->valuestring;
  return 0;
}

/* ---- rope ------------------------------------------------------------------------- */

/* o is a rope_scaling (v4) or rope_parameters (v5) object. */
static int parse_rope_kind(const jctx *c, const cJSON *o, model_cfg *cfg) {
  const char *kind, *key = "rope_type";
  int rc = get_str(c, o, "rope_type", &kind);
  if (rc == 0 && !kind) {
    key = "type";
    rc = get_str(c, o, "type", &kind);
  }
  if (rc) return rc;
  cfg->rope = ROPE_DEFAULT;
  if (!kind || strcmp(kind, "default") == 0) return 0;
  double v;
  if (strcmp(kind, "linear") == 0) {
    if ((rc = get_num(c, o, "factor", 1, 0, &v))) return rc;
    if (!(v > 0)) return FAIL(c, NS_ERANGE, "factor", "%g must be > 0", v);
    cfg->rope = ROPE_LINEAR;
    cfg->rope_factor = (float)v;
    return 0;
  }
  if (strcmp(kind, "llama3") == 0) {
    double lo, hi;
    if ((rc = get_num(c, o, "factor", 1, 0, &v)) ||
        (rc = get_num(c, o, "low_freq_factor", 1, 0, &lo)) ||
        (rc = get_num(c, o, "high_freq_factor", 1, 0, &hi)) ||
        (rc = get_int(c, o, "original_max_position_embeddings", 1, 0, 1, 1 << 24,
                      &cfg->rope_original_max_pos)))
      return rc;
    if (!(v > 0)) return FAIL(c, NS_ERANGE, "factor", "%g must be > 0", v);
    if (!(lo > 0)) return FAIL(c, NS_ERANGE, "low_freq_factor", "%g must be > 0", lo);
    if (!(hi > lo))
      return FAIL(c, NS_ERANGE, "high_freq_factor", "%g must be > low_freq_factor %g", hi, lo);
    cfg->rope = ROPE_LLAMA3;
    cfg->rope_factor = (float)v;
    cfg->rope_low_freq_factor = (float)lo;
    cfg->rope_high_freq_factor = (float)hi;
    return 0;
  }
  return FAIL(c, NS_EUNSUPPORTED, key,
              "rope scaling '%.40s' is not supported (default, linear or llama3)", kind);
}

static int parse_rope(const jctx *top, const cJSON *root, model_cfg *cfg) {
  double theta;
  int rc = get_num(top, root, "rope_theta", 0, 10000.0, &theta);
  if (rc) return rc;
  const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
  const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
  const char *theta_key = "rope_theta";
  jctx c = *top;
  if (params && !cJSON_IsNull(params)) { /* transformers v5 */
    if (!cJSON_IsObject(params))
      return FAIL(top, NS_EFORMAT, "rope_parameters", "%s", "expected an object or null");
    c.prefix = "rope_parameters.";
    const cJSON *first = params->child;
    if (first && cJSON_IsObject(first) && !cJSON_GetObjectItemCaseSensitive(params, "rope_type"))
      return FAIL(top, NS_EUNSUPPORTED, "rope_parameters", "%s",
                  "per-layer-type rope parameters are not supported");
    if (cJSON_GetObjectItemCaseSensitive(params, "rope_theta")) {
      if ((rc = get_num(&c, params, "rope_theta", 1, 0, &theta))) return rc;
      theta_key = "rope_parameters.rope_theta";
    }
    rc = parse_rope_kind(&c, params, cfg);
  } else if (scaling && !cJSON_IsNull(scaling)) { /* transformers v4 */
    if (!cJSON_IsObject(scaling))
      return FAIL(top, NS_EFORMAT, "rope_scaling", "%s", "expected an object or null");
    c.prefix = "rope_scaling.";
    rc = parse_rope_kind(&c, scaling, cfg);
  } else {
    cfg->rope = ROPE_DEFAULT;
  }
  if (rc) return rc;
  if (!(theta > 0 && theta <= 1e12))
    return FAIL(top, NS_ERANGE, theta_key, "%g is out of range (0, 1e12]", theta);
  cfg->rope_theta = (float)theta;
  return 0;
}

/* ---- eos ids ------------------------------------------------------------------------ */

static int add_eos(const jctx *c, const char *key, double d, model_cfg *cfg) {
  if (d != floor(d) || d < 0 || d >= (double)cfg->vocab_size)
    return FAIL(c, NS_ERANGE, key, "%g is not a token id in [0, %d)", d, cfg->vocab_size);
  for (int i = 0; i < cfg->n_eos; i++)
    if (cfg->eos_ids[i] == (int)d) return 0;
  if (cfg->n_eos == MODEL_MAX_EOS)
    return FAIL(c, NS_ERANGE, key, "more than %d distinct end-of-sequence ids", MODEL_MAX_EOS);
  cfg->eos_ids[cfg->n_eos++] = (int)d;
  return 0;
}

/* eos_token_id: an integer, a list of integers, or null. */
static int parse_eos(const jctx *c, const cJSON *o, model_cfg *cfg) {
  const char *key = "eos_token_id";
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!j || cJSON_IsNull(j)) return 0;
  if (cJSON_IsNumber(j)) return add_eos(c, key, j->valuedouble, cfg);
  if (!cJSON_IsArray(j))
    return FAIL(c, NS_EFORMAT, key, "%s", "expected an integer or a list of integers");
  const cJSON *e;
  cJSON_ArrayForEach(e, j) {
    if (!cJSON_IsNumber(e))
      return FAIL(c, NS_EFORMAT, key, "%s", "expected an integer or a list of integers");
    int rc = add_eos(c, key, e->valuedouble, cfg);
    if (rc) return rc;
  }
  return 0;
}

static int parse_bos(const jctx *c, const cJSON *o, model_cfg *cfg) {
  return get_int(c, o, "bos_token_id", 0, -1, 0, cfg->vocab_size - 1, &cfg->bos_id);
}

/* ---- architecture-specific settings --------------------------------------------------- */

static int parse_arch(const jctx *c, const cJSON *root, model_cfg *cfg) {
  const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
  const char *name = NULL, *key = "architectures";
  if (archs && !cJSON_IsNull(archs)) {
    if (!cJSON_IsArray(archs) || !cJSON_IsString(archs->child))
      return FAIL(c, NS_EFORMAT, key, "%s", "expected a list of strings");
    if (cJSON_GetArraySize(archs) != 1)
      return FAIL(c, NS_EUNSUPPORTED, key, "%s", "exactly one architecture is supported");
    name = archs->child->valuestring;
    if (strcmp(name, "LlamaForCausalLM") == 0)
      cfg->arch = ARCH_LLAMA;
    else if (strcmp(name, "MistralForCausalLM") == 0)
      cfg->arch = ARCH_MISTRAL;
    else if (strcmp(name, "Qwen2ForCausalLM") == 0)
      cfg->arch = ARCH_QWEN2;
    else
      name = NULL;
    if (name) return 0;
    return FAIL(c, NS_EUNSUPPORTED, key,
                "'%.60s' is not supported (LlamaForCausalLM, MistralForCausalLM or "
                "Qwen2ForCausalLM)",
                archs->child->valuestring);
  }
  key = "model_type";
  int rc = get_str(c, root, key, &name);
  if (rc) return rc;
  if (!name)
    return failf(c, NS_EFORMAT, "%s: architectures: required field is missing (and no model_type)",
                 c->file);
  if (strcmp(name, "llama") == 0)
    cfg->arch = ARCH_LLAMA;
  else if (strcmp(name, "mistral") == 0)
    cfg->arch = ARCH_MISTRAL;
  else if (strcmp(name, "qwen2") == 0)
    cfg->arch = ARCH_QWEN2;
  else
    return FAIL(c, NS_EUNSUPPORTED, key, "'%.60s' is not supported (llama, mistral or qwen2)",
                name);
  return 0;
}

/* Biases, sliding window and activation: what each architecture allows. */
static int parse_variants(const jctx *c, const cJSON *root, model_cfg *cfg) {
  int rc, b = 0;
  const char *act;
  if ((rc = get_str(c, root, "hidden_act", &act))) return rc;
  if (act && strcmp(act, "silu") != 0)
    return FAIL(c, NS_EUNSUPPORTED, "hidden_act", "'%.40s' is not supported (silu only)", act);
  if ((rc = get_bool(c, root, "mlp_bias", 0, &b))) return rc;
  if (b) return FAIL(c, NS_EUNSUPPORTED, "mlp_bias", "%s", "MLP biases are not supported");
  if (cJSON_GetObjectItemCaseSensitive(root, "quantization_config"))
    return FAIL(c, NS_EUNSUPPORTED, "quantization_config", "%s",
                "quantized checkpoints are not supported");
  cfg->qkv_bias = 0;
  switch (cfg->arch) {
  case ARCH_LLAMA:
    /* HF Llama's attention_bias puts biases on q, k, v and o; model_load accepts an
     * o_proj bias only when it is all zeros. */
    if ((rc = get_bool(c, root, "attention_bias", 0, &cfg->qkv_bias))) return rc;
    break;
  case ARCH_MISTRAL: {
    int sw;
    if ((rc = get_int(c, root, "sliding_window", 0, -1, 1, 1L << 30, &sw))) return rc;
    if (sw >= 0 && sw < cfg->max_pos)
      return FAIL(c, NS_EUNSUPPORTED, "sliding_window",
                  "sliding-window attention is not supported (window %d < "
                  "max_position_embeddings %d)",
                  sw, cfg->max_pos);
    break;
  }
  case ARCH_QWEN2:
    if ((rc = get_bool(c, root, "use_sliding_window", 0, &b))) return rc;
    if (b)
      return FAIL(c, NS_EUNSUPPORTED, "use_sliding_window", "%s",
                  "sliding-window attention is not supported");
    cfg->qkv_bias = 1; /* Qwen2's q/k/v projections always carry biases */
    break;
  }
  return 0;
}

static int parse_dtype(const jctx *c, const cJSON *root, model_cfg *cfg) {
  const char *key = "dtype", *s;
  int rc = get_str(c, root, key, &s);
  if (rc == 0 && !s) {
    key = "torch_dtype";
    rc = get_str(c, root, key, &s);
  }
  if (rc) return rc;
  if (!s || strcmp(s, "float32") == 0 || strcmp(s, "float") == 0)
    cfg->dtype = NS_F32;
  else if (strcmp(s, "bfloat16") == 0)
    cfg->dtype = NS_BF16;
  else if (strcmp(s, "float16") == 0 || strcmp(s, "half") == 0)
    cfg->dtype = NS_F16;
  else
    return FAIL(c, NS_EUNSUPPORTED, key, "'%.40s' is not supported (bfloat16, float16 or float32)",
                s);
  return 0;
}

/* ---- sizes -------------------------------------------------------------------------- */

static int parse_sizes(const jctx *c, const cJSON *root, model_cfg *cfg) {
  int rc;
  long dflt_pos = cfg->arch == ARCH_MISTRAL ? 131072 : cfg->arch == ARCH_QWEN2 ? 32768 : 2048;
  if ((rc = get_int(c, root, "vocab_size", 1, 0, 1, 1L << 22, &cfg->vocab_size)) ||
      (rc = get_int(c, root, "hidden_size", 1, 0, 1, 1L << 16, &cfg->hidden)) ||
      (rc = get_int(c, root, "intermediate_size", 1, 0, 1, 1L << 20, &cfg->intermediate)) ||
      (rc = get_int(c, root, "num_hidden_layers", 1, 0, 1, 1024, &cfg->n_layers)) ||
      (rc = get_int(c, root, "num_attention_heads", 1, 0, 1, 1024, &cfg->n_heads)) ||
      (rc = get_int(c, root, "num_key_value_heads", 0, cfg->n_heads, 1, 1024, &cfg->n_kv_heads)) ||
      (rc = get_int(c, root, "max_position_embeddings", 0, dflt_pos, 1, 1L << 24, &cfg->max_pos)))
    return rc;
  if (cfg->n_heads % cfg->n_kv_heads != 0)
    return FAIL(c, NS_EINVAL, "num_key_value_heads", "%d does not divide num_attention_heads %d",
                cfg->n_kv_heads, cfg->n_heads);
  const cJSON *hd = cJSON_GetObjectItemCaseSensitive(root, "head_dim");
  if (!hd || cJSON_IsNull(hd)) {
    if (cfg->hidden % cfg->n_heads != 0)
      return FAIL(c, NS_EINVAL, "hidden_size",
                  "%d is not a multiple of num_attention_heads %d (and no head_dim)", cfg->hidden,
                  cfg->n_heads);
    cfg->head_dim = cfg->hidden / cfg->n_heads;
  } else if ((rc = get_int(c, root, "head_dim", 1, 0, 1, 1024, &cfg->head_dim))) {
    return rc;
  }
  if (cfg->head_dim % 2 != 0)
    return FAIL(c, NS_EINVAL, "head_dim", "%d is odd (rotary embedding needs pairs)",
                cfg->head_dim);
  if ((long)cfg->head_dim * cfg->n_heads > (1L << 17))
    return FAIL(c, NS_ERANGE, "head_dim", "%d x num_attention_heads %d is too large", cfg->head_dim,
                cfg->n_heads);
  double eps;
  if ((rc = get_num(c, root, "rms_norm_eps", 0, 1e-6, &eps))) return rc;
  if (!(eps > 0 && eps < 1))
    return FAIL(c, NS_ERANGE, "rms_norm_eps", "%g is out of range (0, 1)", eps);
  cfg->rms_eps = (float)eps;
  return 0;
}

/* ---- entry point -------------------------------------------------------------------------- */

static int merge_generation_config(const char *dir, model_cfg *cfg, char *err, size_t errlen) {
  char path[4096];
  snprintf(path, sizeof path, "%s/generation_config.json", dir);
  if (access(path, F_OK) != 0) return 0;
  cJSON *root;
  int rc = read_json(path, &root, err, errlen);
  if (rc) return rc;
  jctx c = {path, "", err, errlen};
  rc = parse_eos(&c, root, cfg);
  if (rc == 0 && cfg->bos_id < 0) rc = parse_bos(&c, root, cfg);
  cJSON_Delete(root);
  return rc;
}

int model_cfg_load(const char *dir, model_cfg *cfg, char *err, size_t errlen) {
  memset(cfg, 0, sizeof *cfg);
  cfg->bos_id = -1;
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path) {
    jctx c = {dir, "", err, errlen};
    return failf(&c, NS_EINVAL, "%s: path too long", dir);
  }
  cJSON *root;
  int rc = read_json(path, &root, err, errlen);
  if (rc) return rc;
  jctx c = {path, "", err, errlen};
  if ((rc = parse_arch(&c, root, cfg)) || (rc = parse_sizes(&c, root, cfg)) ||
      (rc = parse_rope(&c, root, cfg)) || (rc = parse_variants(&c, root, cfg)) ||
      (rc = parse_dtype(&c, root, cfg)) ||
      (rc = get_bool(&c, root, "tie_word_embeddings", 0, &cfg->tie_embeddings)) ||
      (rc = parse_bos(&c, root, cfg)) || (rc = parse_eos(&c, root, cfg)))
    goto out;
  rc = merge_generation_config(dir, cfg, err, errlen);
out:
  cJSON_Delete(root);
  return rc;
}
