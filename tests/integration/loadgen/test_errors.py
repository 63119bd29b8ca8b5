"""test_errors.py — nanoserve-loadgen when things go wrong: a refused connection, replies that
are not HTTP, not SSE, not JSON, badly chunked or cut short, error statuses (429 apart), a
server that never answers (--timeout), bad URLs and options (exit 2), and SIGINT (exit 130
with the figures so far). Every failed request is counted once, with a message, the counts
add up, and the process ends."""
import csv
import json
import os
import signal
import socket
import subprocess
import time

import lgtest
from lgtest import check

loadgen, work = lgtest.args()


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---- a refused connection ---------------------------------------------------------------------
r = lgtest.run(loadgen, work, "http://127.0.0.1:%d" % closed_port(), "--requests", 3,
               "--concurrency", 2, name="refused", timeout=30)
c = r.json["counts"]
check(r.rc == 1, "refused: exit %r" % r)
check(c["sent"] == 3 and c["connection_errors"] == 3 and c["ok"] == 0, "refused: %r" % c)
check("connection refused" in r.err and "3 of 3 requests failed" in r.err,
      "refused: message %r" % r.err)
check(all(x["outcome"] == "connection_error" and "refused" in x["error"] for x in r.rows),
      "refused: CSV %r" % r.rows)
print("refused connection: ok (%s)" % r.err.strip().splitlines()[-1], flush=True)

# ---- bad replies --------------------------------------------------------------------------------
BAD = {
    "garbage": ("bad_replies", "malformed HTTP reply"),
    "nonsse": ("bad_replies", "not SSE"),
    "badjson": ("bad_replies", "not a JSON object"),
    "badchunk": ("bad_replies", "HPE_INVALID_CHUNK_SIZE"),
    "nodone": ("bad_replies", "without data: [DONE]"),
    "http500": ("http_errors", "HTTP 500: fake 500"),
    "http429": ("http_429", "HTTP 429"),
}
for mode, (kind, text) in BAD.items():
    with lgtest.FakeServer(work, 5, 1, mode=mode, name=mode) as srv:
        r = lgtest.run(loadgen, work, srv.url, "--requests", 4, "--concurrency", 2,
                       "--output-len", 4, name=mode, timeout=30)
    c = r.json["counts"]
    check(r.rc == 1, "%s: exit %r" % (mode, r))
    check(c["sent"] == 4 and c["ok"] == 0 and c[kind] == 4 and c["errors"] == 4,
          "%s: counts %r" % (mode, c))
    check(text in r.err and text in (r.json["first_error"] or ""),
          "%s: message %r / %r" % (mode, r.err, r.json["first_error"]))
    if mode.startswith("http"):
        code = mode[4:]
        check(c["by_status"] == {code: 4}, "%s: by_status %r" % (mode, c["by_status"]))
        check(all(x["status"] == code for x in r.rows), "%s: CSV status" % mode)
        check(c["http_429"] == (4 if code == "429" else 0), "%s: 429s %r" % (mode, c))
    print("%s: ok (%s)" % (mode, r.json["first_error"]), flush=True)

# ---- a server that drops keep-alive connections unannounced: nothing is lost ------------------
with lgtest.FakeServer(work, 2, 1, mode="closeafter", name="closeafter") as srv:
    r = lgtest.run(loadgen, work, srv.url, "--requests", 40, "--concurrency", 4, "--output-len",
                   3, name="closeafter", timeout=60)
c = r.json["counts"]
check(r.rc == 0 and c["ok"] == 40, "closeafter: %r %r" % (c, r))
print("unannounced close: ok", flush=True)

# ---- a server that never answers: --timeout ends each request --------------------------------
with lgtest.FakeServer(work, 5, 1, mode="hang", name="hang") as srv:
    t = time.time()
    r = lgtest.run(loadgen, work, srv.url, "--requests", 3, "--concurrency", 3, "--timeout",
                   0.5, name="hang", timeout=30)
    took = time.time() - t
