/* http_cli.c — the blocking test client of http_cli.h (poll + recv with timeouts). */
#include "http_cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

cli_t *cli_open(int family, int port, int rcvbuf) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return NULL;
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int rc;
  if (family == AF_INET6) {
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    a.sin6_addr = in6addr_loopback;
    rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  } else {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  }
  if (rc != 0) {
    close(fd);
    return NULL;
  }
  cli_t *c = calloc(1, sizeof *c);
  if (!c) {
    close(fd);
    return NULL;
  }
  c->fd = fd;
  return c;
}

void cli_close(cli_t *c) {
  if (!c) return;
  close(c->fd);
  free(c);
}

int cli_send(cli_t *c, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int cli_sendstr(cli_t *c, const char *s) {
  return cli_send(c, s, strlen(s));
}

size_t cli_buffered(const cli_t *c) {
  return c->len;
}

/* Receive more: >0 bytes, 0 EOF, -1 error, -2 timeout. */
static int fill(cli_t *c, int timeout_ms) {
  if (c->len == sizeof c->buf) return -1;
  struct pollfd p = {.fd = c->fd, .events = POLLIN};
  int pr;
  do {
    pr = poll(&p, 1, timeout_ms);
  } while (pr < 0 && errno == EINTR);
  if (pr == 0) return -2;
  if (pr < 0) return -1;
  ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
  if (n < 0) return -1;
  c->len += (size_t)n;
  return (int)n;
}

static void consume(cli_t *c, size_t n) {
  memmove(c->buf, c->buf + n, c->len - n);
  c->len -= n;
}

static char *find(cli_t *c, const char *needle) {
  return memmem(c->buf, c->len, needle, strlen(needle));
}

int cli_read_head(cli_t *c, resp_t *r, int timeout_ms) {
  memset(r, 0, sizeof *r);
  double end = now_ms() + timeout_ms;
  char *e;
  while (!(e = find(c, "\r\n\r\n"))) {
    int left = (int)(end - now_ms());
    if (left <= 0 || fill(c, left) <= 0) return -1;
  }
  size_t n = (size_t)(e - c->buf) + 4;
  if (n >= sizeof r->head) return -1;
  memcpy(r->head, c->buf, n);
  r->head[n] = '\0';
  consume(c, n);
  if (sscanf(r->head, "HTTP/1.%*d %d", &r->status) != 1) return -1;
  return r->status;
}

const char *resp_header(const resp_t *r, const char *name) {
  static char val[1024];
  size_t nl = strlen(name);
  const char *p = strstr(r->head, "\r\n");
  while (p && p[2] != '\r') {
    p += 2;
    if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      const char *v = p + nl + 1;
      while (*v == ' ')
        v++;
      const char *end = strstr(v, "\r\n");
      size_t len = end ? (size_t)(end - v) : strlen(v);
      if (len >= sizeof val) len = sizeof val - 1;
      memcpy(val, v, len);
      val[len] = '\0';
      return val;
    }
    p = strstr(p, "\r\n");
  }
  return NULL;
}

static int read_exact(cli_t *c, char *out, size_t n, double end) {
  while (c->len < n) {
    int left = (int)(end - now_ms());
    if (left <= 0 || fill(c, left) <= 0) return -1;
  }
  if (out) memcpy(out, c->buf, n);
  consume(c, n);
  return 0;
}

static int read_line(cli_t *c, char *out, size_t cap, double end) {
  char *e;
  while (!(e = find(c, "\r\n"))) {
    int left = (int)(end - now_ms());
    if (left <= 0 || fill(c, left) <= 0) return -1;
  }
  size_t n = (size_t)(e - c->buf);
  if (n >= cap) return -1;
  memcpy(out, c->buf, n);
  out[n] = '\0';
  consume(c, n + 2);
  return 0;
}

int cli_read_chunk(cli_t *c, char **data, size_t *len, int timeout_ms) {
  double end = now_ms() + timeout_ms;
  char line[64];
  *data = NULL;
  *len = 0;
  if (read_line(c, line, sizeof line, end) != 0) return -1;
  char *ep;
  unsigned long n = strtoul(line, &ep, 16);
  if (ep == line) return -1;
  if (n == 0) {
    return read_line(c, line, sizeof line, end) == 0 && line[0] == '\0' ? 0 : -1;
  }
  char *d = malloc(n + 1);
  if (!d || read_exact(c, d, n, end) != 0 || read_exact(c, line, 2, end) != 0 ||
      memcmp(line, "\r\n", 2) != 0) {
    free(d);
    return -1;
  }
  d[n] = '\0';
  *data = d;
  *len = n;
  return 1;
}

int cli_read_body(cli_t *c, resp_t *r, int timeout_ms) {
  double end = now_ms() + timeout_ms;
  const char *te = resp_header(r, "Transfer-Encoding");
  if (te && strcasecmp(te, "chunked") == 0) {
    size_t cap = 0;
    for (;;) {
      char *d;
      size_t n;
      int k = cli_read_chunk(c, &d, &n, (int)(end - now_ms()));
      if (k < 0) return -1;
      if (k == 0) break;
      if (r->body_len + n + 1 > cap) {
        cap = (r->body_len + n + 1) * 2;
        r->body = realloc(r->body, cap);
      }
      memcpy(r->body + r->body_len, d, n);
      r->body_len += n;
      r->body[r->body_len] = '\0';
      free(d);
    }
    if (!r->body) r->body = calloc(1, 1);
    return 0;
  }
  const char *cl = resp_header(r, "Content-Length");
  if (cl) {
    size_t n = strtoul(cl, NULL, 10);
    r->body = malloc(n + 1);
    if (read_exact(c, r->body, n, end) != 0) return -1;
    r->body[n] = '\0';
    r->body_len = n;
    return 0;
  }
  if (r->status == 100 || r->status == 204) {
    r->body = calloc(1, 1);
    return 0;
  }
  for (;;) { /* until close */
    int left = (int)(end - now_ms());
    if (left <= 0) return -1;
    int k = fill(c, left);
    if (k == 0) break;
    if (k < 0) return -1;
  }
  r->body = malloc(c->len + 1);
  memcpy(r->body, c->buf, c->len);
  r->body[c->len] = '\0';
  r->body_len = c->len;
  c->len = 0;
  return 0;
}

int cli_read_response(cli_t *c, resp_t *r, int timeout_ms) {
  double end = now_ms() + timeout_ms;
  if (cli_read_head(c, r, timeout_ms) < 0) return -1;
  if (cli_read_body(c, r, (int)(end - now_ms())) != 0) return -1;
  return r->status;
}

int cli_wait_closed(cli_t *c, int timeout_ms) {
  if (c->len) return 0;
  struct pollfd p = {.fd = c->fd, .events = POLLIN};
  int pr;
  do {
    pr = poll(&p, 1, timeout_ms);
  } while (pr < 0 && errno == EINTR);
  if (pr == 0) return -1;
  char b[256];
  ssize_t n = recv(c->fd, b, sizeof b, 0);
  if (n > 0) {
    memcpy(c->buf + c->len, b, (size_t)n);
    c->len += (size_t)n;
    return 0;
  }
  return 1;
}

void resp_free(resp_t *r) {
  free(r->body);
  r->body = NULL;
}
