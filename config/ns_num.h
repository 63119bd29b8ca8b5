/* ns_num.h — whole-string number parsing for command-line options (ns_parse_int,
 * ns_parse_float): the entire string must be the number, within [lo, hi]. Any thread. */
#ifndef NS_NUM_H
#define NS_NUM_H

#ifdef __cplusplus
extern "C" {
#endif

/* A decimal integer in [lo, hi] into *out; -1 (out untouched) for anything else. */
int ns_parse_int(const char *s, long lo, long hi, int *out);
/* A finite number in [lo, hi] into *out; -1 (out untouched) for anything else. */
int ns_parse_float(const char *s, double lo, double hi, float *out);

#ifdef __cplusplus
}
#endif
#endif
