#!/usr/bin/env python3
"""Which CUDA kernels PyTorch runs for each convolution pass, and their mean GPU time (from
torch.profiler), for the shapes `nnprim bench conv` takes: to see whether PyTorch and nnprim run
the same cuDNN kernel where their times differ (nnprim's kernels: run it under ncu, e.g.
`ncu --print-summary per-kernel nnprim bench conv --shapes FILE --reps 5`).

    python3 bench/torch_kernels.py --shapes FILE [--math strict|tf32]

Settings as in bench/torch_conv.py (cudnn.benchmark=True); each pass runs 5 times unprofiled
(PyTorch's algorithm search), then 20 times under the profiler.
"""
import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_conv as tc  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--math", choices=["strict", "tf32"], default="strict")
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = a.math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = a.math == "tf32"
    dev = torch.device("cuda")
    with open(a.shapes) as f:
        for line in f:
            c = tc.parse_case(line)
            if c is None:
                continue
            fns, _ = tc.build(c, dev)
            for name, fn in fns.items():
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as p:
                    for _ in range(20):
                        fn()
                    torch.cuda.synchronize()
                print(f"## {tc.case_text(c)} {name}")
                for e in p.key_averages():
                    if e.device_type.name == "CUDA" or getattr(e, "device_time_total", 0) > 0:
                        n = max(e.count, 1)
                        print(f"   {e.count:4d} x {e.device_time_total / n:9.2f} us  {e.key[:160]}")


if __name__ == "__main__":
    main()
