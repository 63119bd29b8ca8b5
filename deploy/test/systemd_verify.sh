#!/bin/sh
# systemd_verify.sh — `systemd-analyze verify` accepts the unit as installed into a temporary
# prefix (ExecStart/ExecStartPre point at the installed binary, Documentation= at the
# installed man page), printing nothing; and it rejects two broken copies, so a silent pass
# means something. argv: SOURCE_DIR BUILD_DIR WORK_DIR
set -eu
src=$1 build=$2 work=$3
command -v systemd-analyze >/dev/null || { echo "FAIL: systemd-analyze missing (scripts/setup installs systemd)"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
"$src/scripts/install" --prefix "$prefix" --build "$build" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; echo "FAIL: scripts/install"; exit 1; }
unit=$prefix/lib/systemd/system/nanoserve.service
export MANPATH="$prefix/share/man:"   # Documentation=man:nanoserve(1) must resolve

verify() { # verify UNIT -> prints output, returns systemd-analyze's status; 1 also on output
  out=$(systemd-analyze verify "$1" 2>&1) && st=0 || st=$?
  [ -z "$out" ] || { printf '%s\n' "$out"; [ "$st" -ne 0 ] || st=1; }
  return "$st"
}

verify "$unit" || { echo "FAIL: systemd-analyze verify $unit"; exit 1; }
echo "verify: $unit: clean"

# negative checks: a misspelt directive (a warning, exit 0) and a missing binary (exit 1)
mkdir -p "$work/bad"
sed 's/^WatchdogSec=/WatchdogSecs=/' "$unit" >"$work/bad/nanoserve.service"
if verify "$work/bad/nanoserve.service" >/dev/null; then
  echo "FAIL: verify accepted a unit with a misspelt directive"; exit 1
fi
sed "s#^ExecStart=$prefix/bin/#ExecStart=$prefix/missing/#" "$unit" >"$work/bad/nanoserve.service"
if verify "$work/bad/nanoserve.service" >/dev/null; then
  echo "FAIL: verify accepted a unit whose ExecStart binary is missing"; exit 1
fi
echo "systemd_verify: ok"
