/* tok_decode.c — ids back to text: tok_decode runs HF's decoder chain over the whole
 * token list; tok_stream_* runs the same steps incrementally, one id at a time. */
#include "tok_int.h"

#include "ns_err.h"

#include <stdlib.h>
#include <string.h>

static const char FFFD[] = "\xEF\xBF\xBD";

/* A list of strings: (offset, length) pairs into one buffer. */
typedef struct plist {
  tok_buf b;
  tok_spans sp;
} plist;

static int pl_push(plist *l, const char *s, size_t n) {
  size_t at = l->b.len;
  int rc = tok__buf_put(&l->b, s, n);
  return rc ? rc : tok__spans_push(&l->sp, at, n);
}

static void pl_clear(plist *l) {
  l->b.len = l->sp.len = 0;
}

static void pl_free(plist *l) {
  tok__buf_free(&l->b);
  free(l->sp.p);
}

#define PL_N(l)      ((l)->sp.len / 2)
#define PL_S(l, i)   ((l)->b.p + (l)->sp.p[2 * (i)])
#define PL_LEN(l, i) ((l)->sp.p[2 * (i) + 1])

int tok__byte_token(const char *s, size_t n) {
  /* HF ByteFallback: len 6, "<0x", '>' and u8::from_str_radix of the two bytes between,
   * which also takes a '+' sign ("<0x+A>") */
  if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (i == 3 && c == '+') continue;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* ---- per-piece transformations shared by both paths ------------------------------- */

static int dec_replace(const tok_dec *d, const char *s, size_t n, tok_buf *out) {
  size_t at = 0, i = 0;
  int rc;
  while (i + d->pat_len <= n) {
    const char *f = memmem(s + i, n - i, d->pat, d->pat_len);
    if (!f) break;
    size_t a = (size_t)(f - s);
    if ((rc = tok__buf_put(out, s + at, a - at)) ||
        (rc = tok__buf_put(out, d->content, d->content_len)))
      return rc;
    i = at = a + d->pat_len;
  }
  return tok__buf_put(out, s + at, n - at);
}

/* Metaspace decoder on one token: the replacement becomes ' ', except that in the first
 * token (when a prefix was prepended) every replacement is dropped. */
static int dec_metaspace(const tok_dec *d, const char *s, size_t n, int first, tok_buf *out) {
  size_t at = 0, i = 0;
  int rc;
  while (i < n) {
    uint32_t cp;
    size_t k = tok__utf8_seq((const unsigned char *)s + i, n - i, &cp);
    if (!k) k = 1, cp = 0xFFFFFFFF;
    if (cp == d->rep_cp) {
      if ((rc = tok__buf_put(out, s + at, i - at))) return rc;
      if (!(first && d->prepend) && (rc = tok__buf_put(out, " ", 1))) return rc;
      at = i + k;
    }
    i += k;
  }
  return tok__buf_put(out, s + at, n - at);
}

/* Strip on one whole token (HF Strip::decode_chain). */
static int dec_strip(const tok_dec *d, const char *s, size_t n, tok_buf *out) {
  size_t a = 0, z = n;
  uint32_t cp;
  for (int i = 0; i < d->start && a < n; i++) {
    size_t k = tok__utf8_seq((const unsigned char *)s + a, n - a, &cp);
    if (!k || cp != d->strip_cp) break;
    a += k;
  }
  for (int i = 0; i < d->stop && z > 0; i++) {
    size_t j = z - 1;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80)
      j--;
    if (!tok__utf8_seq((const unsigned char *)s + j, z - j, &cp) || cp != d->strip_cp) break;
    z = j;
  }
  return z > a ? tok__buf_put(out, s + a, z - a) : 0; /* overlapping cuts: HF would panic */
}

/* The GPT-2 byte of each character of a token, or the token's own bytes when one of its
 * characters is not in the map (added tokens), as HF's ByteLevel decoder does. */
