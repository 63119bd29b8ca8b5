#!/usr/bin/env bash
# tests/gpu/pack.sh — gather what the GPU machine needs into .dev/ (git-ignored;
# name it in the device call's carry): the gpu_* test binaries from build/ and
# the shared libraries they load that the GPU image does not have.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .dev && mkdir -p .dev/bin .dev/lib
find build -maxdepth 4 -type f -name 'gpu_*' -perm -u+x -exec cp {} .dev/bin/ \;
for b in .dev/bin/* build/nanoserve; do
  [ -e "$b" ] || continue
  ldd "$b" | awk '/=> \// {print $3}' | grep -E 'libcjson|libcmocka|libpcre2' | sort -u |
    xargs -r -I{} cp -L {} .dev/lib/
done
[ -x build/nanoserve ] && cp build/nanoserve .dev/bin/
du -sh .dev; ls .dev/bin .dev/lib
