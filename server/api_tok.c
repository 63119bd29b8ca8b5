/* api_tok.c — /tokenize and /detokenize: the Content-Type is checked on the loop thread; the
 * body's JSON checks and parse, the chat rendering, the tokenizer and the answer's JSON run on
 * libuv's thread pool, since a 4 MB prompt takes seconds (its parse alone tens of ms, and
 * hundreds under the sanitizers) and on the loop would stall every connection. Entry points:
 * api_handle_tokenize, api_handle_detokenize (loop thread). */
#include "api.h"

#include "ns_err.h"
#include "tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One request's work: what the handler took from the body, and what the pool made. */
typedef struct tok_job tok_job_t;
typedef int (*tok_input_fn)(const api_srv_t *, const cJSON *, tok_job_t *, api_err_t *);
struct tok_job {
  uv_work_t work;
  api_srv_t *a;
  http_req_t *req;
  const char *endpoint; /* the metrics label */
  /* the request's body (NUL-terminated; the handler's reference keeps it until the answer),
   * read into the fields below by input, then work */
  const char *body;
  size_t body_len;
  tok_input_fn input;
  uv_work_cb fn;
  /* /tokenize: a prompt, or messages to render first */
  char *text;
  size_t len;
  int add_special;
  api_params_t chat;
  /* /detokenize */
  int32_t *ids;
  size_t n_ids;
  /* the answer: a 200 body, or NULL and err */
  char *out;
  size_t out_len;
  api_err_t err;
};

static tok_job_t *job_new(api_srv_t *a, http_req_t *req, const char *endpoint) {
  tok_job_t *j = calloc(1, sizeof *j);
  if (!j) return NULL;
  j->a = a;
  j->req = req;
  j->endpoint = endpoint;
  j->work.data = j;
  a->live++; /* the drain waits for it as for a generation */
  return j;
}

static void job_free(tok_job_t *j) {
  api_srv_t *a = j->a;
  free(j->text);
  api_params_free(&j->chat);
  free(j->ids);
  free(j->out);
  free(j);
  if (--a->live == 0 && a->on_idle) a->on_idle(a->idle_ud);
}

static void count(api_srv_t *a, const char *endpoint, int status) {
  srv_req_record_t r = {endpoint, status, NULL, 0, 0, -1, -1, -1};
  srv_metrics_request(a->metrics, &r);
}

/* Loop thread: answer what the pool made (the client may be gone: that only releases). */
static void after_work(uv_work_t *w, int status) {
  tok_job_t *j = w->data;
  (void)status; /* never cancelled */
  if (http_req_cancelled(j->req))
    count(j->a, j->endpoint, 0);
  else
    count(j->a, j->endpoint, j->out ? 200 : j->err.status);
  if (j->out)
    http_respond(j->req, 200, "application/json", j->out, j->out_len, NULL);
  else
    api_send_err(j->req, &j->err);
  job_free(j);
}

static void queue_job(tok_job_t *j, uv_work_cb work) {
  if (uv_queue_work(j->a->loop, &j->work, work, after_work) != 0) {
    api_fail(&j->err, 500, NULL, "cannot queue the request for tokenization");
    after_work(&j->work, 0);
  }
}

static void fail_now(api_srv_t *a, http_req_t *req, const char *endpoint, const api_err_t *e) {
  count(a, endpoint, e->status);
  api_send_err(req, e);
}

/* ---- /tokenize --------------------------------------------------------------------------- */

/* {"tokens":[...],"count":n,"max_model_len":m}, as cJSON would print it. */
static char *tokens_json(const int32_t *ids, size_t n, int max_context, size_t *len) {
  size_t cap = 64 + n * 12;
  char *b = malloc(cap), *o = b;
  if (!b) return NULL;
  o += sprintf(o, "{\"tokens\":[");
  for (size_t i = 0; i < n; i++)
    o += sprintf(o, i ? ",%d" : "%d", (int)ids[i]);
  o += sprintf(o, "],\"count\":%zu,\"max_model_len\":%d}", n, max_context);
  *len = (size_t)(o - b);
  return b;
}

static void tokenize_work(uv_work_t *w) {
  tok_job_t *j = w->data;
  const api_srv_t *a = j->a;
  if (j->chat.n_msgs) {
    char err[256] = "";
    if (chat_tmpl_render(&a->tmpl, j->chat.msgs, j->chat.n_msgs, a->bos, a->eos, &j->text, &j->len,
                         err, sizeof err)) {
      api_fail(&j->err, 400, "messages", "%s", err);
      return;
    }
  }
  int32_t *ids = NULL;
  size_t n = 0;
  int rc = tok_encode(a->tok, j->text, j->len, j->add_special, &ids, &n);
  if (rc) {
    api_fail(&j->err, rc == NS_ENOMEM ? 500 : 400, "prompt", "cannot tokenize: %s",
             ns_strerror(rc));
    return;
  }
  j->out = tokens_json(ids, n, a->max_context, &j->out_len);
  free(ids);
  if (!j->out) api_fail(&j->err, 500, NULL, "out of memory");
}

