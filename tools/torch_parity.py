#!/usr/bin/env python3
"""nnprim against PyTorch in double precision: forward results and gradients of conv, pooling,
linear, softmax / log-softmax, softmax cross-entropy, layer norm and RNN / LSTM / GRU, and the parameters after
several optimizer steps of SGD / Adam / AdamW with gradient clipping (docs/PARITY.md).

    python3 tools/torch_parity.py [LIBNNPRIM] [--backend ref|cudnn|all] [--filter TEXT] [--dry-run]
    python3 tools/torch_parity.py --self-test [LIBNNPRIM | --no-calls WHY]

LIBNNPRIM defaults to build-gpu/src/libnnprim.so, else build/src/libnnprim.so. Each case runs in
PyTorch (torch.float64 on the CPU, autograd for the gradients: the expected values) and in nnprim
on the reference backend (host tensors: the torch CPU tensors' memory, wrapped) and, where a GPU
and cuDNN are usable, on the cuDNN backend (torch.cuda float64 tensors' memory, wrapped). Outputs
start as NaN, so an element nnprim does not write shows. One line per case and backend gives the
max abs and max relative error of every output and gradient; the last line is
`parity: N passed, M failed, K unsupported`, and the exit status is 1 on any failure.

The relative error of a tensor is max|got - expected| / max|expected| (the max norm), so elements
near zero do not blow it up. Tolerances: 1e-10 on the reference backend, which accumulates in
double like PyTorch's CPU kernels (differences come from summation order and libm, about 1e-15;
any semantic difference is orders above); 1e-8 on cuDNN, whose f64 algorithms sum in other orders
(split reductions, atomics in the weight gradients) and whose RNN kernels use their own exp / tanh.
The optimizer cases hold both backends to 1e-12: they follow torch.optim's single-tensor code
operation by operation (differences come from FMA in PyTorch's vectorised CPU loops, the order of
the clipping norm's sum and the GPU's pow, about 1e-16 per step).
A cuDNN call that refuses f64 with NN_E_UNSUPPORTED or NN_E_DTYPE counts as unsupported.

The ctypes mirrors of nnprim's structs and constants are the Python package's (python/nnprim/
_abi.py, generated from the headers; the python_abi test compares them with the compiler's
layouts). --self-test needs neither torch nor numpy: a few calls through ctypes on the reference
backend with hand-computed expected values (the parity_selftest meson test).
"""
import argparse
import ctypes
import inspect
import math
import os
import sys
import zlib

from ctypes import byref, c_double, c_int, c_int32, c_int64
from ctypes import c_void_p

# The ctypes mirror of nnprim's headers is the Python package's (python/nnprim/_abi.py, generated
# from the headers and checked against the compiler by the python_abi test), from this checkout.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from nnprim import _abi  # noqa: E402
from nnprim._lib import Library  # noqa: E402

MAX_RANK = _abi.NN_MAX_RANK
TOL = {"ref": 1e-10, "cudnn": 1e-8}

# Every constant of the headers by name (enum values, #defines, statuses).
C = {k: v for k, v in vars(_abi).items() if isinstance(v, int) and not k.startswith("_")}
F64 = C["NN_DTYPE_F64"]

Tensor, Settings, ConvParams = _abi.nn_tensor, _abi.nn_settings, _abi.nn_conv_params
PoolParams, LinearParams = _abi.nn_pool_params, _abi.nn_linear_params
SoftmaxParams, ClassTargets = _abi.nn_softmax_params, _abi.nn_class_targets
LayerNormParams = _abi.nn_layernorm_params
RnnParams, BackwardOptions = _abi.nn_rnn_params, _abi.nn_backward_options
RnnForwardTensors, RnnBackwardTensors = _abi.nn_rnn_forward_tensors, _abi.nn_rnn_backward_tensors
OptimParams, ErrorInfo = _abi.nn_optim_params, _abi.nn_error_info


class NnError(Exception):
    def __init__(self, fn, status, name, message):
        super().__init__("%s: %s: %s" % (fn, name, message))
        self.status = status

    def unsupported(self):
        """A backend's refusal of the configuration (f64 on cuDNN), not a wrong answer (nnprim
        maps cuDNN's CUDNN_STATUS_NOT_SUPPORTED* to NN_E_UNSUPPORTED)."""
        return self.status in (C["NN_E_UNSUPPORTED"], C["NN_E_DTYPE"])


class Lib:
    """libnnprim.so through ctypes, every function used given its prototype."""

    def __init__(self, path):
        self.dll = Library(path).dll  # every function's prototype set from the headers

    def __call__(self, name, *args):
        """Calls name; raises NnError with nnprim's message unless it returns NN_OK."""
        st = getattr(self.dll, name)(*args)
        if st != 0:
            info = self.dll.nn_last_error().contents
            raise NnError(name, st, self.dll.nn_status_name(st).decode(),
                          info.message.decode(errors="replace"))

    def context(self, backend, device=0, **settings):
        """A context of backend on device; settings: other nn_settings fields by name."""
        s = Settings()
        self("nn_settings_defaults", byref(s))
        s.backend = C["NN_BACKEND_CUDNN"] if backend == "cudnn" else C["NN_BACKEND_REF"]
        s.device = device
        for name, value in settings.items():
            setattr(s, name, value)
        ctx = c_void_p()
        self("nn_ctx_create", byref(ctx), byref(s))
        got = self.dll.nn_ctx_backend(ctx)
        if got != s.backend:  # a mirror gone wrong would show here
            self.dll.nn_ctx_destroy(ctx)
            sys.exit("torch_parity.py: asked for backend %d, the context runs %d" %
                     (s.backend, got))
        return ctx

    def wrap(self, ctx, ptr, dims, strides=None, dtype=F64):
        """A view of caller memory; strides in elements, None for row-major packed."""
        dims = list(dims)
        out = Tensor()
        self("nn_tensor_wrap", ctx, c_void_p(ptr), dtype, len(dims), (c_int64 * len(dims))(*dims),
             (c_int64 * len(dims))(*strides) if strides is not None else None, byref(out))
        return out


def params(cls, **kw):
    """A zero-initialised params struct with the given fields; sequences fill arrays."""
    p = cls()
    for k, v in kw.items():
        if isinstance(v, (list, tuple)):
            arr = getattr(p, k)
            for i, e in enumerate(v):
                arr[i] = e
        else:
            setattr(p, k, v)
    return p


def conv_params(lib, S, stride, dil, pad_lo, pad_hi, groups, mode, relu):
    p = ConvParams()
    lib("nn_conv_params_default", byref(p), S)
    for i in range(S):
        p.stride[i], p.dilation[i] = stride[i], dil[i]
        p.pad_lo[i], p.pad_hi[i] = pad_lo[i], pad_hi[i]
    p.groups, p.mode = groups, mode
    p.activation = C["NN_ACTIVATION_RELU"] if relu else C["NN_ACTIVATION_IDENTITY"]
    return p


def rnn_params(lib, cell, I, H, proj, L, bidir, bias, batch_first):
    p = RnnParams()
    lib("nn_rnn_params_default", byref(p), C["NN_RNN_" + cell.upper()], I, H)
    p.proj_size, p.num_layers, p.bidirectional = proj, L, int(bidir)
    p.bias_mode = C["NN_RNN_BIAS_" + bias.upper()]
    p.layout = C["NN_RNN_BATCH_MAJOR"] if batch_first else C["NN_RNN_SEQ_MAJOR"]
    return p


def by_role(struct, lengths=None, **refs):
    """An nn_rnn_forward_tensors or nn_rnn_backward_tensors whose fields point at the byref()s
    given (None: NULL); it keeps them, and so their tensors, alive."""
    fields = {k: None if r is None else ctypes.cast(r, c_void_p).value for k, r in refs.items()}
    if lengths is not None:
        fields["lengths"] = ctypes.addressof(lengths)
    t = struct(**fields)
    t.keep = (refs, lengths)
    return byref(t)


def rnn_view_names(cell, layer, bias, proj):
    """(nnprim name constant, PyTorch parameter stem) of each view that exists."""
    names = [("NN_RNN_WEIGHT_IH", "weight_ih"), ("NN_RNN_WEIGHT_HH", "weight_hh")]
    if bias in ("input", "double"):
        names.append(("NN_RNN_BIAS_IH", "bias_ih"))
    if bias in ("recurrent", "double"):
        names.append(("NN_RNN_BIAS_HH", "bias_hh"))
    if proj:
        names.append(("NN_RNN_WEIGHT_HR", "weight_hr"))
    return names


