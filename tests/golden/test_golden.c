/* test_golden.c — the CPU backend against Hugging Face transformers: for every fixture
 * folder in tests/data/golden (config.json, model.safetensors, golden.json made by
 * make_golden.py), logits of each prompt alone and of all prompts as one ragged batch, and
 * the 32-token greedy continuations, alone and batched. Exit 77 without fixtures. */
#include "backend.h"
#include "forward.h"
#include "gen.h"
#include "kv.h"
#include "model.h"
#include "ns_err.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { PT = 16 };

typedef struct prompt {
  int32_t *ids;
  int n;
  float *logits; /* [n][vocab] */
  int32_t *greedy;
  int n_greedy;
} prompt;

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  if (b) b[n] = '\0';
  fclose(f);
  return b;
}

static int32_t *int_array(const cJSON *a, int *n) {
  *n = cJSON_GetArraySize(a);
  int32_t *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, a) v[i++] = (int32_t)e->valuedouble;
  return v;
}

/* Parse golden.json into *out (*n prompts, allocated even on failure); returns 1 when
 * well-formed. */
static int load_golden(const char *path, int vocab, prompt **out, int *n) {
  char *text = read_file(path);
  cJSON *root = text ? cJSON_Parse(text) : NULL;
  free(text);
  const cJSON *ps = cJSON_GetObjectItemCaseSensitive(root, "prompts");
  if (!cJSON_IsArray(ps)) {
    printf("FAIL %s: no prompts array\n", path);
    cJSON_Delete(root);
    *out = NULL;
    *n = 0;
    return 0;
  }
  int np = cJSON_GetArraySize(ps), k = 0, ok = np > 0;
  prompt *p = calloc((size_t)np, sizeof *p);
  const cJSON *pj;
  cJSON_ArrayForEach(pj, ps) {
    prompt *q = &p[k++];
    q->ids = int_array(cJSON_GetObjectItemCaseSensitive(pj, "ids"), &q->n);
    q->greedy = int_array(cJSON_GetObjectItemCaseSensitive(pj, "greedy"), &q->n_greedy);
    const cJSON *lg = cJSON_GetObjectItemCaseSensitive(pj, "logits"), *row;
    q->logits = malloc((size_t)q->n * vocab * sizeof(float));
    int r = 0;
    cJSON_ArrayForEach(row, lg) {
      if (r >= q->n || cJSON_GetArraySize(row) != vocab) break;
      int i = 0;
      const cJSON *v;
      cJSON_ArrayForEach(v, row) q->logits[(size_t)r * vocab + i++] = (float)v->valuedouble;
      r++;
    }
    if (r != q->n || cJSON_GetArraySize(lg) != q->n) {
      printf("FAIL %s: prompt %d has %d logits rows of %d floats, want %d\n", path, k - 1,
             cJSON_GetArraySize(lg), vocab, q->n);
      ok = 0;
    }
  }
  cJSON_Delete(root);
  *out = p;
  *n = np;
  return ok;
}

/* max over positions of max|got - ref| / max|ref|; prints the worst position. */
static int check_logits(const char *what, const float *got, const prompt *q, int vocab) {
  double worst = 0;
  int wp = 0;
  for (int t = 0; t < q->n; t++) {
    const float *ref = q->logits + (size_t)t * vocab, *g = got + (size_t)t * vocab;
    double mx = 0, d = 0;
    for (int i = 0; i < vocab; i++) {
      mx = fmax(mx, fabs(ref[i]));
      d = fmax(d, fabs((double)g[i] - ref[i]));
      if (isnan(g[i])) d = INFINITY;
    }
    double e = d / (mx > 0 ? mx : 1);
    if (e > worst || t == 0) worst = e, wp = t;
  }
  int ok = worst <= 1e-3;
  printf("%s %s: worst position %d, max|logit - ref| / max|ref| = %.3g\n", ok ? "ok  " : "FAIL",
         what, wp, worst);
  return ok;
}

typedef struct rig {
  backend_t *be;
  fwd_t *f;
  kv_t *kv;
} rig;

/* Logits of every position of prompts [0, n) run as one ragged batch into got[i]. */
static int run_logits(rig *r, prompt *p, int n, float **got) {
  batch_t b;
  be_batch_init(&b);
  be_batch_reset(&b, 1);
  kv_seq *kv = calloc((size_t)n, sizeof *kv);
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    kv_seq_init(&kv[i]);
    if ((rc = kv_seq_reserve(r->kv, &kv[i], p[i].n))) break;
    batch_seq s = {.n_new = p[i].n, .pos0 = 0, .pages = kv[i].pages, .n_pages = kv[i].n_pages};
    rc = be_batch_add(&b, &s, p[i].ids);
  }
  tensor_t lg;
  int V = r->be->cfg.vocab_size;
  if (!rc) rc = fwd_step(r->f, &b, NULL, &lg);
  for (int i = 0; i < n && !rc; i++) {
    float *all = malloc((size_t)b.n_tokens * V * sizeof(float));
    rc = r->be->ops->to_host(r->be, &lg, all, (size_t)b.n_tokens * V * sizeof(float));
    memcpy(got[i], all + (size_t)b.seqs[i].tok0 * V, (size_t)p[i].n * V * sizeof(float));
    free(all);
  }
  for (int i = 0; i < n; i++)
    kv_seq_free(r->kv, &kv[i]);
  free(kv);
  be_batch_free(&b);
  return rc;
}

