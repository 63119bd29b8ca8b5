/* cuda_int.h — internal to the CUDA backend (backend_cuda.c, cuda_weights.c, cuda_step.c):
 * the backend object, its step buffers and the helpers the files share. */
#ifndef ENG_CUDA_INT_H
#define ENG_CUDA_INT_H

#include "attention.h"
#include "backend_cuda.h"
#include "cuda_gemm.h"
#include "kv_layout.h"
#include "sample.h"

#include <cuda_runtime.h>

/* Per-step inputs: one device block and a pinned mirror with the same layout; each array
 * sits at a fixed offset for the buffer's capacities (fixed addresses for graph capture).
 * Two layouts share the block: the full one (arrays of cap_tok entries) for any step, and a
 * compact one for decode steps of at most SB_DEC_ROWS rows, whose per-token and per-sequence
 * arrays (SB_DEC_ROWS entries each), sampling requests and page list lie end to end, so that
 * the step's inputs go up in one copy (each copy is ~1.5 us on the GPU's timeline before the
 * step can start). The full layout's twelve int32 arrays, cap_tok entries apart, go up in one
 * pitched copy of the step's rows, then the requests, the page list and the prompt items. */
enum {
  SB_TOKENS,
  SB_POS,
  SB_SLOT,
  SB_OUT_ROWS, /* [cap_tok] int32 */
  SB_TOK0,
  SB_N_NEW,
  SB_POS0,
  SB_PT_OFF, /* [cap_tok] int32 (sequences <= tokens) */
  SB_D_TOK0,
  SB_D_POS0,
  SB_D_PT_OFF,
  SB_D_PART, /* [cap_tok] int32: the decode slots (one-token sequences; padding: pos0 -1) */
  SB_PF,
  SB_SAMP,
  SB_SOUT,
  SB_PAGES,
  SB_HIST,
  SB_N
};

#define SB_DEC_ROWS 256 /* the compact layout's rows (fewer where cap_tok is smaller) */

typedef struct cu_step_bufs {
  int cap_tok, cap_dec, cap_pages, cap_hist;
  size_t off[SB_N];        /* byte offsets, the full layout */
  size_t off_dec[SB_N];    /* the compact layout (SB_PF empty; SOUT and HIST shared) */
  int compact;             /* this step uses off_dec */
  void *dev, *host;        /* device pool block, pinned pool block */
  float *part_o, *part_ml; /* decode attention chunk states, [cap_dec][n_heads][head_dim + 2] */
  unsigned *attn_cnt;      /* decode attention chunk counters, [cap_tok][n_kv_heads], zero */
  void *part_blk;
  float *samp_v;      /* sampling scratch [samp_rows][vocab] */
  uint32_t *samp_cnt; /* [samp_rows][vocab] */
  void *samp_blk;
  int samp_rows;
} cu_step_bufs;

/* A run of batch rows of one class: decode rows (one-token sequences: decode GEMM and
 * attention kernels) or prefill rows (cuBLASLt, the prefill attention). A row's class
 * follows from its sequence alone (the scheduler never cuts a one-token chunk from a longer
 * history), so its numbers never depend on the rows around it. */
typedef struct cu_run {
  int row0, n, decode;
} cu_run;

/* A captured decode step: bucket rows, sequences of up to len tokens (its context class), for
 * the forward (workspaces) key. */
typedef struct cu_graph {
  int bucket, len;
  const void *key;
  cudaGraphExec_t exec;
  int stale; /* buffers moved since the capture: updated by the next capture, not replayed */
} cu_graph;

enum { CU_EAGER, CU_CAPTURE, CU_REPLAY };
#define CU_GRAPH_CLASSES 5 /* context classes of the decode graphs (cuda_graph.c) */

