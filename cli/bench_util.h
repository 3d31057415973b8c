/* What the benchmarks share: a host clock and the median. */
#ifndef NN_CLI_BENCH_UTIL_H
#define NN_CLI_BENCH_UTIL_H

/* Monotonic host time in microseconds. */
double nn_cli_now_us(void);

/* The median of v[0..n) (n >= 1; the mean of the middle two for even n). Sorts v. */
double nn_cli_median(double *v, int n);

#endif
