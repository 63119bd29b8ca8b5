/* tok_fixtures.h — tiny hand-made tokenizer.json texts for the tokenizer tests and the
 * fuzz harness: a SentencePiece-style BPE and a byte-level BPE, in a few variants. */
#ifndef TOK_FIXTURES_H
#define TOK_FIXTURES_H

/* SentencePiece style. Ids: 0 <unk>, 1 <s>, 2 </s>, 3 + b for <0xb> (b = 0x00..0xBF only,
 * so characters with a byte >= 0xC0 fall back to <unk>), then 195 "▁" 196 "h" 197 "e"
 * 198 "l" 199 "o" 200 "w" 201 "r" 202 "d" 203 "▁h" 204 "el" 205 "▁hel" 206 "lo"
 * 207 "▁hello" 208 "or" 209 "▁w" 210 "▁wor" 211 "ld" 212 "▁world"; added token 213 "<tag>"
 * (normalized, not special). Merges are "a b" strings; byte_fallback and fuse_unk on.
 * variant 0: normalizer Sequence[Prepend, Replace], no pre-tokenizer (Llama 2 old form)
 * variant 1: pre_tokenizer Metaspace prepend_scheme always, split true, no normalizer
 * variant 2: pre_tokenizer Metaspace prepend_scheme first, split false (Llama 2 new form)
 * variant 3: as variant 1, with a Metaspace decoder instead of the Sequence */
#define TOKFX_SPM_TAG 213
char *tokfx_spm_json(int variant);

/* Byte level. Ids 0..255: the GPT-2 character of byte b is id b; merges (as ["a","b"]
 * pairs) 256 "Ġt" 257 "he" 258 "Ġthe" 259 "in" 260 "Ġc" 261 "at" 262 "Ġcat" 263 "12"
 * 264 "123"; added 265 <|bos|> (special), 266 <|mask|> (special, lstrip), 267 <|sep|>
 * (special, rstrip), 268 "wordtok" (single_word, not normalized, not special).
 * post_processor: Sequence[ByteLevel, TemplateProcessing(<|bos|> $A)]; decoder ByteLevel.
 * variant 0: Sequence[Split(llama3 regex, Isolated), ByteLevel(use_regex false)]
 * variant 1: ByteLevel(add_prefix_space true, use_regex true) (GPT-2)
 * variant 2: variant 0 plus an NFC normalizer */
#define TOKFX_BL_BOS 265
char *tokfx_bytelevel_json(int variant);

#endif
