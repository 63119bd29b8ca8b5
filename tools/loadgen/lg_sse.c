/* lg_sse.c — incremental SSE framing (lg_sse.h), after the WHATWG event-stream rules:
 * lines, `data:` fields joined by newlines, an event dispatched on a blank line. */
#include "lg_sse.h"

#include "ns_err.h"

#include <stdlib.h>
#include <string.h>

void lg_sse_init(lg_sse *s) {
  memset(s, 0, sizeof *s);
}

void lg_sse_free(lg_sse *s) {
  free(s->line);
  free(s->data);
  lg_sse_init(s);
}

size_t lg_sse_pending(const lg_sse *s) {
  return s->line_len + s->data_len + (size_t)s->has_data;
}

static int grow(char **b, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  if (need > LG_SSE_MAX_EVENT + 1) return NS_EFORMAT;
  size_t c = *cap ? *cap : 256;
  while (c < need)
    c *= 2;
  char *n = realloc(*b, c);
  if (!n) return NS_ENOMEM;
  *b = n;
  *cap = c;
  return 0;
}

/* One complete line (without its terminator). */
static int line(lg_sse *s, const char *l, size_t n, lg_sse_cb cb, void *ud) {
  if (n == 0) { /* blank line: dispatch */
    if (!s->has_data) return 0;
    int rc = grow(&s->data, &s->data_cap, s->data_len + 1);
    if (rc) return rc;
    s->data[s->data_len] = '\0';
    size_t len = s->data_len;
    s->data_len = 0;
    s->has_data = 0;
    return cb(ud, s->data, len);
  }
  if (n < 5 || memcmp(l, "data", 4) != 0 || (n > 4 && l[4] != ':'))
    return 0; /* a comment, or a field we do not use */
  l += 5;
  n -= 5;
  if (n && *l == ' ') l++, n--;
  size_t need = s->data_len + (s->has_data ? 1 : 0) + n + 1;
  int rc = grow(&s->data, &s->data_cap, need);
  if (rc) return rc;
  if (s->has_data) s->data[s->data_len++] = '\n';
  memcpy(s->data + s->data_len, l, n);
  s->data_len += n;
  s->has_data = 1;
  return 0;
}

int lg_sse_feed(lg_sse *s, const char *p, size_t n, lg_sse_cb cb, void *ud) {
  size_t i = 0;
  while (i < n) {
    if (s->last_cr && p[i] == '\n') { /* the LF of a CRLF already ended the line */
      s->last_cr = 0;
      i++;
      continue;
    }
    s->last_cr = 0;
    const char *e = p + i;
    size_t k = 0;
    while (i + k < n && e[k] != '\n' && e[k] != '\r')
      k++;
    if (i + k == n) { /* no terminator yet: keep the piece */
      int rc = grow(&s->line, &s->line_cap, s->line_len + k + 1);
      if (rc) return rc;
      memcpy(s->line + s->line_len, e, k);
      s->line_len += k;
      return 0;
    }
    s->last_cr = e[k] == '\r';
    int rc;
    if (s->line_len) { /* finish the carried line */
      rc = grow(&s->line, &s->line_cap, s->line_len + k + 1);
      if (rc) return rc;
      memcpy(s->line + s->line_len, e, k);
      size_t len = s->line_len + k;
      s->line_len = 0;
      rc = line(s, s->line, len, cb, ud);
    } else {
      rc = line(s, e, k, cb, ud);
    }
    if (rc) return rc;
    i += k + 1;
  }
  return 0;
}
