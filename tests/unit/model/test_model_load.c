/* test_model_load.c — model_load over checkpoint folders: hand-built ones (every
 * tensor tagged with its own value, mixed dtypes, shards, errors) and mkmodel's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mkmodel.h"
#include "model.h"
#include "ns_err.h"
#include "safetensors.h"
#include "tw.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char err[1024];

/* ---- a hand-built checkpoint: tensor i holds the value i + 1 everywhere ---------- */

enum { V = 16, H = 8, F = 12, NL = 2, NH = 4, NKV = 2, HD = 2 };

typedef struct tmodel {
  tw_tensor t[64];
  char names[64][96];
  void *data[64];
  int n;
} tmodel;

static const char *const dtypes[] = {"F32", "BF16", "F16"};

static void tm_add(tmodel *m, const char *name, int64_t d0, int64_t d1) {
  int i = m->n++;
  assert_true(i < 64);
  snprintf(m->names[i], sizeof m->names[i], "%s", name);
  tw_tensor *t = &m->t[i];
  t->name = m->names[i];
  t->dtype = dtypes[i % 3]; /* mixed dtypes in one checkpoint */
  t->ndim = d1 ? 2 : 1;
  t->shape[0] = d0;
  t->shape[1] = d1;
  size_t numel = (size_t)d0 * (size_t)(d1 ? d1 : 1), es = i % 3 == 0 ? 4 : 2;
  float v = (float)(i + 1);
  uint8_t *p = malloc(numel * es);
  for (size_t k = 0; k < numel; k++) {
    uint16_t h = i % 3 == 1 ? ns_f32_to_bf16(v) : ns_f32_to_f16(v);
    if (es == 4)
      memcpy(p + k * 4, &v, 4);
    else
      memcpy(p + k * 2, &h, 2);
  }
  m->data[i] = p;
  t->data = p;
  t->nbytes = numel * es;
}

/* flags: 1 = q/k/v biases, 2 = an lm_head.weight, 4 = an o_proj bias of value zero */
static void tm_build(tmodel *m, int flags) {
  memset(m, 0, sizeof *m);
  char nm[96];
  tm_add(m, "model.embed_tokens.weight", V, H);
  for (int l = 0; l < NL; l++) {
#define ADD(suffix, d0, d1)                                                                        \
  do {                                                                                             \
    snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix);                                      \
    tm_add(m, nm, d0, d1);                                                                         \
  } while (0)
    ADD("input_layernorm.weight", H, 0);
    ADD("self_attn.q_proj.weight", NH * HD, H);
    ADD("self_attn.k_proj.weight", NKV * HD, H);
    ADD("self_attn.v_proj.weight", NKV * HD, H);
    if (flags & 1) {
      ADD("self_attn.q_proj.bias", NH * HD, 0);
      ADD("self_attn.k_proj.bias", NKV * HD, 0);
      ADD("self_attn.v_proj.bias", NKV * HD, 0);
    }
    ADD("self_attn.o_proj.weight", H, NH * HD);
    if (flags & 4) {
      ADD("self_attn.o_proj.bias", H, 0);
      memset(m->data[m->n - 1], 0, m->t[m->n - 1].nbytes);
    }
    ADD("self_attn.rotary_emb.inv_freq", HD / 2, 0); /* unknown extras are ignored */
    ADD("post_attention_layernorm.weight", H, 0);
    ADD("mlp.gate_proj.weight", F, H);
    ADD("mlp.up_proj.weight", F, H);
    ADD("mlp.down_proj.weight", H, F);
#undef ADD
  }
  tm_add(m, "model.norm.weight", H, 0);
  if (flags & 2) tm_add(m, "lm_head.weight", V, H);
}

static void tm_free(tmodel *m) {
  for (int i = 0; i < m->n; i++)
    free(m->data[i]);
}

static int tm_find(const tmodel *m, const char *name) {
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->names[i], name) == 0) return i;
  return -1;
}

