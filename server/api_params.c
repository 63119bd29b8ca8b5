/* api_params.c — the request bodies of /v1/completions and /v1/chat/completions: every
 * field type- and range-checked, errors naming the param in OpenAI's shape. Entry points:
 * api_check_type (loop thread), api_parse_json, api_parse_completions, api_parse_chat (any
 * thread). */
#include "api.h"

#include "ns_err.h"
#include "ns_log.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_STOP_BYTES 256

int api_fail(api_err_t *e, int status, const char *param, const char *fmt, ...) {
  e->status = status;
  e->code = NULL;
  snprintf(e->param, sizeof e->param, "%s", param ? param : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return NS_EINVAL;
}

void api_send_err(http_req_t *req, const api_err_t *e) {
  http_error_ex(req, e->status, e->param[0] ? e->param : NULL, e->code, NULL, "%s", e->msg);
}

int api_utf8_valid(const char *s, size_t n) {
  for (size_t i = 0, k; i < n; i += k)
    if (!(k = ns_utf8_seq(s + i, n - i))) return 0;
  return 1;
}

/* ---- the body ------------------------------------------------------------------------------ */

/* Accepted: no Content-Type, or application/json with any parameters (charset=utf-8).
 * Anything else is 415: a form or text body is a client bug worth naming. */
static int json_content_type(const char *ct) {
  if (!ct) return 1;
  while (*ct == ' ' || *ct == '\t')
    ct++;
  static const char want[] = "application/json";
  if (strncasecmp(ct, want, sizeof want - 1) != 0) return 0;
  char next = ct[sizeof want - 1];
  return next == '\0' || next == ';' || next == ' ' || next == '\t';
}

/* Whether one of the JSON text's strings holds a \u0000 escape: cJSON would end the string
 * there and drop the rest of it without a word. Backslashes outside strings are not JSON, so
 * every escape is looked at, and skipped whole, in order. */
static int has_nul_escape(const char *s, size_t len) {
  for (size_t i = 0; i + 1 < len; i++) {
    if (s[i] != '\\') continue;
    if (s[i + 1] == 'u' && i + 6 <= len && !memcmp(s + i + 2, "0000", 4)) return 1;
    i++; /* the escaped character */
  }
  return 0;
}

int api_check_type(http_req_t *req, api_err_t *e) {
  if (json_content_type(http_req_header(req, "Content-Type"))) return 0;
  api_fail(e, 415, NULL, "Content-Type must be application/json, not '%.100s'",
           http_req_header(req, "Content-Type"));
  e->code = "unsupported_media_type";
  return NS_EINVAL;
}

cJSON *api_parse_json(const char *body, size_t len, api_err_t *e) {
  if (len == 0) {
    api_fail(e, 400, NULL, "the request body is empty; a JSON object is expected");
    return NULL;
  }
  if (!api_utf8_valid(body, len)) {
    api_fail(e, 400, NULL, "the request body is not valid UTF-8");
    return NULL;
  }
  if (memchr(body, '\0', len)) {
    api_fail(e, 400, NULL, "the request body is not valid JSON (a NUL byte)");
    return NULL;
  }
  if (has_nul_escape(body, len)) {
    api_fail(e, 400, NULL, "strings in the request body must not hold NUL characters (\\u0000)");
    return NULL;
  }
  size_t off = 0;
  if (api_json_check(body, len, &off)) {
    api_fail(e, 400, NULL, "the request body is not valid JSON (near byte %zu)", off);
    return NULL;
  }
  /* len + 1: cJSON's trailing-garbage check wants to see the terminating NUL. cJSON's parse
   * writes its global error record (cJSON_GetErrorPtr's) on every call, success or not, so the
   * pool threads parse one at a time rather than race on it. */
  static pthread_mutex_t parse_mu = PTHREAD_MUTEX_INITIALIZER;
  const char *end = NULL;
  pthread_mutex_lock(&parse_mu);
  cJSON *root = cJSON_ParseWithLengthOpts(body, len + 1, &end, 1);
  pthread_mutex_unlock(&parse_mu);
  if (!root) {
    off = end && end >= body ? (size_t)(end - body) : 0;
    api_fail(e, 400, NULL, "the request body is not valid JSON (near byte %zu)", off);
    return NULL;
  }
  if (api_json_exact_ints(root, body, len) == NS_ENOMEM || api_json_last_wins(root)) {
    cJSON_Delete(root);
    api_fail(e, 503, NULL, "out of memory reading the request body");
    return NULL;
  }
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    api_fail(e, 400, NULL, "the request body must be a JSON object");
    return NULL;
  }
  return root;
}

