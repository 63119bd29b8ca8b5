/* safetensors.h — read-only access to .safetensors files (st_open, st_open_mem)
 * and to sharded checkpoints named by model.safetensors.index.json (st_set_open). */
#ifndef ENG_SAFETENSORS_H
#define ENG_SAFETENSORS_H

#include "tensor.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ST_MAX_DIMS         8
#define ST_MAX_HEADER_BYTES (100u * 1000u * 1000u) /* larger headers are refused */

/* One tensor of an open file. Everything points into the file's mapping and
 * lives until st_close. data is not necessarily aligned to the dtype size (the
 * format does not promise it). The file must not be truncated while mapped
 * (reads past its new end would fault). */
typedef struct st_tensor {
  const char *name;
  ns_dtype dtype; /* NS_BF16, NS_F16 or NS_F32: other dtypes are refused */
  int ndim;       /* 0 (scalar) .. ST_MAX_DIMS */
  int64_t shape[ST_MAX_DIMS];
  const void *data;
  size_t nbytes;   /* numel * dtype size */
  uint64_t offset; /* data_offsets[0], relative to the data section */
} st_tensor;

typedef struct st_file st_file;

/* Map path read-only and validate its header and every tensor entry. On error
 * returns NS_EIO/NS_ENOENT (cannot open or map), NS_EFORMAT (malformed) or
 * NS_EUNSUPPORTED (a dtype other than BF16/F16/F32) with a message in err that
 * names the file and, where there is one, the tensor. */
int st_open(const char *path, st_file **out, char *err, size_t errlen);
/* The same parser over a caller's buffer, which is not copied and must outlive
 * the st_file. name is used in messages only. */
int st_open_mem(const void *buf, size_t len, const char *name, st_file **out, char *err,
                size_t errlen);
void st_close(st_file *st);

size_t st_count(const st_file *st);
const st_tensor *st_at(const st_file *st, size_t i);           /* i < st_count; sorted by name */
const st_tensor *st_find(const st_file *st, const char *name); /* NULL when absent */
const char *st_path(const st_file *st);                        /* the path or name given at open */

/* A checkpoint folder's weights: model.safetensors when present, otherwise the
 * shards listed by model.safetensors.index.json ("weight_map": tensor -> file),
 * each shard opened once. Every tensor the index names must be in its shard. */
typedef struct st_set st_set;

int st_set_open(const char *dir, st_set **out, char *err, size_t errlen);
void st_set_close(st_set *set);
/* Find a tensor; *file (optional) receives the path of the file that holds it,
 * or of the index / single file when the tensor is absent (for messages). */
const st_tensor *st_set_find(const st_set *set, const char *name, const char **file);
size_t st_set_nfiles(const st_set *set);
const st_file *st_set_file(const st_set *set, size_t i);

#ifdef __cplusplus
}
#endif
#endif
