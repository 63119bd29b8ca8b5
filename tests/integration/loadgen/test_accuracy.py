"""test_accuracy.py — nanoserve-loadgen measures what a server with known delays does: first
token 50 ms after the request, then one every 10 ms, 20 tokens. Closed loop at concurrency 1
and 64: TTFT and ITL medians, TPOT, token counts, and output throughput against the truth
(concurrency * tokens / (ttft + (tokens - 1) * itl)); and at concurrency 1 against a server
that holds most tokens' text back (empty-text chunks). The reference server reports its own
timing error, so a failure says whose error it was."""
import lgtest
from lgtest import check

loadgen, work = lgtest.args()

TTFT, ITL, N, PROMPT = 50.0, 10.0, 20, 16
E2E = TTFT + (N - 1) * ITL  # 240 ms per request


def case(srv, conc, requests, warmup):
    r = lgtest.run(loadgen, work, srv.url, "--concurrency", conc, "--requests", requests,
                   "--warmup", warmup, "--output-len", N, "--input-len", PROMPT, "--ignore-eos",
                   "--seed", 1, name="acc_c%d" % conc)
    st = srv.stats()
    js, c = r.json, r.json["counts"]
    truth_tput = conc * N / (E2E / 1000)
    print("concurrency %d: %d requests; TTFT p50 %.2f ms (truth %.0f), ITL p50 %.2f mean %.2f ms "
          "(truth %.0f), TPOT mean %.2f ms, E2E p50 %.2f ms (truth %.0f), output %.1f tok/s "
          "(truth %.1f, %+.2f%%), request %.2f/s (truth %.2f)" %
          (conc, c["sent"], js["ttft_ms"]["p50"], TTFT, js["itl_ms"]["p50"], js["itl_ms"]["mean"],
           ITL, js["tpot_ms"]["mean"], js["e2el_ms"]["p50"], E2E, js["output_throughput"],
           truth_tput, 100 * (js["output_throughput"] / truth_tput - 1),
           js["request_throughput"], conc / (E2E / 1000)))
    print("  reference server's own error: first token p50 %.3f p99 %.3f ms, later tokens "
          "p50 %.3f p99 %.3f ms" % (st["ttft_err_ms"]["p50"], st["ttft_err_ms"]["p99"],
                                     st["itl_err_ms"]["p50"], st["itl_err_ms"]["p99"]), flush=True)
    # the reference itself must be on time, else the figures below test the machine's load
    check(st["ttft_err_ms"]["p50"] < 1 and st["itl_err_ms"]["p50"] < 1,
          "the reference server is late by itself (%r): machine overloaded?" % st)
    check(r.rc == 0, "exit code %r" % r)
    check(c["sent"] == requests and c["ok"] == requests and c["errors"] == 0 and
          c["timeouts"] == 0 and c["warmup"] == warmup, "counts %r" % c)
    check(st["requests"] == requests + warmup + 0, "the server saw %d requests, expected %d" %
          (st["requests"], requests + warmup))
    # token accounting from usage: exact with ignore_eos
    check(js["total_output_tokens"] == N * requests, "output tokens %r" % js["total_output_tokens"])
    check(js["total_input_tokens"] == PROMPT * requests, "prompt tokens %r" %
          js["total_input_tokens"])
    check(js["ttft_ms"]["n"] == requests and js["tpot_ms"]["n"] == requests,
          "TTFT/TPOT samples %d/%d" % (js["ttft_ms"]["n"], js["tpot_ms"]["n"]))
    # ITL: every gap between token chunks of measured requests, and nothing else (not the
    # first token's wait, not the finish/usage events)
    check(js["itl_ms"]["n"] == (N - 1) * requests, "ITL samples %d, expected %d" %
          (js["itl_ms"]["n"], (N - 1) * requests))
    check(lgtest.near(js["ttft_ms"]["p50"], TTFT, 2.0, 0.05), "TTFT p50 %.3f ms, truth %.0f" %
          (js["ttft_ms"]["p50"], TTFT))
    check(lgtest.near(js["itl_ms"]["p50"], ITL, 2.0, 0.05), "ITL p50 %.3f ms, truth %.0f" %
          (js["itl_ms"]["p50"], ITL))
    check(lgtest.near(js["itl_ms"]["mean"], ITL, 2.0, 0.05), "ITL mean %.3f ms, truth %.0f" %
          (js["itl_ms"]["mean"], ITL))
    check(lgtest.near(js["tpot_ms"]["mean"], ITL, 2.0, 0.05), "TPOT mean %.3f ms, truth %.0f" %
          (js["tpot_ms"]["mean"], ITL))
    check(lgtest.near(js["e2el_ms"]["p50"], E2E, 5.0, 0.05), "E2E p50 %.3f ms, truth %.0f" %
          (js["e2el_ms"]["p50"], E2E))
    check(lgtest.near(js["output_throughput"], truth_tput, 1e9, 0.05),
          "output throughput %.1f tok/s, truth %.1f" % (js["output_throughput"], truth_tput))
    check(lgtest.near(js["request_throughput"], conc / (E2E / 1000), 1e9, 0.05),
          "request throughput %.2f/s" % js["request_throughput"])
    # per request, from the CSV: TTFT and TPOT near the truth for (almost) every request
    rows = [x for x in r.rows if x["warmup"] == "0"]
    for x in rows:
        check(x["outcome"] == "ok" and x["status"] == "200" and x["output_tokens"] == str(N) and
              x["chunks"] == str(N), "CSV row %r" % x)
        check(lgtest.fnum(x, "scheduled_ms") <= lgtest.fnum(x, "start_ms") <=
              lgtest.fnum(x, "first_token_ms") <= lgtest.fnum(x, "end_ms"), "CSV times %r" % x)
    ttfts = [lgtest.fnum(x, "first_token_ms") - lgtest.fnum(x, "scheduled_ms") for x in rows]
    check(min(ttfts) >= TTFT - 0.5, "a TTFT below the server's delay: %.3f ms" % min(ttfts))


with lgtest.FakeServer(work, TTFT, ITL) as srv:
    case(srv, 1, 32, 2)
    # 64 connections: a warmup wave opens the pool so the measured waves reuse them
    case(srv, 64, 512, 64)
# a server that streams a chunk per token but holds most tokens' text back (empty text, then
# several tokens' text at once): every token chunk still counts, the first one included
with lgtest.FakeServer(work, TTFT, ITL, name="fake_held", extra=("--held-every", 3)) as srv:
    case(srv, 1, 16, 2)
print("loadgen_accuracy: ok")
