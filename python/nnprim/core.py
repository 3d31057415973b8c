"""Context, Tensor and Pullback: nnprim's C objects with Python lifetimes.

Everything a Context made (tensors it allocated, pullbacks, optimizers) is released when the
context closes; using any of them afterwards raises ClosedError instead of touching freed
memory. A pullback is consumed by its first backward call; a second raises PullbackError.
"""
import ctypes
import logging
import threading
import weakref
from ctypes import byref, c_double, c_int32, c_int64, c_void_p

from . import _abi, _lib, dlpack
from .errors import DtypeError, Error, InvalidArgumentError, PullbackError, closed

log = logging.getLogger("nnprim")

DTYPES = {"float32": _abi.NN_DTYPE_F32, "float64": _abi.NN_DTYPE_F64,
          "float16": _abi.NN_DTYPE_F16, "bfloat16": _abi.NN_DTYPE_BF16}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
_ALIASES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16",
            "float": "float32", "double": "float64", "half": "float16"}

# Settings given as words: field -> {word: value}
_WORDS = {
    "backend": {"auto": _abi.NN_BACKEND_AUTO, "ref": _abi.NN_BACKEND_REF,
                "cudnn": _abi.NN_BACKEND_CUDNN},
    "math_mode": {"strict": _abi.NN_MATH_STRICT_FP32, "tf32": _abi.NN_MATH_TF32},
    "tuning": {"heuristic": _abi.NN_TUNING_HEURISTIC, "autotune": _abi.NN_TUNING_AUTOTUNE},
    "rnn_graphs": {"auto": _abi.NN_GRAPHS_AUTO, False: _abi.NN_GRAPHS_OFF,
                   True: _abi.NN_GRAPHS_ON},
    "linear_graphs": {"auto": _abi.NN_GRAPHS_AUTO, False: _abi.NN_GRAPHS_OFF,
                      True: _abi.NN_GRAPHS_ON},
    "xent_targets": {"checked": _abi.NN_TARGETS_CHECKED, "device": _abi.NN_TARGETS_ON_DEVICE},
}
SETTINGS = tuple(f for f, _ in _abi.nn_settings._fields_ if f != "reserved")


def dtype_code(dtype, call="nnprim"):
    """nn_dtype of a name ("float32", "f32"), a NumPy or torch dtype, or an nn_dtype value."""
    if isinstance(dtype, int) and dtype in DTYPE_NAMES:
        return dtype
    name = str(dtype).replace("torch.", "")
    name = _ALIASES.get(name, name)
    if name in DTYPES:
        return DTYPES[name]
    raise DtypeError(_abi.NN_E_DTYPE, "%s: dtype %s: expected float32, float64, float16 or "
                     "bfloat16" % (call, dtype), call)


def _dims(shape):
    return (c_int64 * max(1, len(shape)))(*shape)


