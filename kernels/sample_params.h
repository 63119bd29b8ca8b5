/* sample_params.h — per-request sampling settings, shared by the engine, the CPU
 * reference sampler (ref/sample.h) and the CUDA sampler. Plain data, any thread. */
#ifndef K_SAMPLE_PARAMS_H
#define K_SAMPLE_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One logit_bias entry. */
typedef struct samp_bias {
  int32_t id; /* in [0, vocab); a list's ids strictly increasing (each at most once) */
  float bias; /* finite; the API takes [-100, 100] */
} samp_bias;

#define SAMP_MAX_BIAS 1024 /* entries in one request's list */

/* Processing order (the reference and the GPU sampler follow it exactly):
 * logit bias (OpenAI's logit_bias: each listed id's bias added to its logit)
 * -> repetition penalty (HF: over the unique ids of prompt + generated; a positive logit is
 * divided by it, a negative one multiplied) -> presence and frequency penalties (OpenAI:
 * logit -= frequency * count + presence * (count > 0), counts over generated ids only)
 * -> temperature 0: argmax (lowest id on ties), done
 * -> logits / temperature -> top-k -> top-p -> min-p (HF warper order)
 * -> draw u from Philox4x32-10 (key = seed, counter = step) and take the inverse CDF of
 *    the kept tokens in vocabulary order. */
typedef struct samp_params {
  float temperature;        /* 0: greedy; > 0 otherwise */
  int top_k;                /* 0: off; else keep the k largest (lowest ids on ties) */
  float top_p;              /* 1: off; keep a token while the mass ranked above it < top_p */
  float min_p;              /* 0: off; keep tokens with p >= min_p * max p */
  float repetition_penalty; /* 1: off; > 0 */
  float presence_penalty;   /* 0: off; OpenAI range [-2, 2] */
  float frequency_penalty;  /* 0: off; OpenAI range [-2, 2] */
  uint64_t seed;            /* Philox key; a request without a seed gets a random one */
  int n_logprobs;           /* top-n logprobs to report besides the chosen token's; 0: none */
  samp_bias *bias;          /* n_bias entries (NULL: none); owned by whoever built the request
                               (eng_req: freed by eng_req_free); copies of the params borrow it */
  int n_bias;
} samp_params;

#define SAMP_MAX_LOGPROBS 20

/* OpenAI's defaults: temperature 1, no truncation, no penalties, no bias, seed 0. */
static inline samp_params samp_params_default(void) {
  samp_params p = {1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0, 0, NULL, 0};
  return p;
}

#ifdef __cplusplus
}
#endif
#endif
