/* sample.h — CPU reference of token sampling (ref_sample): logit bias, penalties, temperature,
 * top-k, top-p, min-p, a seeded Philox4x32-10 draw, logprobs. Order and semantics:
 * sample_params.h. */
#ifndef K_REF_SAMPLE_H
#define K_REF_SAMPLE_H

#include "sample_params.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Philox4x32-10 (Salmon et al., Random123): out = philox(ctr, key). */
void ref_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* The uniform draw of one sampling step: word 0 of Philox4x32-10 with key = seed (low
 * word first) and counter = (step low, step high, 0, 0), top 24 bits scaled to [0, 1). */
float ref_sample_uniform(uint64_t seed, uint64_t step);

/* Apply the logit bias, then the repetition, presence and frequency penalties of p to logits
 * in place. hist holds the prompt ids (n_prompt) followed by the generated ids (up to n_hist).
 * counts is [vocab] scratch that must be zero on entry and is zero again on return.
 * Returns 0, or NS_ERANGE when an id of hist or of the bias is outside [0, vocab) (logits
 * untouched). */
int ref_sample_penalize(float *logits, int vocab, const samp_params *p, const int32_t *hist,
                        int n_prompt, int n_hist, uint32_t *counts);

/* Bytes of scratch ref_sample needs for this vocabulary size. */
size_t ref_sample_scratch_bytes(int vocab);

/* Sample one token from logits [vocab] (left unmodified) under p, at step (the Philox
 * counter: the number of tokens this request has sampled before). scratch holds
 * ref_sample_scratch_bytes(vocab) bytes, 8-byte aligned, zeroed before its first use and
 * left reusable. Writes *id and *logprob: the log-softmax of the processed distribution
 * (after penalties, temperature and the top-k/top-p/min-p cuts; for temperature 0, of
 * the penalized logits) at id. When p->n_logprobs > 0, top_ids / top_logprobs get the
 * p->n_logprobs most likely tokens of that distribution, most likely first (cut tokens
 * have -INFINITY). Returns 0, NS_ERANGE (bad hist id) or NS_EINVAL (no finite logit).
 * Any thread; no allocation. */
int ref_sample(const float *logits, int vocab, const samp_params *p, const int32_t *hist,
               int n_prompt, int n_hist, uint64_t step, void *scratch, int32_t *id, float *logprob,
               int32_t *top_ids, float *top_logprobs);

#ifdef __cplusplus
}
#endif
#endif
