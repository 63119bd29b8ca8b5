/* test_model_config.c — model_cfg_load over hand-written config.json variants:
 * v4 and v5 rope forms, scaling kinds, architectures, biases, eos ids, refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "model.h"
#include "ns_err.h"
#include "tw.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char *dir;
static char err[1024];
static model_cfg cfg;

#define LLAMA                                                                                      \
  "\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 1000, \"hidden_size\": 64, "         \
  "\"intermediate_size\": 176, \"num_hidden_layers\": 2, \"num_attention_heads\": 4"

static int setup(void **state) {
  (void)state;
  dir = tw_tmpdir();
  return dir ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  tw_rmdir(dir);
  return 0;
}

/* Write config.json = {fields} (and generation_config.json when gen != NULL), load. */
static int load(const char *fields, const char *gen) {
  char text[4096];
  snprintf(text, sizeof text, "{%s}", fields);
  assert_int_equal(tw_write_text(tw_path(dir, "config.json"), text), 0);
  unlink(tw_path(dir, "generation_config.json"));
  if (gen) assert_int_equal(tw_write_text(tw_path(dir, "generation_config.json"), gen), 0);
  err[0] = '\0';
  return model_cfg_load(dir, &cfg, err, sizeof err);
}

static void load_ok(const char *fields, const char *gen) {
  int rc = load(fields, gen);
  if (rc) fail_msg("model_cfg_load: %d: %s", rc, err);
}

/* The load fails with code and a message naming file and field (and saying what). */
static void load_fails(const char *fields, const char *gen, int code, const char *file,
                       const char *field, const char *what) {
  int rc = load(fields, gen);
  if (rc != code) fail_msg("rc %d, want %d; err '%s'", rc, code, err);
  if (!strstr(err, file)) fail_msg("error '%s' does not name %s", err, file);
  if (!strstr(err, field)) fail_msg("error '%s' does not name field %s", err, field);
  if (what && !strstr(err, what)) fail_msg("error '%s' does not say '%s'", err, what);
}

static void test_llama_defaults(void **state) {
  (void)state;
  load_ok(LLAMA, NULL);
  assert_int_equal(cfg.arch, ARCH_LLAMA);
  assert_int_equal(cfg.vocab_size, 1000);
  assert_int_equal(cfg.hidden, 64);
  assert_int_equal(cfg.intermediate, 176);
  assert_int_equal(cfg.n_layers, 2);
  assert_int_equal(cfg.n_heads, 4);
  assert_int_equal(cfg.n_kv_heads, 4); /* defaults to the heads */
  assert_int_equal(cfg.head_dim, 16);  /* hidden / heads */
  assert_int_equal(cfg.rope, ROPE_DEFAULT);
  assert_true(cfg.rope_theta == 10000.0f);
  assert_int_equal(cfg.tie_embeddings, 0);
  assert_int_equal(cfg.qkv_bias, 0);
  assert_int_equal(cfg.bos_id, -1);
  assert_int_equal(cfg.n_eos, 0);
  assert_int_equal(cfg.max_pos, 2048);
  assert_int_equal(cfg.dtype, NS_F32);
}

static void test_llama_full_v4(void **state) {
  (void)state;
  load_ok(LLAMA
          ", \"num_key_value_heads\": 2, \"head_dim\": 32, \"rms_norm_eps\": 1e-05, "
          "\"rope_theta\": 500000.0, \"rope_scaling\": null, \"tie_word_embeddings\": true, "
          "\"bos_token_id\": 1, \"eos_token_id\": 2, \"max_position_embeddings\": 4096, "
          "\"torch_dtype\": \"bfloat16\", \"hidden_act\": \"silu\", \"attention_bias\": false",
          NULL);
  assert_int_equal(cfg.n_kv_heads, 2);
  assert_int_equal(cfg.head_dim, 32);
  assert_true(cfg.rms_eps == 1e-5f);
  assert_true(cfg.rope_theta == 500000.0f);
  assert_int_equal(cfg.rope, ROPE_DEFAULT);
  assert_int_equal(cfg.tie_embeddings, 1);
  assert_int_equal(cfg.bos_id, 1);
  assert_int_equal(cfg.n_eos, 1);
  assert_int_equal(cfg.eos_ids[0], 2);
  assert_int_equal(cfg.max_pos, 4096);
  assert_int_equal(cfg.dtype, NS_BF16);
}

