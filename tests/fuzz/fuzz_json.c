/* fuzz_json.c — arbitrary bytes into api_json_check: a text it takes (after the UTF-8 and NUL
 * checks that come before it in api_parse_json) must be one cJSON reads, whole, unless it
 * escapes a UTF-16 surrogate (cJSON refuses a lone one: a 400 all the same);
 * api_json_exact_ints then walks text and tree in step to the end, each text it keeps reading
 * as its node's double, and api_json_last_wins runs on the tree. */
#include "api.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* a \uD800-\uDFFF escape somewhere (or text that looks like one) */
static int has_surrogate(const char *s, size_t n) {
  for (size_t i = 0; i + 3 < n; i++)
    if (s[i] == '\\' && s[i + 1] == 'u' && (s[i + 2] == 'd' || s[i + 2] == 'D') &&
        strchr("89abcdefABCDEF", s[i + 3]))
      return 1;
  return 0;
}

/* every number's kept text reads as the double cJSON made of it */
static int kept_texts_agree(const cJSON *item) {
  for (; item; item = item->next) {
    if (cJSON_IsNumber(item) && item->valuestring &&
        strtod(item->valuestring, NULL) != item->valuedouble)
      return -1;
    if (kept_texts_agree(item->child)) return -1;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s = (const char *)data;
  size_t at = 0;
  if (memchr(s, '\0', size) || !api_utf8_valid(s, size)) return 0;
  if (api_json_check(s, size, &at)) {
    if (at > size) abort();
    return 0;
  }
  char *z = malloc(size + 1); /* cJSON's trailing check reads the NUL */
  if (!z) return 0;
  memcpy(z, s, size);
  z[size] = '\0';
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(z, size + 1, &end, 1);
  if (!root) {
    if (!has_surrogate(z, size)) abort(); /* taken here, refused by cJSON */
    free(z);
    return 0;
  }
  if (api_json_exact_ints(root, z, size) != 0) abort();
  if (kept_texts_agree(root) != 0) abort();
  if (api_json_last_wins(root)) abort();
  cJSON_Delete(root);
  free(z);
  return 0;
}
