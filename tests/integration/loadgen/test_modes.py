"""test_modes.py — nanoserve-loadgen's other ways of asking, against the reference server
(first token 20 ms, then every 5 ms): the chat endpoint, a JSONL dataset (text, id-array and
messages prompts, per-item max_tokens), one JSON reply per request (--no-stream: TTFT is
the whole latency, no TPOT/ITL), goodput under SLOs, and warmup by seconds."""
import json
import os

import lgtest
from lgtest import check, fnum

loadgen, work = lgtest.args()

with lgtest.FakeServer(work, 20, 5) as srv:
    # chat, random prompts: words, so the prompt length comes from usage. A warmup wave opens
    # the connections (a fresh server's first replies were 2+ ms late on a loaded machine);
    # TTFT within 3 ms: a first token taken one chunk late would be 5 ms late
    r, ttft, ttft_ok = lgtest.until_near(
        lambda: lgtest.run(loadgen, work, srv.url, "--endpoint", "chat", "--requests", 8,
                           "--concurrency", 4, "--warmup", 4, "--input-len", 12,
                           "--output-len", 6, name="chat"),
        lambda r: r.json["ttft_ms"]["p50"], 20, 3, 0.15)
    js = r.json
    check(r.rc == 0 and js["counts"]["ok"] == 8, "chat: %r" % r)
    check(js["total_output_tokens"] == 48 and js["total_input_tokens"] == 96,
          "chat tokens %r %r" % (js["total_output_tokens"], js["total_input_tokens"]))
    check(js["itl_ms"]["n"] == 8 * 5, "chat ITL samples %d" % js["itl_ms"]["n"])
    check(ttft_ok, "chat TTFT p50 of each run %r" % ttft)

    # a JSONL dataset for the completions endpoint: items cycle; their max_tokens is used
    ds = os.path.join(work, "items.jsonl")
    with open(ds, "w") as f:
        f.write(json.dumps({"prompt": "one two three", "max_tokens": 3}) + "\n\n")
        f.write(json.dumps({"prompt": [5, 6, 7, 8, 9], "max_tokens": 5}) + "\n")
    r = lgtest.run(loadgen, work, srv.url, "--dataset", ds, "--requests", 6, "--concurrency", 2,
                   name="jsonl")
    check(r.rc == 0, "jsonl: %r" % r)
    rows = sorted(r.rows, key=lambda x: int(x["id"]))
    check([x["output_tokens"] for x in rows] == ["3", "5"] * 3, "jsonl output tokens %r" %
          [x["output_tokens"] for x in rows])
    check([x["prompt_tokens"] for x in rows] == ["3", "5"] * 3, "jsonl prompt tokens %r" %
          [x["prompt_tokens"] for x in rows])
    # --output-len given: it wins over the items' max_tokens
    r = lgtest.run(loadgen, work, srv.url, "--dataset", ds, "--requests", 2, "--output-len", 4,
                   name="jsonl2")
    check([x["output_tokens"] for x in r.rows] == ["4", "4"], "jsonl --output-len")
    # messages items go to chat; to completions they are an error before anything is sent
    with open(ds, "w") as f:
        f.write(json.dumps({"messages": [{"role": "user", "content": "a b c d"}]}) + "\n")
    r = lgtest.run(loadgen, work, srv.url, "--dataset", ds, "--endpoint", "chat", "--requests",
                   2, "--output-len", 2, name="jsonl3")
    check(r.rc == 0 and r.json["total_input_tokens"] == 8, "jsonl chat: %r" % r)
    r = lgtest.run(loadgen, work, srv.url, "--dataset", ds, "--requests", 2, name="jsonl4",
                   want_json=False)
    check(r.rc == 2 and "--endpoint chat" in r.err and r.json is None, "messages to completions")

    # one JSON reply per request: the first token is the whole reply
    r, e2e, e2e_ok = lgtest.until_near(
        lambda: lgtest.run(loadgen, work, srv.url, "--no-stream", "--requests", 6,
                           "--concurrency", 3, "--warmup", 3, "--output-len", 9,
                           name="nostream"),
        lambda r: r.json["e2el_ms"]["p50"], 20 + 8 * 5, 3, 0.1)
    js = r.json
    check(r.rc == 0 and js["counts"]["ok"] == 6 and js["total_output_tokens"] == 54,
          "no-stream: %r" % r)
    check(js["tpot_ms"]["n"] == 0 and js["itl_ms"]["n"] == 0, "no-stream has TPOT/ITL samples")
    check(abs(js["ttft_ms"]["p50"] - js["e2el_ms"]["p50"]) < 1e-6, "no-stream TTFT != E2E")
    check(e2e_ok, "no-stream E2E p50 of each run %r" % e2e)

    # goodput: TTFT ~20 ms and TPOT ~5 ms; an SLO between meets all, one below none
    def goodput(*slo):
        r = lgtest.run(loadgen, work, srv.url, "--requests", 8, "--concurrency", 2,
                       "--output-len", 4, *slo, name="slo")
        return r.json
    js = goodput("--slo-ttft-ms", 40, "--slo-tpot-ms", 8)
    check(js["good_requests"] == 8 and abs(js["goodput"] - js["request_throughput"]) < 1e-9,
          "goodput with met SLOs: %r %r" % (js["good_requests"], js["goodput"]))
    js = goodput("--slo-ttft-ms", 40, "--slo-tpot-ms", 2)
    check(js["good_requests"] == 0 and js["goodput"] == 0, "goodput under a TPOT SLO of 2 ms")
    js = goodput("--slo-ttft-ms", 10)
    check(js["good_requests"] == 0, "goodput under a TTFT SLO of 10 ms")

    # warmup by seconds: requests due in the first 0.3 s are not measured
    r = lgtest.run(loadgen, work, srv.url, "--rate", 40, "--warmup", "0.3s", "--requests", 10,
                   "--output-len", 2, "--seed", 3, name="warmups")
    warm = [x for x in r.rows if x["warmup"] == "1"]
    meas = [x for x in r.rows if x["warmup"] == "0"]
    check(r.rc == 0 and len(meas) == 10 and warm and
          all(fnum(x, "scheduled_ms") < 300 for x in warm) and
          all(fnum(x, "scheduled_ms") >= 300 for x in meas),
          "warmup 0.3s: %d warm, %d measured" % (len(warm), len(meas)))

    # the live line: forced on (stderr is not a TTY here), refreshed ~4 times a second; off by
    # default when stderr is not a TTY
    import subprocess
    cmd = [loadgen, "--url", srv.url, "--requests", 40, "--concurrency", 1, "--output-len", 2]
    cmd = [str(x) for x in cmd]
    p = subprocess.run(cmd + ["--progress"], capture_output=True, text=True, timeout=60)
    lines = [l for l in p.stderr.splitlines() if " done, " in l]  # text mode: \r is a newline
    check(p.returncode == 0 and len(lines) >= 4 and "40/40 done, 40 ok, 0 failed" in lines[-1],
          "progress: %d updates, %r" % (len(lines), p.stderr[-300:]))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and p.stderr == "", "progress off: %r" % p.stderr)
print("loadgen_modes: ok")
