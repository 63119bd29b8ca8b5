/* ns_buf.h — a growable, always NUL-terminated string buffer for building text
 * (JSON, Markdown, Prometheus, prompts). One owner; not thread-safe. */
#ifndef NS_BUF_H
#define NS_BUF_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Zero-initialise ({0}). After any append p is a NUL-terminated string of len bytes
 * (malloc'd, the owner frees it) unless oom is set: then p may be NULL or partial and
 * every later append is a no-op, so callers check oom once at the end. */
typedef struct ns_buf {
  char *p;
  size_t len, cap;
  int oom;
} ns_buf;

void ns_buf_put(ns_buf *b, const char *s, size_t n);
void ns_buf_puts(ns_buf *b, const char *s);
void ns_buf_printf(ns_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
