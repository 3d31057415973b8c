#!/bin/sh
# Builds nnprim's private jemalloc from Debian's source package and prints its object files, one
# per line, for meson to put inside libnnprim (src/meson.build calls this at configure time).
#
#   tools/jemalloc.sh AREA [CC]
#
# AREA is an ignored build area (build-jemalloc/ in the checkout by default); one build per
# version, compiler and configuration is kept there and reused by every build directory, so only
# the first `meson setup` on a machine pays for it (about a minute on 2 cores).
#
# Why our own build and not Debian's libjemalloc: that one uses initial-exec TLS, so a libnnprim.so
# holding it cannot be dlopen'ed ("cannot allocate memory in static TLS block"), and it defines
# malloc/free, which a static link would hand to the whole program. Here jemalloc is configured
# with --disable-initial-exec-tls and every symbol, public and internal, carries the private
# prefix nnprim_je_: it replaces no allocator and cannot clash with the application's jemalloc.
#
# The source package, first found wins: $NNPRIM_JEMALLOC_SRC (a folder holding the .dsc, the
# .orig.tar.bz2 and the .debian.tar.xz), .nnprim-device/src (staged for the GPU machine, which has
# no registry), AREA/src, else `apt-get source --download-only` into AREA/src (needs a deb-src
# entry: tools/install-deps.sh adds one). Exit status 1, with the reason on stderr, if no source
# is found or the build fails.
set -eu
area=$1
cc=${2:-cc}
root=$(cd "$(dirname "$0")/.." && pwd)
version=5.3.0
debrev=1
# Debian's amd64 settings (debian/rules) less profiling, which nnprim does not use.
case "$(uname -m)" in
x86_64 | i?86) lg_page=12 ;;
*) lg_page=16 ;;
esac
config="--with-jemalloc-prefix=nnprim_je_ --with-private-namespace=nnprim_je_internal_
  --disable-initial-exec-tls --disable-cxx --disable-prof --disable-libdl --disable-doc
  --disable-shared --enable-static --with-lg-page=$lg_page --with-lg-hugepage=21"

log() { echo "jemalloc.sh: $*" >&2; }
# The GPU machine's image may lack bzip2, xz or patch: python3's tarfile and git apply stand in.
extract() { # tarball, folder
  tar -xf "$1" -C "$2" 2> /dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"
}
apply_patch() { # folder, patch file
  if command -v patch > /dev/null; then
    patch -s -p1 -d "$1" < "$2" >&2
  elif command -v git > /dev/null; then
    # Outside any repository (build-jemalloc/ is inside the checkout), git apply is plain patch.
    (cd "$1" && GIT_CEILING_DIRECTORIES=$(dirname "$1") git apply -p1 "$2")
  else
    # Both of Debian's 5.3.0-1 patches are inert on Linux (GNU Hurd, loongarch64 only).
    log "neither patch nor git found: $2 not applied"
  fi
}

mkdir -p "$area"
area=$(cd "$area" && pwd)
key=$(printf '%s\n' "$version-$debrev" "$($cc --version | head -n 1)" $config | cksum | cut -d' ' -f1)
dest="$area/jemalloc-$version-$key"

# Several meson setups may run at once (the consumer tests build nnprim as a subproject).
exec 9> "$area/.lock"
flock 9

if [ ! -f "$dest/done" ]; then
  src=""
  for d in "${NNPRIM_JEMALLOC_SRC:-}" "$root/.nnprim-device/src" "$area/src"; do
    [ -n "$d" ] && [ -f "$d/jemalloc_$version-$debrev.dsc" ] && { src=$d; break; }
  done
  if [ -z "$src" ]; then
    log "fetching Debian's source package jemalloc $version-$debrev"
    mkdir -p "$area/src"
    (cd "$area/src" && apt-get source --download-only -qq "jemalloc=$version-$debrev" >&2) || {
      log "apt-get source jemalloc failed: add a deb-src entry (tools/install-deps.sh does) or"
      log "set NNPRIM_JEMALLOC_SRC to a folder with jemalloc_$version-$debrev.dsc and its tarballs"
      exit 1
    }
    src=$area/src
  fi
  rm -rf "$dest"
  mkdir -p "$dest"
  log "building jemalloc $version-$debrev from $src into $dest"
  extract "$src/jemalloc_$version.orig.tar.bz2" "$dest"
  tree="$dest/jemalloc-$version"
  extract "$src/jemalloc_$version-$debrev.debian.tar.xz" "$tree"
  # Debian's patches (GNU Hurd, loongarch64): applied for fidelity to the package. Their
  # configure.ac part only matters on Hurd, so the shipped configure is used, without autoconf.
  while read -r p; do
    case "$p" in '' | '#'*) continue ;; esac
    apply_patch "$tree" "$tree/debian/patches/$p"
  done < "$tree/debian/patches/series"
  # shellcheck disable=SC2086 # $config is a list of words
  (cd "$tree" && CC=$cc CFLAGS="-O2 -g" ./configure --with-version="$version-0-g0" $config > "$dest/configure.log" 2>&1) || {
    tail -n 30 "$dest/configure.log" >&2
    log "configure failed (log: $dest/configure.log)"
    exit 1
  }
  jobs=$(getconf _NPROCESSORS_ONLN 2> /dev/null || echo 2)
  make -C "$tree" -j "$jobs" lib/libjemalloc_pic.a > "$dest/make.log" 2>&1 || {
    tail -n 30 "$dest/make.log" >&2
    log "make failed (log: $dest/make.log)"
    exit 1
  }
  touch "$dest/done"
fi
# The header under a name of its own (nnprim_je/jemalloc.h): another jemalloc/jemalloc.h on the
# include path (CPATH on the GPU machine names Debian's) must not be picked instead.
if [ ! -f "$dest/include/nnprim_je/jemalloc.h" ]; then
  mkdir -p "$dest/include/nnprim_je"
  cp "$dest/jemalloc-$version/include/jemalloc/jemalloc.h" "$dest/include/nnprim_je/"
fi
# The include folder first, then the position-independent objects.
echo "$dest/include"
ls "$dest/jemalloc-$version"/src/*.pic.o
