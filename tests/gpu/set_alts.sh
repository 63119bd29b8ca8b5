#!/usr/bin/env bash
# tests/gpu/set_alts.sh — variants of the packed build that differ only in settings, for
# run_on_device.sh's bench-alt stage to time next to the packed build in one call:
#   tests/gpu/set_alts.sh 'engine.kv_page_tokens=64' 'engine.cuda_graphs=false NS_SKIP=1' ...
# Each argument is one variant, .dev/alt1/, .dev/alt2/, ... (ALT_FIRST: N of the first, as in
# build_alts.sh): a nanoserve script that runs .dev/bin/nanoserve with every KEY=VALUE of the
# argument — a config key (one with a dot) as `--set KEY=VALUE` after the command's own
# arguments, any other as an environment variable — and a REV file that names the variant.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 'KEY=VALUE [KEY=VALUE ...]' ..." >&2; exit 2; }
[ -x .dev/bin/nanoserve ] || { echo "$0: run tests/gpu/pack.sh first" >&2; exit 2; }
n=$((${ALT_FIRST:-1} - 1))
for variant in "$@"; do
  n=$((n + 1))
  envs='' sets=''
  for kv in $variant; do
    case $kv in
    *=*) ;;
    *) echo "$0: '$kv' is not KEY=VALUE" >&2; exit 2 ;;
    esac
    k=${kv%%=*}
    if [[ $k == *.* ]]; then
      sets+=" --set $(printf '%q' "$kv")"
    elif [[ $k =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
      envs+="$(printf '%q' "$kv") "
    else
      echo "$0: '$k' is neither a config key nor an environment variable" >&2
      exit 2
    fi
  done
  d=.dev/alt$n
  rm -rf "$d" && mkdir -p "$d"
  printf '#!/usr/bin/env bash\n%sexec "$(dirname "$0")/../bin/nanoserve" "$@"%s\n' \
    "$envs" "$sets" >"$d/nanoserve"
  chmod +x "$d/nanoserve"
  echo "settings: $variant" >"$d/REV"
  echo "alt$n: $variant"
done
