#!/usr/bin/env python3
"""bench/serve_sweep.py — the serving table on a GPU machine: `nanoserve serve` on the CUDA
backend with a checkpoint folder, driven by `nanoserve-loadgen` at closed-loop concurrencies
and at Poisson rates around the measured saturation, for each input/output length pair; then
`nanoserve bench` (the engine alone) at the batch sizes the closed loops reach, for the
HTTP-vs-engine comparison. Prints a Markdown section for bench/RESULTS.md.

    bench/serve_sweep.py --nanoserve BIN --loadgen BIN --model DIR --scratch DIR
        [--commit SHA] [--io 128/128,1024/256] [--concurrency 1,8,32,128,256]
        [--rates 0.5,0.9,1.1] [--budget 540]

Every loadgen run is bounded by --duration (and the whole sweep by --budget seconds); a
case that would not fit in what is left is skipped and said so. Python 3 standard library."""

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration", "server"))
import nsd  # noqa: E402

START = time.monotonic()


def log(msg):
    print("serve_sweep: %s" % msg, file=sys.stderr, flush=True)


def left(a):
    return a.budget - (time.monotonic() - START)


def loadgen(a, port, io, extra, name, duration):
    inp, out = io
    js = os.path.join(a.scratch, name + ".json")
    cmd = [a.loadgen, "--url", "http://127.0.0.1:%d" % port, "--ignore-eos", "--temperature",
           "0", "--input-len", str(inp), "--output-len", str(out), "--no-progress", "--json",
           js, "--vocab-max", str(a.vocab_max)] + extra + ["--duration", str(duration)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=duration + 300)
    log("%s: rc %d in %.0f s" % (name, r.returncode, time.monotonic() - t0))
    try:
        with open(js) as f:
            res = json.load(f)
    except (OSError, ValueError):
        print(r.stdout.decode(errors="replace")[-3000:], file=sys.stderr)
        return None
    res["command"] = shlex.join(cmd)
    return res


def preemptions(d):
    """The daemon's nanoserve_preemptions_total (None when /metrics does not answer)."""
    try:
        return d.metrics().get("nanoserve_preemptions_total")
    except Exception:  # noqa: BLE001 - a figure for the table, not a check
        return None


def run_counted(d, *args):
    """loadgen(*args), with the sequences the daemon preempted meanwhile in res["preempted"]."""
    p0 = preemptions(d)
    res = loadgen(*args)
    p1 = preemptions(d)
    if res is not None:
        res["preempted"] = None if p0 is None or p1 is None else int(p1 - p0)
    return res


