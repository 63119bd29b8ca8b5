/* api_call.c — one generation request from handler to final event: the body's parse and
 * checks, prompt rendering and tokenization on the thread pool (a 3 MB list of token ids
 * takes ~0.2 s to parse and check, up to a second under the sanitizers: on the loop it would
 * stall every connection), eng_submit, the id map that routes engine events, SSE chunks,
 * final responses, cancellation. Entry points: api_handle_completions, api_handle_chat,
 * srv_api_event (loop thread). */
#include "api.h"

#include "ns_err.h"
#include "ns_log.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the id map ------------------------------------------------------------------------- */

static size_t slot(const api_srv_t *a, uint64_t id) {
  return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 20) & (a->map_size - 1);
}

static int map_put(api_srv_t *a, api_call_t *c) {
  if (a->n_mapped + 1 > a->map_size) { /* grow at load 1 */
    size_t size = a->map_size ? a->map_size * 2 : 256;
    api_call_t **m = calloc(size, sizeof *m);
    if (!m) return NS_ENOMEM;
    api_call_t **old = a->map;
    size_t old_size = a->map_size;
    a->map = m;
    a->map_size = size;
    for (size_t i = 0; i < old_size; i++)
      for (api_call_t *x = old[i], *nx; x; x = nx) {
        nx = x->next;
        size_t s = slot(a, x->id);
        x->next = m[s];
        m[s] = x;
      }
    free(old);
  }
  size_t s = slot(a, c->id);
  c->next = a->map[s];
  a->map[s] = c;
  a->n_mapped++;
  return 0;
}

static api_call_t *map_get(const api_srv_t *a, uint64_t id) {
  if (!a->map_size) return NULL;
  for (api_call_t *c = a->map[slot(a, id)]; c; c = c->next)
    if (c->id == id) return c;
  return NULL;
}

static void map_del(api_srv_t *a, api_call_t *c) {
  for (api_call_t **p = &a->map[slot(a, c->id)]; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      a->n_mapped--;
      return;
    }
}

/* ---- a call's life ---------------------------------------------------------------------- */

static const char *endpoint(const api_call_t *c) {
  return c->p.kind == API_CHAT ? "chat" : "completions";
}

static void call_free(api_call_t *c) {
  api_srv_t *a = c->a;
  if (c->submitted) map_del(a, c);
  api_params_free(&c->p);
  free(c->ids);
  free(c->echo);
  free(c->text);
  cJSON_Delete(c->lp);
  tok_stream_free(c->lp_ts);
  free(c);
  if (--a->live == 0 && a->on_idle) a->on_idle(a->idle_ud);
}

/* Metrics alone, for a body that is no request at all (the wrong Content-Type, not a JSON
 * object): no latency and no access-log line. */
static void record_body_err(api_srv_t *a, api_kind kind, int status) {
  srv_req_record_t r = {kind == API_CHAT ? "chat" : "completions", status, NULL, 0, 0, -1, -1, -1};
  srv_metrics_request(a->metrics, &r);
}

/* Metrics and the access log of a call that ends now with status (0: client gone). */
static void record(api_call_t *c, int status, const char *finish, const eng_event *ev) {
  double now = eng_now();
  srv_req_record_t r = {endpoint(c), status, finish, 0, 0, -1, now - c->t0, -1};
  if (ev && ev->kind == EV_DONE) {
    r.prompt_tokens = ev->prompt_tokens;
    r.completion_tokens = ev->completion_tokens;
    r.queue_s = ev->queue_s;
    if (ev->ttft_s > 0) r.ttft_s = (c->t_submit - c->t0) + ev->ttft_s;
    /* a non-streamed answer arrives whole: its inter-token gaps come from the engine's
     * first-token time and the end */
    if (!c->p.stream && ev->completion_tokens > 1 && r.ttft_s >= 0)
      srv_metrics_itl(c->a->metrics, (r.e2e_s - r.ttft_s) / (ev->completion_tokens - 1),
                      ev->completion_tokens - 1);
  } else {
    r.prompt_tokens = c->n_ids;
    r.completion_tokens = c->n_tokens;
  }
  srv_metrics_request(c->a->metrics, &r);
  api_access_log(c, endpoint(c), status, finish, r.prompt_tokens, r.completion_tokens, r.ttft_s,
                 r.e2e_s);
}

