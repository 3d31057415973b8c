/* The layer-norm part of the correctness harness: a case in the text syntax of
 * docs/LAYERNORM.md (the shape field of the family's verbose lines), the standard case list, and
 * the checks (reference gradients against finite differences, guard elements, the GPU backend
 * against the reference). Public API only; shared by tests/layernorm and `nnprim check
 * layernorm`. */
#ifndef NN_HARNESS_LAYERNORM_CASE_H
#define NN_HARNESS_LAYERNORM_CASE_H

#include <stddef.h>
#include <stdio.h>

#include "harness.h"

struct nn_layernorm_case {
    int rank; /* 1..NN_MAX_RANK */
    int64_t dims[NN_MAX_RANK];
    nn_layernorm_params p; /* normalized_rank, eps */
    int gamma, beta;       /* forward is given them */
    nn_dtype dtype;
    unsigned accumulate; /* the backward's NN_ACCUMULATE_* bits ("accdx", "accdw", "accdb") */
    unsigned skip;       /* NN_H_SKIP_* of the gradients forward makes possible but not asked */
    int keep;            /* "keep": the backward is nn_layernorm_backward_ex keeping the pullback */
};

/* Parse the tokens of one case: "d<d0>{x<d>}" (x's dims), then "k<K>" (normalized rank, 1 when
 * none), "gamma", "beta", "eps<v>" (1e-5 when none), "accdx", "accdw", "accdb", a dtype (f32
 * when none), "grads=..." (dw is dgamma, db dbeta) and "keep". Returns 0, or -1 with a message
 * in err naming the token. */
int nn_layernorm_case_parse(int ntok, char **tok, struct nn_layernorm_case *c, char *err,
                            size_t cap);

/* One line of a shape file or a whole verbose line. Returns 1 for a case, 0 for a blank or
 * comment-only line, -1 on a parse error (err says why). */
int nn_layernorm_case_parse_line(const char *line, struct nn_layernorm_case *c, char *err,
                                 size_t cap);

/* The case as text: parses back to the same case; the verbose line's shape field. */
void nn_layernorm_case_format(const struct nn_layernorm_case *c, char *buf, size_t cap);

/* The standard cases: 6 geometries x 6 variants (affine or not, accumulation, some gradients,
 * another eps with a kept pullback) x f32, f16, bf16, f64. */
size_t nn_layernorm_standard_case_count(void);
int nn_layernorm_standard_case(size_t i, struct nn_layernorm_case *c);

/* On a reference context: dx, dgamma and dbeta against central finite differences of
 * sum(y * dy) in f64, and a guarded run in the case's dtype. Returns the number of failures;
 * each prints one line ending in its reproducer to out. */
int nn_layernorm_check_reference(nn_ctx *ref, const struct nn_layernorm_case *c, FILE *out);

/* The same inputs through dev and ref, outputs compared within nn_h_tolerance(); guards
 * checked. Returns the number of failures. */
int nn_layernorm_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_layernorm_case *c,
                               FILE *out);

#endif