static int bytelevel_bytes(const tok *t, const char *s, size_t n, tok_buf *out) {
  size_t start = out->len;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t k = tok__utf8_seq((const unsigned char *)s + i, n - i, &cp);
    if (!k || cp >= 324 || t->cp_byte[cp] < 0) {
      out->len = start;
      return tok__buf_put(out, s, n);
    }
    char b = (char)t->cp_byte[cp];
    int rc = tok__buf_put(out, &b, 1);
    if (rc) return rc;
    i += k;
  }
  return 0;
}

/* Emit a finished run of <0xNN> bytes: one string if valid UTF-8, else one U+FFFD each. */
static int flush_run(tok_buf *run, plist *out) {
  int rc = 0;
  if (!run->len) return 0;
  if (tok__utf8_valid(run->p, run->len)) {
    rc = pl_push(out, run->p, run->len);
  } else {
    for (size_t i = 0; i < run->len && !rc; i++)
      rc = pl_push(out, FFFD, 3);
  }
  run->len = 0;
  return rc;
}

/* ---- tok_decode: HF decode_chain, step by step over the whole list ----------------- */

static int decode_step(const tok *t, const tok_dec *d, plist *in, plist *out, tok_buf *tmp) {
  int rc = 0;
  size_t n = PL_N(in);
  switch (d->kind) {
  case TOK_DEC_FUSE:
    tmp->len = 0;
    for (size_t i = 0; i < n && !rc; i++)
      rc = tok__buf_put(tmp, PL_S(in, i), PL_LEN(in, i));
    return rc ? rc : pl_push(out, tmp->p ? tmp->p : "", tmp->len);
  case TOK_DEC_BYTE_LEVEL: {
    tok_buf bytes = {0};
    for (size_t i = 0; i < n && !rc; i++)
      rc = bytelevel_bytes(t, PL_S(in, i), PL_LEN(in, i), &bytes);
    tmp->len = 0;
    if (!rc) rc = tok__buf_reserve(tmp, 0);
    if (!rc) rc = tok__utf8_lossy(tmp, (const unsigned char *)bytes.p, bytes.len, 1, NULL);
    tok__buf_free(&bytes);
    return rc ? rc : pl_push(out, tmp->p, tmp->len);
  }
  case TOK_DEC_BYTE_FALLBACK:
    tmp->len = 0;
    for (size_t i = 0; i < n && !rc; i++) {
      int b = tok__byte_token(PL_S(in, i), PL_LEN(in, i));
      if (b >= 0) {
        char c = (char)b;
        rc = tok__buf_put(tmp, &c, 1);
      } else if (!(rc = flush_run(tmp, out))) {
        rc = pl_push(out, PL_S(in, i), PL_LEN(in, i));
      }
    }
    return rc ? rc : flush_run(tmp, out);
  default: break;
  }
  for (size_t i = 0; i < n && !rc; i++) {
    tmp->len = 0;
    if ((rc = tok__buf_reserve(tmp, 0))) break;
    if (d->kind == TOK_DEC_REPLACE)
      rc = dec_replace(d, PL_S(in, i), PL_LEN(in, i), tmp);
    else if (d->kind == TOK_DEC_STRIP)
      rc = dec_strip(d, PL_S(in, i), PL_LEN(in, i), tmp);
    else
      rc = dec_metaspace(d, PL_S(in, i), PL_LEN(in, i), i == 0, tmp);
    if (!rc) rc = pl_push(out, tmp->p, tmp->len);
  }
  return rc;
}

static int check_ids(const tok *t, const int32_t *ids, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= t->n_ids) return NS_EINVAL;
  return 0;
}

