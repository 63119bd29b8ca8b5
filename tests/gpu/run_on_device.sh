#!/usr/bin/env bash
# tests/gpu/run_on_device.sh — everything the GPU machine checks, in one call.
# Expects .dev/ (made by tests/gpu/pack.sh here): GPU test binaries built on a
# Debian machine plus the shared libraries they need that the GPU image lacks.
# Writes logs and generated fixtures under $OUT and prints a table last.
#   tests/gpu/run_on_device.sh [golden] [tokenizer]    (tests always run)
set -uo pipefail
OUT=${OUT:-/tmp/ns-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
declare -a rows

row() { rows+=("$(printf '%-28s %-6s %s' "$1" "$2" "$3")"); }

echo "== device =="
date -u
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
git log -1 --format='commit %H %s' 2>/dev/null || true

echo "== GPU tests =="
for t in .dev/bin/gpu_*; do
  [ -x "$t" ] || continue
  n=$(basename "$t")
  if "$t" >"$OUT/$n.log" 2>&1; then st=ok; else st="FAIL($?)"; fi
  cat "$OUT/$n.log"
  row "$n" "$st" "$(tail -n 1 "$OUT/$n.log")"
done

for what in "$@"; do
  case "$what" in
  golden)
    echo "== HF transformers golden fixtures =="
    rm -rf "$OUT/golden" && mkdir -p "$OUT/golden"
    if python3 tests/golden/make_golden.py --out "$OUT/golden" 2>&1 | tee "$OUT/golden.log"; then
      tar -C "$OUT" -czf "$OUT/golden.tgz" golden && rm -rf "$OUT/golden"
      row make_golden ok "$(du -h "$OUT/golden.tgz" | cut -f1)"
    else
      row make_golden FAIL "see golden.log"
    fi
    ;;
  tokenizer)
    echo "== HF tokenizers byte-level fixture =="
    rm -rf "$OUT/tokenizers" && mkdir -p "$OUT/tokenizers"
    if python3 tests/data/tokenizers/make_bytelevel.py --out "$OUT/tokenizers" 2>&1 | tee "$OUT/tok.log"; then
      tar -C "$OUT" -czf "$OUT/tokenizers.tgz" tokenizers && rm -rf "$OUT/tokenizers"
      row make_bytelevel ok "$(du -h "$OUT/tokenizers.tgz" | cut -f1)"
    else
      row make_bytelevel FAIL "see tok.log"
    fi
    ;;
  esac
done

echo
echo "== summary =="
printf '%s\n' "${rows[@]}"