static void tm_drop(tmodel *m, const char *name) {
  int i = tm_find(m, name);
  assert_true(i >= 0);
  free(m->data[i]);
  m->t[i] = m->t[m->n - 1];
  m->data[i] = m->data[m->n - 1];
  memcpy(m->names[i], m->names[m->n - 1], sizeof m->names[i]);
  m->t[i].name = m->names[i];
  m->n--;
}

static void write_config(const char *dir, const char *arch, const char *extra) {
  char text[2048];
  snprintf(text, sizeof text,
           "{\"architectures\": [\"%s\"], \"vocab_size\": %d, \"hidden_size\": %d, "
           "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
           "\"num_key_value_heads\": %d, \"torch_dtype\": \"bfloat16\"%s}",
           arch, V, H, F, NL, NH, NKV, extra);
  assert_int_equal(tw_write_text(tw_path(dir, "config.json"), text), 0);
}

/* t holds the tag of tensor name in m, its dtype and shape [d0, d1] (d1 0: a vector). */
static void check(const tmodel *m, const tensor_t *t, const char *name, int64_t d0, int64_t d1) {
  int i = tm_find(m, name);
  if (i < 0) fail_msg("no %s in the test model", name);
  if (!t->data) fail_msg("%s: not bound", name);
  assert_int_equal(t->ndim, d1 ? 2 : 1);
  assert_int_equal(t->shape[0], d0);
  if (d1) assert_int_equal(t->shape[1], d1);
  assert_string_equal(ns_dtype_name(t->dtype), dtypes[i % 3]);
  size_t n = (size_t)d0 * (size_t)(d1 ? d1 : 1);
  float first, last;
  ns_convert_to_f32(&first, t->data, t->dtype, 1);
  ns_convert_to_f32(&last, (const uint8_t *)t->data + (n - 1) * ns_dtype_size(t->dtype), t->dtype,
                    1);
  if (first != (float)(i + 1) || last != (float)(i + 1))
    fail_msg("%s: holds %g..%g, want tag %d", name, first, last, i + 1);
  assert_int_equal((uintptr_t)t->data % ns_dtype_size(t->dtype), 0);
}

static void check_all(const tmodel *m, const model_t *mod, int bias) {
  check(m, &mod->embed, "model.embed_tokens.weight", V, H);
  check(m, &mod->final_norm, "model.norm.weight", H, 0);
  char nm[96];
  for (int l = 0; l < NL; l++) {
    const layer_weights *w = &mod->layers[l];
#define CHK(field, suffix, d0, d1)                                                                 \
  do {                                                                                             \
    snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix);                                      \
    check(m, &w->field, nm, d0, d1);                                                               \
  } while (0)
    CHK(attn_norm, "input_layernorm.weight", H, 0);
    CHK(wq, "self_attn.q_proj.weight", NH * HD, H);
    CHK(wk, "self_attn.k_proj.weight", NKV * HD, H);
    CHK(wv, "self_attn.v_proj.weight", NKV * HD, H);
    CHK(wo, "self_attn.o_proj.weight", H, NH * HD);
    CHK(mlp_norm, "post_attention_layernorm.weight", H, 0);
    CHK(w_gate, "mlp.gate_proj.weight", F, H);
    CHK(w_up, "mlp.up_proj.weight", F, H);
    CHK(w_down, "mlp.down_proj.weight", H, F);
    if (bias) {
      CHK(bq, "self_attn.q_proj.bias", NH * HD, 0);
      CHK(bk, "self_attn.k_proj.bias", NKV * HD, 0);
      CHK(bv, "self_attn.v_proj.bias", NKV * HD, 0);
    } else {
      assert_null(w->bq.data);
      assert_null(w->bk.data);
      assert_null(w->bv.data);
    }
#undef CHK
  }
}

static model_t *load_ok(const char *dir) {
  model_t *m = NULL;
  int rc = model_load(dir, &m, err, sizeof err);
  if (rc) fail_msg("model_load: %d: %s", rc, err);
  return m;
}