class Tensor:
    """An nn_tensor: a view of memory that something keeps alive (a NumPy array, a torch tensor,
    a DLPack capsule), or storage nnprim allocated (Context.empty), freed by free() or with the
    context. Exports through DLPack: numpy.from_dlpack(t), torch.from_dlpack(t)."""

    def __init__(self, ctx, nt, keep=None, owned=False):
        self._ctx = ctx
        self._nt = nt
        self._keep = keep
        self._owned = owned
        if owned:
            ctx._live.add(self)

    @property
    def c(self):
        """The nn_tensor struct (raises ClosedError once freed)."""
        if self._nt is None or (self._owned and self._ctx._ptr is None):
            raise closed("tensor freed (by free() or its context's close())", "nnprim.Tensor")
        return self._nt

    @property
    def shape(self):
        nt = self.c
        return tuple(nt.dims[:nt.rank])

    @property
    def strides(self):
        """In elements, as nnprim counts them."""
        nt = self.c
        return tuple(nt.strides[:nt.rank])

    @property
    def dtype(self):
        return DTYPE_NAMES[self.c.dtype]

    @property
    def on_device(self):
        return self.c.space == _abi.NN_SPACE_DEVICE

    @property
    def data_ptr(self):
        return self.c.data or 0

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self):
        if self._nt is None:
            return "<nnprim.Tensor freed>"
        return "<nnprim.Tensor %s %s on %s>" % (
            "x".join(map(str, self.shape)), self.dtype,
            "cuda:%d" % self._nt.device if self.on_device else "host")

    def free(self):
        """Give storage from Context.empty() back (a view just drops its reference)."""
        if self._nt is None:
            return
        if self._owned and self._ctx._ptr is not None:
            self._ctx._lib.call("nn_tensor_free", self._ctx._ptr, byref(self._nt))
            self._ctx._live.discard(self)
        self._nt = None
        self._keep = None

    def _release(self):  # by the context's close(): the storage goes with the context
        if self._nt is not None:
            self._ctx._lib.dll.nn_tensor_free(self._ctx._ptr, byref(self._nt))
        self._nt = None

    def __del__(self):
        try:
            if self._owned and self._nt is not None and self._ctx._ptr is not None:
                _lib.release(self.free)
        except Exception:  # interpreter shutdown: the context's close frees it
            pass

    # DLPack export: the capsule's data is this tensor's memory; the capsule keeps it alive.
    def __dlpack_device__(self):
        nt = self.c
        return (dlpack.kDLCUDA, nt.device) if self.on_device else (dlpack.kDLCPU, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        # an unversioned capsule whatever max_version asks: DLPack allows a producer without
        # the versioned struct to answer so (Debian's dlpack.h is 0.6)
        if copy or (dl_device is not None and tuple(dl_device) != self.__dlpack_device__()):
            raise BufferError("nnprim.Tensor.__dlpack__: no copies or device moves")
        nt = self.c
        if self.on_device:
            self._ctx.synchronize()  # the consumer's stream has not seen our queued work
        return dlpack.export(self, nt)

    def numpy(self):
        """A writable NumPy array sharing this host tensor's memory (and keeping it alive)."""
        import numpy
        nt = self.c
        if self.on_device:
            raise Error(_abi.NN_E_MEMSPACE, "Tensor.numpy: the tensor is in device memory; "
                        "use torch.from_dlpack(t)", "Tensor.numpy")
        np_dtype = {_abi.NN_DTYPE_F32: numpy.float32, _abi.NN_DTYPE_F64: numpy.float64,
                    _abi.NN_DTYPE_F16: numpy.float16}.get(nt.dtype)
        if np_dtype is None:
            raise DtypeError(_abi.NN_E_DTYPE, "Tensor.numpy: NumPy has no bfloat16",
                             "Tensor.numpy")
        size = numpy.dtype(np_dtype).itemsize
        extent = ctypes.c_size_t()
        self._ctx._lib.call("nn_tensor_extent_bytes", byref(nt), byref(extent))
        buf = (ctypes.c_char * extent.value).from_address(nt.data)
        buf.owner = self  # NumPy keeps buf, buf keeps this tensor
        return numpy.ndarray(self.shape, np_dtype, buffer=buf,
                             strides=tuple(s * size for s in self.strides))


class Pullback:
    """What a training-mode forward call keeps for its backward call. Consumed by backward();
    freed unused when dropped or when its context closes."""

    _free = {"conv": "nn_conv_pullback_free", "pool": "nn_pool_pullback_free",
             "linear": "nn_linear_pullback_free", "softmax": "nn_softmax_pullback_free",
             "xent": "nn_softmax_cross_entropy_pullback_free", "rnn": "nn_rnn_pullback_free",
             "layernorm": "nn_layernorm_pullback_free"}

    def __init__(self, ctx, kind, keep):
        self._ctx = ctx
        self.kind = kind
        self.ptr = c_void_p()
        self._keep = keep  # the forward's tensors, which must stay alive until the backward
        self.consumed = False
        ctx._live.add(self)

    def take(self, call):
        """The pointer for a backward call; PullbackError when already consumed."""
        self._ctx._check(call)
        if self.consumed or not self.ptr:
            raise PullbackError(_abi.NN_E_PULLBACK, "%s: pullback already consumed (a "
                                "pullback is used by one backward call)" % call, call)
        return self.ptr

    def done(self):
        self.consumed = True
        self._keep = None
        self._ctx._live.discard(self)

    def _release(self):
        if self.ptr:
            getattr(self._ctx._lib.dll, self._free[self.kind])(byref(self.ptr))
        self.consumed = True
        self._keep = None

    def free(self):
        if not self.consumed and self._ctx._ptr is not None:
            self._release()
            self._ctx._live.discard(self)
        self.consumed = True

    def __del__(self):
        try:
            if not self.consumed:
                _lib.release(self.free)
        except Exception:
            pass


_log_cb = None
_log_lock = threading.Lock()
_LEVELS = {_abi.NN_LOG_WARNING: logging.WARNING, _abi.NN_LOG_OP: logging.INFO,
           _abi.NN_LOG_TRACE: logging.DEBUG}
_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, c_void_p)


def route_log_to_logging(lib=None):
    """Send nnprim's log lines (verbose op lines at INFO, CUDA/cuDNN trace lines at DEBUG,
    warnings at WARNING) to the "nnprim" logger instead of stderr, for the whole process."""
    global _log_cb
    with _log_lock:
        if _log_cb is None:
            def cb(kind, line, user):
                with _lib.callback_scope():  # a handler must not reach nnprim from here
                    log.log(_LEVELS.get(kind, logging.INFO), "%s",
                            line.decode(errors="replace"))
            _log_cb = _LOG_FN(cb)  # kept: nnprim calls it for the rest of the process
        (lib or _lib.load()).dll.nn_set_log_callback(ctypes.cast(_log_cb, c_void_p), None)


