/* test_tok_llama2.c — the real Llama 2 tokenizer against Hugging Face: every string of
 * shared/tokenizers/llama2/golden_encodings.json encodes to hf_ids and decodes back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tok_check.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *dir;
static tok_t *tok;
static cJSON *golden;

/* HF's decode(hf_ids, skip_special_tokens=True) where it does not give the original text
 * back (checked with tokenizers 0.23.2): the decoder's Strip takes the first space of the
 * text, and skipped special tokens leave their text out. */
static const struct {
  const char *text, *hf_decoded;
} HF_LOSSY[] = {
    {"  leading spaces and trailing  ", " leading spaces and trailing  "},
    {" ", ""},
    {"<s> not a special token </s>", "not a special token "},
};

static const char *expected_decode(const char *text, const char *decoded) {
  for (size_t i = 0; i < sizeof HF_LOSSY / sizeof *HF_LOSSY; i++)
    if (strcmp(text, HF_LOSSY[i].text) == 0) return HF_LOSSY[i].hf_decoded;
  return decoded;
}

static int32_t *ids_of(const cJSON *arr, size_t *n) {
  *n = (size_t)cJSON_GetArraySize(arr);
  int32_t *ids = malloc((*n + 1) * sizeof *ids);
  size_t i = 0;
  const cJSON *v;
  cJSON_ArrayForEach(v, arr) ids[i++] = (int32_t)v->valuedouble;
  return ids;
}

static void test_specials(void **state) {
  (void)state;
  assert_int_equal(tok_vocab_size(tok), 32000);
  assert_int_equal(tok_bos_id(tok), 1);
  assert_int_equal(tok_eos_id(tok), 2);
  assert_int_equal(tok_token_id(tok, "<0x0A>"), 13);
  assert_true(tok_is_special(tok, 1));
}

static void test_golden_encode(void **state) {
  (void)state;
  const cJSON *e;
  int count = 0;
  cJSON_ArrayForEach(e, golden) {
    const char *text = cJSON_GetObjectItem(e, "text")->valuestring;
    size_t n;
    int32_t *want = ids_of(cJSON_GetObjectItem(e, "hf_ids"), &n);
    assert_true(tokc_encode_is(tok, text, strlen(text), 1, want, n));
    assert_true(tokc_encode_is(tok, text, strlen(text), 0, want + 1, n - 1)); /* no BOS */
    free(want);
    count++;
  }
  assert_true(count >= 12);
}

static void test_golden_decode(void **state) {
  (void)state;
  const cJSON *e;
  cJSON_ArrayForEach(e, golden) {
    const char *text = cJSON_GetObjectItem(e, "text")->valuestring;
    const char *decoded = cJSON_GetObjectItem(e, "decoded")->valuestring;
    size_t n;
    int32_t *ids = ids_of(cJSON_GetObjectItem(e, "hf_ids"), &n);
    char *got = tokc_decode(tok, ids, n, 1);
    assert_non_null(got);
    const char *want = expected_decode(text, decoded);
    if (strcmp(got, want) != 0) fprintf(stderr, "decode of \"%s\": got \"%s\"\n", text, got);
    assert_string_equal(got, want);
    free(got);
    assert_true(tokc_stream_matches(tok, ids, n, 1));
    assert_true(tokc_stream_matches(tok, ids, n, 0));
    free(ids);
  }
}

/* <0xNN> is id 3 + NN. A character split over byte tokens comes out with the token that
 * completes it, an ASCII byte with its own token; what can never complete becomes U+FFFD. */
static void test_stream_bytes(void **state) {
  (void)state;
  static const struct {
    int32_t id;
    const char *out;
  } steps[] = {
      {15043, "Hello"}, /* ▁Hello: the leading space goes at the start */
      {3 + 0xE3, ""},   /* U+3058 in three byte tokens */
      {3 + 0x81, ""},
      {3 + 0x98, "\xE3\x81\x98"},
      {3 + '!', "!"}, /* an ASCII byte: at once */
      {3 + 0xC3, ""}, /* a lead byte that a piece cuts off */
      {3186, "\xEF\xBF\xBD world"},
      {3 + 0xF0, ""}, /* unfinished at the end: U+FFFD at the flush */
  };
  tok_stream_t *s;
  const char *c;
  size_t n;
  assert_int_equal(tok_stream_new(tok, 1, &s), 0);
  for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
    assert_int_equal(tok_stream_push(s, steps[i].id, &c, &n), 0);
    assert_string_equal(c, steps[i].out);
  }
  assert_int_equal(tok_stream_flush(s, &c, &n), 0);
  assert_string_equal(c, "\xEF\xBF\xBD");
  tok_stream_free(s);
}

static void test_random_streams(void **state) {
  (void)state;
  uint64_t s = 0x9E3779B97F4A7C15ull;
  int32_t ids[48];
  for (int it = 0; it < 3000; it++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    size_t n = s % 48;
    for (size_t i = 0; i < n; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      /* a third of the ids are <0xNN> byte tokens (ids 3..258), so that runs form */
      ids[i] = (int32_t)(s % 3 == 0 ? 3 + (s >> 8) % 256 : (s >> 8) % 32000);
    }
    assert_true(tokc_stream_matches(tok, ids, n, it & 1));
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s LLAMA2_TOKENIZER_DIR\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  char path[4096];
  snprintf(path, sizeof path, "%s/golden_encodings.json", dir);
  if (access(path, R_OK) != 0) {
    printf("SKIP: %s not found\n", path);
    return 77;
  }
  char err[256];
  if (tok_load_dir(dir, &tok, err, sizeof err) != 0) {
    fprintf(stderr, "loading %s: %s\n", dir, err);
    return 1;
  }
  FILE *f = fopen(path, "rb");
  static char buf[1 << 20];
  size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  golden = cJSON_ParseWithLength(buf, len);
  if (!cJSON_IsArray(golden)) {
    fprintf(stderr, "%s: not a JSON array\n", path);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_specials),       cmocka_unit_test(test_golden_encode),
      cmocka_unit_test(test_golden_decode),  cmocka_unit_test(test_stream_bytes),
      cmocka_unit_test(test_random_streams),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  cJSON_Delete(golden);
  tok_free(tok);
  return rc;
}
