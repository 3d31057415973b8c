#!/bin/sh
# Installs the Debian packages nnprim needs to build and test, where they are missing.
# The CUDA toolkit (CUDA runtime, cuBLAS, cuDNN 9) is expected under /usr/local/cuda; without it
# nnprim still builds and runs its reference backend.
set -eu
packages="gcc meson ninja-build pkg-config python3 libcriterion-dev libjemalloc-dev"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
