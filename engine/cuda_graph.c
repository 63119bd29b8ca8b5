/* cuda_graph.c — decode steps of the CUDA backend as CUDA graphs: batch buckets and context
 * classes, the capture of a step (from its first op to its results' copy back) and its replay
 * with one cudaGraphLaunch; step timing with CUDA events and the copy-bandwidth probe. Entry
 * points: cu_graph_bucket, cu_graph_class, cu_graph_enter, cu_graph_finish, cu_graphs_clear,
 * cu_timing_*, cu_graph_sizes, cu_graph_lens, cu_copy_bandwidth. */
#include "cuda_int.h"

#include "ns_cuda.h"
#include "ns_err.h"
#include "ns_log.h"

#include <stdlib.h>
#include <string.h>

/* Buckets: 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, then every 64. */
static int next_bucket(int b) {
  if (b < 16) return b * 2;
  if (b < 32) return b + 8;
  if (b < 64) return b + 16;
  if (b < 128) return b + 32;
  return b + 64;
}

int cu_graph_bucket(const cu_be *c, int n) {
  if (!c->graphs_on || !c->graph_safe || n < 1 || n > c->graph_max) return 0;
  int b = 1;
  while (b < n)
    b = next_bucket(b);
  return b > c->graph_max ? c->graph_max : b;
}

/* Context classes: a captured step's decode attention grid covers the keys of its class, the
 * step's longest sequence rounded up to one chunk, two, 4 (the attention may rotate q itself
 * where its grid is small: backend_cuda.c), K_ATTN_FUSE_CHUNKS (the most it merges itself) or
 * every length the backend allows. One class for all would make a model of long context
 * (131072 tokens: 512 chunks) launch thousands of empty blocks and a combine kernel a layer
 * for short sequences; on an H200 the one-chunk class took steps at context 128 from 1.223 to
 * 1.145 ms (llama3.2-1b, batch 16) and 1.115 to 1.100 (tinyllama-1.1b, batch 8) against the
 * grid of 4 chunks (bench/RESULTS.md). */
static const int class_chunks[CU_GRAPH_CLASSES - 1] = {1, 2, 4, K_ATTN_FUSE_CHUNKS};

static int class_len(const cu_be *c, int i) {
  if (i >= CU_GRAPH_CLASSES - 1) return c->dec_max_len;
  const int64_t len = (int64_t)class_chunks[i] * K_ATTN_CHUNK;
  return len < c->dec_max_len ? (int)len : c->dec_max_len;
}

int cu_graph_class(const cu_be *c, int dlen, int *len) {
  int i = 0;
  while (i < CU_GRAPH_CLASSES - 1 && class_len(c, i) < dlen)
    i++;
  *len = class_len(c, i);
  return i;
}

int cu_graph_lens(backend_t *be, int *lens, int cap) {
  cu_be *c = cu_impl(be);
  int n = 0;
  if (!c->graphs_on || !c->graph_safe) return 0;
  for (int i = 0; i < CU_GRAPH_CLASSES && n < cap; i++) {
    const int len = class_len(c, i);
    if (len >= 1 && (n == 0 || len > lens[n - 1])) lens[n++] = len;
  }
  return n;
}

int cu_graph_sizes(backend_t *be, int *sizes, int cap) {
  cu_be *c = cu_impl(be);
  int n = 0;
  if (!c->graphs_on || !c->graph_safe) return 0;
  for (int b = 1; n < cap; b = next_bucket(b)) {
    if (b >= c->graph_max) {
      sizes[n++] = c->graph_max;
      break;
    }
    sizes[n++] = b;
  }
  return n;
}

/* The step buffers, KV pointers or workspaces moved: no graph may be replayed as it is.
 * Each is kept as stale, for cudaGraphExecUpdate by the next capture of its bucket. */
void cu_graphs_clear(cu_be *c) {
  for (int i = 0; i < c->n_graphs; i++)
    c->graphs[i].stale = 1;
}

void cu_graphs_free(cu_be *c) {
  for (int i = 0; i < c->n_graphs; i++)
    cudaGraphExecDestroy(c->graphs[i].exec);
  free(c->graphs);
  free(c->seen);
  c->graphs = NULL;
  c->seen = NULL;
  c->n_graphs = c->cap_graphs = 0;
}

