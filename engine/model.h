/* model.h — a Hugging Face checkpoint folder loaded for inference: config.json
 * parsed into model_cfg, weights memory-mapped from *.safetensors (model_load). */
#ifndef ENG_MODEL_H
#define ENG_MODEL_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum model_arch { ARCH_LLAMA = 0, ARCH_MISTRAL = 1, ARCH_QWEN2 = 2 } model_arch;

typedef enum rope_kind {
  ROPE_DEFAULT = 0, /* plain rotary, theta only */
  ROPE_LINEAR = 1,  /* positions divided by factor */
  ROPE_LLAMA3 = 2   /* Llama 3.1 frequency-band scaling */
} rope_kind;

#define MODEL_MAX_EOS 8

typedef struct model_cfg {
  model_arch arch;
  int vocab_size;
  int hidden;       /* hidden_size */
  int intermediate; /* intermediate_size */
  int n_layers;
  int n_heads;
  int n_kv_heads; /* GQA: n_heads % n_kv_heads == 0 */
  int head_dim;   /* head_dim, or hidden / n_heads */
  float rms_eps;
  float rope_theta;
  rope_kind rope;
  float rope_factor;           /* linear and llama3 */
  float rope_low_freq_factor;  /* llama3 */
  float rope_high_freq_factor; /* llama3 */
  int rope_original_max_pos;   /* llama3 */
  int tie_embeddings;          /* lm_head shares embed_tokens */
  int qkv_bias;                /* Qwen2: q/k/v projections have biases */
  int max_pos;                 /* max_position_embeddings */
  int bos_id;                  /* -1 when none */
  int eos_ids[MODEL_MAX_EOS];  /* from config.json and generation_config.json */
  int n_eos;
  ns_dtype dtype; /* torch_dtype / dtype of the checkpoint */
} model_cfg;

/* One decoder layer's weights, as stored in the checkpoint (HF layout: a linear
 * weight is [out_features, in_features]). Bias tensors have data == NULL when absent. */
typedef struct layer_weights {
  tensor_t attn_norm;    /* [hidden] */
  tensor_t wq, wk, wv;   /* [n_heads*head_dim, hidden], [n_kv*head_dim, hidden] x2 */
  tensor_t bq, bk, bv;   /* Qwen2 only */
  tensor_t wo;           /* [hidden, n_heads*head_dim] */
  tensor_t mlp_norm;     /* [hidden] */
  tensor_t w_gate, w_up; /* [intermediate, hidden] */
  tensor_t w_down;       /* [hidden, intermediate] */
} layer_weights;

typedef struct model_t {
  model_cfg cfg;
  char *dir;             /* the checkpoint folder */
  tensor_t embed;        /* [vocab, hidden] */
  tensor_t final_norm;   /* [hidden] */
  tensor_t lm_head;      /* [vocab, hidden]; == embed when tied */
  layer_weights *layers; /* n_layers */
  void *priv_;           /* private: mapped files */
} model_t;

/* Parse config.json (+ generation_config.json when present) of dir into cfg.
 * Unsupported architectures and settings (e.g. Mistral's sliding window) fail
 * with NS_EUNSUPPORTED and a message in err naming the file and field. */
int model_cfg_load(const char *dir, model_cfg *cfg, char *err, size_t errlen);

/* Load a checkpoint folder: config and memory-mapped weights (model.safetensors,
 * or the shards named by model.safetensors.index.json). Every tensor is checked
 * for presence, shape and dtype; errors name the file and tensor. Main/engine
 * thread; the model is read-only afterwards and may be shared. */
int model_load(const char *dir, model_t **out, char *err, size_t errlen);
void model_free(model_t *m);

#ifdef __cplusplus
}
#endif
#endif
