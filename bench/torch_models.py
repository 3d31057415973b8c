#!/usr/bin/env python3
"""PyTorch's training step of the two example models at the sizes `nnprim bench models` runs:
eager, eager with cudnn.benchmark, and the whole step captured by hand in one CUDA graph; strict
fp32 and TF32. Rows have the form of nnprim's: model, size, math, impl, step_us.

The models are those of examples/models.c:
  lstm_lm  one-hot characters (T x N x V) -> nn.LSTM(V, H, num_layers=L) -> nn.Linear(H, V) ->
           F.cross_entropy (mean) against the next symbol; zero initial state; no dx for the input.
  cnn      Conv2d(1, c1, 3, padding=1) + relu -> MaxPool2d(2) -> Conv2d(c1, c2, 3, padding=1) +
           relu -> flatten -> Linear(c2 * (S/2)^2, K) -> F.cross_entropy (mean).
A step is zero_grad, forward, loss, backward and torch.optim.SGD(lr=0.01, momentum=0.9).step(),
as nnprim's step is forward, backward and its SGD with momentum over all the parameters. Time:
reps steps back to back after warm-up, the host clock from the first step to the end of a final
torch.cuda.synchronize(), divided by reps (nnprim measures its steps the same way).

How to run both on the GPU machine and compare (the targets: nnprim's step at or below 0.8x
PyTorch eager's for every row, and nnprim's step captured as one graph at or below 0.9x PyTorch's
captured one):

    build/cli/nnprim bench models | tee nnprim_models.txt
    python3 bench/torch_models.py --nnprim nnprim_models.txt

With --nnprim, each PyTorch row also shows nnprim's step for the same model, size and math (its
nnprim-graph row beside torch-graph, its nnprim row beside the others), and the ratio nnprim /
that row (x_nnprim); the eager and graph rows carry their target's verdict.
--dry-run prints the rows that would run without importing torch.

  python3 bench/torch_models.py [--reps 50] [--warmup 10] [--model lstm|cnn]
                                [--math strict|tf32] [--nnprim FILE] [--dry-run]
"""
import argparse
import sys
import time

# The sizes of cli/bench_models.c (the LSTM's vocabulary is examples/data/tiny.txt's).
LSTM = [dict(n=32, t=32, h=128, v=35, l=2), dict(n=64, t=32, h=512, v=35, l=2)]
CNN = [dict(n=256, s=8, c1=8, c2=8, k=4), dict(n=64, s=32, c1=8, c2=8, k=4)]
LR, MU = 0.01, 0.9


def lstm_name(c):
    return "n%(n)dt%(t)dh%(h)dv%(v)dl%(l)d" % c


def cnn_name(c):
    return "n%(n)ds%(s)dc%(c1)dc%(c2)dk%(k)d" % c


def build_lstm(torch, c):
    nn = torch.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(c["v"], c["h"], num_layers=c["l"])
            self.head = nn.Linear(c["h"], c["v"])

        def forward(self, x):
            y, _ = self.rnn(x)
            return self.head(y.reshape(-1, c["h"]))

    g = torch.Generator(device="cuda").manual_seed(1)
    sym = torch.randint(0, c["v"], (c["t"] + 1, c["n"]), device="cuda", generator=g)
    x = torch.nn.functional.one_hot(sym[:-1], c["v"]).float()
    return LM().cuda(), x, sym[1:].reshape(-1)


