/* tok_load.c — HF tokenizer.json (model, added tokens) + tokenizer_config.json into a
 * read-only tok_t: tok_load, tok_load_dir, tok_load_json; tok_free and the queries. */
#include "tok_int.h"

#include "ns_err.h"
#include "ns_log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- model ------------------------------------------------------------------------ */

static int32_t model_id(const tok *t, const char *s, size_t n) {
  return tok__strmap_get(&t->vocab, t->mpiece, t->mpiece_len, s, n);
}

static int parse_merges(tok *t, const cJSON *merges, char *err, size_t errlen) {
  int n = cJSON_GetArraySize(merges);
  int rc = tok__pairmap_init(&t->merges, (size_t)n);
  if (rc) return rc;
  tok_buf cat = {0};
  uint32_t rank = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, merges) {
    const char *a, *b;
    size_t alen, blen;
    if (cJSON_IsString(m)) { /* "a b": exactly one space */
      a = m->valuestring;
      const char *sp = strchr(a, ' ');
      if (!sp || strchr(sp + 1, ' ')) goto bad;
      alen = (size_t)(sp - a);
      b = sp + 1;
      blen = strlen(b);
    } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
               cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
      a = cJSON_GetArrayItem(m, 0)->valuestring;
      b = cJSON_GetArrayItem(m, 1)->valuestring;
      alen = strlen(a);
      blen = strlen(b);
    } else {
      goto bad;
    }
    int32_t ia = model_id(t, a, alen), ib = model_id(t, b, blen);
    cat.len = 0;
    if ((rc = tok__buf_put(&cat, a, alen)) || (rc = tok__buf_put(&cat, b, blen))) goto out;
    int32_t im = model_id(t, cat.p, cat.len);
    if (ia < 0 || ib < 0 || im < 0) {
      tok__errf(err, errlen, "tokenizer.json: merge %u (%.40s + %.40s) is not in the vocab", rank,
                a, b);
      rc = NS_EFORMAT;
      goto out;
    }
    tok__pairmap_put(&t->merges, ia, ib, rank++, im);
  }
  rc = 0;
  goto out;
bad:
  tok__errf(err, errlen, "tokenizer.json: merge %u is neither \"a b\" nor [\"a\", \"b\"]", rank);
  rc = NS_EFORMAT;
out:
  tok__buf_free(&cat);
  return rc;
}

static int parse_added(tok *t, const cJSON *arr, int32_t *max_id, char *err, size_t errlen) {
  int n = cJSON_GetArraySize(arr);
  if (n <= 0) return 0;
  t->added = calloc((size_t)n, sizeof *t->added);
  if (!t->added) return NS_ENOMEM;
  const cJSON *a;
  cJSON_ArrayForEach(a, arr) {
    tok_added *x = &t->added[t->n_added];
    const char *c = tok__jstr(a, "content");
    if (!c || !tok__jint(tok__jget(a, "id"), &x->id)) {
      tok__errf(err, errlen, "tokenizer.json: added token %zu needs id and content", t->n_added);
      return NS_EFORMAT;
    }
    x->len = strlen(c);
    if (!(x->content = tok__dupn(c, x->len))) return NS_ENOMEM;
    x->special = (uint8_t)tok__jbool(a, "special", 0);
    x->lstrip = (uint8_t)tok__jbool(a, "lstrip", 0);
    x->rstrip = (uint8_t)tok__jbool(a, "rstrip", 0);
    x->single_word = (uint8_t)tok__jbool(a, "single_word", 0);
    x->normalized = (uint8_t)tok__jbool(a, "normalized", !x->special);
    if (x->id > *max_id) *max_id = x->id;
    t->n_added++;
  }
  return 0;
}