# ---------------------------------------------------------------------------------------------
# --self-test: layouts, then hand-computed calls on the reference backend (no torch, no numpy)

class HostBuf:
    """A ctypes array of doubles (host memory for the self-test)."""

    def __init__(self, values):
        self.arr = (c_double * len(values))(*values)
        self.ptr = ctypes.addressof(self.arr)

    def list(self):
        return list(self.arr)


def sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v))


def self_test_calls(lib):
    """Yields (name, got list, expected list) for calls whose results are known by hand."""
    ctx = lib.context("ref")
    nan = float("nan")
    try:
        def T(buf, dims):
            return byref(lib.wrap(ctx, buf.ptr, dims))

        # 1x1 conv with bias: y[k,p] = sum_c w[k,c] x[c,p] + b[k]
        x = HostBuf([float(i + 1) for i in range(8)])  # 1 x 2 x 2 x 2
        w = HostBuf([1.0, 2.0, -3.0, 0.5, 0.0, 1.0])  # 3 x 2 x 1 x 1
        b = HostBuf([0.5, -1.0, 2.0])
        y = HostBuf([nan] * 12)
        p = conv_params(lib, 2, [1, 1], [1, 1], [0, 0], [0, 0], 1, 0, False)
        lib("nn_conv_forward", ctx, byref(p), T(x, [1, 2, 2, 2]), T(w, [3, 2, 1, 1]),
            T(b, [3]), T(y, [1, 3, 2, 2]), None)
        exp = [w.arr[2 * k] * x.arr[q] + w.arr[2 * k + 1] * x.arr[4 + q] + b.arr[k]
               for k in range(3) for q in range(4)]
        yield "conv 1x1 bias", y.list(), exp

        # 1-D, 3 taps: cross-correlation y[o] = x[o] - x[o+2]; convolution flips w
        x = HostBuf([1.0, 2.0, 4.0, 8.0])
        w = HostBuf([1.0, 0.0, -1.0])
        for mode, exp in ((C["NN_CONV_CROSS_CORRELATION"], [-3.0, -6.0]),
                          (C["NN_CONV_CONVOLUTION"], [3.0, 6.0])):
            y = HostBuf([nan] * 2)
            p = conv_params(lib, 1, [1], [1], [0], [0], 1, mode, False)
            lib("nn_conv_forward", ctx, byref(p), T(x, [1, 1, 4]), T(w, [1, 1, 3]), None,
                T(y, [1, 1, 2]), None)
            yield "conv1d mode %d" % mode, y.list(), exp

        # 2x2 max pool, stride 2, on 4x4 distinct values; backward sends dy to each argmax
        vals = [float((i * 7) % 16) for i in range(16)]
        x = HostBuf(vals)
        y = HostBuf([nan] * 4)
        p = params(PoolParams, spatial_rank=2, mode=C["NN_POOL_MAX"], window=[2, 2],
                   stride=[2, 2])
        pb = c_void_p()
        lib("nn_pool_forward", ctx, byref(p), T(x, [1, 1, 4, 4]), T(y, [1, 1, 2, 2]), byref(pb))
        exp_y, exp_dx = [], [0.0] * 16
        dy = HostBuf([1.0, 2.0, 3.0, 4.0])
        for oi in range(2):
            for oj in range(2):
                idx = [(2 * oi + a) * 4 + 2 * oj + c for a in range(2) for c in range(2)]
                best = max(idx, key=lambda i: vals[i])
                exp_y.append(vals[best])
                exp_dx[best] = dy.arr[oi * 2 + oj]
        yield "max pool 2x2", y.list(), exp_y
        dx = HostBuf([nan] * 16)
        lib("nn_pool_backward", ctx, byref(pb), T(dy, [1, 1, 2, 2]), T(dx, [1, 1, 4, 4]))
        yield "max pool 2x2 backward", dx.list(), exp_dx

        # linear: y = x w^T + b, x 2 x 3, w 2 x 3
        x = HostBuf([1.0, -2.0, 3.0, 0.5, 0.25, -1.0])
        w = HostBuf([2.0, 1.0, 0.0, -1.0, 3.0, 0.5])
        b = HostBuf([0.125, -4.0])
        y = HostBuf([nan] * 4)
        p = LinearParams()
        lib("nn_linear_params_default", byref(p))
        lib("nn_linear_forward", ctx, byref(p), T(x, [2, 3]), T(w, [2, 3]), T(b, [2]),
            T(y, [2, 2]), None)
        exp = [sum(x.arr[3 * m + i] * w.arr[3 * o + i] for i in range(3)) + b.arr[o]
               for m in range(2) for o in range(2)]
        yield "linear", y.list(), exp

        # softmax and log-softmax of equal logits: 1/C and -log C
        x = HostBuf([3.0] * 8)
        for mode, val in ((C["NN_SOFTMAX_MODE_SOFTMAX"], 0.25),
                          (C["NN_SOFTMAX_MODE_LOG"], -math.log(4.0))):
            y = HostBuf([nan] * 8)
            p = SoftmaxParams()
            lib("nn_softmax_params_default", byref(p))
            p.mode = mode
            lib("nn_softmax_forward", ctx, byref(p), T(x, [2, 4]), T(y, [2, 4]), None)
            yield "softmax mode %d equal logits" % mode, y.list(), [val] * 8

        # cross-entropy of equal logits: log C; dx = (1/C - onehot) * dloss
        for ttype, ctype in ((C["NN_INDEX_I64"], c_int64), (C["NN_INDEX_I32"], c_int32)):
            tgt = (ctype * 2)(1, 3)
            targets = params(ClassTargets, data=ctypes.addressof(tgt), type=ttype)
            loss = HostBuf([nan] * 2)
            pb = c_void_p()
            lib("nn_softmax_cross_entropy_forward", ctx, T(x, [2, 4]), byref(targets),
                T(loss, [2]), byref(pb))
            yield "xent type %d loss" % ttype, loss.list(), [math.log(4.0)] * 2
            dloss = HostBuf([1.0, 2.0])
            dx = HostBuf([nan] * 8)
            lib("nn_softmax_cross_entropy_backward", ctx, byref(pb), T(dloss, [2]), T(dx, [2, 4]))
            exp = [(0.25 - (c == tgt[n])) * dloss.arr[n] for n in range(2) for c in range(4)]
            yield "xent type %d dx" % ttype, dx.list(), exp

        # recurrent cells with zero matrices: only the biases act, which pins the gate order
        def rnn(cell, T_, N, I, H, bias_ih, bias_hh, lengths=None, cy_too=False):
            p = rnn_params(lib, cell, I, H, 0, 1, False, "double", False)
            numel = c_int64()
            lib("nn_rnn_weights_size", ctx, byref(p), F64, byref(numel))
            wb = HostBuf([0.0] * numel.value)
            wt = lib.wrap(ctx, wb.ptr, [numel.value])
            for name, vals in (("NN_RNN_BIAS_IH", bias_ih), ("NN_RNN_BIAS_HH", bias_hh)):
                v = Tensor()
                lib("nn_rnn_weight_view", ctx, byref(p), byref(wt), 0, 0, C[name], byref(v))
                off = (v.data - wb.ptr) // 8
                assert v.rank == 1 and v.dims[0] == len(vals), (name, v.rank, v.dims[0])
                for i, e in enumerate(vals):
                    wb.arr[off + i] = e
            x = HostBuf([0.7] * (T_ * N * I))
            y = HostBuf([nan] * (T_ * N * H))
            hy = HostBuf([nan] * (N * H))
            cy = HostBuf([nan] * (N * H))
            lens = (c_int32 * N)(*lengths) if lengths else None
            lib("nn_rnn_forward", ctx, byref(p),
                by_role(RnnForwardTensors, lens, x=T(x, [T_, N, I]), w=byref(wt),
                        y=T(y, [T_, N, H]), hy=T(hy, [1, N, H]),
                        cy=T(cy, [1, N, H]) if cy_too else None), None)
            return y.list(), hy.list(), cy.list()

        # tanh: h = tanh(bW + bR) at every valid step; padded y zero; lengths 3 and 1
        y, hy, _ = rnn("tanh", 3, 2, 2, 3, [0.5] * 3, [0.25] * 3, lengths=[3, 1])
        h = math.tanh(0.75)
        exp_y = [(h if t < [3, 1][n] else 0.0)
                 for t in range(3) for n in range(2) for _ in range(3)]
        yield "rnn tanh zero weights y", y, exp_y
        yield "rnn tanh zero weights hy", hy, [h] * 6

        # LSTM, gates i, f, g, o in PyTorch's order: biases 0.1, 0.2, 0.3, 0.4 (input side)
        H = 2
        bih = [0.1] * H + [0.2] * H + [0.3] * H + [0.4] * H
        _, hy, cy = rnn("lstm", 2, 1, 3, H, bih, [0.0] * (4 * H), cy_too=True)
        i, f, g, o = sigmoid(0.1), sigmoid(0.2), math.tanh(0.3), sigmoid(0.4)
        c = 0.0
        for _ in range(2):
            c = f * c + i * g
        yield "lstm zero weights hy", hy, [o * math.tanh(c)] * H
        yield "lstm zero weights cy", cy, [c] * H

        # GRU, gates r, z, n: n = tanh(bW_n + r * bR_n), h' = (1 - z) n + z h
        bih = [0.1] * H + [0.2] * H + [0.3] * H
        bhh = [0.0] * H + [0.0] * H + [0.5] * H
        _, hy, _ = rnn("gru", 2, 1, 3, H, bih, bhh)
        r, z = sigmoid(0.1), sigmoid(0.2)
        n = math.tanh(0.3 + r * 0.5)
        hv = 0.0
        for _ in range(2):
            hv = (1 - z) * n + z * hv
        yield "gru zero weights hy", hy, [hv] * H

        # optimizers: SGD with momentum over two steps (buf = g, then 0.5 buf + g), and Adam's
        # first step with beta1 0.5, beta2 0.75, eps 0 (the update is lr * sign(g))
        for kind, g_vals, want in (("SGD", [[1.0, 2.0], [2.0, -4.0]], [-0.75, -1.5]),
                                   ("ADAM", [[1.0, -2.0]], [0.75, -1.75])):
            op = OptimParams()
            lib("nn_optim_params_default", byref(op), C["NN_OPTIM_" + kind])
            if kind == "SGD":
                op.lr, op.momentum = 0.5, 0.5
            else:
                op.lr, op.beta1, op.beta2, op.eps = 0.25, 0.5, 0.75, 0.0
            prm = HostBuf([1.0, -2.0])
            grad = HostBuf([0.0, 0.0])
            pt = lib.wrap(ctx, prm.ptr, [2])
            opt = c_void_p()
            lib("nn_optim_create", ctx, byref(op), 1, byref(pt), byref(opt))
            try:
                for g in g_vals:
                    grad.arr[0], grad.arr[1] = g
                    lib("nn_optim_step", ctx, opt, 1, T(grad, [2]))
                steps = c_int64(-1)
                lib("nn_optim_get_step", ctx, opt, byref(steps))
            finally:
                lib("nn_optim_free", ctx, opt)
            yield "optim %s steps" % kind.lower(), [float(steps.value)], [float(len(g_vals))]
            yield "optim %s" % kind.lower(), prm.list(), want
    finally:
        lib.dll.nn_ctx_destroy(ctx)


