"""Exceptions: nnprim's statuses as Python exceptions carrying the status name and nnprim's
message ("nn_conv_forward: x.dims[1] is 3, expected 4 ...")."""
from . import _abi


class Error(Exception):
    """A call that did not return NN_OK, or input refused before reaching nnprim.

    status: the nn_status value (int); name: its name ("NN_E_SHAPE"); message: nnprim's
    message; call: the C function (or the Python function) that refused."""

    def __init__(self, status, message, call=None):
        self.status = status
        self.name = STATUS_NAMES.get(status, "NN_E_%d" % status)
        self.message = message
        self.call = call
        super().__init__("%s: %s" % (self.name, message))


class InvalidArgumentError(Error, ValueError):
    pass


class ShapeError(Error, ValueError):
    pass


class DtypeError(Error, TypeError):
    pass


class MemorySpaceError(Error, ValueError):
    """A tensor in the wrong memory space: a CPU tensor given to a cuDNN context, or the
    reverse."""


class OutOfMemoryError(Error, MemoryError):
    pass


class UnsupportedError(Error):
    """The backend does not support the configuration (cuDNN refuses f64 for some ops)."""


class NotBuiltError(Error):
    pass


class PullbackError(Error, RuntimeError):
    """A pullback used twice, or with another context."""


class ClosedError(Error, RuntimeError):
    """A context, tensor, pullback or optimizer used after it was closed or freed."""


STATUS_NAMES = {v: n for n, (v, _) in _abi.STATUSES.items()}
_CLASSES = {
    _abi.NN_E_INVALID_ARG: InvalidArgumentError, _abi.NN_E_SHAPE: ShapeError,
    _abi.NN_E_DTYPE: DtypeError, _abi.NN_E_MEMSPACE: MemorySpaceError,
    _abi.NN_E_OOM_HOST: OutOfMemoryError, _abi.NN_E_OOM_DEVICE: OutOfMemoryError,
    _abi.NN_E_UNSUPPORTED: UnsupportedError, _abi.NN_E_NOT_BUILT: NotBuiltError,
    _abi.NN_E_PULLBACK: PullbackError, _abi.NN_E_BAD_POINTER: ClosedError,
}


def error(status, message, call=None):
    """The exception of a status."""
    return _CLASSES.get(status, Error)(status, message, call)


def closed(what, call):
    return ClosedError(_abi.NN_E_INVALID_ARG, "%s: %s" % (call, what), call)