c = r.json["counts"]
check(r.rc == 1 and c["timeouts"] == 3 and c["sent"] == 3 and c["errors"] == 0,
      "hang: %r %r" % (c, r))
check(took < 5, "hang: took %.1f s with --timeout 0.5" % took)
check(all(x["outcome"] == "timeout" for x in r.rows), "hang: CSV outcomes")
print("timeout: ok (%.2f s)" % took, flush=True)

# ---- bad usage: exit 2 with a message, nothing sent ---------------------------------------------
BAD_ARGS = [
    ["--url", "localhost:8080"], ["--url", "https://127.0.0.1:8080"], ["--url", "http://"],
    ["--url", "http://h:99999"], ["--url", "http://h:80x"], ["--url", "http://a b"],
    ["--url", "ftp://h"], ["--url", "http://127.0.0.1:8080?x=1"],
    ["--rate", "-1"], ["--rate", "5", "--concurrency", "2"], ["--max-concurrency", "3"],
    ["--concurrency", "0"], ["--len-dist", "zipf"], ["--endpoint", "embeddings"],
    ["--requests", "x"], ["--nope"], ["--vocab-min", "9", "--vocab-max", "9"],
    ["--dataset", os.path.join(work, "does-not-exist.jsonl")], ["--timeout"],
]
for a in BAD_ARGS:
    p = subprocess.run([loadgen] + a, capture_output=True, text=True, timeout=30)
    check(p.returncode == 2, "%r: exit %d, stderr %r" % (a, p.returncode, p.stderr))
    check(p.stderr.startswith("nanoserve-loadgen: ") and p.stdout == "",
          "%r: stderr %r stdout %r" % (a, p.stderr, p.stdout))
p = subprocess.run([loadgen, "--url", "http://127.0.0.1:8080?x=1"], capture_output=True,
                   text=True, timeout=30)
check("bad --url 'http://127.0.0.1:8080?x=1'" in p.stderr, "URL message %r" % p.stderr)
bad_jsonl = os.path.join(work, "bad.jsonl")
with open(bad_jsonl, "w") as f:
    f.write('{"prompt": "ok"}\n{"prompt": 5}\n')
p = subprocess.run([loadgen, "--dataset", bad_jsonl], capture_output=True, text=True, timeout=30)
check(p.returncode == 2 and "bad.jsonl:2:" in p.stderr, "bad JSONL: %d %r" %
      (p.returncode, p.stderr))
p = subprocess.run([loadgen, "--help"], capture_output=True, text=True, timeout=30)
check(p.returncode == 0 and "--max-concurrency" in p.stdout, "--help")
print("bad usage: ok (%d cases)" % (len(BAD_ARGS) + 2), flush=True)

# ---- SIGINT: the figures so far, exit 130 ---------------------------------------------------------
with lgtest.FakeServer(work, 100, 10, name="sigint") as srv:
    jpath, cpath = os.path.join(work, "sigint.json"), os.path.join(work, "sigint.csv")
    for path in (jpath, cpath):
        if os.path.exists(path):
            os.unlink(path)
    cmd = [loadgen, "--url", srv.url, "--concurrency", "3", "--requests", "100000",
           "--output-len", "3", "--json", jpath, "--csv", cpath, "--no-progress"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        lgtest.fail("SIGINT: still running 10 s later")
r = lgtest.Result(p.returncode, out, err, None, None)
check(p.returncode == 130, "SIGINT: exit %r" % r)
check("Successful:" in out and "interrupted" in err, "SIGINT: output %r" % r)
with open(cpath, newline="") as f:
    r = lgtest.Result(p.returncode, out, err, json.load(open(jpath)), list(csv.DictReader(f)))
lgtest.check_complete(r)
c = r.json["counts"]
check(r.json["interrupted"] is True, "SIGINT: interrupted flag")
check(c["ok"] >= 3 and c["interrupted"] <= 3 and c["sent"] == c["ok"] + c["interrupted"],
      "SIGINT: counts %r" % c)
print("SIGINT: ok (%d finished, %d interrupted)" % (c["ok"], c["interrupted"]), flush=True)
print("loadgen_errors: ok")
