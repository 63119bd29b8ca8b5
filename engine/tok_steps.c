/* tok_steps.c — the pipeline sections of tokenizer.json: normalizer, pre_tokenizer,
 * decoder and post_processor into the tok's step arrays; entry point tok__parse_pipeline. */
#include "tok_int.h"

#include "ns_err.h"
#include "ns_log.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define TOK_MAX_IDS (1 << 24) /* far above any real vocabulary; guards absurd ids */

/* ---- JSON helpers ----------------------------------------------------------------- */

const cJSON *tok__jget(const cJSON *o, const char *key) {
  return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

const char *tok__jstr(const cJSON *o, const char *key) {
  const cJSON *v = tok__jget(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

int tok__jbool(const cJSON *o, const char *key, int def) {
  const cJSON *v = tok__jget(o, key);
  return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

int tok__jint(const cJSON *v, int32_t *out) {
  if (!cJSON_IsNumber(v)) return 0;
  double d = v->valuedouble;
  if (d < 0 || d >= TOK_MAX_IDS || d != (double)(int32_t)d) return 0;
  *out = (int32_t)d;
  return 1;
}

char *tok__dupn(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

/* A {"String": s} or {"Regex": r} pattern: *lit (malloc'd) or *re. */
static int parse_pattern(const cJSON *pat, char **lit, size_t *lit_len, pcre2_code **re,
                         const char *what, char *err, size_t errlen) {
  const char *s = tok__jstr(pat, "String"), *r = tok__jstr(pat, "Regex");
  if (s) {
    *lit_len = strlen(s);
    *lit = tok__dupn(s, *lit_len);
    return *lit ? 0 : NS_ENOMEM;
  }
  if (r) {
    char msg[256];
    *re = tok__regex(r, strlen(r), msg, sizeof msg);
    if (!*re) {
      tok__errf(err, errlen, "tokenizer.json: %s: %s", what, msg);
      return NS_EFORMAT;
    }
    return 0;
  }
  tok__errf(err, errlen, "tokenizer.json: %s: pattern is neither String nor Regex", what);
  return NS_EFORMAT;
}

/* One character given as a JSON string ("▁", " "): its code point and UTF-8. */
static int parse_char(const char *s, uint32_t *cp, char *utf8, size_t *len) {
  if (!s) return 0;
  size_t n = strlen(s);
  size_t k = tok__utf8_seq((const unsigned char *)s, n, cp);
  if (k == 0 || k != n) return 0;
  if (utf8) memcpy(utf8, s, k);
  if (len) *len = k;
  return 1;
}

static tok_prepend parse_prepend(const cJSON *j) {
  const char *s = tok__jstr(j, "prepend_scheme");
  if (s) {
    if (strcmp(s, "first") == 0) return TOK_PREPEND_FIRST;
    if (strcmp(s, "never") == 0) return TOK_PREPEND_NEVER;
    return TOK_PREPEND_ALWAYS;
  }
  /* older files: add_prefix_space, default true */
  return tok__jbool(j, "add_prefix_space", 1) ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
}

/* ---- normalizer, pre-tokenizer, decoder ------------------------------------------- */

static int too_many(const char *what, char *err, size_t errlen) {
  tok__errf(err, errlen, "tokenizer.json: more than %d %s steps", TOK_MAX_STEPS, what);
  return NS_EUNSUPPORTED;
}

static int parse_norm(tok *t, const cJSON *j, char *err, size_t errlen) {
  if (!j || cJSON_IsNull(j)) return 0;
  const char *type = tok__jstr(j, "type");
  if (!type) {
    tok__errf(err, errlen, "tokenizer.json: normalizer without a type");
    return NS_EFORMAT;
  }
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *it;
    cJSON_ArrayForEach(it, tok__jget(j, "normalizers")) {
      int rc = parse_norm(t, it, err, errlen);
      if (rc) return rc;
    }
    return 0;
  }
  if (t->n_norm == TOK_MAX_STEPS) return too_many("normalizer", err, errlen);
  tok_norm *n = &t->norm[t->n_norm];
  memset(n, 0, sizeof *n);
  if (strcmp(type, "Prepend") == 0) {
    const char *p = tok__jstr(j, "prepend");
    if (!p) goto bad;
    n->kind = TOK_NORM_PREPEND;
    n->pat_len = strlen(p);
    if (!(n->pat = tok__dupn(p, n->pat_len))) return NS_ENOMEM;
  } else if (strcmp(type, "Replace") == 0) {
    const char *c = tok__jstr(j, "content");
    if (!c) goto bad;
    n->kind = TOK_NORM_REPLACE;
    int rc = parse_pattern(tok__jget(j, "pattern"), &n->pat, &n->pat_len, &n->re,
                           "Replace normalizer", err, errlen);
    if (rc) return rc;
    n->content_len = strlen(c);
    if (!(n->content = tok__dupn(c, n->content_len))) return NS_ENOMEM;
  } else if (strcmp(type, "NFC") == 0) {
    n->kind = TOK_NORM_NFC;
    if (!tok__nfc_exact())
      ns_log_warn("tokenizer: NFC normalizer applied as identity (built without ICU): "
                  "input that is not already NFC may encode differently from HF");
  } else {
    tok__errf(err, errlen, "tokenizer.json: normalizer type %s is not supported", type);
    return NS_EUNSUPPORTED;
  }
  t->n_norm++;
  return 0;
bad:
  tok__errf(err, errlen, "tokenizer.json: %s normalizer is missing a field", type);
  return NS_EFORMAT;
}

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int parse_pre(tok *t, const cJSON *j, char *err, size_t errlen) {
  if (!j || cJSON_IsNull(j)) return 0;
  const char *type = tok__jstr(j, "type");
  if (!type) {
    tok__errf(err, errlen, "tokenizer.json: pre_tokenizer without a type");
    return NS_EFORMAT;
  }
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *it;
    cJSON_ArrayForEach(it, tok__jget(j, "pretokenizers")) {
      int rc = parse_pre(t, it, err, errlen);
      if (rc) return rc;
    }
    return 0;
  }
  if (t->n_pre == TOK_MAX_STEPS) return too_many("pre_tokenizer", err, errlen);
  tok_pre *p = &t->pre[t->n_pre];
  memset(p, 0, sizeof *p);
  if (strcmp(type, "Metaspace") == 0) {
    uint32_t cp;
    p->kind = TOK_PRE_METASPACE;
    if (!parse_char(tok__jstr(j, "replacement"), &cp, p->rep, &p->rep_len)) {
      tok__errf(err, errlen, "tokenizer.json: Metaspace replacement must be one character");
      return NS_EFORMAT;
    }
    p->prepend = parse_prepend(j);
    p->split = tok__jbool(j, "split", 1);
  } else if (strcmp(type, "ByteLevel") == 0) {
    p->kind = TOK_PRE_BYTELEVEL;
    p->add_prefix_space = tok__jbool(j, "add_prefix_space", 1);
    p->use_regex = tok__jbool(j, "use_regex", 1);
    if (p->use_regex) {
      p->re = tok__regex(GPT2_PATTERN, sizeof GPT2_PATTERN - 1, err, errlen);
      if (!p->re) return NS_EINTERNAL;
    }
  } else if (strcmp(type, "Split") == 0) {
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                  "Contiguous"};
    const char *b = tok__jstr(j, "behavior");
    p->kind = TOK_PRE_SPLIT;
    p->behavior = (tok_behavior)-1;
    for (int i = 0; b && i < 5; i++)
      if (strcmp(b, names[i]) == 0) p->behavior = (tok_behavior)i;
    if ((int)p->behavior < 0) {
      tok__errf(err, errlen, "tokenizer.json: Split behavior %s is not known", b ? b : "null");
      return NS_EFORMAT;
    }
    p->invert = tok__jbool(j, "invert", 0);
    int rc =
        parse_pattern(tok__jget(j, "pattern"), &p->lit, &p->lit_len, &p->re, "Split", err, errlen);
    if (rc) return rc;
  } else {
    tok__errf(err, errlen, "tokenizer.json: pre_tokenizer type %s is not supported", type);
    return NS_EUNSUPPORTED;
  }
  t->n_pre++;
  return 0;
}

static int parse_dec(tok *t, const cJSON *j, char *err, size_t errlen) {
  if (!j || cJSON_IsNull(j)) return 0;
  const char *type = tok__jstr(j, "type");
  if (!type) {
    tok__errf(err, errlen, "tokenizer.json: decoder without a type");
    return NS_EFORMAT;
  }
  t->has_decoder = 1;
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *it;
    cJSON_ArrayForEach(it, tok__jget(j, "decoders")) {
      int rc = parse_dec(t, it, err, errlen);
      if (rc) return rc;
    }
    return 0;
  }
  if (t->n_dec == TOK_MAX_STEPS) return too_many("decoder", err, errlen);
  tok_dec *d = &t->dec[t->n_dec];
  memset(d, 0, sizeof *d);
  for (int i = 0; i < t->n_dec; i++)
    if (t->dec[i].kind == TOK_DEC_FUSE || t->dec[i].kind == TOK_DEC_BYTE_LEVEL) d->fused = 1;
  if (strcmp(type, "Replace") == 0) {
    const char *c = tok__jstr(j, "content"), *s = tok__jstr(tok__jget(j, "pattern"), "String");
    if (!c || !s || !*s) {
      tok__errf(err, errlen, "tokenizer.json: Replace decoder needs a String pattern");
      return NS_EUNSUPPORTED;
    }
    d->kind = TOK_DEC_REPLACE;
    d->pat_len = strlen(s);
    d->content_len = strlen(c);
    if (!(d->pat = tok__dupn(s, d->pat_len)) || !(d->content = tok__dupn(c, d->content_len)))
      return NS_ENOMEM;
  } else if (strcmp(type, "ByteFallback") == 0) {
    d->kind = TOK_DEC_BYTE_FALLBACK;
  } else if (strcmp(type, "Fuse") == 0) {
    d->kind = TOK_DEC_FUSE;
  } else if (strcmp(type, "Strip") == 0) {
    int32_t a = 0, b = 0;
    d->kind = TOK_DEC_STRIP;
    if (!parse_char(tok__jstr(j, "content"), &d->strip_cp, NULL, NULL) ||
        !tok__jint(tok__jget(j, "start"), &a) || !tok__jint(tok__jget(j, "stop"), &b)) {
      tok__errf(err, errlen, "tokenizer.json: Strip decoder needs content, start, stop");
      return NS_EFORMAT;
    }
    d->start = a;
    d->stop = b;
  } else if (strcmp(type, "ByteLevel") == 0) {
    d->kind = TOK_DEC_BYTE_LEVEL;
  } else if (strcmp(type, "Metaspace") == 0) {
    d->kind = TOK_DEC_METASPACE;
    if (!parse_char(tok__jstr(j, "replacement"), &d->rep_cp, NULL, NULL)) {
      tok__errf(err, errlen, "tokenizer.json: Metaspace replacement must be one character");
      return NS_EFORMAT;
    }
    d->prepend = parse_prepend(j) != TOK_PREPEND_NEVER;
  } else {
    tok__errf(err, errlen, "tokenizer.json: decoder type %s is not supported", type);
    return NS_EUNSUPPORTED;
  }
  t->n_dec++;
  return 0;
}

/* ---- post-processor ---------------------------------------------------------------- */

/* A later processor wraps what the earlier ones produced. */
static int wrap(tok *t, const int32_t *pre, size_t npre, const int32_t *suf, size_t nsuf) {
  int32_t *p = malloc((npre + t->n_prefix + 1) * sizeof *p);
  int32_t *s = malloc((t->n_suffix + nsuf + 1) * sizeof *s);
  if (!p || !s) {
    free(p);
    free(s);
    return NS_ENOMEM;
  }
  if (npre) memcpy(p, pre, npre * sizeof *p);
  if (t->n_prefix) memcpy(p + npre, t->prefix, t->n_prefix * sizeof *p);
  if (t->n_suffix) memcpy(s, t->suffix, t->n_suffix * sizeof *s);
  if (nsuf) memcpy(s + t->n_suffix, suf, nsuf * sizeof *s);
  free(t->prefix);
  free(t->suffix);
  t->prefix = p;
  t->suffix = s;
  t->n_prefix += npre;
  t->n_suffix += nsuf;
  return 0;
}

static int parse_template(tok *t, const cJSON *j, char *err, size_t errlen) {
  int32_t ids[2][64];
  size_t nid[2] = {0, 0};
  int side = 0;
  const cJSON *item, *specials = tok__jget(j, "special_tokens");
  cJSON_ArrayForEach(item, tok__jget(j, "single")) {
    const cJSON *sp = tok__jget(item, "SpecialToken");
    if (tok__jget(item, "Sequence")) {
      side = 1;
      continue;
    }
    const char *name = tok__jstr(sp, "id");
    const cJSON *list = tok__jget(tok__jget(specials, name ? name : ""), "ids"), *v;
    if (!name || !cJSON_IsArray(list)) {
      tok__errf(err, errlen, "tokenizer.json: TemplateProcessing token %s is not defined",
                name ? name : "(none)");
      return NS_EFORMAT;
    }
    cJSON_ArrayForEach(v, list) {
      int32_t id;
      if (!tok__jint(v, &id) || id >= t->n_ids || nid[side] == 64) {
        tok__errf(err, errlen, "tokenizer.json: TemplateProcessing id of %s is invalid", name);
        return NS_EFORMAT;
      }
      ids[side][nid[side]++] = id;
    }
  }
  return wrap(t, ids[0], nid[0], ids[1], nid[1]);
}

static int parse_post(tok *t, const cJSON *j, char *err, size_t errlen) {
  if (!j || cJSON_IsNull(j)) return 0;
  const char *type = tok__jstr(j, "type");
  if (!type) type = "(none)";
  if (strcmp(type, "Sequence") == 0) {
    const cJSON *it;
    cJSON_ArrayForEach(it, tok__jget(j, "processors")) {
      int rc = parse_post(t, it, err, errlen);
      if (rc) return rc;
    }
    return 0;
  }
  if (strcmp(type, "TemplateProcessing") == 0) return parse_template(t, j, err, errlen);
  if (strcmp(type, "ByteLevel") == 0) return 0; /* offsets only */
  if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
    int32_t cls, sep;
    if (!tok__jint(cJSON_GetArrayItem(tok__jget(j, "cls"), 1), &cls) ||
        !tok__jint(cJSON_GetArrayItem(tok__jget(j, "sep"), 1), &sep) || cls >= t->n_ids ||
        sep >= t->n_ids) {
      tok__errf(err, errlen, "tokenizer.json: %s needs cls and sep ids", type);
      return NS_EFORMAT;
    }
    return wrap(t, &cls, 1, &sep, 1);
  }
  tok__errf(err, errlen, "tokenizer.json: post_processor type %s is not supported", type);
  return NS_EUNSUPPORTED;
}

int tok__parse_pipeline(tok *t, const cJSON *root, char *err, size_t errlen) {
  int rc;
  if ((rc = parse_norm(t, tok__jget(root, "normalizer"), err, errlen)) ||
      (rc = parse_pre(t, tok__jget(root, "pre_tokenizer"), err, errlen)) ||
      (rc = parse_dec(t, tok__jget(root, "decoder"), err, errlen)))
    return rc;
  return parse_post(t, tok__jget(root, "post_processor"), err, errlen);
}
