/* swiglu.c — CPU reference of SiLU(gate) * up over fused gate|up projection rows.
 * Entry point: ref_swiglu. */
#include "swiglu.h"

#include <math.h>
#include <stddef.h>

void ref_swiglu(float *out, int ldo, const float *gate_up, int ldg, int n_tokens, int inter) {
  for (int t = 0; t < n_tokens; t++) {
    const float *g = gate_up + (size_t)t * ldg;
    const float *u = g + inter;
    float *o = out + (size_t)t * ldo;
    for (int i = 0; i < inter; i++)
      o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
  }
}
