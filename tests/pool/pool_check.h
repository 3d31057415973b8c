/* Test helpers for pooling, written so they can move to the shared harness (tests/harness/):
 * contexts, host tensors, fills without ties, comparisons with a report of the worst element. */
#ifndef NN_TESTS_POOL_CHECK_H
#define NN_TESTS_POOL_CHECK_H

#include <stdint.h>

#include "nnprim/nnprim.h"

/* A context with the given backend (settings from the defaults, environment ignored for it). */
nn_ctx *pc_ctx(nn_backend backend);

/* A new contiguous tensor in ctx's memory; aborts the test on failure. */
nn_tensor pc_empty(nn_ctx *ctx, nn_dtype dtype, int rank, const int64_t *dims);

/* Fill a host tensor with a random permutation of 0..n-1 (then v * scale + offset): all values
 * differ, so max pooling has no ties; small integers stay exact in f16 (n <= 2048) and bf16
 * (n <= 256). */
void pc_fill_distinct(nn_tensor *t, uint64_t seed, double scale, double offset);

/* Element at row-major index i of a host tensor, as double. */
double pc_get(const nn_tensor *t, int64_t i);
void pc_set(nn_tensor *t, int64_t i, double v);

/* Largest |a - b| / (atol + rtol * |b|) over all elements of two host tensors of equal dims;
 * <= 1 means within tolerance. *worst receives the row-major index of the worst element. */
double pc_compare(const nn_tensor *a, const nn_tensor *b, double atol, double rtol, int64_t *worst);

/* Make a pooling params struct: the same window / stride / pad on each of rank dims. */
nn_pool_params pc_params(int rank, nn_pool_mode mode, int64_t window, int64_t stride,
                         int64_t pad_lo, int64_t pad_hi);

/* "mode=max rank=2 window=3 ..." for failure messages. */
const char *pc_describe(const nn_pool_params *p, const nn_tensor *x);

#endif