/* ---- fields ------------------------------------------------------------------------------ */

/* The field, or NULL when absent or null (OpenAI treats null as "not given"). */
static const cJSON *get(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

static int num(const cJSON *o, const char *key, double lo, double hi, int lo_open, float *out,
               api_err_t *e) {
  const cJSON *v = get(o, key);
  if (!v) return 0;
  if (!cJSON_IsNumber(v)) return api_fail(e, 400, key, "'%s' must be a number", key);
  double d = v->valuedouble;
  /* the engine takes a float: a value past lo that rounds to it there (a denormal 1e-320)
   * is out of range too, and named here rather than refused by the engine without a param */
  float f = (float)d;
  if (!isfinite(d) || d < lo || d > hi || (lo_open && (d <= lo || f <= (float)lo)))
    return api_fail(e, 400, key, "'%s' must be in %c%g, %g], got %g", key, lo_open ? '(' : '[', lo,
                    hi, d);
  *out = f;
  return 0;
}

/* A number for a message: a long one as written (api_json_exact_ints kept its text), not as
 * its double rounds it; others in %.17g. buf: room for 32 bytes. */
static const char *as_written(const cJSON *v, char *buf) {
  if (v->valuestring) return v->valuestring;
  snprintf(buf, 32, "%.17g", v->valuedouble);
  return buf;
}

static int integer(const cJSON *o, const char *key, double lo, double hi, int *out, api_err_t *e) {
  const cJSON *v = get(o, key);
  if (!v) return 0;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || floor(v->valuedouble) != v->valuedouble)
    return api_fail(e, 400, key, "'%s' must be an integer", key);
  double d = v->valuedouble;
  char num[32];
  if (d < lo || d > hi)
    return api_fail(e, 400, key, "'%s' must be in [%.0f, %.0f], got %.60s", key, lo, hi,
                    as_written(v, num));
  *out = (int)d;
  return 0;
}

static int boolean(const cJSON *o, const char *key, int *out, api_err_t *e) {
  const cJSON *v = get(o, key);
  if (!v) return 0;
  if (!cJSON_IsBool(v)) return api_fail(e, 400, key, "'%s' must be a boolean", key);
  *out = cJSON_IsTrue(v);
  return 0;
}

static int stop_add(api_params_t *p, const cJSON *s, api_err_t *e) {
  if (!cJSON_IsString(s)) return api_fail(e, 400, "stop", "'stop' must be a string or strings");
  size_t n = strlen(s->valuestring);
  if (n == 0) return api_fail(e, 400, "stop", "stop strings must not be empty");
  if (n > MAX_STOP_BYTES)
    return api_fail(e, 400, "stop", "stop strings must be at most %d bytes, got %zu",
                    MAX_STOP_BYTES, n);
  if (!(p->stop[p->n_stop] = strdup(s->valuestring)))
    return api_fail(e, 500, NULL, "out of memory");
  p->n_stop++;
  return 0;
}

/* The n (> 0) entries of JSON array arr as token ids in [0, vocab), into a malloc'd *out (the
 * caller's to free, also on error); a bad one is named "<what> <index>" for param. */
static int token_ids(const api_srv_t *a, const cJSON *arr, int n, const char *param,
                     const char *what, int32_t **out, api_err_t *e) {
  if (!(*out = malloc((size_t)n * sizeof **out))) return api_fail(e, 500, NULL, "out of memory");
  int i = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, arr) {
    double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
    if (floor(d) != d || d < 0 || d >= a->vocab)
      return api_fail(e, 400, param, "%s %d must be an id in [0, %d)", what, i, a->vocab);
    (*out)[i++] = (int32_t)d;
  }
  return 0;
}

