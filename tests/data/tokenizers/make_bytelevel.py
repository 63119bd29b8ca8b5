#!/usr/bin/env python3
"""make_bytelevel.py — golden tokenizer data made by Hugging Face `tokenizers` itself.

Trains small BPE tokenizers on the corpus embedded below (no network, no downloads) and
records how HF encodes and decodes a list of tricky strings, for tests/unit/tok:

  bytelevel/   Llama-3 style: Split(llama3 regex, Isolated) + ByteLevel(use_regex=False),
               ByteLevel decoder, Sequence[ByteLevel, TemplateProcessing(<|begin_of_text|>)],
               ignore_merges, special and added tokens with lstrip/rstrip/single_word
  qwen2style/  Qwen2 style: NFC normalizer, the Qwen2 regex, no BOS
  spmstyle/    Llama-2 style (old form): normalizer Sequence[Prepend("▁"), Replace(" ", "▁")],
               no pre-tokenizer, byte_fallback <0xNN> tokens, fuse_unk, unk, decoder
               Sequence[Replace, ByteFallback, Fuse, Strip]

Each folder gets tokenizer.json, tokenizer_config.json and golden.json:
  {"tokenizers_version", "cases": [{text, ids, ids_plain, decoded, decoded_all, raw_hex?}],
   "decode_cases": [{ids, decoded, decoded_all}]}
ids: encode(text, add_special_tokens=True); ids_plain: add_special_tokens=False;
decoded: decode(ids, skip_special_tokens=True); decoded_all: skip_special_tokens=False.
A string holding U+0000 is also given as UTF-8 hex in <key>_hex.
Invalid UTF-8 cannot be given to HF as str: those cases hold the text Python's
bytes.decode("utf-8", "replace") gives, and the original bytes in raw_hex.

Usage: python3 make_bytelevel.py [--out DIR]   (default: the folder of this script)
"""
import argparse
import json
import os
import random
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

MIN_VERSION = (0, 19, 0)  # ignore_merges, merges saved as pairs, Metaspace prepend_scheme

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "Once upon a time, there was a little girl named Lily. She liked to play outside in "
    "the sun with her dog, Max. One day they found a big red ball near the old tree.",
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs!",
    "It's a truth universally acknowledged that we'll need more tests; they've said so, "
    "and I'm sure you're right. He'd agree, wouldn't he? Don't worry, it isn't hard.",
    "In 2023, revenue grew 12.5% to $4,200,000; costs fell by 3.75 percent over 365 days.",
    "Call 555-0123 or write to 1600 Pennsylvania Avenue, Washington DC 20500, USA.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + "
    "fibonacci(n - 2)\n\nfor i in range(10):\n    print(i, fibonacci(i))\n",
    "#include <stdio.h>\n\nint main(int argc, char **argv) {\n  for (int i = 0; i < argc; "
    "i++) {\n    printf(\"%s\\n\", argv[i]);\n  }\n  return 0;\n}\n",
    "const x = await fetch('https://example.com/api/v1/items?limit=10&offset=20');\n"
    "if (x.ok) { console.log(JSON.stringify(await x.json(), null, 2)); }\n",
    "SELECT name, COUNT(*) AS n FROM users WHERE age >= 18 GROUP BY name ORDER BY n DESC;",
    "数学は楽しいです。私は毎日勉強しています。東京は日本の首都です。",
    "中文是世界上使用人数最多的语言之一。你好，世界！我们今天学习分词器。",
    "한국어는 한글로 씁니다. 안녕하세요, 만나서 반갑습니다.",
    "Le café était délicieux; la crème brûlée aussi. Où est la bibliothèque? À bientôt!",
    "Die Größe des Gebäudes überraschte uns. Straße, Mädchen, schön, Übermäßig.",
    "El niño comió jalapeños en la mañana. ¿Dónde está el baño? ¡Qué día!",
    "Ångström, naïve, façade, coöperate, résumé, São Paulo, Kraków, Reykjavík.",
    "Русский язык очень богат. Привет, как дела? Ελληνικά γράμματα: αβγδε.",
    "עברית נכתבת מימין לשמאל. العربية لغة جميلة. हिन्दी भाषा भारत में बोली जाती है।",
    "Emoji time 😀😃😄😁 🎉🎊 👍🏽👋🏿 ❤️ 🇺🇸🇯🇵🇫🇷 👨‍👩‍👧‍👦 🧑‍💻 ✨🔥💯",
    "Whitespace   runs\t\ttabs\n\nnewlines  \r\n  and trailing spaces   ",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 10000 123456789 3.14159 2.71828 -42 +7",
    "Punctuation!!! Really??? Yes... --- *** ((())) [[[]]] {{{}}} <<<>>> ### @@@ $$$ %%%",
    "The model's output wasn't what we'd expected: 'quoted', \"double\", `backticks`.",
    "<html><body><p class=\"x\">Hello &amp; welcome</p></body></html>",
    "fn main() { let v: Vec<u32> = (0..10).map(|x| x * x).collect(); println!(\"{:?}\", v); }",
]

