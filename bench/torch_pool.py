#!/usr/bin/env python3
"""PyTorch's max_pool2d / avg_pool2d on the shapes of `nnprim bench pool`, timed the same way:
CUDA events around each step, median of many repetitions after warm-up, achieved GB/s with the
same byte counts (forward x + y; forward+backward max 3(x + y), mean 2(x + y)).

usage: python3 bench/torch_pool.py [--reps N] [--warmup N] [--dtype f32|f16|bf16]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

SHAPES = [((32, 64, 112, 112), 3, 2), ((32, 256, 56, 56), 2, 2)]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def step(mode, x, k, s, dy, backward):
    pool = F.max_pool2d if mode == "max" else F.avg_pool2d
    if not backward:
        with torch.no_grad():
            return pool(x, k, s)
    x.grad = None
    y = pool(x, k, s)
    y.backward(dy)
    return y


def median_us(fn, warmup, reps):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warmup + reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--dtype", choices=DTYPES, default="f32")
    a = ap.parse_args()
    dt = DTYPES[a.dtype]
    torch.backends.cudnn.benchmark = False
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {a.dtype}, CUDA events, "
          f"median of {a.reps} after {a.warmup} warm-up")
    print(f"{'shape':24} {'mode':5} {'pass':8} {'impl':12} {'us':>10} {'GB/s':>9}")
    for dims, k, s in SHAPES:
        x = torch.empty(dims, device="cuda", dtype=dt).uniform_(-1, 1).requires_grad_(True)
        with torch.no_grad():
            y = F.max_pool2d(x, k, s)
        dy = torch.empty_like(y).uniform_(-1, 1)
        es = x.element_size()
        nx, ny = x.numel() * es, y.numel() * es
        name = "x".join(map(str, dims)) + f"/{k}/s{s}"
        for mode in ("max", "mean"):
            for backward in (False, True):
                us = median_us(lambda: step(mode, x, k, s, dy, backward), a.warmup, a.reps)
                nbytes = nx + ny if not backward else (3 if mode == "max" else 2) * (nx + ny)
                print(f"{name:24} {mode:5} {'fwd+bwd' if backward else 'fwd':8} "
                      f"{'torch':12} {us:10.1f} {nbytes / us * 1e-3:9.2f}")


if __name__ == "__main__":
    main()