def self_test(args):
    failed = 0
    if args.no_calls is not None:
        print("calls: skipped: " + args.no_calls)
        return 77
    else:
        lib = Lib(args.lib or default_lib())
        n = 0
        for name, got, exp in self_test_calls(lib):
            n += 1
            err = max((abs(g - e) if not math.isnan(g) else math.inf) for g, e in zip(got, exp))
            ok = len(got) == len(exp) and err <= 1e-12 * max(1.0, max(abs(e) for e in exp))
            print("calls: %-34s %s  max abs err %.3g" % (name, "ok" if ok else "FAIL", err))
            if not ok:
                print("    got      %s\n    expected %s" % (got, exp))
                failed += 1
        print("calls: %d checked on the reference backend through ctypes" % n)
    print("self-test: %s" % ("passed" if failed == 0 else "%d failed" % failed))
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# Cases against PyTorch

def seq3(v, S):
    return list(v) if isinstance(v, (list, tuple)) else [v] * S


def dims_text(prefix, vals):
    return prefix + "x".join(str(v) for v in vals)


def conv_cases():
    out = []

    def add(S, n, c, k, sp, ks, stride=1, dil=1, pad_lo=0, pad_hi=None, groups=1, bias=True,
            relu=False, mode=0, path="pullback", acc=None, nhwc=False):
        pad_hi = pad_lo if pad_hi is None else pad_hi
        kw = dict(S=S, n=n, c=c, k=k, sp=seq3(sp, S), ks=seq3(ks, S), stride=seq3(stride, S),
                  dil=seq3(dil, S), pad_lo=seq3(pad_lo, S), pad_hi=seq3(pad_hi, S), groups=groups,
                  bias=bias, relu=relu, mode=mode, path=path, acc=acc, nhwc=nhwc)
        name = "conv%dd n%dc%d%sk%d%s g%d %s %s %s pad%s:%s%s%s%s %s%s" % (
            S, n, c, dims_text("sp", kw["sp"]), k, dims_text("f", kw["ks"]), groups,
            dims_text("stride", kw["stride"]), dims_text("dil", kw["dil"]),
            "conv" if mode else "xcorr", "x".join(map(str, kw["pad_lo"])),
            "x".join(map(str, kw["pad_hi"])), " bias" if bias else "", " relu" if relu else "",
            " nhwc" if nhwc else "", path, " acc=" + acc if acc else "")
        out.append((name, run_conv, kw))

    add(1, 2, 3, 4, 9, 3)
    add(1, 2, 4, 6, 11, 3, stride=2, dil=2, pad_lo=1, pad_hi=3, groups=2, mode=1)
    add(1, 1, 4, 4, 8, 3, pad_lo=1, groups=4, bias=False, relu=True)  # depthwise
    add(2, 2, 3, 4, (7, 6), 3, pad_lo=1)
    add(2, 2, 4, 6, (9, 8), (3, 2), stride=(2, 1), dil=(1, 2), pad_lo=(1, 0), pad_hi=(2, 1),
        groups=2, relu=True)
    add(2, 2, 4, 6, (9, 8), (3, 2), stride=(2, 1), dil=(1, 2), pad_lo=(1, 0), pad_hi=(2, 1),
        groups=2, relu=True, mode=1)
    add(2, 1, 3, 6, (6, 7), 3, pad_lo=(0, 2), pad_hi=(1, 0), groups=3, bias=False, mode=1)
    add(2, 2, 4, 8, (5, 5), 3, pad_lo=1, groups=4, relu=True)  # depthwise, multiplier 2
    add(2, 2, 3, 4, (6, 5), (2, 3), stride=2, pad_lo=1, relu=True, acc="ex")
    add(2, 2, 4, 4, (7, 6), 3, stride=(1, 2), dil=(2, 1), pad_lo=(2, 1), pad_hi=(0, 1),
        groups=2, mode=1, path="standalone")
    add(2, 2, 4, 4, (7, 6), 3, stride=(1, 2), dil=(2, 1), pad_lo=(2, 1), pad_hi=(0, 1),
        groups=2, path="standalone", acc="arg")
    add(3, 1, 2, 3, (4, 5, 4), 2, pad_lo=1)
    add(3, 2, 4, 4, (5, 6, 5), (3, 2, 2), stride=(1, 2, 1), dil=(1, 1, 2), pad_lo=(1, 0, 1),
        pad_hi=(0, 1, 2), groups=2, relu=True, mode=1)
    add(3, 1, 3, 3, (4, 4, 5), 3, pad_lo=1, groups=3, bias=False, path="standalone")
    add(2, 2, 3, 4, (5, 4), (5, 4), stride=3)  # the filter covers the input: a 1x1 output
    # channels-last tensors (PyTorch's channels_last memory format), every tensor but b and db
    add(2, 2, 4, 6, (7, 6), 3, stride=(2, 1), pad_lo=(1, 0), pad_hi=(0, 2), groups=2, relu=True,
        nhwc=True)
    add(2, 2, 4, 4, (6, 6), 3, pad_lo=1, mode=1, path="standalone", acc="arg", nhwc=True)
    add(3, 1, 2, 4, (4, 5, 4), 2, stride=(1, 2, 1), pad_lo=1, nhwc=True)
    return out