/* stop_token_ids (vLLM's): ids that end the request as EOS does, even with ignore_eos. */
static int stop_token_ids(const api_srv_t *a, const cJSON *v, api_params_t *p, api_err_t *e) {
  int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
  if (n < 0)
    return api_fail(e, 400, "stop_token_ids", "'stop_token_ids' must be an array of token ids");
  if (n > ENG_MAX_STOP_IDS)
    return api_fail(e, 400, "stop_token_ids", "at most %d stop token ids are allowed, got %d",
                    ENG_MAX_STOP_IDS, n);
  if (n > 0 && token_ids(a, v, n, "stop_token_ids", "stop token id", &p->stop_ids, e))
    return NS_EINVAL;
  p->n_stop_ids = n;
  return 0;
}

/* A logit_bias entry as read: its place in the object breaks ties between repeated ids. */
typedef struct bias_in {
  int32_t id, at;
  float bias;
} bias_in;

static int bias_cmp(const void *pa, const void *pb) {
  const bias_in *a = pa, *b = pb;
  if (a->id != b->id) return a->id < b->id ? -1 : 1;
  return (a->at > b->at) - (a->at < b->at);
}

/* logit_bias: {"token id": bias in [-100, 100], ...} (OpenAI's shape; keys are decimal ids).
 * Two keys naming one id ("5" and "05"; a name given twice is resolved already, by
 * api_json_last_wins) keep the later one's value, as Python's int(key) over the object's items
 * would. The list goes to the engine sorted by id. */
static int logit_bias(const api_srv_t *a, const cJSON *v, api_params_t *p, api_err_t *e) {
  if (!cJSON_IsObject(v))
    return api_fail(e, 400, "logit_bias",
                    "'logit_bias' must be an object that maps token ids to biases");
  int n = cJSON_GetArraySize(v);
  if (n == 0) return 0;
  if (n > SAMP_MAX_BIAS)
    return api_fail(e, 400, "logit_bias", "'logit_bias' may hold at most %d entries, got %d",
                    SAMP_MAX_BIAS, n);
  bias_in in[SAMP_MAX_BIAS];
  int i = 0;
  const cJSON *m;
  cJSON_ArrayForEach(m, v) {
    const char *k = m->string;
    size_t kl = strlen(k);
    long long id = -1;
    if (kl >= 1 && kl <= 10 && strspn(k, "0123456789") == kl) id = strtoll(k, NULL, 10);
    if (id < 0 || id >= a->vocab)
      return api_fail(e, 400, "logit_bias",
                      "'logit_bias' keys must be token ids in [0, %d), got '%.40s'", a->vocab, k);
    if (!cJSON_IsNumber(m) || !(m->valuedouble >= -100 && m->valuedouble <= 100))
      return api_fail(e, 400, "logit_bias",
                      "'logit_bias' values must be numbers in [-100, 100] (token %lld)", id);
    in[i] = (bias_in){(int32_t)id, i, (float)m->valuedouble};
    i++;
  }
  qsort(in, (size_t)n, sizeof *in, bias_cmp);
  samp_bias *b = malloc((size_t)n * sizeof *b);
  if (!b) return api_fail(e, 500, NULL, "out of memory");
  int nb = 0;
  for (int j = 0; j < n; j++) /* the last of each id's run */
    if (j + 1 == n || in[j + 1].id != in[j].id) b[nb++] = (samp_bias){in[j].id, in[j].bias};
  p->sp.bias = b; /* p's (api_params_free) until the engine request takes it */
  p->sp.n_bias = nb;
  return 0;
}

