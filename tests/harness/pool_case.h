/* The pooling part of the correctness harness: a case in the text syntax of docs/POOL.md (the
 * same syntax as pooling's verbose line), the standard case list, and the checks (reference
 * gradients against finite differences, guard bytes, a backend against the reference). Public
 * API only; shared by tests/pool and `nnprim check pool`. */
#ifndef NN_HARNESS_POOL_CASE_H
#define NN_HARNESS_POOL_CASE_H

#include <stddef.h>
#include <stdio.h>

#include "harness.h"

struct nn_pool_case {
    nn_pool_params p;
    int64_t x_dims[NN_POOL_MAX_SPATIAL + 2];
    nn_dtype dtype;
    unsigned accumulate; /* the backward's: 0, or NN_ACCUMULATE_DX ("accdx": dx += the gradient) */
    int keep;            /* "keep": nn_pool_backward_ex keeps the pullback */
};

/* Parse the tokens of one case: "n2c3h8w8" (letters n c [d [h]] w), then "max" /
 * "mean_include_pad" / "mean_exclude_pad", "win3" or "win3x2", "stride2", "pad1" or "padlo1x0"
 * "padhi0x1", a dtype, and "accdx" (the backward accumulates into dx). Omitted tokens take the
 * defaults: max, window 1, stride 1, pad 0, f32, dx overwritten. Returns 0, or -1 with a message
 * in err naming the token. */
int nn_pool_case_parse(int ntok, char **tok, struct nn_pool_case *c, char *err, size_t cap);

/* One line of a shape file, or a whole verbose line ("nnprim_verbose,pool_forward,...": its
 * shape field is taken). Returns 1 for a case, 0 for a blank or comment-only line, -1 on a parse
 * error (err says why). */
int nn_pool_case_parse_line(const char *line, struct nn_pool_case *c, char *err, size_t cap);

/* The case as text; parses back to the same case, and is the shape field of pooling's verbose
 * line. */
void nn_pool_case_format(const struct nn_pool_case *c, char *buf, size_t cap);

/* The standard cases: every mode over 1-D, 2-D and 3-D geometries (overlapping and strided
 * windows, asymmetric padding, windows that reach only padding at an edge, an accumulated dx),
 * each in f32, f16, bf16 and f64. nn_pool_standard_case() fills case i < count; returns 0. */
size_t nn_pool_standard_case_count(void);
int nn_pool_standard_case(size_t i, struct nn_pool_case *c);

/* Every run makes y with nn_pool_forward (and a pullback), dx with nn_pool_backward (or, for
 * "accdx", nn_pool_backward_ex accumulating onto a dx of small integers) and, from the same
 * start, a second dx with nn_pool_backward_stateless, which must equal the first.
 * On a reference context: (1) dx against central finite differences of loss = sum(y * dy) (plus
 * the start), in f64 (max pooling on inputs without ties, so the derivative exists); (2) a run in
 * the case's dtype with guarded outputs: guards intact, every element of y and both dx written,
 * the two dx bitwise equal. Returns the number of failures; each prints one line with its
 * reproducer to out. */
int nn_pool_check_reference(nn_ctx *ref, const struct nn_pool_case *c, FILE *out);

/* The same inputs through dev (a cuDNN context) and ref: y and dx (both of dev's: the pullback's
 * and the stateless one) compared with ref's (exactly for max pooling, whose inputs have no ties
 * where the dtype has enough small integers, else with the dtype's tolerance), guards checked on
 * both. An f64 case only gives a note line on a cuDNN
 * context (pool.h: the cuDNN backend takes f32, f16, bf16). Returns the number of failures. */
int nn_pool_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_pool_case *c, FILE *out);

#endif
