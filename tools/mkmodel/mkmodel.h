/* mkmodel.h — synthetic Hugging Face checkpoints of real model shapes, with
 * seeded random weights (mkmodel_write) and the `mkmodel` subcommand. */
#ifndef MKMODEL_H
#define MKMODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MKMODEL_DEFAULT_SHARD_BYTES 5000000000ull /* HF's max_shard_size "5GB" */

typedef struct mkmodel_opts {
  const char *shape;        /* "tiny", "tinyllama-1.1b", ... (mkmodel_shape_names) */
  const char *out;          /* folder, created when missing */
  uint64_t seed;            /* same seed, same bytes */
  const char *dtype;        /* "bf16", "f16", "f32", or NULL for the shape's default */
  const char *tokenizer;    /* a tokenizer.json to copy, or NULL for the built-in one */
  uint64_t max_shard_bytes; /* 0: MKMODEL_DEFAULT_SHARD_BYTES */
} mkmodel_opts;

/* Write config.json, generation_config.json, the weights (model.safetensors or
 * shards + model.safetensors.index.json), tokenizer.json and
 * tokenizer_config.json into o->out. Weights are streamed: memory use does not
 * grow with the model. Returns 0 or a negative ns_err with a message in err. */
int mkmodel_write(const mkmodel_opts *o, char *err, size_t errlen);

/* NULL-terminated list of the shape names. */
const char *const *mkmodel_shape_names(void);

/* `mkmodel --shape NAME --out DIR [--seed N] [--dtype bf16|f16|f32]
 * [--tokenizer FILE]`, and `mkmodel --check DIR` (load and summarise a folder).
 * argv[0] is "mkmodel". Returns the process exit code: 0, or 1 with a message on
 * stderr. Main thread. */
int mkmodel_cli_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
