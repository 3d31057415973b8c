#!/bin/bash
# The GPU machine's test job: build in build-gpu, run every test (the Python package's with the
# machine's python3, which has a CUDA PyTorch), then compute-sanitizer's quick pass
# (tools/gpu-sanitize.sh). Logs go to $OUT (or ./gpu-out): tests.log and sanitize.txt; the
# failures and the totals are printed. The benchmarks are tools/perf.sh's.
#   tools/gpu-run.sh [tests|sanitize|all]     (default all)
set -u
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-gpu-out}
mkdir -p "$out"
what=${1:-all}
build="build-gpu"
case $what in tests | sanitize | all) ;; *)
  echo "tools/gpu-run.sh: expected tests, sanitize or all, got '$what'" >&2; exit 2 ;;
esac
rc=0
if [ "$what" != sanitize ]; then
  NNPRIM_PYTHON=${NNPRIM_PYTHON:-$(command -v python3)} tools/test.sh "$build" \
    > "$out/tests.log" 2>&1 || rc=1
  grep -E "^\[----\]|FAIL|suite .*: no results" "$out/tests.log" | head -60
  echo "tests: $(tail -n 1 "$out/tests.log")"
fi
if [ "$what" != tests ]; then
  [ -f "$build/build.ninja" ] || meson setup "$build" > /dev/null || exit 1
  ninja -C "$build" > /dev/null || exit 1
  tools/gpu-sanitize.sh --quick "$build" > "$out/sanitize.txt" 2>&1 || rc=1
  tail -n 3 "$out/sanitize.txt"
fi
exit $rc