/* Fail a call that has not started its response (or end its stream with an error event). */
static void fail_call(api_call_t *c, const api_err_t *e, const char *extra_headers) {
  if (http_req_cancelled(c->req)) {
    http_sse_end(c->req, 0); /* only releases */
  } else if (c->p.stream && c->sse) {
    char *j = http_error_json(e->status, e->param[0] ? e->param : NULL, e->code, e->msg);
    if (j) http_sse_send(c->req, j, strlen(j));
    free(j);
    http_sse_end(c->req, 1);
  } else {
    http_error_ex(c->req, e->status, e->param[0] ? e->param : NULL, e->code, extra_headers, "%s",
                  e->msg);
  }
}

static void on_cancel(http_req_t *req, void *ud) {
  api_call_t *c = ud;
  (void)req;
  c->cancelled = 1;
  if (c->submitted && c->a->eng) eng_cancel(c->a->eng, c->id);
}

/* ---- thread pool: parse and check, render, tokenize, check the context -------------------- */

/* The request's body into c->p (0), or NS_EINVAL with c->werr filled. Reads only a's
 * settings, fixed since srv_api_init. */
static int read_body(api_call_t *c) {
  const api_srv_t *a = c->a;
  api_err_t *e = &c->werr;
  cJSON *root = api_parse_json(c->body, c->body_len, e);
  if (!root) {
    c->werr_body = 1;
    return NS_EINVAL;
  }
  int rc = c->p.kind == API_CHAT ? api_parse_chat(a, root, &c->p, e)
                                 : api_parse_completions(a, root, &c->p, e);
  cJSON_Delete(root);
  if (rc == 0 && c->p.kind == API_CHAT && a->tmpl.family == CHAT_NONE)
    rc = api_fail(e, 400, "messages",
                  "the model's chat template is not supported (%s); set engine.chat_template",
                  a->tmpl_why);
  return rc;
}

static void work(uv_work_t *w) {
  api_call_t *c = w->data;
  const api_srv_t *a = c->a;
  api_err_t *e = &c->werr;
  size_t n = 0;
  int rc = 0;
  if (read_body(c)) {
    c->werr_set = 1;
    return;
  }
  const char *pparam = c->p.kind == API_CHAT ? "messages" : "prompt";
  if (c->p.kind == API_CHAT) {
    char *text = NULL, err[256] = "";
    size_t len = 0;
    rc = chat_tmpl_render(&a->tmpl, c->p.msgs, c->p.n_msgs, a->bos, a->eos, &text, &len, err,
                          sizeof err);
    if (rc == 0) {
      /* the template wrote its own BOS: no special tokens from the tokenizer */
      rc = tok_encode(a->tok, text, len, 0, &c->ids, &n);
      if (rc)
        api_fail(e, 400, "messages", "the messages cannot be tokenized (%s)", ns_strerror(rc));
    } else {
      api_fail(e, rc == NS_ENOMEM ? 500 : 400, "messages", "%s", err);
    }
    free(text);
  } else if (c->p.prompt_text) {
    rc = tok_encode(a->tok, c->p.prompt_text, c->p.prompt_len, 1, &c->ids, &n);
    if (rc) api_fail(e, 400, "prompt", "the prompt cannot be tokenized (%s)", ns_strerror(rc));
    if (rc == 0 && n == 0) /* "" where the tokenizer adds no BOS: nothing to continue */
      rc = api_fail(e, 400, "prompt", "the prompt is empty and the model adds no BOS token");
    if (rc == 0 && c->p.echo && !(c->echo = strdup(c->p.prompt_text))) rc = NS_ENOMEM;
    c->echo_len = c->p.prompt_len;
  } else {
    n = (size_t)c->p.n_prompt_ids;
    c->ids = malloc(n * sizeof *c->ids);
    if (!c->ids)
      rc = NS_ENOMEM;
    else
      memcpy(c->ids, c->p.prompt_ids, n * sizeof *c->ids);
    if (rc == 0 && c->p.echo && tok_decode(a->tok, c->ids, n, 0, &c->echo, &c->echo_len) != 0)
      rc = api_fail(e, 400, "prompt", "the prompt's ids cannot be decoded for echo");
  }
  if (rc == NS_ENOMEM) api_fail(e, 500, NULL, "out of memory");
  if (rc) {
    c->werr_set = 1;
    return;
  }
  c->n_ids = (int)n;
  if (n == 0) {
    c->werr_set = 1;
    api_fail(e, 400, pparam, "the prompt is empty after tokenization");
    return;
  }
  int64_t room = (int64_t)a->max_context - (int64_t)n;
  const char *mkey = c->p.max_tokens_key ? c->p.max_tokens_key : "max_tokens";
  if (room < 1) { /* the prompt alone fills the context: it is at fault, not max_tokens */
    c->werr_set = 1;
    api_fail(e, 400, pparam,
             "This model's maximum context length is %d tokens, but the %s take %zu tokens, "
             "leaving none for the completion. Please reduce the length of the %s.",
             a->max_context, pparam, n, pparam);
    e->code = "context_length_exceeded";
  } else if (c->p.max_tokens == 0) { /* chat without max_tokens: the rest of the context */
    c->p.max_tokens = (int)room;
  } else if (c->p.max_tokens > room) {
    c->werr_set = 1;
    api_fail(e, 400, mkey,
             "This model's maximum context length is %d tokens. However, you requested %lld "
             "tokens (%zu in the %s, %d for the completion). Please reduce the length of the "
             "%s or %s.",
             a->max_context, (long long)n + c->p.max_tokens, n, pparam, c->p.max_tokens, pparam,
             mkey);
    e->code = "context_length_exceeded";
  }
}

