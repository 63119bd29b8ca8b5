/* rope_kv.c — CPU reference of RoPE (default, linear, llama3 scaling) on fused qkv rows
 * and the paged KV cache write. Entry points: ref_rope_inv_freq, ref_rope_kv_write. */
#include "rope_kv.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

void ref_rope_inv_freq(float *inv_freq, int head_dim, float theta, int kind, float factor,
                       float low_freq_factor, float high_freq_factor, int original_max_pos) {
  const float pi = 3.14159265358979323846f;
  int half = head_dim / 2;
  for (int i = 0; i < half; i++) {
    /* torch: arange(0, dim, 2).float() / dim, then base ** that, then 1 / that, in fp32 */
    float e = (float)(2 * i) / (float)head_dim;
    float inv = 1.0f / (float)pow((double)theta, (double)e);
    if (kind == REF_ROPE_LINEAR) {
      inv = inv / factor;
    } else if (kind == REF_ROPE_LLAMA3) {
      float old_len = (float)original_max_pos;
      float low_wavelen = old_len / low_freq_factor;
      float high_wavelen = old_len / high_freq_factor;
      float wavelen = 2.0f * pi / inv;
      float llama = wavelen > low_wavelen ? inv / factor : inv;
      if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
        float smooth = (old_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
        llama = (1.0f - smooth) * llama / factor + smooth * llama;
      }
      inv = llama;
    }
    inv_freq[i] = inv;
  }
}

static void rotate(float *x, int n_heads, int head_dim, const float *cs, const float *sn) {
  int half = head_dim / 2;
  for (int h = 0; h < n_heads; h++) {
    float *v = x + (size_t)h * head_dim;
    for (int i = 0; i < half; i++) {
      float a = v[i], b = v[i + half];
      v[i] = a * cs[i] - b * sn[i];
      v[i + half] = b * cs[i] + a * sn[i];
    }
  }
}

void ref_rope_kv_write(float *qkv, int ld, int n_tokens, const int32_t *pos, const int32_t *slot,
                       const float *inv_freq, int n_heads, int n_kv_heads, int head_dim,
                       float *k_cache, float *v_cache) {
  float cs[512], sn[512]; /* head_dim <= 1024 */
  int half = head_dim / 2;
  size_t kv_row = (size_t)n_kv_heads * head_dim;
  for (int t = 0; t < n_tokens; t++) {
    float *q = qkv + (size_t)t * ld;
    float *k = q + (size_t)n_heads * head_dim;
    float *v = k + kv_row;
    for (int i = 0; i < half; i++) {
      /* HF: freqs = inv_freq @ position in fp32, then cos/sin of that fp32 angle */
      float ang = (float)pos[t] * inv_freq[i];
      cs[i] = (float)cos((double)ang);
      sn[i] = (float)sin((double)ang);
    }
    rotate(q, n_heads, head_dim, cs, sn);
    rotate(k, n_kv_heads, head_dim, cs, sn);
    if (slot[t] < 0) continue;
    memcpy(k_cache + (size_t)slot[t] * kv_row, k, kv_row * sizeof(float));
    memcpy(v_cache + (size_t)slot[t] * kv_row, v, kv_row * sizeof(float));
  }
}
