/* tok_pre.c — text before BPE, as HF orders it: split out added tokens, normalize
 * (tok__normalize), then pre-tokenize into words (tok__pretokenize). */
#include "tok_int.h"

#include "ns_err.h"

#include <stdlib.h>
#include <string.h>

#ifdef NS_TOK_HAVE_ICU
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#endif

int tok__segs_push(tok_segs *v, size_t a, size_t b, int32_t id) {
  if (v->len == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 32;
    tok_seg *p = realloc(v->p, cap * sizeof *p);
    if (!p) return NS_ENOMEM;
    v->p = p;
    v->cap = cap;
  }
  v->p[v->len++] = (tok_seg){a, b, id};
  return 0;
}

/* Non-overlapping occurrences of lit in s, left to right. */
static int literal_find_all(const char *lit, size_t ln, const char *s, size_t n, tok_spans *out) {
  if (ln == 0) return 0;
  size_t i = 0;
  while (i + ln <= n) {
    const char *f = memmem(s + i, n - i, lit, ln);
    if (!f) break;
    size_t a = (size_t)(f - s);
    int rc = tok__spans_push(out, a, a + ln);
    if (rc) return rc;
    i = a + ln;
  }
  return 0;
}

/* ---- normalizers ------------------------------------------------------------------ */

int tok__nfc_exact(void) {
#ifdef NS_TOK_HAVE_ICU
  return 1;
#else
  return 0;
#endif
}

int tok__nfc(const char *s, size_t n, tok_buf *out) {
  size_t i = 0;
  while (i < n && (unsigned char)s[i] < 0xCC)
    i++; /* all below U+0300: already NFC */
  if (i == n) return tok__buf_put(out, s, n);
#ifdef NS_TOK_HAVE_ICU
  if (n > INT32_MAX / 2) return NS_ERANGE;
  UErrorCode st = U_ZERO_ERROR;
  const UNormalizer2 *nfc = unorm2_getNFCInstance(&st);
  if (U_FAILURE(st)) return NS_EINTERNAL;
  int32_t ulen = 0, nlen = 0, blen = 0;
  UChar *u = malloc((n + 1) * sizeof *u), *v = NULL;
  int rc = NS_ENOMEM;
  if (!u) goto out;
  u_strFromUTF8(u, (int32_t)n + 1, &ulen, s, (int32_t)n, &st);
  if (U_FAILURE(st)) goto icu_fail;
  /* NFC of well-formed text is never longer than three times its UTF-16 length */
  if (!(v = malloc(((size_t)ulen * 3 + 1) * sizeof *v))) goto out;
  nlen = unorm2_normalize(nfc, u, ulen, v, ulen * 3 + 1, &st);
  if (U_FAILURE(st)) goto icu_fail;
  u_strToUTF8(NULL, 0, &blen, v, nlen, &st);
  if (st != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(st)) goto icu_fail;
  st = U_ZERO_ERROR;
  if ((rc = tok__buf_reserve(out, (size_t)blen))) goto out;
  u_strToUTF8(out->p + out->len, blen + 1, &blen, v, nlen, &st);
  if (U_FAILURE(st)) goto icu_fail;
  out->len += (size_t)blen;
  out->p[out->len] = '\0';
  rc = 0;
  goto out;
icu_fail:
  rc = NS_EINTERNAL;
out:
  free(u);
  free(v);
  return rc;
#else
  return tok__buf_put(out, s, n); /* documented: identity without ICU */
#endif
}

static int replace_all(const tok_norm *nm, pcre2_match_data *md, const char *s, size_t n,
                       tok_buf *out) {
  tok_spans m = {0};
  int rc = nm->re ? tok__regex_find_all(nm->re, md, s, n, &m)
                  : literal_find_all(nm->pat, nm->pat_len, s, n, &m);
  size_t at = 0;
  for (size_t i = 0; !rc && i < m.len; i += 2) {
    if ((rc = tok__buf_put(out, s + at, m.p[i] - at))) break;
    rc = tok__buf_put(out, nm->content, nm->content_len);
    at = m.p[i + 1];
  }
  if (!rc) rc = tok__buf_put(out, s + at, n - at);
  free(m.p);
  return rc;
}

