#!/usr/bin/env python3
"""bench/itl_prefill.py — what a long prompt does to running streams: N streaming requests
decode (ignore_eos, long outputs); once they all stream, one request with a P-token prompt
arrives; the inter-token latencies (ITL) of the N streams are reported for the window from
that arrival until its first token, next to their ITL before it. Runs the daemon once per
schedule given: an engine.max_batch_tokens value (the prefill chunk size: the whole prompt
in one step next to the decode rows, or smaller chunks over several steps), with ":lane"
for engine.prefill_stream=true (the chunks on their own low-priority stream, overlapping
the decode steps). Markdown on stdout.

    bench/itl_prefill.py --nanoserve BIN --model DIR --scratch DIR [--streams 32]
        [--prompt 4096] [--chunks 4160,544,4160:lane,544:lane] [--backend cuda] [--vocab 1000]

Python 3 standard library."""

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration", "server"))
import nsd  # noqa: E402


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def stream(port, body, stamps, started):
    """POST a streaming completion; append the arrival time of every token chunk."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    c.request("POST", "/v1/completions", body=json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("status %d: %r" % (r.status, r.read()[:300]))
    while True:
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data: [DONE]"):
            break
        if line.startswith(b"data: "):
            o = json.loads(line[6:])
            if o.get("choices") and o["choices"][0].get("text") is not None:
                stamps.append(time.perf_counter())
                started.set()
    c.close()


def one_setting(a, sched):
    chunk, _, mode = sched.partition(":")
    chunk = int(chunk)
    if mode not in ("", "lane"):
        raise SystemExit("--chunks: %r is not N or N:lane" % sched)
    sets = ("engine.backend=" + a.backend, "engine.max_batch=%d" % (a.streams + 8),
            "engine.max_batch_tokens=%d" % chunk, "engine.max_seq_len=%d" % (a.prompt + 1024),
            "engine.prefill_stream=%s" % ("true" if mode else "false"),
            "server.request_timeout_s=900")
    d = nsd.Daemon(os.path.abspath(a.nanoserve), a.scratch, os.path.abspath(a.model),
                   name="itl_%d%s" % (chunk, "_lane" if mode else ""), sets=sets, wait=False)
    try:
        d.wait_listening(timeout=400)
        d.wait_ready(600)
        stamps = [[] for _ in range(a.streams)]
        started = [threading.Event() for _ in range(a.streams)]
        th = []
        for i in range(a.streams):
            body = {"prompt": [(7 * i + j) % a.vocab + 3 for j in range(64)],
                    "max_tokens": a.out_tokens, "ignore_eos": True, "temperature": 0,
                    "stream": True}
            t = threading.Thread(target=stream, args=(d.port, body, stamps[i], started[i]))
            t.start()
            th.append(t)
        for e in started:
            e.wait(300)
        time.sleep(a.settle)
        big = {"prompt": [(11 * j) % a.vocab + 3 for j in range(a.prompt)], "max_tokens": 1,
               "temperature": 0, "stream": True}
        bs, bstarted = [], threading.Event()
        t0 = time.perf_counter()
        stream(d.port, big, bs, bstarted)
        t1 = bs[0] if bs else time.perf_counter()
        for t in th:
            t.join()
        during, before = [], []
        for s in stamps:
            for x, y in zip(s, s[1:]):
                if y > t0 and x < t1:
                    during.append((y - x) * 1e3)
                elif y <= t0 and x >= t0 - a.settle:
                    before.append((y - x) * 1e3)
        return {"sched": "%d%s" % (chunk, ", prefill stream" if mode else ""), "ttft_ms": (t1 - t0) * 1e3, "during": during, "before": before}
    finally:
        d.proc.terminate()
        try:
            d.proc.wait(timeout=60)
        except Exception:
            d.proc.kill()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nanoserve", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--scratch", required=True)
    p.add_argument("--streams", type=int, default=32)
    p.add_argument("--prompt", type=int, default=4096)
    p.add_argument("--out-tokens", type=int, default=400)
    p.add_argument("--chunks", default="4160,544,4160:lane,544:lane")
    p.add_argument("--backend", default="cuda")
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--settle", type=float, default=1.0)
    a = p.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    res = [one_setting(a, c) for c in a.chunks.split(",")]
    print("## ITL of %d streams while a %d-token prompt is prefilled (%s)\n" %
          (a.streams, a.prompt, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
    print("- model `%s`, backend %s; the streams decode %d tokens each (64-token prompts, "
          "greedy, ignore_eos); the long prompt arrives %.1f s after all of them stream; "
          "command: `%s`\n" % (a.model, a.backend, a.out_tokens, a.settle, " ".join(sys.argv)))
    print("| engine.max_batch_tokens (prefill chunk) | ITL before p50 / p99 ms | ITL during "
          "prefill p50 / p99 / max ms | long prompt TTFT ms |")
    print("|---:|---|---|---:|")
    for r in res:
        print("| %s | %.1f / %.1f | %.1f / %.1f / %.1f | %.0f |" %
              (r["sched"], statistics.median(r["before"]) if r["before"] else float("nan"),
               pct(r["before"], 0.99), statistics.median(r["during"]) if r["during"] else
               float("nan"), pct(r["during"], 0.99), max(r["during"] or [float("nan")]),
               r["ttft_ms"]))


if __name__ == "__main__":
    main()
