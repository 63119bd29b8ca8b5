#!/usr/bin/env python3
"""serve_cuda.py — the daemon on the CUDA backend, checked from outside over HTTP (GPU
machine): non-streamed and streamed /v1/completions agree, and N concurrent requests
(greedy and seeded; every eighth prompt long enough to raise the batch's context class; two in
eight with a logit_bias, one of them +100 on an id, which must then be all it gives) each
give the same text as the same request sent alone; all of it twice,
with prompt chunks in the decode steps and with engine.prefill_stream=true (prompt chunks on
their own stream), whose texts must also equal the first run's.
Prints a summary and the pool / KV figures from /metrics.

    python3 tests/gpu/serve_cuda.py NANOSERVE_BINARY WORK_DIR MODEL_DIR [N]
"""
import concurrent.futures as cf
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration", "server"))
import nsd  # noqa: E402
from nsd import check  # noqa: E402

binary, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
model = os.path.abspath(sys.argv[3])
n = int(sys.argv[4]) if len(sys.argv) > 4 else 64
os.makedirs(work, exist_ok=True)
FORCED = 100  # request i (i % 8 == 6) gives only id FORCED + i
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def body(i, stream):
    # every eighth prompt long (70-269 words, ~280-1080 tokens): batched with it, the short
    # ones decode under the graphs of longer context classes (256, 512, 1024 keys), alone
    # under the shortest's
    words = 70 + (i * 53) % 200 if i % 8 == 3 else i % 29 + 1
    b = {"prompt": " ".join(WORDS[j % 8] for j in range(words)) + " %d:" % i,
         "max_tokens": 32, "ignore_eos": True, "stream": stream}
    if i % 2:
        b.update(temperature=0.8, top_p=0.95, seed=100 + i)
    else:
        b["temperature"] = 0
    if i % 8 in (5, 6):  # a logit bias: 20 ids moved by up to +-3 (the vocabulary is 512 ids)
        b["logit_bias"] = {str((i * 37 + k * 11) % 500): (k % 5 - 2) * 1.5 for k in range(20)}
    if i % 8 == 6:  # and one id at +100: every token the request gives (see FORCED)
        b["logit_bias"][str(FORCED + i)] = 100
    return b


def run(prefill_stream, ref=None):
    t0 = time.time()
    mode = "prefill stream" if prefill_stream else "mixed steps"
    with nsd.Daemon(binary, work, model, name="serve_cuda_%d" % prefill_stream,
                    sets=("engine.backend=cuda", "engine.max_batch=128",
                          "engine.prefill_stream=%s" % ("true" if prefill_stream else "false"),
                          "server.request_timeout_s=600")) as d:
        print("[%s] daemon up in %.1f s" % (mode, time.time() - t0), flush=True)

        def plain(i):
            st, js = d.post("/v1/completions", body(i, False))
            check(st == 200, "request %d: status %d %r" % (i, st, js))
            return js["choices"][0]["text"]

        def streamed(i):
            st, ev, done = d.stream("/v1/completions", body(i, True))
            check(st == 200 and done, "stream %d: status %d done %s" % (i, st, done))
            return nsd.stream_text(ev)[0]

        forced = [i for i in range(n) if i % 8 == 6]
        for i in forced:
            st, js = d.post("/detokenize", {"tokens": [FORCED + i] * 32})
            got = plain(i)
            check(st == 200 and got == js["prompt"],
                  "request %d (logit_bias +100 on id %d): %r, want %r" % (i, FORCED + i, got,
                                                                          js["prompt"]))
        print("[%s] logit_bias +100: %d requests gave only their biased id" % (mode, len(forced)),
              flush=True)
        same_stream = sum(plain(i) == streamed(i) for i in range(4))
        print("[%s] stream vs non-stream: %d/4 identical" % (mode, same_stream), flush=True)
        t1 = time.time()
        alone = [plain(i) for i in range(n)]
        t_alone = time.time() - t1
        t1 = time.time()
        with cf.ThreadPoolExecutor(n) as ex:
            together = list(ex.map(plain, range(n)))
        t_together = time.time() - t1
        eq = [alone[i] == together[i] for i in range(n)]
        greedy_eq = sum(eq[i] for i in range(0, n, 2))
        seeded_eq = sum(eq[i] for i in range(1, n, 2))
        print("[%s] %d concurrent vs alone: %d/%d identical (greedy %d/%d, seeded %d/%d); "
              "alone %.1f s, together %.1f s" % (mode, n, sum(eq), n, greedy_eq, (n + 1) // 2,
                                                seeded_eq, n // 2, t_alone, t_together),
              flush=True)
        for i in range(n):
            if not eq[i]:
                a, b = alone[i], together[i]
                k = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]),
                         min(len(a), len(b)))
                print("  request %d differs from char %d" % (i, k))
        same_ref = n
        if ref is not None:
            same_ref = sum(alone[i] == ref[i] and together[i] == ref[i] for i in range(n))
            print("[%s] alone and concurrent texts equal to the mixed-steps run: %d/%d" %
                  (mode, same_ref, n), flush=True)
        m = d.metrics()
        for key in sorted(m):
            if any(s in key for s in ("pool", "kv_cache", "batch_size", "engine_steps")):
                print("  %s %s" % (key, m[key]))
        rc = d.stop()
        check(rc == 0, "exit code %d" % rc)
        return alone, same_stream, sum(eq), same_ref


ref, s0, c0, _ = run(False)
_, s1, c1, r1 = run(True, ref)
print("serve_cuda: stream==plain %d/4 and %d/4, concurrent==alone %d/%d and %d/%d, prefill "
      "stream == mixed %d/%d" % (s0, s1, c0, n, c1, n, r1, n))