# More distinct words, so that BPE training reaches the vocabulary size: stems times
# suffixes, in sentences drawn with a fixed seed (deterministic, no files).
STEMS = """
account act add advance agree allow answer appear apply argue arrive ask attack avoid
balance base bear beat begin believe belong bend bless block boil borrow bother bounce
break breathe bring build burn bury calculate call care carry cause challenge change
charge chase check cheer chew claim clean clear climb close collect comb command compare
compete complain complete concern confess connect consider consist contain continue
copy correct count cover crack crash crawl cross crush cry cure curl cut damage dance
dare deal decide deliver depend describe design desire destroy detect develop die
differ direct discover divide double doubt drag drain draw dream dress drink drive drop
dust earn educate embarrass employ empty encourage end enjoy enter escape examine
excite excuse exercise exist expand expect explain explode express extend face fade
fail fasten fear feel fetch fill film find fire fit fix flash float flood flow fold
follow force forget forgive form found frame frighten fry gather gaze glow glue govern
grab grease greet grin grip groan guarantee guard guess guide hammer hand handle hang
happen harm hate haunt head heal heap hear heat help hook hop hope hover hug hum hunt
hurry identify ignore imagine impress improve include increase influence inform inject
injure instruct intend interest interrupt introduce invent invite irritate itch jail
jam jog join joke judge juggle jump kick kill kiss kneel knit knock knot label land
last laugh launch learn level license lick lie lighten like list listen live load lock
long look love manage march mark marry match mate matter measure melt memorize mend
milk mine miss mix moan moor mourn move muddle mug multiply murder nail name need nest
nod note notice number obey object observe obtain occur offend offer open order
overflow owe own pack paddle paint park part pass paste pat pause peck pedal peel peep
perform permit phone pick pinch pine place plan plant play please plug point poke
polish pop possess post pour practise pray preach precede prefer prepare present
preserve press pretend prevent prick print produce program promise protect provide
pull pump punch puncture punish push question queue race radiate rain raise reach
realise receive recognise record reduce reflect refuse regret reign reject rejoice
relax release rely remain remember remind remove repair repeat replace reply report
reproduce request rescue retire return rhyme rinse risk rob rock roll rot rub ruin
rule rush sack sail satisfy save saw scare scatter scold scorch scrape scratch scream
screw scribble scrub seal search separate serve settle shade share shave shelter
shiver shock shop shrug sigh sign signal sin sip ski skip slap slip slow smash smell
smile smoke snatch sneeze sniff snore snow soak soothe sound spare spark sparkle spell
spill spoil spot spray sprout squash squeak squeal squeeze stain stamp stare start
stay steer step stir stitch stop store strap strengthen stretch strip stroke stuff
subtract succeed suck suffer suggest suit supply support suppose surprise surround
suspect suspend switch talk tame tap taste tease telephone tempt terrify test thank
thaw tick tickle tie time tip tire touch tour tow trace trade train transport trap
travel treat tremble trick trip trot trouble trust try tug tumble turn twist type
undress unfasten unite unlock unpack untidy use vanish visit wail wait walk wander want
warm warn wash waste watch water wave weigh welcome whine whip whirl whisper whistle
wink wipe wish wobble wonder work worry wrap wreck wrestle wriggle yawn yell zip zoom
""".split()
SUFFIXES = ["", "s", "ed", "ing", "er", "ers", "able", "ment", "ful", "less", "ly"]


