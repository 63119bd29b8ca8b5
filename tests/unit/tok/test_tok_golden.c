/* test_tok_golden.c — a tokenizer folder made by tests/data/tokenizers/make_bytelevel.py
 * (HF tokenizers): every case's ids (with and without specials), both decodes, streaming,
 * the invalid-UTF-8 replacement, and HF's decode of random id sequences. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tok_check.h"
#include "tok_int.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tok_t *tkn;
static cJSON *golden;
static int needs_nfc; /* the folder's normalizer is NFC */

static int32_t *ids_of(const cJSON *arr, size_t *n) {
  *n = (size_t)cJSON_GetArraySize(arr);
  int32_t *ids = malloc((*n + 1) * sizeof *ids);
  size_t i = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, arr) ids[i++] = (int32_t)v->valuedouble;
  return ids;
}

static unsigned char *unhex(const char *h, size_t *len) {
  size_t n = strlen(h) / 2;
  unsigned char *p = malloc(n + 1);
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    sscanf(h + 2 * i, "%2x", &v);
    p[i] = (unsigned char)v;
  }
  p[n] = 0;
  *len = n;
  return p;
}

/* A string field as malloc'd bytes: key_hex when present (cJSON strings stop at NUL, so
 * the script writes texts holding U+0000 in hex as well), else key. */
static char *str_of(const cJSON *o, const char *key, size_t *len) {
  char hk[64];
  snprintf(hk, sizeof hk, "%s_hex", key);
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, hk);
  if (cJSON_IsString(h)) return (char *)unhex(h->valuestring, len);
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  assert_true(cJSON_IsString(v));
  *len = strlen(v->valuestring);
  char *p = malloc(*len + 1);
  memcpy(p, v->valuestring, *len + 1);
  return p;
}

/* want is malloc'd (str_of) and freed here */
static void check_decode(const int32_t *ids, size_t n, int skip, char *want, size_t wl) {
  char *got = NULL;
  size_t len;
  assert_int_equal(tok_decode(tkn, ids, n, skip, &got, &len), 0);
  if (len != wl || memcmp(got, want, len) != 0)
    fprintf(stderr, "decode (skip %d): got \"%s\" want \"%s\"\n", skip, got, want);
  assert_int_equal(len, wl);
  assert_memory_equal(got, want, len);
  free(got);
  free(want);
  assert_true(tokc_stream_matches(tkn, ids, n, skip));
}

/* Without ICU, NFC is the identity: skip texts that might not be NFC already. */
static int nfc_unsure(const char *s, size_t n) {
  if (!needs_nfc || tok__nfc_exact()) return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] >= 0xCC) return 1;
  return 0;
}

static void test_cases(void **state) {
  (void)state;
  const cJSON *cases = cJSON_GetObjectItem(golden, "cases"), *e;
  int count = 0, skipped = 0;
  cJSON_ArrayForEach(e, cases) {
    size_t tl, n, np, dl;
    char *text = str_of(e, "text", &tl);
    if (nfc_unsure(text, tl)) {
      skipped++;
      free(text);
      continue;
    }
    int32_t *ids = ids_of(cJSON_GetObjectItem(e, "ids"), &n);
    int32_t *plain = ids_of(cJSON_GetObjectItem(e, "ids_plain"), &np);
    assert_true(tokc_encode_is(tkn, text, tl, 1, ids, n));
    assert_true(tokc_encode_is(tkn, text, tl, 0, plain, np));
    char *d = str_of(e, "decoded", &dl);
    check_decode(ids, n, 1, d, dl);
    d = str_of(e, "decoded_all", &dl);
    check_decode(ids, n, 0, d, dl);
    const cJSON *hex = cJSON_GetObjectItem(e, "raw_hex");
    if (cJSON_IsString(hex)) { /* Python's "replace" is Rust's from_utf8_lossy */
      size_t rl;
      unsigned char *raw = unhex(hex->valuestring, &rl);
      tok_buf out = {0};
      assert_int_equal(tok__utf8_lossy(&out, raw, rl, 1, NULL), 0);
      assert_int_equal(out.len, tl);
      assert_memory_equal(out.p, text, tl);
      tok__buf_free(&out);
      free(raw);
    }
    free(text);
    free(ids);
    free(plain);
    count++;
  }
  if (skipped) printf("note: %d cases need exact NFC (build without ICU): skipped\n", skipped);
  assert_true(count + skipped >= 40);
}

static void test_decode_cases(void **state) {
  (void)state;
  const cJSON *cases = cJSON_GetObjectItem(golden, "decode_cases"), *e;
  int count = 0;
  cJSON_ArrayForEach(e, cases) {
    size_t n, dl;
    int32_t *ids = ids_of(cJSON_GetObjectItem(e, "ids"), &n);
    char *d = str_of(e, "decoded", &dl);
    check_decode(ids, n, 1, d, dl);
    d = str_of(e, "decoded_all", &dl);
    check_decode(ids, n, 0, d, dl);
    free(ids);
    count++;
  }
  assert_true(count > 0);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s DIR NAME\n", argv[0]);
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/golden.json", argv[1]);
  if (access(path, R_OK) != 0) {
    printf("SKIP: %s/golden.json not yet generated\n", argv[2]);
    return 77;
  }
  char err[256];
  if (tok_load_dir(argv[1], &tkn, err, sizeof err) != 0) {
    fprintf(stderr, "loading %s: %s\n", argv[1], err);
    return 1;
  }
  for (int i = 0; i < tkn->n_norm; i++)
    needs_nfc |= tkn->norm[i].kind == TOK_NORM_NFC;
  FILE *f = fopen(path, "rb");
  tok_buf b = {0};
  char chunk[65536];
  size_t got;
  while (f && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
    tok__buf_put(&b, chunk, got);
  if (f) fclose(f);
  golden = cJSON_ParseWithLength(b.p, b.len);
  tok__buf_free(&b);
  if (!cJSON_IsObject(golden)) {
    fprintf(stderr, "%s: not a JSON object\n", path);
    return 1;
  }
  printf("golden made by tokenizers %s\n",
         cJSON_GetStringValue(cJSON_GetObjectItem(golden, "tokenizers_version")));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_decode_cases),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  cJSON_Delete(golden);
  tok_free(tkn);
  return rc;
}
