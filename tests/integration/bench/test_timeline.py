#!/usr/bin/env python3
"""tests/gpu/timeline.py against a synthetic ktrace CSV whose timings are known: four graph
replays of three kernels (two overlapping, as programmatic dependent launch lets them) and an
eager kernel outside the graphs; the summary must count each overlap once, leave out the
eager kernel and the first --skip steps (or keep only the last --last ones), keep the decode
GEMM's template arguments, and refuse a trace without graph kernels."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "gpu", "timeline.py")
GEMM = "_Z15gemm_dec_kernelI9dec_shapeILi16ELi64ELi128ELi1ELi4ELi4ELi2ELb0ELi4EELb1ELb1EEv8dec_args"
NORM = "_Z18add_rmsnorm_kernelILi8ELi4ELi256ELb1EEvP13__nv_bfloat16S1_PKS0_S3_iifi10k_dec_part"
ATTN = "_Z10dec_kernelILi128ELi1EEv15k_attn_dec_args"


def trace(path):
    rows = ["start_ns,end_ns,grid_x,grid_y,grid_z,block_x,dyn_smem,stream,graph,name"]
    t = 1_000_000
    rows.append(f'{t - 500_000},{t - 400_000},1,1,1,32,0,7,0,"{NORM}"')  # eager: left out
    for step in range(4):
        slow = 2 if step == 0 else 1  # the first step (skipped) twice as long
        g0, g1 = t, t + 10_000 * slow  # GEMM 10 us
        n0, n1 = g1 - 2_000, g1 + 3_000  # norm starts 2 us before the GEMM ends: 3 us exposed
        a0, a1 = n1 + 1_000, n1 + 6_000  # attention after a 1 us gap: 5 us exposed
        rows += [f'{g0},{g1},132,1,1,128,0,7,3,"{GEMM}"', f'{n0},{n1},1,1,1,256,0,7,3,"{NORM}"',
                 f'{a0},{a1},8,8,1,128,0,7,3,"{ATTN}"']
        t = a1 + 100_000  # the idle gap between replays
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def main():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "tl.csv")
        trace(p)
        r = subprocess.run([sys.executable, TOOL, p, "--skip", "1"], capture_output=True,
                           text=True)
        out = r.stdout
        print(out, r.stderr)
        assert r.returncode == 0, r.returncode
        assert "3 steps" in out and "median span 19.0 us" in out, out
        lines = {l.split("|")[1].strip(): l for l in out.splitlines() if l.startswith("| ")}
        gemm = [k for k in lines if k.startswith("gemm_dec_kernel<")]
        assert len(gemm) == 1 and "dec_shape<16, 64, 128" in gemm[0], lines.keys()
        assert "| 10.0 |" in lines[gemm[0]], lines[gemm[0]]
        assert "| 3.0 |" in lines["add_rmsnorm_kernel"], lines  # overlap counted once
        att = [k for k in lines if k.startswith("dec_kernel<")]
        assert len(att) == 1 and "| 5.0 |" in lines[att[0]], lines
        assert "| 18.0 |" in lines["(sum of medians)"], lines
        # --last: only the last N steps (the slow first one out without --skip)
        r = subprocess.run([sys.executable, TOOL, p, "--skip", "0", "--last", "2"],
                           capture_output=True, text=True)
        assert r.returncode == 0 and "2 steps" in r.stdout, r
        assert "median span 19.0 us" in r.stdout, r.stdout
        with open(p, "w") as f:
            f.write("start_ns,end_ns,grid_x,grid_y,grid_z,block_x,dyn_smem,stream,graph,name\n"
                    f'1,2,1,1,1,1,0,7,0,"{NORM}"\n')
        r = subprocess.run([sys.executable, TOOL, p], capture_output=True, text=True)
        assert r.returncode != 0 and "no kernels launched from graphs" in r.stderr, r
    print("timeline_summary: ok")


if __name__ == "__main__":
    main()