int tok__normalize(const tok *t, const char *s, size_t n, pcre2_match_data *md, tok_buf *out,
                   tok_buf *tmp) {
  int rc = 0, own = 0;
  out->len = 0;
  if ((rc = tok__buf_put(out, s, n))) return rc;
  for (int i = 0; i < t->n_norm; i++) {
    const tok_norm *nm = &t->norm[i];
    tmp->len = 0;
    if ((rc = tok__buf_reserve(tmp, 0))) break;
    switch (nm->kind) {
    case TOK_NORM_PREPEND: /* only non-empty text gets the prefix */
      if (out->len) rc = tok__buf_put(tmp, nm->pat, nm->pat_len);
      if (!rc) rc = tok__buf_put(tmp, out->p, out->len);
      break;
    case TOK_NORM_REPLACE:
      if (nm->re && !md) {
        if (!(md = pcre2_match_data_create(16, NULL))) return NS_ENOMEM;
        own = 1;
      }
      rc = replace_all(nm, md, out->p, out->len, tmp);
      break;
    case TOK_NORM_NFC: rc = tok__nfc(out->p, out->len, tmp); break;
    }
    if (rc) break;
    tok_buf x = *out; /* swap: the result becomes out */
    *out = *tmp;
    *tmp = x;
  }
  if (own) pcre2_match_data_free(md);
  return rc;
}

/* ---- added tokens ----------------------------------------------------------------- */

static int is_word_char(const tok *t, pcre2_match_data *md, const char *s, size_t n, size_t at) {
  int rc =
      pcre2_match(t->re_word, (PCRE2_SPTR)s, n, at, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, md, NULL);
  return rc >= 0;
}

/* Start of the whitespace that ends s[0..n) (Rust regex \s*$). */
static size_t space_start_at_end(const char *s, size_t n) {
  size_t i = n;
  while (i > 0) {
    size_t j = i - 1;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80)
      j--;
    uint32_t cp;
    if (!tok__utf8_seq((const unsigned char *)s + j, i - j, &cp) || !tok__is_space(cp)) break;
    i = j;
  }
  return i;
}

/* Bytes of whitespace that start s[0..n) (Rust regex ^\s*). */
static size_t space_len_at_start(const char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint32_t cp;
    size_t k = tok__utf8_seq((const unsigned char *)s + i, n - i, &cp);
    if (!k || !tok__is_space(cp)) break;
    i += k;
  }
  return i;
}

int tok__split_added(const tok *t, const tok_matcher *m, int normalized, pcre2_match_data *md,
                     const char *s, size_t n, tok_segs *out) {
  size_t pos = 0, start_off = 0;
  int rc;
  out->len = 0;
  while (m->n && pos < n) {
    /* leftmost-longest, as HF's Aho-Corasick (MatchKind::LeftmostLongest) */
    const tok_added *hit = NULL;
    size_t p = pos, hl = 0;
    for (; p < n && !hit; p++) {
      unsigned char c = (unsigned char)s[p];
      for (uint32_t k = m->first[c]; k < m->first[c + 1]; k++) {
        const tok_added *x = &t->added[m->order[k]];
        const char *xs = normalized ? x->ncontent : x->content;
        size_t xl = normalized ? x->nlen : x->len;
        if (xl <= n - p && memcmp(s + p, xs, xl) == 0) {
          hit = x;
          hl = xl;
          break;
        }
      }
    }
    if (!hit) break;
    size_t start = p - 1, stop = start + hl;
    pos = stop; /* the next search resumes after this match, kept or not */
    if (hit->single_word) {
      int start_space = 1, stop_space = stop == n || !is_word_char(t, md, s, n, stop);
      if (start > 0) {
        size_t j = start - 1; /* the character before the match */
        while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80)
          j--;
        start_space = !is_word_char(t, md, s, n, j);
      }
      if (!start_space || !stop_space) continue;
    }
    if (hit->lstrip) {
      size_t ns = space_start_at_end(s, start);
      start = ns > start_off ? ns : start_off;
    }
    if (hit->rstrip) stop += space_len_at_start(s + stop, n - stop);
    if (start_off < start && (rc = tok__segs_push(out, start_off, start, -1))) return rc;
    if ((rc = tok__segs_push(out, start, stop, hit->id))) return rc;
    start_off = stop;
  }
  if (start_off < n && (rc = tok__segs_push(out, start_off, n, -1))) return rc;
  return 0;
}