static void load_fails(const char *dir, int code, const char *must1, const char *must2) {
  model_t *m = (model_t *)1;
  err[0] = '\0';
  int rc = model_load(dir, &m, err, sizeof err);
  if (rc != code) fail_msg("rc %d, want %d; err '%s'", rc, code, err);
  assert_null(m);
  if (must1 && !strstr(err, must1)) fail_msg("error '%s' does not name '%s'", err, must1);
  if (must2 && !strstr(err, must2)) fail_msg("error '%s' does not name '%s'", err, must2);
}

/* ---- hand-built checkpoints ------------------------------------------------------------ */

static void test_llama_all_tensors(void **state) {
  (void)state;
  char *dir = tw_tmpdir();
  tmodel m;
  tm_build(&m, 2);
  write_config(dir, "LlamaForCausalLM", ", \"eos_token_id\": 2");
  assert_int_equal(tw_write(tw_path(dir, "model.safetensors"), m.t, m.n, 0), 0);
  model_t *mod = load_ok(dir);
  assert_int_equal(mod->cfg.arch, ARCH_LLAMA);
  assert_int_equal(mod->cfg.dtype, NS_BF16);
  assert_string_equal(mod->dir, dir);
  check_all(&m, mod, 0);
  check(&m, &mod->lm_head, "lm_head.weight", V, H);
  assert_ptr_not_equal(mod->lm_head.data, mod->embed.data);
  model_free(mod);
  tm_free(&m);
  tw_rmdir(dir);
}

static void test_qwen2_tied_biases(void **state) {
  (void)state;
  char *dir = tw_tmpdir();
  tmodel m;
  tm_build(&m, 1 | 2); /* tied, but the file also stores an lm_head copy */
  write_config(dir, "Qwen2ForCausalLM", ", \"tie_word_embeddings\": true");
  assert_int_equal(tw_write(tw_path(dir, "model.safetensors"), m.t, m.n, 0), 0);
  model_t *mod = load_ok(dir);
  assert_int_equal(mod->cfg.qkv_bias, 1);
  check_all(&m, mod, 1);
  assert_ptr_equal(mod->lm_head.data, mod->embed.data); /* embed, not the stored copy */
  model_free(mod);
  /* without the copy it loads the same way */
  tm_drop(&m, "lm_head.weight");
  assert_int_equal(tw_write(tw_path(dir, "model.safetensors"), m.t, m.n, 0), 0);
  mod = load_ok(dir);
  assert_ptr_equal(mod->lm_head.data, mod->embed.data);
  model_free(mod);
  /* a missing bias is named */
  tm_drop(&m, "model.layers.1.self_attn.v_proj.bias");
  assert_int_equal(tw_write(tw_path(dir, "model.safetensors"), m.t, m.n, 0), 0);
  load_fails(dir, NS_EFORMAT, "model.safetensors", "model.layers.1.self_attn.v_proj.bias");
  tm_free(&m);
  tw_rmdir(dir);
}

static void test_missing_tensor(void **state) {
  (void)state;
  char *dir = tw_tmpdir();
  tmodel m;
  tm_build(&m, 2);
  write_config(dir, "LlamaForCausalLM", "");
  tm_drop(&m, "model.layers.1.self_attn.k_proj.weight");
  assert_int_equal(tw_write(tw_path(dir, "model.safetensors"), m.t, m.n, 0), 0);
  load_fails(dir, NS_EFORMAT, "model.safetensors", "model.layers.1.self_attn.k_proj.weight");
  tm_free(&m);
  /* untied without lm_head */
  tm_build(&m, 0);
  assert_int_equal(tw_write(tw_path(dir, "model.safetensors"), m.t, m.n, 0), 0);
  load_fails(dir, NS_EFORMAT, "model.safetensors", "lm_head.weight");
  tm_free(&m);
  /* no weights at all */
  unlink(tw_path(dir, "model.safetensors"));
  load_fails(dir, NS_ENOENT, "model.safetensors", NULL);
  tw_rmdir(dir);
}

