#!/bin/sh
# entrypoint.sh — the container's entry point: check the one config file, then replace this
# shell with the daemon (PID 1, so `docker stop` / the kubelet's SIGTERM drains it).
# Arguments are extra `--set key=value` overrides for both:
#   docker run ... nanoserve:0.1.0 --set log.level=debug
set -eu
config=/etc/nanoserve/config.json
/usr/local/bin/nanoserve config check "$config" "$@"
exec /usr/local/bin/nanoserve serve --config "$config" "$@"
