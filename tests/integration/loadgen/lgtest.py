"""lgtest.py — shared by the nanoserve-loadgen tests: start fake_server.py (a reference server
with known delays) on port 0, run the load generator, read its --json and --csv.
Python 3 standard library only."""

import csv
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
import nsd  # noqa: E402  (the daemon tests' helpers: fail, check, args)
from nsd import check, fail  # noqa: E402,F401  (re-exported for the loadgen tests)

# Every figure --json must carry.
SUMMARY_KEYS = ("n", "mean", "std", "min", "p50", "p90", "p95", "p99", "max")
TOP_KEYS = ("tool", "date", "parameters", "interrupted", "counts", "duration_s", "send_rate",
            "request_throughput", "output_throughput", "total_token_throughput", "goodput",
            "good_requests", "total_input_tokens", "total_output_tokens", "ttft_ms", "tpot_ms",
            "itl_ms", "e2el_ms", "queue_ms", "first_error")
COUNT_KEYS = ("sent", "ok", "errors", "timeouts", "connection_errors", "http_errors", "http_429",
              "bad_replies", "stream_errors", "interrupted", "warmup", "by_status")
PARAM_KEYS = ("url", "endpoint", "model", "stream", "ignore_eos", "temperature", "api_key",
              "dataset", "input_len", "output_len", "len_dist", "len_spread", "vocab_min",
              "vocab_max", "load", "concurrency", "rate", "burstiness", "max_concurrency",
              "requests", "duration_s", "warmup_requests", "warmup_s", "seed", "timeout_s",
              "slo_ttft_ms", "slo_tpot_ms", "max_model_len")
CSV_COLUMNS = ["id", "warmup", "scheduled_ms", "start_ms", "first_token_ms", "end_ms", "status",
               "outcome", "prompt_tokens", "output_tokens", "chunks", "error"]


def args():
    """argv: LOADGEN WORK_DIR [NANOSERVE]"""
    return nsd.args("PATH/TO/nanoserve-loadgen WORK_DIR [PATH/TO/nanoserve]")


def near(measured, truth, abs_tol, rel_tol):
    """Within abs_tol and within rel_tol of truth (both must hold)."""
    d = abs(measured - truth)
    return d <= abs_tol and d <= rel_tol * abs(truth)


def until_near(run_once, figure, truth, abs_tol, rel_tol, tries=3):
    """run_once() -> Result, up to tries times until figure(result) is near truth: on a loaded
    machine a latency now and then misses by a scheduling delay, while a measurement taken
    wrongly (a first token a chunk late) misses every time. A run that failed or wrote no
    JSON ends the tries (the caller's checks of the Result say why). Returns the last Result,
    the figures seen in order, and whether the last was near."""
    seen = []
    for _ in range(tries):
        r = run_once()
        if r.rc != 0 or r.json is None:
            return r, seen, False
        seen.append(figure(r))
        if near(seen[-1], truth, abs_tol, rel_tol):
            return r, seen, True
    return r, seen, False


class FakeServer:
    """fake_server.py in its own process (its timing is not disturbed by the test's)."""

    def __init__(self, work, ttft_ms=50, itl_ms=10, mode="ok", name="fake", extra=()):
        self.log_path = os.path.join(work, "%s.%d.log" % (name, os.getpid()))
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fake_server.py"), "--ttft-ms", str(ttft_ms),
             "--itl-ms", str(itl_ms), "--mode", mode] + [str(x) for x in extra],
            stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline()
        m = re.match(rb"listening on (http://127\.0\.0\.1:(\d+))", line)
        if not m:
            self.proc.kill()
            fail("fake_server.py did not start: %r" % line)
        self.url = m.group(1).decode()
        self.port = int(m.group(2))

    def stats(self, reset=True):
        """The server's own timing error: {requests, tokens, ttft_err_ms, itl_err_ms}."""
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("GET", "/stats?reset=1" if reset else "/stats")
        out = json.loads(c.getresponse().read())
        c.close()
        return out

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


class Result:
    def __init__(self, rc, out, err, js, rows):
        self.rc, self.out, self.err, self.json, self.rows = rc, out, err, js, rows

    def __repr__(self):
        return "rc %d\nstdout:\n%s\nstderr:\n%s" % (self.rc, self.out, self.err[-3000:])


def run(loadgen, work, url, *opts, name="run", timeout=180, want_json=True):
    """Run the load generator; Result with the parsed --json and --csv rows (dicts)."""
    jpath = os.path.join(work, "%s.json" % name)
    cpath = os.path.join(work, "%s.csv" % name)
    for p in (jpath, cpath):
        if os.path.exists(p):
            os.unlink(p)
    cmd = [loadgen, "--url", url, "--json", jpath, "--csv", cpath, "--no-progress"]
    cmd += [str(o) for o in opts]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("nanoserve-loadgen did not finish within %d s: %s" % (timeout, " ".join(cmd)))
    js, rows = None, None
    if os.path.exists(jpath):
        js = json.load(open(jpath))
    if os.path.exists(cpath):
        with open(cpath, newline="") as f:
            rd = csv.reader(f)
            head = next(rd)
            check(head == CSV_COLUMNS, "CSV header %r" % head)
            rows = [dict(zip(head, r)) for r in rd]
    r = Result(p.returncode, p.stdout, p.stderr, js, rows)
    if want_json:
        check(js is not None, "no --json written; %r" % r)
        check_complete(r)
    return r


def check_complete(r):
    """Every field is there, the counts add up, the CSV has one row per request sent."""
    js = r.json
    for k in TOP_KEYS:
        check(k in js, "--json lacks %r" % k)
    for k in COUNT_KEYS:
        check(k in js["counts"], "--json counts lack %r" % k)
    for k in PARAM_KEYS:
        check(k in js["parameters"], "--json parameters lack %r" % k)
    for f in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms", "queue_ms"):
        for k in SUMMARY_KEYS:
            check(k in js[f], "--json %s lacks %r" % (f, k))
    c = js["counts"]
    check(c["sent"] == c["ok"] + c["errors"] + c["timeouts"],
          "counts do not add up: %r" % c)
    check(c["errors"] == c["connection_errors"] + c["http_errors"] + c["bad_replies"] +
          c["stream_errors"] + c["interrupted"], "error kinds do not add up: %r" % c)
    check(sum(c["by_status"].values()) == c["http_errors"], "by_status %r" % c)
    check(r.rows is not None, "no --csv written")
    counted = [x for x in r.rows if x["warmup"] == "0"]
    check(len(counted) == c["sent"], "CSV has %d measured rows for %d sent" %
          (len(counted), c["sent"]))
    check(len(r.rows) - len(counted) == c["warmup"], "CSV warmup rows %d, json %d" %
          (len(r.rows) - len(counted), c["warmup"]))
    ok = sum(1 for x in counted if x["outcome"] == "ok")
    check(ok == c["ok"], "CSV ok rows %d, json ok %d" % (ok, c["ok"]))
    ids = [int(x["id"]) for x in r.rows]
    check(len(set(ids)) == len(ids), "CSV ids repeat")


def fnum(row, k):
    return float(row[k]) if row[k] != "" else None


def pctl(v, p):
    v = sorted(v)
    if not v:
        return 0.0
    k = p / 100 * (len(v) - 1)
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (k - lo) * (v[hi] - v[lo])
