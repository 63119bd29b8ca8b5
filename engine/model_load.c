/* model_load.c — a checkpoint folder's weights bound to model_t: every tensor
 * found, shape- and dtype-checked, memory-mapped (model_load, model_free). */
#include "model.h"

#include "ns_err.h"
#include "safetensors.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct model_priv {
  st_set *set;
  void **copies; /* aligned copies of tensors the file left unaligned */
  size_t ncopies;
} model_priv;

typedef struct binder {
  model_t *m;
  model_priv *p;
  char *err;
  size_t errlen;
} binder;

static void fmt_shape(char *buf, size_t len, int ndim, const int64_t *shape) {
  size_t o = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < ndim && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (o < len) snprintf(buf + o, len - o, "]");
}

/* Bind name (shape [d0] or [d0, d1]; d1 < 0 for a vector) into *dst. */
static int bind(binder *b, const char *name, int64_t d0, int64_t d1, tensor_t *dst) {
  const char *file = NULL;
  const st_tensor *t = st_set_find(b->p->set, name, &file);
  memset(dst, 0, sizeof *dst);
  if (!t) return ns_errf(b->err, b->errlen, NS_EFORMAT, "%s: %s: tensor is missing", file, name);
  int ndim = d1 < 0 ? 1 : 2;
  int64_t want[2] = {d0, d1};
  int ok = t->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++)
    ok = t->shape[i] == want[i];
  if (!ok) {
    char got[160], exp[64];
    fmt_shape(got, sizeof got, t->ndim, t->shape);
    fmt_shape(exp, sizeof exp, ndim, want);
    return ns_errf(b->err, b->errlen, NS_EFORMAT, "%s: %s: shape %s, expected %s", file, name, got,
                   exp);
  }
  if (t->dtype != NS_F32 && t->dtype != NS_F16 && t->dtype != NS_BF16)
    return ns_errf(b->err, b->errlen, NS_EUNSUPPORTED, "%s: %s: dtype %s is not a float dtype",
                   file, name, ns_dtype_name(t->dtype));
  void *data = (void *)t->data;
  size_t es = ns_dtype_size(t->dtype);
  if ((uintptr_t)data % es != 0) { /* the format allows it; consumers need aligned floats */
    void **grown = realloc(b->p->copies, (b->p->ncopies + 1) * sizeof *grown);
    void *copy = malloc(t->nbytes ? t->nbytes : 1);
    if (!grown || !copy) {
      if (grown) b->p->copies = grown;
      free(copy);
      return ns_errf(b->err, b->errlen, NS_ENOMEM, "%s: %s: out of memory", file, name);
    }
    b->p->copies = grown;
    memcpy(copy, data, t->nbytes);
    b->p->copies[b->p->ncopies++] = copy;
    data = copy;
  }
  dst->data = data;
  dst->dtype = t->dtype;
  dst->ndim = ndim;
  dst->shape[0] = d0;
  if (ndim == 2) dst->shape[1] = d1;
  return 0;
}

/* HF Llama's attention_bias also creates o_proj.bias; only an all-zero one is harmless. */
static int check_no_o_bias(binder *b, int layer) {
  char name[128];
  snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.bias", layer);
  const char *file = NULL;
  const st_tensor *t = st_set_find(b->p->set, name, &file);
  if (!t) return 0;
  const uint8_t *p = t->data;
  for (size_t i = 0; i < t->nbytes; i++) {
    /* -0.0 is zero too: ignore the sign bit of each element */
    size_t es = ns_dtype_size(t->dtype);
    uint8_t v = (i % es == es - 1) ? (uint8_t)(p[i] & 0x7f) : p[i];
    if (v)
      return ns_errf(b->err, b->errlen, NS_EUNSUPPORTED,
                     "%s: %s: output-projection biases are not supported (non-zero values)", file,
                     name);
  }
  return 0;
}

static int bind_layer(binder *b, int i) {
  const model_cfg *c = &b->m->cfg;
  layer_weights *l = &b->m->layers[i];
  int64_t h = c->hidden, q = (int64_t)c->n_heads * c->head_dim;
  int64_t kv = (int64_t)c->n_kv_heads * c->head_dim, f = c->intermediate;
  struct {
    const char *suffix;
    int64_t d0, d1;
    int use; /* biases only with qkv_bias: otherwise they go unused, as in HF */
    tensor_t *dst;
  } spec[] = {
      {"input_layernorm.weight", h, -1, 1, &l->attn_norm},
      {"self_attn.q_proj.weight", q, h, 1, &l->wq},
      {"self_attn.k_proj.weight", kv, h, 1, &l->wk},
      {"self_attn.v_proj.weight", kv, h, 1, &l->wv},
      {"self_attn.q_proj.bias", q, -1, c->qkv_bias, &l->bq},
      {"self_attn.k_proj.bias", kv, -1, c->qkv_bias, &l->bk},
      {"self_attn.v_proj.bias", kv, -1, c->qkv_bias, &l->bv},
      {"self_attn.o_proj.weight", h, q, 1, &l->wo},
      {"post_attention_layernorm.weight", h, -1, 1, &l->mlp_norm},
      {"mlp.gate_proj.weight", f, h, 1, &l->w_gate},
      {"mlp.up_proj.weight", f, h, 1, &l->w_up},
      {"mlp.down_proj.weight", h, f, 1, &l->w_down},
  };
  for (size_t k = 0; k < sizeof spec / sizeof spec[0]; k++) {
    char name[128];
    snprintf(name, sizeof name, "model.layers.%d.%s", i, spec[k].suffix);
    if (!spec[k].use) continue;
    int rc = bind(b, name, spec[k].d0, spec[k].d1, spec[k].dst);
    if (rc) return rc;
  }
  return check_no_o_bias(b, i);
}

int model_load(const char *dir, model_t **out, char *err, size_t errlen) {
  *out = NULL;
  model_t *m = calloc(1, sizeof *m);
  model_priv *p = calloc(1, sizeof *p);
  if (!m || !p) {
    free(m);
    free(p);
    return ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", dir);
  }
  m->priv_ = p;
  int rc = NS_ENOMEM;
  m->dir = strdup(dir);
  if (!m->dir) goto nomem;
  if ((rc = model_cfg_load(dir, &m->cfg, err, errlen))) goto err;
  if ((rc = st_set_open(dir, &p->set, err, errlen))) goto err;
  const model_cfg *c = &m->cfg;
  m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
  if (!m->layers) goto nomem;
  binder b = {m, p, err, errlen};
  if ((rc = bind(&b, "model.embed_tokens.weight", c->vocab_size, c->hidden, &m->embed)) ||
      (rc = bind(&b, "model.norm.weight", c->hidden, -1, &m->final_norm)))
    goto err;
  /* Tied: lm_head is embed_tokens, even when the file also stores a copy. */
  if (c->tie_embeddings)
    m->lm_head = m->embed;
  else if ((rc = bind(&b, "lm_head.weight", c->vocab_size, c->hidden, &m->lm_head)))
    goto err;
  for (int i = 0; i < c->n_layers; i++)
    if ((rc = bind_layer(&b, i))) goto err;
  *out = m;
  return 0;
nomem:
  rc = ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", dir);
err:
  model_free(m);
  return rc;
}

void model_free(model_t *m) {
  if (!m) return;
  model_priv *p = m->priv_;
  if (p) {
    st_set_close(p->set);
    for (size_t i = 0; i < p->ncopies; i++)
      free(p->copies[i]);
    free(p->copies);
    free(p);
  }
  free(m->layers);
  free(m->dir);
  free(m);
}
