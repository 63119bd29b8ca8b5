/* mk_tokenizer.c — tokenizer.json + tokenizer_config.json for a synthetic
 * checkpoint: a byte-level BPE trained here on a built-in corpus, or a copy (mk__tokenizer). */
#include "mk_int.h"

#include "ns_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOK_TOTAL      512 /* BPE vocab + special tokens */
#define MAX_TOKEN_FILE (64u << 20)

static const char *const specials[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>",
                                       "<|im_end|>"};
#define N_SPECIAL (int)(sizeof specials / sizeof specials[0])
#define BPE_VOCAB (TOK_TOTAL - N_SPECIAL)

static const char *const chat_template =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* The training text: plain English prose written for this file. */
static const char *const corpus[] = {
    "The server starts before sunrise, when the building is quiet and the only sound is the "
    "fan in the corner of the room. It reads its settings from one file, checks that every "
    "value is in range, and then opens the model that the operator named. The model is a "
    "folder of files: a small text file that describes the shape of the network, a larger "
    "file that holds the weights, and a file that tells the tokenizer how to turn words into "
    "numbers and numbers back into words. If any of these files is missing or broken, the "
    "server says so in one clear line and stops, because a server that guesses is worse than "
    "a server that waits for a person to fix the problem.\n\n",
    "Once the weights are in memory, the server listens for requests. A request is a short "
    "message that carries a prompt and a few settings: how many tokens to write, how warm "
    "the sampling should be, and whether the answer should come back in one piece or as a "
    "stream of small parts. The server turns the prompt into tokens, finds room for it in "
    "the cache, and adds it to the batch of requests that are already running. Every step "
    "of the model writes one more token for each request in the batch, and the server sends "
    "each new token to the client that asked for it as soon as it is ready.\n\n",
    "People often ask why the batch matters so much. The answer is that reading the weights "
    "from memory takes far longer than doing the arithmetic, so it is much better to read "
    "them once and use them for many requests at the same time. A single request leaves most "
    "of the machine idle; a full batch keeps it busy. The scheduler therefore tries to keep "
    "the batch as full as it can without running out of memory for the cache, and when the "
    "cache does run short it pauses the newest request and lets the older ones finish first.\n\n",
    "In the kitchen downstairs, the morning shift is making bread. They weigh the flour, add "
    "water and salt, and fold the dough every half hour until it is smooth and strong. The "
    "oven is hot by seven, and the first loaves come out at eight, dark on the outside and "
    "soft in the middle. Nobody hurries: good bread takes the time it takes, and the bakers "
    "know that a loaf pulled out too early will be heavy and wet. They write the times on a "
    "board by the door so that the next shift can see what was done and what is still left "
    "to do.\n\n",
    "The garden behind the house has three long beds of vegetables and a row of old apple "
    "trees. In the spring the beds are planted with peas, beans and lettuce; in the summer "
    "they are full of tomatoes, peppers and squash; and in the autumn the apples fall faster "
    "than anyone can pick them up. The children like to count the apples on the ground and "
    "guess how many will be left by the end of the week. Their numbers are always wrong, but "
    "they enjoy the game, and the birds enjoy the apples that nobody counted.\n\n",
    "A good test is one that fails when the thing it names is broken. It is easy to write a "
    "test that only checks that a program runs, or that compares the program with its own "
    "earlier output, but such a test tells you very little. The better kind compares the "
    "result with something the program did not make: a value worked out by hand, a file "
    "written by another tool, or an answer from a second program that was built in a "
    "different way. When the two agree, you have learned something; when they differ, you "
    "have found a question worth asking.\n\n",
    "On the train home, the engineer reads about the history of the numbers she works with "
    "every day. The first computers stored each number in a fixed number of bits, and the "
    "people who built them argued for years about how many bits were enough. Today the "
    "argument has come back in a new form: a model with billions of weights can be stored in "
    "sixteen bits per weight, or eight, or even four, and each choice trades a little "
    "accuracy for a lot of speed. She closes the book at her station and walks the last mile "
    "in the rain, thinking about which of those choices she would make, and why.\n\n",
    "Numbers such as 1, 2, 3, 10, 42, 100, 256, 1024 and 2048 appear in the logs all the time. "
    "So do words like error, warning, request, response, token, model, memory, cache, batch "
    "and step. It's normal; we'll see them again, and they're the words you'd expect.\n",
};

