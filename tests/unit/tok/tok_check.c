/* tok_check.c — the shared checks of tok_check.h: UTF-8 validation, encode comparison,
 * and the stream == decode invariant with per-chunk validation. */
#include "tok_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tokc_utf8_ok(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    unsigned c = u[i];
    size_t k;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      k = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      k = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      k = 4, cp = c & 0x07;
    } else {
      return 0;
    }
    if (i + k > n) return 0;
    for (size_t j = 1; j < k; j++) {
      if ((u[i + j] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (u[i + j] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += k;
  }
  return 1;
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
  fprintf(stderr, "  %s (%zu):", what, n);
  for (size_t i = 0; i < n; i++)
    fprintf(stderr, " %d", ids[i]);
  fprintf(stderr, "\n");
}

int tokc_encode_is(const tok_t *tok, const char *text, size_t len, int add_special,
                   const int32_t *want, size_t nwant) {
  int32_t *ids = NULL;
  size_t n = 0;
  int rc = tok_encode(tok, text, len, add_special, &ids, &n);
  int ok = rc == 0 && n == nwant && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
  if (!ok) {
    fprintf(stderr, "encode mismatch for \"%.*s\" (add_special %d, rc %d)\n",
            (int)(len > 200 ? 200 : len), text, add_special, rc);
    print_ids("want", want, nwant);
    if (rc == 0) print_ids("got ", ids, n);
  }
  free(ids);
  return ok;
}

char *tokc_decode(const tok_t *tok, const int32_t *ids, size_t n, int skip_special) {
  char *text = NULL;
  size_t len;
  if (tok_decode(tok, ids, n, skip_special, &text, &len) != 0) return NULL;
  if (strlen(text) != len && memchr(text, 0, len) == NULL) {
    free(text);
    return NULL;
  }
  return text;
}

/* The stream's text s against HF's decode d (see tok_check.h). */
static int stream_equiv(const char *s, size_t sn, const char *d, size_t dn) {
  static const char FFFD[] = "\xEF\xBF\xBD";
  size_t i = 0, j = 0;
  while (i < sn && j < dn) {
    size_t k = 1;
    while (i + k < sn && ((unsigned char)s[i + k] & 0xC0) == 0x80)
      k++;
    if (k <= dn - j && memcmp(s + i, d + j, k) == 0) {
      i += k, j += k;
      continue;
    }
    /* a character released from a run HF made invalid: k bytes, k U+FFFD */
    for (size_t b = 0; b < k; b++, j += 3)
      if (dn - j < 3 || memcmp(d + j, FFFD, 3) != 0) return 0;
    i += k;
  }
  return i == sn && j == dn;
}

int tokc_stream_matches(const tok_t *tok, const int32_t *ids, size_t n, int skip_special) {
  char *full = NULL;
  size_t flen = 0;
  if (tok_decode(tok, ids, n, skip_special, &full, &flen) != 0) {
    fprintf(stderr, "stream check: tok_decode failed\n");
    return 0;
  }
  tok_stream_t *s;
  if (tok_stream_new(tok, skip_special, &s) != 0) {
    free(full);
    return 0;
  }
  char *cat = malloc(flen + 1); /* a released character is shorter than its U+FFFDs */
  size_t clen = 0;
  int ok = cat != NULL;
  for (size_t i = 0; ok && i <= n; i++) {
    const char *chunk;
    size_t len;
    int rc = i < n ? tok_stream_push(s, ids[i], &chunk, &len) : tok_stream_flush(s, &chunk, &len);
    if (rc != 0 || !tokc_utf8_ok(chunk, len) || chunk[len] != '\0') {
      fprintf(stderr, "stream chunk %zu: rc %d or invalid UTF-8\n", i, rc);
      ok = 0;
    } else if (clen + len > flen) {
      fprintf(stderr, "stream chunk %zu: more text than tok_decode gives\n", i);
      ok = 0;
    } else {
      memcpy(cat + clen, chunk, len);
      clen += len;
    }
  }
  /* a space released first from such a run is the one a leading Strip then removes */
  if (ok && !stream_equiv(cat, clen, full, flen) &&
      !(flen >= 3 && memcmp(full, "\xEF\xBF\xBD", 3) == 0 &&
        stream_equiv(cat, clen, full + 3, flen - 3)))
    ok = 0;
  if (!ok) {
    fprintf(stderr, "stream != decode (skip_special %d)\n  decode: \"%s\"\n", skip_special, full);
    if (cat) fprintf(stderr, "  stream: \"%.*s\"\n", (int)clen, cat);
    for (size_t i = 0; i < n; i++)
      fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
  }
  tok_stream_free(s);
  free(cat);
  free(full);
  return ok;
}
