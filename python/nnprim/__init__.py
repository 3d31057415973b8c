"""nnprim from Python: the C library's contexts, tensors, ops and pullbacks through ctypes.

    import nnprim
    with nnprim.Context(backend="ref") as ctx:
        y, pb = ctx.conv(x, w, b, padding=1, training=True)   # x, w, b: NumPy arrays
        dx, dw, db = ctx.conv_backward(pb, dy, dx_out, dw_out, db_out)

libnnprim.so is found through Context(library=PATH), else NNPRIM_LIBRARY, else the installed
prefix, else the loader. nnprim.torch has PyTorch modules over it. docs/PYTHON.md has the rest.
"""
from . import _abi
from ._abi import (NN_ACCUMULATE_DB, NN_ACCUMULATE_DW, NN_ACCUMULATE_DX)
from .core import (Context, Optimizer, Pullback, Tensor, device_count, route_log_to_logging,
                   version)
from .errors import (ClosedError, DtypeError, Error, InvalidArgumentError, MemorySpaceError,
                     NotBuiltError, OutOfMemoryError, PullbackError, ShapeError,
                     UnsupportedError)

__version__ = "0.1.0"

__all__ = ["Context", "Tensor", "Pullback", "Optimizer", "device_count", "version",
           "route_log_to_logging", "Error", "InvalidArgumentError", "ShapeError", "DtypeError",
           "MemorySpaceError", "OutOfMemoryError", "UnsupportedError", "NotBuiltError",
           "PullbackError", "ClosedError", "NN_ACCUMULATE_DX", "NN_ACCUMULATE_DW",
           "NN_ACCUMULATE_DB", "_abi"]