int tok_decode(const tok_t *t, const int32_t *ids, size_t n, int skip_special, char **text,
               size_t *len) {
  if (!t || (!ids && n) || !text || !len) return NS_EINVAL;
  *text = NULL;
  *len = 0;
  int rc = check_ids(t, ids, n);
  if (rc) return rc;
  plist a = {0}, b = {0};
  tok_buf tmp = {0}, res = {0};
  for (size_t i = 0; i < n && !rc; i++) {
    int32_t id = ids[i];
    if (!t->piece[id] || (skip_special && t->special[id])) continue; /* HF skips holes too */
    rc = pl_push(&a, t->piece[id], t->piece_len[id]);
  }
  for (int k = 0; k < t->n_dec && !rc; k++) {
    pl_clear(&b);
    rc = decode_step(t, &t->dec[k], &a, &b, &tmp);
    plist x = a;
    a = b;
    b = x;
  }
  if (!rc) rc = tok__buf_reserve(&res, 0);
  for (size_t i = 0; i < PL_N(&a) && !rc; i++) {
    if (!t->has_decoder && i > 0 && (rc = tok__buf_put(&res, " ", 1))) break;
    rc = tok__buf_put(&res, PL_S(&a, i), PL_LEN(&a, i));
  }
  pl_free(&a);
  pl_free(&b);
  tok__buf_free(&tmp);
  if (rc) {
    tok__buf_free(&res);
    return rc;
  }
  *text = res.p;
  *len = res.len;
  return 0;
}

/* ---- one token's bytes --------------------------------------------------------------- */

int tok_token_bytes(const tok_t *t, int32_t id, int at_start, int skip_special, char **out,
                    size_t *len) {
  if (!t || !out || !len) return NS_EINVAL;
  *out = NULL;
  *len = 0;
  if (id < 0 || id >= t->n_ids) return NS_EINVAL;
  tok_buf a = {0}, b = {0};
  int rc = tok__buf_reserve(&a, 0);
  if (rc == 0 && t->piece[id] && !(skip_special && t->special[id])) {
    if (!t->has_decoder && !at_start) rc = tok__buf_put(&a, " ", 1);
    if (!rc) rc = tok__buf_put(&a, t->piece[id], t->piece_len[id]);
    for (int k = 0; k < t->n_dec && !rc; k++) {
      const tok_dec *d = &t->dec[k];
      int bt;
      b.len = 0;
      if ((rc = tok__buf_reserve(&b, 0))) break;
      switch (d->kind) {
      case TOK_DEC_REPLACE: rc = dec_replace(d, a.p, a.len, &b); break;
      case TOK_DEC_METASPACE: rc = dec_metaspace(d, a.p, a.len, d->fused || at_start, &b); break;
      case TOK_DEC_STRIP:
        /* after Fuse, Strip only touches the ends of the whole text */
        rc = d->fused && !at_start ? tok__buf_put(&b, a.p, a.len) : dec_strip(d, a.p, a.len, &b);
        break;
      case TOK_DEC_BYTE_LEVEL: rc = bytelevel_bytes(t, a.p, a.len, &b); break;
      case TOK_DEC_BYTE_FALLBACK:
        if ((bt = tok__byte_token(a.p, a.len)) >= 0) {
          char c = (char)bt;
          rc = tok__buf_put(&b, &c, 1);
          break;
        }
        /* fallthrough */
      default: rc = tok__buf_put(&b, a.p, a.len); break;
      }
      tok_buf x = a;
      a = b;
      b = x;
    }
  }
  tok__buf_free(&b);
  if (rc) {
    tok__buf_free(&a);
    return rc;
  }
  *out = a.p;
  *len = a.len;
  return 0;
}

/* ---- streaming -------------------------------------------------------------------- */

typedef struct step_state {
  tok_buf held; /* ByteFallback: the pending run; ByteLevel: an incomplete UTF-8 tail */
  size_t index; /* pieces seen so far (Metaspace's "first token") */
  int stripped; /* Strip after Fuse: leading characters removed so far */
  int lead_done;
  int trail; /* Strip after Fuse: trailing strip characters held back */
} step_state;

struct tok_stream {
  const tok *t;
  int skip_special;
  size_t n_tokens;
  step_state st[TOK_MAX_STEPS];
  plist a, b;
  tok_buf tmp, out;
};

int tok_stream_new(const tok_t *t, int skip_special, tok_stream_t **out) {
  if (!t || !out) return NS_EINVAL;
  tok_stream_t *s = calloc(1, sizeof *s);
  if (!s) return NS_ENOMEM;
  s->t = t;
  s->skip_special = skip_special;
  *out = s;
  return 0;
}

