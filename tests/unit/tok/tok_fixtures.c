/* tok_fixtures.c — builds the hand-made tokenizer.json texts described in
 * tok_fixtures.h (tokfx_spm_json, tokfx_bytelevel_json). */
#include "tok_fixtures.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sb {
  char *p;
  size_t len, cap;
} sb;

static void sb_put(sb *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) abort(); /* test fixture: no way to go on */
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void sb_str(sb *b, const char *s) {
  sb_put(b, s, strlen(s));
}

static void sb_printf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  sb_put(b, tmp, (size_t)n);
}

/* s as a JSON string literal */
static void sb_json(sb *b, const char *s) {
  sb_str(b, "\"");
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') sb_put(b, "\\", 1);
    sb_put(b, s, 1);
  }
  sb_str(b, "\"");
}

static const char *SPM_PIECES[] = {"\xE2\x96\x81",
                                   "h",
                                   "e",
                                   "l",
                                   "o",
                                   "w",
                                   "r",
                                   "d",
                                   "\xE2\x96\x81h",
                                   "el",
                                   "\xE2\x96\x81hel",
                                   "lo",
                                   "\xE2\x96\x81hello",
                                   "or",
                                   "\xE2\x96\x81w",
                                   "\xE2\x96\x81wor",
                                   "ld",
                                   "\xE2\x96\x81world"};
static const char *SPM_MERGES[] = {"\xE2\x96\x81 h",
                                   "e l",
                                   "\xE2\x96\x81h el",
                                   "l o",
                                   "\xE2\x96\x81hel lo",
                                   "o r",
                                   "\xE2\x96\x81 w",
                                   "\xE2\x96\x81w or",
                                   "l d",
                                   "\xE2\x96\x81wor ld"};

static void added(sb *b, int id, const char *content, int special, int lstrip, int rstrip,
                  int normalized, int single_word) {
  sb_printf(b, "{\"id\":%d,\"content\":", id);
  sb_json(b, content);
  sb_printf(b,
            ",\"single_word\":%s,\"lstrip\":%s,\"rstrip\":%s,\"normalized\":%s,"
            "\"special\":%s}",
            single_word ? "true" : "false", lstrip ? "true" : "false", rstrip ? "true" : "false",
            normalized ? "true" : "false", special ? "true" : "false");
}

