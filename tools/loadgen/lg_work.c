/* lg_work.c — what the load generator sends: random token-id prompts of drawn lengths, or
 * the items of a JSONL file, turned into OpenAI request bodies. Entry: lg_work_body. */
#include "lg.h"

#include "ns_err.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct lg_item {
  cJSON *prompt;   /* completions: a string or an id array */
  cJSON *messages; /* chat: the messages array */
  int max_tokens;  /* 0: --output-len */
  int n_ids;       /* ids in an id-array prompt, else -1 */
} lg_item;

struct lg_work {
  const lg_opts *o;
  lg_item *items;
  size_t n;
};

/* Random chat prompts are words: a chat message's content is text, not ids. */
static const char *const words[] = {"alpha", "bravo",    "charlie", "delta",  "echo", "foxtrot",
                                    "golf",  "hotel",    "india",   "juliet", "kilo", "lima",
                                    "mike",  "november", "oscar",   "papa"};

/* ---- JSONL ----------------------------------------------------------------------------------- */

static int load_item(const lg_opts *o, cJSON *j, lg_item *it, size_t lineno, char *err,
                     size_t errlen) {
  memset(it, 0, sizeof *it);
  it->n_ids = -1;
  if (!cJSON_IsObject(j))
    return ns_errf(err, errlen, NS_EFORMAT, "%s:%zu: not a JSON object", o->dataset, lineno);
  cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "prompt");
  cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "messages");
  cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "max_tokens");
  if (mt) {
    if (!cJSON_IsNumber(mt) || mt->valuedouble < 1 || mt->valuedouble > 1e7)
      return ns_errf(err, errlen, NS_EFORMAT, "%s:%zu: max_tokens must be a positive integer",
                     o->dataset, lineno);
    it->max_tokens = (int)mt->valuedouble;
  }
  if (m) {
    if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) == 0)
      return ns_errf(err, errlen, NS_EFORMAT, "%s:%zu: messages must be a non-empty array",
                     o->dataset, lineno);
    if (o->endpoint != LG_EP_CHAT)
      return ns_errf(err, errlen, NS_EINVAL,
                     "%s:%zu: has messages: use --endpoint chat (or give a prompt)", o->dataset,
                     lineno);
    it->messages = cJSON_Duplicate(m, 1);
    return it->messages ? 0 : NS_ENOMEM;
  }
  if (!p)
    return ns_errf(err, errlen, NS_EFORMAT, "%s:%zu: needs \"prompt\" or \"messages\"", o->dataset,
                   lineno);
  if (cJSON_IsArray(p)) {
    cJSON *e;
    int n = 0;
    cJSON_ArrayForEach(e, p) {
      if (!cJSON_IsNumber(e) || e->valuedouble < 0)
        return ns_errf(err, errlen, NS_EFORMAT, "%s:%zu: prompt ids must be non-negative numbers",
                       o->dataset, lineno);
      n++;
    }
    if (o->endpoint == LG_EP_CHAT)
      return ns_errf(err, errlen, NS_EINVAL,
                     "%s:%zu: a token-id prompt cannot go to --endpoint chat", o->dataset, lineno);
    it->n_ids = n;
  } else if (!cJSON_IsString(p)) {
    return ns_errf(err, errlen, NS_EFORMAT, "%s:%zu: prompt must be a string or an id array",
                   o->dataset, lineno);
  }
  if (o->endpoint == LG_EP_CHAT) { /* a text prompt becomes one user message */
    cJSON *msgs = cJSON_CreateArray(), *msg = cJSON_CreateObject();
    if (!msgs || !msg || !cJSON_AddStringToObject(msg, "role", "user") ||
        !cJSON_AddStringToObject(msg, "content", p->valuestring)) {
      cJSON_Delete(msgs);
      cJSON_Delete(msg);
      return NS_ENOMEM;
    }
    cJSON_AddItemToArray(msgs, msg);
    it->messages = msgs;
    return 0;
  }
  it->prompt = cJSON_Duplicate(p, 1);
  return it->prompt ? 0 : NS_ENOMEM;
}

static int load_file(lg_work *w, char *err, size_t errlen) {
  const lg_opts *o = w->o;
  FILE *f = fopen(o->dataset, "r");
  if (!f) return ns_errf(err, errlen, NS_ENOENT, "--dataset %s: %s", o->dataset, strerror(errno));
  char *line = NULL;
  size_t cap = 0, lineno = 0, icap = 0;
  ssize_t len;
  int rc = 0;
  while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
      line[--len] = '\0';
    if (len == 0) continue;
    cJSON *j = cJSON_ParseWithLength(line, (size_t)len);
    if (!j) {
      rc = ns_errf(err, errlen, NS_EFORMAT, "%s:%zu: not valid JSON", o->dataset, lineno);
      break;
    }
    if (w->n == icap) {
      size_t nc = icap ? icap * 2 : 64;
      lg_item *ni = realloc(w->items, nc * sizeof *ni);
      if (!ni) {
        cJSON_Delete(j);
        rc = NS_ENOMEM;
        break;
      }
      w->items = ni;
      icap = nc;
    }
    rc = load_item(o, j, &w->items[w->n], lineno, err, errlen);
    cJSON_Delete(j);
    if (rc == 0)
      w->n++;
    else if (rc == NS_ENOMEM)
      ns_errf(err, errlen, rc, "out of memory reading %s", o->dataset);
  }
  free(line);
  fclose(f);
  if (rc == 0 && w->n == 0)
    rc = ns_errf(err, errlen, NS_EFORMAT, "--dataset %s: no items", o->dataset);
  return rc;
}