void tok_stream_reset(tok_stream_t *s) {
  if (!s) return;
  s->n_tokens = 0;
  for (int k = 0; k < TOK_MAX_STEPS; k++) {
    step_state *st = &s->st[k];
    st->held.len = 0;
    st->index = 0;
    st->stripped = st->lead_done = st->trail = 0;
  }
}

void tok_stream_free(tok_stream_t *s) {
  if (!s) return;
  for (int k = 0; k < TOK_MAX_STEPS; k++)
    tok__buf_free(&s->st[k].held);
  pl_free(&s->a);
  pl_free(&s->b);
  tok__buf_free(&s->tmp);
  tok__buf_free(&s->out);
  free(s);
}

static int put_cp_n(tok_buf *b, uint32_t cp, int n) {
  char u[4];
  size_t k = tok__utf8_put(u, cp);
  for (int i = 0; i < n; i++) {
    int rc = tok__buf_put(b, u, k);
    if (rc) return rc;
  }
  return 0;
}

/* Strip after Fuse: the pieces are fragments of one string. Leading characters go while
 * they are the strip character (up to start); up to stop trailing ones wait until a
 * different character follows, and are dropped at the end. */
static int stream_strip(const tok_dec *d, step_state *st, const char *s, size_t n, tok_buf *out) {
  int rc;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t k = tok__utf8_seq((const unsigned char *)s + i, n - i, &cp);
    if (!k) k = 1, cp = 0xFFFFFFFF;
    if (!st->lead_done) {
      if (cp == d->strip_cp && st->stripped < d->start) {
        st->stripped++;
        i += k;
        continue;
      }
      st->lead_done = 1;
    }
    if (d->stop > 0 && cp == d->strip_cp) {
      if (st->trail < d->stop)
        st->trail++;
      else if ((rc = put_cp_n(out, cp, 1)))
        return rc; /* the oldest held one is final */
    } else {
      if ((rc = put_cp_n(out, d->strip_cp, st->trail))) return rc;
      st->trail = 0;
      if ((rc = tok__buf_put(out, s + i, k))) return rc;
    }
    i += k;
  }
  return 0;
}

/* ByteFallback while streaming: release what of the run of <0xNN> bytes in held is final.
 * Complete characters go out at once, so that text (and a stop string it completes) is not
 * a token late; an unfinished but so-far-valid character stays held unless the run ends
 * (end), and then, like a byte that can start no character, becomes one U+FFFD per byte.
 * HF's decode makes every byte of a run U+FFFD once any byte of it is invalid: the
 * characters already released before such a byte stay (see tokenizer.h). */
static int release_run(tok_buf *held, int end, tok_buf *tmp, plist *out) {
  const unsigned char *s = (const unsigned char *)held->p;
  size_t n = held->len, i = 0;
  int rc = 0;
  tmp->len = 0;
  while (i < n && !rc) {
    uint32_t cp;
    size_t k = tok__utf8_seq(s + i, n - i, &cp);
    if (k) {
      rc = tok__buf_put(tmp, (const char *)s + i, k);
      i += k;
      continue;
    }
    if (!end && tok__utf8_partial(s + i, n - i)) break;
    rc = tok__buf_put(tmp, FFFD, 3);
    i++;
  }
  if (rc) return rc;
  if (i) { /* (held->p is NULL while nothing was ever held) */
    memmove(held->p, held->p + i, n - i);
    held->len = n - i;
  }
  return tmp->len ? pl_push(out, tmp->p, tmp->len) : 0;
}

