/* tok_int.h — the tokenizer's internals shared by the tok_*.c files (not public):
 * the tok struct, its pipeline steps, hash maps, growable buffers and UTF-8 helpers. */
#ifndef ENG_TOK_INT_H
#define ENG_TOK_INT_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

#define TOK_MAX_STEPS 16 /* normalizers, pre-tokenizers or decoders after flattening */

typedef struct tok tok;

/* ---- growable buffers ------------------------------------------------------------ */

typedef struct tok_buf {
  char *p;
  size_t len, cap;
} tok_buf;

int tok__buf_reserve(tok_buf *b, size_t extra); /* room for len + extra + NUL; p[len] = 0 */
int tok__buf_put(tok_buf *b, const void *s, size_t n);
void tok__buf_free(tok_buf *b);

typedef struct tok_ids {
  int32_t *p;
  size_t len, cap;
} tok_ids;

int tok__ids_push(tok_ids *v, int32_t id);

/* ---- UTF-8 ------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s[0..n) (1-4), or 0 if s does not start one. */
size_t tok__utf8_seq(const unsigned char *s, size_t n, uint32_t *cp);
int tok__utf8_valid(const char *s, size_t n);
/* 1 when s[0..n) is the start of a valid sequence that more bytes could complete. */
int tok__utf8_partial(const unsigned char *s, size_t n);
size_t tok__utf8_put(char *dst, uint32_t cp); /* dst has room for 4; returns bytes */
/* Append bytes to out as Rust's String::from_utf8_lossy does (one U+FFFD per maximal
 * invalid subpart). Unless final, an incomplete but so-far-valid sequence at the end is
 * not consumed; *used says how many bytes were. */
int tok__utf8_lossy(tok_buf *out, const unsigned char *s, size_t n, int final, size_t *used);
int tok__is_space(uint32_t cp); /* Unicode White_Space (Rust char::is_whitespace) */

/* ---- hash maps -------------------------------------------------------------------- */

/* String -> id over strings the caller keeps alive (the vocabulary pieces). */
typedef struct tok_strmap {
  uint32_t *hash;
  int32_t *id; /* -1: empty slot */
  size_t mask;
} tok_strmap;

/* (left id, right id) -> (rank, merged id); one 16-byte slot per entry, so a probe
 * touches one cache line. */
typedef struct tok_pair_slot {
  uint64_t key; /* UINT64_MAX: empty */
  uint32_t rank;
  int32_t merged;
} tok_pair_slot;

typedef struct tok_pairmap {
  tok_pair_slot *slot;
  size_t mask;
} tok_pairmap;

int tok__strmap_init(tok_strmap *m, size_t n);
void tok__strmap_free(tok_strmap *m);
/* Insert id, whose text is str[id] (len[id] bytes); keeps the first id for a string. */
void tok__strmap_put(tok_strmap *m, char *const *str, const uint32_t *len, int32_t id);
int32_t tok__strmap_get(const tok_strmap *m, char *const *str, const uint32_t *len, const char *s,
                        size_t n);
int tok__pairmap_init(tok_pairmap *m, size_t n);
void tok__pairmap_free(tok_pairmap *m);
void tok__pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged);
/* Returns 1 and fills rank/merged when (a, b) merges. */
int tok__pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *merged);

/* ---- pipeline steps --------------------------------------------------------------- */

typedef enum tok_norm_kind { TOK_NORM_PREPEND, TOK_NORM_REPLACE, TOK_NORM_NFC } tok_norm_kind;

typedef struct tok_norm {
  tok_norm_kind kind;
  char *pat; /* Prepend: the prefix; Replace: the literal pattern (when re is NULL) */
  size_t pat_len;
  char *content; /* Replace: the replacement */
  size_t content_len;
  pcre2_code *re; /* Replace with a Regex pattern */
} tok_norm;

