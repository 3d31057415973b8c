#!/bin/bash
# nnprim on PyTorch's own cuDNN (its wheel's libcudnn, put first on LD_LIBRARY_PATH), so that
# nnprim and PyTorch choose among the same kernels: the ResNet-50 and DeepBench shape lists in
# strict fp32. Run on the GPU machine after a build in build-gpu (tools/gpu-run.sh conv, which
# also runs PyTorch); writes $OUT/bench919.txt (or ./gpu-out), compared with PyTorch's runs by
#   python3 bench/summarize_conv.py bench919.txt bench.txt
set -u
cd "$(dirname "$0")/.."
O=${OUT:-gpu-out}
mkdir -p "$O"
B=build-gpu/cli/nnprim
TL=$(python3 -c "import nvidia.cudnn,os; print(os.path.join(list(nvidia.cudnn.__path__)[0],'lib'))")
{ echo "# nnprim on PyTorch's cuDNN: $(LD_LIBRARY_PATH=$TL:${LD_LIBRARY_PATH:-} $B info 2>&1 | grep -i 'cudnn runtime')"
  for list in resnet50 deepbench; do
    S=bench/shapes_conv_$list.txt
    echo "=== bench_conv_${list}_strict: LD_LIBRARY_PATH=<PyTorch's cuDNN> NNPRIM_TUNING=autotune $B bench conv --math strict --shapes $S"
    LD_LIBRARY_PATH=$TL:${LD_LIBRARY_PATH:-} NNPRIM_TUNING=autotune $B bench conv --math strict --shapes $S
  done; } > "$O/bench919.txt" 2>&1
head -1 "$O/bench919.txt"
