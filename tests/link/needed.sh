#!/bin/sh
# What nnprim ships has no NEEDED entry for CUDA's libraries: they are loaded at run time
# (src/core/cuda_load.c), so the same build starts on a machine without them.
#   needed.sh FILE...
set -u
bad=0
for f in "$@"; do
  dynamic=$(readelf -d "$f") || { echo "FAIL: readelf -d $f"; exit 1; }
  found=$(echo "$dynamic" | grep NEEDED | grep -E "libcudart|libcudnn|libcublas")
  if [ -n "$found" ]; then
    echo "FAIL: $f:"
    echo "$found"
    bad=1
  fi
done
[ $bad = 0 ] && echo "ok: no NEEDED libcudart, libcudnn or libcublas in $*"
exit $bad
