#!/usr/bin/env python3
"""PyTorch's recurrent training step on the shapes `nnprim bench rnn` runs: eager, and as a CUDA
graph captured by hand (torch.cuda.graphs), in f32 strict, TF32 and bf16.

A training step is the forward in training mode and the backward of y against a fixed dy, which
runs cuDNN's forward, backward-data and backward-weights, as nnprim's step does (no optimizer, no
loss). Wall time per step: steps issued back to back, the host clock from the first step to the
end of a final torch.cuda.synchronize(), divided by the steps. GPU time of one eager forward is
the median of a CUDA event pair around it.

Shapes are docs/RNN.md's syntax (the tokens used by bench/shapes_rnn_*.txt): cell, tTnNiIhH, lL,
uni|bidir, projP, seq|batch, f32|bf16|f16|f64 (ignored: --modes picks the dtypes), tf32 (ignored:
the modes), bias_double (PyTorch's only bias mode). Shapes PyTorch has no equal for (lens..:
variable lengths need a PackedSequence; skip input, single bias modes, clip, dropout) are listed
as skipped.

  python3 bench/torch_rnn.py --shapes bench/shapes_rnn_anchors.txt [--modes f32,tf32,bf16]
                             [--reps 30] [--warmup 5] [--dry-run]

--dry-run parses the shapes and prints what would run without importing torch.
"""
import argparse
import re
import statistics
import sys
import time

CELLS = {"relu": "RNN_RELU", "tanh": "RNN_TANH", "lstm": "LSTM", "gru": "GRU"}
IGNORED = {"uni", "seq", "f32", "f16", "f64", "bf16", "tf32", "bias_double", "acc"}


def parse_shape(line):
    """A dict for one shape line, None for a blank or comment line; raises ValueError."""
    line = line.split("#", 1)[0].strip()
    if not line:
        return None
    if line.startswith("nnprim_verbose,"):  # a whole verbose line: the shape is field 6
        fields = line.split(",")
        if len(fields) < 7:
            raise ValueError("verbose line with fewer than 7 fields")
        line = fields[5]
    tok = line.split()
    if len(tok) < 2 or tok[0] not in CELLS:
        raise ValueError("expected a cell (relu, tanh, lstm, gru) first, got %r" % (tok[:1],))
    m = re.fullmatch(r"t(\d+)n(\d+)i(\d+)h(\d+)", tok[1])
    if not m:
        raise ValueError("expected tTnNiIhH second, got %r" % tok[1])
    s = dict(cell=tok[0], t=int(m[1]), n=int(m[2]), i=int(m[3]), h=int(m[4]), layers=1,
             bidir=False, proj=0, batch_first=False, skip=None, text=line)
    for t in tok[2:]:
        if re.fullmatch(r"l\d+", t):
            s["layers"] = int(t[1:])
        elif t == "bidir":
            s["bidir"] = True
        elif t == "batch":
            s["batch_first"] = True
        elif re.fullmatch(r"proj\d+", t):
            s["proj"] = int(t[4:])
        elif t in IGNORED:
            pass
        elif t.startswith("lens") or t.startswith("clip") or t.startswith("drop") or \
                t in ("skip", "bias_none", "bias_input", "bias_recurrent"):
            s["skip"] = "no PyTorch equal for %r" % t
        else:
            raise ValueError("unknown token %r" % t)
    if s["proj"] and s["cell"] != "lstm":
        raise ValueError("proj needs lstm")
    return s


def read_shapes(path):
    shapes = []
    with open(path) as f:
        for no, line in enumerate(f, 1):
            try:
                s = parse_shape(line)
            except ValueError as e:
                sys.exit("torch_rnn.py: %s:%d: %s" % (path, no, e))
            if s:
                shapes.append(s)
    return shapes


