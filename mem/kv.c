/* kv.c — the paged KV cache manager: a LIFO free list of page ids, a used/free mark per
 * page and growable per-sequence page tables. Entry points: kv_create, kv_seq_reserve. */
#include "kv.h"

#include "ns_err.h"

#include <stdlib.h>
#include <string.h>

struct kv_t {
  int n_pages;
  int page_tokens;
  int n_free;
  int32_t *free_ids; /* stack of free page ids: free_ids[0 .. n_free) */
  uint8_t *used;     /* per page: 1 when held by a sequence */
};

int kv_create(int n_pages, int page_tokens, kv_t **out) {
  *out = NULL;
  if (n_pages <= 0 || page_tokens <= 0 || (page_tokens & (page_tokens - 1))) return NS_EINVAL;
  kv_t *kv = calloc(1, sizeof *kv);
  if (!kv) return NS_ENOMEM;
  kv->free_ids = malloc((size_t)n_pages * sizeof *kv->free_ids);
  kv->used = calloc((size_t)n_pages, 1);
  if (!kv->free_ids || !kv->used) goto err;
  kv->n_pages = n_pages;
  kv->page_tokens = page_tokens;
  /* pushed high to low so the first reservations get pages 0, 1, 2, ... */
  for (int i = 0; i < n_pages; i++)
    kv->free_ids[i] = n_pages - 1 - i;
  kv->n_free = n_pages;
  *out = kv;
  return 0;
err:
  kv_destroy(kv);
  return NS_ENOMEM;
}

void kv_destroy(kv_t *kv) {
  if (!kv) return;
  free(kv->free_ids);
  free(kv->used);
  free(kv);
}

void kv_seq_init(kv_seq *s) {
  memset(s, 0, sizeof *s);
}

int kv_pages_for(const kv_t *kv, int n_tokens) {
  return (int)(((int64_t)n_tokens + kv->page_tokens - 1) / kv->page_tokens);
}

int kv_seq_reserve(kv_t *kv, kv_seq *s, int n_tokens_total) {
  if (n_tokens_total < 0) return NS_EINVAL;
  int need = kv_pages_for(kv, n_tokens_total);
  if (need <= s->n_pages) return 0;
  int extra = need - s->n_pages;
  if (extra > kv->n_free) return NS_ENOMEM;
  if (need > s->cap) {
    int cap = s->cap ? s->cap : 4;
    while (cap < need)
      cap *= 2;
    int32_t *p = realloc(s->pages, (size_t)cap * sizeof *p);
    if (!p) return NS_ENOMEM; /* the old table is intact */
    s->pages = p;
    s->cap = cap;
  }
  for (int i = 0; i < extra; i++) {
    int32_t id = kv->free_ids[--kv->n_free];
    kv->used[id] = 1;
    s->pages[s->n_pages++] = id;
  }
  return 0;
}

void kv_seq_free(kv_t *kv, kv_seq *s) {
  /* pushed back in reverse so a sequence reserved again gets the same pages */
  for (int i = s->n_pages - 1; i >= 0; i--) {
    kv->used[s->pages[i]] = 0;
    kv->free_ids[kv->n_free++] = s->pages[i];
  }
  free(s->pages);
  kv_seq_init(s);
}

int kv_pages_total(const kv_t *kv) {
  return kv->n_pages;
}
int kv_pages_used(const kv_t *kv) {
  return kv->n_pages - kv->n_free;
}
int kv_pages_free(const kv_t *kv) {
  return kv->n_free;
}
int kv_page_tokens(const kv_t *kv) {
  return kv->page_tokens;
}

int kv_is_valid(const kv_t *kv) {
  if (kv->n_free < 0 || kv->n_free > kv->n_pages) return 0;
  int n_used = 0;
  for (int i = 0; i < kv->n_pages; i++) {
    if (kv->used[i] > 1) return 0;
    n_used += kv->used[i];
  }
  if (n_used != kv->n_pages - kv->n_free) return 0;
  /* each free id in range, marked free, seen once (mark with 2, then restore) */
  int ok = 1;
  uint8_t *u = kv->used;
  int i = 0;
  for (; i < kv->n_free; i++) {
    int32_t id = kv->free_ids[i];
    if (id < 0 || id >= kv->n_pages || u[id] != 0) {
      ok = 0;
      break;
    }
    u[id] = 2;
  }
  for (int j = 0; j < i; j++)
    u[kv->free_ids[j]] = 0;
  return ok;
}

int kv_seq_is_valid(const kv_t *kv, const kv_seq *s) {
  if (s->n_pages < 0 || s->n_pages > s->cap || (s->n_pages && !s->pages)) return 0;
  int ok = 1, i = 0;
  for (; i < s->n_pages; i++) {
    int32_t id = s->pages[i];
    if (id < 0 || id >= kv->n_pages || kv->used[id] != 1) {
      ok = 0;
      break;
    }
    kv->used[id] = 3; /* seen in this table */
  }
  for (int j = 0; j < i; j++)
    kv->used[s->pages[j]] = 1;
  return ok;
}
