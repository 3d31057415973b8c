#!/bin/sh
# bench/summarize_rnn.py: the median across runs of `nnprim bench rnn`'s ratio columns, read from
# two made-up GPU tables (a shape in one run only, "-" cells, a log line between tables), and
# its refusal of bad arguments.
# usage: summarize_rnn.sh PYTHON SCRIPT
py=$1
script=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
head='       fwd   x_fwd x_dat x_host c_fwd x_first x_wraw mode       shape'
{
  echo '# nnprim bench rnn: backend cudnn'
  echo "$head"
  echo '    10.0    1.04  1.00   0.50  1.00   3.00   0.90 eager      gru t5n2i4h4 l1 uni'
  echo '    10.0    0.98  1.10      -  0.99   3.00   0.90 replay     lstm t2n1i8h8 l1 uni'
} >"$dir/a.txt"
{
  echo "$head"
  echo 'nnprim: nn_rnn: auto: the training calls of this call'"'"'s shape run eagerly'
  echo '    10.0    1.00  1.02   0.70  1.01   9.00   0.92 eager      gru t5n2i4h4 l1 uni'
} >"$dir/b.txt"
out=$("$py" "$script" "$dir/a.txt" "$dir/b.txt" --over 1.02) || { echo "FAIL: exit $?"; exit 1; }
bad=0
check() {
  printf '%s\n' "$out" | grep -qF -- "$1" || { echo "FAIL: no '$1' in:"; printf '%s\n' "$out"; bad=1; }
}
check '| shape | mode | x_fwd | x_dat | x_host | c_fwd | x_wraw |'
check '| gru t5n2i4h4 l1 uni | eager | 1.02 (1.00-1.04) | 1.01 (1.00-1.02) | 0.60 (0.50-0.70) | 1.00 (1.00-1.01) | 0.91 (0.90-0.92) |'
check '| lstm t2n1i8h8 l1 uni | replay | 0.98 | 1.10 | - | 0.99 | 0.90 |'
check 'Medians above 1.02: 1'
check '- lstm t2n1i8h8 l1 uni: x_dat 1.10'
printf '%s\n' "$out" | grep -q 'x_first' && { echo "FAIL: x_first is not against raw"; bad=1; }
"$py" "$script" --help >/dev/null || { echo "FAIL: --help exits $?"; bad=1; }
"$py" "$script" "$dir/a.txt" --over many 2>/dev/null && { echo "FAIL: --over many accepted"; bad=1; }
"$py" "$script" 2>/dev/null && { echo "FAIL: no runs accepted"; bad=1; }
[ $bad = 0 ] && echo "summarize_rnn: as expected"
exit $bad
