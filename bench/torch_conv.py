#!/usr/bin/env python3
"""PyTorch's convolution times for the shapes `nnprim bench conv` takes, in the same table.

Run on the GPU machine with its torch:
    python3 bench/torch_conv.py --shapes bench/shapes_conv_resnet50.txt --math strict
    python3 bench/torch_conv.py --shapes bench/shapes_conv_resnet50.txt --math tf32

Settings: torch.backends.cudnn.benchmark = True (PyTorch autotunes each shape once, during the
warm-up); TF32 on or off for cuDNN convolutions and matmuls as --math says. Each call is timed
with a CUDA event pair on the current stream; the figure is the median over --reps calls after
--warmup calls. fwd is F.conv{1,2,3}d; bwd-data and bwd-filter are
torch.ops.aten.convolution_backward with only the input or only the weight gradient requested,
which is what autograd runs. fwd_host_us is the median time to issue one forward call, in batches
of 32 with a synchronisation between them outside the timed part (as nnprim's): PyTorch's host
cost per call from Python.

--mode first times only each pass's first call per shape, in one process, the way
`nnprim bench conv --mode first` does, and sums them over the shapes after the first.

Shape syntax: docs/CONV.md. Asymmetric padding is emulated with F.pad before the convolution
(the pad is part of the timed forward call and is noted); true convolution ("conv") flips the
filter once, outside the timing; "relu" adds F.relu to the forward call (PyTorch eager does not
fuse it).
"""
import argparse
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}


def parse_list(text, nsp, token):
    vals = [int(v) for v in text.split("x")]
    if len(vals) == 1:
        vals = vals * nsp
    if len(vals) != nsp:
        raise ValueError(f"token '{token}': give one value or one per spatial dim")
    return vals


def parse_case(line):
    """One shape line -> dict, or None for a blank/comment line."""
    tokens = line.split("#", 1)[0].split()
    if not tokens:
        return None
    dims = dict((l, int(n)) for l, n in re.findall(r"([a-z])(\d+)", tokens[0]))
    if "".join(re.findall(r"[a-z]\d+", tokens[0])) != tokens[0]:
        raise ValueError(f"dims token '{tokens[0]}'")
    nsp = 3 if "d" in dims else 2 if "h" in dims else 1
    ins = ["d", "h", "w"][3 - nsp:]
    filts = ["t", "r", "s"][3 - nsp:]
    c = {
        "nsp": nsp,
        "x": [dims["n"], dims["c"]] + [dims[l] for l in ins],
        "k": dims["k"],
        "filt": [dims[l] for l in filts],
        "groups": 1,
        "stride": [1] * nsp,
        "dil": [1] * nsp,
        "padlo": [0] * nsp,
        "padhi": [0] * nsp,
        "conv": False,
        "relu": False,
        "bias": False,
        "dtype": "f32",
        "nhwc": False,
    }
    for t in tokens[1:]:
        if t in DTYPES:
            c["dtype"] = t
        elif t in ("xcorr", "conv"):
            c["conv"] = t == "conv"
        elif t in ("relu", "bias"):
            c[t] = True
        elif t in ("tf32", "strict", "accdx", "accdw", "accdb"):
            pass  # math comes from --math; accumulation does not change the timing here
        elif t.startswith("stride"):
            c["stride"] = parse_list(t[6:], nsp, t)
        elif t.startswith("dil"):
            c["dil"] = parse_list(t[3:], nsp, t)
        elif t.startswith("padlo"):
            c["padlo"] = parse_list(t[5:], nsp, t)
        elif t.startswith("padhi"):
            c["padhi"] = parse_list(t[5:], nsp, t)
        elif t.startswith("pad"):
            c["padlo"] = c["padhi"] = parse_list(t[3:], nsp, t)
        elif t == "nhwc":
            c["nhwc"] = True  # every tensor channels-last (torch.channels_last / _3d)
        elif re.fullmatch(r"g\d+", t):
            c["groups"] = int(t[1:])
        else:
            raise ValueError(f"unknown token '{t}'")
    return c