static void test_wrong_shape(void **state) {
  (void)state;
  char *dir = tw_tmpdir();
  tmodel m;
  tm_build(&m, 2);
  write_config(dir, "LlamaForCausalLM", "");
  int i = tm_find(&m, "model.layers.1.mlp.down_proj.weight");
  m.t[i].shape[0] = F; /* [12, 8] where [8, 12] is expected: same byte size */
  m.t[i].shape[1] = H;
  assert_int_equal(tw_write(tw_path(dir, "model.safetensors"), m.t, m.n, 0), 0);
  load_fails(dir, NS_EFORMAT, "model.safetensors: model.layers.1.mlp.down_proj.weight",
             "shape [12, 8], expected [8, 12]");
  tm_free(&m);
  tw_rmdir(dir);
}

static void test_o_proj_bias(void **state) {
  (void)state;
  char *dir = tw_tmpdir();
  tmodel m;
  tm_build(&m, 1 | 2 | 4);
  write_config(dir, "LlamaForCausalLM", ", \"attention_bias\": true");
  assert_int_equal(tw_write(tw_path(dir, "model.safetensors"), m.t, m.n, 0), 0);
  model_t *mod = load_ok(dir); /* an all-zero o_proj bias changes nothing */
  check_all(&m, mod, 1);
  model_free(mod);
  int i = tm_find(&m, "model.layers.1.self_attn.o_proj.bias");
  ((uint8_t *)m.data[i])[m.t[i].nbytes - 1] = 0x3c; /* last element non-zero */
  assert_int_equal(tw_write(tw_path(dir, "model.safetensors"), m.t, m.n, 0), 0);
  load_fails(dir, NS_EUNSUPPORTED, "model.layers.1.self_attn.o_proj.bias", "not supported");
  tm_free(&m);
  tw_rmdir(dir);
}

static void test_unaligned_data(void **state) {
  (void)state;
  char *dir = tw_tmpdir();
  tmodel m;
  tm_build(&m, 2);
  write_config(dir, "LlamaForCausalLM", "");
  assert_int_equal(tw_write(tw_path(dir, "model.safetensors"), m.t, m.n, 1), 0);
  model_t *mod = load_ok(dir);
  check_all(&m, mod, 0); /* check() also asserts each pointer is aligned */
  model_free(mod);
  tm_free(&m);
  tw_rmdir(dir);
}

/* Two shards and an index, all written by hand. */
static void test_sharded_handmade(void **state) {
  (void)state;
  char *dir = tw_tmpdir();
  tmodel m;
  tm_build(&m, 2);
  write_config(dir, "LlamaForCausalLM", "");
  int half = m.n / 2;
  assert_int_equal(tw_write(tw_path(dir, "model-00001-of-00002.safetensors"), m.t, half, 0), 0);
  assert_int_equal(
      tw_write(tw_path(dir, "model-00002-of-00002.safetensors"), m.t + half, m.n - half, 0), 0);
  char *idx = malloc(65536);
  size_t len =
      (size_t)snprintf(idx, 65536, "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {");
  for (int i = 0; i < m.n; i++)
    len +=
        (size_t)snprintf(idx + len, 65536 - len, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"",
                         i ? ", " : "", m.names[i], i < half ? 1 : 2);
  snprintf(idx + len, 65536 - len, "}}");
  const char *ip = tw_path(dir, "model.safetensors.index.json");
  assert_int_equal(tw_write_text(ip, idx), 0);
  model_t *mod = load_ok(dir);
  check_all(&m, mod, 0);
  check(&m, &mod->lm_head, "lm_head.weight", V, H);
  model_free(mod);

  /* the index names a tensor its shard does not hold */
  idx[len] = '\0';
  char *bad = malloc(70000);
  snprintf(bad, 70000, "%s, \"extra.weight\": \"model-00001-of-00002.safetensors\"}}", idx);
  assert_int_equal(tw_write_text(ip, bad), 0);
  load_fails(dir, NS_EFORMAT, "model.safetensors.index.json", "extra.weight");
  /* a shard that is not there */
  snprintf(bad, 70000, "%s, \"extra.weight\": \"model-00003-of-00002.safetensors\"}}", idx);
  assert_int_equal(tw_write_text(ip, bad), 0);
  load_fails(dir, NS_ENOENT, "model-00003-of-00002.safetensors", NULL);
  /* a shard outside the folder */
  snprintf(bad, 70000, "%s, \"extra.weight\": \"../model.safetensors\"}}", idx);
  assert_int_equal(tw_write_text(ip, bad), 0);
  load_fails(dir, NS_EFORMAT, "model.safetensors.index.json", "extra.weight");
  /* a tensor the index does not list is missing, named with the index */
  snprintf(bad, 70000,
           "{\"weight_map\": {\"model.norm.weight\": "
           "\"model-00002-of-00002.safetensors\"}}");
  assert_int_equal(tw_write_text(ip, bad), 0);
  load_fails(dir, NS_EFORMAT, "model.safetensors.index.json", "model.embed_tokens.weight");
  assert_int_equal(tw_write_text(ip, "{\"weight_map\": []}"), 0);
  load_fails(dir, NS_EFORMAT, "model.safetensors.index.json", "weight_map");
  free(bad);
  free(idx);
  tm_free(&m);
  tw_rmdir(dir);
}

