/* ns_buf.c — the growable string buffer (ns_buf.h): doubling growth, sticky oom. */
#include "ns_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the terminator; 0, or -1 with oom set. */
static int reserve(ns_buf *b, size_t n) {
  if (b->oom) return -1;
  if (b->len + n + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + n + 1)
    cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    b->oom = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

void ns_buf_put(ns_buf *b, const char *s, size_t n) {
  if (reserve(b, n)) return;
  if (n) memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void ns_buf_puts(ns_buf *b, const char *s) {
  ns_buf_put(b, s, strlen(s));
}

void ns_buf_printf(ns_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = 1;
    return;
  }
  if (reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}
