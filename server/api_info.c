/* api_info.c — the API's setup and its small endpoints: /v1/models, /health, /ready,
 * /metrics, the access log (/tokenize and /detokenize are in api_tok.c). Entry points:
 * srv_api_init, srv_api_routes (loop thread). */
#include "api.h"

#include "ns_err.h"
#include "ns_log.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- setup ------------------------------------------------------------------------------- */

static void special_text(const tok_t *tok, int id, char *buf, size_t len) {
  const char *p = id >= 0 ? tok_piece(tok, id) : NULL;
  snprintf(buf, len, "%s", p ? p : "");
}

int srv_api_init(api_srv_t *a, uv_loop_t *loop, const cfg_t *cfg, eng_t *eng,
                 srv_metrics_t *metrics) {
  memset(a, 0, sizeof *a);
  a->loop = loop;
  a->cfg = cfg;
  a->eng = eng;
  a->metrics = metrics;
  a->tok = eng_tokenizer(eng);
  eng_stats_t st;
  eng_stats(eng, &st);
  a->max_context = st.max_context;
  a->vocab = tok_vocab_size(a->tok);
  if (st.vocab_size > 0 && st.vocab_size < a->vocab) a->vocab = st.vocab_size;
  snprintf(a->model_name, sizeof a->model_name, "%s",
           cfg->server.model_name[0] ? cfg->server.model_name : st.model_name);
  special_text(a->tok, tok_bos_id(a->tok), a->bos, sizeof a->bos);
  special_text(a->tok, tok_eos_id(a->tok), a->eos, sizeof a->eos);
  int rc = chat_tmpl_load_dir(cfg->engine.model, cfg->engine.chat_template, &a->tmpl, a->tmpl_why,
                              sizeof a->tmpl_why);
  if (rc)
    ns_log_warn("api: chat completions are off: %s; set engine.chat_template to one of llama2, "
                "llama3, chatml, mistral, zephyr",
                a->tmpl_why);
  else
    ns_log_info("api: chat template %s%s", chat_tmpl_family_name(a->tmpl.family),
                cfg->engine.chat_template[0] ? " (engine.chat_template)" : " (detected)");
  return 0;
}

void srv_api_free(api_srv_t *a) {
  free(a->map);
  a->map = NULL;
  a->map_size = a->n_mapped = 0;
}

void api_access_log(const api_call_t *c, const char *ep, int status, const char *finish,
                    int prompt_tokens, int completion_tokens, double ttft_s, double latency_s) {
  if (!ns_log_enabled(NS_LOG_INFO)) return;
  ns_logr(NS_LOG_INFO, c->id,
          "api %s status=%d prompt_tokens=%d completion_tokens=%d ttft_ms=%.1f latency_ms=%.1f "
          "finish=%s stream=%d",
          ep, status, prompt_tokens, completion_tokens, ttft_s >= 0 ? ttft_s * 1e3 : -1.0,
          latency_s * 1e3, finish ? finish : "-", c->p.stream);
}

/* ---- small JSON helpers ---------------------------------------------------------------------- */

static void send_json(http_req_t *req, int status, cJSON *o, const char *extra) {
  char *s = o ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (!s) {
    http_error(req, 500, NULL, "out of memory");
    return;
  }
  http_respond(req, status, "application/json", s, strlen(s), extra);
  free(s);
}

static void count(api_srv_t *a, const char *ep, int status) {
  srv_req_record_t r = {ep, status, NULL, 0, 0, -1, -1, -1};
  srv_metrics_request(a->metrics, &r);
}

/* ---- /v1/models ---------------------------------------------------------------------------- */

static void h_models(http_req_t *req, void *ud) {
  api_srv_t *a = ud;
  cJSON *o = cJSON_CreateObject(), *m = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "object", "list");
  cJSON *data = cJSON_AddArrayToObject(o, "data");
  cJSON_AddStringToObject(m, "id", a->model_name);
  cJSON_AddStringToObject(m, "object", "model");
  cJSON_AddNumberToObject(m, "created", (double)time(NULL));
  cJSON_AddStringToObject(m, "owned_by", "nanoserve");
  cJSON_AddNumberToObject(m, "max_model_len", a->max_context);
  if (!cJSON_AddItemToArray(data, m)) cJSON_Delete(m);
  count(a, "models", 200);
  send_json(req, 200, o, NULL);
}