static cu_graph *find(cu_be *c, int bucket, int len, const void *key, int stale) {
  for (int i = 0; i < c->n_graphs; i++) {
    cu_graph *g = &c->graphs[i];
    if (g->bucket == bucket && g->len == len && g->stale == stale && (stale || g->key == key))
      return g;
  }
  return NULL;
}

/* The first op of a padded decode step (key: the forward's first workspace, which names
 * the workspaces every op of the step uses): replay a graph of this bucket, context class
 * and key, or capture one when the bucket and class ran eagerly before (kernels set their
 * attributes then), or run eagerly. */
int cu_graph_enter(cu_be *c, const void *key) {
  c->mode = CU_EAGER;
  c->cur_key = key;
  if (!c->decode || !c->bucket) return 0;
  if (find(c, c->rows, c->glen, key, 0)) {
    c->mode = CU_REPLAY;
    return 0;
  }
  if (c->seen[c->rows * CU_GRAPH_CLASSES + c->gcls]++ == 0) return 0;
  NS_CUDA_CHECK(cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal));
  c->mode = CU_CAPTURE;
  return 0;
}

/* Abandon a capture after a failed op (the stream leaves capture mode). */
void cu_graph_abort(cu_be *c) {
  if (c->mode != CU_CAPTURE) return;
  cudaGraph_t g = NULL;
  cudaStreamEndCapture(c->st, &g);
  if (g) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  c->mode = CU_EAGER;
}

/* After the step's last op: end the capture and keep the graph, then launch it (capture
 * and replay); nothing for an eager step. */
int cu_graph_finish(cu_be *c) {
  int mode = c->mode;
  c->mode = CU_EAGER;
  if (mode == CU_EAGER) return 0;
  cu_graph *gr = find(c, c->rows, c->glen, c->cur_key, 0);
  if (mode == CU_CAPTURE) {
    cudaGraph_t g = NULL;
    NS_CUDA_CHECK(cudaStreamEndCapture(c->st, &g));
    /* a stale graph of the bucket takes the new one's parameters when its topology is the
     * same (cheaper than instantiating) */
    gr = find(c, c->rows, c->glen, NULL, 1);
    if (gr) {
      cudaGraphExecUpdateResultInfo info;
      if (cudaGraphExecUpdate(gr->exec, g, &info) == cudaSuccess) {
        gr->key = c->cur_key;
        gr->stale = 0;
        cudaGraphDestroy(g);
        c->stats.graph_updates++;
        NS_CUDA_CHECK(cudaGraphLaunch(gr->exec, c->st));
        return 0;
      }
      (void)cudaGetLastError();
      cudaGraphExecDestroy(gr->exec);
      *gr = c->graphs[--c->n_graphs];
    }
    if (c->n_graphs == c->cap_graphs) {
      int cap = c->cap_graphs ? 2 * c->cap_graphs : 16;
      cu_graph *ng = realloc(c->graphs, (size_t)cap * sizeof *ng);
      if (!ng) {
        cudaGraphDestroy(g);
        return NS_ENOMEM;
      }
      c->graphs = ng;
      c->cap_graphs = cap;
    }
    cudaGraphExec_t ex;
    size_t free0 = 0, free1 = 0, total;
    cudaMemGetInfo(&free0, &total);
    cudaError_t e = cudaGraphInstantiate(&ex, g, 0);
    if (e == cudaSuccess && cudaMemGetInfo(&free1, &total) == cudaSuccess && free1 < free0)
      c->stats.graph_bytes += free0 - free1;
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
      ns_log_error("cuda backend: instantiating the decode graph of %d rows: %s", c->rows,
                   cudaGetErrorString(e));
      (void)cudaGetLastError();
      return NS_ECUDA;
    }
    gr = &c->graphs[c->n_graphs++];
    *gr = (cu_graph){c->rows, c->glen, c->cur_key, ex, 0};
    c->graph_captures++;
    c->stats.graphs = (uint64_t)c->n_graphs;
  }
  if (!gr) return NS_EINVAL;
  NS_CUDA_CHECK(cudaGraphLaunch(gr->exec, c->st));
  return 0;
}

/* ---- timing ------------------------------------------------------------------------------ */

