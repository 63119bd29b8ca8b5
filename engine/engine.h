/* engine.h — the engine thread's public API: eng_start loads the model and starts the
 * thread that owns the backend and the scheduler; the loop thread submits and cancels
 * requests and drains the engine's events (eng_poll).
 *
 * Threads: every eng_* function is called from ONE thread, the caller's (the libuv loop
 * thread in the daemon), except eng_stats, which any thread may call. The engine never
 * calls back into the caller's thread on its own: when it has events it calls the notify
 * function given to eng_start (from the engine thread; the daemon passes uv_async_send),
 * and the caller then runs eng_poll on its own thread, which delivers them. */
#ifndef ENG_ENGINE_H
#define ENG_ENGINE_H

#include "cfg.h"
#include "request.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct eng_t eng_t;

/* Called from the engine thread whenever events are waiting (coalescing is fine). */
typedef void (*eng_notify_fn)(void *ud);
/* Delivers one event on the caller's thread (inside eng_poll). The event and the memory
 * it points to are valid only during the call. */
typedef void (*eng_event_fn)(void *ud, const eng_event *ev);

/* Load cfg->engine.model on cfg->engine.backend, size the KV cache and start the engine
 * thread. Returns 0 or an ns_err with a message in err (the model folder, the tensor,
 * the backend that failed). cfg must outlive the engine. */
int eng_start(const cfg_t *cfg, eng_notify_fn notify, void *notify_ud, eng_t **out, char *err,
              size_t errlen);

/* Hand req to the engine (the engine owns it from here, also on error). Checks, without
 * waiting for the engine thread, that the prompt is not empty, its ids are in the
 * vocabulary, max_tokens >= 1, prompt + max_tokens fit the context and the whole KV cache,
 * and the sampling settings are in range; returns 0, NS_EINVAL (err says which limit),
 * NS_EBUSY (scheduler.max_queue requests wait: answer 429), NS_ECLOSED (draining or
 * stopping), NS_ENOMEM, or the backend's error once the engine is dead (eng_stats.dead).
 * On success exactly one final event (EV_DONE or EV_ERROR) follows for req->id. */
int eng_submit(eng_t *e, eng_req *req, char *err, size_t errlen);
/* Cancel a request in any state; idempotent; unknown and finished ids are ignored. The
 * engine wakes and handles it before its next step (so while queued, between prefill
 * chunks, between decode steps): pages are freed at once and the final event is EV_DONE
 * with finish ENG_FIN_CANCELLED (a request that finished meanwhile ends normally). */
void eng_cancel(eng_t *e, uint64_t req_id);
/* Deliver every waiting event to cb. Returns the number delivered. */
int eng_poll(eng_t *e, eng_event_fn cb, void *ud);

/* Stop admitting (later eng_submit: NS_ECLOSED); running and queued requests go on to
 * their normal end. The caller counts its outstanding requests (each gets one final
 * event) or watches eng_stats (running + waiting == 0) to know when it is drained. */
void eng_drain(eng_t *e);
/* Fail every request still queued or running (final EV_ERROR, NS_ECLOSED, "server
 * shutting down"), stop and join the engine thread, deliver every event still waiting to
 * cb (on the caller's thread, as eng_poll would; cb NULL drops them), free everything.
 * The notify function may run until eng_stop returns. NULL e is fine. */
void eng_stop(eng_t *e, eng_event_fn cb, void *ud);

/* A consistent snapshot for /metrics and /health. Any thread. */
typedef struct eng_stats_t {
  int running, waiting; /* requests decoding or prefilling; queued (submitted, not admitted,
                           preempted ones included) */
  int kv_pages_used, kv_pages_total;
  int batch_size;         /* sequences in the last step */
  uint64_t steps;         /* steps run since start */
  uint64_t preemptions;   /* sequences preempted (KV pages ran out), recomputed later */
  double last_progress_s; /* eng_now() of the last step or idle check (>= 1 per second
                             while the engine thread is alive and not stuck in a step) */
  uint64_t pool_bytes_in_use, pool_bytes_total, pool_largest_free; /* 0 on the CPU */
  double pool_fragmentation;
  int dead; /* 1: unrecoverable backend error; /health fails */
  char model_name[128];
  int max_context; /* tokens a request may use (prompt + max_tokens): min of
                      engine.max_seq_len (when set) and max_position_embeddings */
  int vocab_size;
} eng_stats_t;
void eng_stats(eng_t *e, eng_stats_t *out);

/* The tokenizer of the loaded model (read-only, safe from any thread, e.g. the libuv
 * thread pool for prompt tokenization). */
const struct tok *eng_tokenizer(const eng_t *e);

/* Monotonic seconds: the clock of queue_deadline_s, last_progress_s and the timings. Any
 * thread. */
double eng_now(void);

#ifdef __cplusplus
}
#endif
#endif