/* ---- /health, /ready ------------------------------------------------------------------------- */

/* 0: alive; else the reason, for the 503 body. */
static const char *unhealthy(api_srv_t *a, char *buf, size_t len) {
  if (!a->eng) return "the engine is stopped";
  eng_stats_t st;
  eng_stats(a->eng, &st);
  if (st.dead) return "the engine's backend failed";
  double idle = eng_now() - st.last_progress_s;
  if (idle > a->cfg->server.health_stall_s) {
    snprintf(buf, len, "the engine made no progress for %.1f s (server.health_stall_s %g)", idle,
             a->cfg->server.health_stall_s);
    return buf;
  }
  return NULL;
}

int srv_api_healthy(api_srv_t *a) {
  char buf[160];
  return unhealthy(a, buf, sizeof buf) == NULL;
}

static void h_health(http_req_t *req, void *ud) {
  api_srv_t *a = ud;
  char buf[160];
  const char *why = unhealthy(a, buf, sizeof buf);
  count(a, "health", why ? 503 : 200);
  if (why) {
    http_error(req, 503, NULL, "unhealthy: %s", why);
    return;
  }
  static const char ok[] = "{\"status\":\"ok\"}";
  http_respond(req, 200, "application/json", ok, sizeof ok - 1, NULL);
}

static void h_ready(http_req_t *req, void *ud) {
  api_srv_t *a = ud;
  char buf[160];
  const char *why = a->draining ? "the server is draining" : unhealthy(a, buf, sizeof buf);
  count(a, "ready", why ? 503 : 200);
  if (why) {
    http_error_ex(req, 503, NULL, "not_ready", "Retry-After: 5\r\n", "not ready: %s", why);
    return;
  }
  static const char ok[] = "{\"status\":\"ready\"}";
  http_respond(req, 200, "application/json", ok, sizeof ok - 1, NULL);
}

/* ---- /metrics ------------------------------------------------------------------------------- */

static void h_metrics(http_req_t *req, void *ud) {
  api_srv_t *a = ud;
  eng_stats_t es;
  http_stats_t hs;
  if (a->eng) eng_stats(a->eng, &es);
  if (a->http) http_server_stats(a->http, &hs);
  size_t len;
  char *text = srv_metrics_render(a->metrics, a->eng ? &es : NULL, a->http ? &hs : NULL, &len);
  if (!text) {
    http_error(req, 500, NULL, "out of memory rendering the metrics");
    return;
  }
  http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, NULL);
  free(text);
}

/* ---- routes -------------------------------------------------------------------------------- */

int srv_api_routes(api_srv_t *a, http_server_t *srv) {
  a->http = srv;
  /* probes: also on the connections past server.max_connections (http.h) */
  unsigned pub = (a->cfg->server.public_health ? HTTP_ROUTE_PUBLIC : 0) | HTTP_ROUTE_PROBE;
  int rc;
  if ((rc = http_route_add(srv, "POST", "/v1/completions", api_handle_completions, a, 0)) ||
      (rc = http_route_add(srv, "POST", "/v1/chat/completions", api_handle_chat, a, 0)) ||
      (rc = http_route_add(srv, "GET", "/v1/models", h_models, a, 0)) ||
      (rc = http_route_add(srv, "POST", "/tokenize", api_handle_tokenize, a, 0)) ||
      (rc = http_route_add(srv, "POST", "/detokenize", api_handle_detokenize, a, 0)) ||
      (rc = http_route_add(srv, "GET", "/health", h_health, a, pub)) ||
      (rc = http_route_add(srv, "GET", "/ready", h_ready, a, pub)) ||
      (rc = http_route_add(srv, "GET", "/metrics", h_metrics, a, pub)))
    return rc;
  return 0;
}
