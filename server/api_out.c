/* api_out.c — response bodies in OpenAI's shapes: text_completion and chat.completion
 * objects, their stream chunks, the usage chunk and logprobs. Entry points: api_out_final,
 * api_out_chunk (loop thread). */
#include "api.h"

#include "ns_err.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A JSON string of s[0..n) as a raw cJSON node: cJSON strings stop at NUL, and generated
 * text may hold U+0000 (byte-level tokenizers). */
static cJSON *jstr(const char *s, size_t n) {
  char *b = malloc(n * 6 + 3), *o = b;
  if (!b) return NULL;
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

/* The text of one token as the client sees it (special tokens spelled out). */
static char *piece(const api_call_t *c, int32_t id, size_t *len) {
  char *t = NULL;
  if (id < 0 || id >= tok_vocab_size(c->a->tok) || tok_decode(c->a->tok, &id, 1, 0, &t, len) != 0) {
    *len = 0;
    return calloc(1, 1);
  }
  return t;
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

/* completions: {tokens, token_logprobs, top_logprobs, text_offset}, appended to */
static int lp_completions(api_call_t *c, const eng_event *ev, cJSON *acc) {
  cJSON *toks = cJSON_GetObjectItemCaseSensitive(acc, "tokens");
  cJSON *lps = cJSON_GetObjectItemCaseSensitive(acc, "token_logprobs");
  cJSON *tops = cJSON_GetObjectItemCaseSensitive(acc, "top_logprobs");
  cJSON *offs = cJSON_GetObjectItemCaseSensitive(acc, "text_offset");
  for (int i = 0; i < ev->n_ids; i++) {
    size_t n;
    char *t = piece(c, ev->ids[i], &n);
    if (!t) return NS_ENOMEM;
    cJSON *ts = jstr(t, n);
    free(t);
    if (!ts || !cJSON_AddItemToArray(toks, ts) ||
        !cJSON_AddItemToArray(lps, cJSON_CreateNumber(ev->logprobs[i])) ||
        !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)c->lp_offset)))
      return NS_ENOMEM;
    c->lp_offset += n;
    cJSON *top = cJSON_CreateObject();
    if (!top || !cJSON_AddItemToArray(tops, top)) return NS_ENOMEM;
    for (int k = 0; k < ev->n_top; k++) {
      size_t m;
      char *tt = piece(c, ev->top_ids[(size_t)i * ev->n_top + k], &m);
      if (!tt) return NS_ENOMEM;
      /* object keys cannot hold NUL: such a token is keyed by its bytes up to it */
      cJSON_AddNumberToObject(top, tt, ev->top_logprobs[(size_t)i * ev->n_top + k]);
      free(tt);
    }
  }
  return 0;
}

/* chat: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]} */
static int lp_chat(api_call_t *c, const eng_event *ev, cJSON *acc) {
  cJSON *content = cJSON_GetObjectItemCaseSensitive(acc, "content");
  for (int i = 0; i < ev->n_ids; i++) {
    cJSON *e = cJSON_CreateObject();
    if (!e || !cJSON_AddItemToArray(content, e)) return NS_ENOMEM;
    size_t n;
    char *t = piece(c, ev->ids[i], &n);
    if (!t) return NS_ENOMEM;
    int bad = add_str(e, "token", t, n) ||
              !cJSON_AddNumberToObject(e, "logprob", ev->logprobs[i]) ||
              !cJSON_AddItemToObject(e, "bytes", bytes_of(t, n));
    free(t);
    cJSON *tops = cJSON_AddArrayToObject(e, "top_logprobs");
    if (bad || !tops) return NS_ENOMEM;
    for (int k = 0; k < ev->n_top; k++) {
      cJSON *te = cJSON_CreateObject();
      if (!te || !cJSON_AddItemToArray(tops, te)) return NS_ENOMEM;
      char *tt = piece(c, ev->top_ids[(size_t)i * ev->n_top + k], &n);
      if (!tt) return NS_ENOMEM;
      bad = add_str(te, "token", tt, n) ||
            !cJSON_AddNumberToObject(te, "logprob", ev->top_logprobs[(size_t)i * ev->n_top + k]) ||
            !cJSON_AddItemToObject(te, "bytes", bytes_of(tt, n));
      free(tt);
      if (bad) return NS_ENOMEM;
    }
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
    size_t el = strlen(c->echo);
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
