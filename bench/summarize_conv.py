#!/usr/bin/env python3
"""Ratios from tools/perf.sh logs (perf.txt): for each shape list and math mode, nnprim's
GPU time over PyTorch's per pass (fwd, bwd-data, bwd-filter), and nnprim's forward over the same
plan run through raw cuDNN. Prints Markdown.

nnprim's times come from the first `=== bench_conv_LIST_MATH` block of the first log. PyTorch's
come from every `=== torch_conv_LIST_MATH` block of all the logs: PyTorch's benchmark mode can
pick a different algorithm in each process, so per shape and pass the fastest of its runs is
taken (the strictest comparison), and the spread between its runs is printed.

usage: python3 bench/summarize_conv.py NNPRIM_LOG [MORE_LOGS...]
"""
import math
import re
import sys


def sections(path):
    """{block name: [rows of each block of that name, in order]}"""
    out, name, rows = {}, None, []
    for line in open(path):
        m = re.match(r"=== (\S+):", line)
        if m:
            if name:
                out.setdefault(name, []).append(rows)
            name, rows = m.group(1), []
        elif name and re.match(r"\s*[0-9.]+\s", line):
            parts = line.split()
            nums = []
            for p in parts:
                try:
                    nums.append(float(p))
                except ValueError:
                    break
            rows.append((nums, " ".join(parts[len(nums):])))
    if name:
        out.setdefault(name, []).append(rows)
    return out


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def fastest_runs(runs):
    """{shape: per-pass minimum over runs of PyTorch's 3 GPU times}, and the largest ratio between
    two runs' times of one shape and pass."""
    by_shape = {}
    for rows in runs:
        for nums, shape in rows:
            by_shape.setdefault(shape, []).append(nums[:3])
    best, spread = {}, 1.0
    for shape, all_nums in by_shape.items():
        best[shape] = [min(n[k] for n in all_nums) for k in range(3)]
        for k in range(3):
            spread = max(spread, max(n[k] for n in all_nums) / best[shape][k])
    return best, spread


def main(paths):
    first = sections(paths[0])
    torch_runs = {}
    for p in paths:
        for name, blocks in sections(p).items():
            if name.startswith("torch_conv_"):
                torch_runs.setdefault(name, []).extend(blocks)
    for lst, math_mode in (("resnet50", "strict"), ("resnet50", "tf32"), ("deepbench", "strict")):
        ours = first.get(f"bench_conv_{lst}_{math_mode}", [None])[0]
        theirs = torch_runs.get(f"torch_conv_{lst}_{math_mode}")
        if not ours or not theirs:
            continue
        torch_by_shape, spread = fastest_runs(theirs)
        print(f"\n### {lst}, {math_mode}\n")
        print(f"PyTorch: the fastest of {len(theirs)} run(s) per shape and pass; its runs differ by "
              f"up to {spread:.2f}x.\n")
        print("| shape | fwd nnprim/torch | bwd-data nnprim/torch | bwd-filter nnprim/torch | fwd nnprim/raw cuDNN |")
        print("|---|---|---|---|---|")
        ratios, rows = [[], [], [], []], []
        for nums, shape in ours:
            t = torch_by_shape.get(shape)
            if not t:
                continue
            r = [nums[0] / t[0], nums[1] / t[1], nums[2] / t[2], nums[0] / nums[4]]
            for k in range(4):
                ratios[k].append(r[k])
            rows.append((r, shape))
            print(f"| `{shape}` | " + " | ".join(f"{x:.2f}" for x in r) + " |")
        g = [geomean(x) for x in ratios]
        wins = [sum(1 for x in col if x <= 1.0) for col in ratios[:3]]
        n = len(ratios[0])
        print(f"| **geometric mean** ({n} shapes) | **{g[0]:.3f}** | **{g[1]:.3f}** | **{g[2]:.3f}** | **{g[3]:.3f}** |")
        print(f"\nnnprim at or below PyTorch: fwd {wins[0]}/{n}, bwd-data {wins[1]}/{n}, bwd-filter {wins[2]}/{n}.")
        passes = ("fwd", "bwd-data", "bwd-filter")
        over = [f"{passes[k]} of `{shape}` {r[k]:.2f}" for r, shape in rows for k in range(3)
                if r[k] > 1.03]
        print("More than 3% above PyTorch: " + ("; ".join(over) if over else "none") + ".")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
