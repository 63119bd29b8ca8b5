/* tok_util.c — the tokenizer's small tools: growable buffers, strict and lossy UTF-8,
 * the vocabulary and merge hash maps, and PCRE2 regex compile / find-all. */
#include "tok_int.h"

#include "ns_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- buffers ---------------------------------------------------------------------- */

int tok__buf_reserve(tok_buf *b, size_t extra) {
  if (extra > SIZE_MAX / 2 - b->len) return NS_ENOMEM;
  size_t need = b->len + extra + 1;
  if (need > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return NS_ENOMEM;
    b->p = p;
    b->cap = cap;
  }
  b->p[b->len] = '\0'; /* the contents are always a C string */
  return 0;
}

int tok__buf_put(tok_buf *b, const void *s, size_t n) {
  int rc = tok__buf_reserve(b, n);
  if (rc) return rc;
  if (n) memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
  return 0;
}

void tok__buf_free(tok_buf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

int tok__ids_push(tok_ids *v, int32_t id) {
  if (v->len == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 64;
    int32_t *p = realloc(v->p, cap * sizeof *p);
    if (!p) return NS_ENOMEM;
    v->p = p;
    v->cap = cap;
  }
  v->p[v->len++] = id;
  return 0;
}

int tok__spans_push(tok_spans *v, size_t a, size_t b) {
  if (v->len + 2 > v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 64;
    size_t *p = realloc(v->p, cap * sizeof *p);
    if (!p) return NS_ENOMEM;
    v->p = p;
    v->cap = cap;
  }
  v->p[v->len++] = a;
  v->p[v->len++] = b;
  return 0;
}

/* ---- UTF-8 ------------------------------------------------------------------------ */

/* Bytes a sequence led by c needs, and the allowed range of its second byte. */
static int utf8_lead(unsigned c, unsigned *lo, unsigned *hi) {
  *lo = 0x80, *hi = 0xBF;
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;
  if (c < 0xE0) return 2;
  if (c < 0xF0) {
    if (c == 0xE0) *lo = 0xA0;
    if (c == 0xED) *hi = 0x9F;
    return 3;
  }
  if (c < 0xF5) {
    if (c == 0xF0) *lo = 0x90;
    if (c == 0xF4) *hi = 0x8F;
    return 4;
  }
  return 0;
}

size_t tok__utf8_seq(const unsigned char *s, size_t n, uint32_t *cp) {
  unsigned lo, hi;
  if (n == 0) return 0;
  int k = utf8_lead(s[0], &lo, &hi);
  if (k == 0 || (size_t)k > n) return 0;
  if (k == 1) {
    *cp = s[0];
    return 1;
  }
  if (s[1] < lo || s[1] > hi) return 0;
  uint32_t c = s[0] & (0x7F >> k);
  for (int i = 1; i < k; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    c = (c << 6) | (s[i] & 0x3F);
  }
  *cp = c;
  return (size_t)k;
}

int tok__utf8_partial(const unsigned char *s, size_t n) {
  unsigned lo, hi;
  int k = n ? utf8_lead(s[0], &lo, &hi) : 0;
  if (k < 2 || n >= (size_t)k) return 0;
  for (size_t i = 1; i < n; i++)
    if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xBF)) return 0;
  return 1;
}

int tok__utf8_valid(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    if (u[i] < 0x80) {
      i++;
      continue;
    }
    uint32_t cp;
    size_t k = tok__utf8_seq(u + i, n - i, &cp);
    if (!k) return 0;
    i += k;
  }
  return 1;
}