/* ---- GPT-2 byte-level alphabet -------------------------------------------------- */

/* byte_ids[b]: token id of byte b (GPT-2's order: printable bytes first);
 * byte_cp[b]: the code point that stands for it in token strings. */
static void byte_alphabet(int byte_ids[256], int byte_cp[256]) {
  int n = 0, extra = 0;
  for (int b = 0; b < 256; b++)
    byte_ids[b] = -1;
  for (int b = 0; b < 256; b++)
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) {
      byte_ids[b] = n++;
      byte_cp[b] = b;
    }
  for (int b = 0; b < 256; b++)
    if (byte_ids[b] < 0) {
      byte_ids[b] = n++;
      byte_cp[b] = 256 + extra++;
    }
}

static size_t utf8_put(char *dst, int cp) {
  if (cp < 0x80) {
    dst[0] = (char)cp;
    return 1;
  }
  dst[0] = (char)(0xc0 | (cp >> 6));
  dst[1] = (char)(0x80 | (cp & 0x3f));
  return 2;
}

/* ---- training ----------------------------------------------------------------------- */

typedef struct word {
  int *sym;
  int n;
  int count;
} word;

typedef struct bpe {
  char *tok[BPE_VOCAB]; /* token strings, in id order */
  int ntok;
  int merge_a[BPE_VOCAB], merge_b[BPE_VOCAB];
  int nmerge;
  word *w;
  int nw, capw;
} bpe;

