#!/usr/bin/env bash
# tests/gpu/pack.sh — gather what the GPU machine needs into .dev/ (git-ignored;
# name it in the device call's carry): the gpu_* test binaries, nanoserve and bench_handoff from
# $BUILD (default build/; configure it with -DNANOSERVE_ICU=OFF so ICU need not
# travel) and the shared libraries they load that the GPU image does not have.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
rm -rf .dev && mkdir -p .dev/bin .dev/lib
find "$BUILD" -maxdepth 4 -type f -name 'gpu_*' -perm -u+x -exec cp {} .dev/bin/ \;
[ -x "$BUILD/nanoserve" ] && cp "$BUILD/nanoserve" .dev/bin/
[ -x "$BUILD/nanoserve-loadgen" ] && cp "$BUILD/nanoserve-loadgen" .dev/bin/
[ -x "$BUILD/bench_handoff" ] && cp "$BUILD/bench_handoff" .dev/bin/
[ -x "$BUILD/bench_tma_read" ] && cp "$BUILD/bench_tma_read" .dev/bin/
[ -x "$BUILD/bench_persist" ] && cp "$BUILD/bench_persist" .dev/bin/
# the timeline stage's CUPTI injection library, and CUPTI itself
kt=$(find "$BUILD" -maxdepth 4 -type f -name libktrace.so | head -n 1)
if [ -n "$kt" ]; then
  cp "$kt" .dev/lib/
  { ldd "$kt" || true; } | awk '/libcupti/ {print $3}' | xargs -r -I{} cp -L {} .dev/lib/ || true
fi
for b in .dev/bin/*; do
  [ -e "$b" ] || continue
  { ldd "$b" || true; } | awk '/=> \// {print $3}' |
    grep -E 'libcjson|libcmocka|libpcre2|libicu' | sort -u |
    xargs -r -I{} cp -L {} .dev/lib/ || true
done
du -sh .dev; ls .dev/bin .dev/lib
