/* attention.h — causal GQA attention over the paged KV cache on the GPU for a ragged batch:
 * k_attn_plan splits the batch's rows into work items on the host, k_attention runs them.
 * Batch-invariant: a query row's output bits depend only on its own query, keys and values,
 * not on the other rows of the step or the prompt's chunking. k_attention_decode is a
 * decode-only path for CUDA graphs (fixed slots, lengths on the device). Reference with the
 * same semantics: ref/attention.h (ref_attention). */
#ifndef K_ATTENTION_H
#define K_ATTENTION_H

#include "gemm.h"
#include "kv_layout.h"

#include <cuda_runtime.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* k_attention_decode takes keys in chunks of this many from position 0: a slot of L keys is
 * split into ceil(L / K_ATTN_CHUNK) pieces, whatever the batch. */
#define K_ATTN_CHUNK 256

/* A prefill work item: new tokens i0 .. i0 + rows - 1 of sequence seq. */
typedef struct k_pf_item {
  int32_t seq, i0;
} k_pf_item;

/* Query vectors (row, head pairs) of one work item, and its rows for a GQA group of g query
 * heads. */
#define K_ATTN_PF_VEC 64
static inline int k_attn_pf_rows(int group) {
  return group >= K_ATTN_PF_VEC ? 1 : K_ATTN_PF_VEC / group;
}

/* Plan a step on the host: sequence s has n_new[s] new tokens (0: none to run here, e.g. a
 * decode row that k_attention_decode takes); its rows become items of k_attn_pf_rows rows.
 * Writes at most max_pf items to pf (the batch's token count is always enough). Returns 0,
 * NS_EINVAL (bad head counts) or NS_ERANGE (pf too small). Any thread. */
int k_attn_plan(int n_seqs, const int32_t *n_new, int n_heads, int n_kv_heads, k_pf_item *pf,
                int max_pf, int *n_pf);

/* Chunk states enough for n_seqs decode slots holding at most total_keys keys together. */
static inline int64_t k_attn_max_dec(int64_t n_seqs, int64_t total_keys) {
  return n_seqs + (total_keys + K_ATTN_CHUNK - 1) / K_ATTN_CHUNK;
}

/* One attention call. Device pointers except where noted. */
typedef struct k_attn_args {
  void *out; /* bf16 [rows][ldo]: head h of row t at out + t * ldo + h * head_dim */
  int ldo;
  const void *q; /* bf16 fused qkv rows (q first), ldq values apart */
  int ldq;
  const int32_t *tok0, *n_new, *pos0; /* [n_seqs] */
  const int32_t *pt_off;              /* [n_seqs]: first page of each sequence in pages */
  const int32_t *pages;               /* concatenated page tables */
  const k_pf_item *pf;                /* k_attn_plan's items, uploaded */
  int n_pf;                           /* host value */
  k_kv_layout kv;
  int layer;
  int n_heads, n_kv_heads, head_dim;
  float scale; /* softmax scale, 1 / sqrt(head_dim) */
} k_attn_args;

/* Run the planned items: out rows of every new token of every planned sequence. head_dim a
 * multiple of 8 and <= 256, n_heads / n_kv_heads <= 16; ldq a multiple of 8, ldo of 2; the
 * cache holds k and v of every position < pos0 + n_new (k_rope_kv_write ran). Returns 0,
 * NS_EINVAL or NS_ECUDA. */
int k_attention(const k_attn_args *a, cudaStream_t st);

/* ---- decode over fixed slots (CUDA-graph friendly) ---------------------------------------- */

/* One decode step over n_slots sequence slots, each with one new token. The launch depends on
 * the host values n_slots and max_len alone and every length is read on the device, so a
 * graph captured once replays for any lengths <= max_len. Device pointers except where
 * noted. */
