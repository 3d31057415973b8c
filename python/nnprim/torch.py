"""PyTorch modules over nnprim: torch.autograd.Functions whose forward keeps nnprim's pullback
and whose backward consumes it. The backward keeps the pullback (nn_backward_options.keep) as
long as PyTorch keeps the graph, so retain_graph=True and gradcheck work; it is freed with the
graph. Recurrent pullbacks are single-use: a second backward runs the forward again.

    from nnprim.torch import LSTM, Linear, Conv2d
    lstm = LSTM(10, 20, num_layers=2)            # torch.nn.LSTM's arguments and parameter names
    lstm.load_state_dict(torch_lstm.state_dict())

CPU tensors run on nnprim's reference backend, CUDA tensors on cuDNN, on PyTorch's current
stream of the tensor's device. On CUDA, nnprim's allocations (workspaces, what pullbacks keep)
come from PyTorch's caching allocator (use_torch_allocator()). Each device has one nnprim
context, shared by every module (context()).
"""
import ctypes
import math
import threading

import torch
from torch import nn

from . import _abi, _lib
from .core import Context, Tensor, _padding, _seq, conv_params, pool_params
from .errors import DtypeError, Error, InvalidArgumentError, MemorySpaceError

_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
           torch.bfloat16: "bfloat16"}
_CODES = {torch.float32: _abi.NN_DTYPE_F32, torch.float64: _abi.NN_DTYPE_F64,
          torch.float16: _abi.NN_DTYPE_F16, torch.bfloat16: _abi.NN_DTYPE_BF16}
_lock = threading.Lock()
_contexts = {}  # torch.device (with its index on CUDA) -> Context
_allocators = {}
_use_torch_alloc = True
_settings = {}


def configure(**settings):
    """Settings (Context's keywords, backend and device excepted) for the per-device contexts
    made from now on; the existing ones are closed (after their work), so call it between
    training runs, not while a graph holds pullbacks."""
    bad = {"backend", "device", "stream", "library"} & set(settings)
    if bad:
        raise TypeError("nnprim.torch.configure: %s chosen per device, not settable" %
                        ", ".join(sorted(bad)))
    with _lock:
        for ctx in _contexts.values():
            if not ctx.closed:
                ctx.synchronize()
                ctx.close()
        _contexts.clear()
        _settings.clear()
        _settings.update(settings)


def use_torch_allocator(on=True):
    """Whether contexts created from now on route nnprim's device allocations through PyTorch's
    caching allocator (the default), or leave them to nnprim's own pool."""
    global _use_torch_alloc
    _use_torch_alloc = bool(on)


_ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                             ctypes.c_void_p)
_FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                            ctypes.c_int, ctypes.c_void_p)


def _install_allocator(lib, device):
    """nn_mem_set_allocator(device): nnprim's device blocks from torch's caching allocator,
    allocated on the stream nnprim asks for (docs/INTEGRATION.md, a framework's allocator)."""

    streams = {}  # block -> the stream it was allocated for (torch reuses it on that one)

    def alloc(user, nbytes, dev, stream):
        with _lib.callback_scope():  # no nnprim call from here (objects freed meanwhile wait)
            try:
                p = torch.cuda.caching_allocator_alloc(nbytes, dev, stream or 0)
            except RuntimeError:  # out of memory: nnprim reports NN_E_OOM_DEVICE
                return None
            streams[p] = stream or 0
            return p

    def free(user, p, nbytes, dev, stream):
        with _lib.callback_scope():
            # torch hands the block out again on its allocation stream at once; work nnprim
            # queued on another stream must finish first (the contract: reuse after that work)
            if streams.pop(p, 0) != (stream or 0):
                torch.cuda.ExternalStream(stream or 0, device=dev).synchronize()
            torch.cuda.caching_allocator_delete(p)

    a = _abi.nn_mem_allocator()
    cbs = (_ALLOC_FN(alloc), _FREE_FN(free))  # kept: nnprim calls them while set
    a.alloc = ctypes.cast(cbs[0], ctypes.c_void_p)
    a.free = ctypes.cast(cbs[1], ctypes.c_void_p)
    lib.call("nn_mem_set_allocator", device, ctypes.byref(a))
    _allocators[device] = cbs


# The raw handle of a device's current stream, an int: torch.cuda.current_stream() makes a
# Stream object per call, which costs more than the op's own host time. Private to torch, so the
# public form where a build lacks it.
_current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
    (lambda index: torch.cuda.current_stream(index).cuda_stream)