/* Sampling and output fields shared by both endpoints. */
static int common(const api_srv_t *a, const cJSON *o, api_params_t *p, api_err_t *e) {
  const cJSON *v;
  if ((v = get(o, "model"))) {
    if (!cJSON_IsString(v)) return api_fail(e, 400, "model", "'model' must be a string");
    if (strcmp(v->valuestring, a->model_name) != 0) {
      api_fail(e, 404, "model", "The model '%.200s' does not exist; this server serves '%s'",
               v->valuestring, a->model_name);
      e->code = "model_not_found";
      return NS_EINVAL;
    }
  }
  p->sp = samp_params_default();
  if (num(o, "temperature", 0, 2, 0, &p->sp.temperature, e) ||
      num(o, "top_p", 0, 1, 1, &p->sp.top_p, e) || num(o, "min_p", 0, 1, 0, &p->sp.min_p, e) ||
      num(o, "repetition_penalty", 0, 10, 1, &p->sp.repetition_penalty, e) ||
      num(o, "presence_penalty", -2, 2, 0, &p->sp.presence_penalty, e) ||
      num(o, "frequency_penalty", -2, 2, 0, &p->sp.frequency_penalty, e))
    return NS_EINVAL;
  int top_k = 0;
  if (integer(o, "top_k", -1, 1 << 30, &top_k, e)) return NS_EINVAL;
  p->sp.top_k = top_k < 0 ? 0 : top_k;
  if ((v = get(o, "seed"))) {
    /* any 64-bit integer, signed or not, exactly: 2^53 + 1 is not 2^53 */
    if (api_json_int64(v, INT64_MIN, UINT64_MAX, &p->sp.seed))
      return api_fail(e, 400, "seed", "'seed' must be a 64-bit integer");
  } else {
    /* no seed: a fresh one per request (OpenAI: non-deterministic) */
    p->sp.seed = ((uint64_t)uv_hrtime() * 0x9e3779b97f4a7c15ull) ^ (uint64_t)(uintptr_t)p;
  }
  int n = 1;
  if (integer(o, "n", 1, 128, &n, e)) return NS_EINVAL;
  if (n != 1) return api_fail(e, 400, "n", "only n=1 is supported, got %d", n);
  if ((v = get(o, "stop"))) {
    if (cJSON_IsString(v)) {
      if (stop_add(p, v, e)) return NS_EINVAL;
    } else if (cJSON_IsArray(v)) {
      int cnt = cJSON_GetArraySize(v);
      if (cnt > ENG_MAX_STOP)
        return api_fail(e, 400, "stop", "at most %d stop strings are allowed, got %d", ENG_MAX_STOP,
                        cnt);
      const cJSON *s;
      cJSON_ArrayForEach(s, v) if (stop_add(p, s, e)) return NS_EINVAL;
    } else {
      return api_fail(e, 400, "stop", "'stop' must be a string or an array of strings");
    }
  }
  if ((v = get(o, "stop_token_ids")) && stop_token_ids(a, v, p, e)) return NS_EINVAL;
  if (boolean(o, "stream", &p->stream, e) || boolean(o, "ignore_eos", &p->ignore_eos, e))
    return NS_EINVAL;
  if ((v = get(o, "stream_options"))) {
    if (!cJSON_IsObject(v))
      return api_fail(e, 400, "stream_options", "'stream_options' must be an object");
    if (!p->stream)
      return api_fail(e, 400, "stream_options", "'stream_options' is only allowed with stream");
    const cJSON *iu = get(v, "include_usage");
    if (iu && !cJSON_IsBool(iu))
      return api_fail(e, 400, "stream_options.include_usage", "'include_usage' must be a boolean");
    p->include_usage = cJSON_IsTrue(iu);
  }
  if ((v = get(o, "logit_bias")) && logit_bias(a, v, p, e)) return NS_EINVAL;
  if ((v = get(o, "user")) && !cJSON_IsString(v))
    return api_fail(e, 400, "user", "'user' must be a string");
  return 0;
}

/* max_tokens (and chat's max_completion_tokens): at least 1; the context check comes after
 * tokenization, when the prompt's length is known. */
static int max_tokens(const api_srv_t *a, const cJSON *o, const char *key, api_params_t *p,
                      api_err_t *e) {
  const cJSON *v = get(o, key);
  if (!v) return 0;
  /* past the context (even past int32) first: the message says why */
  char num[32];
  if (cJSON_IsNumber(v) && v->valuedouble >= (double)a->max_context)
    return api_fail(e, 400, key,
                    "'%s' is %.60s, but this model's maximum context length is %d tokens "
                    "(prompt included)",
                    key, as_written(v, num), a->max_context);
  int mt = 0;
  if (integer(o, key, -2147483648.0, 2147483647.0, &mt, e)) return NS_EINVAL;
  if (mt < 1) return api_fail(e, 400, key, "'%s' must be at least 1, got %d", key, mt);
  p->max_tokens = mt;
  p->max_tokens_key = key;
  return 0;
}

