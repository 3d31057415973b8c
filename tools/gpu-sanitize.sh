#!/bin/bash
# compute-sanitizer over every Criterion suite that has GPU tests, on the GPU machine:
# memcheck (out-of-bounds and misaligned accesses, hardware exceptions; --leak-check full),
# racecheck (shared-memory hazards), initcheck (reads of device memory never written).
#
#   tools/gpu-sanitize.sh [--quick] [--tools LIST] [--suites LIST] [--limit SECONDS]
#                         [--jobs N] [--budget SECONDS] BUILD_DIR
#
#   --quick     memcheck on every GPU suite, racecheck and initcheck only on the suites that run
#               nnprim's own kernels (src/**/*.cu): gpu_core dev_copy optim_gpu softmax_harness
#               rnn_replay conv_bias layernorm_harness; and a limit of 300 s a run (default:
#               every tool on every suite, 900 s a run)
#   --tools     comma-separated, of memcheck,racecheck,initcheck (default all three)
#   --suites    comma-separated suite names (default: every GPU suite, found below)
#   --limit     seconds one tool may take over one suite; a run past it is killed and reported
#               as timed out, with what it found until then
#   --jobs      runs at once (default 1; the GPU is shared by them, each a process at a time)
#   --budget    start no run after this many seconds; those left are listed as not run (the
#               whole then takes at most about budget + limit seconds)
#
# GPU suites: the test_<suite> programs of BUILD_DIR (meson introspect) whose sources use
# NN_REQUIRE_GPU, nn_test_have_gpu or MEM_TEST (tests/common/ aside). Each runs under
#   compute-sanitizer --tool T --target-processes all --require-cuda-init no
#                     --report-api-errors no [--leak-check full] test_<suite> --jobs=1
# with the environment its meson test sets (cli_verbose's NNPRIM_CLI, for one)
# (Criterion forks a process per test: every process is checked; --jobs=1 runs one at a time).
# CUDA API errors are not counted: tests provoke them on purpose (the library turns them into
# statuses, which the suites check).
# memcheck and initcheck run with NNPRIM_MEM_BYPASS=1, so that every allocation is cudaMalloc'd
# on its own and an overrun past a tensor is seen (inside the pool's segments it would not be),
# except in suites that check the pool's own statistics (their sources call nn_mem_get_stats),
# marked "pool" in the output, as racecheck runs (shared memory only): there the pool runs as
# usual. Leak reports are counted apart: memory a
# process keeps to its end (the pool's segments, cuDNN's handles) is reported as leaked.
#
# Logs: BUILD_DIR/sanitize/<tool>-<suite>.log. Prints one line per tool and suite, then the
# total: "gpu-sanitize: E errors (L leaked allocations) in R runs, T timed out, N without a
# summary, S not run". Exit 1 if any error was found or a run gave no summary, 2 on a usage
# error or when compute-sanitizer is missing.
set -u
cd "$(dirname "$0")/.." || exit 2

usage() {
  sed -n '6,19p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}
quick=0
jobs=1
budget=""
tools="memcheck,racecheck,initcheck"
suites=""
limit=""
build=""
while [ $# -gt 0 ]; do
  case "$1" in
  --quick) quick=1 ;;
  --tools) tools=${2:?--tools needs a list}; shift ;;
  --suites) suites=${2:?--suites needs a list}; shift ;;
  --limit) limit=${2:?--limit needs seconds}; shift ;;
  --jobs) jobs=${2:?--jobs needs a number}; shift ;;
  --budget) budget=${2:?--budget needs seconds}; shift ;;
  -h | --help) usage ;;
  -*) echo "gpu-sanitize: unknown option $1"; usage ;;
  *) build=$1 ;;
  esac
  shift
done
[ -n "$build" ] || { echo "gpu-sanitize: give the build directory"; usage; }
[ -f "$build/build.ninja" ] ||
  { echo "gpu-sanitize: $build is not a meson build directory (meson setup $build first)"; exit 2; }