int lg_work_open(const lg_opts *o, lg_work **out, char *err, size_t errlen) {
  lg_work *w = calloc(1, sizeof *w);
  if (!w) return ns_errf(err, errlen, NS_ENOMEM, "out of memory");
  w->o = o;
  if (strcmp(o->dataset, "random") != 0) {
    int rc = load_file(w, err, errlen);
    if (rc) {
      lg_work_free(w);
      return rc;
    }
  }
  *out = w;
  return 0;
}

void lg_work_free(lg_work *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n; i++) {
    cJSON_Delete(w->items[i].prompt);
    cJSON_Delete(w->items[i].messages);
  }
  free(w->items);
  free(w);
}

size_t lg_work_items(const lg_work *w) {
  return w->n;
}

/* ---- bodies ---------------------------------------------------------------------------------- */

/* Random prompt `i`: its own RNG stream, so prompts do not depend on the order of sends. */
static cJSON *random_prompt(const lg_opts *o, ns_rng *g, int n, int chat) {
  if (!chat) {
    int *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) return NULL;
    uint64_t span = (uint64_t)(o->vocab_max - o->vocab_min);
    for (int k = 0; k < n; k++)
      ids[k] = o->vocab_min + (int)(ns_rng_next(g) % span);
    cJSON *a = cJSON_CreateIntArray(ids, n);
    free(ids);
    return a;
  }
  size_t cap = (size_t)n * 9 + 1, len = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  for (int k = 0; k < n; k++) {
    const char *wd = words[ns_rng_next(g) % (sizeof words / sizeof *words)];
    len += (size_t)snprintf(s + len, cap - len, "%s%s", k ? " " : "", wd);
  }
  cJSON *msgs = cJSON_CreateArray(), *m = cJSON_CreateObject();
  if (!msgs || !m || !cJSON_AddStringToObject(m, "role", "user") ||
      !cJSON_AddStringToObject(m, "content", s)) {
    cJSON_Delete(msgs);
    cJSON_Delete(m);
    msgs = NULL;
  } else {
    cJSON_AddItemToArray(msgs, m);
  }
  free(s);
  return msgs;
}

char *lg_work_body(lg_work *w, uint64_t i, const char *model, int *prompt_tokens, int *max_tokens) {
  const lg_opts *o = w->o;
  int chat = o->endpoint == LG_EP_CHAT;
  ns_rng g;
  ns_rng_seed(&g, o->seed ^ (0x9e3779b97f4a7c15ull * (i + 1)));
  cJSON *b = cJSON_CreateObject(), *prompt = NULL;
  int mt;
  if (!b) return NULL;
  if (w->n == 0) {
    int in = lg_len_draw(&g, o->len_dist, o->input_len, o->len_spread);
    mt = lg_len_draw(&g, o->len_dist, o->output_len, o->len_spread);
    prompt = random_prompt(o, &g, in, chat);
    *prompt_tokens = chat ? -1 : in;
  } else {
    const lg_item *it = &w->items[i % w->n];
    mt = it->max_tokens && !o->output_len_set ? it->max_tokens : o->output_len;
    prompt = cJSON_Duplicate(chat ? it->messages : it->prompt, 1);
    *prompt_tokens = it->n_ids;
  }
  *max_tokens = mt;
  int ok = prompt != NULL;
  if (ok && model && *model) ok = cJSON_AddStringToObject(b, "model", model) != NULL;
  if (ok)
    ok = cJSON_AddItemToObject(b, chat ? "messages" : "prompt", prompt);
  else
    cJSON_Delete(prompt);
  if (ok) ok = cJSON_AddNumberToObject(b, "max_tokens", mt) != NULL;
  if (ok && o->temperature >= 0)
    ok = cJSON_AddNumberToObject(b, "temperature", o->temperature) != NULL;
  if (ok && o->ignore_eos) ok = cJSON_AddTrueToObject(b, "ignore_eos") != NULL;
  if (ok) ok = cJSON_AddBoolToObject(b, "stream", o->stream) != NULL;
  if (ok && o->stream) {
    cJSON *so = cJSON_AddObjectToObject(b, "stream_options");
    ok = so && cJSON_AddTrueToObject(so, "include_usage");
  }
  char *s = ok ? cJSON_PrintUnformatted(b) : NULL;
  cJSON_Delete(b);
  return s;
}