def row(io, load, res):
    if not res:
        return "| %d/%d | %s | failed | | | | | | | | |" % (io[0], io[1], load)
    c, t, p = res["counts"], res["ttft_ms"], res["tpot_ms"]
    pre = res.get("preempted")
    return ("| %d/%d | %s | %d | %.0f | %.2f | %.0f | %.0f | %.1f | %.1f | %d | %s |" %
            (io[0], io[1], load, c["ok"], res["output_throughput"], res["request_throughput"],
             t["p50"] or 0, t["p99"] or 0, p["p50"] or 0, p["p99"] or 0, c["errors"],
             "?" if pre is None else str(pre)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nanoserve", required=True)
    p.add_argument("--loadgen", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--scratch", required=True)
    p.add_argument("--commit", default="unknown")
    p.add_argument("--io", default="128/128,1024/256")
    p.add_argument("--concurrency", default="1,8,32,128,256")
    p.add_argument("--rates", default="0.5,0.9,1.1", help="fractions of the saturation rate")
    p.add_argument("--budget", type=float, default=540)
    p.add_argument("--backend", default="cuda", help="engine.backend (cpu: try it without a GPU)")
    p.add_argument("--vocab-max", type=int, default=1000, help="random prompt ids below this")
    p.add_argument("--duration", type=float, default=0, help="seconds per run (0: 20, 30 long)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="one more daemon setting (repeatable), e.g. engine.prefill_stream=true")
    a = p.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    ios = [tuple(int(x) for x in s.split("/")) for s in a.io.split(",")]
    concs = [int(x) for x in a.concurrency.split(",")]
    sets = ("engine.backend=" + a.backend, "engine.max_batch=%d" % max(concs),
            "engine.max_batch_tokens=8192", "engine.max_seq_len=2048",
            "scheduler.max_queue=100000", "server.request_timeout_s=900",
            "server.max_connections=4096") + tuple(a.set)
    t0 = time.monotonic()
    d = nsd.Daemon(os.path.abspath(a.nanoserve), a.scratch, os.path.abspath(a.model),
                   name="serve_sweep", sets=sets, wait=False)
    rows, runs, closed = [], [], {}
    try:
        d.wait_listening(timeout=400)
        d.wait_ready(600)
        log("daemon up in %.0f s" % (time.monotonic() - t0))
        for io in ios:
            sat = None
            for c in concs:
                # enough requests for a steady state, bounded in time
                dur = a.duration or (20 if io[0] <= 128 else 30)
                if left(a) < dur + 40:
                    rows.append("| %d/%d | concurrency %d | skipped (time) | | | | | | | | |" %
                                (io[0], io[1], c))
                    continue
                # one whole round of warm-up: loadgen's warm-up requests share the loop
                # with the measured ones, so fewer than c would leave the last measured
                # round (equal lengths keep the rounds in step) part-empty
                extra = ["--concurrency", str(c), "--requests", str(max(8, 4 * c)),
                         "--warmup", str(c)]
                res = run_counted(d, a, d.port, io, extra, "c%d_%d_%d" % (c, io[0], io[1]), dur)
                rows.append(row(io, "concurrency %d" % c, res))
                closed[(io, c)] = res
                runs.append(res)
                if res and res["request_throughput"] > 0:
                    sat = res["request_throughput"]
            for f in [float(x) for x in a.rates.split(",")] if sat else []:
                dur = a.duration or 20
                if left(a) < dur + 40:
                    rows.append("| %d/%d | Poisson %.2f x | skipped (time) | | | | | | | | |" %
                                (io[0], io[1], f))
                    continue
                rate = f * sat
                extra = ["--rate", "%.3f" % rate, "--requests", str(max(16, int(rate * dur))),
                         "--warmup", "4"]
                res = run_counted(d, a, d.port, io, extra, "r%.2f_%d_%d" % (f, io[0], io[1]),
                                  dur)
                rows.append(row(io, "Poisson %.1f req/s (%.1f x c=%d)" % (rate, f, concs[-1]),
                                res))
                runs.append(res)
    finally:
        d.proc.terminate()
        try:
            d.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            d.proc.kill()
    with open(os.path.join(a.scratch, "daemon.log"), "w") as f:
        f.write(d.log_text())
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print("## Serving: `nanoserve serve` + `nanoserve-loadgen` (%s)\n" % now)
    print("- commit: %s; model: `%s` (mkmodel, random bf16 weights); daemon settings: %s" %
          (a.commit, a.model, ", ".join("`%s`" % s for s in sets)))
    print("- loadgen: streaming /v1/completions, random token-id prompts of exactly the input "
          "length, ignore_eos (exact output length), temperature 0; closed loops with "
          "4 x concurrency requests (at least 8) after c warm-up requests, each run "
          "bounded by --duration; Poisson rates as fractions of the last closed loop's "
          "request throughput; preempted: sequences the daemon preempted (KV pages ran out) "
          "during the run, warm-up included\n")
    print("| in/out | load | requests | output tok/s | req/s | TTFT p50 ms | TTFT p99 ms | "
          "TPOT p50 ms | TPOT p99 ms | errors | preempted |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(r)
    print("\nCommands:\n```sh")
    for res in runs:
        if res:
            print(res["command"])
    print("```")
    engine_alone(a, ios, concs, sets, closed)


def engine_alone(a, ios, concs, sets, closed):
    """`nanoserve bench` with the daemon's settings at the closed loops' batch sizes: the
    engine's decode rate and its rate for the same work as a closed loop of B requests (B
    prompts prefilled together, then N - 1 decode steps), against the HTTP figures."""
    out, cmds = [], []
    for io in ios:
        if left(a) < 60:
            log("engine-alone comparison for %d/%d skipped (time)" % io)
            continue
        js = os.path.join(a.scratch, "bench_%d_%d.json" % io)
        cmd = [a.nanoserve, "bench", "--model", a.model] + \
            [x for s in sets if s.startswith("engine.") for x in ("--set", s)] + \
            ["--batch", ",".join(str(c) for c in concs), "--ctx", str(io[0]), "--steps",
             str(io[1]), "--warmup", "8", "--json", js, "--no-table"]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=max(60, left(a)))
        log("bench %d/%d: rc %d" % (io[0], io[1], r.returncode))
        try:
            with open(js) as f:
                runs = json.load(f)["runs"]
        except (OSError, ValueError, KeyError):
            print(r.stdout.decode(errors="replace")[-2000:], file=sys.stderr)
            continue
        for b in runs:
            res = closed.get((io, b["batch"]))
            n = b["steps"]
            work = b["batch"] * n / ((b["prefill_ms"] + (n - 1) * b["ms_p50"]) / 1e3)
            http = res["output_throughput"] if res else float("nan")
            tpot = res["tpot_ms"]["p50"] if res and res["tpot_ms"]["p50"] else float("nan")
            out.append("| %d/%d | %d | %.0f | %.0f | %.0f | %.0f%% | %.2f / %.1f = %.0f%% |" %
                       (io[0], io[1], b["batch"], b["tok_s"], work, http, 100 * http / work,
                        b["ms_p50"], tpot, 100 * b["ms_p50"] / tpot))
        cmds.append(shlex.join(cmd))
    if not out:
        return
    print("\nThe engine alone at the same batch sizes (`nanoserve bench`, same engine settings; "
          "workload = B x N / (prefill_ms + (N - 1) x step p50), the same work as one round of "
          "the closed loop):\n")
    print("| in/out | B = c | engine decode tok/s | engine workload tok/s | HTTP output tok/s | "
          "HTTP / workload | engine step / HTTP TPOT p50 (ms) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for line in out:
        print(line)
    print("\n```sh\n%s\n```" % "\n".join(cmds))


if __name__ == "__main__":
    main()