static int parse_model(tok *t, const cJSON *model, const cJSON *added, char *err, size_t errlen) {
  const char *type = tok__jstr(model, "type");
  const cJSON *vocab = tok__jget(model, "vocab"), *merges = tok__jget(model, "merges");
  if (type ? strcmp(type, "BPE") != 0 : !cJSON_IsArray(merges)) {
    tok__errf(err, errlen, "tokenizer.json: model type %s is not supported (only BPE)",
              type ? type : "(none)");
    return NS_EUNSUPPORTED;
  }
  if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
    tok__errf(err, errlen, "tokenizer.json: BPE model needs vocab and merges");
    return NS_EFORMAT;
  }
  const char *pre = tok__jstr(model, "continuing_subword_prefix");
  const char *suf = tok__jstr(model, "end_of_word_suffix");
  if ((pre && *pre) || (suf && *suf)) {
    tok__errf(err, errlen,
              "tokenizer.json: continuing_subword_prefix / end_of_word_suffix "
              "are not supported");
    return NS_EUNSUPPORTED;
  }
  const cJSON *dropout = tok__jget(model, "dropout");
  if (cJSON_IsNumber(dropout) && dropout->valuedouble > 0)
    ns_log_warn("tokenizer: BPE dropout %g ignored (inference encodes deterministically)",
                dropout->valuedouble);

  int32_t max_id = -1;
  size_t n_vocab = 0, bytes = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, vocab) {
    int32_t id;
    if (!tok__jint(v, &id)) {
      tok__errf(err, errlen, "tokenizer.json: vocab entry %.40s has a bad id", v->string);
      return NS_EFORMAT;
    }
    if (id > max_id) max_id = id;
    n_vocab++;
    bytes += strlen(v->string) + 1;
  }
  int rc = parse_added(t, added, &max_id, err, errlen);
  if (rc) return rc;
  if (max_id < 0) {
    tok__errf(err, errlen, "tokenizer.json: empty vocabulary");
    return NS_EFORMAT;
  }
  t->n_ids = max_id + 1;
  size_t n = (size_t)t->n_ids;
  t->mpiece = calloc(n, sizeof *t->mpiece);
  t->mpiece_len = calloc(n, sizeof *t->mpiece_len);
  t->piece = calloc(n, sizeof *t->piece);
  t->piece_len = calloc(n, sizeof *t->piece_len);
  t->special = calloc(n, 1);
  t->is_added = calloc(n, 1);
  t->arena = malloc(bytes + 1);
  if (!t->mpiece || !t->mpiece_len || !t->piece || !t->piece_len || !t->special || !t->is_added ||
      !t->arena)
    return NS_ENOMEM;
  if ((rc = tok__strmap_init(&t->vocab, n_vocab))) return rc;
  char *w = t->arena;
  cJSON_ArrayForEach(v, vocab) {
    int32_t id = (int32_t)v->valuedouble;
    size_t len = strlen(v->string);
    if (t->mpiece[id]) continue; /* two pieces with one id: keep the first */
    memcpy(w, v->string, len + 1);
    t->mpiece[id] = t->piece[id] = w;
    t->mpiece_len[id] = t->piece_len[id] = (uint32_t)len;
    tok__strmap_put(&t->vocab, t->mpiece, t->mpiece_len, id);
    w += len + 1;
  }
  for (size_t i = 0; i < t->n_added; i++) { /* HF: added tokens win when decoding */
    tok_added *x = &t->added[i];
    t->piece[x->id] = x->content;
    t->piece_len[x->id] = (uint32_t)x->len;
    t->is_added[x->id] = 1;
    t->special[x->id] = x->special;
  }
  if ((rc = parse_merges(t, merges, err, errlen))) return rc;

  t->byte_fallback = tok__jbool(model, "byte_fallback", 0);
  t->fuse_unk = tok__jbool(model, "fuse_unk", 0);
  t->ignore_merges = tok__jbool(model, "ignore_merges", 0);
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_id[b] = model_id(t, name, 6);
  }
  for (uint32_t cp = 0; cp < 512; cp++) { /* the common one-character lookups */
    char u[4];
    t->small_cp[cp] = model_id(t, u, tok__utf8_put(u, cp));
  }
  t->unk_id = -1;
  const char *unk = tok__jstr(model, "unk_token");
  if (unk) {
    t->unk_id = model_id(t, unk, strlen(unk));
    if (t->unk_id < 0) ns_log_warn("tokenizer: unk_token %.40s is not in the vocab", unk);
  }
  return 0;
}