/* The body's prompt or messages into j (0), or e filled. */
static int tokenize_input(const api_srv_t *a, const cJSON *root, tok_job_t *j, api_err_t *e) {
  const cJSON *pr = cJSON_GetObjectItemCaseSensitive(root, "prompt");
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
  const cJSON *as = cJSON_GetObjectItemCaseSensitive(root, "add_special_tokens");
  j->add_special = 1;
  if (as && !cJSON_IsNull(as)) {
    if (!cJSON_IsBool(as))
      return api_fail(e, 400, "add_special_tokens", "'add_special_tokens' must be a boolean");
    j->add_special = cJSON_IsTrue(as);
  }
  if (cJSON_IsString(pr) && !ms) {
    if (!(j->text = strdup(pr->valuestring))) return api_fail(e, 500, "prompt", "out of memory");
    j->len = strlen(j->text);
    return 0;
  }
  if (!ms || pr) return api_fail(e, 400, "prompt", "send either 'prompt' (a string) or 'messages'");
  if (api_parse_chat(a, root, &j->chat, e)) return NS_EINVAL;
  if (a->tmpl.family == CHAT_NONE)
    return api_fail(e, 400, "messages",
                    "the model's chat template is not supported; set engine.chat_template");
  j->add_special = 0; /* the template writes its own BOS */
  return 0;
}

/* Pool: the body parsed and read by the job's input, then its work (errors in j->err). */
static void job_work(uv_work_t *w) {
  tok_job_t *j = w->data;
  cJSON *root = api_parse_json(j->body, j->body_len, &j->err);
  if (!root) return;
  const int rc = j->input(j->a, root, j, &j->err);
  cJSON_Delete(root);
  if (rc == 0) j->fn(w);
}

/* Loop: the Content-Type checked, then the rest on the pool. */
static void handle_job(http_req_t *req, api_srv_t *a, const char *what, tok_input_fn input,
                       uv_work_cb work) {
  api_err_t e;
  if (api_check_type(req, &e)) {
    fail_now(a, req, what, &e);
    return;
  }
  tok_job_t *j = job_new(a, req, what);
  if (!j) {
    api_fail(&e, 500, NULL, "out of memory");
    fail_now(a, req, what, &e);
    return;
  }
  j->body = http_req_body(req, &j->body_len);
  j->input = input;
  j->fn = work;
  queue_job(j, job_work);
}

void api_handle_tokenize(http_req_t *req, void *ud) {
  handle_job(req, ud, "tokenize", tokenize_input, tokenize_work);
}

/* ---- /detokenize ------------------------------------------------------------------------- */

static void detokenize_work(uv_work_t *w) {
  tok_job_t *j = w->data;
  char *text = NULL;
  size_t len = 0;
  if (tok_decode(j->a->tok, j->ids, j->n_ids, 0, &text, &len) != 0) {
    api_fail(&j->err, 400, "tokens", "the tokens cannot be decoded");
    return;
  }
  /* the text's own length: byte tokens such as <0x00> put NULs in it */
  j->out = malloc(len * 6 + 16);
  if (j->out) {
    char *o = j->out;
    o += sprintf(o, "{\"prompt\":");
    o += api_json_string(o, text, len);
    *o++ = '}';
    *o = '\0';
    j->out_len = (size_t)(o - j->out);
  } else {
    api_fail(&j->err, 500, NULL, "out of memory");
  }
  free(text);
}

/* The body's token ids into j (0), or e filled. */
static int detokenize_input(const api_srv_t *a, const cJSON *root, tok_job_t *j, api_err_t *e) {
  const cJSON *ts = cJSON_GetObjectItemCaseSensitive(root, "tokens");
  if (!cJSON_IsArray(ts))
    return api_fail(e, 400, "tokens", "'tokens' must be an array of token ids");
  int n = cJSON_GetArraySize(ts), vocab = tok_vocab_size(a->tok);
  if (!(j->ids = malloc((size_t)(n ? n : 1) * sizeof *j->ids)))
    return api_fail(e, 500, NULL, "out of memory");
  const cJSON *t;
  cJSON_ArrayForEach(t, ts) {
    double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
    if (!cJSON_IsNumber(t) || floor(d) != d || d < 0 || d >= vocab)
      return api_fail(e, 400, "tokens", "token %zu must be an id in [0, %d)", j->n_ids, vocab);
    j->ids[j->n_ids++] = (int32_t)d;
  }
  return 0;
}

void api_handle_detokenize(http_req_t *req, void *ud) {
  handle_job(req, ud, "detokenize", detokenize_input, detokenize_work);
}
