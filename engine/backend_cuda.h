/* backend_cuda.h — the CUDA backend (be_cuda_create): backend_ops on one GPU with bf16
 * weights and KV pages in a buddy pool taken once, kernels from kernels/, cuBLASLt GEMMs.
 *
 * Built only with the CUDA backend (NS_HAVE_CUDA_BACKEND). Threads: create, the ops and
 * destroy run on one thread (the engine thread), which the device becomes current on.
 * Memory: every device allocation comes from one pool of engine.gpu_memory_fraction of
 * the device's free memory (weights, workspaces, KV slabs, step buffers, the cuBLASLt
 * workspace); step inputs and results pass through pinned host buffers.
 * Workspaces: alloc keeps activations in bf16 whatever dtype is asked for, except an
 * NS_F32 tensor whose last dimension is the vocabulary (logits), which stays fp32; the
 * ops read a tensor's dtype. */
#ifndef ENG_BACKEND_CUDA_H
#define ENG_BACKEND_CUDA_H

#include "arena.h"
#include "backend.h"
#include "cfg.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A CUDA backend on device 0, without weights (ops->load_weights next). Uses
 * cfg->engine.gpu_memory_fraction and cfg->engine.max_batch_tokens (initial step-buffer
 * size; alloc grows it). Returns 0; NS_EUNSUPPORTED when no usable GPU (none, or not
 * compute capability 9.0: the kernels are built for sm_90a) with the reason in err;
 * NS_ENOMEM / NS_ECUDA otherwise. The caller owns *out (be_destroy). */
int be_cuda_create(const cfg_t *cfg, backend_t **out, char *err, size_t errlen);

/* The device pool's figures (bytes in use, free, largest free block, fragmentation, peak).
 * be must come from be_cuda_create. Engine thread. */
void be_cuda_pool_stats(backend_t *be, mem_pool_stats_t *st);

#ifdef __cplusplus
}
#endif
#endif
