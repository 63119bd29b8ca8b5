#!/usr/bin/env python3
"""tests/gpu/ncu_stall.py LOG: one line per profiled launch of an `ncu --metrics` log written by
run_on_device.sh's ncu-stall stage (or of the ncu-gemm / ncu-step full reports, whose added
metrics are the stall reasons): the kernel, then each metric as name=value (stall reasons as
cycles a warp waited per issued instruction, those under 0.1 left out; other values with ncu's
unit)."""
import re
import sys

STALL = "smsp__average_warps_issue_stalled_"


def main(path):
    kernel, vals = None, []

    def flush():
        if kernel:
            print("==", kernel)
            print("  " + "  ".join(vals))

    for line in open(path, errors="replace"):
        if "Context" in line and "(" in line:
            flush()
            kernel = re.sub(r"\((k_|dec_args|__nv).*?\)", "", line.strip())[:110]
            vals = []
            continue
        m = re.match(r"\s+(\S+)\s+(\S*)\s+([\d.,]+)$", line)
        if not (m and kernel):
            continue
        name, unit, v = m.groups()
        v = float(v.replace(",", ""))
        if name.startswith(STALL):
            if v < 0.1:
                continue
            name = "stall_" + name[len(STALL):].replace("_per_issue_active.ratio", "")
        vals.append("%s=%g%s" % (name, v, "" if unit in ("", "inst", "warp") else " " + unit))
    flush()


if __name__ == "__main__":
    main(sys.argv[1])
