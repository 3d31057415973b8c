#!/usr/bin/env python3
"""PyTorch's F.linear on the shapes of `nnprim bench linear` (cli/bench_linear.c), timed the same
way: CUDA events around each pass, median of many repetitions after warm-up, TFLOP/s with the same
count (2 m in out per product: one for forward, three for forward+backward, which computes dx, dw
and db as nnprim's does). Rows print in nnprim's columns and case names, so the two tables line up
row by row (impl "torch" where nnprim prints "nnprim" and "cublaslt").

Strict fp32 (the default) turns TF32 off for matmuls; --tf32 allows it, as nnprim's --tf32 context
math mode does.

usage: python3 bench/torch_linear.py [--tf32] [--dtype f32|f16|bf16|f64] [--reps N] [--warmup N]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

# (x's leading dims, in, out): the LSTM LM head, the classifier's last layer, a square layer.
SHAPES = [((20, 35), 650, 10000), ((64,), 512, 10), ((4096,), 4096, 4096)]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}


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


def case_name(lead, n_in, n_out, dtype, tf32):
    """nnprim's case text (nn_linear_case_format): m20x35in650out10000 bias f32 [tf32]."""
    name = "m" + "x".join(map(str, lead)) + f"in{n_in}out{n_out} bias {dtype}"
    return name + (" tf32" if tf32 and dtype == "f32" else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tf32", action="store_true", help="allow TF32 in f32 matmuls")
    ap.add_argument("--dtype", choices=DTYPES, default="f32")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    a = ap.parse_args()
    dt = DTYPES[a.dtype]
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.set_float32_matmul_precision("high" if a.tf32 else "highest")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{'TF32' if a.tf32 else 'strict fp32'} matmuls, CUDA events, median of {a.reps} after "
          f"{a.warmup} warm-up")
    print(f"{'case':34} {'pass':8} {'impl':9} {'us':>10} {'TFLOP/s':>8}")
    for lead, n_in, n_out in SHAPES:
        m = 1
        for d in lead:
            m *= d
        x = torch.empty(*lead, n_in, device="cuda", dtype=dt).uniform_(-1, 1)
        w = torch.empty(n_out, n_in, device="cuda", dtype=dt).uniform_(-1, 1)
        b = torch.empty(n_out, device="cuda", dtype=dt).uniform_(-1, 1)
        dy = torch.empty(*lead, n_out, device="cuda", dtype=dt).uniform_(-1, 1)
        x.requires_grad_(True)
        w.requires_grad_(True)
        b.requires_grad_(True)

        def fwd():
            with torch.no_grad():
                return F.linear(x, w, b)

        def fwdbwd():
            x.grad = w.grad = b.grad = None  # overwritten, as nnprim's dx, dw, db are
            y = F.linear(x, w, b)
            y.backward(dy)

        name = case_name(lead, n_in, n_out, a.dtype, a.tf32)
        for backward in (False, True):
            us = median_us(fwdbwd if backward else fwd, a.warmup, a.reps)
            flops = 2.0 * m * n_in * n_out * (3 if backward else 1)
            print(f"{name:34} {'fwd+bwd' if backward else 'fwd':8} {'torch':9} {us:10.1f} "
                  f"{flops / us * 1e-6:8.1f}")


if __name__ == "__main__":
    main()