/* ---- /v1/completions ------------------------------------------------------------------- */

static int prompt_ids(const api_srv_t *a, const cJSON *arr, api_params_t *p, api_err_t *e) {
  int n = cJSON_GetArraySize(arr);
  if (n == 0) return api_fail(e, 400, "prompt", "'prompt' must not be empty");
  if (token_ids(a, arr, n, "prompt", "prompt token", &p->prompt_ids, e)) return NS_EINVAL;
  p->n_prompt_ids = n;
  return 0;
}

/* An empty text is taken (it is the model's BOS alone, as in OpenAI's and vLLM's API); one
 * that tokenizes to nothing is refused after tokenization (api_call.c work). */
static int set_prompt_text(const char *s, api_params_t *p, api_err_t *e) {
  if (!(p->prompt_text = strdup(s))) return api_fail(e, 500, NULL, "out of memory");
  p->prompt_len = strlen(s);
  return 0;
}

int api_parse_completions(const api_srv_t *a, const cJSON *o, api_params_t *p, api_err_t *e) {
  memset(p, 0, sizeof *p);
  p->kind = API_COMPLETIONS;
  p->logprobs = -1;
  p->max_tokens = 16;
  const cJSON *pr = get(o, "prompt");
  if (!pr) return api_fail(e, 400, "prompt", "'prompt' is required");
  if (cJSON_IsString(pr)) {
    if (set_prompt_text(pr->valuestring, p, e)) return NS_EINVAL;
  } else if (cJSON_IsArray(pr)) {
    const cJSON *first = pr->child;
    if (!first) return api_fail(e, 400, "prompt", "'prompt' must not be empty");
    if (cJSON_IsNumber(first)) {
      if (prompt_ids(a, pr, p, e)) return NS_EINVAL;
    } else if (cJSON_GetArraySize(pr) > 1) {
      return api_fail(e, 400, "prompt", "batched prompts are not supported: send one prompt");
    } else if (cJSON_IsString(first)) {
      if (set_prompt_text(first->valuestring, p, e)) return NS_EINVAL;
    } else if (cJSON_IsArray(first)) {
      if (prompt_ids(a, first, p, e)) return NS_EINVAL;
    } else {
      return api_fail(e, 400, "prompt", "'prompt' must be a string or an array of token ids");
    }
  } else {
    return api_fail(e, 400, "prompt", "'prompt' must be a string or an array of token ids");
  }
  if (common(a, o, p, e) || max_tokens(a, o, "max_tokens", p, e)) return NS_EINVAL;
  if (boolean(o, "echo", &p->echo, e)) return NS_EINVAL;
  int lp = -1;
  if (integer(o, "logprobs", 0, SAMP_MAX_LOGPROBS, &lp, e)) return NS_EINVAL;
  p->logprobs = lp;
  if (lp >= 0) p->sp.n_logprobs = lp;
  if (lp >= 0 && p->echo)
    return api_fail(e, 400, "logprobs",
                    "'logprobs' with 'echo' asks for prompt logprobs, which are not supported");
  const cJSON *v;
  int best_of = 1;
  if (integer(o, "best_of", 1, 128, &best_of, e)) return NS_EINVAL;
  if (best_of != 1) return api_fail(e, 400, "best_of", "only best_of=1 is supported");
  if ((v = get(o, "suffix")) && (!cJSON_IsString(v) || v->valuestring[0]))
    return api_fail(e, 400, "suffix", "'suffix' is not supported");
  return 0;
}

/* ---- /v1/chat/completions ---------------------------------------------------------------- */

static const char *role_of(const char *r) {
  static const char *const roles[] = {"system", "user", "assistant"};
  for (int i = 0; i < 3; i++)
    if (strcmp(r, roles[i]) == 0) return roles[i];
  return NULL;
}

