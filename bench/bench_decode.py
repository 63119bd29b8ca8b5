#!/usr/bin/env python3
"""bench/bench_decode.py — decode speed on a GPU machine: `nanoserve bench` on synthetic
checkpoints of real Llama shapes (`nanoserve mkmodel`) next to Hugging Face transformers on
the same folders, printed as a Markdown section ready for bench/RESULTS.md.

    bench/bench_decode.py --nanoserve BIN --scratch DIR [--commit SHA]
        [--shapes llama3-8b,tinyllama-1.1b,llama3.2-1b] [--stages mkmodel,ours,hf,report]
        [--steps 256] [--hf-new-tokens 64] [--budget 560] [--backend cuda]
        [--results bench/RESULTS.md]

Stages, in this order; each keeps what it measured in DIR/results/, so later calls add to
earlier ones and `report` prints everything measured so far:
  mkmodel  `nanoserve mkmodel --shape S --out DIR/S` (skipped when DIR/S is complete)
  ours     `nanoserve bench --set engine.backend=cuda` on DIR/S: batch 1 at ctx 128 with
           --steps new tokens (the 128-token prompt, 256 new tokens case), with
           engine.cuda_graphs true and false; for llama3-8b also batch 32 (graphs true and
           false) and batch 128 (graphs true) at ctx 512; and, graphs on, each transformers
           case's batch and prompt over the hf stage's N - 1 decode steps (--warmup of them
           untimed), to compare the two at the same context lengths
  hf       transformers on DIR/S (eager attention, bf16, torch on cuda, greedy generate with
           min_new_tokens = max_new_tokens = N, --hf-new-tokens, 64 by default to bound the
           time): batch 1 with 128-token prompts; for llama3-8b also batch 128 with 512-token
           prompts. Each timing is torch.cuda.synchronize + time.perf_counter around
           generate, after a warm-up generate; decode tok/s = B (N - 1) / (t(N) - t(1)).
  report   the Markdown section (also written to DIR/results/report.md; with --results FILE
           appended to FILE as its newest section: tests/gpu/run_on_device.sh appends it to
           the device's copy of bench/RESULTS.md and brings that file back)
--backend cpu with --shapes tiny tries the mkmodel, ours and report stages on a machine
without a GPU.

Every command runs under a timeout, and all of them within --budget seconds (a device call
has 10 minutes). llama3-8b's mkmodel writes 16 GB, so split the work over calls, e.g.:
  1. --shapes tinyllama-1.1b,llama3.2-1b --stages mkmodel,ours,hf,report
  2. --shapes llama3-8b --stages mkmodel
  3. --shapes llama3-8b --stages ours
  4. --shapes llama3-8b --stages hf,report
The GPU machine may have no .git: pass the commit measured with --commit (else
`git rev-parse --short HEAD` where it works). Python 3 standard library; the hf stage
needs torch and transformers."""

import argparse
import datetime
import glob
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

SHAPES = ("llama3-8b", "tinyllama-1.1b", "llama3.2-1b")
BIG = "llama3-8b"  # the shape that also runs the batch 32 and 128 cases
START = time.monotonic()


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def log(msg):
    print("bench_decode: %s" % msg, file=sys.stderr, flush=True)


def left(a):
    return a.budget - (time.monotonic() - START)


def ended(rc):
    """how a command ended, from run_cmd's rc (None: it timed out)"""
    return "timed out" if rc is None else "exit %d" % rc


