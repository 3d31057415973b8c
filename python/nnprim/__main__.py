"""python -m nnprim info: the library found, its version and build features, the backend a
default context picks. python -m nnprim.bench: timings against PyTorch (GPU)."""
import sys

from . import _abi, _lib
from .core import Context


def info(argv):
    lib = _lib.load(argv[0] if argv else None)
    feats = lib.dll.nn_build_features()
    names = [n[len("NN_FEATURE_"):].lower() for n in _abi.ENUMS["nn_feature"]
             if feats & getattr(_abi, n)]
    print("libnnprim: %s (version %s; built with %s)" % (lib.path, lib.version,
                                                         ", ".join(names) or "nothing optional"))
    with Context(library=lib.path) as ctx:
        print("default context: backend %s%s" % (ctx.backend, ", device %d" % ctx.device
                                                 if ctx.backend == "cudnn" else ""))
    return 0


def main(argv):
    if not argv or argv[0] != "info":
        print("usage: python -m nnprim info [LIBNNPRIM]\n"
              "       python -m nnprim.bench models|rnn [options]", file=sys.stderr)
        return 2
    return info(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
