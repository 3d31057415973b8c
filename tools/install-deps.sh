#!/bin/sh
# Installs the Debian packages nnprim needs to build and test, where they are missing, and makes
# Debian's source package of jemalloc reachable (a deb-src entry) for tools/jemalloc.sh, which
# meson runs to build nnprim's private jemalloc. Needs root, or sudo.
# The CUDA toolkit (CUDA runtime, cuBLAS, cuDNN 9) is expected under /usr/local/cuda; without it
# nnprim still builds and runs its reference backend.
set -eu
cd "$(dirname "$0")/.."
# Compilers and libc headers; the build; the tests (Criterion, C++ for the consumer test, the
# dlopen test's python3); jemalloc's build (make, patch, the tarballs' bzip2 and xz); CI's
# format check (clang-format 14); DLPack's header for nnprim's DLPack interop (include/nnprim/
# dlpack.h; without it those functions answer NN_E_NOT_BUILT); the Python package (python/):
# its install (venv, pip, setuptools, wheel: no download) and its tests (pytest, NumPy, and
# PyTorch for nnprim.torch: Debian's CPU build, which runs the reference-backend tests); CI's
# fuzzers (tools/fuzz.sh: clang 14 and its libFuzzer and sanitizer runtimes). Not xsltproc:
# jemalloc's documentation is not built.
packages="gcc g++ libc6-dev binutils make patch bzip2 xz-utils meson ninja-build pkg-config
  python3 libcriterion-dev clang-format-14 libdlpack-dev python3-venv python3-pip
  python3-setuptools python3-wheel python3-pytest python3-numpy python3-torch clang-14
  libclang-rt-14-dev"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || missing="$missing $p"
done

# The jemalloc source is needed unless it is staged (.nnprim-device/src, the GPU machine) or
# already fetched or built in build-jemalloc/.
need_src=1
ls .nnprim-device/src/jemalloc_*.dsc build-jemalloc/src/jemalloc_*.dsc build-jemalloc/*/done \
  > /dev/null 2>&1 && need_src=0
if [ $need_src = 1 ] && ! grep -rqsE '^(deb-src |Types:.*deb-src)' /etc/apt/sources.list \
  /etc/apt/sources.list.d/; then
  add_src=1
else
  add_src=0
fi
[ -z "$missing" ] && [ $add_src = 0 ] && exit 0

sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo > /dev/null 2>&1; then
    sudo=sudo
  else
    echo "install-deps.sh: not root and no sudo, so nothing can be installed." >&2
    [ -n "$missing" ] && echo "  As root, run: apt-get install --no-install-recommends$missing" >&2
    [ $add_src = 1 ] && echo "  As root, add a deb-src entry for Debian's archive (so that apt-get source" \
      "jemalloc works), or put jemalloc_5.3.0-1.dsc and its tarballs in a folder named by" \
      "NNPRIM_JEMALLOC_SRC (or configure with -Djemalloc=disabled: plain malloc)." >&2
    echo "  Then run this again." >&2
    exit 1
  fi
fi
if [ $add_src = 1 ]; then
  # The same archives as the binary entries, for source packages.
  list=/etc/apt/sources.list.d/nnprim-deb-src
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | $sudo tee "$list.sources" > /dev/null
  else
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $sudo tee "$list.list" > /dev/null
  fi
  echo "install-deps.sh: added deb-src entries ($list.*) for Debian's jemalloc source package"
fi
[ -n "$missing" ] && echo "installing:$missing"
$sudo apt-get update -qq
[ -z "$missing" ] ||
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing > /dev/null