/* ---- mkmodel's folders ----------------------------------------------------------------------- */

static void mk(const char *shape, const char *out, uint64_t seed, uint64_t shard) {
  mkmodel_opts o = {shape, out, seed, NULL, NULL, shard};
  int rc = mkmodel_write(&o, err, sizeof err);
  if (rc) fail_msg("mkmodel_write: %s", err);
}

static void test_mkmodel_tiny_loads(void **state) {
  (void)state;
  char *dir = tw_tmpdir();
  mk("tiny", dir, 7, 0);
  model_t *mod = load_ok(dir);
  const model_cfg *c = &mod->cfg;
  assert_int_equal(c->hidden, 64);
  assert_int_equal(c->intermediate, 176);
  assert_int_equal(c->n_layers, 2);
  assert_int_equal(c->n_heads, 4);
  assert_int_equal(c->n_kv_heads, 2);
  assert_int_equal(c->vocab_size % 8, 0);
  assert_true(c->vocab_size >= 256 && c->vocab_size <= 1024);
  assert_int_equal(c->dtype, NS_F32);
  assert_true(c->bos_id >= 256 && c->bos_id < c->vocab_size);
  assert_true(c->n_eos >= 1);
  /* every tensor is bound and matches the file's bytes */
  st_file *st;
  assert_int_equal(st_open(tw_path(dir, "model.safetensors"), &st, err, sizeof err), 0);
  assert_int_equal(st_count(st), 3 + 9 * (size_t)c->n_layers);
  const st_tensor *emb = st_find(st, "model.embed_tokens.weight");
  assert_int_equal(tensor_nbytes(&mod->embed), emb->nbytes);
  assert_memory_equal(mod->embed.data, emb->data, emb->nbytes);
  for (size_t i = 0; i < st_count(st); i++) {
    const st_tensor *t = st_at(st, i);
    assert_int_equal(t->dtype, NS_F32);
  }
  const st_tensor *up = st_find(st, "model.layers.1.mlp.up_proj.weight");
  assert_memory_equal(mod->layers[1].w_up.data, up->data, up->nbytes);
  assert_ptr_not_equal(mod->lm_head.data, mod->embed.data);

  /* Rewrite the file with one shape changed: the error names the tensor. */
  tw_tensor t[64];
  int n = 0;
  for (size_t i = 0; i < st_count(st); i++, n++) {
    const st_tensor *s = st_at(st, i);
    t[n] = (tw_tensor){s->name, "F32", s->ndim, {0}, s->data, s->nbytes};
    for (int d = 0; d < s->ndim; d++)
      t[n].shape[d] = s->shape[d];
    if (s == up) { /* [176, 63]: one column fewer */
      t[n].shape[1] = 63;
      t[n].nbytes = 176 * 63 * 4;
    }
  }
  const char *bad = tw_path(dir, "model.safetensors.new");
  assert_int_equal(tw_write(bad, t, n, 0), 0);
  st_close(st);
  model_free(mod);
  assert_int_equal(rename(bad, tw_path(dir, "model.safetensors")), 0);
  load_fails(dir, NS_EFORMAT, "model.safetensors: model.layers.1.mlp.up_proj.weight",
             "shape [176, 63], expected [176, 64]");
  tw_rmdir(dir);
}