/* One decoder step over the pieces in `in`; with final, also release what it holds. */
static int stream_step(tok_stream_t *s, int k, plist *in, plist *out, int final) {
  const tok *t = s->t;
  const tok_dec *d = &t->dec[k];
  step_state *st = &s->st[k];
  tok_buf *tmp = &s->tmp;
  size_t n = PL_N(in);
  int rc = 0;
  if (d->kind == TOK_DEC_BYTE_FALLBACK) {
    for (size_t i = 0; i < n && !rc; i++) {
      int b = tok__byte_token(PL_S(in, i), PL_LEN(in, i));
      if (b >= 0) {
        char c = (char)b;
        if (!(rc = tok__buf_put(&st->held, &c, 1))) rc = release_run(&st->held, 0, tmp, out);
      } else if (!(rc = release_run(&st->held, 1, tmp, out))) {
        rc = pl_push(out, PL_S(in, i), PL_LEN(in, i));
      }
    }
    return rc || !final ? rc : release_run(&st->held, 1, tmp, out);
  }
  if (d->kind == TOK_DEC_BYTE_LEVEL) {
    for (size_t i = 0; i < n && !rc; i++)
      rc = bytelevel_bytes(t, PL_S(in, i), PL_LEN(in, i), &st->held);
    if (rc || !st->held.len) return rc;
    size_t used = 0;
    tmp->len = 0;
    if ((rc = tok__buf_reserve(tmp, 0)) ||
        (rc = tok__utf8_lossy(tmp, (const unsigned char *)st->held.p, st->held.len, final, &used)))
      return rc;
    memmove(st->held.p, st->held.p + used, st->held.len - used);
    st->held.len -= used;
    return tmp->len ? pl_push(out, tmp->p, tmp->len) : 0;
  }
  for (size_t i = 0; i < n && !rc; i++) {
    const char *p = PL_S(in, i);
    size_t pn = PL_LEN(in, i);
    tmp->len = 0;
    if ((rc = tok__buf_reserve(tmp, 0))) break;
    switch (d->kind) {
    case TOK_DEC_REPLACE: rc = dec_replace(d, p, pn, tmp); break;
    case TOK_DEC_METASPACE:
      rc = dec_metaspace(d, p, pn, d->fused || st->index == 0, tmp);
      st->index++;
      break;
    case TOK_DEC_STRIP:
      rc = d->fused ? stream_strip(d, st, p, pn, tmp) : dec_strip(d, p, pn, tmp);
      break;
    default: rc = tok__buf_put(tmp, p, pn); break; /* Fuse: the stream is one string anyway */
    }
    if (!rc) rc = pl_push(out, tmp->p, tmp->len);
  }
  return rc; /* a held trailing Strip is dropped at the end, as HF strips it */
}

static int stream_run(tok_stream_t *s, const char *piece, size_t n, int final, const char **text,
                      size_t *len) {
  const tok *t = s->t;
  int rc = 0;
  s->out.len = 0;
  if ((rc = tok__buf_reserve(&s->out, 0))) return rc;
  pl_clear(&s->a);
  if (piece) {
    if (!t->has_decoder && s->n_tokens > 0) rc = pl_push(&s->a, " ", 1);
    if (!rc) rc = pl_push(&s->a, piece, n);
    s->n_tokens++;
  }
  for (int k = 0; k < t->n_dec && !rc; k++) {
    pl_clear(&s->b);
    rc = stream_step(s, k, &s->a, &s->b, final);
    plist x = s->a;
    s->a = s->b;
    s->b = x;
  }
  for (size_t i = 0; i < PL_N(&s->a) && !rc; i++)
    rc = tok__buf_put(&s->out, PL_S(&s->a, i), PL_LEN(&s->a, i));
  if (rc) return rc;
  *text = s->out.p;
  *len = s->out.len;
  return 0;
}

int tok_stream_push(tok_stream_t *s, int32_t id, const char **text, size_t *len) {
  if (!s || !text || !len) return NS_EINVAL;
  const tok *t = s->t;
  if (id < 0 || id >= t->n_ids) return NS_EINVAL;
  if (!t->piece[id] || (s->skip_special && t->special[id])) {
    s->out.len = 0;
    int rc = tok__buf_reserve(&s->out, 0);
    if (rc) return rc;
    s->out.p[0] = '\0';
    *text = s->out.p;
    *len = 0;
    return 0;
  }
  return stream_run(s, t->piece[id], t->piece_len[id], 0, text, len);
}

int tok_stream_flush(tok_stream_t *s, const char **text, size_t *len) {
  if (!s || !text || !len) return NS_EINVAL;
  int rc = stream_run(s, NULL, 0, 1, text, len);
  tok_stream_reset(s);
  return rc;
}