def pool_cases():
    out = []

    def add(S, n, c, sp, win, stride=None, pad_lo=0, pad_hi=None, mode="max", ties=False,
            path="pullback", acc=False, nhwc=False, f32=False):
        stride = win if stride is None else stride
        pad_hi = pad_lo if pad_hi is None else pad_hi
        kw = dict(S=S, n=n, c=c, sp=seq3(sp, S), win=seq3(win, S), stride=seq3(stride, S),
                  pad_lo=seq3(pad_lo, S), pad_hi=seq3(pad_hi, S), mode=mode, ties=ties, path=path,
                  acc=acc, nhwc=nhwc, f32=f32)
        name = "pool%dd n%dc%d%s %s %s %s pad%s:%s%s%s %s%s%s" % (
            S, n, c, dims_text("sp", kw["sp"]), mode, dims_text("win", kw["win"]),
            dims_text("stride", kw["stride"]), "x".join(map(str, kw["pad_lo"])),
            "x".join(map(str, kw["pad_hi"])), " ties" if ties else "", " nhwc" if nhwc else "",
            path, " acc" if acc else "", " f32" if f32 else "")
        out.append((name, run_pool, kw))

    for mode in ("max", "mean_include_pad", "mean_exclude_pad"):
        add(1, 2, 3, 10, 3, stride=2, pad_lo=1, mode=mode)
        add(2, 2, 2, (7, 6), (3, 2), stride=(2, 1), pad_lo=(1, 1), mode=mode)
        add(2, 1, 2, (6, 7), 3, stride=2, pad_lo=(2, 0), pad_hi=(0, 2), mode=mode)  # asymmetric
        add(3, 1, 2, (5, 4, 6), (2, 3, 2), stride=(1, 2, 2), pad_lo=(1, 1, 0), mode=mode)
        add(2, 2, 2, (6, 6), 3, stride=1, pad_lo=2, mode=mode, path="stateless", acc=True)
        add(2, 1, 3, (5, 5), 2, stride=1, mode=mode, acc=True)
    add(2, 1, 2, (6, 6), 2, stride=2, mode="max", ties=True)  # disjoint windows
    add(2, 1, 2, (5, 6), 3, stride=1, pad_lo=1, mode="max", ties=True)  # overlapping windows
    add(1, 2, 1, 9, 4, stride=2, pad_lo=3, pad_hi=1, mode="max", ties=True)
    # cuDNN has no f64 pooling: the ties again in f32, where small integers keep every value
    # exact, so that cuDNN's pick among tied maxima is compared too
    add(2, 1, 2, (6, 6), 2, stride=2, mode="max", ties=True, f32=True)
    add(2, 1, 2, (5, 6), 3, stride=1, pad_lo=1, mode="max", ties=True, f32=True)
    add(1, 2, 1, 9, 4, stride=2, pad_lo=1, mode="max", ties=True, f32=True)
    add(2, 2, 3, (6, 5), 2, stride=1, mode="max", nhwc=True)  # strided views: channels-last
    add(3, 1, 3, (4, 4, 4), 3, stride=2, pad_lo=1, mode="mean_exclude_pad", nhwc=True, acc=True)
    return out


def linear_cases():
    out = []
    for xs in ((5, 7), (2, 3, 7)):
        for bias in (True, False):
            for relu in (False, True):
                for acc in ((None, "ex") if bias and relu else (None,)):
                    kw = dict(xs=xs, out=4, bias=bias, relu=relu, acc=acc)
                    name = "linear %sout4%s%s%s" % (dims_text("x", xs), " bias" if bias else "",
                                                   " relu" if relu else "",
                                                   " acc=" + acc if acc else "")
                    out.append((name, run_linear, kw))
    kw = dict(xs=(6, 5), out=3, bias=True, relu=False, acc="ex")
    out.append(("linear x6x5out3 bias acc=ex", run_linear, kw))
    for xs in ((7,), (2, 1, 3, 5)):  # a single row (y of rank 1), and three batch dims
        out.append(("linear %sout3 bias relu" % dims_text("x", xs), run_linear,
                    dict(xs=xs, out=3, bias=True, relu=True, acc=None)))
    return out


def softmax_cases():
    out = []
    shapes = ((4, 7), (2, 5, 3), (2, 4, 3, 2), (2, 3, 2, 2, 3), (3, 1, 2))
    for xs in shapes:
        for log in (False, True):
            for acc in (None, "ex") if xs == (2, 4, 3, 2) else (None,):
                kw = dict(xs=xs, log=log, acc=acc)
                name = "%s %s%s" % ("log_softmax" if log else "softmax", dims_text("x", xs),
                                     " acc=" + acc if acc else "")
                out.append((name, run_softmax, kw))
    for xs in ((6, 5), (2, 4, 3, 2)):
        for itype in ("i32", "i64"):
            for acc in ((False, True) if itype == "i64" else (False,)):
                kw = dict(xs=xs, itype=itype, acc=acc, host_targets=False)
                name = "cross_entropy %s %s reduction=none%s" % (dims_text("x", xs), itype,
                                                                " acc=ex" if acc else "")
                out.append((name, run_xent, kw))
    # on cuDNN the targets may also be in ordinary host memory (read without a wait)
    out.append(("cross_entropy x5x4x3 i64 reduction=none host_targets", run_xent,
                dict(xs=(5, 4, 3), itype="i64", acc=False, host_targets=True)))
    return out


def layernorm_cases():
    out = []
    # (x's dims, normalized rank, gamma, beta, eps, which gradients, accumulate)
    for xs, k in (((4, 7), 1), ((2, 3, 5), 2), ((3, 2, 2, 4), 1), ((6,), 1), ((2, 3, 4), 3)):
        for affine in ((True, True), (False, False), (True, False)):
            out.append(("layer_norm %s k%d%s%s" % (dims_text("x", xs), k, " gamma" * affine[0],
                                                   " beta" * affine[1]), run_layernorm,
                        dict(xs=xs, k=k, gamma=affine[0], beta=affine[1], eps=1e-5,
                             grads="dx+dw+db", acc=None)))
    out.append(("layer_norm x5x8 k1 gamma beta eps=0.1 acc=ex", run_layernorm,
                dict(xs=(5, 8), k=1, gamma=True, beta=True, eps=0.1, grads="dx+dw+db",
                     acc="ex")))
    out.append(("layer_norm x64x96 k1 gamma beta grads=dw+db", run_layernorm,
                dict(xs=(64, 96), k=1, gamma=True, beta=True, eps=1e-5, grads="dw+db",
                     acc=None)))
    return out


def rnn_cases():
    out = []

    def add(cell, T=4, N=3, I=3, H=4, L=1, bidir=False, proj=0, batch_first=False, bias="double",
            hx=True, lens=None, acc=False):
        kw = dict(cell=cell, T=T, N=N, I=I, H=H, L=L, bidir=bidir, proj=proj,
                  batch_first=batch_first, bias=bias, hx=hx, lens=lens, acc=acc)
        name = "%s t%dn%di%dh%d l%d %s%s %s bias_%s%s%s%s" % (
            cell, T, N, I, H, L, "bidir" if bidir else "uni", " proj%d" % proj if proj else "",
            "batch" if batch_first else "seq", bias, "" if hx else " hx=NULL",
            " lens" + "x".join(map(str, lens)) if lens else "", " acc_dw" if acc else "")
        out.append((name, run_rnn, kw))

    for cell in ("tanh", "relu", "lstm", "gru"):
        add(cell)
        add(cell, L=2, bidir=True)
        add(cell, batch_first=True, lens=[2, 4, 1])
        add(cell, L=2, bidir=True, lens=[3, 1, 4], batch_first=True)
        add(cell, bias="none", hx=False)
        add(cell, bias="input", L=2)
        add(cell, bias="recurrent", bidir=True, lens=[4, 2, 3])
    add("lstm", H=5, proj=3)
    add("lstm", H=5, proj=2, L=2, bidir=True, lens=[1, 4, 3])
    add("lstm", H=4, proj=3, batch_first=True, hx=False, bias="input")
    add("gru", L=2, acc=True)
    add("lstm", bidir=True, lens=[4, 4, 2], acc=True, bias="recurrent")
    add("tanh", T=5, N=4, lens=[5, 3, 5, 1], bidir=True, hx=False)
    add("gru", T=1, N=1, I=2, H=3, L=2, bidir=True)
    add("lstm", T=1, N=1, I=2, H=3, proj=1)
    return out


