"""test_concurrent.py — 32 streaming requests at once, with different prompts, lengths and
sampling (greedy and seeded), all finish, and each one's text equals the same request sent
alone: continuous batching must not mix sequences or change their numbers."""
import concurrent.futures as cf

import nsd
from nsd import check

binary, work = nsd.args()
model = nsd.tiny_model(binary, work)

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def body(i):
    b = {"prompt": " ".join(WORDS[j % 8] for j in range(i + 1)) + " %d:" % i,
         "max_tokens": 4 + (i * 7) % 45, "stream": True, "ignore_eos": i % 3 == 0}
    if i % 2:
        b.update(temperature=0.9, top_p=0.95, seed=1000 + i)
    else:
        b["temperature"] = 0
    return b


with nsd.Daemon(binary, work, model, name="concurrent") as d:
    def run(i):
        st, ev, done = d.stream("/v1/completions", body(i))
        check(st == 200 and done, "request %d: status %d, [DONE] %s" % (i, st, done))
        text, finish, _ = nsd.stream_text(ev)
        check(finish in ("stop", "length"), "request %d finish %r" % (i, finish))
        return text, finish

    alone = [run(i) for i in range(32)]
    for rnd in range(2):
        m0 = d.metrics()
        with cf.ThreadPoolExecutor(32) as ex:
            together = list(ex.map(run, range(32)))
        m1 = d.metrics()
        # batched: far fewer engine steps than tokens generated in the round
        steps = m1["nanoserve_engine_steps_total"] - m0["nanoserve_engine_steps_total"]
        toks = m1["nanoserve_generation_tokens_total"] - m0["nanoserve_generation_tokens_total"]
        check(steps < toks * 0.8, "round %d: %d steps for %d tokens: no batching" %
              (rnd, steps, toks))
        for i in range(32):
            check(together[i] == alone[i], "round %d request %d: together %r != alone %r" %
                  (rnd, i, together[i], alone[i]))
    m = d.metrics()
    check(m["nanoserve_kv_cache_pages_used"] == 0, "KV pages still held: %r" %
          m["nanoserve_kv_cache_pages_used"])
    rc = d.stop()
    check(rc == 0, "exit code %d; log:\n%s" % (rc, d.log_text()))
print("server_concurrent: ok")
