#!/bin/sh
# readme_settings.sh — README.md's settings section must equal `nanoserve config
# doc` (the settings table); regenerate it with scripts/gen-readme-settings.
set -eu
bin=$1
src=$2
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
sed -n '/<!-- settings:begin -->/,/<!-- settings:end -->/p' "$src/README.md" | sed '1d;$d' >"$tmp"
if ! "$bin" config doc | diff -u "$tmp" -; then
  echo "README.md settings section is out of date: run scripts/gen-readme-settings"
  exit 1
fi
echo "README settings section matches the table ($(wc -l <"$tmp") lines)"
