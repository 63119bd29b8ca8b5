/* matmul.c — CPU reference GEMM y = x . W^T (+ bias), W in HF [out, in] layout.
 * Entry point: ref_matmul. Four W rows are dotted with one x row at a time so each x
 * load feeds four accumulator sets; the loops over K are contiguous and vectorize. */
#include "matmul.h"

#include <stddef.h>

static inline float hsum8(const float a[8]) {
  return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

/* y[0..3] = dot(x, w0..w3) over K. */
static void dot4(float *y, const float *x, const float *w0, const float *w1, const float *w2,
                 const float *w3, int K) {
  float a0[8] = {0}, a1[8] = {0}, a2[8] = {0}, a3[8] = {0};
  int k = 0;
  for (; k + 8 <= K; k += 8) {
    for (int j = 0; j < 8; j++) {
      float xv = x[k + j];
      a0[j] += xv * w0[k + j];
      a1[j] += xv * w1[k + j];
      a2[j] += xv * w2[k + j];
      a3[j] += xv * w3[k + j];
    }
  }
  for (; k < K; k++) {
    a0[0] += x[k] * w0[k];
    a1[0] += x[k] * w1[k];
    a2[0] += x[k] * w2[k];
    a3[0] += x[k] * w3[k];
  }
  y[0] = hsum8(a0);
  y[1] = hsum8(a1);
  y[2] = hsum8(a2);
  y[3] = hsum8(a3);
}

static float dot1(const float *x, const float *w, int K) {
  float a[8] = {0};
  int k = 0;
  for (; k + 8 <= K; k += 8)
    for (int j = 0; j < 8; j++)
      a[j] += x[k + j] * w[k + j];
  for (; k < K; k++)
    a[0] += x[k] * w[k];
  return hsum8(a);
}

void ref_matmul(float *y, int ldy, const float *x, int ldx, const float *w, const float *bias,
                int T, int N, int K) {
  int n = 0;
  /* Blocks of 4 W rows stay in L1 while every x row passes over them. */
  for (; n + 4 <= N; n += 4) {
    const float *w0 = w + (size_t)n * K;
    for (int t = 0; t < T; t++) {
      float r[4];
      dot4(r, x + (size_t)t * ldx, w0, w0 + K, w0 + 2 * (size_t)K, w0 + 3 * (size_t)K, K);
      float *yr = y + (size_t)t * ldy + n;
      for (int j = 0; j < 4; j++)
        yr[j] = r[j] + (bias ? bias[n + j] : 0.0f);
    }
  }
  for (; n < N; n++) {
    const float *wr = w + (size_t)n * K;
    for (int t = 0; t < T; t++)
      y[(size_t)t * ldy + n] = dot1(x + (size_t)t * ldx, wr, K) + (bias ? bias[n] : 0.0f);
  }
}