static int is_letter(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static int is_digit(int c) {
  return c >= '0' && c <= '9';
}
static int is_space(int c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* Length of the pre-token at s: GPT-2's split ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+|
 * ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+), for ASCII text. */
static size_t pretoken(const char *s) {
  static const char *const contr[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
  for (size_t i = 0; i < sizeof contr / sizeof contr[0]; i++)
    if (strncmp(s, contr[i], strlen(contr[i])) == 0) return strlen(contr[i]);
  size_t j = (s[0] == ' ' && s[1] && !is_space(s[1])) ? 1 : 0;
  int c = (unsigned char)s[j];
  if (is_letter(c) || is_digit(c) || (c && !is_space(c))) {
    int (*cls)(int) = is_letter(c) ? is_letter : is_digit(c) ? is_digit : NULL;
    size_t k = j + 1;
    while (s[k] && (cls ? cls((unsigned char)s[k])
                        : !is_space((unsigned char)s[k]) && !is_letter((unsigned char)s[k]) &&
                              !is_digit((unsigned char)s[k])))
      k++;
    return k;
  }
  size_t k = 0;
  while (s[k] && is_space((unsigned char)s[k]))
    k++;
  if (s[k] && k > 1) k--; /* leave the last space to the next word */
  return k;
}

static int add_word(bpe *b, const char *s, size_t len, const int byte_ids[256]) {
  for (int i = 0; i < b->nw; i++) {
    word *w = &b->w[i];
    if ((size_t)w->n != len) continue;
    size_t k = 0;
    while (k < len && w->sym[k] == byte_ids[(unsigned char)s[k]])
      k++;
    if (k == len) {
      w->count++;
      return 0;
    }
  }
  if (b->nw == b->capw) {
    int cap = b->capw ? 2 * b->capw : 256;
    word *nw = realloc(b->w, (size_t)cap * sizeof *nw);
    if (!nw) return NS_ENOMEM;
    b->w = nw;
    b->capw = cap;
  }
  word *w = &b->w[b->nw];
  w->sym = malloc(len * sizeof *w->sym);
  if (!w->sym) return NS_ENOMEM;
  for (size_t k = 0; k < len; k++)
    w->sym[k] = byte_ids[(unsigned char)s[k]];
  w->n = (int)len;
  w->count = 1;
  b->nw++;
  return 0;
}

static int find_tok(const bpe *b, const char *s) {
  for (int i = 0; i < b->ntok; i++)
    if (strcmp(b->tok[i], s) == 0) return i;
  return -1;
}

/* Merge the most frequent adjacent pair until the vocab is full or no pair
 * occurs twice. Ties go to the smallest (left id, right id): deterministic. */
static int train(bpe *b) {
  int *cnt = malloc((size_t)BPE_VOCAB * BPE_VOCAB * sizeof *cnt);
  if (!cnt) return NS_ENOMEM;
  while (b->ntok < BPE_VOCAB) {
    memset(cnt, 0, (size_t)BPE_VOCAB * BPE_VOCAB * sizeof *cnt);
    for (int i = 0; i < b->nw; i++)
      for (int k = 0; k + 1 < b->w[i].n; k++)
        cnt[b->w[i].sym[k] * BPE_VOCAB + b->w[i].sym[k + 1]] += b->w[i].count;
    int best = -1;
    for (int p = 0; p < BPE_VOCAB * BPE_VOCAB; p++)
      if (cnt[p] >= 2 && (best < 0 || cnt[p] > cnt[best])) best = p;
    if (best < 0) break;
    int a = best / BPE_VOCAB, c = best % BPE_VOCAB;
    size_t la = strlen(b->tok[a]), lc = strlen(b->tok[c]);
    char *s = malloc(la + lc + 1);
    if (!s) {
      free(cnt);
      return NS_ENOMEM;
    }
    memcpy(s, b->tok[a], la);
    memcpy(s + la, b->tok[c], lc + 1);
    int id = find_tok(b, s);
    if (id < 0) {
      id = b->ntok;
      b->tok[b->ntok++] = s;
    } else {
      free(s);
    }
    b->merge_a[b->nmerge] = a;
    b->merge_b[b->nmerge++] = c;
    for (int i = 0; i < b->nw; i++) {
      word *w = &b->w[i];
      int o = 0;
      for (int k = 0; k < w->n; k++) {
        if (k + 1 < w->n && w->sym[k] == a && w->sym[k + 1] == c) {
          w->sym[o++] = id;
          k++;
        } else {
          w->sym[o++] = w->sym[k];
        }
      }
      w->n = o;
    }
  }
  free(cnt);
  return 0;
}

static void bpe_free(bpe *b) {
  for (int i = 0; i < b->ntok; i++)
    free(b->tok[i]);
  for (int i = 0; i < b->nw; i++)
    free(b->w[i].sym);
  free(b->w);
}

static int bpe_build(bpe *b) {
  int byte_ids[256], byte_cp[256];
  byte_alphabet(byte_ids, byte_cp);
  memset(b, 0, sizeof *b);
  for (int byte = 0; byte < 256; byte++) {
    char s[4] = {0};
    utf8_put(s, byte_cp[byte]);
    b->tok[byte_ids[byte]] = strdup(s);
    if (!b->tok[byte_ids[byte]]) return NS_ENOMEM;
    b->ntok++;
  }
  for (size_t p = 0; p < sizeof corpus / sizeof corpus[0]; p++)
    for (const char *s = corpus[p]; *s;) {
      size_t len = pretoken(s);
      if (add_word(b, s, len, byte_ids)) return NS_ENOMEM;
      s += len;
    }
  return train(b);
}

/* ---- tokenizer.json ----------------------------------------------------------------- */

static cJSON *special_token_obj(int id, const char *content) {
  cJSON *t = cJSON_CreateObject();
  cJSON_AddNumberToObject(t, "id", id);
  cJSON_AddStringToObject(t, "content", content);
  cJSON_AddBoolToObject(t, "single_word", 0);
  cJSON_AddBoolToObject(t, "lstrip", 0);
  cJSON_AddBoolToObject(t, "rstrip", 0);
  cJSON_AddBoolToObject(t, "normalized", 0);
  cJSON_AddBoolToObject(t, "special", 1);
  return t;
}

static cJSON *template_piece(const char *kind, const char *id, int type_id) {
  cJSON *o = cJSON_CreateObject(), *in = cJSON_AddObjectToObject(o, kind);
  cJSON_AddStringToObject(in, "id", id);
  cJSON_AddNumberToObject(in, "type_id", type_id);
  return o;
}

static cJSON *byte_level(int add_prefix_space) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "type", "ByteLevel");
  cJSON_AddBoolToObject(o, "add_prefix_space", add_prefix_space);
  cJSON_AddBoolToObject(o, "trim_offsets", 1);
  cJSON_AddBoolToObject(o, "use_regex", 1);
  return o;
}

