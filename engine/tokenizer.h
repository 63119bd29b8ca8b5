/* tokenizer.h — Hugging Face tokenizer.json (model type BPE) in C: SentencePiece-style
 * and byte-level BPE, added/special tokens, decoding and streaming detokenization. */
#ifndef ENG_TOKENIZER_H
#define ENG_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Supported tokenizer.json (what Llama 2/3, TinyLlama, Mistral, Qwen2 and GPT-2 ship):
 *   model       BPE: vocab, merges ("a b" strings or ["a","b"] pairs), byte_fallback,
 *               fuse_unk, unk_token, ignore_merges
 *   normalizer  null | Sequence | Prepend | Replace (String or Regex) | NFC
 *   pre_tok     null | Sequence | Metaspace | ByteLevel | Split (String or Regex)
 *   decoder     null | Sequence | Replace | ByteFallback | Fuse | Strip | ByteLevel | Metaspace
 *   post_proc   null | Sequence | TemplateProcessing | ByteLevel | RobertaProcessing |
 *               BertProcessing
 * Anything else fails tok_load with NS_EUNSUPPORTED and a message naming it.
 * Regex patterns are compiled with PCRE2 (UTF + UCP); Hugging Face uses Oniguruma, and the
 * two agree on the patterns these tokenizers ship.
 * NFC is exact when the build found ICU (NS_TOK_HAVE_ICU); otherwise it is applied as the
 * identity and tok_load logs a warning: input that is already NFC (almost all text, and all
 * text below U+0300) encodes the same, decomposed input may not. */

/* A loaded tokenizer. After tok_load* returns it is read-only: any number of threads
 * may call every function below that takes a const tok_t * at the same time. */
typedef struct tok tok_t;

/* Load tokenizer.json (path) and, when tokenizer_config_json is not NULL, its
 * tokenizer_config.json (bos_token and eos_token give tok_bos_id / tok_eos_id; as in
 * transformers 5, add_bos_token / add_eos_token do not override the post_processor, and a
 * disagreement is logged). On failure
 * returns a negative ns_err and writes a one-line reason to err (if errlen > 0).
 * *out is owned by the caller: release it with tok_free. Any thread. */
int tok_load(const char *tokenizer_json, const char *tokenizer_config_json, tok_t **out, char *err,
             size_t errlen);
/* tok_load(dir/tokenizer.json, dir/tokenizer_config.json if that file exists). */
int tok_load_dir(const char *dir, tok_t **out, char *err, size_t errlen);
/* The same from memory: json[0..len) is tokenizer.json, config_json[0..config_len) the
 * config (config_json may be NULL). The buffers are not kept. */
int tok_load_json(const char *json, size_t len, const char *config_json, size_t config_len,
                  tok_t **out, char *err, size_t errlen);
void tok_free(tok_t *tok);

/* Encode text[0..len) (UTF-8, NULs allowed) as HF's fast tokenizer does with
 * encode(text, add_special_tokens=add_special): added tokens are split out first, the rest
 * is normalized, pre-tokenized and BPE-merged; with add_special the post_processor adds
 * its special tokens (e.g. BOS). Invalid UTF-8 returns NS_EINVAL (HF only takes valid
 * str; callers reject or repair such input first). On success *ids is a malloc'd array of
 * *n ids (never NULL, even for *n == 0) that the caller frees with free(). */
int tok_encode(const tok_t *tok, const char *text, size_t len, int add_special, int32_t **ids,
               size_t *n);

/* Decode ids[0..n) as HF's decode(ids, skip_special_tokens=skip_special). Ids outside
 * [0, tok_vocab_size) return NS_EINVAL. On success *text is a malloc'd, NUL-terminated
 * UTF-8 string of *len bytes (it may hold U+FFFD where bytes were invalid); free() it. */
int tok_decode(const tok_t *tok, const int32_t *ids, size_t n, int skip_special, char **text,
               size_t *len);

/* The bytes token id adds to a decoded text: at its start (at_start: SentencePiece's
 * leading space stripped) or after other tokens (the space kept). A <0xNN> byte-fallback
 * token gives its byte and a byte-level token its bytes, which alone may not be UTF-8;
 * a special token gives nothing when skip_special. *out is malloc'd, NUL-terminated;
 * free() it. Ids outside [0, tok_vocab_size) return NS_EINVAL. */
int tok_token_bytes(const tok_t *tok, int32_t id, int at_start, int skip_special, char **out,
                    size_t *len);

int tok_vocab_size(const tok_t *tok); /* number of ids: largest id + 1 */
/* BOS: the config's bos_token, else the first token the post_processor adds. EOS: the
 * config's eos_token, else the first of </s>, <|end_of_text|>, <|endoftext|> that exists.
 * -1 when there is none. */
int tok_bos_id(const tok_t *tok);
int tok_eos_id(const tok_t *tok);
/* Id of a vocabulary piece or added token ("<s>", "▁the", "Ġthe"); -1 if absent. */
int tok_token_id(const tok_t *tok, const char *piece);
/* The piece of an id as tokenizer.json spells it (owned by tok), or NULL if out of range. */
const char *tok_piece(const tok_t *tok, int id);
int tok_is_special(const tok_t *tok, int id); /* 1 for special added tokens, else 0 */

/* Incremental detokenization for one generated sequence (one thread at a time per stream;
 * many streams may share one tok_t). Feed ids one at a time; each call hands back the text
 * that became final: always complete, valid UTF-8. Text that later ids could still change
 * is held back: the tail of an incomplete UTF-8 sequence (byte-level or <0xNN>
 * byte-fallback tokens) and characters a trailing Strip may remove. A character made of
 * byte-fallback tokens comes out with the token that completes it (as vLLM's incremental
 * detokenizer does), so that a stop string it completes is seen without a token's delay; a
 * byte that can never complete a character is U+FFFD. The leading-space strip of
 * SentencePiece decoders applies once, at the very start. The concatenation of all chunks,
 * flush included, equals tok_decode of all ids, except in a run of byte tokens that holds
 * an invalid byte: HF's decode makes every byte of such a run U+FFFD, while characters the
 * stream released before the bad byte stay. */
typedef struct tok_stream tok_stream_t;

int tok_stream_new(const tok_t *tok, int skip_special, tok_stream_t **out);
/* Feed one id. *text (NUL-terminated, *len bytes, possibly empty) stays valid until the
 * next call on this stream; the stream owns it. Out-of-range ids return NS_EINVAL and
 * leave the stream unchanged. */
int tok_stream_push(tok_stream_t *s, int32_t id, const char **text, size_t *len);
/* End of sequence: emit everything held back (invalid leftovers as U+FFFD, as HF does).
 * The stream is then reset and may start a new sequence. */
int tok_stream_flush(tok_stream_t *s, const char **text, size_t *len);
void tok_stream_reset(tok_stream_t *s); /* drop held text, start a new sequence */
void tok_stream_free(tok_stream_t *s);

/* `nanoserve tokenize --model DIR | --tokenizer FILE [--no-special] [--decode]`
 * (argv[0] == "tokenize"). Encodes stdin (taken verbatim, trailing newline included) and
 * prints the ids as a JSON array; with --decode reads a JSON array of ids and prints the
 * text. --no-special: encode without the post_processor's tokens / decode skipping special
 * tokens. --tokenizer FILE also reads tokenizer_config.json beside FILE when present.
 * Returns the process exit status: 0 ok, 1 failure, 2 bad usage. Main thread. */
int tok_cli_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
