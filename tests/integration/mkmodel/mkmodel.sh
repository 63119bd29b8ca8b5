#!/bin/sh
# mkmodel.sh — `mkmodel` from outside: a tiny checkpoint is complete and loads,
# same seed gives the same bytes, options work, and errors exit 1 with a message.
# Usage: mkmodel.sh BINARY [SUBCOMMAND]   (nanoserve mkmodel)
set -eu

bin=$1
sub=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fails=0

fail() {
  echo "FAIL: $*"
  echo "--- output:"
  cat "$tmp/out"
  echo "---"
  fails=$((fails + 1))
}

# run EXPECTED_RC ARGS...: `bin [sub] ARGS` with output in $tmp/out
run() {
  want=$1
  shift
  rc=0
  # shellcheck disable=SC2086
  "$bin" $sub "$@" >"$tmp/out" 2>&1 || rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "'mkmodel $*' exited $rc, expected $want"
    return 1
  fi
  return 0
}

# has TEXT: the last output contains TEXT
has() {
  grep -qF -- "$1" "$tmp/out" || fail "output lacks '$1'"
}

files="config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json"

# -- a tiny checkpoint: every file, and it loads
if run 0 --shape tiny --out "$tmp/a" --seed 5; then
  for f in $files; do
    [ -s "$tmp/a/$f" ] || fail "tiny: $f missing or empty"
  done
fi
if run 0 --check "$tmp/a"; then
  has "ok $tmp/a"
  has "arch llama vocab 512 hidden 64 intermediate 176 layers 2 heads 4 kv_heads 2 head_dim 16"
  has "tied 0 qkv_bias 0 dtype F32"
  has "tensors 21"
  has "embed_dtype F32"
fi
grep -q '"rope_theta":[[:space:]]*10000.0' "$tmp/a/config.json" || fail "config.json: rope_theta"
grep -q '"architectures":[[:space:]]*\["LlamaForCausalLM"\]' "$tmp/a/config.json" ||
  fail "config.json: architectures"

# -- same seed: the same bytes; another seed: other weights, same config
run 0 --shape tiny --out "$tmp/b" --seed 5 || true
for f in $files; do
  cmp -s "$tmp/a/$f" "$tmp/b/$f" || fail "seed 5 twice: $f differs"
done
run 0 --shape tiny --out "$tmp/c" --seed 6 || true
cmp -s "$tmp/a/model.safetensors" "$tmp/c/model.safetensors" &&
  fail "seeds 5 and 6 wrote the same weights"
cmp -s "$tmp/a/config.json" "$tmp/c/config.json" || fail "seeds 5 and 6: config.json differs"

# -- --dtype bf16: half the bytes, BF16 tensors
if run 0 --shape tiny --out "$tmp/bf" --dtype bf16 && run 0 --check "$tmp/bf"; then
  has "dtype BF16"
  has "embed_dtype BF16"
  a=$(wc -c <"$tmp/a/model.safetensors")
  b=$(wc -c <"$tmp/bf/model.safetensors")
  [ $((b * 2)) -lt $((a + 8192)) ] && [ $((b * 2)) -gt $((a - 8192)) ] ||
    fail "bf16 file is $b bytes, f32 is $a"
fi

# -- small shards: an index and several files that load as one
if run 0 --shape tiny-qwen2 --out "$tmp/sh" --max-shard-size 100000 && run 0 --check "$tmp/sh"; then
  has "arch qwen2"
  has "tied 1 qkv_bias 1"
  [ -s "$tmp/sh/model.safetensors.index.json" ] || fail "sharded: no index"
  [ -s "$tmp/sh/model-00002-of-00005.safetensors" ] || fail "sharded: no second shard of 5"
  [ -e "$tmp/sh/model.safetensors" ] && fail "sharded: model.safetensors present too"
fi

# -- Mistral: its own model_type and architecture, no sliding window (null), no rope_scaling
if run 0 --shape tiny-mistral --out "$tmp/mi" && run 0 --check "$tmp/mi"; then
  has "arch mistral vocab 512 hidden 64 intermediate 176 layers 2 heads 4 kv_heads 2 head_dim 16"
  has "rope default theta 1e+06"
  grep -q '"model_type":[[:space:]]*"mistral"' "$tmp/mi/config.json" || fail "mistral: model_type"
  grep -q '"architectures":[[:space:]]*\["MistralForCausalLM"\]' "$tmp/mi/config.json" ||
    fail "mistral: architectures"
  grep -q '"sliding_window":[[:space:]]*null' "$tmp/mi/config.json" || fail "mistral: sliding_window"
  grep -q 'rope_scaling\|attention_bias\|pretraining_tp' "$tmp/mi/config.json" &&
    fail "mistral: Llama-only keys in config.json"
fi
# the real shapes are listed (written only on the GPU machine: 14-15 GB each)
if run 0 --list; then
  for s in tinyllama-1.1b llama3.2-1b llama3-8b qwen2.5-0.5b mistral-7b qwen2.5-7b; do
    grep -qx "$s" "$tmp/out" || fail "--list lacks $s"
  done
fi

# -- --tokenizer: copied as is; bos/eos come from its special tokens
cat >"$tmp/tok.json" <<'JSON'
{"version": "1.0", "added_tokens": [
  {"id": 0, "content": "<unk>", "special": true},
  {"id": 1, "content": "<s>", "special": true},
  {"id": 2, "content": "</s>", "special": true}],
 "model": {"type": "BPE", "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "a": 3, "b": 299},
           "merges": []}}
JSON
if run 0 --shape tiny --out "$tmp/tk" --tokenizer "$tmp/tok.json" && run 0 --check "$tmp/tk"; then
  has "vocab 304"
  has "bos 1 eos 2"
  cmp -s "$tmp/tok.json" "$tmp/tk/tokenizer.json" || fail "--tokenizer: not copied as is"
  grep -q '"eos_token":[[:space:]]*"</s>"' "$tmp/tk/tokenizer_config.json" ||
    fail "--tokenizer: tokenizer_config.json lacks eos_token </s>"
fi

# -- errors: exit 1 and a message
run 1 --shape gpt5 --out "$tmp/x" && has "unknown shape 'gpt5'"
run 1 --shape tiny --out "$tmp/x" --dtype f8 && has "unknown dtype 'f8'"
run 1 --shape tiny && has "--out"
run 1 --shape tiny --out "$tmp/x" --seed -3 && has "--seed"
run 1 --bogus && has "unknown option '--bogus'"
run 1 --shape tiny --out "$tmp/x" --tokenizer "$tmp/none.json" && has "none.json"
mkdir -p "$tmp/empty"
run 1 --check "$tmp/empty" && has "config.json"
cp "$tmp/a/config.json" "$tmp/empty/"
run 1 --check "$tmp/empty" && has "model.safetensors"

if [ "$fails" -ne 0 ]; then
  echo "mkmodel.sh: $fails failure(s)"
  exit 1
fi
echo "mkmodel.sh: all checks passed"
