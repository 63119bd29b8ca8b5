#!/bin/sh
# k8s_check.sh — runs k8s_validate.mjs on deploy/k8s; exit 77 (skip) without node or the npm
# packages (`npm ci --prefix deploy/test`, as .ci/run does). argv: NANOSERVE_BINARY SOURCE_DIR
set -eu
here=$(dirname "$0")
if ! command -v node >/dev/null 2>&1 || [ ! -d "$here/node_modules/kubernetes-models" ] ||
   [ ! -d "$here/node_modules/yaml" ]; then
  echo "SKIP: deploy/test/node_modules is missing: run \`npm ci --prefix deploy/test\`"
  exit 77
fi
exec node "$here/k8s_validate.mjs" "$1" "$2/deploy/k8s"
