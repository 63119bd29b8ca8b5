/* api_out.c — response bodies in OpenAI's shapes: text_completion and chat.completion
 * objects, their stream chunks, the usage chunk and logprobs. Entry points: api_out_final,
 * api_out_chunk (loop thread). */
#include "api.h"

#include "ns_err.h"
#include "ns_log.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t api_json_string(char *out, const char *s, size_t n) {
  char *o = out;
  *o++ = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\') {
      *o++ = '\\';
      *o++ = (char)ch;
    } else if (ch == '\n') {
      *o++ = '\\';
      *o++ = 'n';
    } else if (ch == '\r') {
      *o++ = '\\';
      *o++ = 'r';
    } else if (ch == '\t') {
      *o++ = '\\';
      *o++ = 't';
    } else if (ch < 0x20) {
      o += sprintf(o, "\\u%04x", ch);
    } else {
      *o++ = (char)ch;
    }
  }
  *o++ = '"';
  *o = '\0';
  return (size_t)(o - out);
}

/* A JSON string of s[0..n) as a raw cJSON node: cJSON strings stop at NUL, and generated
 * text may hold U+0000 (byte-level tokenizers). */
static cJSON *jstr(const char *s, size_t n) {
  char *b = malloc(n * 6 + 3);
  if (!b) return NULL;
  api_json_string(b, s, n);
  cJSON *r = cJSON_CreateRaw(b);
  free(b);
  return r;
}

static int add_str(cJSON *o, const char *key, const char *s, size_t n) {
  cJSON *v = jstr(s, n);
  return v && cJSON_AddItemToObject(o, key, v) ? 0 : NS_ENOMEM;
}

static void object_id(const api_call_t *c, char *buf, size_t len) {
  snprintf(buf, len, "%s-%016llx", c->p.kind == API_CHAT ? "chatcmpl" : "cmpl",
           (unsigned long long)c->id);
}

