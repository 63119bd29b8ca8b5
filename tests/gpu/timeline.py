#!/usr/bin/env python3
"""Exposed kernel time per decode step from a tools/ktrace CSV (run_on_device.sh timeline).

    tests/gpu/timeline.py tl-llama3-8b-b128.csv [--skip N]

Only kernels launched from graphs count (graph id != 0: the replayed decode steps). A kernel's
exposed time runs from the later of its start and the previous kernel's end to its own end, so
overlapping kernels (programmatic dependent launch, several streams) are not counted twice.
Steps are split where a kernel starts more than 20 us after the one before ended (the idle
gap between replays) and the first --skip steps are left out; with --last N, only the last N
(a batch of B prompts decodes in graphs while later prompts still prefill, so the first steps
of a large batch are smaller ones: --last with the timed steps keeps the batch asked for).
Prints, per kernel kind (the demangled name, template arguments kept for the decode GEMM and
attention kernels only), the median exposed microseconds a step and its share of the step's
span. With --layer P (--layer-offset O, default 1: the embedding gather first), also a
layer's P kernels by position (kernels O + L P .. of a step, layers 2 to the third last):
median run time, exposed time, and start minus the previous kernel's end (negative: launched
early, waiting).

    tests/gpu/timeline.py tl-llama3-8b-b1.csv --layer 9
"""
import argparse
import csv
import re
import statistics
import subprocess
import sys


def demangle(names):
    """Itanium-mangled names through c++filt where it is installed, else as they are."""
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                             text=True, check=True).stdout.split("\n")
        return dict(zip(names, out))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def kind(name):
    """A kernel's kind: its name without parameters; decode-GEMM and attention kernels keep
    their template arguments (the shape tells the launch apart)."""
    n = re.sub(r"^void ", "", name)
    n = re.sub(r"\((?!anonymous).*$", "", n)
    if not re.match(r"(gemm_dec|dec_kernel|gemm_dec_tma)", n):
        n = re.sub(r"<.*", "", n)
    return n.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--last", type=int, default=0, help="only the last N steps (0: all)")
    ap.add_argument("--gap-us", type=float, default=20.0)
    ap.add_argument("--layer", type=int, default=0, help="kernels a layer: a table by position")
    ap.add_argument("--layer-offset", type=int, default=1, help="a step's first layer kernel")
    o = ap.parse_args()
    raw = []
    with open(o.csv) as f:
        for r in csv.DictReader(f):
            if int(r["graph"]) != 0:
                raw.append(r)
    names = demangle(sorted({r["name"] for r in raw}))
    rows = [(int(r["start_ns"]), int(r["end_ns"]), kind(names[r["name"]]), r) for r in raw]
    if not rows:
        sys.exit(f"{o.csv}: no kernels launched from graphs")
    rows.sort()
    steps, cur, last_end = [], [], None
    for s, e, k, r in rows:
        if last_end is not None and s - last_end > o.gap_us * 1e3:
            steps.append(cur)
            cur = []
        cur.append((s, e, k, r))
        last_end = e if last_end is None else max(last_end, e)
    steps.append(cur)
    steps = steps[o.skip:]
    if o.last > 0:
        steps = steps[-o.last:]
    if not steps:
        sys.exit(f"{o.csv}: fewer than {o.skip + 1} steps")
    per = {}
    spans = []
    for st in steps:
        acc = {}
        for k, _, x, _ in walk(st):
            acc[k] = acc.get(k, 0.0) + x
        spans.append((max(e for _, e, _, _ in st) - st[0][0]) / 1e3)
        for k in set(list(acc) + list(per)):
            per.setdefault(k, []).append(acc.get(k, 0.0))
    span = statistics.median(spans)
    print(f"{o.csv}: {len(steps)} steps, median span {span:.1f} us, "
          f"{len(steps[0])} kernels in the first")
    print("| kernel | exposed us/step | share |")
    print("|---|---:|---:|")
    tot = 0.0
    for k, v in sorted(per.items(), key=lambda kv: -statistics.median(kv[1])):
        m = statistics.median(v)
        tot += m
        print(f"| {k} | {m:.1f} | {100 * m / span:.1f}% |")
    print(f"| (sum of medians) | {tot:.1f} | |")
    if o.layer > 0:
        layer_table(steps, o.layer, o.layer_offset)


def walk(step):
    """A step's kernels in start order as (kind, run, exposed, lead) in us: exposed runs from
    the later of the kernel's start and the latest end before it; lead is its start minus that
    end (negative: launched early)."""
    out, prev = [], None
    for s, e, k, _ in step:
        b = s if prev is None else max(s, prev)
        out.append((k, (e - s) / 1e3, max(0, e - b) / 1e3, (s - (prev or s)) / 1e3))
        prev = e if prev is None else max(prev, e)
    return out


def layer_table(steps, per_layer, first):
    """A layer's kernels by position: median run time, exposed time and lead (start minus the
    previous kernel's end) over the middle layers of every step with the most common kernel
    count (warm-up steps of other batch buckets left out)."""
    cols = {}
    n_common = statistics.mode(len(st) for st in steps)  # the steps of the case's own batch
    for st in steps:
        if len(st) != n_common:
            continue
        seq = walk(st)
        n_layers = (len(seq) - first) // per_layer
        for layer in range(2, n_layers - 2):
            base = first + layer * per_layer
            for i in range(per_layer):
                k, d, x, lead = seq[base + i]
                c = cols.setdefault(i, {"kind": k, "d": [], "x": [], "lead": []})
                c["d"].append(d)
                c["x"].append(x)
                c["lead"].append(lead)
    if not cols:
        print(f"(no layer of {per_layer} kernels from kernel {first})")
        return
    print(f"\nA layer of {per_layer} kernels (medians, us):")
    print("| # | kernel | run | exposed | lead |")
    print("|---:|---|---:|---:|---:|")
    tot = 0.0
    for i, c in sorted(cols.items()):
        x = statistics.median(c["x"])
        tot += x
        print(f"| {i} | {c['kind']} | {statistics.median(c['d']):.2f} | {x:.2f} | "
              f"{statistics.median(c['lead']):.2f} |")
    print(f"| | (sum of exposed) | | {tot:.2f} | |")


if __name__ == "__main__":
    main()
