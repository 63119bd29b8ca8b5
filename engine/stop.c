/* stop.c — stop-string matcher over streamed text: a pending buffer that keeps only the
 * tail that might still complete a stop string. Entry point: eng_stop_feed. */
#include "stop.h"

#include "ns_err.h"

#include <stdlib.h>
#include <string.h>

/* A stored (non-empty) stop string and its index in the caller's list. */
typedef struct stop_str {
  char *text;
  size_t len;
  int idx;
} stop_str;

struct eng_stop {
  stop_str *stops;
  int n;
  size_t max_len;
  char *buf; /* pending text: buf[off .. len) not yet emitted */
  size_t len, off, cap;
  int done;
};

void eng_stop_destroy(eng_stop_t *s) {
  if (!s) return;
  for (int i = 0; i < s->n; i++)
    free(s->stops[i].text);
  free(s->stops);
  free(s->buf);
  free(s);
}

int eng_stop_create(const char *const *stops, int n, eng_stop_t **out) {
  *out = NULL;
  eng_stop_t *s = calloc(1, sizeof *s);
  if (!s) return NS_ENOMEM;
  s->cap = 64;
  if (!(s->buf = malloc(s->cap))) goto err;
  if (n > 0 && !(s->stops = calloc((size_t)n, sizeof *s->stops))) goto err;
  for (int i = 0; i < n; i++) {
    size_t l = strlen(stops[i]);
    if (l == 0) continue;
    stop_str *st = &s->stops[s->n];
    if (!(st->text = malloc(l))) goto err;
    memcpy(st->text, stops[i], l);
    st->len = l, st->idx = i;
    s->n++;
    if (l > s->max_len) s->max_len = l;
  }
  *out = s;
  return 0;
err:
  eng_stop_destroy(s);
  return NS_ENOMEM;
}

size_t eng_stop_max_len(const eng_stop_t *s) {
  return s->max_len;
}

/* Bytes at the end of t[0..n) that start an incomplete UTF-8 sequence. */
static size_t utf8_incomplete_tail(const char *t, size_t n) {
  for (size_t k = 1; k <= 3 && k <= n; k++) {
    unsigned char c = (unsigned char)t[n - k];
    if ((c & 0xC0) == 0x80) continue; /* continuation: look further back */
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > k ? k : 0;
  }
  return 0;
}

/* Longest proper prefix of a stop string that t[0..n) ends with. */
static size_t stop_prefix_tail(const eng_stop_t *s, const char *t, size_t n) {
  size_t best = 0;
  for (int i = 0; i < s->n; i++) {
    const stop_str *st = &s->stops[i];
    size_t k = st->len - 1 < n ? st->len - 1 : n;
    for (; k > best; k--)
      if (memcmp(t + n - k, st->text, k) == 0) break;
    if (k > best) best = k;
  }
  return best;
}

int eng_stop_feed(eng_stop_t *s, const char *text, size_t len, const char **emit, size_t *emit_len,
                  int *matched, int *matched_idx) {
  *emit = "";
  *emit_len = 0;
  *matched = s->done;
  if (s->done) return 0;
  /* drop what the previous call emitted, then append */
  memmove(s->buf, s->buf + s->off, s->len - s->off);
  s->len -= s->off;
  s->off = 0;
  if (s->len + len > s->cap) {
    size_t cap = s->cap;
    while (cap < s->len + len)
      cap *= 2;
    char *b = realloc(s->buf, cap);
    if (!b) return NS_ENOMEM;
    s->buf = b;
    s->cap = cap;
  }
  if (len) memcpy(s->buf + s->len, text, len);
  s->len += len;

  /* earliest match of any stop string in the pending text */
  size_t at = s->len;
  int which = -1;
  for (int i = 0; i < s->n; i++) {
    const stop_str *st = &s->stops[i];
    if (st->len > s->len) continue;
    for (size_t p = 0; p + st->len <= s->len && p < at; p++) {
      if (memcmp(s->buf + p, st->text, st->len) == 0) {
        at = p;
        which = i;
        break;
      }
    }
  }
  if (which >= 0) {
    s->done = 1;
    *matched = 1;
    if (matched_idx) *matched_idx = s->stops[which].idx;
    *emit = s->buf;
    *emit_len = at;
    s->off = s->len; /* the rest is dropped */
    return 0;
  }
  size_t hold = stop_prefix_tail(s, s->buf, s->len);
  size_t u = utf8_incomplete_tail(s->buf, s->len);
  if (u > hold) hold = u;
  *emit = s->buf;
  *emit_len = s->len - hold;
  s->off = s->len - hold;
  return 0;
}

void eng_stop_flush(eng_stop_t *s, const char **emit, size_t *emit_len) {
  *emit = s->buf + s->off;
  *emit_len = s->done ? 0 : s->len - s->off;
  s->off = s->len;
}
