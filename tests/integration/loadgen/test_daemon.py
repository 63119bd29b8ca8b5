"""test_daemon.py — nanoserve-loadgen against the real daemon (CPU backend, the tiny model),
briefly, at both load shapes and on both endpoints: every request succeeds, the counts add up,
--json has every field, --csv one row per request, and the token totals equal what the
daemon's own /metrics counted (an independent count)."""
import os
import sys

import lgtest
from lgtest import check

loadgen, work = lgtest.args()
check(len(sys.argv) > 3, "usage: test_daemon.py LOADGEN WORK_DIR NANOSERVE")
import nsd  # noqa: E402  (on the path through lgtest: the daemon tests' helpers)

nanoserve = os.path.abspath(sys.argv[3])
model = nsd.tiny_model(nanoserve, work)


def tokens(m):
    return (m.get("nanoserve_prompt_tokens_total", 0), m.get("nanoserve_generation_tokens_total", 0))


with nsd.Daemon(nanoserve, work, model, name="loadgen") as d:
    url = "http://127.0.0.1:%d" % d.port
    common = ["--input-len", 16, "--output-len", 8, "--ignore-eos", "--vocab-max", 500,
              "--temperature", 0, "--seed", 4]
    runs = [
        ("closed", ["--concurrency", 4, "--requests", 12, "--warmup", 2]),
        ("open", ["--rate", 20, "--max-concurrency", 4, "--requests", 12]),
        ("chat", ["--endpoint", "chat", "--no-stream", "--concurrency", 2, "--requests", 4]),
    ]
    for name, shape in runs:
        m0 = d.metrics()
        r = lgtest.run(loadgen, work, url, *(common + shape), name="daemon_" + name, timeout=120)
        m1 = d.metrics()
        js, c = r.json, r.json["counts"]
        n = shape[shape.index("--requests") + 1]
        warm = c["warmup"]
        print("%s: %d ok in %.2f s, TTFT p50 %.1f ms, TPOT p50 %.2f ms, %.1f output tok/s" %
              (name, c["ok"], js["duration_s"], js["ttft_ms"]["p50"], js["tpot_ms"]["p50"],
               js["output_throughput"]), flush=True)
        check(r.rc == 0, "%s: %r\ndaemon log:\n%s" % (name, r, d.log_text()))
        check(c["sent"] == n and c["ok"] == n and c["errors"] == 0 and c["timeouts"] == 0,
              "%s: counts %r" % (name, c))
        check(js["parameters"]["model"] == os.path.basename(model) and
              js["parameters"]["max_model_len"] > 0,
              "%s: /v1/models probe gave %r" % (name, js["parameters"]))
        # usage: ignore_eos makes every output exactly --output-len
        check(js["total_output_tokens"] == 8 * n, "%s: output tokens %d" %
              (name, js["total_output_tokens"]))
        check(all(x["output_tokens"] == "8" and x["status"] == "200" for x in r.rows),
              "%s: CSV %r" % (name, r.rows[:3]))
        p0, g0 = tokens(m0)
        p1, g1 = tokens(m1)
        check(g1 - g0 == 8 * (n + warm), "%s: the daemon generated %d tokens, loadgen saw %d" %
              (name, g1 - g0, 8 * (n + warm)))
        warm_prompt = sum(int(x["prompt_tokens"]) for x in r.rows if x["warmup"] == "1")
        check(p1 - p0 == js["total_input_tokens"] + warm_prompt,
              "%s: the daemon counted %d prompt tokens, loadgen %d" %
              (name, p1 - p0, js["total_input_tokens"] + warm_prompt))
        if name != "chat":
            check(js["total_input_tokens"] in (16 * n, 17 * n), "%s: prompt tokens %d" %
                  (name, js["total_input_tokens"]))  # 16 ids (+ BOS when the server adds one)
            check(js["ttft_ms"]["n"] == n and js["tpot_ms"]["n"] == n and js["itl_ms"]["n"] > 0,
                  "%s: samples %r" % (name, (js["ttft_ms"], js["tpot_ms"], js["itl_ms"])))
    rc = d.stop()
    check(rc == 0, "daemon exit %d" % rc)

# --api-key: with keys in force, requests without it are 401s; with it they pass
keys = os.path.join(work, "loadgen_keys.%d" % os.getpid())
with open(keys, "w") as f:
    f.write("sk-loadgen\n")
with nsd.Daemon(nanoserve, work, model, name="loadgen_auth",
                sets=["server.api_keys_file=" + keys]) as d:
    url = "http://127.0.0.1:%d" % d.port
    args = ["--requests", 3, "--input-len", 4, "--output-len", 2, "--vocab-max", 500]
    r = lgtest.run(loadgen, work, url, *args, name="daemon_nokey", timeout=60)
    c = r.json["counts"]
    check(r.rc == 1 and c["by_status"] == {"401": 3} and c["errors"] == 3,
          "without --api-key: %r" % c)
    r = lgtest.run(loadgen, work, url, "--api-key", "sk-loadgen", *args, name="daemon_key",
                   timeout=60)
    check(r.rc == 0 and r.json["counts"]["ok"] == 3, "with --api-key: %r" % r)
    check(r.json["parameters"]["api_key"] is True and "sk-loadgen" not in open(
        os.path.join(work, "daemon_key.json")).read(), "the key leaked into --json")
    print("api key: ok", flush=True)
print("loadgen_daemon: ok")