/* ---- loop thread: submit ----------------------------------------------------------------- */

static eng_req *make_req(api_call_t *c) {
  eng_req *r = eng_req_new();
  if (!r) return NULL;
  r->id = c->id;
  r->prompt = c->ids;
  c->ids = NULL;
  r->n_prompt = c->n_ids;
  r->max_tokens = c->p.max_tokens;
  r->ignore_eos = c->p.ignore_eos;
  r->sp = c->p.sp; /* the logit bias moves to the engine too */
  c->p.sp.bias = NULL;
  c->p.sp.n_bias = 0;
  for (int i = 0; i < c->p.n_stop; i++) /* copies: the call names the one that matched */
    if (!(r->stop[i] = strdup(c->p.stop[i]))) {
      eng_req_free(r);
      return NULL;
    }
  r->n_stop = c->p.n_stop;
  if (c->p.n_stop_ids) { /* a copy too: the call names the one that ended it */
    if (!(r->stop_ids = malloc((size_t)c->p.n_stop_ids * sizeof *r->stop_ids))) {
      eng_req_free(r);
      return NULL;
    }
    memcpy(r->stop_ids, c->p.stop_ids, (size_t)c->p.n_stop_ids * sizeof *r->stop_ids);
    r->n_stop_ids = c->p.n_stop_ids;
  }
  r->stream = c->p.stream;
  return r;
}

static void after_work(uv_work_t *w, int status) {
  api_call_t *c = w->data;
  api_srv_t *a = c->a;
  api_err_t e;
  (void)status;
  if (c->cancelled) {
    record(c, 0, "cancelled", NULL);
    http_sse_end(c->req, 0); /* the request is cancelled: this only releases it */
    call_free(c);
    return;
  }
  if (c->werr_set) {
    if (c->werr_body)
      record_body_err(a, c->p.kind, c->werr.status);
    else
      record(c, c->werr.status, NULL, NULL);
    fail_call(c, &c->werr, NULL);
    call_free(c);
    return;
  }
  if (!a->eng) {
    api_fail(&e, 503, NULL, "the server is shutting down");
    record(c, 503, NULL, NULL);
    fail_call(c, &e, NULL);
    call_free(c);
    return;
  }
  eng_req *r = make_req(c);
  char err[256] = "";
  int rc = r ? eng_submit(a->eng, r, err, sizeof err) : NS_ENOMEM;
  if (rc) {
    const char *extra = NULL;
    if (rc == NS_EBUSY) {
      api_fail(&e, 429, NULL, "%s; retry later", err);
      extra = "Retry-After: 1\r\n";
    } else if (rc == NS_EINVAL) {
      api_fail(&e, 400, NULL, "%s", err);
    } else if (rc == NS_ECLOSED) {
      api_fail(&e, 503, NULL, "%s", err[0] ? err : "the server is shutting down");
    } else if (rc == NS_ENOMEM) {
      api_fail(&e, 503, NULL, "out of memory; retry later");
    } else {
      api_fail(&e, 500, NULL, "the engine refused the request: %s", err[0] ? err : ns_strerror(rc));
    }
    record(c, e.status, NULL, NULL);
    fail_call(c, &e, extra);
    call_free(c);
    return;
  }
  c->t_submit = eng_now();
  if (map_put(a, c) != 0) {
    /* no room to route its events: stop it; its final event finds no call and is dropped */
    eng_cancel(a->eng, c->id);
    api_fail(&e, 503, NULL, "out of memory; retry later");
    record(c, 503, NULL, NULL);
    fail_call(c, &e, NULL);
    call_free(c);
    return;
  }
  c->submitted = 1;
}

