/* sample.h — token sampling on the GPU (k_sample): logit bias, penalties, temperature, top-k,
 * top-p, min-p, the Philox4x32-10 draw and logprobs, one block per request (a cluster of blocks
 * for a plain greedy one); logits stay on the device. Reference with the same semantics and random
 * stream: ref/sample.h (ref_sample). */
#ifndef K_SAMPLE_H
#define K_SAMPLE_H

#include "sample_params.h"

#include <cuda_runtime.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One sampling request (plain data, built on the host, uploaded). */
typedef struct k_samp_req {
  int32_t row; /* logits row */
  int32_t top_k, n_logprobs;
  float temperature, top_p, min_p, rep, pres, freq;
  uint32_t seed_lo, seed_hi, step_lo, step_hi;
  int32_t hist_off; /* hist[hist_off ..]: prompt ids then generated ids (device memory) */
  int32_t n_hist, n_prompt;
  int32_t bias_off; /* hist[bias_off ..]: n_bias (id, bias's float bits) pairs */
  int32_t n_bias;
} k_samp_req;

/* One result (device memory; copied back by the caller). */
typedef struct k_samp_out {
  int32_t id;
  float logprob;
  int32_t status; /* 0, or NS_EINVAL when the row has no finite logit */
  int32_t n_top;  /* entries of top_ids / top_lp filled */
  int32_t top_ids[SAMP_MAX_LOGPROBS];
  float top_lp[SAMP_MAX_LOGPROBS];
} k_samp_out;

/* Fill a request from samp_params (penalties are applied only when some are on; hist
 * and n_hist then describe the history in the uploaded hist array). p's n_bias logit bias
 * entries are in that array too, from bias_off, as (id, float bits) pairs. */
void k_samp_req_init(k_samp_req *r, int row, const samp_params *p, uint64_t step, int hist_off,
                     int n_hist, int n_prompt, int bias_off);

/* Sample every request: logits fp32 [rows][ld] (vocab used), reqs and out [n_reqs] and hist
 * in device memory. Scratch: scratch_rows rows of vocab floats (scratch_v) and of vocab
 * uint32 (scratch_cnt), any contents; requests run scratch_rows at a time. Results match
 * ref_sample on the same logits (same ids, logprobs to rounding) except where the draw or
 * a top-p boundary falls within float rounding of a CDF step (sums here run in another
 * order). Hist and bias ids must be in [0, vocab), and a request's bias ids distinct (the
 * caller checks). Returns 0, NS_EINVAL or NS_ECUDA. */
int k_sample(const float *logits, int ld, int vocab, const k_samp_req *reqs, int n_reqs,
             const int32_t *hist, float *scratch_v, uint32_t *scratch_cnt, int scratch_rows,
             k_samp_out *out, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
