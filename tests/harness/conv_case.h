/* The convolution part of the correctness harness: a case in the text syntax of docs/CONV.md,
 * the standard case list, and the checks (reference against finite differences, guard bytes,
 * a backend against the reference). Public API only; shared by tests/conv and `nnprim check`. */
#ifndef NN_HARNESS_CONV_CASE_H
#define NN_HARNESS_CONV_CASE_H

#include <stddef.h>
#include <stdio.h>

#include "harness.h"

struct nn_conv_case {
    nn_conv_params p;
    int64_t x_dims[NN_CONV_MAX_SPATIAL + 2];
    int64_t w_dims[NN_CONV_MAX_SPATIAL + 2];
    int bias;
    nn_dtype dtype;
    nn_math_mode math;
    unsigned nhwc;       /* channels-last tensors: NN_CONV_CASE_X ... bits; 0 = all NCHW */
    unsigned accumulate; /* the backward's NN_ACCUMULATE_* bits ("accdx", "accdw", "accdb") */
    int keep;            /* "keep": the backward is nn_conv_backward_ex keeping the pullback */
    unsigned skip;       /* "grads=": the NN_H_SKIP_* gradients the backward does not ask for */
};

/* Bits of nn_conv_case.nhwc, in the order the text lists them ("nhwc=x+w+y+dx+dw+dy"). */
enum {
    NN_CONV_CASE_X = 1 << 0,
    NN_CONV_CASE_W = 1 << 1,
    NN_CONV_CASE_Y = 1 << 2,
    NN_CONV_CASE_DX = 1 << 3,
    NN_CONV_CASE_DW = 1 << 4,
    NN_CONV_CASE_DY = 1 << 5,
    NN_CONV_CASE_ALL = (1 << 6) - 1
};

/* Parse the tokens of one case ("n2c4h9w9k6r3s3", "g2", "stride2x1", ...). Returns 0, or -1
 * with a message in err naming the token. Omitted tokens take the defaults: g1, stride1, dil1,
 * pad0, xcorr, no relu, no bias, f32, strict math, no accumulation, NCHW ("nhwc" makes every
 * tensor channels-last, "nhwc=x+dy" the ones named). */
int nn_conv_case_parse(int ntok, char **tok, struct nn_conv_case *c, char *err, size_t cap);

/* One line of a shape file: tokens separated by blanks, '#' starts a comment; or a whole verbose
 * line ("nnprim_verbose,conv_forward,...": its shape field is taken). Returns 1 for a case, 0 for
 * a blank or comment-only line, -1 on a parse error (err says why). */
int nn_conv_case_parse_line(const char *line, struct nn_conv_case *c, char *err, size_t cap);

/* The case as text; parses back to the same case. Without accumulation flags it is the same
 * text as nnprim's verbose line for the forward call. */
void nn_conv_case_format(const struct nn_conv_case *c, char *buf, size_t cap);

/* The standard cases: 14 geometries (rank 1/2/3, stride, dilation, groups and depthwise,
 * asymmetric padding, both modes, batch 1, odd sizes, bias or not, relu, accumulation), each in
 * f32, f32 tf32, f16, bf16 and f64. nn_conv_standard_case() fills case i < count; returns 0. */
size_t nn_conv_standard_case_count(void);
int nn_conv_standard_case(size_t i, struct nn_conv_case *c);

/* On a reference context: (1) the gradients of loss = sum(y * r) from nn_conv_backward against
 * central finite differences, in f64 whatever the case's dtype (skipped, with a note line, for
 * cases over 2e7 multiply-adds per forward call); (2) a run in the case's dtype
 * with guarded outputs: guards intact, every output element written. Returns the number of
 * failures; each prints one line with its reproducer to out. */
int nn_conv_check_reference(nn_ctx *ref, const struct nn_conv_case *c, FILE *out);

/* The same inputs through dev (a cuDNN context) and ref; y, dx, dw, db compared (exactly when
 * the case is small enough for small-integer inputs, else with nn_h_tolerance()), guards
 * checked on both. Returns the number of failures (a backend error counts as one, printed;
 * NN_E_UNSUPPORTED for an f64 case only gives a note line, as conv.h allows it). */
int nn_conv_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_conv_case *c, FILE *out);

#endif
