#!/bin/sh
# container_check.sh — deploy/container: the Dockerfile passes dockerfile-utils' linter
# (from npm: `npm ci --prefix deploy/test`) with no diagnostic at all, and broken copies
# are reported; it keeps the instructions deploy/README.md relies on; the entrypoint is
# valid sh; the image's default config passes `nanoserve config check`.
# argv: NANOSERVE_BINARY SOURCE_DIR WORK_DIR; exit 77 (skip) without the npm packages.
set -eu
nanoserve=$1 src=$2 work=$3
lint=$src/deploy/test/node_modules/.bin/dockerfile-utils
if ! command -v node >/dev/null 2>&1 || [ ! -x "$lint" ]; then
  echo "SKIP: deploy/test/node_modules is missing: run \`npm ci --prefix deploy/test\`"
  exit 77
fi
dockerfile=$src/deploy/container/Dockerfile
rm -rf "$work" && mkdir -p "$work"

lint() { # lint FILE: 0 only when the linter exits 0 and prints nothing
  out=$("$lint" lint "$1" 2>&1) && st=0 || st=$?
  [ -z "$out" ] || { printf '%s\n' "$out"; [ "$st" -ne 0 ] || st=1; }
  return "$st"
}
lint "$dockerfile" || { echo "FAIL: dockerfile-utils lint $dockerfile"; exit 1; }
echo "lint: $dockerfile: clean"

# negative checks: an error (bad port) and a warning (a second HEALTHCHECK) must show
sed 's/^EXPOSE 8080$/EXPOSE http/' "$dockerfile" >"$work/Dockerfile.port"
sed 's/^STOPSIGNAL SIGTERM$/HEALTHCHECK NONE\nSTOPSIGNAL SIGTERM/' "$dockerfile" >"$work/Dockerfile.health"
for bad in port health; do
  cmp -s "$dockerfile" "$work/Dockerfile.$bad" && { echo "FAIL: could not break a copy ($bad)"; exit 1; }
  if lint "$work/Dockerfile.$bad" >/dev/null; then
    echo "FAIL: the linter accepted a broken Dockerfile ($bad)"; exit 1
  fi
done

# what the other artefacts rely on
for want in '^USER 10001' '^EXPOSE 8080$' '^STOPSIGNAL SIGTERM$' '^VOLUME \["/var/lib/nanoserve/models"\]$' \
            'CMD curl -fsS http://127.0.0.1:8080/health' '^ENTRYPOINT \["/usr/local/bin/nanoserve-entrypoint"\]$' \
            'scripts/setup' 'scripts/install'; do
  grep -q -- "$want" "$dockerfile" || { echo "FAIL: Dockerfile lacks /$want/"; exit 1; }
done
[ -f "$src/.dockerignore" ] && grep -q '^build\*/$' "$src/.dockerignore" ||
  { echo "FAIL: .dockerignore does not keep build folders out of the context"; exit 1; }
sh -n "$src/deploy/container/entrypoint.sh" || { echo "FAIL: entrypoint.sh is not valid sh"; exit 1; }
"$nanoserve" config check "$src/deploy/container/config.json" ||
  { echo "FAIL: the image's config.json"; exit 1; }
echo "container_check: ok"