static void test_rope_llama3_v4(void **state) {
  (void)state;
  load_ok(LLAMA ", \"rope_theta\": 500000.0, \"rope_scaling\": {\"factor\": 32.0, "
                "\"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, "
                "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}",
          NULL);
  assert_int_equal(cfg.rope, ROPE_LLAMA3);
  assert_true(cfg.rope_theta == 500000.0f);
  assert_true(cfg.rope_factor == 32.0f);
  assert_true(cfg.rope_low_freq_factor == 1.0f);
  assert_true(cfg.rope_high_freq_factor == 4.0f);
  assert_int_equal(cfg.rope_original_max_pos, 8192);
  /* a missing llama3 parameter is an error naming it */
  load_fails(LLAMA ", \"rope_scaling\": {\"factor\": 8.0, \"high_freq_factor\": 4.0, "
                   "\"low_freq_factor\": 1.0, \"rope_type\": \"llama3\"}",
             NULL, NS_EFORMAT, "config.json", "rope_scaling.original_max_position_embeddings",
             "missing");
}

static void test_rope_linear_type_key(void **state) {
  (void)state;
  /* older configs put the kind under "type" */
  load_ok(LLAMA ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 4.0}", NULL);
  assert_int_equal(cfg.rope, ROPE_LINEAR);
  assert_true(cfg.rope_factor == 4.0f);
  load_ok(LLAMA ", \"rope_scaling\": {\"rope_type\": \"default\"}", NULL);
  assert_int_equal(cfg.rope, ROPE_DEFAULT);
  load_fails(LLAMA ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": -1}", NULL, NS_ERANGE,
             "config.json", "rope_scaling.factor", NULL);
}

static void test_rope_v5(void **state) {
  (void)state;
  load_ok(LLAMA ", \"rope_parameters\": {\"rope_theta\": 500000.0, \"rope_type\": \"llama3\", "
                "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                "\"original_max_position_embeddings\": 8192}, \"dtype\": \"float16\"",
          NULL);
  assert_int_equal(cfg.rope, ROPE_LLAMA3);
  assert_true(cfg.rope_theta == 500000.0f);
  assert_true(cfg.rope_factor == 8.0f);
  assert_int_equal(cfg.rope_original_max_pos, 8192);
  assert_int_equal(cfg.dtype, NS_F16);
  load_ok(LLAMA ", \"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}",
          NULL);
  assert_int_equal(cfg.rope, ROPE_DEFAULT);
  assert_true(cfg.rope_theta == 1000000.0f);
  load_ok(LLAMA ", \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2.0, "
                "\"rope_theta\": 20000}",
          NULL);
  assert_int_equal(cfg.rope, ROPE_LINEAR);
  assert_true(cfg.rope_theta == 20000.0f);
  load_fails(LLAMA ", \"rope_parameters\": {\"rope_theta\": 10000.0, \"rope_type\": \"dynamic\", "
                   "\"factor\": 2.0}",
             NULL, NS_EUNSUPPORTED, "config.json", "rope_parameters.rope_type", "dynamic");
  load_fails(LLAMA ", \"rope_parameters\": {\"rope_theta\": -5, \"rope_type\": \"default\"}", NULL,
             NS_ERANGE, "config.json", "rope_theta", NULL);
}

static void test_rope_unsupported(void **state) {
  (void)state;
  load_fails(LLAMA ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                   "\"original_max_position_embeddings\": 32768}",
             NULL, NS_EUNSUPPORTED, "config.json", "rope_scaling.rope_type", "yarn");
  load_fails(LLAMA ", \"rope_scaling\": {\"type\": \"longrope\"}", NULL, NS_EUNSUPPORTED,
             "config.json", "rope_scaling.type", "longrope");
  load_fails(LLAMA ", \"rope_scaling\": 3", NULL, NS_EFORMAT, "config.json", "rope_scaling", NULL);
}

static void test_mistral_sliding_window(void **state) {
  (void)state;
#define MISTRAL                                                                                    \
  "\"architectures\": [\"MistralForCausalLM\"], \"vocab_size\": 1000, \"hidden_size\": 64, "       \
  "\"intermediate_size\": 176, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "             \
  "\"num_key_value_heads\": 1, \"max_position_embeddings\": 32768"
  load_fails(MISTRAL ", \"sliding_window\": 4096", NULL, NS_EUNSUPPORTED, "config.json",
             "sliding_window", "sliding-window attention is not supported");
  load_ok(MISTRAL ", \"sliding_window\": null", NULL);
  assert_int_equal(cfg.arch, ARCH_MISTRAL);
  assert_int_equal(cfg.n_kv_heads, 1);
  assert_int_equal(cfg.qkv_bias, 0);
  load_ok(MISTRAL ", \"sliding_window\": 32768", NULL); /* as long as the context: no effect */
  load_ok(MISTRAL, NULL);
}