/* id, object, created, model */
static cJSON *envelope(const api_call_t *c, const char *object) {
  char id[64];
  object_id(c, id, sizeof id);
  cJSON *o = cJSON_CreateObject();
  if (!o || !cJSON_AddStringToObject(o, "id", id) ||
      !cJSON_AddStringToObject(o, "object", object) ||
      !cJSON_AddNumberToObject(o, "created", (double)c->created) ||
      !cJSON_AddStringToObject(o, "model", c->a->model_name)) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static int add_usage(cJSON *o, int pt, int ct) {
  cJSON *u = cJSON_AddObjectToObject(o, "usage");
  return u && cJSON_AddNumberToObject(u, "prompt_tokens", pt) &&
                 cJSON_AddNumberToObject(u, "completion_tokens", ct) &&
                 cJSON_AddNumberToObject(u, "total_tokens", pt + ct)
             ? 0
             : NS_ENOMEM;
}

static char *print_free(cJSON *o, int bad) {
  char *s = bad || !o ? NULL : cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return s;
}

/* ---- logprobs ------------------------------------------------------------------------------ */

/* A token as logprobs show it: the text it adds to the output and its own bytes. */
typedef struct lp_tok {
  char *text;
  size_t len;
  char *bytes; /* a byte-fallback token's one byte; may not be UTF-8 alone */
  size_t n_bytes;
} lp_tok;

static void lp_tok_free(lp_tok *t) {
  free(t->text);
  free(t->bytes);
}

static size_t utf8_chars(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += ((unsigned char)s[i] & 0xC0) != 0x80;
  return k;
}

static int token_bytes(const api_call_t *c, int32_t id, int at_start, lp_tok *o) {
  if (id >= 0 && id < tok_vocab_size(c->a->tok))
    return tok_token_bytes(c->a->tok, id, at_start, 1, &o->bytes, &o->n_bytes);
  o->n_bytes = 0; /* a padding row of the embedding: no text, as in HF's decode */
  return (o->bytes = calloc(1, 1)) ? 0 : NS_ENOMEM;
}

/* The sampled id: the text the engine's detokenizer released with it (the same stream, run
 * again here), so that the tokens join to the text as OpenAI's and vLLM's do: later tokens
 * keep their leading space, a character split over byte tokens comes with the token that
 * completes it (the others give ""), a special token gives "". With last, the token also
 * carries what the detokenizer held back to the end. */
static int lp_sampled(api_call_t *c, int32_t id, int at_start, int last, lp_tok *o) {
  const char *t = "", *f = "";
  size_t n = 0, fn = 0;
  int rc = 0;
  if (!c->lp_ts && (rc = tok_stream_new(c->a->tok, 1, &c->lp_ts))) return rc;
  if (id >= 0 && id < tok_vocab_size(c->a->tok) && (rc = tok_stream_push(c->lp_ts, id, &t, &n)))
    return rc;
  if (!(o->text = malloc(n + 1))) return NS_ENOMEM;
  memcpy(o->text, t, n);
  o->len = n;
  if (last && (rc = tok_stream_flush(c->lp_ts, &f, &fn)) == 0 && fn) {
    char *x = realloc(o->text, n + fn + 1);
    if (!x) return NS_ENOMEM;
    memcpy(x + n, f, fn);
    o->text = x;
    o->len += fn;
  }
  o->text[o->len] = '\0';
  return rc ? rc : token_bytes(c, id, at_start, o);
}

/* A top alternative at the same place: its bytes, with U+FFFD for what is not UTF-8 alone
 * (a partial character); the sampled id itself gets the sampled token's text, so that
 * top_logprobs holds tokens[i] as its key. */
static int lp_alternative(api_call_t *c, int32_t id, int at_start, const lp_tok *sampled_tok,
                          int32_t sampled_id, lp_tok *o) {
  int rc = token_bytes(c, id, at_start, o);
  if (rc) return rc;
  if (id == sampled_id) {
    o->text = malloc(sampled_tok->len + 1);
    if (!o->text) return NS_ENOMEM;
    memcpy(o->text, sampled_tok->text, sampled_tok->len + 1);
    o->len = sampled_tok->len;
    return 0;
  }
  if (!(o->text = malloc(o->n_bytes * 3 + 1))) return NS_ENOMEM;
  o->len = ns_utf8_lossy(o->text, o->bytes, o->n_bytes);
  return 0;
}

static cJSON *bytes_of(const char *s, size_t n) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; a && i < n; i++)
    if (!cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)s[i]))) {
      cJSON_Delete(a);
      return NULL;
    }
  return a;
}

/* completions: {tokens, token_logprobs, top_logprobs, text_offset}, appended to;
 * text_offset counts characters (code points) into the text, as vLLM's */
static int lp_completions(api_call_t *c, const eng_event *ev, cJSON *acc) {
  cJSON *toks = cJSON_GetObjectItemCaseSensitive(acc, "tokens");
  cJSON *lps = cJSON_GetObjectItemCaseSensitive(acc, "token_logprobs");
  cJSON *tops = cJSON_GetObjectItemCaseSensitive(acc, "top_logprobs");
  cJSON *offs = cJSON_GetObjectItemCaseSensitive(acc, "text_offset");
  for (int i = 0; i < ev->n_ids; i++) {
    int at_start = !c->lp_started;
    lp_tok t = {0};
    int rc = lp_sampled(c, ev->ids[i], at_start, ev->last && i == ev->n_ids - 1, &t);
    cJSON *ts = rc ? NULL : jstr(t.text, t.len);
    if (!ts || !cJSON_AddItemToArray(toks, ts) ||
        !cJSON_AddItemToArray(lps, cJSON_CreateNumber(ev->logprobs[i])) ||
        !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)c->lp_offset))) {
      lp_tok_free(&t);
      return NS_ENOMEM;
    }
    c->lp_offset += utf8_chars(t.text, t.len);
    c->lp_started |= t.len > 0;
    cJSON *top = cJSON_CreateObject();
    rc = !top || !cJSON_AddItemToArray(tops, top);
    for (int k = 0; k < ev->n_top && !rc; k++) {
      lp_tok a = {0};
      rc = lp_alternative(c, ev->top_ids[(size_t)i * ev->n_top + k], at_start, &t, ev->ids[i], &a);
      /* object keys cannot hold NUL: such a token is keyed by its bytes up to it */
      if (!rc) cJSON_AddNumberToObject(top, a.text, ev->top_logprobs[(size_t)i * ev->n_top + k]);
      lp_tok_free(&a);
    }
    lp_tok_free(&t);
    if (rc) return NS_ENOMEM;
  }
  return 0;
}

