/* embed.c — CPU reference of the token embedding gather.
 * Entry point: ref_embed. */
#include "embed.h"

#include "ns_err.h"

#include <string.h>

int ref_embed(float *out, int ldo, const float *table, const int32_t *ids, int n_tokens, int hidden,
              int vocab) {
  for (int t = 0; t < n_tokens; t++) {
    if (ids[t] < 0 || ids[t] >= vocab) return NS_ERANGE;
    memcpy(out + (size_t)t * ldo, table + (size_t)ids[t] * hidden, (size_t)hidden * sizeof(float));
  }
  return 0;
}