/* Loop: the Content-Type checked and the call made; the body's parse and checks on the pool
 * (the handler's reference keeps the body until the answer). */
static void handle(http_req_t *req, api_srv_t *a, api_kind kind) {
  api_err_t e;
  double t0 = eng_now();
  if (api_check_type(req, &e)) {
    record_body_err(a, kind, e.status);
    api_send_err(req, &e);
    return;
  }
  api_call_t *c = calloc(1, sizeof *c);
  if (!c) {
    http_error(req, 500, NULL, "out of memory");
    return;
  }
  a->live++;
  c->a = a;
  c->req = req;
  c->id = http_req_id(req);
  c->t0 = t0;
  c->created = (long long)time(NULL);
  c->stop_idx = c->stop_id = -1;
  c->p.kind = kind; /* the rest of p is the pool's */
  c->body = http_req_body(req, &c->body_len);
  if (http_req_set_cancel(req, on_cancel, c) != 0) { /* already gone */
    record(c, 0, "cancelled", NULL);
    http_sse_end(req, 0);
    call_free(c);
    return;
  }
  c->work.data = c;
  if (uv_queue_work(a->loop, &c->work, work, after_work) != 0) {
    api_fail(&e, 500, NULL, "cannot queue the request for tokenization");
    record(c, 500, NULL, NULL);
    api_send_err(req, &e);
    call_free(c);
  }
}

void api_handle_completions(http_req_t *req, void *ud) {
  handle(req, ud, API_COMPLETIONS);
}

void api_handle_chat(http_req_t *req, void *ud) {
  handle(req, ud, API_CHAT);
}

/* ---- engine events -------------------------------------------------------------------------- */

static int text_add(api_call_t *c, const char *t, size_t n) {
  if (c->text_len + n + 1 > c->text_cap) {
    size_t cap = c->text_cap ? c->text_cap : 256;
    while (cap < c->text_len + n + 1)
      cap *= 2;
    char *p = realloc(c->text, cap);
    if (!p) return NS_ENOMEM;
    c->text = p;
    c->text_cap = cap;
  }
  memcpy(c->text + c->text_len, t, n);
  c->text_len += n;
  c->text[c->text_len] = '\0';
  return 0;
}

/* A stream's 200 and its first chunk (chat's role, or completions' echoed prompt), at its
 * first engine event rather than at submission: a request that fails before any token (a
 * queue timeout, the engine stopping) still gets its status, not a 200 then an error event. */
static void stream_open(api_call_t *c) {
  if (c->sse || http_sse_begin(c->req) != 0) return;
  c->sse = 1;
  if (c->p.kind != API_CHAT && !c->echo) return;
  char *j = c->echo ? api_out_chunk(c, c->echo, c->echo_len, NULL, NULL, 0)
                    : api_out_chunk(c, "", 0, NULL, NULL, 1);
  if (j) http_sse_send(c->req, j, strlen(j));
  free(j);
}

