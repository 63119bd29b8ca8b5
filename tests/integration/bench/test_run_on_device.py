#!/usr/bin/env python3
"""tests/gpu/run_on_device.sh (the GPU machine's one-call script) on this machine, with a
stand-in `nvidia-smi` that names the card and stand-in nanoserve builds that log their
arguments: NEED_GPU on another card stops before anything runs, or runs OTHER_STAGES instead
of the stages given; bench-alt makes each checkpoint once, runs every build on every case in
every round with BA_SET's settings, and tables each run's p50 under its build and round; a
stage the script does not know is a FAIL row; tests/gpu/set_alts.sh's variants run the packed
build with their settings and environment; sanitize-model runs compute-sanitizer's memcheck on
gpu_model over the golden fixtures and reports its exit status. Nothing outside a temporary
folder is touched.
Usage: test_run_on_device.py"""
import os
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "gpu", "run_on_device.sh")
SET_ALTS = os.path.join(HERE, "..", "..", "gpu", "set_alts.sh")

# a stand-in nanoserve: each call appended to $FAKE_LOG as "NAME ARGS env=$NS_FAKE_ENV";
# mkmodel makes the folder, bench prints one row of bench's table with P50 as its p50
FAKE = r"""#!/usr/bin/env bash
echo "%(name)s $* env=${NS_FAKE_ENV:-}" >>"$FAKE_LOG"
case $1 in
mkmodel)
  while [ $# -gt 0 ]; do [ "$1" = --out ] && mkdir -p "$2"; shift; done
  echo "mkmodel: wrote" ;;
bench)
  echo "| 1 | 128 | %(p50)s | 9.9 | 100.0 | 2000.00 | 1800.0 | %(pct)s | 1.0 | 0.007 |" ;;
*) exit 2 ;;
esac
"""

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures += 1


def executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def setup(root, card):
    """a work tree under root: the script, .dev/bin and .dev/alt1 stand-ins, nvidia-smi"""
    os.makedirs(os.path.join(root, "tests", "gpu"))
    for script in (SCRIPT, SET_ALTS):
        with open(script) as f:
            executable(os.path.join(root, "tests", "gpu", os.path.basename(script)), f.read())
    for d, name, p50, pct in ((".dev/bin", "bin", "1.234", "60.3"),
                              (".dev/alt1", "alt1", "1.111", "66.6")):
        os.makedirs(os.path.join(root, d))
        executable(os.path.join(root, d, "nanoserve"),
                   FAKE % {"name": name, "p50": p50, "pct": pct})
    with open(os.path.join(root, ".dev", "alt1", "REV"), "w") as f:
        f.write("wip (abc1234)\n")
    os.makedirs(os.path.join(root, "fakebin"))
    # a stand-in compute-sanitizer: logs its arguments, exits $FAKE_SAN_RC
    executable(os.path.join(root, "fakebin", "compute-sanitizer"),
               "#!/bin/sh\necho \"compute-sanitizer $*\" >>\"$FAKE_LOG\"\n"
               "echo '========= ERROR SUMMARY: 0 errors'\nexit ${FAKE_SAN_RC:-0}\n")
    executable(os.path.join(root, "fakebin", "nvidia-smi"),
               "#!/bin/sh\ncase \"$*\" in *noheader*) echo '%s' ;; *) echo 'name'; "
               "echo '%s, 1 MiB' ;; esac\n" % (card, card))


def run(root, stages, **env):
    e = dict(os.environ)
    e.update(PATH=os.path.join(root, "fakebin") + os.pathsep + e["PATH"],
             OUT=os.path.join(root, "out"), LOGS=os.path.join(root, "logs"),
             SCRATCH=os.path.join(root, "scratch"), FAKE_LOG=os.path.join(root, "calls.log"),
             NO_TESTS="1")
    e.pop("NEED_GPU", None)
    e.pop("OTHER_STAGES", None)
    e.update(env)
    r = subprocess.run(["bash", "tests/gpu/run_on_device.sh"] + stages, cwd=root, env=e,
                       capture_output=True, text=True, timeout=120)
    print("$ %s run_on_device.sh %s -> %d\n%s%s" % (
        " ".join("%s=%r" % kv for kv in sorted(env.items())), " ".join(stages), r.returncode,
        r.stdout[-4000:], r.stderr[-2000:]))
    calls = []
    log = os.path.join(root, "calls.log")
    if os.path.exists(log):
        with open(log) as f:
            calls = [line.split() for line in f]
    return r, calls


def summary(out):
    """the summary rows: first word -> the rest"""
    rows, on = {}, False
    for line in out.splitlines():
        if line.startswith("== summary =="):
            on = True
        elif on and line.strip():
            w = line.split(None, 1)
            rows[w[0]] = w[1] if len(w) > 1 else ""
    return rows


