#!/bin/sh
# nnprim as a user gets it: `meson install` into a temporary root, then consumer.c built with
# -Wall -Wextra -pedantic -Werror as C11 and as C++17 through pkg-config (the relocatable .pc
# file, found where it was installed), and statically linked against libnnprim.a, which must not
# bring in an allocator: the program defines and exports no malloc, free, calloc or realloc (nor
# need CUDA's libraries, which libnnprim loads at run time).
#   consumers.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nnprim-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet > "$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "meson install"; }
pc=$(find "$tmp/root" -name nnprim.pc)
[ -n "$pc" ] || fail "no nnprim.pc installed"
export PKG_CONFIG_PATH="${pc%/*}"
grep -E "^Libs" "$pc" | grep -qE "\.a( |$)|jemalloc|$src|$(cd "$build" && pwd)" &&
  fail "Libs carry paths of the build: $(grep -E '^Libs' "$pc")"
cflags=$(pkg-config --cflags nnprim) libs=$(pkg-config --libs nnprim) ||
  fail "pkg-config nnprim"
libdir=$(pkg-config --variable=libdir nnprim)
case "$libdir" in "$tmp/root"/*) ;; *) fail "the .pc file is not relocatable: libdir=$libdir" ;; esac
for h in nnprim.h version.h status.h; do
  [ -f "$(pkg-config --variable=includedir nnprim)/nnprim/$h" ] || fail "nnprim/$h not installed"
done
ls "$tmp"/root/*/*/share/doc/nnprim/CONV.md "$tmp"/root/*/*/share/doc/nnprim/examples/tensors.c \
  > /dev/null 2>&1 || ls "$tmp"/root/*/share/doc/nnprim/CONV.md > /dev/null 2>&1 ||
  fail "docs or examples not installed under share/doc/nnprim"
warn="-Wall -Wextra -pedantic -Werror"

# shellcheck disable=SC2086 # flag lists
cc -std=c11 $warn "$src/tests/link/consumer.c" $cflags $libs -o "$tmp/c_shared" ||
  fail "C11 build against the installed nnprim"
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/c_shared" || fail "the C program"
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$tmp/c_shared" | grep -q "$libdir/libnnprim.so" ||
  fail "the C program did not load the installed libnnprim.so"

# shellcheck disable=SC2086
c++ -std=c++17 $warn -I"$src/tests/link" "$src/tests/link/consumer.cpp" $cflags $libs \
  -o "$tmp/cxx_shared" || fail "C++17 build against the installed nnprim"
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/cxx_shared" || fail "the C++ program"

if [ -f "$libdir/libnnprim.a" ]; then
  static_libs=$(pkg-config --static --libs nnprim | sed 's/-lnnprim\b/-l:libnnprim.a/')
  # shellcheck disable=SC2086
  cc -std=c11 $warn "$src/tests/link/consumer.c" $cflags $static_libs -o "$tmp/c_static" ||
    fail "static link: cc ... $static_libs"
  ldd "$tmp/c_static" | grep -q libnnprim && fail "the static program loads libnnprim.so"
  alloc="^(malloc|free|calloc|realloc|posix_memalign|aligned_alloc|memalign|valloc|malloc_usable_size)$"
  defined=$(nm --defined-only "$tmp/c_static" | awk '{ print $NF }' | grep -E "$alloc")
  [ -n "$defined" ] && fail "the static program defines $(echo $defined)"
  exported=$(nm -D --defined-only "$tmp/c_static" | awk '{ print $NF }' | sed 's/@.*//' | grep -E "$alloc")
  [ -n "$exported" ] && fail "the static program exports $(echo $exported)"
  # CUDA's libraries are loaded at run time, also by a static program.
  readelf -d "$tmp/c_static" | grep NEEDED | grep -qE "libcudart|libcudnn|libcublas" &&
    fail "the static program needs CUDA's libraries: $(readelf -d "$tmp/c_static" | grep NEEDED)"
  "$tmp/c_static" || fail "the static program"
  echo "static link: no allocator defined or exported, no CUDA library needed"
else
  echo "no libnnprim.a installed (-Ddefault_library=shared): static link not checked"
fi
echo "ok: installed into a temporary root; C11, C++17 and static consumers built and ran"
