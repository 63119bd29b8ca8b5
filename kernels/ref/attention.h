/* attention.h — CPU reference of causal GQA attention over a paged KV cache for a ragged
 * batch (ref_attention). fp32 throughout, online softmax (no scratch memory). */
#ifndef K_REF_ATTENTION_H
#define K_REF_ATTENTION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* For each sequence s < n_seqs: its n_new[s] new tokens are batch rows tok0[s] ..
 * tok0[s] + n_new[s] - 1 at positions pos0[s] .. pos0[s] + n_new[s] - 1, and the cache
 * already holds k and v of positions 0 .. pos0[s] + n_new[s] - 1 (rope_kv_write ran).
 * Position p of sequence s lives in slot block_table[s * bt_stride + p / page_tokens] *
 * page_tokens + p % page_tokens of k_cache / v_cache ([slots][n_kv_heads][head_dim]).
 *
 * For each new token at position p and head h in [h_begin, h_end) (kv head
 * h / (n_heads / n_kv_heads)):
 *   out[row, h, :] = softmax_j<=p(q[row, h] . k[j] * scale) . v[j]
 * q rows are ldq floats apart (q at the start of each row: fused qkv rows work), out rows
 * ldo apart; out must not alias q or the cache. A caller splits work over threads by head
 * ranges or by sequence subsets (offset the per-sequence arrays and block_table).
 * Any thread; no allocation. */
void ref_attention(float *out, int ldo, const float *q, int ldq, int n_seqs, const int32_t *tok0,
                   const int32_t *n_new, const int32_t *pos0, const int32_t *block_table,
                   int bt_stride, const float *k_cache, const float *v_cache, int page_tokens,
                   int n_heads, int n_kv_heads, int head_dim, float scale, int h_begin, int h_end);

#ifdef __cplusplus
}
#endif
#endif
