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
 * sits at a fixed offset for the buffer's capacities (fixed addresses for graph capture). */
enum {
  SB_TOKENS,
  SB_POS,
  SB_SLOT,
  SB_OUT_ROWS, /* [cap_tok] int32 */
  SB_TOK0,
  SB_N_NEW,
  SB_POS0,
  SB_PT_OFF, /* [cap_tok] int32 (sequences <= tokens) */
  SB_DEC,
  SB_DSEQ,
  SB_PF,
  SB_SAMP,
  SB_SOUT,
  SB_PAGES,
  SB_HIST,
  SB_N
};

typedef struct cu_step_bufs {
  int cap_tok, cap_dec, cap_pages, cap_hist;
  size_t off[SB_N + 1];    /* byte offsets; off[SB_N] = total */
  void *dev, *host;        /* device pool block, pinned pool block */
  float *part_o, *part_ml; /* attention split partials, [cap_dec][n_heads][head_dim + 2] */
  void *part_blk;
  float *samp_v;      /* sampling scratch [samp_rows][vocab] */
  uint32_t *samp_cnt; /* [samp_rows][vocab] */
  void *samp_blk;
  int samp_rows;
} cu_step_bufs;

typedef struct cu_be {
  backend_t base;
  int dev, n_sm, dead;
  cudaStream_t st;
  mem_pool_t *pool;   /* device */
  mem_pool_t *pinned; /* host, page-locked */
  cu_gemm *gemm;
  void *gemm_ws;
  void *gemm_dec_ws; /* k_gemm_dec's workspace (cu_gemm_run_dec) */
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
  int n_dec, n_dseq, n_pf, n_samp, sampled;
  int32_t *samp_seq; /* host [cap_tok]: batch sequence of each sampling request */
  backend_stats_t stats;
} cu_be;

static inline cu_be *cu_impl(backend_t *be) {
  return (cu_be *)be;
}

/* Pointer to step-buffer array i on the device (dev 1) or in the pinned mirror. */
static inline void *cu_sb(cu_be *c, int i, int dev) {
  return (char *)(dev ? c->sb.dev : c->sb.host) + c->sb.off[i];
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

/* backend_cuda.c: an op's result; NS_ECUDA from a lost context marks the backend dead. */
int cu_done(cu_be *c, int rc);

#endif