int cu_timing_init(cu_be *c) {
  for (int i = 0; i < 2; i++) {
    NS_CUDA_CHECK(cudaEventCreate(&c->ev_start[i]));
    NS_CUDA_CHECK(cudaEventCreate(&c->ev_end[i]));
  }
  c->gap_ms = -1;
  return 0;
}

void cu_timing_free(cu_be *c) {
  for (int i = 0; i < 2; i++) {
    if (c->ev_start[i]) cudaEventDestroy(c->ev_start[i]);
    if (c->ev_end[i]) cudaEventDestroy(c->ev_end[i]);
  }
}

int cu_timing_start(cu_be *c) {
  c->ev_i ^= 1;
  NS_CUDA_CHECK(cudaEventRecord(c->ev_start[c->ev_i], c->st));
  return 0;
}

int cu_timing_end(cu_be *c) {
  NS_CUDA_CHECK(cudaEventRecord(c->ev_end[c->ev_i], c->st));
  return 0;
}

/* After the step's synchronisation: its GPU time and the idle gap before it. */
void cu_timing_done(cu_be *c) {
  float ms = 0;
  int i = c->ev_i;
  c->gpu_ms = cudaEventElapsedTime(&ms, c->ev_start[i], c->ev_end[i]) == cudaSuccess ? ms : -1;
  c->gap_ms = -1;
  if (c->ev_n > 0 && cudaEventElapsedTime(&ms, c->ev_end[i ^ 1], c->ev_start[i]) == cudaSuccess)
    c->gap_ms = ms;
  (void)cudaGetLastError();
  c->ev_n++;
}

int cu_step_timing(backend_t *be, double *gpu_ms, double *gap_ms) {
  cu_be *c = cu_impl(be);
  if (c->ev_n == 0) return NS_EINVAL;
  *gpu_ms = c->gpu_ms;
  *gap_ms = c->gap_ms;
  return 0;
}

static int cmp_f(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* A device-to-device copy of half of an 8 GiB pool block (or of the largest block that
 * fits), 3 warm-up copies, the median of 9 timed ones. The rate rises with the size until a
 * few GiB: on an H200 (bench/RESULTS.md) copies of 512 MiB, 1, 2 and 4 GiB moved 4113, 4204,
 * 4232 and 4267 GB/s (read + written), so the 512 MiB copy this measured before read the
 * ceiling ~3% low and every "% of copy" as much too high. */
int cu_copy_bandwidth(backend_t *be, double *gbps) {
  cu_be *c = cu_impl(be);
  if (c->dead || c->cur) return c->dead ? NS_ECUDA : NS_EINVAL;
  size_t sz = 8ull << 30;
  void *blk = NULL;
  while (sz >= (64u << 20) && mem_pool_alloc(c->pool, sz, &blk))
    sz >>= 1;
  if (!blk) return NS_ENOMEM;
  size_t half = sz / 2;
  cudaEvent_t a, b;
  float t[9];
  int rc = NS_ECUDA;
  if (cudaEventCreate(&a) != cudaSuccess) goto out;
  if (cudaEventCreate(&b) != cudaSuccess) goto out_a;
  for (int i = 0; i < 12; i++) {
    if (cudaEventRecord(a, c->st) != cudaSuccess ||
        cudaMemcpyAsync((char *)blk + half, blk, half, cudaMemcpyDeviceToDevice, c->st) !=
            cudaSuccess ||
        cudaEventRecord(b, c->st) != cudaSuccess || cudaEventSynchronize(b) != cudaSuccess)
      goto out_b;
    if (i >= 3 && cudaEventElapsedTime(&t[i - 3], a, b) != cudaSuccess) goto out_b;
  }
  qsort(t, 9, sizeof t[0], cmp_f);
  *gbps = 2.0 * (double)half / (t[4] * 1e-3) / 1e9;
  ns_log_info("cuda backend: copy bandwidth %.1f GB/s (a copy of %zu MiB)", *gbps, half >> 20);
  rc = 0;
out_b:
  cudaEventDestroy(b);
out_a:
  cudaEventDestroy(a);
out:
  if (rc) (void)cudaGetLastError();
  mem_pool_free(c->pool, blk);
  return rc;
}
