/* fuzz_safetensors.c — libFuzzer harness: arbitrary bytes parsed as a
 * .safetensors file (st_open_mem); every accepted tensor must lie inside the input. */
#include "safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile unsigned sink; /* keeps the reads below */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  st_file *st = NULL;
  char err[512];
  err[0] = '\0';
  if (st_open_mem(data, size, "fuzz.safetensors", &st, err, sizeof err) != 0) {
    if (st != NULL || err[0] == '\0' || strlen(err) >= sizeof err) abort();
    return 0;
  }
  unsigned sum = 0;
  for (size_t i = 0; i < st_count(st); i++) {
    const st_tensor *t = st_at(st, i);
    const uint8_t *p = t->data;
    if (p < data || t->nbytes > size || p - data > (ptrdiff_t)(size - t->nbytes)) abort();
    if (st_find(st, t->name) != t) abort();
    if (t->dtype != NS_F32 && t->dtype != NS_F16 && t->dtype != NS_BF16) abort();
    if (t->ndim < 0 || t->ndim > ST_MAX_DIMS) abort();
    for (size_t k = 0; k < t->nbytes; k++)
      sum += p[k]; /* ASan sees any stray read */
  }
  sink = sum;
  st_close(st);
  return 0;
}