/* ---- pre-tokenizers --------------------------------------------------------------- */

/* matches (pairs in m) plus the gaps between them, as (a, b, is_match) segments */
static int to_segments(const tok_spans *m, size_t n, int invert, tok_segs *out) {
  size_t prev = 0;
  int rc;
  out->len = 0;
  for (size_t i = 0; i < m->len; i += 2) {
    if (m->p[i] != prev && (rc = tok__segs_push(out, prev, m->p[i], invert))) return rc;
    if ((rc = tok__segs_push(out, m->p[i], m->p[i + 1], !invert))) return rc;
    prev = m->p[i + 1];
  }
  if (prev != n && (rc = tok__segs_push(out, prev, n, invert))) return rc;
  return 0;
}

/* HF's NormalizedString::split: apply a SplitDelimiterBehavior to the segments. */
static int apply_behavior(const tok_segs *sg, tok_behavior bh, tok_segs *out) {
  int rc = 0, prev_match = 0;
  out->len = 0;
  if (bh == TOK_SPLIT_MERGED_NEXT) {
    for (size_t k = sg->len; k-- > 0;) {
      const tok_seg *g = &sg->p[k];
      if (g->id && !prev_match && out->len)
        out->p[out->len - 1].a = g->a;
      else if ((rc = tok__segs_push(out, g->a, g->b, 0)))
        return rc;
      prev_match = g->id;
    }
    for (size_t i = 0, j = out->len; j-- > i + 1; i++) {
      tok_seg x = out->p[i];
      out->p[i] = out->p[j];
      out->p[j] = x;
    }
    return 0;
  }
  for (size_t k = 0; k < sg->len; k++) {
    const tok_seg *g = &sg->p[k];
    int extend = 0;
    switch (bh) {
    case TOK_SPLIT_REMOVED:
      if (g->id) continue;
      break;
    case TOK_SPLIT_ISOLATED: break;
    case TOK_SPLIT_MERGED_PREV: extend = g->id && !prev_match; break;
    case TOK_SPLIT_CONTIGUOUS: extend = g->id == prev_match; break;
    case TOK_SPLIT_MERGED_NEXT: break;
    }
    prev_match = g->id;
    if (extend && out->len)
      out->p[out->len - 1].b = g->b;
    else if ((rc = tok__segs_push(out, g->a, g->b, 0)))
      return rc;
  }
  return 0;
}

/* Hand each non-empty piece of s to the next stage. The pieces live in e->pieces[stage]. */
static int next_pieces(tok_enc *e, int stage, const char *s, int first) {
  tok_segs *pc = &e->pieces[stage];
  for (size_t k = 0; k < pc->len; k++) {
    size_t a = pc->p[k].a, b = pc->p[k].b;
    if (b <= a) continue;
    int rc = tok__pretokenize(e, stage + 1, s + a, b - a, first && a == 0);
    if (rc) return rc;
  }
  return 0;
}

