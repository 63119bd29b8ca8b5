/* stop.h — stop-string matching over streamed text (eng_stop_feed): holds back text that
 * could still become a stop string and truncates at the first match, across chunk
 * boundaries. Used by generate and the server's streaming. */
#ifndef ENG_STOP_H
#define ENG_STOP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One generated sequence's matcher; one thread at a time. */
typedef struct eng_stop eng_stop_t;

/* Copies the n stop strings (empty ones are ignored; n may be 0). Returns 0 or
 * NS_ENOMEM. */
int eng_stop_create(const char *const *stops, int n, eng_stop_t **out);
void eng_stop_destroy(eng_stop_t *s);

/* Feed len more bytes of text. *emit / *emit_len get the text now final (valid until the
 * next call on s): everything fed so far minus what was emitted before, minus a held-back
 * tail that is a proper prefix of some stop string or an incomplete UTF-8 sequence. When
 * a stop string occurs (it may span earlier chunks), *matched is set to 1, the emitted
 * text ends right before the earliest match, and later feeds emit nothing. *matched_idx
 * (may be NULL) gets the index, in the list given to eng_stop_create, of the stop string that
 * matched (the first of that list to start at the earliest match). Returns 0 or NS_ENOMEM. */
int eng_stop_feed(eng_stop_t *s, const char *text, size_t len, const char **emit, size_t *emit_len,
                  int *matched, int *matched_idx);
/* End of the sequence without a match: emit the held-back tail. */
void eng_stop_flush(eng_stop_t *s, const char **emit, size_t *emit_len);
/* Longest stop string in bytes (0 with none). */
size_t eng_stop_max_len(const eng_stop_t *s);

#ifdef __cplusplus
}
#endif
#endif
