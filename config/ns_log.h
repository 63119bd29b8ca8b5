/* ns_log.h — leveled logger writing text or JSON lines to stderr.
 * Any thread may log; one line is one write(2), so lines never interleave. */
#ifndef NS_LOG_H
#define NS_LOG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ns_log_level {
  NS_LOG_DEBUG = 0,
  NS_LOG_INFO = 1,
  NS_LOG_WARN = 2,
  NS_LOG_ERROR = 3,
  NS_LOG_OFF = 4
} ns_log_level;

typedef enum ns_log_format { NS_LOG_TEXT = 0, NS_LOG_JSON = 1 } ns_log_format;

/* Set once at start (before other threads run); defaults are INFO and TEXT. */
void ns_log_configure(ns_log_level level, ns_log_format format);
/* Redirect output to fd (default 2). For tests. */
void ns_log_set_fd(int fd);
/* Parse "debug|info|warn|error|off" and "text|json"; return 0 or NS_EINVAL. */
int ns_log_level_parse(const char *s, ns_log_level *out);
int ns_log_format_parse(const char *s, ns_log_format *out);
int ns_log_enabled(ns_log_level level);

/* req_id 0 means "no request". The message is printf-formatted; control
 * characters in it are escaped (\n, \t, \u00XX) so one call is one line. */
void ns_logr(ns_log_level level, uint64_t req_id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define ns_log_debug(...) ns_logr(NS_LOG_DEBUG, 0, __VA_ARGS__)
#define ns_log_info(...)  ns_logr(NS_LOG_INFO, 0, __VA_ARGS__)
#define ns_log_warn(...)  ns_logr(NS_LOG_WARN, 0, __VA_ARGS__)
#define ns_log_error(...) ns_logr(NS_LOG_ERROR, 0, __VA_ARGS__)

/* Escape control characters, '"' and '\\' of src into dst, and each byte that is not part
 * of well-formed UTF-8 as \ufffd, so a line quoting a client's bytes stays JSON (always
 * NUL-terminated, truncated to dstlen). Returns bytes written. Exposed for tests. */
size_t ns_log_escape(char *dst, size_t dstlen, const char *src, size_t srclen);

/* Length (1-4) of the well-formed UTF-8 sequence that starts s[0..n), or 0 when it starts
 * with an invalid or cut one (overlongs, surrogates and past U+10FFFF are invalid). */
size_t ns_utf8_seq(const char *s, size_t n);
/* s[0..n) into dst (room for 3 n + 1 bytes) with each byte that starts no well-formed
 * sequence as U+FFFD; NUL-terminated. Returns the bytes written, the NUL not counted. */
size_t ns_utf8_lossy(char *dst, const char *s, size_t n);

#ifdef __cplusplus
}
#endif
#endif