def build(torch, s, dtype):
    nn = torch.nn
    kw = dict(num_layers=s["layers"], bidirectional=s["bidir"], batch_first=s["batch_first"])
    if s["cell"] == "lstm":
        m = nn.LSTM(s["i"], s["h"], proj_size=s["proj"], **kw)
    elif s["cell"] == "gru":
        m = nn.GRU(s["i"], s["h"], **kw)
    else:
        m = nn.RNN(s["i"], s["h"], nonlinearity=s["cell"], **kw)
    m = m.to(device="cuda", dtype=dtype)
    d = 2 if s["bidir"] else 1
    out = s["proj"] or s["h"]
    xs = (s["n"], s["t"], s["i"]) if s["batch_first"] else (s["t"], s["n"], s["i"])
    ys = xs[:2] + (d * out,)
    x = torch.rand(xs, device="cuda", dtype=dtype, requires_grad=True)
    h0 = torch.rand((s["layers"] * d, s["n"], out), device="cuda", dtype=dtype)
    state = h0
    if s["cell"] == "lstm":
        state = (h0, torch.rand((s["layers"] * d, s["n"], s["h"]), device="cuda", dtype=dtype))
    dy = torch.rand(ys, device="cuda", dtype=dtype)
    return m, x, state, dy


def step(torch, m, x, state, dy):
    y, _ = m(x, state)
    torch.autograd.backward([y], [dy])


def wall_us(torch, fn, reps, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e6


def fwd_gpu_us(torch, m, x, state, reps):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(reps)]
    with torch.no_grad():
        for a, b in ev:
            a.record()
            m(x, state)
            b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in ev)


def run_shape(torch, s, mode, reps, warmup):
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    dtype = torch.bfloat16 if mode == "bf16" else torch.float32
    m, x, state, dy = build(torch, s, dtype)
    m.train()
    eager = wall_us(torch, lambda: step(torch, m, x, state, dy), reps, warmup)
    fwd = fwd_gpu_us(torch, m, x, state, reps)
    # The documented whole-step capture: warm up on a side stream, grads set to None so that the
    # captured backward allocates them from the graph's pool and every replay overwrites them.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            m.zero_grad(set_to_none=True)
            x.grad = None
            step(torch, m, x, state, dy)
    torch.cuda.current_stream().wait_stream(side)
    m.zero_grad(set_to_none=True)
    x.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(torch, m, x, state, dy)
    graph = wall_us(torch, g.replay, reps, warmup)
    return fwd, eager, graph


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="bench/shapes_rnn_anchors.txt")
    ap.add_argument("--modes", default="f32,tf32,bf16",
                    help="comma-separated: f32 (strict), tf32, bf16")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    modes = a.modes.split(",")
    for mo in modes:
        if mo not in ("f32", "tf32", "bf16"):
            ap.error("unknown mode %r (f32, tf32, bf16)" % mo)
    if a.reps < 1 or a.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    shapes = read_shapes(a.shapes)
    if a.dry_run:
        for s in shapes:
            for mo in modes:
                print("%-5s %s%s" % (mo, s["text"], "  # skipped: " + s["skip"] if s["skip"]
                                     else ""))
        return 0
    import torch  # only here: --dry-run works where torch is not installed
    if not torch.cuda.is_available():
        sys.exit("torch_rnn.py: no CUDA device")
    print("# torch %s, cuDNN %s, %s; median GPU us of one eager forward (no grad), wall us per "
          "training step (%d back to back after %d warm-up)"
          % (torch.__version__, torch.backends.cudnn.version(), torch.cuda.get_device_name(),
             a.reps, a.warmup))
    print("%-5s %11s %11s %11s %7s  %s" % ("mode", "fwd_gpu", "step_eager", "step_graph",
                                          "x_graph", "shape"))
    for s in shapes:
        for mo in modes:
            if s["skip"]:
                print("%-5s %11s %11s %11s %7s  %s  # skipped: %s"
                      % (mo, "-", "-", "-", "-", s["text"], s["skip"]))
                continue
            try:
                fwd, eager, graph = run_shape(torch, s, mo, a.reps, a.warmup)
            except RuntimeError as e:
                print("%-5s %11s %11s %11s %7s  %s  # %s" % (mo, "error", "error", "error", "-",
                                                           s["text"], str(e).splitlines()[0]))
                continue
            print("%-5s %11.1f %11.1f %11.1f %7.2f  %s" % (mo, fwd, eager, graph, graph / eager,
                                                         s["text"]))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