/* ---- added-token matchers --------------------------------------------------------- */

typedef struct sort_ctx {
  const tok *t;
  int norm;
} sort_ctx;

static int cmp_added(const void *pa, const void *pb, void *arg) {
  const sort_ctx *c = arg;
  const tok_added *a = &c->t->added[*(const int32_t *)pa];
  const tok_added *b = &c->t->added[*(const int32_t *)pb];
  const char *sa = c->norm ? a->ncontent : a->content;
  const char *sb = c->norm ? b->ncontent : b->content;
  size_t la = c->norm ? a->nlen : a->len, lb = c->norm ? b->nlen : b->len;
  int fa = (unsigned char)sa[0], fb = (unsigned char)sb[0];
  if (fa != fb) return fa - fb;
  if (la != lb) return la > lb ? -1 : 1; /* longest first: leftmost-longest matching */
  return *(const int32_t *)pa - *(const int32_t *)pb;
}

static int build_matcher(tok *t, tok_matcher *m, int normalized) {
  m->order = malloc((t->n_added + 1) * sizeof *m->order);
  if (!m->order) return NS_ENOMEM;
  for (size_t i = 0; i < t->n_added; i++) {
    tok_added *x = &t->added[i];
    if (x->normalized != normalized) continue;
    if ((normalized ? x->nlen : x->len) == 0) continue;
    m->order[m->n++] = (int32_t)i;
  }
  sort_ctx ctx = {t, normalized};
  qsort_r(m->order, m->n, sizeof *m->order, cmp_added, &ctx);
  size_t k = 0;
  for (int b = 0; b < 256; b++) {
    m->first[b] = (uint32_t)k;
    while (k < m->n) {
      tok_added *x = &t->added[m->order[k]];
      unsigned char c = (unsigned char)(normalized ? x->ncontent : x->content)[0];
      if (c != b) break;
      k++;
    }
  }
  m->first[256] = (uint32_t)k;
  return 0;
}

static int setup_added(tok *t) {
  tok_buf out = {0}, tmp = {0};
  int rc = 0;
  for (size_t i = 0; i < t->n_added; i++) {
    tok_added *x = &t->added[i];
    if (!x->normalized) continue;
    out.len = 0;
    if ((rc = tok__normalize(t, x->content, x->len, NULL, &out, &tmp))) goto out;
    x->nlen = out.len;
    if (!(x->ncontent = tok__dupn(out.p ? out.p : "", out.len))) {
      rc = NS_ENOMEM;
      goto out;
    }
  }
  if ((rc = build_matcher(t, &t->match_raw, 0)) || (rc = build_matcher(t, &t->match_norm, 1)))
    goto out;
  t->re_word = tok__regex("\\w", 2, NULL, 0);
  if (!t->re_word) rc = NS_EINTERNAL;
out:
  tok__buf_free(&out);
  tok__buf_free(&tmp);
  return rc;
}

/* bos_token / eos_token: a string or {"content": ...}. */
static const char *cfg_token(const cJSON *cfg, const char *key) {
  const cJSON *v = tok__jget(cfg, key);
  if (cJSON_IsString(v)) return v->valuestring;
  return tok__jstr(v, "content");
}

/* BOS/EOS ids come from the config. Its add_bos_token / add_eos_token do not change what
 * encode adds: transformers 5.x (checked with 5.17) leaves that to the post_processor of
 * tokenizer.json, so a config that disagrees with it only gets a warning here. */