OPTIM_SHAPES = ((5, 7), (3,), (2, 3, 4))


def optim_cases():
    out = []

    def add(kind, **hyper):
        kw = dict(kind=kind, steps=6, shapes=OPTIM_SHAPES, hyper=hyper)
        name = "optim %s %s" % (kind, " ".join("%s=%g" % kv for kv in sorted(hyper.items())))
        out.append((name, run_optim, kw))

    add("sgd", lr=0.1)
    add("sgd", lr=0.1, momentum=0.9, weight_decay=1e-2)
    add("sgd", lr=0.05, momentum=0.9, nesterov=1)
    add("sgd", lr=0.1, momentum=0.9, dampening=0.3, max_grad_norm=1.0)
    add("adam", lr=1e-2)
    add("adam", lr=1e-2, weight_decay=0.1, max_grad_norm=0.5)
    add("adam", lr=1e-2, beta1=0.3, beta2=0.5, eps=1e-3)  # lerp's other form
    add("adamw", lr=1e-2)
    add("adamw", lr=1e-2, weight_decay=0.5, max_grad_norm=1.0)
    return out


def all_cases():
    return (conv_cases() + pool_cases() + linear_cases() + softmax_cases() + layernorm_cases() +
            rnn_cases() + optim_cases())


class Env:
    """One backend's run of one case: the torch device, the nnprim context, kept tensors."""

    def __init__(self, torch, lib, ctx, backend, seed):
        self.torch, self.lib, self.ctx, self.backend = torch, lib, ctx, backend
        self.dev = "cuda" if backend == "cudnn" else "cpu"
        self.gen = torch.Generator().manual_seed(seed)
        self.keep = []

    def rand(self, *shape, lo=-1.0, hi=1.0):
        """Expected-side (CPU) input, uniform in [lo, hi)."""
        t = self.torch.rand(shape, generator=self.gen, dtype=self.torch.float64)
        return t * (hi - lo) + lo

    def fmt(self, t, cl):
        """t packed row-major, or channels-last (PyTorch's channels_last / channels_last_3d)."""
        if not cl:
            return t.contiguous()
        torch = self.torch
        return t.contiguous(memory_format=torch.channels_last if t.dim() == 4 else
                            torch.channels_last_3d)

    def to_dev(self, t, cl=False, f32=False):
        d = self.fmt(t.detach().to(self.dev, self.torch.float32 if f32 else t.dtype).clone(), cl)
        self.keep.append(d)
        return d

    def nan(self, shape, cl=False, f32=False):
        t = self.fmt(self.torch.full(tuple(shape), float("nan"), device=self.dev,
                                     dtype=self.torch.float32 if f32 else self.torch.float64), cl)
        self.keep.append(t)
        return t

    def view(self, t):
        """An nn_tensor wrapping a device-side torch tensor, with its strides."""
        dtype = {self.torch.float64: F64, self.torch.float32: C["NN_DTYPE_F32"]}[t.dtype]
        self.keep.append(t)
        strides = None if t.is_contiguous() else list(t.stride())
        return self.lib.wrap(self.ctx, t.data_ptr(), t.shape, strides, dtype)

    def T(self, t):
        """byref of view(t); None for None."""
        return None if t is None else byref(self.view(t))

    def sync_in(self):
        # nnprim runs on its own stream: torch's queued fills and copies must be done first
        if self.dev == "cuda":
            self.torch.cuda.synchronize()

    def sync_out(self):
        self.lib("nn_ctx_synchronize", self.ctx)


def grad_or_zero(torch, t):
    return t.grad if t.grad is not None else torch.zeros_like(t)


