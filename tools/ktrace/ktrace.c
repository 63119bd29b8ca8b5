/* ktrace.c — a kernel timeline for any CUDA program, through CUPTI's activity API: loaded by
 * the driver as an injection library (CUDA_INJECTION64_PATH=libktrace.so), it records every
 * kernel's start and end on the GPU, also inside CUDA graphs and when programmatic dependent
 * launches overlap, and writes them as CSV to $KTRACE_OUT (default ktrace.csv) at exit:
 *   start_ns,end_ns,grid_x,grid_y,grid_z,block_x,dyn_smem,stream,graph,name
 * A profiling aid for the GPU machine (tests/gpu/run_on_device.sh timeline), not part of the
 * daemon. */
#include <cupti.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_BYTES (8u << 20)

static FILE *out;

static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max_records) {
  *buf = aligned_alloc(8, BUF_BYTES);
  *size = *buf ? BUF_BYTES : 0;
  *max_records = 0;
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                   size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *rec = NULL;
  while (out && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
    fprintf(out, "%llu,%llu,%d,%d,%d,%d,%d,%u,%u,\"%.100s\"\n", (unsigned long long)k->start,
            (unsigned long long)k->end, k->gridX, k->gridY, k->gridZ, k->blockX,
            k->dynamicSharedMemory, k->streamId, k->graphId, k->name ? k->name : "?");
  }
  free(buf);
}

static void at_exit(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (out) fclose(out), out = NULL;
}

/* The driver calls this once when CUDA_INJECTION64_PATH names the library. */
int InitializeInjection(void) {
  const char *path = getenv("KTRACE_OUT");
  out = fopen(path && *path ? path : "ktrace.csv", "w");
  if (!out) return 0;
  fprintf(out, "start_ns,end_ns,grid_x,grid_y,grid_z,block_x,dyn_smem,stream,graph,name\n");
  if (cuptiActivityRegisterCallbacks(buf_requested, buf_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    fprintf(stderr, "ktrace: CUPTI activity setup failed\n");
    return 0;
  }
  atexit(at_exit);
  return 1;
}
