#!/bin/sh
# The nnprim tool's conventions: --version; --help/-h of the program and of
# every subcommand on stdout with exit 0 and nothing on stderr; an unknown option, a missing or a
# bad value, an unknown subcommand or an invalid check case: exit 2, a message on stderr naming
# the option or field, nothing on stdout.
#   cli_conventions.sh NNPRIM BENCH(0|1)
set -u
nnprim=$1 bench=$2
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
bad=0
fail() { echo "FAIL: $*"; bad=1; }

# expect RC PATTERN_ON_STDOUT PATTERN_ON_STDERR ARGS...: exit status RC, stdout matching the first
# (grep -E; "" = must be empty), stderr matching the second ("" = must be empty).
expect() {
  rc=$1 want_out=$2 want_err=$3
  shift 3
  "$nnprim" "$@" >"$out" 2>"$err"
  got=$?
  [ "$got" = "$rc" ] || fail "nnprim $*: exit $got, want $rc; stderr: $(head -3 "$err")"
  if [ -z "$want_out" ]; then
    [ -s "$out" ] && fail "nnprim $*: stdout not empty: $(head -3 "$out")"
  else
    grep -Eq -- "$want_out" "$out" || fail "nnprim $*: stdout lacks /$want_out/: $(head -3 "$out")"
  fi
  if [ -z "$want_err" ]; then
    [ -s "$err" ] && fail "nnprim $*: stderr not empty: $(head -3 "$err")"
  else
    grep -Eq -- "$want_err" "$err" || fail "nnprim $*: stderr lacks /$want_err/: $(head -3 "$err")"
  fi
}

expect 0 '^nnprim [0-9]+\.[0-9]+\.[0-9]+$' '' --version
expect 0 '^nnprim [0-9]+\.[0-9]+\.[0-9]+$' '' -V
for h in --help -h help; do expect 0 '^usage: nnprim' '' $h; done
expect 2 '' '^usage: nnprim'
expect 2 '' "unknown command 'bogus'" bogus
expect 2 '' "unknown option '--bogus'" --bogus

subcommands="info check 'check conv' 'check pool' 'check linear' 'check softmax' 'check layernorm' 'check rnn' tune"
[ "$bench" = 1 ] && subcommands="$subcommands bench 'bench conv' 'bench pool' 'bench linear' 'bench rnn' 'bench mem' 'bench softmax' 'bench layernorm'"
eval "set -- $subcommands"
for sub in "$@"; do
  # shellcheck disable=SC2086
  expect 0 '^usage: nnprim' '' $sub --help
  # shellcheck disable=SC2086
  expect 0 '^usage: nnprim' '' $sub -h
  [ "$sub" = bench ] && continue
  # shellcheck disable=SC2086
  expect 2 '' "unknown option '--bogus'" $sub --bogus
done

expect 2 '' "takes no operands, got 'x'" info x
expect 2 '' '--shapes needs a value' check --shapes
expect 2 '' '--shapes needs a value' check rnn --shapes
expect 2 '' 'tune: needs --shapes FILE and --out PLANFILE' tune
expect 2 '' "tune: --candidates: expected an integer in \[1, [0-9]+\], got '0'" tune --candidates 0