def case_text(c):
    """The case in nnprim's syntax (as `nnprim bench conv` prints it)."""
    ins, filts = "dhw"[3 - c["nsp"]:], "trs"[3 - c["nsp"]:]
    x = c["x"]
    s = f"n{x[0]}c{x[1]}" + "".join(f"{l}{v}" for l, v in zip(ins, x[2:]))
    s += f"k{c['k']}" + "".join(f"{l}{v}" for l, v in zip(filts, c["filt"]))
    lst = lambda v: "x".join(str(i) for i in v)
    s += f" g{c['groups']} stride{lst(c['stride'])} dil{lst(c['dil'])}"
    if c["padlo"] == c["padhi"]:
        s += f" pad{lst(c['padlo'])}"
    else:
        s += f" padlo{lst(c['padlo'])} padhi{lst(c['padhi'])}"
    s += " conv" if c["conv"] else " xcorr"
    s += " relu" if c["relu"] else ""
    s += " bias" if c["bias"] else ""
    s += " " + c["dtype"]
    s += " nhwc" if c["nhwc"] else ""
    return s


CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def build(c, dev):
    dt = DTYPES[c["dtype"]]
    x = torch.randn(c["x"], device=dev, dtype=dt)
    w = torch.randn([c["k"], c["x"][1] // c["groups"]] + c["filt"], device=dev, dtype=dt)
    if c["conv"]:
        w = torch.flip(w, dims=list(range(2, 2 + c["nsp"]))).contiguous()
    b = torch.randn([c["k"]], device=dev, dtype=dt) if c["bias"] else None
    if c["nhwc"] and c["nsp"] > 1:
        fmt = torch.channels_last if c["nsp"] == 2 else torch.channels_last_3d
        x, w = x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)
    sym = c["padlo"] == c["padhi"]
    # F.pad takes (last dim lo, last dim hi, previous dim lo, ...)
    extra = []
    for lo, hi in zip(reversed(c["padlo"]), reversed(c["padhi"])):
        extra += [lo, hi]
    conv = CONV[c["nsp"]]

    def fwd():
        xi = x if sym else F.pad(x, extra)
        y = conv(xi, w, b, c["stride"], c["padlo"] if sym else 0, c["dil"], c["groups"])
        return F.relu(y) if c["relu"] else y

    y = fwd()
    dy = torch.randn_like(y)
    xp = x if sym else F.pad(x, extra)
    pad = c["padlo"] if sym else [0] * c["nsp"]
    bias_sizes = [c["k"]] if c["bias"] else None

    def backward(mask):
        return torch.ops.aten.convolution_backward(dy, xp, w, bias_sizes, c["stride"], pad,
                                                   c["dil"], False, [0] * c["nsp"], c["groups"],
                                                   mask)

    return {
        "fwd": fwd,
        "bwd_data": lambda: backward([True, False, False]),
        "bwd_filter": lambda: backward([False, True, False]),
    }, sym


def median_us(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    stop = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        start[i].record()
        fn()
        stop[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in zip(start, stop))


HOST_BATCH = 32  # as cli/bench_util.h's NN_CLI_HOST_BATCH


def host_us(fn, reps):
    """Median time to issue one call, over batches of HOST_BATCH calls with a synchronisation
    between batches outside the timed part (as nnprim's nn_cli_host_median_us)."""
    per_call = []
    for _ in range(max(1, reps // HOST_BATCH)):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(HOST_BATCH):
            fn()
        per_call.append((time.perf_counter() - t0) / HOST_BATCH * 1e6)
    torch.cuda.synchronize()
    return statistics.median(per_call)


def first_ms(c, dev):
    """Wall time in ms of each pass's first call, from the call to the end of its GPU work (what
    `nnprim bench conv --mode first` prints): with cudnn.benchmark=True the first call of a new
    shape runs PyTorch's algorithm search."""
    dt = DTYPES[c["dtype"]]
    x = torch.randn(c["x"], device=dev, dtype=dt)
    w = torch.randn([c["k"], c["x"][1] // c["groups"]] + c["filt"], device=dev, dtype=dt)
    b = torch.randn([c["k"]], device=dev, dtype=dt) if c["bias"] else None
    if c["padlo"] != c["padhi"]:
        raise ValueError("--mode first takes symmetric padding only")
    out = []

    def timed(fn):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        r = fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
        return r

    y = timed(lambda: CONV[c["nsp"]](x, w, b, c["stride"], c["padlo"], c["dil"], c["groups"]))
    dy = torch.randn_like(y)
    for mask in ([True, False, False], [False, True, False]):
        timed(lambda: torch.ops.aten.convolution_backward(
            dy, x, w, [c["k"]] if c["bias"] else None, c["stride"], c["padlo"], c["dil"], False,
            [0] * c["nsp"], c["groups"], mask))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--math", choices=["strict", "tf32"], default="strict")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--mode", choices=["steady", "first"], default="steady",
                    help="first: only each pass's first call, ms to the end of its GPU work")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_conv.py: no CUDA device")
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = a.math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = a.math == "tf32"
    dev = torch.device("cuda")
    if a.mode == "first":
        return main_first(a, dev)
    print(f"# torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}, math {a.math}, cudnn.benchmark=True, "
          f"CUDA events, median of {a.reps} after {a.warmup} warm-up")
    cols = ["fwd_us", "bwd_data_us", "bwd_filter_us", "fwd_host_us"]
    print("".join(f" {t:>13}" for t in cols) + "  shape")
    with open(a.shapes) as f:
        for lineno, line in enumerate(f, 1):
            try:
                c = parse_case(line)
            except (ValueError, KeyError) as e:
                sys.exit(f"{a.shapes}:{lineno}: {e}")
            if c is None:
                continue
            with torch.no_grad():
                fns, sym = build(c, dev)
                vals = [median_us(fns[k], a.reps, a.warmup)
                        for k in ("fwd", "bwd_data", "bwd_filter")]
                vals.append(host_us(fns["fwd"], a.reps))
            note = "" if sym else "  # asymmetric padding via F.pad"
            print("".join(f" {v:13.2f}" for v in vals) + "  " + case_text(c) + note, flush=True)
            del fns
            torch.cuda.empty_cache()


def main_first(a, dev):
    print(f"# torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}, math {a.math}, cudnn.benchmark=True, first calls, "
          f"ms from the call to the end of its GPU work")
    print("".join(f" {t:>13}" for t in ("fwd_first_ms", "data_first_ms", "filt_first_ms")) +
          "  shape")
    sums, shapes, over, slowest = [0.0, 0.0, 0.0], 0, 0, (0.0, "")
    with open(a.shapes) as f:
        for lineno, line in enumerate(f, 1):
            try:
                c = parse_case(line)
                if c is None:
                    continue
                ms = first_ms(c, dev)
            except (ValueError, KeyError) as e:
                sys.exit(f"{a.shapes}:{lineno}: {e}")
            print("".join(f" {v:13.3f}" for v in ms) + "  " + case_text(c), flush=True)
            if shapes:  # the first shape pays the process's one-time cuDNN start
                for k, name in enumerate(("fwd", "data", "filter")):
                    sums[k] += ms[k]
                    over += ms[k] > 1.0
                    if ms[k] > slowest[0]:
                        slowest = (ms[k], f"{name} of {case_text(c)}")
            shapes += 1
            torch.cuda.empty_cache()
    if shapes > 1:
        n = shapes - 1
        print(f"# shapes after the first: {n}; first calls summed: fwd {sums[0]:.1f} ms, data "
              f"{sums[1]:.1f} ms, filter {sums[2]:.1f} ms, all {sum(sums):.1f} ms; {over} of {3 * n} "
              f"calls over 1 ms; slowest {slowest[0]:.1f} ms ({slowest[1]})")


if __name__ == "__main__":
    main()
