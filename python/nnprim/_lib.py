"""Finding and loading libnnprim.so, and calling it with every prototype from _abi."""
import ctypes
import ctypes.util
import os
import sys
import sysconfig
import threading

from . import _abi
from .errors import error

_lock = threading.Lock()
_loaded = {}

# Objects dropped while nnprim is inside a callback of ours (an allocator hook, where the
# garbage collector may run) must not call nnprim from there: their frees wait here for the
# next call.
_tls = threading.local()
_deferred = []


class callback_scope:
    """with callback_scope(): ... around Python code nnprim calls back into."""

    def __enter__(self):
        _tls.depth = getattr(_tls, "depth", 0) + 1

    def __exit__(self, *exc):
        _tls.depth -= 1


def release(fn):
    """Run a free now, or after the callback nnprim is in returns."""
    if getattr(_tls, "depth", 0):
        _deferred.append(fn)
    else:
        fn()


def drain():
    while _deferred and not getattr(_tls, "depth", 0):
        try:
            _deferred.pop()()
        except Exception:  # a context closed meanwhile: nothing left to free
            pass


def candidates(path=None):
    """Where the library is looked for, in order: the explicit path, NNPRIM_LIBRARY, the
    installed prefix (meson's libdirs under sys.prefix and /usr/local), then the loader's own
    search (LD_LIBRARY_PATH, the ld.so cache)."""
    if path is not None:
        return [os.fspath(path)]
    env = os.environ.get("NNPRIM_LIBRARY")
    if env:
        return [env]
    out = []
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for prefix in dict.fromkeys([sys.prefix, sys.base_prefix, "/usr/local", "/usr"]):
        for libdir in ("lib/" + multiarch if multiarch else None, "lib64", "lib"):
            if libdir:
                p = os.path.join(prefix, libdir, "libnnprim.so")
                if os.path.exists(p):
                    out.append(p)
    found = ctypes.util.find_library("nnprim")
    out.append(found or "libnnprim.so")
    return out


class Library:
    """libnnprim through ctypes: lib.call("nn_x", ...) raises on a status other than NN_OK."""

    def __init__(self, path):
        self.path = path
        self.dll = ctypes.CDLL(path)
        for name, (restype, argtypes) in _abi.FUNCTIONS.items():
            fn = getattr(self.dll, name, None)
            if fn is None:
                raise OSError("%s: no symbol %s: the library is older than this package" %
                              (path, name))
            fn.restype = restype
            fn.argtypes = argtypes
        self.dll.nn_last_error.restype = ctypes.POINTER(_abi.nn_error_info)
        self.version = self.dll.nn_version().decode()

    def call(self, name, *args):
        if _deferred:
            drain()
        st = getattr(self.dll, name)(*args)
        if st != _abi.NN_OK:
            info = self.dll.nn_last_error().contents
            msg = info.message.decode(errors="replace")
            raise error(st, msg or self.dll.nn_status_string(st).decode(), name)
        return st


def load(path=None):
    """The library (loaded once per path). Raises OSError naming every place tried."""
    with _lock:
        key = None if path is None else os.fspath(path)
        if key in _loaded:
            return _loaded[key]
        tried = []
        for c in candidates(path):
            try:
                lib = Library(c)
            except OSError as e:
                tried.append("%s (%s)" % (c, e))
                continue
            _loaded[key] = lib
            return lib
        raise OSError("nnprim: libnnprim.so not found; tried: " + "; ".join(tried) +
                      ". Pass library=PATH, set NNPRIM_LIBRARY, or install nnprim "
                      "(meson install -C build).")
