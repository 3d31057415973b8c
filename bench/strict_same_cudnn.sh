#!/bin/bash
# ResNet-50 strict fp32 against PyTorch, with nnprim on two cuDNN runtimes: the system's (more
# autotune candidates) and PyTorch's own (its wheel's libcudnn, put first on LD_LIBRARY_PATH),
# against one PyTorch run. Run on the GPU machine after a build in build-gpu; writes under $OUT
# (or ./gpu-out): cand32.txt and cudnn919.txt, each readable by bench/summarize_conv.py.
set -u
cd "$(dirname "$0")/.."
O=${OUT:-gpu-out}
mkdir -p "$O"
B=build-gpu/cli/nnprim
S=bench/shapes_conv_resnet50.txt
TL=$(python3 -c "import nvidia.cudnn,os; print(os.path.join(list(nvidia.cudnn.__path__)[0],'lib'))")
{ echo "=== torch_conv_resnet50_strict: python3 bench/torch_conv.py --math strict --shapes $S"
  python3 bench/torch_conv.py --math strict --shapes $S; } > "$O/torch.txt" 2>&1
{ echo "=== bench_conv_resnet50_strict: NNPRIM_TUNING=autotune NNPRIM_AUTOTUNE_CANDIDATES=32 $B bench conv --math strict --shapes $S"
  NNPRIM_TUNING=autotune NNPRIM_AUTOTUNE_CANDIDATES=32 $B bench conv --math strict --shapes $S
  cat "$O/torch.txt"; } > "$O/cand32.txt" 2>&1
LD_LIBRARY_PATH=$TL:${LD_LIBRARY_PATH:-} $B info > "$O/info919.txt" 2>&1
{ echo "=== bench_conv_resnet50_strict: LD_LIBRARY_PATH=<PyTorch's cuDNN> NNPRIM_TUNING=autotune $B bench conv --math strict --shapes $S"
  LD_LIBRARY_PATH=$TL:${LD_LIBRARY_PATH:-} NNPRIM_TUNING=autotune $B bench conv --math strict --shapes $S
  cat "$O/torch.txt"; } > "$O/cudnn919.txt" 2>&1
grep -i "cudnn runtime" "$O/info919.txt"