static void test_qwen2(void **state) {
  (void)state;
#define QWEN2                                                                                      \
  "\"architectures\": [\"Qwen2ForCausalLM\"], \"vocab_size\": 1000, \"hidden_size\": 64, "         \
  "\"intermediate_size\": 176, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "             \
  "\"num_key_value_heads\": 2, \"rope_theta\": 1000000.0, \"sliding_window\": 4096, "              \
  "\"max_window_layers\": 21, \"rms_norm_eps\": 1e-06"
  load_ok(QWEN2 ", \"use_sliding_window\": false, \"tie_word_embeddings\": true", NULL);
  assert_int_equal(cfg.arch, ARCH_QWEN2);
  assert_int_equal(cfg.qkv_bias, 1);
  assert_int_equal(cfg.tie_embeddings, 1);
  assert_true(cfg.rope_theta == 1000000.0f);
  assert_true(cfg.rms_eps == 1e-6f);
  load_ok(QWEN2, NULL);
  assert_int_equal(cfg.tie_embeddings, 0); /* HF's Qwen2 default */
  assert_int_equal(cfg.qkv_bias, 1);
  load_fails(QWEN2 ", \"use_sliding_window\": true", NULL, NS_EUNSUPPORTED, "config.json",
             "use_sliding_window", "sliding-window attention is not supported");
  /* model_type alone is enough */
  load_ok("\"model_type\": \"qwen2\", \"vocab_size\": 1000, \"hidden_size\": 64, "
          "\"intermediate_size\": 176, \"num_hidden_layers\": 2, \"num_attention_heads\": 4",
          NULL);
  assert_int_equal(cfg.arch, ARCH_QWEN2);
}

static void test_llama_biases(void **state) {
  (void)state;
  load_ok(LLAMA ", \"attention_bias\": true", NULL);
  assert_int_equal(cfg.qkv_bias, 1);
  load_fails(LLAMA ", \"mlp_bias\": true", NULL, NS_EUNSUPPORTED, "config.json", "mlp_bias", NULL);
  load_fails(LLAMA ", \"attention_bias\": 1", NULL, NS_EFORMAT, "config.json", "attention_bias",
             NULL);
  load_fails(LLAMA ", \"hidden_act\": \"gelu\"", NULL, NS_EUNSUPPORTED, "config.json", "hidden_act",
             "gelu");
  load_fails(LLAMA ", \"quantization_config\": {\"bits\": 4}", NULL, NS_EUNSUPPORTED, "config.json",
             "quantization_config", NULL);
}

static void test_eos(void **state) {
  (void)state;
  load_ok(LLAMA ", \"bos_token_id\": 7, \"eos_token_id\": [9, 8, 9]", NULL);
  assert_int_equal(cfg.bos_id, 7);
  assert_int_equal(cfg.n_eos, 2);
  assert_int_equal(cfg.eos_ids[0], 9);
  assert_int_equal(cfg.eos_ids[1], 8);
  load_ok(LLAMA ", \"eos_token_id\": 2",
          "{\"bos_token_id\": 1, \"eos_token_id\": [2, 5, 6], \"do_sample\": true}");
  assert_int_equal(cfg.n_eos, 3);
  assert_int_equal(cfg.eos_ids[0], 2);
  assert_int_equal(cfg.eos_ids[1], 5);
  assert_int_equal(cfg.eos_ids[2], 6);
  assert_int_equal(cfg.bos_id, 1); /* config.json had none */
  load_ok(LLAMA, "{\"eos_token_id\": 4}");
  assert_int_equal(cfg.n_eos, 1);
  assert_int_equal(cfg.eos_ids[0], 4);
  load_fails(LLAMA ", \"eos_token_id\": 1000", NULL, NS_ERANGE, "config.json", "eos_token_id",
             NULL);
  load_fails(LLAMA ", \"eos_token_id\": \"2\"", NULL, NS_EFORMAT, "config.json", "eos_token_id",
             NULL);
  load_fails(LLAMA, "{\"eos_token_id\": [3, -1]}", NS_ERANGE, "generation_config.json",
             "eos_token_id", NULL);
  load_fails(LLAMA, "[1]", NS_EFORMAT, "generation_config.json", "not a JSON object", NULL);
  load_fails(LLAMA ", \"eos_token_id\": [1,2,3,4,5,6,7,8,9]", NULL, NS_ERANGE, "config.json",
             "eos_token_id", NULL);
  load_fails(LLAMA ", \"bos_token_id\": 1000", NULL, NS_ERANGE, "config.json", "bos_token_id",
             NULL);
}