class Context:
    """An nnprim context. Settings are keyword arguments named as nn_settings' fields
    (backend="ref"|"cudnn"|"auto", device, stream, math_mode="strict"|"tf32", deterministic,
    workspace_cap, tuning="heuristic"|"autotune", autotune_candidates, plan_cache_file,
    plan_cache_capacity, verbose, background_builds, prebuild_plans, rnn_graphs, linear_graphs,
    xent_targets="checked"|"device");
    those not given come from the NNPRIM_* environment (env=True, the default) or the library
    defaults (env=False). library: a path to libnnprim.so (else NNPRIM_LIBRARY, the installed
    prefix, the loader). log="logging" routes nnprim's log lines to the "nnprim" logger.

        with nnprim.Context(backend="ref") as ctx:
            y = ctx.tensor(numpy_array)
    """

    def __init__(self, backend=None, *, library=None, env=True, log=None, **settings):
        self._ptr = None
        self._live = weakref.WeakSet()
        self._params = {}  # params structs by their arguments (read-only to every call)
        self._lib = _lib.load(library)
        if log == "logging":
            route_log_to_logging(self._lib)
        elif log is not None:
            raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "Context: log=%r: expected None "
                                       "or 'logging'" % (log,), "Context")
        if backend is not None:
            settings["backend"] = backend
        s = _abi.nn_settings()
        self._lib.call("nn_settings_from_env" if env else "nn_settings_defaults", byref(s))
        self._cache_file = None
        for k, v in settings.items():
            if k not in SETTINGS:
                raise TypeError("Context: unknown setting %r; the settings are %s" %
                                (k, ", ".join(SETTINGS)))
            if k in _WORDS:
                words = _WORDS[k]
                if v not in words and not (isinstance(v, int) and v in words.values()):
                    raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "Context: %s=%r: expected "
                                               "one of %s" % (k, v, list(words)), "Context")
                v = words.get(v, v)
            elif k == "plan_cache_file":
                self._cache_file = v = None if v is None else str(v).encode()
            elif k == "stream":
                v = int(v or 0)
            elif isinstance(v, bool):
                v = int(v)
            setattr(s, k, v)
        ptr = c_void_p()
        self._lib.call("nn_ctx_create", byref(ptr), byref(s))
        self._ptr = ptr
        self.backend = "cudnn" if self._lib.dll.nn_ctx_backend(ptr) == _abi.NN_BACKEND_CUDNN \
            else "ref"
        got = _abi.nn_settings()
        self._lib.call("nn_ctx_get_settings", ptr, byref(got))
        self.device = got.device if self.backend == "cudnn" else -1
        # the stream as set_stream() left it: a caller following a framework's current stream
        # compares with it at every call, without asking nnprim
        self._stream = self._lib.dll.nn_ctx_stream(ptr) or 0

    # lifetime
    def _check(self, call):
        if self._ptr is None:
            raise closed("the context is closed", call)
        return self._ptr

    @property
    def closed(self):
        return self._ptr is None

    def close(self):
        """Free what the context made (pullbacks first, then tensors) and destroy it."""
        if self._ptr is None:
            return
        live = list(self._live)
        for o in live:
            if isinstance(o, Pullback):
                o._release()
        for o in live:
            if not isinstance(o, Pullback):
                o._release()
        self._live = weakref.WeakSet()
        self._lib.dll.nn_ctx_destroy(self._ptr)
        self._ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if self._ptr is not None:
                _lib.release(self.close)
        except Exception:
            pass

    def __repr__(self):
        return "<nnprim.Context %s%s>" % (self.backend, " closed" if self.closed else "")

    # settings, stream, plan cache
    def settings(self):
        """The settings in force, as a dict of nn_settings' fields."""
        s = _abi.nn_settings()
        self._lib.call("nn_ctx_get_settings", self._check("Context.settings"), byref(s))
        out = {k: getattr(s, k) for k in SETTINGS}
        if out["plan_cache_file"] is not None:
            out["plan_cache_file"] = out["plan_cache_file"].decode()
        return out

    @property
    def stream(self):
        return self._lib.dll.nn_ctx_stream(self._check("Context.stream")) or 0

    def set_stream(self, stream):
        """Run on stream (a cudaStream_t as an int; 0 for the legacy default stream)."""
        self._lib.call("nn_ctx_set_stream", self._check("Context.set_stream"), c_void_p(stream))
        self._stream = stream or 0

    def synchronize(self):
        self._lib.call("nn_ctx_synchronize", self._check("Context.synchronize"))

    def plan_cache_save(self, path):
        self._lib.call("nn_plan_cache_save", self._check("Context.plan_cache_save"),
                       str(path).encode())

    def plan_cache_load(self, path):
        self._lib.call("nn_plan_cache_load", self._check("Context.plan_cache_load"),
                       str(path).encode())

    def plan_cache_clear(self):
        self._lib.call("nn_plan_cache_clear", self._check("Context.plan_cache_clear"))

    def plan_cache_stats(self):
        st = _abi.nn_plan_cache_stats()
        self._lib.call("nn_plan_cache_get_stats", self._check("Context.plan_cache_stats"),
                       byref(st))
        return {k: getattr(st, k) for k, _ in st._fields_ if k != "reserved"}

    # tensors
    def empty(self, shape, dtype="float32"):
        """New storage from nnprim (device memory on a cuDNN context, host on a reference one);
        the contents are undefined."""
        shape = tuple(int(d) for d in shape)
        nt = _abi.nn_tensor()
        self._lib.call("nn_tensor_empty", self._check("Context.empty"),
                       dtype_code(dtype, "Context.empty"), len(shape), _dims(shape), byref(nt))
        return Tensor(self, nt, owned=True)

    def full(self, shape, value, dtype="float32"):
        t = self.empty(shape, dtype)
        self._lib.call("nn_tensor_fill_constant", self._ptr, byref(t.c), c_double(value))
        return t

    def uniform(self, shape, lo=-1.0, hi=1.0, seed=0, dtype="float32"):
        t = self.empty(shape, dtype)
        self._lib.call("nn_tensor_fill_uniform", self._ptr, byref(t.c), c_double(lo),
                       c_double(hi), seed)
        return t

    def copy_(self, dst, src):
        """dst = src (same dims and dtype; any strides)."""
        d, s = self.tensor(dst, "dst"), self.tensor(src, "src")
        self._lib.call("nn_tensor_copy", self._check("Context.copy_"), byref(d.c), byref(s.c))
        return dst

    def wrap(self, ptr, shape, dtype="float32", strides=None, keep=None):
        """A view of memory at ptr (strides in elements; None: row-major packed); keep: an
        object the view keeps alive."""
        shape = tuple(int(d) for d in shape)
        nt = _abi.nn_tensor()
        self._lib.call("nn_tensor_wrap", self._check("Context.wrap"), c_void_p(ptr),
                       dtype_code(dtype, "Context.wrap"), len(shape), _dims(shape),
                       None if strides is None else _dims(strides), byref(nt))
        return Tensor(self, nt, keep=keep)

    def from_dlpack(self, obj):
        """A view of obj's memory without a copy: anything with __dlpack__ (a NumPy array for a
        reference context, a torch CUDA tensor for a cuDNN one) or a "dltensor" capsule. On a
        cuDNN context the producer orders its pending work before this context's stream."""
        ptr = self._check("Context.from_dlpack")
        cap, keep = dlpack.capsule_of(obj, self.stream if self.backend == "cudnn" else None)
        nt = _abi.nn_tensor()
        self._lib.call("nn_tensor_from_dlpack", ptr, c_void_p(dlpack.capsule_pointer(cap)),
                       byref(nt))
        return Tensor(self, nt, keep=(keep, cap))

    def tensor(self, obj, name="tensor"):
        """obj as a Tensor: itself, or a view through DLPack."""
        if isinstance(obj, Tensor):
            obj.c
            return obj
        if getattr(obj, "requires_grad", False):
            obj = obj.detach()  # torch exports no tensor that requires grad; the memory is one
        if obj is None:
            raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "%s: expected a tensor, got None"
                                       % name, name)
        return self.from_dlpack(obj)

    # ops: functional forms over Tensor-like arguments; outputs are new nnprim tensors unless
    # given. training=True also returns the pullback.
    def _opt(self, obj, name):
        return None if obj is None else self.tensor(obj, name)

    @staticmethod
    def _ref(t):
        return None if t is None else byref(t.c)

    @staticmethod
    def _addr(t):
        """A tensor's nn_tensor as a pointer field of a struct (None: NULL)."""
        return None if t is None else ctypes.addressof(t.c)

    def _cached(self, args, make):
        """The params struct of args, made once: a training loop calls with the same arguments
        every step."""
        key = repr(args)  # lists included; equal arguments spelled two ways make two entries
        p = self._params.get(key)
        if p is None:
            if len(self._params) >= 256:
                self._params.clear()
            p = self._params[key] = make()
        return p

    def _linear_params(self, relu):
        p = _abi.nn_linear_params()
        self._lib.call("nn_linear_params_default", byref(p))
        p.activation = _abi.NN_ACTIVATION_RELU if relu else _abi.NN_ACTIVATION_IDENTITY
        return p

    def _softmax_params(self, log):
        p = _abi.nn_softmax_params()
        self._lib.call("nn_softmax_params_default", byref(p))
        p.mode = _abi.NN_SOFTMAX_MODE_LOG if log else _abi.NN_SOFTMAX_MODE_SOFTMAX
        return p

    def _layernorm_params(self, normalized_rank, eps):
        p = _abi.nn_layernorm_params()
        self._lib.call("nn_layernorm_params_default", byref(p))
        p.normalized_rank, p.eps = normalized_rank, eps
        return p

    def _forward(self, fn, call, kind, p, ins, y, training):
        """fn(ctx, &p, ins..., y, &pullback), the forward calls that take a params struct: ins
        and y are Tensors (None: NULL). Returns the pullback with training=True (it keeps ins, y
        and p alive until its backward), else None."""
        pb = Pullback(self, kind, ins + (y, p)) if training else None
        self._lib.call(fn, self._check(call), byref(p), *[self._ref(t) for t in ins], byref(y.c),
                       byref(pb.ptr) if pb else None)
        return pb

    def conv(self, x, w, b=None, *, stride=1, padding=0, dilation=1, groups=1,
             convolution=False, relu=False, y=None, training=False):
        """N-d convolution (cross-correlation unless convolution=True), the bias and relu fused.
        padding: an int, a per-dimension list, or (lo, hi) lists. Returns y, or (y, pullback)."""
        x, w, b = self.tensor(x, "x"), self.tensor(w, "w"), self._opt(b, "b")
        S = len(x.shape) - 2
        p = self._cached(("conv", S, stride, padding, dilation, groups, convolution, relu),
                         lambda: conv_params(S, stride, padding, dilation, groups, convolution,
                                             relu, self._lib))
        if y is None:
            yd = (c_int64 * len(x.shape))()
            self._lib.call("nn_conv_output_shape", byref(p), len(x.shape), _dims(x.shape),
                           _dims(w.shape), yd)
            y = self.empty(tuple(yd), x.dtype)
        y = self.tensor(y, "y")
        pb = self._forward("nn_conv_forward", "Context.conv", "conv", p, (x, w, b), y, training)
        return (y, pb) if training else y

    def conv_backward(self, pb, dy, dx=None, dw=None, db=None, accumulate=0, keep=False):
        """Consume a conv pullback; dx, dw, db: outputs (None skips one). accumulate: OR of
        NN_ACCUMULATE_DX / _DW / _DB (add into the outputs). keep=True leaves the pullback
        usable again (freed when dropped); the other backward calls take the same two."""
        return self._backward("nn_conv_backward_ex", pb, accumulate, [dy], [dx, dw, db], keep)

    def pool(self, x, window, *, stride=None, padding=0, mode="max", y=None, training=False):
        """Pooling; mode "max", "mean_include_pad" or "mean_exclude_pad"."""
        x = self.tensor(x, "x")
        S = len(x.shape) - 2
        p = self._cached(("pool", S, window, stride, padding, mode),
                         lambda: pool_params(S, window, stride, padding, mode))
        if y is None:
            yd = (c_int64 * len(x.shape))()
            self._lib.call("nn_pool_output_shape", byref(p), len(x.shape), _dims(x.shape), yd)
            y = self.empty(tuple(yd), x.dtype)
        y = self.tensor(y, "y")
        pb = self._forward("nn_pool_forward", "Context.pool", "pool", p, (x,), y, training)
        return (y, pb) if training else y

    def pool_backward(self, pb, dy, dx, accumulate=0, keep=False):
        return self._backward("nn_pool_backward_ex", pb, accumulate, [dy], [dx], keep)

    def linear(self, x, w, b=None, *, relu=False, y=None, training=False):
        """y = x w^T + b over x's last dimension."""
        x, w, b = self.tensor(x, "x"), self.tensor(w, "w"), self._opt(b, "b")
        p = self._cached(("linear", bool(relu)), lambda: self._linear_params(relu))
        if y is None:
            y = self.empty(x.shape[:-1] + (w.shape[0],) if len(w.shape) == 2 and x.shape
                           else x.shape, x.dtype)
        y = self.tensor(y, "y")
        pb = self._forward("nn_linear_forward", "Context.linear", "linear", p, (x, w, b), y,
                           training)
        return (y, pb) if training else y

    def linear_backward(self, pb, dy, dx=None, dw=None, db=None, accumulate=0, keep=False):
        return self._backward("nn_linear_backward_ex", pb, accumulate, [dy], [dx, dw, db],
                              keep)

    def softmax(self, x, *, log=False, y=None, training=False):
        """Softmax (or log-softmax) over dimension 1."""
        x = self.tensor(x, "x")
        p = self._cached(("softmax", bool(log)), lambda: self._softmax_params(log))
        y = self.tensor(self.empty(x.shape, x.dtype) if y is None else y, "y")
        pb = self._forward("nn_softmax_forward", "Context.softmax", "softmax", p, (x,), y,
                           training)
        return (y, pb) if training else y

    def softmax_backward(self, pb, dy, dx, accumulate=0, keep=False):
        return self._backward("nn_softmax_backward_ex", pb, accumulate, [dy], [dx], keep)

    def cross_entropy(self, x, targets, *, loss=None, training=False):
        """Softmax cross-entropy per sample (reduction none): x N x C (x spatial), targets an
        int32 or int64 array of class indices (N x spatial), in the memory x is in."""
        x = self.tensor(x, "x")
        tptr, ttype, tkeep = _targets(targets, x)
        t = _abi.nn_class_targets(data=tptr, type=ttype)
        shape = (x.shape[0],) + x.shape[2:]
        loss = self.tensor(self.empty(shape, x.dtype) if loss is None else loss, "loss")
        pb = Pullback(self, "xent", (x, tkeep, loss)) if training else None
        self._lib.call("nn_softmax_cross_entropy_forward", self._check("Context.cross_entropy"),
                       byref(x.c), byref(t), byref(loss.c), byref(pb.ptr) if pb else None)
        return (loss, pb) if training else loss

    def cross_entropy_backward(self, pb, dloss, dx, accumulate=0, keep=False):
        return self._backward("nn_softmax_cross_entropy_backward_ex", pb, accumulate, [dloss],
                              [dx], keep)

    def layernorm(self, x, gamma=None, beta=None, *, normalized_rank=1, eps=1e-5, y=None,
                  training=False):
        """Layer normalisation over x's last normalized_rank dimensions (torch's layer_norm):
        gamma and beta (None: none) have those dimensions. Returns y, or (y, pullback)."""
        x, gamma, beta = self.tensor(x, "x"), self._opt(gamma, "gamma"), self._opt(beta, "beta")
        p = self._cached(("layernorm", normalized_rank, eps),
                         lambda: self._layernorm_params(normalized_rank, eps))
        y = self.tensor(self.empty(x.shape, x.dtype) if y is None else y, "y")
        pb = self._forward("nn_layernorm_forward", "Context.layernorm", "layernorm", p,
                           (x, gamma, beta), y, training)
        return (y, pb) if training else y

    def layernorm_backward(self, pb, dy, dx=None, dgamma=None, dbeta=None, accumulate=0,
                           keep=False):
        """dx, dgamma, dbeta: outputs (None skips one); accumulate: NN_ACCUMULATE_DX, _DW
        (dgamma), _DB (dbeta)."""
        return self._backward("nn_layernorm_backward_ex", pb, accumulate, [dy],
                              [dx, dgamma, dbeta], keep)

    def _backward(self, fn, pb, accumulate, ins, outs, keep=False):
        call = "Context." + fn[3:-3]
        if not isinstance(pb, Pullback):
            raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "%s: pullback: expected the "
                                       "Pullback a training forward returned" % call, call)
        if pb._ctx is not self:
            raise PullbackError(_abi.NN_E_PULLBACK, "%s: the pullback belongs to another "
                                "context" % call, call)
        ptr = pb.take(call)
        ins = [self._opt(t, "dy") for t in ins]
        outs = [self._opt(t, "d") for t in outs]
        opts = _abi.nn_backward_options(accumulate=accumulate, keep=int(bool(keep)))
        if fn == "nn_rnn_backward_ex":  # its tensors go by role, in nn_rnn_backward_tensors
            t = _abi.nn_rnn_backward_tensors(*[self._addr(t) for t in ins + outs])
            self._lib.call(fn, self._ptr, byref(ptr), byref(opts), byref(t))
        else:
            self._lib.call(fn, self._ptr, byref(ptr), byref(opts),
                           *[self._ref(t) for t in ins + outs])
        if not keep:
            pb.done()
        return outs[0] if len(outs) == 1 else tuple(outs)

    # recurrent layers
    def rnn_params(self, cell, input_size, hidden_size, *, num_layers=1, bidirectional=False,
                   proj_size=0, bias=True, batch_first=False, dropout=0.0, dropout_seed=0):
        """An nn_rnn_params (cell "lstm", "gru", "tanh" or "relu"), PyTorch's meaning of each."""
        p = _abi.nn_rnn_params()
        code = {"lstm": _abi.NN_RNN_LSTM, "gru": _abi.NN_RNN_GRU, "tanh": _abi.NN_RNN_TANH,
                "relu": _abi.NN_RNN_RELU}.get(cell)
        if code is None:
            raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "Context.rnn_params: cell %r: "
                                       "expected lstm, gru, tanh or relu" % (cell,),
                                       "Context.rnn_params")
        self._lib.call("nn_rnn_params_default", byref(p), code, input_size, hidden_size)
        p.num_layers, p.bidirectional, p.proj_size = num_layers, int(bidirectional), proj_size
        p.bias_mode = _abi.NN_RNN_BIAS_DOUBLE if bias else _abi.NN_RNN_BIAS_NONE
        p.layout = _abi.NN_RNN_BATCH_MAJOR if batch_first else _abi.NN_RNN_SEQ_MAJOR
        p.dropout, p.dropout_seed = dropout, dropout_seed
        return p

    def rnn_weights_size(self, p, dtype="float32"):
        n = c_int64()
        self._lib.call("nn_rnn_weights_size", self._check("Context.rnn_weights_size"),
                       byref(p), dtype_code(dtype), byref(n))
        return n.value

    def rnn_weight_view(self, p, w, layer, direction, name):
        """The view of one matrix or bias (name "weight_ih", "weight_hh", "bias_ih", "bias_hh",
        "weight_hr") inside the packed weights w."""
        w = self.tensor(w, "w")
        code = getattr(_abi, "NN_RNN_" + name.upper())
        out = _abi.nn_tensor()
        self._lib.call("nn_rnn_weight_view", self._check("Context.rnn_weight_view"), byref(p),
                       byref(w.c), layer, direction, code, byref(out))
        return Tensor(self, out, keep=w)

    def rnn(self, p, x, w, hx=None, cx=None, *, lengths=None, y=None, hy=None, cy=None,
            training=False):
        """A recurrent layer stack; returns (y, hy, cy) (cy None but for LSTM), and the
        pullback with training=True."""
        x, w = self.tensor(x, "x"), self.tensor(w, "w")
        hx, cx = self._opt(hx, "hx"), self._opt(cx, "cx")
        lens = None
        if lengths is not None:
            lens = (c_int32 * len(lengths))(*[int(v) for v in lengths])
        D = 2 if p.bidirectional else 1
        seq_major = p.layout == _abi.NN_RNN_SEQ_MAJOR
        T, N = (x.shape[0], x.shape[1]) if seq_major else (x.shape[1], x.shape[0])
        O = p.proj_size or p.hidden_size
        if y is None:
            y = self.empty((T, N, D * O) if seq_major else (N, T, D * O), x.dtype)
        y = self.tensor(y, "y")
        hy = self.tensor(self.empty((p.num_layers * D, N, O), x.dtype) if hy is None else hy,
                         "hy")
        if p.cell == _abi.NN_RNN_LSTM:
            cy = self.tensor(self.empty((p.num_layers * D, N, p.hidden_size), x.dtype)
                             if cy is None else cy, "cy")
        else:
            cy = None
        pb = Pullback(self, "rnn", (x, w, hx, cx, y, hy, cy, lens)) if training else None
        t = _abi.nn_rnn_forward_tensors(
            x=self._addr(x), lengths=None if lens is None else ctypes.addressof(lens),
            hx=self._addr(hx), cx=self._addr(cx), w=self._addr(w), y=self._addr(y),
            hy=self._addr(hy), cy=self._addr(cy))
        self._lib.call("nn_rnn_forward", self._check("Context.rnn"), byref(p), byref(t),
                       byref(pb.ptr) if pb else None)
        return ((y, hy, cy), pb) if training else (y, hy, cy)

    def rnn_backward(self, pb, dy=None, dhy=None, dcy=None, dx=None, dhx=None, dcx=None,
                     dw=None, accumulate=0, keep=False):
        """Consume an rnn pullback; dx, dhx, dcx, dw: outputs (None skips one). accumulate:
        0 or NN_ACCUMULATE_DW (dw += the gradient), the one way to add to dw."""
        return self._backward("nn_rnn_backward_ex", pb, accumulate, [dy, dhy, dcy],
                              [dx, dhx, dcx, dw], keep)

    # optimizers
    def optimizer(self, kind, params, **hyper):
        """A fused optimizer ("sgd", "adam", "adamw") over params (tensors updated in place);
        hyper: lr, momentum, dampening, weight_decay, nesterov, beta1, beta2 (or betas), eps,
        max_grad_norm."""
        return Optimizer(self, kind, params, hyper)


