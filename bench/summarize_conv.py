#!/usr/bin/env python3
"""Ratios from one tools/gpu-run.sh log (bench.txt): for each shape list and math mode, nnprim's
GPU time over PyTorch's per pass (fwd, bwd-data, bwd-filter), nnprim's forward over the same plan
run through raw cuDNN, and the host time per cached call. Prints Markdown.

usage: python3 bench/summarize_conv.py BENCH_TXT
"""
import math
import re
import sys


def sections(path):
    out, name, rows = {}, None, []
    for line in open(path):
        m = re.match(r"=== (\S+):", line)
        if m:
            if name:
                out[name] = rows
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
        out[name] = rows
    return out


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(path):
    s = sections(path)
    for lst, math_mode in (("resnet50", "strict"), ("resnet50", "tf32"), ("deepbench", "strict")):
        ours = s.get(f"bench_conv_{lst}_{math_mode}")
        theirs = s.get(f"torch_conv_{lst}_{math_mode}")
        if not ours or not theirs:
            continue
        torch_by_shape = {shape: nums for nums, shape in theirs}
        print(f"\n### {lst}, {math_mode}\n")
        print("| shape | fwd nnprim/torch | bwd-data nnprim/torch | bwd-filter nnprim/torch | fwd nnprim/raw cuDNN |")
        print("|---|---|---|---|---|")
        ratios = [[], [], [], []]
        for nums, shape in ours:
            t = torch_by_shape.get(shape)
            if not t:
                continue
            r = [nums[0] / t[0], nums[1] / t[1], nums[2] / t[2], nums[0] / nums[4]]
            for k in range(4):
                ratios[k].append(r[k])
            print(f"| `{shape}` | " + " | ".join(f"{x:.2f}" for x in r) + " |")
        g = [geomean(x) for x in ratios]
        wins = [sum(1 for x in col if x <= 1.0) for col in ratios[:3]]
        n = len(ratios[0])
        print(f"| **geometric mean** ({n} shapes) | **{g[0]:.3f}** | **{g[1]:.3f}** | **{g[2]:.3f}** | **{g[3]:.3f}** |")
        print(f"\nnnprim at or below PyTorch: fwd {wins[0]}/{n}, bwd-data {wins[1]}/{n}, bwd-filter {wins[2]}/{n}.")


if __name__ == "__main__":
    main(sys.argv[1])
