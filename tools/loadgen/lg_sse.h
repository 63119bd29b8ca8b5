/* lg_sse.h — an incremental Server-Sent Events parser: bytes in (split anywhere), one
 * callback per event with its joined `data:` lines out. Caller's thread; no I/O. */
#ifndef LG_SSE_H
#define LG_SSE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LG_SSE_MAX_EVENT (16u << 20) /* an event larger than this is an error */

typedef struct lg_sse {
  /* private */
  char *line; /* the partial line carried between feeds */
  size_t line_len, line_cap;
  char *data; /* the current event's data lines, joined by '\n' */
  size_t data_len, data_cap;
  int has_data, last_cr;
} lg_sse;

/* Called for each complete event that has a data field; data is NUL-terminated. Return 0
 * to go on, anything else to stop: lg_sse_feed then returns that value. */
typedef int (*lg_sse_cb)(void *ud, const char *data, size_t len);

void lg_sse_init(lg_sse *s);
void lg_sse_free(lg_sse *s);
/* Lines end in LF, CRLF or CR; comments (':') and fields other than data are ignored.
 * Returns 0, a callback's non-zero value, NS_ENOMEM, or NS_EFORMAT for an oversized event. */
int lg_sse_feed(lg_sse *s, const char *p, size_t n, lg_sse_cb cb, void *ud);
/* Bytes held for an event not yet ended by a blank line (0: nothing pending). */
size_t lg_sse_pending(const lg_sse *s);

#ifdef __cplusplus
}
#endif
#endif
