/* http_auth.c — API keys: the keys file (one per line, '#' comments) and a Bearer token
 * check in constant time over all keys. Entry: http__auth_check, http_auth_reload. */
#include "http_int.h"
#include "ns_err.h"
#include "ns_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Keys are stored zero-padded to the longest key's length (keys_maxlen) plus one byte, so
 * every comparison reads the same number of bytes. */
static void keys_free(char **keys, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(keys[i]);
  free(keys);
}

void http__auth_free(http_server_t *s) {
  keys_free(s->keys, s->nkeys);
  s->keys = NULL;
  s->nkeys = s->keys_maxlen = 0;
}

static int read_file(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return errno == ENOENT ? NS_ENOENT : NS_EIO;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  int rc = buf ? 0 : NS_ENOMEM;
  while (rc == 0) {
    if (n + 1 >= cap) {
      char *nb = cap < ((size_t)64 << 20) ? realloc(buf, cap * 2) : NULL;
      if (!nb) {
        rc = cap < ((size_t)64 << 20) ? NS_ENOMEM : NS_EIO;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) rc = NS_EIO;
      break;
    }
  }
  fclose(f);
  if (rc != 0) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
}

static bool blank(char ch) {
  return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Parse the file into zero-padded keys. */
static int parse_keys(const char *text, size_t len, char ***keys_out, size_t *n_out,
                      size_t *maxlen_out) {
  size_t n = 0, cap = 0, maxlen = 0;
  char **keys = NULL;
  /* two passes: the longest key first, then copies padded to it */
  for (int pass = 0; pass < 2; pass++) {
    const char *p = text, *end = text + len;
    while (p < end) {
      const char *eol = memchr(p, '\n', (size_t)(end - p));
      if (!eol) eol = end;
      const char *a = p, *b = eol;
      while (a < b && blank(*a))
        a++;
      while (b > a && blank(b[-1]))
        b--;
      p = eol + 1;
      if (a == b || *a == '#') continue;
      size_t kl = (size_t)(b - a);
      if (pass == 0) {
        if (kl > maxlen) maxlen = kl;
        cap++;
        continue;
      }
      char *k = calloc(maxlen + 1, 1);
      if (!k) {
        keys_free(keys, n);
        return NS_ENOMEM;
      }
      memcpy(k, a, kl);
      keys[n++] = k;
    }
    if (pass == 0 && cap > 0 && !(keys = calloc(cap, sizeof *keys))) return NS_ENOMEM;
  }
  *keys_out = keys;
  *n_out = n;
  *maxlen_out = maxlen;
  return 0;
}

int http__auth_load(http_server_t *s) {
  if (!s->keys_file[0]) return 0;
  char *text;
  size_t len;
  int rc = read_file(s->keys_file, &text, &len);
  if (rc != 0) {
    ns_log_error("http: cannot read server.api_keys_file '%s': %s", s->keys_file, ns_strerror(rc));
    return rc;
  }
  char **keys = NULL;
  size_t n = 0, maxlen = 0;
  rc = parse_keys(text, len, &keys, &n, &maxlen);
  free(text);
  if (rc != 0) return rc;
  http__auth_free(s);
  s->keys = keys;
  s->nkeys = n;
  s->keys_maxlen = maxlen;
  if (n == 0)
    ns_log_warn("http: server.api_keys_file '%s' holds no keys: every non-public route "
                "answers 401",
                s->keys_file);
  else
    ns_log_info("http: %zu API key(s) loaded", n);
  return 0;
}

int http_auth_reload(http_server_t *s) {
  return s ? http__auth_load(s) : NS_EINVAL;
}

size_t http_auth_key_count(const http_server_t *s) {
  return s ? s->nkeys : 0;
}

int http__auth_check(const http_server_t *s, const http_req_t *req) {
  if (!s->keys_file[0]) return 0;
  const char *h = http_req_header(req, "authorization");
  if (!h) return 1;
  if (strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return 2;
  const char *tok = h + 7;
  while (*tok == ' ' || *tok == '\t')
    tok++;
  size_t tlen = strlen(tok); /* llhttp already trimmed trailing blanks */
  if (tlen == 0) return 1;
  /* Compare against every key over the same L bytes: the time depends on the key set,
   * not on where (or whether) the token first differs. */
  size_t L = s->keys_maxlen + 1;
  unsigned char buf[1024];
  unsigned char *t = L <= sizeof buf ? buf : malloc(L);
  if (!t) return 2;
  memset(t, 0, L);
  memcpy(t, tok, tlen < L ? tlen : L);
  unsigned ok = 0;
  for (size_t k = 0; k < s->nkeys; k++) {
    const unsigned char *key = (const unsigned char *)s->keys[k];
    unsigned diff = tlen >= L; /* longer than every key: no match */
    for (size_t i = 0; i < L; i++)
      diff |= (unsigned)(t[i] ^ key[i]);
    ok |= (unsigned)(diff == 0);
  }
  if (t != buf) free(t);
  return ok ? 0 : 2;
}