case "$limit" in
"") limit=$([ $quick = 1 ] && echo 300 || echo 900) ;;
*[!0-9]*) echo "gpu-sanitize: --limit takes whole seconds, got $limit"; exit 2 ;;
esac
case "$jobs$budget" in *[!0-9]*) echo "gpu-sanitize: --jobs and --budget take whole numbers"; exit 2 ;; esac
[ "$jobs" -ge 1 ] || { echo "gpu-sanitize: --jobs must be >= 1"; exit 2; }
for t in ${tools//,/ }; do
  case $t in memcheck | racecheck | initcheck) ;;
  *) echo "gpu-sanitize: unknown tool $t (memcheck, racecheck, initcheck)"; exit 2 ;;
  esac
done

cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null)
if [ -z "$cs" ]; then
  echo "gpu-sanitize: compute-sanitizer not found (not on PATH nor in /usr/local/cuda/bin):" \
    "it comes with the CUDA toolkit; nothing was run"
  exit 2
fi
ninja -C "$build" > /dev/null || { echo "gpu-sanitize: the build failed"; exit 2; }

# suite name, its program, whether it checks the pool's statistics, and the environment its
# meson test sets (NAME=VALUE words), one a line.
table=$(meson introspect --targets --tests "$build" | python3 -c '
import json, re, sys
gpu = re.compile(r"NN_REQUIRE_GPU|nn_test_have_gpu|MEM_TEST\(")
info = json.load(sys.stdin)
env = {}
for t in info["tests"]:
    env[t["cmd"][0]] = " ".join(k + "=" + v for k, v in sorted(t.get("env", {}).items()))
for t in info["targets"]:
    if t["type"] != "executable" or not t["name"].startswith("test_"):
        continue
    srcs = [s for ts in t["target_sources"] for s in ts.get("sources", [])
            if "/tests/" in s and "/tests/common/" not in s]
    text = ""
    for s in srcs:
        try:
            text += open(s, errors="replace").read()
        except OSError:
            pass
    if gpu.search(text):
        exe = t["filename"][0]
        print(t["name"][5:], exe, int("nn_mem_get_stats" in text), env.get(exe, ""))
') || { echo "gpu-sanitize: meson introspect failed"; exit 2; }
[ -n "$table" ] || { echo "gpu-sanitize: no GPU suites found in $build"; exit 2; }
if [ -n "$suites" ]; then
  for s in ${suites//,/ }; do
    grep -q "^$s " <<< "$table" || { echo "gpu-sanitize: $s is not a GPU suite of $build"; exit 2; }
  done
fi
own_kernels=" gpu_core dev_copy optim_gpu softmax_harness rnn_replay conv_bias layernorm_harness "
if [ $quick = 1 ]; then
  for s in $own_kernels; do
    grep -q "^$s " <<< "$table" || echo "gpu-sanitize: warning: $s (--quick) is not a GPU suite"
  done
fi

logs="$build/sanitize"
mkdir -p "$logs"
rm -f "$logs"/*.result

# One tool over one suite; its line (and the counts) go to LOG.result.
run_one() { # tool suite exe pool [NAME=VALUE...]
  local tool=$1 suite=$2 exe=$3 pool=$4
  shift 4
  local args=(--tool "$tool" --target-processes all --require-cuda-init no
    --report-api-errors no --print-limit 50)
  local env_run=(env "$@" NNPRIM_MEM_BYPASS=1) mode=bypass
  if [ "$pool" = 1 ] || [ "$tool" = racecheck ]; then env_run=(env "$@"); mode=pool; fi
  [ "$tool" = memcheck ] && args+=(--leak-check full)
  local log="$logs/$tool-$suite.log" start rc secs errors leaks state=ok note="" leak_text=""
  start=$(date +%s)
  timeout -k 30 "$limit" "${env_run[@]}" "$cs" "${args[@]}" "$exe" --jobs=1 \
    < /dev/null > "$log" 2>&1
  rc=$?
  secs=$(($(date +%s) - start))
  # Each checked process prints its own summaries: add them up.
  # racecheck sums up as "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)"
  # (not "ERROR SUMMARY: N errors were not printed", past --print-limit: already counted)
  errors=$(sed -n -e 's/^========= ERROR SUMMARY: \([0-9]*\) errors\{0,1\}$/\1/p' \
    -e 's/^========= RACECHECK SUMMARY: .*(\([0-9]*\) error.*/\1/p' "$log" |
    awk '{ s += $1 } END { print s + 0 }')
  leaks=$(sed -n 's/^========= LEAK SUMMARY: .* in \([0-9]*\) allocation.*/\1/p' "$log" |
    awk '{ s += $1 } END { print s + 0 }')
  errors=$((errors - leaks))
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    state=timeout note=", TIMED OUT (what it found until then)"
  elif ! grep -q -E "(ERROR|RACECHECK) SUMMARY" "$log"; then
    state=nosummary note=", NO SUMMARY (see the log)"
  elif [ $rc -ne 0 ]; then
    note=", tests exit $rc"
  fi
  [ "$tool" = memcheck ] && leak_text=", $leaks leaked allocations"
  printf '%s %d %d %s|%-9s %-22s %d errors%s (%s, %d s%s)\n' "$state" "$errors" "$leaks" \
    "$suite" "$tool" "$suite" "$errors" "$leak_text" "$mode" "$secs" "$note" \
    > "$log.result"
}

