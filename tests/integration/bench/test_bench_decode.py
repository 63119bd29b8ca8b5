#!/usr/bin/env python3
"""bench/bench_decode.py (the decode comparison the GPU machine runs) end to end on the CPU
backend with the tiny shape: the mkmodel and ours stages run `nanoserve bench` with graphs on
and off, and at transformers' batch, prompt and decode steps; the report's table carries the
first two, its comparison row divides nanoserve's tok/s (of both kinds) by a transformers
result placed in the results folder, a failed run shows its exit status, and
--results appends the report to a Markdown file as its newest section, keeping what the file
held. Usage: test_bench_decode.py NANOSERVE_BINARY"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "bench", "bench_decode.py")


def bench_decode(*args):
    r = subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True,
                       timeout=240)
    print("$ bench_decode.py %s -> %d\n%s%s" % (" ".join(args), r.returncode, r.stdout,
                                                  r.stderr[-3000:]))
    return r


def rows_of(text, first):
    """table rows of text whose first cell is first, as lists of cells"""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] == first:
            out.append(cells)
    return out


def main():
    ns = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as d:
        scratch = os.path.join(d, "s")
        res = os.path.join(scratch, "results")
        r = bench_decode("--nanoserve", ns, "--scratch", scratch, "--shapes", "tiny",
                         "--backend", "cpu", "--stages", "mkmodel,ours", "--steps", "8",
                         "--warmup", "2", "--commit", "abc1234")
        assert r.returncode == 0, r.returncode
        assert os.path.exists(os.path.join(scratch, "tiny.done"))
        runs = {}
        for g in ("g1", "g0"):
            with open(os.path.join(res, "ours_tiny_b1_%s.json" % g)) as f:
                o = json.load(f)
            assert o["rc"] == 0 and o["bench"], o
            (run,) = o["bench"]["runs"]
            assert run["batch"] == 1 and run["ctx"] == 128 and run["steps"] == 8, run
            assert run["tok_s"] > 0 and run["ms_p50"] > 0, run
            runs[g] = run
        # transformers' batch and prompt over its N - 1 = 63 decode steps (2 of them warm-up)
        with open(os.path.join(res, "ours_tiny_hfctx.json")) as f:
            o = json.load(f)
        assert o["rc"] == 0 and o["hf_ctx"] and o["cuda_graphs"], o
        (same,) = o["bench"]["runs"]
        assert (same["batch"], same["ctx"], same["warmup"], same["steps"]) == (1, 128, 2, 61), same

        # a transformers result as the hf stage writes it (that stage needs torch)
        hf_tok_s = 7.0
        with open(os.path.join(res, "hf_tiny_b1.json"), "w") as f:
            json.dump({"shape": "tiny", "batch": 1, "prompt": 128, "new_tokens": 64, "reps": 3,
                       "t_1_s": 0.2, "t_n_s": 9.2, "tok_s_e2e": 6.96, "tok_s_decode": hf_tok_s,
                       "attn": "eager", "transformers": "0.test", "torch": "0.test",
                       "device": "none", "date": "2026-01-01T00:00:00Z",
                       "command": "hf-worker (test)"}, f)

        book = os.path.join(d, "RESULTS.md")
        old = "# results\n\n## an earlier section\n\nits text"  # no final newline
        with open(book, "w") as f:
            f.write(old)
        r = bench_decode("--scratch", scratch, "--stages", "report", "--commit", "abc1234",
                         "--results", book)
        assert r.returncode == 0, r.returncode
        with open(book) as f:
            text = f.read()
        assert text.startswith(old + "\n\n## Decode speed: `nanoserve bench` vs transformers"), \
            text[:300]
        new = text[len(old):]
        printed = r.stdout.rstrip("\n") + "\n"  # print() adds a newline to the report's own
        assert new == "\n\n" + printed, "the file's new section is not the printed report"
        assert "- commit: abc1234" in new, new
        table = rows_of(new, "tiny")
        mine = [c for c in table if len(c) == 13]
        assert sorted(c[3] for c in mine) == ["false", "true"], table
        for c in mine:
            want = runs["g1" if c[3] == "true" else "g0"]
            assert c[1:3] == ["1", "128"], c
            assert c[4] == "%.3f" % want["ms_p50"] and c[6] == "%.1f" % want["tok_s"], (c, want)
            assert c[9] == "n/a", c  # no copy bandwidth on the CPU backend
        (cmp_row,) = [c for c in table if len(c) == 10]
        assert cmp_row[2] == "128 + 10 / 128 + 64", cmp_row
        assert cmp_row[3] == "%.1f / %.1f" % (runs["g1"]["tok_s"], runs["g0"]["tok_s"]), cmp_row
        assert cmp_row[5] == "7.0" and cmp_row[6] == "7.0", cmp_row
        assert cmp_row[7] == "%.2fx" % (runs["g1"]["tok_s"] / hf_tok_s), cmp_row
        assert cmp_row[8] == "%.1f (128 + 2 + 61)" % same["tok_s"], cmp_row
        assert cmp_row[9] == "%.2fx" % (same["tok_s"] / hf_tok_s), cmp_row

        # appended again: a second section after the first, the first unchanged
        r = bench_decode("--scratch", scratch, "--stages", "report", "--commit", "def5678",
                         "--results", book)
        assert r.returncode == 0, r.returncode
        with open(book) as f:
            again = f.read()
        assert again.startswith(text.rstrip("\n") + "\n\n## Decode speed"), again[-400:]
        assert again.count("## Decode speed") == 2 and again.endswith(r.stdout.rstrip("\n") + "\n")

        # a nanoserve bench that fails: its runs show the exit status, not figures
        bad = os.path.join(d, "bad")
        os.makedirs(bad)
        os.symlink(os.path.join(scratch, "tiny"), os.path.join(bad, "tiny"))
        open(os.path.join(bad, "tiny.done"), "w").close()
        failing = os.path.join(d, "fails.sh")
        with open(failing, "w") as f:
            f.write("#!/bin/sh\necho 'no device' >&2\nexit 3\n")
        os.chmod(failing, 0o755)
        r = bench_decode("--nanoserve", failing, "--scratch", bad, "--shapes", "tiny",
                         "--backend", "cpu", "--stages", "ours,report", "--commit", "x")
        assert r.returncode == 0, r.returncode
        assert "nanoserve bench failed (3)" in r.stderr, r.stderr
        failed = rows_of(r.stdout, "tiny")
        assert sorted(c[3] for c in failed) == ["false", "true"], failed  # no hfctx row here
        assert all(c[4] == "exit 3" and c[1] == "" for c in failed), failed
        # a checkpoint made before this run (no mkmodel stage here) is still named
        assert "--seed 1` for S in tiny (" in r.stdout, r.stdout[:600]

        # refusals: --results without the report stage, or into a missing folder
        r = bench_decode("--scratch", scratch, "--stages", "hf", "--results", book)
        assert r.returncode == 2 and "--results needs the report stage" in r.stderr, r.stderr
        r = bench_decode("--scratch", scratch, "--stages", "report", "--results",
                         os.path.join(d, "nope", "R.md"))
        assert r.returncode == 2 and "no such folder" in r.stderr, r.stderr
        with open(book) as f:
            assert f.read() == again, "a refused call changed the file"
    print("bench_decode.py: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
