/* chat_tmpl.c — chat templates in C: fingerprint detection of tokenizer_config.json's Jinja
 * chat_template and one renderer per family. Entry points: chat_tmpl_detect, _render. */
#include "chat_tmpl.h"

#include "ns_buf.h"
#include "ns_err.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const family_names[] = {"none",   "llama2",  "llama3",
                                           "chatml", "mistral", "zephyr"};

const char *chat_tmpl_family_name(chat_family f) {
  return (unsigned)f < sizeof family_names / sizeof family_names[0] ? family_names[f] : "none";
}

static void defaults(chat_family f, chat_tmpl_t *out) {
  memset(out, 0, sizeof *out);
  out->family = f;
  out->system_ok = 1;
}

int chat_tmpl_from_name(const char *name, chat_tmpl_t *out) {
  for (int f = CHAT_LLAMA2; f <= CHAT_ZEPHYR; f++)
    if (strcmp(name, family_names[f]) == 0) {
      defaults((chat_family)f, out);
      return 0;
    }
  defaults(CHAT_NONE, out);
  return NS_EINVAL;
}

/* ---- detection ------------------------------------------------------------------------- */

static int has(const char *s, const char *sub) {
  return strstr(s, sub) != NULL;
}

static int unsupported(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int unsupported(char *why, size_t whylen, const char *fmt, ...) {
  if (why && whylen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
  }
  return NS_EUNSUPPORTED;
}

/* Qwen-style ChatML templates emit a fixed system message when the first message is not a
 * system one: the literal between "<|im_start|>system\n" and "<|im_end|>" in a string. */
static void chatml_default_system(const char *j, chat_tmpl_t *t) {
  static const char head[] = "<|im_start|>system\\n";
  for (const char *p = strstr(j, head); p; p = strstr(p + 1, head)) {
    const char *s = p + sizeof head - 1, *e = strstr(s, "<|im_end|>");
    if (!e || e == s || (size_t)(e - s) >= sizeof t->default_system) continue;
    if (memchr(s, '\'', (size_t)(e - s)) || memchr(s, '"', (size_t)(e - s)) ||
        memchr(s, '{', (size_t)(e - s)) || memchr(s, '\\', (size_t)(e - s)))
      continue; /* an expression, not a literal */
    memcpy(t->default_system, s, (size_t)(e - s));
    t->default_system[e - s] = '\0';
    return;
  }
}

int chat_tmpl_detect(const char *j, chat_tmpl_t *out, char *why, size_t whylen) {
  defaults(CHAT_NONE, out);
  if (!j || !*j) return unsupported(why, whylen, "the model has no chat_template");
  if (has(j, "<|start_header_id|>")) {
    if (has(j, "Cutting Knowledge") || has(j, "date_string"))
      return unsupported(why, whylen, "a Llama 3.1+ template (system header with dates)");
    if (!has(j, "<|eot_id|>") || !has(j, "<|end_header_id|>"))
      return unsupported(why, whylen, "a Llama 3-like template without <|eot_id|>");
    defaults(CHAT_LLAMA3, out);
    return 0;
  }
  if (has(j, "<|im_start|>")) {
    if (has(j, "<think>") || has(j, "reasoning_content"))
      return unsupported(why, whylen, "a ChatML template with reasoning (<think>) blocks");
    if (!has(j, "<|im_end|>"))
      return unsupported(why, whylen, "a ChatML-like template without <|im_end|>");
    defaults(CHAT_CHATML, out);
    chatml_default_system(j, out);
    return 0;
  }
  if (has(j, "<|user|>") && has(j, "<|assistant|>")) {
    /* HF renders with trim_blocks: the newline after "eos_token }}" is output */
    if (!has(j, "eos_token }}\n") && !has(j, "eos_token}}\n"))
      return unsupported(why, whylen, "a Zephyr-like template without its line breaks");
    defaults(CHAT_ZEPHYR, out);
    return 0;
  }
  if (has(j, "[INST]") && has(j, "<<SYS>>")) {
    if (has(j, "DEFAULT_SYSTEM") || has(j, "default_system") || has(j, "USE_DEFAULT"))
      return unsupported(why, whylen, "a Llama 2 template with a built-in default system prompt");
    defaults(CHAT_LLAMA2, out);
    return 0;
  }
  if (has(j, "[INST]")) {
    if (has(j, "[AVAILABLE_TOOLS]") || has(j, "[SYSTEM_PROMPT]") || has(j, "|trim") ||
        has(j, "| trim"))
      return unsupported(why, whylen, "a Mistral template with tools, [SYSTEM_PROMPT] or trim");
    defaults(CHAT_MISTRAL, out);
    out->inst_space = has(j, "' [INST] '") || has(j, "\" [INST] \"");
    out->answer_space = has(j, "' ' + message['content']") || has(j, "' ' + message.content") ||
                        has(j, "\" \" + message['content']") || has(j, "\" \" + message.content");
    if (!has(j, "system"))
      out->system_ok = 0; /* v0.1: raise_exception on anything but user/assistant */
    else if (has(j, "loop.last and system_message"))
      out->system_last = 1;
    else if (!has(j, "loop.first and system_message"))
      return unsupported(why, whylen, "a Mistral template with an unknown system placement");
    return 0;
  }
  return unsupported(why, whylen,
                     "no known family's markers ([INST], <|start_header_id|>, "
                     "<|im_start|>, <|user|>)");
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 65536;
      char *p = realloc(buf, cap);
      if (!p) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = p;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  fclose(f);
  buf[n] = '\0';
  *len = n;
  return buf;
}

int chat_tmpl_load_dir(const char *dir, const char *override, chat_tmpl_t *out, char *why,
                       size_t whylen) {
  if (override && *override) {
    if (chat_tmpl_from_name(override, out) == 0) return 0;
    return unsupported(why, whylen, "unknown chat template family '%s'", override);
  }
  defaults(CHAT_NONE, out);
  char path[4096];
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  size_t len = 0;
  char *text = read_file(path, &len);
  if (!text) {
    unsupported(why, whylen, "%s cannot be read", path);
    return NS_ENOENT;
  }
  cJSON *root = cJSON_ParseWithLength(text, len);
  free(text);
  const cJSON *ct = root ? cJSON_GetObjectItemCaseSensitive(root, "chat_template") : NULL;
  const char *jinja = NULL;
  if (cJSON_IsString(ct)) {
    jinja = ct->valuestring;
  } else if (cJSON_IsArray(ct)) { /* [{"name": "default", "template": "..."}, ...] */
    const cJSON *it;
    cJSON_ArrayForEach(it, ct) {
      const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
      const cJSON *tp = cJSON_GetObjectItemCaseSensitive(it, "template");
      if (cJSON_IsString(nm) && cJSON_IsString(tp) && strcmp(nm->valuestring, "default") == 0)
        jinja = tp->valuestring;
    }
  }
  int rc;
  if (!jinja) {
    rc = NS_ENOENT;
    unsupported(why, whylen, "%s has no chat_template", path);
  } else {
    rc = chat_tmpl_detect(jinja, out, why, whylen);
  }
  cJSON_Delete(root);
  return rc;
}

/* ---- rendering ------------------------------------------------------------------------- */

/* Length of the Unicode whitespace character (Python's str.isspace) at s, else 0. */
static size_t space_at(const unsigned char *s, size_t n) {
  if (n >= 1 && ((s[0] >= 0x09 && s[0] <= 0x0d) || (s[0] >= 0x1c && s[0] <= 0x20))) return 1;
  if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
  if (n >= 3) {
    uint32_t c = ((uint32_t)(s[0] & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) | (s[2] & 0x3f);
    if ((s[0] & 0xf0) == 0xe0 && (c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
                                  c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000))
      return 3;
  }
  return 0;
}

/* Python's str.strip() (Jinja's trim): *s/ *n narrowed. */
static void strip(const char **s, size_t *n) {
  const unsigned char *p = (const unsigned char *)*s;
  size_t len = *n, k;
  while (len && (k = space_at(p, len))) {
    p += k;
    len -= k;
  }
  /* from the end: the last character's start is found by stepping over continuations */
  for (;;) {
    if (!len) break;
    size_t st = len - 1;
    while (st > 0 && (p[st] & 0xc0) == 0x80)
      st--;
    if (space_at(p + st, len - st) != len - st) break;
    len = st;
  }
  *s = (const char *)p;
  *n = len;
}

static void put_stripped(ns_buf *b, const char *s) {
  size_t n = strlen(s);
  strip(&s, &n);
  ns_buf_put(b, s, n);
}

static int fail(char *err, size_t errlen, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return NS_EINVAL;
}

static int is(const chat_msg_t *m, const char *role) {
  return strcmp(m->role, role) == 0;
}

/* Llama 2 and Mistral: after an optional system message, user/assistant must alternate. */
static int alternates(const chat_msg_t *m, int n) {
  for (int i = 0; i < n; i++)
    if (is(&m[i], "user") != (i % 2 == 0)) return 0;
  return 1;
}

static int render_llama2(const chat_msg_t *m, int n, const char *bos, const char *eos, ns_buf *b,
                         char *err, size_t errlen) {
  const char *sys = NULL;
  if (is(&m[0], "system")) sys = m[0].content, m++, n--;
  if (!alternates(m, n))
    return fail(err, errlen, "Conversation roles must alternate user/assistant/user/assistant/...");
  for (int i = 0; i < n; i++) {
    ns_buf c = {0};
    if (i == 0 && sys) {
      ns_buf_puts(&c, "<<SYS>>\n");
      ns_buf_puts(&c, sys);
      ns_buf_puts(&c, "\n<</SYS>>\n\n");
    }
    ns_buf_puts(&c, m[i].content);
    if (c.oom) {
      free(c.p);
      return NS_ENOMEM;
    }
    if (is(&m[i], "user")) {
      ns_buf_puts(b, bos);
      ns_buf_puts(b, "[INST] ");
      put_stripped(b, c.p ? c.p : "");
      ns_buf_puts(b, " [/INST]");
    } else if (is(&m[i], "assistant")) {
      ns_buf_puts(b, " ");
      put_stripped(b, c.p ? c.p : "");
      ns_buf_puts(b, " ");
      ns_buf_puts(b, eos);
    }
    free(c.p);
  }
  return 0;
}

static int render_llama3(const chat_msg_t *m, int n, const char *bos, ns_buf *b) {
  for (int i = 0; i < n; i++) {
    if (i == 0) ns_buf_puts(b, bos);
    ns_buf_puts(b, "<|start_header_id|>");
    ns_buf_puts(b, m[i].role);
    ns_buf_puts(b, "<|end_header_id|>\n\n");
    put_stripped(b, m[i].content);
    ns_buf_puts(b, "<|eot_id|>");
  }
  ns_buf_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
  return 0;
}

static int render_chatml(const chat_tmpl_t *t, const chat_msg_t *m, int n, ns_buf *b) {
  if (t->default_system[0] && !is(&m[0], "system")) {
    ns_buf_puts(b, "<|im_start|>system\n");
    ns_buf_puts(b, t->default_system);
    ns_buf_puts(b, "<|im_end|>\n");
  }
  for (int i = 0; i < n; i++) {
    ns_buf_puts(b, "<|im_start|>");
    ns_buf_puts(b, m[i].role);
    ns_buf_puts(b, "\n");
    ns_buf_puts(b, m[i].content);
    ns_buf_puts(b, "<|im_end|>\n");
  }
  ns_buf_puts(b, "<|im_start|>assistant\n");
  return 0;
}

static int render_mistral(const chat_tmpl_t *t, const chat_msg_t *m, int n, const char *bos,
                          const char *eos, ns_buf *b, char *err, size_t errlen) {
  const char *sys = NULL;
  if (is(&m[0], "system")) {
    if (!t->system_ok) return fail(err, errlen, "Only user and assistant roles are supported!");
    sys = m[0].content, m++, n--;
  }
  if (!alternates(m, n))
    return fail(err, errlen,
                sys ? "After the optional system message, conversation roles must alternate "
                      "user/assistant/user/assistant/..."
                    : "Conversation roles must alternate user/assistant/user/assistant/...");
  int sys_at = -1; /* the user message the system message joins */
  for (int i = 0; sys && i < n; i++)
    if (is(&m[i], "user") && (sys_at < 0 || t->system_last)) sys_at = i;
  ns_buf_puts(b, bos);
  for (int i = 0; i < n; i++) {
    if (is(&m[i], "user")) {
      ns_buf_puts(b, t->inst_space ? " [INST] " : "[INST] ");
      if (i == sys_at) {
        ns_buf_puts(b, sys);
        ns_buf_puts(b, "\n\n");
      }
      ns_buf_puts(b, m[i].content);
      ns_buf_puts(b, " [/INST]");
    } else if (is(&m[i], "assistant")) {
      if (t->answer_space) ns_buf_puts(b, " ");
      ns_buf_puts(b, m[i].content);
      ns_buf_puts(b, eos);
    } else {
      return fail(err, errlen,
                  "Only user and assistant roles are supported, with the exception "
                  "of an initial optional system message!");
    }
  }
  return 0;
}

static int render_zephyr(const chat_msg_t *m, int n, const char *eos, ns_buf *b) {
  for (int i = 0; i < n; i++) {
    if (!is(&m[i], "user") && !is(&m[i], "system") && !is(&m[i], "assistant")) continue;
    ns_buf_puts(b, "<|");
    ns_buf_puts(b, m[i].role);
    ns_buf_puts(b, "|>\n");
    ns_buf_puts(b, m[i].content);
    ns_buf_puts(b, eos);
    ns_buf_puts(b, "\n");
  }
  ns_buf_puts(b, "<|assistant|>\n");
  return 0;
}

int chat_tmpl_render(const chat_tmpl_t *t, const chat_msg_t *msgs, int n, const char *bos,
                     const char *eos, char **out, size_t *len, char *err, size_t errlen) {
  *out = NULL;
  *len = 0;
  if (err && errlen) err[0] = '\0';
  if (n < 1) return fail(err, errlen, "at least one message is required");
  if (!bos) bos = "";
  if (!eos) eos = "";
  ns_buf b = {0};
  int rc;
  switch (t->family) {
  case CHAT_LLAMA2: rc = render_llama2(msgs, n, bos, eos, &b, err, errlen); break;
  case CHAT_LLAMA3: rc = render_llama3(msgs, n, bos, &b); break;
  case CHAT_CHATML: rc = render_chatml(t, msgs, n, &b); break;
  case CHAT_MISTRAL: rc = render_mistral(t, msgs, n, bos, eos, &b, err, errlen); break;
  case CHAT_ZEPHYR: rc = render_zephyr(msgs, n, eos, &b); break;
  default:
    rc = fail(err, errlen, "the model's chat template is not supported; set engine.chat_template");
  }
  if (rc == 0 && b.oom) rc = NS_ENOMEM;
  if (rc) {
    free(b.p);
    return rc;
  }
  if (!b.p) {
    b.p = calloc(1, 1);
    if (!b.p) return NS_ENOMEM;
  }
  *out = b.p;
  *len = b.len;
  return 0;
}
