/* rmsnorm.c — CPU reference of the fused residual add + RMSNorm.
 * Entry point: ref_add_rmsnorm. */
#include "rmsnorm.h"

#include <math.h>
#include <stddef.h>

void ref_add_rmsnorm(float *out, float *residual, const float *x, const float *w, int n_rows,
                     int dim, int ld, float eps, int first) {
  for (int r = 0; r < n_rows; r++) {
    float *res = residual + (size_t)r * ld;
    const float *xr = x + (size_t)r * ld;
    float *o = out + (size_t)r * ld;
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= dim; i += 8) {
      for (int j = 0; j < 8; j++) {
        float v = first ? xr[i + j] : res[i + j] + xr[i + j];
        res[i + j] = v;
        acc[j] += v * v;
      }
    }
    for (; i < dim; i++) {
      float v = first ? xr[i] : res[i] + xr[i];
      res[i] = v;
      acc[0] += v * v;
    }
    float ss = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    float inv = 1.0f / sqrtf(ss / (float)dim + eps);
    for (i = 0; i < dim; i++)
      o[i] = w[i] * (res[i] * inv);
  }
}
