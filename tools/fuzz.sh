#!/bin/sh
# Build the libFuzzer targets (fuzz/, meson -Dfuzz=true, clang with -fsanitize=fuzzer,address,
# undefined) and run each for a bounded time from its seed corpus in the repo:
#   case_line  the case grammar of every op family, as `nnprim check` / `nnprim bench` take a case
#              or a pasted NNPRIM_VERBOSE line            corpus fuzz/corpus/case_line
#   settings   the NNPRIM_* variables (nn_settings_from_env, nn_mem_settings_from_env)
#                                                          corpus fuzz/corpus/settings
#   dlpack     nn_tensor_from_dlpack on any DLManagedTensor, and export round trips
#                                                          corpus fuzz/corpus/dlpack
#   plan_file  the plan-cache file decoder                 corpus tests/cudnn/plan_file_corpus
#
#   tools/fuzz.sh [--merge] [--build DIR] [SECONDS] [TARGET...]
#
# SECONDS per target (default 12: about a minute in all, what CI runs); TARGET... a subset.
# Every corpus input runs first, so a crash once found and kept as a seed stays a regression test.
# New inputs go to DIR/fuzz-work/<target>/found, never into the repo, unless --merge: then the
# inputs that add coverage are copied into the target's corpus (and plan_file's seeds are written
# again by fuzz_make_seeds), for a longer run whose results are worth keeping.
# A crash, leak, sanitizer report or timeout fails the target; its input is kept in
# DIR/fuzz-work/<target>/ (crash-*, leak-*, timeout-*) and the log's tail is printed.
# Prints one line per target and last "fuzz: N targets, M failed"; exits 1 if any failed, 2 if the
# targets cannot be built (clang or libFuzzer missing: tools/install-deps.sh installs them).
# Needs no GPU (plan_file is built without CUDA; the others run the reference backend).
set -u
cd "$(dirname "$0")/.." || exit 2
merge=0
build="build-fuzz"
seconds=12
targets=""
while [ $# -gt 0 ]; do
  case "$1" in
  --merge) merge=1 ;;
  --build) build=$2; shift ;;
  [0-9]*) seconds=$1 ;;
  case_line | settings | dlpack | plan_file) targets="$targets $1" ;;
  -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "fuzz.sh: unknown argument $1 (see tools/fuzz.sh --help)"; exit 2 ;;
  esac
  shift
done
[ -n "$targets" ] || targets="case_line settings dlpack plan_file"

cc=$(command -v clang || command -v clang-14) ||
  { echo "fuzz: clang not found (tools/install-deps.sh installs clang-14)"; exit 2; }
probe=$(mktemp -d)
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return !d + !n; }' \
  > "$probe/p.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined -o "$probe/p" "$probe/p.c" > "$probe/log" 2>&1; then
  cat "$probe/log"
  echo "fuzz: $cc cannot link libFuzzer (Debian: libclang-rt-14-dev; tools/install-deps.sh)"
  rm -rf "$probe"
  exit 2
fi
rm -rf "$probe"

if [ ! -f "$build/build.ninja" ]; then
  # Plain malloc: the sanitizers see every host allocation. No CUDA: the targets need none, and
  # the build is the same on every machine. Warnings are gcc's business (CI's -Dwerror build).
  setup_log=$(mktemp)
  CC="$cc" meson setup "$build" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Djemalloc=disabled -Dcuda=disabled -Dtests=false -Dbench=false > "$setup_log" 2>&1 ||
    { tail -n 30 "$setup_log"; rm -f "$setup_log"; echo "fuzz: meson setup failed"; exit 2; }
  rm -f "$setup_log"
fi
exes=""
for t in $targets; do
  case $t in
  plan_file) exes="$exes fuzz/plan_file/fuzz_plan_file fuzz/plan_file/fuzz_make_seeds" ;;
  *) exes="$exes fuzz/fuzz_$t" ;;
  esac
done
# shellcheck disable=SC2086 # the targets are words
ninja -C "$build" $exes > "$build/fuzz-build.log" 2>&1 ||
  { tail -n 40 "$build/fuzz-build.log"; echo "fuzz: build failed"; exit 2; }

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
n=0
failed=0
for t in $targets; do
  n=$((n + 1))
  case $t in
  plan_file) exe="$build/fuzz/plan_file/fuzz_plan_file" corpus=tests/cudnn/plan_file_corpus
    extra="-max_len=16384" ;;
  *) exe="$build/fuzz/fuzz_$t" corpus="fuzz/corpus/$t" extra="-max_len=4096" ;;
  esac
  work="$build/fuzz-work/$t"
  mkdir -p "$work/found"
  log="$work/log"
  # -timeout: one input running 10 s is a hang; -rss_limit_mb: runaway memory is a failure too.
  # shellcheck disable=SC2086 # extra is one word
  if "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 $extra \
    -artifact_prefix="$work/" -print_final_stats=1 "$work/found" "$corpus" > "$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz $t: ok, ${runs:-?} inputs in ${seconds} s (corpus $corpus)"
    if [ $merge = 1 ]; then
      before=$(find "$corpus" -type f | wc -l)
      if [ "$t" = plan_file ]; then "$build/fuzz/plan_file/fuzz_make_seeds" "$corpus"; fi
      "$exe" -merge=1 $extra "$corpus" "$work/found" >> "$log" 2>&1
      echo "fuzz $t: merged, $corpus has $(find "$corpus" -type f | wc -l) files (was $before)"
    fi
  else
    failed=$((failed + 1))
    tail -n 40 "$log"
    echo "fuzz $t: FAILED, input kept in $work/ (log $log)"
  fi
done
echo "fuzz: $n targets, $failed failed"
[ $failed -eq 0 ]