# check: a case that does not parse, or that the library refuses, is a usage error naming the
# field; a case that runs is not.
expect 2 '' "dims token 'n1c2h5w5k2r3q3'" check conv --ref-only n1c2h5w5k2r3q3
expect 2 '' 'c must be divisible by g' check conv --ref-only n1c3h5w5k2r3s3 g2
expect 2 '' 'nn_conv_output_shape: .*smaller than the dilated filter' check --ref-only conv n1c2h3w3k2r5s5
expect 2 '' 'nn_pool_output_shape: params.window\[0\] = 9' check pool --ref-only n1c3h5w5 max win9
expect 2 '' 'nn_rnn_weights_size: p.proj_size must be < p.hidden_size' check rnn --ref-only lstm t5n3i4h6 proj9 f32
expect 2 '' 'verbose line is of a pool op, not of linear' check linear 'nnprim_verbose,pool_forward,ref,ref,-,n1c3h5w5 max win2 f32,host_ms=0.1'
expect 0 '^ok   pool n1c3h5w5 max win2x2' '' check --ref-only 'nnprim_verbose,pool_forward,ref,ref,-,n1c3h5w5 max win2 f32,host_ms=0.1'
# a failed call's line runs its case and says whether the failure comes back (exit 1)
expect 1 'reproduced: NN_E_SHAPE: nn_conv_forward: output spatial dim 0 would be < 1' '' check 'nnprim_verbose,conv_forward,ref,-,-,n1c2h3w3k2r5s5 g1 stride1x1 dil1x1 pad0x0 xcorr f32,status=NN_E_SHAPE host_ms=0.01,nn_conv_forward: output spatial dim 0 would be < 1: the padded input (x.dims[2] + pad = 3) is smaller than the dilated filter (5)'
expect 1 'not reproduced' '' check --ref-only 'nnprim_verbose,linear_forward,ref,-,-,m3in5out4 f32,status=NN_E_SHAPE host_ms=0.01,nn_linear_forward: y.dims[1] must be 4, got 5'
# a pasted line the shell split at its blanks is the same line
expect 0 '^ok   pool n1c3h5w5 max win2x2' '' check --ref-only nnprim_verbose,pool_forward,ref,ref,-,n1c3h5w5 max win2 f32,host_ms=0.1
# options may follow the case
expect 0 '^ok   pool n1c3h5w5 max win2x2' '' check pool n1c3h5w5 max win2 --ref-only
expect 2 '' "unknown option '--bogus'" check pool n1c3h5w5 max win2 --bogus
# the reference backend warns before a case of minutes (it then starts: stopped after 2 s)
timeout 2 "$nnprim" check conv --ref-only n64c256h56w56k256r3s3 pad1 >"$out" 2>"$err"
grep -Eq 'warning: n64c256h56w56k256r3s3 .* is about 7.1e\+11 multiply-adds on the reference backend: expect about [0-9]+ minutes' "$err" ||
  fail "check of a large case: no warning on stderr: $(head -3 "$err")"