static void on_tokens(api_call_t *c, const eng_event *ev) {
  double now = eng_now();
  if (ev->n_ids > 0) {
    if (c->t_first == 0)
      c->t_first = now;
    else if (c->p.stream)
      srv_metrics_itl(c->a->metrics, (now - c->t_last) / ev->n_ids, ev->n_ids);
    c->t_last = now;
  }
  c->n_tokens += ev->n_ids;
  if (c->cancelled) return;
  if (c->p.stream) {
    /* a chunk per token event, with the text it releases (possibly none yet: held back for
     * a stop string or an unfinished byte sequence), so that clients see every token's
     * timing, as vLLM's streams do */
    if (ev->text_len == 0 && ev->n_ids == 0) return;
    stream_open(c);
    char *j = api_out_chunk(c, ev->text, ev->text_len, ev, NULL, 0);
    /* a dropped slow client's hook runs later and cancels; without memory, stop here */
    if (j)
      http_sse_send(c->req, j, strlen(j));
    else if (c->a->eng && !c->aborted)
      c->aborted = 1, eng_cancel(c->a->eng, c->id);
    free(j);
    return;
  }
  if (c->aborted) return;
  if (text_add(c, ev->text, ev->text_len) ||
      (c->p.logprobs >= 0 && ev->n_ids > 0 && api_out_logprobs(c, ev, &c->lp))) {
    c->aborted = 1; /* answered at the final event, with an error */
    if (c->a->eng) eng_cancel(c->a->eng, c->id);
  }
}

static const char *finish_name(eng_fin f) {
  switch (f) {
  case ENG_FIN_LENGTH: return "length";
  case ENG_FIN_STOP: return "stop";
  case ENG_FIN_CANCELLED: return "cancelled";
  default: return "stop";
  }
}

static void on_done(api_call_t *c, const eng_event *ev) {
  const char *finish = finish_name(ev->finish);
  c->stop_idx = ev->stop_idx >= 0 && ev->stop_idx < c->p.n_stop ? ev->stop_idx : -1;
  c->stop_id = ev->stop_id;
  if (c->cancelled || http_req_cancelled(c->req)) {
    record(c, 0, "cancelled", ev);
    http_sse_end(c->req, 0); /* only releases */
    return;
  }
  if (ev->finish == ENG_FIN_CANCELLED || c->aborted) { /* stopped by us, client still here */
    api_err_t e;
    api_fail(&e, 503, NULL,
             "the request was stopped before it finished (server busy or out of "
             "memory)");
    record(c, 503, "error", ev);
    fail_call(c, &e, NULL);
    return;
  }
  if (c->p.stream) {
    stream_open(c);
    char *j = api_out_chunk(c, "", 0, NULL, finish, 0);
    if (j) http_sse_send(c->req, j, strlen(j));
    free(j);
    if (c->p.include_usage &&
        (j = api_out_usage_chunk(c, ev->prompt_tokens, ev->completion_tokens))) {
      http_sse_send(c->req, j, strlen(j));
      free(j);
    }
    record(c, 200, finish, ev);
    http_sse_end(c->req, 1);
    return;
  }
  char *body = api_out_final(c, finish, ev->prompt_tokens, ev->completion_tokens);
  if (!body) {
    record(c, 500, "error", ev);
    http_error(c->req, 500, NULL, "out of memory building the response");
    return;
  }
  record(c, 200, finish, ev);
  http_respond(c->req, 200, "application/json", body, strlen(body), NULL);
  free(body);
}

static void on_error(api_call_t *c, const eng_event *ev) {
  api_err_t e;
  int status = ev->err == NS_ECLOSED || ev->err == NS_ETIMEDOUT || ev->err == NS_ENOMEM ||
                       ev->err == NS_EBUSY
                   ? 503
                   : 500;
  api_fail(&e, status, NULL, "%s", ev->msg ? ev->msg : ns_strerror(ev->err));
  record(c, http_req_cancelled(c->req) ? 0 : status, "error", NULL);
  fail_call(c, &e, NULL);
}

void srv_api_event(void *ud, const eng_event *ev) {
  api_srv_t *a = ud;
  api_call_t *c = map_get(a, ev->req_id);
  if (!c) {
    ns_logr(NS_LOG_DEBUG, ev->req_id, "api: event %d for an unknown request", (int)ev->kind);
    return;
  }
  switch (ev->kind) {
  case EV_TOKENS: on_tokens(c, ev); return;
  case EV_DONE: on_done(c, ev); break;
  case EV_ERROR: on_error(c, ev); break;
  default: return;
  }
  call_free(c);
}

void srv_api_poll(api_srv_t *a) {
  if (a->eng) eng_poll(a->eng, srv_api_event, a);
}

int srv_api_live(const api_srv_t *a) {
  return a->live;
}
