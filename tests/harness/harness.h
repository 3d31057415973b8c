/* The shared correctness harness, generic part: guarded output tensors, element access on host
 * views, comparison with stated tolerances. Uses only nnprim's public API, so the same sources
 * build into the Criterion suites and into the `nnprim check` command. Op families (conv, pool,
 * rnn) add their cases on top (conv_case.h). */
#ifndef NN_HARNESS_HARNESS_H
#define NN_HARNESS_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nnprim/nnprim.h"

/* Element i (row-major, packed) of a host tensor as double; f16 and bf16 are decoded from their
 * bit patterns here because the public API has no element access. */
double nn_h_get(const nn_tensor *t, int64_t i);

/* An output tensor with guard elements on both sides, to catch writes out of bounds. `whole`
 * is the allocation (1-D, numel + 2 * NN_H_GUARD elements), `view` the tensor handed to the op
 * (packed, the requested dims). The guards hold a random bit pattern remembered on the host; the
 * view starts as NaN, so an element the op never writes shows up too. */
#define NN_H_GUARD 64
struct nn_h_guarded {
    nn_tensor whole, view;
    nn_tensor pattern; /* host copy of whole as it was filled */
};

/* ctx: where the tensor lives (any backend); host: a reference context for host staging. */
nn_status nn_h_guarded_alloc(nn_ctx *ctx, nn_ctx *host, nn_dtype dtype, int rank,
                             const int64_t *dims, uint64_t seed, struct nn_h_guarded *g);
/* 0 if both guards are bit-identical to the pattern; otherwise 1 and a line to out. */
int nn_h_guarded_check(nn_ctx *ctx, nn_ctx *host, const struct nn_h_guarded *g, const char *name,
                       FILE *out, const char *repro);
void nn_h_guarded_free(nn_ctx *ctx, nn_ctx *host, struct nn_h_guarded *g);

/* A host copy (allocated in host, packed) of any tensor; free with nn_tensor_free(host, ...). */
nn_status nn_h_to_host(nn_ctx *ctx, nn_ctx *host, const nn_tensor *t, nn_tensor *out);

/* The tolerance scale a for a dtype and math mode: a result passes when
 * |got - want| <= a * (|want| + sqrt(terms)), terms being the number of products summed into
 * the element. Values: f64 1e-12, f32 strict 1e-5, f32 TF32 2e-3, f16 2e-3, bf16 1.6e-2.
 * With small-integer inputs (see nn_h_exact()) the comparison is exact (a = 0). */
double nn_h_tolerance(nn_dtype dtype, nn_math_mode math);

/* Whether sums of up to `terms` products of integers in [-2, 2] (plus an integer in [-2, 2]
 * accumulated) are exact in dtype: 4 * terms + 2 must be representable, so <= 2^24 for f32,
 * 2^11 for f16, 2^8 for bf16, 2^53 for f64. */
int nn_h_exact(nn_dtype dtype, int64_t terms);

/* Compare two host tensors of equal dims elementwise with scale a (0 = exact). Returns 0 on
 * pass; otherwise 1 and one line to out: the first mismatch, the count, and the reproducer. */
int nn_h_compare(const char *name, const nn_tensor *got, const nn_tensor *want, double a,
                 int64_t terms, FILE *out, const char *repro);

/* The case text of one input line: a whole verbose line ("nnprim_verbose,op,backend,impl,cache,
 * shape,ms", as nnprim prints it) gives its shape field, any other line is copied as it is.
 * Returns 1 (a verbose line), 0 (another line) or -1 (a verbose line without a shape field);
 * buf is always NUL-terminated. */
int nn_h_verbose_shape(const char *line, char *buf, size_t cap);

/* 0 if no element of a host tensor is NaN; otherwise 1 and a line (an element never written). */
int nn_h_check_written(const char *name, const nn_tensor *t, FILE *out, const char *repro);

#endif
