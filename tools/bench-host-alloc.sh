#!/bin/sh
# Host-allocation speed of nnprim's allocators (docs/PACKAGING.md has the figures): the same
# nn__host_alloc/free patterns (tools/bench_host_alloc.c) built into a shared library, as in
# libnnprim.so, with
#   private-jemalloc   the project's jemalloc (tools/jemalloc.sh: prefixed, no initial-exec TLS)
#   debian-jemalloc    Debian's libjemalloc_pic.a (initial-exec TLS; what nnprim used before):
#                      $DEBIAN_JEMALLOC, else libjemalloc-dev's or the GPU machine's unpacked
#                      copy (/opt/nnprim-deps); skipped where there is none
#   malloc             glibc's malloc (-Djemalloc=disabled)
#   tools/bench-host-alloc.sh [WORK_DIR]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/nnprim-bench-alloc-XXXXXX)}
mkdir -p "$work"
flags="-std=c11 -O2 -D_GNU_SOURCE -fPIC -I$root/src -I$work"

build() { # name, NN_HAVE_JEMALLOC, extra flags and libraries...
  name=$1 have=$2
  shift 2
  mkdir -p "$work/$name"
  printf '#define NN_HAVE_JEMALLOC %s\n' "$have" > "$work/$name/nn_config.h"
  # shellcheck disable=SC2086
  cc $flags -I"$work/$name" -shared -o "$work/$name/libbench.so" "$root/src/core/alloc.c" \
    "$root/tools/bench_host_alloc.c" "$@" -pthread
  # shellcheck disable=SC2086
  cc $flags -DNN_BENCH_DRIVER -o "$work/$name/bench" "$root/tools/bench_host_alloc.c" \
    -L"$work/$name" -Wl,-rpath,"$work/$name" -lbench -pthread
}

je=$("$root/tools/jemalloc.sh" "$root/build-jemalloc")
inc=$(echo "$je" | head -n 1)
# shellcheck disable=SC2046
build private-jemalloc 1 -isystem "$inc" $(echo "$je" | tail -n +2)
names="private-jemalloc"
deb=${DEBIAN_JEMALLOC:-}
for f in /usr/lib/x86_64-linux-gnu/libjemalloc_pic.a \
  "${NNP_DEPS:-/opt/nnprim-deps}/usr/lib/x86_64-linux-gnu/libjemalloc_pic.a"; do
  [ -z "$deb" ] && [ -f "$f" ] && deb=$f
done
if [ -n "$deb" ]; then
  # Debian's names are unprefixed; its header is in the include folder beside lib/.
  mkdir -p "$work/debian-include/nnprim_je"
  cp "${deb%/lib/*}/include/jemalloc/jemalloc.h" "$work/debian-include/nnprim_je/"
  build debian-jemalloc 1 -I"$work/debian-include" -Dnnprim_je_mallocx=mallocx -Dnnprim_je_rallocx=rallocx \
    -Dnnprim_je_dallocx=dallocx -Dnnprim_je_mallctl=mallctl \
    -Wl,--whole-archive "$deb" -Wl,--no-whole-archive \
    -Wl,--exclude-libs,libjemalloc_pic.a -lstdc++ -lm
  names="$names debian-jemalloc"
fi
build malloc 0
names="$names malloc"
for n in $names; do
  tls=$(readelf -d "$work/$n/libbench.so" | grep -q STATIC_TLS && echo "STATIC_TLS" || echo "no STATIC_TLS")
  "$work/$n/bench" "$n ($tls)"
done