# The runs, in order: tool, suite, program, pool flag. --quick puts the short lists first, so
# that a --budget cuts memcheck's long list rather than them.
order=${tools//,/ }
if [ $quick = 1 ]; then order="${order//memcheck/} $([[ " $order " == *" memcheck "* ]] && echo memcheck)"; fi
plan=()
for tool in $order; do
  while read -r suite exe pool envs; do
    if [ -n "$suites" ]; then
      [[ ",$suites," == *",$suite,"* ]] || continue
    elif [ $quick = 1 ] && [ "$tool" != memcheck ]; then
      [[ "$own_kernels" == *" $suite "* ]] || continue
    fi
    plan+=("$tool $suite $exe $pool $envs")
  done <<< "$table"
done
echo "gpu-sanitize: $cs: ${#plan[@]} runs, $jobs at a time, limit ${limit} s a run${budget:+, \
no run started after ${budget} s}; logs in $logs/"
began=$(date +%s)
skipped=0
for r in "${plan[@]}"; do
  read -r tool suite exe pool envs <<< "$r"
  if [ -n "$budget" ] && [ $(($(date +%s) - began)) -ge "$budget" ]; then
    printf 'skipped %d %d %s|%-9s %-22s not run (--budget spent)\n' 0 0 "$suite" "$tool" \
      "$suite" > "$logs/$tool-$suite.log.result"
    skipped=$((skipped + 1))
    continue
  fi
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  # shellcheck disable=SC2086 # one word per NAME=VALUE
  run_one "$tool" "$suite" "$exe" "$pool" $envs &
done
wait

total_errors=0 total_leaks=0 runs=0 timed_out=0 no_summary=0
for r in "${plan[@]}"; do
  read -r tool suite _ <<< "$r"
  line=$(cat "$logs/$tool-$suite.log.result" 2> /dev/null) ||
    line="nosummary 0 0 $suite|$tool $suite: no result (the run died)"
  read -r state errors leaks _ <<< "${line%%|*}"
  echo "${line#*|}"
  [ "$state" = skipped ] && continue
  runs=$((runs + 1))
  total_errors=$((total_errors + errors))
  total_leaks=$((total_leaks + leaks))
  [ "$state" = timeout ] && timed_out=$((timed_out + 1))
  [ "$state" = nosummary ] && no_summary=$((no_summary + 1))
done
echo "gpu-sanitize: $total_errors errors ($total_leaks leaked allocations) in $runs runs," \
  "$timed_out timed out, $no_summary without a summary, $skipped not run"
[ "$total_errors" -eq 0 ] && [ "$no_summary" -eq 0 ]
