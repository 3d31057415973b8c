#!/bin/bash
# The GPU machine's job (see ../shared/device/README.md): build, run every test, then the
# benchmarks and their PyTorch counterparts. Full logs go to $OUT (or ./gpu-out): tests.log and
# bench.txt; a short summary is printed last.
#   tools/gpu-run.sh [tests|bench|first|conv|all]     (default all; bench: memory and pooling,
#   first: time to a first convolution result, conv: first + the convolution shape lists)
set -u
cd "$(dirname "$0")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
what=${1:-all}
build=build-gpu
summary=()

if [ "$what" = tests ] || [ "$what" = all ]; then
  tools/test.sh "$build" > "$out/tests.log" 2>&1
  summary+=("tests: $(tail -n 1 "$out/tests.log")")
  grep -E "^\[----\]|FAIL|suite .*: no results" "$out/tests.log" | head -60
fi
[ -f "$build/build.ninja" ] || { meson setup "$build" >/dev/null && ninja -C "$build" >/dev/null; }

# Every benchmark appends to one file (the device tool brings back only a few files).
bench() { # name, command...
  local name=$1; shift
  echo "=== $name: $*" >> "$out/bench.txt"
  "$@" > "$out/$name.tmp" 2>&1
  summary+=("$name: exit $?")
  cat "$out/$name.tmp" | tee -a "$out/bench.txt"
  rm -f "$out/$name.tmp"
}
if [ "$what" = first ] || [ "$what" = conv ] || [ "$what" = all ]; then
  # Time to the first result of a new shape: heuristics, autotune, a plan file from nnprim tune.
  f=bench/shapes_first_call.txt
  plans=$(mktemp -d)/first.nnp
  for tuning in heuristic autotune; do
    bench "first_call_$tuning" env NNPRIM_VERBOSE=1 NNPRIM_TUNING=$tuning \
      "$build/cli/nnprim" bench conv --shapes $f --mode first
  done
  bench tune_first "$build/cli/nnprim" tune --shapes $f --out "$plans"
  bench first_call_loaded env NNPRIM_VERBOSE=1 NNPRIM_PLAN_CACHE="$plans" \
    "$build/cli/nnprim" bench conv --shapes $f --mode first
  bench first_call_loaded_no_prebuild env NNPRIM_VERBOSE=1 NNPRIM_PREBUILD_PLANS=0 \
    NNPRIM_PLAN_CACHE="$plans" "$build/cli/nnprim" bench conv --shapes $f --mode first
  bench first_call_loaded_no_background env NNPRIM_VERBOSE=1 NNPRIM_BACKGROUND_BUILDS=0 \
    NNPRIM_PLAN_CACHE="$plans" "$build/cli/nnprim" bench conv --shapes $f --mode first
  # A whole network's first pass: the tiny shape, then every ResNet-50 layer, from a plan file.
  net=$(dirname "$plans")/net.txt
  { echo "n1c4h8w8k4r3s3 pad1"; grep -v '^#' bench/shapes_conv_resnet50.txt; } > "$net"
  bench tune_net "$build/cli/nnprim" tune --shapes "$net" --out "$plans.net"
  bench first_pass_net env NNPRIM_PLAN_CACHE="$plans.net" "$build/cli/nnprim" bench conv \
    --shapes "$net" --mode first
  bench first_pass_net_no_prebuild env NNPRIM_PREBUILD_PLANS=0 NNPRIM_PLAN_CACHE="$plans.net" \
    "$build/cli/nnprim" bench conv --shapes "$net" --mode first
  bench first_pass_net_no_background env NNPRIM_BACKGROUND_BUILDS=0 \
    NNPRIM_PLAN_CACHE="$plans.net" "$build/cli/nnprim" bench conv --shapes "$net" --mode first
  bench first_pass_net_autotune env NNPRIM_TUNING=autotune "$build/cli/nnprim" bench conv \
    --shapes "$net" --mode first
  bench torch_first_pass_net python3 bench/torch_conv.py --mode first --shapes "$net"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  bench bench_mem "$build/cli/nnprim" bench mem --device 0
  bench bench_pool "$build/cli/nnprim" bench pool
  bench torch_pool python3 bench/torch_pool.py
fi
if [ "$what" = conv ] || [ "$what" = all ]; then
  # nnprim autotunes, as PyTorch does with cudnn.benchmark=True. PyTorch runs TORCH_RUNS times
  # (default 3): its benchmark mode may pick another algorithm in each process;
  # bench/summarize_conv.py compares with the fastest run per shape and pass.
  for list_math in resnet50:strict resnet50:tf32 deepbench:strict; do
    list=${list_math%:*} math=${list_math#*:}
    bench "bench_conv_${list}_$math" env NNPRIM_TUNING=autotune "$build/cli/nnprim" bench conv --math $math \
      --shapes bench/shapes_conv_$list.txt
    for run in $(seq "${TORCH_RUNS:-3}"); do
      bench "torch_conv_${list}_$math" python3 bench/torch_conv.py --math $math \
        --shapes bench/shapes_conv_$list.txt
    done
  done
fi
printf '%s\n' "${summary[@]}"
