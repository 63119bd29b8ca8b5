/* attention.c — CPU reference of causal GQA attention over a paged KV cache, one query
 * row and head at a time with an online softmax. Entry point: ref_attention. */
#include "attention.h"

#include <math.h>
#include <stddef.h>

static float dot(const float *a, const float *b, int n) {
  float acc[8] = {0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++)
      acc[j] += a[i + j] * b[i + j];
  for (; i < n; i++)
    acc[0] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void ref_attention(float *out, int ldo, const float *q, int ldq, int n_seqs, const int32_t *tok0,
                   const int32_t *n_new, const int32_t *pos0, const int32_t *block_table,
                   int bt_stride, const float *k_cache, const float *v_cache, int page_tokens,
                   int n_heads, int n_kv_heads, int head_dim, float scale, int h_begin, int h_end) {
  int group = n_heads / n_kv_heads;
  size_t slot_stride = (size_t)n_kv_heads * head_dim;
  for (int s = 0; s < n_seqs; s++) {
    const int32_t *bt = block_table + (size_t)s * bt_stride;
    for (int i = 0; i < n_new[s]; i++) {
      int row = tok0[s] + i;
      int p = pos0[s] + i;
      for (int h = h_begin; h < h_end; h++) {
        const float *qh = q + (size_t)row * ldq + (size_t)h * head_dim;
        float *o = out + (size_t)row * ldo + (size_t)h * head_dim;
        size_t kvo = (size_t)(h / group) * head_dim;
        float m = -INFINITY, l = 0.0f;
        for (int d = 0; d < head_dim; d++)
          o[d] = 0.0f;
        for (int j = 0; j <= p; j++) {
          size_t slot = (size_t)bt[j / page_tokens] * page_tokens + (size_t)(j % page_tokens);
          const float *k = k_cache + slot * slot_stride + kvo;
          const float *v = v_cache + slot * slot_stride + kvo;
          float sc = dot(qh, k, head_dim) * scale;
          if (sc > m) { /* rescale what was accumulated under the old maximum */
            float c = expf(m - sc);
            l *= c;
            for (int d = 0; d < head_dim; d++)
              o[d] *= c;
            m = sc;
          }
          float e = expf(sc - m);
          l += e;
          for (int d = 0; d < head_dim; d++)
            o[d] += e * v[d];
        }
        float inv = 1.0f / l;
        for (int d = 0; d < head_dim; d++)
          o[d] *= inv;
      }
    }
  }
}