def generated_corpus(n=1500, seed=7):
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        words = [rng.choice(STEMS) + rng.choice(SUFFIXES) for _ in range(rng.randrange(4, 12))]
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), str(rng.randrange(10 ** rng.randrange(1, 7))))
        lines.append(" ".join(words).capitalize() + rng.choice([".", "!", "?", ",", ";"]))
    return lines


CASES = [
    "Hello world",
    "Hello, world! How's it going? I'm fine; you're great, they've been, we'll see, he'd go.",
    "DON'T SHOUT: IT'S LOUD, WE'RE HERE, THEY'VE GONE, I'LL GO, HE'D SAY, I'M OK",
    "  leading and trailing spaces  ",
    " ",
    "",
    "\t\ttabs\tand\tspaces   mixed \t \n",
    "line1\nline2\r\nline3\n\n\nend\n",
    "trailing newline\n",
    "   \n   \n",
    "  \t  ",
    "1234567890",
    "3.14159 2718281828 -42 +7 1,000,000",
    "version 12.345.6789 and 7 or 77 or 777 or 7777",
    "数学は楽しい",
    "中文测试：你好，世界！",
    "한국어 텍스트",
    "😀😃😄 emoji",
    "👨‍👩‍👧‍👦 family ZWJ",
    "🇺🇸🇯🇵🇫🇷 flags",
    "👍🏽 skin tone",
    "🙂",
    "emoji at end 🎉",
    "naïve café — déjà vu, Ångström, façade, jalapeño",
    "e\u0301 combining acute, A\u030a ring, n\u0303o",
    "Z\u0324\u0354\u0367\u0311\u0313a\u0308\u0356\u032d\u0307lgo text",
    "def foo(x):\n    return x ** 2  # square\n",
    "int main(void) { printf(\"%d\\n\", 42); return 0; }",
    "for (i = 0; i < n; ++i) {{ a[i] += b[i]; }}",
    "!!!??? ... --- *** ((()))",
    "<|begin_of_text|> inside text",
    "x<|end_of_text|>y<|eot_id|>z",
    "<|begin_of_text|",
    "<|mask|> lstrip test   <|mask|> again",
    "<|sep|>   rstrip test<|sep|>   end",
    "wordtok alone, xwordtok, wordtoky, (wordtok) wordtok",
    "supercalifragilisticexpialidocious" * 30,
    "ab" * 1500,
    "English русский Ελληνικά עברית العربية हिन्दी 日本語",
    "https://example.com/path?query=1&x=y#frag",
    "email: someone@example.org",
    "tab\tseparated\tvalues\t1\t2\t3",
    "\u00a0non-breaking\u00a0space and\u2003em space",
    "\u200bzero\u200bwidth",
    "It's 5 o'clock; 'quoted' and \"double\"",
    "\x00\x01\x1f\x7f control chars",
    "\ufb01 ligature and \uff12 fullwidth",
    "\u01c4 titlecase, \u00df sharp s, \u0130 dotted, \u017f long s's",
    "'S 'T 'RE capital contractions 'll 'Ve",
    "\u1100\u1161\u11a8 conjoining jamo",
]

INVALID = [b"abc\xff\xfedef", b"\xe6\x95", b"ok\xc0\xafok", b"\xed\xa0\x80x",
           b"\xf0\x9f\x98 cut emoji", b"\x80\x80 lone continuation"]


def version_tuple(v):
    out = []
    for part in v.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits or 0))
    return tuple(out)


def train(pre_tok, vocab_size, specials, normalizer=None, limit_alphabet=None):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tok
    kw = {}
    if limit_alphabet is not None:
        kw["limit_alphabet"] = limit_alphabet
    else:
        kw["initial_alphabet"] = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  show_progress=False, **kw)
    tok.train_from_iterator(CORPUS * 3 + generated_corpus(), trainer=trainer)
    return tok


def cases_for(tok, extra_texts=()):
    out = []
    for text in CASES + list(extra_texts):
        out.append(one_case(tok, text))
    for raw in INVALID:
        c = one_case(tok, raw.decode("utf-8", "replace"))
        c["raw_hex"] = raw.hex()
        out.append(c)
    return out


