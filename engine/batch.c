/* batch.c — building a step's ragged batch (backend.h batch_t): per-row ids, positions
 * and sequence index, and the rows whose logits are wanted. Entry point: be_batch_add. */
#include "backend.h"

#include "ns_err.h"

#include <stdlib.h>
#include <string.h>

void be_batch_init(batch_t *b) {
  memset(b, 0, sizeof *b);
}

void be_batch_free(batch_t *b) {
  free(b->tokens);
  free(b->pos);
  free(b->seq_of);
  free(b->out_rows);
  free(b->seqs);
  be_batch_init(b);
}

void be_batch_reset(batch_t *b, int all_logits) {
  b->n_seqs = 0;
  b->n_tokens = 0;
  b->n_out = 0;
  b->all_logits = all_logits;
}

static int grow_tokens(batch_t *b, int need) {
  if (need <= b->cap_tokens_) return 0;
  int cap = b->cap_tokens_ ? b->cap_tokens_ : 64;
  while (cap < need)
    cap *= 2;
  int32_t **arrs[4] = {&b->tokens, &b->pos, &b->seq_of, &b->out_rows};
  for (int i = 0; i < 4; i++) {
    int32_t *p = realloc(*arrs[i], (size_t)cap * sizeof *p);
    if (!p) return NS_ENOMEM; /* arrays already grown stay valid and larger */
    *arrs[i] = p;
  }
  b->cap_tokens_ = cap;
  return 0;
}

int be_batch_add(batch_t *b, const batch_seq *s, const int32_t *ids) {
  if (s->n_new < 1 || s->pos0 < 0 || s->n_pages < 0) return NS_EINVAL;
  if (grow_tokens(b, b->n_tokens + s->n_new)) return NS_ENOMEM;
  if (b->n_seqs == b->cap_seqs_) {
    int cap = b->cap_seqs_ ? 2 * b->cap_seqs_ : 16;
    batch_seq *p = realloc(b->seqs, (size_t)cap * sizeof *p);
    if (!p) return NS_ENOMEM;
    b->seqs = p;
    b->cap_seqs_ = cap;
  }
  int si = b->n_seqs++;
  batch_seq *d = &b->seqs[si];
  *d = *s;
  d->tok0 = b->n_tokens;
  d->out_row = -1;
  for (int i = 0; i < s->n_new; i++) {
    int r = b->n_tokens++;
    b->tokens[r] = ids[i];
    b->pos[r] = s->pos0 + i;
    b->seq_of[r] = si;
    if (b->all_logits) b->out_rows[b->n_out++] = r;
  }
  if (b->all_logits)
    d->out_row = d->tok0 + s->n_new - 1;
  else if (s->sample) {
    d->out_row = b->n_out;
    b->out_rows[b->n_out++] = d->tok0 + s->n_new - 1;
  }
  return 0;
}
