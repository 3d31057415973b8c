/* The linear part of the correctness harness: a case in the text syntax of docs/LINEAR.md (the
 * shape field of the linear layer's verbose line), the standard case list, and the checks
 * (reference gradients against finite differences, guard elements, a GPU backend against the
 * reference). Public API only; shared by tests/linear and `nnprim check linear`. */
#ifndef NN_HARNESS_LINEAR_CASE_H
#define NN_HARNESS_LINEAR_CASE_H

#include <stddef.h>
#include <stdio.h>

#include "harness.h"

struct nn_linear_case {
    int x_rank;                /* 1..NN_MAX_RANK */
    int64_t lead[NN_MAX_RANK]; /* x's x_rank - 1 leading dims */
    int64_t in, out;
    int bias;
    nn_linear_params p; /* activation */
    nn_dtype dtype;
    nn_math_mode math;
    unsigned accumulate; /* the backward's NN_ACCUMULATE_* bits ("accdx", "accdw", "accdb") */
    int keep;            /* "keep": the backward is nn_linear_backward_ex keeping the pullback */
    unsigned skip;       /* "grads=": the NN_H_SKIP_* gradients the backward does not ask for */
};

/* Parse the tokens of one case: "m64in512out10" (or "m4x5in8out3" for x [4, 5, 8], or
 * "in8out3" for a rank-1 x), then any of "relu", "bias", "accdx", "accdw", "accdb", a dtype
 * (f32 when none) and "tf32". Returns 0, or -1 with a message in err naming the token. */
int nn_linear_case_parse(int ntok, char **tok, struct nn_linear_case *c, char *err, size_t cap);

/* One line of a shape file, or a whole verbose line ("nnprim_verbose,linear_forward,...": its
 * shape field is taken). Returns 1 for a case, 0 for a blank or comment-only line, -1 on a parse
 * error (err says why). */
int nn_linear_case_parse_line(const char *line, struct nn_linear_case *c, char *err, size_t cap);

/* The case as text: parses back to the same case; the shape field of the verbose line. */
void nn_linear_case_format(const struct nn_linear_case *c, char *buf, size_t cap);

/* The standard cases: rank 1, 2 and 3 inputs of small and odd sizes, with and without bias and
 * relu, with accumulation, in f32, f32 with TF32, f16, bf16 and f64. */
size_t nn_linear_standard_case_count(void);
int nn_linear_standard_case(size_t i, struct nn_linear_case *c);

/* On a reference context: (1) dx, dw, db from nn_linear_backward against central finite
 * differences of loss = sum(y * dy) in f64 (inputs uniform in [-1, 1], so relu's kink is not
 * met); (2) a run in the case's dtype with guarded outputs: guards intact, every element written.
 * Returns the number of failures; each prints one line ending in its reproducer to out. */
int nn_linear_check_reference(nn_ctx *ref, const struct nn_linear_case *c, FILE *out);

/* The same small-integer inputs (and, with accumulation, the same starting outputs) through dev
 * and ref: y, dx, dw and db compared, exactly where the dtype holds the sums exactly, else
 * within nn_h_tolerance(); guards checked. Returns the number of failures. */
int nn_linear_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_linear_case *c, FILE *out);

#endif