typedef enum tok_pre_kind { TOK_PRE_METASPACE, TOK_PRE_BYTELEVEL, TOK_PRE_SPLIT } tok_pre_kind;
typedef enum tok_prepend { TOK_PREPEND_NEVER, TOK_PREPEND_FIRST, TOK_PREPEND_ALWAYS } tok_prepend;
typedef enum tok_behavior {
  TOK_SPLIT_REMOVED,
  TOK_SPLIT_ISOLATED,
  TOK_SPLIT_MERGED_PREV,
  TOK_SPLIT_MERGED_NEXT,
  TOK_SPLIT_CONTIGUOUS
} tok_behavior;

typedef struct tok_pre {
  tok_pre_kind kind;
  char rep[5]; /* Metaspace replacement, UTF-8 */
  size_t rep_len;
  tok_prepend prepend;
  int split;            /* Metaspace */
  int add_prefix_space; /* ByteLevel */
  int use_regex;        /* ByteLevel: split with the GPT-2 pattern first */
  pcre2_code *re;       /* Split with a Regex pattern; ByteLevel's GPT-2 pattern */
  char *lit;            /* Split with a String pattern */
  size_t lit_len;
  tok_behavior behavior;
  int invert;
} tok_pre;

typedef enum tok_dec_kind {
  TOK_DEC_REPLACE,
  TOK_DEC_BYTE_FALLBACK,
  TOK_DEC_FUSE,
  TOK_DEC_STRIP,
  TOK_DEC_BYTE_LEVEL,
  TOK_DEC_METASPACE
} tok_dec_kind;

typedef struct tok_dec {
  tok_dec_kind kind;
  char *pat; /* Replace */
  size_t pat_len;
  char *content; /* Replace */
  size_t content_len;
  uint32_t strip_cp; /* Strip: the character */
  int start, stop;   /* Strip: how many leading / trailing */
  uint32_t rep_cp;   /* Metaspace */
  int prepend;       /* Metaspace: prepend_scheme != never */
  int fused;         /* a Fuse or ByteLevel comes earlier: the tokens are one string here */
} tok_dec;

typedef struct tok_added {
  char *content;
  size_t len;
  char *ncontent; /* content after the normalizers (normalized tokens match on this) */
  size_t nlen;
  int32_t id;
  uint8_t special, lstrip, rstrip, normalized, single_word;
} tok_added;

/* Added tokens of one kind (normalized or not), indexed by first byte, longest first. */
typedef struct tok_matcher {
  int32_t *order; /* indices into tok->added */
  size_t n;
  uint32_t first[257]; /* order[first[b] .. first[b+1]) start with byte b */
} tok_matcher;

/* ---- the tokenizer ---------------------------------------------------------------- */

struct tok {
  int32_t n_ids; /* largest id + 1 */
  char **piece;  /* [n_ids]: added content or model piece; NULL for holes */
  uint32_t *piece_len;
  char **mpiece; /* [n_ids]: model vocabulary piece; NULL if none */
  uint32_t *mpiece_len;
  uint8_t *special;  /* [n_ids] */
  uint8_t *is_added; /* [n_ids] */
  char *arena;       /* storage of the model pieces */
  tok_strmap vocab;  /* model vocabulary only (what BPE looks up) */
  tok_pairmap merges;
  int32_t byte_id[256];  /* <0xNN> tokens, -1 if absent */
  int32_t small_cp[512]; /* vocab id of the one-character piece U+0000..U+01FF, or -1 */
  int32_t unk_id;        /* -1: none */
  int byte_fallback, fuse_unk, ignore_merges;

  tok_norm norm[TOK_MAX_STEPS];
  int n_norm;
  tok_pre pre[TOK_MAX_STEPS];
  int n_pre;
  tok_dec dec[TOK_MAX_STEPS];
  int n_dec;
  int has_decoder; /* 0: HF joins tokens with " " */

  tok_added *added;
  size_t n_added;
  tok_matcher match_raw;  /* normalized == false: matched in the raw text */
  tok_matcher match_norm; /* normalized == true: matched after the normalizers */
  pcre2_code *re_word;    /* \w, for single_word */

  int32_t *prefix; /* post_processor ids before / after the sequence */
  size_t n_prefix;
  int32_t *suffix;
  size_t n_suffix;
  int32_t bos_id, eos_id;