static int check_greedy(rig *r, prompt *p, int n, int together, const char *name) {
  eng_gen_seq *s = calloc((size_t)n, sizeof *s);
  int ok = 1, rc = 0;
  for (int i = 0; i < n; i++) {
    s[i].prompt = p[i].ids;
    s[i].n_prompt = p[i].n;
    s[i].sp = samp_params_default();
    s[i].sp.temperature = 0;
    s[i].max_tokens = p[i].n_greedy;
    s[i].ignore_eos = 1; /* make_golden.py takes the argmax 32 times, EOS or not */
  }
  if (together)
    rc = eng_gen_run(r->f, r->kv, s, n, 1 << 20, NULL, NULL, NULL);
  else
    for (int i = 0; i < n && !rc; i++)
      rc = eng_gen_run(r->f, r->kv, &s[i], 1, 1 << 20, NULL, NULL, NULL);
  if (rc) {
    printf("FAIL %s greedy: %s\n", name, ns_strerror(rc));
    ok = 0;
  }
  for (int i = 0; i < n && ok; i++) {
    int same = s[i].n_ids == p[i].n_greedy &&
               memcmp(s[i].ids, p[i].greedy, (size_t)p[i].n_greedy * sizeof(int32_t)) == 0;
    if (!same) {
      int at = 0;
      while (at < s[i].n_ids && at < p[i].n_greedy && s[i].ids[at] == p[i].greedy[at])
        at++;
      printf("FAIL %s greedy %s prompt %d: differs at new token %d (got %d, want %d)\n", name,
             together ? "batched" : "alone", i, at, at < s[i].n_ids ? s[i].ids[at] : -1,
             at < p[i].n_greedy ? p[i].greedy[at] : -1);
      ok = 0;
    }
  }
  if (ok)
    printf("ok   %s greedy %s: %d prompts x %d tokens identical\n", name,
           together ? "batched" : "alone", n, n ? p[0].n_greedy : 0);
  for (int i = 0; i < n; i++)
    free(s[i].ids), free(s[i].logprobs);
  free(s);
  return ok;
}

static int run_fixture(const char *dir, const char *name) {
  char err[512], path[8192];
  model_t *m = NULL;
  int rc = model_load(dir, &m, err, sizeof err);
  if (rc) {
    printf("FAIL %s: model_load: %s (%s)\n", name, err, ns_strerror(rc));
    return 0;
  }
  int V = m->cfg.vocab_size, ok = 1;
  prompt *p = NULL;
  snprintf(path, sizeof path, "%s/golden.json", dir);
  int np = 0, well_formed = load_golden(path, V, &p, &np);
  rig r = {0};
  int total = 0, pages = 0;
  for (int i = 0; i < np; i++) {
    total += p[i].n;
    pages += (p[i].n + p[i].n_greedy + PT - 1) / PT + 1;
  }
  if (!well_formed) {
    ok = 0;
    goto end;
  }
  if ((rc = be_cpu_create(0, &r.be)) || (rc = r.be->ops->load_weights(r.be, m)) ||
      (rc = r.be->ops->kv_init(r.be, pages, PT)) || (rc = kv_create(pages, PT, &r.kv)) ||
      (rc = fwd_create(r.be, total, total, &r.f))) {
    printf("FAIL %s: backend setup: %s\n", name, ns_strerror(rc));
    ok = 0;
    goto end;
  }
  float **got = calloc((size_t)np, sizeof *got);
  for (int i = 0; i < np; i++)
    got[i] = malloc((size_t)p[i].n * V * sizeof(float));
  for (int i = 0; i < np; i++) { /* alone */
    char what[256];
    snprintf(what, sizeof what, "%s prompt %d (%d ids) alone", name, i, p[i].n);
    if ((rc = run_logits(&r, &p[i], 1, &got[i]))) {
      printf("FAIL %s: %s\n", what, ns_strerror(rc));
      ok = 0;
      continue;
    }
    ok &= check_logits(what, got[i], &p[i], V);
  }
  if ((rc = run_logits(&r, p, np, got))) {
    printf("FAIL %s batched: %s\n", name, ns_strerror(rc));
    ok = 0;
  } else {
    for (int i = 0; i < np; i++) {
      char what[256];
      snprintf(what, sizeof what, "%s prompt %d (%d ids) in a ragged batch of %d", name, i, p[i].n,
               np);
      ok &= check_logits(what, got[i], &p[i], V);
    }
  }
  for (int i = 0; i < np; i++)
    free(got[i]);
  free(got);
  ok &= check_greedy(&r, p, np, 0, name);
  ok &= check_greedy(&r, p, np, 1, name);
end:
  fwd_destroy(r.f);
  kv_destroy(r.kv);
  be_destroy(r.be);
  for (int i = 0; i < np; i++)
    free(p[i].ids), free(p[i].logits), free(p[i].greedy);
  free(p);
  model_free(m);
  return ok;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  const char *root = argc > 1 ? argv[1] : "tests/data/golden";
  DIR *d = opendir(root);
  char *names[256];
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) && n < 256) {
    char path[4096 + 512];
    struct stat st;
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s/golden.json", root, e->d_name);
    if (stat(path, &st) == 0) names[n++] = strdup(e->d_name);
  }
  if (d) closedir(d);
  if (n == 0) {
    printf("SKIP: no golden fixtures in tests/data/golden\n");
    return 77;
  }
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  int passed = 0;
  for (int i = 0; i < n; i++) {
    char dir[4096 + 512];
    snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
    passed += run_fixture(dir, names[i]);
    free(names[i]);
  }
  printf("golden: %d of %d fixtures passed\n", passed, n);
  return passed == n ? 0 : 1;
}