class Optimizer:
    def __init__(self, ctx, kind, params, hyper):
        self._ctx = ctx
        code = {"sgd": _abi.NN_OPTIM_SGD, "adam": _abi.NN_OPTIM_ADAM,
                "adamw": _abi.NN_OPTIM_ADAMW}.get(kind)
        if code is None:
            raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "Context.optimizer: kind %r: "
                                       "expected sgd, adam or adamw" % (kind,), "optimizer")
        p = _abi.nn_optim_params()
        ctx._lib.call("nn_optim_params_default", byref(p), code)
        if "betas" in hyper:
            hyper["beta1"], hyper["beta2"] = hyper.pop("betas")
        for k, v in hyper.items():
            if k not in {f for f, _ in p._fields_} - {"kind", "reserved"}:
                raise TypeError("Context.optimizer: unknown hyperparameter %r" % k)
            setattr(p, k, v)
        self._params = [ctx.tensor(t, "params[%d]" % i) for i, t in enumerate(params)]
        arr = (_abi.nn_tensor * len(self._params))(*[t.c for t in self._params])
        self.ptr = c_void_p()
        ctx._lib.call("nn_optim_create", ctx._check("Optimizer"), byref(p), len(arr), arr,
                      byref(self.ptr))
        ctx._live.add(self)

    def _p(self, call):
        self._ctx._check(call)
        if not self.ptr:
            raise closed("optimizer freed", call)
        return self.ptr

    def step(self, grads):
        ptr = self._p("Optimizer.step")
        gs = [self._ctx.tensor(g, "grads[%d]" % i) for i, g in enumerate(grads)]
        arr = (_abi.nn_tensor * len(gs))(*[g.c for g in gs])
        self._ctx._lib.call("nn_optim_step", self._ctx._ptr, ptr, len(arr), arr)

    def set_lr(self, lr):
        self._ctx._lib.call("nn_optim_set_lr", self._ctx._ptr, self._p("Optimizer.set_lr"),
                            c_double(lr))

    @property
    def steps(self):
        n = c_int64()
        self._ctx._lib.call("nn_optim_get_step", self._ctx._ptr, self._p("Optimizer.steps"),
                            byref(n))
        return n.value

    def _release(self):
        if self.ptr:
            self._ctx._lib.dll.nn_optim_free(self._ctx._ptr, self.ptr)
        self.ptr = c_void_p()

    def free(self):
        if self.ptr and self._ctx._ptr is not None:
            self._release()
            self._ctx._live.discard(self)

    def __del__(self):
        try:
            if self.ptr:
                _lib.release(self.free)
        except Exception:
            pass


