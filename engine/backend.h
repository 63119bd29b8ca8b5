/* backend.h — the compute backend interface (backend_ops) that engine/forward.c drives,
 * the ragged batch it runs (batch_t) and the step results (step_out_t).
 *
 * Threads: a backend belongs to one thread (the engine thread); only it calls the ops.
 * Memory: tensors passed to ops hold backend memory (host memory for the CPU backend,
 * device memory for CUDA); the forward builds views (shape[0] = tokens this step) and
 * never dereferences activation data. batch_t, step_out_t and page tables are host
 * memory owned by the caller; a backend copies what it needs in step_begin. */
#ifndef ENG_BACKEND_H
#define ENG_BACKEND_H

#include "model.h"
#include "sample_params.h"
#include "tensor.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the ragged batch -------------------------------------------------------------- */

/* One sequence of a step: n_new tokens at positions pos0 .. pos0 + n_new - 1. */
typedef struct batch_seq {
  int n_new;            /* new tokens this step, >= 1 */
  int pos0;             /* position of the first new token = tokens already in the cache */
  const int32_t *pages; /* its page table (mem/kv.h kv_seq.pages), covering pos0 + n_new */
  int n_pages;
  int sample;          /* 1: produce the last new token's logits and sample from them */
  samp_params sp;      /* used when sample */
  const int32_t *hist; /* prompt ids then generated ids, for the penalties (may be NULL */
  int n_prompt;        /*   when no penalty is on) */
  int n_hist;
  uint64_t step; /* Philox counter: tokens this request sampled before */
  /* filled by be_batch_add: */
  int tok0;    /* read-only: batch row of the first new token */
  int out_row; /* read-only: logits row of the last new token, -1 when none */
} batch_seq;

/* A step's batch; each sequence's tokens are contiguous rows, in order. Build it with
 * be_batch_init / be_batch_reset / be_batch_add; fields are read-only to everyone else. */
typedef struct batch_t {
  int n_seqs;
  int n_tokens;
  int32_t *tokens;   /* [n_tokens] token ids */
  int32_t *pos;      /* [n_tokens] positions */
  int32_t *seq_of;   /* [n_tokens] sequence index of each row */
  batch_seq *seqs;   /* [n_seqs] */
  int n_out;         /* logits rows: one per sampling sequence, or n_tokens with all_logits */
  int32_t *out_rows; /* [n_out] batch row each logits row comes from */
  int all_logits;    /* logits for every row (tests, prompt logprobs); out row i = row i */
  int cap_tokens_, cap_seqs_; /* private */
} batch_t;

void be_batch_init(batch_t *b);
void be_batch_free(batch_t *b);
/* Empty b for a new step; all_logits as above. */
void be_batch_reset(batch_t *b, int all_logits);
/* Append sequence s (n_new, pos0, pages, n_pages, sample, sp, hist, ...) with its new
 * token ids. Returns 0, NS_EINVAL (n_new < 1, pos0 < 0) or NS_ENOMEM. */
int be_batch_add(batch_t *b, const batch_seq *s, const int32_t *ids);

/* ---- results ----------------------------------------------------------------------- */

/* Host arrays owned by the caller, indexed by batch sequence (size >= n_seqs); entries
 * of sequences that do not sample are left alone. logprob / top arrays may be NULL. */
typedef struct step_out_t {
  int32_t *ids;     /* sampled token id */
  float *logprob;   /* its logprob under the processed distribution */
  int n_top;        /* row stride of top_ids / top_logprobs (>= max sp.n_logprobs) */
  int32_t *top_ids; /* [n_seqs][n_top], sp.n_logprobs filled */
  float *top_logprobs;
} step_out_t;

typedef struct backend_stats_t {
  uint64_t weight_bytes;    /* weights in backend memory */
  uint64_t kv_bytes;        /* page memory */
  uint64_t workspace_bytes; /* live activation workspaces */
  uint64_t steps;           /* step_begin calls */
  uint64_t tokens;          /* batch rows run */
  uint64_t graphs;          /* captured step graphs kept */
  uint64_t graph_bytes;     /* device memory they took (outside the pool) */
  uint64_t graph_updates;   /* stale graphs refreshed in place (cudaGraphExecUpdate) after the
                               buffers they name moved; 0 on the CPU backend */
} backend_stats_t;

/* ---- weights in backend memory ---------------------------------------------------- */

/* Set by load_weights. Projections are fused as the forward uses them: q|k|v rows in one
 * [(n_heads + 2 n_kv_heads) head_dim, hidden] matrix (and q|k|v biases, data NULL when
 * the model has none), gate|up in one [2 intermediate, hidden] matrix. */
typedef struct be_layer {
  tensor_t attn_norm, wqkv, bqkv, wo, mlp_norm, w_gate_up, w_down;
} be_layer;

typedef struct be_weights {
  tensor_t embed, final_norm, lm_head; /* lm_head.data == embed.data when tied */
  be_layer *layers;                    /* [n_layers] */
} be_weights;

/* ---- the backend -------------------------------------------------------------------- */

typedef struct backend_t backend_t;

