#!/usr/bin/env python3
"""bench_serve.py — serving throughput of `nanoserve serve` over HTTP: C concurrent streaming
/v1/completions clients, each sending R requests of N generated tokens (ignore_eos); prints
requests/s, output tokens/s and TTFT percentiles (first SSE chunk as the client sees it).
Python 3 standard library only.

  bench/bench_serve.py --port 8080 [--concurrency 16] [--requests 4] [--tokens 64]
  bench/bench_serve.py --binary build/nanoserve --model models/tiny   (starts its own daemon)
"""
import argparse
import concurrent.futures as cf
import http.client
import json
import re
import statistics
import subprocess
import time


def one(port, i, tokens):
    body = json.dumps({"prompt": "Request %d: tell me a story about the number %d." % (i, i),
                       "max_tokens": tokens, "ignore_eos": True, "temperature": 0.8, "seed": i,
                       "stream": True, "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("status %d: %r" % (r.status, r.read()[:200]))
    ttft, out = None, 0
    while True:
        line = r.readline()
        if not line:
            break
        if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
            continue
        o = json.loads(line[6:])
        if ttft is None and o["choices"] and o["choices"][0]["text"]:
            ttft = time.perf_counter() - t0
        if o.get("usage"):
            out = o["usage"]["completion_tokens"]
    c.close()
    return ttft, out, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int)
    ap.add_argument("--binary")
    ap.add_argument("--model", default="models/tiny")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--requests", type=int, default=4, help="per client")
    ap.add_argument("--tokens", type=int, default=64)
    a = ap.parse_args()
    proc = None
    port = a.port
    if port is None:
        proc = subprocess.Popen([a.binary, "serve", "--set", "engine.model=" + a.model,
                                 "--set", "server.port=0", "--set", "log.level=warn"],
                                stdout=subprocess.PIPE)
        port = int(re.search(rb":(\d+)", proc.stdout.readline()).group(1))
    try:
        one(port, 0, 4)  # warm-up
        n = a.concurrency * a.requests
        t0 = time.perf_counter()
        with cf.ThreadPoolExecutor(a.concurrency) as ex:
            res = list(ex.map(lambda i: one(port, i, a.tokens), range(n)))
        wall = time.perf_counter() - t0
    finally:
        if proc:
            proc.terminate()
            proc.wait()
    ttfts = sorted(r[0] for r in res if r[0] is not None)
    toks = sum(r[1] for r in res)
    print("requests: %d (%d concurrent streams, %d tokens each) in %.2f s" %
          (n, a.concurrency, a.tokens, wall))
    print("requests/s: %.1f" % (n / wall))
    print("output tokens/s: %.0f" % (toks / wall))
    print("TTFT median: %.1f ms, p90: %.1f ms" %
          (statistics.median(ttfts) * 1e3, ttfts[int(len(ttfts) * 0.9) - 1] * 1e3))


if __name__ == "__main__":
    main()
