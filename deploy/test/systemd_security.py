"""systemd_security.py — `systemd-analyze security --offline=true` scores the installed unit
in systemd's "OK" band or better (overall exposure below 5.0: systemd's bands are
PERFECT 0, SAFE < 1.0, OK < 5.0, MEDIUM < 7.5, EXPOSED < 9.0, UNSAFE < 10, DANGEROUS 10).
The unit with its hardening lines removed must score above the limit, so the parsing is
known to see a bad score. argv: SOURCE_DIR BUILD_DIR WORK_DIR"""
import os
import re
import shutil
import subprocess
import sys

LIMIT = 4.9
src, build, work = (os.path.abspath(a) for a in sys.argv[1:4])


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def exposure(unit):
    r = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", unit],
                       capture_output=True, text=True)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+) (\w+)", r.stdout + r.stderr)
    if not m:
        fail("no overall exposure in systemd-analyze's output (status %d):\n%s%s" %
             (r.returncode, r.stdout, r.stderr))
    return float(m.group(1)), m.group(2), r.stdout


if not shutil.which("systemd-analyze"):
    fail("systemd-analyze missing (scripts/setup installs systemd)")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
prefix = os.path.join(work, "prefix")
r = subprocess.run([os.path.join(src, "scripts", "install"), "--prefix", prefix, "--build", build],
                   capture_output=True, text=True)
if r.returncode:
    fail("scripts/install: " + r.stdout + r.stderr)
unit = os.path.join(prefix, "lib/systemd/system/nanoserve.service")

score, band, out = exposure(unit)
print(out)
print("nanoserve.service: exposure %.1f %s (limit %.1f)" % (score, band, LIMIT))
if score > LIMIT or band not in ("OK", "SAFE", "PERFECT"):
    fail("exposure %.1f %s is above the OK band" % (score, band))

# the same unit without its sandbox must fail the same check
weak_dir = os.path.join(work, "weak")
os.makedirs(weak_dir)
with open(unit) as f:
    text = f.read()
start = text.index("# ---- hardening")
weak = text[:start] + text[text.index("[Install]"):]
weak = re.sub(r"(?m)^(DynamicUser|DevicePolicy|DeviceAllow|UMask)=.*\n", "", weak)
with open(os.path.join(weak_dir, "nanoserve.service"), "w") as f:
    f.write(weak)
wscore, wband, _ = exposure(os.path.join(weak_dir, "nanoserve.service"))
print("without hardening: exposure %.1f %s" % (wscore, wband))
if wscore <= LIMIT:
    fail("an unhardened copy scored %.1f: the check cannot tell" % wscore)
print("systemd_security: ok")
