/* api.h — the OpenAI-compatible API over the engine: /v1/completions, /v1/chat/completions,
 * /v1/models, /health, /ready, /metrics, /tokenize, /detokenize. Entry points: srv_api_init,
 * srv_api_routes, srv_api_poll (the engine's events), srv_api_event (for eng_stop).
 *
 * Threads: everything runs on the loop thread, except the request bodies' JSON parse and
 * field checks, chat rendering and prompt tokenization (of generations and of /tokenize,
 * /detokenize), which run on libuv's thread pool (uv_queue_work) over data the request owns.
 *
 * One generation request (api_call_t) lives from its handler to its final engine event:
 *   handler: Content-Type checked (415), call made, cancel hook set
 *   -> thread pool: JSON parsed and checked (400 naming the param), render + tokenize +
 *      context check
 *   -> loop: a cancelled call is only released; else the pool's error, or eng_submit (429
 *      / 400 / 503 before any SSE byte), added to the id map
 *   -> EV_TOKENS: an SSE chunk (the first starts the stream: an error before it, such as
 *      a queue timeout, is still a status), or text accumulated
 *   -> EV_DONE / EV_ERROR: the final response or chunk; metrics; access log; freed.
 * A cancel hook (client gone, request timeout, slow client) calls eng_cancel; the engine
 * still sends the final event, which frees the call: freed exactly once, there or in the
 * thread pool's completion when it never reached the engine. */
#ifndef SRV_API_H
#define SRV_API_H

#include "cfg.h"
#include "chat_tmpl.h"
#include "engine.h"
#include "http.h"
#include "metrics.h"
#include "request.h"
#include "tokenizer.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct api_call api_call_t;

typedef struct api_srv {
  /* public: set by srv_api_init, read-only */
  uv_loop_t *loop;
  const cfg_t *cfg;
  srv_metrics_t *metrics;
  /* public: set by the daemon */
  eng_t *eng; /* NULL once stopped: later submissions answer 503 */
  http_server_t *http;
  int draining;            /* /ready answers 503 */
  void (*on_idle)(void *); /* called when the last call is freed (the daemon's drain) */
  void *idle_ud;
  /* private */
  const struct tok *tok;
  chat_tmpl_t tmpl;
  char tmpl_why[256];
  char model_name[256];
  int max_context, vocab;
  char bos[64], eos[64]; /* special token texts for chat templates */
  api_call_t **map;      /* request id -> call, chained */
  size_t map_size, n_mapped;
  int live; /* calls allocated, in any state */
} api_srv_t;

/* Fill a from cfg and the started engine (tokenizer, context, chat template: an
 * unrecognised template is logged as a warning and chat requests answer 400). */
int srv_api_init(api_srv_t *a, uv_loop_t *loop, const cfg_t *cfg, eng_t *eng,
                 srv_metrics_t *metrics);
void srv_api_free(api_srv_t *a);
/* Register every route on srv (sets a->http). */
int srv_api_routes(api_srv_t *a, http_server_t *srv);
/* The engine's notify arrived: deliver its events (eng_poll). */
void srv_api_poll(api_srv_t *a);
/* eng_event_fn for eng_poll and eng_stop (ud is the api_srv_t). */
void srv_api_event(void *ud, const eng_event *ev);
/* Calls alive (tokenizing or in the engine). */
int srv_api_live(const api_srv_t *a);
/* 1 when the engine runs and made progress within server.health_stall_s (/health's rule;
 * the daemon feeds systemd's watchdog by it). */
int srv_api_healthy(api_srv_t *a);

/* ---- shared by the api_*.c files ------------------------------------------------------- */

typedef enum api_kind { API_COMPLETIONS = 0, API_CHAT = 1 } api_kind;

/* An error for the client: status, the request field at fault (or NULL), the message. */
typedef struct api_err {
  int status;
  char param[64];   /* "" : JSON null */
  const char *code; /* NULL: the status's default */
  char msg[512];
} api_err_t;

/* A checked generation request. */
typedef struct api_params {
  api_kind kind;
  char *prompt_text; /* completions: a string prompt (owned) */
  size_t prompt_len;
  int32_t *prompt_ids; /* completions: a token-id prompt (owned) */
  int n_prompt_ids;
  chat_msg_t *msgs; /* chat: roles point at static strings, contents are owned */
  int n_msgs;
  int max_tokens;             /* 0: not given (chat: the rest of the context) */
  const char *max_tokens_key; /* the field that gave it: "max_tokens" (default) or chat's
                                 "max_completion_tokens" (static) */
  samp_params sp;
  char *stop[ENG_MAX_STOP];
  int n_stop;
  int32_t *stop_ids; /* stop_token_ids (owned) */
  int n_stop_ids;
  int stream, include_usage, echo, ignore_eos;
  int logprobs; /* -1: not asked; completions: top-n (0..20); chat: top_logprobs (0..20) */
} api_params_t;

/* api_params.c: parse the JSON body of each endpoint. 0 or NS_EINVAL (e filled); p holds
 * what it took either way (api_params_free it). Any thread: they read only a's settings. */