static cJSON *tokenizer_json(const bpe *b) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "version", "1.0");
  cJSON_AddNullToObject(root, "truncation");
  cJSON_AddNullToObject(root, "padding");
  cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
  for (int i = 0; i < N_SPECIAL; i++)
    cJSON_AddItemToArray(added, special_token_obj(b->ntok + i, specials[i]));
  cJSON_AddNullToObject(root, "normalizer");
  cJSON_AddItemToObject(root, "pre_tokenizer", byte_level(0));
  /* Like Llama 3: the post-processor puts <|begin_of_text|> first. */
  cJSON *pp = cJSON_AddObjectToObject(root, "post_processor");
  cJSON_AddStringToObject(pp, "type", "TemplateProcessing");
  cJSON *single = cJSON_AddArrayToObject(pp, "single");
  cJSON_AddItemToArray(single, template_piece("SpecialToken", specials[0], 0));
  cJSON_AddItemToArray(single, template_piece("Sequence", "A", 0));
  cJSON *pair = cJSON_AddArrayToObject(pp, "pair");
  cJSON_AddItemToArray(pair, template_piece("SpecialToken", specials[0], 0));
  cJSON_AddItemToArray(pair, template_piece("Sequence", "A", 0));
  cJSON_AddItemToArray(pair, template_piece("SpecialToken", specials[0], 1));
  cJSON_AddItemToArray(pair, template_piece("Sequence", "B", 1));
  cJSON *st = cJSON_AddObjectToObject(pp, "special_tokens");
  cJSON *bos = cJSON_AddObjectToObject(st, specials[0]);
  cJSON_AddStringToObject(bos, "id", specials[0]);
  int bos_id = b->ntok;
  cJSON_AddItemToObject(bos, "ids", cJSON_CreateIntArray(&bos_id, 1));
  cJSON_AddItemToObject(bos, "tokens", cJSON_CreateStringArray(&specials[0], 1));
  cJSON_AddItemToObject(root, "decoder", byte_level(1));
  cJSON *model = cJSON_AddObjectToObject(root, "model");
  cJSON_AddStringToObject(model, "type", "BPE");
  cJSON_AddNullToObject(model, "dropout");
  cJSON_AddNullToObject(model, "unk_token");
  cJSON_AddNullToObject(model, "continuing_subword_prefix");
  cJSON_AddNullToObject(model, "end_of_word_suffix");
  cJSON_AddBoolToObject(model, "fuse_unk", 0);
  cJSON_AddBoolToObject(model, "byte_fallback", 0);
  cJSON_AddBoolToObject(model, "ignore_merges", 0);
  cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
  for (int i = 0; i < b->ntok; i++)
    cJSON_AddNumberToObject(vocab, b->tok[i], i);
  cJSON *merges = cJSON_AddArrayToObject(model, "merges");
  for (int i = 0; i < b->nmerge; i++) {
    const char *x = b->tok[b->merge_a[i]], *y = b->tok[b->merge_b[i]];
    size_t n = strlen(x) + strlen(y) + 2;
    char *m = malloc(n);
    if (!m) {
      cJSON_Delete(root);
      return NULL;
    }
    snprintf(m, n, "%s %s", x, y);
    cJSON_AddItemToArray(merges, cJSON_CreateString(m));
    free(m);
  }
  return root;
}

