/* tw.c — the test-only safetensors writer: header text by snprintf, data
 * copied as given, so the reader under test is checked against bytes it did not make. */
#include "tw.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tw_write_raw(const char *path, const char *header, int64_t hlen, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  uint64_t h = hlen < 0 ? strlen(header) : (uint64_t)hlen;
  uint8_t le[8];
  for (int i = 0; i < 8; i++)
    le[i] = (uint8_t)(h >> (8 * i));
  int ok = fwrite(le, 1, 8, f) == 8;
  ok = ok && fwrite(header, 1, strlen(header), f) == strlen(header);
  if (len) ok = ok && fwrite(data, 1, len, f) == len;
  return (fclose(f) == 0 && ok) ? 0 : -1;
}

int tw_write(const char *path, const tw_tensor *t, int n, int pad_to_odd) {
  size_t cap = 4096 + (size_t)n * 256, len = 0, off = 0, data_len = 0;
  char *hdr = malloc(cap);
  if (!hdr) return -1;
  len += (size_t)snprintf(hdr + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
  for (int i = 0; i < n; i++) {
    len += (size_t)snprintf(hdr + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                            t[i].name, t[i].dtype);
    for (int d = 0; d < t[i].ndim; d++)
      len +=
          (size_t)snprintf(hdr + len, cap - len, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
    len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%zu,%zu]}", off,
                            off + t[i].nbytes);
    off += t[i].nbytes;
  }
  len += (size_t)snprintf(hdr + len, cap - len, "}");
  size_t want = (8 + len + 7) / 8 * 8 - 8 + (pad_to_odd ? 1 : 0);
  while (len < want)
    hdr[len++] = ' ';
  hdr[len] = '\0';
  data_len = off;
  uint8_t *data = malloc(data_len ? data_len : 1);
  if (!data) {
    free(hdr);
    return -1;
  }
  off = 0;
  for (int i = 0; i < n; i++) {
    if (t[i].nbytes) memcpy(data + off, t[i].data, t[i].nbytes);
    off += t[i].nbytes;
  }
  int rc = tw_write_raw(path, hdr, -1, data, data_len);
  free(hdr);
  free(data);
  return rc;
}

int tw_write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fputs(text, f) >= 0;
  return (fclose(f) == 0 && ok) ? 0 : -1;
}

char *tw_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  char *p = malloc(4096);
  if (!p) return NULL;
  snprintf(p, 4096, "%s/ns-model-test-XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(p)) {
    free(p);
    return NULL;
  }
  return p;
}

void tw_rmdir(char *dir) {
  if (!dir) return;
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      unlink(tw_path(dir, e->d_name));
    }
    closedir(d);
  }
  rmdir(dir);
  free(dir);
}

const char *tw_path(const char *dir, const char *name) {
  static char buf[4][4096];
  static int k;
  char *p = buf[k++ & 3];
  snprintf(p, 4096, "%s/%s", dir, name);
  return p;
}
