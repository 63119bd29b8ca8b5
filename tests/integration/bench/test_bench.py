"""test_bench.py — `nanoserve bench` on the CPU backend: every (batch, ctx) run is in the JSON
and the table, its times are positive and tok/s = batch / median step, bytes_per_step equals
the weights and KV cache a decode step reads counted here from config.json (fp32 on the CPU),
the GPU-only figures are null, and plans the settings cannot hold exit 2 naming the cause.
argv: PATH/TO/nanoserve WORK_DIR. Python 3 standard library only."""

import json
import math
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from nsd import args, check, fail  # noqa: E402

binary, work = args()
STEPS, WARMUP = 4, 1


def model(shape):
    """A mkmodel checkpoint of shape in the work dir (the shape models/tiny has: tiny)."""
    out = os.path.join(work, "bench_" + shape)
    if not os.path.exists(os.path.join(out, "model.safetensors")):
        shutil.rmtree(out, ignore_errors=True)
        r = subprocess.run([binary, "mkmodel", "--shape", shape, "--out", out, "--seed", "1"],
                           capture_output=True, text=True)
        check(r.returncode == 0, "mkmodel %s failed: %s" % (shape, r.stderr))
    return out


def bench(*extra):
    return subprocess.run([binary, "bench", "--set", "engine.backend=cpu", "--set",
                           "engine.cpu_threads=2"] + list(extra),
                          capture_output=True, text=True, timeout=100)


def step_bytes(cfg, batch, ctx):
    """Bytes one decode step reads, from config.json alone: each layer's two norms, q|k|v (and
    their biases), o, gate|up and down; the final norm; the LM head; one embedding row per
    sequence unless the embedding is the LM head; the K and V of every cached token, at the
    cache length of the middle timed step. fp32 (4 bytes) everywhere on the CPU backend."""
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    L, nh, nkv = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or H // nh
    bias = cfg.get("model_type") == "qwen2" or cfg.get("attention_bias", False)
    tied = cfg.get("tie_word_embeddings", False)
    qkv = (nh + 2 * nkv) * hd
    layer = 2 * H + qkv * H + (qkv if bias else 0) + H * nh * hd + 2 * I * H + H * I
    weights = L * layer + H + V * H + (0 if tied else batch * H)
    kv = batch * (ctx + WARMUP + STEPS // 2) * L * 2 * nkv * hd
    return 4 * (weights + kv)


def check_runs(name, path, batches, ctxs):
    out_json = os.path.join(work, "bench_%s.json" % name)
    if os.path.exists(out_json):
        os.remove(out_json)
    r = bench("--model", path, "--batch", ",".join(map(str, batches)), "--ctx",
              ",".join(map(str, ctxs)), "--steps", str(STEPS), "--warmup", str(WARMUP),
              "--json", out_json)
    check(r.returncode == 0, "%s: bench exited %d: %s" % (name, r.returncode, r.stderr))
    j = json.load(open(out_json))
    cfg = json.load(open(os.path.join(path, "config.json")))
    check(j["backend"] == "cpu" and j["dtype"] == "F32", "%s: backend/dtype %s/%s" %
          (name, j["backend"], j["dtype"]))
    check(j["model"] == path, "%s: model %r" % (name, j["model"]))
    check(j["copy_gbps"] is None, "%s: copy_gbps %r on the CPU" % (name, j["copy_gbps"]))
    eng = j["settings"]["engine"]
    check(eng["backend"] == "cpu" and "cuda_graphs" in eng and "cuda_gemm" in eng,
          "%s: settings %r" % (name, eng))
    got = sorted((x["batch"], x["ctx"]) for x in j["runs"])
    want = sorted((b, c) for b in batches for c in ctxs)
    check(got == want, "%s: runs %r, expected %r" % (name, got, want))
    rows = [l for l in r.stdout.splitlines() if l.startswith("| ") and l[2].isdigit()]
    check(len(rows) == len(want), "%s: table has %d rows:\n%s" % (name, len(rows), r.stdout))
    for x in j["runs"]:
        b, c, tag = x["batch"], x["ctx"], "%s batch %d ctx %d" % (name, x["batch"], x["ctx"])
        check(x["steps"] == STEPS, "%s: steps %r" % (tag, x["steps"]))
        check(x["ms_p50"] > 0 and x["ms_p90"] >= x["ms_p50"],
              "%s: ms p50 %r p90 %r" % (tag, x["ms_p50"], x["ms_p90"]))
        check(math.isclose(x["tok_s"], b * 1000.0 / x["ms_p50"], rel_tol=1e-9),
              "%s: tok_s %r != %d * 1000 / %r" % (tag, x["tok_s"], b, x["ms_p50"]))
        want_bytes = step_bytes(cfg, b, c)
        check(x["bytes_per_step"] == want_bytes,
              "%s: bytes_per_step %r, counted from config.json %d" %
              (tag, x["bytes_per_step"], want_bytes))
        check(math.isclose(x["gbps"], want_bytes / (x["ms_p50"] * 1e6), rel_tol=1e-9),
              "%s: gbps %r" % (tag, x["gbps"]))
        for k in ("pct_copy", "gpu_ms_p50", "gap_ms_p50"):
            check(x[k] is None, "%s: %s is %r on the CPU" % (tag, k, x[k]))
        cells = [f.strip() for f in next(l for l in rows if l.startswith("| %d | %d |" % (b, c)))
                 .strip("|").split("|")]
        check(len(cells) == 10 and cells[7:] == ["n/a"] * 3 and
              math.isclose(float(cells[4]), x["tok_s"], abs_tol=0.051),
              "%s: table row %r" % (tag, cells))
    print("ok   %s: %d runs, bytes per step as counted from config.json" % (name, len(want)))


def refused(why, expect, *extra):
    r = bench(*extra)
    check(r.returncode == 2, "%s: exit %d, expected 2 (stderr %r)" % (why, r.returncode, r.stderr))
    check(expect in r.stderr, "%s: stderr %r lacks %r" % (why, r.stderr, expect))
    print("ok   refused: %s" % why)


tiny = model("tiny")
check_runs("tiny", tiny, [1, 3], [8, 20])
# tied embeddings and q/k/v biases count differently
check_runs("tiny-qwen2", model("tiny-qwen2"), [2], [8])

refused("batch above engine.max_batch", "engine.max_batch", "--model", tiny, "--batch", "1,200")
refused("batch above a set engine.max_batch", "engine.max_batch (2)", "--model", tiny,
        "--set", "engine.max_batch=2", "--batch", "3")
refused("KV cache too small", "KV pages", "--model", tiny, "--set",
        "engine.kv_cache_bytes=100000", "--batch", "8", "--ctx", "100")
refused("context past the model's", "max_position_embeddings", "--model", tiny, "--ctx", "4000")
refused("bad --batch", "usage:", "--model", tiny, "--batch", "1,,3")
refused("unknown option", "unknown option --bogus", "--model", tiny, "--bogus")
print("bench_cli: ok")
