#!/bin/sh
# tokenize_cli.sh — `nanoserve tokenize` from outside: text on stdin gives the ids HF
# gives (Llama 2 tokenizer from ../shared), --decode turns them back into the text, and
# a tiny mkmodel checkpoint's own tokenizer round-trips. Usage: tokenize_cli.sh BIN SRC WORK
set -eu
bin=$1
src=$2
work=$3
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

llama=$src/../shared/tokenizers/llama2
if [ -f "$llama/tokenizer.json" ]; then
  got=$(printf 'Hello world' | "$bin" tokenize --tokenizer "$llama/tokenizer.json")
  [ "$got" = "[1,15043,3186]" ] || [ "$got" = "[1, 15043, 3186]" ] || fail "llama2 ids: $got"
  # as HF's decode: special tokens shown unless skipped
  txt=$(echo '[1, 15043, 3186]' | "$bin" tokenize --tokenizer "$llama/tokenizer.json" --decode)
  [ "$txt" = "<s> Hello world" ] || fail "llama2 decode: '$txt'"
  txt=$(echo '[1, 15043, 3186]' | "$bin" tokenize --tokenizer "$llama/tokenizer.json" --decode --no-special)
  [ "$txt" = "Hello world" ] || fail "llama2 decode --no-special: '$txt'"
  got=$(printf 'Hello world' | "$bin" tokenize --tokenizer "$llama/tokenizer.json" --no-special)
  [ "$got" = "[15043,3186]" ] || [ "$got" = "[15043, 3186]" ] || fail "--no-special: $got"
else
  echo "note: $llama absent, Llama 2 checks skipped"
fi

model=$work/tokenize_tiny
rm -rf "$model"
"$bin" mkmodel --shape tiny --out "$model" --seed 5 >/dev/null
text='naïve café 😀 — tabs	and  spaces'
ids=$(printf '%s' "$text" | "$bin" tokenize --model "$model" --no-special)
back=$(echo "$ids" | "$bin" tokenize --model "$model" --decode --no-special)
[ "$back" = "$text" ] || fail "tiny round trip: '$back'"

if echo '[1, "x"]' | "$bin" tokenize --model "$model" --decode >/dev/null 2>&1; then
  fail "a non-integer id was accepted"
fi
if "$bin" tokenize --model /nonexistent </dev/null >/dev/null 2>&1; then
  fail "a missing model was accepted"
fi
[ $fails -eq 0 ] || exit 1
echo "tokenize CLI: all checks passed"
