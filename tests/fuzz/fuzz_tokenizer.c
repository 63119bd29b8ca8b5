/* fuzz_tokenizer.c — libFuzzer harness for the tokenizer (LLVMFuzzerTestOneInput): the
 * first byte picks a built-in tokenizer and an operation (encode bytes, decode ids,
 * stream ids, round trip); invariants failing abort(). */
#include "tok_check.h"
#include "tok_fixtures.h"
#include "tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_TOK 4
static tok_t *toks[N_TOK]; /* SentencePiece old and new form; byte level Llama 3 and GPT-2 */

static void fail(const char *what) {
  fprintf(stderr, "fuzz_tokenizer: invariant broken: %s\n", what);
  abort(); /* test code: the fuzzer wants a crash */
}

static void init(void) {
  char *json[N_TOK] = {tokfx_spm_json(0), tokfx_spm_json(2), tokfx_bytelevel_json(0),
                       tokfx_bytelevel_json(1)};
  for (int i = 0; i < N_TOK; i++) {
    char err[256];
    if (tok_load_json(json[i], strlen(json[i]), NULL, 0, &toks[i], err, sizeof err) != 0) {
      fprintf(stderr, "fuzz_tokenizer: fixture %d: %s\n", i, err);
      fail("fixture loads");
    }
    free(json[i]);
  }
}

/* Ids from the input: int32 little-endian, as given (check_range) or folded into range. */
static size_t read_ids(const uint8_t *d, size_t n, int32_t *ids, int vocab, int fold) {
  size_t k = n / 4;
  for (size_t i = 0; i < k; i++) {
    uint32_t v = (uint32_t)d[4 * i] | (uint32_t)d[4 * i + 1] << 8 | (uint32_t)d[4 * i + 2] << 16 |
                 (uint32_t)d[4 * i + 3] << 24;
    ids[i] = fold ? (int32_t)(v % (uint32_t)vocab) : (int32_t)v;
  }
  return k;
}

static void check_decode(const tok_t *t, const int32_t *ids, size_t n, int skip) {
  char *text;
  size_t len;
  if (tok_decode(t, ids, n, skip, &text, &len) != 0) fail("decode of in-range ids");
  if (!tokc_utf8_ok(text, len) || text[len] != '\0') fail("decode gives valid UTF-8");
  free(text);
  if (!tokc_stream_matches(t, ids, n, skip)) fail("stream == decode, valid chunks");
}

/* lossless: byte level without add_prefix_space (the Llama 3 style fixture) */
static void op_encode(const tok_t *t, int lossless, const uint8_t *d, size_t n, int special) {
  int32_t *ids;
  size_t k;
  int rc = tok_encode(t, (const char *)d, n, special, &ids, &k);
  if (!tokc_utf8_ok((const char *)d, n)) {
    if (rc != -1) fail("invalid UTF-8 gives NS_EINVAL");
    return;
  }
  if (rc != 0) fail("encode of valid UTF-8");
  int added = 0;
  for (size_t i = 0; i < k; i++) {
    if (ids[i] < 0 || ids[i] >= tok_vocab_size(t)) fail("encoded ids in range");
    added |= ids[i] >= TOKFX_BL_BOS;
  }
  check_decode(t, ids, k, special);
  if (lossless && !special && !added) { /* added tokens may strip spaces */
    char *text;
    size_t len;
    if (tok_decode(t, ids, k, 0, &text, &len) != 0) fail("decode");
    if (len != n || memcmp(text, d, n) != 0) fail("byte-level round trip");
    free(text);
  }
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!toks[0]) init();
  if (size == 0) return 0;
  uint8_t sel = data[0];
  int which = sel & 3, op = (sel >> 2) & 3, flag = (sel >> 4) & 1;
  const tok_t *t = toks[which];
  data++, size--;
  if (op == 0 || op == 3) {
    op_encode(t, which == 2, data, size, flag);
    return 0;
  }
  int32_t *ids = malloc((size / 4 + 1) * sizeof *ids);
  if (!ids) return 0;
  if (op == 1) { /* raw ids: out of range must be refused, not read */
    size_t k = read_ids(data, size, ids, tok_vocab_size(t), 0);
    int bad = 0;
    for (size_t i = 0; i < k; i++)
      bad |= ids[i] < 0 || ids[i] >= tok_vocab_size(t);
    char *text = NULL;
    size_t len;
    int rc = tok_decode(t, ids, k, flag, &text, &len);
    if (bad != (rc != 0)) fail("decode refuses exactly the out-of-range ids");
    free(text);
  }
  size_t k = read_ids(data, size, ids, tok_vocab_size(t), 1);
  check_decode(t, ids, k, flag);
  free(ids);
  return 0;
}
