#!/bin/sh
# Fuzz the plan-file loader with libFuzzer, then merge what it found into the kept corpus.
#
#   tools/fuzz-plan-file.sh [SECONDS]     (default 300)
#
# Needs clang with libFuzzer and AddressSanitizer (Debian: clang and, where clang does not ship
# it, libclang-rt-<version>-dev). Not part of CI: CI only replays the kept corpus
# (tests/cudnn/plan_file_corpus) through the loader in the plan_file test suite.
# The decoder and the cache are built on their own, without CUDA, cuDNN or jemalloc.
# The seeds (fuzz/make_seeds.c, kept in the corpus under their names) are format version 2 files,
# version 3 files (seed-v3-*) and one version-1 file, seed-v1-every-op, that the plan_file suite
# also loads by name.
set -eu
seconds=${1:-300}
root=$(cd "$(dirname "$0")/.." && pwd)
work=${FUZZ_WORKDIR:-$(mktemp -d /tmp/nnprim-fuzz-XXXXXX)}
corpus="$root/tests/cudnn/plan_file_corpus"
mkdir -p "$work/gen" "$work/seeds" "$work/merged"

cat > "$work/gen/nn_config.h" <<CONF
#define NN_HAVE_CUDA 0
#define NN_HAVE_CUDNN 0
#define NN_HAVE_JEMALLOC 0
#define NN_VERSION_STRING "fuzz"
#define NN_SOURCE_ROOT "$root"
CONF

srcs="$root/src/cudnn/cache.c $root/src/cudnn/plan_cache.c $root/src/cudnn/plan_file.c $root/src/conv/conv_plan_key.c $root/src/core/alloc.c $root/src/core/status.c"
flags="-std=c11 -D_GNU_SOURCE -g -O1 -I$work/gen -I$root/include -I$root/src -I$root/fuzz -I$root/tests/cudnn"

clang $flags -fsanitize=address,undefined -o "$work/make_seeds" "$root/fuzz/make_seeds.c" $srcs -lm
clang $flags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -o "$work/fuzz_plan_file" "$root/fuzz/fuzz_plan_file.c" $srcs -lm

"$work/make_seeds" "$work/seeds"
mkdir -p "$corpus"
cp "$work/seeds"/* "$corpus"/

# Fuzz from the kept corpus; new inputs go to $work/found.
mkdir -p "$work/found"
"$work/fuzz_plan_file" -max_total_time="$seconds" -max_len=16384 -timeout=10 \
    -print_final_stats=1 "$work/found" "$corpus"

# Keep a minimal corpus: the inputs that together cover what the fuzzer reached.
"$work/fuzz_plan_file" -merge=1 "$work/merged" "$corpus" "$work/found"
rm -f "$corpus"/*
cp "$work/merged"/* "$corpus"/
cp "$work/seeds"/* "$corpus"/
echo "corpus: $(ls "$corpus" | wc -l) files in $corpus (work dir $work)"
