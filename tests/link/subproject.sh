#!/bin/sh
# nnprim as a meson subproject: a parent project (tests/link/subproject/) finds it with
# dependency('nnprim', fallback: 'nnprim'), with -Werror and nnprim's default_library=static.
# nnprim must then configure without its tests (nor Criterion), build no libnnprim.so (the CLI
# included), and the parent's program must run. The private jemalloc build is shared with the
# checkout's (build-jemalloc/), so this costs one build of nnprim's sources.
#   subproject.sh SOURCE_DIR
set -u
src=$(cd "$1" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nnprim-subproject-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cp "$src/tests/link/subproject/meson.build" "$src/tests/link/consumer.c" "$tmp/"
mkdir "$tmp/subprojects"
ln -s "$src" "$tmp/subprojects/nnprim"
meson setup "$tmp/build" "$tmp" -Dwerror=true -Dnnprim:default_library=static \
  -Dnnprim:bench=false > "$tmp/setup.log" 2>&1 || { cat "$tmp/setup.log"; fail "meson setup"; }
grep -qi criterion "$tmp/setup.log" && fail "configuring nnprim as a subproject looked for Criterion"
ninja -C "$tmp/build" > "$tmp/build.log" 2>&1 || { tail -n 40 "$tmp/build.log"; fail "build"; }
tests=$(meson introspect --tests "$tmp/build")
[ "$tests" = "[]" ] || fail "nnprim defined tests as a subproject: $tests"
[ -z "$(find "$tmp/build" -name 'libnnprim.so*')" ] || fail "libnnprim.so built with default_library=static"
for p in "$tmp/build/consumer" "$tmp/build/subprojects/nnprim/cli/nnprim"; do
  readelf -d "$p" | grep -q "NEEDED.*libnnprim" && fail "$p needs libnnprim.so"
done
"$tmp/build/consumer" || fail "the parent project's program"
"$tmp/build/subprojects/nnprim/cli/nnprim" info > /dev/null || fail "the subproject's CLI"
echo "ok: nnprim as a static subproject, without tests; the parent's program ran"