/* model-NNNNN-of-NNNNN.safetensors files in dir */
static int count_shards(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    n += strncmp(e->d_name, "model-", 6) == 0 && strstr(e->d_name, "-of-") != NULL;
  if (d) closedir(d);
  return n;
}

static void test_mkmodel_sharded_same_values(void **state) {
  (void)state;
  char *one = tw_tmpdir(), *many = tw_tmpdir();
  mk("tiny-qwen2", one, 3, 0);
  mk("tiny-qwen2", many, 3, 60000);
  assert_int_equal(access(tw_path(many, "model.safetensors.index.json"), F_OK), 0);
  assert_int_equal(access(tw_path(many, "model.safetensors"), F_OK), -1);
  assert_true(count_shards(many) >= 3);
  model_t *a = load_ok(one), *b = load_ok(many);
  assert_int_equal(b->cfg.arch, ARCH_QWEN2);
  assert_int_equal(b->cfg.qkv_bias, 1);
  assert_int_equal(b->cfg.tie_embeddings, 1);
  assert_ptr_equal(b->lm_head.data, b->embed.data);
  assert_memory_equal(a->embed.data, b->embed.data, tensor_nbytes(&a->embed));
  assert_memory_equal(a->final_norm.data, b->final_norm.data, tensor_nbytes(&a->final_norm));
  for (int l = 0; l < a->cfg.n_layers; l++) {
    const layer_weights *x = &a->layers[l], *y = &b->layers[l];
    const tensor_t *ta[] = {&x->attn_norm, &x->wq, &x->wk,       &x->wv,     &x->bq,   &x->bk,
                            &x->bv,        &x->wo, &x->mlp_norm, &x->w_gate, &x->w_up, &x->w_down};
    const tensor_t *tb[] = {&y->attn_norm, &y->wq, &y->wk,       &y->wv,     &y->bq,   &y->bk,
                            &y->bv,        &y->wo, &y->mlp_norm, &y->w_gate, &y->w_up, &y->w_down};
    for (size_t k = 0; k < sizeof ta / sizeof ta[0]; k++) {
      assert_non_null(tb[k]->data);
      assert_int_equal(tensor_nbytes(ta[k]), tensor_nbytes(tb[k]));
      assert_memory_equal(ta[k]->data, tb[k]->data, tensor_nbytes(ta[k]));
    }
  }
  /* norms are near one but not all ones; weights are small and not all equal */
  float w[64];
  ns_convert_to_f32(w, a->final_norm.data, a->final_norm.dtype, 64);
  int ones = 0;
  for (int i = 0; i < 64; i++) {
    assert_true(w[i] > 0.7f && w[i] < 1.3f);
    ones += w[i] == 1.0f;
  }
  assert_true(ones < 16);
  model_free(a);
  model_free(b);
  /* rewriting a sharded folder as a single file removes the stale index */
  mk("tiny-qwen2", many, 3, 0);
  assert_int_equal(access(tw_path(many, "model.safetensors.index.json"), F_OK), -1);
  b = load_ok(many);
  model_free(b);
  tw_rmdir(one);
  tw_rmdir(many);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_all_tensors),
      cmocka_unit_test(test_qwen2_tied_biases),
      cmocka_unit_test(test_missing_tensor),
      cmocka_unit_test(test_wrong_shape),
      cmocka_unit_test(test_o_proj_bias),
      cmocka_unit_test(test_unaligned_data),
      cmocka_unit_test(test_sharded_handmade),
      cmocka_unit_test(test_mkmodel_tiny_loads),
      cmocka_unit_test(test_mkmodel_sharded_same_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