if [ "$bench" = 1 ]; then
  expect 2 '' 'unknown area' bench nope
  expect 2 '' '^usage: nnprim bench' bench
  for v in abc -1 1e99 0 ' 5' 5x 99999999999; do
    expect 2 '' "bench conv: --reps: expected an integer in \[1, 1000000\], got '$v'" bench conv --reps "$v"
  done
  expect 2 '' "bench conv: --reps needs a value: an integer" bench conv --reps
  expect 2 '' "bench rnn: --warmup: expected an integer" bench rnn --warmup=x
  expect 2 '' "bench conv: --backend: expected one of ref, cudnn, got 'gpu'" bench conv --backend gpu
  expect 2 '' "bench rnn: --math: expected one of strict, tf32, got 'x'" bench rnn --math x
  expect 2 '' "bench pool: --dtype: expected one of f32, f16, bf16, got 'f64'" bench pool --dtype f64
  expect 2 '' "bench linear: --reps: expected an integer in \[1, 1000000\], got '0'" bench linear --reps 0
  expect 2 '' "bench mem: --max-usage: expected a byte count" bench mem --max-usage 5Q
  expect 2 '' "bench mem: --allocs: expected an integer" bench mem --allocs -3
  expect 2 '' "bench pool: --case: nn_pool_output_shape" bench pool --case 'n1c3h5w5 max win9'
  expect 2 '' "bench softmax: --case: xent takes no log" bench softmax --case 'n4c6 xent log f32'
  expect 2 '' "bench layernorm: --case: k3: the normalized rank is at most x's rank, 2" bench layernorm --case 'd4x6 k3 f32'
  # a whole verbose line picks its area
  expect 0 ' n4c6 xent i32 f64$' '' bench 'nnprim_verbose,softmax_cross_entropy_forward,ref,ref,-,n4c6 xent i32 f64,host_ms=0.01'
  expect 0 ' d4x6 k1 gamma f64$' '' bench 'nnprim_verbose,layernorm_forward,ref,ref,-,d4x6 k1 gamma f64,host_ms=0.01'
  expect 0 'n1c2h6w6 max win2x2 stride2x2 pad0x0 f32' '' bench 'nnprim_verbose,pool_forward,ref,ref,-,n1c2h6w6 max win2 stride2 f32,host_ms=0.01'
  # ... split by the shell, with the area's options after it
  expect 0 'median of 2 after 0 warm-up' '' bench nnprim_verbose,conv_forward,ref,ref,-,n1c2h4w4k2r3s3 g1 f64,host_ms=0.01 --backend ref --reps 2 --warmup 0
  expect 2 '' "bench conv: --reps: expected an integer" bench nnprim_verbose,conv_forward,ref,ref,-,n1c2h4w4k2r3s3 f64,host_ms=0.01 --reps x
  # a failed call's line: its status and message, and exit 1 (no time to measure)
  expect 1 'the line.s call \(conv_forward\) failed: NN_E_SHAPE: nn_conv_forward: output spatial' '' bench 'nnprim_verbose,conv_forward,ref,-,-,n1c2h3w3k2r5s5 g1 f32,status=NN_E_SHAPE host_ms=0.01,nn_conv_forward: output spatial dim 0 would be < 1'
  expect 1 'failed: NN_E_INVALID_ARG: nn_pool_forward: x must not be NULL' '' bench pool --case 'nnprim_verbose,pool_forward,ref,-,-,-,status=NN_E_INVALID_ARG host_ms=0.01,nn_pool_forward: x must not be NULL'
  # a case as operands, or --case, not both
  expect 0 ' n1c2h4w4k2r3s3 g1 stride1x1 dil1x1 pad0x0 xcorr f32$' '' bench conv --backend ref --reps 1 --warmup 0 n1c2h4w4k2r3s3
  expect 2 '' 'takes --case TEXT or a case, not both' bench rnn --case 'tanh t2n1i2h2' tanh t2n1i2h2
  expect 2 '' "bench conv: --cpu takes no value|unknown option '--cpu'" bench conv --cpu=1
fi
if [ "$bench" = 1 ]; then
  # progress through a shape file: one line per case on stderr
  shapes=$(mktemp)
  printf 'n1c2h4w4k2r3s3\n# a comment\n\nn1c2h5w5k2r1s1 f64\n' >"$shapes"
  "$nnprim" bench conv --backend ref --reps 1 --warmup 0 --shapes "$shapes" >"$out" 2>"$err"
  rc=$?
  [ $rc = 0 ] || fail "bench conv --shapes: exit $rc: $(head -3 "$err")"
  grep -q '^nnprim bench conv: case 1 of 2: n1c2h4w4k2r3s3 ' "$err" &&
    grep -q '^nnprim bench conv: case 2 of 2: n1c2h5w5k2r1s1 .* f64$' "$err" ||
    fail "bench conv --shapes: no progress lines: $(head -5 "$err")"
  rm -f "$shapes"
fi
if [ "$bench" = 1 ]; then
  # a time is never negative: nnprim's weights pass, backward minus its data pass, is n/a on the
  # reference backend (it computes the weight gradients in both), whatever the two medians are
  "$nnprim" bench rnn --backend ref --reps 3 --warmup 0 >"$out" 2>"$err"
  rc=$?
  [ $rc = 0 ] || fail "bench rnn --backend ref: exit $rc: $(head -3 "$err")"
  awk '/^#/ || $1 == "fwd" { next }
       { rows++; if ($3 != "n/a") bad = "weights " $3 " in: " $0
         for (i = 1; i <= 15; i++) if ($i ~ /^-[0-9]/) bad = "negative " $i " in: " $0 }
       END { if (rows != 4) bad = bad " (" rows + 0 " rows, want 4)"; if (bad) { print bad; exit 1 } }' "$out" ||
    fail "bench rnn --backend ref: $(awk '/^#/ || $1 == "fwd" { next } { print; exit }' "$out")"
fi
[ $bad = 0 ] && echo "cli conventions: all as expected"
exit $bad
