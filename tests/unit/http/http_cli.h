/* http_cli.h — a blocking-socket HTTP/1.1 client for the server tests: raw bytes out,
 * responses (Content-Length, chunked, until-close) and SSE chunks read back one at a time. */
#ifndef HTTP_CLI_H
#define HTTP_CLI_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cli {
  int fd;
  size_t len;
  char buf[1 << 16];
} cli_t;

typedef struct resp {
  int status;
  char head[8192]; /* status line and headers, NUL-terminated */
  char *body;      /* malloc'd, NUL-terminated (resp_free) */
  size_t body_len;
} resp_t;

/* family: AF_INET or AF_INET6 (loopback). rcvbuf > 0 sets SO_RCVBUF before connecting.
 * Returns NULL when the connection fails. */
cli_t *cli_open(int family, int port, int rcvbuf);
void cli_close(cli_t *c);
int cli_send(cli_t *c, const void *data, size_t len);
int cli_sendstr(cli_t *c, const char *s);
/* Read one response head (status line + headers); -1 on EOF/error/timeout. */
int cli_read_head(cli_t *c, resp_t *r, int timeout_ms);
/* Read the body that follows a head: Content-Length, chunked (joined) or until close. */
int cli_read_body(cli_t *c, resp_t *r, int timeout_ms);
/* Both; returns the status or -1. */
int cli_read_response(cli_t *c, resp_t *r, int timeout_ms);
/* Read one chunk of a chunked body into a malloc'd NUL-terminated string (*len bytes).
 * Returns 1 with data, 0 for the last chunk (its trailer consumed), -1 on error. */
int cli_read_chunk(cli_t *c, char **data, size_t *len, int timeout_ms);
/* 1 when the server closes (EOF or reset) within timeout_ms with nothing more to read,
 * 0 when data arrives first, -1 on timeout. */
int cli_wait_closed(cli_t *c, int timeout_ms);
/* Bytes received and not consumed yet. */
size_t cli_buffered(const cli_t *c);
/* Value of header name in r (case-insensitive) copied to a static buffer; NULL if absent. */
const char *resp_header(const resp_t *r, const char *name);
void resp_free(resp_t *r);
double now_ms(void);

#endif