def put(d, key, s):
    """JSON readers in C often stop strings at U+0000: such strings also go in hex."""
    d[key] = s
    if "\x00" in s:
        d[key + "_hex"] = s.encode("utf-8").hex()


def one_case(tok, text):
    ids = tok.encode(text, add_special_tokens=True).ids
    c = {"ids": ids, "ids_plain": tok.encode(text, add_special_tokens=False).ids}
    put(c, "text", text)
    put(c, "decoded", tok.decode(ids, skip_special_tokens=True))
    put(c, "decoded_all", tok.decode(ids, skip_special_tokens=False))
    return c


def decode_cases(tok, n=150, seed=1234):
    rng = random.Random(seed)
    size = tok.get_vocab_size(with_added_tokens=True)
    out = []
    for _ in range(n):
        ids = [rng.randrange(size) for _ in range(rng.randrange(1, 12))]
        c = {"ids": ids}
        put(c, "decoded", tok.decode(ids, skip_special_tokens=True))
        put(c, "decoded_all", tok.decode(ids, skip_special_tokens=False))
        out.append(c)
    return out


def save(folder, tok, config, cases, dcases):
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"), pretty=False)
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
    golden = {"tokenizers_version": tokenizers.__version__, "cases": cases,
              "decode_cases": dcases}
    with open(os.path.join(folder, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
    total = sum(os.path.getsize(os.path.join(folder, x)) for x in os.listdir(folder))
    print(f"{folder}: vocab {tok.get_vocab_size()} cases {len(cases)} "
          f"decode_cases {len(dcases)} bytes {total}")
    return total


def reload(tok, edit):
    """Round-trip through JSON so that the saved file is exactly what made the goldens."""
    d = json.loads(tok.to_str())
    edit(d)
    return Tokenizer.from_str(json.dumps(d))


def make_bytelevel(out):
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
                "<|end_header_id|>"]
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok = train(pre, 2000, specials)
    tok.add_special_tokens([AddedToken("<|mask|>", lstrip=True, special=True),
                            AddedToken("<|sep|>", rstrip=True, special=True)])
    tok.add_tokens([AddedToken("wordtok", single_word=True, normalized=True)])
    tok.decoder = decoders.ByteLevel()
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])

    def edit(d):
        d["model"]["ignore_merges"] = True
    tok = reload(tok, edit)
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
              "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}
    return save(out, tok, config, cases_for(tok), decode_cases(tok, 100))


def make_qwen2(out):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok = train(pre, 1200, specials, normalizer=normalizers.NFC())
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok = reload(tok, lambda d: None)
    config = {"bos_token": None, "eos_token": "<|endoftext|>",
              "tokenizer_class": "Qwen2Tokenizer", "clean_up_tokenization_spaces": False}
    nfc = ["A\u030a vs \u00c5", "\u1100\u1161\u11a8 vs \uac01", "e\u0301\u0323 order",
           "\u212b angstrom sign", "Cafe\u0301 au lait"]
    return save(out, tok, config, cases_for(tok, nfc), decode_cases(tok, 80))


def make_spm(out):
    """Llama-2 style in the old form, built the way HF's converter writes it."""
    base = train(pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always"),
                 900, [], limit_alphabet=120)
    d = json.loads(base.to_str())
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(d["model"]["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [" ".join(m) if isinstance(m, list) else m for m in d["model"]["merges"]]
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    spec = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "vocab": vocab, "merges": merges},
    }
    tok = Tokenizer.from_str(json.dumps(spec))
    config = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
              "tokenizer_class": "LlamaTokenizer"}
    extra = ["<s> inside </s> text", "x</s>", "rare ☃ snowman ☄ comet"]
    return save(out, tok, config, cases_for(tok, extra), decode_cases(tok, 80))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    have = version_tuple(tokenizers.__version__)
    assert have >= MIN_VERSION, f"tokenizers {tokenizers.__version__} < {MIN_VERSION}"
    print(f"tokenizers {tokenizers.__version__}, python {sys.version.split()[0]}")
    total = make_bytelevel(os.path.join(args.out, "bytelevel"))
    total += make_qwen2(os.path.join(args.out, "qwen2style"))
    total += make_spm(os.path.join(args.out, "spmstyle"))
    print(f"total bytes {total}")


if __name__ == "__main__":
    main()