  uint16_t byte_cp[256];  /* GPT-2 byte -> code point */
  int16_t cp_byte[324];   /* code point -> byte, -1 if not in the map */
  char byte_utf8[256][2]; /* byte -> its code point in UTF-8 (always 1 or 2 bytes) */
  uint8_t byte_utf8_len[256];
};

/* tok_steps.c: tokenizer.json's normalizer, pre_tokenizer, decoder, post_processor, and
 * the small JSON readers tok_load.c shares */
struct cJSON;
int tok__parse_pipeline(tok *t, const struct cJSON *root, char *err, size_t errlen);
const struct cJSON *tok__jget(const struct cJSON *o, const char *key);
const char *tok__jstr(const struct cJSON *o, const char *key);
int tok__jbool(const struct cJSON *o, const char *key, int def);
int tok__jint(const struct cJSON *v, int32_t *out); /* an id: integer in [0, 2^24) */
char *tok__dupn(const char *s, size_t n);

/* tok_util.c */
void tok__errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Compile a HF regex (UTF, UCP, JIT when available). NULL and err filled on failure. */
pcre2_code *tok__regex(const char *pat, size_t len, char *err, size_t errlen);

/* ---- encoding scratch (one per tok_encode call) -------------------------------- */

typedef struct tok_spans {
  size_t *p; /* start0, end0, start1, end1, ... */
  size_t len, cap;
} tok_spans;
int tok__spans_push(tok_spans *v, size_t a, size_t b);

typedef struct tok_seg {
  size_t a, b;
  int32_t id; /* added token id; -1 for text. In splits: 1 for a match, 0 otherwise */
} tok_seg;

typedef struct tok_segs {
  tok_seg *p;
  size_t len, cap;
} tok_segs;
int tok__segs_push(tok_segs *v, size_t a, size_t b, int32_t id);

typedef struct tok_sym {
  int32_t id, prev, next;
  uint32_t len; /* bytes covered; 0 once merged into its left neighbour */
} tok_sym;

typedef struct tok_heap_ent {
  uint32_t rank, pos;
  int32_t merged;
} tok_heap_ent;

typedef struct tok_enc {
  const tok *t;
  tok_ids out;
  pcre2_match_data *md;
  tok_segs seg_raw, seg_norm; /* added-token splits of the text, then of a normalized part */
  tok_buf norm, norm_tmp;
  tok_buf text[TOK_MAX_STEPS], mapped[TOK_MAX_STEPS]; /* per pre-tokenizer stage */
  tok_spans match[TOK_MAX_STEPS];
  tok_segs segs[TOK_MAX_STEPS], pieces[TOK_MAX_STEPS];
  tok_sym *sym;
  size_t sym_cap;
  tok_heap_ent *heap;
  size_t heap_len, heap_cap;
} tok_enc;

/* tok_pre.c: normalizers, added-token splitting and pre-tokenizers */
/* Apply the normalizers to s[0..n) into out (tmp is scratch; md may be NULL). */
int tok__normalize(const tok *t, const char *s, size_t n, pcre2_match_data *md, tok_buf *out,
                   tok_buf *tmp);
int tok__nfc(const char *s, size_t n, tok_buf *out); /* identity when built without ICU */
int tok__nfc_exact(void);
/* Split s[0..n) on the added tokens of m as HF's AddedVocabulary::find_matches does. */
int tok__split_added(const tok *t, const tok_matcher *m, int normalized, pcre2_match_data *md,
                     const char *s, size_t n, tok_segs *out);
/* Run pre-tokenizer `stage` and those after it on one piece (first: the piece starts at
 * offset 0 of the original text), handing every resulting word to tok__bpe_word. */
int tok__pretokenize(tok_enc *e, int stage, const char *s, size_t n, int first);
/* Find regex matches of re in s[0..n) as (start, end) pairs (Rust find_iter convention
 * for empty matches). */
int tok__regex_find_all(const pcre2_code *re, pcre2_match_data *md, const char *s, size_t n,
                        tok_spans *out);

/* tok_bpe.c */
int tok__bpe_word(tok_enc *e, const char *s, size_t n);

/* tok_decode.c */
int tok__byte_token(const char *s, size_t n); /* value of a "<0xNN>" piece, or -1 */

#endif
