/* ns_log.c — the leveled stderr logger (ns_log.h).
 * Formats into a stack buffer, escapes control characters, writes once. */
#include "ns_log.h"
#include "ns_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 4096

static ns_log_level g_level = NS_LOG_INFO;
static ns_log_format g_format = NS_LOG_TEXT;
static int g_fd = 2;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

void ns_log_configure(ns_log_level level, ns_log_format format) {
  g_level = level;
  g_format = format;
}

void ns_log_set_fd(int fd) {
  g_fd = fd;
}

int ns_log_enabled(ns_log_level level) {
  return level >= g_level && level < NS_LOG_OFF;
}

int ns_log_level_parse(const char *s, ns_log_level *out) {
  for (int i = 0; i <= NS_LOG_OFF; i++) {
    if (strcmp(s, level_names[i]) == 0) {
      *out = (ns_log_level)i;
      return 0;
    }
  }
  return NS_EINVAL;
}

int ns_log_format_parse(const char *s, ns_log_format *out) {
  if (strcmp(s, "text") == 0)
    *out = NS_LOG_TEXT;
  else if (strcmp(s, "json") == 0)
    *out = NS_LOG_JSON;
  else
    return NS_EINVAL;
  return 0;
}

size_t ns_utf8_seq(const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  if (n == 0) return 0;
  if (s[0] < 0x80) return 1;
  size_t len = 0;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    len = 2;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    len = 3;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    len = 4;
  if (len == 0 || n < len) return 0;
  /* the second byte's range excludes overlongs, surrogates and code points past U+10FFFF */
  unsigned lo = s[0] == 0xe0 ? 0xa0 : s[0] == 0xf0 ? 0x90 : 0x80;
  unsigned hi = s[0] == 0xed ? 0x9f : s[0] == 0xf4 ? 0x8f : 0xbf;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  return len;
}

size_t ns_utf8_lossy(char *dst, const char *s, size_t n) {
  char *o = dst;
  for (size_t i = 0, k; i < n; i += k) {
    if ((k = ns_utf8_seq(s + i, n - i)) != 0) {
      memcpy(o, s + i, k);
      o += k;
    } else {
      memcpy(o, "\xef\xbf\xbd", 3);
      o += 3;
      k = 1;
    }
  }
  *o = '\0';
  return (size_t)(o - dst);
}

size_t ns_log_escape(char *dst, size_t dstlen, const char *src, size_t srclen) {
  size_t o = 0;
  if (dstlen == 0) return 0;
  for (size_t i = 0; i < srclen; i++) {
    unsigned char c = (unsigned char)src[i];
    char tmp[8];
    size_t n;
    if (c == '\n')
      n = (size_t)snprintf(tmp, sizeof tmp, "\\n");
    else if (c == '\r')
      n = (size_t)snprintf(tmp, sizeof tmp, "\\r");
    else if (c == '\t')
      n = (size_t)snprintf(tmp, sizeof tmp, "\\t");
    else if (c == '"' || c == '\\')
      n = (size_t)snprintf(tmp, sizeof tmp, "\\%c", c);
    else if (c < 0x20 || c == 0x7f)
      n = (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", c);
    else if (c < 0x80)
      tmp[0] = (char)c, n = 1;
    else if ((n = ns_utf8_seq(src + i, srclen - i)) != 0) {
      memcpy(tmp, src + i, n);
      i += n - 1;
    } else {
      n = (size_t)snprintf(tmp, sizeof tmp, "\\ufffd");
    }
    if (o + n >= dstlen) break;
    memcpy(dst + o, tmp, n);
    o += n;
  }
  dst[o] = '\0';
  return o;
}

void ns_logr(ns_log_level level, uint64_t req_id, const char *fmt, ...) {
  if (!ns_log_enabled(level)) return;
  char msg[LINE_MAX_BYTES / 2];
  char esc[LINE_MAX_BYTES - 256];
  char line[LINE_MAX_BYTES];
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t mlen = (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1;
  ns_log_escape(esc, sizeof esc, msg, mlen);

  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[64];
  snprintf(when, sizeof when, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
           (int)(ts.tv_nsec / 1000000));
  int n;
  if (g_format == NS_LOG_JSON) {
    if (req_id)
      n = snprintf(line, sizeof line,
                   "{\"ts\":\"%s\",\"level\":\"%s\",\"req\":\"%016llx\",\"msg\":\"%s\"}\n", when,
                   level_names[level], (unsigned long long)req_id, esc);
    else
      n = snprintf(line, sizeof line, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n", when,
                   level_names[level], esc);
  } else {
    if (req_id)
      n = snprintf(line, sizeof line, "%s %-5s [%016llx] %s\n", when, level_names[level],
                   (unsigned long long)req_id, esc);
    else
      n = snprintf(line, sizeof line, "%s %-5s %s\n", when, level_names[level], esc);
  }
  if (n < 0) return;
  size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  if (line[len - 1] != '\n') line[len - 1] = '\n';
  ssize_t w = write(g_fd, line, len);
  (void)w;
}
