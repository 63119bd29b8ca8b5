/* forward.h — the transformer forward pass, written once over backend ops (backend.h) for
 * a ragged batch: fwd_create sizes the activation workspaces, fwd_step runs one step. */
#ifndef ENG_FORWARD_H
#define ENG_FORWARD_H

#include "backend.h"
#include "kv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fwd_t fwd_t;

/* Workspaces in backend memory for steps of up to max_tokens rows and max_out logits
 * rows (max_out = max_tokens allows all_logits batches). The backend must have its
 * weights loaded; it must outlive the fwd_t. Returns 0, NS_EINVAL or NS_ENOMEM. */
int fwd_create(backend_t *be, int max_tokens, int max_out, fwd_t **out);
void fwd_destroy(fwd_t *f);
backend_t *fwd_backend(const fwd_t *f);
int fwd_max_tokens(const fwd_t *f);

/* One step over batch b: step_begin; embed; per layer add_rmsnorm, qkv matmul (+bias),
 * rope_kv_write, attention, o matmul, add_rmsnorm, gate_up matmul, swiglu, down matmul;
 * then only for the out rows: gather, final add_rmsnorm, LM head; then, when out is not
 * NULL, sample every sampling sequence; step_end. When logits is not NULL it gets a view
 * [n_out, vocab] fp32 in backend memory (to_host to read it), valid until the next step.
 * The KV cache keeps k and v of the batch's positions. Returns 0 or an ns_err (NS_ERANGE
 * for a batch larger than the workspaces). Engine thread. */
int fwd_step(fwd_t *f, const batch_t *b, step_out_t *out, tensor_t *logits);

/* fwd_step in two halves, so that the caller can work (e.g. run a step of another lane)
 * while the backend computes: fwd_submit runs everything up to step_end (on CUDA it only
 * enqueues); fwd_wait is step_end (results in out on return). b, and out, must stay valid
 * until fwd_wait; the ops see b only during fwd_submit. After a failed fwd_submit the step
 * is already ended (no fwd_wait). The backend's step_poll says when fwd_wait would not
 * block. */
int fwd_submit(fwd_t *f, const batch_t *b, step_out_t *out);
int fwd_wait(fwd_t *f, step_out_t *out);

/* Run one greedy decode step of every batch size and context class the backend keeps a
 * graph for (its graph_sizes and graph_lens ops; sizes up to max_out and max_tokens) twice,
 * all sequences at the class's shortest length on scratch pages taken from kv and given
 * back, so that the backend captures its graphs now. *n and *ms: graphs captured and the
 * time it took. Returns 0 (also when the backend has no graphs: *n 0) or an ns_err. Engine
 * thread, before serving. */
int fwd_prepare_graphs(fwd_t *f, kv_t *kv, int *n, double *ms);

#ifdef __cplusplus
}
#endif
#endif