typedef struct k_attn_dec_args {
  void *out; /* bf16, 16-byte aligned: head h of slot s at out + tok0[s] * ldo + h * head_dim */
  int ldo;
  const void *q; /* bf16 fused qkv rows (q first), ldq values apart, 16-byte aligned */
  int ldq;
  const int32_t *tok0;     /* [n_slots]: the slot's query row and output row */
  const int32_t *pos0;     /* [n_slots]: its token's position; it attends to keys 0 .. pos0.
                              pos0 < 0: an empty slot, nothing read or written for it */
  const int32_t *pt_off;   /* [n_slots]: its first page in pages */
  const int32_t *pages;    /* concatenated page tables */
  int n_slots;             /* host, <= 65535 */
  int max_len;             /* host: >= pos0 + 1 of every slot; a longer slot is left unwritten */
  float *part_o;           /* fp32 scratch of k_attn_dec_scratch elements (NULL when that is 0) */
  float *part_ml;          /* fp32 scratch, likewise; both 16-byte aligned */
  const int32_t *part_off; /* [n_slots] or NULL: the first chunk state of slot s in the scratch
                              (states s * ceil(max_len / K_ATTN_CHUNK) .. when NULL); with it,
                              the scratch needs one state per chunk of the slots' own lengths
                              (k_attn_max_dec(n_slots, their keys) x n_heads) */
  unsigned *cnt;           /* [n_slots * n_kv_heads] or NULL: chunk counters, zero before the
                              call and left zero. With them, the last block to finish a slot of
                              at most K_ATTN_FUSE_CHUNKS chunks merges its states; without (or
                              for longer slots) a second kernel does. The same bits either way */
  k_kv_layout kv;
  int layer;
  int n_heads, n_kv_heads, head_dim;
  float scale; /* softmax scale, 1 / sqrt(head_dim) */
  /* Optional (rope.part NULL: none): k_rope_kv_write_part's work for the step's rows, done
   * here — q|k|v from a lazy decode GEMM's partial sums (rope.T rows), rotated at rope_pos[t],
   * k and v written to the cache at rope_slot[t] and the rows of q (then written, not only
   * read) as k_rope_kv_write_part writes them: inside the attention where the launch allows it
   * (at most 16 rows, head_dim <= 128, at most 8 query heads a kv head, one chunk a block),
   * else by that function first; the same bits either way, except that the fused form leaves
   * alone the rows no non-empty slot names (nothing reads them). */
  k_dec_part rope;
  const int32_t *rope_pos, *rope_slot;
  const float *inv_freq;
} k_attn_dec_args;

/* Blocks per (slot, kv head) are one per chunk of K_ATTN_CHUNK keys of max_len, capped so that
 * a grid holds about this many blocks at most (blocks then loop over chunks z, z + split, ..):
 * an oversized max_len costs idle blocks, never a different result. (16384 before: a graph's
 * max_len is the whole context, so at batch 128 most of those blocks had no chunk; 4096 made
 * llama3-8b steps 0.6-1.8% faster on an H200, bench/RESULTS.md.) */
#define K_ATTN_DEC_MAX_BLOCKS 4096
/* Slots of at most this many chunks have their states merged by the decode kernel's last
 * block (given counters; in a small launch, slots of up to 8 by the blocks of a cluster, in
 * shared memory); longer ones by a second kernel that spreads the merge over a block per
 * query head. */
#define K_ATTN_FUSE_CHUNKS 32

/* Scratch of k_attention_decode, in fp32 elements: one softmax state per slot, head and chunk
 * of max_len (written only for slots of more than one chunk; none when max_len fits one). */
static inline void k_attn_dec_scratch(int64_t n_slots, int64_t max_len, int64_t n_heads,
                                      int64_t head_dim, int64_t *part_o, int64_t *part_ml) {
  int64_t nch = (max_len + K_ATTN_CHUNK - 1) / K_ATTN_CHUNK;
  if (nch <= 1) nch = 0;
  *part_o = n_slots * nch * n_heads * head_dim;
  *part_ml = n_slots * nch * n_heads * 2;
}

/* Causal GQA attention of each slot's one query row over its keys 0 .. pos0 (as
 * ref_attention with n_new 1). Batch-invariant: a row's bits depend on its query, keys,
 * values and length alone, not on n_slots, max_len or the other slots (they are not the bits
 * k_attention gives the same row: the chunks are computed differently, p rounded to bf16 for
 * the tensor cores). head_dim a multiple of 8 and <= 256, n_heads / n_kv_heads <= 16, ldq
 * and ldo multiples of 8, page_tokens a power of two >= 8. No host synchronisation or
 * allocation: capturable in a CUDA graph once a first call with the same head_dim and group
 * size (which may set a kernel attribute) ran outside the capture. Engine thread. Returns 0,
 * NS_EINVAL or NS_ECUDA. */
int k_attention_decode(const k_attn_dec_args *a, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
