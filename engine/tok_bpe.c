/* tok_bpe.c — BPE merges over one word (tok__bpe_word: a binary heap of candidate merges
 * over a linked list of symbols, O(n log n)) and the encode driver tok_encode. */
#include "tok_int.h"

#include "ns_err.h"

#include <stdlib.h>
#include <string.h>

/* ---- the heap of candidate merges: lowest rank first, then leftmost ---------------- */

static int ent_less(const tok_heap_ent *a, const tok_heap_ent *b) {
  return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(tok_enc *e, uint32_t rank, uint32_t pos, int32_t merged) {
  if (e->heap_len == e->heap_cap) {
    size_t cap = e->heap_cap ? e->heap_cap * 2 : 64;
    tok_heap_ent *h = realloc(e->heap, cap * sizeof *h);
    if (!h) return NS_ENOMEM;
    e->heap = h;
    e->heap_cap = cap;
  }
  tok_heap_ent *h = e->heap, x = {rank, pos, merged};
  size_t i = e->heap_len++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!ent_less(&x, &h[up])) break;
    h[i] = h[up];
    i = up;
  }
  h[i] = x;
  return 0;
}

static tok_heap_ent heap_pop(tok_enc *e) {
  tok_heap_ent *h = e->heap, top = h[0], x = h[--e->heap_len];
  size_t n = e->heap_len, i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && ent_less(&h[c + 1], &h[c])) c++;
    if (!ent_less(&h[c], &x)) break;
    h[i] = h[c];
    i = c;
  }
  if (n) h[i] = x;
  return top;
}

/* ---- one word --------------------------------------------------------------------- */

static int add_sym(tok_enc *e, size_t *n, int32_t id, uint32_t len) {
  if (*n == e->sym_cap) {
    size_t cap = e->sym_cap ? e->sym_cap * 2 : 64;
    tok_sym *s = realloc(e->sym, cap * sizeof *s);
    if (!s) return NS_ENOMEM;
    e->sym = s;
    e->sym_cap = cap;
  }
  e->sym[*n] = (tok_sym){id, (int32_t)*n - 1, (int32_t)*n + 1, len};
  (*n)++;
  return 0;
}

/* HF BPE::merge_word: characters to symbols (vocab, else <0xNN> bytes, else unk). */
static int word_symbols(tok_enc *e, const char *s, size_t n, size_t *nsym) {
  const tok *t = e->t;
  int32_t unk = -1;
  uint32_t unk_len = 0;
  int rc;
  *nsym = 0;
  for (size_t i = 0; i < n;) {
    size_t k = 1;
    while (i + k < n && ((unsigned char)s[i + k] & 0xC0) == 0x80)
      k++;
    unsigned char c0 = (unsigned char)s[i];
    int32_t id = k == 1 ? t->small_cp[c0]
                 : k == 2 && c0 < 0xC8
                     ? t->small_cp[((c0 & 0x1Fu) << 6) | ((unsigned char)s[i + 1] & 0x3Fu)]
                     : tok__strmap_get(&t->vocab, t->mpiece, t->mpiece_len, s + i, k);
    if (id >= 0) {
      if (unk >= 0 && (rc = add_sym(e, nsym, unk, unk_len))) return rc;
      unk = -1;
      if ((rc = add_sym(e, nsym, id, (uint32_t)k))) return rc;
      i += k;
      continue;
    }
    int all_bytes = t->byte_fallback;
    for (size_t j = 0; all_bytes && j < k; j++)
      all_bytes = t->byte_id[(unsigned char)s[i + j]] >= 0;
    if (all_bytes) { /* as HF: a pending unk is not flushed before the bytes */
      for (size_t j = 0; j < k; j++)
        if ((rc = add_sym(e, nsym, t->byte_id[(unsigned char)s[i + j]], 1))) return rc;
    } else if (t->unk_id >= 0) {
      if (unk >= 0 && t->fuse_unk) {
        unk_len += (uint32_t)k;
      } else {
        if (unk >= 0 && (rc = add_sym(e, nsym, unk, unk_len))) return rc;
        unk = t->unk_id;
        unk_len = (uint32_t)k;
      }
    } /* no unk token: HF drops the character */
    i += k;
  }
  if (unk >= 0 && (rc = add_sym(e, nsym, unk, unk_len))) return rc;
  if (*nsym) e->sym[*nsym - 1].next = -1;
  return 0;
}

