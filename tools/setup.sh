#!/bin/sh
# One command from a fresh Debian machine: install what is missing, build nnprim in build/,
# install the Python package (python/) into .venv (a virtual environment that also sees Debian's
# NumPy and PyTorch; pip builds it offline with Debian's setuptools), and run the main job,
# `nnprim info` (build features, devices, cuDNN, the backend chosen), then the package's own
# `python -m nnprim info` on the library just built.
set -eu
cd "$(dirname "$0")/.."
tools/install-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
[ -x .venv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv
.venv/bin/python -m pip install -q --no-build-isolation --no-index ./python
build/cli/nnprim info
NNPRIM_LIBRARY="$PWD/build/src/libnnprim.so" .venv/bin/python -m nnprim info
