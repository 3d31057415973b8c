/* The recurrent part of the correctness harness: a case in the text syntax of docs/RNN.md (the
 * verbose line's), the standard case list, and the checks (reference gradients against central
 * finite differences, guard elements). Public API only; shared by tests/rnn and
 * `nnprim check rnn`. */
#ifndef NN_HARNESS_RNN_CASE_H
#define NN_HARNESS_RNN_CASE_H

#include <stddef.h>
#include <stdio.h>

#include "harness.h"

#define NN_RNN_CASE_MAX_N 1024

struct nn_rnn_case {
    nn_rnn_params p;
    int64_t t, n;
    int has_lengths; /* lengths[0 .. n-1] are used; else every sequence has length t */
    int32_t lengths[NN_RNN_CASE_MAX_N];
    nn_dtype dtype;
    nn_math_mode math;
    unsigned skip; /* "grads=": the NN_RNN_CASE_SKIP_* gradients the backward does not ask for */
    unsigned accumulate; /* "acc": NN_ACCUMULATE_DW, the backward adds to dw (nn_rnn_backward_ex) */
};

/* Bits of nn_rnn_case.skip; "grads=dx+dw" names the ones asked for ("grads=none": none), of dx,
 * dhx, dcx (LSTM only) and dw; without the token, all of them. */
enum {
    NN_RNN_CASE_SKIP_DX = 1,
    NN_RNN_CASE_SKIP_DHX = 2,
    NN_RNN_CASE_SKIP_DCX = 4,
    NN_RNN_CASE_SKIP_DW = 8
};

/* Parse the tokens of one case ("lstm", "t5n3i4h6", "l2", "bidir", ...). Returns 0, or -1 with a
 * message in err naming the token. Omitted tokens take nn_rnn_params_default()'s values, f32 and
 * strict math; the cell and the t/n/i/h token are required. */
int nn_rnn_case_parse(int ntok, char **tok, struct nn_rnn_case *c, char *err, size_t cap);

/* One line: blank-separated tokens, '#' starts a comment; a whole verbose line
 * ("nnprim_verbose,rnn_forward,ref,ref,-,<case>,0.0123") is taken by its case field. Returns 1 for
 * a case, 0 for a blank or comment-only line, -1 on a parse error (err says why). */
int nn_rnn_case_parse_line(const char *line, struct nn_rnn_case *c, char *err, size_t cap);

/* The case as text; parses back to the same case, and is the verbose line's case field. */
void nn_rnn_case_format(const struct nn_rnn_case *c, char *buf, size_t cap);

/* The standard cases: every cell, 1-2 layers, both directions, equal and varied lengths (with 0),
 * a projection, a clip, each bias mode, skip input, both layouts, in f64 and f32.
 * nn_rnn_standard_case() fills case i < count; returns 0. */
size_t nn_rnn_standard_case_count(void);
int nn_rnn_standard_case(size_t i, struct nn_rnn_case *c);

/* On a reference context, in f64 whatever the case's dtype: the gradients of
 * loss = sum(y * ry) + sum(hy * rh) + sum(cy * rc) (random r's) from nn_rnn_backward against
 * central finite differences of every element of x, hx, cx and w. Cases over 2e4 weights or 2e6
 * multiply-adds per forward are skipped with a note line. Returns the number of failures; each
 * prints one line with its reproducer to out. */
int nn_rnn_check_gradients(nn_ctx *ref, const struct nn_rnn_case *c, FILE *out);

/* check_gradients, then a run in the case's dtype with guarded outputs (y, hy, cy, dx, dhx, dcx,
 * dw): guards intact, every element written, padded positions of y and dx zero. */
int nn_rnn_check_reference(nn_ctx *ref, const struct nn_rnn_case *c, FILE *out);

/* The same inputs through dev (a cuDNN context, weights copied in through the views) and ref;
 * y, hy, cy, dx, dhx, dcx and every view of dw compared with nn_h_tolerance() (1e-8 at least
 * for a clipped LSTM), guards checked and every element written. Runs with dropout between layers
 * only check guards and writes (the masks come from different generators). Returns the number of
 * failures, each with its reproducer. */
int nn_rnn_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_rnn_case *c, FILE *out);

/* The GPU case matrix (cells x layers x directions x lengths with 0 x dtypes, then projection,
 * clip, bias modes, skip input, batch-major, dropout, TF32). nn_rnn_gpu_case() fills case
 * i < count; returns 0. */
size_t nn_rnn_gpu_case_count(void);
int nn_rnn_gpu_case(size_t i, struct nn_rnn_case *c);

#endif