int tok__bpe_word(tok_enc *e, const char *s, size_t n) {
  const tok *t = e->t;
  if (t->ignore_merges) {
    int32_t id = tok__strmap_get(&t->vocab, t->mpiece, t->mpiece_len, s, n);
    if (id >= 0) return tok__ids_push(&e->out, id);
  }
  size_t nsym;
  int rc = word_symbols(e, s, n, &nsym);
  if (rc || nsym == 0) return rc;
  if (nsym > UINT32_MAX / 2) return NS_ERANGE;
  tok_sym *y = e->sym;
  uint32_t rank;
  int32_t merged;
  e->heap_len = 0;
  for (size_t i = 0; i + 1 < nsym; i++)
    if (tok__pairmap_get(&t->merges, y[i].id, y[i + 1].id, &rank, &merged) &&
        (rc = heap_push(e, rank, (uint32_t)i, merged)))
      return rc;
  while (e->heap_len) {
    tok_heap_ent top = heap_pop(e);
    tok_sym *a = &y[top.pos];
    if (a->len == 0 || a->next < 0) continue; /* merged away, or now last */
    tok_sym *b = &y[a->next];
    /* stale entry: the pair at pos changed since it was queued (HF checks the new id) */
    if (!tok__pairmap_get(&t->merges, a->id, b->id, &rank, &merged) || merged != top.merged)
      continue;
    a->id = top.merged;
    a->len += b->len;
    b->len = 0;
    a->next = b->next;
    if (a->next >= 0) y[a->next].prev = (int32_t)top.pos;
    if (a->prev >= 0 && tok__pairmap_get(&t->merges, y[a->prev].id, a->id, &rank, &merged) &&
        (rc = heap_push(e, rank, (uint32_t)a->prev, merged)))
      return rc;
    if (a->next >= 0 && tok__pairmap_get(&t->merges, a->id, y[a->next].id, &rank, &merged) &&
        (rc = heap_push(e, rank, top.pos, merged)))
      return rc;
  }
  for (int32_t i = 0; i >= 0; i = y[i].next) /* symbol 0 is never merged away */
    if ((rc = tok__ids_push(&e->out, y[i].id))) return rc;
  return 0;
}

/* ---- tok_encode ------------------------------------------------------------------- */

static void enc_free(tok_enc *e) {
  free(e->out.p);
  pcre2_match_data_free(e->md);
  free(e->seg_raw.p);
  free(e->seg_norm.p);
  tok__buf_free(&e->norm);
  tok__buf_free(&e->norm_tmp);
  for (int i = 0; i < TOK_MAX_STEPS; i++) {
    tok__buf_free(&e->text[i]);
    tok__buf_free(&e->mapped[i]);
    free(e->match[i].p);
    free(e->segs[i].p);
    free(e->pieces[i].p);
  }
  free(e->sym);
  free(e->heap);
}

/* One part of the text between raw-matched added tokens: normalize, split on the
 * normalized added tokens, pre-tokenize and BPE the rest. */
static int encode_part(tok_enc *e, const char *s, size_t n, int first) {
  const tok *t = e->t;
  int rc = tok__normalize(t, s, n, e->md, &e->norm, &e->norm_tmp);
  if (rc) return rc;
  const char *ns = e->norm.p;
  size_t nn = e->norm.len;
  if ((rc = tok__split_added(t, &t->match_norm, 1, e->md, ns, nn, &e->seg_norm))) return rc;
  for (size_t k = 0; k < e->seg_norm.len; k++) {
    tok_seg g = e->seg_norm.p[k];
    if (g.id >= 0)
      rc = tok__ids_push(&e->out, g.id);
    else
      rc = tok__pretokenize(e, 0, ns + g.a, g.b - g.a, first && g.a == 0);
    if (rc) return rc;
  }
  return 0;
}

static int push_all(tok_ids *v, const int32_t *ids, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int rc = tok__ids_push(v, ids[i]);
    if (rc) return rc;
  }
  return 0;
}

int tok_encode(const tok_t *t, const char *text, size_t len, int add_special, int32_t **ids,
               size_t *n) {
  if (!t || (!text && len) || !ids || !n) return NS_EINVAL;
  *ids = NULL;
  *n = 0;
  if (!text) text = "";
  if (!tok__utf8_valid(text, len)) return NS_EINVAL;
  tok_enc e;
  memset(&e, 0, sizeof e);
  e.t = t;
  int rc = NS_ENOMEM;
  if (!(e.md = pcre2_match_data_create(16, NULL))) goto out;
  if (add_special && (rc = push_all(&e.out, t->prefix, t->n_prefix))) goto out;
  if ((rc = tok__split_added(t, &t->match_raw, 0, e.md, text, len, &e.seg_raw))) goto out;
  for (size_t k = 0; k < e.seg_raw.len; k++) {
    tok_seg g = e.seg_raw.p[k];
    if (g.id >= 0)
      rc = tok__ids_push(&e.out, g.id);
    else
      rc = encode_part(&e, text + g.a, g.b - g.a, g.a == 0);
    if (rc) goto out;
  }
  if (add_special && (rc = push_all(&e.out, t->suffix, t->n_suffix))) goto out;
  if (!e.out.p && !(e.out.p = malloc(sizeof *e.out.p))) { /* never hand back NULL */
    rc = NS_ENOMEM;
    goto out;
  }
  *n = e.out.len;
  *ids = e.out.p;
  e.out.p = NULL;
  rc = 0;
out:
  enc_free(&e);
  return rc;
}