def run_cmd(a, cmd, cap_s, log_path):
    """Run cmd with stdout+stderr into log_path under min(cap_s, budget left); returns
    (exit status or None when it timed out or was not started, wall seconds)."""
    limit = min(cap_s, left(a) - 5)
    if limit < 10:
        log("skipped (budget spent): %s" % shlex.join(cmd))
        return None, 0.0
    log("running (at most %d s): %s" % (limit, shlex.join(cmd)))
    t0 = time.monotonic()
    with open(log_path, "w") as f:
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=limit).returncode
        except subprocess.TimeoutExpired:
            rc = None
    wall = time.monotonic() - t0
    log("%s after %.0f s" % (ended(rc), wall))
    return rc, wall


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def save(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(path + ".tmp", path)


def load_all(res, prefix):
    out = []
    for p in sorted(glob.glob(os.path.join(res, prefix + "*.json"))):
        try:
            with open(p) as f:
                out.append(json.load(f))
        except (OSError, ValueError):
            pass
    return out


def lib_env(binary):
    """The library path tests/gpu/run_on_device.sh uses: the packed .dev/lib beside the
    binary, the CUDA toolkit's, and the cuBLAS wheel PyTorch ships."""
    dirs = [os.path.join(os.path.dirname(os.path.dirname(binary)), "lib"),
            "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"]
    try:
        import nvidia.cublas as m  # noqa: F401  (only for its path)
        dirs.append(os.path.join(list(m.__path__)[0], "lib"))
    except ImportError:
        pass
    old = os.environ.get("LD_LIBRARY_PATH")
    os.environ["LD_LIBRARY_PATH"] = ":".join([d for d in dirs if os.path.isdir(d)] +
                                             ([old] if old else []))


def device_line():
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,"
                            "clocks.max.sm,clocks.max.mem", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout else None
    except (OSError, subprocess.TimeoutExpired):
        return None


# ---- stages ------------------------------------------------------------------------------


def stage_mkmodel(a, shape, res):
    out = os.path.join(a.scratch, shape)
    done = out + ".done"
    if os.path.exists(done):
        log("%s: checkpoint already there" % shape)
        return
    subprocess.run(["rm", "-rf", out])
    cmd = [a.nanoserve, "mkmodel", "--shape", shape, "--out", out, "--seed", "1"]
    rc, wall = run_cmd(a, cmd, 540, os.path.join(res, "mkmodel_%s.log" % shape))
    if rc == 0:
        with open(done, "w") as f:
            f.write(shlex.join(cmd) + "\n")
    save(os.path.join(res, "mkmodel_%s.json" % shape),
         {"shape": shape, "command": shlex.join(cmd), "rc": rc, "wall_s": round(wall, 1)})


def our_invocations(a, shape):
    """(tag, batches, ctx, cuda_graphs, warm-up steps, timed steps): one model load each. The
    last, "hfctx", runs the transformers cases' batches and prompts for the hf stage's N - 1
    decode steps (the first --warmup untimed): nanoserve over the contexts transformers
    decodes at, for the comparison at the same tokens."""
    runs = [("b1_g1", "1", "128", True, a.warmup, a.steps),
            ("b1_g0", "1", "128", False, a.warmup, a.steps)]
    if shape == BIG:
        runs += [("b32-128_g1", "32,128", "512", True, a.warmup, a.steps),
                 ("b32_g0", "32", "512", False, a.warmup, a.steps)]
    cases = hf_cases(shape)
    runs.append(("hfctx", ",".join(sorted({str(b) for b, _ in cases}, key=int)),
                 ",".join(sorted({str(p) for _, p in cases}, key=int)), True, a.warmup,
                 max(1, a.hf_new_tokens - 1 - a.warmup)))
    return runs


def stage_ours(a, shape, res):
    model = os.path.join(a.scratch, shape)
    if not os.path.exists(model + ".done"):
        log("%s: no checkpoint (run the mkmodel stage first)" % shape)
        return
    for tag, batches, ctx, graphs, warmup, steps in our_invocations(a, shape):
        name = "ours_%s_%s" % (shape, tag)
        js = os.path.join(res, "raw_" + name + ".json")  # nanoserve bench --json
        cmd = [a.nanoserve, "bench", "--model", model,
               "--set", "engine.backend=" + a.backend,
               "--set", "engine.cuda_graphs=" + ("true" if graphs else "false"),
               "--batch", batches, "--ctx", ctx, "--steps", str(steps),
               "--warmup", str(warmup), "--json", js]
        rc, wall = run_cmd(a, cmd, 300, os.path.join(res, name + ".log"))
        bench = None
        if rc == 0:
            with open(js) as f:
                bench = json.load(f)
        else:
            print("nanoserve bench failed (%s), log tail:\n%s" % (rc, tail(
                os.path.join(res, name + ".log"))), file=sys.stderr)
        save(os.path.join(res, name + ".json"),
             {"shape": shape, "cuda_graphs": graphs, "hf_ctx": tag == "hfctx",
              "command": shlex.join(cmd), "rc": rc, "wall_s": round(wall, 1), "bench": bench})


def hf_cases(shape):
    """(batch, prompt tokens)"""
    return [(1, 128)] + ([(128, 512)] if shape == BIG else [])


def stage_hf(a, shape, res):
    model = os.path.join(a.scratch, shape)
    if not os.path.exists(model + ".done"):
        log("%s: no checkpoint (run the mkmodel stage first)" % shape)
        return
    for batch, prompt in hf_cases(shape):
        name = "hf_%s_b%d" % (shape, batch)
        out = os.path.join(res, name + ".json")
        cmd = [sys.executable, os.path.abspath(__file__), "--hf-worker", "--model", model,
               "--batch", str(batch), "--prompt", str(prompt), "--new", str(a.hf_new_tokens),
               "--reps", str(a.hf_reps), "--out", out]
        if os.path.exists(out):
            os.remove(out)
        rc, wall = run_cmd(a, cmd, 480, os.path.join(res, name + ".log"))
        if rc != 0:
            print("transformers run failed (%s), log tail:\n%s" % (rc, tail(
                os.path.join(res, name + ".log"))), file=sys.stderr)
            save(out, {"shape": shape, "batch": batch, "prompt": prompt, "failed": rc,
                       "command": shlex.join(cmd)})


def hf_worker(a):
    """One transformers measurement (a subprocess of the hf stage, so that its timeout and
    GPU memory end with it)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    t0 = time.perf_counter()
    major = int(transformers.__version__.split(".")[0])
    kw = {"dtype" if major >= 5 else "torch_dtype": torch.bfloat16,
          "attn_implementation": "eager"}
    try:
        model = AutoModelForCausalLM.from_pretrained(a.model, device_map="cuda", **kw)
    except (ImportError, ValueError):  # device_map needs accelerate
        model = AutoModelForCausalLM.from_pretrained(a.model, **kw).cuda()
    model.eval()
    load_s = time.perf_counter() - t0
    cfg = model.config
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(3, cfg.vocab_size, (a.batch, a.prompt), generator=g).cuda()
    mask = torch.ones_like(ids)
    eos = getattr(model.generation_config, "eos_token_id", None)
    if eos is None:
        eos = getattr(cfg, "eos_token_id", None)
    if isinstance(eos, (list, tuple)):
        eos = eos[0] if eos else None
    eos = 0 if eos is None else eos  # only pads: min_new_tokens keeps EOS from ending a run

    def generate(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n,
                             min_new_tokens=n, do_sample=False, pad_token_id=eos)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t
        assert out.shape == (a.batch, a.prompt + n), out.shape
        return dt

    with torch.inference_mode():
        generate(min(8, a.new))  # warm-up: kernels, allocator, cuBLAS handles
        t1 = statistics.median(generate(1) for _ in range(a.reps))
        tn = statistics.median(generate(a.new) for _ in range(a.reps))
    B, N = a.batch, a.new
    save(a.out, {
        "shape": os.path.basename(os.path.normpath(a.model)), "batch": B, "prompt": a.prompt,
        "new_tokens": N, "reps": a.reps, "t_1_s": t1, "t_n_s": tn,
        "tok_s_e2e": B * N / tn, "tok_s_decode": B * (N - 1) / (tn - t1) if tn > t1 else None,
        "ms_per_step_decode": (tn - t1) / (N - 1) * 1e3 if N > 1 else None,
        "load_s": round(load_s, 1), "attn": getattr(cfg, "_attn_implementation", "?"),
        "transformers": transformers.__version__, "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0), "date": utc_now(),
        "max_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1),
        "command": shlex.join([sys.executable, os.path.abspath(__file__)] + sys.argv[1:])})
    print("hf: batch %d prompt %d new %d: t(1) %.3f s, t(%d) %.3f s" % (B, a.prompt, N, t1, N, tn))


# ---- the report --------------------------------------------------------------------------


def fmt(v, spec="%.1f"):
    return "n/a" if v is None else spec % v


def stage_report(a, res):
    ours = load_all(res, "ours_")
    hf = load_all(res, "hf_")
    mk = load_all(res, "mkmodel_")
    dev = None
    if os.path.exists(os.path.join(res, "device.txt")):
        dev = open(os.path.join(res, "device.txt")).read().strip()
    rows, copy, gemm, backends, steps, cmds = [], set(), set(), set(), set(), []
    for o in ours:
        cmds.append(o["command"])
        if o.get("hf_ctx"):  # in the comparison table only
            continue
        b = o.get("bench")
        graphs = str(o["cuda_graphs"]).lower()
        if not b:
            rows.append(((o["shape"], 0, 0, graphs), "| %s | | | %s | %s | | | | | | | | |" % (
                o["shape"], graphs, ended(o["rc"]))))
            continue
        copy.add(b.get("copy_gbps"))
        gemm.add(b["settings"]["engine"].get("cuda_gemm"))
        backends.add(b["backend"])
        for r in b["runs"]:
            steps.add("%d warm-up + %d timed" % (r["warmup"], r["steps"]))
            ceil = (r["batch"] * b["copy_gbps"] * 1e9 / r["bytes_per_step"]
                    if b.get("copy_gbps") else None)
            rows.append(((o["shape"], r["batch"], r["ctx"], graphs),
                         "| %s | %d | %d | %s | %.3f | %.3f | %.1f | %.1f | %.1f | %s | %s | %s "
                         "| %s |" % (o["shape"], r["batch"], r["ctx"], graphs, r["ms_p50"],
                                     r["ms_p90"], r["tok_s"], r["bytes_per_step"] / 1e6,
                                     r["gbps"], fmt(r.get("pct_copy")), fmt(ceil, "%.0f"),
                                     fmt(r.get("gpu_ms_p50"), "%.3f"),
                                     fmt(r.get("gap_ms_p50"), "%.3f"))))
    rows = [r for _, r in sorted(rows, key=lambda x: (x[0][0], x[0][1], x[0][2], x[0][3] != "true"))]

    def our_run(shape, batch, graphs, hf_ctx=False, ctx=None):
        for o in ours:
            if (o["shape"] == shape and o["cuda_graphs"] == graphs and o.get("bench") and
                    bool(o.get("hf_ctx")) == hf_ctx):
                for r in o["bench"]["runs"]:
                    if r["batch"] == batch and (ctx is None or r["ctx"] == ctx):
                        return o["bench"], r
        return None, None

    cmp_rows = []
    for h in sorted(hf, key=lambda h: (h["shape"], h["batch"])):
        cmds.append(h["command"])
        _, on = our_run(h["shape"], h["batch"], True)
        _, off = our_run(h["shape"], h["batch"], False)
        if "failed" in h:
            cmp_rows.append("| %s | %d | | | | transformers failed (%s) | | | | |" % (
                h["shape"], h["batch"], ended(h["failed"])))
            continue
        _, same = our_run(h["shape"], h["batch"], True, True, h["prompt"])
        dec = h.get("tok_s_decode")
        ratio = on["tok_s"] / dec if on and dec else None
        ratio_same = same["tok_s"] / dec if same and dec else None
        ours_len = "%d + %d" % (on["ctx"], on["warmup"] + on["steps"]) if on else "-"
        same_s = ("%.1f (%d + %d + %d)" % (same["tok_s"], same["ctx"], same["warmup"],
                                            same["steps"]) if same else "n/a")
        for o in ours:  # its run failed: say how
            if o["shape"] == h["shape"] and o.get("hf_ctx") and not o.get("bench"):
                same_s = ended(o["rc"])
        cmp_rows.append("| %s | %d | %s / %d + %d | %s / %s | %s | %s | %s | %s | %s | %s |" % (
            h["shape"], h["batch"], ours_len, h["prompt"], h["new_tokens"],
            fmt(on and on["tok_s"]), fmt(off and off["tok_s"]), fmt(on and on.get("pct_copy")),
            fmt(dec), fmt(h.get("tok_s_e2e")), fmt(ratio, "%.2fx"), same_s,
            fmt(ratio_same, "%.2fx")))
    hv = next((h for h in hf if "failed" not in h), {})
    dates = sorted({o["bench"]["date"] for o in ours if o.get("bench")} |
                   {h["date"] for h in hf if "date" in h})
    copy_s = ", ".join(fmt(c, "%.0f GB/s") for c in sorted(copy, key=lambda c: c or 0)) or "n/a"
    out = []
    out.append("## Decode speed: `nanoserve bench` vs transformers (%s)" %
               (dev.split(",")[0] if dev else "no GPU seen"))
    out.append("")
    out.append("- date: %s (this report); runs %s" %
               (utc_now(), " to ".join([dates[0], dates[-1]]) if dates else "none yet"))
    out.append("- commit: %s" % a.commit)
    out.append("- device: %s" % (dev or "unknown (nvidia-smi not run)"))
    out.append("- checkpoints: `nanoserve mkmodel --shape S --out %s/S --seed 1` for S in %s "
               "(random bf16 weights in the real shapes; speed only)" %
               (a.scratch, ", ".join(sorted({m["shape"] for m in mk} | {o["shape"] for o in ours} |
                                            {h["shape"] for h in hf})) or "none"))
    out.append("- nanoserve: `nanoserve bench` on the %s backend (no HTTP, no scheduler): B "
               "sequences prefilled with ctx random ids, then greedy decode steps of B one-token "
               "rows (%s), wall time per step (fwd_step returns with the ids on the host); "
               "engine.cuda_gemm %s; copy bandwidth measured by the backend: %s" % (
                   "/".join(sorted(backends)) or "?", ", ".join(sorted(steps)) or "?",
                   "/".join(sorted(str(g) for g in gemm)) or "?", copy_s))
    out.append("- ceiling tok/s = B x copy GB/s / bytes per step (every weight once, B "
               "embedding rows, the KV cache at mid-run); % of ceiling = achieved GB/s / copy "
               "GB/s")
    if hv:
        out.append("- transformers %s, torch %s: %s attention, bf16, greedy `generate` with "
                   "min_new_tokens = max_new_tokens = N = %d (not 256: bounds the time on a "
                   "10-minute device call), random prompt ids; decode tok/s = B (N - 1) / "
                   "(t(N) - t(1)), end-to-end = B N / t(N); each t the median of %d runs after "
                   "a warm-up generate, torch.cuda.synchronize + time.perf_counter around it"
                   % (hv["transformers"], hv["torch"], hv["attn"], hv["new_tokens"], hv["reps"]))
    out.append("")
    out.append("| model | batch | ctx | cuda_graphs | ms/step p50 | p90 | tok/s | MB/step | GB/s "
               "| % of copy | ceiling tok/s | GPU ms/step | idle gap ms |")
    out.append("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    out += rows or ["| (no nanoserve runs yet) | | | | | | | | | | | | |"]
    out.append("")
    out.append("| model | batch | prompt + new tokens: nanoserve / transformers | nanoserve "
               "tok/s, graphs on / off | % of ceiling | transformers decode tok/s | "
               "transformers end-to-end tok/s | nanoserve / transformers (decode) | nanoserve "
               "tok/s at transformers' tokens (prompt + warm-up + timed steps) | nanoserve / "
               "transformers, same tokens |")
    out.append("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    out += cmp_rows or ["| (no transformers runs yet) | | | | | | | | | |"]
    out.append("")
    out.append("The last two columns: `nanoserve bench` (graphs on) with transformers' batch and "
               "prompt, over its N - 1 decode steps (the first of them, as many as shown, untimed "
               "warm-up), so both decode at the same context lengths; the columns before them time "
               "nanoserve's longer run, whose mean context is longer.")
    out.append("")
    out.append("Commands (on the device; this report: `%s`):" % shlex.join(
        ["bench/bench_decode.py"] + sys.argv[1:]))
    out.append("")
    out.append("```sh")
    out += [m["command"] for m in mk] + cmds
    out.append("```")
    text = "\n".join(out) + "\n"
    with open(os.path.join(res, "report.md"), "w") as f:
        f.write(text)
    if a.results:
        append_section(a.results, text)
    print(text)


def append_section(path, text):
    """text as the last section of the Markdown file path (made if absent), one blank line
    after what the file held."""
    old = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    with open(path + ".tmp", "w") as f:
        f.write(old.rstrip("\n") + "\n\n" + text if old else text)
    os.replace(path + ".tmp", path)
    log("report appended to %s" % path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nanoserve", help="the nanoserve binary")
    p.add_argument("--scratch", help="folder for checkpoints and results")
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--stages", default="mkmodel,ours,hf,report")
    p.add_argument("--commit", default=None, help="commit measured (default: git rev-parse)")
    p.add_argument("--steps", type=int, default=256, help="timed decode steps per run")
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--hf-new-tokens", type=int, default=64)
    p.add_argument("--hf-reps", type=int, default=3)
    p.add_argument("--budget", type=float, default=560, help="seconds for this call in all")
    p.add_argument("--backend", default="cuda", help="engine.backend of the ours stage")
    p.add_argument("--results", help="also append the report to this Markdown file "
                   "(bench/RESULTS.md)")
    # the transformers subprocess
    p.add_argument("--hf-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    p.add_argument("--prompt", type=int, help=argparse.SUPPRESS)
    p.add_argument("--new", type=int, help=argparse.SUPPRESS)
    p.add_argument("--reps", type=int, default=3, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.hf_worker:
        hf_worker(a)
        return 0
    stages = a.stages.split(",")
    shapes = a.shapes.split(",")
    bad = [s for s in stages if s not in ("mkmodel", "ours", "hf", "report")]
    if bad or not a.scratch or (set(stages) & {"mkmodel", "ours"} and not a.nanoserve):
        p.error("unknown stage %s, or --scratch / --nanoserve missing" % bad)
    if a.results and "report" not in stages:
        p.error("--results needs the report stage")
    if a.results and not os.path.isdir(os.path.dirname(os.path.abspath(a.results))):
        p.error("--results %s: no such folder" % a.results)
    if a.commit is None:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
        a.commit = r.stdout.strip() if r.returncode == 0 else "unknown (pass --commit)"
    a.scratch = os.path.abspath(a.scratch)
    res = os.path.join(a.scratch, "results")
    os.makedirs(res, exist_ok=True)
    if a.nanoserve:
        a.nanoserve = os.path.abspath(a.nanoserve)
        lib_env(a.nanoserve)
    dev = device_line()
    if dev:
        with open(os.path.join(res, "device.txt"), "w") as f:
            f.write(dev + "\n")
    for stage in ("mkmodel", "ours", "hf"):
        if stage in stages:
            for shape in shapes:
                globals()["stage_" + stage](a, shape, res)
    if "report" in stages:
        stage_report(a, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