def context(device=None):
    """The nnprim context of a torch device (reference backend for the CPU, cuDNN for cuda:N),
    made on first use; on CUDA set to PyTorch's current stream of that device."""
    device = torch.device(device if device is not None else "cpu")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return _context(device)


def _context(device):
    """context() of a torch.device that has its index on CUDA (a tensor's): every call's path."""
    ctx = _contexts.get(device)
    if ctx is None:
        ctx = _create_context(device)
    if ctx.backend == "cudnn":
        s = _current_stream(ctx.device)
        if s != ctx._stream:
            ctx.set_stream(s)
    return ctx


def _create_context(device):
    """The context of a device not seen yet (made once, whichever thread asks first)."""
    with _lock:
        ctx = _contexts.get(device)
        if ctx is None:
            if device.type == "cuda":
                stream = _current_stream(device.index)
                # torch's targets live on the GPU: read there, as torch.nn's loss does, the
                # cross-entropy does not wait for the GPU at every step (context.h)
                s = dict(xent_targets="device")
                s.update(_settings)
                ctx = Context(backend="cudnn", device=device.index, stream=stream, **s)
                if _use_torch_alloc and device.index not in _allocators:
                    _install_allocator(ctx._lib, device.index)
            elif device.type == "cpu":
                ctx = Context(backend="ref", **_settings)
            else:
                raise MemorySpaceError(_abi.NN_E_MEMSPACE, "nnprim.torch: device %s: expected "
                                       "cpu or cuda" % device, "nnprim.torch")
            _contexts[device] = ctx
        return ctx


def _wrap(ctx, t, name, call):
    """A view of a torch tensor for ctx (no copy). The nn_tensor is filled from torch's own
    metadata instead of nn_tensor_wrap(): torch knows which device its memory is on, so the
    pointer lookup (and a ctypes call per tensor) is not needed; every op validates its views."""
    if t is None:
        return None
    code = _CODES.get(t.dtype)
    cuda = t.is_cuda
    shape = t.shape
    rank = len(shape)
    if code is None or cuda != (ctx.backend == "cudnn") or not 0 < rank <= _abi.NN_MAX_RANK or \
            t.numel() == 0:
        _refuse(ctx, t, name, call)
    if cuda:
        space, device = _abi.NN_SPACE_DEVICE, t.get_device()
    else:
        space, device = _abi.NN_SPACE_HOST, -1
    nt = _abi.nn_tensor(data=t.data_ptr(), dtype=code, rank=rank, space=space, device=device,
                        flags=_abi.NN_TENSOR_BORROWED)
    nt.dims[:rank] = shape
    nt.strides[:rank] = t.stride()
    return Tensor(ctx, nt, keep=t)


def _refuse(ctx, t, name, call):
    """The error of a tensor _wrap() cannot view: its dtype, its device, then its shape."""
    if t.dtype not in _CODES:
        raise DtypeError(_abi.NN_E_DTYPE, "%s: %s has dtype %s: expected float32, float64, "
                         "float16 or bfloat16" % (call, name, t.dtype), call)
    if t.is_cuda != (ctx.backend == "cudnn"):
        raise MemorySpaceError(_abi.NN_E_MEMSPACE, "%s: %s is on %s, the others on %s: "
                               "expected one device" % (call, name, t.device,
                                                        "cuda" if ctx.backend == "cudnn"
                                                        else "cpu"), call)
    raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "%s: %s has shape %s: expected 1 to %d "
                               "dimensions, none empty" % (call, name, tuple(t.shape),
                                                           _abi.NN_MAX_RANK), call)


def _dense(t):
    """t, or a packed copy when it is neither packed row-major nor channels-last (nnprim reads
    those two layouts; torch.nn takes any strides, and copies where its kernels need to)."""
    if t is None or t.is_contiguous():
        return t
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return t
    if t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d):
        return t
    return t.contiguous()


def _ctx_of(call, *ts):
    dev = None
    for t in ts:
        if t is not None:
            d = t.device
            if dev is None:
                dev = d
            elif d != dev:
                raise MemorySpaceError(_abi.NN_E_MEMSPACE, "%s: tensors on %s and %s: expected "
                                       "one device" % (call, dev, d), call)
    return _context(dev)


def _grad_mode(*ts):
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in ts)


def _empty(like, shape):
    # new_empty: like's dtype and device without torch.empty's keyword parsing
    return like.new_empty(shape)