int api_parse_completions(const api_srv_t *a, const cJSON *root, api_params_t *p, api_err_t *e);
int api_parse_chat(const api_srv_t *a, const cJSON *root, api_params_t *p, api_err_t *e);
void api_params_free(api_params_t *p);
/* Shared body checks. api_check_type (loop thread): the Content-Type (0, or NS_EINVAL with a
 * 415 in e). api_parse_json (any thread): UTF-8, JSON, an object, on a NUL-terminated body of
 * len bytes; the parsed root (the caller cJSON_Deletes it) or NULL with e filled. */
int api_check_type(http_req_t *req, api_err_t *e);
cJSON *api_parse_json(const char *body, size_t len, api_err_t *e);
int api_fail(api_err_t *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Answer e on req (finishing). */
void api_send_err(http_req_t *req, const api_err_t *e);
/* 1 when s[0..n) is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
int api_utf8_valid(const char *s, size_t n);
/* api_json.c (any thread): 0 when s[0..n) is one JSON text by RFC 8259's grammar (at most
 * 1000 containers deep, cJSON's limit), else -1 with *at the byte where it stops being one. */
int api_json_check(const char *s, size_t n, size_t *at);
/* Of members with the same name in an object of root (at any depth), keeps the last, as
 * Python's json does (RFC 8259 leaves it open). 0, or NS_ENOMEM with root unchanged. */
int api_json_last_wins(cJSON *root);
/* Numbers of root with more than 15 digits get their text as valuestring (freed with the node),
 * for api_json_int64; s[0..n) is the text root was parsed from, checked by api_json_check,
 * duplicates not yet removed. 0; NS_ENOMEM; NS_EINVAL where text and tree part ways (not
 * expected; the numbers not reached keep only their double). root stays valid in all cases. */
int api_json_exact_ints(cJSON *root, const char *s, size_t n);
/* v as an integer in [lo, hi], exactly also past 2^53 where its text was kept, as its 64-bit
 * two's complement in *bits; -1 when it is not a number, not an integer, out of range, or a
 * non-integer text (fraction, exponent) past 2^53. */
int api_json_int64(const cJSON *v, int64_t lo, uint64_t hi, uint64_t *bits);

struct api_call {
  api_srv_t *a;
  http_req_t *req;
  uint64_t id;
  api_params_t p;
  int submitted, cancelled; /* cancelled: the http cancel hook ran */
  int sse;                  /* streaming: the 200 and the first chunk were sent */
  int aborted;              /* stopped by the API itself (out of memory) */
  uv_work_t work;
  /* the request's body (NUL-terminated; the handler's reference keeps it until the answer),
   * parsed into p on the thread pool */
  const char *body;
  size_t body_len;
  /* thread pool results */
  int32_t *ids;
  int n_ids;
  char *echo;      /* completions with echo: the prompt's text, */
  size_t echo_len; /* its bytes (a <0x00> token's NUL among them) */
  api_err_t werr;
  int werr_set;
  int werr_body; /* werr is the body's own (not a JSON object): counted as the 415 is,
                    without latency or an access-log line */
  /* output */
  char *text;
  size_t text_len, text_cap;
  cJSON *lp;           /* logprobs gathered (non-streaming) */
  size_t lp_offset;    /* completions text_offset of the next token (characters) */
  tok_stream_t *lp_ts; /* logprobs: the engine's detokenization again, for token texts */
  int lp_started;      /* lp_ts gave text already (later tokens keep their leading space) */
  int n_tokens;
  int stop_idx;    /* the final event's: index in p.stop of the stop string that ended it, or -1 */
  int32_t stop_id; /* the final event's: the stop_token_ids id that ended it, or -1 */
  long long created;
  double t0, t_submit, t_first, t_last; /* eng_now() */
  api_call_t *next;                     /* id map chain */
};

/* api_out.c: response bodies (malloc'd JSON text; NULL when out of memory). */
char *api_out_final(api_call_t *c, const char *finish, int prompt_tokens, int completion_tokens);
/* A streamed chunk with text (and logprobs of the event's ids), or the finishing chunk when
 * finish is not NULL, or the role chunk of a chat stream when role is set. */
char *api_out_chunk(api_call_t *c, const char *text, size_t len, const eng_event *ev,
                    const char *finish, int role);
char *api_out_usage_chunk(api_call_t *c, int prompt_tokens, int completion_tokens);
/* Logprobs of ev's ids in the endpoint's shape: completions {tokens, token_logprobs,
 * top_logprobs, text_offset}, chat [{token, logprob, bytes, top_logprobs}]; merged into
 * *acc (created when NULL). 0 or NS_ENOMEM. */
int api_out_logprobs(api_call_t *c, const eng_event *ev, cJSON **acc);
/* Write s[0..n) as a quoted JSON string, NUL-terminated, to out (room for n * 6 + 3
 * bytes): unlike cJSON's strings it keeps NULs (as \u0000). Returns its length. Any
 * thread. */
size_t api_json_string(char *out, const char *s, size_t n);

/* api_call.c: the two generation handlers. */
void api_handle_completions(http_req_t *req, void *ud);
void api_handle_chat(http_req_t *req, void *ud);

/* api_tok.c: /tokenize and /detokenize (their work runs on the thread pool). */
void api_handle_tokenize(http_req_t *req, void *ud);
void api_handle_detokenize(http_req_t *req, void *ud);

/* api_info.c */
void api_access_log(const api_call_t *c, const char *endpoint, int status, const char *finish,
                    int prompt_tokens, int completion_tokens, double ttft_s, double latency_s);

#ifdef __cplusplus
}
#endif
#endif
