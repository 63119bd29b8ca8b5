/* chat_tmpl.h — chat prompts: recognises a model's Jinja chat_template by fingerprint and
 * renders messages in C exactly as that template would (add_generation_prompt=True).
 * Entry points: chat_tmpl_load_dir (startup) and chat_tmpl_render (per request).
 *
 * Supported families (engine.chat_template names them; "" detects):
 *   llama2   <s>[INST] <<SYS>>\n{sys}\n<</SYS>>\n\n{user} [/INST] {asst} </s><s>[INST] ...
 *   llama3   <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{text}<|eot_id|>
 *   chatml   <|im_start|>{role}\n{text}<|im_end|>\n ... (Qwen: a default system message)
 *   mistral  <s>[INST] {sys}\n\n{user} [/INST]{asst}</s>[INST] ... (system joins the first
 *            user message)
 *   zephyr   <|system|>\n{text}</s>\n<|user|>\n{text}</s>\n<|assistant|>\n
 * The rendered text carries the template's own BOS; encode it WITHOUT the tokenizer's
 * special tokens (add_special=0), as transformers' apply_chat_template does, so the BOS is
 * never doubled.
 *
 * Threads: pure functions over caller-owned data; any thread. Errors: 0 or a negative
 * ns_err, with a message in err. */
#ifndef ENG_CHAT_TMPL_H
#define ENG_CHAT_TMPL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum chat_family {
  CHAT_NONE = 0, /* unsupported or absent: chat requests are refused */
  CHAT_LLAMA2,
  CHAT_LLAMA3,
  CHAT_CHATML,
  CHAT_MISTRAL,
  CHAT_ZEPHYR
} chat_family;

typedef struct chat_tmpl {
  chat_family family;
  char default_system[512]; /* chatml: emitted when messages[0] is not system ("": none) */
  /* mistral variants (the defaults are the v0.2 template's) */
  int system_ok;    /* 0: the template raises on a system message */
  int system_last;  /* 1: the system message joins the last user message, else the first */
  int inst_space;   /* 1: " [INST] " instead of "[INST] " */
  int answer_space; /* 1: " " before an assistant message */
} chat_tmpl_t;

typedef struct chat_msg {
  const char *role; /* "system", "user" or "assistant" */
  const char *content;
} chat_msg_t;

/* "llama2", ... for a family; "none" for CHAT_NONE. */
const char *chat_tmpl_family_name(chat_family f);
/* The family of a name ("llama2", "llama3", "chatml", "mistral", "zephyr"); NS_EINVAL for
 * anything else. Fills *out with that family's defaults. */
int chat_tmpl_from_name(const char *name, chat_tmpl_t *out);
/* Recognise a Jinja chat template by its distinctive substrings. Returns 0 (out filled) or
 * NS_EUNSUPPORTED when no family matches or the template has features the C renderer does
 * not reproduce (why says which). */
int chat_tmpl_detect(const char *jinja, chat_tmpl_t *out, char *why, size_t whylen);
/* Startup: override "" detects from DIR/tokenizer_config.json's chat_template (a string,
 * or a list of {name, template} where "default" is used); otherwise the named family.
 * NS_ENOENT when there is no template to detect, NS_EUNSUPPORTED (why says why). */
int chat_tmpl_load_dir(const char *dir, const char *override, chat_tmpl_t *out, char *why,
                       size_t whylen);

/* Render n >= 1 messages. bos / eos are the tokenizer's special token texts ("" when the
 * tokenizer has none). On success *out is a malloc'd NUL-terminated string of *len bytes.
 * NS_EINVAL when the template would raise (roles not alternating, a system message where
 * the template takes none) with the template's message in err; NS_ENOMEM. */
int chat_tmpl_render(const chat_tmpl_t *t, const chat_msg_t *msgs, int n, const char *bos,
                     const char *eos, char **out, size_t *len, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
