"""Training steps through nnprim.torch against PyTorch in one process (GPU only).

    python -m nnprim.bench models [--reps 50] [--warmup 10] [--math strict|tf32|both]
                                  [--model lstm|cnn]
    python -m nnprim.bench rnn [--reps 50] [--warmup 10] [--math strict|tf32|both]

models: the two models of examples/models.c at the sizes of `nnprim bench models` and
bench/torch_models.py (LSTM language model; CNN classifier), a whole training step: zero_grad,
forward, cross-entropy, backward, torch.optim.SGD(lr=0.01, momentum=0.9).step().
rnn: forward and backward (dy all ones; dx, dw) of single recurrent layers stacks.
Rows: model, size, math, impl, step_us and the ratio to torch-eager. impl is nnprim-py (the
nnprim.torch modules, eager), torch-eager (torch.nn, cudnn.benchmark off), torch-bench
(cudnn.benchmark on) and torch-graph (torch.nn's step captured by hand in one CUDA graph). Time:
reps steps back to back after warm-up, host clock to a final synchronize, divided by reps.
"""
import argparse
import sys
import time

LSTM = [dict(n=32, t=32, h=128, v=35, l=2), dict(n=64, t=32, h=512, v=35, l=2)]
CNN = [dict(n=256, s=8, c1=8, c2=8, k=4), dict(n=64, s=32, c1=8, c2=8, k=4)]
RNN = [dict(cell="lstm", t=50, n=64, i=512, h=512, l=1), dict(cell="lstm", t=25, n=32, i=256,
                                                                 h=256, l=2),
       dict(cell="gru", t=50, n=64, i=512, h=512, l=1), dict(cell="lstm", t=100, n=16, i=128,
                                                                h=128, l=1)]
LR, MU = 0.01, 0.9


def lstm_model(torch, lib, c):
    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = lib.LSTM(c["v"], c["h"], num_layers=c["l"])
            self.head = lib.Linear(c["h"], c["v"])

        def forward(self, x):
            return self.head(self.rnn(x)[0].reshape(-1, c["h"]))

    g = torch.Generator(device="cuda").manual_seed(1)
    sym = torch.randint(0, c["v"], (c["t"] + 1, c["n"]), device="cuda", generator=g)
    x = torch.nn.functional.one_hot(sym[:-1], c["v"]).float()
    return LM().cuda(), x, sym[1:].reshape(-1)


def cnn_model(torch, lib, c):
    feat = c["c2"] * (c["s"] // 2) ** 2
    m = torch.nn.Sequential(lib.Conv2d(1, c["c1"], 3, padding=1), torch.nn.ReLU(),
                            lib.MaxPool2d(2), lib.Conv2d(c["c1"], c["c2"], 3, padding=1),
                            torch.nn.ReLU(), torch.nn.Flatten(), lib.Linear(feat, c["k"]))
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


def set_math(torch, nt, math):
    torch.backends.cuda.matmul.allow_tf32 = math == "tf32"
    torch.backends.cudnn.allow_tf32 = math == "tf32"
    nt.configure(math_mode=math, env=False)


def graph_us(torch, step, loss_backward, opt, reps, warmup):
    """torch.nn's step captured whole (the documented recipe: warm up on a side stream, grads
    None so that the captured backward allocates them from the graph's pool)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    opt.zero_grad(set_to_none=True)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        loss_backward()
        opt.step()
    return wall_us(torch, g.replay, reps, warmup)


def run_model(torch, nt, kind, c, impl, reps, warmup):
    lib = nt if impl == "nnprim-py" else torch.nn
    torch.backends.cudnn.benchmark = impl in ("torch-bench", "torch-graph")
    m, x, t = (lstm_model if kind == "lstm_lm" else cnn_model)(torch, lib, c)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=MU)
    ce = nt.CrossEntropyLoss() if impl == "nnprim-py" else torch.nn.CrossEntropyLoss()

    def loss_backward():
        ce(m(x), t).backward()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_backward()
        opt.step()

    if impl == "torch-graph":
        return graph_us(torch, step, loss_backward, opt, reps, warmup)
    return wall_us(torch, step, reps, warmup)


def run_rnn(torch, nt, c, impl, reps, warmup):
    lib = nt if impl == "nnprim-py" else torch.nn
    torch.backends.cudnn.benchmark = impl in ("torch-bench", "torch-graph")
    cls = lib.LSTM if c["cell"] == "lstm" else lib.GRU
    m = cls(c["i"], c["h"], num_layers=c["l"]).cuda()
    x = torch.randn(c["t"], c["n"], c["i"], device="cuda", requires_grad=True)

    def fwd_bwd():
        y = m(x)[0]
        y.backward(torch.ones_like(y))

    if impl != "torch-graph":
        return wall_us(torch, fwd_bwd, reps, warmup)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fwd_bwd()
    torch.cuda.current_stream().wait_stream(side)
    x.grad = None
    for p in m.parameters():
        p.grad = None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fwd_bwd()
    return wall_us(torch, g.replay, reps, warmup)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m nnprim.bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["models", "rnn"])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--math", choices=["strict", "tf32", "both"], default="both")
    ap.add_argument("--model", choices=["lstm", "cnn"])
    a = ap.parse_args(argv)
    if a.reps < 1 or a.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    import torch
    if not torch.cuda.is_available():
        print("nnprim.bench: no CUDA device (the benchmarks compare GPU steps)", file=sys.stderr)
        return 1
    import nnprim.torch as nt
    maths = ("strict", "tf32") if a.math == "both" else (a.math,)
    cases = []
    for math in maths:
        if a.what == "models":
            if a.model != "cnn":
                cases += [("lstm_lm", "n%(n)dt%(t)dh%(h)dv%(v)dl%(l)d" % c, c, math)
                          for c in LSTM]
            if a.model != "lstm":
                cases += [("cnn", "n%(n)ds%(s)dc%(c1)dc%(c2)dk%(k)d" % c, c, math) for c in CNN]
        else:
            cases += [(c["cell"], "t%(t)dn%(n)di%(i)dh%(h)dl%(l)d" % c, c, math) for c in RNN]
    print("# torch %s, cuDNN %s, %s; nnprim %s; wall us per step (%d back to back after %d "
          "warm-up)" % (torch.__version__, torch.backends.cudnn.version(),
                        torch.cuda.get_device_name(), nt.context("cuda")._lib.version, a.reps,
                        a.warmup))
    print("%-8s %-20s %-7s %-11s %12s %10s" % ("model", "size", "math", "impl", "step_us",
                                               "x_eager"))
    for kind, name, c, math in cases:
        set_math(torch, nt, math)
        eager = None
        for impl in ("torch-eager", "torch-bench", "torch-graph", "nnprim-py"):
            try:
                if a.what == "models":
                    us = run_model(torch, nt, kind, c, impl, a.reps, a.warmup)
                else:
                    us = run_rnn(torch, nt, c, impl, a.reps, a.warmup)
            except Exception as e:  # one row's failure, the others still run
                print("%-8s %-20s %-7s %-11s %12s  # %s" % (kind, name, math, impl, "error",
                                                           str(e).splitlines()[0]))
                continue
            eager = us if impl == "torch-eager" else eager
            ratio = "%9.3fx" % (us / eager) if eager else ""
            print("%-8s %-20s %-7s %-11s %12.1f %10s" % (kind, name, math, impl, us, ratio))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
