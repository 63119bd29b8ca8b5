/* gen.h — a synchronous generation loop over the forward pass (eng_gen_run): prefill in
 * chunks, then batched decode of every sequence until EOS, max_tokens or the caller stops
 * it. For the generate command and tests; the server's scheduler is engine/sched. */
#ifndef ENG_GEN_H
#define ENG_GEN_H

#include "forward.h"
#include "kv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum eng_finish {
  ENG_FINISH_NONE = 0,   /* still running */
  ENG_FINISH_LENGTH = 1, /* max_tokens reached */
  ENG_FINISH_STOP = 2    /* EOS id, or the callback asked to stop (stop string) */
} eng_finish;

const char *eng_finish_name(eng_finish f); /* "length", "stop", "none" */

/* One sequence to continue. The caller fills the inputs; outputs are read-only. */
typedef struct eng_gen_seq {
  const int32_t *prompt; /* in: n_prompt >= 1 ids */
  int n_prompt;
  samp_params sp;
  int max_tokens;  /* in: new tokens at most (>= 1) */
  int ignore_eos;  /* in: 1: do not stop at the model's EOS ids */
  int32_t *ids;    /* out: generated ids (EOS excluded); malloc'd, free() it, also on error */
  float *logprobs; /* out: logprob of each id (malloc'd) */
  int n_ids;
  eng_finish finish;
  kv_seq kv_; /* private */
  int32_t *hist_;
  int n_done_;
} eng_gen_seq;

/* Called after each sampled token (EOS excluded) of sequence i; return 1 to stop that
 * sequence (finish STOP), 0 to go on, or a negative ns_err to abort the run. */
typedef int (*eng_gen_cb)(void *ud, int i, int32_t id, float logprob);

/* Run all n sequences to the end, prompt chunks and decodes sharing steps of at most
 * max_step_tokens rows (<= the fwd_t's max_tokens; each step needs one row per running
 * sequence). Pages come from kv and are returned at the end (also on error). on_prefill
 * (may be NULL) is called once when every prompt has been prefilled. Returns 0 or an
 * ns_err (NS_ENOMEM when the KV cache cannot hold the sequences). Engine thread. */
int eng_gen_run(fwd_t *f, kv_t *kv, eng_gen_seq *seqs, int n, int max_step_tokens, eng_gen_cb cb,
                void (*on_prefill)(void *ud), void *ud);

#ifdef __cplusplus
}
#endif
#endif