static void test_required_and_ranges(void **state) {
  (void)state;
  load_fails("\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 1000, "
             "\"intermediate_size\": 176, \"num_hidden_layers\": 2, \"num_attention_heads\": 4",
             NULL, NS_EFORMAT, "config.json", "hidden_size", "missing");
  load_fails("\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 1000, "
             "\"hidden_size\": 64, \"intermediate_size\": 176, \"num_attention_heads\": 4",
             NULL, NS_EFORMAT, "config.json", "num_hidden_layers", "missing");
  load_fails(LLAMA ", \"num_key_value_heads\": 3", NULL, NS_EINVAL, "config.json",
             "num_key_value_heads", "divide");
  load_fails(LLAMA ", \"max_position_embeddings\": -1", NULL, NS_ERANGE, "config.json",
             "max_position_embeddings", NULL);
  load_fails(LLAMA ", \"max_position_embeddings\": 2048.5", NULL, NS_EFORMAT, "config.json",
             "max_position_embeddings", "integer");
  load_fails(LLAMA ", \"max_position_embeddings\": \"2048\"", NULL, NS_EFORMAT, "config.json",
             "max_position_embeddings", "integer");
  load_fails(LLAMA ", \"max_position_embeddings\": 1e300", NULL, NS_ERANGE, "config.json",
             "max_position_embeddings", NULL);
  load_fails(LLAMA ", \"head_dim\": 15", NULL, NS_EINVAL, "config.json", "head_dim", NULL);
  load_fails(LLAMA ", \"rms_norm_eps\": 0", NULL, NS_ERANGE, "config.json", "rms_norm_eps", NULL);
  load_fails(LLAMA ", \"torch_dtype\": \"int8\"", NULL, NS_EUNSUPPORTED, "config.json",
             "torch_dtype", NULL);
  load_fails("\"architectures\": [\"GPT2LMHeadModel\"], \"vocab_size\": 10", NULL, NS_EUNSUPPORTED,
             "config.json", "architectures", "GPT2LMHeadModel");
  load_fails("\"vocab_size\": 10", NULL, NS_EFORMAT, "config.json", "architectures", NULL);
  /* hidden not divisible by heads needs an explicit head_dim */
  load_fails("\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 1000, "
             "\"hidden_size\": 66, \"intermediate_size\": 176, \"num_hidden_layers\": 2, "
             "\"num_attention_heads\": 4",
             NULL, NS_EINVAL, "config.json", "hidden_size", NULL);
  load_ok("\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 1000, "
          "\"hidden_size\": 66, \"intermediate_size\": 176, \"num_hidden_layers\": 2, "
          "\"num_attention_heads\": 4, \"head_dim\": 16",
          NULL);
  assert_int_equal(cfg.head_dim, 16);
}

static void test_files(void **state) {
  (void)state;
  unlink(tw_path(dir, "config.json"));
  unlink(tw_path(dir, "generation_config.json"));
  assert_int_equal(model_cfg_load(dir, &cfg, err, sizeof err), NS_ENOENT);
  assert_non_null(strstr(err, "config.json"));
  assert_int_equal(tw_write_text(tw_path(dir, "config.json"), "{\"vocab_size\": "), 0);
  assert_int_equal(model_cfg_load(dir, &cfg, err, sizeof err), NS_EFORMAT);
  assert_non_null(strstr(err, "config.json"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_defaults),
      cmocka_unit_test(test_llama_full_v4),
      cmocka_unit_test(test_rope_llama3_v4),
      cmocka_unit_test(test_rope_linear_type_key),
      cmocka_unit_test(test_rope_v5),
      cmocka_unit_test(test_rope_unsupported),
      cmocka_unit_test(test_mistral_sliding_window),
      cmocka_unit_test(test_qwen2),
      cmocka_unit_test(test_llama_biases),
      cmocka_unit_test(test_eos),
      cmocka_unit_test(test_required_and_ranges),
      cmocka_unit_test(test_files),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
