#!/bin/bash
# The tables of docs/PERFORMANCE.md, reproduced on a GPU machine from a clean checkout: builds
# nnprim in $BUILD (default build, as tools/setup.sh does), then runs each family's
# `nnprim bench` commands and their PyTorch counterparts in bench/, printing the rows and
# appending them to $OUT/perf.txt (default ./perf-out).
#
#   tools/perf.sh [family...]        (no family: mem pool conv rnn linear softmax models)
#
# Families (each is one table, or a few, of docs/PERFORMANCE.md):
#   mem            the device pool against cudaMalloc and cudaMallocAsync, threads, footprint
#   pool           pooling: nnprim, raw cuDNN, PyTorch
#   conv           host time per cached call; ResNet-50 (strict, TF32) and DeepBench (strict)
#                  shape lists, autotuned, against PyTorch (TORCH_RUNS processes, default 3)
#                  and raw cuDNN; summarised
#   conv-919       the strict lists again with nnprim on PyTorch's own cuDNN (its wheel's)
#   conv-first     time to the first result of a new shape and of a whole ResNet-50
#   rnn            the recurrent anchors (f32, TF32, bf16) against raw cuDNN and PyTorch,
#                  and the first step from a plan file
#   rnn-deepbench  DeepBench's RNN training set (43 shapes) with the raw-cuDNN control, in
#                  RNN_RUNS processes (default 2), summarised per shape by median
#   linear         linear (strict, TF32) against raw cuBLASLt, and PyTorch in the same process
#   softmax        softmax, log-softmax, cross-entropy (nnprim only)
#   models         the examples' training step, eager and as one graph, against PyTorch, with
#                  the heuristic and with autotune; the tiny LSTM anchor's step as one graph
#   models-919     the examples' step again (heuristic) and the anchor with nnprim on PyTorch's
#                  own cuDNN (its wheel's), the library PyTorch's columns run on
#
# Needs the CUDA toolkit, cuDNN and, for the PyTorch columns, python3 with a CUDA PyTorch
# (PYTHON=... to choose another interpreter); a family whose PyTorch part cannot run says so and
# goes on. Unit tests never time anything; this script is the only place figures come from.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
OUT=${OUT:-perf-out}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
log=$OUT/perf.txt
all=(mem pool conv rnn linear softmax models)
known=" mem pool conv conv-919 conv-first rnn rnn-deepbench linear softmax models models-919 "
families=("$@")
[ ${#families[@]} -eq 0 ] && families=("${all[@]}")
for f in "${families[@]}"; do
  case "$known" in *" $f "*) ;; *)
    echo "tools/perf.sh: unknown family '$f' (expected one of:${known% })" >&2; exit 2 ;;
  esac
done

[ -f "$BUILD/build.ninja" ] || meson setup "$BUILD" >/dev/null || exit 1
ninja -C "$BUILD" >/dev/null || { echo "tools/perf.sh: the build in $BUILD failed" >&2; exit 1; }
nn=$BUILD/cli/nnprim
lib=$BUILD/src/libnnprim.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

