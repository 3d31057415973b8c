#!/usr/bin/env python3
"""PyTorch's F.linear on the shapes of `nnprim bench linear` (cli/bench_linear.c), timed the same
way: CUDA events around each pass, median of many repetitions after warm-up, TFLOP/s with the same
count (2 m in out per product: one for forward, three for forward+backward, which computes dx, dw
and db as nnprim's does). Rows print in nnprim's columns and case names, so the two tables line up
row by row (impl "torch" where nnprim prints "nnprim" and "cublaslt").

Strict fp32 (the default) turns TF32 off for matmuls; --tf32 allows it, as nnprim's --tf32 context
math mode does.

--nnprim LIB also times nnprim's nn_linear_forward/backward in this process, through ctypes
(tools/torch_parity.py's mirrors), on the same tensors and on one stream (a new one, PyTorch's
current stream from then on), the two sides taking turns call by call (who goes first
alternates). It prints nnprim's row after PyTorch's and the ratio nnprim / torch of the two
medians: a ratio from one run, in which both sides meet the same clocks and the same cache state,
unlike two processes run one after the other.

usage: python3 bench/torch_linear.py [--tf32] [--dtype f32|f16|bf16|f64] [--reps N] [--warmup N]
                                     [--nnprim LIB]
"""
import argparse
import ctypes
import os
import statistics
import sys

import torch
import torch.nn.functional as F

# (x's leading dims, in, out): the LSTM LM head, the classifier's last layer, a square layer.
SHAPES = [((20, 35), 650, 10000), ((64,), 512, 10), ((4096,), 4096, 4096)]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}


def time_us(fn, start, stop):
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e3


def median_us(fns, warmup, reps):
    """The median time of each of fns, called in turns (the first of a turn alternates)."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = [[] for _ in fns]
    for i in range(warmup + reps):
        order = range(len(fns)) if i % 2 == 0 else reversed(range(len(fns)))
        for k in order:
            t = time_us(fns[k], start, stop)
            if i >= warmup:
                times[k].append(t)
    return [statistics.median(t) for t in times]


class Nnprim:
    """nnprim's linear on torch tensors, on torch's current stream (ctypes, tools/torch_parity.py)."""

    def __init__(self, path, tf32):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
        import torch_parity as tp
        self.lib = tp.Lib(path)
        math = tp.C["NN_MATH_TF32" if tf32 else "NN_MATH_STRICT_FP32"]
        self.ctx = self.lib.context("cudnn", torch.cuda.current_device(),
                                    stream=torch.cuda.current_stream().cuda_stream,
                                    math_mode=math)
        self.p = tp.LinearParams()
        self.lib("nn_linear_params_default", ctypes.byref(self.p))
        self.dtypes = {torch.float32: tp.C["NN_DTYPE_F32"], torch.float64: tp.C["NN_DTYPE_F64"],
                       torch.float16: tp.C["NN_DTYPE_F16"], torch.bfloat16: tp.C["NN_DTYPE_BF16"]}

    def wrap(self, t):
        """An nn_tensor viewing t's memory (kept by the caller)."""
        return ctypes.byref(self.lib.wrap(self.ctx, t.data_ptr(), t.shape, None,
                                          self.dtypes[t.dtype]))

    def passes(self, x, w, b, dy):
        """nnprim's forward and forward+backward on these tensors (dx, dw, db overwritten)."""
        lib, ctx, p = self.lib, self.ctx, ctypes.byref(self.p)
        y = torch.empty(dy.shape, device="cuda", dtype=dy.dtype)
        grads = [torch.empty_like(t) for t in (x, w, b)]
        tx, tw, tb, ty, tdy = (self.wrap(t) for t in (x, w, b, y, dy))
        tg = [self.wrap(g) for g in grads]
        self.keep = (y, grads)

        def fwd():
            lib("nn_linear_forward", ctx, p, tx, tw, tb, ty, None)

        def fwdbwd():
            pb = ctypes.c_void_p()
            lib("nn_linear_forward", ctx, p, tx, tw, tb, ty, ctypes.byref(pb))
            lib("nn_linear_backward", ctx, ctypes.byref(pb), tdy, *tg)

        return fwd, fwdbwd

    def close(self):
        self.lib.dll.nn_ctx_destroy(self.ctx)


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
    ap.add_argument("--nnprim", metavar="LIB", help="time libnnprim.so's linear too, in turns")
    a = ap.parse_args()
    dt = DTYPES[a.dtype]
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.set_float32_matmul_precision("high" if a.tf32 else "highest")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{'TF32' if a.tf32 else 'strict fp32'} matmuls, CUDA events, median of {a.reps} after "
          f"{a.warmup} warm-up{', nnprim in turns' if a.nnprim else ''}")
    if a.nnprim:
        # a stream of its own: nnprim's settings take NULL (the legacy stream's handle) for "make
        # one", which would put nnprim's calls outside torch's events
        torch.cuda.set_stream(torch.cuda.Stream())
    nnp = Nnprim(a.nnprim, a.tf32) if a.nnprim else None
    print(f"{'case':34} {'pass':8} {'impl':9} {'us':>10} {'TFLOP/s':>8}"
          f"{' nnprim/torch' if nnp else ''}")
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
        theirs = nnp.passes(x.detach(), w.detach(), b.detach(), dy) if nnp else ()
        for backward in (False, True):
            fns = [fwdbwd if backward else fwd] + ([theirs[backward]] if nnp else [])
            us = median_us(fns, a.warmup, a.reps)
            flops = 2.0 * m * n_in * n_out * (3 if backward else 1)
            for impl, t in zip(("torch", "nnprim"), us):
                print(f"{name:34} {'fwd+bwd' if backward else 'fwd':8} {impl:9} {t:10.1f} "
                      f"{flops / t * 1e-6:8.1f}"
                      f"{'' if impl == 'torch' else f' {t / us[0]:12.3f}'}")
    if nnp:
        nnp.close()


if __name__ == "__main__":
    main()
