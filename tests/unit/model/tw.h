/* tw.h — a test-only safetensors / checkpoint-folder writer (tw_write), built
 * with snprintf so the tests do not depend on the code under test. */
#ifndef TW_H
#define TW_H

#include <stddef.h>
#include <stdint.h>

typedef struct tw_tensor {
  const char *name;
  const char *dtype; /* "F32", "BF16", "F16", or anything for error cases */
  int ndim;
  int64_t shape[4];
  const void *data;
  size_t nbytes;
} tw_tensor;

/* Write tensors back to back (no padding between them) after a header padded
 * to 8 bytes. pad_to_odd != 0 leaves the data section at an odd file offset.
 * Returns 0 or -1. */
int tw_write(const char *path, const tw_tensor *t, int n, int pad_to_odd);
/* Write an 8-byte length (hlen, or strlen(header) when hlen < 0), the header
 * and len data bytes. */
int tw_write_raw(const char *path, const char *header, int64_t hlen, const void *data, size_t len);
/* Write a text file. */
int tw_write_text(const char *path, const char *text);
/* A fresh folder under $TMPDIR (or /tmp), and its removal (files only, one level). */
char *tw_tmpdir(void);
void tw_rmdir(char *dir);
/* dir + "/" + name in a static buffer (one of 4 rotating). */
const char *tw_path(const char *dir, const char *name);

#endif
