/* backend_select.c — engine.backend to a backend_t: the CPU backend today, the CUDA backend
 * (be_cuda_create) when the build has it; plus the backend-specific KV sizing rules.
 * Entry point: be_create_for_cfg. */
#include "backend_select.h"

#include "ns_err.h"
#include "ns_log.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef NS_HAVE_CUDA_BACKEND
/* engine/backend_cuda.h will declare it: int be_cuda_create(const cfg_t *, backend_t **out,
 * char *err, size_t errlen). Return NS_EUNSUPPORTED when no usable GPU is present, so that
 * auto falls back to the CPU. */
#include "backend_cuda.h"
#endif

static int create_cpu(const cfg_t *cfg, backend_t **be, char *err, size_t errlen) {
  int rc = be_cpu_create(cfg->engine.cpu_threads, be);
  if (rc) snprintf(err, errlen, "backend cpu: cannot start: %s", ns_strerror(rc));
  return rc;
}

static int create_cuda(const cfg_t *cfg, backend_t **be, char *err, size_t errlen) {
#ifdef NS_HAVE_CUDA_BACKEND
  return be_cuda_create(cfg, be, err, errlen);
#else
  (void)cfg;
  (void)be;
  snprintf(err, errlen,
           "backend cuda: not available: nanoserve was built without the CUDA "
           "backend; set engine.backend to cpu or auto");
  return NS_EUNSUPPORTED;
#endif
}

int be_create_for_cfg(const cfg_t *cfg, const model_t *model, backend_t **be, char *err,
                      size_t errlen) {
  (void)model;
  *be = NULL;
  if (errlen) err[0] = '\0';
  switch (cfg->engine.backend) {
  case CFG_BACKEND_CPU: return create_cpu(cfg, be, err, errlen);
  case CFG_BACKEND_CUDA: return create_cuda(cfg, be, err, errlen);
  case CFG_BACKEND_AUTO: {
    char why[256];
    int rc = create_cuda(cfg, be, why, sizeof why);
    if (rc == 0) return 0;
    if (rc != NS_EUNSUPPORTED) { /* a GPU is there but broken: say so rather than hide it */
      snprintf(err, errlen, "%s", why);
      return rc;
    }
    ns_log_info("engine.backend auto: using the CPU backend (%s)", why);
    return create_cpu(cfg, be, err, errlen);
  }
  }
  snprintf(err, errlen, "engine.backend: unknown value %d", (int)cfg->engine.backend);
  return NS_EINVAL;
}

static int is_cuda(const backend_t *be) {
  return strcmp(be->ops->name, "cuda") == 0;
}

size_t be_kv_elem_bytes(const backend_t *be) {
  return is_cuda(be) ? 2 : sizeof(float);
}

void be_pool_stats(backend_t *be, be_pool_figures *out) {
  memset(out, 0, sizeof *out);
#ifdef NS_HAVE_CUDA_BACKEND
  if (is_cuda(be)) {
    mem_pool_stats_t st;
    be_cuda_pool_stats(be, &st);
    out->in_use = st.buddy.bytes_allocated;
    out->total = st.buddy.total;
    out->largest_free = st.buddy.largest_free;
    out->fragmentation = st.buddy.fragmentation;
  }
#else
  (void)be;
#endif
}

int64_t be_kv_auto_bytes(backend_t *be, int64_t want) {
  if (is_cuda(be)) {
    be_pool_figures pf;
    be_pool_stats(be, &pf);
    int64_t room = (int64_t)(pf.largest_free / 4 * 3);
    return want < room ? want : room;
  }
  const int64_t cap = (int64_t)2 << 30;
  if (want > cap) want = cap;
  long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  if (pages > 0 && psz > 0) {
    int64_t half = (int64_t)pages * psz / 2;
    if (want > half) want = half;
  }
  return want;
}