# run NAME COMMAND...: the block "=== NAME: COMMAND" and its output, on stdout and in $log
# (bench/summarize_conv.py reads blocks by NAME).
run() {
  local name=$1; shift
  echo "=== $name: $*" | tee -a "$log"
  : > "$tmp/$name.out"
  "$@" 2>&1 | tee -a "$log" "$tmp/$name.out"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "# $name: exit $rc" | tee -a "$log"; failed=1; }
  return "$rc"
}
have_torch() {
  "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null && return 0
  echo "# no CUDA PyTorch for $PY: the PyTorch rows of '$1' are left out" | tee -a "$log"
  return 1
}
shapes_of() { sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$1"; } # a shape file without comments

{ echo "# $(date -u +%F), nnprim at $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  "$nn" info 2>&1 | grep -E 'runtime:|device [0-9]+:' | sed 's/^ */# /'; } | tee -a "$log"

for f in "${families[@]}"; do
  case $f in
  mem)
    run bench_mem "$nn" bench mem --device 0 ;;
  pool)
    run bench_pool "$nn" bench pool
    have_torch pool && run torch_pool "$PY" bench/torch_pool.py ;;
  conv)
    # nnprim autotunes, as PyTorch does with cudnn.benchmark=True. PyTorch's benchmark mode may
    # pick another algorithm in each process, so it runs TORCH_RUNS times and the summary takes
    # its fastest run per shape and pass.
    run bench_conv_host "$nn" bench conv --reps 4000 # host time per cached call, built-in shapes
    : > "$tmp/conv.txt"
    for list_math in resnet50:strict resnet50:tf32 deepbench:strict; do
      list=${list_math%:*} math=${list_math#*:}
      run "bench_conv_${list}_$math" env NNPRIM_TUNING=autotune "$nn" bench conv --math "$math" \
        --shapes "bench/shapes_conv_$list.txt"
      { echo "=== bench_conv_${list}_$math:"; cat "$tmp/bench_conv_${list}_$math.out"; } >> "$tmp/conv.txt"
      if have_torch conv; then
        for r in $(seq "${TORCH_RUNS:-3}"); do
          run "torch_conv_${list}_$math" "$PY" bench/torch_conv.py --math "$math" \
            --shapes "bench/shapes_conv_$list.txt"
          { echo "=== torch_conv_${list}_$math:"; cat "$tmp/torch_conv_${list}_$math.out"; } >> "$tmp/conv.txt"
        done
      fi
    done
    run summary_conv "$PY" bench/summarize_conv.py "$tmp/conv.txt" ;;
  conv-919)
    cudnn=$("$PY" -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null) ||
      { echo "# conv-919: PyTorch's nvidia.cudnn wheel not found for $PY" | tee -a "$log"; failed=1; continue; }
    for list in resnet50 deepbench; do
      run "bench_conv_${list}_strict_919" env LD_LIBRARY_PATH="$cudnn:${LD_LIBRARY_PATH:-}" \
        NNPRIM_TUNING=autotune "$nn" bench conv --math strict --shapes "bench/shapes_conv_$list.txt"
    done ;;
  conv-first)
    # The tiny first shape pays the process's one-time cuDNN start; the tables leave it out.
    f1=bench/shapes_first_call.txt
    for tuning in heuristic autotune; do
      run "first_call_$tuning" env NNPRIM_TUNING=$tuning "$nn" bench conv --shapes $f1 --mode first
    done
    run tune_first "$nn" tune --shapes $f1 --out "$tmp/first.nnp"
    run first_call_loaded env NNPRIM_PLAN_CACHE="$tmp/first.nnp" "$nn" bench conv --shapes $f1 --mode first
    run first_call_no_prebuild env NNPRIM_PREBUILD_PLANS=0 NNPRIM_PLAN_CACHE="$tmp/first.nnp" \
      "$nn" bench conv --shapes $f1 --mode first
    run first_call_no_background env NNPRIM_BACKGROUND_BUILDS=0 NNPRIM_PLAN_CACHE="$tmp/first.nnp" \
      "$nn" bench conv --shapes $f1 --mode first
    net=$tmp/net.txt
    { echo "n1c4h8w8k4r3s3 pad1"; shapes_of bench/shapes_conv_resnet50.txt; } > "$net"
    run tune_net "$nn" tune --shapes "$net" --out "$tmp/net.nnp"
    run first_net_loaded env NNPRIM_PLAN_CACHE="$tmp/net.nnp" "$nn" bench conv --shapes "$net" --mode first
    run first_net_no_prebuild env NNPRIM_PREBUILD_PLANS=0 NNPRIM_PLAN_CACHE="$tmp/net.nnp" \
      "$nn" bench conv --shapes "$net" --mode first
    run first_net_no_background env NNPRIM_BACKGROUND_BUILDS=0 NNPRIM_PLAN_CACHE="$tmp/net.nnp" \
      "$nn" bench conv --shapes "$net" --mode first
    run first_net_autotune env NNPRIM_TUNING=autotune "$nn" bench conv --shapes "$net" --mode first
    have_torch conv-first && run torch_first_net "$PY" bench/torch_conv.py --mode first --shapes "$net" ;;
  rnn)
    a=bench/shapes_rnn_anchors.txt
    shapes_of $a | sed 's/[[:space:]]*$/ bf16/' > "$tmp/anchors_bf16.txt"
    run rnn_anchors_strict "$nn" bench rnn --shapes $a
    run rnn_anchors_tf32 "$nn" bench rnn --shapes $a --math tf32
    run rnn_anchors_bf16 "$nn" bench rnn --shapes "$tmp/anchors_bf16.txt"
    run rnn_tune "$nn" tune --shapes $a --out "$tmp/rnn.nnp"
    run rnn_anchors_plan_file env NNPRIM_PLAN_CACHE="$tmp/rnn.nnp" "$nn" bench rnn --shapes $a
    have_torch rnn && run torch_rnn "$PY" bench/torch_rnn.py --shapes $a --modes f32,tf32,bf16 ;;
  rnn-deepbench)
    # Without the t750 and t1500 GRUs (each over a minute per process at these repetitions).
    shapes_of bench/shapes_rnn_deepbench.txt | grep -v -E '^gru t(750|1500)n' > "$tmp/deepbench43.txt"
    runs=()
    for r in $(seq "${RNN_RUNS:-2}"); do
      run "rnn_deepbench_$r" "$nn" bench rnn --shapes "$tmp/deepbench43.txt" --reps 4 --warmup 1 --control
      runs+=("$tmp/rnn_deepbench_$r.out")
    done
    run summary_rnn "$PY" bench/summarize_rnn.py "${runs[@]}" --over 1.02 ;;
  linear)
    run bench_linear_strict "$nn" bench linear
    run bench_linear_tf32 "$nn" bench linear --tf32
    if have_torch linear; then
      run torch_linear_strict "$PY" bench/torch_linear.py --nnprim "$lib"
      run torch_linear_tf32 "$PY" bench/torch_linear.py --tf32 --nnprim "$lib"
    fi ;;
  softmax)
    run bench_softmax "$nn" bench softmax ;;
  models)
    run bench_models "$nn" bench models
    have_torch models && run torch_models "$PY" bench/torch_models.py --nnprim "$tmp/bench_models.out"
    # tuned as torch-graph's cudnn.benchmark is: nnprim's autotune (the persistent RNN kernels)
    run bench_models_autotune env NNPRIM_TUNING=autotune "$nn" bench models
    have_torch models &&
      run torch_models_autotune "$PY" bench/torch_models.py --nnprim "$tmp/bench_models_autotune.out"
    # the tiny LSTM anchor: the step and an SGD update as one graph, beside PyTorch's graph
    echo "lstm t2n1i8h8 l1 uni" > "$tmp/anchor.txt"
    run rnn_anchor_graph "$nn" bench rnn --graph --shapes "$tmp/anchor.txt"
    run rnn_anchor_graph_autotune env NNPRIM_TUNING=autotune "$nn" bench rnn --graph \
      --shapes "$tmp/anchor.txt"
    have_torch models && run torch_rnn_anchor "$PY" bench/torch_rnn.py --shapes "$tmp/anchor.txt" \
      --modes f32 ;;
  models-919)
    cudnn=$("$PY" -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null) ||
      { echo "# models-919: PyTorch's nvidia.cudnn wheel not found for $PY" | tee -a "$log"; failed=1; continue; }
    run info_919 env LD_LIBRARY_PATH="$cudnn:${LD_LIBRARY_PATH:-}" "$nn" info
    run bench_models_919 env LD_LIBRARY_PATH="$cudnn:${LD_LIBRARY_PATH:-}" "$nn" bench models
    have_torch models && run torch_models_919 "$PY" bench/torch_models.py --nnprim "$tmp/bench_models_919.out"
    echo "lstm t2n1i8h8 l1 uni" > "$tmp/anchor.txt"
    run rnn_anchor_graph_919 env LD_LIBRARY_PATH="$cudnn:${LD_LIBRARY_PATH:-}" "$nn" bench rnn --graph \
      --shapes "$tmp/anchor.txt" ;;
  esac
done
echo "# the whole output: $log"
exit $failed