char *tokfx_spm_json(int variant) {
  sb b = {0};
  sb_str(&b, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[");
  added(&b, 0, "<unk>", 1, 0, 0, 0, 0);
  sb_str(&b, ",");
  added(&b, 1, "<s>", 1, 0, 0, 0, 0);
  sb_str(&b, ",");
  added(&b, 2, "</s>", 1, 0, 0, 0, 0);
  sb_str(&b, ",");
  added(&b, TOKFX_SPM_TAG, "<tag>", 0, 0, 0, 1, 0);
  sb_str(&b, "],");
  if (variant == 0)
    sb_str(&b, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":["
               "{\"type\":\"Prepend\",\"prepend\":\"\xE2\x96\x81\"},"
               "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":"
               "\"\xE2\x96\x81\"}]},\"pre_tokenizer\":null,");
  else
    sb_printf(&b,
              "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":"
              "\"\xE2\x96\x81\",\"prepend_scheme\":\"%s\",\"split\":%s},",
              variant == 2 ? "first" : "always", variant == 2 ? "false" : "true");
  sb_str(&b, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":["
             "{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\","
             "\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\","
             "\"ids\":[1],\"tokens\":[\"<s>\"]}}},");
  if (variant == 3)
    sb_str(&b, "\"decoder\":{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\","
               "\"prepend_scheme\":\"always\",\"split\":true},");
  else
    sb_str(&b, "\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
               "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xE2\x96\x81\"},\"content\":"
               "\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},"
               "{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},");
  sb_str(&b, "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":\"<unk>\","
             "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
             "\"fuse_unk\":true,\"byte_fallback\":true,\"vocab\":{"
             "\"<unk>\":0,\"<s>\":1,\"</s>\":2");
  for (int x = 0; x < 0xC0; x++)
    sb_printf(&b, ",\"<0x%02X>\":%d", x, 3 + x);
  for (size_t i = 0; i < sizeof SPM_PIECES / sizeof *SPM_PIECES; i++) {
    sb_str(&b, ",");
    sb_json(&b, SPM_PIECES[i]);
    sb_printf(&b, ":%zu", 195 + i);
  }
  sb_str(&b, "},\"merges\":[");
  for (size_t i = 0; i < sizeof SPM_MERGES / sizeof *SPM_MERGES; i++) {
    if (i) sb_str(&b, ",");
    sb_json(&b, SPM_MERGES[i]);
  }
  sb_str(&b, "]}}");
  return b.p;
}

/* GPT-2's byte -> character map, written out independently of the library */
static void byte_char(int x, char out[3]) {
  int printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
  unsigned cp = (unsigned)x;
  if (!printable) {
    int n = 0;
    for (int y = 0; y < x; y++)
      if (!((y >= '!' && y <= '~') || (y >= 0xA1 && y <= 0xAC) || y >= 0xAE)) n++;
    cp = 256u + (unsigned)n;
  }
  if (cp < 0x80) {
    out[0] = (char)cp;
    out[1] = 0;
  } else {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    out[2] = 0;
  }
}

static const char LLAMA3_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}"
    "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

char *tokfx_bytelevel_json(int variant) {
  static const char *merges[][2] = {{"\xC4\xA0", "t"},
                                    {"h", "e"},
                                    {"\xC4\xA0t", "he"},
                                    {"i", "n"},
                                    {"\xC4\xA0", "c"},
                                    {"a", "t"},
                                    {"\xC4\xA0"
                                     "c",
                                     "at"},
                                    {"1", "2"},
                                    {"12", "3"}};
  static const char *merged[] = {"\xC4\xA0t",
                                 "he",
                                 "\xC4\xA0the",
                                 "in",
                                 "\xC4\xA0"
                                 "c",
                                 "at",
                                 "\xC4\xA0"
                                 "cat",
                                 "12",
                                 "123"};
  sb b = {0};
  sb_str(&b, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[");
  added(&b, 265, "<|bos|>", 1, 0, 0, 0, 0);
  sb_str(&b, ",");
  added(&b, 266, "<|mask|>", 1, 1, 0, 0, 0);
  sb_str(&b, ",");
  added(&b, 267, "<|sep|>", 1, 0, 1, 0, 0);
  sb_str(&b, ",");
  added(&b, 268, "wordtok", 0, 0, 0, 0, 1);
  sb_str(&b, "],");
  sb_str(&b, variant == 2 ? "\"normalizer\":{\"type\":\"NFC\"}," : "\"normalizer\":null,");
  if (variant == 1) {
    sb_str(&b, "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
               "\"trim_offsets\":true,\"use_regex\":true},");
  } else {
    sb_str(&b, "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":"
               "\"Split\",\"pattern\":{\"Regex\":");
    sb_json(&b, LLAMA3_RE);
    sb_str(&b, "},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
               "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]},");
  }
  sb_str(&b, "\"post_processor\":{\"type\":\"Sequence\",\"processors\":[{\"type\":"
             "\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":false,\"use_regex\":"
             "true},{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":"
             "\"<|bos|>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
             "\"pair\":[],\"special_tokens\":{\"<|bos|>\":{\"id\":\"<|bos|>\",\"ids\":[265],"
             "\"tokens\":[\"<|bos|>\"]}}}]},");
  sb_str(&b, "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
             "\"trim_offsets\":true,\"use_regex\":true},");
  sb_str(&b, "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
             "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
             "\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,\"vocab\":{");
  for (int x = 0; x < 256; x++) {
    char c[3];
    byte_char(x, c);
    if (x) sb_str(&b, ",");
    sb_json(&b, c);
    sb_printf(&b, ":%d", x);
  }
  for (int i = 0; i < 9; i++) {
    sb_str(&b, ",");
    sb_json(&b, merged[i]);
    sb_printf(&b, ":%d", 256 + i);
  }
  sb_str(&b, "},\"merges\":[");
  for (int i = 0; i < 9; i++) {
    sb_str(&b, i ? ",[" : "[");
    sb_json(&b, merges[i][0]);
    sb_str(&b, ",");
    sb_json(&b, merges[i][1]);
    sb_str(&b, "]");
  }
  sb_str(&b, "]}}");
  return b.p;
}
