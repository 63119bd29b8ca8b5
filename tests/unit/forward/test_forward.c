/* test_forward.c — the forward pass on the CPU backend with random tiny models built in
 * memory: logits against a naive double-precision transformer written here; one prefill
 * == token-by-token decode == chunked prefill == a ragged batch of several sequences;
 * greedy and seeded generation identical alone and batched, with 1 and 2 threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backend.h"
#include "forward.h"
#include "gen.h"
#include "kv.h"
#include "ns_err.h"
#include "ref/sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { V = 61, HID = 32, NH = 4, NKV = 2, HD = 8, INTER = 48, NL = 2, PT = 4, PAGES = 96 };

/* ---- a random model in memory ---------------------------------------------------------- */

typedef struct tiny {
  model_t m;
  layer_weights layers[NL];
  void *bufs[64];
  int n_bufs;
  ns_dtype dt;
  uint64_t rng;
} tiny;

static float frand(tiny *t) {
  t->rng ^= t->rng << 13, t->rng ^= t->rng >> 7, t->rng ^= t->rng << 17;
  return (float)((t->rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* A tensor of n random values in [center - spread, center + spread], stored as t->dt. */
static tensor_t rand_tensor(tiny *t, int64_t rows, int64_t cols, float center, float spread) {
  int64_t n = rows * cols;
  tensor_t x = {0};
  x.dtype = t->dt;
  x.ndim = cols > 1 ? 2 : 1;
  x.shape[0] = rows;
  if (cols > 1) x.shape[1] = cols;
  x.data = malloc((size_t)n * ns_dtype_size(t->dt));
  t->bufs[t->n_bufs++] = x.data;
  for (int64_t i = 0; i < n; i++) {
    float v = center + spread * frand(t);
    if (t->dt == NS_F32)
      ((float *)x.data)[i] = v;
    else if (t->dt == NS_BF16)
      ((uint16_t *)x.data)[i] = ns_f32_to_bf16(v);
    else
      ((uint16_t *)x.data)[i] = ns_f32_to_f16(v);
  }
  return x;
}

static void tiny_build(tiny *t, ns_dtype dt, int bias, int tied, int rope, uint64_t seed) {
  memset(t, 0, sizeof *t);
  t->dt = dt;
  t->rng = seed;
  model_cfg *c = &t->m.cfg;
  c->arch = bias ? ARCH_QWEN2 : ARCH_LLAMA;
  c->vocab_size = V, c->hidden = HID, c->intermediate = INTER, c->n_layers = NL;
  c->n_heads = NH, c->n_kv_heads = NKV, c->head_dim = HD, c->rms_eps = 1e-5f;
  c->rope_theta = 10000.0f, c->rope = (rope_kind)rope, c->rope_factor = 4.0f;
  c->rope_low_freq_factor = 1.0f, c->rope_high_freq_factor = 4.0f;
  c->rope_original_max_pos = 32, c->tie_embeddings = tied, c->qkv_bias = bias;
  c->max_pos = 512, c->bos_id = 1, c->eos_ids[0] = 2, c->n_eos = 1, c->dtype = dt;
  float ws = 0.35f;
  t->m.embed = rand_tensor(t, V, HID, 0, 1.0f);
  t->m.final_norm = rand_tensor(t, HID, 1, 1.0f, 0.2f);
  t->m.lm_head = tied ? t->m.embed : rand_tensor(t, V, HID, 0, ws);
  for (int l = 0; l < NL; l++) {
    layer_weights *L = &t->layers[l];
    L->attn_norm = rand_tensor(t, HID, 1, 1.0f, 0.2f);
    L->wq = rand_tensor(t, NH * HD, HID, 0, ws);
    L->wk = rand_tensor(t, NKV * HD, HID, 0, ws);
    L->wv = rand_tensor(t, NKV * HD, HID, 0, ws);
    if (bias) {
      L->bq = rand_tensor(t, NH * HD, 1, 0, 0.5f);
      L->bk = rand_tensor(t, NKV * HD, 1, 0, 0.5f);
      L->bv = rand_tensor(t, NKV * HD, 1, 0, 0.5f);
    }
    L->wo = rand_tensor(t, HID, NH * HD, 0, ws);
    L->mlp_norm = rand_tensor(t, HID, 1, 1.0f, 0.2f);
    L->w_gate = rand_tensor(t, INTER, HID, 0, ws);
    L->w_up = rand_tensor(t, INTER, HID, 0, ws);
    L->w_down = rand_tensor(t, HID, INTER, 0, ws);
  }
  t->m.layers = t->layers;
}

static void tiny_free(tiny *t) {
  for (int i = 0; i < t->n_bufs; i++)
    free(t->bufs[i]);
}

/* ---- the naive reference, in double -------------------------------------------------------- */

static double wget(const tensor_t *x, int64_t i) {
  if (x->dtype == NS_F32) return ((const float *)x->data)[i];
  if (x->dtype == NS_BF16) return ns_bf16_to_f32(((const uint16_t *)x->data)[i]);
  return ns_f16_to_f32(((const uint16_t *)x->data)[i]);
}

/* y[n] = sum_k x[k] W[n, k] (+ b[n]) */
static void lin(double *y, const double *x, const tensor_t *w, const tensor_t *b, int N, int K) {
  for (int n = 0; n < N; n++) {
    double acc = b && b->data ? wget(b, n) : 0;
    for (int k = 0; k < K; k++)
      acc += x[k] * wget(w, (int64_t)n * K + k);
    y[n] = acc;
  }
}

static void norm(double *y, const double *x, const tensor_t *w, double eps) {
  double ss = 0;
  for (int i = 0; i < HID; i++)
    ss += x[i] * x[i];
  double inv = 1.0 / sqrt(ss / HID + eps);
  for (int i = 0; i < HID; i++)
    y[i] = x[i] * inv * wget(w, i);
}

static double inv_freq(const model_cfg *c, int i) {
  double f = pow(c->rope_theta, -2.0 * i / HD);
  if (c->rope == ROPE_LINEAR) return f / c->rope_factor;
  if (c->rope == ROPE_LLAMA3) {
    double wl = 2 * M_PI / f, orig = c->rope_original_max_pos;
    if (wl < orig / c->rope_high_freq_factor) return f;
    if (wl > orig / c->rope_low_freq_factor) return f / c->rope_factor;
    double sm = (orig / wl - c->rope_low_freq_factor) /
                (c->rope_high_freq_factor - c->rope_low_freq_factor);
    return (1 - sm) * f / c->rope_factor + sm * f;
  }
  return f;
}

static void rope(double *v, int n_heads, int pos, const model_cfg *c) {
  for (int h = 0; h < n_heads; h++)
    for (int i = 0; i < HD / 2; i++) {
      double a = v[h * HD + i], b = v[h * HD + i + HD / 2], ang = pos * inv_freq(c, i);
      v[h * HD + i] = a * cos(ang) - b * sin(ang);
      v[h * HD + i + HD / 2] = b * cos(ang) + a * sin(ang);
    }
}

/* logits[n][V] of every position of ids[0..n) */
static void naive_forward(const model_t *m, const int32_t *ids, int n, double *logits) {
  const model_cfg *c = &m->cfg;
  double *x = calloc((size_t)n * HID, 8), *K = calloc((size_t)NL * n * NKV * HD, 8);
  double *Vv = calloc((size_t)NL * n * NKV * HD, 8);
  double h[HID], q[NH * HD], att[NH * HD], o[HID], g[INTER], u[INTER], sc[512];
  for (int t = 0; t < n; t++)
    for (int i = 0; i < HID; i++)
      x[t * HID + i] = wget(&m->embed, (int64_t)ids[t] * HID + i);
  for (int l = 0; l < NL; l++) {
    const layer_weights *L = &m->layers[l];
    double *Kl = K + (size_t)l * n * NKV * HD, *Vl = Vv + (size_t)l * n * NKV * HD;
    for (int t = 0; t < n; t++) { /* causal: position t only needs k, v of 0..t */
      norm(h, x + t * HID, &L->attn_norm, c->rms_eps);
      lin(q, h, &L->wq, &L->bq, NH * HD, HID);
      lin(Kl + t * NKV * HD, h, &L->wk, &L->bk, NKV * HD, HID);
      lin(Vl + t * NKV * HD, h, &L->wv, &L->bv, NKV * HD, HID);
      rope(q, NH, t, c);
      rope(Kl + t * NKV * HD, NKV, t, c);
      for (int hh = 0; hh < NH; hh++) {
        int kh = hh / (NH / NKV);
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= t; j++) {
          double d = 0;
          for (int e = 0; e < HD; e++)
            d += q[hh * HD + e] * Kl[(j * NKV + kh) * HD + e];
          sc[j] = d / sqrt((double)HD);
          mx = sc[j] > mx ? sc[j] : mx;
        }
        for (int j = 0; j <= t; j++)
          sum += (sc[j] = exp(sc[j] - mx));
        for (int e = 0; e < HD; e++) {
          double a = 0;
          for (int j = 0; j <= t; j++)
            a += sc[j] / sum * Vl[(j * NKV + kh) * HD + e];
          att[hh * HD + e] = a;
        }
      }
      lin(o, att, &L->wo, NULL, HID, NH * HD);
      for (int i = 0; i < HID; i++)
        x[t * HID + i] += o[i];
      norm(h, x + t * HID, &L->mlp_norm, c->rms_eps);
      lin(g, h, &L->w_gate, NULL, INTER, HID);
      lin(u, h, &L->w_up, NULL, INTER, HID);
      for (int i = 0; i < INTER; i++)
        g[i] = g[i] / (1 + exp(-g[i])) * u[i];
      lin(o, g, &L->w_down, NULL, HID, INTER);
      for (int i = 0; i < HID; i++)
        x[t * HID + i] += o[i];
    }
  }
  for (int t = 0; t < n; t++) {
    norm(h, x + t * HID, &m->final_norm, c->rms_eps);
    lin(logits + (size_t)t * V, h, &m->lm_head, NULL, V, HID);
  }
  free(x), free(K), free(Vv);
}

/* ---- running the engine ------------------------------------------------------------------ */

typedef struct rig {
  backend_t *be;
  fwd_t *f;
  kv_t *kv;
} rig;

static void rig_open(rig *r, const model_t *m, int threads, int max_tokens) {
  assert_int_equal(be_cpu_create(threads, &r->be), 0);
  assert_int_equal(r->be->ops->load_weights(r->be, m), 0);
  assert_int_equal(r->be->ops->kv_init(r->be, PAGES, PT), 0);
  assert_int_equal(kv_create(PAGES, PT, &r->kv), 0);
  assert_int_equal(fwd_create(r->be, max_tokens, max_tokens, &r->f), 0);
}

static void rig_close(rig *r) {
  fwd_destroy(r->f);
  kv_destroy(r->kv);
  be_destroy(r->be);
}

/* One part of a step: n_new ids of a sequence starting at pos0. */
typedef struct part {
  kv_seq *kv;
  const int32_t *ids;
  int pos0, n_new;
  float *logits; /* where the logits of its rows go: [n_new][V] */
} part;

static void step(rig *r, part *p, int n) {
  batch_t b;
  be_batch_init(&b);
  be_batch_reset(&b, 1);
  for (int i = 0; i < n; i++) {
    assert_int_equal(kv_seq_reserve(r->kv, p[i].kv, p[i].pos0 + p[i].n_new), 0);
    batch_seq s = {.n_new = p[i].n_new,
                   .pos0 = p[i].pos0,
                   .pages = p[i].kv->pages,
                   .n_pages = p[i].kv->n_pages};
    assert_int_equal(be_batch_add(&b, &s, p[i].ids + p[i].pos0), 0);
  }
  tensor_t lg;
  assert_int_equal(fwd_step(r->f, &b, NULL, &lg), 0);
  assert_int_equal(lg.shape[0], b.n_tokens);
  float *all = malloc((size_t)b.n_tokens * V * sizeof(float));
  assert_int_equal(r->be->ops->to_host(r->be, &lg, all, (size_t)b.n_tokens * V * sizeof(float)), 0);
  for (int i = 0; i < n; i++)
    memcpy(p[i].logits, all + (size_t)b.seqs[i].tok0 * V, (size_t)p[i].n_new * V * sizeof(float));
  free(all);
  be_batch_free(&b);
}

/* max over rows of max|a - b| / max|b| */
static double row_err(const float *a, const float *b, int rows) {
  double worst = 0;
  for (int r = 0; r < rows; r++) {
    double mx = 1e-6, d = 0;
    for (int i = 0; i < V; i++) {
      mx = fmax(mx, fabs(b[r * V + i]));
      d = fmax(d, fabs((double)a[r * V + i] - b[r * V + i]));
    }
    if (!(d / mx <= worst)) worst = d / mx;
  }
  return worst;
}

static void rand_ids(int32_t *ids, int n, uint64_t seed) {
  for (int i = 0; i < n; i++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    ids[i] = (int32_t)(seed % V);
  }
}

/* ---- tests ------------------------------------------------------------------------------------
 */

static void check_naive(ns_dtype dt, int bias, int tied, int rope_k, uint64_t seed) {
  tiny t;
  tiny_build(&t, dt, bias, tied, rope_k, seed);
  enum { N = 40 };
  int32_t ids[N];
  rand_ids(ids, N, seed + 1);
  double *want = malloc((size_t)N * V * 8);
  float *wantf = malloc((size_t)N * V * 4), *got = malloc((size_t)N * V * 4);
  naive_forward(&t.m, ids, N, want);
  for (int i = 0; i < N * V; i++)
    wantf[i] = (float)want[i];
  rig r;
  rig_open(&r, &t.m, 2, 64);
  kv_seq s;
  kv_seq_init(&s);
  part p = {&s, ids, 0, N, got};
  step(&r, &p, 1);
  double e = row_err(got, wantf, N);
  printf("dtype %s bias %d tied %d rope %d: max rel err vs naive %.3g\n", ns_dtype_name(dt), bias,
         tied, rope_k, e);
  assert_true(e < 1e-4);
  /* and the logits are not trivially flat */
  double spread = 0;
  for (int i = 0; i < V; i++)
    spread = fmax(spread, fabs(want[i] - want[0]));
  assert_true(spread > 0.1);
  kv_seq_free(r.kv, &s);
  rig_close(&r);
  free(want), free(wantf), free(got);
  tiny_free(&t);
}

static void test_matches_naive(void **state) {
  (void)state;
  check_naive(NS_F32, 0, 0, ROPE_DEFAULT, 11);
  check_naive(NS_F32, 1, 1, ROPE_LLAMA3, 12);
  check_naive(NS_BF16, 1, 0, ROPE_LINEAR, 13);
  check_naive(NS_F16, 0, 1, ROPE_DEFAULT, 14);
}

enum { NS = 3, MAXLEN = 13 };
static const int lens[NS] = {13, 5, 9};

static void test_prefill_decode_batch_agree(void **state) {
  (void)state;
  tiny t;
  tiny_build(&t, NS_F32, 1, 0, ROPE_LLAMA3, 21);
  int32_t ids[NS][MAXLEN];
  for (int s = 0; s < NS; s++)
    rand_ids(ids[s], lens[s], 100 + s);
  static float pre[NS][MAXLEN * V], dec[NS][MAXLEN * V], chunk[NS][MAXLEN * V];
  static float rag[NS][MAXLEN * V], mix[NS][MAXLEN * V];
  double *want = malloc((size_t)MAXLEN * V * 8);
  float *wantf = malloc((size_t)MAXLEN * V * 4);
  rig r;
  rig_open(&r, &t.m, 2, 64);
  kv_seq kv[NS];
  /* (a) each sequence as one prefill */
  for (int s = 0; s < NS; s++) {
    kv_seq_init(&kv[s]);
    part p = {&kv[s], ids[s], 0, lens[s], pre[s]};
    step(&r, &p, 1);
    kv_seq_free(r.kv, &kv[s]);
  }
  /* (b) token by token, the sequences' pages interleaved */
  for (int s = 0; s < NS; s++)
    kv_seq_init(&kv[s]);
  for (int i = 0; i < MAXLEN; i++)
    for (int s = 0; s < NS; s++)
      if (i < lens[s]) {
        part p = {&kv[s], ids[s], i, 1, dec[s] + i * V};
        step(&r, &p, 1);
      }
  for (int s = 0; s < NS; s++)
    kv_seq_free(r.kv, &kv[s]);
  /* (c) chunks of 4 */
  for (int s = 0; s < NS; s++) {
    kv_seq_init(&kv[s]);
    for (int i = 0; i < lens[s]; i += 4) {
      part p = {&kv[s], ids[s], i, lens[s] - i < 4 ? lens[s] - i : 4, chunk[s] + i * V};
      step(&r, &p, 1);
    }
    kv_seq_free(r.kv, &kv[s]);
  }
  /* (d) all sequences as one ragged batch */
  part ps[NS];
  for (int s = 0; s < NS; s++) {
    kv_seq_init(&kv[s]);
    ps[s] = (part){&kv[s], ids[s], 0, lens[s], rag[s]};
  }
  step(&r, ps, NS);
  for (int s = 0; s < NS; s++)
    kv_seq_free(r.kv, &kv[s]);
  /* (e) ragged steps mixing chunks and decodes: [0..7) [0..5) [0..3), then [7..13) [3..9) */
  for (int s = 0; s < NS; s++)
    kv_seq_init(&kv[s]);
  part e1[3] = {{&kv[0], ids[0], 0, 7, mix[0]},
                {&kv[1], ids[1], 0, 5, mix[1]},
                {&kv[2], ids[2], 0, 3, mix[2]}};
  step(&r, e1, 3);
  part e2[2] = {{&kv[0], ids[0], 7, 6, mix[0] + 7 * V}, {&kv[2], ids[2], 3, 6, mix[2] + 3 * V}};
  step(&r, e2, 2);
  for (int s = 0; s < NS; s++)
    kv_seq_free(r.kv, &kv[s]);

  for (int s = 0; s < NS; s++) {
    naive_forward(&t.m, ids[s], lens[s], want);
    for (int i = 0; i < lens[s] * V; i++)
      wantf[i] = (float)want[i];
    double e[5] = {row_err(pre[s], wantf, lens[s]), row_err(dec[s], pre[s], lens[s]),
                   row_err(chunk[s], pre[s], lens[s]), row_err(rag[s], pre[s], lens[s]),
                   row_err(mix[s], pre[s], lens[s])};
    printf("seq %d: naive %.3g decode %.3g chunked %.3g ragged %.3g mixed %.3g\n", s, e[0], e[1],
           e[2], e[3], e[4]);
    for (int k = 0; k < 5; k++)
      assert_true(e[k] < 1e-4);
  }
  assert_int_equal(kv_pages_used(r.kv), 0);
  rig_close(&r);
  free(want), free(wantf);
  tiny_free(&t);
}

/* Generate for the three prompts, alone or together; ids[s] get the continuations. */
static int32_t prompts[NS][48];
static const int plen[NS] = {48, 5, 9};

static void generate(const model_t *m, int threads, int together, int max_step, samp_params sp,
                     int32_t out[NS][16], int n_out[NS]) {
  for (int s = 0; s < NS; s++)
    rand_ids(prompts[s], plen[s], 300 + s);
  rig r;
  rig_open(&r, m, threads, 64);
  eng_gen_seq seqs[NS];
  memset(seqs, 0, sizeof seqs);
  for (int s = 0; s < NS; s++) {
    seqs[s].prompt = prompts[s];
    seqs[s].n_prompt = plen[s];
    seqs[s].sp = sp;
    seqs[s].sp.seed = sp.seed + (uint64_t)s;
    seqs[s].max_tokens = 16;
    seqs[s].ignore_eos = 1;
  }
  if (together) {
    assert_int_equal(eng_gen_run(r.f, r.kv, seqs, NS, max_step, NULL, NULL, NULL), 0);
  } else {
    for (int s = 0; s < NS; s++)
      assert_int_equal(eng_gen_run(r.f, r.kv, &seqs[s], 1, max_step, NULL, NULL, NULL), 0);
  }
  for (int s = 0; s < NS; s++) {
    assert_int_equal(seqs[s].finish, ENG_FINISH_LENGTH);
    n_out[s] = seqs[s].n_ids;
    memcpy(out[s], seqs[s].ids, (size_t)seqs[s].n_ids * sizeof(int32_t));
    free(seqs[s].ids);
    free(seqs[s].logprobs);
  }
  assert_int_equal(kv_pages_used(r.kv), 0);
  rig_close(&r);
}

static void check_gen_agree(samp_params sp) {
  tiny t;
  tiny_build(&t, NS_F32, 0, 1, ROPE_DEFAULT, 31);
  int32_t a[NS][16], b[NS][16], c[NS][16];
  int na[NS], nb[NS], nc[NS];
  generate(&t.m, 1, 0, 64, sp, a, na); /* alone, whole prompts, one thread */
  generate(&t.m, 2, 1, 7, sp, b, nb);  /* batched, 7-row steps: chunked prefill + decodes */
  generate(&t.m, 2, 1, 64, sp, c, nc); /* batched, two threads */
  int distinct = 0;
  for (int s = 0; s < NS; s++) {
    assert_int_equal(na[s], 16);
    assert_int_equal(nb[s], 16);
    assert_int_equal(nc[s], 16);
    assert_memory_equal(a[s], b[s], sizeof a[s]);
    assert_memory_equal(a[s], c[s], sizeof a[s]);
    for (int i = 1; i < 16; i++)
      distinct += a[s][i] != a[s][0];
  }
  assert_true(distinct > 0); /* not a degenerate constant output */
  tiny_free(&t);
}

static void test_greedy_alone_vs_batched(void **state) {
  (void)state;
  samp_params sp = samp_params_default();
  sp.temperature = 0;
  check_gen_agree(sp);
}

static void test_seeded_alone_vs_batched(void **state) {
  (void)state;
  samp_params sp = samp_params_default();
  sp.temperature = 1.0f;
  sp.top_p = 0.95f;
  sp.seed = 4242;
  sp.repetition_penalty = 1.1f;
  sp.frequency_penalty = 0.2f;
  check_gen_agree(sp);
}

/* Each sampled token is ref_sample over the logits of its prefix, with the history for
 * the penalties and Philox counter = tokens sampled before (what a GPU sampler must match). */
static void test_gen_steps_match_ref_sample(void **state) {
  (void)state;
  tiny t;
  tiny_build(&t, NS_F32, 0, 1, ROPE_DEFAULT, 31);
  samp_params sp = samp_params_default();
  sp.temperature = 1.3f;
  sp.top_k = 20;
  sp.seed = 99;
  sp.repetition_penalty = 1.2f;
  sp.presence_penalty = 0.3f;
  int32_t ids[NS][16];
  int n[NS];
  generate(&t.m, 2, 1, 64, sp, ids, n);
  void *scratch = calloc(1, ref_sample_scratch_bytes(V));
  rig r;
  rig_open(&r, &t.m, 1, 64);
  for (int s = 0; s < NS; s++) {
    int32_t full[64];
    memcpy(full, prompts[s], (size_t)plen[s] * sizeof(int32_t));
    memcpy(full + plen[s], ids[s], 16 * sizeof(int32_t));
    static float lg[64 * V];
    kv_seq kv;
    kv_seq_init(&kv);
    part p = {&kv, full, 0, plen[s] + 15, lg};
    step(&r, &p, 1);
    kv_seq_free(r.kv, &kv);
    samp_params q = sp;
    q.seed = sp.seed + (uint64_t)s;
    for (int i = 0; i < 16; i++) {
      int32_t id;
      float lp;
      assert_int_equal(ref_sample(lg + (size_t)(plen[s] - 1 + i) * V, V, &q, full, plen[s],
                                  plen[s] + i, (uint64_t)i, scratch, &id, &lp, NULL, NULL),
                       0);
      assert_int_equal(id, ids[s][i]);
    }
  }
  rig_close(&r);
  free(scratch);
  tiny_free(&t);
}

static void test_threads_bitwise(void **state) {
  (void)state;
  tiny t;
  tiny_build(&t, NS_F32, 1, 0, ROPE_DEFAULT, 41);
  enum { N = 60 };
  int32_t ids[N];
  rand_ids(ids, N, 5);
  static float l1[N * V], l2[N * V];
  for (int th = 1; th <= 2; th++) {
    rig r;
    rig_open(&r, &t.m, th, 64);
    kv_seq s;
    kv_seq_init(&s);
    part p = {&s, ids, 0, N, th == 1 ? l1 : l2};
    step(&r, &p, 1);
    kv_seq_free(r.kv, &s);
    rig_close(&r);
  }
  assert_memory_equal(l1, l2, sizeof l1);
  tiny_free(&t);
}

static void test_bad_batches(void **state) {
  (void)state;
  tiny t;
  tiny_build(&t, NS_F32, 0, 0, ROPE_DEFAULT, 51);
  rig r;
  rig_open(&r, &t.m, 1, 8);
  kv_seq s;
  kv_seq_init(&s);
  assert_int_equal(kv_seq_reserve(r.kv, &s, 4), 0);
  int32_t ids[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  batch_t b;
  be_batch_init(&b);
  be_batch_reset(&b, 0);
  batch_seq q = {.n_new = 5, .pos0 = 0, .pages = s.pages, .n_pages = s.n_pages, .sample = 1};
  assert_int_equal(be_batch_add(&b, &q, ids), 0);
  int32_t out_id;
  step_out_t out = {.ids = &out_id};
  assert_int_equal(fwd_step(r.f, &b, &out, NULL), NS_ERANGE); /* pages cover 4, not 5 */
  be_batch_reset(&b, 0);
  q.n_new = 4;
  int32_t bad[4] = {1, 2, V, 3};
  assert_int_equal(be_batch_add(&b, &q, bad), 0);
  assert_int_equal(fwd_step(r.f, &b, &out, NULL), NS_ERANGE); /* id out of range */
  be_batch_reset(&b, 0);
  assert_int_equal(kv_seq_reserve(r.kv, &s, 12), 0);
  q.n_new = 12;
  q.n_pages = s.n_pages;
  q.pages = s.pages;
  assert_int_equal(be_batch_add(&b, &q, ids), 0);
  assert_int_equal(fwd_step(r.f, &b, &out, NULL), NS_ERANGE); /* more rows than workspace */
  q.n_new = 0;
  assert_int_equal(be_batch_add(&b, &q, ids), NS_EINVAL);
  be_batch_free(&b);
  kv_seq_free(r.kv, &s);
  rig_close(&r);
  tiny_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matches_naive),
      cmocka_unit_test(test_prefill_decode_batch_agree),
      cmocka_unit_test(test_greedy_alone_vs_batched),
      cmocka_unit_test(test_seeded_alone_vs_batched),
      cmocka_unit_test(test_gen_steps_match_ref_sample),
      cmocka_unit_test(test_threads_bitwise),
      cmocka_unit_test(test_bad_batches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
