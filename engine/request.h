/* request.h — one generation request as the engine sees it, its lifecycle, and the
 * events the engine sends back about it (engine.h). Plain data shared by the loop thread
 * and the engine thread; ownership moves with eng_submit.
 *
 * Lifecycle (eng_req.state, written by the engine thread only):
 *   ENG_QUEUED ──admitted: pages reserved for the prompt──▶ ENG_PREFILLING
 *   ENG_PREFILLING ──last prompt chunk run, first token sampled──▶ ENG_DECODING
 *   ENG_DECODING ──EOS / stop string / max_tokens──▶ ENG_FINISHED
 *   any state ──eng_cancel, client gone──▶ ENG_CANCELLED
 *   ENG_QUEUED ──queue deadline passed──▶ ENG_FAILED (EV_ERROR NS_ETIMEDOUT)
 *   any state ──backend error, out of memory──▶ ENG_FAILED
 *   ENG_DECODING ──pages ran out: preempted (pages freed, recomputed later)──▶ ENG_QUEUED
 * A finished, cancelled or failed request gets exactly one final event and is freed by
 * the engine. */
#ifndef ENG_REQUEST_H
#define ENG_REQUEST_H

#include "sample_params.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum eng_req_state {
  ENG_QUEUED = 0,
  ENG_PREFILLING = 1,
  ENG_DECODING = 2,
  ENG_FINISHED = 3,
  ENG_CANCELLED = 4,
  ENG_FAILED = 5
} eng_req_state;

typedef enum eng_fin {
  ENG_FIN_NONE = 0,
  ENG_FIN_LENGTH = 1,   /* max_tokens */
  ENG_FIN_STOP = 2,     /* EOS id or a stop string */
  ENG_FIN_CANCELLED = 3 /* eng_cancel */
} eng_fin;

#define ENG_MAX_STOP     8
#define ENG_MAX_STOP_IDS 64

/* Built by the caller (malloc'd, with eng_req_new), handed over by eng_submit; after that
 * the caller touches it no more. */
typedef struct eng_req {
  uint64_t id;              /* unique, chosen by the caller */
  int32_t *prompt;          /* owned: malloc'd ids */
  int n_prompt;             /* >= 1 */
  int max_tokens;           /* >= 1 */
  int ignore_eos;           /* 1: keep generating past EOS ids */
  samp_params sp;           /* sp.bias, when set, is owned: malloc'd */
  char *stop[ENG_MAX_STOP]; /* owned: malloc'd stop strings (checked on decoded text) */
  int n_stop;
  int32_t *stop_ids; /* owned (malloc'd): ids that end the request as EOS does (vLLM's
                        stop_token_ids; ignore_eos does not apply to them) */
  int n_stop_ids;
  int stream;              /* 1: an EV_TOKENS per sampled id (text may be empty while held
                              back); 0: one EV_TOKENS with it all right before EV_DONE */
  double queue_deadline_s; /* eng_now() seconds: still queued then, the request fails with
                              EV_ERROR NS_ETIMEDOUT (answer 503); 0: submission time +
                              scheduler.queue_timeout_s */
  eng_req_state state;     /* the engine's, after eng_submit (the caller may not read it) */
} eng_req;

/* A zeroed request with default sampling; NULL when out of memory. */
eng_req *eng_req_new(void);
/* Free a request and what it owns (prompt, stop strings and ids, logit bias). Only for a request
 * never handed to eng_submit: eng_submit frees it itself, also when it fails. */
void eng_req_free(eng_req *r);

typedef enum eng_ev_kind { EV_TOKENS = 1, EV_DONE = 2, EV_ERROR = 3 } eng_ev_kind;

typedef struct eng_event {
  eng_ev_kind kind;
  uint64_t req_id;
  uint64_t step; /* the engine step after which it was sent (eng_stats.steps then) */
  /* EV_TOKENS: text newly complete (valid UTF-8, stop strings held back and cut) and the
   * ids sampled since the last event (an EOS that ends the request included: it has no
   * text), with their logprobs (and top-n when asked). Every EV_TOKENS comes before the request's
   * final event; a cancelled request gets none after the cancellation. */
  const char *text;
  size_t text_len;
  const int32_t *ids;
  const float *logprobs;
  int n_ids;
  int n_top;                 /* top entries per id (sp.n_logprobs) */
  const int32_t *top_ids;    /* [n_ids][n_top] */
  const float *top_logprobs; /* [n_ids][n_top] */
  int last; /* 1 on the EV_TOKENS the request's end sends: its text includes what the
               detokenizer held back until then */
  /* EV_DONE (usage also on EV_ERROR) */
  eng_fin finish;
  int stop_idx;          /* finish STOP by a stop string: its index in eng_req.stop; else -1
                            (EOS, length, cancelled) */
  int32_t stop_id;       /* finish STOP by one of eng_req.stop_ids: that id; else -1 */
  int prompt_tokens;     /* the request's n_prompt */
  int completion_tokens; /* ids sampled, EOS counted (as vLLM and OpenAI do) */
  double queue_s;        /* submit → admitted */
  double ttft_s;         /* submit → first token; 0 when none */
  /* EV_ERROR */
  int err; /* ns_err */
  const char *msg;
} eng_event;

#ifdef __cplusplus
}
#endif
#endif