def run_conv(env, S, n, c, k, sp, ks, stride, dil, pad_lo, pad_hi, groups, bias, relu, mode,
             path, acc, nhwc):
    torch, F, lib = env.torch, env.F, env.lib
    x, w = env.rand(n, c, *sp), env.rand(k, c // groups, *ks)
    b = env.rand(k)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    br = (b if bias else torch.zeros(k, dtype=torch.float64)).clone().requires_grad_()
    spec = []
    for i in reversed(range(S)):  # F.pad lists the last dim first
        spec += [pad_lo[i], pad_hi[i]]
    wf = wr.flip(list(range(2, 2 + S))) if mode == C["NN_CONV_CONVOLUTION"] else wr
    yr = (F.conv1d, F.conv2d, F.conv3d)[S - 1](F.pad(xr, spec), wf, br, stride=stride,
                                             dilation=dil, groups=groups)
    if relu:
        yr = F.relu(yr)
    dy = env.rand(*yr.shape)
    yr.backward(dy)
    olds = [env.rand(*t.shape) for t in (x, w, b)] if acc else None

    p = conv_params(lib, S, stride, dil, pad_lo, pad_hi, groups, mode, relu and path == "pullback")
    xd, wd, dyd = (env.to_dev(t, nhwc) for t in (x, w, dy))
    bd = env.to_dev(b)
    y = env.nan(yr.shape, nhwc)
    cls = (nhwc, nhwc, False)
    grads = [env.to_dev(o, cl) for o, cl in zip(olds, cls)] if acc else \
        [env.nan(t.shape, cl) for t, cl in zip((x, w, b), cls)]
    env.sync_in()
    if path == "pullback":
        pb = c_void_p()
        lib("nn_conv_forward", env.ctx, byref(p), env.T(xd), env.T(wd),
            env.T(bd) if bias else None, env.T(y), byref(pb))
        gt = [env.T(g) for g in grads]
        if acc == "ex":
            opts = params(BackwardOptions, accumulate=7)
            lib("nn_conv_backward_ex", env.ctx, byref(pb), byref(opts), env.T(dyd), *gt)
        else:
            lib("nn_conv_backward", env.ctx, byref(pb), env.T(dyd), *gt)
    else:
        lib("nn_conv_forward", env.ctx, byref(p), env.T(xd), env.T(wd),
            env.T(bd) if bias else None, env.T(y), None)
        a = 7 if acc == "arg" else 0  # each stand-alone call reads its own bit
        lib("nn_conv_backward_data", env.ctx, byref(p), env.T(dyd), env.T(wd), env.T(grads[0]), a)
        lib("nn_conv_backward_filter", env.ctx, byref(p), env.T(xd), env.T(dyd), env.T(grads[1]),
            a)
        lib("nn_conv_backward_bias", env.ctx, byref(p), env.T(dyd), env.T(grads[2]), a)
    env.sync_out()
    exp = [grad_or_zero(torch, t) for t in (xr, wr, br)]
    if acc:
        exp = [o + e for o, e in zip(olds, exp)]
    return [("y", y, yr.detach()), ("dx", grads[0], exp[0]), ("dw", grads[1], exp[1]),
            ("db", grads[2], exp[2])]


def run_pool(env, S, n, c, sp, win, stride, pad_lo, pad_hi, mode, ties, path, acc, nhwc, f32):
    torch, F, lib = env.torch, env.F, env.lib
    shape = (n, c) + tuple(sp)
    numel = math.prod(shape)
    if ties:  # few distinct values: most windows hold several equal maxima
        x = torch.randint(0, 3, shape, generator=env.gen).to(torch.float64)
    else:  # distinct values: no ties anywhere
        x = torch.randperm(numel, generator=env.gen).to(torch.float64) / numel - 0.5
        x = x.reshape(shape)
    xr = x.clone().requires_grad_()
    sym = pad_lo == pad_hi and all(pl <= wi // 2 for pl, wi in zip(pad_lo, win))
    spec = []
    for i in reversed(range(S)):
        spec += [pad_lo[i], pad_hi[i]]
    maxp = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[S - 1]
    avgp = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[S - 1]
    if mode == "max":
        if sym:
            yr = maxp(xr, win, stride, pad_lo)
        else:
            yr = maxp(F.pad(xr, spec, value=-math.inf), win, stride, 0)
    elif sym:
        yr = avgp(xr, win, stride, pad_lo, count_include_pad=(mode == "mean_include_pad"))
    else:  # PyTorch pads symmetrically only: pad first, then divide by the window's real inputs
        yr = avgp(F.pad(xr, spec), win, stride, 0)
        if mode == "mean_exclude_pad":
            yr = yr / avgp(F.pad(torch.ones_like(x), spec), win, stride, 0)
    # ties: integer dy, so that f32 sums stay exact and any other pick shows
    dy = torch.randint(1, 5, yr.shape, generator=env.gen).to(torch.float64) if ties else \
        env.rand(*yr.shape)
    yr.backward(dy)
    old = env.rand(*shape) if acc else None

    p = params(PoolParams, spatial_rank=S, mode=C["NN_POOL_" + mode.upper()], window=win,
               stride=stride, pad_lo=pad_lo, pad_hi=pad_hi)
    xd, dyd = env.to_dev(x, nhwc, f32), env.to_dev(dy, nhwc, f32)
    y = env.nan(yr.shape, nhwc, f32)
    dx = env.to_dev(old, nhwc, f32) if acc else env.nan(shape, nhwc, f32)
    env.sync_in()
    if path == "stateless":
        lib("nn_pool_forward", env.ctx, byref(p), env.T(xd), env.T(y), None)
        lib("nn_pool_backward_stateless", env.ctx, byref(p), env.T(xd), env.T(y), env.T(dyd),
            env.T(dx), C["NN_ACCUMULATE_DX"] if acc else 0)
    else:
        pb = c_void_p()
        lib("nn_pool_forward", env.ctx, byref(p), env.T(xd), env.T(y), byref(pb))
        if acc:
            opts = params(BackwardOptions, accumulate=C["NN_ACCUMULATE_DX"])
            lib("nn_pool_backward_ex", env.ctx, byref(pb), byref(opts), env.T(dyd), env.T(dx))
        else:
            lib("nn_pool_backward", env.ctx, byref(pb), env.T(dyd), env.T(dx))
    env.sync_out()
    exp_dx = xr.grad + (old if acc else 0)
    res = [("y", y, yr.detach()), ("dx", dx, exp_dx)]
    if ties:
        # PyTorch's max pooling gives a window's gradient to the first maximum in window order
        # (row-major; its kernels replace the running maximum only on a strictly larger value),
        # which is nnprim's reference rule (pool.h); cuDNN's pick is undocumented.
        g = dx.detach().to("cpu", torch.float64)
        env.note = "ties: PyTorch gives each window's dy to its first maximum in window order"
        env.note_else = "another pick; sum(dx) %s sum(dy): %g vs %g" % (
            "=" if float(g.sum()) == float(dy.sum()) else "!=", float(g.sum()), float(dy.sum()))
    return res


def run_linear(env, xs, out, bias, relu, acc):
    torch, F, lib = env.torch, env.F, env.lib
    inn = xs[-1]
    x, w, b = env.rand(*xs), env.rand(out, inn), env.rand(out)
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    br = (b if bias else torch.zeros(out, dtype=torch.float64)).clone().requires_grad_()
    yr = F.linear(xr, wr, br)
    if relu:
        yr = F.relu(yr)
    dy = env.rand(*yr.shape)
    yr.backward(dy)
    olds = [env.rand(*t.shape) for t in (x, w, b)] if acc else None

    p = LinearParams()
    lib("nn_linear_params_default", byref(p))
    p.activation = C["NN_ACTIVATION_RELU"] if relu else C["NN_ACTIVATION_IDENTITY"]
    xd, wd, bd, dyd = (env.to_dev(t) for t in (x, w, b, dy))
    y = env.nan(yr.shape)
    grads = [env.to_dev(o) for o in olds] if acc else [env.nan(t.shape) for t in (x, w, b)]
    env.sync_in()
    pb = c_void_p()
    lib("nn_linear_forward", env.ctx, byref(p), env.T(xd), env.T(wd),
        env.T(bd) if bias else None, env.T(y), byref(pb))
    gt = [env.T(g) for g in grads]
    if acc == "ex":
        opts = params(BackwardOptions, accumulate=7)
        lib("nn_linear_backward_ex", env.ctx, byref(pb), byref(opts), env.T(dyd), *gt)
    else:
        lib("nn_linear_backward", env.ctx, byref(pb), env.T(dyd), *gt)
    env.sync_out()
    exp = [grad_or_zero(torch, t) for t in (xr, wr, br)]
    if acc:
        exp = [o + e for o, e in zip(olds, exp)]
    return [("y", y, yr.detach()), ("dx", grads[0], exp[0]), ("dw", grads[1], exp[1]),
            ("db", grads[2], exp[2])]


def run_softmax(env, xs, log, acc):
    F, lib = env.F, env.lib
    x = env.rand(*xs, lo=-3.0, hi=3.0)
    xr = x.clone().requires_grad_()
    yr = (F.log_softmax if log else F.softmax)(xr, dim=1)
    dy = env.rand(*xs)
    yr.backward(dy)
    old = env.rand(*xs) if acc else None

    p = SoftmaxParams()
    lib("nn_softmax_params_default", byref(p))
    p.mode = C["NN_SOFTMAX_MODE_LOG"] if log else C["NN_SOFTMAX_MODE_SOFTMAX"]
    xd, dyd = env.to_dev(x), env.to_dev(dy)
    y = env.nan(xs)
    dx = env.to_dev(old) if acc else env.nan(xs)
    env.sync_in()
    pb = c_void_p()
    lib("nn_softmax_forward", env.ctx, byref(p), env.T(xd), env.T(y), byref(pb))
    if acc == "ex":
        opts = params(BackwardOptions, accumulate=C["NN_ACCUMULATE_DX"])
        lib("nn_softmax_backward_ex", env.ctx, byref(pb), byref(opts), env.T(dyd), env.T(dx))
    else:
        lib("nn_softmax_backward", env.ctx, byref(pb), env.T(dyd), env.T(dx))
    env.sync_out()
    return [("y", y, yr.detach()), ("dx", dx, xr.grad + (old if acc else 0))]


def run_xent(env, xs, itype, acc, host_targets):
    torch, F, lib = env.torch, env.F, env.lib
    x = env.rand(*xs, lo=-3.0, hi=3.0)
    lshape = (xs[0],) + tuple(xs[2:])
    t = torch.randint(0, xs[1], lshape, generator=env.gen)
    xr = x.clone().requires_grad_()
    lr = F.cross_entropy(xr, t, reduction="none")
    dloss = env.rand(*lshape)
    lr.backward(dloss)
    old = env.rand(*xs) if acc else None

    tdev = t.to(torch.int32 if itype == "i32" else torch.int64).contiguous()
    if not host_targets:
        tdev = tdev.to(env.dev)
    env.keep.append(tdev)
    targets = params(ClassTargets, data=tdev.data_ptr(),
                     type=C["NN_INDEX_I32"] if itype == "i32" else C["NN_INDEX_I64"])
    xd, dld = env.to_dev(x), env.to_dev(dloss)
    loss = env.nan(lshape)
    dx = env.to_dev(old) if acc else env.nan(xs)
    env.sync_in()
    pb = c_void_p()
    lib("nn_softmax_cross_entropy_forward", env.ctx, env.T(xd), byref(targets), env.T(loss),
        byref(pb))
    if acc:
        opts = params(BackwardOptions, accumulate=C["NN_ACCUMULATE_DX"])
        lib("nn_softmax_cross_entropy_backward_ex", env.ctx, byref(pb), byref(opts), env.T(dld),
            env.T(dx))
    else:
        lib("nn_softmax_cross_entropy_backward", env.ctx, byref(pb), env.T(dld), env.T(dx))
    env.sync_out()
    return [("loss", loss, lr.detach()), ("dx", dx, xr.grad + (old if acc else 0))]


def run_layernorm(env, xs, k, gamma, beta, eps, grads, acc):
    torch, F, lib = env.torch, env.F, env.lib
    ns = tuple(xs[len(xs) - k:])
    x = env.rand(*xs, lo=-3.0, hi=3.0)
    g = env.rand(*ns, lo=0.5, hi=1.5) if gamma else None
    b = env.rand(*ns) if beta else None
    xr = x.clone().requires_grad_()
    gr = g.clone().requires_grad_() if gamma else None
    br = b.clone().requires_grad_() if beta else None
    yr = F.layer_norm(xr, ns, gr, br, eps)
    dy = env.rand(*xs)
    yr.backward(dy)
    want = grads.split("+")
    ask = {"dx": "dx" in want, "dw": gamma and "dw" in want, "db": beta and "db" in want}
    olds = {n: (env.rand(*(xs if n == "dx" else ns)) if acc and ask[n] else None) for n in ask}

    p = LayerNormParams()
    lib("nn_layernorm_params_default", byref(p))
    p.normalized_rank, p.eps = k, eps
    xd, dyd = env.to_dev(x), env.to_dev(dy)
    gd = env.to_dev(g) if gamma else None
    bd = env.to_dev(b) if beta else None
    y = env.nan(xs)

    def out(name, shape):
        if not ask[name]:
            return None
        return env.to_dev(olds[name]) if acc else env.nan(shape)

    dx, dg, db = out("dx", xs), out("dw", ns), out("db", ns)
    env.sync_in()
    pb = c_void_p()
    lib("nn_layernorm_forward", env.ctx, byref(p), env.T(xd), env.T(gd), env.T(bd), env.T(y),
        byref(pb))
    if acc == "ex":
        bits = C["NN_ACCUMULATE_DX"] | C["NN_ACCUMULATE_DW"] | C["NN_ACCUMULATE_DB"]
        opts = params(BackwardOptions, accumulate=bits)
        lib("nn_layernorm_backward_ex", env.ctx, byref(pb), byref(opts), env.T(dyd), env.T(dx),
            env.T(dg), env.T(db))
    else:
        lib("nn_layernorm_backward", env.ctx, byref(pb), env.T(dyd), env.T(dx), env.T(dg),
            env.T(db))
    env.sync_out()
    res = [("y", y, yr.detach())]
    for name, got, ref in (("dx", dx, xr), ("dgamma", dg, gr), ("dbeta", db, br)):
        if got is not None:
            key = {"dx": "dx", "dgamma": "dw", "dbeta": "db"}[name]
            res.append((name, got, ref.grad + (olds[key] if acc else 0)))
    return res


def run_rnn(env, cell, T, N, I, H, L, bidir, proj, batch_first, bias, hx, lens, acc):
    torch, lib = env.torch, env.lib
    nn = torch.nn
    D, O = (2 if bidir else 1), (proj or H)
    lstm = cell == "lstm"
    kw = dict(num_layers=L, bidirectional=bidir, batch_first=batch_first, bias=bias != "none")
    if lstm:
        m = nn.LSTM(I, H, proj_size=proj, **kw)
    elif cell == "gru":
        m = nn.GRU(I, H, **kw)
    else:
        m = nn.RNN(I, H, nonlinearity=cell, **kw)
    m = m.double()
    with torch.no_grad():
        for name, prm in m.named_parameters():
            prm.copy_(env.rand(*prm.shape, lo=-0.6, hi=0.6))
            # nnprim's single-bias modes are PyTorch's two biases with the other one zero
            if (bias == "input" and name.startswith("bias_hh")) or \
                    (bias == "recurrent" and name.startswith("bias_ih")):
                prm.zero_()
    xs = (N, T, I) if batch_first else (T, N, I)
    x = env.rand(*xs)
    h0 = env.rand(L * D, N, O)
    c0 = env.rand(L * D, N, H)
    xr, h0r, c0r = (t.clone().requires_grad_() for t in (x, h0, c0))
    state = None if not hx else ((h0r, c0r) if lstm else h0r)
    pack = nn.utils.rnn
    if lens:
        packed = pack.pack_padded_sequence(xr, torch.tensor(lens), batch_first=batch_first,
                                           enforce_sorted=False)
        out, st = m(packed, state)
        yr, _ = pack.pad_packed_sequence(out, batch_first=batch_first, total_length=T)
    else:
        yr, st = m(xr, state)
    hyr, cyr = st if lstm else (st, None)
    dy, dhy = env.rand(*yr.shape), env.rand(*hyr.shape)
    dcy = env.rand(*cyr.shape) if lstm else None
    loss = (yr * dy).sum() + (hyr * dhy).sum() + ((cyr * dcy).sum() if lstm else 0)
    loss.backward()

    p = rnn_params(lib, cell, I, H, proj, L, bidir, bias, batch_first)
    numel = c_int64()
    lib("nn_rnn_weights_size", env.ctx, byref(p), F64, byref(numel))
    wbuf = torch.zeros(numel.value, dtype=torch.float64, device=env.dev)
    dwbuf = torch.full((numel.value,), float("nan"), dtype=torch.float64, device=env.dev)
    env.keep += [wbuf, dwbuf]
    wt, dwt = lib.wrap(env.ctx, wbuf.data_ptr(), [numel.value]), \
        lib.wrap(env.ctx, dwbuf.data_ptr(), [numel.value])
    prms = dict(m.named_parameters())
    views, res, olds = [], [], {}
    for layer in range(L):
        for d in range(D):
            for cname, stem in rnn_view_names(cell, layer, bias, proj):
                tname = "%s_l%d%s" % (stem, layer, "_reverse" if d else "")
                v = Tensor()
                lib("nn_rnn_weight_view", env.ctx, byref(p), byref(wt), layer, d, C[cname],
                    byref(v))
                vdims = tuple(v.dims[i] for i in range(v.rank))
                if vdims != tuple(prms[tname].shape):
                    raise AssertionError("view %s has dims %s, PyTorch's %s has %s" %
                                         (cname, vdims, tname, tuple(prms[tname].shape)))
                off = (v.data - wbuf.data_ptr()) // 8
                n = prms[tname].numel()
                wbuf[off:off + n].copy_(prms[tname].detach().reshape(-1).to(env.dev))
                if acc:
                    olds[tname] = env.rand(n)
                    dwbuf[off:off + n].copy_(olds[tname].to(env.dev))
                views.append((tname, off, n))
    xd, h0d, c0d = env.to_dev(x), env.to_dev(h0), env.to_dev(c0)
    dyd, dhyd = env.to_dev(dy), env.to_dev(dhy)
    dcyd = env.to_dev(dcy) if lstm else None
    y, hy = env.nan(yr.shape), env.nan(hyr.shape)
    cy = env.nan(cyr.shape) if lstm else None
    dx, dhx = env.nan(xs), env.nan(h0.shape)
    dcx = env.nan(c0.shape) if lstm else None
    lengths = (c_int32 * N)(*lens) if lens else None
    env.sync_in()
    pb = c_void_p()
    lib("nn_rnn_forward", env.ctx, byref(p),
        by_role(RnnForwardTensors, lengths, x=env.T(xd), hx=env.T(h0d) if hx else None,
                cx=env.T(c0d) if hx and lstm else None, w=byref(wt), y=env.T(y), hy=env.T(hy),
                cy=env.T(cy)),
        byref(pb))
    # accumulating into dw is asked of the backward that takes options
    opts = params(BackwardOptions, accumulate=C["NN_ACCUMULATE_DW"] if acc else 0)
    lib("nn_rnn_backward_ex", env.ctx, byref(pb), byref(opts),
        by_role(RnnBackwardTensors, dy=env.T(dyd), dhy=env.T(dhyd), dcy=env.T(dcyd), dx=env.T(dx),
                dhx=env.T(dhx) if hx else None, dcx=env.T(dcx) if hx and lstm else None,
                dw=byref(dwt)))
    env.sync_out()
    res += [("y", y, yr.detach()), ("hy", hy, hyr.detach())]
    if lstm:
        res.append(("cy", cy, cyr.detach()))
    res.append(("dx", dx, xr.grad))
    if hx:
        res.append(("dhx", dhx, h0r.grad))
        if lstm:
            res.append(("dcx", dcx, c0r.grad))
    for tname, off, n in views:
        exp = prms[tname].grad.reshape(-1)
        if acc:
            exp = exp + olds[tname]
        res.append(("d" + tname, dwbuf[off:off + n], exp))
    return res


def run_optim(env, kind, steps, shapes, hyper):
    """steps of torch.optim (foreach=False) in float64 on the CPU, with clip_grad_norm_ first when
    max_grad_norm is set, against nnprim's steps on the same gradients; the parameters after."""
    torch, lib = env.torch, env.lib
    env.tol = 1e-12
    h = dict(lr=1e-3, momentum=0.0, dampening=0.0, nesterov=0, weight_decay=None, beta1=0.9,
             beta2=0.999, eps=1e-8, max_grad_norm=0.0)
    h.update(hyper)
    if h["weight_decay"] is None:
        h["weight_decay"] = 1e-2 if kind == "adamw" else 0.0
    init = [env.rand(*s) for s in shapes]
    grads = [[env.rand(*s) for s in shapes] for _ in range(steps)]
    prm = [t.clone().requires_grad_() for t in init]
    if kind == "sgd":
        opt = torch.optim.SGD(prm, lr=h["lr"], momentum=h["momentum"], dampening=h["dampening"],
                              nesterov=bool(h["nesterov"]), weight_decay=h["weight_decay"],
                              foreach=False)
    else:
        cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
        opt = cls(prm, lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"],
                  weight_decay=h["weight_decay"], foreach=False)
    for gs in grads:
        for p, g in zip(prm, gs):
            p.grad = g.clone()
        if h["max_grad_norm"] > 0:
            # torch < 2.0 has no foreach argument here; its one implementation is the loop
            kw = {"foreach": False} if "foreach" in \
                inspect.signature(torch.nn.utils.clip_grad_norm_).parameters else {}
            torch.nn.utils.clip_grad_norm_(prm, h["max_grad_norm"], **kw)
        opt.step()

    op = OptimParams()
    lib("nn_optim_params_default", byref(op), C["NN_OPTIM_" + kind.upper()])
    for name, value in h.items():
        setattr(op, name, value)
    dev_p = [env.to_dev(t) for t in init]
    dev_g = [env.to_dev(g) for g in grads[0]]
    n = len(shapes)
    ps = (Tensor * n)(*[env.view(t) for t in dev_p])
    gs = (Tensor * n)(*[env.view(t) for t in dev_g])
    env.sync_in()
    handle = c_void_p()
    lib("nn_optim_create", env.ctx, byref(op), n, ps, byref(handle))
    try:
        for k in range(steps):
            for d, g in zip(dev_g, grads[k]):
                d.copy_(g)
            env.sync_in()
            lib("nn_optim_step", env.ctx, handle, n, gs)
            env.sync_out()
        count = c_int64(-1)
        lib("nn_optim_get_step", env.ctx, handle, byref(count))
    finally:
        lib("nn_optim_free", env.ctx, handle)
    if count.value != steps:
        raise AssertionError("nn_optim_get_step: %d steps, expected %d" % (count.value, steps))
    return [("p%d" % i, d, p.detach()) for i, (d, p) in enumerate(zip(dev_p, prm))]


def compare(torch, got, exp):
    g = got.detach().to("cpu").reshape(exp.shape)
    if torch.isnan(g).any():
        return math.inf, math.inf, "%d NaN (not written?)" % int(torch.isnan(g).sum())
    err = float((g - exp).abs().max()) if exp.numel() else 0.0
    scale = float(exp.abs().max()) if exp.numel() else 0.0
    return err, (err / scale if scale > 0 else err), ("" if scale > 0 else "(expected all zero)")


def run_all(args):
    try:  # only here: --dry-run and --self-test run without torch
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        if not args.skip_without_torch:
            raise
        print("skipped: needs PyTorch in %s (%s)" % (sys.executable, e))
        return 77
    path = args.lib or default_lib()
    lib = Lib(path)
    # Both load cuDNN into this one process: the versions say which copy answered.
    print("# nnprim %s (%s), cuDNN runtime %d as nnprim sees it; torch %s, torch's cuDNN %s" %
          (lib.dll.nn_version().decode(), path, lib.dll.nn_cudnn_runtime_version(),
           torch.__version__, torch.backends.cudnn.version() if torch.cuda.is_available() else "-"))
    backends = ["ref"]
    want_gpu = args.backend in ("cudnn", "all")
    if want_gpu:
        count = c_int(0)
        why = None
        if not torch.cuda.is_available():
            why = "torch sees no CUDA device"
        elif lib.dll.nn_device_count(byref(count)) != 0 or count.value < 1:
            why = "nnprim sees no CUDA device"
        elif lib.dll.nn_cudnn_runtime_version() == 0:
            why = "this nnprim build has no cuDNN, or libcudnn cannot be loaded"
        if why:
            print("cudnn: not run: " + why)
            if args.backend == "cudnn":
                return 1
        else:
            backends.append("cudnn")
    if args.backend == "cudnn":
        backends.remove("ref")
    torch.set_grad_enabled(True)
    torch.use_deterministic_algorithms(False)
    cases = [c for c in all_cases() if args.filter in c[0]]
    passed = failed = unsupported = 0
    for backend in backends:
        ctx = lib.context(backend, torch.cuda.current_device() if backend == "cudnn" else 0)
        tol = TOL[backend]
        try:
            for name, fn, kw in cases:
                env = Env(torch, lib, ctx, backend, zlib.crc32(name.encode()))
                env.F, env.note, env.tol = F, None, None
                try:
                    res = fn(env, **kw)
                except NnError as e:
                    if backend == "cudnn" and e.unsupported():
                        unsupported += 1
                        print("%-6s %-70s unsupported (%s)" % (backend, name, e))
                    else:
                        failed += 1
                        print("%-6s %-70s FAIL %s" % (backend, name, e))
                    try:
                        lib("nn_ctx_synchronize", ctx)
                    except NnError as e2:
                        print("       (after the failure: %s)" % e2)
                    continue
                except AssertionError as e:
                    failed += 1
                    print("%-6s %-70s FAIL %s" % (backend, name, e))
                    continue
                parts, ok = [], True
                case_tol = env.tol or tol
                for label, got, exp in res:
                    err, rel, why = compare(torch, got, exp)
                    good = rel <= case_tol
                    ok = ok and good
                    parts.append("%s %.1e/%.1e%s%s" % (label, err, rel, "" if good else "!",
                                                       " " + why if why else ""))
                if ok:
                    passed += 1
                else:
                    failed += 1
                print("%-6s %-70s %s  %s" % (backend, name, "ok  " if ok else "FAIL",
                                              "  ".join(parts)))
                if env.note:
                    print("       %s: %s" % (env.note, "so does nnprim here" if ok else
                                             "nnprim here makes " + env.note_else))
        finally:
            lib.dll.nn_ctx_destroy(ctx)
    print("(each output: max abs error / max relative error against max|expected|; '!' marks "
          "one beyond the tolerance: ref %g, cudnn %g; optimizer cases 1e-12 on both)" %
          (TOL["ref"], TOL["cudnn"]))
    print("parity: %d passed, %d failed, %d unsupported" % (passed, failed, unsupported))
    return 1 if failed else 0


def default_lib():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    for d in ("build-gpu", "build"):
        path = os.path.join(root, d, "src", "libnnprim.so")
        if os.path.exists(path):
            return path
    sys.exit("torch_parity.py: no build-gpu/src/libnnprim.so nor build/src/libnnprim.so; "
             "pass the library's path")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lib", nargs="?", help="libnnprim.so (default: build-gpu/, else build/)")
    ap.add_argument("--backend", choices=("ref", "cudnn", "all"), default="all",
                    help="all (the default): the reference, and cuDNN where a GPU is usable")
    ap.add_argument("--filter", default="", help="run only the cases whose name contains this")
    ap.add_argument("--dry-run", action="store_true", help="list the cases, run nothing")
    ap.add_argument("--self-test", action="store_true",
                    help="a few calls with hand-computed results, without torch")
    ap.add_argument("--no-calls", metavar="WHY",
                    help="--self-test: skip the calls (exit 77), printing why")
    ap.add_argument("--skip-without-torch", action="store_true",
                    help="exit 77 (meson's skip) with the reason when torch cannot be imported")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a)
    if a.dry_run:
        cases = [c for c in all_cases() if a.filter in c[0]]
        for name, _, _ in cases:
            print(name)
        print("%d cases, each on the reference backend and (where a GPU is usable) on cuDNN"
              % len(cases))
        return 0
    return run_all(a)


if __name__ == "__main__":
    sys.exit(main())