static cJSON *tokenizer_config(const char *bos, const char *eos, int max_pos, const int *ids,
                               const char *const *names, int n) {
  cJSON *root = cJSON_CreateObject();
  cJSON *dec = cJSON_AddObjectToObject(root, "added_tokens_decoder");
  for (int i = 0; i < n; i++) {
    char key[16];
    snprintf(key, sizeof key, "%d", ids[i]);
    cJSON *t = special_token_obj(ids[i], names[i]);
    cJSON_DeleteItemFromObjectCaseSensitive(t, "id");
    cJSON_AddItemToObject(dec, key, t);
  }
  if (bos)
    cJSON_AddStringToObject(root, "bos_token", bos);
  else
    cJSON_AddNullToObject(root, "bos_token");
  cJSON_AddStringToObject(root, "eos_token", eos);
  cJSON_AddStringToObject(root, "chat_template", chat_template);
  cJSON_AddBoolToObject(root, "clean_up_tokenization_spaces", 0);
  cJSON_AddNumberToObject(root, "model_max_length", max_pos);
  cJSON_AddStringToObject(root, "tokenizer_class", "PreTrainedTokenizerFast");
  return root;
}

static int write_builtin(const char *dir, int max_pos, mk__tok_info *info, char *err,
                         size_t errlen) {
  bpe b;
  int rc = bpe_build(&b);
  cJSON *tj = NULL, *tc = NULL;
  if (rc) goto nomem;
  tj = tokenizer_json(&b);
  int ids[N_SPECIAL];
  for (int i = 0; i < N_SPECIAL; i++)
    ids[i] = b.ntok + i;
  tc = tokenizer_config(specials[0], specials[1], max_pos, ids, specials, N_SPECIAL);
  if (!tj || !tc) goto nomem;
  if ((rc = mk__write_json(dir, "tokenizer.json", tj, err, errlen)) ||
      (rc = mk__write_json(dir, "tokenizer_config.json", tc, err, errlen)))
    goto out;
  info->size = b.ntok + N_SPECIAL;
  info->bos = ids[0];
  info->eos = ids[1];
  info->eos_extra = ids[3];
  goto out;
nomem:
  rc = ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory building the tokenizer", dir);
out:
  cJSON_Delete(tj);
  cJSON_Delete(tc);
  bpe_free(&b);
  return rc;
}

/* ---- a copied tokenizer ------------------------------------------------------------------ */

/* Id of token text s: an added token, else a vocab entry; -1 when absent. */
static int token_id(const cJSON *tok, const char *s) {
  if (!s) return -1;
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(tok, "added_tokens")) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
    if (cJSON_IsString(c) && cJSON_IsNumber(id) && strcmp(c->valuestring, s) == 0)
      return (int)id->valuedouble;
  }
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(tok, "model");
  const cJSON *id =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(model, "vocab"), s);
  return cJSON_IsNumber(id) ? (int)id->valuedouble : -1;
}

/* tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}. */
static const char *config_token(const cJSON *tc, const char *key) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(tc, key);
  if (cJSON_IsObject(j)) j = cJSON_GetObjectItemCaseSensitive(j, "content");
  return cJSON_IsString(j) ? j->valuestring : NULL;
}

static int first_id(const cJSON *tok, const char *preferred, const char *const *names) {
  int id = token_id(tok, preferred);
  for (; id < 0 && *names; names++)
    id = token_id(tok, *names);
  return id;
}

