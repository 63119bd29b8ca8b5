/* kv.h — the paged KV cache manager: a fixed number of pages of page_tokens tokens, a free
 * list of page ids and per-sequence page tables (kv_create, kv_seq_reserve, kv_seq_free).
 *
 * It hands out page ids only; the backend owns the page memory and maps a page id to its
 * bytes (the CPU backend's layout: engine/backend.h, be_cpu_create). Engine thread only; a
 * kv_t and its sequences are not thread-safe. */
#ifndef MEM_KV_H
#define MEM_KV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kv_t kv_t;

/* One sequence's page table: page ids covering positions [0, n_pages * page_tokens).
 * Initialise with kv_seq_init (or zero it); the table belongs to the kv_t it was reserved
 * from until kv_seq_free. Fields are read-only to callers. */
typedef struct kv_seq {
  int32_t *pages; /* read-only: page id of positions [i * page_tokens, (i + 1) * page_tokens) */
  int n_pages;    /* read-only */
  int cap;        /* private: allocated entries of pages */
} kv_seq;

/* A manager of n_pages pages (> 0) of page_tokens tokens (a power of two). Returns 0,
 * NS_EINVAL or NS_ENOMEM. */
int kv_create(int n_pages, int page_tokens, kv_t **out);
/* Frees the manager (not the sequences' tables: kv_seq_free them first). NULL is fine. */
void kv_destroy(kv_t *kv);

void kv_seq_init(kv_seq *s);
/* Grow s's table to cover n_tokens_total positions (no-op when it already does). On
 * NS_ENOMEM (not enough free pages, or no memory for the table) nothing changes; NS_EINVAL
 * for n_tokens_total < 0. */
int kv_seq_reserve(kv_t *kv, kv_seq *s, int n_tokens_total);
/* Return every page of s to the free list and free its table; s is empty afterwards. */
void kv_seq_free(kv_t *kv, kv_seq *s);

int kv_pages_total(const kv_t *kv);
int kv_pages_used(const kv_t *kv);
int kv_pages_free(const kv_t *kv);
int kv_page_tokens(const kv_t *kv);
/* Pages needed for n tokens. */
int kv_pages_for(const kv_t *kv, int n_tokens);

/* Consistency check: the free list holds distinct in-range ids, each marked free, and the
 * used count matches the pages marked used. Returns 1 when consistent. */
int kv_is_valid(const kv_t *kv);
/* s's pages are in range, distinct and marked used in kv. Returns 1 when so. */
int kv_seq_is_valid(const kv_t *kv, const kv_seq *s);

#ifdef __cplusplus
}
#endif
#endif