with tempfile.TemporaryDirectory() as tmp:
    # another card than NEED_GPU's, no OTHER_STAGES: exit 3, nothing run
    root = os.path.join(tmp, "a")
    setup(root, "NVIDIA H100 80GB HBM3")
    r, calls = run(root, ["bench-alt"], NEED_GPU="H200")
    check(r.returncode == 3, "NEED_GPU=H200 on an H100: exit status 3 (got %d)" % r.returncode)
    check("nothing run" in r.stdout, "NEED_GPU=H200 on an H100: says nothing was run")
    check(calls == [], "NEED_GPU=H200 on an H100: no nanoserve call (%d made)" % len(calls))

    # another card, OTHER_STAGES: those stages instead of the one given, BA_SET on every run
    root = os.path.join(tmp, "b")
    setup(root, "NVIDIA H100 80GB HBM3")
    r, calls = run(root, ["perf-8b"], NEED_GPU="H200", OTHER_STAGES="bench-alt nosuch",
                   BA_CASES="tinyllama-1.1b 1 128;llama3-8b 4,8 512", BA_ROUNDS="2",
                   BA_SET="engine.max_batch=512 engine.kv_page_tokens=32")
    check(r.returncode == 0, "OTHER_STAGES run: exit status 0 (got %d)" % r.returncode)
    rows = summary(r.stdout)
    check("perf-8b" not in rows and not any(c[1] == "bench" and "--json" in c for c in calls),
          "OTHER_STAGES run: the stage given (perf-8b) is not run")
    check(rows.get("nosuch", "").split()[:1] == ["FAIL"] and "no such stage" in rows["nosuch"],
          "a stage the script does not know is a FAIL row (%r)" % rows.get("nosuch"))
    mk = [c for c in calls if c[1] == "mkmodel"]
    shapes = sorted(c[c.index("--shape") + 1] for c in mk)
    check(shapes == ["llama3-8b", "tinyllama-1.1b"] and all(c[0] == "bin" for c in mk),
          "bench-alt: each case's checkpoint made once, by the packed build (%r)" % shapes)
    benches = [c for c in calls if c[1] == "bench"]
    want = sorted((b, s, bs, ctx) for b in ("bin", "alt1") for s, bs, ctx in
                  (("tinyllama-1.1b", "1", "128"), ("llama3-8b", "4,8", "512")) for _ in (1, 2))
    got = sorted((c[0], os.path.basename(c[c.index("--model") + 1]), c[c.index("--batch") + 1],
                  c[c.index("--ctx") + 1]) for c in benches)
    check(got == want, "bench-alt: every build on every case in both rounds (%d runs)" % len(got))
    sets_ok = all(
        [c[i + 1] for i in range(len(c) - 1) if c[i] == "--set"] ==
        ["engine.backend=cuda", "engine.max_batch=512", "engine.kv_page_tokens=32"]
        for c in benches)
    check(sets_ok, "bench-alt: BA_SET's settings on every run, after the backend's")
    check("== alt1: wip (abc1234)" in r.stdout, "bench-alt: names each variant's REV")
    table = [ln for ln in r.stdout.splitlines() if ln.startswith("tinyllama-1.1b b1 ctx 128")]
    check(len(table) == 2 and table[0].split()[4] == "bin" and
          table[0].count("b1:1.234 (60.3%)") == 2 and table[1].split()[4] == "alt1" and
          table[1].count("b1:1.111 (66.6%)") == 2,
          "bench-alt: the table has each build's p50 in both rounds (%r)" % table)

    # the card NEED_GPU asks for: the stages given run, OTHER_STAGES does not
    root = os.path.join(tmp, "c")
    setup(root, "NVIDIA H200")
    r, calls = run(root, ["nosuch"], NEED_GPU="H200", OTHER_STAGES="bench-alt")
    rows = summary(r.stdout)
    check("nosuch" in rows and calls == [],
          "NEED_GPU=H200 on an H200: the stages given run, not OTHER_STAGES")

    # tests/gpu/set_alts.sh's variants of the packed build: its settings after the command's
    # own arguments, its environment variables set, the packed build's runs without them
    root = os.path.join(tmp, "d")
    setup(root, "NVIDIA H100 80GB HBM3")
    sa = subprocess.run(["bash", "tests/gpu/set_alts.sh", "engine.foo=7 NS_FAKE_ENV=on"],
                        cwd=root, env=dict(os.environ, ALT_FIRST="2"),
                        capture_output=True, text=True, timeout=60)
    print("$ set_alts.sh -> %d\n%s%s" % (sa.returncode, sa.stdout, sa.stderr))
    r, calls = run(root, ["bench-alt"], BA_CASES="tinyllama-1.1b 1 128", BA_SET="engine.bar=3")
    benches = [c for c in calls if c[1] == "bench"]
    plain = [c for c in benches if c[-1] == "env="]
    variant = [c for c in benches if c[-1] == "env=on"]
    check(sa.returncode == 0 and len(benches) == 3 and len(plain) == 2 and len(variant) == 1 and
          variant[0][0] == "bin" and variant[0][-3:-1] == ["--set", "engine.foo=7"] and
          "engine.bar=3" in variant[0] and not any("engine.foo=7" in c for c in plain),
          "set_alts.sh: a variant runs the packed build with its settings last and its "
          "environment, the others without them (%r)" % benches)
    check("== alt2: settings: engine.foo=7 NS_FAKE_ENV=on" in r.stdout,
          "set_alts.sh: the variant's REV names its settings")

    # sanitize-model: memcheck on gpu_model over the golden fixtures, its exit status the row's
    root = os.path.join(tmp, "e")
    setup(root, "NVIDIA H100 80GB HBM3")
    for rc, want in (("0", "ok"), ("9", "FAIL(9)")):
        r, calls = run(root, ["sanitize-model"], FAKE_SAN_RC=rc)
        san = [c for c in calls if c[0] == "compute-sanitizer"]
        check(len(san) == 1 and san[0][1:3] == ["--tool", "memcheck"] and
              san[0][-2:] == [".dev/bin/gpu_model", "tests/data/golden"] and
              "--error-exitcode" in san[0],
              "sanitize-model: memcheck runs gpu_model on the golden fixtures (%r)" % san)
        row = summary(r.stdout).get("memcheck_model", "")
        check(row.split()[:1] == [want],
              "sanitize-model: the sanitizer's exit %s gives a %s row (%r)" % (rc, want, row))
        os.remove(os.path.join(root, "calls.log"))

print("run_on_device: %s" % ("all checks passed" if not failures else "%d FAILED" % failures))
sys.exit(1 if failures else 0)