static int copy_tokenizer(const char *dir, const char *src, int max_pos, mk__tok_info *info,
                          char *err, size_t errlen) {
  static const char *const bos_names[] = {"<s>", "<|begin_of_text|>", NULL};
  static const char *const eos_names[] = {"</s>", "<|end_of_text|>", "<|endoftext|>", NULL};
  static const char *const extra_names[] = {"<|eot_id|>", "<|im_end|>", NULL};
  char *text = NULL, *ctext = NULL, *cpath = NULL, *dst = NULL;
  size_t len = 0, clen = 0;
  cJSON *tok = NULL, *tc = NULL;
  int rc = mk__read_file(src, MAX_TOKEN_FILE, &text, &len, err, errlen);
  if (rc) return rc;
  tok = cJSON_ParseWithLength(text, len);
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(tok, "model");
  if (!cJSON_IsObject(tok) || !cJSON_IsObject(model)) {
    rc = ns_errf(err, errlen, NS_EFORMAT, "%s: not a tokenizer.json (no \"model\" object)", src);
    goto out;
  }
  /* Size: the highest id in the vocab or the added tokens, plus one. */
  int size = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(model, "vocab")) {
    if (cJSON_IsNumber(e) && e->valuedouble >= size) size = (int)e->valuedouble + 1;
  }
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(tok, "added_tokens")) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
    if (cJSON_IsNumber(id) && id->valuedouble >= size) size = (int)id->valuedouble + 1;
  }
  if (size <= 0 || size > (1 << 22)) {
    rc = ns_errf(err, errlen, NS_EFORMAT, "%s: model.vocab: no usable token ids", src);
    goto out;
  }
  /* Beside it, a tokenizer_config.json names the bos and eos tokens. */
  const char *slash = strrchr(src, '/');
  size_t dl = slash ? (size_t)(slash - src) : 1;
  cpath = malloc(dl + 32);
  if (!cpath) goto nomem;
  snprintf(cpath, dl + 32, "%.*s/tokenizer_config.json", (int)dl, slash ? src : ".");
  if (access(cpath, F_OK) == 0) {
    if ((rc = mk__read_file(cpath, MAX_TOKEN_FILE, &ctext, &clen, err, errlen))) goto out;
    tc = cJSON_ParseWithLength(ctext, clen);
    if (!cJSON_IsObject(tc)) {
      rc = ns_errf(err, errlen, NS_EFORMAT, "%s: not a JSON object", cpath);
      goto out;
    }
  }
  info->size = size;
  info->bos = first_id(tok, config_token(tc, "bos_token"), bos_names);
  info->eos = first_id(tok, config_token(tc, "eos_token"), eos_names);
  info->eos_extra = first_id(tok, NULL, extra_names);
  if (info->eos_extra == info->eos) info->eos_extra = -1;
  if (info->eos < 0) {
    rc = ns_errf(err, errlen, NS_EFORMAT,
                 "%s: added_tokens: no end-of-sequence token (looked for eos_token in "
                 "tokenizer_config.json, </s>, <|end_of_text|>, <|endoftext|>)",
                 src);
    goto out;
  }
  if (!(dst = mk__path(dir, "tokenizer.json"))) goto nomem;
  if ((rc = mk__write_file(dst, text, len, err, errlen))) goto out;
  if (tc) {
    free(dst);
    if (!(dst = mk__path(dir, "tokenizer_config.json"))) goto nomem;
    rc = mk__write_file(dst, ctext, clen, err, errlen);
  } else { /* a minimal tokenizer_config.json naming the tokens found */
    const char *names[2], *bos = NULL, *eos = NULL;
    int ids[2], n = 0;
    for (const char *const *p = bos_names; info->bos >= 0 && *p && !bos; p++)
      if (token_id(tok, *p) == info->bos) bos = *p;
    for (const char *const *p = eos_names; *p && !eos; p++)
      if (token_id(tok, *p) == info->eos) eos = *p;
    if (bos) {
      ids[n] = info->bos;
      names[n++] = bos;
    }
    ids[n] = info->eos;
    names[n++] = eos;
    tc = tokenizer_config(bos, eos, max_pos, ids, names, n);
    rc = tc ? mk__write_json(dir, "tokenizer_config.json", tc, err, errlen) : NS_ENOMEM;
  }
  goto out;
nomem:
  rc = ns_errf(err, errlen, NS_ENOMEM, "%s: out of memory", src);
out:
  free(dst);
  free(cpath);
  cJSON_Delete(tok);
  cJSON_Delete(tc);
  free(text);
  free(ctext);
  return rc;
}

int mk__tokenizer(const char *dir, const char *src, int max_pos, mk__tok_info *info, char *err,
                  size_t errlen) {
  if (src) return copy_tokenizer(dir, src, max_pos, info, err, errlen);
  return write_builtin(dir, max_pos, info, err, errlen);
}
