/* The softmax part of the correctness harness: a case in the text syntax of docs/SOFTMAX.md (the
 * shape field of the family's verbose lines), the standard case list, and the checks (reference
 * gradients against finite differences, guard elements, the cuDNN backend against the
 * reference). Public API only; shared by tests/softmax and `nnprim check softmax`. */
#ifndef NN_HARNESS_SOFTMAX_CASE_H
#define NN_HARNESS_SOFTMAX_CASE_H

#include <stddef.h>
#include <stdio.h>

#include "harness.h"

struct nn_softmax_case {
    int rank; /* 2..NN_MAX_RANK */
    int64_t dims[NN_MAX_RANK];
    int xent;            /* the cross-entropy instead of softmax */
    nn_index_type index; /* its targets' type */
    nn_softmax_params p; /* mode (softmax only) */
    nn_dtype dtype;
    unsigned accumulate; /* the backward's: 0, or NN_ACCUMULATE_DX ("accdx": dx += the gradient) */
    int keep;            /* "keep": the backward is the *_backward_ex call keeping the pullback */
};

/* Parse the tokens of one case: "n4c10" or "n2c5s3x4" (trailing dims after s, joined by x),
 * then "softmax", "log" or "xent", "i32" / "i64" (xent; i64 when none), "accdx" (dx accumulated)
 * and a dtype (f32 when none). Returns 0, or -1 with a message in err naming the token. */
int nn_softmax_case_parse(int ntok, char **tok, struct nn_softmax_case *c, char *err, size_t cap);

/* One line of a shape file or a whole verbose line. Returns 1 for a case, 0 for a blank or
 * comment-only line, -1 on a parse error (err says why). */
int nn_softmax_case_parse_line(const char *line, struct nn_softmax_case *c, char *err, size_t cap);

/* The case as text: parses back to the same case; the verbose line's shape field. */
void nn_softmax_case_format(const struct nn_softmax_case *c, char *buf, size_t cap);

/* The standard cases: 5 geometries (one class, trailing dims, a wide row) x softmax, log,
 * accumulation and the cross-entropy with int32 and int64 targets x f32, f16, bf16, f64. */
size_t nn_softmax_standard_case_count(void);
int nn_softmax_standard_case(size_t i, struct nn_softmax_case *c);

/* On a reference context: dx against central finite differences of sum(y * dy) (or
 * sum(loss * dloss)) in f64, and a guarded run in the case's dtype. Returns the number of
 * failures; each prints one line ending in its reproducer to out. */
int nn_softmax_check_reference(nn_ctx *ref, const struct nn_softmax_case *c, FILE *out);

/* The same inputs through dev and ref (the cross-entropy's targets in device memory on dev),
 * outputs compared within nn_h_tolerance(); guards checked. Returns the number of failures. */
int nn_softmax_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_softmax_case *c, FILE *out);

#endif
