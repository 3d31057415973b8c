#!/bin/sh
# What libnnprim.so shows the loader and other libraries:
#   - no FLAGS STATIC_TLS (initial-exec TLS makes dlopen fail: "cannot allocate memory in static
#     TLS block");
#   - exported: only nn_* functions and data, each in the version node NNPRIM_<soversion> of
#     src/nnprim.map (no allocator, nothing of the private jemalloc);
#   - none of those names is also exported by libnanomsg, which Criterion (and so every test
#     program) loads: it has nn_strerror, nn_errno, ... and the first definition loaded wins.
#   symbols.sh LIBNNPRIM SOVERSION PROGRAM_LINKED_WITH_NANOMSG
set -u
lib=$1 node=NNPRIM_$2 prog=$3
bad=0

if readelf -d "$lib" | grep -q STATIC_TLS; then
  echo "FAIL: $lib has STATIC_TLS: $(readelf -d "$lib" | grep FLAGS)"
  bad=1
fi

exports=$(nm -D --defined-only "$lib" | awk '{ print $NF }')
[ -n "$exports" ] || { echo "FAIL: nm -D found no exports in $lib"; exit 1; }
stray=$(echo "$exports" | grep -vE "^nn_[a-z0-9][a-z0-9_]*@@$node\$|^$node\$")
if [ -n "$stray" ]; then
  echo "FAIL: exported outside nn_*@@$node:"
  echo "$stray" | head -20
  bad=1
fi

nanomsg=$(ldd "$prog" | awk '/libnanomsg/ { print $3 }')
if [ -z "$nanomsg" ] || [ ! -f "$nanomsg" ]; then
  echo "FAIL: $prog does not load libnanomsg (ldd), so the clash check cannot run"
  exit 1
fi
ours=$(mktemp)
echo "$exports" | sed 's/@.*//' | sort -u > "$ours"
both=$(nm -D --defined-only "$nanomsg" | awk '{ print $NF }' | sed 's/@.*//' | sort -u | comm -12 - "$ours")
count=$(wc -l < "$ours")
rm -f "$ours"
if [ -n "$both" ]; then
  echo "FAIL: exported by both $lib and $nanomsg:"
  echo "$both"
  bad=1
fi

[ $bad = 0 ] && echo "ok: $count exports, all nn_*@@$node; no STATIC_TLS; none shared with $nanomsg"
exit $bad
