/* tok_check.h — helpers the tokenizer tests share: a UTF-8 validator written apart from
 * the library's, id-array comparison that prints both sides, and a stream-vs-decode check. */
#ifndef TOK_CHECK_H
#define TOK_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

/* 1 if s[0..n) is valid UTF-8 (no overlongs, surrogates or values above U+10FFFF). */
int tokc_utf8_ok(const char *s, size_t n);

/* Encode and compare with want; on mismatch print both and return 0. */
int tokc_encode_is(const tok_t *tok, const char *text, size_t len, int add_special,
                   const int32_t *want, size_t nwant);

/* Feed ids through a stream (skip_special as given); every chunk must be valid UTF-8 and
 * the concatenation must equal tok_decode, except inside a run of <0xNN> tokens that HF
 * turns into one U+FFFD per byte: there the stream may have released complete characters
 * before the run went bad, each standing for as many U+FFFD as it has bytes (and a space
 * released first may have been stripped as the text's start). Returns 1
 * when it holds; prints otherwise. */
int tokc_stream_matches(const tok_t *tok, const int32_t *ids, size_t n, int skip_special);

/* tok_decode that returns a malloc'd string or NULL */
char *tokc_decode(const tok_t *tok, const int32_t *ids, size_t n, int skip_special);

#endif