def _seq(v, S, what):
    if isinstance(v, int):
        return [v] * S
    v = list(v)
    if len(v) != S:
        raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "%s: %r: expected an int or %d ints"
                                   % (what, v, S), what)
    return v


def _padding(padding, S, what):
    """padding: an int, S ints, or (S lo ints, S hi ints) -> (lo, hi)."""
    if isinstance(padding, (list, tuple)) and len(padding) == 2 and \
            isinstance(padding[0], (list, tuple)):
        return _seq(padding[0], S, what), _seq(padding[1], S, what)
    lo = _seq(padding, S, what)
    return lo, lo


def conv_params(S, stride, padding, dilation, groups, convolution, relu, lib):
    p = _abi.nn_conv_params()
    if S not in (1, 2, 3):
        raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "conv: x has rank %d: expected 3, 4 "
                                   "or 5 (N, C and 1-3 spatial dimensions)" % (S + 2), "conv")
    lib.call("nn_conv_params_default", byref(p), S)
    lo, hi = _padding(padding, S, "conv: padding")
    for i, (s, d, a, b) in enumerate(zip(_seq(stride, S, "conv: stride"),
                                         _seq(dilation, S, "conv: dilation"), lo, hi)):
        p.stride[i], p.dilation[i], p.pad_lo[i], p.pad_hi[i] = s, d, a, b
    p.groups = groups
    p.mode = _abi.NN_CONV_CONVOLUTION if convolution else _abi.NN_CONV_CROSS_CORRELATION
    p.activation = _abi.NN_ACTIVATION_RELU if relu else _abi.NN_ACTIVATION_IDENTITY
    return p


