/* backend_select.h — picking and sizing the compute backend from the settings
 * (engine.backend, engine.kv_cache_bytes): be_create_for_cfg is the one place where a
 * backend kind is chosen; the CUDA backend plugs in there. Engine thread (eng_start). */
#ifndef ENG_BACKEND_SELECT_H
#define ENG_BACKEND_SELECT_H

#include "backend.h"
#include "cfg.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Create the backend cfg->engine.backend names (auto | cpu | cuda), without weights.
 * model (may be NULL) is the checkpoint about to be loaded, for a backend that wants to
 * check it fits. cuda in a build without the CUDA backend: NS_EUNSUPPORTED; auto falls
 * back to the CPU with an info log line. Returns 0 or an ns_err with err naming the
 * backend. The caller owns *be (be_destroy). */
int be_create_for_cfg(const cfg_t *cfg, const model_t *model, backend_t **be, char *err,
                      size_t errlen);

/* Bytes one KV element takes in be's page memory (fp32 on the CPU, bf16 on CUDA). */
size_t be_kv_elem_bytes(const backend_t *be);

/* engine.kv_cache_bytes = 0: the bytes of page memory to take, given want (the bytes for
 * engine.max_batch sequences of the whole context), after the weights are loaded. CPU:
 * want, capped at 2 GiB and at half of the memory the system has available. CUDA: want,
 * capped at 3/4 of the device pool's largest free block (the rest is for workspaces). */
int64_t be_kv_auto_bytes(backend_t *be, int64_t want);

/* The device memory pool's figures for eng_stats (all 0 for a backend without one). */
typedef struct be_pool_figures {
  uint64_t in_use, total, largest_free;
  double fragmentation;
} be_pool_figures;
void be_pool_stats(backend_t *be, be_pool_figures *out);

#ifdef __cplusplus
}
#endif
#endif