typedef struct cu_be {
  backend_t base;
  int dev, n_sm, dead;
  struct cu_be *parent; /* a second lane (lane_create): weights, KV, pools are the parent's */
  cudaStream_t st;      /* high priority; a lane's low */
  int gemm_mode;
  mem_pool_t *pool;   /* device */
  mem_pool_t *pinned; /* host, page-locked */
  cu_gemm *gemm;
  void *gemm_ws;
  void *gemm_dec_ws; /* k_gemm_dec's workspace (cu_gemm_run_dec) */
  /* a decode GEMM's split sums left for the op that reads its output y (k_gemm_dec_lazy):
   * that op reads them (the *_part kernels), any other op finishes them into y first */
  k_dec_part lazy;
  void *lazy_y; /* NULL: none pending */
  /* k_dec_layer_part_bytes of the model at drop_rows rows (0 rows: not yet worked out), for
   * lazy_take: it depends on the row count alone, so it is worked out once per count */
  int drop_rows;
  double drop_layer_bytes;
  /* k_gemm_dec_swiglu's workspace (its partial sums apart from the gate|up ones it reads) */
  void *sw_ws;
  /* a decode step's SwiGLU, left for the decode GEMM that reads its output to make inside it
   * (k_gemm_dec_swiglu); any other op runs it first (cu_swiglu_finish) */
  struct {
    int on, n, inter;
    void *out;
    k_dec_part gp;  /* gate|up's partial sums, or gp.part NULL: */
    const void *gu; /* gate|up as stored */
  } ps;
  /* a decode step's gate|up product, left for the SwiGLU that reads it to run as one kernel
   * with it (k_gemm_dec_gu); any other op runs it first (cu_gu_finish) */
  struct {
    int on, n, N, K;
    void *y;
    const void *x, *w, *bias;
  } pg;
  /* a decode step's RoPE and KV write, left for the decode attention of the same layer to do
   * inside it (k_attn_dec_args.rope); any other op runs it first (cu_rope_finish) */
  struct {
    int on, layer;
    k_dec_part qp; /* q|k|v's partial sums, of the product that qkv holds */
    void *qkv;
  } pr;
  /* a step's embedding lookup into x, left for the layer norm that reads x first to make
   * inside it (k_embed_rmsnorm); any other op runs it first (cu_embed_finish) */
  struct {
    int on, n;
    void *x;
  } pe;
  /* weights */
  void **wblk; /* pool blocks holding weights */
  int n_wblk, cap_wblk;
  float *inv_freq; /* device [head_dim / 2], in a weight block */
  /* KV cache */
  void **kv_slab; /* host array of slab pointers */
  void *kv_ptrs;  /* pool block: device array of the same pointers */
  k_kv_layout kvl;
  /* step */
  cu_step_bufs sb;
  int init_tok;       /* cfg engine.max_batch_tokens */
  const batch_t *cur; /* the batch between step_begin and step_end */
  int n_pf, n_samp, sampled;
  int n_dslots, dslots_len; /* decode attention slots this step and their longest length */
  int32_t *nnew_pf;         /* host [cap_tok]: n_new with the decode sequences at 0 (the plan) */
  int32_t *samp_seq;        /* host [cap_tok]: batch sequence of each sampling request */
  backend_stats_t stats;
  /* row classes of the current step, over its token rows and its logits rows */
  cu_run *runs_tok, *runs_out;
  int n_runs_tok, n_runs_out, cap_runs;
  /* decode steps (every sequence one token): the ops run `rows` rows (the step's tokens, or
   * its bucket: padding rows write no cache slot and sample nothing anyone reads); with
   * graphs on, a step of a bucket runs eagerly the first time, is captured the second time
   * and replayed after that (cuda_graph.c) */
  int decode, rows, bucket, mode, step_failed;
  int graphs_on, graph_max, max_seq_cfg;
  int graph_safe;  /* every decode op's launch shape is fixed by the bucket */
  int ws_rows_min; /* fewest rows of any 2-D workspace allocated: padding never exceeds it */
  int dec_max_len; /* longest sequence a decode step covers (the attention grid's bound) */
  int gcls, glen;  /* a bucketed step's context class and its length (cu_graph_class) */
  cu_graph *graphs;
  int n_graphs, cap_graphs;
  /* [graph_max + 1][CU_GRAPH_CLASSES]: eager decode steps run per bucket and context class
   * before a capture */
  int *seen;
  const void *cur_key;
  int graph_captures;
  /* step timing (CUDA events: start and end of the last two steps) */
  cudaEvent_t ev_start[2], ev_end[2];
  int ev_i, ev_n;
  double gpu_ms, gap_ms;
} cu_be;

static inline cu_be *cu_impl(backend_t *be) {
  return (cu_be *)be;
}

/* Pointer to step-buffer array i on the device (dev 1) or in the pinned mirror. */
static inline void *cu_sb(cu_be *c, int i, int dev) {
  return (char *)(dev ? c->sb.dev : c->sb.host) + (c->sb.compact ? c->sb.off_dec : c->sb.off)[i];
}

/* cuda_weights.c */
int cu_load_weights(backend_t *be, const model_t *m);
void cu_free_weights(cu_be *c);

/* cuda_step.c */
int cu_step_bufs_ensure(cu_be *c, int tok, int pages, int hist);
void cu_step_bufs_free(cu_be *c);
int cu_step_begin(backend_t *be, const batch_t *b);
int cu_step_end(backend_t *be, step_out_t *out);
int cu_sample(backend_t *be, const batch_t *b, const tensor_t *logits, step_out_t *out);

/* cuda_graph.c */
int cu_graph_bucket(const cu_be *c, int n);
int cu_graph_sizes(backend_t *be, int *sizes, int cap);
int cu_graph_lens(backend_t *be, int *lens, int cap);
/* The context class of a decode step whose longest sequence has dlen tokens, and in *len the
 * longest its graph covers. */
int cu_graph_class(const cu_be *c, int dlen, int *len);
void cu_graphs_clear(cu_be *c);
void cu_graphs_free(cu_be *c);
int cu_graph_enter(cu_be *c, const void *key);
void cu_graph_abort(cu_be *c);
int cu_graph_finish(cu_be *c);
int cu_timing_init(cu_be *c);
void cu_timing_free(cu_be *c);
int cu_timing_start(cu_be *c);
int cu_timing_end(cu_be *c);
void cu_timing_done(cu_be *c);
int cu_step_timing(backend_t *be, double *gpu_ms, double *gap_ms);
int cu_copy_bandwidth(backend_t *be, double *gbps);

/* backend_cuda.c: an op's result; NS_ECUDA from a lost context marks the backend dead. */
int cu_done(cu_be *c, int rc);

#endif
