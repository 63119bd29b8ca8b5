/* fuzz_params.c — arbitrary request bodies through what a pool thread does with them before
 * tokenizing (api_call.c work): api_parse_json, then api_parse_completions or api_parse_chat,
 * then for chat the template's rendering. Input: a selector byte (bit 0: chat; bits 1-3: the
 * template family; bits 4-7: mistral's variants), then the body. A request either fails with
 * a client status and a message, or gives parameters inside the ranges the engine is promised;
 * a chat request the parser took renders or fails with the template's message. */
#include "api.h"
#include "chat_tmpl.h"
#include "ns_err.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONTEXT 2048
#define VOCAB       512

static const char *const families[] = {"llama2", "llama3", "chatml", "mistral", "zephyr"};

static int in(double x, double lo, double hi) {
  return isfinite(x) && x >= lo && x <= hi;
}

static void check_failed(const api_err_t *e) {
  if (e->status != 400 && e->status != 404 && e->status != 500 && e->status != 503) abort();
  if (!e->msg[0]) abort();
}

static void check_sampling(const api_params_t *p) {
  const samp_params *s = &p->sp;
  if (!in(s->temperature, 0, 2) || !in(s->top_p, 0, 1) || s->top_p <= 0 || !in(s->min_p, 0, 1) ||
      !in(s->repetition_penalty, 0, 10) || s->repetition_penalty <= 0 ||
      !in(s->presence_penalty, -2, 2) || !in(s->frequency_penalty, -2, 2) || s->top_k < 0 ||
      s->n_logprobs < 0 || s->n_logprobs > SAMP_MAX_LOGPROBS)
    abort();
  if (p->logprobs < -1 || p->logprobs > SAMP_MAX_LOGPROBS) abort();
  if (p->n_stop < 0 || p->n_stop > ENG_MAX_STOP) abort();
  for (int i = 0; i < p->n_stop; i++)
    if (!p->stop[i] || !p->stop[i][0]) abort();
  if (p->include_usage && !p->stream) abort();
  if (p->n_stop_ids < 0 || p->n_stop_ids > ENG_MAX_STOP_IDS || (p->n_stop_ids > 0) != !!p->stop_ids)
    abort();
  for (int i = 0; i < p->n_stop_ids; i++)
    if (p->stop_ids[i] < 0 || p->stop_ids[i] >= VOCAB) abort();
  /* the logit bias as eng_submit takes it: ids in range and increasing, biases in [-100, 100] */
  if (s->n_bias < 0 || s->n_bias > SAMP_MAX_BIAS || (s->n_bias > 0) != (s->bias != NULL)) abort();
  for (int i = 0; i < s->n_bias; i++)
    if (s->bias[i].id < 0 || s->bias[i].id >= VOCAB || (i && s->bias[i].id <= s->bias[i - 1].id) ||
        !in(s->bias[i].bias, -100, 100))
      abort();
}

static void check_completions(const api_params_t *p) {
  if (p->kind != API_COMPLETIONS || !p->prompt_text == !p->prompt_ids) abort();
  if (p->prompt_text && strlen(p->prompt_text) != p->prompt_len) abort();
  if (p->prompt_ids && p->n_prompt_ids < 1) abort();
  for (int i = 0; i < p->n_prompt_ids; i++)
    if (p->prompt_ids[i] < 0 || p->prompt_ids[i] >= VOCAB) abort();
  if (p->max_tokens < 1 || p->max_tokens >= MAX_CONTEXT) abort();
  if (p->echo && p->logprobs >= 0) abort(); /* prompt logprobs: refused */
}

static void check_chat(const api_params_t *p, uint8_t sel) {
  if (p->kind != API_CHAT || p->n_msgs < 1 || !p->msgs) abort();
  for (int i = 0; i < p->n_msgs; i++) {
    const char *r = p->msgs[i].role;
    if (!r || !p->msgs[i].content) abort();
    if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) abort();
  }
  if (p->max_tokens < 0 || p->max_tokens >= MAX_CONTEXT) abort();

  chat_tmpl_t t;
  if (chat_tmpl_from_name(families[(sel >> 1 & 7) % 5], &t)) abort();
  if (t.family == CHAT_MISTRAL) {
    t.system_ok = sel >> 4 & 1, t.system_last = sel >> 5 & 1;
    t.inst_space = sel >> 6 & 1, t.answer_space = sel >> 7 & 1;
  }
  char *text = NULL, err[256] = "";
  size_t len = 0;
  int rc = chat_tmpl_render(&t, p->msgs, p->n_msgs, "<s>", "</s>", &text, &len, err, sizeof err);
  if (rc == 0 && (!text || strlen(text) != len)) abort(); /* contents hold no NUL */
  if (rc == NS_EINVAL && !err[0]) abort();
  if (rc != 0 && rc != NS_EINVAL && rc != NS_ENOMEM) abort();
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static api_srv_t a;
  if (!a.vocab) {
    strcpy(a.model_name, "m");
    a.max_context = MAX_CONTEXT;
    a.vocab = VOCAB;
  }
  if (size < 1) return 0;
  const uint8_t sel = data[0];
  const size_t n = size - 1;
  char *body = malloc(n + 1); /* the server's bodies are NUL-terminated */
  if (!body) return 0;
  memcpy(body, data + 1, n);
  body[n] = '\0';

  api_err_t e;
  memset(&e, 0, sizeof e);
  cJSON *root = api_parse_json(body, n, &e);
  if (!root) {
    check_failed(&e);
    free(body);
    return 0;
  }
  api_params_t p;
  const int chat = sel & 1;
  int rc = chat ? api_parse_chat(&a, root, &p, &e) : api_parse_completions(&a, root, &p, &e);
  cJSON_Delete(root);
  if (rc) {
    if (rc != NS_EINVAL) abort();
    check_failed(&e);
  } else {
    if (e.status) abort();
    check_sampling(&p);
    if (chat)
      check_chat(&p, sel);
    else
      check_completions(&p);
  }
  api_params_free(&p);
  free(body);
  return 0;
}