size_t tok__utf8_put(char *d, uint32_t cp) {
  unsigned char *u = (unsigned char *)d;
  if (cp < 0x80) {
    u[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    u[0] = (unsigned char)(0xC0 | (cp >> 6));
    u[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    u[0] = (unsigned char)(0xE0 | (cp >> 12));
    u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    u[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  u[0] = (unsigned char)(0xF0 | (cp >> 18));
  u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
  u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
  u[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

static const char REPLACEMENT[] = "\xEF\xBF\xBD";

int tok__utf8_lossy(tok_buf *out, const unsigned char *s, size_t n, int final, size_t *used) {
  size_t i = 0, run = 0; /* s[run..i) is valid and not yet copied */
  int rc = 0;
  while (i < n) {
    unsigned lo, hi;
    int k = utf8_lead(s[i], &lo, &hi);
    if (k == 1) {
      i++;
      continue;
    }
    size_t j = 1; /* bytes of the maximal valid prefix so far */
    if (k > 1) {
      while (j < (size_t)k && i + j < n) {
        unsigned c = s[i + j];
        unsigned l = j == 1 ? lo : 0x80, h = j == 1 ? hi : 0xBF;
        if (c < l || c > h) break;
        j++;
      }
      if (j == (size_t)k) {
        i += j;
        continue;
      }
      if (i + j == n && !final) break; /* incomplete tail: wait for more bytes */
    }
    if ((i > run && (rc = tok__buf_put(out, s + run, i - run))) ||
        (rc = tok__buf_put(out, REPLACEMENT, 3)))
      return rc;
    i += j;
    run = i;
  }
  if (i > run && (rc = tok__buf_put(out, s + run, i - run))) return rc;
  if ((rc = tok__buf_reserve(out, 0))) return rc;
  if (used) *used = i;
  return 0;
}

int tok__is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

/* ---- hash maps -------------------------------------------------------------------- */

static uint32_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n; i++)
    h = (h ^ u[i]) * 0x100000001b3ull;
  h ^= h >> 29;
  return (uint32_t)(h ^ (h >> 32));
}

static size_t pow2_at_least(size_t n) {
  size_t c = 16;
  while (c < n)
    c *= 2;
  return c;
}

int tok__strmap_init(tok_strmap *m, size_t n) {
  size_t cap = pow2_at_least(n * 2 + 1);
  m->hash = malloc(cap * sizeof *m->hash);
  m->id = malloc(cap * sizeof *m->id);
  if (!m->hash || !m->id) {
    tok__strmap_free(m);
    return NS_ENOMEM;
  }
  for (size_t i = 0; i < cap; i++)
    m->id[i] = -1;
  m->mask = cap - 1;
  return 0;
}

void tok__strmap_free(tok_strmap *m) {
  free(m->hash);
  free(m->id);
  m->hash = NULL;
  m->id = NULL;
}

void tok__strmap_put(tok_strmap *m, char *const *str, const uint32_t *len, int32_t id) {
  uint32_t h = hash_bytes(str[id], len[id]);
  size_t i = h & m->mask;
  while (m->id[i] >= 0) {
    int32_t o = m->id[i];
    if (m->hash[i] == h && len[o] == len[id] && memcmp(str[o], str[id], len[id]) == 0) return;
    i = (i + 1) & m->mask;
  }
  m->hash[i] = h;
  m->id[i] = id;
}

int32_t tok__strmap_get(const tok_strmap *m, char *const *str, const uint32_t *len, const char *s,
                        size_t n) {
  uint32_t h = hash_bytes(s, n);
  size_t i = h & m->mask;
  while (m->id[i] >= 0) {
    int32_t o = m->id[i];
    if (m->hash[i] == h && len[o] == n && memcmp(str[o], s, n) == 0) return o;
    i = (i + 1) & m->mask;
  }
  return -1;
}

static size_t hash_pair(uint64_t key, size_t mask) {
  key ^= key >> 31;
  key *= 0x9E3779B97F4A7C15ull;
  return (size_t)(key >> 20) & mask;
}

int tok__pairmap_init(tok_pairmap *m, size_t n) {
  size_t cap = pow2_at_least(n * 2 + 1);
  m->slot = malloc(cap * sizeof *m->slot);
  if (!m->slot) return NS_ENOMEM;
  for (size_t i = 0; i < cap; i++)
    m->slot[i].key = UINT64_MAX;
  m->mask = cap - 1;
  return 0;
}

void tok__pairmap_free(tok_pairmap *m) {
  free(m->slot);
  m->slot = NULL;
}

void tok__pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged) {
  uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
  size_t i = hash_pair(key, m->mask);
  while (m->slot[i].key != UINT64_MAX && m->slot[i].key != key)
    i = (i + 1) & m->mask;
  /* a later duplicate replaces the earlier one, as HF's HashMap does */
  m->slot[i] = (tok_pair_slot){key, rank, merged};
}

int tok__pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *merged) {
  uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
  for (size_t i = hash_pair(key, m->mask);; i = (i + 1) & m->mask) {
    const tok_pair_slot *sl = &m->slot[i];
    if (sl->key == key) {
      *rank = sl->rank;
      *merged = sl->merged;
      return 1;
    }
    if (sl->key == UINT64_MAX) return 0;
  }
}

/* ---- regex ------------------------------------------------------------------------ */

void tok__errf(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

pcre2_code *tok__regex(const char *pat, size_t len, char *err, size_t errlen) {
  int code;
  PCRE2_SIZE off;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, len, PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
  if (!re) {
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(code, msg, sizeof msg);
    tok__errf(err, errlen, "regex /%.*s/ at offset %zu: %s", (int)(len > 80 ? 80 : len), pat,
              (size_t)off, (const char *)msg);
    return NULL;
  }
  (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
  return re;
}

static size_t char_len(const char *s, size_t n, size_t at) {
  size_t k = 1;
  while (at + k < n && ((unsigned char)s[at + k] & 0xC0) == 0x80)
    k++;
  return k;
}

static int match_at(const pcre2_code *re, pcre2_match_data *md, const char *s, size_t n,
                    size_t pos) {
  int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
    rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
  return rc;
}

int tok__regex_find_all(const pcre2_code *re, pcre2_match_data *md, const char *s, size_t n,
                        tok_spans *out) {
  size_t pos = 0, last_end = 0;
  int have_last = 0, rc;
  while (pos <= n) {
    rc = match_at(re, md, s, n, pos);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return rc == PCRE2_ERROR_NOMEMORY ? NS_ENOMEM : NS_ERANGE;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t a = ov[0], b = ov[1];
    if (b < a) return NS_EINTERNAL; /* \K tricks; not in tokenizer patterns */
    /* Like Rust's find_iter: no empty match right where the previous one ended. */
    if (a == b && have_last && last_end == b) {
      if (pos >= n) break;
      pos += char_len(s, n, pos);
      continue;
    }
    if ((rc = tok__spans_push(out, a, b))) return rc;
    pos = last_end = b;
    have_last = 1;
  }
  return 0;
}
