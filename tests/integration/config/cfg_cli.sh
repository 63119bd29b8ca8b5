#!/bin/sh
# cfg_cli.sh — `nanoserve config dump|check|doc` (and serve's refusal of a bad file) from
# outside: exit codes and messages.
# Usage: cfg_cli.sh PATH/TO/nanoserve SOURCE_DIR
set -eu

bin=$1
src=$2
example=$src/config/nanoserve.example.json
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

# run EXPECTED_RC CMD...: stdout+stderr to $tmp/out, report a wrong exit code
run() {
  want=$1
  shift
  rc=0
  "$@" >"$tmp/out" 2>&1 || rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "'$*' exited $rc, expected $want"
    return 1
  fi
  return 0
}

# expect TEXT: the last run's output contains TEXT
expect() {
  grep -F -q -- "$1" "$tmp/out" || fail "output lacks '$1'"
}

# the example file is valid as it is
if run 0 "$bin" config check "$example"; then expect "$example: ok"; fi

# one bad file per kind of problem: exit 1, the output names the key
printf '{"server": {"prot": 8080}}\n' >"$tmp/unknown.json"
if run 1 "$bin" config check "$tmp/unknown.json"; then
  expect "unknown setting 'server.prot'"
  expect "did you mean 'server.port'?"
fi
printf '{"engine": {"max_batch": "lots"}}\n' >"$tmp/type.json"
if run 1 "$bin" config check "$tmp/type.json"; then
  expect "$tmp/type.json: engine.max_batch: expected an integer"
fi
printf '{"server": {"port": 70000}}\n' >"$tmp/range.json"
if run 1 "$bin" config check "$tmp/range.json"; then
  expect "$tmp/range.json: server.port: 70000 is out of range [0, 65535]"
fi
printf '{\n  "log": {"level": "info",}\n}\n' >"$tmp/syntax.json"
if run 1 "$bin" config check "$tmp/syntax.json"; then expect "$tmp/syntax.json:2:"; fi

# every problem of a file, not only the first
printf '{"server": {"port": -1, "host": ""}, "engine": {"backend": "gpu"}, "lg": {}}\n' \
  >"$tmp/many.json"
if run 1 "$bin" config check "$tmp/many.json"; then
  expect "server.port"
  expect "server.host"
  expect "engine.backend: 'gpu' is not one of: auto, cpu, cuda"
  expect "unknown setting 'lg' (did you mean 'log'?)"
fi

# the daemon refuses the same file before it starts: every problem on its own line
if run 1 "$bin" serve --config "$tmp/many.json"; then
  expect "serve: $tmp/many.json: server.port: -1 is out of range"
  expect "serve: $tmp/many.json: server.host"
  expect "serve: $tmp/many.json: unknown setting 'lg' (did you mean 'log'?)"
fi

# cross-field rules, and --set on top of the file
printf '{"engine": {"kv_page_tokens": 32}}\n' >"$tmp/cross.json"
if run 1 "$bin" config check "$tmp/cross.json" --set engine.max_batch_tokens=16; then
  expect "engine.max_batch_tokens (16) must be at least engine.kv_page_tokens (32)"
fi

# a file with a bad value still has its valid values checked across fields
printf '{"engine": {"kv_page_tokens": 32, "max_batch_tokens": 16}, "server": {"port": -1}}\n' \
  >"$tmp/cross2.json"
if run 1 "$bin" config check "$tmp/cross2.json"; then
  expect "$tmp/cross2.json: server.port: -1 is out of range"
  expect "$tmp/cross2.json: engine.max_batch_tokens (16) must be at least engine.kv_page_tokens"
fi

if run 1 "$bin" config check "$tmp/does-not-exist.json"; then
  expect "$tmp/does-not-exist.json"
  expect "No such file"
fi

# dump: the effective configuration
if run 0 "$bin" config dump --set server.port=9000; then expect '"port": 9000'; fi
printf '{"server": {"port": 1234, "host": "0.0.0.0"}}\n' >"$tmp/good.json"
if run 0 "$bin" config dump --config "$tmp/good.json" --set server.port=9001; then
  expect '"port": 9001'
  expect '"host": "0.0.0.0"'
fi
if run 0 "$bin" config dump; then
  cp "$tmp/out" "$tmp/dumped.json"
  # what dump prints, check accepts
  if run 0 "$bin" config check "$tmp/dumped.json"; then expect "ok"; fi
fi
if run 1 "$bin" config dump --set server.prot=1; then expect "server.prot"; fi
if run 1 "$bin" config dump --set server.port=abc; then expect "server.port"; fi
if run 1 "$bin" config dump --config "$tmp/range.json"; then expect "server.port"; fi

# doc lists every setting of the example file (the sync test ties it to the table)
if run 0 "$bin" config doc; then
  awk '/^  "[a-z_]+": \{/ { s = $1; gsub(/[":]/, "", s) }
       /^    "[a-z_]+":/ { k = $1; gsub(/[":]/, "", k); print s "." k }' "$example" >"$tmp/keys"
  nkeys=$(wc -l <"$tmp/keys")
  [ "$nkeys" -ge 20 ] || fail "found only $nkeys settings in $example"
  while read -r key; do
    grep -F -q -- "| \`$key\` |" "$tmp/out" || fail "config doc lacks $key"
  done <"$tmp/keys"
fi

# bad usage: exit 2 with the usage text
for args in "" "bogus" "check" "check a.json b.json" "dump --set" "dump extra" "doc extra" \
  "dump --config"; do
  # shellcheck disable=SC2086
  if run 2 "$bin" config $args; then expect "usage:"; fi
done

if [ "$fails" -ne 0 ]; then
  echo "cfg_cli: $fails failure(s)"
  exit 1
fi
echo "cfg_cli: all checks passed"
