/* swiglu.h — CPU reference of the SwiGLU activation over fused gate|up rows (ref_swiglu).
 * fp32 throughout: the CPU backend converts bf16/f16 weights to fp32 at load. */
#ifndef K_REF_SWIGLU_H
#define K_REF_SWIGLU_H

#ifdef __cplusplus
extern "C" {
#endif

/* out[t, i] = silu(gu[t, i]) * gu[t, inter + i] for t < n_tokens, i < inter, where
 * silu(g) = g / (1 + exp(-g)). gate_up rows are ldg floats apart (>= 2 * inter), out rows
 * ldo apart; out must not alias gate_up. Any thread; no allocation. */
void ref_swiglu(float *out, int ldo, const float *gate_up, int ldg, int n_tokens, int inter);

#ifdef __cplusplus
}
#endif
#endif
