/* rope_kv.h — CPU reference of rotary position embedding on fused q|k|v rows and the
 * paged KV cache write (ref_rope_inv_freq, ref_rope_kv_write). fp32 throughout. */
#ifndef K_REF_ROPE_KV_H
#define K_REF_ROPE_KV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* RoPE scaling kinds; the values equal engine/model.h's rope_kind. */
enum { REF_ROPE_DEFAULT = 0, REF_ROPE_LINEAR = 1, REF_ROPE_LLAMA3 = 2 };

/* inv_freq[i] for i < head_dim / 2, computed as HF transformers does in fp32:
 * 1 / theta^(2i / head_dim); LINEAR divides by factor; LLAMA3 rescales by wavelength band
 * (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings). Both
 * kinds have attention_scaling 1, so cos/sin are not rescaled. */
void ref_rope_inv_freq(float *inv_freq, int head_dim, float theta, int kind, float factor,
                       float low_freq_factor, float high_freq_factor, int original_max_pos);

/* For each of n_tokens rows of qkv (ld floats apart; q = n_heads * head_dim floats, then
 * k and v = n_kv_heads * head_dim each), rotate q and k in place by pos[t] (HF
 * rotate_half: pairs (i, i + head_dim/2), angle = (float)pos * inv_freq[i]) and copy the
 * rotated k and v into cache slot slot[t] (= page * page_tokens + pos % page_tokens):
 * k_cache and v_cache are this layer's [slots][n_kv_heads][head_dim]. A slot < 0 skips the
 * write (padding rows). head_dim is even and <= 1024. Any thread; no allocation. */
void ref_rope_kv_write(float *qkv, int ld, int n_tokens, const int32_t *pos, const int32_t *slot,
                       const float *inv_freq, int n_heads, int n_kv_heads, int head_dim,
                       float *k_cache, float *v_cache);

#ifdef __cplusplus
}
#endif
#endif
