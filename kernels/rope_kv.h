/* rope_kv.h — RoPE on fused q|k|v rows and the paged KV cache write on the GPU, in one
 * kernel (k_rope_kv_write). Reference with the same arguments: ref/rope_kv.h. */
#ifndef K_ROPE_KV_H
#define K_ROPE_KV_H

#include "gemm.h"
#include "kv_layout.h"

#include <cuda_runtime.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* For each of n_tokens rows of qkv (bf16, ld values apart; q = n_heads * head_dim values,
 * then k and v = n_kv_heads * head_dim each), rotate q and k in place by pos[t] (HF
 * rotate_half; angle = (float)pos * inv_freq[i], cos/sin in double rounded to float, as
 * the reference) and copy the rotated k and v into layer `layer` of the cache at slot[t]
 * (page slot / page_tokens, offset slot % page_tokens; < 0 skips). pos, slot and
 * inv_freq ([head_dim / 2] fp32, ref_rope_inv_freq) are device memory. Any Qwen2 q|k|v
 * bias must already be in qkv (the GEMM epilogue adds it). head_dim even, <= 256, and a
 * multiple of 8; n_heads <= 4096; ld a multiple of 8. Returns 0, NS_EINVAL or NS_ECUDA. */
int k_rope_kv_write(void *qkv, int ld, int n_tokens, const int32_t *pos, const int32_t *slot,
                    const float *inv_freq, int n_heads, int n_kv_heads, int head_dim,
                    const k_kv_layout *kv, int layer, cudaStream_t st);

/* k_rope_kv_write with the rows' values read from a lazy decode GEMM's partial sums (gemm.h,
 * k_gemm_dec_lazy; qp->T == n_tokens, qp->N the row's q, k and v values): the same bits in
 * qkv and the cache as k_rope_kv_write on what k_gemm_dec would have stored; v is stored to
 * the rows too. Returns 0, NS_EINVAL or NS_ECUDA. */
int k_rope_kv_write_part(void *qkv, int ld, const k_dec_part *qp, int n_tokens, const int32_t *pos,
                         const int32_t *slot, const float *inv_freq, int n_heads, int n_kv_heads,
                         int head_dim, const k_kv_layout *kv, int layer, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
