#!/bin/sh
# tools/gen_cuda_loader.py refuses what it cannot wrap, with a message that says why (a function
# the headers do not declare, a name before any library, an unknown library), and wraps a good
# spec: a declaration, a rename and a wrapper per function.
#   gen_cuda_loader.sh SOURCE_DIR CC [ARGS...]    (CC ARGS: the build's compiler and CUDA flags)
set -u
src=$1
shift
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nnprim-gen-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bad=0
gen() { # SPEC LIBS CC...: runs the generator on SPEC, its messages in $tmp/out
  printf '%b' "$1" > "$tmp/spec.txt"
  libs=$2
  shift 2
  python3 "$src/tools/gen_cuda_loader.py" --spec "$tmp/spec.txt" --libs "$libs" --out "$tmp" \
    -- "$@" > "$tmp/out" 2>&1
}
refused() { # SPEC LIBS MESSAGE CC...
  spec=$1 libs=$2 msg=$3
  shift 3
  if gen "$spec" "$libs" "$@"; then
    echo "FAIL: spec '$spec' accepted"
    bad=1
  elif ! grep -qF "$msg" "$tmp/out"; then
    echo "FAIL: spec '$spec': expected '$msg' in: $(cat "$tmp/out")"
    bad=1
  fi
}
refused 'library cudart\ncudaNoSuchCall\n' cudart 'cudaNoSuchCall is not declared' "$@"
refused 'cudaMalloc\n' cudart 'a function before any' "$@"
refused 'library cudart\ncudaMalloc\n' cudart,cufft "unknown library 'cufft'" "$@"
if gen 'library cudart\ncudaMalloc cudaGetErrorString\n' cudart "$@"; then
  for want in '__typeof__(cudaMalloc) nn__dl_cudaMalloc;' '#define cudaMalloc nn__dl_cudaMalloc'; do
    grep -qF "$want" "$tmp/cuda_load_gen.h" || { echo "FAIL: no '$want' in cuda_load_gen.h"; bad=1; }
  done
  for want in 'return cudaErrorSharedObjectInitFailed;' 'return nn__dl_problem(NN__DL_CUDART);' \
    '{"cudaMalloc", (void *)&p_cudaMalloc},'; do
    grep -qF "$want" "$tmp/cuda_load_gen.c" || { echo "FAIL: no '$want' in cuda_load_gen.c"; bad=1; }
  done
else
  echo "FAIL: a good spec was refused: $(cat "$tmp/out")"
  bad=1
fi
[ $bad = 0 ] && echo "ok: gen_cuda_loader.py refuses bad specs and wraps a good one"
exit $bad