/* one {token, logprob, bytes} entry; bytes are the token's own, so that they join to the
 * content's bytes as OpenAI's do */
static cJSON *lp_entry(const lp_tok *t, float logprob) {
  cJSON *e = cJSON_CreateObject();
  if (!e || add_str(e, "token", t->text, t->len) ||
      !cJSON_AddNumberToObject(e, "logprob", logprob) ||
      !cJSON_AddItemToObject(e, "bytes", bytes_of(t->bytes, t->n_bytes))) {
    cJSON_Delete(e);
    return NULL;
  }
  return e;
}

/* chat: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]} */
static int lp_chat(api_call_t *c, const eng_event *ev, cJSON *acc) {
  cJSON *content = cJSON_GetObjectItemCaseSensitive(acc, "content");
  for (int i = 0; i < ev->n_ids; i++) {
    int at_start = !c->lp_started;
    lp_tok t = {0};
    int rc = lp_sampled(c, ev->ids[i], at_start, ev->last && i == ev->n_ids - 1, &t);
    cJSON *e = rc ? NULL : lp_entry(&t, ev->logprobs[i]);
    cJSON *tops = e ? cJSON_AddArrayToObject(e, "top_logprobs") : NULL;
    rc = !tops || !cJSON_AddItemToArray(content, e);
    if (rc) cJSON_Delete(e);
    c->lp_started |= t.len > 0;
    for (int k = 0; k < ev->n_top && !rc; k++) {
      lp_tok a = {0};
      rc = lp_alternative(c, ev->top_ids[(size_t)i * ev->n_top + k], at_start, &t, ev->ids[i], &a);
      cJSON *te = rc ? NULL : lp_entry(&a, ev->top_logprobs[(size_t)i * ev->n_top + k]);
      rc = !te || !cJSON_AddItemToArray(tops, te);
      if (rc) cJSON_Delete(te);
      lp_tok_free(&a);
    }
    lp_tok_free(&t);
    if (rc) return NS_ENOMEM;
  }
  return 0;
}

int api_out_logprobs(api_call_t *c, const eng_event *ev, cJSON **acc) {
  if (!*acc) {
    cJSON *o = cJSON_CreateObject();
    int bad = !o;
    if (c->p.kind == API_CHAT)
      bad = bad || !cJSON_AddArrayToObject(o, "content");
    else
      bad = bad || !cJSON_AddArrayToObject(o, "tokens") ||
            !cJSON_AddArrayToObject(o, "token_logprobs") ||
            !cJSON_AddArrayToObject(o, "top_logprobs") || !cJSON_AddArrayToObject(o, "text_offset");
    if (bad) {
      cJSON_Delete(o);
      return NS_ENOMEM;
    }
    *acc = o;
  }
  return c->p.kind == API_CHAT ? lp_chat(c, ev, *acc) : lp_completions(c, ev, *acc);
}

/* ---- bodies --------------------------------------------------------------------------------- */