def _input_grads(fctx):
    """dx, dw and db of a forward that saved (x, w) and has_b, each None where not needed."""
    (x, w), need = fctx.shapes, fctx.needs_input_grad
    dx = _empty(x, x.shape) if need[0] else None
    dw = _empty(w, w.shape) if need[1] else None
    db = _empty(w, w.shape[:1]) if fctx.has_b and need[2] else None
    return dx, dw, db


# --------------------------------------------------------------------------------------------
# linear

def _linear(ctx, x, w, b, relu, training):
    """nnprim's linear forward: (y, the pullback or None)."""
    y = _empty(x, x.shape[:-1] + (w.shape[0],))
    call = "nnprim.torch.linear"
    # the struct Context.linear makes: made once, shared with it
    p = ctx._cached(("linear", bool(relu)), lambda: ctx._linear_params(relu))
    pb = ctx._forward("nn_linear_forward", "Context.linear", "linear", p,
                      (_wrap(ctx, x, "x", call), _wrap(ctx, w, "weight", call),
                       _wrap(ctx, b, "bias", call)), _wrap(ctx, y, "y", call), training)
    return y, pb


class _LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(fctx, x, w, b, relu):
        ctx = _ctx_of("linear", x, w, b)
        y, pb = _linear(ctx, x, w, b, relu, True)
        fctx.pb, fctx.ctx, fctx.shapes, fctx.has_b = pb, ctx, (x, w), b is not None
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(fctx, dy):
        ctx = fctx.ctx
        dx, dw, db = _input_grads(fctx)
        call = "nnprim.torch.linear backward"
        dy = dy.contiguous()
        ctx.linear_backward(fctx.pb, _wrap(ctx, dy, "dy", call), _wrap(ctx, dx, "dx", call),
                            _wrap(ctx, dw, "dw", call), _wrap(ctx, db, "db", call), keep=True)
        return dx, dw, db, None


def linear(x, weight, bias=None, relu=False):
    """torch.nn.functional.linear (then relu when asked) through nnprim."""
    x, weight = _dense(x), _dense(weight)
    if _grad_mode(x, weight, bias):
        return _LinearFn.apply(x, weight, bias, relu)
    return _linear(_ctx_of("linear", x, weight, bias), x, weight, bias, relu, False)[0]


class Linear(nn.Linear):
    """torch.nn.Linear's arguments, parameters and state_dict; forward through nnprim."""

    def forward(self, x):
        return linear(x, self.weight, self.bias)


# --------------------------------------------------------------------------------------------
# convolution