static int parse_config(tok *t, const cJSON *cfg) {
  const char *bos = cfg_token(cfg, "bos_token"), *eos = cfg_token(cfg, "eos_token");
  if (bos) t->bos_id = tok_token_id(t, bos);
  if (eos) t->eos_id = tok_token_id(t, eos);
  const cJSON *ab = tok__jget(cfg, "add_bos_token"), *ae = tok__jget(cfg, "add_eos_token");
  int has_bos = t->bos_id >= 0 && t->n_prefix && t->prefix[0] == t->bos_id;
  int has_eos = t->eos_id >= 0 && t->n_suffix && t->suffix[t->n_suffix - 1] == t->eos_id;
  if ((cJSON_IsBool(ab) && cJSON_IsTrue(ab) != has_bos) ||
      (cJSON_IsBool(ae) && cJSON_IsTrue(ae) != has_eos))
    ns_log_warn("tokenizer: tokenizer_config.json add_bos_token/add_eos_token disagree with "
                "the post_processor of tokenizer.json, which decides (as in transformers 5)");
  return 0;
}

static void init_byte_map(tok *t) {
  int extra = 0;
  for (int i = 0; i < 324; i++)
    t->cp_byte[i] = -1;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    uint32_t cp = printable ? (uint32_t)b : 256u + (uint32_t)extra++;
    t->byte_cp[b] = (uint16_t)cp;
    t->cp_byte[cp] = (int16_t)b;
    t->byte_utf8_len[b] = (uint8_t)tok__utf8_put(t->byte_utf8[b], cp);
  }
}

/* ---- entry points ----------------------------------------------------------------- */

int tok_load_json(const char *json, size_t len, const char *config_json, size_t config_len,
                  tok_t **out, char *err, size_t errlen) {
  char dummy[1];
  if (!err || errlen == 0) err = dummy, errlen = sizeof dummy;
  err[0] = '\0';
  if (!json || !out) return NS_EINVAL;
  *out = NULL;
  cJSON *root = cJSON_ParseWithLength(json, len), *cfg = NULL;
  if (!cJSON_IsObject(root)) {
    tok__errf(err, errlen, "tokenizer.json: not a JSON object");
    cJSON_Delete(root);
    return NS_EFORMAT;
  }
  if (config_json) {
    cfg = cJSON_ParseWithLength(config_json, config_len);
    if (!cJSON_IsObject(cfg)) {
      tok__errf(err, errlen, "tokenizer_config.json: not a JSON object");
      cJSON_Delete(cfg);
      cJSON_Delete(root);
      return NS_EFORMAT;
    }
  }
  int rc;
  tok *t = calloc(1, sizeof *t);
  if (!t) {
    rc = NS_ENOMEM;
    goto done;
  }
  t->bos_id = t->eos_id = -1;
  init_byte_map(t);
  if ((rc = parse_model(t, tok__jget(root, "model"), tok__jget(root, "added_tokens"), err,
                        errlen)) ||
      (rc = tok__parse_pipeline(t, root, err, errlen)) || (rc = setup_added(t)))
    goto done;
  if (t->n_prefix) t->bos_id = t->prefix[0];
  static const char *eos_names[] = {"</s>", "<|end_of_text|>", "<|endoftext|>"};
  for (int i = 0; i < 3 && t->eos_id < 0; i++)
    t->eos_id = tok_token_id(t, eos_names[i]);
  if (cfg) parse_config(t, cfg);
  *out = t;
  t = NULL;
done:
  if (rc == NS_ENOMEM && !err[0]) tok__errf(err, errlen, "out of memory loading tokenizer");
  tok_free(t);
  cJSON_Delete(cfg);
  cJSON_Delete(root);
  return rc;
}

