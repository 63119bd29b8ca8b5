#!/usr/bin/env python3
"""tests/gpu/dec_trace.py against a synthetic decode-GEMM trace whose timings are known: two
calls (a split one and a whole-K one), three runs each (graph replays of the same call
numbers), blocks entering, waiting, finishing items, counting and leaving at set offsets;
the summary must give those offsets back, leave out the first --skip runs, and refuse a file
that is not a trace."""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "gpu", "dec_trace.py")

# seq, T, N, K, S, nseg, items, grid, split
CALLS = [(7, 1, 2048, 2048, 256, 8, 512, 256, 1), (8, 1, 32000, 2048, 2048, 1, 500, 250, 0)]


def records(run):
    """Per call of one run: (ts_ns, seq, block, ev, sm). Offsets in ns from the run's start;
    runs 0 and 1 (warm-up) take 2 us an item instead of 1, so that --skip 2 shows."""
    out, t = [], 1_000_000_000 + run * 5_000_000
    step = 2000 if run < 2 else 1000
    for seq, T, N, K, S, nseg, items, grid, split in CALLS:
        for b in range(grid):
            e = t + (b % 4) * 100  # the last block enters at +300
            out += [(e, seq, b, 0, b % 132), (e + 50, seq, b, 1, b % 132)]
            w = t + 2000 + (b % 2) * 200  # waits released at +2000 .. +2200
            out.append((w, seq, b, 2, b % 132))
            n = (items - b + grid - 1) // grid
            for i in range(n):  # first item 1500 after the wait, then one each step
                out.append((w + 1500 + step * i, seq, b, 3, b % 132))
            end = w + 1500 + step * (n - 1)
            if split:
                out.append((end + 400, seq, b, 4, b % 132))
                end += 400
            out.append((end + 600, seq, b, 5, b % 132))
        t += 20_000  # the next call's first entry
    return out


def write(path, recs, magic=b"NSDT"):
    with open(path, "wb") as f:
        f.write(magic + struct.pack("<II", len(CALLS), len(recs)))
        for c in CALLS:
            f.write(struct.pack("<I8i", *c))
        for r in recs:
            f.write(struct.pack("<QIHBB", *r))


def main():
    fails = 0

    def check(what, ok, detail=""):
        nonlocal fails
        print("%s %s %s" % ("ok  " if ok else "FAIL", what, detail))
        fails += not ok

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.bin")
        recs = []
        for run in range(3):
            recs += records(run)
        write(path, recs)
        p = subprocess.run([sys.executable, TOOL, path, "--skip", "2", "--show", "2"],
                           capture_output=True, text=True)
        check("exit 0", p.returncode == 0, p.stderr.strip())
        out = p.stdout
        check("runs found", "2 calls, %d records, 6 runs" % len(recs) in out, out[:80])
        rows = {}
        for line in out.splitlines():
            f = [x.strip() for x in line.strip("|").split("|")]
            if len(f) == 21 and f[0] == "1":
                rows[int(f[1])] = f
        check("one row per shape", sorted(rows) == [2048, 32000], str(sorted(rows)))
        if sorted(rows) == [2048, 32000]:
            s, w = rows[2048], rows[32000]
            # columns: T N K S nseg items grid MB ideal blocks arrive wait0 wait1 first_item
            # first_item_max item_step last_item counted exit gap exit-wait0
            # two items a block: the last at 2200 + 1500 + 1000, counted 400 later, out 600 later
            exp_s = {9: "256.00", 10: "0.30", 11: "2.00", 12: "2.20", 13: "1.50", 14: "1.50",
                     15: "1.00", 16: "4.70", 17: "5.10", 18: "5.70", 20: "3.70"}
            for i, v in exp_s.items():
                check("split call column %d" % i, s[i] == v, "%s != %s" % (s[i], v))
            check("whole-K call: no counts, exit after the last item",
                  w[17] == w[16] and w[18] == "%.2f" % (float(w[16]) + 0.6), str(w[16:19]))
            check("ideal time of the weights", s[8] == "1.96", s[8])
            # the split call's last record is at +5700 ns; the whole-K call's first wait
            # release 20000 + 2000 after the split call's first entry
            check("gap from the previous call", w[19] == "16.30", w[19])
        check("warm-up runs left out", "item step  1.00" in out and "item step  2.00" not in out)
        bad = os.path.join(d, "bad.bin")
        write(bad, recs[:10], magic=b"XXXX")
        p = subprocess.run([sys.executable, TOOL, bad], capture_output=True, text=True)
        check("not a trace: refused", p.returncode != 0 and "not a k_gemm_dec trace" in p.stderr,
              p.stderr.strip())
    print("test_dec_trace: %s" % ("passed" if not fails else "%d failed" % fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