def _conv_out(x, w, stride, lo, hi, dil):
    S = x.dim() - 2
    out = [x.shape[0], w.shape[0]]
    for i in range(S):
        span = dil[i] * (w.shape[2 + i] - 1) + 1
        out.append((x.shape[2 + i] + lo[i] + hi[i] - span) // stride[i] + 1)
    return out


def _conv(ctx, p, x, w, b, shape, training):
    """nnprim's convolution forward with params p into a new y of shape: (y, the pullback or
    None)."""
    y = _empty(x, shape)
    call = "nnprim.torch.conv"
    pb = ctx._forward("nn_conv_forward", "Context.conv", "conv", p,
                      (_wrap(ctx, x, "input", call), _wrap(ctx, w, "weight", call),
                       _wrap(ctx, b, "bias", call)), _wrap(ctx, y, "y", call), training)
    return y, pb


class _ConvFn(torch.autograd.Function):
    @staticmethod
    def forward(fctx, x, w, b, ctx, p, shape):
        y, pb = _conv(ctx, p, x, w, b, shape, True)
        fctx.pb, fctx.ctx, fctx.shapes, fctx.has_b = pb, ctx, (x, w), b is not None
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(fctx, dy):
        ctx = fctx.ctx
        dx, dw, db = _input_grads(fctx)
        call = "nnprim.torch.conv backward"
        # autograd hands broadcast gradients (stride 0, e.g. of a sum) that cuDNN refuses
        ctx.conv_backward(fctx.pb, _wrap(ctx, _dense(dy), "dy", call), _wrap(ctx, dx, "dx", call),
                          _wrap(ctx, dw, "dw", call), _wrap(ctx, db, "db", call), keep=True)
        return dx, dw, db, None, None, None


def conv(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, relu=False):
    """torch.nn.functional.conv1d/2d/3d (then relu when asked) through nnprim; padding an int,
    per-dimension ints, "valid" or "same" (stride 1)."""
    S = x.dim() - 2
    if S not in (1, 2, 3):
        raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "nnprim.torch.conv: input has %d "
                                   "dimensions: expected 3, 4 or 5 (N, C, spatial)" % x.dim(),
                                   "nnprim.torch.conv")
    stride = _seq(stride, S, "conv: stride")
    dil = _seq(dilation, S, "conv: dilation")
    x, weight = _dense(x), _dense(weight)
    if padding == "valid":
        lo = hi = [0] * S
    elif padding == "same":
        if any(s != 1 for s in stride):
            raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "nnprim.torch.conv: padding='same'"
                                       " needs stride 1 (as in PyTorch)", "nnprim.torch.conv")
        tot = [dil[i] * (weight.shape[2 + i] - 1) for i in range(S)]
        lo = [t // 2 for t in tot]
        hi = [t - t // 2 for t in tot]
    else:
        lo, hi = _padding(padding, S, "conv: padding")
    ctx = _ctx_of("conv", x, weight, bias)
    # the struct Context.conv makes of these arguments: made once, shared with it
    p = ctx._cached(("conv", S, stride, (lo, hi), dil, groups, False, relu),
                    lambda: conv_params(S, stride, (lo, hi), dil, groups, False, relu, ctx._lib))
    shape = _conv_out(x, weight, stride, lo, hi, dil)
    if _grad_mode(x, weight, bias):
        return _ConvFn.apply(x, weight, bias, ctx, p, shape)
    return _conv(ctx, p, x, weight, bias, shape, False)[0]


class _ConvMixin:
    def forward(self, x):
        if self.padding_mode != "zeros":
            raise NotImplementedError("nnprim.torch.Conv: padding_mode=%r: only 'zeros'"
                                      % self.padding_mode)
        return conv(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                    self.groups)


class Conv1d(_ConvMixin, nn.Conv1d):
    """torch.nn.Conv1d's arguments, parameters and state_dict; forward through nnprim."""


class Conv2d(_ConvMixin, nn.Conv2d):
    """torch.nn.Conv2d's arguments, parameters and state_dict; forward through nnprim."""


class Conv3d(_ConvMixin, nn.Conv3d):
    """torch.nn.Conv3d's arguments, parameters and state_dict; forward through nnprim."""


# --------------------------------------------------------------------------------------------
# pooling

def _pool_out(x, win, stride, lo, hi):
    return list(x.shape[:2]) + [(x.shape[2 + i] + lo[i] + hi[i] - win[i]) // stride[i] + 1
                                for i in range(len(win))]


def _pool(ctx, p, x, shape, training):
    """nnprim's pooling forward with params p into a new y of shape: (y, the pullback or
    None)."""
    y = _empty(x, shape)
    call = "nnprim.torch.pool"
    pb = ctx._forward("nn_pool_forward", "Context.pool", "pool", p,
                      (_wrap(ctx, x, "input", call),), _wrap(ctx, y, "y", call), training)
    return y, pb


class _PoolFn(torch.autograd.Function):
    @staticmethod
    def forward(fctx, x, ctx, p, shape):
        y, pb = _pool(ctx, p, x, shape, True)
        fctx.pb, fctx.ctx, fctx.x = pb, ctx, x
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(fctx, dy):
        ctx, x = fctx.ctx, fctx.x
        dx = _empty(x, x.shape)
        call = "nnprim.torch.pool backward"
        ctx.pool_backward(fctx.pb, _wrap(ctx, _dense(dy), "dy", call), _wrap(ctx, dx, "dx", call),
                          keep=True)
        return dx, None, None, None


def pool(x, kernel_size, stride=None, padding=0, mode="max"):
    S = x.dim() - 2
    win = _seq(kernel_size, S, "pool: kernel_size")
    stride = win if stride is None else _seq(stride, S, "pool: stride")
    pad = _seq(padding, S, "pool: padding")
    ctx = _ctx_of("pool", x)
    # the struct Context.pool makes of these arguments, made once (and shared with it); making
    # it checks the arguments before any allocation
    p = ctx._cached(("pool", S, win, stride, pad, mode),
                    lambda: pool_params(S, win, stride, pad, mode))
    x = _dense(x)
    shape = _pool_out(x, win, stride, pad, pad)
    if _grad_mode(x):
        return _PoolFn.apply(x, ctx, p, shape)
    return _pool(ctx, p, x, shape, False)[0]


class _MaxPool(nn.Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        if dilation != 1 or return_indices or ceil_mode:
            raise NotImplementedError("nnprim.torch.MaxPool: dilation, return_indices and "
                                      "ceil_mode are not supported")
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return pool(x, self.kernel_size, self.stride, self.padding, "max")


class MaxPool1d(_MaxPool):
    """torch.nn.MaxPool1d (without dilation, indices or ceil_mode) through nnprim."""


class MaxPool2d(_MaxPool):
    """torch.nn.MaxPool2d (without dilation, indices or ceil_mode) through nnprim."""


class MaxPool3d(_MaxPool):
    """torch.nn.MaxPool3d (without dilation, indices or ceil_mode) through nnprim."""


class _AvgPool(nn.Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        if ceil_mode or divisor_override is not None:
            raise NotImplementedError("nnprim.torch.AvgPool: ceil_mode and divisor_override "
                                      "are not supported")
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.count_include_pad = count_include_pad

    def forward(self, x):
        return pool(x, self.kernel_size, self.stride, self.padding,
                    "mean_include_pad" if self.count_include_pad else "mean_exclude_pad")


class AvgPool1d(_AvgPool):
    """torch.nn.AvgPool1d (without ceil_mode) through nnprim."""


class AvgPool2d(_AvgPool):
    """torch.nn.AvgPool2d (without ceil_mode or divisor_override) through nnprim."""


class AvgPool3d(_AvgPool):
    """torch.nn.AvgPool3d (without ceil_mode or divisor_override) through nnprim."""


# --------------------------------------------------------------------------------------------
# cross-entropy

class _XentFn(torch.autograd.Function):
    @staticmethod
    def forward(fctx, x, target):
        ctx = _ctx_of("cross_entropy", x, target)
        call = "nnprim.torch.cross_entropy"
        target = target.contiguous()
        loss = _empty(x, (x.shape[0],) + tuple(x.shape[2:]))
        _, pb = ctx.cross_entropy(_wrap(ctx, x, "input", call), target,
                                  loss=_wrap(ctx, loss, "loss", call), training=True)
        fctx.pb, fctx.ctx, fctx.x = pb, ctx, x
        return loss

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(fctx, dloss):
        ctx, x = fctx.ctx, fctx.x
        dx = _empty(x, x.shape)
        call = "nnprim.torch.cross_entropy backward"
        ctx.cross_entropy_backward(fctx.pb, _wrap(ctx, dloss.contiguous(), "dloss", call),
                                   _wrap(ctx, dx, "dx", call), keep=True)
        return dx, None


def cross_entropy(x, target, reduction="mean"):
    """torch.nn.functional.cross_entropy with class-index targets (in [0, C); no weights,
    ignore_index or label smoothing) through nnprim's fused softmax cross-entropy."""
    if reduction not in ("mean", "sum", "none"):
        raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "cross_entropy: reduction %r: "
                                   "expected mean, sum or none" % (reduction,), "cross_entropy")
    x = _dense(x)
    if _grad_mode(x):
        loss = _XentFn.apply(x, target)
    else:
        ctx = _ctx_of("cross_entropy", x, target)
        loss = _empty(x, (x.shape[0],) + tuple(x.shape[2:]))
        ctx.cross_entropy(_wrap(ctx, x, "input", "nnprim.torch.cross_entropy"),
                          target.contiguous(), loss=_wrap(ctx, loss, "loss", "cross_entropy"))
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


class CrossEntropyLoss(nn.Module):
    """torch.nn.CrossEntropyLoss (class indices; weight, ignore_index and label_smoothing at
    their defaults, the targets in [0, C)) through nnprim."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__()
        if weight is not None or label_smoothing != 0.0 or size_average is not None or \
                reduce is not None:
            raise NotImplementedError("nnprim.torch.CrossEntropyLoss: weight, label_smoothing "
                                      "and the deprecated size_average/reduce are not supported")
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, x, target):
        return cross_entropy(x, target, self.reduction)


# --------------------------------------------------------------------------------------------
# layer normalisation

def _ln_rank(x, normalized_shape, call):
    """The normalized rank, once x's trailing dimensions are normalized_shape."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k < 1 or k > x.dim() or tuple(x.shape[x.dim() - k:]) != shape:
        raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "%s: normalized_shape %s: expected "
                                   "the trailing dimensions of the input %s" %
                                   (call, shape, tuple(x.shape)), call)
    return k


class _LayerNormFn(torch.autograd.Function):
    @staticmethod
    def forward(fctx, x, w, b, k, eps):
        ctx = _ctx_of("layer_norm", x, w, b)
        y = _empty(x, x.shape)
        call = "nnprim.torch.layer_norm"
        _, pb = ctx.layernorm(_wrap(ctx, x, "input", call), _wrap(ctx, w, "weight", call),
                              _wrap(ctx, b, "bias", call), normalized_rank=k, eps=eps,
                              y=_wrap(ctx, y, "y", call), training=True)
        fctx.pb, fctx.ctx, fctx.x = pb, ctx, x
        fctx.has = (w is not None, b is not None)
        fctx.normalized = tuple(x.shape[x.dim() - k:])
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(fctx, dy):
        ctx, x, need, ns = fctx.ctx, fctx.x, fctx.needs_input_grad, fctx.normalized
        dx = _empty(x, x.shape) if need[0] else None
        dw = _empty(x, ns) if fctx.has[0] and need[1] else None
        db = _empty(x, ns) if fctx.has[1] and need[2] else None
        call = "nnprim.torch.layer_norm backward"
        ctx.layernorm_backward(fctx.pb, _wrap(ctx, dy.contiguous(), "dy", call),
                               _wrap(ctx, dx, "dx", call), _wrap(ctx, dw, "dweight", call),
                               _wrap(ctx, db, "dbias", call), keep=True)
        return dx, dw, db, None, None


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.layer_norm through nnprim."""
    call = "nnprim.torch.layer_norm"
    k = _ln_rank(x, normalized_shape, call)
    x, weight, bias = x.contiguous(), _contig(weight), _contig(bias)
    if _grad_mode(x, weight, bias):
        return _LayerNormFn.apply(x, weight, bias, k, eps)
    ctx = _ctx_of("layer_norm", x, weight, bias)
    y = _empty(x, x.shape)
    ctx.layernorm(_wrap(ctx, x, "input", call), _wrap(ctx, weight, "weight", call),
                  _wrap(ctx, bias, "bias", call), normalized_rank=k, eps=eps,
                  y=_wrap(ctx, y, "y", call))
    return y


def _contig(t):
    return None if t is None else t.contiguous()


class LayerNorm(nn.LayerNorm):
    """torch.nn.LayerNorm's arguments, parameters and state_dict; forward through nnprim."""

    def forward(self, x):
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


# --------------------------------------------------------------------------------------------
# recurrent layers

def _rnn_train_forward(ctx, mod, p, x, hx, cx, flat, call):
    y, hy, cy = _rnn_outputs(mod, x)
    _, pb = ctx.rnn(p, _wrap(ctx, x, "input", call), _wrap(ctx, flat, "weights", call),
                    _wrap(ctx, hx, "h_0", call), _wrap(ctx, cx, "c_0", call),
                    y=_wrap(ctx, y, "output", call), hy=_wrap(ctx, hy, "h_n", call),
                    cy=_wrap(ctx, cy, "c_n", call), training=True)
    return y, hy, cy, pb


class _RnnFn(torch.autograd.Function):
    @staticmethod
    def forward(fctx, mod, x, hx, cx, *params):
        ctx = _ctx_of("rnn", x, hx, cx, *params)
        call = "nnprim.torch." + type(mod).__name__
        p = mod._params(ctx, mod.training)
        flat = mod._flat(ctx, p, params)
        y, hy, cy, pb = _rnn_train_forward(ctx, mod, p, x, hx, cx, flat, call)
        fctx.pb, fctx.ctx, fctx.mod, fctx.p = pb, ctx, mod, p
        fctx.saved = (x, hx, cx, flat, params)
        return (y, hy, cy) if cy is not None else (y, hy)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(fctx, dy, dhy, dcy=None):
        ctx, mod = fctx.ctx, fctx.mod
        x, hx, cx, flat, params = fctx.saved
        need = fctx.needs_input_grad
        call = "nnprim.torch.%s backward" % type(mod).__name__
        if fctx.pb.consumed:
            # A second backward through the graph (retain_graph=True): recurrent pullbacks are
            # single-use (cuDNN's backward overwrites its reserve space), so the forward runs
            # again, with the same dropout seed, for a new one.
            fctx.pb = _rnn_train_forward(ctx, mod, fctx.p, x, hx, cx, flat, call)[3]
        dx = _empty(x, x.shape) if need[1] else None
        dhx = _empty(hx, hx.shape) if hx is not None and need[2] else None
        dcx = _empty(cx, cx.shape) if cx is not None and need[3] else None
        want_w = any(need[4:])
        dflat = torch.empty_like(flat) if want_w else None  # the backward overwrites it
        ctx.rnn_backward(fctx.pb, _wrap(ctx, dy.contiguous(), "dy", call),
                         _wrap(ctx, dhy.contiguous(), "dh_n", call),
                         _wrap(ctx, None if dcy is None else dcy.contiguous(), "dc_n", call),
                         _wrap(ctx, dx, "dx", call), _wrap(ctx, dhx, "dh_0", call),
                         _wrap(ctx, dcx, "dc_0", call), _wrap(ctx, dflat, "dweights", call))
        dps = [None] * len(params)
        if want_w:
            for i, (off, shape) in enumerate(mod._layout[1]):
                n = math.prod(shape)
                dps[i] = dflat[off:off + n].view(shape)
        return (None, dx, dhx, dcx) + tuple(dps)


def _rnn_outputs(mod, x):
    D = 2 if mod.bidirectional else 1
    O = mod.proj_size or mod.hidden_size
    if mod.batch_first:
        N, T = x.shape[0], x.shape[1]
        y = _empty(x, (N, T, D * O))
    else:
        T, N = x.shape[0], x.shape[1]
        y = _empty(x, (T, N, D * O))
    hy = _empty(x, (mod.num_layers * D, N, O))
    cy = _empty(x, (mod.num_layers * D, N, mod.hidden_size)) if mod._cell == "lstm" else None
    return y, hy, cy


class _RNNBase(nn.RNNBase):
    """torch.nn.RNNBase's parameters (weight_ih_l0, ...) and state_dict; forward through nnprim.
    The parameters are views of the packed weights nnprim reads (flatten_parameters()); the
    gradient comes back as views of one buffer."""

    _cell = None  # nnprim's cell name (torch's RNNBase keeps its own in self.mode)

    def _params(self, ctx, training):
        dropout = self.dropout if training else 0.0
        key = ("rnn", self._cell, self.input_size, self.hidden_size, self.num_layers,
               self.bidirectional, self.proj_size, self.bias, self.batch_first, dropout)
        p = ctx._cached(key, lambda: ctx.rnn_params(
            self._cell, self.input_size, self.hidden_size, num_layers=self.num_layers,
            bidirectional=self.bidirectional, proj_size=self.proj_size, bias=self.bias,
            batch_first=self.batch_first, dropout=dropout))
        if dropout:
            # a seed per call, in a copy: the cached struct is shared, and a graph kept for a
            # second backward keeps its own
            p = type(p).from_buffer_copy(p)
            p.dropout_seed = int(torch.randint(0, 2 ** 62, (1,)))
        return p

    def _pack_layout(self, ctx, p, like):
        """(offset, shape) of each parameter in the packed weights of ctx's backend, torch's
        order, and their element count; found once per backend and dtype."""
        key = (ctx.backend, like.dtype)
        if getattr(self, "_layout", (None,))[0] != key:
            numel = ctx.rnn_weights_size(p, _DTYPES[like.dtype])
            probe = torch.zeros(numel, dtype=like.dtype, device=like.device)
            base = probe.data_ptr()
            size = probe.element_size()
            lay = []
            D = 2 if self.bidirectional else 1
            for layer in range(self.num_layers):
                for d in range(D):
                    names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if self.bias
                                                          else [])
                    if self.proj_size:
                        names.append("weight_hr")
                    for name in names:
                        v = ctx.rnn_weight_view(p, _wrap(ctx, probe, "w", "rnn"), layer, d, name)
                        lay.append(((v.data_ptr - base) // size, tuple(v.shape)))
            self._layout = (key, lay, numel)
        return self._layout[1], self._layout[2]

    def _flat(self, ctx, p, params):
        """The packed weights of ctx's backend: the buffer the parameters are views of (after
        flatten_parameters()), else a copy filled from params (torch's order)."""
        lay, numel = self._pack_layout(ctx, p, params[0])
        buf = getattr(self, "_packed", None)
        if buf is not None and buf.device == params[0].device and \
                buf.dtype == params[0].dtype and buf.numel() == numel:
            base, size = buf.data_ptr(), buf.element_size()
            if all(prm.data_ptr() == base + off * size and tuple(prm.shape) == shape and
                   prm.is_contiguous() for (off, shape), prm in zip(lay, params)):
                return buf
        flat = params[0].new_zeros(numel)
        for (off, shape), prm in zip(lay, params):
            n = math.prod(shape)
            if tuple(prm.shape) != shape:
                raise Error(_abi.NN_E_SHAPE, "nnprim.torch.%s: a parameter has shape %s, "
                            "nnprim's view %s" % (type(self).__name__, tuple(prm.shape),
                                                  shape), "nnprim.torch")
            flat[off:off + n].copy_(prm.detach().reshape(-1))
        return flat

    def forward(self, input, hx=None):
        if isinstance(input, nn.utils.rnn.PackedSequence):
            raise NotImplementedError("nnprim.torch: PackedSequence is not supported")
        input = input.contiguous()
        unbatched = input.dim() == 2
        if unbatched:
            input = input.unsqueeze(1 if not self.batch_first else 0)
        cx = None
        if self._cell == "lstm" and hx is not None:
            hx, cx = hx
        if unbatched and hx is not None:
            hx = hx.unsqueeze(1)
            cx = cx.unsqueeze(1) if cx is not None else None
        hx = None if hx is None else hx.contiguous()
        cx = None if cx is None else cx.contiguous()
        params = tuple(self._flat_weights)
        if _grad_mode(input, hx, cx, *params):
            out = _RnnFn.apply(self, input, hx, cx, *params)
        else:
            ctx = _ctx_of("rnn", input, hx, cx, *params)
            p = self._params(ctx, False)
            y, hy, cy = _rnn_outputs(self, input)
            call = "nnprim.torch." + type(self).__name__
            ctx.rnn(p, _wrap(ctx, input, "input", call),
                    _wrap(ctx, self._flat(ctx, p, params), "weights", call),
                    _wrap(ctx, hx, "h_0", call), _wrap(ctx, cx, "c_0", call),
                    y=_wrap(ctx, y, "output", call), hy=_wrap(ctx, hy, "h_n", call),
                    cy=_wrap(ctx, cy, "c_n", call))
            out = (y, hy, cy) if cy is not None else (y, hy)
        y, hs = out[0], out[1:]
        if unbatched:
            y = y.squeeze(1 if not self.batch_first else 0)
            hs = tuple(h.squeeze(1) for h in hs)
        return (y, hs) if self._cell == "lstm" else (y, hs[0])

    def flatten_parameters(self):
        """Make the parameters views of one buffer in nnprim's packed layout for their device
        (torch.nn's recurrent modules do the same for cuDNN), so that a call reads that buffer
        instead of packing a copy. torch.nn calls it at construction and after .to(), .cuda(),
        .double(); parameters of mixed devices or dtypes, or of a shape nnprim does not
        expect, are left as they are (each call then packs a copy)."""
        params = getattr(self, "_flat_weights", None)
        if self._cell is None or not params or \
                any(not isinstance(w, torch.Tensor) for w in params):
            return
        first = params[0]
        if first.dtype not in _CODES or \
                any(w.dtype != first.dtype or w.device != first.device for w in params):
            return
        ctx = context(first.device)
        lay, numel = self._pack_layout(ctx, self._params(ctx, False), first)
        if len(lay) != len(params) or \
                any(tuple(w.shape) != shape for (_, shape), w in zip(lay, params)):
            return
        buf = first.new_zeros(numel)
        with torch.no_grad():
            for (off, shape), w in zip(lay, params):
                view = buf[off:off + math.prod(shape)].view(shape)
                view.copy_(w)
                w.data = view
        self._packed = buf


class LSTM(_RNNBase):
    """torch.nn.LSTM's arguments (proj_size included), parameters and state_dict."""
    _cell = "lstm"

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(_RNNBase):
    """torch.nn.GRU's arguments, parameters and state_dict."""
    _cell = "gru"

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)


class RNN(_RNNBase):
    """torch.nn.RNN's arguments (nonlinearity "tanh" or "relu"), parameters and state_dict."""

    def __init__(self, *args, **kwargs):
        args = list(args)
        # as torch.nn.RNN: nonlinearity is the fourth positional argument or a keyword
        nonlinearity = args.pop(3) if len(args) > 3 else kwargs.pop("nonlinearity", "tanh")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError("nnprim.torch.RNN: nonlinearity %r: expected tanh or relu"
                             % (nonlinearity,))
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)
        self.nonlinearity = nonlinearity
        self._cell = nonlinearity
        self.flatten_parameters()  # torch.nn's construction called it before the cell was known


__all__ = ["context", "configure", "use_torch_allocator", "linear", "conv", "pool",
           "cross_entropy", "Linear", "Conv1d", "Conv2d", "Conv3d", "MaxPool1d", "MaxPool2d",
           "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "CrossEntropyLoss", "LSTM", "GRU",
           "RNN"]
__all__ += ["layer_norm", "LayerNorm"]