def build_cnn(torch, c):
    nn = torch.nn
    feat = c["c2"] * (c["s"] // 2) ** 2
    m = nn.Sequential(nn.Conv2d(1, c["c1"], 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(c["c1"], c["c2"], 3, padding=1), nn.ReLU(), nn.Flatten(),
                      nn.Linear(feat, c["k"]))
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.rand((c["n"], 1, c["s"], c["s"]), device="cuda", generator=g)
    t = torch.randint(0, c["k"], (c["n"],), device="cuda", generator=g)
    return m.cuda(), x, t


def wall_us(torch, fn, reps, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e6


def run(torch, kind, c, math, impl, reps, warmup):
    torch.backends.cuda.matmul.allow_tf32 = math == "tf32"
    torch.backends.cudnn.allow_tf32 = math == "tf32"
    torch.backends.cudnn.benchmark = impl != "torch-eager"
    m, x, t = (build_lstm if kind == "lstm_lm" else build_cnn)(torch, c)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=MU)
    F = torch.nn.functional

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(m(x), t).backward()
        opt.step()

    if impl != "torch-graph":
        return wall_us(torch, step, reps, warmup)
    # The documented whole-network capture: warm up on a side stream (which also makes the
    # momentum buffers), grads set to None so that the captured backward allocates them from the
    # graph's pool, then capture forward, backward and the optimizer step.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    opt.zero_grad(set_to_none=True)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        F.cross_entropy(m(x), t).backward()
        opt.step()
    return wall_us(torch, g.replay, reps, warmup)


def read_nnprim(path):
    """{(model, size, math, impl): step_us} from the rows of `nnprim bench models` (impl nnprim or
    nnprim-graph)."""
    rows = {}
    with open(path) as f:
        for line in f:
            tok = line.split()
            if len(tok) >= 5 and tok[3] in ("nnprim", "nnprim-graph"):
                try:
                    rows[(tok[0], tok[1], tok[2], tok[3])] = float(tok[4])
                except ValueError:
                    pass
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--model", choices=["lstm", "cnn"])
    ap.add_argument("--math", choices=["strict", "tf32"])
    ap.add_argument("--nnprim", help="a file with the output of `nnprim bench models`")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    if a.reps < 1 or a.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    cases = []
    for math in ("strict", "tf32"):
        if a.math and math != a.math:
            continue
        if a.model != "cnn":
            cases += [("lstm_lm", lstm_name(c), c, math) for c in LSTM]
        if a.model != "lstm":
            cases += [("cnn", cnn_name(c), c, math) for c in CNN]
    impls = ("torch-eager", "torch-bench", "torch-graph")
    ref = read_nnprim(a.nnprim) if a.nnprim else {}
    if a.dry_run:
        for kind, name, _, math in cases:
            for impl in impls:
                print("%-8s %-18s %-7s %s" % (kind, name, math, impl))
        return 0
    import torch  # only here: --dry-run works where torch is not installed
    if not torch.cuda.is_available():
        sys.exit("torch_models.py: no CUDA device")
    print("# torch %s, cuDNN %s, %s; wall us per training step (%d back to back after %d "
          "warm-up)" % (torch.__version__, torch.backends.cudnn.version(),
                        torch.cuda.get_device_name(), a.reps, a.warmup))
    print("%-8s %-18s %-7s %-11s %12s %12s %9s" % ("model", "size", "math", "impl", "step_us",
                                                 "nnprim_us", "x_nnprim"))
    for kind, name, c, math in cases:
        for impl in impls:
            try:
                us = run(torch, kind, c, math, impl, a.reps, a.warmup)
            except RuntimeError as e:
                print("%-8s %-18s %-7s %-11s %12s  # %s" % (kind, name, math, impl, "error",
                                                           str(e).splitlines()[0]))
                continue
            # torch-graph against nnprim's graph row, the others against its eager row
            n = ref.get((kind, name, math, "nnprim-graph" if impl == "torch-graph" else "nnprim"))
            extra = ""
            if n is not None:
                extra = " %12.1f %8.3fx" % (n, n / us)
                if impl == "torch-eager":
                    extra += "  %s" % ("meets 0.8x" if n <= 0.8 * us else "MISSES 0.8x")
                if impl == "torch-graph":
                    extra += "  %s" % ("meets 0.9x" if n <= 0.9 * us else "MISSES 0.9x")
            print("%-8s %-18s %-7s %-11s %12.1f%s" % (kind, name, math, impl, us, extra))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
