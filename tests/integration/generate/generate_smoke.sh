#!/bin/sh
# generate_smoke.sh — `generate` from outside on a tiny mkmodel checkpoint: greedy output
# repeats, --json parses and agrees with the streamed text, seeds reproduce, stop strings cut.
# Usage: generate_smoke.sh PATH/TO/nanoserve WORK_DIR
set -eu

bin=$1
work=$2
model=$work/generate_smoke_tiny
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fails=0

fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

rm -rf "$model"
"$bin" mkmodel --shape tiny --out "$model" --seed 3 >"$tmp/mk.log" 2>&1 || {
  cat "$tmp/mk.log"
  echo "FAIL: mkmodel could not write the tiny model"
  exit 1
}

prompt="The quick brown fox"
"$bin" generate --model "$model" --prompt "$prompt" --max-tokens 16 --temperature 0 >"$tmp/g1" 2>"$tmp/e1" ||
  fail "greedy run 1 exited non-zero: $(cat "$tmp/e1")"
"$bin" generate --model "$model" --prompt "$prompt" --max-tokens 16 --temperature 0 >"$tmp/g2" 2>"$tmp/e2" ||
  fail "greedy run 2 exited non-zero: $(cat "$tmp/e2")"
cmp -s "$tmp/g1" "$tmp/g2" || fail "two greedy runs differ"
[ -s "$tmp/g1" ] || fail "greedy run printed nothing"

"$bin" generate --model "$model" --prompt "$prompt" --max-tokens 16 --temperature 0 --json \
  >"$tmp/j1" 2>"$tmp/ej" || fail "--json run exited non-zero: $(cat "$tmp/ej")"
# 16 ids, or fewer with finish_reason stop (EOS); the text is what the stream printed
python3 - "$tmp/j1" "$tmp/g1" <<'PY' || fail "--json output is wrong: $(cat "$tmp/j1")"
import json, sys
j = json.load(open(sys.argv[1]))
streamed = open(sys.argv[2], "rb").read().decode("utf-8")
assert isinstance(j["prompt_ids"], list) and len(j["prompt_ids"]) > 0, "prompt_ids"
n = len(j["ids"])
assert (n == 16 and j["finish_reason"] == "length") or (n < 16 and j["finish_reason"] == "stop"), \
    (n, j["finish_reason"])
assert j["text"] == streamed, (j["text"], streamed)
t = j["timings"]
for k in ("load_ms", "prefill_ms", "decode_ms", "tokens_per_s"):
    assert isinstance(t[k], (int, float)) and t[k] >= 0, k
PY

# sampling at temperature 1: a seed reproduces, another seed (almost surely) does not
for s in 7 7 8; do
  "$bin" generate --model "$model" --prompt "$prompt" --max-tokens 16 --temperature 1 --seed $s --json \
    >"$tmp/s$s.$$" 2>"$tmp/es" || fail "seeded run exited non-zero: $(cat "$tmp/es")"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ids"])' "$tmp/s$s.$$" \
    >>"$tmp/seed$s"
done
[ "$(sed -n 1p "$tmp/seed7")" = "$(sed -n 2p "$tmp/seed7")" ] || fail "seed 7 did not reproduce"
[ "$(sed -n 1p "$tmp/seed7")" != "$(cat "$tmp/seed8")" ] || fail "seeds 7 and 8 gave the same ids"

# a stop string taken from the greedy text cuts the output right before it
python3 - "$tmp/g1" >"$tmp/stopstr" <<'PY'
import sys
t = open(sys.argv[1], "rb").read().decode("utf-8")
print(t[len(t) // 2:len(t) // 2 + 3] if len(t) >= 6 else "", end="")
PY
stop=$(cat "$tmp/stopstr")
if [ -n "$stop" ]; then
  "$bin" generate --model "$model" --prompt "$prompt" --max-tokens 16 --temperature 0 --stop "$stop" \
    --json >"$tmp/st" 2>"$tmp/es" || fail "stop run exited non-zero: $(cat "$tmp/es")"
  python3 - "$tmp/st" "$tmp/g1" "$stop" <<'PY' || fail "stop string not honoured: $(cat "$tmp/st")"
import json, sys
j = json.load(open(sys.argv[1]))
full = open(sys.argv[2], "rb").read().decode("utf-8")
stop = sys.argv[3]
assert j["finish_reason"] == "stop", j["finish_reason"]
assert j["text"] == full[:full.index(stop)], (j["text"], full, stop)
PY
fi

# bad usage exits 2
rc=0
"$bin" generate --model "$model" --max-tokens 16 >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "missing --prompt exited $rc, expected 2"

rm -rf "$model"
if [ "$fails" -ne 0 ]; then
  echo "generate_smoke: $fails failure(s)"
  exit 1
fi
echo "generate_smoke: ok"
