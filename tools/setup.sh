#!/bin/sh
# One command from a fresh Debian machine: install what is missing, build nnprim in build/,
# and run the main job, `nnprim info` (build features, devices, cuDNN, the backend chosen).
set -eu
cd "$(dirname "$0")/.."
tools/install-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
build/cli/nnprim info