/* One choice; lp is consumed, always (may be NULL: JSON null). */
static cJSON *choice(const api_call_t *c, const char *text, size_t len, cJSON *lp,
                     const char *finish, int chunk, int role) {
  cJSON *ch = cJSON_CreateObject();
  int bad = !ch || !cJSON_AddNumberToObject(ch, "index", 0);
  if (c->p.kind == API_COMPLETIONS) {
    bad = bad || add_str(ch, "text", text, len);
  } else {
    cJSON *m = cJSON_AddObjectToObject(ch, chunk ? "delta" : "message");
    bad = bad || !m;
    if (!bad && (!chunk || role)) bad = !cJSON_AddStringToObject(m, "role", "assistant");
    if (!bad && (!chunk || role || len || !finish)) bad = add_str(m, "content", text, len);
  }
  if (!bad)
    bad = lp ? !cJSON_AddItemToObject(ch, "logprobs", lp) : !cJSON_AddNullToObject(ch, "logprobs");
  else
    cJSON_Delete(lp);
  if (!bad)
    bad = !(finish ? cJSON_AddStringToObject(ch, "finish_reason", finish)
                   : cJSON_AddNullToObject(ch, "finish_reason"));
  /* vLLM's stop_reason: the stop string or stop_token_ids id that ended the request; null for
   * EOS, length, and until the end */
  if (!bad && finish && c->stop_idx >= 0)
    bad = !cJSON_AddStringToObject(ch, "stop_reason", c->p.stop[c->stop_idx]);
  else if (!bad && finish && c->stop_id >= 0)
    bad = !cJSON_AddNumberToObject(ch, "stop_reason", c->stop_id);
  else if (!bad)
    bad = !cJSON_AddNullToObject(ch, "stop_reason");
  if (bad) {
    cJSON_Delete(ch);
    return NULL;
  }
  return ch;
}

char *api_out_final(api_call_t *c, const char *finish, int pt, int ct) {
  cJSON *o = envelope(c, c->p.kind == API_CHAT ? "chat.completion" : "text_completion");
  cJSON *choices = o ? cJSON_AddArrayToObject(o, "choices") : NULL;
  int bad = !choices;
  char *full = NULL;
  const char *text = c->text ? c->text : "";
  size_t len = c->text_len;
  if (!bad && c->echo) { /* echo: the prompt's text, then the completion */
    size_t el = c->echo_len;
    full = malloc(el + len + 1);
    bad = !full;
    if (full) {
      memcpy(full, c->echo, el);
      memcpy(full + el, text, len);
      full[el + len] = '\0';
      text = full;
      len += el;
    }
  }
  cJSON *lp = c->lp, *ch = NULL;
  c->lp = NULL;
  if (bad)
    cJSON_Delete(lp);
  else
    ch = choice(c, text, len, lp, finish, 0, 0); /* consumes lp */
  bad = bad || !ch || !cJSON_AddItemToArray(choices, ch) || add_usage(o, pt, ct);
  free(full);
  return print_free(o, bad);
}

char *api_out_chunk(api_call_t *c, const char *text, size_t len, const eng_event *ev,
                    const char *finish, int role) {
  cJSON *o = envelope(c, c->p.kind == API_CHAT ? "chat.completion.chunk" : "text_completion");
  cJSON *choices = o ? cJSON_AddArrayToObject(o, "choices") : NULL;
  int bad = !choices;
  cJSON *lp = NULL;
  if (!bad && ev && c->p.logprobs >= 0 && ev->n_ids > 0) bad = api_out_logprobs(c, ev, &lp) != 0;
  cJSON *ch = NULL;
  if (bad)
    cJSON_Delete(lp);
  else
    ch = choice(c, text ? text : "", len, lp, finish, 1, role); /* consumes lp */
  bad = bad || !ch || !cJSON_AddItemToArray(choices, ch);
  if (!bad && c->p.include_usage) bad = !cJSON_AddNullToObject(o, "usage");
  return print_free(o, bad);
}

char *api_out_usage_chunk(api_call_t *c, int pt, int ct) {
  cJSON *o = envelope(c, c->p.kind == API_CHAT ? "chat.completion.chunk" : "text_completion");
  int bad = !o || !cJSON_AddArrayToObject(o, "choices") || add_usage(o, pt, ct);
  return print_free(o, bad);
}
