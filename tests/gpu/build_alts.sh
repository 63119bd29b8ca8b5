#!/usr/bin/env bash
# tests/gpu/build_alts.sh — build nanoserve at each git revision given and put it in
# .dev/alt1/, .dev/alt2/, ... (after tests/gpu/pack.sh, which empties .dev/), for
# run_on_device.sh's bench-alt stage to time next to the packed build in one call:
#   tests/gpu/build_alts.sh REV [REV ...]
# Each revision builds in a worktree under $ALT_DIR (default ../ns-alts), Release, ICU off:
# nanoserve, and with ALT_TESTS=1 its gpu_kernels and gpu_model too (run_on_device.sh
# alt-tests runs them); .dev/altN/REV names the revision built. ALT_FIRST: N of the first
# revision (default 1), to add builds to the ones already there. The device call carries .dev
# (64 MiB at most): the packed build is ~18 MB, an alt ~4.5 MB, ~14 MB with its tests.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 REV [REV ...]" >&2; exit 2; }
[ -d .dev/bin ] || { echo "$0: run tests/gpu/pack.sh first" >&2; exit 2; }
ALT_DIR=${ALT_DIR:-../ns-alts}
mkdir -p "$ALT_DIR"
n=$((${ALT_FIRST:-1} - 1))
for rev in "$@"; do
  n=$((n + 1))
  sha=$(git rev-parse --short "$rev^{commit}")
  wt="$ALT_DIR/$sha"
  [ -d "$wt" ] || git worktree add -q --detach "$wt" "$sha"
  cmake -S "$wt" -B "$wt/build" -DCMAKE_BUILD_TYPE=Release -DNANOSERVE_ICU=OFF >/dev/null
  targets=nanoserve
  [ -n "${ALT_TESTS:-}" ] && targets="nanoserve gpu_kernels gpu_model"
  cmake --build "$wt/build" -j"$(nproc)" --target $targets >/dev/null
  rm -rf ".dev/alt$n" && mkdir -p ".dev/alt$n"
  cp "$wt/build/nanoserve" ".dev/alt$n/"
  if [ -n "${ALT_TESTS:-}" ]; then
    cp "$wt/build/tests/gpu/gpu_kernels" "$wt/build/tests/gpu/gpu_model" ".dev/alt$n/"
  fi
  echo "$rev $sha" >".dev/alt$n/REV"
  echo "alt$n: $rev ($sha)"
done
