/* mk_int.h — what mkmodel's files share (mk__ prefix): file helpers, the
 * tokenizer writer (mk_tokenizer.c) and the weight writer (mk_weights.c). */
#ifndef MK_INT_H
#define MK_INT_H

#include "model.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Token ids that config.json needs from the tokenizer. */
typedef struct mk__tok_info {
  int size;      /* highest id + 1, added tokens included */
  int bos;       /* -1 when none */
  int eos;       /* -1 when none */
  int eos_extra; /* e.g. <|im_end|>, for generation_config.json; -1 when none */
} mk__tok_info;

/* dir + "/" + name, malloc'd (NULL when out of memory). */
char *mk__path(const char *dir, const char *name);
/* Write len bytes to path through path.tmp and a rename. */
int mk__write_file(const char *path, const void *data, size_t len, char *err, size_t errlen);
/* Print j (formatted) into dir/name. */
int mk__write_json(const char *dir, const char *name, const cJSON *j, char *err, size_t errlen);
/* Read a whole file (at most max bytes), NUL-terminated. */
int mk__read_file(const char *path, size_t max, char **out, size_t *len, char *err, size_t errlen);

/* tokenizer.json + tokenizer_config.json into dir: the built-in byte-level BPE
 * when src is NULL, else a copy of src (and of the tokenizer_config.json beside it). */
int mk__tokenizer(const char *dir, const char *src, int max_pos, mk__tok_info *info, char *err,
                  size_t errlen);

/* The checkpoint's tensors for cfg, streamed into model.safetensors, or into
 * shards of at most max_shard bytes of data each plus model.safetensors.index.json. */
int mk__weights(const char *dir, const model_cfg *cfg, ns_dtype dt, uint64_t seed,
                uint64_t max_shard, char *err, size_t errlen);

#endif
