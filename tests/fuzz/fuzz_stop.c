/* fuzz_stop.c — the stop-string matcher (engine/stop.c) against a plain reference, on
 * arbitrary stop strings and text fed in arbitrary chunks. Input: a byte n (n % 9 stops), each
 * stop as a length byte (% 12) and its bytes (a NUL read as 'a': stops are C strings), then
 * chunks, each a length byte (% 8) and its bytes. What the matcher emits, flush included, must
 * be the text cut before the earliest stop occurrence in the text fed up to the first chunk
 * that completes one (the whole text when none does), reported on that chunk with the
 * caller's index of a stop found there; it holds back no more than could still start a stop
 * string or be one, and where stops and text are UTF-8 (as the server's are), it never emits
 * part of a character. */
#include "api.h" /* api_utf8_valid */
#include "stop.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STOPS 8

/* earliest start of s (n bytes) in t[0..len) at from or later, or len when absent */
static size_t find(const char *t, size_t len, const char *s, size_t n, size_t from) {
  for (size_t p = from; p + n <= len; p++)
    if (memcmp(t + p, s, n) == 0) return p;
  return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t at = 0;
  if (size < 1) return 0;
  const int n = data[at++] % (MAX_STOPS + 1);
  char stops[MAX_STOPS][12];
  const char *sp[MAX_STOPS];
  size_t max_len = 0;
  for (int i = 0; i < n; i++) {
    const size_t l = at < size ? data[at++] % 12 : 0;
    size_t k = 0;
    for (; k < l && at < size; k++, at++)
      stops[i][k] = data[at] ? (char)data[at] : 'a';
    stops[i][k] = '\0';
    sp[i] = stops[i];
    if (k > max_len) max_len = k;
  }
  /* the text, all[0..total), and where each chunk ends */
  char *all = malloc(size + 1), *out = malloc(size + 1);
  size_t *ends = malloc((size + 1) * sizeof *ends), total = 0, n_chunks = 0;
  if (!all || !out || !ends) abort();
  while (at < size) {
    size_t c = data[at++] % 8;
    if (c > size - at) c = size - at;
    memcpy(all + total, data + at, c);
    at += c, total += c;
    ends[n_chunks++] = total;
  }
  int utf8 = api_utf8_valid(all, total);
  for (int i = 0; i < n; i++)
    utf8 = utf8 && api_utf8_valid(stops[i], strlen(stops[i]));

  eng_stop_t *s;
  if (eng_stop_create(sp, n, &s)) abort();
  if (eng_stop_max_len(s) != max_len) abort();
  size_t fed = 0, emitted = 0; /* all[0..fed): the text fed; out[0..emitted): emitted */
  int done = 0;
  for (size_t k = 0; k < n_chunks; k++) {
    const size_t c = ends[k] - fed;
    const char *e;
    size_t el;
    int matched = 0, idx = -1;
    if (eng_stop_feed(s, all + fed, c, &e, &el, &matched, &idx)) abort();
    fed += c;
    if (done) { /* after a match: nothing more */
      if (!matched || el) abort();
      continue;
    }
    /* the reference: the earliest occurrence in everything fed so far (none was there
     * before this chunk, so one ends in it) */
    size_t first = fed;
    int which = -1;
    for (int i = 0; i < n; i++) {
      size_t l = strlen(stops[i]);
      if (!l) continue;
      size_t p = find(all, fed, stops[i], l, fed - c + 1 > l ? fed - c + 1 - l : 0);
      if (p < first) first = p, which = i;
    }
    if (!matched != (which < 0)) abort();
    memcpy(out + emitted, e, el);
    const size_t before = emitted;
    emitted += el;
    if (matched) { /* cut before the earliest occurrence, idx a stop that starts there */
      done = 1;
      if (emitted != first || memcmp(out, all, first)) abort();
      if (idx < 0 || idx >= n || strcmp(stops[idx], stops[which]) ||
          find(all, fed, stops[idx], strlen(stops[idx]), 0) != first)
        abort();
      continue;
    }
    /* emitted so far: a prefix of the text; held back: what could start a stop string or
     * complete a UTF-8 sequence */
    if (emitted > fed || memcmp(out, all, emitted)) abort();
    /* the text is UTF-8 and what came before ended at a character's end: so must this */
    if (utf8 && !api_utf8_valid(out + before, emitted - before)) abort();
    size_t limit = max_len ? max_len - 1 : 0;
    if (fed - emitted > (limit > 3 ? limit : 3)) abort();
  }
  const char *e;
  size_t el;
  eng_stop_flush(s, &e, &el);
  if (done && el) abort();
  if (!done) { /* no match: the whole text, the held-back tail last */
    memcpy(out + emitted, e, el);
    if (emitted + el != fed || memcmp(out, all, fed)) abort();
  }
  eng_stop_destroy(s);
  free(all);
  free(out);
  free(ends);
  return 0;
}