static int pre_metaspace(tok_enc *e, int stage, const tok_pre *p, const char *s, size_t n,
                         int first) {
  tok_buf *b = &e->text[stage];
  int rc;
  b->len = 0;
  int starts = s[0] == ' ' || (n >= p->rep_len && memcmp(s, p->rep, p->rep_len) == 0);
  int want = p->prepend == TOK_PREPEND_ALWAYS || (p->prepend == TOK_PREPEND_FIRST && first);
  if (want && !starts && (rc = tok__buf_put(b, p->rep, p->rep_len))) return rc;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != ' ') continue;
    if ((rc = tok__buf_put(b, s + at, i - at)) || (rc = tok__buf_put(b, p->rep, p->rep_len)))
      return rc;
    at = i + 1;
  }
  if ((rc = tok__buf_put(b, s + at, n - at))) return rc;
  if (!p->split) return tok__pretokenize(e, stage + 1, b->p, b->len, first);
  tok_spans *m = &e->match[stage];
  m->len = 0;
  if ((rc = literal_find_all(p->rep, p->rep_len, b->p, b->len, m)) ||
      (rc = to_segments(m, b->len, 0, &e->segs[stage])) ||
      (rc = apply_behavior(&e->segs[stage], TOK_SPLIT_MERGED_NEXT, &e->pieces[stage])))
    return rc;
  return next_pieces(e, stage, b->p, first);
}

static int pre_bytelevel(tok_enc *e, int stage, const tok_pre *p, const char *s, size_t n,
                         int first) {
  const tok *t = e->t;
  tok_buf *b = &e->text[stage], *mb = &e->mapped[stage];
  tok_segs *pc = &e->pieces[stage];
  int rc;
  b->len = 0;
  if (p->add_prefix_space && s[0] != ' ' && (rc = tok__buf_put(b, " ", 1))) return rc;
  if ((rc = tok__buf_put(b, s, n))) return rc;
  pc->len = 0;
  if (p->use_regex) {
    tok_spans *m = &e->match[stage];
    m->len = 0;
    if ((rc = tok__regex_find_all(p->re, e->md, b->p, b->len, m)) ||
        (rc = to_segments(m, b->len, 0, &e->segs[stage])) ||
        (rc = apply_behavior(&e->segs[stage], TOK_SPLIT_ISOLATED, pc)))
      return rc;
  } else if ((rc = tok__segs_push(pc, 0, b->len, 0))) {
    return rc;
  }
  for (size_t k = 0; k < pc->len; k++) {
    size_t a = pc->p[k].a, z = pc->p[k].b;
    if (z <= a) continue;
    mb->len = 0;
    if ((rc = tok__buf_reserve(mb, (z - a) * 2))) return rc;
    for (size_t i = a; i < z; i++) {
      unsigned char c = (unsigned char)b->p[i];
      memcpy(mb->p + mb->len, t->byte_utf8[c], t->byte_utf8_len[c]);
      mb->len += t->byte_utf8_len[c];
    }
    mb->p[mb->len] = '\0';
    if ((rc = tok__pretokenize(e, stage + 1, mb->p, mb->len, first && a == 0))) return rc;
  }
  return 0;
}

static int pre_split(tok_enc *e, int stage, const tok_pre *p, const char *s, size_t n, int first) {
  tok_spans *m = &e->match[stage];
  int rc;
  m->len = 0;
  rc = p->re ? tok__regex_find_all(p->re, e->md, s, n, m)
             : literal_find_all(p->lit, p->lit_len, s, n, m);
  if (rc || (rc = to_segments(m, n, p->invert, &e->segs[stage])) ||
      (rc = apply_behavior(&e->segs[stage], p->behavior, &e->pieces[stage])))
    return rc;
  return next_pieces(e, stage, s, first);
}

int tok__pretokenize(tok_enc *e, int stage, const char *s, size_t n, int first) {
  if (n == 0) return 0; /* HF drops empty splits */
  if (stage == e->t->n_pre) return tok__bpe_word(e, s, n);
  const tok_pre *p = &e->t->pre[stage];
  switch (p->kind) {
  case TOK_PRE_METASPACE: return pre_metaspace(e, stage, p, s, n, first);
  case TOK_PRE_BYTELEVEL: return pre_bytelevel(e, stage, p, s, n, first);
  case TOK_PRE_SPLIT: return pre_split(e, stage, p, s, n, first);
  }
  return NS_EINTERNAL;
}
