/* ns_num.c — whole-string number parsing for command-line options. */
#include "ns_num.h"

#include <errno.h>
#include <stdlib.h>

int ns_parse_int(const char *s, long lo, long hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

int ns_parse_float(const char *s, double lo, double hi, float *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
  *out = (float)v;
  return 0;
}