static int read_file(const char *path, char **data, size_t *len, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    tok__errf(err, errlen, "%s: %s", path, strerror(errno));
    return errno == ENOENT ? NS_ENOENT : NS_EIO;
  }
  tok_buf b = {0};
  char chunk[65536];
  size_t n;
  int rc = 0;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
    if ((rc = tok__buf_put(&b, chunk, n))) break;
  if (!rc && ferror(f)) {
    tok__errf(err, errlen, "%s: read error", path);
    rc = NS_EIO;
  }
  fclose(f);
  if (!rc && !b.p) rc = tok__buf_put(&b, "", 0);
  if (rc) {
    tok__buf_free(&b);
    return rc;
  }
  *data = b.p;
  *len = b.len;
  return 0;
}

int tok_load(const char *tokenizer_json, const char *tokenizer_config_json, tok_t **out, char *err,
             size_t errlen) {
  char *j = NULL, *c = NULL;
  size_t jl = 0, cl = 0;
  if (!tokenizer_json || !out) return NS_EINVAL;
  int rc = read_file(tokenizer_json, &j, &jl, err, errlen);
  if (!rc && tokenizer_config_json) rc = read_file(tokenizer_config_json, &c, &cl, err, errlen);
  if (!rc) rc = tok_load_json(j, jl, c, cl, out, err, errlen);
  free(j);
  free(c);
  return rc;
}

int tok_load_dir(const char *dir, tok_t **out, char *err, size_t errlen) {
  if (!dir || !out) return NS_EINVAL;
  size_t n = strlen(dir) + 32;
  char *tj = malloc(n), *tc = malloc(n);
  int rc = NS_ENOMEM;
  if (tj && tc) {
    snprintf(tj, n, "%s/tokenizer.json", dir);
    snprintf(tc, n, "%s/tokenizer_config.json", dir);
    rc = tok_load(tj, access(tc, R_OK) == 0 ? tc : NULL, out, err, errlen);
  }
  free(tj);
  free(tc);
  return rc;
}

void tok_free(tok_t *t) {
  if (!t) return;
  for (int i = 0; i < t->n_norm; i++) {
    free(t->norm[i].pat);
    free(t->norm[i].content);
    pcre2_code_free(t->norm[i].re);
  }
  for (int i = 0; i < t->n_pre; i++) {
    free(t->pre[i].lit);
    pcre2_code_free(t->pre[i].re);
  }
  for (int i = 0; i < t->n_dec; i++) {
    free(t->dec[i].pat);
    free(t->dec[i].content);
  }
  for (size_t i = 0; i < t->n_added; i++) {
    free(t->added[i].content);
    free(t->added[i].ncontent);
  }
  free(t->added);
  free(t->match_raw.order);
  free(t->match_norm.order);
  pcre2_code_free(t->re_word);
  free(t->prefix);
  free(t->suffix);
  tok__strmap_free(&t->vocab);
  tok__pairmap_free(&t->merges);
  free(t->mpiece);
  free(t->mpiece_len);
  free(t->piece);
  free(t->piece_len);
  free(t->special);
  free(t->is_added);
  free(t->arena);
  free(t);
}

/* ---- queries ---------------------------------------------------------------------- */

int tok_vocab_size(const tok_t *t) {
  return t ? t->n_ids : 0;
}
int tok_bos_id(const tok_t *t) {
  return t ? t->bos_id : -1;
}
int tok_eos_id(const tok_t *t) {
  return t ? t->eos_id : -1;
}

int tok_token_id(const tok_t *t, const char *piece) {
  if (!t || !piece) return -1;
  size_t n = strlen(piece);
  for (size_t i = 0; i < t->n_added; i++) /* HF looks in the added vocabulary first */
    if (t->added[i].len == n && memcmp(t->added[i].content, piece, n) == 0) return t->added[i].id;
  return model_id(t, piece, n);
}

const char *tok_piece(const tok_t *t, int id) {
  if (!t || id < 0 || id >= t->n_ids) return NULL;
  return t->piece[id];
}

int tok_is_special(const tok_t *t, int id) {
  if (!t || id < 0 || id >= t->n_ids) return 0;
  return t->special[id];
}
