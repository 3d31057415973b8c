#!/bin/bash
# Strict fp32 against PyTorch with nnprim on PyTorch's own cuDNN (its wheel's libcudnn, put first
# on LD_LIBRARY_PATH), so that both sides choose among the same kernels: the ResNet-50 and
# DeepBench shape lists, each against one PyTorch run. Run on the GPU machine after a build in
# build-gpu; writes under $OUT (or ./gpu-out) resnet50_919.txt and deepbench_919.txt, each
# readable by bench/summarize_conv.py, and info919.txt (the cuDNN version nnprim loaded).
set -u
cd "$(dirname "$0")/.."
O=${OUT:-gpu-out}
mkdir -p "$O"
B=build-gpu/cli/nnprim
TL=$(python3 -c "import nvidia.cudnn,os; print(os.path.join(list(nvidia.cudnn.__path__)[0],'lib'))")
LD_LIBRARY_PATH=$TL:${LD_LIBRARY_PATH:-} $B info > "$O/info919.txt" 2>&1
grep -i "cudnn runtime" "$O/info919.txt"
for list in resnet50 deepbench; do
  S=bench/shapes_conv_$list.txt
  { echo "=== bench_conv_${list}_strict: LD_LIBRARY_PATH=<PyTorch's cuDNN> NNPRIM_TUNING=autotune $B bench conv --math strict --shapes $S"
    LD_LIBRARY_PATH=$TL:${LD_LIBRARY_PATH:-} NNPRIM_TUNING=autotune $B bench conv --math strict --shapes $S
    echo "=== torch_conv_${list}_strict: python3 bench/torch_conv.py --math strict --shapes $S"
    python3 bench/torch_conv.py --math strict --shapes $S; } > "$O/${list}_919.txt" 2>&1
done
