#!/usr/bin/env python3
"""dec_trace.py — read the per-block timeline a k_gemm_dec built with NANOSERVE_DEC_TRACE
wrote ($NS_DEC_TRACE) and print, per decode GEMM call shape, where a call's time goes:
blocks arriving, the programmatic-launch wait, the first item, items, the split counts and
the reduce, and the hand-off from the previous call. Times in microseconds, medians over the
call's runs after the first --skip ones (graph replays repeat a call's number).

  dec_trace.py TRACE [--skip N] [--show K]
"""
import argparse
import statistics
import struct
import sys

EV = ["entry", "issued", "waited", "item", "counted", "exit"]
BW = 4.28e12  # bytes/s, the H200's measured copy bandwidth (bench/RESULTS.md)


def load(path):
    raw = open(path, "rb").read()
    if raw[:4] != b"NSDT":
        sys.exit("dec_trace: %s is not a k_gemm_dec trace" % path)
    ncall, nrec = struct.unpack_from("<II", raw, 4)
    off = 12
    calls = {}
    for i in range(ncall):
        f = struct.unpack_from("<I8i", raw, off + 36 * i)
        calls[f[0]] = dict(zip(["T", "N", "K", "S", "nseg", "items", "grid", "split"], f[1:]))
    off += 36 * ncall
    rec = list(struct.iter_unpack("<QIHBB", raw[off:off + 16 * nrec]))
    return calls, rec


def runs(rec):
    """[(seq, records)] of every run of a call, in time order: a call's records split where
    they pause (graph replays repeat a call's number)."""
    by = {}
    for r in rec:
        by.setdefault(r[1], []).append(r)
    out = []
    for seq, lst in by.items():
        lst.sort()
        cur = [lst[0]]
        for r in lst[1:]:
            if r[0] - cur[-1][0] > 200_000:
                out.append((seq, cur))
                cur = []
            cur.append(r)
        out.append((seq, cur))
    out.sort(key=lambda x: x[1][0][0])
    return out


def med(v):
    return statistics.median(v) if v else float("nan")


def measure(part):
    t0 = part[0][0]
    us = lambda t: (t - t0) / 1000.0
    ev = {i: [r for r in part if r[3] == i] for i in range(len(EV))}
    m = {"blocks": len(ev[0])}
    m["arrive"] = us(max(r[0] for r in ev[0])) if ev[0] else 0.0
    m["wait0"] = us(min(r[0] for r in ev[2])) if ev[2] else 0.0
    m["wait1"] = us(max(r[0] for r in ev[2])) if ev[2] else 0.0
    w = {r[2]: r[0] for r in ev[2]}
    items = {}
    for r in ev[3]:
        items.setdefault(r[2], []).append(r[0])
    first, step, last = [], [], []
    for b, ts in items.items():
        ts.sort()
        if b in w:
            first.append((ts[0] - w[b]) / 1000.0)
        step.extend((y - x) / 1000.0 for x, y in zip(ts, ts[1:]))
        last.append(ts[-1])
    m["first_item"] = med(first)
    m["first_item_max"] = max(first) if first else float("nan")
    m["item_step"] = med(step)
    m["last_item"] = us(max(last)) if last else float("nan")
    m["counted"] = us(max(r[0] for r in ev[4])) if ev[4] else m["last_item"]
    m["exit"] = us(max(r[0] for r in ev[5])) if ev[5] else float("nan")
    m["t_end"] = part[-1][0]
    m["t_wait0"] = t0 + int(m["wait0"] * 1000)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--skip", type=int, default=2, help="runs of each call left out (warm-up)")
    ap.add_argument("--show", type=int, default=8, help="consecutive calls shown one by one")
    a = ap.parse_args()
    calls, rec = load(a.trace)
    rs = runs(rec)
    print("dec_trace: %d calls, %d records, %d runs" % (len(calls), len(rec), len(rs)))
    seen, ms = {}, []
    prev_end = None
    for seq, part in rs:
        m = measure(part)
        m["seq"] = seq
        m["gap"] = (m["t_wait0"] - prev_end) / 1000.0 if prev_end else float("nan")
        prev_end = m["t_end"]
        seen[seq] = seen.get(seq, 0) + 1
        if seen[seq] > a.skip:
            ms.append(m)
    cols = ["blocks", "arrive", "wait0", "wait1", "first_item", "first_item_max", "item_step",
            "last_item", "counted", "exit", "gap"]
    print("\nper call shape, medians (us from the call's first block entry; gap: from the "
          "previous call's last record to this call's first wait release)")
    print("| T | N | K | S | nseg | items | grid | MB | ideal | " + " | ".join(cols) +
          " | exit-wait0 |")
    print("|" + "---|" * (len(cols) + 10))
    shapes = {}
    for m in ms:
        c = calls.get(m["seq"])
        if c:
            shapes.setdefault((c["T"], c["N"], c["K"]), []).append(m)
    for (T, N, K), lst in sorted(shapes.items()):
        c = calls[lst[0]["seq"]]
        mb = N * K * 2 / 1e6
        md = {k: med([x[k] for x in lst if x[k] == x[k]]) for k in cols}
        post = med([x["exit"] - x["wait0"] for x in lst])
        print("| %d | %d | %d | %d | %d | %d | %d | %.1f | %.2f | " %
              (T, N, K, c["S"], c["nseg"], c["items"], c["grid"], mb, N * K * 2 / BW * 1e6) +
              " | ".join("%.2f" % md[k] for k in cols) + " | %.2f |" % post)
    if ms and a.show:
        mid = len(ms) // 2
        print("\n%d consecutive calls from the middle of the run" % a.show)
        for m in ms[mid:mid + a.show]:
            c = calls.get(m["seq"], {})
            print("seq %6d N %6d K %6d: arrive %6.2f wait %6.2f..%6.2f first item +%5.2f "
                  "(max +%5.2f) item step %5.2f last item %6.2f counted %6.2f exit %6.2f "
                  "gap %6.2f" % (m["seq"], c.get("N", 0), c.get("K", 0), m["arrive"],
                                 m["wait0"], m["wait1"], m["first_item"], m["first_item_max"],
                                 m["item_step"], m["last_item"], m["counted"], m["exit"],
                                 m["gap"]))


if __name__ == "__main__":
    main()