/* content: a string, or text parts joined by "\n" (as vLLM does); assistant may be null. */
static int content_of(const cJSON *m, int i, const char *role, char **out, api_err_t *e) {
  char param[64];
  snprintf(param, sizeof param, "messages.[%d].content", i);
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
  if ((!c || cJSON_IsNull(c)) && strcmp(role, "assistant") == 0) {
    *out = strdup("");
  } else if (cJSON_IsString(c)) {
    *out = strdup(c->valuestring);
  } else if (cJSON_IsArray(c)) {
    size_t len = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
      const cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type");
      const cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
      if (!cJSON_IsObject(part) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "text") != 0)
        return api_fail(e, 400, param, "only content parts of type 'text' are supported");
      if (!cJSON_IsString(tx)) return api_fail(e, 400, param, "a text part needs a 'text' string");
      len += strlen(tx->valuestring) + 1;
    }
    char *s = malloc(len + 1);
    if (!s) return api_fail(e, 500, NULL, "out of memory");
    size_t o = 0;
    cJSON_ArrayForEach(part, c) {
      const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
      if (o) s[o++] = '\n';
      memcpy(s + o, t, strlen(t));
      o += strlen(t);
    }
    s[o] = '\0';
    *out = s;
  } else {
    return api_fail(e, 400, param, "'content' must be a string or an array of text parts");
  }
  if (!*out) return api_fail(e, 500, NULL, "out of memory");
  return 0;
}

int api_parse_chat(const api_srv_t *a, const cJSON *o, api_params_t *p, api_err_t *e) {
  memset(p, 0, sizeof *p);
  p->kind = API_CHAT;
  p->logprobs = -1;
  const cJSON *ms = get(o, "messages");
  if (!ms) return api_fail(e, 400, "messages", "'messages' is required");
  if (!cJSON_IsArray(ms)) return api_fail(e, 400, "messages", "'messages' must be an array");
  int n = cJSON_GetArraySize(ms);
  if (n == 0) return api_fail(e, 400, "messages", "'messages' must hold at least one message");
  p->msgs = calloc((size_t)n, sizeof *p->msgs);
  if (!p->msgs) return api_fail(e, 500, NULL, "out of memory");
  const cJSON *m;
  int i = 0;
  cJSON_ArrayForEach(m, ms) {
    char param[64];
    snprintf(param, sizeof param, "messages.[%d]", i);
    if (!cJSON_IsObject(m)) return api_fail(e, 400, param, "each message must be an object");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    snprintf(param, sizeof param, "messages.[%d].role", i);
    if (!cJSON_IsString(r)) return api_fail(e, 400, param, "each message needs a 'role' string");
    const char *role = role_of(r->valuestring);
    if (!role)
      return api_fail(e, 400, param, "role '%.40s' is not supported: use system, user or assistant",
                      r->valuestring);
    char *content = NULL;
    if (content_of(m, i, role, &content, e)) return NS_EINVAL;
    p->msgs[i].role = role;
    p->msgs[i].content = content;
    p->n_msgs = ++i;
  }
  if (common(a, o, p, e) || max_tokens(a, o, "max_tokens", p, e) ||
      max_tokens(a, o, "max_completion_tokens", p, e))
    return NS_EINVAL;
  int lp = 0, top = -1;
  if (boolean(o, "logprobs", &lp, e) || integer(o, "top_logprobs", 0, SAMP_MAX_LOGPROBS, &top, e))
    return NS_EINVAL;
  if (top >= 0 && !lp)
    return api_fail(e, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (lp) p->logprobs = p->sp.n_logprobs = top > 0 ? top : 0;
  const cJSON *v;
  if ((v = get(o, "response_format"))) {
    const cJSON *ty = cJSON_IsObject(v) ? get(v, "type") : NULL;
    if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text") != 0)
      return api_fail(e, 400, "response_format",
                      "only response_format {\"type\": \"text\"} is "
                      "supported");
  }
  if ((v = get(o, "tools")) && (!cJSON_IsArray(v) || v->child))
    return api_fail(e, 400, "tools", "tools are not supported");
  return 0;
}

void api_params_free(api_params_t *p) {
  free(p->prompt_text);
  free(p->prompt_ids);
  for (int i = 0; i < p->n_msgs; i++)
    free((char *)p->msgs[i].content);
  free(p->msgs);
  for (int i = 0; i < p->n_stop; i++)
    free(p->stop[i]);
  free(p->sp.bias);
  free(p->stop_ids);
  memset(p, 0, sizeof *p);
}