typedef struct backend_ops {
  const char *name;
  void (*destroy)(backend_t *);
  /* Copy (and convert, fuse) the model's weights into backend memory; sets be->cfg and
   * be->w. The model may be freed afterwards. */
  int (*load_weights)(backend_t *, const model_t *);
  /* Page memory for n_pages KV pages of page_tokens tokens (after load_weights; again to
   * resize, losing the contents). mem/kv hands out the page ids. */
  int (*kv_init)(backend_t *, int n_pages, int page_tokens);
  /* Activation workspaces in backend memory (contents undefined). */
  int (*alloc)(backend_t *, ns_dtype, int ndim, const int64_t *shape, tensor_t *out);
  void (*free)(backend_t *, tensor_t *);
  /* Copy a tensor's first bytes to host memory (waits for the work that writes it). */
  int (*to_host)(backend_t *, const tensor_t *src, void *dst, size_t bytes);

  /* Step bracket: the CPU runs each op at once; CUDA enqueues on its streams (and may
   * capture / replay a graph per decode bucket). step_begin checks the batch (ids, pages
   * covering every position) and takes its host arrays; the batch must stay unchanged
   * until step_end. */
  int (*step_begin)(backend_t *, const batch_t *);
  /* x[t] = embed[tokens[t]] */
  int (*embed)(backend_t *, const batch_t *, tensor_t *x);
  /* residual = first ? x : residual + x; x = rmsnorm(residual) * w (in place). */
  int (*add_rmsnorm)(backend_t *, tensor_t *x, tensor_t *residual, const tensor_t *w, int first);
  /* y[T, N] = x[T, K] . w[N, K]^T (+ bias[N]); bias may be NULL or have data NULL. */
  int (*matmul)(backend_t *, const tensor_t *x, const tensor_t *w, const tensor_t *bias,
                tensor_t *y);
  /* RoPE on the q and k parts of the fused qkv rows at each row's position, then write
   * k and v into this layer's cache pages. */
  int (*rope_kv_write)(backend_t *, const batch_t *, tensor_t *qkv, int layer);
  /* out[t] = causal GQA attention of the q part of qkv row t over its sequence's cache. */
  int (*attention)(backend_t *, const batch_t *, const tensor_t *qkv, tensor_t *out, int layer);
  /* out[t, i] = silu(gate_up[t, i]) * gate_up[t, I + i] */
  int (*swiglu)(backend_t *, const tensor_t *gate_up, tensor_t *out);
  /* dst[i] = src[out_rows[i]] for i < n_out: the rows whose logits are wanted. */
  int (*gather_rows)(backend_t *, const batch_t *, const tensor_t *src, tensor_t *dst);
  /* Sample every sampling sequence from its logits row ([n_out, vocab]). */
  int (*sample)(backend_t *, const batch_t *, const tensor_t *logits, step_out_t *);
  /* Finish the step: sampled ids (and logprobs) are in out's host arrays on return. */
  int (*step_end)(backend_t *, step_out_t *);
  int (*stats)(backend_t *, backend_stats_t *);
  /* Optional (NULL: not measured): the GPU time of the last finished step (its first to its
   * last enqueued work, CUDA events) and how long the GPU sat idle between the step before
   * it and this one, in ms; gap_ms < 0 when there was no step before. */
  int (*step_timing)(backend_t *, double *gpu_ms, double *gap_ms);
  /* Optional (NULL: not measured): device memory copy bandwidth measured now, GB/s counting
   * bytes read plus bytes written (a device-to-device copy of a large block, median of
   * several, after warm-up). */
  int (*copy_bandwidth)(backend_t *, double *gbps);
  /* Optional (NULL: none): the decode batch sizes the backend keeps a captured graph for
   * (at most cap, ascending), so that the engine can run one decode step of each at start-up
   * (fwd_prepare_graphs) instead of capturing while serving. Returns how many. */
  int (*graph_sizes)(backend_t *, int *sizes, int cap);
  /* Optional (NULL: one class, any length): the context classes of those graphs, as the
   * longest sequence each covers (at most cap, ascending): a decode step whose longest
   * sequence has more than lens[i - 1] tokens and at most lens[i] replays class i's graph of
   * its batch size. Returns how many. */
  int (*graph_lens)(backend_t *, int *lens, int cap);
  /* 1 when the backend can run no further step (a lost CUDA context): the engine then
   * fails every request and reports itself dead. NULL means never (the CPU backend). */
  int (*is_dead)(backend_t *);
  /* Optional (NULL: one lane only). A second lane of this backend: it shares the weights and
   * the KV cache pages (after load_weights and kv_init; a later kv_init of this backend is
   * seen by the lane at its next step_begin) but has its own step buffers, workspaces (its
   * own alloc) and queue of work, which runs at a lower priority than this backend's where
   * the device has priorities (CUDA: a low-priority stream, no graphs), so that a step of
   * each lane may be in flight at once. The two lanes' batches must not share sequences;
   * pages a lane's step writes must not be given to another sequence before that step has
   * ended. Destroy the lane (be_destroy) before this backend. */
  int (*lane_create)(backend_t *, backend_t **out);
  /* Optional with lane_create: after the step's last op (before step_end), 1 when its work
   * has completed (step_end will not wait), 0 while it still runs, or an ns_err. */
  int (*step_poll)(backend_t *);
} backend_ops;

/* Common part of every backend; an implementation embeds it as its first member. */
struct backend_t {
  const backend_ops *ops; /* read-only */
  model_cfg cfg;          /* read-only, after load_weights */
  be_weights w;           /* read-only, after load_weights */
  int kv_pages;           /* read-only, after kv_init */
  int kv_page_tokens;     /* read-only, after kv_init */
};

/* ---- the CPU backend ------------------------------------------------------------------ */

/* fp32 everywhere (bf16/f16 weights are converted at load). Page memory is one block laid
 * out [n_layers][2 (k, v)][n_pages][page_tokens][n_kv_heads][head_dim] fp32. n_threads:
 * matmul and attention workers including the caller, 0 = all cores (engine.cpu_threads). */
int be_cpu_create(int n_threads, backend_t **out);

/* Destroy any backend (NULL is fine). */
static inline void be_destroy(backend_t *be) {
  if (be) be->ops->destroy(be);
}

#ifdef __cplusplus
}
#endif
#endif