def pool_params(S, window, stride, padding, mode):
    if S not in (1, 2, 3):
        raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "pool: x has rank %d: expected 3, 4 "
                                   "or 5" % (S + 2), "pool")
    code = {"max": _abi.NN_POOL_MAX, "mean_include_pad": _abi.NN_POOL_MEAN_INCLUDE_PAD,
            "mean_exclude_pad": _abi.NN_POOL_MEAN_EXCLUDE_PAD}.get(mode)
    if code is None:
        raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "pool: mode %r: expected max, "
                                   "mean_include_pad or mean_exclude_pad" % (mode,), "pool")
    p = _abi.nn_pool_params(spatial_rank=S, mode=code)
    window = _seq(window, S, "pool: window")
    stride = window if stride is None else _seq(stride, S, "pool: stride")
    lo, hi = _padding(padding, S, "pool: padding")
    for i in range(S):
        p.window[i], p.stride[i], p.pad_lo[i], p.pad_hi[i] = window[i], stride[i], lo[i], hi[i]
    return p


def _targets(targets, x):
    """(data pointer, nn_index_type, object to keep) of class targets: a NumPy array or torch
    tensor of int32/int64, contiguous."""
    dt = str(getattr(targets, "dtype", "")).replace("torch.", "")
    code = {"int32": _abi.NN_INDEX_I32, "int64": _abi.NN_INDEX_I64}.get(dt)
    if code is None:
        raise DtypeError(_abi.NN_E_DTYPE, "cross_entropy: targets dtype %s: expected int32 or "
                         "int64" % (dt or type(targets).__name__), "cross_entropy")
    if hasattr(targets, "data_ptr"):  # torch
        if not targets.is_contiguous():
            raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "cross_entropy: targets must be "
                                       "contiguous", "cross_entropy")
        if targets.is_cuda != x.on_device:
            raise Error(_abi.NN_E_MEMSPACE, "cross_entropy: targets on %s, x on %s: expected "
                        "the same memory" % ("cuda" if targets.is_cuda else "cpu",
                                             "cuda" if x.on_device else "cpu"), "cross_entropy")
        return targets.data_ptr(), code, targets
    if not targets.flags["C_CONTIGUOUS"]:
        raise InvalidArgumentError(_abi.NN_E_INVALID_ARG, "cross_entropy: targets must be "
                                   "C-contiguous", "cross_entropy")
    if x.on_device:
        raise Error(_abi.NN_E_MEMSPACE, "cross_entropy: targets in host memory (a NumPy array) "
                    "with x in device memory", "cross_entropy")
    return targets.ctypes.data, code, targets


def version(library=None):
    return _lib.load(library).version


def device_count(library=None):
    n = ctypes.c_int(0)
    lib = _lib.load(library)
    if lib.dll.nn_device_count(byref(n)) != 0:
        return 0
    return n.value


__all__ = ["Context", "Tensor", "Pullback", "Optimizer", "route_log_to_logging", "version",
           "device_count"]
